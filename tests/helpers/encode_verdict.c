/* SPDX-License-Identifier: Apache-2.0 */
/* A verdict through the agent's own encoders, for a decoder nobody here
 * wrote to read back (tests/e2e/encode_oracle.sh: protoc --decode, Python's
 * json):
 *   encode_verdict pb|json true|false ERROR [NAME STATUS]...
 * ERROR "" is none. Arguments are bytes as given (not UTF-8 checked: the
 * encoders repair what is not). Writes the encoding to stdout. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rpc/encode.h"

int main(int argc, char **argv)
{
	if (argc < 4 || (argc - 4) % 2 || (strcmp(argv[1], "pb") && strcmp(argv[1], "json"))) {
		fprintf(stderr, "usage: encode_verdict pb|json true|false ERROR [NAME STATUS]...\n");
		return 2;
	}
	struct verdict v;
	verdict_init(&v);
	v.healthy = !strcmp(argv[2], "true");
	for (int i = 4; i + 1 < argc; i += 2)
		if (verdict_add(&v, argv[i], "%s", argv[i + 1]) < 0)
			return 1;
	if (argv[3][0] && !(v.error = strdup(argv[3])))
		return 1;
	int r;
	if (!strcmp(argv[1], "pb")) {
		uint8_t *out = NULL;
		size_t len = 0;
		r = encode_health_pb(&v, &out, &len);
		if (r == 0 && fwrite(out, 1, len, stdout) != len)
			r = -1;
		free(out);
	} else {
		struct json_buf b = { 0 };
		r = encode_health_json(&v, &b);
		if (r == 0 && fwrite(b.p, 1, b.len, stdout) != b.len)
			r = -1;
		json_buf_free(&b);
	}
	verdict_free(&v);
	return r == 0 ? 0 : 1;
}
