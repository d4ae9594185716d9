/* SPDX-License-Identifier: Apache-2.0 */
/* Table tests for runtime/gap.c: refreshes in a row, each a list of
 * containers at a time, judged by containers_judge then gap_judge (issue 29:
 * a Compose service that had a container and has none now stays unhealthy
 * until one is back, for at most the bound). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/gap.h"
#include "tests/lib/entries.h"
#include "tests/lib/tap.h"

#define MAX_MS 60000
#define GAP(s) "<service:" s ">=no container (being recreated, or removed: unhealthy for at " \
	       "most 60 s)"

struct step {
	long long t;
	const char *project;
	/* Containers, space-separated NAME/SERVICE/KIND; SERVICE "-" for no
	 * label. KIND: ok (running healthy), st (running starting), ex (exited,
	 * unhealthy), nohc (running, no healthcheck), opt (running healthy,
	 * dstack.healthd.optional true), run (a one-off), self (the agent's
	 * own). */
	const char *containers;
	const char *want; /* entries "name=status|..." sorted; "" healthy */
};

static const struct gcase {
	const char *what;
	struct step steps[6];
} cases[] = {
	{ "a service removed: held unhealthy while another vouches",
	  { { 0, "p", "web/web/ok api/api/ok", "" },
	    { 1000, "p", "api/api/ok", GAP("web") } } },
	{ "a recreate's gap, then the new container judged on its own",
	  { { 0, "p", "web/web/ok api/api/ok", "" },
	    { 1000, "p", "api/api/ok", GAP("web") },
	    { 2000, "p", "web2/web/st api/api/ok", "web2=starting" },
	    { 3000, "p", "web2/web/ok api/api/ok", "" } } },
	{ "removed for good: held exactly the bound, then forgotten",
	  { { 0, "p", "web/web/ok api/api/ok", "" },
	    { 1000, "p", "api/api/ok", GAP("web") },
	    { MAX_MS, "p", "api/api/ok", GAP("web") },
	    { MAX_MS + 1, "p", "api/api/ok", "" },
	    { MAX_MS + 2000, "p", "api/api/ok", "" } } },
	{ "the bound counts from the last refresh that saw it",
	  { { 0, "p", "web/web/ok api/api/ok", "" },
	    { 50000, "p", "web/web/ex api/api/ok", "web=exited (last health check: unhealthy)" },
	    { 100000, "p", "api/api/ok", GAP("web") },
	    { 50000 + MAX_MS + 1, "p", "api/api/ok", "" } } },
	{ "every container gone: the gap beside <compose>",
	  { { 0, "p", "web/web/ok", "" },
	    { 1000, "p", "", "<compose>=no container has been created yet|" GAP("web") } } },
	{ "a service without a healthcheck is no evidence, gone or not",
	  { { 0, "p", "web/web/ok proxy/proxy/nohc", "" }, { 1000, "p", "web/web/ok", "" } } },
	{ "a one-off's service is not remembered",
	  { { 0, "p", "web/web/ok mig/migrate/run", "" }, { 1000, "p", "web/web/ok", "" } } },
	{ "the agent's own service is not remembered",
	  { { 0, "p", "web/web/ok hd/healthd/self", "" }, { 1000, "p", "web/web/ok", "" } } },
	{ "the agent's own container is not a container of the service it is in",
	  { { 0, "p", "web/web/ok api/api/ok hd/web/self", "" },
	    { 1000, "p", "api/api/ok hd/web/self", GAP("web") } } },
	{ "a container without a service label is not remembered",
	  { { 0, "p", "web/web/ok loose/-/ok", "" }, { 1000, "p", "web/web/ok", "" } } },
	{ "one of two replicas removed: the other is the service",
	  { { 0, "p", "web1/web/ok web2/web/ok", "" }, { 1000, "p", "web2/web/ok", "" } } },
	/* A container of the service is there (issue 34): the app changed it
	 * on purpose; no gap, and it is forgotten, so that its removal later
	 * opens none either. */
	{ "its new container declares no healthcheck: present, not a gap",
	  { { 0, "p", "web/web/ok api/api/ok", "" },
	    { 1000, "p", "web2/web/nohc api/api/ok", "" },
	    { 2000, "p", "api/api/ok", "" } } },
	{ "its new container is optional: present, not a gap",
	  { { 0, "p", "web/web/ok api/api/ok", "" },
	    { 1000, "p", "web2/web/opt api/api/ok", "" },
	    { 2000, "p", "api/api/ok", "" } } },
	{ "removed, then back without a healthcheck: the gap ends there",
	  { { 0, "p", "web/web/ok api/api/ok", "" },
	    { 1000, "p", "api/api/ok", GAP("web") },
	    { 2000, "p", "web2/web/nohc api/api/ok", "" } } },
	{ "a one-off of the service is not the service",
	  { { 0, "p", "web/web/ok api/api/ok", "" },
	    { 1000, "p", "sh/web/run api/api/ok", GAP("web") } } },
	{ "another project: what was seen of the last one is forgotten",
	  { { 0, "p", "web/web/ok api/api/ok", "" }, { 1000, "q", "api/api/ok", "" },
	    { 2000, "p", "api/api/ok", "" } } },
	{ "two services in a gap, sorted",
	  { { 0, "p", "web/web/ok db/db/ok api/api/ok", "" },
	    { 1000, "p", "api/api/ok", GAP("db") "|" GAP("web") } } },
	{ "a service name is cleaned like a container name",
	  { { 0, "p", "web/w\x1b[0m/ok api/api/ok", "" },
	    { 1000, "p", "api/api/ok", GAP("w?[0m") } } },
};

static void fill(struct container *c, char *spec)
{
	char *name = strtok(spec, "/"), *svc = strtok(NULL, "/"), *kind = strtok(NULL, "/");
	memset(c, 0, sizeof(*c));
	c->name = name;
	c->id = name;
	c->service = strcmp(svc, "-") == 0 ? NULL : svc;
	c->state = "running";
	c->running = true;
	c->health = "healthy";
	if (strcmp(kind, "st") == 0)
		c->health = "starting";
	if (strcmp(kind, "ex") == 0) {
		c->state = "exited";
		c->running = false;
		c->health = "unhealthy";
	}
	if (strcmp(kind, "nohc") == 0)
		c->health = NULL;
	c->optional_label = strcmp(kind, "opt") == 0 ? "true" : NULL;
	c->oneoff = strcmp(kind, "run") == 0;
	c->agent_self = strcmp(kind, "self") == 0;
}

static void run_case(const struct gcase *tc)
{
	struct gap g = { 0 };
	for (size_t s = 0; s < 6 && tc->steps[s].project; s++) {
		const struct step *st = &tc->steps[s];
		char specs[512], *save = NULL, got[2048];
		struct container c[8];
		struct container_list l = { .v = c };
		snprintf(specs, sizeof(specs), "%s", st->containers);
		for (char *w = strtok_r(specs, " ", &save); w && l.n < 8;
		     w = strtok_r(NULL, " ", &save))
			fill(&c[l.n++], w);
		struct verdict v;
		verdict_init(&v);
		int r = containers_judge(&l, &v);
		if (r == 0)
			r = gap_judge(&g, st->project, &l, st->t, MAX_MS, &v);
		is_int(r, 0, "%s, at %lld ms: judged", tc->what, st->t);
		entries_render(&v, got, sizeof(got));
		is_str(got, st->want, "%s, at %lld ms: entries", tc->what, st->t);
		is_int(v.healthy, !st->want[0], "%s, at %lld ms: healthy iff no entries", tc->what,
		       st->t);
		verdict_free(&v);
	}
	gap_free(&g);
}

static void test_cases(void)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		run_case(&cases[i]);
}

/* max_ms 0 (not settable from the config, which wants seconds above 0)
 * remembers nothing; the memory is bounded. */
static void test_bounds(void)
{
	struct gap g = { 0 };
	struct container c = { .name = "web", .id = "web", .service = "web", .state = "running",
			       .running = true, .health = "healthy" };
	struct container_list l = { .v = &c, .n = 1 }, none = { 0 };
	struct verdict v;
	verdict_init(&v);
	gap_judge(&g, "p", &l, 0, 0, &v);
	gap_judge(&g, "p", &none, 0, 0, &v);
	is_int(v.n_entries, 0, "bounds: max 0 remembers nothing, not even for the same ms");
	is_int(g.n, 0, "bounds: ...and keeps nothing");
	verdict_free(&v);

	/* The bound a gap entry states is whole seconds, rounded up: never
	 * shorter than the hold. */
	verdict_init(&v);
	gap_judge(&g, "p", &l, 0, 8001, &v);
	gap_judge(&g, "p", &none, 1000, 8001, &v);
	ok(v.n_entries == 1 && strstr(v.entries[0].status, "unhealthy for at most 9 s)"),
	   "bounds: 8001 ms is stated as at most 9 s (%s)", v.n_entries ? v.entries[0].status : "");
	verdict_free(&v);
	gap_free(&g);

	char name[32];
	c.service = name;
	for (int i = 0; i <= GAP_MAX_SERVICES; i++) {
		snprintf(name, sizeof(name), "s%d", i);
		verdict_init(&v);
		gap_judge(&g, "p", &l, i, 1000000000, &v);
		verdict_free(&v);
	}
	is_int(g.n, GAP_MAX_SERVICES, "bounds: at most %d services remembered", GAP_MAX_SERVICES);
	gap_free(&g);
	gap_free(NULL);
}

int main(void)
{
	test_cases();
	test_bounds();
	return done_testing();
}
