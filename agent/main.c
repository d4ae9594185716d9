/* SPDX-License-Identifier: Apache-2.0 */
/* dstack-healthd: answers "can this instance serve?" for the dstack gateway.
 *
 * main() reads as the table of contents: the configuration is checked (any
 * problem exits with status 2, naming the source and field) and
 * app-compose.json is read (a problem with it is served as the verdict, not
 * fatal: a health agent that is down explains nothing; --once exits 2 for
 * it); then the listener is bound, the verdict cache created with the "not
 * determined yet" verdict, the pRPC thread and the refresh thread started, and
 * READY=1 sent. Past that point nothing from outside makes the agent exit: a
 * runtime error becomes a verdict. Signals are handled synchronously here. */
#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <pthread.h>
#include <stdatomic.h>
#include <netinet/in.h>
#include <time.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "agent/compose.h"
#include "agent/config.h"
#include "agent/ctl.h"
#include "agent/opview.h"
#include "agent/notify.h"
#include "agent/refresh.h"
#include "agent/source.h"
#include "agent/stophold.h"
#include "agent/vfile.h"
#include "base/cache.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/version.h"
#include "rpc/control.h"
#include "rpc/encode.h"
#include "rpc/addr.h"
#include "rpc/listen.h"
#include "rpc/relay.h"
#include "rpc/server.h"

#define EXIT_CONFIG 2
/* --once: the source could not be asked (the verdict carries `error`), so
 * neither healthy nor unhealthy was judged. */
#define EXIT_NOT_JUDGED 3

struct agent {
	struct config cfg;
	struct manifest m;
};

static void front_apply(const struct manifest *m);

static int load(int argc, char *argv[], struct agent *a, struct errbuf *err)
{
	int r = config_load(argc, argv, &a->cfg, err);
	if (r < 0 || a->cfg.help || a->cfg.version)
		return r;
	log_set_max_priority(a->cfg.log_priority);
	if ((r = config_check(&a->cfg, err)) < 0)
		return r;
	a->m.writes_status_file = *a->cfg.verdict_file != '\0';
	if (!manifest_try(&a->m, a->cfg.compose_file))
		return 0;
	const struct app_compose *app = &a->m.app;
	if (source_kind(app) == SOURCE_DOCKER)
		return config_check_docker(&a->cfg, err);
	return 0;
}

/* --once: one refresh straight from the source, not through the cache. An
 * unusable app-compose.json is exit status 2, as a bad configuration; a
 * source that could not be asked is EXIT_NOT_JUDGED. */
static int run_once(struct agent *a)
{
	struct verdict v;
	struct errbuf err = { "" };
	if (!a->m.ok) {
		log_msg(LOG_ERR, "%s", a->m.err.msg);
		return EXIT_CONFIG;
	}
	verdict_init(&v);
	int r = source_refresh(&a->cfg, &a->m, clock_mono_ms() + a->cfg.refresh_timeout_ms,
			       -1, &v, &err);
	bool judged = r >= 0;
	if (r < 0) {
		if (r == -ENOMEM)
			errbuf_tag(&err, ERR_KIND_NOMEM, errbuf_set(&err, ENOMEM, "out of memory"));
		/* The detail for the operator; the answer has the public text. */
		log_msg(LOG_WARNING, "refresh failed: %s", err.msg);
		verdict_free(&v);
		verdict_init(&v);
		if (verdict_set_failure(&v, &err) < 0)
			return EXIT_FAILURE;
	}
	verdict_sort(&v);
	struct json_buf out = { 0 };
	if (encode_health_json(&v, &out) < 0) {
		verdict_free(&v);
		return EXIT_FAILURE;
	}
	printf("%s\n", out.p);
	bool healthy = v.healthy;
	json_buf_free(&out);
	verdict_free(&v);
	return healthy ? EXIT_SUCCESS : judged ? EXIT_FAILURE : EXIT_NOT_JUDGED;
}

static void log_start(const struct agent *a, const char *listen_desc, const char *local)
{
	char hash_field[96];
	const struct app_compose *app = &a->m.app;
	snprintf(hash_field, sizeof(hash_field), "HEALTHD_COMPOSE_HASH=%s", app->hash);
	const char *fields[] = { a->m.ok ? hash_field : NULL, NULL };
	static const char *const sources[] = {
		[SOURCE_NONE] = "none (health_check is off)", [SOURCE_STATUS_FILE] = "status file",
		[SOURCE_DOCKER] = "containers via Docker", [SOURCE_NERDCTL] = "containers via nerdctl",
	};
	const char *source = !a->m.ok ? "none until app-compose.json is usable"
				      : sources[source_kind(app)];
	log_fields(LOG_INFO, fields,
		   "v%s (%s) serving on %s; %s%s; app-compose %s sha256 %s; "
		   "health source: %s%s",
		   HEALTHD_VERSION, HEALTHD_REV, listen_desc,
		   a->cfg.config_file ? "config file " : "no config file",
		   a->cfg.config_file ? a->cfg.config_file : "", a->cfg.compose_file,
		   a->m.ok ? app->hash : "-", source, local);
}

/* Once per load: the refresh loop reads the file again quietly. */
static void log_manifest(const struct agent *a)
{
	if (!a->m.ok)
		log_msg(LOG_WARNING, "%s (%s); serving healthy:false and reading it again on "
				     "every refresh", a->m.err.msg, a->cfg.compose_file);
}

static void free_agent(struct agent *a)
{
	config_free(&a->cfg);
	manifest_free(&a->m);
}

static void log_changes(const struct agent *old, const struct agent *now)
{
	const struct config *o = &old->cfg, *n = &now->cfg;
#define CHANGED_STR(field, what)                                                  \
	if (strcmp(o->field ? o->field : "", n->field ? n->field : ""))           \
		log_msg(LOG_NOTICE, "reload: %s changed", what)
	CHANGED_STR(compose_file, "compose_file");
	CHANGED_STR(runtime_file, "runtime_file");
	CHANGED_STR(docker_host, "docker_host");
	CHANGED_STR(docker_cert_path, "docker_cert_path");
	CHANGED_STR(nerdctl, "nerdctl");
	CHANGED_STR(containerd_address, "containerd_address");
#undef CHANGED_STR
	if (o->interval_ms != n->interval_ms)
		log_msg(LOG_NOTICE, "reload: interval %.3g s -> %.3g s",
			(double)o->interval_ms / 1000, (double)n->interval_ms / 1000);
	if (o->refresh_timeout_ms != n->refresh_timeout_ms)
		log_msg(LOG_NOTICE, "reload: refresh_timeout %.3g s -> %.3g s",
			(double)o->refresh_timeout_ms / 1000,
			(double)n->refresh_timeout_ms / 1000);
	if (o->min_refresh_spacing_ms != n->min_refresh_spacing_ms)
		log_msg(LOG_NOTICE, "reload: min_refresh_spacing %.3g s -> %.3g s",
			(double)o->min_refresh_spacing_ms / 1000,
			(double)n->min_refresh_spacing_ms / 1000);
	if (o->docker_tls_verify != n->docker_tls_verify)
		log_msg(LOG_NOTICE, "reload: docker_tls_verify changed");
	if (o->log_priority != n->log_priority)
		log_msg(LOG_NOTICE, "reload: log_level changed");
	if (o->header_timeout_ms != n->header_timeout_ms)
		log_msg(LOG_WARNING, "reload: header_timeout changed to %.3g s; the listener "
				     "keeps %.3g s until a restart",
			(double)n->header_timeout_ms / 1000, (double)o->header_timeout_ms / 1000);
	if (strcmp(o->listen, n->listen))
		log_msg(LOG_WARNING, "reload: listen changed to %s; the listener is kept "
				     "until a restart", n->listen);
	if (strcmp(o->relay, n->relay))
		log_msg(LOG_WARNING, "reload: relay changed to %s; the relay is kept "
				     "until a restart", *n->relay ? n->relay : "none");
	if (o->relay_idle_timeout_ms != n->relay_idle_timeout_ms ||
	    o->relay_keepalive_ms != n->relay_keepalive_ms)
		log_msg(LOG_WARNING, "reload: relay_idle_timeout or relay_keepalive changed"
				     "; the relay keeps its own until a restart");
	if (old->m.ok && now->m.ok && strcmp(old->m.app.hash, now->m.app.hash))
		log_msg(LOG_NOTICE, "reload: app-compose.json changed, sha256 %s -> %s",
			old->m.app.hash, now->m.app.hash);
}

/* `dstack-healthd reload` over the control socket: the control thread asks
 * with a SIGHUP and gets a ticket; the main thread answers every ticket up
 * to the last one asked before its reload began. */
static struct {
	pthread_mutex_t lock;
	uint64_t asked;
	struct control *ctl;
} rchan = { PTHREAD_MUTEX_INITIALIZER, 0, NULL };

static uint64_t ask_reload(void *arg)
{
	pthread_mutex_lock(&rchan.lock);
	uint64_t mine = ++rchan.asked;
	pthread_mutex_unlock(&rchan.lock);
	kill(getpid(), SIGHUP);
	return mine;
}

/* The drain outlives a reload (it lives here, not in the refresher); the
 * reload gives it the new window. */
static struct drain *the_drain;

/* The verdict file's writer (issue 21): it outlives a reload, and a drain
 * or resume asks it directly, whatever the refresh thread is doing. */
static struct vfile *the_vfile;

static void drain_changed(void *arg, bool draining, int64_t at_ms, const struct verdict *served)
{
	char summary[256];
	verdict_summary(served, summary, sizeof(summary));
	log_msg(LOG_NOTICE, draining ? "drain: serving %s" : "resume: serving %s", summary);
	opview_note_drain(arg, draining, at_ms, served);
	vfile_ask(the_vfile);
}

static void reload_answer(uint64_t serving, int result, const char *text)
{
	control_reload_done(rchan.ctl, serving, result, text);
}

/* SIGHUP: re-reads the config and app-compose.json. A bad new config is
 * refused and the running one stays in force; an unusable app-compose.json
 * is served, as at start. The same source keeps its refresh state (the
 * failure count); a new one is "not determined yet" at once. */
static void reload(int argc, char *argv[], struct agent *a, struct cache *cache,
		   struct opview *view, struct refresher **rf)
{
	struct agent n = { 0 };
	struct errbuf err = { "" };
	char text[8192];
	pthread_mutex_lock(&rchan.lock);
	uint64_t serving = rchan.asked;
	pthread_mutex_unlock(&rchan.lock);
	if (load(argc, argv, &n, &err) < 0) {
		log_set_max_priority(a->cfg.log_priority);
		log_msg(LOG_ERR, "reload refused, the running configuration stays: %s", err.msg);
		snprintf(text, sizeof(text), "reload refused, the running configuration stays: %s\n",
			 err.msg);
		reload_answer(serving, -1, text);
		free_agent(&n);
		return;
	}
	/* The refresh thread owns a->m until it stops: it reads an unusable
	 * app-compose.json again on every refresh (manifest_try). Stopped
	 * first, so that the comparisons below read a manifest no thread
	 * writes. */
	struct refresh_state st = { 0 };
	bool had = *rf != NULL;
	refresh_stop(*rf, &st);
	*rf = NULL;
	log_changes(a, &n);
	int changed = config_diff(&a->cfg, &n.cfg, text, sizeof(text) - 300);
	const char *oh = a->m.ok ? a->m.app.hash : "(not usable)";
	const char *nh = n.m.ok ? n.m.app.hash : "(not usable)";
	if (strcmp(oh, nh)) {
		size_t l = strlen(text);
		snprintf(text + l, sizeof(text) - l, "app-compose.json sha256: %s \u2192 %s\n",
			 oh, nh);
		changed++;
	}
	if (!n.m.ok) {
		size_t l = strlen(text);
		snprintf(text + l, sizeof(text) - l, "%s; served as healthy:false until it is "
			 "usable\n", n.m.err.msg);
	}
	if (strcmp(a->cfg.control_socket, n.cfg.control_socket) ||
	    strcmp(a->cfg.metrics_listen, n.cfg.metrics_listen) || strcmp(a->cfg.listen, n.cfg.listen) ||
	    strcmp(a->cfg.relay, n.cfg.relay) ||
	    a->cfg.relay_idle_timeout_ms != n.cfg.relay_idle_timeout_ms ||
	    a->cfg.relay_keepalive_ms != n.cfg.relay_keepalive_ms ||
	    a->cfg.header_timeout_ms != n.cfg.header_timeout_ms) {
		size_t l = strlen(text);
		snprintf(text + l, sizeof(text) - l, "(listeners are kept until a restart)\n");
	}
	log_manifest(&n);
	bool same = had && source_same(&a->cfg, &a->m, &n.cfg, &n.m);
	free_agent(a);
	*a = n;
	a->m.on_usable = front_apply;
	front_apply(&a->m);
	view->first_trigger = TRIGGER_RELOAD;
	opview_publish_config(view, &a->cfg);
	if (the_drain)
		drain_set_window(the_drain, a->cfg.drain_window_ms);
	if (vfile_set_path(the_vfile, a->cfg.verdict_file) < 0)
		log_msg(LOG_ERR, "out of memory");
	int r = refresh_start(&a->cfg, &a->m, cache, same ? &st : NULL, view, the_vfile, rf, &err);
	refresh_state_free(&st);
	if (r < 0) {
		log_msg(LOG_ERR, "reload: %s", err.msg);
		size_t l = strlen(text);
		snprintf(text + l, sizeof(text) - l, "reload applied, but: %s\n", err.msg);
		reload_answer(serving, -1, text);
		return;
	}
	log_msg(LOG_NOTICE, "reloaded%s", same ? "" : "; health not determined yet");
	if (!changed)
		snprintf(text, sizeof(text), "reloaded; nothing changed\n");
	else {
		size_t l = strlen(text);
		snprintf(text + l, sizeof(text) - l, "reloaded\n");
	}
	reload_answer(serving, 0, text);
}

/* The control socket: the second fd systemd passed, else one bound at the
 * configured path (its folder made 0700 if missing), 0600. Not fatal: the
 * public verdict does not depend on it. -1 when there is none. */
static int open_control(const struct agent *a, int passed)
{
	const char *path = a->cfg.control_socket;
	if (passed >= 0)
		return passed;
	if (!path || !*path)
		return -1;
	/* A unix socket's path fits in sun_path (108 bytes): rpc_listen
	 * refuses a longer one. */
	char dir[128], spec[136];
	snprintf(dir, sizeof(dir), "%s", path);
	char *slash = strlen(path) < sizeof(dir) ? strrchr(dir, '/') : NULL;
	if (slash && slash != dir) {
		*slash = '\0';
		if (mkdir(dir, 0700) < 0 && errno != EEXIST)
			log_msg(LOG_WARNING, "control socket: cannot create %s: %s", dir,
				strerror(errno));
	}
	snprintf(spec, sizeof(spec), "unix:%s", path);
	struct errbuf err = { "" };
	int fd = -1;
	/* Threads have not started yet: the umask is the process's alone. */
	mode_t old = umask(0177);
	int r = rpc_listen(spec, &fd, &err);
	umask(old);
	if (r < 0) {
		char where[CONFIG_WHERE_MAX];
		config_where(&a->cfg, "control_socket", where, sizeof(where));
		log_msg(LOG_WARNING, "%s: %s; the local view is off", where, err.msg);
		return -1;
	}
	return fd;
}

/* Where the local listeners are, for the start line (one line: the unit's
 * journal stays a line per event). */
static void local_desc(int control_fd, int metrics_fd, char *buf, size_t n)
{
	char c[256] = "", m[256] = "";
	if (control_fd >= 0 && rpc_listen_describe(control_fd, c, sizeof(c)) < 0)
		c[0] = '\0';
	if (metrics_fd >= 0 && rpc_listen_describe(metrics_fd, m, sizeof(m)) < 0)
		m[0] = '\0';
	snprintf(buf, n, "%s%s%s%s%s", c[0] ? "; control socket " : "; no control socket", c,
		 m[0] ? "; metrics on http://" : "", m, m[0] ? "/metrics" : "");
}

/* The public listener's TCP port, or -1 (a unix socket, none). */
static int listen_port(int fd)
{
	union rpc_addr a;
	socklen_t len = sizeof(a);
	if (fd < 0 || getsockname(fd, &a.sa, &len) < 0)
		return -1;
	if (a.sa.sa_family == AF_INET)
		return ntohs(a.in.sin_port);
	if (a.sa.sa_family == AF_INET6)
		return ntohs(a.in6.sin6_port);
	return -1;
}

/* The public listener and its port, for the app's port_policy. */
static struct rpc_server *the_server;
static int the_port = -1;
static atomic_int the_pp = -1; /* what was said last: -1 nothing yet */

/* app-compose.json usable (at the start, on a reload, or later on a
 * refresh): a PROXY header is read first on each public connection only
 * when the app declared the listener's own port with "pp": true, for then
 * the gateway writes one before every connection it opens to it
 * (docs/design/front.md, "Who is asking"). Called on the thread that read the
 * file; the server's flag is an atomic. */
static void front_apply(const struct manifest *m)
{
	bool pp = the_port >= 0 && m->ok && portpolicy_pp(&m->app.ports, (uint16_t)the_port);
	if (!the_server)
		return;
	rpc_server_set_proxy(the_server, pp);
	/* Said when it is on, and when it changes; off from the start is
	 * the default, and says nothing. */
	int was = atomic_exchange(&the_pp, pp);
	if (was != pp && (pp || was == 1))
		log_msg(LOG_INFO, pp ? "app-compose.json declares port %d with \"pp\": true: each "
				       "public connection is read for a PROXY header first"
				     : "app-compose.json no longer declares port %d with \"pp\": true: "
				       "no PROXY header is read on it",
			the_port);
}

static int open_metrics(const struct agent *a)
{
	struct errbuf err = { "" };
	int fd = -1;
	if (!a->cfg.metrics_listen || !*a->cfg.metrics_listen)
		return -1;
	if (rpc_listen(a->cfg.metrics_listen, &fd, &err) < 0) {
		char where[CONFIG_WHERE_MAX];
		config_where(&a->cfg, "metrics_listen", where, sizeof(where));
		log_msg(LOG_WARNING, "%s: %s; not serving metrics there", where, err.msg);
		return -1;
	}
	return fd;
}

/* The listener: the one systemd passed (socket activation, sd_listen_fds(3))
 * or a socket bound to --listen. */
static int open_listener(const struct agent *a, int *fd, int *control_fd)
{
	struct errbuf err = { "" };
	int n = sd_listen_fds(1);
	if (n < 0) {
		log_msg(LOG_ERR, "LISTEN_FDS: %s", strerror(-n));
		return -1;
	}
	if (n > 2) {
		log_msg(LOG_ERR, "LISTEN_FDS: %d sockets passed, expected one or two", n);
		return -1;
	}
	if (n == 2) {
		if (sd_is_socket_unix(SD_LISTEN_FDS_START + 1, SOCK_STREAM, 1, NULL, 0) <= 0) {
			log_msg(LOG_ERR, "LISTEN_FDS: fd %d is not a listening unix socket",
				SD_LISTEN_FDS_START + 1);
			return -1;
		}
		*control_fd = SD_LISTEN_FDS_START + 1;
	}
	if (n >= 1) {
		if (sd_is_socket(SD_LISTEN_FDS_START, AF_UNSPEC, SOCK_STREAM, 1) <= 0) {
			log_msg(LOG_ERR, "LISTEN_FDS: fd %d is not a listening stream socket",
				SD_LISTEN_FDS_START);
			return -1;
		}
		*fd = SD_LISTEN_FDS_START;
		return 0;
	}
	/* A sidecar (issue 21): no gateway polls it; the control socket and
	 * the verdict file are its outputs. */
	if (!*a->cfg.listen)
		return 0;
	if (rpc_listen(a->cfg.listen, fd, &err) < 0) {
		char where[CONFIG_WHERE_MAX];
		config_where(&a->cfg, "listen", where, sizeof(where));
		log_msg(LOG_ERR, "%s: %s", where, err.msg);
		return -1;
	}
	return 0;
}

/* The relay on the start line, and a warning when the fd limit left it
 * fewer slots than its default (the gate raised the soft limit as far as
 * the hard one let it: systemd's LimitNOFILE). */
static void relay_desc(const struct agent *a, struct relay *relay, char *buf, size_t n)
{
	struct relay_stats st;
	struct rlimit rl;
	relay_stats(relay, &st);
	snprintf(buf, n, "; relaying all but Health to %s (%u slots)", a->cfg.relay, st.slots);
	if (st.slots < RELAY_MAX_CONNECTIONS && getrlimit(RLIMIT_NOFILE, &rl) == 0)
		log_msg(LOG_WARNING, "relay: the fd limit (%llu) leaves room for %u relayed "
				     "connections, not %u; raise LimitNOFILE (%u fds each, and one "
				     "for each of as many waiting for a slot)",
			(unsigned long long)rl.rlim_cur, st.slots, RELAY_MAX_CONNECTIONS,
			RELAY_FDS_PER_CONN);
}

static int serve(int argc, char *argv[], struct agent *a, const sigset_t *sigs)
{
	struct errbuf err = { "" };
	int fd = -1, control_fd = -1;
	if (open_listener(a, &fd, &control_fd) < 0)
		return EXIT_CONFIG;
	control_fd = open_control(a, control_fd);
	int metrics_fd = open_metrics(a);
	char desc[256] = "no public listener";
	if (fd >= 0 && rpc_listen_describe(fd, desc, sizeof(desc)) < 0)
		snprintf(desc, sizeof(desc), "%s", a->cfg.listen);

	struct verdict v;
	if (source_initial_verdict(&a->m, &v) < 0)
		return EXIT_FAILURE;
	struct snapshot *s = rpc_snapshot_new(&v, clock_mono_ms());
	verdict_free(&v);
	if (s)
		s->max_age_ms = refresh_max_age_ms(&a->cfg);
	struct cache *cache = s ? cache_new(s) : NULL;
	if (!cache) {
		log_msg(LOG_ERR, "out of memory");
		return EXIT_FAILURE;
	}
	static struct opview view;
	opview_init(&view);
	opview_publish_config(&view, &a->cfg);
	struct rpc_server *srv = NULL;
	struct relay *relay = NULL;
	struct control *ctl = NULL;
	struct refresher *rf = NULL;
	struct rpc_server_opts so = {
		.listen_fd = fd,
		.cache = cache,
		.header_timeout_ms = a->cfg.header_timeout_ms,
		.pollers = &view.pollers,
	};
	if (vfile_new(cache, pthread_self(), &the_vfile) < 0 ||
	    drain_new(cache, &view.pollers, a->cfg.drain_window_ms, drain_changed, &view,
		      &the_drain) < 0) {
		log_msg(LOG_ERR, "out of memory");
		vfile_free(the_vfile);
		the_vfile = NULL;
		cache_free(cache);
		return EXIT_FAILURE;
	}
	struct control_opts co = {
		.listen_fd = control_fd, .metrics_fd = metrics_fd, .cache = cache,
		.view = &view.box, .config = &view.config, .pollers = &view.pollers,
		.reload_ask = ask_reload, .drain = the_drain,
	};
	int rc = EXIT_FAILURE;
	if (*a->cfg.relay) {
		struct relay_opts ro = {
			.address = a->cfg.relay,
			.idle_timeout_ms = a->cfg.relay_idle_timeout_ms,
			.keepalive_s = (unsigned)((a->cfg.relay_keepalive_ms + 999) / 1000),
		};
		if (relay_start(&ro, &relay, &err) < 0) {
			log_msg(LOG_ERR, "%s", err.msg);
			goto out;
		}
		so.relay = co.relay = relay;
	}
	the_port = listen_port(fd);
	if (fd >= 0 && rpc_server_start(&so, &srv, &err) < 0) {
		log_msg(LOG_ERR, "cannot start the pRPC server on %s: %s", desc, err.msg);
		goto out;
	}
	the_server = srv;
	a->m.on_usable = front_apply;
	if (a->m.ok)
		front_apply(&a->m);
	co.server = srv;
	char local[600] = "; no control socket";
	if ((control_fd >= 0 || metrics_fd >= 0) && control_start(&co, &ctl, &err) < 0)
		log_msg(LOG_WARNING, "control socket: %s; the local view is off", err.msg);
	else
		local_desc(control_fd, metrics_fd, local, sizeof(local));
	if (relay)
		relay_desc(a, relay, local + strlen(local), sizeof(local) - strlen(local));
	rchan.ctl = ctl;
	log_start(a, desc, local);
	log_manifest(a);
	/* Before the refresh thread starts, so that READY's own STATUS= never
	 * lands after, and hides, the first verdict's. */
	notify_ready(!a->m.ok		    ? "unhealthy: app-compose.json cannot be used"
		     : a->m.app.health_check ? "started; health not determined yet"
					     : "healthy: health_check is off");
	if (vfile_set_path(the_vfile, a->cfg.verdict_file) < 0) {
		log_msg(LOG_ERR, "out of memory");
		goto out;
	}
	if (refresh_start(&a->cfg, &a->m, cache, NULL, &view, the_vfile, &rf, &err) < 0) {
		log_msg(LOG_ERR, "%s", err.msg);
		goto out;
	}

	int sig = 0;
	for (;;) {
		if (sigwait(sigs, &sig) != 0)
			continue;
		if (sig == VFILE_SIGNAL)
			vfile_run(the_vfile);
		else if (sig == SIGHUP)
			reload(argc, argv, a, cache, &view, &rf);
		else
			break;
	}
	log_msg(LOG_INFO, "%s: stopping", strsignal(sig));
	notify_stopping();
	/* A sidecar is the app's only way to say it is going (issue 29); an
	 * agent with a listener is drained by its unit's ExecStop instead. */
	if (*a->cfg.verdict_file && fd < 0)
		stophold_run(&a->cfg, the_drain, the_vfile, sigs);
	rc = EXIT_SUCCESS;
out:
	refresh_stop(rf, NULL);
	the_server = NULL;
	rchan.ctl = NULL;
	control_stop(ctl);
	rpc_server_stop(srv);
	relay_stop(relay); /* after the gate: nothing hands it more */
	drain_free(the_drain);
	the_drain = NULL;
	/* Last of what asks it: nothing asks after the drain is gone. */
	vfile_free(the_vfile);
	the_vfile = NULL;
	cache_free(cache);
	opview_destroy(&view);
	/* The last line of a graceful stop: every thread joined, everything
	 * freed. A stop that hangs or crashes in the teardown never says it. */
	if (rc == EXIT_SUCCESS)
		log_msg(LOG_INFO, "stopped");
	return rc;
}

/* A fixed mmap threshold, before any thread starts. glibc's default
 * raises it to the size of the largest mapped block once one is freed
 * (up to 32 MiB): after the first refresh of a large project, the
 * container list's body and token array (MiBs at 1000 containers) and the
 * view's build buffers were carved out of the refresh thread's arena and
 * stayed resident there between refreshes. Fixed at glibc's own starting
 * value, blocks of 128 KiB and more are mappings of their own again, given
 * back when freed; fixing it also stops the trim threshold's own raise. */
static void malloc_tune(void)
{
	mallopt(M_MMAP_THRESHOLD, 128 * 1024);
	/* One arena for all threads. glibc gives each thread that allocates an
	 * arena of its own, and each keeps a few touched pages however little
	 * it holds: 84 kB over four threads in an idle sidecar, whose idle
	 * RssAnon must stay under 1 MiB. No thread allocates on a hot path
	 * that another contends for (Health answers are built by the refresh
	 * thread), so the shared lock costs nothing measurable. */
	mallopt(M_ARENA_MAX, 1);
}

int main(int argc, char *argv[])
{
	struct agent a = { 0 };
	struct errbuf err = { "" };

	log_init();
	if (argc > 1 && (!strcmp(argv[1], "status") || !strcmp(argv[1], "reload") ||
			 !strcmp(argv[1], "drain") || !strcmp(argv[1], "resume")))
		return ctl_main(argc - 1, argv + 1);
	if (load(argc, argv, &a, &err) < 0) {
		/* At err: under systemd this is the one line `journalctl -p err`
		 * shows for an agent that never started. */
		log_msg(LOG_ERR, "%s", err.msg);
		free_agent(&a);
		return EXIT_CONFIG;
	}
	int rc = EXIT_SUCCESS;
	if (a.cfg.help) {
		config_usage(stdout);
	} else if (a.cfg.version) {
		printf("dstack-healthd v%s (%s)\n", HEALTHD_VERSION, HEALTHD_REV);
	} else if (a.cfg.once) {
		rc = run_once(&a);
	} else {
		/* Blocked before any thread starts, so every thread inherits
		 * the mask and only sigwait() sees these. */
		sigset_t sigs;
		sigemptyset(&sigs);
		sigaddset(&sigs, SIGTERM);
		sigaddset(&sigs, SIGINT);
		sigaddset(&sigs, SIGHUP);
		sigaddset(&sigs, VFILE_SIGNAL);
		pthread_sigmask(SIG_BLOCK, &sigs, NULL);
		signal(SIGPIPE, SIG_IGN);
		malloc_tune();
		rc = serve(argc, argv, &a, &sigs);
	}
	free_agent(&a);
	return rc;
}
