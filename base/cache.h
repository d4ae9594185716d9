/* SPDX-License-Identifier: Apache-2.0 */
/* The verdict cache: the one thing the refresh thread and the HTTP thread
 * share. The refresh thread builds a complete, immutable snapshot (the verdict
 * and its ready responses, encoded by the publisher: the cache stores and
 * hands out references and knows nothing of pRPC) and publishes it with a
 * pointer swap; the HTTP thread takes a reference, answers from the ready
 * bytes, and drops the reference. A lock is held only for the swap or for
 * taking a reference, never across I/O or encoding. */
#ifndef HEALTHD_CACHE_H
#define HEALTHD_CACHE_H

#include <stdbool.h>
#include <stdint.h>

#include "base/verdict.h"

struct snapshot {
	struct verdict verdict;
	int64_t mono_ms; /* CLOCK_MONOTONIC ms at which the verdict was judged */
	/* Older than this (ms) the verdict is not passed off as current: the
	 * answer is healthy:false with an error saying how old it is. 0: never.
	 * Set by the publisher, who knows the cadence it keeps (it changes
	 * with a reload). */
	int64_t max_age_ms;
	/* The verdict as ready responses, built by the publisher (rpc/encode.h
	 * for the pRPC server); freed with enc_free when the last reference
	 * goes. */
	void *enc;
	void (*enc_free)(void *enc);
	unsigned refs; /* atomic */
	/* The drain's verdict (issue 12), not the app's: the pollers table
	 * notes who was served it. */
	bool draining;
};

/* Takes ownership of *v (it is left initialised and empty) and of enc, freed
 * with enc_free (which accepts NULL). One reference, owned by the caller.
 * Returns NULL on ENOMEM, and then *v and enc are left as they were, still
 * the caller's. */
struct snapshot *snapshot_new(struct verdict *v, int64_t mono_ms, void *enc,
			      void (*enc_free)(void *enc));
struct snapshot *snapshot_ref(struct snapshot *s);
void snapshot_unref(struct snapshot *s);

struct cache;

/* initial: the first snapshot (the "not determined yet" verdict); the cache
 * takes the caller's reference. NULL on ENOMEM. */
struct cache *cache_new(struct snapshot *initial);
void cache_free(struct cache *c);

/* Replaces the current snapshot; takes the caller's reference to s. */
void cache_publish(struct cache *c, struct snapshot *s);

/* The current snapshot with a new reference; never NULL. While an
 * override is set, that is what it returns. */
struct snapshot *cache_acquire(struct cache *c);

/* The drain (issue 12): while an override is set, readers get it instead
 * of what is published, and publishing goes on underneath, so that lifting
 * it serves the latest published snapshot at once. Takes the caller's
 * reference to s; NULL lifts it. A pointer swap, like publishing. */
void cache_override(struct cache *c, struct snapshot *s);
/* The last published snapshot, override or not, with a new reference. */
struct snapshot *cache_acquire_published(struct cache *c);

#endif
