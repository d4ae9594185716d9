/* SPDX-License-Identifier: Apache-2.0 */
/* `nerdctl ps -a -q` output. */
#include "fuzz/fuzz.h"
#include "runtime/nerdctl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char **ids = NULL;
	size_t n = 0;
	struct errbuf err = { "" };
	if (nerdctl_parse_ids((const char *)data, size, &ids, &n, &err) == 0)
		nerdctl_free_ids(ids, n);
	return 0;
}
