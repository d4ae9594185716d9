/* SPDX-License-Identifier: Apache-2.0 */
/* Which relayed connection a newcomer takes the slot of, when every slot is
 * taken (docs/design/front.md, docs/threat-model.md "Who loses a slot to a
 * newcomer"). One pure function over a table of the links, each as the
 * relay saw it a moment ago: no sockets, no clock, no locks; a test is one
 * row (the links, then the expected choice).
 *
 * A client's share (issue 43): the slots divided by the clients holding
 * links, the newcomer's among them. A client is the address in a
 * connection's PROXY header (rpc/clients.h); without headers, its peer's.
 *   - A newcomer whose client holds more than its share takes one of its
 *     own client's links by the rule below, or is refused: never a link of
 *     another client.
 *   - A newcomer whose client holds its share or less takes a link of the
 *     client holding the most, when that client holds more than its share:
 *     its youngest idle link; with none idle, its link in flight (moving,
 *     awaiting, a stream) that has moved the fewest bytes, the youngest of
 *     those, which is reset: that client was over its share; a link
 *     connecting only, never.
 *   - Otherwise (one client, as every connection through a gateway that
 *     sends no header is) the rule below over every link.
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
	unsigned client;     /* its client's number (below struct victim_ask's clients) */
	bool connecting;     /* handed over or connecting: never a victim */
	enum keep_rule rule; /* what keeps it (KEEP_NONE: idle); not for connecting */
	int64_t start;       /* when it connected: the larger, the younger */
	int64_t look_at;     /* when it may become idle, for a newcomer's look
			      * again; -1: not before a minute (a stream) */
	uint64_t moved;      /* bytes it moved, both ways */
};

/* Who asks, and how the slots are shared. */
struct victim_ask {
	unsigned newcomer;    /* its client's number */
	const unsigned *held; /* [clients]: the links each client holds, those
			       * handed over and not yet in the table included */
	unsigned clients;
	unsigned slots;       /* the relay's slots: the shares' and the reserve's size */
	int64_t now;          /* the relay's time of this turn */
};

/* Whose links the choice was made among. */
enum victim_pool {
	VICTIM_ALL,    /* every link: no client over its share, or one client */
	VICTIM_OWN,    /* the newcomer's client's: it holds more than its share */
	VICTIM_LARGEST, /* the client holding the most, over its share */
};

struct victim_choice {
	int victim;       /* its index in the table, or -1 */
	bool cut;         /* the victim is not idle (VICTIM_LARGEST only) */
	enum victim_pool pool;
	int64_t look_at;  /* -1: take the victim now (or, with none, refuse);
			   * else look again then, unless the newcomer's wait
			   * is over */
	unsigned kept[4]; /* what keeps the others of the pool, by enum
			   * keep_rule; KEEP_NONE counts the connecting */
};

/* links[0..n), in the order the relay keeps them (least recently moved
 * first: among idle links of one age, the first wins). */
void victim_choose(const struct victim_link *links, size_t n, const struct victim_ask *ask,
		   struct victim_choice *out);
/* When the first newcomer, queued at since, looks again for a slot, by
 * the choice c made at now: -1 when it does not wait (it takes the victim,
 * or is refused): nothing may settle, or its wait (wait_ms) is over. */
int64_t victim_wait_until(const struct victim_choice *c, int64_t since, int64_t wait_ms,
			  int64_t now);

#endif
