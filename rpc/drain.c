/* SPDX-License-Identifier: Apache-2.0 */
#include "rpc/drain.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "base/clock.h"
#include "base/drain.h"
#include "base/view.h"
#include "rpc/encode.h"

struct drain {
	pthread_mutex_t lock; /* everything below */
	struct cache *cache;
	struct pollers *pollers;
	int64_t window_ms;
	bool on;
	bool held;          /* a sidecar's stop: resume no longer lifts it */
	int64_t since_ms;   /* realtime */
	uint64_t since_seq; /* the pollers' answer number when it began */
	drain_changed_fn *changed;
	void *arg;
};


int drain_new(struct cache *cache, struct pollers *pollers, int64_t window_ms,
	      drain_changed_fn *changed, void *arg, struct drain **out)
{
	struct drain *d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	pthread_mutex_init(&d->lock, NULL);
	d->cache = cache;
	d->pollers = pollers;
	d->window_ms = window_ms;
	d->changed = changed;
	d->arg = arg;
	*out = d;
	return 0;
}

void drain_free(struct drain *d)
{
	if (!d)
		return;
	pthread_mutex_destroy(&d->lock);
	free(d);
}

void drain_set_window(struct drain *d, int64_t window_ms)
{
	pthread_mutex_lock(&d->lock);
	d->window_ms = window_ms;
	pthread_mutex_unlock(&d->lock);
}

/* Encoded once per drain: the public side serves its bytes as it serves
 * any published verdict. Never stale (max_age_ms 0): a drain is true
 * however long the refresh loop has been stuck. */
static struct snapshot *drain_snapshot(void)
{
	struct verdict v;
	verdict_init(&v);
	v.healthy = false;
	struct snapshot *s = NULL;
	if (verdict_add(&v, DRAIN_NAME, "%s", DRAIN_STATUS) == 0)
		s = rpc_snapshot_new(&v, clock_mono_ms());
	verdict_free(&v);
	if (s)
		s->draining = true;
	return s;
}

static int begin_locked(struct drain *d)
{
	if (d->on)
		return 0;
	struct snapshot *s = drain_snapshot();
	if (!s)
		return -ENOMEM;
	/* Told after the swap, so that whoever it wakes (the verdict file's
	 * writer) reads the drain's verdict. The cache owns s from the swap
	 * on; the drain lock, held here, is the only way to lift it. */
	cache_override(d->cache, s);
	if (d->changed)
		d->changed(d->arg, true, clock_real_ms(), &s->verdict);
	/* Taken after the swap: an answer numbered after it that was the
	 * drain's (pollers note which) was served by this drain. */
	d->since_seq = pollers_seq(d->pollers);
	d->since_ms = clock_real_ms();
	d->on = true;
	return 0;
}

int drain_begin(struct drain *d)
{
	pthread_mutex_lock(&d->lock);
	int r = begin_locked(d);
	pthread_mutex_unlock(&d->lock);
	return r;
}

int drain_hold(struct drain *d)
{
	pthread_mutex_lock(&d->lock);
	int r = begin_locked(d);
	d->held = r == 0;
	pthread_mutex_unlock(&d->lock);
	return r;
}

bool drain_end(struct drain *d)
{
	pthread_mutex_lock(&d->lock);
	bool held = d->held;
	if (d->on && !d->held) {
		cache_override(d->cache, NULL);
		d->on = false;
		if (d->changed) {
			struct snapshot *s = cache_acquire_published(d->cache);
			d->changed(d->arg, false, clock_real_ms(), &s->verdict);
			snapshot_unref(s);
		}
	}
	pthread_mutex_unlock(&d->lock);
	return !held;
}

bool drain_active(struct drain *d)
{
	pthread_mutex_lock(&d->lock);
	bool on = d->on;
	pthread_mutex_unlock(&d->lock);
	return on;
}

static int addrs_json(struct json_buf *b, const struct pollers_table *t, uint64_t since_seq,
		      int64_t window_start, enum drain_told which)
{
	int e = json_buf_puts(b, "[");
	bool first = true;
	for (size_t i = 0; !e && i < t->n; i++) {
		if (drain_poller_told(&t->v[i], since_seq, window_start) != which)
			continue;
		char addr[64];
		poller_addr_str(&t->v[i].addr, addr, sizeof(addr));
		e = view_printf(b, "%s\"%s\"", first ? "" : ",", addr);
		first = false;
	}
	return e ? e : json_buf_puts(b, "]");
}

int drain_json(struct drain *d, struct json_buf *b)
{
	pthread_mutex_lock(&d->lock);
	bool on = d->on, held = d->held;
	int64_t since = d->since_ms, window = d->window_ms;
	uint64_t seq = d->since_seq;
	pthread_mutex_unlock(&d->lock);
	int e = view_printf(b, "{\"draining\":%s,%s\"window\":%.6g,\"since\":",
			    on ? "true" : "false", held ? "\"stopping\":true," : "",
			    (double)window / 1000);
	if (!e) e = on ? view_json_time(b, since) : json_buf_puts(b, "null");
	if (e || !on)
		return e ? e : json_buf_puts(b, "}");
	/* On the heap: the table is some 20 KiB. */
	struct pollers_table *t = malloc(sizeof(*t));
	if (!t)
		return -ENOMEM;
	pollers_copy(d->pollers, t);
	int64_t start = clock_real_ms() - window;
	struct drain_count n;
	bool all = drain_everyone_told(t, seq, start, &n);
	e = view_printf(b, ",\"everyone_told\":%s,\"told\":", all ? "true" : "false");
	if (!e) e = addrs_json(b, t, seq, start, DRAIN_TOLD);
	if (!e) e = json_buf_puts(b, ",\"not_told\":");
	if (!e) e = addrs_json(b, t, seq, start, DRAIN_NOT_TOLD);
	free(t);
	return e ? e : json_buf_puts(b, "}");
}
