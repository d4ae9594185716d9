/* SPDX-License-Identifier: Apache-2.0 */
/* Making room for a newcomer: the relay's links told to the victim choice
 * (rpc/victim.h) as a table, and what the choice needs of the kernel. */
#include <sys/ioctl.h>

#include <linux/sockios.h>

#include "rpc/link.h"

/* Bytes of the link wait to be sent on: in its pipes, or, found there by
 * link_in_kernel within KEEP_SETTLE_MS, in a socket's queues. */
static bool link_has_unsent(const struct relay *r, const struct link *l)
{
	return pump_unsent(&l->flow[0]) || pump_unsent(&l->flow[1]) || r->now < l->queued_until;
}

/* Bytes wait in the kernel for the link: in a socket's send queue, not
 * taken by the other side yet (a client that reads nothing may leave a
 * whole answer there, the pipes empty), or in a socket's receive queue,
 * not read by the relay yet (a request's bytes that came since the relay
 * last looked: the event that will move them may be later in the batch).
 * Either is a transfer in flight, not a link idle between exchanges; it is
 * noted, and the link counts as unsent, for KEEP_SETTLE_MS. Asked of the
 * kernel only of the link about to be evicted, so that an eviction costs
 * a few ioctls, not four for every slot. */
static bool link_in_kernel(struct relay *r, struct link *l)
{
	static const unsigned long asks[] = { SIOCOUTQ, SIOCINQ };
	for (int d = 0; d < 2; d++) {
		for (size_t a = 0; a < sizeof(asks) / sizeof(asks[0]); a++) {
			int q = 0;
			if (l->fd[d] >= 0 && ioctl(l->fd[d], asks[a], &q) == 0 && q > 0) {
				l->queued_until = r->now + KEEP_SETTLE_MS;
				return true;
			}
		}
	}
	return false;
}

/* When a link, kept by rule, may have become idle, worth a waiting
 * newcomer's look again: when it settles, or KEEP_SETTLE_MS from now while
 * it moves bytes or awaits an answer; -1 when it is idle already, or a
 * stream (kept for a minute). */
static int64_t link_look_at(const struct relay *r, const struct link *l, bool unsent,
			    enum keep_rule rule)
{
	int64_t at = keep_settles_at(&l->keep, unsent, r->now);
	if (at < 0 && (rule == KEEP_MOVING || rule == KEEP_AWAITING))
		at = r->now + KEEP_SETTLE_MS;
	return at;
}

/* The table: the links connecting, then the connected ones in the quiet
 * order; those handed over and not seen yet are in their clients' counts
 * only. Its rows are at most the slots. */
static size_t evict_table(struct relay *r)
{
	size_t n = 0;
	for (struct ring *c = r->connecting.next; c != &r->connecting && n < r->max; c = c->next) {
		struct link *l = (struct link *)((char *)c - offsetof(struct link, connecting));
		r->table[n] = (struct victim_link){ .client = l->client_no, .connecting = true };
		r->table_links[n++] = l;
	}
	for (struct ring *q = r->quiet.next; q != &r->quiet && n < r->max; q = q->next) {
		struct link *l = QUIET_LINK(q);
		bool unsent = link_has_unsent(r, l);
		enum keep_rule rule = keep_rule(&l->keep, unsent, r->now);
		r->table[n] = (struct victim_link){ .client = l->client_no, .rule = rule,
						    .start = l->keep.start,
						    .look_at = link_look_at(r, l, unsent, rule),
						    .moved = l->keep.bytes };
		r->table_links[n++] = l;
	}
	return n;
}

/* A victim the table holds idle, found with bytes in the kernel's queues,
 * counts as unsent (its row moves on from idle) and the choice is made
 * again: each time one more link is kept, never the same, so at most once
 * a row. A victim the table holds in flight (cut, of a client over its
 * share) is taken whatever its queues hold, unasked: asking would change
 * nothing of its row, and the same choice would come back for ever (the
 * relay thread spun there, deaf to its stop). O(slots) a choice; the
 * table is built once. */
void evict_choose(struct relay *r, const struct queue_source *client, struct eviction *out)
{
	struct victim_ask ask = { .held = r->held, .clients = r->clients.cap, .now = r->now };
	/* What each client holds, the links handed over and not seen yet
	 * included: the gate's thread adds to it. */
	pthread_mutex_lock(&r->lock);
	for (unsigned i = 0; i < r->clients.cap; i++)
		r->held[i] = r->clients.c[i].links;
	ask.newcomer = clients_find(&r->clients, client);
	ask.slots = r->limit;
	pthread_mutex_unlock(&r->lock);
	size_t n = evict_table(r);
	for (;;) {
		struct victim_choice c;
		victim_choose(r->table, n, &ask, &c);
		out->victim = c.victim >= 0 ? r->table_links[c.victim] : NULL;
		out->choice = c;
		if (!out->victim || r->table[c.victim].rule != KEEP_NONE ||
		    !link_in_kernel(r, out->victim))
			return;
		struct victim_link *row = &r->table[c.victim];
		row->rule = keep_rule(&out->victim->keep, true, r->now);
		row->look_at = link_look_at(r, out->victim, true, row->rule);
	}
}

struct link *evict_take(struct relay *r, struct link *victim, bool cut,
			const struct queue_source *client)
{
	atomic_fetch_add(cut ? &r->evicted_over_share : &r->evicted, 1);
	link_close_sockets(r, victim, true);
	pthread_mutex_lock(&r->lock);
	relay_own_slot_locked(r, victim, client);
	pthread_mutex_unlock(&r->lock);
	return victim;
}
