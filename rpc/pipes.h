/* SPDX-License-Identifier: Apache-2.0 */
/* The relay's pool of empty pipes (docs/design/front.md). A direction of a
 * link holds a pipe only while bytes wait in it; most links move their
 * bytes as soon as they come, so an emptied pipe goes back here rather
 * than being closed, and the common connection creates and closes none.
 * The pool is filled at the start and kept whole: a pipe closed with bytes
 * in it is replaced, so that the relay's fd count when nothing is relayed
 * is what it was at the start. Owned by the relay thread: no locks. */
#ifndef HEALTHD_PIPES_H
#define HEALTHD_PIPES_H

#include <stdbool.h>

#include "rpc/relay.h"

/* Empty pipes kept for the next bytes to move (counted in the relay's fd
 * budget, relay_budget). */
#define PIPES_POOL RELAY_PIPE_POOL

struct pipe_pool {
	int fd[PIPES_POOL][2];
	unsigned n;
};

/* Fills the pool: 0, or -errno (then what was made is closed). */
int pipes_init(struct pipe_pool *pool);
/* Closes every pipe in the pool. */
void pipes_close(struct pipe_pool *pool);
/* An empty pipe into p: the pool's, else a new one. 0, or -errno. */
int pipes_take(struct pipe_pool *pool, int p[2]);
/* p given back (nothing when p[0] < 0), and set to -1: to the pool when it
 * is empty and the pool has room; else closed, and one with bytes in it
 * replaced. */
void pipes_give(struct pipe_pool *pool, int p[2], bool empty);

#endif
