/* SPDX-License-Identifier: Apache-2.0 */
#include "rpc/addr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int parse_port(const char *what, const char *spec, const char *s, uint16_t *port,
		      struct errbuf *err)
{
	if (!*s || strlen(s) > 5 || strspn(s, "0123456789") != strlen(s))
		return errbuf_set(err, EINVAL, "%s '%s': port '%s' is not a number",
				  what, spec, s);
	unsigned long p = strtoul(s, NULL, 10);
	if (p > 65535)
		return errbuf_set(err, ERANGE, "%s '%s': port %lu is out of range 0-65535",
				  what, spec, p);
	*port = (uint16_t)p;
	return 0;
}

/* "HOST:PORT" or "[HOST6]:PORT" into a. */
static int parse_inet(const char *what, const char *spec, union rpc_addr *a, socklen_t *alen,
		      struct errbuf *err)
{
	char host[INET6_ADDRSTRLEN + 1];
	const char *port;
	bool v6 = spec[0] == '[';
	if (v6) {
		const char *end = strchr(spec, ']');
		if (!end || end[1] != ':')
			return errbuf_set(err, EINVAL,
					  "%s '%s': expected [IPv6]:PORT", what, spec);
		if ((size_t)(end - spec - 1) >= sizeof(host))
			return errbuf_set(err, EINVAL,
					  "%s '%s': IPv6 address is too long", what, spec);
		memcpy(host, spec + 1, (size_t)(end - spec - 1));
		host[end - spec - 1] = '\0';
		port = end + 2;
	} else {
		const char *colon = strrchr(spec, ':');
		if (!colon)
			return errbuf_set(err, EINVAL, "%s '%s': expected " RPC_ADDR_FORMS,
					  what, spec);
		if ((size_t)(colon - spec) >= sizeof(host))
			return errbuf_set(err, EINVAL, "%s '%s': host is too long", what, spec);
		memcpy(host, spec, (size_t)(colon - spec));
		host[colon - spec] = '\0';
		port = colon + 1;
	}
	uint16_t p = 0; /* set by parse_port; aarch64 gcc 12 cannot tell */
	int r = parse_port(what, spec, port, &p, err);
	if (r < 0)
		return r;
	memset(a, 0, sizeof(*a));
	if (v6) {
		a->in6.sin6_family = AF_INET6;
		a->in6.sin6_port = htons(p);
		*alen = sizeof(a->in6);
		if (inet_pton(AF_INET6, host, &a->in6.sin6_addr) != 1)
			return errbuf_set(err, EINVAL,
					  "%s '%s': '%s' is not a numeric IPv6 address",
					  what, spec, host);
		return 0;
	}
	a->in.sin_family = AF_INET;
	a->in.sin_port = htons(p);
	*alen = sizeof(a->in);
	/* ":8090" and "*:8090": every address; "localhost" is loopback alone
	 * (never a name lookup: the agent starts before any resolver). */
	if (!*host || !strcmp(host, "*"))
		return 0;
	if (!strcmp(host, "localhost"))
		snprintf(host, sizeof(host), "127.0.0.1");
	if (inet_pton(AF_INET, host, &a->in.sin_addr) != 1)
		return errbuf_set(err, EINVAL,
				  "%s '%s': '%s' is not a numeric IPv4 address, "
				  "localhost or *; expected " RPC_ADDR_FORMS,
				  what, spec, host);
	return 0;
}

static int parse_unix(const char *what, const char *spec, const char *path, union rpc_addr *a,
		      socklen_t *alen, struct errbuf *err)
{
	size_t len = strlen(path);
	memset(a, 0, sizeof(*a));
	if (len == 0)
		return errbuf_set(err, EINVAL, "%s '%s': the unix socket path is empty",
				  what, spec);
	if (len >= sizeof(a->un.sun_path))
		return errbuf_set(err, ENAMETOOLONG,
				  "%s '%s': the unix socket path is %zu bytes, "
				  "a socket address holds at most %zu",
				  what, spec, len, sizeof(a->un.sun_path) - 1);
	a->un.sun_family = AF_UNIX;
	memcpy(a->un.sun_path, path, len + 1);
	*alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len + 1);
	return 0;
}

int rpc_addr_parse(const char *what, const char *spec, union rpc_addr *a, socklen_t *alen,
		   struct errbuf *err)
{
	if (!strncmp(spec, "unix:", 5))
		return parse_unix(what, spec, spec + 5, a, alen, err);
	return parse_inet(what, spec, a, alen, err);
}

int rpc_addr_format(const union rpc_addr *a, char *buf, size_t n)
{
	char host[INET6_ADDRSTRLEN];
	int w;
	switch (a->sa.sa_family) {
	case AF_INET:
		inet_ntop(AF_INET, &a->in.sin_addr, host, sizeof(host));
		w = snprintf(buf, n, "%s:%u", host, ntohs(a->in.sin_port));
		break;
	case AF_INET6:
		inet_ntop(AF_INET6, &a->in6.sin6_addr, host, sizeof(host));
		w = snprintf(buf, n, "[%s]:%u", host, ntohs(a->in6.sin6_port));
		break;
	case AF_UNIX:
		w = snprintf(buf, n, "unix:%.*s", (int)sizeof(a->un.sun_path), a->un.sun_path);
		break;
	default:
		return -EAFNOSUPPORT;
	}
	if (w < 0 || (size_t)w >= n)
		return -ENAMETOOLONG;
	return 0;
}
