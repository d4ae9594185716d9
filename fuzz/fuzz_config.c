/* SPDX-License-Identifier: Apache-2.0 */
/* The agent's own JSON config file (-c FILE), through the pure part of
 * config_load. */
#include <stdlib.h>

#include "agent/config.h"
#include "fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct config c = { 0 };
	struct errbuf err = { "" };
	config_parse_json(&c, "fuzz.json", (const char *)data, size, &err);
	config_free(&c);
	return 0;
}
