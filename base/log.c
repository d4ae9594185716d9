/* SPDX-License-Identifier: Apache-2.0 */
#include "base/log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <systemd/sd-journal.h>

/* Set once in log_init() before any thread starts; read-only afterwards
 * except for the priority, which a reload may change. */
static bool to_journal;
static atomic_int max_priority = LOG_INFO;

/* systemd sets JOURNAL_STREAM to "DEV:INODE" of the stream it connected
 * stderr to; only when stderr still is that stream do we talk to the journal
 * natively (sd_journal_print(3), "JOURNAL_STREAM" in systemd.exec(5)). */
static bool stderr_is_journal(void)
{
	const char *e = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;
	if (!e || sscanf(e, "%llu:%llu", &dev, &ino) != 2 || fstat(STDERR_FILENO, &st) < 0)
		return false;
	return st.st_dev == dev && st.st_ino == ino;
}

void log_init(void)
{
	to_journal = stderr_is_journal();
}

void log_set_max_priority(int prio)
{
	atomic_store(&max_priority, prio);
}

static const char *prio_name(int prio)
{
	static const char *const names[] = { "emerg", "alert", "crit", "error",
					     "warning", "notice", "info", "debug" };
	return prio >= 0 && prio <= LOG_DEBUG ? names[prio] : "?";
}

static void log_v(int prio, const char *const *fields, const char *fmt, va_list ap)
{
	if (prio > atomic_load(&max_priority))
		return;
	char msg[2048];
	vsnprintf(msg, sizeof(msg), fmt, ap);
	if (to_journal) {
		struct iovec iov[16];
		char m[2100], p[16];
		int n = 0;
		snprintf(m, sizeof(m), "MESSAGE=%s", msg);
		snprintf(p, sizeof(p), "PRIORITY=%d", prio);
		iov[n++] = (struct iovec){ m, strlen(m) };
		iov[n++] = (struct iovec){ p, strlen(p) };
		iov[n++] = (struct iovec){ (char *)"SYSLOG_IDENTIFIER=dstack-healthd", 32 };
		for (int i = 0; fields && fields[i] && n < 16; i++)
			iov[n++] = (struct iovec){ (char *)fields[i], strlen(fields[i]) };
		if (sd_journal_sendv(iov, n) >= 0)
			return;
	}
	/* One write per line, so lines from two threads never interleave. The
	 * journal's fields are for selecting entries; on stderr the message says
	 * it all. */
	char line[4096];
	int off = snprintf(line, sizeof(line), "dstack-healthd: %s: %s", prio_name(prio), msg);
	if (off < 0)
		return;
	if ((size_t)off >= sizeof(line) - 1)
		off = (int)sizeof(line) - 2;
	line[off++] = '\n';
	ssize_t w = write(STDERR_FILENO, line, (size_t)off);
	(void)w;
}

void log_msg(int prio, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	log_v(prio, NULL, fmt, ap);
	va_end(ap);
}

void log_fields(int prio, const char *const *fields, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	log_v(prio, fields, fmt, ap);
	va_end(ap);
}

bool log_limit_pass(struct log_limit *l, int64_t now, unsigned *suppressed)
{
	if (now < l->next) {
		l->suppressed++;
		return false;
	}
	*suppressed = l->suppressed;
	l->suppressed = 0;
	l->next = now + LOG_LIMIT_MS;
	return true;
}
