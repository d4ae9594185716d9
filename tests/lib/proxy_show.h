/* SPDX-License-Identifier: Apache-2.0 */
/* A PROXY header reader's verdict (rpc/proxy.h) as one line, for the unit
 * test and the end-to-end tests' helper alike: "none", "more", "bad: WHY",
 * or "ok LEN KIND SRC DST" (KIND address, local or unknown; SRC and DST
 * ip:port, [ipv6]:port, or - without an address). */
#ifndef HEALTHD_PROXY_SHOW_H
#define HEALTHD_PROXY_SHOW_H

#include <arpa/inet.h>
#include <stdio.h>

#include "rpc/proxy.h"

static inline void proxy_show_addr(const struct proxy_addr *a, char *buf, size_t n)
{
	char ip[INET6_ADDRSTRLEN];
	if (a->family == AF_INET)
		snprintf(buf, n, "%s:%u", inet_ntop(AF_INET, a->ip, ip, sizeof(ip)), a->port);
	else if (a->family == AF_INET6)
		snprintf(buf, n, "[%s]:%u", inet_ntop(AF_INET6, a->ip, ip, sizeof(ip)), a->port);
	else
		snprintf(buf, n, "-");
}

static inline void proxy_show(enum proxy_result r, const struct proxy_header *h, char *buf, size_t n)
{
	static const char *kinds[] = { [PROXY_ADDRESS] = "address", [PROXY_LOCAL] = "local",
				       [PROXY_UNKNOWN] = "unknown" };
	char s[80], d[80];
	if (r == PROXY_NONE) {
		snprintf(buf, n, "none");
	} else if (r == PROXY_MORE) {
		snprintf(buf, n, "more");
	} else if (r == PROXY_BAD) {
		snprintf(buf, n, "bad: %s", proxy_why_name(h->why));
	} else {
		proxy_show_addr(&h->src, s, sizeof(s));
		proxy_show_addr(&h->dst, d, sizeof(d));
		snprintf(buf, n, "ok %zu %s %s %s", h->len, kinds[h->kind], s, d);
	}
}

#endif
