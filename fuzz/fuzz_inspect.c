/* SPDX-License-Identifier: Apache-2.0 */
/* Docker-shaped inspect JSON, judged as the refresh would. Byte 0 picks the
 * shape: even, an array as `nerdctl inspect` prints it; odd, the single
 * object of Docker's GET /containers/{id}/json. No project filter at this
 * layer, so every container counts for the oracle (fuzz/oracle.h). */
#include "fuzz/fuzz.h"
#include "fuzz/oracle.h"
#include "runtime/inspect.h"

/* Whether any input container must keep the app from healthy:true. */
static bool any_bad(const char *in, size_t len, bool single)
{
	struct json j;
	bool bad = false;
	if (json_parse(&j, in, len, 1 << 16, NULL) < 0)
		return false; /* the agent cannot parse it either: not healthy */
	if (single)
		bad = oracle_bad(&j, 0, NULL);
	else if (json_is_array(&j, 0)) {
		JSON_ARRAY_FOREACH(&j, 0, el, cnt)
			bad |= oracle_bad(&j, el, NULL);
	}
	json_free(&j);
	return bad;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	const char *in = (const char *)data + 1;
	size_t len = size - 1;
	struct container_list out = { 0 };
	struct errbuf err = { "" };
	int r = -1;
	if (data[0] & 1) {
		struct json j;
		if (json_parse(&j, in, len, 1 << 16, NULL) == 0) {
			struct container *c = container_list_add(&out);
			if (c && (r = inspect_parse_object(&j, 0, c, &err)) < 0) {
				container_free(c);
				out.n--;
			} else if (c && c->oneoff) {
				/* Docker's backend drops an inspected one-off. */
				container_free(c);
				out.n--;
			}
			json_free(&j);
		}
	} else {
		r = inspect_parse_array(in, len, &out, &err);
	}
	struct verdict v;
	verdict_init(&v);
	int jr = containers_judge(&out, &v);
	oracle_check(any_bad(in, len, data[0] & 1), r == 0 && jr == 0 && v.healthy);
	verdict_free(&v);
	container_list_free(&out);
	return 0;
}
