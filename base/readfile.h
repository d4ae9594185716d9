/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HEALTHD_READFILE_H
#define HEALTHD_READFILE_H

#include <stddef.h>

#include "base/err.h"

/* Reads the whole of a small regular file into a new NUL-terminated buffer.
 * Never blocks (a FIFO or device is refused before any read) and never reads
 * more than max + 1 bytes, so a file that grows while read is still bounded.
 * On failure err names the file (cleaned) and what was wrong: -ENOENT "does
 * not exist", -EINVAL "is not a regular file", -EFBIG "larger than N bytes",
 * or another errno "cannot be read: ...". */
int readfile(const char *path, size_t max, char **out, size_t *len, struct errbuf *err);
/* The same, with err naming the file `name` instead of its path: for a file
 * whose errors are shown to anonymous callers. */
int readfile_named(const char *path, const char *name, size_t max, char **out, size_t *len,
		   struct errbuf *err);

/* Reads fd into buf until EOF or cap bytes, whichever comes first, retrying
 * on EINTR: the read is bounded however the file grows meanwhile. *got is
 * the count read; -errno of a failed read. */
int readfile_fd(int fd, char *buf, size_t cap, size_t *got);

/* Prefixes err with path, cleaned and cut as readfile() shows it: for the
 * parse errors of a file readfile() read. */
void readfile_prefix_error(struct errbuf *err, const char *path);

#endif
