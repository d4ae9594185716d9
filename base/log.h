/* SPDX-License-Identifier: Apache-2.0 */
/* Logging: stderr in the foreground, the journal (with PRIORITY= and
 * structured fields) when stderr is connected to it. Log transitions, not
 * polls: see refresh.c. */
#ifndef HEALTHD_LOG_H
#define HEALTHD_LOG_H

#include <syslog.h>

void log_init(void);
/* Messages above this priority (LOG_DEBUG > LOG_INFO ...) are dropped. */
void log_set_max_priority(int prio);
void log_msg(int prio, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A message with extra journal fields: NULL-terminated "KEY=value" strings.
 * On stderr only the message is written. */
void log_fields(int prio, const char *const *fields, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif
