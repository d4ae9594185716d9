/* SPDX-License-Identifier: Apache-2.0 */
#include "rpc/keep.h"

void keep_start(struct keep *hist, int64_t now)
{
	*hist = (struct keep){ .start = now, .last = now };
}

void keep_moved(struct keep *hist, bool up, uint64_t n, int64_t now)
{
	hist->bytes += n;
	if (up) {
		/* The client speaks first, or again after an answer began. */
		if (hist->last_down >= hist->last_up) {
			hist->turns++;
			hist->turn_at = now;
			hist->turn_bytes = 0;
		}
		hist->turn_bytes += n;
		hist->last_up = now;
	} else {
		/* The guest agent speaks again, after a pause, and the client
		 * has said nothing since its last bytes. */
		if (hist->last_down > hist->last_up && now - hist->last_down >= KEEP_SETTLE_MS)
			hist->stream = true;
		hist->last_down = now;
	}
	hist->last = now;
}

/* The end of an awaiting request's hold: KEEP_HOLD_MS from its start, and
 * a second more for every whole KEEP_MIN_RATE bytes of it (bounded: a TiB
 * is more than any upload and keeps the sum from overflowing). */
static int64_t awaiting_until(const struct keep *hist)
{
	uint64_t bytes = hist->turn_bytes < (1ull << 40) ? hist->turn_bytes : 1ull << 40;
	return hist->turn_at + KEEP_HOLD_MS + (int64_t)(bytes / KEEP_MIN_RATE) * 1000;
}

/* Kept past the settle time, by what it is doing or has shown it does. A
 * stream's bytes count whichever way they go: a WebSocket's client that
 * speaks to a quiet server keeps it. */
static enum keep_rule kept_beyond_settle(const struct keep *hist, int64_t now)
{
	if ((hist->stream || hist->turns >= 2) && now - hist->last < KEEP_HOLD_MS)
		return KEEP_STREAM;
	if (hist->last_up > hist->last_down)
		return now < awaiting_until(hist) ? KEEP_AWAITING : KEEP_NONE;
	return KEEP_NONE;
}

/* A link kept by several rules is named by the one that lasts: a stream
 * that is moving a line now is a stream. */
enum keep_rule keep_rule(const struct keep *hist, bool unsent, int64_t now)
{
	enum keep_rule rule = kept_beyond_settle(hist, now);
	if (rule == KEEP_NONE && (unsent || now - hist->last < KEEP_SETTLE_MS))
		rule = KEEP_MOVING;
	return rule;
}

int64_t keep_settles_at(const struct keep *hist, bool unsent, int64_t now)
{
	int64_t at = hist->last + KEEP_SETTLE_MS;
	if (unsent || at <= now || kept_beyond_settle(hist, at) != KEEP_NONE)
		return -1;
	return at;
}

bool keep_reserved(unsigned older, unsigned slots)
{
	unsigned few = slots / 4 < 4 ? slots / 4 : 4;
	return older < (slots / 32 > few ? slots / 32 : few);
}

const char *keep_rule_name(enum keep_rule r)
{
	switch (r) {
	case KEEP_MOVING: return "moving";
	case KEEP_AWAITING: return "awaiting";
	case KEEP_STREAM: return "stream";
	case KEEP_NONE: break;
	}
	return "idle";
}
