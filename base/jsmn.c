/* SPDX-License-Identifier: Apache-2.0 */
/* The one translation unit that holds jsmn's implementation (it is a
 * header-only library). Its two settings come from the Makefile, for every
 * translation unit alike (base/json.h says why). */
#include <jsmn.h>
