/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HEALTHD_CLOCK_H
#define HEALTHD_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Milliseconds on CLOCK_MONOTONIC: deadlines and ages. */
static inline int64_t clock_mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Milliseconds on CLOCK_REALTIME: times shown to people (RFC 3339 in
 * /status, the pollers' first and last seen). */
static inline int64_t clock_real_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* When this machine booted, in seconds on CLOCK_REALTIME: no app of this
 * boot started before it. CLOCK_BOOTTIME counts suspend too. */
static inline int64_t clock_boot_real_s(void)
{
	struct timespec r, b;
	clock_gettime(CLOCK_REALTIME, &r);
	clock_gettime(CLOCK_BOOTTIME, &b);
	int64_t ns = ((int64_t)r.tv_sec - b.tv_sec) * 1000000000 + (r.tv_nsec - b.tv_nsec);
	return ns / 1000000000;
}

/* Milliseconds left until deadline (monotonic ms), at least 0, at most INT32_MAX
 * so that it fits poll(2)'s timeout. */
static inline int clock_left_ms(int64_t deadline)
{
	int64_t left = deadline - clock_mono_ms();
	if (left < 0)
		return 0;
	return left > INT32_MAX ? INT32_MAX : (int)left;
}

#endif
