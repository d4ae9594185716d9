/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "rpc/link.h"

/* An empty pipe: the pool's, else a new one. */
int pipes_take(struct relay *r, int p[2])
{
	if (r->pooled) {
		r->pooled--;
		p[0] = r->pool[r->pooled][0];
		p[1] = r->pool[r->pooled][1];
		return 0;
	}
	return pipe2(p, O_NONBLOCK | O_CLOEXEC) < 0 ? -errno : 0;
}

/* A pipe given back: to the pool when it is empty and the pool has room.
 * One closed with bytes in it is replaced, so that the pool is whole again
 * once nothing is relayed (the fd count then is what it was at the start). */
void pipes_give(struct relay *r, int p[2], bool empty)
{
	if (p[0] < 0)
		return;
	if (empty && r->pooled < RELAY_PIPE_POOL) {
		r->pool[r->pooled][0] = p[0];
		r->pool[r->pooled][1] = p[1];
		r->pooled++;
	} else {
		close(p[0]);
		close(p[1]);
		if (!empty && r->pooled < RELAY_PIPE_POOL &&
		    pipe2(r->pool[r->pooled], O_NONBLOCK | O_CLOEXEC) == 0)
			r->pooled++;
	}
	p[0] = p[1] = -1;
}
