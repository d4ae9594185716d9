/* SPDX-License-Identifier: Apache-2.0 */
/* Table tests for which relayed connections a newcomer may take the slot of
 * (rpc/keep.c), by the history of bytes each way, and for the relay's fd
 * budget (rpc/relay.c, relay_budget): what it holds at once fits the limit. */
#include <stdbool.h>
#include <stdint.h>

#include "rpc/keep.h"
#include "rpc/relay.h"
#include "tests/lib/tap.h"

/* A link connected at 1000 ms; its bytes, "u" up from the client or "d"
 * down from the guest agent, each at a time (and how many: 1 unless
 * said); then the rule at `at`. */
struct move {
	char way;
	int64_t t;
	uint64_t bytes;
};

static const struct {
	const char *name;
	struct move moves[10];
	bool held;
	int64_t at;
	enum keep_rule want;
	int64_t settles; /* keep_settles_at; -1: none */
} cases[] = {
	{ "a request answered, quiet for a second: idle", { { 'u', 1000 }, { 'd', 1005 } }, false,
	  2005, KEEP_NONE, -1 },
	{ "...quiet for 99 ms: still settling", { { 'u', 1000 }, { 'd', 1005 } }, false, 1104,
	  KEEP_MOVING, 1105 },
	{ "...quiet for 100 ms: idle", { { 'u', 1000 }, { 'd', 1005 } }, false, 1105, KEEP_NONE,
	  -1 },
	{ "...with bytes still in a pipe: moving however long", { { 'u', 1000 }, { 'd', 1005 } },
	  true, 9000, KEEP_MOVING, -1 },
	{ "...bytes in a pipe just after the answer: no time to settle (not till they go)",
	  { { 'u', 1000 }, { 'd', 1005 } }, true, 1050, KEEP_MOVING, -1 },
	{ "a request not answered yet: awaiting", { { 'u', 1000 } }, false, 5000, KEEP_AWAITING, -1 },
	{ "...for 59.9 s: awaiting", { { 'u', 1000 } }, false, 60999, KEEP_AWAITING, -1 },
	{ "...for 60 s: idle (nginx's proxy_read_timeout)", { { 'u', 1000 } }, false, 61000,
	  KEEP_NONE, -1 },
	{ "a body coming after part of an answer (100 Continue): kept as a stream while it moves",
	  { { 'u', 1000 }, { 'd', 1005 }, { 'u', 1500 } }, false, 3000, KEEP_STREAM, -1 },
	{ "a body trickled a byte every 10 s: idle 60 s after its request began",
	  { { 'u', 1000 }, { 'u', 11000 }, { 'u', 21000 }, { 'u', 31000 }, { 'u', 41000 },
	    { 'u', 51000 }, { 'u', 61000 } },
	  false, 61500, KEEP_NONE, -1 },
	{ "a followed log: the second line 4 s after the first: a stream",
	  { { 'u', 1000 }, { 'd', 1010 }, { 'd', 5010 } }, false, 8000, KEEP_STREAM, -1 },
	{ "...before its second line: idle", { { 'u', 1000 }, { 'd', 1010 } }, false, 4000,
	  KEEP_NONE, -1 },
	{ "...a stream quiet for 60 s: idle", { { 'u', 1000 }, { 'd', 1010 }, { 'd', 5010 } },
	  false, 65010, KEEP_NONE, -1 },
	{ "an answer in two pieces 50 ms apart is no stream",
	  { { 'u', 1000 }, { 'd', 1010 }, { 'd', 1060 } }, false, 3000, KEEP_NONE, -1 },
	{ "a WebSocket: upgrade, then a ping 25 s later, answered: a stream",
	  { { 'u', 1000 }, { 'd', 1010 }, { 'u', 26000 }, { 'd', 26001 } }, false, 50000,
	  KEEP_STREAM, -1 },
	{ "...moving its pong: named a stream, not worth waiting for",
	  { { 'u', 1000 }, { 'd', 1010 }, { 'u', 26000 }, { 'd', 26001 } }, false, 26050,
	  KEEP_STREAM, -1 },
	{ "...before its first ping: idle", { { 'u', 1000 }, { 'd', 1010 } }, false, 20000,
	  KEEP_NONE, -1 },
	{ "a kept-alive connection's second request, answered: a stream",
	  { { 'u', 1000 }, { 'd', 1002 }, { 'u', 3000 }, { 'd', 3002 } }, false, 4000, KEEP_STREAM,
	  -1 },
	{ "a request sent in pieces is one turn",
	  { { 'u', 1000 }, { 'u', 1500 }, { 'd', 1600 } }, false, 3000, KEEP_NONE, -1 },
	{ "nothing moved since the connect (a head was relayed at once): idle after settling", { },
	  false, 1100, KEEP_NONE, -1 },
	{ "an upload of 1 MB, its first request, 90 s on: awaiting (a second per 500 bytes)",
	  { { 'u', 1000, 300 }, { 'u', 30000, 500000 }, { 'u', 60000, 500000 } }, false, 91000,
	  KEEP_AWAITING, -1 },
	{ "...30000 bytes in it: 60 s of its own, then 60 s more: awaiting at 119 s",
	  { { 'u', 1000, 300 }, { 'u', 30000, 29700 } }, false, 120999, KEEP_AWAITING, -1 },
	{ "...and idle at 120 s",
	  { { 'u', 1000, 300 }, { 'u', 30000, 29700 } }, false, 121000, KEEP_NONE, -1 },
	{ "a body of 7 bytes trickled over a minute gets no more: idle at 60 s",
	  { { 'u', 1000 }, { 'u', 11000 }, { 'u', 21000 }, { 'u', 31000 }, { 'u', 41000 },
	    { 'u', 51000 }, { 'u', 60000 } },
	  false, 61000, KEEP_NONE, -1 },
	{ "...499 bytes in it: none either",
	  { { 'u', 1000, 300 }, { 'u', 2000, 199 } }, false, 61000, KEEP_NONE, -1 },
	{ "...500: a second more", { { 'u', 1000, 300 }, { 'u', 2000, 200 } }, false, 61999,
	  KEEP_AWAITING, -1 },
	{ "a WebSocket whose server is quiet, its client speaking every 25 s: a stream at 2 min",
	  { { 'u', 1000 }, { 'd', 1010 }, { 'u', 26000 }, { 'u', 51000 }, { 'u', 76000 },
	    { 'u', 101000 } },
	  false, 120000, KEEP_STREAM, -1 },
	{ "...its client silent for a minute since: idle",
	  { { 'u', 1000 }, { 'd', 1010 }, { 'u', 26000 }, { 'u', 51000 }, { 'u', 76000 },
	    { 'u', 101000 } },
	  false, 161000, KEEP_NONE, -1 },
	{ "the bytes of a second turn count from its start: the first turn's are not carried",
	  { { 'u', 1000, 100000 }, { 'd', 1500 }, { 'u', 70000, 10 } }, false, 140000, KEEP_NONE,
	  -1 },
	{ "a kept-alive connection's second request trickled a byte a minute: held, a stream",
	  { { 'u', 1000 }, { 'd', 1002 }, { 'u', 3000 }, { 'u', 50000 }, { 'u', 100000 } }, false,
	  150000, KEEP_STREAM, -1 },
};

static void replay(struct keep *k, const struct move *m)
{
	keep_start(k, 1000);
	for (int i = 0; i < 10 && m[i].way; i++)
		keep_moved(k, m[i].way == 'u', m[i].bytes ? m[i].bytes : 1, m[i].t);
}

/* fds, and what must come out: slots and queue. */
static const struct {
	unsigned long fds;
	unsigned max, slots, queue;
} budgets[] = {
	{ 0, 512, 0, 0 },
	{ 16, 512, 0, 0 },         /* the pipe pool's alone */
	{ 16 + 7, 512, 1, 1 },     /* one slot and one place */
	{ 16 + 6, 512, 0, 6 },     /* not enough for a slot and its place */
	{ 2944, 512, 418, 420 },   /* ulimit -n 4096: 4096 - 1024 - 64 - 64 */
	{ 16 + 512 * 7, 512, 512, 512 },
	{ 16 + 512 + 512 * 6, 512, 512, 512 }, /* what relay_fds_wanted asks */
	{ 100000, 512, 512, 512 },
	{ 100000, 8, 8, 512 },
	{ 5000, 1024, 745, 512 },
};

/* Links older than an idle one, slots: in the reserve of the oldest. */
static const struct {
	unsigned older, slots;
	bool want;
} reserves[] = {
	{ 0, 512, true },  /* the oldest link */
	{ 15, 512, true }, /* the last of the oldest 16: a 32nd */
	{ 16, 512, false },
	{ 511, 512, false },
	{ 3, 100, true }, /* a 32nd is 3: at least 4 */
	{ 4, 100, false },
	{ 3, 16, true },
	{ 4, 16, false },
	{ 0, 4, true }, /* fewer than 16 slots: a quarter */
	{ 1, 4, false },
	{ 0, 3, false }, /* fewer than four slots: none */
	{ 0, 0, false },
};

int main(void)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct keep k;
		replay(&k, cases[i].moves);
		is_str(keep_rule_name(keep_rule(&k, cases[i].held, cases[i].at)),
		       keep_rule_name(cases[i].want), "%s", cases[i].name);
		is_int(keep_settles_at(&k, cases[i].held, cases[i].at), cases[i].settles,
		       "%s: settles at", cases[i].name);
	}
	for (size_t i = 0; i < sizeof(budgets) / sizeof(budgets[0]); i++) {
		unsigned slots, queue;
		relay_budget(budgets[i].fds, budgets[i].max, &slots, &queue);
		is_int(slots, budgets[i].slots, "%lu fds, at most %u slots: slots", budgets[i].fds,
		       budgets[i].max);
		is_int(queue, budgets[i].queue, "...and places in the queue");
		ok((unsigned long)slots * RELAY_FDS_PER_CONN + queue + 2 * RELAY_PIPE_POOL <=
			   (budgets[i].fds > 16 ? budgets[i].fds : 16),
		   "...all of it held at once fits in %lu fds", budgets[i].fds);
	}
	for (size_t i = 0; i < sizeof(reserves) / sizeof(reserves[0]); i++)
		ok(keep_reserved(reserves[i].older, reserves[i].slots) == reserves[i].want,
		   "%u older of %u slots: %s", reserves[i].older, reserves[i].slots,
		   reserves[i].want ? "in the reserve" : "not in the reserve");
	return done_testing();
}
