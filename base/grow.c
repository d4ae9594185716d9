/* SPDX-License-Identifier: Apache-2.0 */
#include "base/grow.h"

#include <stdint.h>
#include <stdlib.h>

void *grow(void *p, size_t *cap, size_t need, size_t elem, size_t first, size_t max)
{
	if (need <= *cap)
		return p;
	size_t c = *cap ? *cap : first;
	while (c < need) {
		if (c > SIZE_MAX / 2)
			return NULL;
		c *= 2;
	}
	if (max && c > max)
		c = max;
	if (c > SIZE_MAX / elem)
		return NULL;
	void *q = realloc(p, c * elem);
	if (!q)
		return NULL;
	*cap = c;
	return q;
}
