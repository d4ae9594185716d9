/* SPDX-License-Identifier: Apache-2.0 */
#include "base/cache.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

struct cache {
	pthread_mutex_t lock; /* guards cur: held for a swap or a ref, no more */
	struct snapshot *cur;
	struct snapshot *over; /* cache_override's, or NULL */
};

struct snapshot *snapshot_new(struct verdict *v, int64_t mono_ms, void *enc,
			      void (*enc_free)(void *enc))
{
	struct snapshot *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->enc = enc;
	s->enc_free = enc_free;
	s->verdict = *v;
	verdict_init(v);
	s->mono_ms = mono_ms;
	s->refs = 1;
	return s;
}

struct snapshot *snapshot_ref(struct snapshot *s)
{
	__atomic_fetch_add(&s->refs, 1, __ATOMIC_RELAXED);
	return s;
}

void snapshot_unref(struct snapshot *s)
{
	if (!s)
		return;
	/* Release our writes; the last owner acquires everyone's before freeing. */
	if (__atomic_sub_fetch(&s->refs, 1, __ATOMIC_ACQ_REL) != 0)
		return;
	if (s->enc_free)
		s->enc_free(s->enc);
	verdict_free(&s->verdict);
	free(s);
}

struct cache *cache_new(struct snapshot *initial)
{
	struct cache *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	pthread_mutex_init(&c->lock, NULL);
	c->cur = initial;
	return c;
}

void cache_free(struct cache *c)
{
	if (!c)
		return;
	snapshot_unref(c->cur);
	snapshot_unref(c->over);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

/* Puts s in *slot (the published snapshot or the override), taking the
 * caller's reference; the one it replaces is dropped, and freed (with its
 * encodings) outside the lock. */
static void swap_in(struct cache *c, struct snapshot **slot, struct snapshot *s)
{
	pthread_mutex_lock(&c->lock);
	struct snapshot *old = *slot;
	*slot = s;
	pthread_mutex_unlock(&c->lock);
	snapshot_unref(old);
}

static struct snapshot *take(struct cache *c, bool published)
{
	pthread_mutex_lock(&c->lock);
	struct snapshot *s = snapshot_ref(c->over && !published ? c->over : c->cur);
	pthread_mutex_unlock(&c->lock);
	return s;
}

void cache_publish(struct cache *c, struct snapshot *s)
{
	swap_in(c, &c->cur, s);
}

struct snapshot *cache_acquire(struct cache *c)
{
	return take(c, false);
}

void cache_override(struct cache *c, struct snapshot *s)
{
	swap_in(c, &c->over, s);
}

struct snapshot *cache_acquire_published(struct cache *c)
{
	return take(c, true);
}
