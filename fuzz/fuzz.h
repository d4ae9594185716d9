/* SPDX-License-Identifier: Apache-2.0 */
/* Shared by the libFuzzer targets (see README). Each target feeds the bytes
 * to one parser of outside bytes exactly as the agent would, then frees what
 * it returned, so that ASan sees every leak and overrun and UBSan every
 * undefined operation. */
#ifndef HEALTHD_FUZZ_H
#define HEALTHD_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Takes the next NUL-terminated field of at most cap - 1 bytes from
 * [*p, end) into buf; the last field runs to the end of the input. Returns
 * false when nothing is left. */
static inline int fuzz_field(const uint8_t **p, const uint8_t *end, char *buf, size_t cap)
{
	if (*p > end)
		return 0;
	const uint8_t *nul = memchr(*p, '\0', (size_t)(end - *p));
	size_t n = (size_t)((nul ? nul : end) - *p);
	if (n >= cap)
		n = cap - 1;
	memcpy(buf, *p, n);
	buf[n] = '\0';
	*p = nul ? nul + 1 : end + 1;
	return 1;
}

#endif
