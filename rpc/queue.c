/* SPDX-License-Identifier: Apache-2.0 */
#include "rpc/queue.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

void queue_set_cap(struct queue *q, unsigned cap)
{
	q->cap = cap < QUEUE_MAX ? cap : QUEUE_MAX;
}

void queue_init(struct queue *q, unsigned cap)
{
	queue_set_cap(q, cap);
	q->n = 0;
	q->turn = QUEUE_NONE;
	for (unsigned i = 0; i < QUEUE_MAX; i++) {
		q->place[i].next = i + 1 < QUEUE_MAX ? (uint16_t)(i + 1) : QUEUE_NONE;
		q->src[i].hash_next = i + 1 < QUEUE_MAX ? (uint16_t)(i + 1) : QUEUE_NONE;
	}
	q->free_place = q->free_src = 0;
	for (unsigned i = 0; i < QUEUE_BUCKETS; i++)
		q->bucket[i] = QUEUE_NONE;
}

void queue_source_of(const struct sockaddr *sa, socklen_t alen, struct queue_source *out)
{
	memset(out, 0, sizeof(*out));
	if (sa->sa_family == AF_INET && alen >= sizeof(struct sockaddr_in)) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
		out->b[10] = out->b[11] = 0xff;
		memcpy(out->b + 12, &in->sin_addr, 4);
	} else if (sa->sa_family == AF_INET6 && alen >= sizeof(struct sockaddr_in6)) {
		const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
		/* A v4-mapped peer (a dual-stack listener) is its IPv4 address. */
		memcpy(out->b, a->s6_addr, IN6_IS_ADDR_V4MAPPED(a) ? 16 : 8);
	}
}

void queue_source_format(const struct queue_source *s, char *buf, size_t n)
{
	static const unsigned char zero[16], mapped[12] = { [10] = 0xff, [11] = 0xff };
	char ip[INET6_ADDRSTRLEN];
	if (!memcmp(s->b, zero, 16))
		snprintf(buf, n, "unknown");
	else if (!memcmp(s->b, mapped, 12))
		snprintf(buf, n, "%s", inet_ntop(AF_INET, s->b + 12, ip, sizeof(ip)));
	else
		snprintf(buf, n, "%s/64", inet_ntop(AF_INET6, s->b, ip, sizeof(ip)));
}

static unsigned bucket_of(const struct queue_source *s)
{
	uint32_t h = 2166136261u; /* FNV-1a */
	for (size_t i = 0; i < sizeof(s->b); i++)
		h = (h ^ s->b[i]) * 16777619u;
	return h % QUEUE_BUCKETS;
}

static uint16_t src_find(const struct queue *q, const struct queue_source *s)
{
	uint16_t i = q->bucket[bucket_of(s)];
	while (i != QUEUE_NONE && memcmp(&q->src[i].key, s, sizeof(*s)) != 0)
		i = q->src[i].hash_next;
	return i;
}

/* A new source, its turn after every source already waiting. */
static uint16_t src_new(struct queue *q, const struct queue_source *s)
{
	uint16_t i = q->free_src;
	struct queue_src *src = &q->src[i];
	unsigned b = bucket_of(s);
	q->free_src = src->hash_next;
	*src = (struct queue_src){ .key = *s, .first = QUEUE_NONE, .last = QUEUE_NONE,
				   .hash_next = q->bucket[b] };
	q->bucket[b] = i;
	if (q->turn == QUEUE_NONE) {
		src->prev = src->next = q->turn = i;
	} else {
		struct queue_src *turn = &q->src[q->turn];
		src->next = q->turn;
		src->prev = turn->prev;
		q->src[turn->prev].next = i;
		turn->prev = i;
	}
	return i;
}

/* A source with no waiter left leaves the turn's order and the table, and
 * passes the turn on when it has it. */
static void src_gone(struct queue *q, uint16_t i)
{
	struct queue_src *src = &q->src[i];
	uint16_t *p = &q->bucket[bucket_of(&src->key)];
	while (*p != i)
		p = &q->src[*p].hash_next;
	*p = src->hash_next;
	if (src->next == i) {
		q->turn = QUEUE_NONE;
	} else {
		q->src[src->prev].next = src->next;
		q->src[src->next].prev = src->prev;
		if (q->turn == i)
			q->turn = src->next;
	}
	src->hash_next = q->free_src;
	q->free_src = i;
}

static void place_unlink(struct queue *q, uint16_t i)
{
	struct queue_place *p = &q->place[i];
	struct queue_src *src = &q->src[p->source];
	if (p->prev == QUEUE_NONE)
		src->first = p->next;
	else
		q->place[p->prev].next = p->next;
	if (p->next == QUEUE_NONE)
		src->last = p->prev;
	else
		q->place[p->next].prev = p->prev;
	p->next = q->free_place;
	q->free_place = i;
	q->n--;
	if (--src->n == 0)
		src_gone(q, p->source);
}

/* The source with the most waiters; the first in turn among equals. */
static uint16_t src_largest(const struct queue *q)
{
	uint16_t best = q->turn, i = q->turn;
	do {
		if (q->src[i].n > q->src[best].n)
			best = i;
		i = q->src[i].next;
	} while (i != q->turn);
	return best;
}

enum queue_added queue_add(struct queue *q, const struct queue_source *s,
			   const struct queue_waiter *w, struct queue_waiter *pushed)
{
	enum queue_added added = QUEUE_ADDED;
	uint16_t si = src_find(q, s);
	unsigned mine = si == QUEUE_NONE ? 0 : q->src[si].n;
	if (q->n >= q->cap) {
		uint16_t big = q->n ? src_largest(q) : QUEUE_NONE;
		/* Pushing out only when the newcomer's source stays smaller
		 * than the largest: two sources never push each other out in
		 * turn, and the source pushed from keeps a waiter (it has at
		 * least two), so a push never takes a source out of the turn. */
		if (big == QUEUE_NONE || q->src[big].n <= mine + 1)
			return QUEUE_FULL;
		*pushed = q->place[q->src[big].last].w;
		place_unlink(q, q->src[big].last);
		added = QUEUE_PUSHED;
	}
	if (si == QUEUE_NONE)
		si = src_new(q, s);
	uint16_t i = q->free_place;
	struct queue_place *p = &q->place[i];
	struct queue_src *src = &q->src[si];
	q->free_place = p->next;
	*p = (struct queue_place){ .w = *w, .prev = src->last, .next = QUEUE_NONE, .source = si };
	if (src->last == QUEUE_NONE)
		src->first = i;
	else
		q->place[src->last].next = i;
	src->last = i;
	src->n++;
	q->n++;
	return added;
}

bool queue_first(const struct queue *q, struct queue_waiter *out, struct queue_source *source)
{
	if (q->turn == QUEUE_NONE)
		return false;
	*out = q->place[q->src[q->turn].first].w;
	if (source)
		*source = q->src[q->turn].key;
	return true;
}

void queue_drop_first(struct queue *q)
{
	uint16_t turn = q->turn;
	if (turn == QUEUE_NONE)
		return;
	/* The next source's turn: passed on here when this source still has
	 * waiters, by src_gone when its last one leaves. */
	bool stays = q->src[turn].n > 1;
	place_unlink(q, q->src[turn].first);
	if (stays)
		q->turn = q->src[turn].next;
}

unsigned queue_waiting_from(const struct queue *q, const struct queue_source *s)
{
	uint16_t i = src_find(q, s);
	return i == QUEUE_NONE ? 0 : q->src[i].n;
}

void queue_pass_turn(struct queue *q)
{
	if (q->turn != QUEUE_NONE)
		q->turn = q->src[q->turn].next;
}

void queue_first_retry(struct queue *q, int64_t at)
{
	if (q->turn != QUEUE_NONE)
		q->place[q->src[q->turn].first].w.retry_at = at;
}
