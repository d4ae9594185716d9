/* SPDX-License-Identifier: Apache-2.0 */
/* Following Docker's event stream (Docker source only): each event of the
 * app's Compose project asks the refresh loop for a refresh at once, and a
 * kill, start or destroy is first noted in the stops table that refresh reads
 * (runtime/stops.h: a container told to stop is judged stopping at once).
 * The watcher never waits on the loop and the loop never waits on it, so a
 * hung or silent stream only costs the early refreshes: the timer goes on. */
#ifndef HEALTHD_WATCH_H
#define HEALTHD_WATCH_H

#include "agent/config.h"
#include "base/err.h"

#include <stdbool.h>
#include <stdint.h>

struct watcher;

struct stops;
/* Starts the watcher thread. kick(arg) is called for each event (after it
 * was noted in stops, which must outlive the watcher) and after every
 * (re)subscription, since events were missed meanwhile; kick_soon(arg)
 * instead for a kill that may begin a stop (STOPS_NEW_SIGNAL), which must
 * reach the served verdict without waiting out min_refresh_spacing. The
 * thread ends once cancel_fd becomes readable; then watch_join() joins it. */
int watch_start(const struct config *cfg, int cancel_fd, struct stops *stops,
		void (*kick)(void *), void (*kick_soon)(void *), void *arg,
		struct watcher **out, struct errbuf *err);
/* The stream as the operator's view shows it. Times are CLOCK_REALTIME ms,
 * 0 for never. */
struct watch_stats {
	bool connected;
	int64_t connected_since_ms;
	uint64_t reconnects; /* subscriptions after the first */
	int64_t last_event_ms;
	char last_event[200]; /* "container health_status: unhealthy", cut */
	char last_error[ERRBUF_SIZE];
};
/* A copy taken under the watcher's lock; zeroed for NULL. */
void watch_stats_get(struct watcher *w, struct watch_stats *out);

/* Joins and frees; cancel_fd must have been made readable. NULL is fine. */
void watch_join(struct watcher *w);

#endif
