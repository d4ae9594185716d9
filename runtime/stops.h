/* SPDX-License-Identifier: Apache-2.0 */
/* What Docker's event stream said about stops, kept for the refresh (issue 29,
 * "Stopping is unhealthy at once"). Docker keeps a container "running" and
 * its last health "healthy" for the whole grace period of a `docker stop`;
 * only the "kill" event says it is on its way out. The events thread notes
 * each kill here (which container, which signal, when) and asks for a
 * refresh; the refresh reads the table against what it listed and marks the
 * containers being stopped, so that the judge, not the events thread, says
 * what it means. Thread-safe: one lock, held for a copy. */
#ifndef HEALTHD_STOPS_H
#define HEALTHD_STOPS_H

#include <stdbool.h>
#include <stdint.h>

#include "runtime/container.h"
#include "runtime/events.h"

/* Containers being stopped at once, bounded: a full table forgets its oldest
 * kill (by then that container has long died, or was asked again). */
#define STOPS_MAX 256

struct stops;

/* -ENOMEM. */
int stops_new(struct stops **out);
/* NULL is fine. */
void stops_free(struct stops *t);

/* What noting an event did. */
enum stops_noted {
	STOPS_UNCHANGED,
	STOPS_CHANGED,
	/* A kill with a signal this container was not sent since its last
	 * start: maybe the first word of a stop, worth a refresh at once.
	 * A container can be sent each signal once per start, so these are
	 * bounded by the kills a stop needs, not by a loop of `kill -s HUP`. */
	STOPS_NEW_SIGNAL,
};
/* The events thread: a "kill" is noted (the signals sent to one container
 * since its last start, and when the last came); a "start" or "destroy"
 * forgets the container. */
enum stops_noted stops_note(struct stops *t, const struct event *ev);

/* The refresh, before it lists: a mark that tells the kills noted from now
 * on apart from those noted before. */
uint64_t stops_mark(struct stops *t);

/* True when a kill of id is noted: Docker's list does not carry the stop
 * signal and the start time, so such a container is inspected. */
bool stops_has(struct stops *t, const char *id);

/* Docker's stop timeout when the container sets none (Config.StopTimeout),
 * and the time past it after which a container still running is no longer
 * taken as stopping. */
#define STOPS_DEFAULT_TIMEOUT_S 10
#define STOPS_SLACK_S 5

/* The refresh, after it listed the project's containers into l: sets
 * `stopping` on each running container that was sent its stop signal
 * (Config.StopSignal, default SIGTERM) or SIGKILL since it last started, at
 * most its stop timeout and STOPS_SLACK_S before now_ns (CLOCK_REALTIME, the
 * clock of Docker's timeNano; 0: no bound), and
 * forgets the kills noted before mark that no longer apply: of containers
 * not running any more (their state speaks), started again since (StartedAt
 * after the kill), not listed (removed), or sent only other signals (a SIGHUP
 * to reload is not a stop). Kills noted after mark are kept for the next
 * refresh: the list may predate them. A stop signal that cannot be read
 * makes any kill a stop. */
void stops_apply(struct stops *t, struct container_list *l, uint64_t mark, int64_t now_ns);

/* Pure: a Docker stop signal as moby's signal.ParseSignal reads it ("SIGTERM",
 * "term", "15", "RTMIN+3"); "" is Docker's default, SIGTERM. -1 when it
 * cannot be read. Signal numbers are this machine's, which is the daemon's. */
int stops_parse_signal(const char *s);

#endif
