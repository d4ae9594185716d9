/* The one translation unit that holds jsmn's implementation (it is a
 * header-only library). Strict mode: primitives must be true, false, null or
 * numbers, and must be followed by a delimiter. */
#define JSMN_STRICT
#define JSMN_PARENT_LINKS /* as agent/json.h says why */
#include <jsmn.h>
