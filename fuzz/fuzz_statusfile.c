/* The status file the app writes. The first 8 bytes are the time of the
 * read, so that the age rule and its overflow edges are reached too. */
#include <time.h>

#include "fuzz/fuzz.h"
#include "statusfile/statusfile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int64_t now = 1771234567;
	char reason[512];
	if (size >= sizeof(now)) {
		memcpy(&now, data, sizeof(now));
		data += sizeof(now);
		size -= sizeof(now);
	}
	if (size > STATUSFILE_MAX_BYTES)
		return 0; /* statusfile_judge never hands over more */
	statusfile_parse((const char *)data, size, (time_t)now, reason, sizeof(reason));
	/* The reason goes to anonymous callers: it must be a C string. */
	if (!memchr(reason, '\0', sizeof(reason)))
		__builtin_trap();
	return 0;
}
