/* SPDX-License-Identifier: Apache-2.0 */
/* Reads each FILE's bytes with the agent's PROXY header reader (rpc/proxy.c)
 * and prints one line each, for the end-to-end tests that capture the
 * headers a real proxy writes:
 *   proxy_decode FILE...
 *   -> "ok LEN KIND SRC DST" (KIND address, local or unknown; SRC and DST
 *      ip:port, [ipv6]:port or -), "none", "more" or "bad: WHY". */
#include <arpa/inet.h>
#include <stdio.h>

#include "rpc/proxy.h"

static void addr(const struct proxy_addr *a, char *buf, size_t n)
{
	char ip[INET6_ADDRSTRLEN];
	if (a->family == AF_INET)
		snprintf(buf, n, "%s:%u", inet_ntop(AF_INET, a->ip, ip, sizeof(ip)), a->port);
	else if (a->family == AF_INET6)
		snprintf(buf, n, "[%s]:%u", inet_ntop(AF_INET6, a->ip, ip, sizeof(ip)), a->port);
	else
		snprintf(buf, n, "-");
}

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
		char s[80], d[80];
		switch (proxy_parse(buf, n, &h)) {
		case PROXY_NONE: printf("none\n"); break;
		case PROXY_MORE: printf("more\n"); break;
		case PROXY_BAD: printf("bad: %s\n", proxy_why_name(h.why)); break;
		case PROXY_OK:
			addr(&h.src, s, sizeof(s));
			addr(&h.dst, d, sizeof(d));
			printf("ok %zu %s %s %s\n", h.len,
			       h.kind == PROXY_ADDRESS ? "address" : h.kind == PROXY_LOCAL ? "local" : "unknown",
			       s, d);
			break;
		}
	}
	return rc;
}
