/* SPDX-License-Identifier: Apache-2.0 */
/* /run/dstack/app-compose-runtime.json, written by the guest. */
#include "fuzz/fuzz.h"
#include "runtime/runtimefile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct runtime_info ri = { 0 };
	struct errbuf err = { "" };
	runtimefile_parse((const char *)data, size, &ri, &err);
	runtime_info_free(&ri);
	return 0;
}
