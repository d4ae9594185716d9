/* SPDX-License-Identifier: Apache-2.0 */
/* Table tests for runtime/stops.c: Docker's events in, containers marked
 * stopping out (issue 29, "Stopping is unhealthy at once"), with what the
 * table keeps for the next refresh; and stop signals read as moby reads
 * them. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "runtime/stops.h"
#include "tests/lib/tap.h"

#define MAXE 6
#define MAXC 3

struct ev {
	const char *action, *id;
	int signal;
	long long t;
};

/* A running container: its id, Config.StopSignal (NULL: Docker's default)
 * and StartedAt. */
#define RUN(i, sig, start)                                                             \
	{ .id = i, .name = i, .state = "running", .running = true, .health = "healthy", \
	  .stop_signal = sig, .started_at_ns = start }

static const struct scase {
	const char *what;
	struct ev before[MAXE]; /* noted before the refresh took its mark */
	struct ev after[MAXE];  /* noted after it, before it applied the table */
	struct container c[MAXC];
	size_t n;
	const char *stopping; /* ids marked, in list order, "," between */
	const char *kept;     /* ids of the list still noted after, same form */
	long long now;        /* the refresh's time (0: 1000, within every bound) */
} cases[] = {
	{ "docker stop: its stop signal (default SIGTERM)", { { "kill", "a", 15, 100 } }, { { 0 } },
	  { RUN("a", NULL, 50) }, 1, "a", "a" },
	{ "Config.StopSignal SIGQUIT: a SIGTERM is not its stop",
	  { { "kill", "a", SIGTERM, 100 } }, { { 0 } }, { RUN("a", "SIGQUIT", 50) }, 1, "", "" },
	{ "Config.StopSignal SIGQUIT: SIGQUIT is", { { "kill", "a", SIGQUIT, 100 } }, { { 0 } },
	  { RUN("a", "SIGQUIT", 50) }, 1, "a", "a" },
	{ "stop signal spelt QUIT", { { "kill", "a", SIGQUIT, 100 } }, { { 0 } },
	  { RUN("a", "QUIT", 50) }, 1, "a", "a" },
	{ "stop signal spelt sigquit", { { "kill", "a", SIGQUIT, 100 } }, { { 0 } },
	  { RUN("a", "sigquit", 50) }, 1, "a", "a" },
	{ "stop signal as a number", { { "kill", "a", SIGQUIT, 100 } }, { { 0 } },
	  { RUN("a", "3", 50) }, 1, "a", "a" },
	{ "stop signal RTMIN+3 (moby's 37)", { { "kill", "a", 37, 100 } }, { { 0 } },
	  { RUN("a", "SIGRTMIN+3", 50) }, 1, "a", "a" },
	{ "stop signal \"\" is SIGTERM", { { "kill", "a", SIGTERM, 100 } }, { { 0 } },
	  { RUN("a", "", 50) }, 1, "a", "a" },
	{ "SIGKILL is a stop whatever the stop signal", { { "kill", "a", SIGKILL, 100 } },
	  { { 0 } }, { RUN("a", "SIGQUIT", 50) }, 1, "a", "a" },
	{ "a SIGHUP to reload is not a stop, and is forgotten", { { "kill", "a", SIGHUP, 100 } },
	  { { 0 } }, { RUN("a", NULL, 50) }, 1, "", "" },
	{ "SIGHUP, then the stop signal: a stop", { { "kill", "a", SIGHUP, 100 },
						     { "kill", "a", SIGTERM, 110 } },
	  { { 0 } }, { RUN("a", NULL, 50) }, 1, "a", "a" },
	{ "the stop signal, then a SIGHUP: still a stop", { { "kill", "a", SIGTERM, 100 },
							   { "kill", "a", SIGHUP, 110 } },
	  { { 0 } }, { RUN("a", NULL, 50) }, 1, "a", "a" },
	{ "a kill whose signal was unreadable: a stop", { { "kill", "a", -1, 100 } }, { { 0 } },
	  { RUN("a", NULL, 50) }, 1, "a", "a" },
	{ "a stop signal that cannot be read: any kill is a stop",
	  { { "kill", "a", SIGHUP, 100 } }, { { 0 } }, { RUN("a", "SIGBOGUS", 50) }, 1, "a", "a" },
	{ "docker restart: kill, then start forgets it", { { "kill", "a", SIGTERM, 100 },
							   { "die", "a", 0, 110 },
							   { "stop", "a", 0, 120 },
							   { "start", "a", 0, 130 } },
	  { { 0 } }, { RUN("a", NULL, 130) }, 1, "", "" },
	{ "a start missed (the stream was down): StartedAt after the kill",
	  { { "kill", "a", SIGTERM, 100 } }, { { 0 } }, { RUN("a", NULL, 200) }, 1, "", "" },
	{ "started the same nanosecond as the kill: still stopping",
	  { { "kill", "a", SIGTERM, 100 } }, { { 0 } }, { RUN("a", NULL, 100) }, 1, "a", "a" },
	{ "a kill without a time is not outdated by StartedAt", { { "kill", "a", SIGTERM, 0 } },
	  { { 0 } }, { RUN("a", NULL, 200) }, 1, "a", "a" },
	{ "died: its state speaks, forgotten", { { "kill", "a", SIGTERM, 100 } }, { { 0 } },
	  { { .id = "a", .name = "a", .state = "exited", .health = "unhealthy" } }, 1, "", "" },
	{ "restarting (Running true): its state speaks", { { "kill", "a", SIGKILL, 100 } },
	  { { 0 } }, { { .id = "a", .name = "a", .state = "restarting", .running = true } }, 1,
	  "", "" },
	{ "paused: its state speaks", { { "kill", "a", SIGTERM, 100 } }, { { 0 } },
	  { { .id = "a", .name = "a", .state = "paused", .running = true, .paused = true } }, 1,
	  "", "" },
	{ "paused with the state word running: not stopping either",
	  { { "kill", "a", SIGTERM, 100 } }, { { 0 } },
	  { { .id = "a", .name = "a", .state = "running", .running = true, .paused = true } }, 1,
	  "", "" },
	{ "signal 64 (RTMAX) is a signal like any: not a SIGTERM's stop",
	  { { "kill", "a", 64, 100 } }, { { 0 } }, { RUN("a", NULL, 50) }, 1, "", "" },
	{ "the latest of its kills counts: an old SIGKILL, then a recent stop signal",
	  { { "kill", "a", SIGKILL, 1000000000LL }, { "kill", "a", SIGTERM, 20000000000LL } },
	  { { 0 } }, { RUN("a", NULL, 50) }, 1, "a", "a", 21000000000LL },
	{ "destroyed: forgotten", { { "kill", "a", SIGTERM, 100 }, { "destroy", "a", 0, 120 } },
	  { { 0 } }, { RUN("b", NULL, 50) }, 1, "", "" },
	{ "not listed: removed, forgotten", { { "kill", "a", SIGTERM, 100 } }, { { 0 } },
	  { RUN("b", NULL, 50) }, 1, "", "" },
	{ "noted after the mark, not listed: kept for the next refresh", { { 0 } },
	  { { "kill", "a", SIGTERM, 100 } }, { RUN("b", NULL, 50) }, 1, "", "a" },
	{ "noted after the mark, listed exited (an older list): kept, not judged", { { 0 } },
	  { { "kill", "a", SIGTERM, 100 } },
	  { { .id = "a", .name = "a", .state = "exited" } }, 1, "", "a" },
	{ "noted after the mark, listed running: stopping at once", { { 0 } },
	  { { "kill", "a", SIGTERM, 100 } }, { RUN("a", NULL, 50) }, 1, "a", "a" },
	{ "a SIGHUP after the mark: kept until the next refresh", { { 0 } },
	  { { "kill", "a", SIGHUP, 100 } }, { RUN("a", NULL, 50) }, 1, "", "a" },
	{ "one of two stopped", { { "kill", "b", SIGTERM, 100 } }, { { 0 } },
	  { RUN("a", NULL, 50), RUN("b", NULL, 50) }, 2, "b", "b" },
	{ "die, stop and unknown actions are not noted", { { "die", "a", 0, 100 },
							    { "stop", "a", 0, 100 },
							    { "health_status: unhealthy", "a", 0, 1 } },
	  { { 0 } }, { RUN("a", NULL, 50) }, 1, "", "" },
	{ "an event without an id is not noted", { { "kill", "", SIGKILL, 100 } }, { { 0 } },
	  { RUN("a", NULL, 50) }, 1, "", "" },
	/* Each signal keeps its own time (issue 34): a SIGHUP after a start
	 * the stream missed does not make the stop before it look new. */
	{ "a stop, a missed start, then a SIGHUP: not stopping",
	  { { "kill", "a", SIGTERM, 100 }, { "kill", "a", SIGHUP, 300 } }, { { 0 } },
	  { RUN("a", NULL, 200) }, 1, "", "" },
	{ "a SIGHUP, a missed start, then the stop signal: stopping",
	  { { "kill", "a", SIGHUP, 100 }, { "kill", "a", SIGTERM, 300 } }, { { 0 } },
	  { RUN("a", NULL, 200) }, 1, "a", "a" },
	/* Bounded by the stop timeout (Docker's 10 s unless the container
	 * sets one) and 5 s: past it Docker sent a docker stop its SIGKILL. */
	{ "still running 15 s after its stop signal: stopping",
	  { { "kill", "a", SIGTERM, 1000000000LL } }, { { 0 } }, { RUN("a", NULL, 50) }, 1, "a",
	  "a", 16000000000LL },
	{ "still running 15.1 s after its stop signal: judged again, forgotten",
	  { { "kill", "a", SIGTERM, 1000000000LL } }, { { 0 } }, { RUN("a", NULL, 50) }, 1, "", "",
	  16100000000LL },
	{ "a stop timeout of 30 s: stopping 30 s after",
	  { { "kill", "a", SIGTERM, 1000000000LL } }, { { 0 } },
	  { { .id = "a", .name = "a", .state = "running", .running = true, .health = "healthy",
	      .started_at_ns = 50, .has_stop_timeout = true, .stop_timeout_s = 30 } },
	  1, "a", "a", 31000000000LL },
	{ "a kill without a time has no bound", { { "kill", "a", SIGTERM, 0 } }, { { 0 } },
	  { RUN("a", NULL, 50) }, 1, "a", "a", 99000000000LL },
};

static void note_all(struct stops *t, const struct ev *e)
{
	for (size_t i = 0; i < MAXE && e[i].action; i++) {
		struct event ev = { .signal = e[i].signal, .time_ns = e[i].t };
		snprintf(ev.action, sizeof(ev.action), "%s", e[i].action);
		snprintf(ev.id, sizeof(ev.id), "%s", e[i].id);
		stops_note(t, &ev);
	}
}

static void stopping_ids(const struct container_list *l, char *buf, size_t n)
{
	size_t off = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < l->n && off < n; i++)
		if (l->v[i].stopping)
			off += (size_t)snprintf(buf + off, n - off, "%s%s", off ? "," : "",
						l->v[i].id);
}

/* The cases name their containers a and b. */
static void kept_ids(struct stops *t, char *buf, size_t n)
{
	snprintf(buf, n, "%s%s%s", stops_has(t, "a") ? "a" : "",
		 stops_has(t, "a") && stops_has(t, "b") ? "," : "", stops_has(t, "b") ? "b" : "");
}

static void test_cases(void)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct scase *tc = &cases[i];
		struct container c[MAXC];
		struct stops *t = NULL;
		char got[64];
		memcpy(c, tc->c, sizeof(c));
		struct container_list l = { .v = c, .n = tc->n };
		if (!ok(stops_new(&t) == 0, "%s: a table", tc->what))
			continue;
		note_all(t, tc->before);
		uint64_t mark = stops_mark(t);
		note_all(t, tc->after);
		stops_apply(t, &l, mark, tc->now ? tc->now : 1000);
		stopping_ids(&l, got, sizeof(got));
		is_str(got, tc->stopping, "%s: stopping", tc->what);
		kept_ids(t, got, sizeof(got));
		is_str(got, tc->kept, "%s: kept", tc->what);
		stops_free(t);
	}
}

/* The table is bounded: the oldest kill goes first. */
static void test_bound(void)
{
	struct stops *t = NULL;
	char id[65];
	if (!ok(stops_new(&t) == 0, "bound: a table"))
		return;
	for (int i = 0; i <= STOPS_MAX; i++) {
		struct event ev = { .action = "kill", .signal = SIGTERM, .time_ns = i + 1 };
		snprintf(ev.id, sizeof(ev.id), "%x", i);
		ok(stops_note(t, &ev) || i < STOPS_MAX, "bound: kill %d noted", i);
	}
	snprintf(id, sizeof(id), "%x", 0);
	ok(!stops_has(t, id), "bound: the oldest was forgotten for kill %d", STOPS_MAX);
	snprintf(id, sizeof(id), "%x", 1);
	ok(stops_has(t, id), "bound: the second oldest is kept");
	snprintf(id, sizeof(id), "%x", STOPS_MAX);
	ok(stops_has(t, id), "bound: the newest is kept");
	struct event again = { .action = "kill", .id = "1", .signal = SIGKILL, .time_ns = 1000 };
	ok(stops_note(t, &again), "bound: a second kill of a noted container is noted");
	struct event more = { .action = "kill", .id = "ffff", .signal = SIGKILL, .time_ns = 1001 };
	stops_note(t, &more);
	ok(stops_has(t, "1") && !stops_has(t, "2"),
	   "bound: a container killed again is no longer the oldest");
	struct event start = { .action = "start", .id = "1" }, other = { .action = "start",
									   .id = "dead" };
	ok(stops_note(t, &start) && !stops_has(t, "1"), "bound: a start forgets it");
	struct event destroy = { .action = "destroy", .id = "ffff" };
	ok(stops_note(t, &destroy) && !stops_has(t, "ffff"), "bound: a destroy forgets it");
	ok(!stops_note(t, &other), "bound: a start of a container not noted changes nothing");
	stops_free(t);
	stops_free(NULL);
}

/* Which notes ask for a refresh at once (STOPS_NEW_SIGNAL): a signal new to
 * the container since its start, not a repeat of one (a `kill -s HUP` loop
 * must not raise the rate of queries). */
static void test_new_signal(void)
{
	static const struct {
		const char *action;
		int signal;
		enum stops_noted want;
		const char *what;
	} steps[] = {
		{ "kill", SIGHUP, STOPS_NEW_SIGNAL, "a first HUP" },
		{ "kill", SIGHUP, STOPS_CHANGED, "the same HUP again" },
		{ "kill", SIGHUP, STOPS_CHANGED, "and again" },
		{ "kill", SIGTERM, STOPS_NEW_SIGNAL, "then TERM" },
		{ "kill", SIGTERM, STOPS_CHANGED, "TERM again" },
		{ "kill", SIGKILL, STOPS_NEW_SIGNAL, "then KILL" },
		{ "kill", 0, STOPS_NEW_SIGNAL, "a signal that cannot be read" },
		{ "kill", 0, STOPS_CHANGED, "another that cannot be read" },
		{ "die", 0, STOPS_UNCHANGED, "die" },
		{ "start", 0, STOPS_CHANGED, "a start forgets it" },
		{ "start", 0, STOPS_UNCHANGED, "a second start" },
		{ "kill", SIGTERM, STOPS_NEW_SIGNAL, "TERM after the start is new again" },
	};
	struct stops *t = NULL;
	if (!ok(stops_new(&t) == 0, "new signal: a table"))
		return;
	for (size_t i = 0; i < ARRAY_SIZE(steps); i++) {
		struct event ev = { .id = "c1", .signal = steps[i].signal, .time_ns = (int64_t)i + 1 };
		snprintf(ev.action, sizeof(ev.action), "%s", steps[i].action);
		is_int(stops_note(t, &ev), steps[i].want, "new signal: %s", steps[i].what);
	}
	stops_free(t);
}

static const struct {
	const char *s;
	int want;
} signals[] = {
	{ NULL, SIGTERM }, { "", SIGTERM },	   { "SIGTERM", SIGTERM },     { "TERM", SIGTERM },
	{ "term", SIGTERM }, { "SigTerm", SIGTERM }, { "15", SIGTERM },	       { "SIGQUIT", SIGQUIT },
	{ "9", SIGKILL },    { "SIGKILL", SIGKILL }, { "SIGCLD", SIGCHLD },     { "SIGIOT", SIGABRT },
	{ "SIGPOLL", SIGIO }, { "SIGWINCH", SIGWINCH }, { "SIGUSR1", SIGUSR1 }, { "RTMIN", 34 },
	{ "SIGRTMIN+1", 35 }, { "RTMIN+15", 49 },    { "RTMAX-14", 50 },       { "RTMAX-1", 63 },
	{ "SIGRTMAX", 64 },  { "64", 64 },	   { "0", -1 },		       { "65", -1 },
	{ "0015", -1 },	     { "-15", -1 },	   { "RTMIN+16", -1 },	       { "RTMAX-15", -1 },
	{ "RTMIN+", -1 },    { "RTMIN+0", -1 },	   { "RTMAX+1", -1 },	       { "SIG", -1 },
	{ "SIGSIGTERM", -1 }, { "TERM ", -1 },	   { "bogus", -1 },
	{ "SIGTERMSIGTERMSIGTERM", -1 },
};

static void test_signals(void)
{
	for (size_t i = 0; i < sizeof(signals) / sizeof(signals[0]); i++)
		is_int(stops_parse_signal(signals[i].s), signals[i].want, "signal '%s'",
		       signals[i].s ? signals[i].s : "(none)");
}

int main(void)
{
	test_cases();
	test_bound();
	test_new_signal();
	test_signals();
	return done_testing();
}
