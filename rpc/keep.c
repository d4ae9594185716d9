/* SPDX-License-Identifier: Apache-2.0 */
#include "rpc/keep.h"

void keep_start(struct keep *k, int64_t now)
{
	*k = (struct keep){ .start = now, .last = now };
}

void keep_moved(struct keep *k, bool up, int64_t now)
{
	if (up) {
		/* The client speaks first, or again after an answer began. */
		if (k->last_down >= k->last_up) {
			k->turns++;
			k->turn_at = now;
		}
		k->last_up = now;
	} else {
		/* The guest agent speaks again, after a pause, and the client
		 * has said nothing since its last bytes. */
		if (k->last_down > k->last_up && now - k->last_down >= KEEP_SETTLE_MS)
			k->stream = true;
		k->last_down = now;
	}
	k->last = now;
}

/* Kept past the settle time, by what it is doing or has shown it does. */
static enum keep_rule kept_beyond_settle(const struct keep *k, int64_t now)
{
	if (k->last_up > k->last_down)
		return now - k->turn_at < KEEP_HOLD_MS ? KEEP_AWAITING : KEEP_NONE;
	if (now - k->last < KEEP_HOLD_MS && (k->stream || k->turns >= 2))
		return KEEP_STREAM;
	return KEEP_NONE;
}

/* A link kept by several rules is named by the one that lasts: a stream
 * that is moving a line now is a stream. */
enum keep_rule keep_rule(const struct keep *k, bool held, int64_t now)
{
	enum keep_rule r = kept_beyond_settle(k, now);
	if (r == KEEP_NONE && (held || now - k->last < KEEP_SETTLE_MS))
		r = KEEP_MOVING;
	return r;
}

int64_t keep_settles_at(const struct keep *k, bool held, int64_t now)
{
	int64_t at = k->last + KEEP_SETTLE_MS;
	if (held || at <= now || kept_beyond_settle(k, at) != KEEP_NONE)
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
