/* SPDX-License-Identifier: Apache-2.0 */
/* Which relayed connection a newcomer takes the slot of, when every slot is
 * taken (docs/design.md §3.1, docs/threat-model.md "Who loses a slot to a
 * newcomer"). One pure function over a table of the links, each as the
 * relay saw it a moment ago: no sockets, no clock, no locks; a test is one
 * row (the links, then the expected choice).
 *
 * The rule (rpc/keep.h says what keeps a link):
 *   1. The youngest idle link is the victim: a burst of newcomers that are
 *      answered and sit makes room from its own links first.
 *   2. Unless it is in the reserve of the oldest links (keep_reserved) and
 *      links younger than it are connecting, moving bytes or awaiting their
 *      answers: then the newcomer looks again when the first of those may
 *      have settled, and takes one of them; the reserve's link only once
 *      its wait is over (the caller's RELAY_QUEUE_WAIT_MS).
 *   3. With no link idle, it looks again when the first may have settled
 *      (or KEEP_SETTLE_MS from now while one connects, moves or awaits);
 *      when none may, it is refused. A link still connecting is never a
 *      victim. */
#ifndef HEALTHD_VICTIM_H
#define HEALTHD_VICTIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rpc/keep.h"

/* A link, as the choice sees it. */
struct victim_link {
	bool connecting;     /* handed over or connecting: never a victim */
	enum keep_rule rule; /* what keeps it (KEEP_NONE: idle); not for connecting */
	int64_t start;       /* when it connected: the larger, the younger */
	int64_t look_at;     /* when it may become idle, for a newcomer's look
			      * again; -1: not before a minute (a stream) */
};

struct victim_choice {
	int victim;       /* its index in the table, or -1 */
	int64_t look_at;  /* -1: take the victim now (or, with none, refuse);
			   * else look again then, unless the newcomer's wait
			   * is over */
	unsigned kept[4]; /* what keeps the others, by enum keep_rule;
			   * KEEP_NONE counts the connecting */
};

/* links[0..n), in the order the relay keeps them (least recently moved
 * first: among idle links of one age, the first wins). slots: the relay's
 * slots (the reserve's size); now: the relay's time of this turn. */
void victim_choose(const struct victim_link *links, size_t n, unsigned slots, int64_t now,
		   struct victim_choice *out);
/* When the first newcomer, queued at since, looks again for a slot, by
 * the choice c made at now: -1 when it does not wait (it takes the victim,
 * or is refused): nothing may settle, or its wait (wait_ms) is over. */
int64_t victim_wait_until(const struct victim_choice *c, int64_t since, int64_t wait_ms,
			  int64_t now);

#endif
