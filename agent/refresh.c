/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/refresh.h"

#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "agent/notify.h"
#include "agent/opview.h"
#include "agent/source.h"
#include "agent/vfile.h"
#include "agent/watch.h"
#include "base/cleanup.h"
#include "base/clock.h"
#include "base/log.h"
#include "probe/prober.h"
#include "rpc/encode.h"
#include "runtime/stops.h"

struct refresher {
	const struct config *cfg;
	struct manifest *m;
	struct cache *cache;
	struct opview *view;
	bool ran_once;
	struct refresh_state st;
	/* The loop thread's, but for mem.stops, which the watcher notes in;
	 * both point into st, which a reload hands on. */
	struct source_memory mem;
	int64_t watchdog_ms;

	/* Written by refresh_stop() and never drained: a query in progress
	 * gives up at once, so that stopping never waits for a hung runtime,
	 * and the events thread's waits end. */
	int cancel_fd;

	pthread_t thread;
	struct watcher *watcher; /* Docker's events, or NULL */
	pthread_mutex_t lock;
	pthread_cond_t cond; /* CLOCK_MONOTONIC */
	bool stop, kicked;
	bool kicked_soon; /* by kick_soon: refresh at SOON_SPACING_MS */
	struct vfile *vfile; /* the verdict file's writer, or NULL */
	uint64_t vfile_asked; /* the number of the last write this thread asked */
	int last_r; /* the source's result the last refresh_publish counted */
};

static bool refresh_publish(struct refresher *rf, bool by_event, int64_t start, int r,
			    struct verdict *vp, struct errbuf *errp);

int refresh_apply(struct refresh_state *st, int r, struct verdict *v,
		  const struct errbuf *err, struct verdict *out)
{
	verdict_init(out);
	if (r >= 0) {
		st->failures = 0;
		st->have_result = true;
		st->last_error[0] = '\0';
		*out = *v;
		verdict_init(v);
		verdict_sort(out);
		return 0;
	}
	st->failures++;
	snprintf(st->last_error, sizeof(st->last_error), "%s", err->msg);
	/* One failed query is not a verdict: keep what was said before (or
	 * "not determined yet") for the first failures. */
	if (st->failures <= REFRESH_KEPT_FAILURES)
		return verdict_copy(out, &st->current);
	out->healthy = false;
	return verdict_set_failure(out, err);
}

static void log_transition(const struct refresher *rf, const struct verdict *old,
			   const struct verdict *now, unsigned old_failures)
{
	const struct refresh_state *st = &rf->st;
	char summary[512];
	verdict_summary(now, summary, sizeof(summary));
	if (st->failures == 1)
		log_msg(LOG_WARNING, "refresh failed: %s (keeping the previous verdict)",
			st->last_error);
	else if (st->failures > 1 && st->failures != REFRESH_KEPT_FAILURES + 1)
		log_msg(LOG_DEBUG, "refresh failed again (%u in a row): %s", st->failures,
			st->last_error);
	else if (st->failures == 0 && old_failures > 0)
		log_msg(LOG_NOTICE, "refresh works again after %u failure%s", old_failures,
			old_failures == 1 ? "" : "s");
	/* One line when the state or its cause changes: not one a refresh
	 * for a number in the words (a stale status file's age), which
	 * `status` shows. STATUS= keeps the words of the line logged. */
	if (verdict_same_cause(old, now))
		return;
	/* Journal fields, so that an operator can select on them. */
	char reason[600], hash[96];
	const char *colon = strchr(summary, ':');
	snprintf(reason, sizeof(reason), "HEALTHD_REASON=%s", colon ? colon + 2 : "");
	snprintf(hash, sizeof(hash), "HEALTHD_COMPOSE_HASH=%s", rf->m->app.hash);
	const char *fields[] = { now->healthy ? "HEALTHD_VERDICT=healthy"
					      : "HEALTHD_VERDICT=unhealthy",
				 hash, colon ? reason : NULL, NULL };
	/* The journal also gets the detail the public error leaves out. */
	bool detail = now->detail && strcmp(now->detail, now->error ? now->error : "") != 0;
	log_fields(now->healthy ? LOG_NOTICE : LOG_WARNING, fields, "verdict: %s%s%s%s",
		   summary, detail ? " (" : "", detail ? now->detail : "", detail ? ")" : "");
	notify_status(summary);
}

void refresh_sched_init(struct refresh_sched *s, int64_t now)
{
	memset(s, 0, sizeof(*s));
	s->timer = now;
}

int64_t refresh_sched_due(const struct refresh_sched *s, int64_t min_spacing_ms)
{
	if (!s->kicked)
		return s->timer;
	if (!s->ran)
		return INT64_MIN;
	int64_t k = s->last_start + min_spacing_ms;
	return k < s->timer ? k : s->timer;
}

void refresh_sched_ran(struct refresh_sched *s, int64_t start, int64_t end,
		       int64_t interval_ms)
{
	s->ran = true;
	s->last_start = start;
	/* Start to start, so the cadence does not drift by the refresh's own
	 * duration; never two back to back. */
	s->timer = start + interval_ms;
	if (s->timer < end)
		s->timer = end + interval_ms;
}

/* Publishes a copy of v into the cache. */
static void publish(struct refresher *rf, const struct verdict *v)
{
	struct verdict copy;
	struct snapshot *s = NULL;
	if (verdict_copy(&copy, v) == 0) {
		s = rpc_snapshot_new(&copy, clock_mono_ms());
		verdict_free(&copy);
	}
	if (!s) {
		log_msg(LOG_ERR, "out of memory publishing a verdict");
		return;
	}
	s->max_age_ms = refresh_max_age_ms(rf->cfg);
	cache_publish(rf->cache, s);
}

static void kick(void *rf);

/* A kick that cannot repeat on its own, refreshed as soon as this spacing
 * allows, not the events' min_refresh_spacing: a probe's record turned
 * healthy or stopped being so (issues 27 and 34; a reason that moves within
 * a class is a plain kick), or a container was sent a signal that may begin its
 * stop (issue 29; once per signal and start of a container, so a loop of
 * `docker kill -s HUP` cannot raise the rate of queries). */
#define SOON_SPACING_MS 20
void refresh_kick_soon(struct refresher *rf)
{
	pthread_mutex_lock(&rf->lock);
	rf->kicked = true;
	rf->kicked_soon = true;
	pthread_cond_signal(&rf->cond);
	pthread_mutex_unlock(&rf->lock);
}

static void kick_soon(void *rf)
{
	refresh_kick_soon(rf);
}

/* Container sources only: the probes' thread, unless one was handed on. A
 * failure to start it leaves every probe "starting": unhealthy, never a
 * pass. */
static void probes_start(struct refresher *rf)
{
	struct errbuf err = { "" };
	enum source_kind k = rf->m->ok ? source_kind(&rf->m->app) : SOURCE_NONE;
	if (k != SOURCE_DOCKER && k != SOURCE_NERDCTL)
		return;
	if (rf->st.prober) {
		prober_set_kick(rf->st.prober, kick, kick_soon, rf);
		return;
	}
	if (prober_start(kick, kick_soon, rf, &rf->st.prober, &err) < 0)
		log_msg(LOG_WARNING, "%s; probes are not run", err.msg);
}

/* app-compose.json became usable after it was not: what a start with it
 * would have done. */
static void manifest_usable(struct refresher *rf)
{
	struct errbuf err = { "" };
	const struct app_compose *app = &rf->m->app;
	log_msg(LOG_NOTICE, "%s is usable now, sha256 %s; health_check %s", COMPOSE_NAME,
		app->hash, app->health_check ? "on" : "off");
	struct watcher *w = NULL;
	if (source_kind(app) == SOURCE_DOCKER &&
	    watch_start(rf->cfg, rf->cancel_fd, rf->mem.stops, kick, kick_soon, rf, &w, &err) < 0)
		log_msg(LOG_WARNING, "%s; refreshing on the timer only", err.msg);
	probes_start(rf);
	pthread_mutex_lock(&rf->lock);
	rf->watcher = w;
	pthread_mutex_unlock(&rf->lock);
}

/* Runs one refresh and publishes its verdict. Returns false when it was
 * not counted: cancelled, or an event's refresh that failed. */
static int64_t mono_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void tell_view(struct refresher *rf, bool by_event, int64_t real_start, int64_t us, int r,
		      const struct errbuf *err, const struct source_detail *d)
{
	if (!rf->view)
		return;
	struct opview_refresh o = {
		.cfg = rf->cfg, .app = &rf->m->app,
		.manifest_error = rf->m->ok ? NULL : rf->m->err.msg,
		.trigger = !rf->ran_once ? rf->view->first_trigger
			   : by_event	 ? TRIGGER_EVENT : TRIGGER_TIMER,
		.start_ms = real_start, .end_ms = clock_real_ms(), .duration_us = us, .result = r,
		.error = err->msg, .error_kind = err->kind, .failures_in_row = rf->st.failures,
		.published = &rf->st.current, .detail = d,
	};
	pthread_mutex_lock(&rf->lock);
	o.watcher = rf->watcher; /* set by refresh_start after this thread began */
	pthread_mutex_unlock(&rf->lock);
	rf->ran_once = true;
	if (rf->vfile) {
		/* The view shows this refresh's write; it was made here unless
		 * another thread was writing at that moment (a short wait,
		 * bounded: a slow disk only makes the view lag). */
		vfile_wait(rf->vfile, rf->vfile_asked, clock_mono_ms() + 1000);
		vfile_stats(rf->vfile, &rf->view->vfile);
	}
	opview_refreshed(rf->view, &o);
}

static bool refresh_one(struct refresher *rf, bool by_event)
{
	bool was_usable = rf->m->ok;
	_cleanup_(verdict_free) struct verdict v = { 0 };
	_cleanup_(source_detail_free) struct source_detail detail = { 0 };
	struct errbuf err = { "" };
	int64_t start = clock_mono_ms(), real_start = clock_real_ms(), start_us = mono_us();
	int64_t deadline = start + rf->cfg->refresh_timeout_ms;
	int r = source_refresh_mem(rf->cfg, rf->m, deadline, rf->cancel_fd, rf->st.prober, &rf->mem,
				   &v, rf->view ? &detail : NULL, &err);
	if (!was_usable && rf->m->ok)
		manifest_usable(rf);
	if (r == -ECANCELED)
		return false;
	int64_t us = mono_us() - start_us;
	bool counted = refresh_publish(rf, by_event, start, r, &v, &err);
	if (counted)
		tell_view(rf, by_event, real_start, us, rf->last_r, &err, &detail);
	return counted;
}

static bool refresh_publish(struct refresher *rf, bool by_event, int64_t start, int r,
			    struct verdict *vp, struct errbuf *errp)
{
	_cleanup_(verdict_free) struct verdict v = *vp;
	struct verdict out;
	struct errbuf err = *errp;
	int64_t deadline = start + rf->cfg->refresh_timeout_ms;
	verdict_init(vp);
	int64_t end = clock_mono_ms();
	if (r >= 0 && end > deadline) {
		/* A source that overran its deadline answered about a moment
		 * that is already gone. Only a container source asked a
		 * runtime: the public words must not blame one that was not. */
		enum source_kind k = rf->m->ok ? source_kind(&rf->m->app) : SOURCE_NONE;
		verdict_free(&v);
		r = errbuf_set(&err, ETIMEDOUT, "refresh took %.1f s, longer than the %.1f s limit",
			       (double)(end - start) / 1000,
			       (double)rf->cfg->refresh_timeout_ms / 1000);
		errbuf_tag(&err, k == SOURCE_DOCKER || k == SOURCE_NERDCTL ? ERR_KIND_RUNTIME_TIMEOUT
									 : ERR_KIND_REFRESH_TIMEOUT, r);
	} else if (r == -ENOMEM) {
		errbuf_tag(&err, ERR_KIND_NOMEM, errbuf_set(&err, ENOMEM, "out of memory"));
	}
	/* The consecutive-failure rule counts the timer's refreshes: events
	 * (a container dying as dockerd shuts down, say) must not use up the
	 * failures it tolerates in a fraction of one interval. */
	if (r < 0 && by_event) {
		log_msg(LOG_DEBUG, "refresh (event) failed, left to the timer: %s", err.msg);
		return false;
	}
	unsigned old_failures = rf->st.failures;
	rf->last_r = r;
	if (refresh_apply(&rf->st, r, &v, &err, &out) < 0) {
		log_msg(LOG_ERR, "out of memory publishing a verdict");
		return true;
	}
	log_transition(rf, &rf->st.current, &out, old_failures);
	verdict_free(&rf->st.current);
	rf->st.current = out;
	publish(rf, &rf->st.current);
	/* After the publish: the write reads what is served from the cache. */
	if (rf->vfile)
		rf->vfile_asked = vfile_write(rf->vfile);
	log_msg(LOG_DEBUG, "refresh (%s) took %lld ms", by_event ? "event" : "timer",
		(long long)(clock_mono_ms() - start));
	*errp = err;
	return true;
}

/* Sleeps until when, a stop or a kick; returns true when kicked, *soon
 * when kick_soon asked. */
static bool wait_until(struct refresher *rf, int64_t when, bool *soon)
{
	struct timespec ts = { .tv_sec = when / 1000, .tv_nsec = (when % 1000) * 1000000 };
	pthread_mutex_lock(&rf->lock);
	while (!rf->stop && !rf->kicked && clock_mono_ms() < when)
		pthread_cond_timedwait(&rf->cond, &rf->lock, &ts);
	bool kicked = rf->kicked;
	*soon = rf->kicked_soon;
	rf->kicked = false;
	rf->kicked_soon = false;
	pthread_mutex_unlock(&rf->lock);
	return kicked;
}

static bool stopping(struct refresher *rf)
{
	pthread_mutex_lock(&rf->lock);
	bool s = rf->stop;
	pthread_mutex_unlock(&rf->lock);
	return s;
}

static void *loop(void *arg)
{
	struct refresher *rf = arg;
	struct refresh_sched sc;
	int64_t spacing = rf->cfg->min_refresh_spacing_ms, next_ping = clock_mono_ms();
	bool soon = false; /* the pending kick is kick_soon's */
	refresh_sched_init(&sc, next_ping);
	while (!stopping(rf)) {
		int64_t now = clock_mono_ms();
		int64_t sp = soon && spacing > SOON_SPACING_MS ? SOON_SPACING_MS : spacing;
		if (now >= refresh_sched_due(&sc, sp)) {
			bool by_event = sc.kicked && now < sc.timer;
			/* Kicks that come while it runs ask for one more. */
			sc.kicked = false;
			soon = false;
			int64_t timer = sc.timer;
			bool counted = refresh_one(rf, by_event);
			/* What this refresh freed, and what the control thread's
			 * last request freed after its own trim (libmicrohttpd
			 * frees a connection after on_done), would stay resident
			 * in their arenas: handed back here, once a refresh, for
			 * a few microseconds. */
			malloc_trim(0);
			int64_t end = clock_mono_ms();
			refresh_sched_ran(&sc, now, end, rf->cfg->interval_ms);
			/* A failure left to the timer must not put the timer off: the
			 * published verdict would age past its limit while the
			 * failure rule had counted nothing. */
			if (!counted)
				sc.timer = timer;
			now = end;
		}
		/* Pinged from here only: a wedged loop stops the pings and
		 * systemd restarts the agent. */
		if (rf->watchdog_ms > 0 && now >= next_ping) {
			notify_watchdog();
			next_ping = now + rf->watchdog_ms / 2;
		}
		int64_t wake = refresh_sched_due(&sc, soon && spacing > SOON_SPACING_MS
						     ? SOON_SPACING_MS : spacing);
		if (rf->watchdog_ms > 0 && next_ping < wake)
			wake = next_ping;
		bool by_soon = false;
		if (wait_until(rf, wake, &by_soon))
			sc.kicked = true;
		soon = soon || by_soon;
	}
	return NULL;
}

void refresh_state_free(struct refresh_state *st)
{
	prober_stop(st->prober);
	verdict_free(&st->current);
	gap_free(&st->gap);
	stops_free(st->stops);
	memset(st, 0, sizeof(*st));
}

/* A refresher whose thread never ran: only its verdict is to free. */
static void refresher_discard(struct refresher *rf)
{
	if (!rf)
		return;
	refresh_state_free(&rf->st);
	free(rf);
}
DEFINE_PTR_CLEANUP(struct refresher, refresher_discard)

int refresh_start(const struct config *cfg, struct manifest *m, struct cache *cache,
		  struct refresh_state *keep, struct opview *view, struct vfile *vfile,
		  struct refresher **out, struct errbuf *err)
{
	_cleanup_(refresher_discardp) struct refresher *rf = calloc(1, sizeof(*rf));
	if (!rf)
		return errbuf_set(err, ENOMEM, "out of memory");
	rf->view = view;
	rf->vfile = vfile;
	rf->cfg = cfg;
	rf->m = m;
	rf->cache = cache;
	rf->watchdog_ms = notify_watchdog_ms();
	int r = 0;
	if (keep) {
		rf->st = *keep;
		verdict_init(&keep->current);
		keep->prober = NULL;
		keep->stops = NULL;
		memset(&keep->gap, 0, sizeof(keep->gap));
	} else if ((r = source_initial_verdict(m, &rf->st.current)) == 0) {
		/* A new source (gating just turned on, say): what was said about
		 * the old one must not stand until the first refresh ends. */
		publish(rf, &rf->st.current);
	}
	if (r == 0 && !rf->st.stops)
		r = stops_new(&rf->st.stops);
	rf->mem.stops = rf->st.stops;
	rf->mem.gap = &rf->st.gap;
	if (r < 0)
		return errbuf_set(err, ENOMEM, "out of memory");
	rf->cancel_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (rf->cancel_fd < 0) {
		r = errno;
		return errbuf_set(err, r, "eventfd: %s", strerror(r));
	}
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&rf->cond, &ca);
	pthread_condattr_destroy(&ca);
	pthread_mutex_init(&rf->lock, NULL);
	/* Read before the loop runs: from then on it owns m. */
	bool docker = m->ok && source_kind(&m->app) == SOURCE_DOCKER;
	probes_start(rf);
	r = pthread_create(&rf->thread, NULL, loop, rf);
	if (r != 0) {
		if (rf->st.prober)
			prober_set_kick(rf->st.prober, NULL, NULL, NULL);
		pthread_cond_destroy(&rf->cond);
		pthread_mutex_destroy(&rf->lock);
		close(rf->cancel_fd);
		return errbuf_set(err, r, "cannot start the refresh thread: %s", strerror(r));
	}
	/* nerdctl publishes no health events: it keeps the timer alone. The
	 * loop thread only writes rf->watcher when the manifest was unusable
	 * here; the view reads it from the loop thread, under the lock. */
	struct watcher *w = NULL;
	if (docker && watch_start(cfg, rf->cancel_fd, rf->mem.stops, kick, kick_soon, rf, &w, err) < 0)
		log_msg(LOG_WARNING, "%s; refreshing on the timer only", err->msg);
	if (docker) {
		pthread_mutex_lock(&rf->lock);
		rf->watcher = w;
		pthread_mutex_unlock(&rf->lock);
	}
	*out = TAKE_PTR(rf);
	return 0;
}

static void kick(void *rf)
{
	refresh_kick(rf);
}

void refresh_kick(struct refresher *rf)
{
	pthread_mutex_lock(&rf->lock);
	rf->kicked = true;
	pthread_cond_signal(&rf->cond);
	pthread_mutex_unlock(&rf->lock);
}

void refresh_stop(struct refresher *rf, struct refresh_state *keep)
{
	if (!rf)
		return;
	pthread_mutex_lock(&rf->lock);
	rf->stop = true;
	pthread_cond_signal(&rf->cond);
	pthread_mutex_unlock(&rf->lock);
	uint64_t one = 1;
	if (write(rf->cancel_fd, &one, sizeof(one)) < 0) {
		/* Cannot fail for an eventfd this far from overflow; without it
		 * the join still ends, at the refresh deadline. */
	}
	pthread_join(rf->thread, NULL);
	watch_join(rf->watcher);
	/* Its kick names this refresher, which is about to go. */
	if (rf->st.prober)
		prober_set_kick(rf->st.prober, NULL, NULL, NULL);
	close(rf->cancel_fd);
	pthread_cond_destroy(&rf->cond);
	pthread_mutex_destroy(&rf->lock);
	if (keep)
		*keep = rf->st;
	else
		refresh_state_free(&rf->st);
	free(rf);
}
