/* SPDX-License-Identifier: Apache-2.0 */
/* Which relayed connections a newcomer may take the slot of (issue 33,
 * docs/threat-model.md "The relay"). The relay never parses what it moves,
 * so a link is judged by its history alone: when bytes last moved each way,
 * how many times the client spoke after the guest agent had, and whether
 * the guest agent spoke again, after a pause, without the client speaking.
 *
 * A link is kept (never evicted for a newcomer) while:
 *   - it is moving: bytes wait in its pipes or a socket's send queue, or
 *     it moved a byte within KEEP_SETTLE_MS (an answer whose next bytes
 *     are on their way);
 *   - it is a stream: the guest agent spoke again after a pause with the
 *     client silent (a followed log, server-sent events), or the client
 *     spoke a second time after an answer (a WebSocket's pings, a kept-alive
 *     connection in use), for at most KEEP_HOLD_MS without a byte either
 *     way: a WebSocket whose server is quiet keeps its hold while its
 *     client speaks;
 *   - it awaits an answer: the client spoke last (a request the guest agent
 *     is still working on, or a body still coming), for KEEP_HOLD_MS from
 *     the start of that request and a second more for every KEEP_MIN_RATE
 *     bytes the client sent in it: an upload that moves keeps its slot,
 *     a body trickled a byte at a time does not, however it trickles.
 * Anything else is idle between exchanges: a request answered and nothing
 * since. Those are evicted, the youngest first, so that a flood of
 * newcomers that are answered and then sit makes room from its own links
 * before it reaches an older one. The oldest links are a reserve (a 32nd
 * of the slots, 16 of 512; 4 where there are 16 to 127; a quarter of
 * fewer): one of them is taken only once no younger link in flight
 * (connecting, moving or awaiting its answer) can settle within the
 * newcomer's wait. A wave that finds every slot busy with its own links
 * then waits for them to be answered, and takes them, rather than the link
 * opened first that has not yet shown it is a stream (a log between its
 * first and second line).
 *
 * KEEP_HOLD_MS is nginx's default proxy_read_timeout, client_body_timeout
 * and send_timeout (60 s): what nginx in front of the guest agent gives a
 * transfer that moves nothing before it cuts it. KEEP_MIN_RATE is Apache
 * httpd's mod_reqtimeout default for a body (MinRate=500 bytes a second:
 * its timeout grows by a second for every 500 bytes received). */
#ifndef HEALTHD_KEEP_H
#define HEALTHD_KEEP_H

#include <stdbool.h>
#include <stdint.h>

#define KEEP_SETTLE_MS 100
#define KEEP_HOLD_MS (60 * 1000)
#define KEEP_MIN_RATE 500

enum keep_rule {
	KEEP_NONE,     /* idle between exchanges: may be evicted */
	KEEP_MOVING,   /* bytes waiting to be sent on, or one moved within KEEP_SETTLE_MS */
	KEEP_AWAITING, /* the client spoke last, within KEEP_HOLD_MS of its request */
	KEEP_STREAM,   /* more than one exchange, or the guest agent spoke unasked */
};

/* A link's history. Times are the relay's monotonic ms; 0 is never. */
struct keep {
	int64_t start;     /* connected */
	int64_t last;      /* the last byte moved either way, or the start */
	int64_t last_up;   /* the last byte from the client to the guest agent */
	int64_t last_down; /* the last byte from the guest agent to the client */
	unsigned turns;    /* times the client spoke first or after the guest agent */
	int64_t turn_at;   /* the first byte of the client's last turn */
	uint64_t turn_bytes; /* bytes the client sent in its last turn */
	uint64_t bytes;    /* bytes moved, both ways */
	bool stream;       /* the guest agent spoke again after a pause, unasked */
};

void keep_start(struct keep *hist, int64_t now);
/* Bytes moved (n of them read from their side; 0 when only bytes read
 * earlier went out): up from the client, or down from the guest agent. */
void keep_moved(struct keep *hist, bool up, uint64_t n, int64_t now);
/* unsent: bytes wait in the link's pipes or a socket's send queue. */
enum keep_rule keep_rule(const struct keep *hist, bool unsent, int64_t now);
/* When a link kept only by KEEP_SETTLE_MS becomes evictable, if nothing
 * moves meanwhile; -1 when it is kept by anything else, or not kept. */
int64_t keep_settles_at(const struct keep *hist, bool unsent, int64_t now);
const char *keep_rule_name(enum keep_rule r);
/* An idle link with older links connected before it, of slots, is in the
 * reserve of the oldest: max(slots / 32, min(4, slots / 4)) links. */
bool keep_reserved(unsigned older, unsigned slots);

#endif
