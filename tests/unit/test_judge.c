/* SPDX-License-Identifier: Apache-2.0 */
/* Table tests for runtime/judge.c: the container rules of the spec, one case
 * per rule and their combinations. Containers are built in place: the judge
 * only reads them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/container.h"
#include "tests/lib/entries.h"
#include "tests/lib/tap.h"

#define MAXC 5
#define S 1000000000LL /* one second in ns */

/* Shorthands for a container's facts. */
#define RUN(n, h) { .name = n, .state = "running", .running = true, .health = h }
#define EXITED(n, h) { .name = n, .state = "exited", .health = h }

static const char NONE1[] =
	"<compose>=the only container declares no healthcheck, so nothing can be "
	"judged; add a healthcheck or a dstack.healthd.probe label to at least "
	"one service (healthcheck: {disable: true} does not count)";
#define NONE_N(k)                                                             \
	"<compose>=none of the " #k " containers declares a healthcheck, so "  \
	"nothing can be judged; add a healthcheck or a dstack.healthd.probe "   \
	"label to at least one service (healthcheck: {disable: true} does not " \
	"count)"
static const char NOTHING[] = "<compose>=no container has been created yet";

/* The agent's own probe (issue 27), as probe_prepare and the prober leave
 * it: labels read and an address found (usable), a record held (probed). */
#define PROBED(st, n) (&(struct container_probe){ .usable = true, .probed = true, \
						  .state = { .status = st, .runs = n, \
							     .last = PROBE_REFUSED } })
#define PROBE_LABEL_SET { .probe = "http://:8080/" }

struct jcase {
	const char *what;
	struct container c[MAXC];
	size_t n;
	const char *want; /* "" healthy, else "name=status|name=status" sorted */
};

static const struct jcase cases[] = {
	{ "no containers at all", { { 0 } }, 0, NOTHING },
	{ "only a one-off", { { .name = "app-run-1", .state = "exited", .oneoff = true,
				.health = "unhealthy" } }, 1, NOTHING },
	{ "one healthy", { RUN("web", "healthy") }, 1, "" },
	{ "only the agent's own container (a sidecar)",
	  { { .name = "healthd", .state = "running", .running = true, .health = "unhealthy",
	      .agent_self = true } }, 1, NOTHING },
	{ "the agent's own container is not judged, even unhealthy",
	  { RUN("web", "healthy"), { .name = "healthd", .state = "exited", .health = "unhealthy",
				     .agent_self = true } }, 2, "" },
	{ "the agent's own container does not vouch for the app",
	  { RUN("web", "unhealthy"), { .name = "healthd", .state = "running", .running = true,
				       .health = "healthy", .agent_self = true } }, 2,
	  "web=unhealthy" },
	{ "leading slash dropped", { RUN("/web", "starting") }, 1, "web=starting" },
	{ "starting is not healthy", { RUN("web", "starting") }, 1, "web=starting" },
	{ "unhealthy", { RUN("web", "unhealthy") }, 1, "web=unhealthy" },
	{ "unknown health word is the status", { RUN("web", "weird") }, 1, "web=weird" },
	{ "health is case-sensitive", { RUN("web", "Healthy") }, 1, "web=Healthy" },
	{ "no health (absent)", { RUN("web", NULL) }, 1, NONE1 },
	{ "health empty", { RUN("web", "") }, 1, NONE1 },
	{ "health none", { RUN("web", "none") }, 1, NONE1 },
	{ "three without healthchecks", { RUN("a", NULL), RUN("b", "none"),
					  EXITED("c", NULL) }, 3, NONE_N(3) },
	{ "one-offs are not counted as created",
	  { RUN("a", NULL), { .name = "r", .oneoff = true, .health = "healthy",
			      .running = true } }, 2, NONE1 },
	{ "one-off unhealthy skipped, service healthy",
	  { RUN("web", "healthy"), { .name = "web-run", .state = "exited", .oneoff = true,
				     .health = "unhealthy" } }, 2, "" },
	{ "skipped without healthcheck, judged one healthy",
	  { RUN("web", "healthy"), RUN("sidecar", NULL), EXITED("init", NULL) }, 3, "" },
	{ "exited container without healthcheck does not count",
	  { RUN("web", "starting"), EXITED("init", NULL) }, 2, "web=starting" },
	{ "exited but last check healthy (nerdctl)", { EXITED("web", "healthy") }, 1,
	  "web=exited (last health check: healthy)" },
	{ "exited and unhealthy (docker)", { EXITED("web", "unhealthy") }, 1,
	  "web=exited (last health check: unhealthy)" },
	{ "created, never started", { { .name = "web", .state = "created",
				       .health = "starting" } }, 1,
	  "web=created (last health check: starting)" },
	{ "restarting", { { .name = "web", .state = "restarting", .health = "healthy" } }, 1,
	  "web=restarting (last health check: healthy)" },
	{ "dead", { { .name = "web", .state = "dead", .health = "unhealthy" } }, 1,
	  "web=dead (last health check: unhealthy)" },
	{ "paused with Running:true (docker)",
	  { { .name = "web", .state = "paused", .running = true, .paused = true,
	      .health = "healthy" } }, 1, "web=paused (last health check: healthy)" },
	{ "paused but state says running",
	  { { .name = "web", .state = "running", .running = true, .paused = true,
	      .health = "healthy" } }, 1, "web=paused (last health check: healthy)" },
	{ "not running, no state", { { .name = "web", .health = "healthy" } }, 1,
	  "web=not running (last health check: healthy)" },
	{ "running but state word missing", { { .name = "web", .running = true,
						.health = "healthy" } }, 1, "" },
	/* Declared in the merged config, no check run yet (spec: judged from
	 * what the runtime did; Docker sets State.Health only at start). */
	{ "created, never started, probe configured",
	  { RUN("api", "healthy"), { .name = "web", .state = "created",
				     .healthcheck_configured = true } }, 2,
	  "web=created (last health check: none yet)" },
	{ "running, probe configured, no result yet (nerdctl)",
	  { { .name = "web", .state = "running", .running = true,
	      .healthcheck_configured = true } }, 1,
	  "web=starting (no health check has run yet)" },
	{ "restarting with Running:true (docker)",
	  { RUN("api", "healthy"), { .name = "web", .state = "restarting", .running = true,
				     .health = "unhealthy" } }, 2,
	  "web=restarting (last health check: unhealthy)" },
	{ "disabled probe stays skipped", { RUN("web", NULL) }, 1, NONE1 },
	{ "health log predates start (nerdctl reboot)",
	  { { .name = "web", .state = "running", .running = true, .health = "healthy",
	      .started_at_ns = 200 * S, .health_log_end_ns = 100 * S } }, 1,
	  "web=starting (last health check predates the current start)" },
	{ "unhealthy log predates start",
	  { { .name = "web", .state = "running", .running = true, .health = "unhealthy",
	      .started_at_ns = 200 * S, .health_log_end_ns = 100 * S } }, 1,
	  "web=starting (last health check predates the current start)" },
	{ "health log after start",
	  { { .name = "web", .state = "running", .running = true, .health = "healthy",
	      .started_at_ns = 100 * S, .health_log_end_ns = 200 * S } }, 1, "" },
	{ "health log ends exactly at start",
	  { { .name = "web", .state = "running", .running = true, .health = "healthy",
	      .started_at_ns = 100 * S, .health_log_end_ns = 100 * S } }, 1, "" },
	{ "start time unknown",
	  { { .name = "web", .state = "running", .running = true, .health = "healthy",
	      .health_log_end_ns = 100 * S } }, 1, "" },
	{ "log end unknown",
	  { { .name = "web", .state = "running", .running = true, .health = "healthy",
	      .started_at_ns = 100 * S } }, 1, "" },
	{ "stopped with a stale log: run state wins",
	  { { .name = "web", .state = "exited", .health = "healthy",
	      .started_at_ns = 200 * S, .health_log_end_ns = 100 * S } }, 1,
	  "web=exited (last health check: healthy)" },
	/* Issue 29: told to stop, whatever health Docker still reports. */
	{ "stopping while Docker still says healthy",
	  { { .name = "web", .state = "running", .running = true, .health = "healthy",
	      .stopping = true } }, 1, "web=stopping (last health check: healthy)" },
	{ "stopping beside a healthy one",
	  { RUN("api", "healthy"), { .name = "web", .state = "running", .running = true,
				     .health = "healthy", .stopping = true } }, 2,
	  "web=stopping (last health check: healthy)" },
	{ "stopping, probe configured, no result yet",
	  { { .name = "web", .state = "running", .running = true,
	      .healthcheck_configured = true, .stopping = true } }, 1,
	  "web=stopping (last health check: none yet)" },
	{ "stopping and already exited: the state speaks",
	  { { .name = "web", .state = "exited", .health = "unhealthy", .stopping = true } }, 1,
	  "web=exited (last health check: unhealthy)" },
	/* The agent's own probe and dstack.healthd.optional (issues 27, 34). */
	{ "a probe label alone declares a check, its probe healthy",
	  { { .name = "api", .state = "running", .running = true,
	      .probe_labels = PROBE_LABEL_SET, .probe = PROBED(PROBE_HEALTHY, 1) } }, 1, "" },
	{ "a probe label alone, its probe unhealthy",
	  { { .name = "api", .state = "running", .running = true,
	      .probe_labels = PROBE_LABEL_SET, .probe = PROBED(PROBE_UNHEALTHY, 3) } }, 1,
	  "api=probe unhealthy (connection refused)" },
	{ "a probe label whose labels were never prepared is starting",
	  { { .name = "api", .state = "running", .running = true,
	      .probe_labels = PROBE_LABEL_SET } }, 1,
	  "api=probe starting (no probe has run yet)" },
	{ "a probe never run is starting, whatever its record says",
	  { { .name = "api", .state = "running", .running = true,
	      .probe_labels = PROBE_LABEL_SET,
	      .probe = &(struct container_probe){ .usable = true,
						  .state = { .status = PROBE_HEALTHY } } } }, 1,
	  "api=probe starting (no probe has run yet)" },
	{ "only a healthy probe passes: one still starting does not",
	  { { .name = "api", .state = "running", .running = true,
	      .probe_labels = PROBE_LABEL_SET, .probe = PROBED(PROBE_STARTING, 0) } }, 1,
	  "api=probe starting (no probe has run yet)" },
	{ "an unusable probe label is an entry saying why",
	  { { .name = "api", .state = "running", .running = true,
	      .probe_labels = PROBE_LABEL_SET,
	      .probe = &(struct container_probe){ .why = "label dstack.healthd.probe: missing" } } },
	  1, "api=label dstack.healthd.probe: missing" },
	{ "a healthcheck and a probe: Docker healthy, the probe not",
	  { { .name = "api", .state = "running", .running = true, .health = "healthy",
	      .probe_labels = PROBE_LABEL_SET, .probe = PROBED(PROBE_UNHEALTHY, 3) } }, 1,
	  "api=probe unhealthy (connection refused)" },
	{ "a healthcheck and a probe: the probe healthy, Docker not",
	  { { .name = "api", .state = "running", .running = true, .health = "unhealthy",
	      .probe_labels = PROBE_LABEL_SET, .probe = PROBED(PROBE_HEALTHY, 1) } }, 1,
	  "api=unhealthy" },
	{ "optional true leaves a failing container out",
	  { RUN("web", "healthy"), { .name = "job", .state = "running", .running = true,
				     .health = "unhealthy", .optional_label = "true" } }, 2, "" },
	{ "optional is read case-insensitively",
	  { RUN("web", "healthy"), { .name = "job", .state = "running", .running = true,
				     .health = "unhealthy", .optional_label = "TRUE" } }, 2, "" },
	{ "optional false judges the container as any other",
	  { { .name = "job", .state = "running", .running = true, .health = "unhealthy",
	      .optional_label = "false" } }, 1, "job=unhealthy" },
	{ "optional false on a healthy container is no entry",
	  { { .name = "job", .state = "running", .running = true, .health = "healthy",
	      .optional_label = "False" } }, 1, "" },
	{ "an optional label neither true nor false is an entry",
	  { { .name = "job", .state = "running", .running = true, .health = "healthy",
	      .optional_label = "yes" } }, 1,
	  "job=label dstack.healthd.optional: must be true or false" },
	{ "an unreadable optional label is an entry even with no check",
	  { RUN("web", "healthy"), { .name = "job", .state = "running", .running = true,
				     .optional_label = "maybe" } }, 2,
	  "job=label dstack.healthd.optional: must be true or false" },
	{ "optional and nothing else: no check is judged",
	  { { .name = "job", .state = "running", .running = true, .health = "unhealthy",
	      .optional_label = "true" } }, 1, NONE1 },
	{ "two containers without healthchecks", { RUN("a", NULL), RUN("b", NULL) }, 2,
	  NONE_N(2) },
	{ "stopping without a healthcheck is not judged",
	  { RUN("api", "healthy"), { .name = "proxy", .state = "running", .running = true,
				     .stopping = true } }, 2, "" },
	{ "two failing, sorted by name",
	  { RUN("zeta", "starting"), RUN("alpha", "unhealthy"), RUN("mid", "healthy") }, 3,
	  "alpha=unhealthy|zeta=starting" },
	{ "sorted after slash is dropped",
	  { RUN("/b", "unhealthy"), RUN("a", "starting") }, 2, "a=starting|b=unhealthy" },
	{ "mixed: one stopped, one starting, one skipped, one one-off",
	  { EXITED("db", "healthy"), RUN("web", "starting"), RUN("proxy", NULL),
	    { .name = "migrate", .oneoff = true, .state = "exited", .health = "unhealthy" },
	    RUN("cache", "healthy") }, 5,
	  "db=exited (last health check: healthy)|web=starting" },
	{ "all healthy", { RUN("a", "healthy"), RUN("b", "healthy"),
			   RUN("c", NULL) }, 3, "" },
	{ "no name falls back to the id",
	  { { .id = "0123abcd", .state = "running", .running = true,
	      .health = "unhealthy" } }, 1, "0123abcd=unhealthy" },
	{ "no name and no id",
	  { { .state = "running", .running = true, .health = "unhealthy" } }, 1,
	  "<unnamed container>=unhealthy" },
	{ "control characters in name and health are cleaned",
	  { RUN("we\nb", "bad\x1b[0m") }, 1, "we?b=bad?[0m" },
};

static void test_cases(void)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct jcase *tc = &cases[i];
		struct container_list l = { .v = (struct container *)tc->c, .n = tc->n };
		struct verdict v;
		char got[2048];
		verdict_init(&v);
		v.healthy = !tc->want[0] ? false : true; /* must be overwritten */
		int r = containers_judge(&l, &v);
		is_int(r, 0, "%s: judged", tc->what);
		entries_render(&v, got, sizeof(got));
		is_str(got, tc->want, "%s: entries", tc->what);
		is_int(v.healthy, !tc->want[0], "%s: healthy iff no entries", tc->what);
		ok(v.error == NULL, "%s: no error", tc->what);
		verdict_free(&v);
	}
}

/* A long container name is cut, not copied whole. */
static void test_long_name(void)
{
	char name[1000];
	memset(name, 'x', sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0';
	struct container c = { .name = name, .state = "running", .running = true,
			       .health = "unhealthy" };
	struct container_list l = { .v = &c, .n = 1 };
	struct verdict v;
	verdict_init(&v);
	containers_judge(&l, &v);
	ok(v.n_entries == 1 && strlen(v.entries[0].name) == 256 &&
		   strcmp(v.entries[0].name + 253, "...") == 0,
	   "a long name is cut at 256 bytes");
	verdict_free(&v);
}

/* Why a container is left out, for the operator's view: the first that
 * applies, in the judge's own order. */
static void test_skip_reason(void)
{
	static const struct {
		const char *what;
		struct container c;
		const char *want;
	} rows[] = {
		{ "skip reason: a one-off, whatever else", { .oneoff = true, .agent_self = true,
							     .health = "healthy",
							     .optional_label = "true" },
		  "one-off (compose run)" },
		{ "skip reason: the agent's own container", { .agent_self = true, .health = "healthy" },
		  "the agent itself" },
		{ "skip reason: optional", { .health = "healthy", .optional_label = "true" },
		  "optional (dstack.healthd.optional)" },
		{ "skip reason: no healthcheck", { .state = "running" }, "no healthcheck" },
		{ "skip reason: none for a judged container", { .health = "healthy" }, NULL },
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		is_str(container_skip_reason(&rows[i].c), rows[i].want, "%s", rows[i].what);
}

int main(void)
{
	test_cases();
	test_skip_reason();
	test_long_name();
	return done_testing();
}
