/* SPDX-License-Identifier: Apache-2.0 */
/* Table tests for base/grow.c: the one doubling loop every appender uses. */
#include <stdint.h>
#include <stdlib.h>

#include "base/grow.h"
#include "tests/lib/tap.h"

static const struct {
	const char *name;
	size_t cap, need, elem, first, max;
	size_t want_cap; /* 0: fails */
} cases[] = {
	{ "room enough: unchanged", 8, 8, 1, 4, 0, 8 },
	{ "empty: starts at first", 0, 3, 1, 64, 0, 64 },
	{ "empty, need above first: doubles from first", 0, 100, 1, 64, 0, 128 },
	{ "doubles from the current room", 64, 65, 1, 16, 0, 128 },
	{ "doubles as often as needed", 64, 1000, 1, 16, 0, 1024 },
	{ "never past max", 4096, 4097, 1, 4096, 5000, 5000 },
	{ "elements: room counted in elements", 4, 5, 16, 4, 0, 8 },
	{ "need beyond what doubling can reach: fails", 1, SIZE_MAX, 1, 1, 0, 0 },
	{ "bytes overflow size_t: fails", 0, 2, SIZE_MAX / 2, 4, 0, 0 },
};

int main(void)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t cap = cases[i].cap;
		char *p = cap ? malloc(cap * cases[i].elem) : NULL;
		char *q = grow(p, &cap, cases[i].need, cases[i].elem, cases[i].first, cases[i].max);
		if (cases[i].want_cap) {
			ok(q != NULL, "%s: grown", cases[i].name);
			is_int(cap, cases[i].want_cap, "%s: room", cases[i].name);
			free(q);
		} else {
			ok(q == NULL, "%s: NULL", cases[i].name);
			is_int(cap, cases[i].cap, "%s: room left as it was", cases[i].name);
			free(p);
		}
	}
	return done_testing();
}
