/* SPDX-License-Identifier: Apache-2.0 */
/* The verdict for the containers of the app's Compose project (docs/design/verdict.md,
 * "Containers"). Pure: facts in, verdict out. */
#include "runtime/container.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "base/err.h"

static bool has_health_result(const struct container *c)
{
	/* Docker drops State.Health for a disabled healthcheck; nerdctl and
	 * older engines may say "" or "none". None of those is evidence. */
	return c->health && c->health[0] && strcmp(c->health, "none") != 0;
}

/* Judged from what the runtime did (docs/design/verdict.md): a health state it keeps, or a
 * probe in the container's merged config that has not run yet (a container
 * that never started, or nerdctl before the first probe). */
static bool declares_healthcheck(const struct container *c)
{
	return has_health_result(c) || c->healthcheck_configured;
}

/* Docker keeps Running true while a container is paused or restarting; only
 * the state "running" is serving. */
static bool is_up(const struct container *c)
{
	return c->running && !c->paused &&
	       (!c->state || !c->state[0] || strcmp(c->state, "running") == 0);
}

/* A health result recorded before the current start says nothing about this
 * run: nerdctl keeps the last result across a restart or a reboot, where
 * Docker resets it to starting. */
static bool health_predates_start(const struct container *c)
{
	return c->health_log_end_ns > 0 && c->started_at_ns > 0 &&
	       c->health_log_end_ns < c->started_at_ns;
}

static void shown_name(char *buf, size_t n, const struct container *c)
{
	const char *name = c->name;
	if (name && name[0] == '/')
		name++;
	if (!name || !name[0])
		name = c->id && c->id[0] ? c->id : "<unnamed container>";
	err_clean(buf, n, name, ERR_SHOWN_BYTES);
}

/* The agent's own probe (issue 27): an unusable label is an entry, never
 * ignored; a probe is judged as Docker judges a healthcheck, so only
 * healthy passes (docs/design/probes.md). */
static int judge_probe(const struct container *c, const char *name, struct verdict *out)
{
	const struct container_probe *p = c->probe;
	char text[200];
	/* Labels never prepared (probe_prepare) are a probe never run. */
	if (!p)
		return verdict_add(out, name, "probe starting (no probe has run yet)");
	if (!p->usable)
		return verdict_add(out, name, "%s", p->why);
	probe_state_text(&p->state, text, sizeof(text));
	if (p->probed && p->state.status == PROBE_HEALTHY)
		return 0;
	if (!p->probed)
		snprintf(text, sizeof(text), "probe starting (no probe has run yet)");
	return verdict_add(out, name, "%s", text);
}

/* dstack.healthd.optional: "true" leaves the container out of the verdict;
 * anything but true or false is an entry. */
static bool optional_bad(const struct container *c)
{
	return c->optional_label && strcasecmp(c->optional_label, "true") != 0 &&
	       strcasecmp(c->optional_label, "false") != 0;
}

static bool optional(const struct container *c)
{
	return c->optional_label && strcasecmp(c->optional_label, "true") == 0;
}

/* Declares something to judge: a healthcheck, a probe label, or an
 * optional label that cannot be read. */
static bool declares_check(const struct container *c)
{
	return declares_healthcheck(c) || c->probe || c->probe_labels.probe || optional_bad(c);
}

/* Adds the entry for one container that declares a healthcheck, if it fails. */
static int judge_one(const struct container *c, struct verdict *out)
{
	char name[ERR_SHOWN_BYTES + 1], health[ERR_SHOWN_BYTES + 1], state[ERR_SHOWN_BYTES + 1];

	shown_name(name, sizeof(name), c);
	err_clean(health, sizeof(health), has_health_result(c) ? c->health : "none yet",
		  ERR_SHOWN_BYTES);
	/* Docker reports Running:true while paused or restarting; nerdctl keeps
	 * "healthy" after a container stops. Run state is checked before
	 * health. */
	if (!is_up(c)) {
		const char *s = c->state && c->state[0] ? c->state : NULL;
		if (!s || (c->paused && strcmp(s, "running") == 0))
			s = c->paused ? "paused" : "not running";
		err_clean(state, sizeof(state), s, ERR_SHOWN_BYTES);
		return verdict_add(out, name, "%s (last health check: %s)", state, health);
	}
	/* Told to stop: Docker keeps the last health for the whole grace
	 * period, and the app may already refuse work (issue 29). */
	if (c->stopping)
		return verdict_add(out, name, "stopping (last health check: %s)", health);
	if (optional_bad(c))
		return verdict_add(out, name, "label " OPTIONAL_LABEL ": must be true or false");
	/* A container with a Docker healthcheck and a probe must pass both. */
	if (!declares_healthcheck(c))
		return c->probe || c->probe_labels.probe ? judge_probe(c, name, out) : 0;
	if (!has_health_result(c))
		return verdict_add(out, name, "starting (no health check has run yet)");
	if (health_predates_start(c))
		return verdict_add(out, name,
				   "starting (last health check predates the current start)");
	if (strcmp(c->health, "healthy") != 0)
		return verdict_add(out, name, "%s", health);
	return c->probe || c->probe_labels.probe ? judge_probe(c, name, out) : 0;
}

/* Health gating is on but nothing can produce an answer: a pass would leave
 * the feature switched on and doing nothing (docs/design/verdict.md). */
static int no_healthcheck(size_t created, struct verdict *out)
{
	static const char fix[] =
		"so nothing can be judged; add a healthcheck or a " PROBE_LABEL
		" label to at least one service (healthcheck: {disable: true} does "
		"not count)";
	if (created == 1)
		return verdict_add(out, COMPOSE_ENTRY,
				   "the only container declares no healthcheck, %s", fix);
	return verdict_add(out, COMPOSE_ENTRY,
			   "none of the %zu containers declares a healthcheck, %s",
			   created, fix);
}

int containers_judge(const struct container_list *l, struct verdict *out)
{
	size_t created = 0, judged = 0;
	int r;

	for (size_t i = 0; i < l->n; i++) {
		const struct container *c = &l->v[i];
		/* An exited `compose run` container must not hold the app out of
		 * rotation forever (this agent's choice, docs/design/verdict.md). */
		if (c->oneoff)
			continue;
		/* A sidecar judging itself would hold the app out when it
		 * starts and vouch for it when it stops. */
		if (c->agent_self)
			continue;
		created++;
		if (!declares_check(c) || optional(c))
			continue;
		judged++;
		if ((r = judge_one(c, out)) < 0)
			return r;
	}
	if (created == 0)
		r = verdict_add(out, COMPOSE_ENTRY, "no container has been created yet");
	else if (judged == 0)
		r = no_healthcheck(created, out);
	else
		r = 0;
	if (r < 0)
		return r;
	verdict_sort(out);
	out->healthy = out->n_entries == 0;
	return 0;
}

const char *container_skip_reason(const struct container *c)
{
	if (c->oneoff)
		return "one-off (compose run)";
	if (c->agent_self)
		return "the agent itself";
	if (optional(c))
		return "optional (" OPTIONAL_LABEL ")";
	if (!declares_check(c))
		return "no healthcheck";
	return NULL;
}
