/* SPDX-License-Identifier: Apache-2.0 */
#include "base/drain.h"

enum drain_told drain_poller_told(const struct poller *p, uint64_t since_seq,
				  int64_t window_start_ms)
{
	/* drain_seq numbers the answer: one taken before the drain began
	 * (from an earlier drain, or the old snapshot) is not this drain's. */
	if (p->drain_seq > since_seq)
		return DRAIN_TOLD;
	return p->last_seen_ms >= window_start_ms ? DRAIN_NOT_TOLD : DRAIN_NOT_RECENT;
}

bool drain_everyone_told(const struct pollers_table *t, uint64_t since_seq,
			 int64_t window_start_ms, struct drain_count *n)
{
	struct drain_count c = { 0, 0 };
	for (size_t i = 0; i < t->n; i++) {
		enum drain_told d = drain_poller_told(&t->v[i], since_seq, window_start_ms);
		c.told += d == DRAIN_TOLD;
		c.not_told += d == DRAIN_NOT_TOLD;
	}
	if (n)
		*n = c;
	return c.not_told == 0;
}
