/* SPDX-License-Identifier: Apache-2.0 */
/* The pRPC request path of an anonymous caller, as the server hands it to
 * rpc/prpc.c: method, path, the `json` query argument, Content-Type and
 * Content-Length, then the body (JSON or protobuf). Layout: a flags byte
 * (which of the optional fields are present), then the fields separated by
 * NUL bytes, the body last. */
#include <stdio.h>

#include "fuzz/fuzz.h"
#include "rpc/prpc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	unsigned flags = data[0];
	const uint8_t *p = data + 1, *end = data + size;
	char method[32], path[1024], json[64], ct[256], cl[32];
	fuzz_field(&p, end, method, sizeof(method));
	fuzz_field(&p, end, path, sizeof(path));
	fuzz_field(&p, end, json, sizeof(json));
	fuzz_field(&p, end, ct, sizeof(ct));
	fuzz_field(&p, end, cl, sizeof(cl));
	struct prpc_request rq = {
		.method = method,
		.path = path,
		.json_arg = flags & 1 ? json : NULL,
		.content_type = flags & 2 ? ct : NULL,
		.content_length = flags & 4 ? cl : NULL,
	};
	struct prpc_route rt;
	prpc_route_head(&rq, &rt);
	if (rt.outcome == PRPC_PENDING) {
		size_t len = p < end ? (size_t)(end - p) : 0;
		prpc_route_body(&rt, len ? p : NULL, len);
		if (rt.outcome == PRPC_PENDING)
			__builtin_trap(); /* the body always decides */
	}
	/* Error texts never echo request bytes at length, and are C strings
	 * free of control bytes. */
	size_t n = strnlen(rt.error, sizeof(rt.error));
	if (n == sizeof(rt.error) || n > 200)
		__builtin_trap();
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)rt.error[i] < 0x20)
			__builtin_trap();
	return 0;
}
