/* SPDX-License-Identifier: Apache-2.0 */
/* The nerdctl backend's path (nerdctl_list_with, then the judge) against a
 * stand-in nerdctl that misbehaves as the input says, under the oracle of
 * fuzz/oracle.h. Layout:
 *   byte 0    bit 0: ps honours --filter (else it lists every container)
 *   byte 1    containers 0..7 removed after the first ps (bit k: container k)
 *   bytes 2-9 one fault per nerdctl run, in order (later runs behave):
 *             low 3 bits: 0 answer truly, 1 fail (exit 1, a dial error),
 *             2 claim "no such container" (exit 1), 3 print the true answer
 *             cut at (high 5 bits)/32 of its length, 4 time out, 5 leave the
 *             last container out and exit 0, 6 answer in reverse order,
 *             7 print "[]"; ps takes faults 1 and 4 only (its list is true)
 *   rest      the world: a JSON array of inspect objects, the containers
 *             that exist (the first 16 with a distinct hex Id of 12..64).
 * A removed container is no input container: the oracle looks at the
 * others. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "fuzz/fuzz.h"
#include "fuzz/oracle.h"
#include "runtime/nerdctl.h"

#define WORLD_MAX 16

struct world {
	struct json j;
	int obj[WORLD_MAX];
	char *id[WORLD_MAX];
	int n;
	bool filter;
	unsigned removed;
	const uint8_t *faults;
	int nfaults, runs, ps_runs;
};

static bool hex_id(const char *s)
{
	size_t n = strlen(s);
	return n >= 12 && n <= 64 && strspn(s, "0123456789abcdef") == n;
}

static void world_load(struct world *w)
{
	if (!json_is_array(&w->j, 0))
		return;
	JSON_ARRAY_FOREACH(&w->j, 0, el, cnt) {
		char *id = NULL;
		if (w->n == WORLD_MAX)
			break;
		if (json_strdup(&w->j, json_get(&w->j, el, "Id"), &id) < 0)
			continue;
		bool dup = !hex_id(id);
		for (int k = 0; k < w->n && !dup; k++)
			dup = strcmp(w->id[k], id) == 0;
		if (dup) {
			free(id);
			continue;
		}
		w->obj[w->n] = el;
		w->id[w->n++] = id;
	}
}

static bool exists(const struct world *w, int k)
{
	return !(w->ps_runs > 0 && k < 8 && (w->removed >> k & 1));
}

static int put(struct nerdctl_answer *a, const char *s, size_t n)
{
	char *p = realloc(a->out, a->len + n + 1);
	if (!p)
		return -ENOMEM;
	memcpy(p + a->len, s, n);
	a->len += n;
	p[a->len] = '\0';
	a->out = p;
	return 0;
}

static int ps(struct world *w, struct nerdctl_answer *a)
{
	for (int k = 0; k < w->n; k++) {
		int label = oracle_label(&w->j, w->obj[k], "com.docker.compose.project");
		if (!exists(w, k) || (w->filter && !json_str_eq(&w->j, label, ORACLE_PROJECT)))
			continue;
		if (put(a, w->id[k], strlen(w->id[k])) < 0 || put(a, "\n", 1) < 0)
			return -ENOMEM;
	}
	w->ps_runs++;
	return 0;
}

static int lookup(const struct world *w, const char *id)
{
	for (int k = 0; k < w->n; k++)
		if (exists(w, k) && strcmp(w->id[k], id) == 0)
			return k;
	return -1;
}

/* The true answer of nerdctl 2.x: the objects found; exit 1 naming the
 * first id it could not find. */
static int inspect(struct world *w, const char *const *ids, size_t n, bool reverse,
		   bool drop_last, struct nerdctl_answer *a)
{
	int found[NERDCTL_MAX_IDS], nf = 0;
	const char *missing = NULL;
	for (size_t i = 0; i < n && i < NERDCTL_MAX_IDS; i++) {
		int k = lookup(w, ids[i]);
		if (k < 0 && !missing)
			missing = ids[i];
		else if (k >= 0)
			found[nf++] = k;
	}
	if (drop_last && nf > 0)
		nf--;
	int r = put(a, "[", 1);
	for (int i = 0; r == 0 && i < nf; i++) {
		const jsmntok_t *t = &w->j.tok[w->obj[found[reverse ? nf - 1 - i : i]]];
		if (i > 0)
			r = put(a, ",", 1);
		if (r == 0)
			r = put(a, w->j.s + t->start, (size_t)(t->end - t->start));
	}
	if (r == 0)
		r = put(a, "]", 1);
	if (r == 0 && missing && !drop_last) {
		snprintf(a->err, sizeof(a->err), "level=fatal msg=\"1 errors: [no such "
			 "container: %.64s]\"", missing);
		r = -EIO;
	}
	return r;
}

static int run(void *ctx, const char *what, const char *const *rest, size_t n,
	       struct nerdctl_answer *a, struct errbuf *err)
{
	struct world *w = ctx;
	uint8_t f = w->runs < w->nfaults ? w->faults[w->runs] : 0;
	w->runs++;
	a->err[0] = '\0';
	switch (f & 7) {
	case 1:
		snprintf(a->err, sizeof(a->err), "level=fatal msg=\"failed to dial\"");
		return errbuf_set(err, EIO, "nerdctl %s: exited with status 1", what);
	case 4:
		return errbuf_set(err, ETIMEDOUT, "nerdctl %s: timed out", what);
	}
	if (strcmp(what, "ps") == 0)
		return ps(w, a) < 0 ? errbuf_set(err, ENOMEM, "out of memory") : 0;
	if (n < 3)
		return errbuf_set(err, EINVAL, "stand-in: bad inspect");
	int r;
	switch (f & 7) {
	case 2:
		snprintf(a->err, sizeof(a->err), "level=fatal msg=\"no such container\"");
		return errbuf_set(err, EIO, "nerdctl inspect: exited with status 1");
	case 7:
		r = put(a, "[]", 2);
		break;
	default:
		r = inspect(w, rest + 2, n - 2, (f & 7) == 6, (f & 7) == 5, a);
	}
	if ((f & 7) == 3 && a->out)
		a->len = a->len * (f >> 3) / 32;
	if (r == -EIO)
		return errbuf_set(err, EIO, "nerdctl inspect: exited with status 1");
	return r < 0 ? errbuf_set(err, -r, "stand-in failed") : 0;
}

static bool any_bad(const struct world *w)
{
	bool bad = false;
	for (int k = 0; k < w->n; k++)
		if (exists(w, k))
			bad |= oracle_bad(&w->j, w->obj[k], ORACLE_PROJECT);
	return bad;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct world w = { .faults = data + 2 };
	if (size < 10)
		return 0;
	w.filter = data[0] & 1;
	w.removed = data[1];
	w.nfaults = 8;
	if (json_parse(&w.j, (const char *)data + 10, size - 10, 1 << 16, NULL) < 0)
		return 0;
	world_load(&w);
	struct nerdctl_runner rn = { run, &w };
	struct container_list out = { 0 };
	struct errbuf err = { "" };
	int r = nerdctl_list_with(&rn, ORACLE_PROJECT, &out, &err);
	struct verdict v;
	verdict_init(&v);
	int jr = r == 0 ? containers_judge(&out, &v) : -1;
	/* Removal happens after the first ps: judge the world as it ended. */
	w.ps_runs = w.ps_runs > 0 ? w.ps_runs : 1;
	oracle_check(any_bad(&w), jr == 0 && v.healthy);
	verdict_free(&v);
	container_list_free(&out);
	for (int k = 0; k < w.n; k++)
		free(w.id[k]);
	json_free(&w.j);
	return 0;
}
