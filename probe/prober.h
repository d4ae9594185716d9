/* SPDX-License-Identifier: Apache-2.0 */
/* The thread that runs the agent's own probes (issue 27, docs/design/verdict.md
 * "Probes"): one epoll loop, every probe non-blocking and bounded in time
 * and bytes, at most PROBER_MAX_SOCKETS sockets at once, on its own clock.
 * The refresh thread tells it what to probe (prober_sync; which containers
 * and at which address is runtime/probes.c's) and reads back the latest
 * record of each probe; a record whose public words change asks for a
 * refresh (kick), at once when it turns healthy or stops being so
 * (kick_soon). */
#ifndef HEALTHD_PROBER_H
#define HEALTHD_PROBER_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "probe/probe.h"

/* Sockets open at once; probes due beyond that wait for a free one. */
#define PROBER_MAX_SOCKETS 64
/* Probed containers; more are entries ("too many probes"), not probes. */
#define PROBER_MAX_TARGETS 1024
/* A record not renewed within interval + timeout + this is "probe stalled"
 * (one in flight: interval + twice the timeout + this). */
#define PROBER_STALL_SLACK_MS 2000

struct prober;

/* Starts the thread. When a record's public words change it calls
 * kick_soon(arg) if the record's class changed (healthy or not), else
 * kick(arg) (NULL: the other one). Both are called from the thread, under
 * the prober's own lock: they must only take locks of their own and return. */
int prober_start(void (*kick)(void *), void (*kick_soon)(void *), void *arg,
		 struct prober **out, struct errbuf *err);
/* Points the kick elsewhere (NULL: none), for a refresher handing its
 * prober to the next one across a reload: records survive a reload that
 * keeps the source, as the failure count does. Returns once no call to the
 * old kick can still be under way. */
void prober_set_kick(struct prober *p, void (*kick)(void *), void (*kick_soon)(void *),
		     void *arg);
/* Stops and joins it, closing every socket. NULL is fine. */
void prober_stop(struct prober *p);

/* What one target is: the same id, start, spec and address keep a record
 * across syncs. ip is a dotted IPv4 address. */
struct prober_target {
	char id[65];
	int64_t started_ms; /* CLOCK_REALTIME; the start the record belongs to */
	struct probe_spec spec;
	char ip[16];
};

/* The refresh thread: makes want[0..n) the targets (one seen before keeps
 * its record; a new one is probed at once; one no longer wanted is
 * dropped) and copies each one's latest record into records[k]. -E2BIG
 * past PROBER_MAX_TARGETS, -EINVAL for a malformed id or address, -ENOMEM. */
int prober_sync(struct prober *p, const struct prober_target *want, size_t n,
		struct probe_state *records);

/* Probes finished since the start, by result (PROBE_N_RESULTS counters). */
void prober_counts(struct prober *p, uint64_t out[PROBE_N_RESULTS]);

#endif
