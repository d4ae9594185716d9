/* SPDX-License-Identifier: Apache-2.0 */
/* The verdict as an app's status file (issue 21): for an agent that runs as
 * a Compose sidecar on a stock dstack image, whose guest agent re-reads
 * requirements.health_status_file every 5 s. Two lines, "healthy" or
 * "unhealthy", then the Unix time of the write in seconds; replaced
 * atomically, so that the guest agent never reads a torn file. */
#ifndef HEALTHD_VERDICTFILE_H
#define HEALTHD_VERDICTFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

/* Room for the longest content: "unhealthy\n" and a 64-bit decimal. */
#define VERDICTFILE_MAX 40

/* Pure: the file's content into buf (n bytes, NUL-terminated); returns its
 * length, or -ENOSPC when it does not fit. A negative time is -EINVAL: the
 * reader's line 2 is an unsigned decimal. */
int verdictfile_format(bool healthy, int64_t unix_s, char *buf, size_t n);

struct snapshot;
/* Pure: whether the snapshot the public side serves now (the drain's
 * override included) says healthy: a stale one does not, as the public side
 * answers it. now is CLOCK_MONOTONIC ms. */
bool verdictfile_healthy(const struct snapshot *s, int64_t now_ms);

/* Replaces path with that content: a temporary file in the same folder
 * (so that the rename stays within one file system), written, fsynced,
 * made 0644, renamed over path. A reader sees the old file or the new one,
 * never a part of either. On failure the temporary file is removed, path is
 * left as it was, and err names path and the step that failed. */
int verdictfile_write(const char *path, bool healthy, int64_t unix_s, struct errbuf *err);

#endif
