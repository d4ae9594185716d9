/* SPDX-License-Identifier: Apache-2.0 */
/* The verdict file's writer (issue 21, issue 28 §1): every write has one
 * order. Whoever changes what is served (a refresh's publish, a drain, a
 * resume, a stop) changes the cache first and asks second; each ask takes
 * the next number. One thread at a time writes (a flag, not a lock held
 * over the I/O): it notes the last number asked, then reads the cache and
 * writes what is served at that moment, and goes on while asks are left.
 * So a write shows every change asked before it, a change asked during a
 * write makes another one, and no writer can put back an older state. The
 * refresh thread writes its own asks (vfile_write, as it did before: a
 * sidecar's idle memory stays where it was); a request thread, which must do
 * no I/O, only takes a number and wakes the main thread with a signal
 * (vfile_ask), so that a drain reaches the file while a refresh is stuck on
 * a runtime that never answers. */
#ifndef HEALTHD_VFILE_H
#define HEALTHD_VFILE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "agent/opview.h"
#include "base/cache.h"

/* The signal that wakes the main thread to write; blocked in every thread
 * and taken by its sigwait. */
#define VFILE_SIGNAL SIGUSR1

struct vfile;

/* The writer of what cache serves; vfile_ask wakes thread (the main
 * thread), which takes VFILE_SIGNAL from its sigwait and calls vfile_run. */
int vfile_new(struct cache *cache, pthread_t thread, struct vfile **out);
void vfile_free(struct vfile *w);

/* The file to write ("" or NULL: none); a reload may change it. -ENOMEM. */
int vfile_set_path(struct vfile *w, const char *path);

/* Asks for a write of what is served now; returns the ask's number (0 when
 * there is no path). Any thread, never blocks on the write. */
uint64_t vfile_ask(struct vfile *w);

/* Asks and writes on this thread (unless another is writing: it answers
 * the ask); returns the ask's number. */
uint64_t vfile_write(struct vfile *w);

/* Writes until no ask is left unanswered, unless another thread is doing
 * so. The main thread calls it on VFILE_SIGNAL. */
void vfile_run(struct vfile *w);

/* Waits until a write begun after ask number n has ended (written or
 * failed), or until deadline (CLOCK_MONOTONIC ms). True when it has. */
bool vfile_wait(struct vfile *w, uint64_t n, int64_t deadline);

/* The writes so far, for the operator's view. */
void vfile_stats(struct vfile *w, struct opview_vfile *out);

#endif
