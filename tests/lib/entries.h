/* SPDX-License-Identifier: Apache-2.0 */
/* A verdict's entries as one line, "name=status|name=status", for the table
 * tests that compare them. */
#ifndef HEALTHD_TESTS_ENTRIES_H
#define HEALTHD_TESTS_ENTRIES_H

#include <stdio.h>

#include "base/verdict.h"

static inline void entries_render(const struct verdict *v, char *buf, size_t n)
{
	size_t off = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < v->n_entries && off < n; i++)
		off += (size_t)snprintf(buf + off, n - off, "%s%s=%s", i ? "|" : "",
					v->entries[i].name, v->entries[i].status);
}

#endif
