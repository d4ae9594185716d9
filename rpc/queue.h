/* SPDX-License-Identifier: Apache-2.0 */
/* The queue of connections waiting for a relay slot (rpc/relay.h), shared
 * fairly between the addresses they come from (issue 33). One address that
 * opens more connections than there are places must not lock the others
 * out: a dashboard request from a second gateway node, or an operator's
 * curl, behind a flood from the first.
 *
 * - The turn goes round the sources: each source's first waiter in turn,
 *   oldest source first, so that a waiter has at most one waiter of each
 *   other source before it, however many that source has queued.
 * - When the queue is full, a newcomer from a source with fewer waiters
 *   than the source with the most pushes out that source's youngest waiter
 *   (answered 503, counted as refused_share); otherwise the newcomer is
 *   answered 503 (refused_queue). A flood fills the queue with its own
 *   waiters and then competes with itself.
 *
 * A source is an IPv4 address, or an IPv6 address's /64 (one host is
 * given a /64 at least, and may use every address in it); every unix
 * socket peer is one source. Pure: no locks and no I/O (the relay holds
 * its lock around every call).
 *
 * Invariants, kept by every call (tests/unit/test_queue.c checks them
 * after each one):
 *   - n waiters, n <= cap unless cap was lowered under them, n <= QUEUE_MAX;
 *   - every source in the table has a waiter; its n counts them, in its
 *     order oldest first (first, then next) and youngest last (last, then
 *     prev); every waiter is in its source's order;
 *   - the turn's order holds exactly the sources in the table, and the turn
 *     is one of them, or QUEUE_NONE when no one waits;
 *   - the places and sources not in use are on their free lists;
 *   - a push never reverses two sources: after it the source pushed from
 *     has at least as many waiters as the newcomer's.
 * The drop rule keeps the turn's: a source whose last waiter leaves (served
 * or refused) leaves the turn's order and passes the turn on (src_gone),
 * and one that stays passes it to the next source (queue_drop_first); a
 * push-out never empties a source, since it pushes only from a source with
 * two more waiters than the newcomer's. */
#ifndef HEALTHD_QUEUE_H
#define HEALTHD_QUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* Places at most; the relay's RELAY_PENDING. */
#define QUEUE_MAX 512

struct queue_source {
	unsigned char b[16]; /* IPv4 as v4-mapped IPv6; IPv6 as its /64 */
};

struct queue_waiter {
	int fd;
	int64_t since;
	int64_t retry_at; /* the relay's: it looks again for a slot then (0: now) */
};

enum queue_added {
	QUEUE_ADDED,  /* queued */
	QUEUE_PUSHED, /* queued; *pushed (another source's youngest) is out */
	QUEUE_FULL,   /* not queued: the queue is full and the newcomer's source
		       * has as many waiters as any */
};

struct queue_place {
	struct queue_waiter w;
	uint16_t prev, next; /* in its source's order, oldest first */
	uint16_t source;
};

struct queue_src {
	struct queue_source key;
	unsigned n;          /* its waiters */
	uint16_t first, last; /* its oldest and youngest waiter */
	uint16_t prev, next;  /* in the turn's order */
	uint16_t hash_next;   /* in its hash bucket */
};

#define QUEUE_BUCKETS 1024

struct queue {
	unsigned cap, n;
	uint16_t free_place, free_src;
	uint16_t turn; /* the source whose turn it is, or QUEUE_NONE */
	struct queue_place place[QUEUE_MAX];
	struct queue_src src[QUEUE_MAX];
	uint16_t bucket[QUEUE_BUCKETS];
};

#define QUEUE_NONE UINT16_MAX

/* An empty queue of cap places (at most QUEUE_MAX). */
void queue_init(struct queue *q, unsigned cap);
/* Fewer places from now on; those already queued stay. */
void queue_set_cap(struct queue *q, unsigned cap);
/* The source of a peer's address (AF_UNSPEC: none, "unknown", as every
 * unix peer). */
void queue_source_of(const struct sockaddr *sa, socklen_t alen, struct queue_source *out);
/* s for the operator: "192.0.2.1", "2001:db8:1:2::/64", or "unknown". */
void queue_source_format(const struct queue_source *s, char *buf, size_t n);
/* How many wait from source s. */
unsigned queue_waiting_from(const struct queue *q, const struct queue_source *s);
/* The turn goes to the next source, its first waiter staying first of its
 * own (it waits for a link to settle, and another source's may not). */
void queue_pass_turn(struct queue *q);
/* Queues w from source s; *pushed is set on QUEUE_PUSHED. */
enum queue_added queue_add(struct queue *q, const struct queue_source *s,
			   const struct queue_waiter *w, struct queue_waiter *pushed);
/* The waiter whose turn it is, and its source (source may be NULL); false
 * when none waits. */
bool queue_first(const struct queue *q, struct queue_waiter *out, struct queue_source *source);
/* Takes it out (served or refused); the turn goes to the next source. */
void queue_drop_first(struct queue *q);
/* When the waiter whose turn it is looks again (struct queue_waiter). */
void queue_first_retry(struct queue *q, int64_t at);

#endif
