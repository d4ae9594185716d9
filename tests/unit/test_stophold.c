/* SPDX-License-Identifier: Apache-2.0 */
/* The sidecar's stop hold (agent/stophold.h): how long it lasts, as tables:
 * the bound a container's stop grace sets, and the end from what the guest
 * agent was seen to serve. With dstack's defaults (a gateway polls every 5 s
 * with a 2 s timeout; the guest agent re-reads every 5 s) a sidecar that
 * cannot ask the guest agent holds 12 s. */
#include <errno.h>
#include <stdint.h>

#include "agent/stophold.h"
#include "runtime/http.h"
#include "tests/lib/tap.h"

static const struct {
	const char *name;
	int64_t grace, want;
} bounds[] = {
	{ "outside a container: no bound", -1, INT64_MAX },
	{ "Docker's default grace, 10 s", 10000, 9000 },
	{ "stop_grace_period: 20s", 20000, 19000 },
	{ "a grace shorter than the exit's margin", 500, 0 },
	{ "no grace at all", 0, 0 },
};

static const struct {
	const char *name;
	int64_t hold, seen, bound, want;
} ends[] = {
	{ "the guest agent not asked: its re-read, then a gateway poll", 7000, -1, INT64_MAX, 12000 },
	{ "seen unhealthy at 1.2 s: a poll after that", 7000, 1200, INT64_MAX, 8200 },
	{ "seen at once", 7000, 0, INT64_MAX, 7000 },
	{ "the worst case cut to Docker's default grace", 7000, -1, 9000, 9000 },
	{ "a seen hold cut to the grace", 7000, 4000, 9000, 9000 },
	{ "within the grace: not cut", 7000, 1000, 19000, 8000 },
	{ "a short hold for tests", 1000, -1, INT64_MAX, 6000 },
};

static const struct {
	const char *addr;
	int r;
} addrs[] = {
	{ "host.docker.internal:8090", 0 },
	{ "172.17.0.1:8090", 0 },
	{ "[fd00::1]:8090", 0 },
	{ "unix:/run/guest.sock", 0 },
	{ "host.docker.internal", -EINVAL },
	{ "unix:", -EINVAL },
};

int main(void)
{
	for (size_t i = 0; i < sizeof(bounds) / sizeof(bounds[0]); i++)
		is_int(stophold_bound(bounds[i].grace), bounds[i].want, "bound: %s", bounds[i].name);
	for (size_t i = 0; i < sizeof(ends) / sizeof(ends[0]); i++)
		is_int(stophold_end(ends[i].hold, ends[i].seen, ends[i].bound), ends[i].want,
		       "end: %s", ends[i].name);
	for (size_t i = 0; i < sizeof(addrs) / sizeof(addrs[0]); i++) {
		struct http_endpoint ep;
		struct errbuf err = { "" };
		int r = stophold_endpoint(addrs[i].addr, &ep, &err);
		is_int(r < 0 ? -EINVAL : 0, addrs[i].r, "stop_guest_agent '%s' %s%s", addrs[i].addr,
		       r < 0 ? "refused: " : "parses", err.msg);
	}
	return done_testing();
}
