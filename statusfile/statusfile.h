/* SPDX-License-Identifier: Apache-2.0 */
/* The health_status_file source: the app answers for itself (spec,
 * "health_status_file: the app answers for itself"; docs/design/verdict.md). */
#ifndef HEALTHD_STATUSFILE_H
#define HEALTHD_STATUSFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "base/err.h"
#include "base/verdict.h"

/* Name of every failure entry this source produces. */
#define STATUSFILE_ENTRY "<health_file>"
#define STATUSFILE_MAX_BYTES 4096
#define STATUSFILE_MAX_AGE 60

/* Pure: judges the bytes read from a status file (at most
 * STATUSFILE_MAX_BYTES: the reader stops there) at time now. Returns true when
 * they are valid UTF-8 whose line 1 says healthy and whose line 2 is within
 * STATUSFILE_MAX_AGE seconds of now, either side; otherwise false with reason
 * (naming the rule that failed, never quoting the bytes) in reason[0..n). */
bool statusfile_parse(const char *buf, size_t len, time_t now, char *reason,
		      size_t n);
/* The causes of the two reasons that carry the file's age, which changes
 * every second (health_entry.cause): a stale file logs one verdict line,
 * not one per refresh. */
#define STATUSFILE_CAUSE_STALE "status file: stale"
#define STATUSFILE_CAUSE_AHEAD "status file: ahead of the clock"
/* statusfile_parse, and not healthy either when line 2 is before start, the
 * app's current start in seconds since the epoch (0: not known), checked
 * after the age and before line 1 (issue 29: a file the previous run left is
 * no word about this one); *cause set to one of the two above when the age
 * rule failed, NULL otherwise. */
bool statusfile_parse_since(const char *buf, size_t len, time_t now, int64_t start,
			    char *reason, size_t n, const char **cause);

/* Reads path (following symlinks, never blocking, at most
 * STATUSFILE_MAX_BYTES: a larger file is judged on those) and judges it into
 * out, which must be initialised. Everything is a verdict: a missing file, one
 * that is not a regular file (a FIFO, a directory, a device, a socket: never
 * opened for a blocking read) or cannot be opened is an entry like any
 * content rule (docs/design/verdict.md). 0, or -ENOMEM. */
int statusfile_judge(const char *path, time_t now, struct verdict *out);

/* What the operator's view shows of the file: never its bytes, only what
 * parsed. */
struct statusfile_info {
	bool read;        /* a regular file was read */
	int64_t mtime;    /* seconds since the epoch */
	char word[10];    /* "healthy" or "unhealthy" as line 1 says, else "" */
	bool has_written; /* line 2 parsed */
	int64_t written;  /* line 2, seconds since the epoch */
	/* The app's current start it was judged against (seconds since the
	 * epoch, 0: none) and what marked it ("runtime file", "boot"): set by
	 * the caller that chose it. */
	int64_t start;
	char start_from[16];
};
/* statusfile_judge, filling info (zeroed first) as well. */
int statusfile_judge_info(const char *path, time_t now, struct verdict *out,
			  struct statusfile_info *info);
/* statusfile_judge_info with the app's current start (statusfile_parse_since). */
int statusfile_judge_since(const char *path, time_t now, int64_t start, struct verdict *out,
			   struct statusfile_info *info);
/* Pure: line 1's word and line 2's time, as far as they parse. */
void statusfile_peek(const char *buf, size_t len, struct statusfile_info *info);

#endif
