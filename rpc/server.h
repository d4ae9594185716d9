/* The pRPC listener (DESIGN.md §3): libmicrohttpd on its own thread, answering
 * /prpc/v1/Health and /prpc/v1/Version from the verdict cache only. A request
 * never queries anything: it takes a cache reference and queues a response
 * the refresh thread already built.
 *
 * Bounds, so that the gateway's poll (a fresh connection, a 2 s timeout) is
 * answered while other clients misbehave:
 *   request body      64 KiB (PRPC_MAX_BODY, rpc/prpc.h), then 413
 *   per connection    16 KiB of memory for the request line and headers
 *   connections       1024 at once (fewer if the fd limit cannot be raised
 *                     to fit them), 32 from one IP address
 *   idle connection   closed after 10 s without a byte either way
 */
#ifndef HEALTHD_SERVER_H
#define HEALTHD_SERVER_H

#include <stddef.h>
#include <stdint.h>

#include "base/cache.h"
#include "base/err.h"
#include "base/pollers.h"

/* Slow or idle clients hold a slot each; at 32 per address it takes 32
 * addresses to starve the gateway's poll (256 let 8 do it). */
#define RPC_MAX_CONNECTIONS 1024
#define RPC_MAX_CONNECTIONS_PER_IP 32
#define RPC_CONNECTION_MEMORY (16 * 1024)
#define RPC_IDLE_TIMEOUT_S 10

struct rpc_server_opts {
	int listen_fd;        /* bound and listening; the server takes it, even
			       * when starting fails */
	struct cache *cache;
	/* Notes who asked for Health and what each was told, and counts
	 * Health answers by status, for the local view; NULL for none. */
	struct pollers *pollers;
};

struct rpc_server;

int rpc_server_start(const struct rpc_server_opts *o, struct rpc_server **out,
		     struct errbuf *err);
/* Stops accepting, closes the listener and every connection, joins the
 * thread. NULL is fine. */
void rpc_server_stop(struct rpc_server *s);

/* Parses a --listen value ("HOST:PORT" with a numeric IPv4 host, empty for
 * any; "[IPv6]:PORT"; "unix:PATH") and returns a bound, listening,
 * close-on-exec, non-blocking socket in *fd. Port 0 picks a free port (see
 * rpc_listen_describe). A stale unix socket at PATH is replaced; anything
 * else there, or a socket someone still listens on, is an error. err names
 * the value and what was wrong. */
int rpc_listen(const char *spec, int *fd, struct errbuf *err);

/* Where a listening socket is bound, for logs: "127.0.0.1:41234",
 * "[::1]:8090", "unix:/run/x.sock". -errno; -ENAMETOOLONG when n is short. */
int rpc_listen_describe(int fd, char *buf, size_t n);

#endif
