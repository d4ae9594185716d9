/* SPDX-License-Identifier: Apache-2.0 */
/* The drain's "everyone told" rule (base/drain.h) as a table: answers noted
 * in the pollers table before and after the drain began, then the question
 * "has every address seen within the window been served the drain's verdict
 * since it began" asked at a given time. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#include "base/drain.h"
#include "base/pollers.h"
#include "tests/lib/tap.h"

/* An answer to 127.0.0.<addr> at time ms, the drain's verdict or not;
 * addr 0 marks the moment the drain began. */
struct ev {
	unsigned addr;
	int64_t ms;
	bool draining;
};
#define DRAIN_BEGINS { 0, 0, false }
#define END { 999, 0, false }

struct rule_case {
	const char *name;
	struct ev ev[12];
	int64_t now_ms, window_ms;
	bool all;
	size_t told, not_told;
};

static const struct rule_case cases[] = {
	{ "none recent: nothing to wait for",
	  { { 1, 1000, false }, { 2, 2000, false }, DRAIN_BEGINS, END },
	  100000, 30000, true, 0, 0 },
	{ "no poller ever", { DRAIN_BEGINS, END }, 100000, 30000, true, 0, 0 },
	{ "all told",
	  { { 1, 90000, false }, { 2, 90100, false }, DRAIN_BEGINS, { 1, 90200, true },
	    { 2, 90300, true }, END },
	  90400, 30000, true, 2, 0 },
	{ "one late",
	  { { 1, 90000, false }, { 2, 90100, false }, DRAIN_BEGINS, { 1, 90200, true }, END },
	  90300, 30000, false, 1, 1 },
	{ "one that stopped polling, still within the window",
	  { { 1, 80000, false }, { 3, 85000, false }, DRAIN_BEGINS, { 1, 90200, true }, END },
	  95000, 30000, false, 1, 1 },
	{ "one that stopped polling, out of the window by now",
	  { { 1, 80000, false }, { 3, 50000, false }, DRAIN_BEGINS, { 1, 90200, true }, END },
	  90300, 30000, true, 1, 0 },
	{ "an address that appears during the drain, told",
	  { { 1, 90000, false }, DRAIN_BEGINS, { 1, 90200, true }, { 4, 90250, true }, END },
	  90300, 30000, true, 2, 0 },
	{ "an address that appears during the drain, served the old verdict",
	  /* It took the snapshot before the swap: not told. */
	  { { 1, 90000, false }, DRAIN_BEGINS, { 1, 90200, true }, { 4, 90250, false }, END },
	  90300, 30000, false, 1, 1 },
	{ "served healthy:false before the drain is not told",
	  { { 1, 90000, false }, { 2, 90000, false }, DRAIN_BEGINS, { 2, 90100, true }, END },
	  90300, 30000, false, 1, 1 },
	{ "told by an earlier drain is not told by this one",
	  { { 1, 90000, true }, { 2, 90000, true }, DRAIN_BEGINS, { 2, 90100, true }, END },
	  90300, 30000, false, 1, 1 },
	{ "told, then polled again with a normal answer (resumed) still told",
	  { { 1, 90000, false }, DRAIN_BEGINS, { 1, 90100, true }, { 1, 90200, false }, END },
	  90300, 30000, true, 1, 0 },
	{ "a short window",
	  { { 1, 89000, false }, { 2, 90250, false }, DRAIN_BEGINS, { 2, 90300, true }, END },
	  90400, 1000, true, 1, 0 },
};

static struct pollers_table table;

int main(void)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct rule_case *c = &cases[i];
		memset(&table, 0, sizeof(table));
		uint64_t since_seq = 0;
		for (const struct ev *e = c->ev; e->addr != 999; e++) {
			if (e->addr == 0) {
				since_seq = table.seq;
				continue;
			}
			struct sockaddr_in sa = { .sin_family = AF_INET,
						  .sin_addr.s_addr = htonl(0x7f000000u + e->addr) };
			struct poller_addr a;
			poller_addr_from((struct sockaddr *)&sa, &a);
			pollers_table_note(&table, &a, false, e->draining, e->ms);
		}
		struct drain_count n = { 99, 99 };
		bool all = drain_everyone_told(&table, since_seq, c->now_ms - c->window_ms, &n);
		is_int(all, c->all, "%s: everyone told", c->name);
		is_int(n.told, c->told, "%s: told", c->name);
		is_int(n.not_told, c->not_told, "%s: not told", c->name);
	}
	return done_testing();
}
