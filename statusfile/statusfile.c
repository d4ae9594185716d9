/* SPDX-License-Identifier: Apache-2.0 */
/* The health_status_file source (docs/design/verdict.md, "Status file"; dstack's
 * page, "health_status_file: the app answers for itself").
 *
 * The same bytes give the same healthy/unhealthy as the upstream dstack agent
 * (it reads at most 4096 bytes as text, takes lines 1 and 2, ignores the
 * rest), with one deliberate difference where upstream fails open:
 * - At most STATUSFILE_MAX_BYTES are read; a larger file is judged on them as
 *   if it ended there (a line 2 that does not start within them is missing).
 * - What was read must be valid UTF-8, all of it (a character cut at the
 *   bound too), or the file is unreadable: not healthy.
 * - Lines end at '\n'; lines after the second are ignored. Each line is
 *   trimmed of ASCII blanks (space, tab, CR, VT, FF), so CRLF files and
 *   padded values are accepted. A UTF-8 byte order mark is not stripped.
 * - Line 2 is an unsigned 64-bit decimal, an optional leading '+' allowed.
 * - Fresh is within STATUSFILE_MAX_AGE of now on either side. Upstream judges
 *   any future time fresh forever, so an app that writes milliseconds by
 *   mistake would stay healthy after it dies: not here.
 * - Written before the app's current start (line 2 earlier than the start
 *   marker the caller passes: the runtime file's mtime, else the boot) is not
 *   healthy either, fresh or not: upstream would trust the previous run's
 *   "healthy" for up to 60 s after a restart (issue 29).
 * - When several rules fail, the reason names the one upstream checks first:
 *   line 2 (missing, not a number), then age, then line 1; the start comes
 *   after the age and before line 1.
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
#include "base/json.h"
#include "base/readfile.h"

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

/* Decimal digits with an optional leading '+', at most UINT64_MAX. */
static bool parse_seconds(const char *s, size_t n, uint64_t *out)
{
	if (n > 0 && s[0] == '+') {
		s++;
		n--;
	}
	if (n == 0)
		return false;
	uint64_t v = 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		unsigned d = (unsigned)(s[i] - '0');
		if (v > (UINT64_MAX - d) / 10)
			return false;
		v = v * 10 + d;
	}
	*out = v;
	return true;
}

static bool valid_utf8(const char *buf, size_t len)
{
	for (size_t i = 0; i < len;) {
		size_t k = json_utf8_len((const unsigned char *)buf + i, len - i);
		if (k == 0)
			return false;
		i += k;
	}
	return true;
}

/* b - a, saturated at UINT64_MAX (a may be negative: a clock before 1970). */
static uint64_t distance(int64_t a, uint64_t b)
{
	if (a < 0) {
		uint64_t m = (uint64_t)(-(a + 1)) + 1;
		return b > UINT64_MAX - m ? UINT64_MAX : b + m;
	}
	return b - (uint64_t)a;
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

/* The age rule: fresh within STATUSFILE_MAX_AGE of now, either side. The
 * reason carries the age, which moves every second: *cause names the rule. */
static bool fresh(uint64_t written, time_t now, char *reason, size_t n, const char **cause)
{
	int64_t t = (int64_t)now;
	if (t >= 0 && (uint64_t)t >= written) {
		uint64_t ago = (uint64_t)t - written;
		if (ago > STATUSFILE_MAX_AGE) {
			*cause = STATUSFILE_CAUSE_STALE;
			return fail(reason, n, "written %llu s ago; older than %d s counts as "
				    "unhealthy", (unsigned long long)ago, STATUSFILE_MAX_AGE);
		}
		return true;
	}
	/* Exactly STATUSFILE_MAX_AGE ahead is fresh, like exactly that old. */
	uint64_t ahead = distance(t, written);
	if (ahead > STATUSFILE_MAX_AGE) {
		*cause = STATUSFILE_CAUSE_AHEAD;
		return fail(reason, n, "written %llu s in the future; more than %d s ahead "
			    "counts as unhealthy (line 2 must be in seconds, not milliseconds)",
			    (unsigned long long)ahead, STATUSFILE_MAX_AGE);
	}
	return true;
}

/* Issue 29: after `systemctl restart app-compose` the previous run's
 * "healthy" is still fresh; whatever the app wrote before its current start
 * says nothing of this run. */
static bool since_start(uint64_t written, int64_t start, char *reason, size_t n)
{
	if (start <= 0 || written >= (uint64_t)start)
		return true;
	return fail(reason, n, "written %llu s before the app's current start; a status file "
		    "from before the start is not trusted",
		    (unsigned long long)((uint64_t)start - written));
}

bool statusfile_parse(const char *buf, size_t len, time_t now, char *reason,
		      size_t n)
{
	const char *cause;
	return statusfile_parse_since(buf, len, now, 0, reason, n, &cause);
}

bool statusfile_parse_since(const char *buf, size_t len, time_t now, int64_t start,
			    char *reason, size_t n, const char **cause)
{
	const char *p = buf, *end = buf + len, *l1, *l2;
	size_t n1, n2;
	uint64_t written;

	*cause = NULL;
	if (n > 0)
		reason[0] = '\0';
	if (!valid_utf8(buf, len))
		return fail(reason, n, "the status file cannot be read as text: it is not "
			    "valid UTF-8");
	if (all_blank(buf, len))
		return fail(reason, n, "the status file is empty");
	next_line(&p, end, &l1, &n1);
	if (!next_line(&p, end, &l2, &n2) || (n2 == 0 && all_blank(p, (size_t)(end - p))))
		return fail(reason, n, "the status file has only one line; line 2 must be "
			    "the Unix timestamp at which it was written");
	if (!parse_seconds(l2, n2, &written))
		return fail(reason, n, "line 2 is not a Unix timestamp in seconds");
	if (!fresh(written, now, reason, n, cause) || !since_start(written, start, reason, n))
		return false;
	if (word_is(l1, n1, "unhealthy"))
		return fail(reason, n, "the app reports unhealthy");
	if (!word_is(l1, n1, "healthy"))
		return fail(reason, n, "line 1 is neither healthy nor unhealthy");
	return true;
}

/* By the rules statusfile_parse applies: bytes that are not valid UTF-8 are
 * not text, so nothing of them parsed; line 2 as parse_seconds reads it, kept
 * only when it is a time the view can print (seconds that fit in ms). */
void statusfile_peek(const char *buf, size_t len, struct statusfile_info *info)
{
	const char *p = buf, *end = buf + len, *l1, *l2;
	size_t n1, n2;
	uint64_t written;
	info->word[0] = '\0';
	info->has_written = false;
	if (!valid_utf8(buf, len) || !next_line(&p, end, &l1, &n1))
		return;
	if (word_is(l1, n1, "healthy") || word_is(l1, n1, "unhealthy"))
		snprintf(info->word, sizeof(info->word), "%s",
			 word_is(l1, n1, "healthy") ? "healthy" : "unhealthy");
	if (next_line(&p, end, &l2, &n2) && parse_seconds(l2, n2, &written) &&
	    written <= (uint64_t)(INT64_MAX / 1000)) {
		info->has_written = true;
		info->written = (int64_t)written;
	}
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

/* Why the open of a status file failed, in words: the agent's, never the
 * path (upstream quotes both; the entry is served to anonymous callers). */
static const char *open_error(int err)
{
	switch (err) {
	case EACCES:
	case EPERM:
		return "the status file cannot be read: permission denied";
	case ELOOP:
		return "the status file cannot be opened: too many levels of symbolic links";
	case ENXIO:
		return "the status file is a socket or a device with nothing behind it; "
		       "it must be a regular file";
	case ENAMETOOLONG:
		return "the status file cannot be opened: its path is too long";
	case EISDIR:
		return "the status file is a directory; it must be a regular file";
	default:
		return "the status file cannot be opened";
	}
}

static bool say(char *reason, size_t n, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static bool say(char *reason, size_t n, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(reason, n, fmt, ap);
	va_end(ap);
	return false;
}

/* A missing file names its path, as it always has; any other failure to
 * open is in the agent's words only. */
static bool open_failed(int e, const char *shown, char *reason, size_t n)
{
	if (e == ENOENT)
		return say(reason, n, "status file %s does not exist", shown);
	if (e == ENOTDIR)
		return say(reason, n, "status file %s does not exist (a component of its "
			   "parent is not a directory)", shown);
	return say(reason, n, "%s", open_error(e));
}

/* Judges the file at path: true when healthy, else false with the reason in
 * reason[0..n). A file that is there but cannot be read (not a regular file,
 * no permission, a symlink loop) is unhealthy on the refresh that finds it,
 * as upstream judges it ("cannot read ..."): it is the app failing to hold up
 * its end, not the agent failing to ask (docs/design/verdict.md). */
static bool judge_path(const char *path, const char *shown, time_t now, int64_t start,
		       char *reason, size_t n, const char **cause, struct statusfile_info *info)
{
	struct stat st;
	/* Judge by type before opening: opening a device can have effects of
	 * its own. The check is repeated on the open fd below, since the path
	 * may be replaced in between. */
	if (stat(path, &st) < 0)
		return open_failed(errno, shown, reason, n);
	if (!S_ISREG(st.st_mode))
		return say(reason, n, "the status file is %s; it must be a regular file",
			   file_type_name(st.st_mode));
	/* O_NONBLOCK: a FIFO put in place after the stat must not park this
	 * thread waiting for a writer. */
	_cleanup_close_ int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return open_failed(errno, shown, reason, n);
	if (fstat(fd, &st) < 0)
		return say(reason, n, "the status file cannot be read");
	if (!S_ISREG(st.st_mode))
		return say(reason, n, "the status file is %s; it must be a regular file",
			   file_type_name(st.st_mode));
	char buf[STATUSFILE_MAX_BYTES];
	size_t got = 0;
	/* A larger file is judged on its first bytes. */
	if (readfile_fd(fd, buf, sizeof(buf), &got) < 0)
		return say(reason, n, "the status file cannot be read");
	info->read = true;
	info->mtime = st.st_mtime;
	statusfile_peek(buf, got, info);
	return statusfile_parse_since(buf, got, now, start, reason, n, cause);
}

int statusfile_judge(const char *path, time_t now, struct verdict *out)
{
	struct statusfile_info info;
	return statusfile_judge_info(path, now, out, &info);
}

int statusfile_judge_info(const char *path, time_t now, struct verdict *out,
			  struct statusfile_info *info)
{
	return statusfile_judge_since(path, now, 0, out, info);
}

int statusfile_judge_since(const char *path, time_t now, int64_t start, struct verdict *out,
			   struct statusfile_info *info)
{
	char shown[ERR_SHOWN_BYTES + 1], reason[ERR_SHOWN_BYTES + 256];
	const char *cause = NULL;

	memset(info, 0, sizeof(*info));
	err_clean(shown, sizeof(shown), path, ERR_SHOWN_BYTES);
	out->healthy = judge_path(path, shown, now, start, reason, sizeof(reason), &cause, info);
	if (out->healthy)
		return 0;
	return verdict_add_cause(out, STATUSFILE_ENTRY, cause, "%s", reason);
}
