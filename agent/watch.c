/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/watch.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent/source.h"
#include "base/clock.h"
#include "base/log.h"
#include "runtime/docker.h"
#include "runtime/events.h"
#include "runtime/runtimefile.h"
#include "runtime/stops.h"

/* A connected events stream re-reads the runtime file this often, so that a
 * new Compose project is followed without waiting for the stream to drop. */
#define EVENTS_RECHECK_MS 5000
/* A stream that lasted this long was healthy: the backoff starts over. */
#define EVENTS_HEALTHY_MS 2000
/* A stream silent this long is opened afresh: a quiet app sends nothing, but
 * so does a tcp:// peer that vanished without a word, and nothing else would
 * ever tell (the timer covers the verdict meanwhile). */
#define EVENTS_MAX_SILENCE_MS (5 * 60 * 1000)

struct watcher {
	const struct config *cfg;
	int cancel_fd;
	struct stops *stops;
	void (*kick)(void *);
	void (*kick_soon)(void *);
	void *kick_arg;
	pthread_t thread;
	pthread_mutex_t lock; /* for stats only, held for a copy */
	struct watch_stats stats;
	uint64_t subscriptions;
};


static void stats_up(struct watcher *w, bool up, const char *error)
{
	pthread_mutex_lock(&w->lock);
	if (up && !w->stats.connected) {
		w->stats.connected_since_ms = clock_real_ms();
		if (w->subscriptions++ > 0)
			w->stats.reconnects++;
	}
	w->stats.connected = up;
	if (error)
		snprintf(w->stats.last_error, sizeof(w->stats.last_error), "%s", error);
	pthread_mutex_unlock(&w->lock);
}

static void stats_event(struct watcher *w, const char *name, const char *action)
{
	pthread_mutex_lock(&w->lock);
	w->stats.last_event_ms = clock_real_ms();
	snprintf(w->stats.last_event, sizeof(w->stats.last_event), "%s %s", name, action);
	pthread_mutex_unlock(&w->lock);
}

void watch_stats_get(struct watcher *w, struct watch_stats *out)
{
	memset(out, 0, sizeof(*out));
	if (!w)
		return;
	pthread_mutex_lock(&w->lock);
	*out = w->stats;
	pthread_mutex_unlock(&w->lock);
}

/* The refresher wrote cancel_fd: the agent is stopping. */
static bool cancelled(const struct watcher *w)
{
	struct pollfd p = { .fd = w->cancel_fd, .events = POLLIN };
	return poll(&p, 1, 0) > 0;
}

struct watch_log {
	unsigned failures; /* in a row, since the stream was last up */
	bool was_up;
	char project[256]; /* last followed, cut: compared for logging and since */
	/* The last event's timeNano (or the time the stream opened, before
	 * any came): a new stream of the same project asks from there, so that
	 * a kill sent while none was open is replayed, not lost (issue 34). */
	int64_t since_ns;
};

/* Sleeps ms, or less when stopping: false then. */
static bool pause_ms(struct watcher *w, int64_t ms)
{
	struct pollfd p = { .fd = w->cancel_fd, .events = POLLIN };
	int64_t until = clock_mono_ms() + ms;
	int r;
	do
		r = poll(&p, 1, clock_left_ms(until));
	while (r < 0 && errno == EINTR);
	return r == 0;
}

/* Checked every EVENTS_RECHECK_MS: the runtime file alone, no query. A
 * project taken from the agent's own container's label (a sidecar) stays
 * until the runtime file appears: a container's labels never change. */
static bool project_changed(const struct watcher *w, const char *project, bool from_self)
{
	struct runtime_info ri = { 0 };
	struct errbuf err = { "" };
	int r = runtimefile_read(w->cfg->runtime_file, &ri, &err);
	bool changed = from_self ? r != -ENOENT : r < 0 || strcmp(ri.project, project) != 0;
	runtime_info_free(&ri);
	return changed;
}

/* Reads events until the stream ends or breaks (a negative errno), or is
 * to be opened afresh (1): the runtime file names another project, or it was
 * silent too long. *healthy: it lasted. */
static int follow(struct watcher *w, struct watch_log *wl, struct events *ev,
		  const char *project, bool from_self, bool *healthy, struct errbuf *err)
{
	int64_t since = clock_mono_ms(), last = since;
	int r;
	for (;;) {
		struct event e;
		r = events_next(ev, clock_mono_ms() + EVENTS_RECHECK_MS, &e, err);
		if (r == 1) {
			enum stops_noted noted = stops_note(w->stops, &e);
			if (e.time_ns > wl->since_ns)
				wl->since_ns = e.time_ns;
			if (e.signal)
				log_msg(LOG_DEBUG, "Docker event: %s %s, signal %d", e.name, e.action,
					e.signal);
			else
				log_msg(LOG_DEBUG, "Docker event: %s %s%s", e.name, e.action,
					noted ? " (noted)" : "");
			stats_event(w, e.name, e.action);
			(noted == STOPS_NEW_SIGNAL ? w->kick_soon : w->kick)(w->kick_arg);
			last = clock_mono_ms();
		} else if (r == -ETIMEDOUT && (project_changed(w, project, from_self) ||
					       clock_mono_ms() - last >= EVENTS_MAX_SILENCE_MS)) {
			r = 1;
			break;
		} else if (r != -ETIMEDOUT) {
			break;
		}
	}
	*healthy = clock_mono_ms() - since >= EVENTS_HEALTHY_MS;
	if (r == 0)
		r = errbuf_set(err, ECONNRESET, "Docker ended the events stream");
	return r;
}

/* Logs transitions: the first subscription, a new project, the stream back
 * after failures; a routine reopening only at debug. */
static void watch_up(struct watch_log *wl, const char *project)
{
	bool same = wl->was_up && strncmp(wl->project, project, sizeof(wl->project) - 1) == 0;
	/* Another project's times say nothing of this one's events. */
	if (!same || wl->since_ns == 0)
		wl->since_ns = clock_real_ms() * 1000000;
	if (wl->failures > 0 && same)
		log_msg(LOG_NOTICE, "Docker events: following project %s again", project);
	else if (!same)
		log_msg(LOG_INFO, "Docker events: following project %s", project);
	else
		log_msg(LOG_DEBUG, "Docker events: stream reopened for project %s", project);
	snprintf(wl->project, sizeof(wl->project), "%s", project);
	wl->failures = 0;
	wl->was_up = true;
}

/* One subscription, from reading the runtime file to the stream's end.
 * *no_file: the runtime file does not exist yet (Compose has not started). */
static int watch_once(struct watcher *w, struct watch_log *wl, bool *healthy,
		      bool *no_file, struct errbuf *err)
{
	struct runtime_info ri = { 0 };
	struct container self = { 0 };
	struct events *ev = NULL;
	int r = source_project(w->cfg, clock_mono_ms() + w->cfg->refresh_timeout_ms, w->cancel_fd,
			       &ri, &self, err);
	bool from_self = r == 1;
	container_free(&self);
	*no_file = r == -ENOENT;
	if (r < 0)
		return r;
	struct docker_opts o;
	source_docker_opts(w->cfg, w->cancel_fd, &o);
	/* The same project as the last stream: from its last event on (one
	 * nanosecond after, so that it is not replayed). */
	bool again = wl->was_up && wl->since_ns > 0 &&
		     strncmp(wl->project, ri.project, sizeof(wl->project) - 1) == 0;
	r = events_subscribe(&o, ri.project, again ? wl->since_ns + 1 : 0,
			     clock_mono_ms() + w->cfg->refresh_timeout_ms, &ev, err);
	if (r == 0) {
		watch_up(wl, ri.project);
		stats_up(w, true, NULL);
		/* Whatever happened while no stream was open went unseen. */
		w->kick(w->kick_arg);
		r = follow(w, wl, ev, ri.project, from_self, healthy, err);
	}
	events_close(ev);
	runtime_info_free(&ri);
	if (r != 1)
		stats_up(w, false, err->msg[0] ? err->msg : NULL);
	return r;
}

static void watch_failed(struct watcher *w, struct watch_log *wl, bool no_file,
			 const struct errbuf *err, int64_t backoff)
{
	wl->failures++;
	if (no_file)
		log_msg(LOG_DEBUG, "Docker events: no runtime file yet, next try in %lld ms",
			(long long)backoff);
	else if (wl->failures == 1)
		log_msg(LOG_WARNING, "Docker events: %s; reconnecting (the %.3g s timer "
				     "still refreshes)", err->msg,
			(double)w->cfg->interval_ms / 1000);
	else
		log_msg(LOG_DEBUG, "Docker events: %s (%u in a row), next try in %lld ms",
			err->msg, wl->failures, (long long)backoff);
}

static void *watch(void *arg)
{
	struct watcher *w = arg;
	struct watch_log wl = { 0 };
	int64_t backoff = 0;
	while (!cancelled(w)) {
		struct errbuf err = { "" };
		bool healthy = false, no_file = false;
		int r = watch_once(w, &wl, &healthy, &no_file, &err);
		if (r == -ECANCELED || cancelled(w))
			break;
		if (healthy || r == 1)
			backoff = 0;
		if (r == 1)
			continue;
		if (r == -ENOMEM)
			errbuf_set(&err, ENOMEM, "out of memory");
		backoff = events_backoff_next(backoff);
		watch_failed(w, &wl, no_file, &err, backoff);
		if (!pause_ms(w, backoff))
			break;
	}
	return NULL;
}

int watch_start(const struct config *cfg, int cancel_fd, struct stops *stops,
		void (*kick)(void *), void (*kick_soon)(void *), void *arg,
		struct watcher **out, struct errbuf *err)
{
	struct watcher *w = calloc(1, sizeof(*w));
	if (!w)
		return errbuf_set(err, ENOMEM, "out of memory");
	*w = (struct watcher){ .cfg = cfg, .cancel_fd = cancel_fd, .stops = stops, .kick = kick,
			       .kick_soon = kick_soon, .kick_arg = arg };
	pthread_mutex_init(&w->lock, NULL);
	int r = pthread_create(&w->thread, NULL, watch, w);
	if (r != 0) {
		pthread_mutex_destroy(&w->lock);
		free(w);
		return errbuf_set(err, r, "cannot start the Docker events thread: %s", strerror(r));
	}
	*out = w;
	return 0;
}

void watch_join(struct watcher *w)
{
	if (!w)
		return;
	pthread_join(w->thread, NULL);
	pthread_mutex_destroy(&w->lock);
	free(w);
}
