/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/ctl.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent/config.h"
#include "base/clock.h"
#include "base/json.h"
#include "runtime/http.h"
#include "statusfile/statusfile.h"

#define CTL_TIMEOUT_MS 30000
#define CTL_MAX_BODY (4u << 20)

/* The socket: --control-socket, else the environment, else the config file
 * (as the agent reads it), else the default. A config the agent would refuse
 * must not stop `reload` from saying so: it falls back to the default. */
static const char *socket_path(int argc, char *argv[], char **owned)
{
	for (int i = 1; i < argc; i++) {
		if (!strncmp(argv[i], "--control-socket=", 17))
			return argv[i] + 17;
		if (!strcmp(argv[i], "--control-socket") && i + 1 < argc)
			return argv[i + 1];
	}
	const char *env = getenv("DSTACK_HEALTHD_CONTROL_SOCKET");
	if (env)
		return env;
	char *const args[] = { "dstack-healthd", NULL };
	struct config c;
	struct errbuf err = { "" };
	if (config_load(1, args, &c, &err) == 0) {
		*owned = c.control_socket;
		c.control_socket = NULL;
		config_free(&c);
		return *owned;
	}
	return CONFIG_DEFAULT_CONTROL_SOCKET;
}

static int call(const char *path, const char *method, const char *target,
		struct http_response *resp)
{
	struct http_endpoint ep;
	struct errbuf err = { "" };
	char url[4200];
	struct http_conn *c = NULL;
	int64_t deadline = clock_mono_ms() + CTL_TIMEOUT_MS;
	char cwd[4096] = "";
	if (path[0] != '/' && !getcwd(cwd, sizeof(cwd)))
		cwd[0] = '\0';
	snprintf(url, sizeof(url), "unix://%s%s%s", cwd, cwd[0] ? "/" : "", path);
	int r = http_endpoint_parse(url, false, "", &ep, &err);
	if (r == 0)
		r = http_connect(&ep, deadline, &c, &err);
	if (r == 0)
		r = http_request(c, method, target, deadline, CTL_MAX_BODY, resp, &err);
	http_close(c);
	if (r < 0)
		fprintf(stderr, "dstack-healthd: error: the agent's control socket %s: %s\n", path, err.msg);
	return r;
}

struct out {
	const struct json *j;
	bool colour;
};

static void str(const struct json *j, int v, char *buf, size_t n)
{
	char *s = NULL;
	if (v >= 0 && json_is_string(j, v) && json_strdup(j, v, &s) == 0)
		snprintf(buf, n, "%s", s);
	else if (v >= 0 && !json_is_null(j, v))
		snprintf(buf, n, "%.*s", j->tok[v].end - j->tok[v].start, j->s + j->tok[v].start);
	else
		snprintf(buf, n, "-");
	free(s);
}

static const char *paint(const struct out *o, bool good)
{
	return !o->colour ? "" : good ? "\033[32m" : "\033[31m";
}

/* The agent's own probe of a container (issue 27): target, status, last
 * result and streak; or why its label was refused. */
static void print_agent_probe(const struct json *j, int p)
{
	char target[256], status[32], reason[384], fail[16], pass[16], refused[256];
	if (p < 0 || !json_is_object(j, p))
		return;
	str(j, json_get(j, p, "refused"), refused, sizeof(refused));
	if (strcmp(refused, "-")) {
		printf("  %-24s agent probe refused: %s\n", "", refused);
		return;
	}
	str(j, json_get(j, p, "target"), target, sizeof(target));
	str(j, json_get(j, p, "status"), status, sizeof(status));
	str(j, json_get(j, p, "last_reason"), reason, sizeof(reason));
	str(j, json_get(j, p, "failing_streak"), fail, sizeof(fail));
	str(j, json_get(j, p, "passing_streak"), pass, sizeof(pass));
	printf("  %-24s agent probe %s: %s, last %s, streak %s failed / %s passed\n", "",
	       target, status, reason, fail, pass);
}

static void print_containers(const struct out *o, int arr)
{
	const struct json *j = o->j;
	if (arr < 0 || !json_is_array(j, arr) || j->tok[arr].size == 0)
		return;
	printf("\nContainers:\n");
	JSON_ARRAY_FOREACH(j, arr, c, n) {
		char name[128], status[256], streak[32], since[40], probe[256];
		str(j, json_get(j, c, "name"), name, sizeof(name));
		str(j, json_get(j, c, "status"), status, sizeof(status));
		str(j, json_get(j, c, "failing_streak"), streak, sizeof(streak));
		str(j, json_get(j, c, "since"), since, sizeof(since));
		str(j, json_get(j, json_get(j, c, "last_probe"), "output"), probe, sizeof(probe));
		char *nl = strstr(probe, "\\n");
		if (nl)
			*nl = '\0';
		bool good = !strcmp(status, "healthy");
		printf("  %-24s %s%-28s%s streak %-3s since %s\n", name, paint(o, good), status,
		       o->colour ? "\033[0m" : "", streak, since);
		if (strcmp(probe, "-"))
			printf("  %-24s last probe: %s\n", "", probe);
		print_agent_probe(j, json_get(j, c, "agent_probe"));
	}
}

/* An ISO 8601 UTC time as the view prints it (2026-12-01T10:00:00.123Z), in
 * ms since the epoch; -1 when it is not one. */
static int64_t iso_ms(const char *t)
{
	struct tm tm = { 0 };
	int ms = 0, n = 0;
	if (sscanf(t, "%4d-%2d-%2dT%2d:%2d:%2d.%3dZ%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
		   &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &ms, &n) != 7 || t[n])
		return -1;
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	time_t s = timegm(&tm);
	return s == (time_t)-1 ? -1 : (int64_t)s * 1000 + ms;
}

/* Where the verdict comes from, and for a status file what it said: the
 * same facts `status --json` has under "source" and "status_file". */
static void print_source(const struct out *o, int src, int sf, int refresh)
{
	const struct json *j = o->j;
	char kind[32], a[512], b[128], c[128];
	if (src < 0 || !json_is_object(j, src))
		return;
	str(j, json_get(j, src, "kind"), kind, sizeof(kind));
	printf("\nSource:\n");
	if (!strcmp(kind, "status_file")) {
		str(j, json_get(j, src, "path"), a, sizeof(a));
		printf("  status file %s\n", a);
	} else if (!strcmp(kind, "docker")) {
		str(j, json_get(j, src, "host"), a, sizeof(a));
		str(j, json_get(j, src, "api_version"), b, sizeof(b));
		str(j, json_get(j, src, "project"), c, sizeof(c));
		printf("  docker %s (API %s), project %s\n", a, b, c);
	} else if (!strcmp(kind, "nerdctl")) {
		str(j, json_get(j, src, "nerdctl"), a, sizeof(a));
		str(j, json_get(j, src, "namespace"), b, sizeof(b));
		str(j, json_get(j, src, "project"), c, sizeof(c));
		printf("  nerdctl %s, namespace %s, project %s\n", a, b, c);
	} else {
		str(j, json_get(j, src, "why"), a, sizeof(a));
		printf("  %s: %s\n", kind, a);
	}
	if (sf < 0 || !json_is_object(j, sf))
		return;
	bool read = false;
	json_bool(j, json_get(j, sf, "read"), &read);
	if (!read) {
		printf("  not read: the entry above says why\n");
		return;
	}
	char state[16], stamp[40], end[40];
	str(j, json_get(j, sf, "state"), state, sizeof(state));
	str(j, json_get(j, sf, "timestamp"), stamp, sizeof(stamp));
	str(j, json_get(j, refresh, "last_end"), end, sizeof(end));
	int64_t w = iso_ms(stamp), e = iso_ms(end);
	bool good = !strcmp(state, "healthy");
	printf("  %s%s%s, written %s", paint(o, good), state, o->colour ? "\033[0m" : "", stamp);
	/* The age the last refresh judged, as the 60 s rule reads it. */
	if (w >= 0 && e >= 0)
		printf(", %s%lld s %s%s at the last refresh (limit %d s)", paint(o, llabs((e - w) / 1000) <= STATUSFILE_MAX_AGE),
		       (long long)llabs((e - w) / 1000), e >= w ? "old" : "ahead",
		       o->colour ? "\033[0m" : "", STATUSFILE_MAX_AGE);
	printf("\n");
	/* What it must not predate (issue 29). */
	char start[40], from[32];
	str(j, json_get(j, sf, "app_start"), start, sizeof(start));
	str(j, json_get(j, sf, "app_start_from"), from, sizeof(from));
	int64_t st = iso_ms(start);
	if (st >= 0)
		printf("  the app started %s (%s); %s%s%s\n", start, from,
		       paint(o, w < 0 || w / 1000 >= st / 1000),
		       w >= 0 && w / 1000 < st / 1000 ? "written before it" : "not before it",
		       o->colour ? "\033[0m" : "");
}

/* The last refresh: when, how long, and a failure's detail while it lasts. */
static void print_refresh(const struct out *o, int r)
{
	const struct json *j = o->j;
	if (r < 0 || !json_is_object(j, r))
		return;
	char end[40], took[32], next[40], row[16], when[40], err[600];
	str(j, json_get(j, r, "last_end"), end, sizeof(end));
	str(j, json_get(j, r, "last_duration_ms"), took, sizeof(took));
	str(j, json_get(j, r, "next_due"), next, sizeof(next));
	str(j, json_get(j, r, "failures_in_row"), row, sizeof(row));
	printf("\nRefresh:\n  last %s, took %s ms, next %s\n", end, took, next);
	int f = json_get(j, r, "last_failure");
	if (strcmp(row, "0") && f >= 0 && json_is_object(j, f)) {
		str(j, json_get(j, f, "time"), when, sizeof(when));
		str(j, json_get(j, f, "error"), err, sizeof(err));
		printf("  %sfailing, %s in a row%s: %s (%s)\n", paint(o, false), row,
		       o->colour ? "\033[0m" : "", err, when);
	}
}

/* The verdict file a sidecar writes (issue 45: where a newcomer looks when the
 * guest agent finds no file): its path, what was written last and when, and
 * a failure while it lasts. Nothing when the agent writes none. */
static void print_vfile(const struct out *o, int f)
{
	const struct json *j = o->j;
	if (f < 0 || !json_is_object(j, f))
		return;
	char path[512], last[16], when[40], writes[32], failures[32], err[600];
	bool failing = false;
	str(j, json_get(j, f, "path"), path, sizeof(path));
	str(j, json_get(j, f, "last_written"), last, sizeof(last));
	str(j, json_get(j, f, "last_write"), when, sizeof(when));
	str(j, json_get(j, f, "writes"), writes, sizeof(writes));
	str(j, json_get(j, f, "failures"), failures, sizeof(failures));
	json_bool(j, json_get(j, f, "failing"), &failing);
	printf("\nVerdict file:\n  %s: ", path);
	if (strcmp(writes, "0"))
		printf("%s%s%s at %s (writes: %s, failed: %s)\n", paint(o, !strcmp(last, "healthy")),
		       last, o->colour ? "\033[0m" : "", when, writes, failures);
	else
		printf("%snot written yet%s (failed: %s)\n", paint(o, false), o->colour ? "\033[0m" : "",
		       failures);
	int lf = json_get(j, f, "last_failure");
	if (failing && lf >= 0 && json_is_object(j, lf)) {
		str(j, json_get(j, lf, "time"), when, sizeof(when));
		str(j, json_get(j, lf, "error"), err, sizeof(err));
		printf("  %sfailing%s: %s (%s)\n", paint(o, false), o->colour ? "\033[0m" : "", err, when);
	}
}

static void print_pollers(const struct out *o, int arr)
{
	const struct json *j = o->j;
	printf("\nPollers (last 10 minutes):\n");
	if (arr < 0 || !json_is_array(j, arr) || j->tok[arr].size == 0)
		printf("  none\n");
	else
		JSON_ARRAY_FOREACH(j, arr, p, n) {
			char addr[64], count[32], last[40], told[8];
			str(j, json_get(j, p, "address"), addr, sizeof(addr));
			str(j, json_get(j, p, "count"), count, sizeof(count));
			str(j, json_get(j, p, "last_seen"), last, sizeof(last));
			str(j, json_get(j, p, "last_healthy"), told, sizeof(told));
			printf("  %-40s %s polls, last %s, told healthy=%s\n", addr, count, last, told);
		}
}

static void print_history(const struct out *o, int arr)
{
	const struct json *j = o->j;
	if (arr < 0 || !json_is_array(j, arr))
		return;
	printf("\nRecent changes:\n");
	JSON_ARRAY_FOREACH(j, arr, h, n) {
		if (n >= 10)
			break;
		char t[40], summary[256], trig[16];
		str(j, json_get(j, h, "time"), t, sizeof(t));
		str(j, json_get(j, h, "summary"), summary, sizeof(summary));
		str(j, json_get(j, h, "trigger"), trig, sizeof(trig));
		printf("  %s  %-7s %s\n", t, trig, summary);
	}
}

static int summary(const char *body, size_t len, bool *healthy)
{
	struct json j;
	struct errbuf err = { "" };
	if (json_parse(&j, body, len, 1 << 20, &err) < 0) {
		fprintf(stderr, "dstack-healthd: error: the agent's answer: %s\n", err.msg);
		return -1;
	}
	struct out o = { &j, isatty(STDOUT_FILENO) == 1 };
	int v = json_get(&j, 0, "verdict");
	json_bool(&j, json_get(&j, v, "healthy"), healthy);
	char error[512];
	str(&j, json_get(&j, v, "error"), error, sizeof(error));
	printf("%s%s%s", paint(&o, *healthy), *healthy ? "healthy" : "NOT healthy",
	       o.colour ? "\033[0m" : "");
	if (error[0] && strcmp(error, "-"))
		printf(": %s", error);
	printf("\n");
	int un = json_get(&j, v, "unhealthy");
	if (json_is_array(&j, un))
		JSON_ARRAY_FOREACH(&j, un, e, n) {
			char name[128], status[256];
			str(&j, json_get(&j, e, "name"), name, sizeof(name));
			str(&j, json_get(&j, e, "status"), status, sizeof(status));
			printf("  %s: %s\n", name, status);
		}
	int refresh = json_get(&j, 0, "refresh");
	print_source(&o, json_get(&j, 0, "source"), json_get(&j, 0, "status_file"), refresh);
	print_refresh(&o, refresh);
	print_vfile(&o, json_get(&j, 0, "verdict_file"));
	print_containers(&o, json_get(&j, 0, "containers"));
	print_pollers(&o, json_get(&j, 0, "pollers"));
	print_history(&o, json_get(&j, 0, "history"));
	json_free(&j);
	return 0;
}

static int do_status(int argc, char *argv[], const char *path)
{
	bool raw = false, healthy = false;
	for (int i = 1; i < argc; i++)
		raw |= !strcmp(argv[i], "--json");
	struct http_response resp = { 0 };
	if (call(path, "GET", "/status", &resp) < 0)
		return CTL_EXIT_UNREACHABLE;
	int rc = CTL_EXIT_UNREACHABLE;
	if (resp.status != 200) {
		fprintf(stderr, "dstack-healthd: error: the agent answered HTTP %d: %s", resp.status,
			resp.body ? resp.body : "");
	} else if (raw) {
		fwrite(resp.body, 1, resp.body_len, stdout);
		struct json j;
		struct errbuf err = { "" };
		if (json_parse(&j, resp.body, resp.body_len, 1 << 20, &err) == 0) {
			json_bool(&j, json_get(&j, json_get(&j, 0, "verdict"), "healthy"), &healthy);
			json_free(&j);
		}
		rc = healthy ? 0 : 1;
	} else if (summary(resp.body, resp.body_len, &healthy) == 0) {
		rc = healthy ? 0 : 1;
	}
	http_response_free(&resp);
	return rc;
}

/* Under systemd (ExecReload= sets MAINPID) with no control socket to ask,
 * a reload is still a reload: the signal, without the answer. */
static int signal_main(void)
{
	const char *m = getenv("MAINPID");
	char *end;
	long pid = m ? strtol(m, &end, 10) : 0;
	if (!m || *end || pid <= 1)
		return CTL_EXIT_UNREACHABLE;
	if (kill((pid_t)pid, SIGHUP) < 0) {
		fprintf(stderr, "dstack-healthd: error: SIGHUP to %ld: %s\n", pid, strerror(errno));
		return CTL_EXIT_UNREACHABLE;
	}
	fprintf(stderr, "dstack-healthd: warning: sent SIGHUP to %ld instead; whether the reload was "
			"applied is in the journal\n", pid);
	return 0;
}

static int do_reload(const char *path)
{
	struct http_response resp = { 0 };
	if (!path || !*path || call(path, "POST", "/reload", &resp) < 0)
		return signal_main();
	int rc = resp.status == 200 ? 0 : 1;
	if (resp.status != 200 && resp.status != 409)
		fprintf(stderr, "dstack-healthd: error: the agent answered HTTP %d\n", resp.status);
	/* A refusal is an error line like any other on stderr. */
	if (rc)
		fputs("dstack-healthd: error: ", stderr);
	fwrite(resp.body ? resp.body : "", 1, resp.body_len, rc ? stderr : stdout);
	http_response_free(&resp);
	return rc;
}

static void print_addrs(FILE *f, const struct json *j, int arr)
{
	bool any = false;
	if (arr >= 0 && json_is_array(j, arr))
		JSON_ARRAY_FOREACH(j, arr, a, n) {
			char addr[64];
			str(j, a, addr, sizeof(addr));
			fprintf(f, "%s%s", any ? ", " : "", addr);
			any = true;
		}
	fprintf(f, "%s\n", any ? "" : "none");
}

/* One look at the drain: 0 everyone told, 1 not yet, 3 on an error.
 * Prints the outcome when final (or when last). */
static int drain_look(const char *path, const char *method, bool last, double waited)
{
	struct http_response resp = { 0 };
	if (call(path, method, "/drain", &resp) < 0)
		return CTL_EXIT_UNREACHABLE;
	struct json j;
	struct errbuf err = { "" };
	int rc = CTL_EXIT_UNREACHABLE;
	if (resp.status != 200) {
		fprintf(stderr, "dstack-healthd: the agent answered HTTP %d: %s", resp.status,
			resp.body ? resp.body : "");
	} else if (json_parse(&j, resp.body, resp.body_len, 1 << 20, &err) < 0) {
		fprintf(stderr, "dstack-healthd: the agent's answer: %s\n", err.msg);
	} else {
		bool on = false, all = false;
		json_bool(&j, json_get(&j, 0, "draining"), &on);
		json_bool(&j, json_get(&j, 0, "everyone_told"), &all);
		int told = json_get(&j, 0, "told"), not_told = json_get(&j, 0, "not_told");
		char window[32];
		str(&j, json_get(&j, 0, "window"), window, sizeof(window));
		bool none = (told < 0 || j.tok[told].size == 0) &&
			    (not_told < 0 || j.tok[not_told].size == 0);
		if (!on) {
			fprintf(stderr, "dstack-healthd: the instance is not draining (resumed?)\n");
			rc = 1;
		} else if (all && none) {
			printf("draining; no address polled Health in the last %s s: nothing to wait for\n",
			       window);
			rc = 0;
		} else if (all) {
			printf("draining; told after %.1f s: ", waited);
			print_addrs(stdout, &j, told);
			rc = 0;
		} else {
			rc = 1;
			if (last) {
				fprintf(stderr, "dstack-healthd: draining, but after %.1f s not told: ",
					waited);
				print_addrs(stderr, &j, not_told);
				fprintf(stderr, "told: ");
				print_addrs(stderr, &j, told);
			}
		}
		json_free(&j);
	}
	http_response_free(&resp);
	return rc;
}

/* Polls GET /drain: the agent keeps no connection or thread waiting. A
 * poller is told on its own next poll, so a tenth of a second is fine. */
static int do_drain(int argc, char *argv[], const char *path)
{
	bool wait = false;
	double timeout = 15;
	for (int i = 1; i < argc; i++) {
		char *end = NULL;
		if (!strcmp(argv[i], "--wait"))
			wait = true;
		else if (!strcmp(argv[i], "--timeout") && i + 1 < argc)
			timeout = strtod(argv[++i], &end);
		else if (!strncmp(argv[i], "--timeout=", 10))
			timeout = strtod(argv[i] + 10, &end);
		if (end && (*end || !(timeout >= 0) || timeout > 86400)) {
			fprintf(stderr, "dstack-healthd: --timeout: a number of seconds\n");
			return 2;
		}
	}
	if (!wait) {
		struct http_response resp = { 0 };
		if (call(path, "POST", "/drain", &resp) < 0)
			return CTL_EXIT_UNREACHABLE;
		int rc = resp.status == 200 ? 0 : CTL_EXIT_UNREACHABLE;
		fwrite(resp.body ? resp.body : "", 1, resp.body_len, rc ? stderr : stdout);
		http_response_free(&resp);
		return rc;
	}
	int64_t start = clock_mono_ms(), deadline = start + (int64_t)(timeout * 1000);
	const char *method = "POST";
	for (;;) {
		int64_t now = clock_mono_ms();
		bool last = now >= deadline;
		int rc = drain_look(path, method, last, (double)(now - start) / 1000);
		if (rc != 1 || last)
			return rc;
		method = "GET";
		struct timespec ts = { 0, 100 * 1000000 };
		nanosleep(&ts, NULL);
	}
}

static int do_resume(const char *path)
{
	struct http_response resp = { 0 };
	if (call(path, "POST", "/resume", &resp) < 0)
		return CTL_EXIT_UNREACHABLE;
	/* 409: a sidecar that is stopping keeps its drain (issue 29). */
	int rc = resp.status == 200 ? 0 : resp.status == 409 ? 1 : CTL_EXIT_UNREACHABLE;
	if (rc)
		fprintf(stderr, "dstack-healthd: the agent answered HTTP %d: %.*s", resp.status,
			(int)resp.body_len, resp.body ? resp.body : "");
	else
		printf("resumed: the app's own verdict is served\n");
	http_response_free(&resp);
	return rc;
}

int ctl_main(int argc, char *argv[])
{
	char *owned = NULL;
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			printf("Usage: dstack-healthd status [--json] [--control-socket=PATH]\n"
			       "       dstack-healthd reload [--control-socket=PATH]\n"
			       "       dstack-healthd drain [--wait] [--timeout SECONDS] "
			       "[--control-socket=PATH]\n"
			       "       dstack-healthd resume [--control-socket=PATH]\n");
			return 0;
		}
	const char *path = socket_path(argc, argv, &owned);
	int rc;
	if (!strcmp(argv[0], "reload")) {
		rc = do_reload(path);
	} else if (!path || !*path) {
		fprintf(stderr, "dstack-healthd: error: the control socket is disabled\n");
		rc = CTL_EXIT_UNREACHABLE;
	} else if (!strcmp(argv[0], "drain")) {
		rc = do_drain(argc, argv, path);
	} else if (!strcmp(argv[0], "resume")) {
		rc = do_resume(path);
	} else {
		rc = do_status(argc, argv, path);
	}
	free(owned);
	return rc;
}
