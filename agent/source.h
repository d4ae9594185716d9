/* SPDX-License-Identifier: Apache-2.0 */
/* One refresh: asks the source the app chose (nothing, its status file, or its
 * Compose containers through Docker or nerdctl) and judges the answer. */
#ifndef HEALTHD_SOURCE_H
#define HEALTHD_SOURCE_H

#include <stdbool.h>
#include <stdint.h>

#include "agent/compose.h"
#include "agent/config.h"
#include "base/err.h"
#include "base/verdict.h"
#include "probe/probe.h"
#include "runtime/container.h"
#include "runtime/docker.h"
#include "statusfile/statusfile.h"

/* Where a usable app-compose.json says its health comes from. Decided here
 * only: the refresh, the events watcher, the start-up checks, the start line
 * and the operator's view all ask this. */
enum source_kind {
	SOURCE_NONE,        /* health_check is off: nothing to judge */
	SOURCE_STATUS_FILE, /* requirements.health_status_file */
	SOURCE_DOCKER,      /* the Compose containers, through the Docker Engine API */
	SOURCE_NERDCTL,     /* the Compose containers, through nerdctl */
};
enum source_kind source_kind(const struct app_compose *app);

/* Pure: s is a short container id as Docker makes a container's hostname:
 * exactly 12 lower-case hex digits. */
bool source_short_id(const char *s);

struct runtime_info;
/* The Compose project a Docker source judges, into ri (free with
 * runtime_info_free): the runtime file's; else, when the agent runs in a
 * container of this Docker (a sidecar, issue 21), its own container's
 * com.docker.compose.project label. 0 from the runtime file, 1 from the
 * label, -ENOENT when neither names one. self
 * (zeroed; free with container_free) gets the agent's own container, when
 * found, so that it is never judged. */
int source_project(const struct config *cfg, int64_t deadline, int cancel_fd,
		   struct runtime_info *ri, struct container *self, struct errbuf *err);

/* The stop timeout of the agent's own container, once a refresh has found
 * it (a sidecar): 1 and *seconds when Compose set one (stop_grace_period),
 * 0 when none is set (the daemon's default applies), -1 when the agent has
 * not found its own container. Any thread. */
int source_self_stop_timeout(int64_t *seconds);

/* The Docker Engine API endpoint the configuration names, with cancel_fd. */
void source_docker_opts(const struct config *cfg, int cancel_fd, struct docker_opts *o);

/* Fills out (initialised by the caller) with a verdict and returns 0, or
 * returns a negative errno when the source could not be asked (runtime
 * unreachable, runtime file unreadable): err says what failed, and is tagged
 * with the kind of failure (base/err.h) that callers are told. deadline is
 * CLOCK_MONOTONIC ms; when cancel_fd (-1 for none) becomes readable, a query
 * in progress gives up at once with -ECANCELED. An app-compose.json that is
 * not usable is read again first (manifest_try); while it stays unusable the
 * verdict is healthy:false with its error. */
int source_refresh(const struct config *cfg, struct manifest *m, int64_t deadline,
		   int cancel_fd, struct verdict *out, struct errbuf *err);

struct stops;
struct gap;
/* What the refresh loop keeps between its refreshes and hears from the events
 * watcher (issue 29); owned by the refresher. */
struct source_memory {
	/* The kills Docker's events reported (shared with the watcher, which
	 * notes them); NULL: none (--once, a source that is not Docker). */
	struct stops *stops;
	/* The Compose services seen, for the gap of a recreate (the loop
	 * thread's alone; it lives in the refresh state); NULL: none. */
	struct gap *gap;
};

/* What a refresh saw, beyond the verdict, for the operator's view. */
struct source_detail {
	struct container_list containers; /* the project's, judged or not */
	bool have_containers;
	char project[256];
	char nerdctl_namespace[256];
	struct statusfile_info statusfile;
	bool have_statusfile;
	/* The agent's probes (issue 27): finished probes by result. */
	uint64_t probe_counts[PROBE_N_RESULTS];
	bool have_probes;
};
/* source_refresh, also filling d (zeroed first; free with
 * source_detail_free) when not NULL. */
int source_refresh_detail(const struct config *cfg, struct manifest *m, int64_t deadline,
			  int cancel_fd, struct verdict *out, struct source_detail *d,
			  struct errbuf *err);
void source_detail_free(struct source_detail *d);
/* source_refresh_detail with the agent's probes (issue 27): their latest
 * records are judged with the containers; NULL judges every probe as not
 * run yet (starting), as a one-shot refresh must. */
struct prober;
int source_refresh_probed(const struct config *cfg, struct manifest *m, int64_t deadline,
			  int cancel_fd, struct prober *probes, struct verdict *out,
			  struct source_detail *d, struct errbuf *err);
/* source_refresh_probed, with what the loop remembers (mem, or NULL). */
int source_refresh_mem(const struct config *cfg, struct manifest *m, int64_t deadline,
		       int cancel_fd, struct prober *probes, struct source_memory *mem,
		       struct verdict *out, struct source_detail *d, struct errbuf *err);

/* The verdict served before the first refresh completes (or, with an unusable
 * app-compose.json, its error). -ENOMEM. */
int source_initial_verdict(const struct manifest *m, struct verdict *out);

/* True when a and b ask the same source the same way (both manifests usable):
 * a reload between them keeps the refresh state (the failure count). */
bool source_same(const struct config *a, const struct manifest *ma,
		 const struct config *b, const struct manifest *mb);

#endif
