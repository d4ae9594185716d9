/* SPDX-License-Identifier: Apache-2.0 */
#include "rpc/victim.h"

/* The earlier of two times, -1 being none. */
static int64_t earlier(int64_t a, int64_t b)
{
	return a < 0 || (b >= 0 && b < a) ? b : a;
}

/* Whether the victim is in the reserve of the oldest links: fewer older
 * connected links than the reserve holds. */
static bool in_reserve(const struct victim_link *links, size_t n, int victim, unsigned slots)
{
	unsigned older = 0;
	for (size_t i = 0; i < n; i++)
		if (!links[i].connecting && links[i].start < links[victim].start)
			older++;
	return keep_reserved(older, slots);
}

/* When a link younger than the victim (or as young), or one connecting,
 * may have settled: the reserve's victim is spared until then. -1: none
 * may. */
static int64_t younger_settle(const struct victim_link *links, size_t n, int victim, int64_t now)
{
	int64_t at = -1;
	for (size_t i = 0; i < n; i++) {
		if (links[i].connecting)
			at = earlier(at, now + KEEP_SETTLE_MS);
		else if (links[i].rule != KEEP_NONE && links[i].start >= links[victim].start)
			at = earlier(at, links[i].look_at);
	}
	return at;
}

void victim_choose(const struct victim_link *links, size_t n, unsigned slots, int64_t now,
		   struct victim_choice *out)
{
	*out = (struct victim_choice){ .victim = -1, .look_at = -1 };
	for (size_t i = 0; i < n; i++) {
		const struct victim_link *l = &links[i];
		if (l->connecting) {
			out->kept[KEEP_NONE]++;
			out->look_at = earlier(out->look_at, now + KEEP_SETTLE_MS);
		} else if (l->rule != KEEP_NONE) {
			out->kept[l->rule]++;
			out->look_at = earlier(out->look_at, l->look_at);
		} else if (out->victim < 0 || l->start > links[out->victim].start) {
			out->victim = (int)i;
		}
	}
	if (out->victim >= 0)
		out->look_at = in_reserve(links, n, out->victim, slots)
				       ? younger_settle(links, n, out->victim, now)
				       : -1;
}

int64_t victim_wait_until(const struct victim_choice *c, int64_t since, int64_t wait_ms,
			  int64_t now)
{
	int64_t until = since + wait_ms;
	if (c->look_at < 0 || now >= until)
		return -1;
	return c->look_at < until ? c->look_at : until;
}
