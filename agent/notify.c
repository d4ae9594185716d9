/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/notify.h"

#include <stdio.h>

#include <systemd/sd-daemon.h>

#include "base/err.h"

/* Failures to notify are not errors of ours to report: without a listener
 * there is nobody to tell, and with one systemd reports the missing READY. */
static void send_status(const char *prefix, const char *status)
{
	char buf[1024];
	int n = snprintf(buf, sizeof(buf), "%sSTATUS=", prefix);
	if (n < 0 || (size_t)n >= sizeof(buf))
		return;
	/* A newline would start a new assignment: the status is one line. */
	err_clean(buf + n, sizeof(buf) - (size_t)n, status, sizeof(buf) - (size_t)n - 1);
	sd_notify(0, buf);
}

void notify_ready(const char *status)
{
	send_status("READY=1\n", status);
}

void notify_status(const char *status)
{
	send_status("", status);
}

void notify_stopping(void)
{
	sd_notify(0, "STOPPING=1\nSTATUS=stopping");
}

void notify_watchdog(void)
{
	sd_notify(0, "WATCHDOG=1");
}

int64_t notify_watchdog_ms(void)
{
	uint64_t usec = 0;
	if (sd_watchdog_enabled(0, &usec) <= 0)
		return 0;
	return (int64_t)(usec / 1000);
}
