/* Docker-shaped inspect JSON: an array as `nerdctl inspect` prints it, and
 * (after it) the single object of Docker's GET /containers/{id}/json, judged
 * as the refresh would. */
#include "runtime/inspect.h"
#include "fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct container_list out = { 0 };
	struct errbuf err = { "" };
	if (inspect_parse_array((const char *)data, size, &out, &err) == 0) {
		struct verdict v;
		verdict_init(&v);
		containers_judge(&out, &v);
		verdict_free(&v);
	}
	container_list_free(&out);

	struct json j;
	if (json_parse(&j, (const char *)data, size, 1 << 16, NULL) == 0) {
		struct container c = { 0 };
		inspect_parse_object(&j, 0, &c, &err);
		container_free(&c);
		json_free(&j);
	}
	return 0;
}
