/* SPDX-License-Identifier: Apache-2.0 */
/* The thread that runs the agent's own probes (issue 27, docs/design.md §4
 * "Probes"): one epoll loop, every probe non-blocking and bounded in time
 * and bytes, at most PROBER_MAX_SOCKETS sockets at once, on its own clock.
 * The refresh thread tells it what to probe (prober_sync, from the
 * containers it saw) and reads back the latest record of each probe; a
 * record whose public status changes asks for a refresh at once (kick). */
#ifndef HEALTHD_PROBER_H
#define HEALTHD_PROBER_H

#include <stdint.h>

#include "base/err.h"
#include "runtime/container.h"
#include "runtime/probe.h"

/* Sockets open at once; probes due beyond that wait for a free one. */
#define PROBER_MAX_SOCKETS 64
/* Probed containers; more are entries ("too many probes"), not probes. */
#define PROBER_MAX_TARGETS 1024

struct prober;

/* Starts the thread. kick(arg) is called from it, under the prober's own
 * lock: it must only take locks of its own and return. */
int prober_start(void (*kick)(void *), void *arg, struct prober **out, struct errbuf *err);
/* Points the kick elsewhere (NULL: none), for a refresher handing its
 * prober to the next one across a reload: records survive a reload that
 * keeps the source, as the failure count does. Returns once no call to the
 * old kick can still be under way. */
void prober_set_kick(struct prober *p, void (*kick)(void *), void *arg);
/* Stops and joins it, closing every socket. NULL is fine. */
void prober_stop(struct prober *p);

/* The refresh thread, before judging l: prepares each container's probe
 * (probe_prepare, from where self says the agent is), makes the running ones that have a usable probe the
 * prober's targets (a target seen before keeps its record: same id, start,
 * spec and address; a new one is probed at once), and copies each target's
 * record into its container. p NULL: probes are prepared and none runs
 * (each stays "starting"). -ENOMEM. */
int prober_sync(struct prober *p, struct container_list *l, const struct container *self);

/* Probes finished since the start, by result (PROBE_N_RESULTS counters). */
void prober_counts(struct prober *p, uint64_t out[PROBE_N_RESULTS]);

#endif
