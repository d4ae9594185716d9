/* SPDX-License-Identifier: Apache-2.0 */
/* nerdctl_list against tests/fakes/nerdctl (a stand-in that prints what
 * nerdctl 2.x prints and records how it was run), one scenario per row:
 * the parsed facts, the error texts, the arguments passed, what the child
 * inherited, the time taken, and that no process is left behind. Run from
 * the top of the source tree (tests/run does). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/clock.h"
#include "base/verdict.h"
#include "runtime/container.h"
#include "runtime/nerdctl.h"
#include "runtime/probes.h"
#include "tests/lib/tap.h"

#define FAKE "tests/fakes/nerdctl"

#define WEB "web-1|running|1|0|healthy|1795983001500000000|1795983061500000001|0\n"
#define DB "db-1|running|1|0|(none)|1795983001250000000|0|0\n"
#define WORKER "worker-1|exited|0|0|healthy|1795983001000000000|1795983090000000000|0\n"
#define API "api-1|running|1|0|healthy|1796025600000000000|1795983090000000000|0\n"
/* nerdctl compose run sets no com.docker.compose.oneoff label. */
#define ONEOFF "web-run-1|exited|0|0|(none)|1795983300000000000|0|0\n"
#define PAUSED "web-2|paused|0|1|healthy|1795983001500000000|1795983061500000001|0\n"
#define STOPPING "web-3|running|1|0|healthy|1795983001500000000|1795983061500000001|0\n"
#define QUEUE "queue-1|running|1|0|(none)|1795983120250000000|0|0\n"
#define AS_IT_PRINTS "web-healthy.json\nweb-paused.json\nqueue-healthcheck-not-run.json\n"
#define CREATED "cache-1|created|0|0|(none)|0|0|0\n"
#define DB_ID "68150cfc45bd62a7a166bb670b0a71ae123ece23eecdfe60aaf0a84e0bcb703d"
#define ALL "web-healthy.json\nother-project.json\ndb-no-health.json\n" \
	"worker-healthy-stopped.json\napi-healthy-before-start.json\n"  \
	"run-oneoff.json\ncreated.json\n"
#define THREE "web-healthy.json\ndb-no-health.json\nworker-healthy-stopped.json\n"
#define PAUSED_NUMBER "web-healthy.json\nunhealthy-paused-number.json\n"
#define FATAL "time=\"2026-01-01T00:00:00Z\" level=fatal msg="

/* A scenario that runs the fake (a Python script) several times gets a
 * deadline that a loaded machine's slow interpreter start-ups fit in. */
struct scenario {
	const char *what;
	const char *containers; /* the fake's `containers` file */
	const char *controls;   /* space-separated control files to create */
	const char *ns, *snapshotter, *address;
	int budget_ms;          /* the refresh deadline, from now */
	int want_r;
	const char *want;       /* facts, one line per container; or error text */
	/* Elapsed: the upper bounds say "returned by its deadline" with slack
	 * for a loaded machine, not how fast; the lower ones that a timeout was
	 * not cut short. */
	int min_ms, max_ms;
	int invocations;        /* lines in argv.log; -1: not checked */
	/* The verdict's entries ("name=status" lines, "" healthy); NULL: not
	 * judged. */
	const char *verdict;
};

static const struct scenario scenarios[] = {
	{ "every kind of container; flags passed", ALL, "", "dstack", "overlayfs",
	  "/run/containerd/containerd.sock", 10000, 0,
	  WEB DB WORKER API ONEOFF CREATED, 0, 10000, 2,
	  /* The run container is judged: nerdctl gives it no oneoff label. */
	  "api-1=starting (last health check predates the current start)\n"
	  "web-run-1=exited (last health check: none yet)\n"
	  "worker-1=exited (last health check: healthy)\n" },
	/* nerdctl 2.x: Restarting true while running (a restart policy), paused
	 * as Running false, a healthcheck that has not run: no State.Health. */
	{ "as nerdctl 2.x prints: restarting, paused, no health yet", AS_IT_PRINTS, "",
	  "dstack", NULL, NULL, 10000, 0, WEB PAUSED QUEUE, 0, 10000, 2,
	  "queue-1=starting (no health check has run yet)\n"
	  "web-2=paused (last health check: healthy)\n" },
	/* Issue 29: nerdctl has no events; `nerdctl stop` labels the container
	 * explicitly stopped before it signals, and the next refresh sees it. */
	{ "being stopped: still running and healthy, labelled explicitly stopped",
	  "web-healthy.json\nweb-stopping.json\n", "", "dstack", NULL, NULL, 10000, 0,
	  WEB STOPPING, 0, 10000, 2, "web-3=stopping (last health check: healthy)\n" },
	{ "removed between ps and inspect, in containerd's words: gone once ps confirms",
	  "db-no-health.json\n", "removed inspect.containerd", "dstack", NULL, NULL, 30000, 0,
	  "", 0, 30000, 3 },
	{ "the same in a batch: the others inspected one by one", THREE,
	  "removed inspect.containerd", "dstack", NULL, NULL, 30000, 0, WEB WORKER, 0, 30000, 6 },
	{ "no namespace/snapshotter/address", THREE, "", NULL, NULL, NULL, 10000, 0,
	  WEB DB WORKER, 0, 10000, 2 },
	{ "stderr flooded, output still read", THREE, "ps.noisy inspect.noisy", "dstack",
	  NULL, NULL, 10000, 0, WEB DB WORKER, 0, 10000, 2 },
	{ "nothing created yet", "", "", "dstack", NULL, NULL, 10000, 0, "", 0, 10000, 1 },
	{ "batch fails, one removed: the others inspected one by one, ps confirms", THREE,
	  "inspect.batch-fail removed", "dstack", NULL, NULL, 30000, 0, WEB WORKER, 0, 30000, 6 },
	{ "the only container removed: skipped once ps confirms", "db-no-health.json\n",
	  "removed", "dstack", NULL, NULL, 30000, 0, "", 0, 30000, 3 },
	{ "inspect says no such container, ps still lists it", THREE, "inspect.nosuch",
	  "dstack", NULL, NULL, 30000, -EIO, "nerdctl inspect: says container 68150cfc45bd "
	  "does not exist, but ps still lists it", 0, 30000, 6 },
	{ "inspect leaves a container out and exits 0", THREE, "removed inspect.quiet",
	  "dstack", NULL, NULL, 30000, -ENODATA,
	  "nerdctl inspect: no answer for container 68150cfc45bd", 0, 30000, 4 },
	{ "every inspect refused: the first one-by-one failure fails the list", THREE,
	  "inspect.fail", "dstack", NULL, NULL, 30000, -EIO,
	  "nerdctl inspect: exited with status 1: " FATAL "\"failed to dial", 0, 30000, 3 },
	{ "an unhealthy container's inspect cannot be read (Paused: 0)", PAUSED_NUMBER, "",
	  "dstack", NULL, NULL, 10000, -EINVAL, "nerdctl inspect: container 1: State.Paused: "
	  "expected a boolean, got a number", 0, 10000, 2 },
	{ "the same, one by one: never skipped", PAUSED_NUMBER, "inspect.batch-fail",
	  "dstack", NULL, NULL, 30000, -EINVAL, "nerdctl inspect: container 0: State.Paused: "
	  "expected a boolean, got a number", 0, 30000, 4 },
	{ "ps ignores --filter: another project's container is dropped", ALL, "ps.nofilter",
	  "dstack", NULL, NULL, 10000, 0, WEB DB WORKER API ONEOFF CREATED, 0, 10000, 2 },
	{ "ps fails", THREE, "ps.fail", "dstack", NULL, NULL, 10000, -EIO,
	  "nerdctl ps: exited with status 1: " FATAL "\"failed to dial", 0, 10000, 1 },
	{ "ps hangs: killed at 5 s", THREE, "ps.hang", "dstack", NULL, NULL, 10000, -ETIMEDOUT,
	  "nerdctl ps: timed out after 5 s", 4950, 9000, 1 },
	/* Under the 5 s a command gets, so that the deadline is what kills it,
	 * with room for the ps before it (an interpreter's start) on a loaded
	 * machine: a ps cut short would fail as the ps, not the inspect. */
	{ "inspect hangs: killed at the refresh deadline", THREE, "inspect.hang", "dstack",
	  NULL, NULL, 4500, -ETIMEDOUT, "nerdctl inspect: timed out after ", 4450, 8000, 2 },
	{ "deadline already passed", THREE, "", "dstack", NULL, NULL, 0, -ETIMEDOUT,
	  "nerdctl ps: the refresh deadline passed before it could run", 0, 1000, -1 },
	{ "ps prints garbage", THREE, "ps.garbage", "dstack", NULL, NULL, 10000, -EINVAL,
	  "nerdctl ps: line 1 is not a container id", 0, 10000, 1 },
	{ "inspect prints garbage", THREE, "inspect.garbage", "dstack", NULL, NULL, 10000,
	  -EINVAL, "nerdctl inspect: malformed JSON", 0, 10000, 2 },
	{ "ps output over the cap", THREE, "ps.big", "dstack", NULL, NULL, 10000, -EFBIG,
	  "nerdctl ps: output exceeds 16777216 bytes", 0, 10000, 1 },
	{ "inspect output over the cap", THREE, "inspect.big", "dstack", NULL, NULL, 10000,
	  -EFBIG, "nerdctl inspect: output exceeds 16777216 bytes", 0, 10000, 2 },
};

static char *read_all(const char *dir, const char *name)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	_cleanup_fclose_ FILE *f = fopen(path, "r");
	if (!f)
		return strdup("");
	char *buf = calloc(1, 1 << 16);
	if (buf)
		buf[fread(buf, 1, (1 << 16) - 1, f)] = '\0';
	return buf;
}

static void put(const char *dir, const char *name, const char *content)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	_cleanup_fclose_ FILE *f = fopen(path, "w");
	if (f)
		fputs(content, f);
}

static void render(const struct container_list *l, char *buf, size_t n)
{
	size_t off = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < l->n && off < n; i++) {
		const struct container *c = &l->v[i];
		off += (size_t)snprintf(buf + off, n - off, "%s|%s|%d|%d|%s|%lld|%lld|%d\n",
					c->name, c->state, c->running, c->paused,
					c->health ? c->health : "(none)",
					(long long)c->started_at_ns,
					(long long)c->health_log_end_ns, c->oneoff);
	}
}

/* Children of this process still around (running or zombie). */
static int own_children(void)
{
	DIR *d = opendir("/proc");
	int n = 0;
	struct dirent *e;
	while (d && (e = readdir(d))) {
		char path[300], buf[512];
		snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
		_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
		ssize_t len = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
		if (len <= 0)
			continue;
		buf[len] = '\0';
		char *p = strrchr(buf, ')');
		int ppid = 0;
		if (p && sscanf(p + 2, "%*c %d", &ppid) == 1 && ppid == getpid())
			n++;
	}
	if (d)
		closedir(d);
	return n;
}

/* A pid from hang.pids that still runs (gone or a zombie counts as dead). */
static bool alive(int pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t len = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
	if (len <= 0)
		return false;
	buf[len] = '\0';
	char *p = strrchr(buf, ')');
	return p && p[1] == ' ' && p[2] != 'Z' && p[2] != 'X';
}

static void check_hang_pids(const char *dir, const char *what)
{
	_cleanup_free_ char *pids = read_all(dir, "hang.pids");
	int a, b, n = 0;
	char *s = pids;
	int off;
	while (s && sscanf(s, "%d %d%n", &a, &b, &off) == 2) {
		/* SIGKILL is delivered at once but a grandchild finishes dying
		 * on its own time (a loaded machine's): allow it ten seconds,
		 * far less than its sleep. */
		int64_t until = clock_mono_ms() + 10000;
		while ((alive(a) || alive(b)) && clock_mono_ms() < until)
			usleep(10000);
		ok(!alive(a) && !alive(b), "%s: fake %d and its child %d are gone", what, a, b);
		s += off;
		n++;
	}
	ok(n > 0, "%s: the fake did hang (%d recorded)", what, n);
}

static void check_argv(const char *dir, const struct scenario *sc)
{
	_cleanup_free_ char *log = read_all(dir, "argv.log");
	int lines = 0;
	for (char *p = log; p && (p = strchr(p, '\n')); p++)
		lines++;
	if (sc->invocations >= 0)
		is_int(lines, sc->invocations, "%s: nerdctl run %d times", sc->what,
		       sc->invocations);
	char want[512];
	snprintf(want, sizeof(want), "%s%s%s%s%s%s%s%s%s\"ps\", \"-a\", \"-q\", \"--no-trunc\", "
		 "\"--filter\", \"label=com.docker.compose.project=demo\"]",
		 sc->address ? "\"--address\", \"" : "", sc->address ? sc->address : "",
		 sc->address ? "\", " : "", sc->ns ? "\"--namespace\", \"" : "",
		 sc->ns ? sc->ns : "", sc->ns ? "\", " : "",
		 sc->snapshotter ? "\"--snapshotter\", \"" : "",
		 sc->snapshotter ? sc->snapshotter : "", sc->snapshotter ? "\", " : "");
	ok(strncmp(log, "[", 1) == 0 && strstr(log, want) == log + 1,
	   "%s: ps argv is [%s", sc->what, want);
	if (lines >= 2 && sc->ns) {
		char prefix[128];
		snprintf(prefix, sizeof(prefix), "\"--namespace\", \"%s\", ", sc->ns);
		char *second = strchr(log, '\n') + 1;
		ok(strstr(second, prefix) && strstr(second, "\"container\", \"inspect\", \""),
		   "%s: inspect got the same global flags", sc->what);
	}
}

/* The child got /dev/null as stdin, no other fds, an empty signal mask, no
 * inherited ignored signals, and its own process group. Ignored anyway:
 * SIGPIPE and SIGXFSZ (Python does that itself) and glibc's internal
 * signals 32 and 33 (its posix_spawn ignores them in every child). */
static void check_process(const char *dir, const char *what)
{
	const unsigned long long allowed = 1ull << (SIGPIPE - 1) | 1ull << (SIGXFSZ - 1) |
					   1ull << 31 | 1ull << 32;
	_cleanup_free_ char *log = read_all(dir, "process.log");
	char *line = strtok(log, "\n");
	int n = 0;
	for (; line; line = strtok(NULL, "\n"), n++) {
		char in[64] = "", fds[64] = "";
		unsigned long long blk = 1, ign = 1;
		int own = 0;
		int got = sscanf(line, "stdin=%63s fds=%63s sigblk=%llx sigign=%llx pgid_is_pid=%d",
				 in, fds, &blk, &ign, &own);
		ok(got == 5 && !strcmp(in, "/dev/null") && !strcmp(fds, "none") && blk == 0 &&
		   !(ign & ~allowed) && own == 1, "%s: child %d inherited nothing", what, n);
		if (got != 5 || (ign & ~allowed) || blk || strcmp(fds, "none"))
			printf("#   %s\n", line);
	}
	ok(n > 0, "%s: children recorded what they inherited", what);
}

static void check_verdict(const struct container_list *l, const struct scenario *sc)
{
	struct verdict v;
	verdict_init(&v);
	char got[4096] = "";
	size_t off = 0;
	is_int(containers_judge(l, &v), 0, "%s: judged", sc->what);
	for (size_t i = 0; i < v.n_entries && off < sizeof(got); i++)
		off += (size_t)snprintf(got + off, sizeof(got) - off, "%s=%s\n",
					v.entries[i].name, v.entries[i].status);
	is_str(got, sc->verdict, "%s: verdict", sc->what);
	verdict_free(&v);
}

static void run_scenario(const char *fake, const struct scenario *sc)
{
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s/nerdctl-test.XXXXXX",
		 getenv("TMPDIR") ? getenv("TMPDIR") : P_tmpdir);
	if (!ok(mkdtemp(dir) != NULL, "%s: scenario directory", sc->what))
		return;
	setenv("NERDCTL_FAKE_DIR", dir, 1);
	put(dir, "containers", sc->containers);
	_cleanup_free_ char *controls = strdup(sc->controls);
	for (char *c = strtok(controls, " "); c; c = strtok(NULL, " "))
		put(dir, c, !strcmp(c, "removed") || !strcmp(c, "inspect.nosuch") ? DB_ID "\n" : "");

	struct runtime_info ri = { (char *)"demo", (char *)sc->ns, (char *)sc->snapshotter };
	struct nerdctl_opts o = { fake, sc->address, -1 };
	struct container_list l = { 0 };
	struct errbuf e = { "" };
	int64_t t0 = clock_mono_ms();
	int r = nerdctl_list(&o, &ri, t0 + sc->budget_ms, &l, &e);
	int64_t took = clock_mono_ms() - t0;

	is_int(r, sc->want_r, "%s: result (%s)", sc->what, e.msg);
	if (sc->want_r == 0) {
		char facts[4096];
		render(&l, facts, sizeof(facts));
		is_str(facts, sc->want, "%s: facts", sc->what);
		if (sc->verdict)
			check_verdict(&l, sc);
	} else {
		ok(strncmp(e.msg, sc->want, strlen(sc->want)) == 0, "%s: error '%s'", sc->what,
		   e.msg);
		is_int(l.n, 0, "%s: nothing listed", sc->what);
	}
	ok(took >= sc->min_ms && took <= sc->max_ms, "%s: took %lld ms (%d..%d)", sc->what,
	   (long long)took, sc->min_ms, sc->max_ms);
	is_int(own_children(), 0, "%s: no child left, not even a zombie", sc->what);
	if (strstr(sc->controls, ".hang"))
		check_hang_pids(dir, sc->what);
	if (sc->budget_ms > 0) {
		check_argv(dir, sc);
		check_process(dir, sc->what);
	}
	container_list_free(&l);
	char cmd[PATH_MAX + 16];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		printf("# could not remove %s\n", dir);
}

static void test_missing_binary(void)
{
	struct runtime_info ri = { (char *)"demo", NULL, NULL };
	struct nerdctl_opts o = { "/nonexistent/nerdctl", NULL, -1 };
	struct container_list l = { 0 };
	struct errbuf e = { "" };
	int r = nerdctl_list(&o, &ri, clock_mono_ms() + 5000, &l, &e);
	is_int(r, -ENOENT, "missing binary: -ENOENT");
	is_str(e.msg, "cannot run /nonexistent/nerdctl: No such file or directory",
	       "missing binary: error");
	o.path = "no-such-nerdctl-in-path";
	r = nerdctl_list(&o, &ri, clock_mono_ms() + 5000, &l, &e);
	is_str(e.msg, "cannot run no-such-nerdctl-in-path: No such file or directory",
	       "looked up in PATH: error");
	is_int(own_children(), 0, "missing binary: no child left");
}

static void test_parse_ids(void)
{
	static const struct {
		const char *in;
		int want, n;
	} cases[] = {
		{ "", 0, 0 },
		{ "\n\n", 0, 0 },
		{ DB_ID "\n", 0, 1 },
		{ DB_ID "\r\n" DB_ID, 0, 2 },
		{ "68150cfc45bd\n", 0, 1 },
		{ "68150cfc45b\n", -EINVAL, 0 },
		{ DB_ID "0\n", -EINVAL, 0 },
		{ "68150CFC45BD\n", -EINVAL, 0 },
		{ "--help\n", -EINVAL, 0 },
		{ DB_ID "\nWARN[0000] something\n", -EINVAL, 0 },
		{ "68150cfc45bd 68150cfc45bd\n", -EINVAL, 0 },
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char **ids = (char **)1;
		size_t n = 99;
		struct errbuf e = { "" };
		int r = nerdctl_parse_ids(cases[i].in, strlen(cases[i].in), &ids, &n, &e);
		is_int(r, cases[i].want, "parse_ids case %zu (%s)", i, e.msg);
		is_int(n, cases[i].n, "parse_ids case %zu: %d ids", i, cases[i].n);
		if (r == 0 && n > 0)
			ok(strlen(ids[0]) >= 12 && !strchr(ids[0], '\r'), "case %zu: id clean", i);
		nerdctl_free_ids(ids, n);
	}
	/* The bound: NERDCTL_MAX_IDS ids pass, one more does not. */
	size_t len = (NERDCTL_MAX_IDS + 1) * 13;
	_cleanup_free_ char *many = malloc(len + 1);
	for (size_t i = 0; i <= NERDCTL_MAX_IDS; i++)
		memcpy(many + i * 13, "68150cfc45bd\n", 13);
	char **ids;
	size_t n;
	struct errbuf e = { "" };
	is_int(nerdctl_parse_ids(many, len - 13, &ids, &n, &e), 0, "%d ids accepted",
	       NERDCTL_MAX_IDS);
	nerdctl_free_ids(ids, n);
	is_int(nerdctl_parse_ids(many, len, &ids, &n, &e), -E2BIG, "one more refused (%s)",
	       e.msg);
}

/* A probed container as nerdctl 2.x prints it (issue 27): no NetworkMode,
 * its address on "unknown-eth0"; the probe aims there, and until it has run
 * the container is starting. */
static void test_probe_address(const char *fake)
{
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s/nerdctl-test.XXXXXX",
		 getenv("TMPDIR") ? getenv("TMPDIR") : P_tmpdir);
	if (!ok(mkdtemp(dir) != NULL, "probe: scenario directory"))
		return;
	setenv("NERDCTL_FAKE_DIR", dir, 1);
	put(dir, "containers", "probe-web.json\n");
	struct runtime_info ri = { (char *)"demo", (char *)"dstack", NULL };
	struct nerdctl_opts o = { fake, NULL, -1 };
	struct container_list l = { 0 };
	struct errbuf e = { "" };
	int r = nerdctl_list(&o, &ri, clock_mono_ms() + 10000, &l, &e);
	is_int(r, 0, "probe: listed (%s)", e.msg);
	if (r == 0 && l.n == 1) {
		is_int(probes_sync(NULL, &l, NULL, false), 0, "probe: prepared");
		is_str(l.v[0].probe && l.v[0].probe->usable ? l.v[0].probe->target : "(none)",
		       "http://10.4.0.5:18080", "probe: nerdctl's unknown-eth0 address");
		struct verdict v;
		verdict_init(&v);
		containers_judge(&l, &v);
		is_str(v.n_entries ? v.entries[0].status : "healthy",
		       "probe starting (no probe has run yet)", "probe: not run yet is not healthy");
		verdict_free(&v);
	}
	container_list_free(&l);
	char cmd[PATH_MAX + 16];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		printf("# could not remove %s\n", dir);
}

int main(void)
{
	char fake[PATH_MAX];
	test_parse_ids();
	if (!ok(realpath(FAKE, fake) != NULL && access(fake, X_OK) == 0, "fake at %s", FAKE))
		return done_testing();
	/* As in the agent: every signal blocked, some ignored, and a stray fd
	 * without CLOEXEC. The child must see none of it. */
	sigset_t all;
	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, NULL);
	signal(SIGTERM, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	int stray = open("/dev/null", O_RDONLY);
	for (size_t i = 0; i < ARRAY_SIZE(scenarios); i++)
		run_scenario(fake, &scenarios[i]);
	test_missing_binary();
	test_probe_address(fake);
	close(stray);
	return done_testing();
}
