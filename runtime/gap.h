/* SPDX-License-Identifier: Apache-2.0 */
/* A Compose service that had a container and has none now (issue 29, "the
 * gap of a recreate"): the judge sees only the containers that exist, so a
 * service whose container was removed would drop out of the verdict and leave
 * the others to vouch for the app while nothing of it serves. The refresh
 * remembers the services it saw (the containers' com.docker.compose.service
 * labels) and holds each one that vanished unhealthy until a container of it
 * is back (then that container is judged) or a bounded time has passed (a
 * service removed for good must not hold the app out for ever). Pure but for
 * its memory, which one thread (the refresh) owns. */
#ifndef HEALTHD_GAP_H
#define HEALTHD_GAP_H

#include <stddef.h>
#include <stdint.h>

#include "base/verdict.h"
#include "runtime/container.h"

/* Services remembered per project, bounded; past it a new service is not
 * remembered (no container judged has ever come near). */
#define GAP_MAX_SERVICES 1024

/* The entry of a service in a gap: "<service:NAME>". Container names cannot
 * contain '<', and no entry of the agent's own has a ':' in it, so it
 * collides with neither. */
#define GAP_ENTRY_PREFIX "<service:"

struct gap_service {
	char *name;
	int64_t seen_ms; /* the last refresh that found a container of it judged */
};

struct gap {
	char *project; /* the services below are this project's */
	struct gap_service *v;
	size_t n, cap;
};

/* After containers_judge(l, out) at now_ms (CLOCK_MONOTONIC): remembers the
 * services of l's judged containers (not one-offs, not the agent's own,
 * declaring a healthcheck), adds an entry for each remembered service that
 * has none in l and was last seen at most max_ms ago, forgets the older
 * ones, and sets out->healthy false when it added any. Another project than
 * the last one starts the memory afresh; max_ms 0 remembers nothing. 0 or
 * -ENOMEM. */
int gap_judge(struct gap *g, const char *project, const struct container_list *l,
	      int64_t now_ms, int64_t max_ms, struct verdict *out);
void gap_free(struct gap *g);

#endif
