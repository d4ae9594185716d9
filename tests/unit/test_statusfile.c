/* SPDX-License-Identifier: Apache-2.0 */
/* Table tests for statusfile/statusfile.c: the pure rules of the status file,
 * then the reader against real files, FIFOs, sockets and symlinks. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "statusfile/statusfile.h"
#include "tests/lib/tap.h"

#define NOW 1771234567

#define STALE_AT(s) "written " s " s ago; older than 60 s counts as unhealthy"
static const char STALE[] = STALE_AT("61");
static const char EMPTY[] = "the status file is empty";
static const char ONE_LINE[] = "the status file has only one line; line 2 must be "
			       "the Unix timestamp at which it was written";
static const char BAD_WORD[] = "line 1 is neither healthy nor unhealthy";
static const char BAD_TIME[] = "line 2 is not a Unix timestamp in seconds";
#define AHEAD(s) "written " s " s in the future; more than 60 s ahead counts as " \
		 "unhealthy (line 2 must be in seconds, not milliseconds)"
static const char FUTURE[] = AHEAD("61");
static const char NOT_UTF8[] = "the status file cannot be read as text: it is not valid UTF-8";
static const char REPORTS[] = "the app reports unhealthy";

/* One parse's outcome: healthy with no reason (want NULL), or not healthy
 * with want as the reason. */
static void check_parse(bool h, const char *reason, const char *want, const char *what)
{
	if (!want) {
		ok(h, "%s: healthy", what);
		is_str(reason, "", "%s: no reason", what);
	} else {
		ok(!h, "%s: not healthy", what);
		is_str(reason, want, "%s: reason", what);
	}
}

static void test_parse(void)
{
	static const struct {
		const char *what, *in;
		const char *want; /* NULL: healthy */
	} cases[] = {
		{ "fresh healthy", "healthy\n1771234567\n", NULL },
		{ "no trailing newline", "healthy\n1771234567", NULL },
		{ "mixed case", "HeAlThY\n1771234567\n", NULL },
		{ "upper case", "HEALTHY\n1771234567\n", NULL },
		{ "CRLF", "healthy\r\n1771234567\r\n", NULL },
		{ "padded", "  healthy \t\n\t1771234567  \n", NULL },
		{ "blank lines after line 2", "healthy\n1771234567\n\n \n", NULL },
		{ "exactly 60 s old", "healthy\n1771234507\n", NULL },
		{ "61 s old", "healthy\n1771234506\n", STALE },
		{ "75 s old", "healthy\n1771234492\n",
		  "written 75 s ago; older than 60 s counts as unhealthy" },
		{ "epoch", "healthy\n0\n",
		  "written 1771234567 s ago; older than 60 s counts as unhealthy" },
		{ "exactly 60 s ahead", "healthy\n1771234627\n", NULL },
		{ "61 s ahead", "healthy\n1771234628\n", FUTURE },
		{ "milliseconds by mistake", "healthy\n1771234567000\n", AHEAD("1769463332433") },
		{ "far future", "healthy\n9223372036854775807\n", AHEAD("9223372035083541240") },
		{ "UINT64_MAX", "healthy\n18446744073709551615\n", AHEAD("18446744071938317048") },
		{ "unhealthy", "unhealthy\n1771234567\n", REPORTS },
		{ "unhealthy mixed case", "UnHealthy\n1771234567\n", REPORTS },
		{ "unhealthy and stale: stale is named", "unhealthy\n1\n",
		  "written 1771234566 s ago; older than 60 s counts as unhealthy" },
		{ "unhealthy and in the future: the age is named", "unhealthy\n1771234628\n",
		  FUTURE },
		{ "unknown word and stale: the age is named", "nope\n1771234506\n", STALE },
		{ "empty", "", EMPTY },
		{ "only newlines", "\n\n\n", EMPTY },
		{ "only blanks", " \t\r\n \n", EMPTY },
		{ "one line", "healthy", ONE_LINE },
		{ "one line with newline", "healthy\n", ONE_LINE },
		{ "one line then blank lines", "healthy\n\r\n\n", ONE_LINE },
		{ "unknown word", "ok\n1771234567\n", BAD_WORD },
		{ "word with suffix", "healthyish\n1771234567\n", BAD_WORD },
		{ "two words", "healthy yes\n1771234567\n", BAD_WORD },
		{ "empty line 1", "\n1771234567\n", BAD_WORD },
		{ "unknown word, one line", "garbage", ONE_LINE },
		{ "unknown word and bad number: line 2 is named", "nope\nsoon\n", BAD_TIME },
		{ "unhealthy and a bad number: line 2 is named", "unhealthy\nsoon\n", BAD_TIME },
		{ "unknown word, no line 2: line 2 is named", "nope\n", ONE_LINE },
		{ "BOM is not stripped", "\xef\xbb\xbfhealthy\n1771234567\n", BAD_WORD },
		{ "NUL in line 1", "heal\0thy\n1771234567\n", BAD_WORD },
		{ "bad number", "healthy\nsoon\n", BAD_TIME },
		{ "empty line 2 then more", "healthy\n\n1771234567\n", BAD_TIME },
		{ "negative", "healthy\n-5\n", BAD_TIME },
		{ "plus sign", "healthy\n+1771234567\n", NULL },
		{ "plus sign, padded", "healthy\n \t+1771234567 \r\n", NULL },
		{ "plus alone", "healthy\n+\n", BAD_TIME },
		{ "two plus signs", "healthy\n++1771234567\n", BAD_TIME },
		{ "plus then blank", "healthy\n+ 1771234567\n", BAD_TIME },
		{ "plus minus", "healthy\n+-1771234567\n", BAD_TIME },
		{ "fraction", "healthy\n1771234567.5\n", BAD_TIME },
		{ "milliseconds overflow", "healthy\n99999999999999999999\n", BAD_TIME },
		{ "one past UINT64_MAX", "healthy\n18446744073709551616\n", BAD_TIME },
		{ "leading zeros past 20 digits", "healthy\n00000000000001771234567\n", NULL },
		{ "leading zeros, then past UINT64_MAX", "healthy\n018446744073709551616\n",
		  BAD_TIME },
		{ "hex", "healthy\n0x10\n", BAD_TIME },
		{ "a colon after the digits (the byte after '9')", "healthy\n177123456:\n", BAD_TIME },
		{ "two numbers", "healthy\n1771234567 1\n", BAD_TIME },
		{ "third line ignored", "healthy\n1771234567\nextra\n", NULL },
		{ "third line after blank ignored", "healthy\n1771234567\n\nextra", NULL },
		{ "second timestamp ignored", "healthy\n1771234567\n1\nunhealthy\n", NULL },
		{ "third line does not rescue line 1", "unhealthy\n1771234567\nhealthy\n", REPORTS },
		{ "UTF-8 on line 3", "healthy\n1771234567\nall good \xc3\xbc \xe2\x82\xac "
		  "\xf0\x9f\x98\x80\n", NULL },
		{ "invalid UTF-8 after two good lines", "healthy\n1771234567\n\xff\n", NOT_UTF8 },
		{ "overlong encoding", "healthy\n1771234567\n\xc0\xaf\n", NOT_UTF8 },
		{ "surrogate", "healthy\n1771234567\n\xed\xa0\x80\n", NOT_UTF8 },
		{ "truncated character at the end", "healthy\n1771234567\n\xc3", NOT_UTF8 },
		{ "invalid UTF-8 on line 1", "\xffhealthy\n1771234567\n", NOT_UTF8 },
		{ "invalid UTF-8 beats a bad line 2", "healthy\nsoon\xff\n", NOT_UTF8 },
		{ "UTF-8 word on line 1", "h\xc3\xa9" "althy\n1771234567\n", BAD_WORD },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char reason[256] = "untouched";
		size_t len = strlen(cases[i].in);
		/* This input holds a NUL on purpose. */
		if (strstr(cases[i].what, "NUL"))
			len = sizeof("heal\0thy\n1771234567\n") - 1;
		bool h = statusfile_parse(cases[i].in, len, NOW, reason, sizeof(reason));
		/* The two reasons that carry the age, and only they, name a
		 * cause apart from their words. */
		const char *cause = "untouched", *want_cause = NULL;
		statusfile_parse_since(cases[i].in, len, NOW, 0, reason, sizeof(reason), &cause);
		if (cases[i].want && strncmp(cases[i].want, "written ", 8) == 0)
			want_cause = strstr(cases[i].want, " ago;") ? STATUSFILE_CAUSE_STALE
								     : STATUSFILE_CAUSE_AHEAD;
		is_str(cause, want_cause, "%s: cause", cases[i].what);
		check_parse(h, reason, cases[i].want, cases[i].what);
	}
}

/* Issue 29: written before the app's current start (the runtime file's
 * mtime, or the boot) is not healthy, fresh or not; 0 is "not known". */
static void test_since_start(void)
{
#define BEFORE(s) "written " s " s before the app's current start; a status file from " \
		  "before the start is not trusted"
	static const struct {
		const char *what, *in;
		int64_t start;
		const char *want; /* NULL: healthy */
	} cases[] = {
		{ "since start: no start known", "healthy\n1771234527\n", 0, NULL },
		{ "since start: written after the start", "healthy\n1771234560\n", NOW - 10, NULL },
		{ "since start: written the second of the start", "healthy\n1771234557\n", NOW - 10, NULL },
		{ "since start: written a second before the start", "healthy\n1771234556\n", NOW - 10,
		  BEFORE("1") },
		{ "since start: the previous run's, 30 s before a restart", "healthy\n1771234527\n", NOW - 10,
		  BEFORE("30") },
		{ "since start: before the start and stale: the age is named first", "healthy\n1771234000\n",
		  NOW - 10, STALE_AT("567") },
		{ "before the start and unhealthy: the start is named first",
		  "unhealthy\n1771234527\n", NOW - 10, BEFORE("30") },
		{ "since start: before the start and a bad word: the start first", "maybe\n1771234527\n",
		  NOW - 10, BEFORE("30") },
		{ "since start: a start in the future (a clock step) fails closed", "healthy\n1771234567\n",
		  NOW + 5, BEFORE("5") },
		{ "since start: a bad line 2 is named before the start", "healthy\nsoon\n", NOW - 10, BAD_TIME },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char reason[256] = "untouched";
		const char *cause;
		bool h = statusfile_parse_since(cases[i].in, strlen(cases[i].in), NOW,
						cases[i].start, reason, sizeof(reason), &cause);
		check_parse(h, reason, cases[i].want, cases[i].what);
	}
#undef BEFORE
}

/* A clock before 1970 (now < 0): the time written is still measured from
 * it, to the second, and judged by the same 60 s either side. */
static void test_clock_before_1970(void)
{
	char reason[256];
	bool h = statusfile_parse("healthy\n0\n", 10, -60, reason, sizeof(reason));
	check_parse(h, reason, NULL, "clock before 1970: written 60 s ahead of it is fresh");
	h = statusfile_parse("healthy\n0\n", 10, -61, reason, sizeof(reason));
	check_parse(h, reason, FUTURE, "clock before 1970: written 61 s ahead of it is not");
}

/* statusfile_peek, for the operator's view: the word as line 1 says it,
 * line 2 only when it is a time the view can print (seconds that fit in
 * milliseconds). */
static void test_peek(void)
{
	static const struct {
		const char *what, *in, *word;
		bool has_written;
		int64_t written;
	} cases[] = {
		{ "peek: a healthy file", "healthy\n1771234567\n", "healthy", true, 1771234567 },
		{ "peek: the word in any case is shown as written down", "UNHEALTHY\n+5\n",
		  "unhealthy", true, 5 },
		{ "peek: another word is none", "ok\n5\n", "", true, 5 },
		{ "peek: the last second that fits in ms", "healthy\n9223372036854775\n", "healthy",
		  true, 9223372036854775 },
		{ "peek: a second past what fits in ms is not shown", "healthy\n9223372036854776\n",
		  "healthy", false, 0 },
		{ "peek: no line 2", "healthy\n", "healthy", false, 0 },
		{ "peek: bytes that are not UTF-8 say nothing", "healthy\n5\n\xff", "", false, 0 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct statusfile_info info;
		memset(&info, 0x55, sizeof(info));
		statusfile_peek(cases[i].in, strlen(cases[i].in), &info);
		is_str(info.word, cases[i].word, "%s: the word", cases[i].what);
		is_int(info.has_written, cases[i].has_written, "%s: line 2 shown or not", cases[i].what);
		if (cases[i].has_written)
			is_int(info.written, cases[i].written, "%s: line 2", cases[i].what);
	}
}

/* The reason never quotes the file's bytes. */
static void test_never_quoted(void)
{
	static const char *inputs[] = {
		"MARKER-SECRET\n1771234567\n",
		"healthy\nMARKER-SECRET\n",
		"MARKER-SECRET\n1771234567\nMARKER\n",
		"MARKER-SECRET",
	};
	for (size_t i = 0; i < sizeof(inputs) / sizeof(inputs[0]); i++) {
		char reason[256];
		statusfile_parse(inputs[i], strlen(inputs[i]), NOW, reason, sizeof(reason));
		ok(!strstr(reason, "MARKER") && !strstr(reason, "SECRET"),
		   "input %zu is not quoted back (%s)", i, reason);
	}
	char small[8];
	statusfile_parse("x\n1\n", 4, NOW, small, sizeof(small));
	is_int(strlen(small), 7, "a small reason buffer is cut, not overrun");
}

static char dir[256];

static void path_of(char *buf, size_t n, const char *name)
{
	snprintf(buf, n, "%s/%s", dir, name);
}

static void write_file(const char *name, const char *s, size_t len)
{
	char p[512];
	path_of(p, sizeof(p), name);
	FILE *f = fopen(p, "w");
	if (!f || fwrite(s, 1, len, f) != len || fclose(f) != 0)
		ok(0, "cannot write %s", p);
}

/* The last status judge_case saw ("" when healthy). */
static char last_status[1024];

/* Judges dir/name and checks the outcome: want NULL for healthy, or a
 * substring of the single entry's status. */
static void judge_case(const char *what, const char *name, const char *want)
{
	char p[1024];
	path_of(p, sizeof(p), name);
	struct verdict v;
	verdict_init(&v);
	last_status[0] = '\0';
	v.healthy = !!want; /* must be overwritten */
	int r = statusfile_judge(p, NOW, &v);
	is_int(r, 0, "%s: judged, not a failed refresh", what);
	if (!want) {
		ok(v.healthy && v.n_entries == 0, "%s: healthy with no entries", what);
	} else {
		ok(!v.healthy && v.n_entries == 1, "%s: not healthy, one entry", what);
		if (v.n_entries == 1) {
			snprintf(last_status, sizeof(last_status), "%s", v.entries[0].status);
			is_str(v.entries[0].name, "<health_file>", "%s: entry name", what);
			if (!ok(strstr(v.entries[0].status, want) != NULL, "%s: reason", what))
				printf("#   got:  '%s'\n#   want: '%s'\n", v.entries[0].status, want);
		}
	}
	verdict_free(&v);
}

static void test_files(void)
{
	char p[1024], q[1024];
	const char *good = "healthy\n1771234567\n";

	write_file("good", good, strlen(good));
	write_file("stale", "healthy\n1771234000\n", 19);
	write_file("bad", "maybe\n1771234567\n", 17);
	write_file("empty", "", 0);
	static char big[STATUSFILE_MAX_BYTES + 1];
	memcpy(big, good, strlen(good));
	memset(big + strlen(good), '\n', sizeof(big) - strlen(good));
	write_file("big", big, sizeof(big));
	write_file("max", big, STATUSFILE_MAX_BYTES);
	/* Upstream judges the first 4096 bytes as if the file ended there. */
	static char buf[STATUSFILE_MAX_BYTES + 64];
	size_t pad = STATUSFILE_MAX_BYTES - 1 - 7; /* line 1 fills bytes 0..4094 */
	memcpy(buf, "healthy", 7);
	memset(buf + 7, ' ', pad);
	memcpy(buf + 7 + pad, "\n1771234567\n", 12);
	write_file("line2-beyond", buf, 7 + pad + 12);
	pad -= 9; /* line 2 starts at byte 4087: 9 of its 10 digits are read */
	memcpy(buf + 7 + pad, "\n1771234567\n", 12);
	write_file("line2-cut", buf, 7 + pad + 12);
	memcpy(buf, good, strlen(good));
	memset(buf + strlen(good), 'a', STATUSFILE_MAX_BYTES - strlen(good));
	memcpy(buf + STATUSFILE_MAX_BYTES - 1, "\xc3\xa9", 2); /* cut by the bound */
	write_file("utf8-cut", buf, STATUSFILE_MAX_BYTES + 1);
	memcpy(buf + STATUSFILE_MAX_BYTES - 1, "a\xff", 2); /* beyond the bound */
	write_file("bad-utf8-beyond", buf, STATUSFILE_MAX_BYTES + 1);
	write_file("three-lines", "healthy\n1771234567\nstarted by cron\n", 35);
	write_file("bad-utf8", "healthy\n1771234567\n\x80\n", 21);
	write_file("noperm", good, strlen(good));
	path_of(p, sizeof(p), "noperm");
	ok(chmod(p, 0) == 0, "a file nobody may read");
	path_of(p, sizeof(p), "fifo");
	ok(mkfifo(p, 0600) == 0, "make a FIFO");
	path_of(p, sizeof(p), "sub");
	mkdir(p, 0700);
	write_file("sub/inner", good, strlen(good));
	path_of(p, sizeof(p), "link");
	ok(symlink("good", p) == 0, "symlink to the file");
	path_of(p, sizeof(p), "dirlink");
	ok(symlink("sub", p) == 0, "symlink to a directory");
	path_of(p, sizeof(p), "dangling");
	ok(symlink("nowhere", p) == 0, "dangling symlink");
	path_of(p, sizeof(p), "loop");
	ok(symlink("loop", p) == 0, "symlink loop");
	path_of(p, sizeof(p), "sock");
	int s = socket(AF_UNIX, SOCK_STREAM, 0);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t plen = strlen(p);
	if (plen < sizeof(sa.sun_path))
		memcpy(sa.sun_path, p, plen + 1);
	ok(s >= 0 && plen < sizeof(sa.sun_path) && bind(s, (struct sockaddr *)&sa, sizeof(sa)) == 0, "bind a socket");

	/* Each case: the file (a name under dir), what the one entry's status
	 * says (NULL: healthy), and whether the path may appear in it (only
	 * for a file that does not exist, as it always has). */
	static const struct {
		const char *what, *name, *want;
		bool path_shown;
	} files[] = {
		{ "regular file", "good", NULL, false },
		{ "stale file", "stale", "written 567 s ago; older than 60 s", false },
		{ "unknown word", "bad", "line 1 is neither healthy nor unhealthy", false },
		{ "empty file", "empty", "the status file is empty", false },
		{ "missing file", "missing", "does not exist", true },
		{ "missing parent", "nodir/health", "does not exist", true },
		{ "parent is a file", "good/health", "does not exist", true },
		{ "dangling symlink", "dangling", "does not exist", true },
		/* Unreadable: an entry at once, in the agent's words only. */
		{ "FIFO", "fifo", "the status file is a FIFO; it must be a regular file", false },
		{ "directory", "sub", "the status file is a directory; it must be a regular file",
		  false },
		{ "socket", "sock", "the status file is a socket; it must be a regular file",
		  false },
		{ "character device", "../../../../../../../../dev/null",
		  "the status file is a character device; it must be a regular file", false },
		{ "symlink to a directory", "dirlink",
		  "the status file is a directory; it must be a regular file", false },
		{ "symlink loop", "loop",
		  "the status file cannot be opened: too many levels of symbolic links", false },
		{ "no permission", "noperm", "the status file cannot be read: permission denied",
		  false },
		{ "symlink followed", "link", NULL, false },
		{ "symlinked parent followed", "dirlink/inner", NULL, false },
	};
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		/* Root reads any file: nothing to deny. */
		if (strcmp(files[i].name, "noperm") == 0 && geteuid() == 0)
			continue;
		judge_case(files[i].what, files[i].name, files[i].want);
		if (files[i].want)
			ok(!strstr(last_status, dir) == !files[i].path_shown,
			   "%s: the status %s the path", files[i].what,
			   files[i].path_shown ? "names" : "does not name");
	}
	judge_case("file of exactly 4096 bytes", "max", NULL);
	judge_case("file over 4096 bytes: judged on the first 4096", "big", NULL);
	judge_case("line 2 starts at byte 4096: one line", "line2-beyond",
		   "the status file has only one line");
	judge_case("line 2 cut at byte 4096: parsed as read", "line2-cut",
		   "written 1594111111 s ago");
	judge_case("character cut at byte 4096: not UTF-8", "utf8-cut", "not valid UTF-8");
	judge_case("bytes after 4096 are never read", "bad-utf8-beyond", NULL);
	judge_case("a third line is ignored", "three-lines", NULL);
	judge_case("invalid UTF-8 after two good lines", "bad-utf8", "not valid UTF-8");

	/* The path is shown cleaned of control characters and cut at 256 bytes. */
	path_of(p, sizeof(p), "evil\n\x1b[31mname");
	struct verdict v;
	verdict_init(&v);
	statusfile_judge(p, NOW, &v);
	ok(v.n_entries == 1 && !strpbrk(v.entries[0].status, "\n\x1b") &&
		   strstr(v.entries[0].status, "evil??[31mname"),
	   "control characters in the path are cleaned (%s)",
	   v.n_entries ? v.entries[0].status : "");
	verdict_free(&v);
	int off = snprintf(q, sizeof(q), "%s/", dir);
	/* Components under NAME_MAX, so that the path is missing, not too long. */
	for (int i = 0; i < 6; i++, off += 100) {
		memset(q + off, 'a', 99);
		q[off + 99] = '/';
	}
	q[off - 1] = '\0';
	verdict_init(&v);
	statusfile_judge(q, NOW, &v);
	ok(v.n_entries == 1 && !strstr(v.entries[0].status, q) &&
		   strstr(v.entries[0].status, "a...") &&
		   strlen(v.entries[0].status) < 256 + 64,
	   "a long path is cut at 256 bytes");
	verdict_free(&v);
	close(s);
}

/* What decides a verdict line in the journal (agent/refresh.c): the
 * verdicts of a file judged at two moments, compared by state and cause. */
static void test_same_cause(void)
{
	static const char MISSING[] = "";
	static const struct {
		const char *what, *a, *b; /* file contents; MISSING: no file; b NULL: as a */
		time_t later;		  /* b is judged this much after a */
		bool same;
	} cases[] = {
		{ "stale, 5 s later", "healthy\n1771234000\n", NULL, 5, true },
		{ "ahead of the clock, 5 s later", "healthy\n1771239999\n", NULL, 5, true },
		{ "the app reports unhealthy, 5 s later", "unhealthy\n1771234567\n", NULL, 5, true },
		{ "missing, 5 s later", MISSING, NULL, 5, true },
		{ "stale, then ahead", "healthy\n1771234000\n", "healthy\n1771239999\n", 0, false },
		{ "stale, then the app reports unhealthy", "healthy\n1771234000\n",
		  "unhealthy\n1771234567\n", 0, false },
		{ "stale, then missing", "healthy\n1771234000\n", MISSING, 0, false },
		{ "stale, then healthy", "healthy\n1771234000\n", "healthy\n1771234567\n", 0, false },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char pa[1024], pb[1024];
		path_of(pa, sizeof(pa), "cause-a");
		path_of(pb, sizeof(pb), "cause-b");
		unlink(pa);
		unlink(pb);
		const char *b = cases[i].b ? cases[i].b : cases[i].a;
		if (cases[i].a != MISSING)
			write_file("cause-a", cases[i].a, strlen(cases[i].a));
		if (b != MISSING)
			write_file("cause-b", b, strlen(b));
		struct verdict va, vb;
		verdict_init(&va);
		verdict_init(&vb);
		statusfile_judge(pa, NOW, &va);
		/* A missing file's words name its path: the same path both times. */
		statusfile_judge(b == MISSING && cases[i].a == MISSING ? pa : pb,
				 NOW + cases[i].later, &vb);
		ok(verdict_same_cause(&va, &vb) == cases[i].same, "%s: %s", cases[i].what,
		   cases[i].same ? "same cause, no new verdict line" : "a new cause");
		verdict_free(&va);
		verdict_free(&vb);
	}
}

int main(void)
{
	test_parse();
	test_since_start();
	test_clock_before_1970();
	test_peek();
	test_never_quoted();
	snprintf(dir, sizeof(dir), "%s/statusfile.XXXXXX", P_tmpdir);
	if (!mkdtemp(dir)) {
		ok(0, "mkdtemp");
		return done_testing();
	}
	test_files();
	test_same_cause();
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "rm -rf -- '%s'", dir);
	ok(system(cmd) == 0, "clean up");
	return done_testing();
}
