/* SPDX-License-Identifier: Apache-2.0 */
#include "runtime/nerdctl.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/clock.h"
#include "base/grow.h"
#include "runtime/inspect.h"

extern char **environ;

/* Global flags first, then the subcommand and its arguments. */
#define NERDCTL_MAX_GLOBAL_ARGS 7
#define STDERR_KEEP NERDCTL_STDERR_KEEP

/* One finished child: its stdout, the start of its stderr, how it ended. */
struct proc {
	const char *what; /* "ps", "inspect": names the step in errors */
	int cancel_fd;    /* readable: stop waiting (-ECANCELED); -1 for none */
	char *out;
	size_t len, cap;
	char err[STDERR_KEEP + 1];
	size_t errlen;
	int status;
};

/* Reads what is available on fd (non-blocking), at most 1 MiB per call so
 * that a child flooding stderr cannot keep us past the deadline. 1 at EOF,
 * 0 when it would block, 2 when more is waiting, -EFBIG over the cap, other
 * -errno. */
static int proc_read(struct proc *p, int fd, bool is_stdout)
{
	for (int round = 0; round < 64; round++) {
		char buf[16384];
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n == 0)
			return 1;
		if (n < 0)
			return errno == EAGAIN || errno == EINTR ? 0 : -errno;
		if (!is_stdout) {
			/* Only the first line is ever shown; the rest is drained
			 * so the child never blocks on a full pipe. */
			size_t keep = STDERR_KEEP - p->errlen;
			if ((size_t)n < keep)
				keep = (size_t)n;
			memcpy(p->err + p->errlen, buf, keep);
			p->errlen += keep;
			p->err[p->errlen] = '\0';
			continue;
		}
		if ((size_t)n > NERDCTL_MAX_OUTPUT - p->len)
			return -EFBIG;
		char *q = grow(p->out, &p->cap, p->len + (size_t)n + 1, 1, 65536, 0);
		if (!q)
			return -ENOMEM;
		p->out = q;
		memcpy(p->out + p->len, buf, (size_t)n);
		p->len += (size_t)n;
		p->out[p->len] = '\0';
	}
	return 2;
}

/* Exited (a zombie), without reaping it: the pid, and with it the process
 * group id, stay ours until we kill the group and reap. */
static bool child_exited(pid_t pid)
{
	siginfo_t si;
	memset(&si, 0, sizeof(si));
	return waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 &&
	       si.si_pid == pid;
}

static int spawn_child(const char *path, char *const argv[], int outw, int errw,
		       pid_t *pid)
{
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	sigset_t none, all;
	sigemptyset(&none);
	sigfillset(&all);
	posix_spawn_file_actions_init(&fa);
	posix_spawnattr_init(&at);
	/* The agent blocks every signal before its threads start; the child
	 * must get a clean mask and default dispositions. Its own process
	 * group lets a timeout kill whatever it started as well. The agent's
	 * other fds (listening socket, Docker connections) never leak in. */
	posix_spawnattr_setsigmask(&at, &none);
	posix_spawnattr_setsigdefault(&at, &all);
	posix_spawnattr_setpgroup(&at, 0);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF |
					      POSIX_SPAWN_SETPGROUP);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, outw, 1);
	posix_spawn_file_actions_adddup2(&fa, errw, 2);
	posix_spawn_file_actions_addclosefrom_np(&fa, 3);
	int r = strchr(path, '/') ? posix_spawn(pid, path, &fa, &at, argv, environ)
				  : posix_spawnp(pid, path, &fa, &at, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	return -r;
}

static int pidfd_of(pid_t pid)
{
#ifdef SYS_pidfd_open
	return (int)syscall(SYS_pidfd_open, pid, 0);
#else
	return -1;
#endif
}

/* Collects output until the child exits, the deadline passes, the caller
 * cancels or stdout exceeds the cap. 0, -ETIMEDOUT, -ECANCELED, -EFBIG, other
 * -errno. */
static int collect(struct proc *p, pid_t pid, int outr, int errr, int64_t deadline)
{
	_cleanup_close_ int pidfd = pidfd_of(pid);
	int fds[2] = { outr, errr };
	for (;;) {
		bool exited = child_exited(pid), more = false;
		/* Everything an exited child wrote is in the pipes by now:
		 * drain and stop, even if a stray grandchild keeps them open. */
		for (int k = 0; k < 2; k++) {
			if (fds[k] < 0)
				continue;
			int r = proc_read(p, fds[k], k == 0);
			if (r < 0)
				return r;
			if (r == 1)
				fds[k] = -1;
			more |= r == 2;
		}
		if (exited && !more)
			return 0;
		int left = clock_left_ms(deadline);
		if (left == 0)
			return -ETIMEDOUT;
		struct pollfd pf[4] = { { fds[0], POLLIN, 0 }, { fds[1], POLLIN, 0 },
					{ pidfd, POLLIN, 0 }, { p->cancel_fd, POLLIN, 0 } };
		/* Without a pidfd (kernel < 5.3) exit is noticed by ticking. */
		if (poll(pf, 4, pidfd >= 0 ? left : (left < 10 ? left : 10)) < 0 &&
		    errno != EINTR)
			return -errno;
		if (pf[3].revents)
			return -ECANCELED;
	}
}

static void reap(pid_t pid, int *status)
{
	/* The whole group: nerdctl may have started helpers of its own. The
	 * child is at worst a zombie here, so its pid (= pgid) is still ours. */
	kill(-pid, SIGKILL);
	kill(pid, SIGKILL);
	while (waitpid(pid, status, 0) < 0 && errno == EINTR)
		;
}

static int run_error(const struct proc *p, const char *path, int r, int timeout_ms,
		     struct errbuf *err)
{
	char clean[256];
	switch (r) {
	case -ETIMEDOUT:
		if (timeout_ms % 1000 == 0)
			return errbuf_set(err, ETIMEDOUT, "nerdctl %s: timed out after %d s",
					  p->what, timeout_ms / 1000);
		return errbuf_set(err, ETIMEDOUT, "nerdctl %s: timed out after %d ms",
				  p->what, timeout_ms);
	case -EFBIG:
		return errbuf_set(err, EFBIG, "nerdctl %s: output exceeds %u bytes", p->what,
				  NERDCTL_MAX_OUTPUT);
	case -ENOMEM:
		return errbuf_set(err, ENOMEM, "nerdctl %s: out of memory", p->what);
	case -ECANCELED:
		return errbuf_set(err, ECANCELED, "nerdctl %s: cancelled", p->what);
	default:
		err_clean(clean, sizeof(clean), path, 200);
		return errbuf_set(err, -r, "nerdctl %s: reading from %s: %s", p->what, clean,
				  strerror(-r));
	}
}

/* The first line of stderr, cleaned, for an error message. */
static void first_line(const struct proc *p, char *dst, size_t n)
{
	char line[STDERR_KEEP + 1];
	size_t len = strcspn(p->err, "\r\n");
	memcpy(line, p->err, len);
	line[len] = '\0';
	err_clean(dst, n, line, 200);
}

static int exit_error(const struct proc *p, struct errbuf *err)
{
	char line[256];
	first_line(p, line, sizeof(line));
	if (WIFSIGNALED(p->status))
		return errbuf_set(err, EIO, "nerdctl %s: killed by signal %d%s%s", p->what,
				  WTERMSIG(p->status), *line ? ": " : "", line);
	return errbuf_set(err, EIO, "nerdctl %s: exited with status %d%s%s", p->what,
			  WEXITSTATUS(p->status), *line ? ": " : "", line);
}

/* Runs argv with stdin from /dev/null and stdout captured, killed (with its
 * process group) and reaped at min(5 s, deadline). A non-zero exit is -EIO
 * with p->status and p->err kept for the caller. */
static int run(const char *path, char *const argv[], int64_t deadline, struct proc *p,
	       struct errbuf *err)
{
	int out[2], errp[2];
	int64_t now = clock_mono_ms();
	int64_t until = deadline < now + NERDCTL_PROCESS_TIMEOUT_MS
				? deadline : now + NERDCTL_PROCESS_TIMEOUT_MS;
	int timeout_ms = until > now ? (int)(until - now) : 0;
	if (timeout_ms == 0)
		return errbuf_tag(err, ERR_KIND_RUNTIME_TIMEOUT,
				  errbuf_set(err, ETIMEDOUT, "nerdctl %s: the refresh deadline "
					     "passed before it could run", p->what));
	if (pipe2(out, O_CLOEXEC) < 0)
		return errbuf_tag(err, ERR_KIND_RUNTIME_UNREACHABLE,
				  errbuf_set(err, errno, "nerdctl %s: pipe: %s", p->what,
					     strerror(errno)));
	if (pipe2(errp, O_CLOEXEC) < 0) {
		int e = errno;
		close(out[0]);
		close(out[1]);
		return errbuf_tag(err, ERR_KIND_RUNTIME_UNREACHABLE,
				  errbuf_set(err, e, "nerdctl %s: pipe: %s", p->what,
					     strerror(e)));
	}
	_cleanup_close_ int outr = out[0], errr = errp[0];
	/* Only our ends: O_NONBLOCK on the child's would make its writes fail
	 * with EAGAIN. */
	fcntl(outr, F_SETFL, O_NONBLOCK);
	fcntl(errr, F_SETFL, O_NONBLOCK);
	pid_t pid;
	int r = spawn_child(path, argv, out[1], errp[1], &pid);
	close(out[1]);
	close(errp[1]);
	if (r < 0) {
		char clean[256];
		err_clean(clean, sizeof(clean), path, 200);
		return errbuf_tag(err, ERR_KIND_RUNTIME_UNREACHABLE,
				  errbuf_set(err, -r, "cannot run %s: %s", clean, strerror(-r)));
	}
	r = collect(p, pid, outr, errr, until);
	reap(pid, &p->status);
	if (r < 0)
		return errbuf_tag(err, r == -ETIMEDOUT ? ERR_KIND_RUNTIME_TIMEOUT
				  : r == -EFBIG ? ERR_KIND_RUNTIME_ANSWER
						: ERR_KIND_RUNTIME_UNREACHABLE,
				  run_error(p, path, r, timeout_ms, err));
	if (!WIFEXITED(p->status) || WEXITSTATUS(p->status) != 0)
		return errbuf_tag(err, ERR_KIND_RUNTIME_STATUS, exit_error(p, err));
	return 0;
}

void nerdctl_free_ids(char **ids, size_t n)
{
	if (!ids)
		return;
	for (size_t i = 0; i < n; i++)
		free(ids[i]);
	free(ids);
}

/* Container ids are hex (64 digits, 12 when truncated). Anything else is not
 * passed on: a line starting with '-' would become an option. */
static bool id_valid(const char *s, size_t n)
{
	if (n < 12 || n > 64)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

int nerdctl_parse_ids(const char *buf, size_t len, char ***ids, size_t *n,
		      struct errbuf *err)
{
	char **v = NULL;
	size_t cnt = 0, line = 0;
	*ids = NULL;
	*n = 0;
	for (size_t i = 0; i < len;) {
		const char *nl = memchr(buf + i, '\n', len - i);
		size_t end = nl ? (size_t)(nl - buf) : len, k = end;
		line++;
		while (k > i && (buf[k - 1] == '\r' || buf[k - 1] == ' '))
			k--;
		if (k > i) {
			int r = 0;
			char **nv;
			if (!id_valid(buf + i, k - i))
				r = errbuf_set(err, EINVAL, "line %zu is not a container id", line);
			else if (cnt == NERDCTL_MAX_IDS)
				r = errbuf_set(err, E2BIG, "more than %d containers", NERDCTL_MAX_IDS);
			else if (!(nv = realloc(v, (cnt + 1) * sizeof(*v))) ||
				 !((v = nv)[cnt] = strndup(buf + i, k - i)))
				r = errbuf_set(err, ENOMEM, "out of memory");
			else
				cnt++;
			if (r < 0) {
				nerdctl_free_ids(v, cnt);
				return r;
			}
		}
		i = end + 1;
	}
	*ids = v;
	*n = cnt;
	return 0;
}

/* argv: path, global flags, then the rest; NULL-terminated. */
static char **build_argv(const struct nerdctl_opts *o, const struct runtime_info *ri,
			 const char *const *rest, size_t nrest)
{
	char **argv = calloc(NERDCTL_MAX_GLOBAL_ARGS + nrest + 1, sizeof(*argv));
	size_t a = 0;
	if (!argv)
		return NULL;
	argv[a++] = (char *)o->path;
	/* nerdctl's global flags belong to the root command; given before the
	 * subcommand they work with every version. */
	if (o->address) {
		argv[a++] = (char *)"--address";
		argv[a++] = (char *)o->address;
	}
	if (ri->namespace) {
		argv[a++] = (char *)"--namespace";
		argv[a++] = ri->namespace;
	}
	if (ri->snapshotter) {
		argv[a++] = (char *)"--snapshotter";
		argv[a++] = ri->snapshotter;
	}
	for (size_t i = 0; i < nrest; i++)
		argv[a++] = (char *)rest[i];
	return argv;
}

/* The real runner: nerdctl with the global flags, as a child process. */
struct real_ctx {
	const struct nerdctl_opts *o;
	const struct runtime_info *ri;
	int64_t deadline;
};

static int run_real(void *ctx, const char *what, const char *const *rest, size_t nrest,
		    struct nerdctl_answer *ans, struct errbuf *err)
{
	const struct real_ctx *c = ctx;
	_cleanup_free_ char **argv = build_argv(c->o, c->ri, rest, nrest);
	if (!argv)
		return errbuf_set(err, ENOMEM, "out of memory");
	struct proc p = { .what = what, .cancel_fd = c->o->cancel_fd };
	int r = run(c->o->path, argv, c->deadline, &p, err);
	memcpy(ans->err, p.err, p.errlen + 1);
	ans->out = TAKE_PTR(p.out);
	ans->len = p.len;
	return r;
}

static int list_ids(const struct nerdctl_runner *rn, const char *project, char ***ids,
		    size_t *n, struct errbuf *err)
{
	_cleanup_free_ char *filter = NULL;
	if (asprintf(&filter, "label=%s=%s", COMPOSE_PROJECT_LABEL, project) < 0)
		return errbuf_set(err, ENOMEM, "out of memory");
	/* --no-trunc: full ids, so that inspect can never match two. */
	const char *rest[] = { "ps", "-a", "-q", "--no-trunc", "--filter", filter };
	struct nerdctl_answer a = { 0 };
	int r = rn->run(rn->ctx, "ps", rest, ARRAY_SIZE(rest), &a, err);
	if (r >= 0) {
		r = nerdctl_parse_ids(a.out ? a.out : "", a.len, ids, n, err);
		if (r < 0)
			errbuf_prefix(err, "nerdctl ps");
	}
	free(a.out);
	return r;
}

/* An answer that must speak for every id asked about: nerdctl 1.x printed
 * nothing for a removed container and still exited 0. */
static int check_covers(const struct container_list *l, size_t n0, char **ids, size_t n,
			struct errbuf *err)
{
	for (size_t i = 0; i < n; i++) {
		size_t k = n0;
		while (k < l->n && strcmp(l->v[k].id, ids[i]) != 0)
			k++;
		if (k == l->n)
			return errbuf_set(err, ENODATA,
					  "nerdctl inspect: no answer for container %.12s", ids[i]);
	}
	return 0;
}

/* nerdctl may ignore --filter (or a container may have been relabelled):
 * what inspect says is checked again, as the Docker backend checks its list. */
static void keep_project(struct container_list *l, size_t n0, const char *project)
{
	size_t w = n0;
	for (size_t i = n0; i < l->n; i++) {
		if (l->v[i].project && strcmp(l->v[i].project, project) == 0)
			l->v[w++] = l->v[i];
		else
			container_free(&l->v[i]);
	}
	l->n = w;
}

/* nerdctl has no events: a stop is seen on the refresh after `nerdctl stop`
 * or `kill` labelled the container explicitly stopped, which both do before
 * they signal it (any signal: kill also tears down its network and its
 * healthcheck timers, so it is a stop in all but name). */
static void mark_stopping(struct container_list *l, size_t n0)
{
	for (size_t i = n0; i < l->n; i++)
		if (l->v[i].explicitly_stopped)
			l->v[i].stopping = true;
}

/* One `nerdctl container inspect` of ids[0..n). -EIO when nerdctl exited
 * non-zero (its stderr is left in a->err), -ENODATA when it left an id
 * unanswered, -EINVAL when its output could not be read. All or nothing. */
static int inspect(const struct nerdctl_runner *rn, char **ids, size_t n,
		   struct nerdctl_answer *a, struct container_list *out, struct errbuf *err)
{
	_cleanup_free_ const char **rest = calloc(n + 2, sizeof(*rest));
	if (!rest)
		return errbuf_set(err, ENOMEM, "out of memory");
	rest[0] = "container";
	rest[1] = "inspect";
	for (size_t i = 0; i < n; i++)
		rest[i + 2] = ids[i];
	size_t n0 = out->n;
	int r = rn->run(rn->ctx, "inspect", rest, n + 2, a, err);
	if (r >= 0) {
		r = inspect_parse_array(a->out ? a->out : "", a->len, out, err);
		if (r < 0)
			errbuf_prefix(err, "nerdctl inspect");
		else if ((r = check_covers(out, n0, ids, n, err)) < 0)
			while (out->n > n0)
				container_free(&out->v[--out->n]);
	}
	free(a->out);
	a->out = NULL;
	return r;
}

/* nerdctl's own words, or containerd's when the container went between
 * nerdctl's lookup and its load: container "ID" in namespace "NS": not found
 * (the quotes escaped by nerdctl's logger). A fresh ps confirms either. */
static bool says_gone(const char *stderr_text)
{
	const char *ns = strstr(stderr_text, " in namespace ");
	return strcasestr(stderr_text, "no such container") ||
	       strcasestr(stderr_text, "no such object") ||
	       (ns && strstr(ns, "\": not found"));
}

/* The containers nerdctl said it no longer has are gone only if a fresh
 * `ps` agrees: any other reading of a failed inspect is a failed refresh. */
static int confirm_gone(const struct nerdctl_runner *rn, const char *project, char **gone,
			size_t ngone, struct errbuf *err)
{
	char **now = NULL;
	size_t n = 0;
	int r = list_ids(rn, project, &now, &n, err);
	for (size_t i = 0; r == 0 && i < ngone; i++)
		for (size_t k = 0; k < n; k++)
			if (strcmp(gone[i], now[k]) == 0) {
				r = errbuf_set(err, EIO, "nerdctl inspect: says container %.12s "
					       "does not exist, but ps still lists it", gone[i]);
				break;
			}
	nerdctl_free_ids(now, n);
	return r;
}

/* The batch failed (usually one container was removed between ps and
 * inspect): inspect one by one. Only a container nerdctl says is gone, and a
 * fresh ps no longer lists, is skipped. */
static int inspect_each(const struct nerdctl_runner *rn, const char *project, char **ids,
			size_t n, struct container_list *out, struct errbuf *err)
{
	_cleanup_free_ char **gone = calloc(n, sizeof(*gone));
	size_t ngone = 0;
	if (!gone)
		return errbuf_set(err, ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++) {
		struct nerdctl_answer a = { 0 };
		int r = inspect(rn, &ids[i], 1, &a, out, err);
		if (r == -EIO && says_gone(a.err))
			gone[ngone++] = ids[i];
		else if (r < 0)
			return r;
	}
	return ngone ? confirm_gone(rn, project, gone, ngone, err) : 0;
}

int nerdctl_list_with(const struct nerdctl_runner *rn, const char *project,
		      struct container_list *out, struct errbuf *err)
{
	char **ids = NULL;
	size_t n = 0, n0 = out->n;
	int r = list_ids(rn, project, &ids, &n, err);
	if (r < 0 || n == 0)
		return r;
	struct nerdctl_answer a = { 0 };
	/* One id: the one-by-one path is the batch, with its rules for "gone". */
	r = n > 1 ? inspect(rn, ids, n, &a, out, err) : -EIO;
	if (r == -EIO || r == -ENODATA)
		r = inspect_each(rn, project, ids, n, out, err);
	nerdctl_free_ids(ids, n);
	if (r < 0)
		while (out->n > n0)
			container_free(&out->v[--out->n]);
	else
		keep_project(out, n0, project);
	mark_stopping(out, n0);
	return r;
}

int nerdctl_list(const struct nerdctl_opts *o, const struct runtime_info *ri,
		 int64_t deadline, struct container_list *out, struct errbuf *err)
{
	if (!o->path || !ri->project)
		return errbuf_set(err, EINVAL, "nerdctl: no binary or no project given");
	struct real_ctx ctx = { o, ri, deadline };
	struct nerdctl_runner rn = { run_real, &ctx };
	return nerdctl_list_with(&rn, ri->project, out, err);
}
