/* SPDX-License-Identifier: Apache-2.0 */
/* app-compose.json, as the operator's deployment wrote it. */
#include "agent/compose.h"
#include "fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct app_compose c = { 0 };
	struct errbuf err = { "" };
	if (compose_parse((const char *)data, size, &c, &err) == 0)
		compose_free(&c);
	return 0;
}
