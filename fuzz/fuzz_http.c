/* SPDX-License-Identifier: Apache-2.0 */
/* The Docker client's HTTP/1.1 response reader: status line, headers,
 * Content-Length, chunked framing and trailers, fed in pieces the way a
 * socket delivers them. Byte 0 picks the body cap (small, so that the limits
 * are reached), byte 1 the size of each read (0: all at once). */
#include <stdlib.h>

#include "base/http_parse.h"
#include "fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	size_t max_body = (size_t)data[0] * 8;
	size_t step = data[1];
	const char *in = (const char *)data + 2;
	size_t len = size - 2, off = 0;
	struct http_parser p;
	struct errbuf err = { "" };
	int r = 0;
	http_parser_init(&p, max_body);
	while (r == 0 && off < len) {
		size_t n = step && len - off > step ? step : len - off, used = 0;
		r = http_parser_feed(&p, in + off, n, &used, &err);
		if (used > n || (r == 0 && used != n))
			__builtin_trap(); /* a parser that wants more takes it all */
		off += used;
	}
	if (r == 0)
		r = http_parser_eof(&p, &err);
	if (r == 1) {
		struct http_response resp;
		http_parser_take(&p, &resp);
		if (resp.body_len > max_body || (resp.body && resp.body[resp.body_len]))
			__builtin_trap();
		http_header(&resp, "Api-Version");
		http_header(&resp, "Content-Type");
		http_response_free(&resp);
	}
	http_parser_free(&p);
	return 0;
}
