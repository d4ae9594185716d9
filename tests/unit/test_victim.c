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

/* links: space-separated, each a letter and its start (when it connected),
 * then @T for when it may settle (its look_at; -1 without):
 *   i idle, m moving, a awaiting, s stream, c connecting (no start).
 * want: "vN" (the victim, by index) or "v-", then "lT" (look_at) or "l-",
 * then kept as "k<connecting>,<moving>,<awaiting>,<streams>". */
static const struct {
	const char *name;
	unsigned slots;
	const char *links;
	const char *want;
} cases[] = {
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
	{ "...the earliest of the younger links", 16, "i1 a7@10400 m8@10030 a9@10200",
	  "v0 l10030 k0,1,2,0" },
	{ "...links connecting are not older: still in the reserve", 16, "c c i1 i2 i3 i4 a9@10300",
	  "v5 l10100 k2,0,1,0" },
	{ "a reserve of a quarter under 16 slots: 4 slots keep one", 4, "i1 i2 a3@10200",
	  "v1 l- k0,0,1,0" },
	{ "...the oldest idle of 4 slots, younger one awaiting: waits", 4, "i1 a3@10200",
	  "v0 l10200 k0,0,1,0" },
};

static size_t parse(const char *s, struct victim_link *out)
{
	size_t n = 0;
	while (*s) {
		while (*s == ' ')
			s++;
		if (!*s)
			break;
		struct victim_link l = { .look_at = -1 };
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
	snprintf(buf, n, "%s %s k%u,%u,%u,%u", v, l, c->kept[KEEP_NONE], c->kept[KEEP_MOVING],
		 c->kept[KEEP_AWAITING], c->kept[KEEP_STREAM]);
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
		size_t n = parse(cases[i].links, links);
		struct victim_choice c;
		char got[96];
		victim_choose(links, n, cases[i].slots, NOW, &c);
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
