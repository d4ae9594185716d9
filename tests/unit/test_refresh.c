/* SPDX-License-Identifier: Apache-2.0 */
/* The consecutive-failure rule (docs/design/verdict.md): a failed refresh keeps the
 * previous verdict twice; from the third failure in a row the verdict is
 * healthy:false, no entries, error = what failed in the agent's own words
 * (the message, which may quote the runtime, only in detail); one success
 * resets it. What a reload keeps (source_same), and what an unusable
 * app-compose.json serves. */
#include <errno.h>
#include <string.h>

#include "agent/refresh.h"
#include "agent/source.h"
#include "tests/lib/tap.h"

/* A step: 'H' healthy refresh, 'U' unhealthy refresh (entry web: starting),
 * 'F' failed refresh. want: 'N' not determined yet, 'H', 'U', 'E' error. */
static const struct {
	const char *steps, *want;
} cases[] = {
	{ "H", "H" },
	{ "U", "U" },
	{ "F", "N" },
	{ "FF", "NN" },
	{ "FFF", "NNE" },
	{ "FFFF", "NNEE" },
	{ "HF", "HH" },
	{ "HFF", "HHH" },
	{ "HFFF", "HHHE" },
	{ "HFFFH", "HHHEH" },
	{ "UFFU", "UUUU" },
	{ "HFFHFF", "HHHHHH" },
	{ "HFFHFFF", "HHHHHHE" },
	{ "UFFFFU", "UUUEEU" },
	{ "HUHU", "HUHU" },
};

static char classify(const struct verdict *v)
{
	if (v->error)
		return !v->healthy && v->n_entries == 0 ? 'E' : '?';
	if (v->healthy)
		return v->n_entries == 0 ? 'H' : '?';
	if (v->n_entries == 1 && !strcmp(v->entries[0].name, "<health>"))
		return 'N';
	if (v->n_entries == 1 && !strcmp(v->entries[0].name, "web"))
		return 'U';
	return '?';
}

/* Two configurations and manifests; reload keeps the failure count only
 * when the source is the same. */
static void test_source_same(void)
{
	struct config c1 = { .runtime_file = "/r.json", .docker_host = "unix:///d.sock",
			     .nerdctl = "nerdctl" };
	struct config c2 = c1, c3 = c1;
	c3.docker_host = "unix:///other.sock";
	struct manifest docker = { .app = { .health_check = true,
					    .kind = RUNNER_DOCKER_COMPOSE },
				   .ok = true };
	struct manifest nerd = docker, off = docker, file = docker, file2 = docker;
	struct manifest bad = { .ok = false };
	nerd.app.kind = RUNNER_NERDCTL_COMPOSE;
	off.app.health_check = false;
	file.app.health_status_file = "/run/health";
	file2.app.health_status_file = "/run/other";
	ok(source_same(&c1, &docker, &c2, &docker), "same Docker source: kept");
	ok(!source_same(&c1, &docker, &c3, &docker), "another Docker host: new source");
	ok(!source_same(&c1, &off, &c1, &docker), "gating turned on: new source");
	ok(!source_same(&c1, &docker, &c1, &off), "gating turned off: new source");
	ok(source_same(&c1, &off, &c3, &off), "gating off both times: same");
	ok(!source_same(&c1, &docker, &c1, &nerd), "Docker to nerdctl: new source");
	ok(source_same(&c1, &file, &c3, &file), "same status file: kept");
	ok(!source_same(&c1, &file, &c1, &file2), "another status file: new source");
	ok(!source_same(&c1, &file, &c1, &docker), "status file to Docker: new source");
	ok(!source_same(&c1, &bad, &c1, &bad), "unusable app-compose.json: never kept");
}

/* An unusable app-compose.json is served at once: healthy:false, no entries,
 * its error. */
static void test_manifest_unusable(void)
{
	struct manifest m = { .ok = false };
	errbuf_tag(&m.err, ERR_KIND_COMPOSE,
		   errbuf_set(&m.err, EINVAL, "app-compose.json: runner: missing"));
	struct verdict v;
	is_int(source_initial_verdict(&m, &v), 0, "initial verdict");
	ok(!v.healthy && v.n_entries == 0, "healthy:false, no entries");
	is_str(v.error, "app-compose.json: runner: missing", "error names the file and field");
	verdict_free(&v);
}

int main(void)
{
	struct manifest app = { .app = { .health_check = true, .kind = RUNNER_DOCKER_COMPOSE },
				.ok = true };
	test_source_same();
	test_manifest_unusable();
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct refresh_state st = { 0 };
		char got[16] = "";
		source_initial_verdict(&app, &st.current);
		for (size_t k = 0; cases[i].steps[k]; k++) {
			struct verdict v, out;
			struct errbuf e = { "cannot connect to unix:///x.sock: refused",
					    ERR_KIND_RUNTIME_UNREACHABLE };
			verdict_init(&v);
			int r = 0;
			if (cases[i].steps[k] == 'H')
				v.healthy = true;
			else if (cases[i].steps[k] == 'U')
				verdict_add(&v, "web", "starting");
			else
				r = -ECONNREFUSED;
			refresh_apply(&st, r, &v, &e, &out);
			verdict_free(&v);
			got[k] = classify(&out);
			if (got[k] == 'E' && (strcmp(out.error, "cannot reach the container "
								 "runtime") ||
					      strcmp(out.detail, e.msg)))
				got[k] = '!';
			verdict_free(&st.current);
			st.current = out;
		}
		const char *steps = cases[i].steps, *want = cases[i].want;
		if (!ok(!strcmp(got, want), "refreshes %s publish %s", steps, want))
			printf("#   got: %s\n", got);
		verdict_free(&st.current);
	}

	/* Gating off is healthy from the start, and entries come out sorted. */
	struct manifest off = { .app = { .health_check = false }, .ok = true };
	struct verdict v, out;
	source_initial_verdict(&off, &v);
	ok(v.healthy && v.n_entries == 0 && !v.error, "gating off starts healthy");
	verdict_free(&v);
	struct refresh_state st = { 0 };
	verdict_init(&st.current);
	verdict_init(&v);
	verdict_add(&v, "web", "starting");
	verdict_add(&v, "db", "unhealthy");
	refresh_apply(&st, 0, &v, NULL, &out);
	is_str(out.entries[0].name, "db", "entries sorted by name");
	verdict_free(&out);
	verdict_free(&v);
	verdict_free(&st.current);
	return done_testing();
}
