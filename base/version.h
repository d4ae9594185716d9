/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HEALTHD_VERSION_H
#define HEALTHD_VERSION_H

/* HEALTHD_VERSION ("0.1.0") comes from the Makefile; HEALTHD_REV
 * ("git:<20 hex>") from rev.h, which the Makefile rewrites only when the
 * revision changes, so objects that show it are rebuilt exactly then. */
#ifndef HEALTHD_VERSION
#define HEALTHD_VERSION "0.0.0"
#endif
#include "rev.h"

#endif
