/* SPDX-License-Identifier: Apache-2.0 */
/* Table tests for runtime/container.c: the RFC 3339 reader both backends use
 * for State.StartedAt and Health.Log[].End, and the list helpers. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "runtime/container.h"
#include "tests/lib/tap.h"

#define BAD INT64_MIN /* marks a case that must be refused */

static void test_parse_time(void)
{
	/* Expected values computed with Python's calendar.timegm. */
	static const struct {
		const char *in;
		int64_t want;
	} cases[] = {
		{ "2026-11-29T20:24:00.042535745Z", 1795983840042535745 },
		{ "2026-11-29T20:23:59.27961232Z", 1795983839279612320 },
		{ "2026-11-29T20:24:05Z", 1795983845000000000 },
		{ "2026-11-29T20:24:05.1Z", 1795983845100000000 },
		{ "2024-02-29T23:59:59.999999999Z", 1709251199999999999 },
		{ "2026-11-29T21:16:03.686068582+01:30", 1795981563686068582 },
		{ "2000-03-01T00:00:00-05:00", 951886800000000000 },
		{ "2000-02-29T19:00:00-05:00", 951868800000000000 },
		{ "1970-01-01T00:00:00Z", 0 },
		{ "1969-12-31T23:59:59.5Z", -500000000 },
		{ "0001-01-01T00:00:00Z", 0 }, /* Go's zero time.Time */
		{ "2262-01-01T00:00:00Z", 9214646400000000000 },
		{ "1678-01-01T00:00:00Z", -9214560000000000000 },
		/* Refused: garbage, out-of-range fields, out of int64 ns. */
		{ "", BAD },
		{ "garbage", BAD },
		{ "2026-11-29", BAD },
		{ "2026-11-29T20:24:05", BAD },        /* no zone */
		{ "2026-11-29 20:24:05Z", BAD },       /* space, not T */
		{ "2026-11-29T20:24:05.Z", BAD },      /* empty fraction */
		{ "2026-11-29T20:24:05.1234567890Z", BAD }, /* 10 digits */
		{ "2026-11-29T20:24:05Zjunk", BAD },
		{ "2026-13-01T00:00:00Z", BAD },
		{ "2026-00-01T00:00:00Z", BAD },
		{ "2026-02-29T00:00:00Z", BAD },       /* not a leap year */
		{ "1900-02-29T00:00:00Z", BAD },
		{ "2026-04-31T00:00:00Z", BAD },
		{ "2026-11-00T00:00:00Z", BAD },
		{ "2026-11-29T24:00:00Z", BAD },
		{ "2026-11-29T23:60:00Z", BAD },
		{ "2026-11-29T23:59:60Z", BAD },
		{ "2026-11-29T23:59:59+24:00", BAD },
		{ "2026-11-29T23:59:59+01:60", BAD },
		{ "2026-11-29T23:59:59+0100", BAD },
		{ "+2026-11-29T23:59:59Z", BAD },
		{ "-026-11-29T23:59:59Z", BAD },
		{ "0000-01-01T00:00:00Z", BAD },
		{ "2263-01-01T00:00:00Z", BAD },
		{ "1677-01-01T00:00:00Z", BAD },
		{ "0001-01-01T00:00:00.5Z", BAD },
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		int64_t ns = 42;
		int r = container_parse_time(cases[i].in, &ns);
		if (cases[i].want == BAD) {
			is_int(r, -EINVAL, "parse_time('%s') refused", cases[i].in);
		} else {
			ok(r == 0 && ns == cases[i].want, "parse_time('%s') = %lld", cases[i].in,
			   (long long)ns);
			if (r != 0 || ns != cases[i].want)
				printf("#   r=%d want %lld\n", r, (long long)cases[i].want);
		}
	}
	int64_t ns;
	is_int(container_parse_time(NULL, &ns), -EINVAL, "parse_time(NULL) refused");
}

/* Results must not depend on the process's time zone. */
static void test_parse_time_tz(void)
{
	int64_t a = 0, b = 1;
	setenv("TZ", "Asia/Kolkata", 1);
	container_parse_time("2026-11-29T20:24:00Z", &a);
	setenv("TZ", "America/Los_Angeles", 1);
	container_parse_time("2026-11-29T20:24:00Z", &b);
	unsetenv("TZ");
	ok(a == b && a == 1795983840000000000, "TZ does not change the result");
}

static void test_list(void)
{
	struct container_list l = { 0 };
	for (int i = 0; i < 100; i++) {
		struct container *c = container_list_add(&l);
		if (!c)
			break;
		c->id = strdup("abc");
		c->name = strdup("web");
		c->state = i % 2 ? strdup("running") : NULL;
		c->running = true;
	}
	is_int(l.n, 100, "100 containers appended");
	ok(l.cap >= l.n, "capacity covers the count");
	struct container *c = container_list_add(&l);
	ok(c && !c->id && !c->name && !c->state && !c->health && !c->running &&
	   !c->oneoff && c->started_at_ns == 0, "a new container is zeroed");
	container_free(c);
	container_free(c); /* idempotent: freed fields are NULL */
	container_free(NULL);
	container_list_free(&l);
	ok(l.v == NULL && l.n == 0 && l.cap == 0, "list emptied by container_list_free");
	container_list_free(&l);
	container_list_free(NULL);
	ok(1, "freeing twice and NULL is harmless");
}

/* A runtime listing absurd numbers of containers is refused, not followed. */
static void test_list_bound(void)
{
	_cleanup_(container_list_free) struct container_list l = { 0 };
	size_t added = 0;
	while (added < 200000 && container_list_add(&l))
		added++;
	is_int((long long)added, 100000, "the list stops at 100000 containers");
	ok(l.cap == 100000, "and holds no room past them");
}

int main(void)
{
	test_parse_time();
	test_parse_time_tz();
	test_list();
	test_list_bound();
	return done_testing();
}
