/* The operator's local listener (issue 11): a second libmicrohttpd daemon on
 * a unix socket only root may use, answering GET /status, GET /metrics and
 * POST /reload from the snapshots the refresh thread publishes; and, when
 * asked, a TCP listener answering GET /metrics alone. Nothing here is
 * reachable from the public pRPC listener. */
#ifndef HEALTHD_CONTROL_H
#define HEALTHD_CONTROL_H

#include <stddef.h>

#include "base/cache.h"
#include "base/err.h"
#include "base/pollers.h"
#include "base/view.h"

/* Few at once: root on the CVM, one command at a time. */
#define CONTROL_MAX_CONNECTIONS 8

struct control_opts {
	int listen_fd;  /* the unix socket, bound and listening, or -1; taken */
	int metrics_fd; /* a TCP listener for /metrics alone, or -1; taken */
	struct cache *cache;
	struct view_box *view;
	struct pollers *pollers;
	/* Applies a reload and returns once it was applied (0) or refused
	 * (-1), with what changed or why in text. Called on the connection's
	 * own thread. */
	int (*reload)(void *arg, char *text, size_t n);
	void *reload_arg;
};

struct control;
int control_start(const struct control_opts *o, struct control **out, struct errbuf *err);
void control_stop(struct control *c);

#endif
