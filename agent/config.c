/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>

#include "agent/stophold.h"
#include "base/cleanup.h"
#include "base/json.h"
#include "base/readfile.h"
#include "rpc/listen.h"
#include "rpc/relay.h"
#include "runtime/http.h"

#define CONFIG_MAX_BYTES (64 * 1024)
#define PATH_MAX_WHERE CONFIG_WHERE_MAX

/* OPT_STRING_EMPTY: a string where "" means "none". */
enum opt_type { OPT_STRING, OPT_SECONDS, OPT_BOOL, OPT_LOGLEVEL, OPT_STRING_EMPTY };

struct opt_def {
	const char *name; /* flag without "--"; file key and env name derive from it */
	enum opt_type type;
	size_t offset;
	const char *arg;
	const char *help;
};

#define OPT(n, t, field, a, h) { n, t, offsetof(struct config, field), a, h }
static const struct opt_def opts[] = {
	OPT("listen", OPT_STRING_EMPTY, listen, "ADDR",
	    "where to serve pRPC: HOST:PORT, [IPv6]:PORT or unix:PATH; HOST is an "
	    "IPv4 address, localhost, or * for every address; empty: no public "
	    "listener, as in a sidecar (default 0.0.0.0:8090)"),
	OPT("header-timeout", OPT_SECONDS, header_timeout_ms, "SECONDS",
	    "a connection that has not sent a whole request this long after its "
	    "accept or its previous request is closed (default 2)"),
	OPT("control-socket", OPT_STRING_EMPTY, control_socket, "PATH",
	    "the operator's local view (status, metrics, reload), a unix socket "
	    "only root and the agent's own user can use; empty disables it (default " CONFIG_DEFAULT_CONTROL_SOCKET ")"),
	OPT("metrics-listen", OPT_STRING_EMPTY, metrics_listen, "ADDR",
	    "also serve /metrics alone on this TCP HOST:PORT, e.g. 127.0.0.1:9464; "
	    "never a public address (default: none)"),
	OPT("relay", OPT_STRING_EMPTY, relay, "ADDR",
	    "relay every connection whose first request is not for "
	    "/prpc/v1/Health to the guest agent at HOST:PORT or unix:PATH, e.g. "
	    "127.0.0.1:18090 (default: none)"),
	OPT("relay-idle-timeout", OPT_SECONDS, relay_idle_timeout_ms, "SECONDS",
	    "a relayed connection that moves no byte either way this long is "
	    "reset; above the gateway's own 10 minutes, so that a quiet followed "
	    "log stream is never cut by the relay first (default 900)"),
	OPT("relay-keepalive", OPT_SECONDS, relay_keepalive_ms, "SECONDS",
	    "TCP keepalive on relayed connections: a peer silent this long is "
	    "probed, and one that has answered nothing for twice as long is taken "
	    "as gone and its connection reset (whole seconds, 1 to 32767; "
	    "default 60)"),
	OPT("compose-file", OPT_STRING, compose_file, "FILE",
	    "the app's app-compose.json (default "
	    "/dstack/.host-shared/app-compose.json)"),
	OPT("runtime-file", OPT_STRING, runtime_file, "FILE",
	    "Compose project and nerdctl namespace, written by the guest (default "
	    "/run/dstack/app-compose-runtime.json)"),
	OPT("interval", OPT_SECONDS, interval_ms, "SECONDS",
	    "time between refreshes of the verdict; fractions allowed (default 5)"),
	OPT("refresh-timeout", OPT_SECONDS, refresh_timeout_ms, "SECONDS",
	    "a refresh still running after this fails (default 10)"),
	OPT("min-refresh-spacing", OPT_SECONDS, min_refresh_spacing_ms, "SECONDS",
	    "Docker events start a refresh at once, but refreshes start at least "
	    "this far apart (default 0.25)"),
	OPT("service-gap", OPT_SECONDS, service_gap_ms, "SECONDS",
	    "a Compose service that had a container and has none (a recreate, "
	    "or a removal) keeps the app unhealthy until one is back, for at "
	    "most this long (default 60)"),
	OPT("docker-host", OPT_STRING, docker_host, "URL",
	    "Docker Engine: unix://PATH or tcp://HOST:PORT (default $DOCKER_HOST, "
	    "else unix:///var/run/docker.sock)"),
	OPT("docker-tls-verify", OPT_BOOL, docker_tls_verify, "BOOL",
	    "reach a tcp:// Docker host over TLS (default $DOCKER_TLS_VERIFY)"),
	OPT("docker-cert-path", OPT_STRING, docker_cert_path, "DIR",
	    "ca.pem, cert.pem and key.pem for TLS (default $DOCKER_CERT_PATH, else "
	    "~/.docker)"),
	OPT("nerdctl", OPT_STRING, nerdctl, "PATH",
	    "the nerdctl binary, for runner nerdctl-compose (default nerdctl, from "
	    "PATH)"),
	OPT("containerd-address", OPT_STRING, containerd_address, "PATH",
	    "containerd socket passed to nerdctl --address (default: nerdctl's own)"),
	OPT("log-level", OPT_LOGLEVEL, log_priority, "LEVEL",
	    "err, warning, notice, info or debug (default info)"),
	OPT("drain-window", OPT_SECONDS, drain_window_ms, "SECONDS",
	    "`drain --wait` waits for every address that polled Health this\n"
	    "recently to have been told (default 30)"),
	OPT("verdict-file", OPT_STRING_EMPTY, verdict_file, "PATH",
	    "after every refresh, drain and resume, write the served verdict to "
	    "this absolute path as an app's health status file, for a sidecar on "
	    "a stock dstack image (default: none)"),
	OPT("stop-hold", OPT_SECONDS, stop_hold_ms, "SECONDS",
	    "a sidecar (verdict file, no listen) told to stop writes unhealthy at "
	    "once and exits this long after the guest agent serves it: a gateway's "
	    "poll interval plus its timeout (default 7, dstack's 5 + 2)"),
	OPT("stop-guest-agent", OPT_STRING_EMPTY, stop_guest_agent, "ADDR",
	    "the guest agent as the sidecar reaches it, HOST:PORT or unix:PATH, "
	    "asked on stop when it serves unhealthy; without it the hold adds its "
	    "5 s re-read (default: none)"),
};
#undef OPT

enum { FLAG_ONCE = 1000, FLAG_VERSION, FLAG_BASE };

#define USAGE_LEFT 31 /* the option column, indent included */
#define USAGE_WIDTH 79

/* text, word-wrapped into the help column; the first line follows what is
 * already printed in column col. */
static void usage_wrap(FILE *f, const char *text, int col)
{
	const char *p = text;
	if (col >= USAGE_LEFT) {
		fputc('\n', f);
		col = 0;
	}
	while (*p) {
		size_t w = strcspn(p, " \n");
		if (col > USAGE_LEFT && col + 1 + (int)w > USAGE_WIDTH) {
			fputc('\n', f);
			col = 0;
		}
		if (col < USAGE_LEFT)
			col += fprintf(f, "%*s", USAGE_LEFT - col, "");
		else
			col += fprintf(f, " ");
		col += fprintf(f, "%.*s", (int)w, p);
		p += w;
		p += strspn(p, " \n");
	}
	fputc('\n', f);
}

void config_usage(FILE *f)
{
	fprintf(f,
		"Usage: dstack-healthd [OPTION]...\n"
		"       dstack-healthd --once [OPTION]...\n"
		"       dstack-healthd status [--json] | reload | drain [--wait] | resume\n"
		"Answers \"can this instance serve?\" for the dstack gateway: recomputes a\n"
		"verdict every interval from the app's Compose containers or its status file,\n"
		"and serves it as pRPC at /prpc/v1/Health.\n\n"
		"Options (each also settable in the config file as \"name_with_underscores\"\n"
		"and as DSTACK_HEALTHD_NAME_WITH_UNDERSCORES; flag beats environment beats\n"
		"file beats default):\n");
	for (size_t i = 0; i < ARRAY_SIZE(opts); i++) {
		int col = fprintf(f, "  --%s=%s", opts[i].name, opts[i].arg);
		usage_wrap(f, opts[i].help, col);
	}
	usage_wrap(f, "the config file (JSON); default " CONFIG_DEFAULT_FILE
		      " if it exists (env DSTACK_HEALTHD_CONFIG)",
		   fprintf(f, "  -c, --config=FILE"));
	fprintf(f,
		"\nActions (command line only):\n"
		"  --once        run one refresh now, print the Health response as JSON, exit\n"
		"  --version     print the version and exit\n"
		"  -h, --help    print this help and exit\n"
		"\nCommands, to a running agent over its control socket (as root):\n"
		"  status [--json]  the operator's view: containers, last probes, pollers,\n"
		"                   history; exit 0 healthy, 1 not, 3 agent not reachable\n"
		"  reload           re-read the config and app-compose.json; prints what\n"
		"                   changed or why it was refused; exit 0 applied, 1 refused\n"
		"  drain [--wait] [--timeout=SECONDS]\n"
		"                   take the instance out of rotation: Health answers\n"
		"                   <drain>; --wait returns once every recent poller was told\n"
		"                   (--timeout, default 15); exit 0 done, 1 not all told in\n"
		"                   time, 2 a bad --timeout, 3 agent not reachable\n"
		"  resume           serve the app's own verdict again; exit 0 done, 3 agent\n"
		"                   not reachable\n"
		"\nSignals:\n"
		"  SIGTERM, SIGINT  stop (exit 0)\n"
		"  SIGHUP           re-read the config and app-compose.json, as reload does\n"
		"\nExit status:\n"
		"  0  stopped by a signal; --once: healthy\n"
		"  1  --once: not healthy; otherwise an internal failure (out of memory)\n"
		"  2  a usage or configuration error (the message names the flag,\n"
		"     DSTACK_HEALTHD_ variable or FILE: key), a listener that cannot be\n"
		"     bound; --once: also an app-compose.json it cannot use\n"
		"  3  --once: could not judge, the source could not be asked (see \"error\")\n"
		"\nExamples:\n"
		"  dstack-healthd --once --log-level=debug\n"
		"  dstack-healthd --listen=localhost:8091 --interval=2\n"
		"  curl -s 'http://localhost:8091/prpc/v1/Health'\n"
		"\nSee dstack-healthd(8).\n");
}

static char **field_str(struct config *c, const struct opt_def *o)
{
	return (char **)((char *)c + o->offset);
}

static int parse_seconds(const char *s, int64_t *ms)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (end == s || *end || errno || !isfinite(v) || v <= 0 || v > 86400)
		return -EINVAL;
	*ms = (int64_t)llround(v * 1000);
	return *ms > 0 ? 0 : -EINVAL;
}

static int parse_bool(const char *s, bool *b)
{
	static const char *const yes[] = { "1", "true", "yes", "on" };
	static const char *const no[] = { "0", "false", "no", "off", "" };
	for (size_t i = 0; i < ARRAY_SIZE(yes); i++)
		if (!strcasecmp(s, yes[i]))
			return *b = true, 0;
	for (size_t i = 0; i < ARRAY_SIZE(no); i++)
		if (!strcasecmp(s, no[i]))
			return *b = false, 0;
	return -EINVAL;
}

static int parse_loglevel(const char *s, int *prio)
{
	static const struct {
		const char *name;
		int prio;
	} levels[] = { { "err", LOG_ERR },	   { "error", LOG_ERR }, { "warning", LOG_WARNING },
		       { "notice", LOG_NOTICE }, { "info", LOG_INFO }, { "debug", LOG_DEBUG } };
	for (size_t i = 0; i < ARRAY_SIZE(levels); i++)
		if (!strcasecmp(s, levels[i].name))
			return *prio = levels[i].prio, 0;
	return -EINVAL;
}

/* Sets option o from text s; where names the source for the message. */
static int set_from_text(struct config *c, const struct opt_def *o, const char *s,
			 const char *where, struct errbuf *err)
{
	switch (o->type) {
	case OPT_STRING:
	case OPT_STRING_EMPTY: {
		if (!*s && o->type == OPT_STRING)
			return errbuf_set(err, EINVAL, "%s: must not be empty", where);
		char *d = strdup(s);
		if (!d)
			return errbuf_set(err, ENOMEM, "out of memory");
		free(*field_str(c, o));
		*field_str(c, o) = d;
		return 0;
	}
	case OPT_SECONDS:
		if (parse_seconds(s, (int64_t *)((char *)c + o->offset)) < 0)
			return errbuf_set(err, EINVAL,
					  "%s: must be a number of seconds above 0 and at most 86400",
					  where);
		return 0;
	case OPT_BOOL:
		if (parse_bool(s, (bool *)((char *)c + o->offset)) < 0)
			return errbuf_set(err, EINVAL, "%s: must be true or false", where);
		return 0;
	case OPT_LOGLEVEL:
		if (parse_loglevel(s, (int *)((char *)c + o->offset)) < 0)
			return errbuf_set(err, EINVAL,
					  "%s: must be err, warning, notice, info or debug", where);
		return 0;
	}
	return errbuf_set(err, EINVAL, "%s: unknown option type", where);
}

static void file_key(const struct opt_def *o, char *buf, size_t n)
{
	snprintf(buf, n, "%s", o->name);
	for (char *p = buf; *p; p++)
		if (*p == '-')
			*p = '_';
}

static void env_name(const char *name, char *buf, size_t n)
{
	int w = snprintf(buf, n, "DSTACK_HEALTHD_%s", name);
	for (char *p = buf + 15; w > 0 && *p; p++)
		*p = *p == '-' ? '_' : (char)(*p >= 'a' && *p <= 'z' ? *p - 32 : *p);
}

static int set_from_json(struct config *c, const struct opt_def *o, const struct json *j,
			 int v, const char *where, struct errbuf *err)
{
	if (o->type == OPT_SECONDS) {
		double d;
		if (json_double(j, v, &d) < 0)
			return errbuf_set(err, EINVAL, "%s: must be a number of seconds, not %s",
					  where, json_type_name(j, v));
		char text[64];
		snprintf(text, sizeof(text), "%.17g", d);
		return set_from_text(c, o, text, where, err);
	}
	if (o->type == OPT_BOOL) {
		if (json_bool(j, v, (bool *)((char *)c + o->offset)) < 0)
			return errbuf_set(err, EINVAL, "%s: must be true or false, not %s",
					  where, json_type_name(j, v));
		return 0;
	}
	_cleanup_free_ char *s = NULL;
	if (json_strdup(j, v, &s) < 0)
		return errbuf_set(err, EINVAL, "%s: must be a string, not %s", where,
				  json_type_name(j, v));
	return set_from_text(c, o, s, where, err);
}

int config_parse_json(struct config *c, const char *path, const char *buf, size_t len,
		      struct errbuf *err)
{
	struct json j;
	int r;
	if ((r = json_parse(&j, buf, len, 1024, err)) < 0) {
		errbuf_prefix(err, "%s", path);
		return r;
	}
	if (!json_is_object(&j, 0)) {
		json_free(&j);
		return errbuf_set(err, EINVAL, "%s: must be a JSON object", path);
	}
	JSON_OBJECT_FOREACH(&j, 0, k, v, cnt) {
		const struct opt_def *o = NULL;
		char key[64], where[PATH_MAX_WHERE];
		for (size_t i = 0; i < ARRAY_SIZE(opts) && !o; i++) {
			file_key(&opts[i], key, sizeof(key));
			if (json_str_eq(&j, k, key))
				o = &opts[i];
		}
		if (!o) {
			_cleanup_free_ char *name = NULL;
			char clean[80];
			json_strdup(&j, k, &name);
			err_clean(clean, sizeof(clean), name ? name : "?", 64);
			json_free(&j);
			return errbuf_set(err, EINVAL, "%s: %s: unknown option", path, clean);
		}
		file_key(o, key, sizeof(key));
		snprintf(where, sizeof(where), "%s: %s", path, key);
		if ((r = set_from_json(c, o, &j, v, where, err)) < 0) {
			json_free(&j);
			return r;
		}
		c->origin[o - opts] = CONFIG_FROM_FILE;
	}
	json_free(&j);
	return 0;
}

/* from: the flag or variable that named the file, NULL for the default. */
static int apply_file(struct config *c, const char *path, const char *from, struct errbuf *err)
{
	_cleanup_free_ char *buf = NULL;
	size_t len = 0;
	int r = readfile(path, CONFIG_MAX_BYTES, &buf, &len, err);
	if (r < 0) {
		if (from)
			errbuf_prefix(err, "%s", from);
		return r;
	}
	return config_parse_json(c, path, buf, len, err);
}

static int set_defaults(struct config *c, struct errbuf *err)
{
	const char *dh = getenv("DOCKER_HOST");
	const char *tls = getenv("DOCKER_TLS_VERIFY");
	const char *certs = getenv("DOCKER_CERT_PATH");
	const char *home = getenv("HOME");
	char certdir[4096];
	if (certs && *certs)
		snprintf(certdir, sizeof(certdir), "%s", certs);
	else
		snprintf(certdir, sizeof(certdir), "%s/.docker", home && *home ? home : "/root");

	memset(c, 0, sizeof(*c));
	c->interval_ms = 5000;
	c->header_timeout_ms = 2000;
	c->refresh_timeout_ms = 10000;
	c->min_refresh_spacing_ms = 250;
	c->drain_window_ms = 30000;
	c->service_gap_ms = 60000;
	c->stop_hold_ms = 7000;
	c->relay_idle_timeout_ms = RELAY_IDLE_TIMEOUT_MS;
	c->relay_keepalive_ms = RELAY_KEEPALIVE_S * 1000;
	c->log_priority = LOG_INFO;
	/* The docker CLI treats any non-empty DOCKER_TLS_VERIFY as on. */
	c->docker_tls_verify = tls && *tls;
	c->listen = strdup("0.0.0.0:8090");
	c->compose_file = strdup("/dstack/.host-shared/app-compose.json");
	c->runtime_file = strdup("/run/dstack/app-compose-runtime.json");
	c->docker_host = strdup(dh && *dh ? dh : "unix:///var/run/docker.sock");
	c->docker_cert_path = strdup(certdir);
	c->nerdctl = strdup("nerdctl");
	c->control_socket = strdup(CONFIG_DEFAULT_CONTROL_SOCKET);
	c->metrics_listen = strdup("");
	c->relay = strdup("");
	c->verdict_file = strdup("");
	c->stop_guest_agent = strdup("");
	for (size_t i = 0; i < ARRAY_SIZE(opts); i++)
		if ((opts[i].offset == offsetof(struct config, docker_host) && dh && *dh) ||
		    (opts[i].offset == offsetof(struct config, docker_tls_verify) && tls) ||
		    (opts[i].offset == offsetof(struct config, docker_cert_path) && certs && *certs))
			c->origin[i] = CONFIG_FROM_DOCKER_ENV;
	if (!c->verdict_file || !c->stop_guest_agent || !c->control_socket || !c->metrics_listen || !c->relay || !c->listen ||
	    !c->compose_file || !c->runtime_file || !c->docker_host ||
	    !c->docker_cert_path || !c->nerdctl)
		return errbuf_set(err, ENOMEM, "out of memory");
	return 0;
}

static int apply_env(struct config *c, struct errbuf *err)
{
	for (size_t i = 0; i < ARRAY_SIZE(opts); i++) {
		char name[96];
		env_name(opts[i].name, name, sizeof(name));
		const char *v = getenv(name);
		if (!v)
			continue;
		int r = set_from_text(c, &opts[i], v, name, err);
		if (r < 0)
			return r;
		c->origin[i] = CONFIG_FROM_ENV;
	}
	return 0;
}

void config_free(struct config *c)
{
	if (!c)
		return;
	free(c->config_file);
	for (size_t i = 0; i < ARRAY_SIZE(opts); i++)
		if (opts[i].type == OPT_STRING || opts[i].type == OPT_STRING_EMPTY)
			free(*field_str(c, &opts[i]));
	memset(c, 0, sizeof(*c));
}

int config_load(int argc, char *const argv[], struct config *out, struct errbuf *err)
{
	struct option longopts[ARRAY_SIZE(opts) + 5];
	const char *flag_val[ARRAY_SIZE(opts)] = { 0 };
	const char *config_flag = NULL;
	bool once = false, help = false, version = false;
	size_t n = 0;
	for (size_t i = 0; i < ARRAY_SIZE(opts); i++)
		longopts[n++] = (struct option){ opts[i].name, required_argument, NULL,
						 FLAG_BASE + (int)i };
	longopts[n++] = (struct option){ "config", required_argument, NULL, 'c' };
	longopts[n++] = (struct option){ "once", no_argument, NULL, FLAG_ONCE };
	longopts[n++] = (struct option){ "version", no_argument, NULL, FLAG_VERSION };
	longopts[n++] = (struct option){ "help", no_argument, NULL, 'h' };
	longopts[n] = (struct option){ 0 };

	optind = 0; /* also re-initialises getopt for a reload */
	opterr = 0;
	int ch;
	while ((ch = getopt_long(argc, argv, ":c:h", longopts, NULL)) != -1) {
		if (ch == 'c')
			config_flag = optarg;
		else if (ch == 'h')
			help = true;
		else if (ch == FLAG_ONCE)
			once = true;
		else if (ch == FLAG_VERSION)
			version = true;
		else if (ch >= FLAG_BASE && ch < FLAG_BASE + (int)ARRAY_SIZE(opts))
			flag_val[ch - FLAG_BASE] = optarg;
		else if (ch == ':')
			return errbuf_set(err, EINVAL, "%s: needs a value", argv[optind - 1]);
		else
			return errbuf_set(err, EINVAL, "%s: unknown option (see --help)",
					  argv[optind - 1]);
	}
	if (optind < argc)
		return errbuf_set(err, EINVAL, "%s: unexpected argument (see --help)", argv[optind]);

	struct config c;
	int r = set_defaults(&c, err);
	c.once = once;
	c.help = help;
	c.version = version;
	if (r < 0 || help || version)
		goto done;

	const char *file = config_flag ? config_flag : getenv("DSTACK_HEALTHD_CONFIG");
	const char *file_from = config_flag ? "--config" : "DSTACK_HEALTHD_CONFIG";
	if (file && !*file) {
		r = errbuf_set(err, EINVAL, "%s: must not be empty (to read no config file, "
			       "leave it unset and have no %s)", file_from, CONFIG_DEFAULT_FILE);
		goto done;
	}
	if (!file && access(CONFIG_DEFAULT_FILE, F_OK) == 0) {
		file = CONFIG_DEFAULT_FILE;
		file_from = NULL;
	}
	if (file) {
		if (!(c.config_file = strdup(file))) {
			r = errbuf_set(err, ENOMEM, "out of memory");
			goto done;
		}
		if ((r = apply_file(&c, file, file_from, err)) < 0)
			goto done;
	}
	if ((r = apply_env(&c, err)) < 0)
		goto done;
	for (size_t i = 0; i < ARRAY_SIZE(opts); i++) {
		if (!flag_val[i])
			continue;
		char where[64];
		snprintf(where, sizeof(where), "--%s", opts[i].name);
		if ((r = set_from_text(&c, &opts[i], flag_val[i], where, err)) < 0)
			goto done;
		c.origin[i] = CONFIG_FROM_FLAG;
	}
done:
	if (r < 0) {
		config_free(&c);
		return r;
	}
	*out = c;
	return 0;
}

_Static_assert(ARRAY_SIZE(opts) <= CONFIG_MAX_OPTS, "raise CONFIG_MAX_OPTS");

/* The value of option i as text, as the help and the config file spell it. */
static void value_text(const struct config *c, size_t i, char *buf, size_t n)
{
	const struct opt_def *o = &opts[i];
	const void *f = (const char *)c + o->offset;
	static const char *const prio[] = { "emerg", "alert", "crit", "err", "warning",
					    "notice", "info", "debug" };
	switch (o->type) {
	case OPT_SECONDS:
		snprintf(buf, n, "%.6g", (double)*(const int64_t *)f / 1000);
		return;
	case OPT_BOOL:
		snprintf(buf, n, "%s", *(const bool *)f ? "true" : "false");
		return;
	case OPT_LOGLEVEL: {
		int p = *(const int *)f;
		snprintf(buf, n, "%s", p >= 0 && p < 8 ? prio[p] : "?");
		return;
	}
	case OPT_STRING:
	case OPT_STRING_EMPTY: {
		const char *s = *(char *const *)f;
		snprintf(buf, n, "%s", s ? s : "");
		return;
	}
	}
}

static int origin_text(const struct config *c, size_t i, char *buf, size_t n)
{
	char key[64];
	switch (c->origin[i]) {
	case CONFIG_FROM_FILE:
		return snprintf(buf, n, "file %s", c->config_file ? c->config_file : "?");
	case CONFIG_FROM_ENV:
		env_name(opts[i].name, key, sizeof(key));
		return snprintf(buf, n, "environment %s", key);
	case CONFIG_FROM_FLAG:
		return snprintf(buf, n, "flag --%s", opts[i].name);
	case CONFIG_FROM_DOCKER_ENV:
		return snprintf(buf, n, "default, from the environment (%s)",
				opts[i].offset == offsetof(struct config, docker_host) ?
					"DOCKER_HOST" :
				opts[i].offset == offsetof(struct config, docker_cert_path) ?
					"DOCKER_CERT_PATH" : "DOCKER_TLS_VERIFY");
	}
	return snprintf(buf, n, "default");
}

int config_json(const struct config *c, struct json_buf *out)
{
	int r = json_buf_puts(out, "{\"config_file\":{\"value\":");
	if (r == 0)
		r = c->config_file ? json_buf_string(out, c->config_file) : json_buf_puts(out, "null");
	if (r == 0)
		r = json_buf_puts(out, c->config_file ? ",\"read\":true}" : ",\"read\":false}");
	for (size_t i = 0; r == 0 && i < ARRAY_SIZE(opts); i++) {
		char key[64], where[PATH_MAX_WHERE], val[PATH_MAX_WHERE];
		file_key(&opts[i], key, sizeof(key));
		value_text(c, i, val, sizeof(val));
		origin_text(c, i, where, sizeof(where));
		if ((r = json_buf_puts(out, ",")) == 0 && (r = json_buf_string(out, key)) == 0 &&
		    (r = json_buf_puts(out, ":{\"value\":")) == 0)
			r = opts[i].type == OPT_SECONDS || opts[i].type == OPT_BOOL ?
				    json_buf_puts(out, val) : json_buf_string(out, val);
		if (r == 0 && (r = json_buf_puts(out, ",\"from\":")) == 0 &&
		    (r = json_buf_string(out, where)) == 0)
			r = json_buf_puts(out, "}");
	}
	return r == 0 ? json_buf_puts(out, "}") : r;
}

int config_diff(const struct config *a, const struct config *b, char *out, size_t n)
{
	int changed = 0;
	size_t off = 0;
	if (n)
		out[0] = '\0';
	for (size_t i = 0; i < ARRAY_SIZE(opts); i++) {
		char va[512], vb[512], key[64];
		value_text(a, i, va, sizeof(va));
		value_text(b, i, vb, sizeof(vb));
		if (strcmp(va, vb) == 0)
			continue;
		changed++;
		file_key(&opts[i], key, sizeof(key));
		int w = snprintf(out + off, n - off, "%s: %s \u2192 %s\n", key, va[0] ? va : "\"\"",
				 vb[0] ? vb : "\"\"");
		if (w > 0)
			off = off + (size_t)w >= n ? n - 1 : off + (size_t)w;
	}
	return changed;
}

static const struct opt_def *opt_named(const char *key, size_t *index)
{
	char k[64];
	for (size_t i = 0; i < ARRAY_SIZE(opts); i++) {
		file_key(&opts[i], k, sizeof(k));
		if (!strcmp(k, key)) {
			*index = i;
			return &opts[i];
		}
	}
	return NULL;
}

void config_where(const struct config *c, const char *key, char *buf, size_t n)
{
	size_t i = 0;
	if (!opt_named(key, &i)) {
		snprintf(buf, n, "%s", key);
		return;
	}
	switch (c->origin[i]) {
	case CONFIG_FROM_FILE:
		snprintf(buf, n, "%s: %s", c->config_file ? c->config_file : "?", key);
		return;
	case CONFIG_FROM_ENV:
		env_name(opts[i].name, buf, n);
		return;
	case CONFIG_FROM_FLAG:
		snprintf(buf, n, "--%s", opts[i].name);
		return;
	case CONFIG_FROM_DOCKER_ENV:
		snprintf(buf, n, "%s", opts[i].offset == offsetof(struct config, docker_host) ?
					  "DOCKER_HOST" :
				       opts[i].offset == offsetof(struct config, docker_cert_path) ?
					  "DOCKER_CERT_PATH" : "DOCKER_TLS_VERIFY");
		return;
	}
	snprintf(buf, n, "%s (the default)", key);
}

/* err's message behind where key came from. Returns r. */
static int blame(const struct config *c, const char *key, int r, struct errbuf *err)
{
	char where[PATH_MAX_WHERE];
	config_where(c, key, where, sizeof(where));
	errbuf_prefix(err, "%s", where);
	return r;
}

int config_check(const struct config *c, struct errbuf *err)
{
	int r;
	if (*c->listen && (r = rpc_listen_parse(c->listen, false, err)) < 0)
		return blame(c, "listen", r, err);
	/* Relative to what? The agent's working folder is nobody's choice. */
	if (*c->verdict_file && c->verdict_file[0] != '/')
		return blame(c, "verdict_file",
			     errbuf_set(err, EINVAL, "'%s' is not an absolute path",
					c->verdict_file), err);
	if (*c->metrics_listen && (r = rpc_listen_parse(c->metrics_listen, true, err)) < 0)
		return blame(c, "metrics_listen", r, err);
	struct http_endpoint ep;
	if (*c->stop_guest_agent && (r = stophold_endpoint(c->stop_guest_agent, &ep, err)) < 0)
		return blame(c, "stop_guest_agent", r, err);
	if (*c->relay && (r = relay_parse(c->relay, err)) < 0)
		return blame(c, "relay", r, err);
	/* The relay fronts the public listener: without one nothing reaches it. */
	if (*c->relay && !*c->listen)
		return blame(c, "relay", errbuf_set(err, EINVAL, "needs the public listener, and listen is empty"), err);
	/* TCP_KEEPIDLE counts whole seconds, from 1 to 32767. */
	if (c->relay_keepalive_ms < 1000 || c->relay_keepalive_ms > 32767 * 1000)
		return blame(c, "relay_keepalive",
			     errbuf_set(err, EINVAL, "must be from 1 to 32767 seconds"), err);
	if (*c->control_socket) {
		char spec[PATH_MAX_WHERE];
		if (c->control_socket[0] != '/')
			return blame(c, "control_socket",
				     errbuf_set(err, EINVAL, "'%s' is not an absolute path",
						c->control_socket), err);
		snprintf(spec, sizeof(spec), "unix:%s", c->control_socket);
		if ((r = rpc_listen_parse(spec, false, err)) < 0)
			return blame(c, "control_socket", r, err);
	}
	return 0;
}

int config_check_docker(const struct config *c, struct errbuf *err)
{
	struct http_endpoint ep;
	int r = http_endpoint_parse(c->docker_host, c->docker_tls_verify, c->docker_cert_path,
				    &ep, err);
	if (r < 0)
		return blame(c, "docker_host", r, err);
	if ((r = http_tls_check(&ep, err)) < 0)
		return blame(c, "docker_cert_path", r, err);
	return 0;
}
