/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/source.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/clock.h"
#include "base/log.h"
#include "runtime/container.h"
#include "runtime/docker.h"
#include "runtime/gap.h"
#include "runtime/nerdctl.h"
#include "runtime/probes.h"
#include "runtime/runtimefile.h"
#include "runtime/stops.h"
#include "runtime/selfid.h"
#include "statusfile/statusfile.h"

/* healthy:false, no entries, the manifest's error. */
static int manifest_verdict(const struct manifest *m, struct verdict *out)
{
	out->healthy = false;
	return verdict_set_failure(out, &m->err);
}

int source_initial_verdict(const struct manifest *m, struct verdict *out)
{
	const struct app_compose *app = &m->app;
	verdict_init(out);
	if (!m->ok)
		return manifest_verdict(m, out);
	/* Gating off: nothing to determine, so there is no boot window to
	 * cover (docs/design/verdict.md, gating off). */
	if (source_kind(app) == SOURCE_NONE) {
		out->healthy = true;
		return 0;
	}
	/* Registration happens long before the app is up: "not determined yet"
	 * must not read as a pass. */
	return verdict_add(out, "<health>", "health has not been determined yet");
}

enum source_kind source_kind(const struct app_compose *app)
{
	if (!app->health_check)
		return SOURCE_NONE;
	if (app->health_status_file)
		return SOURCE_STATUS_FILE;
	/* compose_parse refuses gating for any other runner without a status
	 * file: Docker is what is left. */
	return app->kind == RUNNER_NERDCTL_COMPOSE ? SOURCE_NERDCTL : SOURCE_DOCKER;
}

void source_docker_opts(const struct config *cfg, int cancel_fd, struct docker_opts *o)
{
	*o = (struct docker_opts){ .host = cfg->docker_host,
				   .tls_verify = cfg->docker_tls_verify,
				   .cert_path = cfg->docker_cert_path,
				   .cancel_fd = cancel_fd };
}

bool source_short_id(const char *s)
{
	size_t n = strspn(s, "0123456789abcdef");
	return n == 12 && s[n] == '\0';
}

/* The agent's own container, once found: its id and its project do not
 * change while the agent runs, so a refresh does not ask for it again (two
 * requests to the daemon less, and a flip is seen that much sooner). Kept
 * per Docker host, which a reload may change. */
static pthread_mutex_t self_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	char *docker_host, *id, *project;
	bool has_stop_timeout;
	int64_t stop_timeout_s;
	/* Its network mode and networks as found, for its probes' addresses
	 * when the list does not show it (another project's sidecar). */
	struct container net;
} self_known;

static bool self_recall(const char *docker_host, struct container *self)
{
	bool known = false;
	pthread_mutex_lock(&self_lock);
	if (self_known.id && strcmp(self_known.docker_host, docker_host) == 0) {
		self->id = strdup(self_known.id);
		self->project = self_known.project ? strdup(self_known.project) : NULL;
		/* Out of memory: asked for again, as if never found. */
		known = self->id && (self->project || !self_known.project) &&
			container_copy_networks(self, &self_known.net) == 0;
		if (!known)
			container_free(self);
	}
	pthread_mutex_unlock(&self_lock);
	return known;
}

/* True when it was not known before (the watcher and the refresh thread
 * may both look it up at the start: one of them tells). */
static bool self_remember(const char *docker_host, const struct container *self)
{
	char *h = strdup(docker_host), *id = strdup(self->id),
	     *p = self->project ? strdup(self->project) : NULL;
	struct container net = { 0 };
	bool known = false;
	if (!h || !id || (self->project && !p) || container_copy_networks(&net, self) < 0) {
		free(h);
		free(id);
		free(p);
		container_free_networks(&net);
		return false;
	}
	pthread_mutex_lock(&self_lock);
	known = self_known.id && strcmp(self_known.docker_host, h) == 0 &&
		strcmp(self_known.id, id) == 0;
	free(self_known.docker_host);
	free(self_known.id);
	free(self_known.project);
	self_known.docker_host = h;
	self_known.id = id;
	self_known.project = p;
	self_known.has_stop_timeout = self->has_stop_timeout;
	self_known.stop_timeout_s = self->stop_timeout_s;
	struct container old = self_known.net;
	self_known.net = net;
	pthread_mutex_unlock(&self_lock);
	container_free_networks(&old);
	return !known;
}

int source_self_stop_timeout(int64_t *seconds)
{
	pthread_mutex_lock(&self_lock);
	int r = !self_known.id ? -1 : self_known.has_stop_timeout;
	*seconds = self_known.stop_timeout_s;
	pthread_mutex_unlock(&self_lock);
	return r;
}

/* Who to ask Docker for, most trusted first: the id mountinfo names (the
 * container cannot rename it), then the hostname, which Docker sets to the
 * short id unless the service sets `hostname:` (docs/design/sidecar.md). The
 * hostname is asked for only when it is not the same id. */
struct self_keys {
	char id[SELFID_LEN + 1];
	enum selfid_source src;
	char host[HOST_NAME_MAX + 1];
	bool by_host;
};

static void self_keys(struct self_keys *k)
{
	k->src = selfid_read(k->id);
	k->by_host = gethostname(k->host, sizeof(k->host)) == 0 && source_short_id(k->host) &&
		     (!k->src || strncmp(k->id, k->host, strlen(k->host)) != 0);
}

/* The agent's own container, when it runs in one of this Docker's (a
 * sidecar, issue 21), asked for by each key in turn. 1 found, 0 not in a
 * container of this daemon. */
static int find_self(const struct config *cfg, int64_t deadline, int cancel_fd,
		     struct container *self, struct errbuf *err)
{
	const char *dh = cfg->docker_host ? cfg->docker_host : "";
	if (self_recall(dh, self))
		return 1;
	struct self_keys k;
	self_keys(&k);
	struct docker_opts o;
	source_docker_opts(cfg, cancel_fd, &o);
	int r = 0;
	const char *how = "";
	for (int i = 0; r == 0 && i < 2; i++) {
		const char *key = i == 0 ? (k.src ? k.id : NULL) : (k.by_host ? k.host : NULL);
		if (!key)
			continue;
		how = i == 0 ? selfid_source_name(k.src) : selfid_source_name(SELFID_NONE);
		log_msg(LOG_DEBUG, "asking Docker for container %.12s (from %s), the agent's own "
				   "if it is one", key, how);
		r = docker_find_self(&o, key, deadline, self, err);
	}
	errbuf_tag(err, ERR_KIND_RUNTIME_ANSWER, r < 0 ? r : 0);
	if (r == 1 && self->id && self_remember(dh, self))
		log_msg(LOG_INFO, "running in container %.12s of Compose project %s (found by %s): "
				  "it is never judged",
			self->id, self->project ? self->project : "(none)", how);
	return r;
}

int source_project(const struct config *cfg, int64_t deadline, int cancel_fd,
		   struct runtime_info *ri, struct container *self, struct errbuf *err)
{
	int found = find_self(cfg, deadline, cancel_fd, self, err);
	if (found < 0)
		return found;
	/* The runtime file is written when Compose starts, after the agent is
	 * up: it is read afresh on every refresh. */
	int r = runtimefile_read(cfg->runtime_file, ri, err);
	if (r != -ENOENT || !found || !self->project)
		return r;
	/* A sidecar without it mounted judges the project it was started in. */
	ri->project = strdup(self->project);
	return ri->project ? 1 : errbuf_set(err, ENOMEM, "out of memory");
}

static bool kill_noted(void *stops, const char *id)
{
	return stops_has(stops, id);
}

/* The app's current start, for a status file (issue 29): the runtime file's
 * mtime, which the guest rewrites each time it starts Compose (runtimefile.h
 * cites where); with none (runner bash writes none, or it cannot be read),
 * the boot, before which no app of this boot started. Only a start the agent
 * can confirm is used: nothing is guessed. */
static int64_t app_start(const struct config *cfg, const char **from)
{
	int64_t mtime = 0, boot = clock_boot_real_s();
	if (runtimefile_mtime(cfg->runtime_file, &mtime) == 0 && mtime > boot) {
		*from = "runtime file";
		return mtime;
	}
	*from = "boot";
	return boot;
}

/* Where the probes leave from (probe_prepare): with Docker, the agent's own
 * container when it runs in one, as the list shows it now (its networks may
 * have changed since it was found), else as it was found. nerdctl names its
 * networks after interfaces (unknown-eth0), which says nothing shared: the
 * machine's stack is assumed, as for an agent on the host. */
static const struct container *probe_origin(const struct app_compose *app,
					    const struct container_list *l,
					    const struct container *self)
{
	if (source_kind(app) != SOURCE_DOCKER || !self->id)
		return NULL;
	for (size_t i = 0; i < l->n; i++)
		if (l->v[i].agent_self && l->v[i].network_mode)
			return &l->v[i];
	return self;
}

static int judge_containers(const struct config *cfg, const struct app_compose *app,
			    const struct runtime_info *ri, const struct container *self,
			    int64_t deadline,
			    int cancel_fd, struct prober *probes, struct source_memory *mem,
			    struct verdict *out,
			    struct source_detail *d, struct errbuf *err)
{
	struct container_list l = { 0 };
	struct stops *stops = mem && source_kind(app) == SOURCE_DOCKER ? mem->stops : NULL;
	uint64_t mark = stops ? stops_mark(stops) : 0;
	int r;
	if (source_kind(app) == SOURCE_NERDCTL) {
		struct nerdctl_opts o = { .path = cfg->nerdctl,
					  .address = cfg->containerd_address,
					  .cancel_fd = cancel_fd };
		r = nerdctl_list(&o, ri, deadline, &l, err);
	} else {
		struct docker_opts o;
		source_docker_opts(cfg, cancel_fd, &o);
		if (stops) {
			o.must_inspect = kill_noted;
			o.must_inspect_arg = stops;
		}
		r = docker_list(&o, ri->project, self->id, deadline, &l, err);
	}
	/* What the runtime clients leave untagged is their parsing of an
	 * answer. */
	errbuf_tag(err, ERR_KIND_RUNTIME_ANSWER, r);
	for (size_t i = 0; r >= 0 && self->id && i < l.n; i++)
		l.v[i].agent_self = l.v[i].id && strcmp(l.v[i].id, self->id) == 0;
	if (r >= 0 && stops)
		stops_apply(stops, &l, mark, clock_real_ms() * 1000000);
	/* The probes' latest records (issue 27), read, never waited for: the
	 * prober runs on its own clock and kicks a refresh when one changes. */
	if (r >= 0 && (r = probes_sync(probes, &l, probe_origin(app, &l, self),
					     source_kind(app) == SOURCE_DOCKER &&
						     !docker_host_is_local(cfg->docker_host))) < 0)
		errbuf_set(err, ENOMEM, "out of memory");
	if (r >= 0)
		r = containers_judge(&l, out);
	if (r >= 0 && mem && mem->gap)
		r = gap_judge(mem->gap, ri->project, &l, clock_mono_ms(), cfg->service_gap_ms, out);
	if (r >= 0 && d) {
		d->containers = l;
		d->have_containers = true;
		return r;
	}
	container_list_free(&l);
	return r;
}

static bool str_same(const char *a, const char *b)
{
	return strcmp(a ? a : "", b ? b : "") == 0;
}

bool source_same(const struct config *a, const struct manifest *ma,
		 const struct config *b, const struct manifest *mb)
{
	if (!ma->ok || !mb->ok)
		return false;
	const struct app_compose *x = &ma->app, *y = &mb->app;
	enum source_kind k = source_kind(x);
	if (k != source_kind(y))
		return false;
	if (k == SOURCE_NONE)
		return true;
	if (k == SOURCE_STATUS_FILE)
		return strcmp(x->health_status_file, y->health_status_file) == 0;
	if (!str_same(a->runtime_file, b->runtime_file))
		return false;
	if (k == SOURCE_NERDCTL)
		return str_same(a->nerdctl, b->nerdctl) &&
		       str_same(a->containerd_address, b->containerd_address);
	return str_same(a->docker_host, b->docker_host) &&
	       a->docker_tls_verify == b->docker_tls_verify &&
	       str_same(a->docker_cert_path, b->docker_cert_path);
}

int source_refresh(const struct config *cfg, struct manifest *m, int64_t deadline,
		   int cancel_fd, struct verdict *out, struct errbuf *err)
{
	return source_refresh_detail(cfg, m, deadline, cancel_fd, out, NULL, err);
}

void source_detail_free(struct source_detail *d)
{
	if (d)
		container_list_free(&d->containers);
}

int source_refresh_detail(const struct config *cfg, struct manifest *m, int64_t deadline,
			  int cancel_fd, struct verdict *out, struct source_detail *d,
			  struct errbuf *err)
{
	return source_refresh_probed(cfg, m, deadline, cancel_fd, NULL, out, d, err);
}

int source_refresh_probed(const struct config *cfg, struct manifest *m, int64_t deadline,
			  int cancel_fd, struct prober *probes, struct verdict *out,
			  struct source_detail *d, struct errbuf *err)
{
	return source_refresh_mem(cfg, m, deadline, cancel_fd, probes, NULL, out, d, err);
}

int source_refresh_mem(const struct config *cfg, struct manifest *m, int64_t deadline,
		       int cancel_fd, struct prober *probes, struct source_memory *mem,
		       struct verdict *out, struct source_detail *d, struct errbuf *err)
{
	struct statusfile_info sfi;
	if (d)
		memset(d, 0, sizeof(*d));
	if (!manifest_try(m, cfg->compose_file))
		return manifest_verdict(m, out);
	const struct app_compose *app = &m->app;
	enum source_kind k = source_kind(app);
	if (k == SOURCE_NONE) {
		out->healthy = true;
		return 0;
	}
	if (k == SOURCE_STATUS_FILE) {
		/* Never a failed refresh: whatever is at the path is judged. */
		const char *from = NULL;
		int64_t start = app_start(cfg, &from);
		int r = statusfile_judge_since(app->health_status_file, time(NULL), start, out,
					       &sfi);
		sfi.start = start;
		snprintf(sfi.start_from, sizeof(sfi.start_from), "%s", from);
		if (d) {
			d->statusfile = sfi;
			d->have_statusfile = true;
		}
		return r;
	}
	_cleanup_(container_free) struct container self = { 0 };
	struct runtime_info ri = { 0 };
	int r = k == SOURCE_DOCKER ? source_project(cfg, deadline, cancel_fd, &ri, &self, err)
				   : runtimefile_read(cfg->runtime_file, &ri, err);
	/* nerdctl: the id mountinfo names is all it takes to leave the agent's
	 * own container unjudged; the project is the runtime file's. */
	char own[SELFID_LEN + 1];
	if (k == SOURCE_NERDCTL && r >= 0 && selfid_read(own) != SELFID_NONE &&
	    !(self.id = strdup(own)))
		r = errbuf_set(err, ENOMEM, "out of memory");
	if (r == -ENOENT) {
		out->healthy = false;
		return verdict_add(out, COMPOSE_ENTRY, "no container has been created yet");
	}
	if (r < 0)
		return r;
	if (d) {
		snprintf(d->project, sizeof(d->project), "%s", ri.project ? ri.project : "");
		snprintf(d->nerdctl_namespace, sizeof(d->nerdctl_namespace), "%s",
			 ri.namespace ? ri.namespace : "");
	}
	r = judge_containers(cfg, app, &ri, &self, deadline, cancel_fd, probes, mem, out, d,
			     err);
	if (d && probes) {
		prober_counts(probes, d->probe_counts);
		d->have_probes = true;
	}
	runtime_info_free(&ri);
	return r;
}
