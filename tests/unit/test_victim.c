/* SPDX-License-Identifier: Apache-2.0 */
/* Table tests for the victim choice (rpc/victim.c): which relayed
 * connection a newcomer takes the slot of, when to look again, and what
 * kept the others. A row: the slots, the links in the relay's order, and
 * what must come out. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rpc/victim.h"
#include "tests/lib/tap.h"

#define NOW 10000

/* links: space-separated, each its client's capital letter (A when none),
 * a letter and its start (when it connected), then @T for when it may
 * settle (its look_at; -1 without) and #N for the bytes it moved:
 *   i idle, m moving, a awaiting, s stream, c connecting (no start),
 *   f handed over and not seen yet (not in the table, only in its
 *   client's count).
 * The newcomer is of client A unless the row says. want: "vN" (the
 * victim, by index) or "v-", then "lT" (look_at) or "l-", then kept as
 * "k<connecting>,<moving>,<awaiting>,<streams>", then " own" or
 * " largest" when the choice was made among one client's links, and " cut"
 * when the victim is not idle. */
struct row {
	const char *name;
	unsigned slots;
	const char *links;
	const char *want;
	char newcomer;
};

static const struct row cases[] = {
	{ "nothing to take", 512, "", "v- l- k0,0,0,0" },
	{ "the youngest idle link", 512, "i100 i300 i200", "v1 l- k0,0,0,0" },
	{ "...the first of two as young", 512, "i100 i300 i300", "v1 l- k0,0,0,0" },
	{ "...not a moving, awaiting or stream link younger than it (the idle one, in the reserve of 16, waits for them)",
	  512, "i100 m900@10050 a800@10100 s700", "v0 l10050 k0,1,1,1" },
	{ "a link connecting is never taken, and counted", 512, "c i100", "v1 l10100 k1,0,0,0" },
	{ "none idle: look again when the first may settle", 512, "m900@10050 a800@10100",
	  "v- l10050 k0,1,1,0" },
	{ "none idle, one connecting: look again a settle from now", 512, "a800@10500 c",
	  "v- l10100 k1,0,1,0" },
	{ "only streams (kept a minute): refused now", 512, "s100 s200", "v- l- k0,0,0,2" },
	{ "16 slots keep 4 in reserve: the youngest idle with 3 older waits for a younger link",
	  16, "i1 i2 i3 i4 a5@10300", "v3 l10300 k0,0,1,0" },
	{ "...with 4 older it is not in the reserve: taken now", 16, "i1 i2 i3 i4 i5 a6@10300",
	  "v4 l- k0,0,1,0" },
	{ "...in the reserve, nothing younger in flight: taken now", 16, "i1 i2 i3 s9",
	  "v2 l- k0,0,0,1" },
	{ "...in the reserve, an older link in flight does not make it wait", 16,
	  "a1@10200 i2 i3", "v2 l- k0,0,1,0" },
	{ "...in the reserve, a link connecting: look again a settle from now", 16, "i1 i2 c",
	  "v1 l10100 k1,0,0,0" },
	{ "...in the reserve, a link as young in flight counts as younger", 16,
	  "i1 i2 m2@10020", "v1 l10020 k0,1,0,0" },
	{ "...an idle link as young does not spare it, whatever its time says", 16, "i1 i2 i2@10050",
	  "v1 l- k0,0,0,0" },
	{ "...the earliest of the younger links", 16, "i1 a7@10400 m8@10030 a9@10200",
	  "v0 l10030 k0,1,2,0" },
	{ "...links connecting are not older: still in the reserve", 16, "c c i1 i2 i3 i4 a9@10300",
	  "v5 l10100 k2,0,1,0" },
	{ "a reserve of a quarter under 16 slots: 4 slots keep one", 4, "i1 i2 a3@10200",
	  "v1 l- k0,0,1,0" },
	{ "...the oldest idle of 4 slots, younger one awaiting: waits", 4, "i1 a3@10200",
	  "v0 l10200 k0,0,1,0" },
	/* Shares: the slots divided by the clients holding links. */
	{ "one client holding every slot is within its share: the rule over all", 4,
	  "i1 i2 i3 i4", "v3 l- k0,0,0,0" },
	{ "a newcomer within its share takes from the client over its: its youngest idle", 4,
	  "Ai1 Ai2 Ai3 Bi4", "v2 l- k0,0,0,0 largest", 'B' },
	{ "a newcomer over its share takes its own youngest idle, not another's younger one", 4,
	  "Ai1 Ai2 Ai3 Bi4", "v2 l- k0,0,0,0 own", 'A' },
	{ "...its own all awaiting: it waits for them, another's idle link untouched", 4,
	  "Aa1@10300 Aa2@10200 Aa3@10250 Bi4", "v- l10200 k0,0,3,0 own", 'A' },
	{ "...its own all streams: refused, another's idle link untouched", 4,
	  "As1 As2 As3 Bi4", "v- l- k0,0,0,3 own", 'A' },
	{ "a newcomer of a client holding none, every slot awaiting one client's answers: "
	  "its link that moved the fewest bytes is cut, the youngest of those",
	  4, "Aa1#500 Aa2#100 Aa3#100 Aa4#900", "v2 l- k0,0,0,0 largest cut", 'B' },
	{ "...that client's idle link before any in flight", 4, "Aa4#1 Ai1 Ai2 As3",
	  "v2 l- k0,0,0,0 largest", 'B' },
	{ "...a stream of it cut like any link in flight", 4, "As1#50 Aa2#80 Am3#90 As4#900",
	  "v0 l- k0,0,0,0 largest cut", 'B' },
	{ "...that client's links all connecting: look again a settle from now", 2, "Ac Ac",
	  "v- l10100 k2,0,0,0 largest", 'B' },
	{ "...a link of another client within its share is never taken", 4, "Ai1 Ai2 Ai3 Ci9",
	  "v2 l- k0,0,0,0 largest", 'B' },
	{ "a newcomer holding none counts as a client: 3 and 1 of 4 with it, 3 is over", 4,
	  "Aa1 Aa2 Aa3 Bi4", "v2 l- k0,0,0,0 largest cut", 'C' },
	{ "the largest of two as large is the first: A before B", 4, "Bi3 Ai1 Ai2 Bi4",
	  "v2 l- k0,0,0,0 largest", 'C' },
	{ "the largest found whatever its number: B's youngest idle, not A's younger one", 4,
	  "Bi2 Bi3 Bi4 Ai9", "v2 l- k0,0,0,0 largest", 'C' },
	{ "...of its idle links the youngest, whatever bytes they moved", 2, "Ai1#10 Ai2#900",
	  "v1 l- k0,0,0,0 largest", 'B' },
	{ "two clients at their share: the newcomer of one, the rule over all links", 4,
	  "Ai1 Ai2 Bi3 Bi4", "v3 l- k0,0,0,0", 'A' },
	{ "...and of the other the same", 4, "Ai1 Ai2 Bi3 Bi4", "v3 l- k0,0,0,0", 'B' },
	{ "links handed over count for their client's share: A with 2 and 1 fresh of 4 is over",
	  4, "Ai1 Ai2 Af Bi4", "v1 l- k1,0,0,0 own", 'A' },
	{ "...its own links all handed over and not seen yet: it looks again, not refused", 4,
	  "Af Af Af Bi4", "v- l10100 k3,0,0,0 own", 'A' },
	{ "...the largest's all handed over and not seen yet: look again", 4, "Af Af Af Bi4",
	  "v- l10100 k3,0,0,0 largest", 'C' },
	{ "links handed over and not seen yet are younger than any: the reserve's victim waits", 16,
	  "i1 f", "v0 l10100 k1,0,0,0" },
	{ "...without the fresh one A is within its share", 4, "Ai1 Ai2 Bi3 Bi4",
	  "v3 l- k0,0,0,0", 'A' },
	{ "over its share, the reserve is of its own oldest: its youngest idle, third of its own, waits for its links in flight",
	  16, "Bi1 Bi2 Bi3 Bi4 Bi5 Bi6 Ai10 Ai11 Ai12 Aa13@10300 Aa14@10200 Aa15@10400 Aa16@10500 Aa17@10600 Aa18@10700 Aa19@10800",
	  "v8 l10200 k0,0,7,0 own", 'A' },
};

#define CLIENTS 26

static size_t parse(const char *s, struct victim_link *out, unsigned held[CLIENTS])
{
	size_t n = 0;
	memset(held, 0, CLIENTS * sizeof(held[0]));
	while (*s) {
		while (*s == ' ')
			s++;
		if (!*s)
			break;
		struct victim_link l = { .look_at = -1 };
		unsigned client = 0;
		if (*s >= 'A' && *s <= 'Z')
			client = (unsigned)(*s++ - 'A');
		held[client]++;
		l.client = client;
		char kind = *s++;
		l.connecting = kind == 'c';
		l.rule = kind == 'm' ? KEEP_MOVING : kind == 'a' ? KEEP_AWAITING
			 : kind == 's' ? KEEP_STREAM : KEEP_NONE;
		char *end;
		if (*s >= '0' && *s <= '9') {
			l.start = strtoll(s, &end, 10);
			s = end;
		}
		if (*s == '@') {
			l.look_at = strtoll(s + 1, &end, 10);
			s = end;
		}
		if (*s == '#') {
			l.moved = strtoull(s + 1, &end, 10);
			s = end;
		}
		if (kind != 'f')
			out[n++] = l;
	}
	return n;
}

static void show(const struct victim_choice *c, char *buf, size_t n)
{
	char v[16] = "v-", l[32] = "l-";
	if (c->victim >= 0)
		snprintf(v, sizeof(v), "v%d", c->victim);
	if (c->look_at >= 0)
		snprintf(l, sizeof(l), "l%lld", (long long)c->look_at);
	snprintf(buf, n, "%s %s k%u,%u,%u,%u%s%s", v, l, c->kept[KEEP_NONE], c->kept[KEEP_MOVING],
		 c->kept[KEEP_AWAITING], c->kept[KEEP_STREAM],
		 c->pool == VICTIM_OWN ? " own" : c->pool == VICTIM_LARGEST ? " largest" : "",
		 c->cut ? " cut" : "");
}

/* The wait: since the newcomer came, a choice's look_at, now; -1 or when. */
static const struct {
	const char *name;
	int64_t since, look_at, now, want;
} waits[] = {
	{ "nothing may settle: no wait", 9500, -1, NOW, -1 },
	{ "a link may settle soon: look again then", 9500, 10100, NOW, 10100 },
	{ "...later than the wait's end: at the wait's end", 9500, 10600, NOW, 10500 },
	{ "the wait over: no wait, whatever may settle", 9000, 10100, NOW, -1 },
	{ "...a ms before its end: look again at the end", 9001, 10100, NOW, 10001 },
};

int main(void)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct victim_link links[32];
		unsigned held[CLIENTS];
		size_t n = parse(cases[i].links, links, held);
		struct victim_choice c;
		char got[96];
		struct victim_ask ask = { .newcomer = cases[i].newcomer ? (unsigned)(cases[i].newcomer - 'A') : 0,
					  .held = held, .clients = CLIENTS, .slots = cases[i].slots,
					  .now = NOW };
		victim_choose(links, n, &ask, &c);
		show(&c, got, sizeof(got));
		is_str(got, cases[i].want, "%s", cases[i].name);
	}
	for (size_t i = 0; i < sizeof(waits) / sizeof(waits[0]); i++) {
		struct victim_choice c = { .victim = -1, .look_at = waits[i].look_at };
		is_int(victim_wait_until(&c, waits[i].since, 1000, NOW), waits[i].want, "%s",
		       waits[i].name);
	}
	return done_testing();
}
