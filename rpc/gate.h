/* SPDX-License-Identifier: Apache-2.0 */
/* The front door of a libmicrohttpd daemon: a thread of our own accepts
 * connections and drives the daemon (MHD_USE_NO_LISTEN_SOCKET, external
 * epoll), so that
 *   - a connection beyond the slots waits in the kernel's backlog instead of
 *     being accepted and reset (libmicrohttpd closes what it accepts over its
 *     limits);
 *   - every connection must complete a request within head_timeout_ms of its
 *     accept, or of the end of its previous request, however it trickles
 *     (libmicrohttpd's own timeout restarts on every byte);
 *   - when the slots are full and someone waits in the backlog, the
 *     connection that has waited longest for its request is closed first.
 * With a relay (rpc/relay.h), a connection whose first request line, once
 * whole, is not for Health is handed to it instead of to the daemon, once
 * its whole first request head has arrived (docs/design/front.md); until
 * then it is the gate's, under the same rules.
 * On a port the app declared with "pp": true (gate_set_proxy), a PROXY
 * header is read first (rpc/proxy.h), under the same deadline, and taken
 * off: what follows is routed as above, and the relay is told the client
 * in it (docs/design/front.md, "Who is asking").
 * All libmicrohttpd callbacks run on the gate's thread. Any daemon serving
 * requests from ready answers can sit behind one: the caller gives its
 * handlers, the gate owns the daemon.
 */
#ifndef HEALTHD_GATE_H
#define HEALTHD_GATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <microhttpd.h>

#include "base/err.h"

struct relay;

struct gate_opts {
	int listen_fd;           /* bound and listening; the gate takes it, even
				  * when starting fails */
	unsigned slots;          /* connections served at once (fds are raised
				  * to fit when they can be) */
	int64_t head_timeout_ms; /* to a complete request, from accept or from
				  * the end of the previous one */
	size_t conn_memory;      /* libmicrohttpd's pool per connection */
	unsigned idle_timeout_s; /* libmicrohttpd's own, between bytes */
	MHD_AccessHandlerCallback handler;
	void *handler_cls;
	MHD_RequestCompletedCallback completed; /* may be NULL */
	void *completed_cls;
	/* NULL: every connection is the daemon's. Else only those whose first
	 * request is for GATE_HEALTH_PATH; the others are handed to the relay
	 * once their first request head is complete. */
	struct relay *relay;
};

/* The one target the agent answers in relay mode, with any query string. */
#define GATE_HEALTH_PATH "/prpc/v1/Health"
/* In relay mode, the most of a first request looked at (peeked, never
 * read): a connection routed to the relay is held by the gate until its
 * whole first request head (through the empty line) has arrived, and a
 * head longer than this is refused as nginx refuses one past its default
 * buffers (4 x 8 KiB, no tighter, so that a browser's cookies still fit):
 * 414 when the request line alone is longer, 400 otherwise. The public
 * listener's receive buffer is fixed to hold it, and no more (rpc/gate.c). */
#define GATE_HEAD_MAX 32768

enum gate_route {
	GATE_WAIT,            /* not a whole first line yet */
	GATE_WAIT_HEAD,       /* the relay's, its first head not whole yet */
	GATE_CLOSE,           /* not HTTP (binary, a TLS hello): closed at once */
	GATE_AGENT,           /* the daemon's */
	GATE_RELAY,           /* the relay's, its first head whole */
	GATE_LINE_TOO_LONG,   /* the relay's, no end of line in GATE_HEAD_MAX bytes */
	GATE_HEAD_TOO_LARGE,  /* the relay's, no end of head in GATE_HEAD_MAX bytes */
};
/* Pure: where a connection goes, from its first bytes p[0..n) (peeked, not
 * read); bytes past GATE_HEAD_MAX are never looked at. ended: no more will
 * come (the peer's end of stream). Without a relay the first bytes alone
 * decide (GATE_AGENT as soon as they can start a request). With one, a
 * first line whose target is GATE_HEALTH_PATH is the daemon's once it is
 * whole; any other is the relay's once its whole head is there. */
enum gate_route gate_route_first(const unsigned char *p, size_t n, bool ended, bool relay);

/* Connections the gate closed before they completed a request, other
 * than those its first line showed to be for the relay (the relay counts
 * those: relay_count_head): Health's, fresh or kept alive between
 * requests, and those whose first line was not seen whole, which nothing
 * shows to be for either (one evicted in a burst before the gate looked at
 * bytes that had just come is among them). For the local view only. */
struct gate_stats {
	uint64_t head_timeout; /* no request complete within head_timeout_ms */
	uint64_t evicted;      /* the longest waiting, when the slots were full */
	/* On a port declared "pp": connections whose PROXY header was read
	 * and taken off, those that had none (served as one unknown client),
	 * and those closed for a header malformed, over-long or cut short. */
	uint64_t proxy_read, proxy_none, proxy_refused;
};

struct gate;

int gate_start(const struct gate_opts *o, struct gate **out, struct errbuf *err);
/* Stops accepting, closes the listener and every connection, joins the
 * thread. NULL is fine. */
void gate_stop(struct gate *g);
/* Any thread. */
void gate_stats(struct gate *g, struct gate_stats *out);
/* Whether connections accepted from now on start with a PROXY header (the
 * app declared the listener's port with "pp": true). Off at the start, so
 * that until app-compose.json says so no header is ever read: on a port not
 * declared, anyone can write one. Any thread. */
void gate_set_proxy(struct gate *g, bool declared);

#endif
