/* The health_status_file source (spec, "health_status_file: the app answers
 * for itself"; DESIGN.md §4).
 *
 * Format decisions the spec leaves open, taken conservatively (anything not
 * plainly two lines is "malformed", which is not healthy):
 * - Lines end at '\n'. Each line is trimmed of ASCII blanks (space, tab, CR,
 *   VT, FF), so CRLF files and padded values are accepted.
 * - A trailing newline after line 2, and further lines that are blank, are
 *   accepted. A third line with anything on it is malformed: the file is two
 *   lines, and a writer that appends instead of replacing would otherwise be
 *   judged on whatever it wrote first.
 * - A file that is empty or holds only blanks and newlines is "empty".
 * - Line 2 is decimal digits only (no sign, no fraction); more than fits in
 *   64 bits is malformed. A UTF-8 byte order mark is not stripped.
 * - A file over STATUSFILE_MAX_BYTES is refused as such rather than judged on
 *   a prefix: a prefix of a larger file is not what the app wrote.
 * The reasons name the rule that failed and never quote the file's bytes: the
 * report goes to anonymous callers, and the bytes at that path may not be the
 * bytes the app wrote. */
#include "statusfile/statusfile.h"

#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/err.h"

/* Shown paths are cut here (DESIGN.md §4). */
#define SHOWN_PATH_BYTES 256

static bool is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

/* Trims [*s, *s + *n) of blanks on both sides. */
static void trim(const char **s, size_t *n)
{
	while (*n > 0 && is_blank(**s)) {
		(*s)++;
		(*n)--;
	}
	while (*n > 0 && is_blank((*s)[*n - 1]))
		(*n)--;
}

/* Takes the next line from [*p, end): returns it trimmed in *line, *n and
 * advances *p past its '\n'. False when nothing is left. */
static bool next_line(const char **p, const char *end, const char **line, size_t *n)
{
	if (*p >= end)
		return false;
	const char *nl = memchr(*p, '\n', (size_t)(end - *p));
	const char *stop = nl ? nl : end;
	*line = *p;
	*n = (size_t)(stop - *p);
	*p = nl ? nl + 1 : end;
	trim(line, n);
	return true;
}

static bool all_blank(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!is_blank(s[i]) && s[i] != '\n')
			return false;
	return true;
}

/* Decimal digits only, no sign, at most INT64_MAX. */
static bool parse_seconds(const char *s, size_t n, int64_t *out)
{
	if (n == 0)
		return false;
	int64_t v = 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		int d = s[i] - '0';
		if (v > (INT64_MAX - d) / 10)
			return false;
		v = v * 10 + d;
	}
	*out = v;
	return true;
}

static bool word_is(const char *s, size_t n, const char *w)
{
	return n == strlen(w) && strncasecmp(s, w, n) == 0;
}

static bool fail(char *reason, size_t n, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static bool fail(char *reason, size_t n, const char *fmt, ...)
{
	if (n > 0) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(reason, n, fmt, ap);
		va_end(ap);
	}
	return false;
}

bool statusfile_parse(const char *buf, size_t len, time_t now, char *reason,
		      size_t n)
{
	const char *p = buf, *end = buf + len, *l1, *l2, *l3;
	size_t n1, n2, n3;

	if (n > 0)
		reason[0] = '\0';
	if (all_blank(buf, len))
		return fail(reason, n, "the status file is empty");
	next_line(&p, end, &l1, &n1);
	if (!next_line(&p, end, &l2, &n2) || (n2 == 0 && all_blank(p, (size_t)(end - p))))
		return fail(reason, n, "the status file has only one line; line 2 must be "
			    "the Unix timestamp at which it was written");
	bool healthy = word_is(l1, n1, "healthy");
	if (!healthy && !word_is(l1, n1, "unhealthy"))
		return fail(reason, n, "line 1 is neither healthy nor unhealthy");
	int64_t written;
	if (!parse_seconds(l2, n2, &written))
		return fail(reason, n, "line 2 is not a Unix timestamp in seconds");
	while (next_line(&p, end, &l3, &n3))
		if (n3 > 0)
			return fail(reason, n, "the status file has more than two lines");
	if (!healthy)
		return fail(reason, n, "the app reports unhealthy");
	/* Exactly STATUSFILE_MAX_AGE is fresh; a time in the future is fresh
	 * (the app's clock may run ahead of ours). */
	if ((int64_t)now > written && (int64_t)now - written > STATUSFILE_MAX_AGE)
		return fail(reason, n, "written %lld s ago; older than %d s counts as "
			    "unhealthy", (long long)((int64_t)now - written),
			    STATUSFILE_MAX_AGE);
	return true;
}

void statusfile_peek(const char *buf, size_t len, struct statusfile_info *info)
{
	const char *p = buf, *end = buf + len, *l1, *l2;
	size_t n1, n2;
	info->word[0] = '\0';
	info->has_written = false;
	if (!next_line(&p, end, &l1, &n1))
		return;
	if (word_is(l1, n1, "healthy") || word_is(l1, n1, "unhealthy"))
		snprintf(info->word, sizeof(info->word), "%s",
			 word_is(l1, n1, "healthy") ? "healthy" : "unhealthy");
	if (next_line(&p, end, &l2, &n2))
		info->has_written = parse_seconds(l2, n2, &info->written);
}

static const char *file_type_name(mode_t m)
{
	if (S_ISFIFO(m))
		return "a FIFO";
	if (S_ISDIR(m))
		return "a directory";
	if (S_ISCHR(m))
		return "a character device";
	if (S_ISBLK(m))
		return "a block device";
	if (S_ISSOCK(m))
		return "a socket";
	return "not a regular file";
}

/* Reads all of fd into buf (cap bytes), stopping at cap: *got == cap means
 * the file is at least that large. The read is bounded however the file grows
 * meanwhile. */
static int read_bounded(int fd, char *buf, size_t cap, size_t *got)
{
	size_t off = 0;
	while (off < cap) {
		ssize_t r = read(fd, buf + off, cap - off);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			break;
		off += (size_t)r;
	}
	*got = off;
	return 0;
}

/* Why the open of a status file failed, in words. */
static const char *open_error(int err)
{
	switch (err) {
	case ENOENT:
		return "does not exist";
	case ENOTDIR:
		return "does not exist (a component of its parent is not a directory)";
	case EACCES:
	case EPERM:
		return "cannot be read: permission denied";
	case ELOOP:
		return "cannot be opened: too many levels of symbolic links";
	case ENXIO:
		return "is a socket or a device with nothing behind it, not a regular file";
	case ENAMETOOLONG:
		return "cannot be opened: the path is too long";
	default:
		return "cannot be opened";
	}
}

/* What judge_path found. */
enum outcome { JUDGED_HEALTHY, JUDGED_UNHEALTHY, REFUSED };

static enum outcome say(enum outcome o, char *reason, size_t n, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static enum outcome say(enum outcome o, char *reason, size_t n, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(reason, n, fmt, ap);
	va_end(ap);
	return o;
}

/* Judges the file at path, with the reason in reason[0..n) unless healthy.
 * Anything but a regular file is REFUSED (spec: "A FIFO is refused outright
 * rather than reported as unhealthy-with-a-reason"), before any read. */
static enum outcome judge_path(const char *path, const char *shown, time_t now,
			       char *reason, size_t n, struct statusfile_info *info)
{
	struct stat st;
	/* Refuse by type before opening: opening a device can have effects of
	 * its own. The check is repeated on the open fd below, since the path
	 * may be replaced in between. */
	if (stat(path, &st) < 0)
		return say(JUDGED_UNHEALTHY, reason, n, "status file %s %s", shown,
			   open_error(errno));
	if (!S_ISREG(st.st_mode))
		return say(REFUSED, reason, n, "status file %s is %s; it must be a regular file",
			   shown, file_type_name(st.st_mode));
	/* O_NONBLOCK: a FIFO put in place after the stat must not park this
	 * thread waiting for a writer. */
	_cleanup_close_ int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		int e = errno;
		return say(e == ENXIO ? REFUSED : JUDGED_UNHEALTHY, reason, n, "status file %s %s",
			   shown, open_error(e));
	}
	if (fstat(fd, &st) < 0)
		return say(JUDGED_UNHEALTHY, reason, n, "status file %s cannot be read", shown);
	if (!S_ISREG(st.st_mode))
		return say(REFUSED, reason, n, "status file %s is %s; it must be a regular file",
			   shown, file_type_name(st.st_mode));
	if (st.st_size > STATUSFILE_MAX_BYTES)
		return say(JUDGED_UNHEALTHY, reason, n, "status file %s is larger than %d bytes",
			   shown, STATUSFILE_MAX_BYTES);
	char buf[STATUSFILE_MAX_BYTES + 1];
	size_t got = 0;
	if (read_bounded(fd, buf, sizeof(buf), &got) < 0)
		return say(JUDGED_UNHEALTHY, reason, n, "status file %s cannot be read", shown);
	/* The file grew after the fstat: the read stopped one byte past. */
	if (got > STATUSFILE_MAX_BYTES)
		return say(JUDGED_UNHEALTHY, reason, n, "status file %s is larger than %d bytes",
			   shown, STATUSFILE_MAX_BYTES);
	info->read = true;
	info->mtime = st.st_mtime;
	statusfile_peek(buf, got, info);
	return statusfile_parse(buf, got, now, reason, n) ? JUDGED_HEALTHY : JUDGED_UNHEALTHY;
}

int statusfile_judge(const char *path, time_t now, struct verdict *out, struct errbuf *err)
{
	struct statusfile_info info;
	return statusfile_judge_info(path, now, out, &info, err);
}

int statusfile_judge_info(const char *path, time_t now, struct verdict *out,
			  struct statusfile_info *info, struct errbuf *err)
{
	char shown[SHOWN_PATH_BYTES + 1], reason[SHOWN_PATH_BYTES + 256];

	memset(info, 0, sizeof(*info));
	err_clean(shown, sizeof(shown), path, SHOWN_PATH_BYTES);
	enum outcome o = judge_path(path, shown, now, reason, sizeof(reason), info);
	if (o == REFUSED)
		return errbuf_set(err, EINVAL, "%s", reason);
	out->healthy = o == JUDGED_HEALTHY;
	if (out->healthy)
		return 0;
	return verdict_add(out, STATUSFILE_ENTRY, "%s", reason);
}
