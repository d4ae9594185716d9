/* SPDX-License-Identifier: Apache-2.0 */
/* Reads each FILE's bytes with the agent's PROXY header reader (rpc/proxy.c)
 * and prints one line each, for the end-to-end tests that capture the
 * headers a real proxy writes:
 *   proxy_decode FILE...
 *   -> "ok LEN KIND SRC DST" (KIND address, local or unknown; SRC and DST
 *      ip:port, [ipv6]:port or -), "none", "more" or "bad: WHY". */
#include <stdio.h>

#include "rpc/proxy.h"
#include "tests/lib/proxy_show.h"

int main(int argc, char **argv)
{
	static unsigned char buf[65536];
	int rc = 0;
	for (int i = 1; i < argc; i++) {
		FILE *f = fopen(argv[i], "rb");
		if (!f) {
			perror(argv[i]);
			rc = 1;
			continue;
		}
		size_t n = fread(buf, 1, sizeof(buf), f);
		fclose(f);
		struct proxy_header h;
		char line[256];
		proxy_show(proxy_parse(buf, n, &h), &h, line, sizeof(line));
		printf("%s\n", line);
	}
	return rc;
}
