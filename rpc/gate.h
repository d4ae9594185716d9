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
 * All libmicrohttpd callbacks run on the gate's thread. Any daemon serving
 * requests from ready answers can sit behind one: the caller gives its
 * handlers, the gate owns the daemon.
 */
#ifndef HEALTHD_GATE_H
#define HEALTHD_GATE_H

#include <stddef.h>
#include <stdint.h>

#include <microhttpd.h>

#include "base/err.h"

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
};

struct gate;

int gate_start(const struct gate_opts *o, struct gate **out, struct errbuf *err);
/* Stops accepting, closes the listener and every connection, joins the
 * thread. NULL is fine. */
void gate_stop(struct gate *g);

#endif
