/* SPDX-License-Identifier: Apache-2.0 */
#include "rpc/pipes.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

int pipes_init(struct pipe_pool *pool)
{
	pool->n = 0;
	while (pool->n < PIPES_POOL) {
		if (pipe2(pool->fd[pool->n], O_NONBLOCK | O_CLOEXEC) < 0) {
			int e = -errno;
			pipes_close(pool);
			return e;
		}
		pool->n++;
	}
	return 0;
}

void pipes_close(struct pipe_pool *pool)
{
	for (unsigned i = 0; i < pool->n; i++) {
		close(pool->fd[i][0]);
		close(pool->fd[i][1]);
	}
	pool->n = 0;
}

int pipes_take(struct pipe_pool *pool, int p[2])
{
	if (pool->n) {
		pool->n--;
		p[0] = pool->fd[pool->n][0];
		p[1] = pool->fd[pool->n][1];
		return 0;
	}
	return pipe2(p, O_NONBLOCK | O_CLOEXEC) < 0 ? -errno : 0;
}

void pipes_give(struct pipe_pool *pool, int p[2], bool empty)
{
	if (p[0] < 0)
		return;
	if (empty && pool->n < PIPES_POOL) {
		pool->fd[pool->n][0] = p[0];
		pool->fd[pool->n][1] = p[1];
		pool->n++;
	} else {
		close(p[0]);
		close(p[1]);
		if (!empty && pool->n < PIPES_POOL &&
		    pipe2(pool->fd[pool->n], O_NONBLOCK | O_CLOEXEC) == 0)
			pool->n++;
	}
	p[0] = p[1] = -1;
}
