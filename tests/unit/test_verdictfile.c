/* SPDX-License-Identifier: Apache-2.0 */
/* The verdict file (base/verdictfile.h): its content as a table, which
 * served snapshots say healthy as a table, and the atomic replace: a reader
 * looping on the file while it is rewritten 10,000 times never sees anything
 * but a whole file; a folder it cannot write and a missing folder fail with
 * the path named and leave nothing behind. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cache.h"
#include "base/verdictfile.h"
#include "tests/lib/tap.h"

static const struct {
	bool healthy;
	int64_t t;
	int r;
	const char *want;
} fmt_cases[] = {
	{ true, 1700000000, 19, "healthy\n1700000000\n" },
	{ false, 1700000000, 21, "unhealthy\n1700000000\n" },
	{ true, 0, 10, "healthy\n0\n" },
	{ false, INT64_MAX, 30, "unhealthy\n9223372036854775807\n" },
	{ true, -1, -EINVAL, NULL },
};

static void test_format(void)
{
	for (size_t i = 0; i < sizeof(fmt_cases) / sizeof(fmt_cases[0]); i++) {
		char buf[VERDICTFILE_MAX];
		int r = verdictfile_format(fmt_cases[i].healthy, fmt_cases[i].t, buf, sizeof(buf));
		is_int(r, fmt_cases[i].r, "format %zu: length", i);
		if (fmt_cases[i].want)
			is_str(buf, fmt_cases[i].want, "format %zu: content", i);
	}
	char small[8];
	is_int(verdictfile_format(true, 1, small, sizeof(small)), -ENOSPC, "format: cut is an error");
}

static const struct {
	const char *name;
	bool healthy, draining;
	int64_t judged, max_age, now;
	bool want;
} served_cases[] = {
	{ "healthy, fresh", true, false, 1000, 25000, 2000, true },
	{ "unhealthy", false, false, 1000, 25000, 2000, false },
	{ "the drain's override", false, true, 1000, 0, 2000, false },
	{ "healthy but stale", true, false, 1000, 25000, 26001, false },
	{ "healthy at exactly its limit", true, false, 1000, 25000, 26000, true },
	{ "no limit (0) never stale", true, false, 1000, 0, 999999, true },
	{ "a healthy verdict marked draining", true, true, 1000, 0, 2000, false },
};

static void test_served(void)
{
	for (size_t i = 0; i < sizeof(served_cases) / sizeof(served_cases[0]); i++) {
		struct snapshot s;
		memset(&s, 0, sizeof(s));
		s.verdict.healthy = served_cases[i].healthy;
		s.draining = served_cases[i].draining;
		s.mono_ms = served_cases[i].judged;
		s.max_age_ms = served_cases[i].max_age;
		ok(verdictfile_healthy(&s, served_cases[i].now) == served_cases[i].want, "served: %s",
		   served_cases[i].name);
	}
}

/* On tmpfs when there is one: 10,000 fsyncs on a busy disk take a minute,
 * and what is tested (the rename) is the same on either. */
static char dir[64];
static char path[256];
static atomic_bool done;
static atomic_ulong reads, torn;

static bool whole(const char *b, ssize_t n)
{
	const char *nl;
	if (n <= 0 || b[n - 1] != '\n')
		return false;
	if (!strncmp(b, "healthy\n", 8))
		nl = b + 8;
	else if (!strncmp(b, "unhealthy\n", 10))
		nl = b + 10;
	else
		return false;
	const char *end = b + n - 1;
	if (nl >= end)
		return false;
	for (const char *p = nl; p < end; p++)
		if (*p < '0' || *p > '9')
			return false;
	return true;
}

static void *reader(void *arg)
{
	char b[64];
	while (!atomic_load(&done)) {
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			atomic_fetch_add(&torn, 1); /* a missing file is a torn replace too */
			continue;
		}
		ssize_t n = read(fd, b, sizeof(b));
		close(fd);
		atomic_fetch_add(&reads, 1);
		if (!whole(b, n))
			atomic_fetch_add(&torn, 1);
	}
	return NULL;
}

static size_t entries(const char *d)
{
	DIR *dh = opendir(d);
	size_t n = 0;
	if (!dh)
		return 0;
	for (struct dirent *e; (e = readdir(dh));)
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			n++;
	closedir(dh);
	return n;
}

/* The file's first n-1 bytes, "" when it cannot be read. */
static void slurp(const char *p, char *b, size_t n)
{
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	ssize_t got = fd >= 0 ? read(fd, b, n - 1) : -1;
	if (fd >= 0)
		close(fd);
	b[got > 0 ? got : 0] = '\0';
}

static void test_atomic(void)
{
	struct errbuf err = { "" };
	ok(verdictfile_write(path, true, 1, &err) == 0, "first write: %s", err.msg);
	pthread_t t;
	pthread_create(&t, NULL, reader, NULL);
	int failed = 0;
	for (int i = 0; i < 10000; i++)
		if (verdictfile_write(path, i % 2, 1700000000 + i * 1000003LL, &err) < 0)
			failed++;
	atomic_store(&done, true);
	pthread_join(t, NULL);
	is_int(failed, 0, "10,000 writes succeed");
	ok(atomic_load(&reads) > 0, "the reader read %lu times", atomic_load(&reads));
	is_int(atomic_load(&torn), 0, "the reader never saw a partial or missing file");
	is_int(entries(dir), 1, "no temporary file is left beside it");
	char b[64];
	slurp(path, b, sizeof(b));
	char want[64];
	verdictfile_format(9999 % 2, 1700000000 + 9999 * 1000003LL, want, sizeof(want));
	is_str(b, want, "the last write is what stays");
	struct stat st;
	ok(stat(path, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0777) == 0644,
	   "a regular file, mode 0644");
}

/* A folder it cannot write: read-only for root too (a read-only mount in
 * a mount namespace of this process), else by its mode. In a chroot (the
 * Debian 13 step) "/" is no mount point and cannot be made private: the
 * bind mount is made anyway, in the private namespace tests/e2e/trixie.sh
 * runs in; root ignores a folder's mode, so without it the test would
 * prove nothing there. */
static void test_readonly(void)
{
	char ro[300];
	snprintf(ro, sizeof(ro), "%s/ro", dir);
	mkdir(ro, 0755);
	char p[320];
	snprintf(p, sizeof(p), "%s/status", ro);
	struct errbuf err = { "" };
	ok(verdictfile_write(p, true, 5, &err) == 0, "writable before: %s", err.msg);
	bool mounted = unshare(CLONE_NEWNS) == 0 &&
		       (mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0 || errno == EINVAL) &&
		       mount(ro, ro, NULL, MS_BIND, NULL) == 0 &&
		       mount(NULL, ro, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY, NULL) == 0;
	if (!mounted)
		chmod(ro, 0555);
	int r = verdictfile_write(p, false, 6, &err);
	ok(r < 0, "a read-only folder fails (%s)", mounted ? "read-only mount" : "mode 0555");
	ok(strstr(err.msg, p) != NULL, "the error names the path: %s", err.msg);
	char b[64];
	slurp(p, b, sizeof(b));
	is_str(b, "healthy\n5\n", "the file there is left as it was");
	is_int(entries(ro), 1, "nothing is left beside it");
	if (mounted)
		umount(ro);
	chmod(ro, 0755);
	unlink(p);
	rmdir(ro);
}

static void test_missing_dir(void)
{
	char p[320];
	snprintf(p, sizeof(p), "%s/no-such-folder/status", dir);
	struct errbuf err = { "" };
	int r = verdictfile_write(p, true, 5, &err);
	is_int(r, -ENOENT, "a path in a missing folder: ENOENT");
	ok(strstr(err.msg, p) != NULL, "the error names the path: %s", err.msg);
}

int main(void)
{
	struct stat st;
	snprintf(dir, sizeof(dir), "%s/test_verdictfile.XXXXXX",
		 stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) ? "/dev/shm" : "/tmp");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(path, sizeof(path), "%s/status", dir);
	test_format();
	test_served();
	test_atomic();
	test_missing_dir();
	test_readonly();
	unlink(path);
	rmdir(dir);
	return done_testing();
}
