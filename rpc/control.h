/* SPDX-License-Identifier: Apache-2.0 */
/* The operator's local listener (issue 11): a second libmicrohttpd daemon on
 * a unix socket only root may use, answering GET /status, GET /metrics and
 * POST /reload from the snapshots the refresh thread publishes; and, when
 * asked, a TCP listener answering GET /metrics alone. Nothing here is
 * reachable from the public pRPC listener. */
#ifndef HEALTHD_CONTROL_H
#define HEALTHD_CONTROL_H

#include <stddef.h>
#include <stdint.h>

#include "base/cache.h"
#include "base/err.h"
#include "base/pollers.h"
#include "base/view.h"
#include "rpc/drain.h"

/* Few at once: root on the CVM, one command at a time. One thread serves
 * them all: a reload waits suspended, not on a thread of its own. */
#define CONTROL_MAX_CONNECTIONS 8
/* A request line and a few headers: curl's or our own client's. */
#define CONTROL_CONNECTION_MEMORY (8 * 1024)

struct relay;
struct rpc_server;

struct control_opts {
	int listen_fd;  /* the unix socket, bound and listening, or -1; taken */
	int metrics_fd; /* a TCP listener for /metrics alone, or -1; taken */
	struct cache *cache;
	struct view_box *view;
	struct view_box *config; /* a view whose status is the config object */
	struct pollers *pollers;
	/* Asks for a reload and returns its ticket at once; the answer comes
	 * through control_reload_done. NULL: reload is not offered. */
	uint64_t (*reload_ask)(void *arg);
	void *reload_arg;
	/* POST /drain, POST /resume, GET /drain (issue 12); NULL: not offered. */
	struct drain *drain;
	/* Its counters in /status and /metrics; NULL: no relay. */
	struct relay *relay;
	/* The public listener's counters likewise; NULL: no listener. */
	struct rpc_server *server;
};

struct control;
int control_start(const struct control_opts *o, struct control **out, struct errbuf *err);
/* Every reload asked for with a ticket up to upto was applied (result 0)
 * or refused (-1), text saying what changed or why: their requests are
 * answered. Any thread; NULL is fine. */
void control_reload_done(struct control *c, uint64_t upto, int result, const char *text);
/* Answers reloads still waiting (as not done), then stops. NULL is fine. */
void control_stop(struct control *c);

#endif
