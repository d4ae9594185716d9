/* SPDX-License-Identifier: Apache-2.0 */
/* Table tests for runtime/inspect.c: real `docker inspect` output recorded
 * from dockerd 20.10, and nerdctl-shaped objects (nerdctl's dockercompat:
 * Name without a slash, StartedAt "" before a task exists, Labels omitted,
 * State.Health absent until the first probe). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "runtime/inspect.h"
#include "tests/lib/tap.h"

#define RECORDED "tests/fakes/nerdctl-data/docker-20.10-inspect.json"

struct want {
	const char *name, *state, *health; /* health NULL: State.Health absent */
	bool running, paused, oneoff;
	int64_t started, log_end;
};

static void check(const struct container *c, const struct want *w, const char *what)
{
	is_str(c->name, w->name, "%s: name", what);
	is_str(c->state, w->state, "%s: state", what);
	is_str(c->health, w->health, "%s: health", what);
	ok(c->running == w->running && c->paused == w->paused && c->oneoff == w->oneoff,
	   "%s: running=%d paused=%d oneoff=%d", what, c->running, c->paused, c->oneoff);
	is_int(c->started_at_ns, w->started, "%s: StartedAt", what);
	is_int(c->health_log_end_ns, w->log_end, "%s: newest Health.Log End", what);
	ok(c->id && strlen(c->id) == 64, "%s: id kept", what);
}

static char *slurp(const char *path, size_t *len)
{
	_cleanup_fclose_ FILE *f = fopen(path, "r");
	if (!f)
		return NULL;
	char *buf = malloc(1 << 20);
	if (!buf)
		return NULL;
	*len = fread(buf, 1, (1 << 20) - 1, f);
	return buf;
}

/* One inspect object, parsed into *c (free with container_free). */
static int parse_doc(const char *doc, struct container *c, struct errbuf *e)
{
	struct json j;
	int r = json_parse(&j, doc, strlen(doc), 256, e);
	if (r == 0) {
		r = inspect_parse_object(&j, 0, c, e);
		json_free(&j);
	}
	return r;
}

static void test_recorded_docker(void)
{
	/* Values read off the recording with Python (json + calendar.timegm). */
	static const struct want w[] = {
		{ "web", "running", "healthy", true, false, false,
		  1795983840042535745, 1795983845257248256 },
		{ "sick", "paused", "unhealthy", true, true, false,
		  1795983835097586983, 1795983839279612320 },
		{ "nohc", "running", NULL, true, false, false, 1795983835270750326, 0 },
		{ "oneoff", "created", NULL, false, false, true, 0, 0 },
		{ "nolabels", "running", "healthy", true, false, false,
		  1795983835527776291, 1795983845099870308 },
		{ "starting", "running", "starting", true, false, false,
		  1795983835777285369, 0 },
		{ "stopped", "exited", "unhealthy", false, false, false,
		  1795983842993652637, 1795983845122972428 },
	};
	size_t len = 0;
	_cleanup_free_ char *buf = slurp(RECORDED, &len);
	if (!ok(buf != NULL, "read %s", RECORDED))
		return;
	struct container_list l = { 0 };
	struct errbuf e = { "" };
	int r = inspect_parse_array(buf, len, &l, &e);
	is_int(r, 0, "recorded docker inspect parses (%s)", e.msg);
	is_int(l.n, ARRAY_SIZE(w), "one container per element");
	for (size_t i = 0; i < l.n && i < ARRAY_SIZE(w); i++)
		check(&l.v[i], &w[i], w[i].name);
	container_list_free(&l);
}

#define ID "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define OBJ(state, config) "{\"Id\":\"" ID "\",\"Name\":\"web-1\",\"State\":" state config "}"

static void test_nerdctl_shapes(void)
{
	static const struct {
		const char *what, *in;
		struct want w;
	} cases[] = {
		{ "nerdctl: no task yet, no labels",
		  "{\"Id\":\"" ID "\",\"Name\":\"db-1\",\"State\":{\"Status\":\"\","
		  "\"Running\":false,\"Paused\":false,\"Restarting\":false,\"Pid\":0,"
		  "\"ExitCode\":0,\"Error\":\"\",\"StartedAt\":\"\",\"FinishedAt\":\"\"},"
		  "\"Config\":{\"AttachStdin\":false}}",
		  { "db-1", "created", NULL, false, false, false, 0, 0 } },
		{ "nerdctl: health absent before the first probe",
		  OBJ("{\"Status\":\"running\",\"Running\":true,\"Paused\":false,"
		      "\"StartedAt\":\"2026-11-29T20:24:00.042535745Z\"}",
		      ",\"Config\":{\"Labels\":{\"com.docker.compose.project\":\"demo\","
		      "\"nerdctl/name\":\"web-1\"}}"),
		  { "web-1", "running", NULL, true, false, false, 1795983840042535745, 0 } },
		{ "nerdctl: healthy kept after the container stopped",
		  OBJ("{\"Status\":\"exited\",\"Running\":false,\"Paused\":false,"
		      "\"StartedAt\":\"2026-11-29T20:24:00Z\",\"FinishedAt\":\"2026-11-29T20:30:00Z\","
		      "\"Health\":{\"Status\":\"healthy\",\"FailingStreak\":0,\"Log\":["
		      "{\"Start\":\"2026-11-29T20:24:01Z\",\"End\":\"2026-11-29T20:24:01.5Z\","
		      "\"ExitCode\":0,\"Output\":\"\"}]}}", ""),
		  { "web-1", "exited", "healthy", false, false, false,
		    1795983840000000000, 1795983841500000000 } },
		{ "nerdctl: healthy from before the current start",
		  OBJ("{\"Status\":\"running\",\"Running\":true,"
		      "\"StartedAt\":\"2026-11-29T21:00:00Z\","
		      "\"Health\":{\"Status\":\"healthy\",\"Log\":["
		      "{\"End\":\"2026-11-29T20:24:03Z\"},{\"End\":\"2026-11-29T20:24:04Z\"},"
		      "{\"End\":\"2026-11-29T20:24:02Z\"}]}}", ""),
		  { "web-1", "running", "healthy", true, false, false,
		    1795986000000000000, 1795983844000000000 } },
		/* nerdctl 2.x: Health.Log newest first, Start/End in the local
		 * offset; the newest is picked by time, not by place or text. */
		{ "nerdctl 2.x: Health.Log newest first, local offsets",
		  OBJ("{\"Status\":\"running\",\"Running\":true,\"Paused\":false,"
		      "\"Restarting\":true,\"StartedAt\":\"2026-11-29T20:24:00Z\","
		      "\"Health\":{\"Status\":\"healthy\",\"FailingStreak\":0,\"Log\":["
		      "{\"Start\":\"2026-11-30T05:24:04.1+09:00\",\"End\":\"2026-11-30T05:24:04.2+09:00\","
		      "\"ExitCode\":0,\"Output\":\"\"},"
		      "{\"Start\":\"2026-11-30T05:24:03+09:00\",\"End\":\"2026-11-30T05:24:03.5+09:00\","
		      "\"ExitCode\":0,\"Output\":\"\"}]}}", ""),
		  { "web-1", "running", "healthy", true, false, false,
		    1795983840000000000, 1795983844200000000 } },
		{ "nerdctl 2.x: mixed offsets, the later text is the older time",
		  OBJ("{\"Status\":\"running\",\"Running\":true,"
		      "\"StartedAt\":\"2026-11-29T20:24:00Z\","
		      "\"Health\":{\"Status\":\"healthy\",\"Log\":["
		      "{\"End\":\"2026-11-29T19:24:04.5-01:00\"},"
		      "{\"End\":\"2026-11-30T05:24:04+09:00\"}]}}", ""),
		  { "web-1", "running", "healthy", true, false, false,
		    1795983840000000000, 1795983844500000000 } },
		{ "nerdctl 2.x: Restarting true while running (a restart policy)",
		  OBJ("{\"Status\":\"running\",\"Running\":true,\"Paused\":false,"
		      "\"Restarting\":true,\"StartedAt\":\"2026-11-29T20:24:00Z\"}", ""),
		  { "web-1", "running", NULL, true, false, false, 1795983840000000000, 0 } },
		{ "nerdctl 2.x: paused is Running false, Status paused",
		  OBJ("{\"Status\":\"paused\",\"Running\":false,\"Paused\":true,"
		      "\"Restarting\":true,\"StartedAt\":\"2026-11-29T20:24:00Z\","
		      "\"Health\":{\"Status\":\"healthy\",\"Log\":["
		      "{\"End\":\"2026-11-30T05:24:04+09:00\"}]}}", ""),
		  { "web-1", "paused", "healthy", false, true, false,
		    1795983840000000000, 1795983844000000000 } },
		{ "nerdctl: a run container carries no oneoff label",
		  OBJ("{\"Status\":\"exited\"}",
		      ",\"Config\":{\"Labels\":{\"com.docker.compose.project\":\"demo\","
		      "\"com.docker.compose.service\":\"web\",\"nerdctl/name\":\"web-run-1\"}}"),
		  { "web-1", "exited", NULL, false, false, false, 0, 0 } },
		{ "Docker: slash dropped, null labels, null health log",
		  "{\"Id\":\"" ID "\",\"Name\":\"/app_web_1\",\"State\":{\"Status\":\"running\","
		  "\"Running\":true,\"StartedAt\":\"0001-01-01T00:00:00Z\",\"Health\":"
		  "{\"Status\":\"starting\",\"Log\":null}},\"Config\":{\"Labels\":null}}",
		  { "app_web_1", "running", "starting", true, false, false, 0, 0 } },
		{ "null Health, oneoff False, null Config",
		  "{\"Id\":\"" ID "\",\"Name\":\"x\",\"State\":{\"Status\":\"running\","
		  "\"Health\":null},\"Config\":null}",
		  { "x", "running", NULL, false, false, false, 0, 0 } },
		{ "oneoff True, no Name: short id shown",
		  "{\"Id\":\"" ID "\",\"State\":{\"Status\":\"exited\",\"Health\":{}},"
		  "\"Config\":{\"Labels\":{\"com.docker.compose.oneoff\":\"True\"}}}",
		  { "0123456789ab", "exited", "", false, false, true, 0, 0 } },
		{ "oneoff False",
		  OBJ("{\"Status\":\"running\"}",
		      ",\"Config\":{\"Labels\":{\"com.docker.compose.oneoff\":\"False\"}}"),
		  { "web-1", "running", NULL, false, false, false, 0, 0 } },
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct json j;
		struct container c;
		struct errbuf e = { "" };
		int r = json_parse(&j, cases[i].in, strlen(cases[i].in), 1024, &e);
		if (r == 0)
			r = inspect_parse_object(&j, 0, &c, &e);
		is_int(r, 0, "%s: parses (%s)", cases[i].what, e.msg);
		if (r == 0) {
			check(&c, &cases[i].w, cases[i].what);
			container_free(&c);
		}
		json_free(&j);
	}
}

/* The project label is kept for nerdctl's second check: absent is NULL. */
static void test_project_label(void)
{
	static const struct {
		const char *config, *want;
	} cases[] = {
		{ "", NULL },
		{ ",\"Config\":{\"Labels\":{}}", NULL },
		{ ",\"Config\":{\"Labels\":{\"com.docker.compose.project\":null}}", NULL },
		{ ",\"Config\":{\"Labels\":{\"com.docker.compose.project\":\"demo\"}}", "demo" },
		{ ",\"Config\":{\"Labels\":{\"com.docker.compose.project\":\"d\\u0065mo\"}}",
		  "demo" },
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char in[512];
		struct container c = { 0 };
		struct errbuf e = { "" };
		snprintf(in, sizeof(in), "{\"Id\":\"a\",\"State\":{}%s}", cases[i].config);
		int r = parse_doc(in, &c, &e);
		is_int(r, 0, "project label case %zu parses (%s)", i, e.msg);
		is_str(c.project ? c.project : "(null)", cases[i].want ? cases[i].want : "(null)",
		       "project label case %zu", i);
		container_free(&c);
	}
}

static void test_errors(void)
{
	static const struct {
		const char *in, *msg; /* msg: the field the error must name */
	} cases[] = {
		{ "[]", "container: expected an object, got an array" },
		{ "{\"Name\":\"x\",\"State\":{}}", "Id: missing" },
		{ "{\"Id\":7,\"State\":{}}", "Id: expected a string, got a number" },
		{ "{\"Id\":\"a\",\"Name\":[],\"State\":{}}", "Name: expected a string, got an array" },
		{ "{\"Id\":\"a\"}", "State: missing" },
		{ "{\"Id\":\"a\",\"State\":\"up\"}", "State: expected an object, got a string" },
		{ "{\"Id\":\"a\",\"State\":{\"Status\":1}}", "State.Status: expected a string" },
		{ "{\"Id\":\"a\",\"State\":{\"Running\":\"yes\"}}",
		  "State.Running: expected a boolean, got a string" },
		{ "{\"Id\":\"a\",\"State\":{\"Paused\":null}}", "State.Paused: expected a boolean" },
		{ "{\"Id\":\"a\",\"State\":{\"StartedAt\":\"yesterday\"}}",
		  "State.StartedAt: not an RFC 3339 time" },
		{ "{\"Id\":\"a\",\"State\":{\"StartedAt\":12}}", "State.StartedAt: expected a string" },
		{ "{\"Id\":\"a\",\"State\":{\"Health\":\"healthy\"}}",
		  "State.Health: expected an object, got a string" },
		{ "{\"Id\":\"a\",\"State\":{\"Health\":{\"Status\":true}}}",
		  "State.Health.Status: expected a string, got a boolean" },
		{ "{\"Id\":\"a\",\"State\":{\"Health\":{\"Status\":\"healthy\",\"Log\":{}}}}",
		  "State.Health.Log: expected an array" },
		{ "{\"Id\":\"a\",\"State\":{\"Health\":{\"Log\":[3]}}}",
		  "State.Health.Log[]: expected an object" },
		{ "{\"Id\":\"a\",\"State\":{\"Health\":{\"Log\":[{\"End\":\"2026-02-30T00:00:00Z\"}]}}}",
		  "State.Health.Log[].End: not an RFC 3339 time" },
		{ "{\"Id\":\"a\",\"State\":{},\"Config\":[]}", "Config: expected an object" },
		{ "{\"Id\":\"a\",\"State\":{},\"Config\":{\"Labels\":[]}}",
		  "Config.Labels: expected an object, got an array" },
		{ "{\"Id\":\"a\",\"State\":{},\"Config\":{\"Labels\":"
		  "{\"com.docker.compose.oneoff\":true}}}",
		  "Config.Labels[com.docker.compose.oneoff]: expected a string" },
		{ "{\"Id\":\"a\",\"State\":{},\"Config\":{\"Labels\":"
		  "{\"com.docker.compose.project\":[\"demo\"]}}}",
		  "Config.Labels[com.docker.compose.project]: expected a string" },
		{ "{\"Id\":\"a\",\"State\":{},\"Config\":{\"Healthcheck\":[]}}",
		  "Config.Healthcheck: expected an object" },
		{ "{\"Id\":\"a\",\"State\":{},\"Config\":{\"Healthcheck\":{\"Test\":\"x\"}}}",
		  "Config.Healthcheck.Test: expected an array" },
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct json j;
		struct container c = { 0 };
		struct errbuf e = { "" };
		int r = json_parse(&j, cases[i].in, strlen(cases[i].in), 256, &e);
		if (r == 0)
			r = inspect_parse_object(&j, 0, &c, &e);
		is_int(r, -EINVAL, "%s refused", cases[i].in);
		ok(strstr(e.msg, cases[i].msg) != NULL, "error names the field: %s", e.msg);
		ok(!c.id && !c.name && !c.state && !c.health, "nothing leaked on error");
		json_free(&j);
	}
}

/* Config.Healthcheck.Test says whether a probe is configured, whatever the
 * container's state: ["NONE"] (healthcheck: {disable: true}) is not one. */
static void test_healthcheck_config(void)
{
	static const struct {
		const char *config;
		bool want;
	} cases[] = {
		{ "", false },
		{ ",\"Config\":{}", false },
		{ ",\"Config\":{\"Healthcheck\":null}", false },
		{ ",\"Config\":{\"Healthcheck\":{}}", false },
		{ ",\"Config\":{\"Healthcheck\":{\"Test\":null}}", false },
		{ ",\"Config\":{\"Healthcheck\":{\"Test\":[]}}", false },
		{ ",\"Config\":{\"Healthcheck\":{\"Test\":[\"NONE\"]}}", false },
		{ ",\"Config\":{\"Healthcheck\":{\"Test\":[\"CMD\",\"true\"]}}", true },
		{ ",\"Config\":{\"Healthcheck\":{\"Test\":[\"CMD-SHELL\",\"true\"],"
		  "\"Interval\":1000000000}}", true },
		/* nerdctl 2.x: durations in integer nanoseconds. */
		{ ",\"Config\":{\"Healthcheck\":{\"Test\":[\"CMD-SHELL\",\"wget -q localhost\"],"
		  "\"Interval\":30000000000,\"Timeout\":5000000000,\"Retries\":3,"
		  "\"StartPeriod\":10000000000,\"StartInterval\":5000000000}}", true },
		{ ",\"Config\":{\"Healthcheck\":{\"Test\":[\"NONE\"],\"Interval\":30000000000}}",
		  false },
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char doc[512];
		snprintf(doc, sizeof(doc),
			 "{\"Id\":\"a\",\"Name\":\"/w\",\"State\":{\"Status\":\"created\"}%s}",
			 cases[i].config);
		struct container c = { 0 };
		struct errbuf e = { "" };
		int r = parse_doc(doc, &c, &e);
		ok(r == 0 && c.healthcheck_configured == cases[i].want,
		   "healthcheck configured = %d for {%s} (%s)", cases[i].want, cases[i].config, e.msg);
		container_free(&c);
	}
}

/* Issue 29: what says a container is being stopped. Docker's stop signal;
 * nerdctl's label, set by `nerdctl stop` and `kill` before they signal. */
static void test_stop_facts(void)
{
	static const struct {
		const char *config, *signal;
		bool stopped;
		int want_r;
	} cases[] = {
		{ "", NULL, false, 0 },
		{ ",\"Config\":{\"StopSignal\":\"SIGQUIT\"}", "SIGQUIT", false, 0 },
		{ ",\"Config\":{\"StopSignal\":null}", NULL, false, 0 },
		{ ",\"Config\":{\"StopSignal\":15}", NULL, false, -EINVAL },
		{ ",\"Config\":{\"Labels\":{\"containerd.io/restart.explicitly-stopped\":\"true\"}}",
		  NULL, true, 0 },
		{ ",\"Config\":{\"Labels\":{\"containerd.io/restart.explicitly-stopped\":\"false\"}}",
		  NULL, false, 0 },
		{ ",\"Config\":{\"Labels\":{\"containerd.io/restart.explicitly-stopped\":true}}",
		  NULL, false, 0 },
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char doc[512];
		snprintf(doc, sizeof(doc), "{\"Id\":\"a\",\"State\":{\"Status\":\"running\"}%s}",
			 cases[i].config);
		struct container c = { 0 };
		struct errbuf e = { "" };
		int r = parse_doc(doc, &c, &e);
		is_int(r, cases[i].want_r, "stop facts {%s}: parsed (%s)", cases[i].config, e.msg);
		if (r == 0) {
			is_str(c.stop_signal, cases[i].signal, "stop facts {%s}: StopSignal",
			       cases[i].config);
			is_int(c.explicitly_stopped, cases[i].stopped,
			       "stop facts {%s}: explicitly stopped", cases[i].config);
			ok(!c.stopping, "stop facts {%s}: not judged stopping by the parser",
			   cases[i].config);
		}
		container_free(&c);
	}
}

static void test_array(void)
{
	static const struct {
		const char *in;
		int want;
		size_t n;
		const char *msg;
	} cases[] = {
		{ "[]", 0, 0, "" },
		{ "[" OBJ("{}", "") "," OBJ("{\"Running\":true}", "") "]", 0, 2, "" },
		{ "{}", -EINVAL, 0, "inspect output: expected an array, got an object" },
		{ "[" OBJ("{}", "") "," OBJ("{\"Running\":1}", "") "]", -EINVAL, 0,
		  "container 1: State.Running: expected a boolean" },
		{ "[" OBJ("{}", ""), -EINVAL, 0, "truncated" },
		{ "garbage", -EINVAL, 0, "malformed" },
		{ "", -EINVAL, 0, "empty" },
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct container_list l = { 0 };
		struct errbuf e = { "" };
		/* A container already in the list must survive a failed batch. */
		struct container *pre = container_list_add(&l);
		pre->id = strdup("pre");
		int r = inspect_parse_array(cases[i].in, strlen(cases[i].in), &l, &e);
		is_int(r, cases[i].want, "array %zu: result (%s)", i, e.msg);
		is_int(l.n, cases[i].n + 1, "array %zu: %zu appended", i, cases[i].n);
		is_str(l.v[0].id, "pre", "array %zu: earlier entry intact", i);
		if (*cases[i].msg)
			ok(strstr(e.msg, cases[i].msg) != NULL, "array %zu: error '%s'", i, e.msg);
		container_list_free(&l);
	}
}

int main(void)
{
	test_recorded_docker();
	test_nerdctl_shapes();
	test_errors();
	test_project_label();
	test_healthcheck_config();
	test_stop_facts();
	test_array();
	return done_testing();
}
