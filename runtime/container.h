/* SPDX-License-Identifier: Apache-2.0 */
/* What a container runtime says about one container of the app's Compose
 * project, in a form both backends (Docker, nerdctl) fill and the pure judge
 * reads. */
#ifndef HEALTHD_CONTAINER_H
#define HEALTHD_CONTAINER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/verdict.h"
#include "probe/probe.h"

#define COMPOSE_ENTRY "<compose>"
#define COMPOSE_PROJECT_LABEL "com.docker.compose.project"
#define COMPOSE_ONEOFF_LABEL "com.docker.compose.oneoff"
#define COMPOSE_SERVICE_LABEL "com.docker.compose.service"
#define NERDCTL_STOPPED_LABEL "containerd.io/restart.explicitly-stopped"

/* One entry of NetworkSettings.Networks: the network's name (its key), its
 * NetworkID ("" when the runtime prints none: nerdctl), and the IPv4 address
 * on it when the runtime printed a valid one ("" else). */
struct container_net {
	char *name;
	char *net_id;
	char ipv4[16];
};

struct container {
	char *id;
	char *name;   /* without Docker's leading slash */
	char *state;  /* State.Status: "running", "exited", "paused", ... */
	bool running; /* State.Running (Docker also sets it while paused) */
	bool paused;  /* State.Paused */
	char *health; /* State.Health.Status; NULL when State.Health is absent */
	/* Nanoseconds since the epoch; 0 when unknown. Used for the rule that a
	 * health result older than the current start is no evidence. */
	int64_t started_at_ns;    /* State.StartedAt */
	int64_t health_log_end_ns; /* End of the newest State.Health.Log entry */
	bool oneoff;               /* com.docker.compose.oneoff=True */
	/* The agent's own container, when it runs as a sidecar in the project
	 * it judges (issue 21): never judged, not counted as created. */
	bool agent_self;
	/* com.docker.compose.project as inspect printed it (NULL when absent);
	 * nerdctl's list checks it again, in case --filter was ignored. */
	char *project;
	/* Config.Healthcheck.Test names a probe (not ["NONE"]): the runtime was
	 * told to check this container even if no check has run yet (Docker
	 * sets State.Health only once a container starts; nerdctl only after
	 * the first probe). */
	bool healthcheck_configured;
	/* For the operator's view only (never judged, never public): the
	 * newest State.Health.Log entry and State.Health.FailingStreak. */
	char *service; /* com.docker.compose.service; NULL when unlabelled */
	bool has_probe;
	int64_t probe_exit_code;
	char *probe_output; /* as the runtime kept it; NULL when none */
	int64_t failing_streak;
	/* Config.StopTimeout (Compose's stop_grace_period), for the agent's own
	 * container: the stop's grace before SIGKILL; unset means the
	 * daemon's default, 10 s. */
	bool has_stop_timeout;
	int64_t stop_timeout_s;
	/* Probes run by the agent (issue 27): the dstack.healthd.* labels as
	 * the runtime printed them, the container's own addresses, and the
	 * probe itself (NULL without a probe label), which the refresh fills
	 * from the prober before judging. */
	struct probe_labels probe_labels;
	char *optional_label; /* dstack.healthd.optional; NULL when absent */
	char *network_mode;   /* HostConfig.NetworkMode (Docker only) */
	struct container_net *nets; /* its networks, sorted by name */
	size_t n_nets;
	char ipv4_primary[16]; /* NetworkSettings.IPAddress when a valid IPv4 ("" else) */
	struct container_probe *probe;
	/* Being stopped (issue 29): the runtime was told to stop it and it
	 * still runs. Docker: a kill with its stop signal or SIGKILL on the
	 * event stream (runtime/stops.h); nerdctl: `nerdctl stop` and `kill`
	 * label it before they signal (explicitly_stopped). */
	bool stopping;
	char *stop_signal; /* Config.StopSignal; NULL when absent (SIGTERM) */
	/* Config.Labels["containerd.io/restart.explicitly-stopped"] is "true". */
	bool explicitly_stopped;
};

struct container_list {
	struct container *v;
	size_t n, cap;
	int api_version; /* Docker: the version spoken, major * 100 + minor */
};

/* Appends a zeroed container and returns it, or NULL on ENOMEM. */
struct container *container_list_add(struct container_list *l);
void container_list_free(struct container_list *l);
void container_free(struct container *c);
/* dst's network_mode and networks become copies of src's. -ENOMEM (dst's
 * are then none). */
int container_copy_networks(struct container *dst, const struct container *src);
void container_free_networks(struct container *c);

/* Pure: the verdict for the containers of one project (docs/design/verdict.md,
 * "Containers"). out must be initialised. -ENOMEM. */
int containers_judge(const struct container_list *l, struct verdict *out);
/* Pure: why the judge skips c ("one-off", "the agent itself", "no
 * healthcheck"), or NULL when it
 * is judged. */
const char *container_skip_reason(const struct container *c);

/* Parses an RFC 3339 timestamp as Docker and nerdctl print them
 * ("2026-11-29T20:16:03.686068582Z", offsets allowed) into ns since the epoch.
 * "0001-01-01T00:00:00Z" (Go's zero time) gives 0. -EINVAL. */
int container_parse_time(const char *s, int64_t *ns);

#endif
