/* The body of Docker's GET /containers/json. The first byte picks the API
 * version the client negotiated: below 1.52 every item goes to inspection,
 * from 1.52 running items are taken from the list. */
#include <stdlib.h>

#include "fuzz/fuzz.h"
#include "runtime/docker.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct container_list out = { 0 };
	struct docker_ids todo = { 0 };
	struct errbuf err = { "" };
	int version = 141;
	if (size > 0) {
		version = data[0] & 1 ? 152 : 141;
		data++;
		size--;
	}
	docker_parse_list((const char *)data, size, "demo", version, &out, &todo, &err);
	container_list_free(&out);
	free(todo.v);
	return 0;
}
