/* Docker-shaped inspect JSON, judged as the refresh would. Byte 0 picks the
 * shape: even, an array as `nerdctl inspect` prints it; odd, the single
 * object of Docker's GET /containers/{id}/json. */
#include "fuzz/fuzz.h"
#include "runtime/inspect.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	const char *in = (const char *)data + 1;
	size_t len = size - 1;
	struct container_list out = { 0 };
	struct errbuf err = { "" };
	if (data[0] & 1) {
		struct json j;
		if (json_parse(&j, in, len, 1 << 16, NULL) == 0) {
			struct container *c = container_list_add(&out);
			if (c && inspect_parse_object(&j, 0, c, &err) < 0) {
				container_free(c);
				out.n--;
			}
			json_free(&j);
		}
	} else {
		inspect_parse_array(in, len, &out, &err);
	}
	struct verdict v;
	verdict_init(&v);
	containers_judge(&out, &v);
	verdict_free(&v);
	container_list_free(&out);
	return 0;
}
