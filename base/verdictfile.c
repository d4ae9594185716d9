/* SPDX-License-Identifier: Apache-2.0 */
#include "base/verdictfile.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cache.h"
#include "base/cleanup.h"

int verdictfile_format(bool healthy, int64_t unix_s, char *buf, size_t n)
{
	if (unix_s < 0)
		return -EINVAL;
	int w = snprintf(buf, n, "%s\n%" PRId64 "\n", healthy ? "healthy" : "unhealthy", unix_s);
	if (w < 0 || (size_t)w >= n)
		return -ENOSPC;
	return w;
}

bool verdictfile_healthy(const struct snapshot *s, int64_t now_ms)
{
	bool stale = s->max_age_ms > 0 && now_ms - s->mono_ms > s->max_age_ms;
	return s->verdict.healthy && !s->draining && !stale;
}

static int write_all(int fd, const char *p, size_t len)
{
	while (len > 0) {
		ssize_t w = write(fd, p, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

/* The steps after the temporary file exists; the caller removes it on
 * failure. The fsync before the rename is what keeps a crash from leaving
 * an empty file behind the new name (ext4 may commit the rename before the
 * data). The folder is not fsynced: a rename lost in a crash leaves the
 * previous, complete file, which ages out like any other. */
static int fill(int fd, const char *text, size_t len, const char **step)
{
	int r;
	if ((r = write_all(fd, text, len)) < 0)
		return *step = "writing", r;
	/* mkostemp makes it 0600; the guest agent reads as root, but an
	 * operator's `cat` should not need to. */
	if (fchmod(fd, 0644) < 0)
		return *step = "fchmod", -errno;
	if (fsync(fd) < 0)
		return *step = "fsync", -errno;
	return 0;
}

int verdictfile_write(const char *path, bool healthy, int64_t unix_s, struct errbuf *err)
{
	char text[VERDICTFILE_MAX];
	int len = verdictfile_format(healthy, unix_s, text, sizeof(text));
	if (len < 0)
		return errbuf_set(err, -len, "verdict file %s: time %" PRId64 " cannot be written",
				  path, unix_s);
	size_t pl = strlen(path);
	_cleanup_free_ char *tmp = malloc(pl + sizeof(".XXXXXX"));
	if (!tmp)
		return errbuf_set(err, ENOMEM, "out of memory");
	memcpy(tmp, path, pl);
	memcpy(tmp + pl, ".XXXXXX", sizeof(".XXXXXX"));
	_cleanup_close_ int fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		return errbuf_set(err, e, "verdict file %s: cannot create a temporary file "
				  "beside it: %s", path, strerror(e));
	}
	const char *step = "";
	int r = fill(fd, text, (size_t)len, &step);
	int c = close(fd);
	fd = -1;
	if (r == 0 && c < 0)
		r = -errno, step = "close";
	if (r == 0 && rename(tmp, path) < 0)
		r = -errno, step = "rename";
	if (r < 0) {
		unlink(tmp);
		return errbuf_set(err, -r, "verdict file %s: %s: %s", path, step, strerror(-r));
	}
	return 0;
}
