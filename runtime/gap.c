/* SPDX-License-Identifier: Apache-2.0 */
/* Services in the gap of a recreate (runtime/gap.h; docs/design/verdict.md,
 * "Containers"). */
#include "runtime/gap.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/grow.h"

static void forget_all(struct gap *g)
{
	for (size_t i = 0; i < g->n; i++)
		free(g->v[i].name);
	g->n = 0;
}

void gap_free(struct gap *g)
{
	if (!g)
		return;
	forget_all(g);
	free(g->v);
	free(g->project);
	memset(g, 0, sizeof(*g));
}

/* The judge's own rule for which containers count (container_skip_reason),
 * with a service to count them for. */
static const char *judged_service(const struct container *c)
{
	return c->service && c->service[0] && !container_skip_reason(c) ? c->service : NULL;
}

/* Whether a container of service is there, judged or not (issue 34): one
 * that became optional or dropped its healthcheck is a change the app made
 * on purpose, not a gap; the operator's view says why it is not judged. A
 * one-off (`compose run` of it) and the agent's own container are not the
 * service. */
static bool present(const struct container_list *l, const char *service)
{
	for (size_t i = 0; i < l->n; i++) {
		const struct container *c = &l->v[i];
		if (!c->oneoff && !c->agent_self && c->service && strcmp(c->service, service) == 0)
			return true;
	}
	return false;
}

static bool judged_in(const struct container_list *l, const char *service)
{
	for (size_t i = 0; i < l->n; i++) {
		const char *s = judged_service(&l->v[i]);
		if (s && strcmp(s, service) == 0)
			return true;
	}
	return false;
}

static struct gap_service *find(struct gap *g, const char *name)
{
	for (size_t i = 0; i < g->n; i++)
		if (strcmp(g->v[i].name, name) == 0)
			return &g->v[i];
	return NULL;
}

static int remember(struct gap *g, const char *name, int64_t now_ms)
{
	struct gap_service *s = find(g, name);
	if (s) {
		s->seen_ms = now_ms;
		return 0;
	}
	if (g->n >= GAP_MAX_SERVICES)
		return 0;
	struct gap_service *v = grow(g->v, &g->cap, g->n + 1, sizeof(*v), 8, GAP_MAX_SERVICES);
	char *copy = strdup(name);
	if (!v || !copy) {
		free(copy);
		return -ENOMEM;
	}
	g->v = v;
	g->v[g->n++] = (struct gap_service){ .name = copy, .seen_ms = now_ms };
	return 0;
}

/* Memory belongs to one project: another one's services are no evidence. */
static int same_project(struct gap *g, const char *project)
{
	if (g->project && project && strcmp(g->project, project) == 0)
		return 0;
	forget_all(g);
	free(g->project);
	g->project = project ? strdup(project) : NULL;
	return !project || g->project ? 0 : -ENOMEM;
}

static int gap_entry(const struct gap_service *s, int64_t max_ms, struct verdict *out)
{
	char name[ERR_SHOWN_BYTES + 1], entry[ERR_SHOWN_BYTES + 16];
	err_clean(name, sizeof(name), s->name, ERR_SHOWN_BYTES);
	snprintf(entry, sizeof(entry), GAP_ENTRY_PREFIX "%s>", name);
	return verdict_add(out, entry,
			   "no container (being recreated, or removed: unhealthy for at most "
			   "%lld s)",
			   (long long)((max_ms + 999) / 1000));
}

int gap_judge(struct gap *g, const char *project, const struct container_list *l,
	      int64_t now_ms, int64_t max_ms, struct verdict *out)
{
	int r = same_project(g, project);
	if (r < 0 || max_ms <= 0) {
		forget_all(g);
		return r;
	}
	for (size_t i = 0; r == 0 && i < l->n; i++) {
		const char *s = judged_service(&l->v[i]);
		if (s)
			r = remember(g, s, now_ms);
	}
	bool added = false;
	for (size_t i = 0; r == 0 && i < g->n;) {
		struct gap_service *s = &g->v[i];
		if (present(l, s->name) && judged_in(l, s->name)) {
			i++;
		} else if (present(l, s->name) || now_ms - s->seen_ms > max_ms) {
			/* Not judged any more, or gone past the bound: forgotten. */
			free(s->name);
			*s = g->v[--g->n];
		} else {
			r = gap_entry(s, max_ms, out);
			added = true;
			i++;
		}
	}
	if (r < 0)
		return r;
	if (added) {
		out->healthy = false;
		verdict_sort(out);
	}
	return 0;
}
