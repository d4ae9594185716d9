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

static void source(char letter, struct queue_source *s)
{
	struct sockaddr_in in = { .sin_family = AF_INET };
	in.sin_addr.s_addr = htonl(0x0a000000u | (unsigned char)letter);
	queue_source_of((struct sockaddr *)&in, sizeof(in), s);
}

static void run(unsigned cap, const char *ops, char *got, size_t n)
{
	static struct queue q;
	queue_init(&q, cap);
	int fd = 0;
	size_t used = 0;
	got[0] = '\0';
	for (const char *o = ops; *o; o++) {
		char one[16];
		struct queue_waiter w, pushed;
		if (*o == '.') {
			bool any = queue_first(&q, &w);
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
		while (queue_first(&q, &w)) {
			queue_drop_first(&q);
			served++;
		}
	}
	is_int(q.n, 0, "churn: the queue empty after");
	is_int(added, 3 * QUEUE_MAX, "churn: QUEUE_MAX places each round, the rest refused");
	is_int(served, 3 * QUEUE_MAX, "churn: every one queued served");
}

int main(void)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char got[256];
		run(cases[i].cap, cases[i].ops, got, sizeof(got));
		is_str(got, cases[i].want, "%s", cases[i].name);
	}
	sources();
	churn();
	return done_testing();
}
