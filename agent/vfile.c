/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/vfile.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/verdictfile.h"

struct vfile {
	pthread_mutex_t lock; /* everything below */
	pthread_cond_t done_cond; /* to vfile_wait: a write ended */
	struct cache *cache;
	pthread_t thread; /* the writer */
	char *path;
	uint64_t asked; /* the last ask's number */
	uint64_t taken; /* the last number a write has started for */
	uint64_t done;  /* the last number a write has ended for */
	bool writing;   /* a thread is in vfile_run's loop */
	struct opview_vfile st; /* written by the writer, under the lock */
};

int vfile_new(struct cache *cache, pthread_t thread, struct vfile **out)
{
	struct vfile *w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w->done_cond, &ca);
	pthread_condattr_destroy(&ca);
	pthread_mutex_init(&w->lock, NULL);
	w->cache = cache;
	w->thread = thread;
	*out = w;
	return 0;
}

/* One write of what is served now: healthy only for a fresh, undrained,
 * healthy snapshot (verdictfile_healthy). A failure is logged when a streak
 * begins, at debug while it lasts, and once when it ends; the guest agent
 * keeps reading the last complete file, which ages out. */
static void write_once(struct vfile *w, const char *path)
{
	struct snapshot *s = cache_acquire(w->cache);
	bool healthy = verdictfile_healthy(s, clock_mono_ms());
	snapshot_unref(s);
	struct errbuf err = { "" };
	int64_t now = clock_real_ms();
	int r = verdictfile_write(path, healthy, now / 1000, &err);
	/* Only this thread writes st: reading it unlocked here is safe. */
	bool was_failing = w->st.failing;
	if (r < 0)
		log_msg(was_failing ? LOG_DEBUG : LOG_WARNING,
			"%s; the file keeps its last content, which goes stale in 60 s", err.msg);
	else if (was_failing)
		log_msg(LOG_NOTICE, "verdict file %s written again", path);
	pthread_mutex_lock(&w->lock);
	if (r < 0) {
		w->st.failures++;
		w->st.last_failure_ms = now;
		snprintf(w->st.last_error, sizeof(w->st.last_error), "%s", err.msg);
	} else {
		w->st.writes++;
		w->st.last_write_ms = now;
		w->st.last_healthy = healthy;
	}
	w->st.failing = r < 0;
	pthread_mutex_unlock(&w->lock);
}

void vfile_run(struct vfile *w)
{
	pthread_mutex_lock(&w->lock);
	/* One writer at a time, without a lock held over the write: the one
	 * in the loop answers every ask made meanwhile. */
	if (w->writing) {
		pthread_mutex_unlock(&w->lock);
		return;
	}
	w->writing = true;
	while (w->taken != w->asked && w->path) {
		/* Noted before the cache is read: whatever was asked up to
		 * here changed the cache before it asked, so this write shows
		 * it; an ask that comes later makes another write. */
		uint64_t n = w->asked;
		w->taken = n;
		_cleanup_free_ char *path = strdup(w->path);
		pthread_mutex_unlock(&w->lock);
		if (path)
			write_once(w, path);
		else
			log_msg(LOG_ERR, "out of memory writing the verdict file");
		pthread_mutex_lock(&w->lock);
		w->done = n;
		pthread_cond_broadcast(&w->done_cond);
	}
	w->writing = false;
	pthread_mutex_unlock(&w->lock);
}

int vfile_set_path(struct vfile *w, const char *path)
{
	char *p = path && *path ? strdup(path) : NULL;
	if (path && *path && !p)
		return -ENOMEM;
	pthread_mutex_lock(&w->lock);
	free(w->path);
	w->path = p;
	pthread_mutex_unlock(&w->lock);
	return 0;
}

static uint64_t take_number(struct vfile *w)
{
	pthread_mutex_lock(&w->lock);
	uint64_t n = w->path ? ++w->asked : 0;
	pthread_mutex_unlock(&w->lock);
	return n;
}

uint64_t vfile_ask(struct vfile *w)
{
	uint64_t n = take_number(w);
	/* Signals of one kind coalesce: one wake answers every ask before
	 * it, as vfile_run writes until none is left. */
	if (n)
		pthread_kill(w->thread, VFILE_SIGNAL);
	return n;
}

uint64_t vfile_write(struct vfile *w)
{
	uint64_t n = take_number(w);
	if (n)
		vfile_run(w);
	return n;
}

bool vfile_wait(struct vfile *w, uint64_t n, int64_t deadline)
{
	struct timespec ts = { .tv_sec = deadline / 1000, .tv_nsec = (deadline % 1000) * 1000000 };
	pthread_mutex_lock(&w->lock);
	while (w->done < n && clock_mono_ms() < deadline)
		pthread_cond_timedwait(&w->done_cond, &w->lock, &ts);
	bool done = w->done >= n;
	pthread_mutex_unlock(&w->lock);
	return done;
}

void vfile_stats(struct vfile *w, struct opview_vfile *out)
{
	pthread_mutex_lock(&w->lock);
	*out = w->st;
	pthread_mutex_unlock(&w->lock);
}

void vfile_free(struct vfile *w)
{
	if (!w)
		return;
	free(w->path);
	pthread_cond_destroy(&w->done_cond);
	pthread_mutex_destroy(&w->lock);
	free(w);
}
