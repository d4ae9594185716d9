/* SPDX-License-Identifier: Apache-2.0 */
/* Config precedence and validation: flag beats env beats file beats default,
 * and every error names its source. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "agent/config.h"
#include "base/json.h"
#include "rpc/listen.h"
#include "tests/lib/tap.h"

static char dir[] = "/tmp/healthd-config-XXXXXX";

/* Paths handed out by write_file, freed at the end. */
static char *paths[8];
static size_t n_paths;

static const char *write_file(const char *name, const char *text)
{
	char *path = NULL;
	if (asprintf(&path, "%s/%s", dir, name) < 0)
		abort();
	FILE *f = fopen(path, "w");
	fputs(text, f);
	fclose(f);
	if (n_paths < sizeof(paths) / sizeof(paths[0]))
		paths[n_paths++] = path;
	return path;
}

static void clear_env(void)
{
	static const char *const vars[] = {
		"DSTACK_HEALTHD_CONFIG",	  "DSTACK_HEALTHD_LISTEN",
		"DSTACK_HEALTHD_INTERVAL",	  "DSTACK_HEALTHD_COMPOSE_FILE",
		"DSTACK_HEALTHD_DOCKER_HOST",	  "DSTACK_HEALTHD_REFRESH_TIMEOUT",
		"DSTACK_HEALTHD_LOG_LEVEL",	  "DOCKER_HOST",
		"DOCKER_TLS_VERIFY",		  "DSTACK_HEALTHD_DOCKER_TLS_VERIFY",
		"DSTACK_HEALTHD_HEADER_TIMEOUT",  "DSTACK_HEALTHD_CONTROL_SOCKET",
		"DSTACK_HEALTHD_METRICS_LISTEN",  "DSTACK_HEALTHD_RUNTIME_FILE",
		"DSTACK_HEALTHD_MIN_REFRESH_SPACING", "DSTACK_HEALTHD_DOCKER_CERT_PATH",
		"DSTACK_HEALTHD_NERDCTL",	  "DSTACK_HEALTHD_CONTAINERD_ADDRESS",
	};
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		unsetenv(vars[i]);
}

struct env_kv {
	const char *k, *v;
};

struct want {
	const char *listen;
	long long interval_ms;
	const char *docker_host;
	const char *compose_file;
};

static void test_precedence(void)
{
	const char *cfg = write_file("c.json", "{\"listen\":\"file:1\",\"interval\":2.5,"
					       "\"docker_host\":\"unix:///file.sock\"}");
	char cflag[300];
	snprintf(cflag, sizeof(cflag), "--config=%s", cfg);
	static const struct {
		const char *what;
		const char *argv[6];
		struct env_kv env[3];
		struct want w;
	} cases[] = {
		{ "defaults", { "x" }, { { 0 } },
		  { "0.0.0.0:8090", 5000, "unix:///var/run/docker.sock",
		    "/dstack/.host-shared/app-compose.json" } },
		{ "DOCKER_HOST is the docker default", { "x" }, { { "DOCKER_HOST", "tcp://h:1" } },
		  { "0.0.0.0:8090", 5000, "tcp://h:1", NULL } },
		{ "file beats default", { "x", "CFG" }, { { 0 } },
		  { "file:1", 2500, "unix:///file.sock", NULL } },
		{ "file beats DOCKER_HOST", { "x", "CFG" }, { { "DOCKER_HOST", "tcp://h:1" } },
		  { "file:1", 2500, "unix:///file.sock", NULL } },
		{ "env beats file", { "x", "CFG" },
		  { { "DSTACK_HEALTHD_LISTEN", "env:2" }, { "DSTACK_HEALTHD_INTERVAL", "0.25" } },
		  { "env:2", 250, "unix:///file.sock", NULL } },
		{ "flag beats env", { "x", "CFG", "--listen", "flag:3", "--interval=7" },
		  { { "DSTACK_HEALTHD_LISTEN", "env:2" }, { "DSTACK_HEALTHD_INTERVAL", "0.25" } },
		  { "flag:3", 7000, "unix:///file.sock", NULL } },
		{ "config file from env", { "x" }, { { "DSTACK_HEALTHD_CONFIG", "CFGPATH" } },
		  { "file:1", 2500, NULL, NULL } },
		{ "flag only", { "x", "--compose-file", "/a.json" }, { { 0 } },
		  { NULL, 5000, NULL, "/a.json" } },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		clear_env();
		char *argv[6] = { 0 };
		int argc = 0;
		for (; argc < 6 && cases[i].argv[argc]; argc++)
			argv[argc] = strcmp(cases[i].argv[argc], "CFG") ? (char *)cases[i].argv[argc]
									: cflag;
		for (int k = 0; k < 3 && cases[i].env[k].k; k++)
			setenv(cases[i].env[k].k,
			       strcmp(cases[i].env[k].v, "CFGPATH") ? cases[i].env[k].v : cfg, 1);
		struct config c;
		struct errbuf e = { "" };
		int r = config_load(argc, argv, &c, &e);
		if (!ok(r == 0, "%s: loads (%s)", cases[i].what, e.msg))
			continue;
		const struct want *w = &cases[i].w;
		if (w->listen)
			is_str(c.listen, w->listen, "%s: listen", cases[i].what);
		is_int(c.interval_ms, w->interval_ms, "%s: interval", cases[i].what);
		if (w->docker_host)
			is_str(c.docker_host, w->docker_host, "%s: docker host", cases[i].what);
		if (w->compose_file)
			is_str(c.compose_file, w->compose_file, "%s: compose file", cases[i].what);
		config_free(&c);
	}
	clear_env();
}

static void test_errors(void)
{
	const char *unknown = write_file("u.json", "{\"listne\":\"x\"}");
	const char *badtype = write_file("t.json", "{\"interval\":\"5\"}");
	const char *notobj = write_file("n.json", "[1]");
	const char *broken = write_file("b.json", "{\"listen\":");
	char a1[300], a2[300], a3[300], a4[300];
	snprintf(a1, sizeof(a1), "--config=%s", unknown);
	snprintf(a2, sizeof(a2), "--config=%s", badtype);
	snprintf(a3, sizeof(a3), "--config=%s", notobj);
	snprintf(a4, sizeof(a4), "--config=%s", broken);
	static const struct {
		const char *argv[4];
		struct env_kv env;
		const char *want; /* substring of the message */
	} cases[] = {
		{ { "x", "--interval", "abc" }, { 0 }, "--interval: must be a number" },
		{ { "x", "--interval", "0" }, { 0 }, "--interval: must be a number" },
		{ { "x", "--interval", "-1" }, { 0 }, "--interval" },
		{ { "x", "--refresh-timeout", "1e9" }, { 0 }, "--refresh-timeout" },
		{ { "x", "--compose-file", "" }, { 0 }, "--compose-file: must not be empty" },
		{ { "x", "--log-level", "loud" }, { 0 }, "--log-level" },
		{ { "x", "--bogus" }, { 0 }, "--bogus: unknown option" },
		{ { "x", "--listen" }, { 0 }, "--listen: needs a value" },
		{ { "x", "stray" }, { 0 }, "stray: unexpected argument" },
		{ { "x" }, { "DSTACK_HEALTHD_INTERVAL", "soon" }, "DSTACK_HEALTHD_INTERVAL: must be" },
		{ { "x" }, { "DSTACK_HEALTHD_DOCKER_TLS_VERIFY", "maybe" },
		  "DSTACK_HEALTHD_DOCKER_TLS_VERIFY: must be true or false" },
		{ { "x", "A1" }, { 0 }, "u.json: listne: unknown option" },
		{ { "x", "A2" }, { 0 }, "t.json: interval: must be a number of seconds, not a string" },
		{ { "x", "A3" }, { 0 }, "n.json: must be a JSON object" },
		{ { "x", "A4" }, { 0 }, "b.json: " },
		{ { "x", "--config=/nonexistent/healthd.json" }, { 0 },
		  "/nonexistent/healthd.json: does not exist" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		clear_env();
		char *argv[4] = { 0 };
		int argc = 0;
		for (; argc < 4 && cases[i].argv[argc]; argc++) {
			const char *a = cases[i].argv[argc];
			argv[argc] = !strcmp(a, "A1")	? a1
				     : !strcmp(a, "A2") ? a2
				     : !strcmp(a, "A3") ? a3
				     : !strcmp(a, "A4") ? a4
							: (char *)a;
		}
		if (cases[i].env.k)
			setenv(cases[i].env.k, cases[i].env.v, 1);
		struct config c;
		struct errbuf e = { "" };
		int r = config_load(argc, argv, &c, &e);
		ok(r < 0 && strstr(e.msg, cases[i].want), "error case %zu: '%s' contains '%s'", i,
		   e.msg, cases[i].want);
		if (r == 0)
			config_free(&c);
	}
	clear_env();
}

static void test_actions(void)
{
	char *argv[] = { "x", "--once", "--log-level=debug", NULL };
	struct config c;
	struct errbuf e;
	clear_env();
	ok(config_load(3, argv, &c, &e) == 0 && c.once && c.log_priority == LOG_DEBUG,
	   "--once and --log-level=debug");
	config_free(&c);
	char *argv2[] = { "x", "-h", NULL };
	ok(config_load(2, argv2, &c, &e) == 0 && c.help, "-h asks for help");
	config_free(&c);
}

/* The operator's view shows each value with where it came from, and a
 * reload says what changed; control_socket and metrics_listen take "". */
static void test_origins(void)
{
	const char *cfg = write_file("o.json", "{\"interval\":2,\"control_socket\":\"\"}");
	char cflag[300];
	snprintf(cflag, sizeof(cflag), "--config=%s", cfg);
	clear_env();
	setenv("DSTACK_HEALTHD_LISTEN", "env:1", 1);
	setenv("DOCKER_HOST", "tcp://h:1", 1);
	char *argv[] = { "x", cflag, "--metrics-listen=127.0.0.1:9464", NULL };
	struct config c, d;
	struct errbuf e = { "" };
	if (!ok(config_load(3, argv, &c, &e) == 0, "origins: loads (%s)", e.msg))
		return;
	is_str(c.control_socket, "", "control_socket: empty is allowed (disabled)");
	is_str(c.metrics_listen, "127.0.0.1:9464", "metrics_listen from the flag");
	struct json_buf b = { 0 };
	ok(config_json(&c, &b) == 0, "config_json");
	char want[600];
	snprintf(want, sizeof(want), "\"interval\":{\"value\":2,\"from\":\"file %s\"}", cfg);
	ok(b.p && strstr(b.p, want) != NULL, "interval: value and the file it came from");
	ok(b.p && strstr(b.p, "\"listen\":{\"value\":\"env:1\",\"from\":\"environment "
				"DSTACK_HEALTHD_LISTEN\"}"), "listen: from the environment, named");
	ok(b.p && strstr(b.p, "\"metrics_listen\":{\"value\":\"127.0.0.1:9464\",\"from\":"
				"\"flag --metrics-listen\"}"), "metrics_listen: from a flag");
	ok(b.p && strstr(b.p, "\"docker_host\":{\"value\":\"tcp://h:1\",\"from\":\"default, "
				"from the environment (DOCKER_HOST)\"}"), "docker_host: Docker's own variable");
	ok(b.p && strstr(b.p, "\"refresh_timeout\":{\"value\":10,\"from\":\"default\"}"),
	   "refresh_timeout: default");
	json_buf_free(&b);

	char *argv2[] = { "x", cflag, "--interval=0.5", NULL };
	if (ok(config_load(3, argv2, &d, &e) == 0, "second config loads")) {
		char diff[1024];
		int n = config_diff(&c, &d, diff, sizeof(diff));
		is_int(n, 2, "config_diff: two options differ");
		is_str(diff, "metrics_listen: 127.0.0.1:9464 \u2192 \"\"\ninterval: 2 \u2192 0.5\n",
		       "config_diff: old \u2192 new per line, empty shown as \"\"");
		is_int(config_diff(&d, &d, diff, sizeof(diff)), 0, "config_diff: none against itself");
		config_free(&d);
	}
	config_free(&c);
	clear_env();
}

/* header_timeout: its default, and each source by the derived names. */
static void test_header_timeout(void)
{
	const char *cfg = write_file("h.json", "{\"header_timeout\":0.5}");
	char cflag[300];
	snprintf(cflag, sizeof(cflag), "--config=%s", cfg);
	static const struct {
		const char *what, *env;
		char *argv[4];
		long long ms;
	} cases[] = {
		{ "default", NULL, { "x" }, 2000 },
		{ "file key header_timeout", NULL, { "x", "CFG" }, 500 },
		{ "env DSTACK_HEALTHD_HEADER_TIMEOUT", "1.5", { "x", "CFG" }, 1500 },
		{ "flag --header-timeout", "1.5", { "x", "CFG", "--header-timeout=3" }, 3000 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *argv[4] = { 0 };
		int argc = 0;
		for (; argc < 3 && cases[i].argv[argc]; argc++)
			argv[argc] = strcmp(cases[i].argv[argc], "CFG") ? cases[i].argv[argc] : cflag;
		clear_env();
		if (cases[i].env)
			setenv("DSTACK_HEALTHD_HEADER_TIMEOUT", cases[i].env, 1);
		struct config c;
		struct errbuf e;
		int r = config_load(argc, argv, &c, &e);
		ok(r == 0, "%s: loads", cases[i].what);
		if (r == 0)
			is_int(c.header_timeout_ms, cases[i].ms, "%s: header_timeout", cases[i].what);
		config_free(&c);
	}
	unsetenv("DSTACK_HEALTHD_HEADER_TIMEOUT");
}

/* Loads and runs every check the agent runs before it starts. */
static int load_checked(int argc, char **argv, struct errbuf *e)
{
	struct config c;
	int r = config_load(argc, argv, &c, e);
	if (r < 0)
		return r;
	if ((r = config_check(&c, e)) == 0)
		r = config_check_docker(&c, e);
	config_free(&c);
	return r;
}

/* Every option, from every source, with a bad value: the message begins
 * with where the value came from as the user wrote it, checks after loading
 * (listen addresses, the control socket, the Docker host) included. */
static const struct {
	const char *key, *flag, *env;
	const char *text; /* for the environment and the flag */
	const char *json; /* for the config file */
	const char *says; /* what follows the origin */
} bad[] = {
	{ "listen", "--listen", "DSTACK_HEALTHD_LISTEN", "nowhere", "\"nowhere\"",
	  "listen address 'nowhere': expected HOST:PORT" },
	{ "header_timeout", "--header-timeout", "DSTACK_HEALTHD_HEADER_TIMEOUT", "0", "0",
	  "must be a number of seconds" },
	{ "control_socket", "--control-socket", "DSTACK_HEALTHD_CONTROL_SOCKET", "rel.sock",
	  "\"rel.sock\"", "'rel.sock' is not an absolute path" },
	{ "metrics_listen", "--metrics-listen", "DSTACK_HEALTHD_METRICS_LISTEN", "unix:/m.sock",
	  "\"unix:/m.sock\"", "must be TCP" },
	{ "relay", "--relay", "DSTACK_HEALTHD_RELAY", "127.0.0.1:0", "\"127.0.0.1:0\"",
	  "relay address '127.0.0.1:0': port 0 cannot be connected to" },
	{ "relay_idle_timeout", "--relay-idle-timeout", "DSTACK_HEALTHD_RELAY_IDLE_TIMEOUT", "0", "0",
	  "must be a number of seconds" },
	{ "relay_keepalive", "--relay-keepalive", "DSTACK_HEALTHD_RELAY_KEEPALIVE", "0.5", "0.5",
	  "must be from 1 to 32767 seconds" },
	{ "compose_file", "--compose-file", "DSTACK_HEALTHD_COMPOSE_FILE", "", "\"\"",
	  "must not be empty" },
	{ "runtime_file", "--runtime-file", "DSTACK_HEALTHD_RUNTIME_FILE", "", "\"\"",
	  "must not be empty" },
	{ "interval", "--interval", "DSTACK_HEALTHD_INTERVAL", "soon", "\"soon\"",
	  "must be a number of seconds" },
	{ "refresh_timeout", "--refresh-timeout", "DSTACK_HEALTHD_REFRESH_TIMEOUT", "1e9", "1e9",
	  "must be a number of seconds" },
	{ "min_refresh_spacing", "--min-refresh-spacing", "DSTACK_HEALTHD_MIN_REFRESH_SPACING",
	  "-1", "-1", "must be a number of seconds" },
	{ "service_gap", "--service-gap", "DSTACK_HEALTHD_SERVICE_GAP", "0", "0",
	  "must be a number of seconds" },
	{ "docker_host", "--docker-host", "DSTACK_HEALTHD_DOCKER_HOST", "bogus", "\"bogus\"",
	  "invalid Docker host \"bogus\"" },
	{ "docker_tls_verify", "--docker-tls-verify", "DSTACK_HEALTHD_DOCKER_TLS_VERIFY", "maybe",
	  "\"maybe\"", "must be true or false" },
	{ "docker_cert_path", "--docker-cert-path", "DSTACK_HEALTHD_DOCKER_CERT_PATH", "", "\"\"",
	  "must not be empty" },
	{ "nerdctl", "--nerdctl", "DSTACK_HEALTHD_NERDCTL", "", "\"\"", "must not be empty" },
	{ "containerd_address", "--containerd-address", "DSTACK_HEALTHD_CONTAINERD_ADDRESS", "",
	  "\"\"", "must not be empty" },
	{ "log_level", "--log-level", "DSTACK_HEALTHD_LOG_LEVEL", "loud", "\"loud\"",
	  "must be err, warning" },
	{ "drain_window", "--drain-window", "DSTACK_HEALTHD_DRAIN_WINDOW", "0", "0",
	  "must be a number of seconds" },
	{ "verdict_file", "--verdict-file", "DSTACK_HEALTHD_VERDICT_FILE", "rel/status",
	  "\"rel/status\"", "'rel/status' is not an absolute path" },
	{ "stop_hold", "--stop-hold", "DSTACK_HEALTHD_STOP_HOLD", "0", "0",
	  "must be a number of seconds" },
	{ "stop_guest_agent", "--stop-guest-agent", "DSTACK_HEALTHD_STOP_GUEST_AGENT",
	  "unix:rel.sock", "\"unix:rel.sock\"", "expected HOST:PORT or unix:/PATH" },
};

static void expect_origin(int r, const struct errbuf *e, const char *origin, const char *says,
			  const char *what)
{
	char want[600];
	snprintf(want, sizeof(want), "%s: ", origin);
	ok(r < 0 && !strncmp(e->msg, want, strlen(want)) && strstr(e->msg, says),
	   "%s: '%s' begins '%s' and says '%s'", what, e->msg, want, says);
}

static void test_error_origins(void)
{
	/* The table covers every option the agent has. */
	struct config c;
	struct errbuf e = { "" };
	char *argv0[] = { "x", NULL };
	clear_env();
	if (config_load(1, argv0, &c, &e) == 0) {
		struct json_buf b = { 0 };
		size_t n = 0, missing = 0;
		if (config_json(&c, &b) == 0)
			for (const char *p = b.p; (p = strstr(p, "\":{\"value\":")); p++) {
				const char *k = p;
				while (k > b.p && k[-1] != '"')
					k--;
				size_t len = (size_t)(p - k), found = 0;
				for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
					found |= strlen(bad[i].key) == len && !strncmp(bad[i].key, k, len);
				if (!found && strncmp(k, "config_file", len))
					printf("# option %.*s has no row\n", (int)len, k), missing++;
				n++;
			}
		ok(n > 10 && missing == 0, "the table has a row for each of the %zu options", n);
		json_buf_free(&b);
		config_free(&c);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char json[300], cflag[300], flag[300], what[300];
		snprintf(json, sizeof(json), "{\"%s\":%s}", bad[i].key, bad[i].json);
		const char *path = write_file("origin.json", json);
		snprintf(cflag, sizeof(cflag), "--config=%s", path);
		char *fargv[] = { "x", cflag, NULL };
		clear_env();
		int r = load_checked(2, fargv, &e);
		snprintf(flag, sizeof(flag), "%s: %s", path, bad[i].key);
		snprintf(what, sizeof(what), "%s from the file", bad[i].key);
		expect_origin(r, &e, flag, bad[i].says, what);
		n_paths--;
		free(paths[n_paths]);

		setenv(bad[i].env, bad[i].text, 1);
		r = load_checked(1, argv0, &e);
		snprintf(what, sizeof(what), "%s from the environment", bad[i].key);
		expect_origin(r, &e, bad[i].env, bad[i].says, what);
		unsetenv(bad[i].env);

		snprintf(flag, sizeof(flag), "%s=%s", bad[i].flag, bad[i].text);
		char *argv[] = { "x", flag, NULL };
		r = load_checked(2, argv, &e);
		snprintf(what, sizeof(what), "%s from the flag", bad[i].key);
		expect_origin(r, &e, bad[i].flag, bad[i].says, what);
	}
	/* Docker's own variable, and the config file's own sources. */
	clear_env();
	setenv("DOCKER_HOST", "bogus", 1);
	expect_origin(load_checked(1, argv0, &e), &e, "DOCKER_HOST", "invalid Docker host",
		      "docker_host from DOCKER_HOST");
	clear_env();
	setenv("DSTACK_HEALTHD_CONFIG", "", 1);
	expect_origin(load_checked(1, argv0, &e), &e, "DSTACK_HEALTHD_CONFIG", "must not be empty",
		      "DSTACK_HEALTHD_CONFIG empty");
	setenv("DSTACK_HEALTHD_CONFIG", "/nonexistent/h.json", 1);
	expect_origin(load_checked(1, argv0, &e), &e, "DSTACK_HEALTHD_CONFIG",
		      "/nonexistent/h.json: does not exist", "DSTACK_HEALTHD_CONFIG missing file");
	clear_env();
	char *eargv[] = { "x", "--config=", NULL };
	expect_origin(load_checked(2, eargv, &e), &e, "--config", "must not be empty",
		      "--config empty");
	char *margv[] = { "x", "--config=/nonexistent/h.json", NULL };
	expect_origin(load_checked(2, margv, &e), &e, "--config",
		      "/nonexistent/h.json: does not exist", "--config missing file");
	clear_env();
}

/* HOST:PORT takes localhost and *, and says what it takes otherwise. */
static void test_listen_forms(void)
{
	static const struct {
		const char *spec;
		int ok;
	} cases[] = {
		{ "localhost:8090", 1 },  { "*:8090", 1 },	    { ":8090", 1 },
		{ "127.0.0.1:0", 1 },	  { "[::1]:8090", 1 },	    { "unix:/run/x.sock", 1 },
		{ "example.com:8090", 0 }, { "localhost", 0 },	    { "*:http", 0 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct errbuf e = { "" };
		int r = rpc_listen_parse(cases[i].spec, false, &e);
		if (cases[i].ok)
			ok(r == 0, "listen %s is accepted (%s)", cases[i].spec, e.msg);
		else
			ok(r < 0 && (strstr(e.msg, "localhost") || strstr(e.msg, "port")),
			   "listen %s: %s", cases[i].spec, e.msg);
	}
}

int main(void)
{
	if (!mkdtemp(dir))
		return 1;
	test_precedence();
	test_errors();
	test_actions();
	test_origins();
	test_header_timeout();
	test_error_origins();
	test_listen_forms();
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		ok(0, "cleanup");
	for (size_t i = 0; i < n_paths; i++)
		free(paths[i]);
	return done_testing();
}
