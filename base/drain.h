/* SPDX-License-Identifier: Apache-2.0 */
/* The drain's "everyone told" rule (issue 12), pure, over a copy of the
 * pollers table: `drain --wait` is done when every address that polled
 * Health within the window has been served the drain's verdict at least
 * once since the drain began (an answer numbered after since_seq, the
 * table's sequence number when the drain began). */
#ifndef HEALTHD_DRAIN_H
#define HEALTHD_DRAIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/pollers.h"

enum drain_told {
	DRAIN_NOT_RECENT, /* not seen within the window, not told: not waited for */
	DRAIN_TOLD,       /* served the drain's verdict since the drain began */
	DRAIN_NOT_TOLD,   /* seen within the window, not told yet */
};

/* window_start_ms: the oldest last_seen (realtime ms) that still counts as
 * recent. An address told counts as told even when it has stopped since. */
enum drain_told drain_poller_told(const struct poller *p, uint64_t since_seq,
				  int64_t window_start_ms);

struct drain_count {
	size_t told, not_told;
};

/* True when no recent address is left untold (also when there is none). */
bool drain_everyone_told(const struct pollers_table *t, uint64_t since_seq,
			 int64_t window_start_ms, struct drain_count *n);

#endif
