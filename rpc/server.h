/* The pRPC listener (DESIGN.md §3): libmicrohttpd on its own thread, answering
 * /prpc/v1/Health and /prpc/v1/Version from the verdict cache only. */
#ifndef HEALTHD_SERVER_H
#define HEALTHD_SERVER_H

#include <stdint.h>

#include "../agent/cache.h"
#include "../agent/err.h"

struct rpc_server_opts {
	int listen_fd;        /* bound and listening; the server takes it */
	struct cache *cache;
	/* A snapshot older than this (ms) is not passed off as current: the
	 * answer is healthy:false with an error saying how old it is. */
	int64_t max_age_ms;
};

struct rpc_server;

int rpc_server_start(const struct rpc_server_opts *o, struct rpc_server **out,
		     struct errbuf *err);
/* Stops accepting, closes the listener, joins the thread. NULL is fine. */
void rpc_server_stop(struct rpc_server *s);

/* Parses a --listen value ("HOST:PORT", "[IPv6]:PORT", "unix:PATH") and
 * returns a bound, listening, close-on-exec socket in *fd. err names the value
 * and what was wrong. */
int rpc_listen(const char *spec, int *fd, struct errbuf *err);

#endif
