#include "agent/source.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "runtime/container.h"
#include "runtime/docker.h"
#include "runtime/nerdctl.h"
#include "runtime/runtimefile.h"
#include "statusfile/statusfile.h"

int source_initial_verdict(const struct app_compose *app, struct verdict *out)
{
	verdict_init(out);
	/* Gating off: nothing to determine, so there is no boot window to
	 * cover (spec: "An app that never set health_check ..."). */
	if (!app->health_check) {
		out->healthy = true;
		return 0;
	}
	/* Registration happens long before the app is up: "not determined yet"
	 * must not read as a pass. */
	return verdict_add(out, "<health>", "health has not been determined yet");
}

static int judge_containers(const struct config *cfg, const struct app_compose *app,
			    const struct runtime_info *ri, int64_t deadline, int cancel_fd,
			    struct verdict *out, struct source_detail *d, struct errbuf *err)
{
	struct container_list l = { 0 };
	int r;
	if (app->kind == RUNNER_NERDCTL_COMPOSE) {
		struct nerdctl_opts o = { .path = cfg->nerdctl,
					  .address = cfg->containerd_address,
					  .cancel_fd = cancel_fd };
		r = nerdctl_list(&o, ri, deadline, &l, err);
	} else {
		struct docker_opts o = { .host = cfg->docker_host,
					 .tls_verify = cfg->docker_tls_verify,
					 .cert_path = cfg->docker_cert_path,
					 .cancel_fd = cancel_fd };
		r = docker_list(&o, ri->project, deadline, &l, err);
	}
	if (r >= 0)
		r = containers_judge(&l, out);
	if (r >= 0 && d) {
		d->containers = l;
		d->have_containers = true;
		return r;
	}
	container_list_free(&l);
	return r;
}

int source_refresh(const struct config *cfg, const struct app_compose *app,
		   int64_t deadline, int cancel_fd, struct verdict *out,
		   struct errbuf *err)
{
	return source_refresh_detail(cfg, app, deadline, cancel_fd, out, NULL, err);
}

void source_detail_free(struct source_detail *d)
{
	if (d)
		container_list_free(&d->containers);
}

int source_refresh_detail(const struct config *cfg, const struct app_compose *app,
			  int64_t deadline, int cancel_fd, struct verdict *out,
			  struct source_detail *d, struct errbuf *err)
{
	struct statusfile_info sfi;
	if (d)
		memset(d, 0, sizeof(*d));
	if (!app->health_check) {
		out->healthy = true;
		return 0;
	}
	if (app->health_status_file) {
		int r = statusfile_judge_info(app->health_status_file, time(NULL), out, &sfi, err);
		if (d) {
			d->statusfile = sfi;
			d->have_statusfile = true;
		}
		return r;
	}
	/* The runtime file is written when Compose starts, after the agent is
	 * up: it is read afresh on every refresh. */
	struct runtime_info ri = { 0 };
	int r = runtimefile_read(cfg->runtime_file, &ri, err);
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
	r = judge_containers(cfg, app, &ri, deadline, cancel_fd, out, d, err);
	runtime_info_free(&ri);
	return r;
}
