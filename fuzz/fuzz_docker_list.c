/* SPDX-License-Identifier: Apache-2.0 */
/* The Docker backend's path: the body of GET /containers/json, then the
 * inspections it asks for, then the judge, under the oracle of
 * fuzz/oracle.h. Layout: byte 0 picks the API version the client negotiated
 * (below 1.52 every item goes to inspection, from 1.52 running items that
 * are healthy or have no healthcheck are taken from the list); the list body
 * runs to the first NUL; after it, a JSON array of inspect objects stands
 * for the daemon's GET /containers/{id}/json (an id with no object there is
 * a 404: removed since the list, skipped). */
#include <stdlib.h>

#include "fuzz/fuzz.h"
#include "fuzz/oracle.h"
#include "runtime/docker.h"
#include "runtime/inspect.h"

#define MAX_TOKENS (1 << 16)

/* The first object of the inspect array whose Id is id, or -1. */
static int find(const struct json *w, const char *id)
{
	if (!json_is_array(w, 0))
		return -1;
	JSON_ARRAY_FOREACH(w, 0, el, cnt) {
		if (json_str_eq(w, json_get(w, el, "Id"), id))
			return el;
	}
	return -1;
}

/* What docker.c's inspect does with a 200 or a 404. */
static int inspect(const struct json *w, const char *id, struct container_list *out)
{
	int el = find(w, id);
	struct errbuf err;
	if (el < 0)
		return 0;
	struct container *c = container_list_add(out);
	if (!c)
		return -1;
	int r = inspect_parse_object(w, el, c, &err);
	if (r < 0 || c->oneoff) {
		container_free(c);
		out->n--;
	}
	return r;
}

static bool list_item_bad(const struct json *l, int it, const struct json *w, int version)
{
	int labels = json_get(l, it, "Labels"); /* top-level in a list item */
	if (!json_str_eq(l, json_get(l, labels, "com.docker.compose.project"), ORACLE_PROJECT) ||
	    json_str_eq(l, json_get(l, labels, "com.docker.compose.oneoff"), "True"))
		return false;
	int hs = json_get(l, json_get(l, it, "Health"), "Status");
	/* The list speaks for a running container that is healthy or has no
	 * healthcheck; any other is inspected (for the operator's view, its
	 * last probe), and the inspection speaks for it, as below 1.52. */
	if (version >= 152 && json_str_eq(l, json_get(l, it, "State"), "running") &&
	    (json_str_eq(l, hs, "healthy") || json_str_eq(l, hs, "") ||
	     json_str_eq(l, hs, "none")))
		return false;
	char *id = NULL;
	if (json_strdup(l, json_get(l, it, "Id"), &id) < 0)
		return false; /* the agent refuses the list */
	int el = find(w, id);
	free(id);
	return el >= 0 && oracle_bad(w, el, NULL);
}

static bool any_bad(const char *body, size_t len, const struct json *w, int version)
{
	struct json l;
	bool bad = false;
	if (json_parse(&l, body, len, MAX_TOKENS, NULL) < 0)
		return false;
	if (json_is_array(&l, 0)) {
		JSON_ARRAY_FOREACH(&l, 0, it, cnt)
			bad |= list_item_bad(&l, it, w, version);
	}
	json_free(&l);
	return bad;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct container_list out = { 0 };
	struct docker_ids todo = { 0 };
	struct errbuf err = { "" };
	struct json w = { 0 };
	int version = 141;
	if (size > 0) {
		version = data[0] & 1 ? 152 : 141;
		data++;
		size--;
	}
	const char *body = (const char *)data;
	const uint8_t *nul = memchr(data, '\0', size);
	size_t len = nul ? (size_t)(nul - data) : size;
	if (nul && json_parse(&w, (const char *)nul + 1, size - len - 1, MAX_TOKENS, NULL) < 0)
		return 0;
	int r = docker_parse_list(body, len, ORACLE_PROJECT, NULL, version, &out, &todo, &err);
	for (size_t i = 0; r == 0 && i < todo.n; i++)
		r = inspect(&w, todo.v[i], &out);
	struct verdict v;
	verdict_init(&v);
	int jr = r == 0 ? containers_judge(&out, &v) : -1;
	oracle_check(any_bad(body, len, &w, version), jr == 0 && v.healthy);
	verdict_free(&v);
	container_list_free(&out);
	free(todo.v);
	if (nul)
		json_free(&w);
	return 0;
}
