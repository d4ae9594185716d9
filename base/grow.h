/* SPDX-License-Identifier: Apache-2.0 */
/* Growing a buffer or an array by doubling: the one copy of the loop that
 * every appender used to carry. */
#ifndef HEALTHD_GROW_H
#define HEALTHD_GROW_H

#include <stddef.h>

/* Makes room for need elements of elem bytes in p, whose room is *cap
 * elements: doubles from *cap (or from first, when *cap is 0) until need
 * fits, never past max elements when max is not 0 (the caller has checked
 * that need <= max). Returns the (possibly moved) array with *cap updated,
 * or NULL on ENOMEM or overflow, leaving p and *cap as they were. */
void *grow(void *p, size_t *cap, size_t need, size_t elem, size_t first, size_t max);

#endif
