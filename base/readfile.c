/* SPDX-License-Identifier: Apache-2.0 */
#include "base/readfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cleanup.h"

int readfile_fd(int fd, char *buf, size_t cap, size_t *got)
{
	size_t off = 0;
	while (off < cap) {
		ssize_t n = read(fd, buf + off, cap - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		off += (size_t)n;
	}
	*got = off;
	return 0;
}

static int read_all(const char *path, size_t max, char **out, size_t *len)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return -errno;
	struct stat st;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EBADFD;
	if (st.st_size > (off_t)max)
		return -EFBIG;
	_cleanup_free_ char *buf = malloc(max + 1);
	if (!buf)
		return -ENOMEM;
	size_t off;
	int r = readfile_fd(fd, buf, max + 1, &off);
	if (r < 0)
		return r;
	if (off > max)
		return -EFBIG;
	buf[off] = '\0';
	*out = TAKE_PTR(buf);
	*len = off;
	return 0;
}

void readfile_prefix_error(struct errbuf *err, const char *path)
{
	char shown[ERR_SHOWN_BYTES + 1];
	err_clean(shown, sizeof(shown), path, ERR_SHOWN_BYTES);
	errbuf_prefix(err, "%s", shown);
}

int readfile(const char *path, size_t max, char **out, size_t *len, struct errbuf *err)
{
	char shown[ERR_SHOWN_BYTES + 1];
	err_clean(shown, sizeof(shown), path, ERR_SHOWN_BYTES);
	return readfile_named(path, shown, max, out, len, err);
}

int readfile_named(const char *path, const char *shown, size_t max, char **out, size_t *len,
		   struct errbuf *err)
{
	int r = read_all(path, max, out, len);
	switch (r) {
	case 0:
		return 0;
	case -ENOENT:
		return errbuf_set(err, ENOENT, "%s: does not exist", shown);
	case -EBADFD:
		return errbuf_set(err, EINVAL, "%s: is not a regular file", shown);
	case -EFBIG:
		return errbuf_set(err, EFBIG, "%s: larger than %zu bytes", shown, max);
	default:
		return errbuf_set(err, -r, "%s: cannot be read: %s", shown, strerror(-r));
	}
}
