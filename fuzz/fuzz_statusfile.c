/* SPDX-License-Identifier: Apache-2.0 */
/* The status file the app writes. The first 8 bytes are the time of the
 * read, so that the age rule and its overflow edges are reached too; the
 * rest is the file, of which statusfile_judge reads the first
 * STATUSFILE_MAX_BYTES. Oracle: the verdict is healthy exactly when the
 * bytes are a valid, fresh `healthy` file by the rules, written again here
 * from docs/app-developer.md rather than from statusfile.c. */
#include <ctype.h>
#include <stdlib.h>
#include <strings.h>
#include <time.h>

#include "fuzz/fuzz.h"
#include "statusfile/statusfile.h"

/* RFC 3629: no overlongs, no surrogates, nothing above U+10FFFF. */
static bool utf8_ok(const unsigned char *s, size_t n)
{
	size_t i = 0;
	while (i < n) {
		unsigned c = s[i], need, min, cp;
		if (c < 0x80) {
			i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf)
			need = 1, min = 0x80, cp = c & 0x1f;
		else if (c >= 0xe0 && c <= 0xef)
			need = 2, min = 0x800, cp = c & 0x0f;
		else if (c >= 0xf0 && c <= 0xf4)
			need = 3, min = 0x10000, cp = c & 0x07;
		else
			return false;
		if (n - i <= need)
			return false;
		for (unsigned k = 1; k <= need; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return false;
			cp = cp << 6 | (s[i + k] & 0x3f);
		}
		if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return false;
		i += need + 1;
	}
	return true;
}

static bool blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

/* Line k (0-based) of s, trimmed; false when the file has no such line. */
static bool line(const char *s, size_t n, int k, const char **b, size_t *len)
{
	size_t start = 0;
	for (; k > 0; k--) {
		const char *nl = memchr(s + start, '\n', n - start);
		if (!nl)
			return false;
		start = (size_t)(nl - s) + 1;
	}
	const char *nl = memchr(s + start, '\n', n - start);
	size_t end = nl ? (size_t)(nl - s) : n;
	if (start == n && k == 0 && start != 0)
		return false; /* "x\n": nothing after the last newline */
	while (start < end && blank(s[start]))
		start++;
	while (end > start && blank(s[end - 1]))
		end--;
	*b = s + start;
	*len = end - start;
	return true;
}

static bool reference_healthy(const char *s, size_t n, int64_t now)
{
	const char *l1, *l2;
	size_t n1, n2;
	if (!utf8_ok((const unsigned char *)s, n) || !line(s, n, 0, &l1, &n1) ||
	    !line(s, n, 1, &l2, &n2))
		return false;
	if (n1 != 7 || strncasecmp(l1, "healthy", 7) != 0)
		return false;
	if (n2 > 0 && l2[0] == '+')
		l2++, n2--;
	if (n2 == 0)
		return false;
	/* By value, as upstream's u64 parse: leading zeros are no overflow,
	 * however many. A value past UINT64_MAX only grows. */
	unsigned __int128 ts = 0;
	for (size_t i = 0; i < n2; i++) {
		if (!isdigit((unsigned char)l2[i]))
			return false;
		ts = ts * 10 + (unsigned)(l2[i] - '0');
		if (ts > UINT64_MAX)
			return false;
	}
	__int128 d = (__int128)ts - now;
	return d >= -STATUSFILE_MAX_AGE && d <= STATUSFILE_MAX_AGE;
}

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
		size = STATUSFILE_MAX_BYTES; /* all statusfile_judge ever reads */
	bool h = statusfile_parse((const char *)data, size, (time_t)now, reason, sizeof(reason));
	/* The reason goes to anonymous callers: it must be a C string. */
	if (!memchr(reason, '\0', sizeof(reason)))
		__builtin_trap();
	if (h != reference_healthy((const char *)data, size, now))
		abort();
	return 0;
}
