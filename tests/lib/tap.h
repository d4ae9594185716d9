/* SPDX-License-Identifier: Apache-2.0 */
/* Minimal TAP producer for the unit tests: tests/run counts the lines. */
#ifndef HEALTHD_TAP_H
#define HEALTHD_TAP_H

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int tap_n, tap_failed;

__attribute__((format(printf, 2, 3))) static int ok(int cond, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	printf("%sok %d - ", cond ? "" : "not ", ++tap_n);
	vprintf(fmt, ap);
	printf("\n");
	va_end(ap);
	if (!cond)
		tap_failed++;
	fflush(stdout);
	return cond;
}

/* is_str: compares strings, printing both on failure. */
#define is_str(got, want, ...)                                                \
	do {                                                                  \
		const char *_g = (got), *_w = (want);                         \
		if (!ok(_g && _w ? strcmp(_g, _w) == 0 : _g == _w, __VA_ARGS__)) \
			printf("#   got:  '%s'\n#   want: '%s'\n",             \
			       _g ? _g : "(null)", _w ? _w : "(null)");        \
	} while (0)

#define is_int(got, want, ...)                                                \
	do {                                                                  \
		long long _g = (long long)(got), _w = (long long)(want);      \
		if (!ok(_g == _w, __VA_ARGS__))                               \
			printf("#   got:  %lld\n#   want: %lld\n", _g, _w);   \
	} while (0)

static inline int done_testing(void)
{
	printf("1..%d\n", tap_n);
	return tap_failed ? 1 : 0;
}

#endif
