/* SPDX-License-Identifier: Apache-2.0 */
/* The pRPC listener (docs/design/prpc.md): libmicrohttpd on its own thread, answering
 * /prpc/v1/Health and /prpc/v1/Version from the verdict cache only. A request
 * never queries anything: it takes a cache reference and queues a response
 * the refresh thread already built.
 *
 * Bounds, so that the gateway's poll (a fresh connection, a 2 s timeout) is
 * answered while other clients misbehave:
 *   request body      64 KiB (PRPC_MAX_BODY, rpc/prpc.h), then 413
 *   per connection    4 KiB of memory for the request line and headers:
 *                     heads up to about 3.6 KiB are served, larger get 431
 *   connections       1024 served at once (fewer if the fd limit cannot be
 *                     raised to fit them); more wait in the listen backlog
 *                     (rpc/gate.h), and each one accepted while all are
 *                     taken closes the one that has waited longest for its
 *                     request
 *   a request         complete within header_timeout (2 s) of the accept or
 *                     of the end of the previous request, or closed
 *   idle connection   closed after 10 s without a byte either way
 */
#ifndef HEALTHD_SERVER_H
#define HEALTHD_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/cache.h"
#include "base/err.h"
#include "base/pollers.h"
#include "rpc/gate.h"

/* No cap per address: one NAT may hold the gateway and an attacker, and a
 * cap that resets what it accepted would lock both out. A slot is held for
 * header_timeout at most, and given up to any newer connection sooner when
 * all are taken. */
#define RPC_MAX_CONNECTIONS 1024
/* The gateway's own poll timeout. */
#define RPC_HEADER_TIMEOUT_MS 2000
/* libmicrohttpd's pool per connection: it holds the request line, the
 * headers and the answer's header. The gateway's request head is about 100
 * bytes, curl's 150; 4 KiB serves heads up to about 3.6 KiB (431 beyond,
 * or a close within a few hundred bytes of the limit, where the pool has
 * no room left for the 431). At 16 KiB, 1024 connections with 3 KiB heads
 * held 8.9 MiB of RssAnon; at 4 KiB, 5.4 MiB. */
#define RPC_CONNECTION_MEMORY (4 * 1024)
#define RPC_IDLE_TIMEOUT_S 10

struct relay;

struct rpc_server_opts {
	int listen_fd;        /* bound and listening; the server takes it, even
			       * when starting fails */
	struct cache *cache;
	/* Notes who asked for Health and what each was told, and counts
	 * Health answers by status, for the local view; NULL for none. */
	struct pollers *pollers;
	int64_t header_timeout_ms; /* 0: RPC_HEADER_TIMEOUT_MS */
	/* Started, or NULL: connections whose first request is not Health
	 * go there (rpc/relay.h); the server does not own it. */
	struct relay *relay;
};

struct rpc_server;

int rpc_server_start(const struct rpc_server_opts *o, struct rpc_server **out,
		     struct errbuf *err);
/* Stops accepting, closes the listener and every connection, joins the
 * thread. NULL is fine. */
void rpc_server_stop(struct rpc_server *s);
/* What the listener closed for want of a request (rpc/gate.h); any thread. */
void rpc_server_stats(struct rpc_server *s, struct gate_stats *out);
/* Whether the app declared the listener's port with "pp": true, so that
 * its connections start with a PROXY header (gate_set_proxy); any thread. */
void rpc_server_set_proxy(struct rpc_server *s, bool declared);

#endif
