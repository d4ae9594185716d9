/* The consecutive-failure rule (DESIGN.md §4): a failed refresh keeps the
 * previous verdict twice; from the third failure in a row the verdict is
 * healthy:false, no entries, error = what failed; one success resets it. */
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

int main(void)
{
	struct app_compose app = { .health_check = true, .kind = RUNNER_DOCKER_COMPOSE };
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct refresh_state st = { 0 };
		char got[16] = "";
		source_initial_verdict(&app, &st.current);
		for (size_t k = 0; cases[i].steps[k]; k++) {
			struct verdict v, out;
			struct errbuf e = { "cannot connect to unix:///x.sock: refused" };
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
			if (got[k] == 'E' && strcmp(out.error, e.msg))
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
	struct app_compose off = { .health_check = false };
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
