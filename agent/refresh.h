/* SPDX-License-Identifier: Apache-2.0 */
/* The refresh loop: the one thread that runs refreshes. Every interval, and
 * soon after a Docker event, it runs one refresh (bounded by the refresh
 * timeout), applies the consecutive-failure rule, publishes the verdict into
 * the cache, logs transitions, updates STATUS= and pings the watchdog. When
 * the source is Docker, a second thread follows Docker's event stream and
 * only ever asks the loop for a refresh (refresh_kick). */
#ifndef HEALTHD_REFRESH_H
#define HEALTHD_REFRESH_H

#include <stdbool.h>
#include <stdint.h>

#include "agent/compose.h"
#include "agent/config.h"
#include "base/cache.h"
#include "base/err.h"
#include "runtime/gap.h"

struct stops;

/* A failed refresh keeps the previous verdict this many times in a row; the
 * next failure is reported (docs/design/verdict.md). */
#define REFRESH_KEPT_FAILURES 2

/* How old a published verdict may get before readers stop passing it off as
 * current: three missed refreshes plus one that ran to its limit. */
static inline int64_t refresh_max_age_ms(const struct config *cfg)
{
	return 3 * cfg->interval_ms + cfg->refresh_timeout_ms;
}

struct refresh_state {
	unsigned failures;       /* consecutive failed refreshes */
	struct verdict current;  /* the verdict last published */
	bool have_result;        /* a refresh has completed at least once */
	char last_error[ERRBUF_SIZE]; /* in full, for the journal */
	/* The probes' thread (issue 27, container sources only): handed on
	 * with the rest across a reload that keeps the source, so that no
	 * probe's record starts over. */
	struct prober *prober;
	/* The Compose services seen, for the gap of a recreate (issue 29):
	 * handed on the same way, so that a reload during a gap keeps it. */
	struct gap gap;
	/* The kills Docker's events reported (runtime/stops.h): handed on the
	 * same way, so that a reload during a stop does not make the stopping
	 * container look healthy again (issue 34). */
	struct stops *stops;
};

/* Pure: the verdict to publish after a refresh that returned r (with verdict v
 * on success, err on failure), updating the state. A failure published says
 * err's public text in error (never the message, which may quote the runtime
 * or name paths) and keeps the message in detail. *out is initialised here.
 * -ENOMEM. */
int refresh_apply(struct refresh_state *st, int r, struct verdict *v,
		  const struct errbuf *err, struct verdict *out);

/* When refreshes start (pure, so that it is tested as a table of event
 * times). The timer's refresh is due an interval after the last one started
 * (or after it ended, when it overran the interval: never two back to back).
 * A kick makes one due as soon as min_spacing after the last start allows, so
 * that an event storm cannot raise the query rate above one per min_spacing.
 * One thread runs them: never more than one in flight. */
struct refresh_sched {
	int64_t last_start; /* of the last refresh, when ran */
	int64_t timer;      /* when the timer's refresh is due */
	bool ran;
	bool kicked; /* an event came since the last refresh started */
};
/* The first refresh is due at now. */
void refresh_sched_init(struct refresh_sched *s, int64_t now);
/* When the next refresh is due (may be in the past: start it now). */
int64_t refresh_sched_due(const struct refresh_sched *s, int64_t min_spacing_ms);
/* A refresh ran from start to end; the kick it answered was cleared by the
 * caller when it started. */
void refresh_sched_ran(struct refresh_sched *s, int64_t start, int64_t end,
		       int64_t interval_ms);

struct refresher;

/* Starts the loop thread, and the events thread when the source is Docker
 * (health_check on, no status file, runner docker-compose). cfg, m and cache
 * must outlive them; m belongs to the loop thread until refresh_stop (it reads
 * an unusable app-compose.json again on every refresh). keep: the state of a
 * refresher stopped by a reload that did not change the source (moved in,
 * so the failure count goes on), or NULL: then the source's initial verdict
 * ("not determined yet") is published at once. The first refresh runs at
 * once. */
struct opview;
struct vfile;
/* view (NULL for none) gets every refresh for the operator's view; its
 * first_trigger names the first refresh's cause. vfile (NULL for none): the
 * verdict file's writer (agent/vfile.h), asked after every publish. */
int refresh_start(const struct config *cfg, struct manifest *m, struct cache *cache,
		  struct refresh_state *keep, struct opview *view, struct vfile *vfile,
		  struct refresher **out, struct errbuf *err);
/* Asks both threads to stop and joins them. NULL is fine. keep (may be NULL)
 * receives the refresh state, for refresh_start; free it with
 * refresh_state_free when it is not passed on. */
void refresh_stop(struct refresher *r, struct refresh_state *keep);
void refresh_state_free(struct refresh_state *st);
/* Asks for a refresh now (coalesced with one already pending, and spaced
 * by min_refresh_spacing). Never blocks on a refresh in progress. */
void refresh_kick(struct refresher *r);
#endif
