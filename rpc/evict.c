/* SPDX-License-Identifier: Apache-2.0 */
#include <sys/ioctl.h>

#include <linux/sockios.h>

#include "rpc/link.h"


/* Bytes of the link wait to be sent on: in its pipes, or, found there by
 * link_queued within KEEP_SETTLE_MS, in a socket's send queue. */
static bool link_has_unsent(const struct relay *r, const struct link *l)
{
	return pump_unsent(&l->flow[0]) || pump_unsent(&l->flow[1]) || r->now < l->queued_until;
}

/* Bytes wait in a socket's send queue that the other side has not taken:
 * a client that reads nothing may leave a whole answer there, the pipes
 * empty. That is an answer in flight, not a link idle between exchanges;
 * it is noted, and the link is held, for KEEP_SETTLE_MS. Asked of the
 * kernel only of the link pick() is about to evict, so that an eviction
 * costs an ioctl or two, not two for every slot. */
static bool link_queued(struct relay *r, struct link *l)
{
	for (int d = 0; d < 2; d++) {
		int q = 0;
		if (l->fd[d] >= 0 && ioctl(l->fd[d], SIOCOUTQ, &q) == 0 && q > 0) {
			l->queued_until = r->now + KEEP_SETTLE_MS;
			return true;
		}
	}
	return false;
}

/* When a link, unsent (link_has_unsent) and kept by rule, may have become idle, worth
 * a waiting newcomer's look again: when it settles, or KEEP_SETTLE_MS from
 * now while it moves bytes or awaits an answer; -1 when it is idle already,
 * or a stream (kept for a minute). */
static int64_t link_look_at(const struct relay *r, const struct link *l, bool unsent,
			    enum keep_rule k)
{
	int64_t at = keep_settles_at(&l->keep, unsent, r->now);
	if (at < 0 && (k == KEEP_MOVING || k == KEEP_AWAITING))
		at = r->now + KEEP_SETTLE_MS;
	return at;
}

/* The earlier of two times, -1 being none. */
static int64_t earlier(int64_t a, int64_t b)
{
	return a < 0 || (b >= 0 && b < a) ? b : a;
}

/* The youngest idle link, p->victim, is spared while it is in the reserve
 * of the oldest (rpc/keep.h) and links younger than it are connecting,
 * moving or awaiting their answers: the newcomer then looks again when the
 * first of those may have settled (p->look_at), and takes the reserve's
 * link only when its wait is over (wait_until). */
static void spare_reserve(const struct relay *r, struct pick *p)
{
	const struct link *v = p->victim;
	unsigned older = 0;
	int64_t at = p->kept[KEEP_NONE] ? r->now + KEEP_SETTLE_MS : -1;
	p->look_at = -1;
	for (struct ring *n = r->quiet.next; n != &r->quiet; n = n->next) {
		const struct link *l = QUIET_LINK(n);
		if (l->keep.start < v->keep.start) {
			if (!keep_reserved(++older, r->limit))
				return;
			continue;
		}
		bool unsent = link_has_unsent(r, l);
		at = earlier(at, link_look_at(r, l, unsent, keep_rule(&l->keep, unsent, r->now)));
	}
	if (keep_reserved(older, r->limit))
		p->look_at = at;
}

static void scan(struct relay *r, struct pick *p)
{
	struct ring *n;
	*p = (struct pick){ .look_at = -1 };
	for (n = r->connecting.next; n != &r->connecting; n = n->next)
		p->kept[KEEP_NONE]++;
	/* Links handed over or connecting are younger than any connected one,
	 * and about to await their answers. */
	p->kept[KEEP_NONE] += atomic_load(&r->fresh);
	if (p->kept[KEEP_NONE])
		p->look_at = r->now + KEEP_SETTLE_MS;
	for (n = r->quiet.next; n != &r->quiet; n = n->next) {
		struct link *l = QUIET_LINK(n);
		bool unsent = link_has_unsent(r, l);
		enum keep_rule k = keep_rule(&l->keep, unsent, r->now);
		if (k == KEEP_NONE) {
			if (!p->victim || l->keep.start > p->victim->keep.start)
				p->victim = l;
			continue;
		}
		p->kept[k]++;
		p->look_at = earlier(p->look_at, link_look_at(r, l, unsent, k));
	}
	if (p->victim)
		spare_reserve(r, p);
}

/* A victim found with bytes in a send queue is held, and the slots are
 * looked through again: each look holds one more link, never the same. */
void pick(struct relay *r, struct pick *p)
{
	do
		scan(r, p);
	while (p->victim && link_queued(r, p->victim));
}

/* The victim is reset both ways and its slot is the newcomer's. */
struct link *evict(struct relay *r, struct link *l)
{
	atomic_fetch_add(&r->evicted, 1);
	link_close_sockets(r, l, true);
	return l;
}

/* When the first newcomer, queued at since, looks again for a slot; -1: it
 * does not wait, and takes the victim's slot or is refused. */
int64_t wait_until(const struct relay *r, const struct pick *k, int64_t since)
{
	int64_t until = since + RELAY_QUEUE_WAIT_MS;
	if (k->look_at < 0 || r->now >= until)
		return -1;
	return k->look_at < until ? k->look_at : until;
}
