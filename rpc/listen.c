/* SPDX-License-Identifier: Apache-2.0 */
#include "rpc/server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "base/cleanup.h"

union sockaddr_any {
	struct sockaddr sa;
	struct sockaddr_in in;
	struct sockaddr_in6 in6;
	struct sockaddr_un un;
	struct sockaddr_storage ss;
};

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

/* "HOST:PORT" or "[HOST6]:PORT" into addr. */
static int parse_inet(const char *what, const char *spec, union sockaddr_any *a, socklen_t *alen,
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
			return errbuf_set(err, EINVAL, "%s '%s': expected " RPC_LISTEN_FORMS,
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
				  "localhost or *; expected " RPC_LISTEN_FORMS,
				  what, spec, host);
	return 0;
}

static int parse_unix(const char *what, const char *spec, const char *path, union sockaddr_any *a,
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

/* A socket file left by an earlier run is replaced; a regular file (or
 * anything else) is not ours to delete, and a live socket is in use. */
static int clear_stale_unix(const char *spec, const union sockaddr_any *a, socklen_t alen,
			    struct errbuf *err)
{
	struct stat st;
	if (lstat(a->un.sun_path, &st) < 0)
		return errno == ENOENT ? 0
				       : errbuf_set(err, errno, "listen address '%s': %s", spec,
						    strerror(errno));
	if (!S_ISSOCK(st.st_mode))
		return errbuf_set(err, EEXIST,
				  "listen address '%s': the path exists and is not a socket", spec);
	_cleanup_close_ int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (probe >= 0 && connect(probe, &a->sa, alen) == 0)
		return errbuf_set(err, EADDRINUSE,
				  "listen address '%s': another process is listening there", spec);
	if (unlink(a->un.sun_path) < 0 && errno != ENOENT)
		return errbuf_set(err, errno, "listen address '%s': removing the stale socket: %s",
				  spec, strerror(errno));
	return 0;
}

static int parse_any(const char *what, const char *spec, union sockaddr_any *a, socklen_t *alen,
		     struct errbuf *err)
{
	if (!strncmp(spec, "unix:", 5))
		return parse_unix(what, spec, spec + 5, a, alen, err);
	return parse_inet(what, spec, a, alen, err);
}

int rpc_addr_parse(const char *what, const char *spec, struct sockaddr_storage *ss,
		   socklen_t *alen, struct errbuf *err)
{
	union sockaddr_any a;
	int r = parse_any(what, spec, &a, alen, err);
	if (r == 0)
		memcpy(ss, &a.ss, sizeof(*ss));
	return r;
}

int rpc_listen_parse(const char *spec, bool tcp_only, struct errbuf *err)
{
	union sockaddr_any a;
	socklen_t alen = 0;
	if (tcp_only && !strncmp(spec, "unix:", 5))
		return errbuf_set(err, EINVAL, "listen address '%s': must be TCP, HOST:PORT or "
				  "[IPv6]:PORT", spec);
	return parse_any("listen address", spec, &a, &alen, err);
}

int rpc_listen(const char *spec, int *fd, struct errbuf *err)
{
	union sockaddr_any a;
	socklen_t alen = 0;
	bool is_unix = !strncmp(spec, "unix:", 5);
	int r = parse_any("listen address", spec, &a, &alen, err);
	if (r < 0)
		return r;
	if (is_unix && (r = clear_stale_unix(spec, &a, alen, err)) < 0)
		return r;
	_cleanup_close_ int s = socket(a.sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (s < 0)
		return errbuf_set(err, errno, "listen address '%s': socket: %s", spec, strerror(errno));
	int one = 1;
	if (!is_unix && setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0)
		return errbuf_set(err, errno, "listen address '%s': SO_REUSEADDR: %s", spec,
				  strerror(errno));
	if (bind(s, &a.sa, alen) < 0)
		return errbuf_set(err, errno, "listen address '%s': bind: %s", spec, strerror(errno));
	if (listen(s, RPC_LISTEN_BACKLOG) < 0)
		return errbuf_set(err, errno, "listen address '%s': listen: %s", spec, strerror(errno));
	*fd = TAKE_FD(s);
	return 0;
}

int rpc_listen_describe(int fd, char *buf, size_t n)
{
	union sockaddr_any a;
	socklen_t alen = sizeof(a);
	char host[INET6_ADDRSTRLEN];
	int w;
	memset(&a, 0, sizeof(a));
	if (getsockname(fd, &a.sa, &alen) < 0)
		return -errno;
	switch (a.sa.sa_family) {
	case AF_INET:
		inet_ntop(AF_INET, &a.in.sin_addr, host, sizeof(host));
		w = snprintf(buf, n, "%s:%u", host, ntohs(a.in.sin_port));
		break;
	case AF_INET6:
		inet_ntop(AF_INET6, &a.in6.sin6_addr, host, sizeof(host));
		w = snprintf(buf, n, "[%s]:%u", host, ntohs(a.in6.sin6_port));
		break;
	case AF_UNIX:
		w = snprintf(buf, n, "unix:%.*s", (int)sizeof(a.un.sun_path), a.un.sun_path);
		break;
	default:
		return -EAFNOSUPPORT;
	}
	if (w < 0 || (size_t)w >= n)
		return -ENAMETOOLONG;
	return 0;
}
