/* SPDX-License-Identifier: Apache-2.0 */
/* The systemd notify protocol (sd_notify(3)): READY once the listener is bound
 * and the config is valid, STATUS with the verdict in words, WATCHDOG from the
 * refresh loop only, STOPPING on the way out. Without NOTIFY_SOCKET every call
 * does nothing. */
#ifndef HEALTHD_NOTIFY_H
#define HEALTHD_NOTIFY_H

#include <stdint.h>

void notify_ready(const char *status);
void notify_status(const char *status);
void notify_stopping(void);
void notify_watchdog(void);
/* The watchdog period systemd asked for, in ms, or 0 when there is none. */
int64_t notify_watchdog_ms(void);

#endif
