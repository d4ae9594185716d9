/* SPDX-License-Identifier: Apache-2.0 */
/* Table tests for the queue of connections waiting for a relay slot
 * (rpc/queue.c): the turn goes round the sources, and a full queue makes
 * room for a source with fewer waiters from the source with the most. */
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <sys/un.h>

#include "rpc/queue.h"
#include "tests/lib/tap.h"

/* ops: a capital letter queues a newcomer from that source (10.0.0.<letter>;
 * fds count up from 1); '.' serves the first waiter. got: for each newcomer
 * "+" (queued), "pN" (queued, fd N pushed out) or "x" (full); for each '.'
 * the fd served, or "-" when none waited. */
static const struct {
	const char *name;
	unsigned cap;
	const char *ops;
	const char *want;
} cases[] = {
	{ "one source: first come, first served", 4, "AAA...", "+ + + 1 2 3" },
	{ "nothing waits", 4, ".", "-" },
	{ "one source, the queue full: the newcomer refused", 2, "AAA..", "+ + x 1 2" },
	{ "two sources take turns, oldest source first", 8, "AAAB....", "+ + + + 1 4 2 3" },
	{ "a new source's turn comes after every source already waiting", 8, "AABC.D....",
	  "+ + + + 1 + 3 4 2 5" },
	{ "three sources: one waiter each before another's second", 8, "AAABBC......",
	  "+ + + + + + 1 4 6 2 5 3" },
	{ "full: a newcomer pushes out the youngest of the source with the most", 3, "AAAB...",
	  "+ + + p3 1 4 2" },
	{ "full, the newcomer's source as large as any but one: refused", 4, "AABBB",
	  "+ + + + x" },
	{ "full, one more than the newcomer's source: refused (no push back and forth)", 3,
	  "AABB", "+ + + x" },
	{ "full, two more than the newcomer's source: pushed", 4, "AAABB", "+ + + + p3" },
	{ "the largest source found among several", 5, "ABBBCD", "+ + + + + p4" },
	{ "among equal largest, the first in turn gives", 4, "AABBC", "+ + + + p2" },
	{ "a flood refused in a full queue, a second source pushing in", 4, "AAAABAB.B",
	  "+ + + + p4 x p3 1 +" },
	{ "a source served empty leaves the turn", 8, "AB.B..", "+ + 1 + 2 3" },
	{ "a place freed by a push is taken again", 2, "AAB..", "+ + p2 1 3" },
	{ "no places at all", 0, "A.", "x -" },
};

/* The invariants queue.h states, checked from the outside: "" when they
 * hold, else the first that does not. */
static const char *broken(const struct queue *q)
{
	static bool seen_place[QUEUE_MAX], seen_src[QUEUE_MAX];
	memset(seen_place, 0, sizeof(seen_place));
	memset(seen_src, 0, sizeof(seen_src));
	if (q->n > QUEUE_MAX)
		return "more waiters than QUEUE_MAX";
	if ((q->turn == QUEUE_NONE) != (q->n == 0))
		return "the turn is none exactly when no one waits";
	unsigned waiters = 0, sources = 0;
	if (q->turn != QUEUE_NONE) {
		uint16_t s = q->turn;
		do {
			if (s >= QUEUE_MAX || seen_src[s])
				return "the turn's order is a ring of distinct sources";
			seen_src[s] = true;
			sources++;
			const struct queue_src *src = &q->src[s];
			if (src->n == 0)
				return "a source in the turn's order has a waiter";
			if (q->src[src->next].prev != s)
				return "the turn's order is linked both ways";
			unsigned k = 0;
			uint16_t last = QUEUE_NONE;
			for (uint16_t p = src->first; p != QUEUE_NONE; p = q->place[p].next) {
				if (p >= QUEUE_MAX || seen_place[p] || k > QUEUE_MAX)
					return "a waiter is in one source's order once";
				seen_place[p] = true;
				if (q->place[p].source != s || q->place[p].prev != last)
					return "a waiter's source and its place in the order agree";
				last = p;
				k++;
			}
			if (k != src->n || src->last != last)
				return "a source's n and last are its waiters'";
			waiters += k;
			s = src->next;
		} while (s != q->turn);
	}
	if (waiters != q->n)
		return "n is the number of waiters";
	for (uint16_t p = q->free_place; p != QUEUE_NONE; p = q->place[p].next) {
		if (p >= QUEUE_MAX || seen_place[p])
			return "the free places are the ones not in use";
		seen_place[p] = true;
	}
	for (uint16_t s = q->free_src; s != QUEUE_NONE; s = q->src[s].hash_next) {
		if (s >= QUEUE_MAX || seen_src[s])
			return "the free sources are the ones not in use";
		seen_src[s] = true;
	}
	for (unsigned i = 0; i < QUEUE_MAX; i++)
		if (!seen_place[i] || !seen_src[i])
			return "every place and source is in use or free";
	for (unsigned b = 0; b < QUEUE_BUCKETS; b++)
		for (uint16_t s = q->bucket[b]; s != QUEUE_NONE; s = q->src[s].hash_next)
			if (q->src[s].n == 0 || !sources--)
				return "the table holds the sources of the turn's order";
	return sources ? "every source of the turn's order is in the table" : "";
}

static void source(char letter, struct queue_source *s)
{
	struct sockaddr_in in = { .sin_family = AF_INET };
	in.sin_addr.s_addr = htonl(0x0a000000u | (unsigned char)letter);
	queue_source_of((struct sockaddr *)&in, sizeof(in), s);
}

/* The first invariant each case broke, if any (after any call). */
static const char *case_broke;

static void run(unsigned cap, const char *ops, char *got, size_t n)
{
	static struct queue q;
	queue_init(&q, cap);
	case_broke = "";
	int fd = 0;
	size_t used = 0;
	got[0] = '\0';
	for (const char *o = ops; *o; o++) {
		char one[16];
		struct queue_waiter w, pushed;
		if (*o == '.') {
			bool any = queue_first(&q, &w, NULL);
			queue_drop_first(&q);
			snprintf(one, sizeof(one), any ? "%d" : "-", w.fd);
		} else {
			struct queue_source s;
			source(*o, &s);
			w = (struct queue_waiter){ .fd = ++fd, .since = fd };
			enum queue_added a = queue_add(&q, &s, &w, &pushed);
			if (a == QUEUE_PUSHED)
				snprintf(one, sizeof(one), "p%d", pushed.fd);
			else
				snprintf(one, sizeof(one), "%s", a == QUEUE_ADDED ? "+" : "x");
		}
		used += (size_t)snprintf(got + used, n - used, "%s%s", used ? " " : "", one);
		if (!*case_broke)
			case_broke = broken(&q);
	}
}

static void in6(const char *text, struct queue_source *s)
{
	struct sockaddr_in6 a = { .sin6_family = AF_INET6 };
	inet_pton(AF_INET6, text, &a.sin6_addr);
	queue_source_of((struct sockaddr *)&a, sizeof(a), s);
}

static void sources(void)
{
	struct queue_source a, b;
	in6("2001:db8:1:2::1", &a);
	in6("2001:db8:1:2:ffff::9", &b);
	ok(memcmp(&a, &b, sizeof(a)) == 0, "IPv6: one /64 is one source");
	in6("2001:db8:1:3::1", &b);
	ok(memcmp(&a, &b, sizeof(a)) != 0, "IPv6: another /64 is another source");
	in6("::ffff:10.0.0.65", &a);
	source('A', &b);
	ok(memcmp(&a, &b, sizeof(a)) == 0, "a v4-mapped IPv6 peer is its IPv4 address");
	source('B', &a);
	ok(memcmp(&a, &b, sizeof(a)) != 0, "IPv4: each address its own source");
	struct sockaddr_un u1 = { .sun_family = AF_UNIX }, u2 = { .sun_family = AF_UNIX };
	queue_source_of((struct sockaddr *)&u1, sizeof(sa_family_t), &a);
	queue_source_of((struct sockaddr *)&u2, sizeof(u2), &b);
	ok(memcmp(&a, &b, sizeof(a)) == 0, "every unix socket peer is one source");
	struct sockaddr_storage none = { .ss_family = AF_UNSPEC };
	queue_source_of((struct sockaddr *)&none, sizeof(sa_family_t), &b);
	ok(memcmp(&a, &b, sizeof(a)) == 0, "no address (no PROXY header): the one unknown source");
	char text[64];
	queue_source_format(&b, text, sizeof(text));
	is_str(text, "unknown", "...shown as unknown");
	source('A', &a);
	queue_source_format(&a, text, sizeof(text));
	is_str(text, "10.0.0.65", "an IPv4 source shown as its address");
	in6("2001:db8:1:2::1", &a);
	queue_source_format(&a, text, sizeof(text));
	is_str(text, "2001:db8:1:2::/64", "an IPv6 source shown as its /64");
	struct sockaddr_in zero = { .sin_family = AF_INET };
	queue_source_of((struct sockaddr *)&zero, sizeof(zero), &a);
	queue_source_format(&a, text, sizeof(text));
	is_str(text, "0.0.0.0", "0.0.0.0 is an address, not unknown");
}

/* A source's first waiter that waits passes the turn, and keeps its place. */
static void passing(void)
{
	static struct queue q;
	struct queue_waiter w, pushed;
	struct queue_source a, b;
	source('A', &a);
	source('B', &b);
	queue_init(&q, 8);
	for (int fd = 1; fd <= 3; fd++)
		queue_add(&q, fd < 3 ? &a : &b, &(struct queue_waiter){ .fd = fd }, &pushed);
	is_int(queue_waiting_from(&q, &a), 2, "two wait from A");
	is_int(queue_waiting_from(&q, &b), 1, "one from B");
	queue_first_retry(&q, 777);
	queue_pass_turn(&q);
	queue_first(&q, &w, &b);
	is_int(w.fd, 3, "A's first waits: B's turn");
	queue_drop_first(&q);
	struct queue_source got;
	queue_first(&q, &w, &got);
	ok(w.fd == 1 && w.retry_at == 777 && memcmp(&got, &a, sizeof(a)) == 0,
	   "...then A's first again, its time to look again kept, its source given");
	queue_pass_turn(&q);
	queue_first(&q, &w, NULL);
	is_int(w.fd, 1, "a lone source passing the turn keeps it");
	is_str(broken(&q), "", "...the invariants hold");
	queue_init(&q, 8);
	queue_pass_turn(&q);
	queue_first_retry(&q, 5);
	ok(!queue_first(&q, &w, NULL), "passing the turn of an empty queue changes nothing");
}

/* The whole queue from a thousand sources and back: the places and the
 * sources' table are all given back. */
static void churn(void)
{
	static struct queue q;
	queue_init(&q, QUEUE_MAX);
	struct queue_waiter w = { 0 }, pushed;
	unsigned added = 0, served = 0;
	for (int round = 0; round < 3; round++) {
		for (unsigned i = 0; i < 2 * QUEUE_MAX; i++) {
			struct sockaddr_in in = { .sin_family = AF_INET };
			in.sin_addr.s_addr = htonl(0x0b000000u | (i % 700));
			struct queue_source s;
			queue_source_of((struct sockaddr *)&in, sizeof(in), &s);
			w.fd = (int)i;
			added += queue_add(&q, &s, &w, &pushed) == QUEUE_ADDED;
		}
		while (queue_first(&q, &w, NULL)) {
			queue_drop_first(&q);
			served++;
		}
	}
	is_str(broken(&q), "", "churn: the invariants hold after");
	is_int(q.n, 0, "churn: the queue empty after");
	is_int(added, 3 * QUEUE_MAX, "churn: QUEUE_MAX places each round, the rest refused");
	is_int(served, 3 * QUEUE_MAX, "churn: every one queued served");
}

/* The waiters of the source with key s now (0 when it has none). */
static unsigned waiting_from(const struct queue *q, const struct queue_source *s)
{
	if (q->turn == QUEUE_NONE)
		return 0;
	uint16_t i = q->turn;
	do {
		if (memcmp(&q->src[i].key, s, sizeof(*s)) == 0)
			return q->src[i].n;
		i = q->src[i].next;
	} while (i != q->turn);
	return 0;
}

/* Random calls from skewed sources, the invariants checked after each, and
 * after each push that it reversed no two sources. A fixed seed: the same
 * calls every run. */
static void random_calls(void)
{
	static struct queue q;
	static unsigned char source_of_fd[200000];
	unsigned seed = 12345, calls = 0, pushes = 0;
	const char *first = "";
	queue_init(&q, 64);
	for (; calls < 200000 && !*first; calls++) {
		seed = seed * 1103515245u + 12345u;
		unsigned r = (seed >> 8) & 0xffff;
		struct queue_waiter w = { .fd = (int)calls }, pushed;
		if (r % 3 == 0) {
			queue_drop_first(&q);
		} else if (r % 97 == 1) {
			queue_set_cap(&q, 16 + r % 64);
		} else {
			/* A few sources send most of the waiters. */
			unsigned id = r % 7 < 4 ? r % 3 : r % 40;
			struct queue_source s, ps;
			source((char)('A' + id), &s);
			source_of_fd[calls] = (unsigned char)id;
			if (queue_add(&q, &s, &w, &pushed) == QUEUE_PUSHED) {
				pushes++;
				source((char)('A' + source_of_fd[pushed.fd]), &ps);
				if (waiting_from(&q, &ps) < waiting_from(&q, &s))
					first = "a push reversed two sources";
			}
		}
		if (!*first)
			first = broken(&q);
	}
	is_str(first, "", "%u random calls from skewed sources (%u pushes): the invariants hold after each",
	       calls, pushes);
}

/* More places asked than there are: QUEUE_MAX, and the next refused. */
static void cap_clamped(void)
{
	static struct queue q;
	struct queue_waiter w = { 0 }, pushed;
	queue_init(&q, QUEUE_MAX + 100);
	is_int(q.cap, QUEUE_MAX, "a cap past QUEUE_MAX is QUEUE_MAX");
	queue_set_cap(&q, QUEUE_MAX * 2);
	is_int(q.cap, QUEUE_MAX, "...set later too");
	unsigned added = 0;
	for (unsigned i = 0; i < QUEUE_MAX + 10; i++) {
		struct sockaddr_in in = { .sin_family = AF_INET };
		in.sin_addr.s_addr = htonl(0x0d000000u | (i % 2));
		struct queue_source s;
		queue_source_of((struct sockaddr *)&in, sizeof(in), &s);
		added += queue_add(&q, &s, &w, &pushed) != QUEUE_FULL;
	}
	is_int(q.n, QUEUE_MAX, "...and no more than QUEUE_MAX wait (%u taken)", added);
	is_str(broken(&q), "", "...the invariants hold");
}

int main(void)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char got[256];
		run(cases[i].cap, cases[i].ops, got, sizeof(got));
		is_str(got, cases[i].want, "%s", cases[i].name);
		is_str(case_broke, "", "...the invariants hold after each call");
	}
	sources();
	passing();
	churn();
	random_calls();
	cap_clamped();
	return done_testing();
}
