/* SPDX-License-Identifier: Apache-2.0 */
#include "rpc/listen.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "rpc/addr.h"

/* A socket file left by an earlier run is replaced; a regular file (or
 * anything else) is not ours to delete, and a live socket is in use. */
static int clear_stale_unix(const char *spec, const union rpc_addr *a, socklen_t alen,
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

int rpc_listen_parse(const char *spec, bool tcp_only, struct errbuf *err)
{
	union rpc_addr a;
	socklen_t alen = 0;
	if (tcp_only && !strncmp(spec, "unix:", 5))
		return errbuf_set(err, EINVAL, "listen address '%s': must be TCP, HOST:PORT or "
				  "[IPv6]:PORT", spec);
	return rpc_addr_parse("listen address", spec, &a, &alen, err);
}

int rpc_listen(const char *spec, int *fd, struct errbuf *err)
{
	union rpc_addr a;
	socklen_t alen = 0;
	bool is_unix = !strncmp(spec, "unix:", 5);
	int r = rpc_addr_parse("listen address", spec, &a, &alen, err);
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
	union rpc_addr a;
	socklen_t alen = sizeof(a);
	memset(&a, 0, sizeof(a));
	if (getsockname(fd, &a.sa, &alen) < 0)
		return -errno;
	return rpc_addr_format(&a, buf, n);
}
