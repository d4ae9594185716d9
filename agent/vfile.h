/* SPDX-License-Identifier: Apache-2.0 */
/* The verdict file's writer (issue 21, issue 28 §1): one thread, the only
 * one that writes the file, so that every write has one order. Whoever
 * changes what is served (a refresh's publish, a drain, a resume, a stop)
 * changes the cache first and asks second; each ask takes the next number.
 * The thread notes the last number asked, then reads the cache and writes
 * what is served at that moment: a write therefore shows every change asked
 * before it, and a change asked during a write makes another one. No writer
 * can put back an older state, and a drain reaches the file while a refresh
 * is stuck on a runtime that never answers. Asking never blocks on I/O: a
 * request thread only sets a number and signals. */
#ifndef HEALTHD_VFILE_H
#define HEALTHD_VFILE_H

#include <stdbool.h>
#include <stdint.h>

#include "agent/opview.h"
#include "base/cache.h"

struct vfile;

/* The writer of what cache serves. No thread runs until a path is set. */
int vfile_new(struct cache *cache, struct vfile **out);
/* Stops the thread (a write in progress ends first) and frees. NULL is
 * fine. */
void vfile_free(struct vfile *w);

/* The file to write ("" or NULL: none); a reload may change it. The
 * first path starts the thread. -ENOMEM, -errno from pthread_create. */
int vfile_set_path(struct vfile *w, const char *path);

/* Asks for a write of what is served now; returns the ask's number (0 when
 * there is no path). Any thread, never blocks on the write. */
uint64_t vfile_ask(struct vfile *w);

/* Waits until a write begun after ask number n has ended (written or
 * failed), or until deadline (CLOCK_MONOTONIC ms). True when it has. */
bool vfile_wait(struct vfile *w, uint64_t n, int64_t deadline);

/* The writes so far, for the operator's view. */
void vfile_stats(struct vfile *w, struct opview_vfile *out);

#endif
