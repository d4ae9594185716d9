/* SPDX-License-Identifier: Apache-2.0 */
/* Docker's /events stream for the app's Compose project: the changes that
 * can move the verdict (kill, stop, start, die, destroy, pause, unpause,
 * health_status) arrive as they happen, so that a refresh can follow at once
 * instead of at the next tick. The stream says "look now" and, for a kill,
 * which container was sent which signal (runtime/stops.h keeps that for the
 * refresh); the verdict still comes from a refresh. */
#ifndef HEALTHD_EVENTS_H
#define HEALTHD_EVENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "base/json.h"
#include "runtime/docker.h"

/* One event is one JSON object on one line; more than this is refused. */
#define EVENTS_MAX_LINE (1u << 20)
/* Reconnection backoff: from the first to the last, doubling. */
#define EVENTS_BACKOFF_MIN_MS 100
#define EVENTS_BACKOFF_MAX_MS 5000

struct event {
	char action[64]; /* "die", "health_status: unhealthy"; cleaned, cut */
	char name[128];  /* the container's name; cleaned, cut */
	char id[65];     /* Actor.ID when it is a container id (hex), else "" */
	/* A kill's Attributes.signal, the number Docker sent: 0 for another
	 * action, -1 for a kill whose signal is missing or not a number. */
	int signal;
	int64_t time_ns; /* timeNano, on the daemon's clock; 0 when absent */
};

/* The request target: /v<api>/events?filters=<urlencoded JSON> subscribing to
 * container events of the actions above, labelled
 * com.docker.compose.project=project, from since_ns on (ns since the epoch,
 * the daemon's timeNano; 0: from now). version is major * 100 + minor. */
int events_target(int version, const char *project, int64_t since_ns, struct json_buf *out);

/* Pure: one line of the stream. 1 when it is an event of project's containers
 * (ev filled), 0 when it is to be ignored (a blank line; another type or
 * project, should a daemon not filter), or -EPROTO (err says why). */
int events_parse(const char *line, size_t len, const char *project, struct event *ev,
		 struct errbuf *err);

/* Collects the stream's bytes into lines. */
struct events_lines {
	char *line; /* NUL-terminated, without the newline */
	size_t len, cap;
	bool complete; /* line holds a whole line, to be dropped at the next take */
};
/* Takes bytes from *p (advancing *p and *n) up to and including the next
 * newline: 1 with a whole line in l->line, 0 when all bytes were taken
 * without completing one, -E2BIG over EVENTS_MAX_LINE, -ENOMEM. */
int events_lines_take(struct events_lines *l, const char **p, size_t *n, struct errbuf *err);
void events_lines_free(struct events_lines *l);

/* Pure: the wait before the next reconnection, after one of cur ms (0: the
 * first failure). */
int64_t events_backoff_next(int64_t cur);

struct events;

/* Pings the daemon for its API version, then subscribes (from since_ns, as
 * events_target), all before deadline. Errors read like docker_list's
 * ("cannot connect to URL: ..."). */
int events_subscribe(const struct docker_opts *o, const char *project, int64_t since_ns,
		     int64_t deadline, struct events **out, struct errbuf *err);
/* Waits until deadline for the next event of the project: 1 with ev filled,
 * 0 when the daemon ended the stream, -ETIMEDOUT when none came (the stream
 * stays usable), -ECANCELED when o->cancel_fd became readable, another
 * negative errno when the stream broke. */
int events_next(struct events *e, int64_t deadline, struct event *ev, struct errbuf *err);
/* NULL is fine. */
void events_close(struct events *e);

#endif
