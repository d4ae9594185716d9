/* SPDX-License-Identifier: Apache-2.0 */
/* Logging: stderr in the foreground, the journal (with PRIORITY= and
 * structured fields) when stderr is connected to it. Log transitions, not
 * polls: see refresh.c. */
#ifndef HEALTHD_LOG_H
#define HEALTHD_LOG_H

#include <stdbool.h>
#include <stdint.h>
#include <syslog.h>

void log_init(void);
/* Messages above this priority (LOG_DEBUG > LOG_INFO ...) are dropped. */
void log_set_max_priority(int prio);
void log_msg(int prio, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A message with extra journal fields: NULL-terminated "KEY=value" strings.
 * On stderr only the message is written. */
void log_fields(int prio, const char *const *fields, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* One cause's lines, at most one every LOG_LIMIT_MS, for what a client
 * can cause once per connection (a flood must not flood the journal): the
 * first line of a cause is logged, the next ones within LOG_LIMIT_MS are
 * counted, and the next line logged says how many were not. Pure; a
 * limiter belongs to one thread. */
#define LOG_LIMIT_MS 10000
struct log_limit {
	int64_t next;        /* no line before then (0: any time; times are >= 0) */
	unsigned suppressed; /* lines not logged since the last one */
};
/* Whether a line of this cause is logged at now; when it is, *suppressed
 * says how many were not since the last one (and the count starts again). */
bool log_limit_pass(struct log_limit *l, int64_t now, unsigned *suppressed);

#endif
