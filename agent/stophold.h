/* SPDX-License-Identifier: Apache-2.0 */
/* The sidecar drains on stop (issue 29): a sidecar (a verdict file and no
 * public listener) that is told to stop makes the file say unhealthy at
 * once and holds its exit until every gateway can have heard it: the guest
 * agent re-reads the file (upstream's REFRESH_INTERVAL, 5 s,
 * Dstack-TEE/dstack dstack/guest-agent/src/health.rs at 205f0dd, a sleep
 * after each refresh), then each gateway node
 * polls it once more (its interval plus its timeout, 5 s + 2 s by default,
 * docs/app-health-checks.md). Compose stops the sidecar before the services
 * it depends on, so the app's containers stop only after the hold. Where
 * the sidecar can ask the guest agent (stop_guest_agent), the first part is
 * what it sees rather than the worst case. The hold fits the container's
 * stop grace, so that it ends before Docker's SIGKILL. */
#ifndef HEALTHD_STOPHOLD_H
#define HEALTHD_STOPHOLD_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/err.h"

/* How long the guest agent may take to read the file again. */
#define STOPHOLD_REREAD_MS 5000
/* Docker's (and nerdctl's) stop grace when the container sets none. */
#define STOPHOLD_DEFAULT_GRACE_MS 10000
/* Left of the grace for the exit itself. */
#define STOPHOLD_EXIT_MARGIN_MS 1000

/* Pure: the longest hold that fits the stop grace: the grace less the exit
 * margin (at least 0), where grace_ms is the container's (-1 unknown: not in
 * a container, no bound, INT64_MAX). */
int64_t stophold_bound(int64_t grace_ms);

/* Pure: when the hold ends, in ms after the file said unhealthy: hold_ms
 * (a gateway's interval plus timeout) after the guest agent was seen
 * serving unhealthy (seen_ms, -1 when it was not), else after its re-read;
 * never past bound_ms. */
int64_t stophold_end(int64_t hold_ms, int64_t seen_ms, int64_t bound_ms);

/* stop_guest_agent: "HOST:PORT" or "unix:PATH". Checks it parses; 0 or
 * -EINVAL with err saying why. */
struct http_endpoint;
int stophold_endpoint(const char *addr, struct http_endpoint *ep, struct errbuf *err);

struct config;
struct vfile;
struct drain;
/* The hold itself, on the main thread (vf's writer) after the stop signal:
 * the drain (which a resume cannot lift), the write, the wait for the guest
 * agent and the gateways. A second SIGTERM or SIGINT in sigs ends it at
 * once. */
void stophold_run(const struct config *cfg, struct drain *d, struct vfile *vf,
		  const sigset_t *sigs);

#endif
