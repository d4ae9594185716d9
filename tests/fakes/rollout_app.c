/* SPDX-License-Identifier: Apache-2.0 */
/* The app of tests/e2e/rollout.sh and bench/rollout.sh: one static program
 * (no libc in the busybox image) that is, by its first argument,
 *
 *   rollout_app backend ADDR:PORT ID   an HTTP/1.1 server with keep-alive:
 *       GET /health  200 "ok" (the Docker healthcheck's)
 *       GET /slow    200 after 1 s (a request that is in flight at a stop)
 *       anything     200 "instance ID tag TAG" (TAG from $TAG)
 *     Shuts down gracefully on SIGTERM: keeps serving $LAME_DUCK_MS ms (0
 *     by default: a server that knows nothing of its gateway), then stops
 *     accepting (closes its listener), lets every connection finish the
 *     request it is in (an idle kept-alive one is closed at once), exits 0.
 *   rollout_app proxy ADDR:PORT UPSTREAM_ADDR:PORT   the app's own front, as
 *     nginx's proxy_pass is: every client request is passed to the upstream
 *     on a new connection; an upstream that cannot be reached, or an answer
 *     that is cut short, is a 502 to the client, whose kept-alive connection
 *     stays open. GET /proxy-health is answered by the proxy itself (its
 *     Docker healthcheck, as an nginx `location` returning 200 is). SIGTERM:
 *     stops accepting at once, finishes the requests in flight, closes idle
 *     connections, exits 0 (nginx's graceful quit). With UPSTREAM_RETRY_MS
 *     set, a request whose upstream refuses the connect or closes it before
 *     a byte of the answer is tried again every 100 ms for that long, as
 *     Caddy's lb_try_duration does (for a GET, what its lb_retry_match lets
 *     through by default); unset or 0, never (nginx with one server).
 *   rollout_app probe ADDR:PORT PATH   exit 0 on a 200 within 2 s, else 1.
 *
 * A process per connection (fork); the parent accepts and reaps. Every
 * answer carries "X-Instance: ID" so that the clients can tell who served. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define HEAD_MAX 4096
#define BODY_MAX 65536
#define IDLE_MS 60000 /* a kept-alive connection idle this long is closed */
#define UPSTREAM_MS 10000 /* an upstream answer slower than this is a 504 */
#define MAX_CHILDREN 4096

static volatile sig_atomic_t stopping;
static const char *instance = "?";

static long long now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static void on_stop(int sig)
{
	(void)sig;
	stopping = 1;
}

static int parse_addr(const char *s, struct sockaddr_in *a)
{
	char host[64];
	const char *colon = strrchr(s, ':');
	if (!colon || (size_t)(colon - s) >= sizeof host)
		return -1;
	memcpy(host, s, (size_t)(colon - s));
	host[colon - s] = 0;
	memset(a, 0, sizeof *a);
	a->sin_family = AF_INET;
	a->sin_port = htons((unsigned short)atoi(colon + 1));
	return inet_pton(AF_INET, host, &a->sin_addr) == 1 ? 0 : -1;
}

/* Waits until fd is readable (or writable), up to ms; 1 ready, 0 not. A
 * signal (the stop) does not cut the wait short. */
static int wait_fd(int fd, short ev, int ms)
{
	long long deadline = now_ms() + ms;
	for (;;) {
		struct pollfd p = { .fd = fd, .events = ev };
		int r = poll(&p, 1, ms);
		if (r >= 0 || errno != EINTR)
			return r > 0;
		ms = (int)(deadline - now_ms());
		if (ms < 0)
			return 0;
	}
}

static int write_all(int fd, const char *b, size_t n)
{
	while (n) {
		ssize_t w = write(fd, b, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		b += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Reads a request head into buf. Returns its length; 0 when the peer closed
 * (or, idle between requests, when stopping or idle too long); -1 on error
 * or an oversized head. Waits in 100 ms steps so that a stop is seen. */
static int read_head(int fd, char *buf, int *have, int idle_ms)
{
	long long deadline = now_ms() + idle_ms;
	for (;;) {
		buf[*have] = 0;
		char *end = strstr(buf, "\r\n\r\n");
		if (end)
			return (int)(end - buf) + 4;
		if (*have >= HEAD_MAX - 1)
			return -1;
		if (*have == 0 && (stopping || now_ms() > deadline))
			return 0;
		if (!wait_fd(fd, POLLIN, 100))
			continue;
		ssize_t r = read(fd, buf + *have, (size_t)(HEAD_MAX - 1 - *have));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r == 0 && *have == 0 ? 0 : -1;
		*have += (int)r;
	}
}

static void respond(int fd, int code, const char *reason, const char *body, int close_after)
{
	char head[512];
	int n = snprintf(head, sizeof head,
			 "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n"
			 "X-Instance: %s\r\n%s\r\n",
			 code, reason, strlen(body), instance,
			 close_after ? "Connection: close\r\n" : "");
	if (write_all(fd, head, (size_t)n) == 0)
		write_all(fd, body, strlen(body));
}

/* The request line's path, into path (NUL-terminated). */
static void request_path(const char *head, char *path, size_t size)
{
	const char *sp = strchr(head, ' ');
	size_t n = 0;
	path[0] = 0;
	if (!sp)
		return;
	for (sp++; *sp && *sp != ' ' && *sp != '\r' && n + 1 < size; sp++)
		path[n++] = *sp;
	path[n] = 0;
}

static int wants_close(const char *head, int len)
{
	for (int i = 0; i + 17 <= len; i++)
		if (!strncasecmp(head + i, "\nConnection: close", 18))
			return 1;
	return 0;
}

/* --- backend ------------------------------------------------------------- */

static void backend_request(int fd, const char *path, int close_after)
{
	char body[128];
	if (!strcmp(path, "/health")) {
		respond(fd, 200, "OK", "ok\n", close_after);
		return;
	}
	if (!strcmp(path, "/slow")) {
		long long until = now_ms() + 1000;
		while (now_ms() < until) {
			struct timespec t = { 0, 20 * 1000000 };
			nanosleep(&t, NULL);
		}
	}
	const char *tag = getenv("TAG");
	snprintf(body, sizeof body, "instance %s tag %s\n", instance, tag ? tag : "-");
	respond(fd, 200, "OK", body, close_after);
}

/* --- proxy ----------------------------------------------------------------- */

static struct sockaddr_in upstream;
static long retry_ms; /* UPSTREAM_RETRY_MS */

/* One try of a request on a new connection to the upstream: the answer's
 * length in ans, or -1 when the connect failed or the upstream closed
 * before a byte (a try that may be repeated), -2 when the answer broke
 * off after its first byte or came too late (one that may not). */
static int proxy_try(const char *path, char *ans, int size)
{
	int u = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (u < 0)
		return -1;
	if (connect(u, (struct sockaddr *)&upstream, sizeof upstream) < 0) {
		close(u);
		return -1;
	}
	char req[HEAD_MAX + 64];
	int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: upstream\r\nConnection: close\r\n\r\n",
			 path);
	int have = 0;
	long long deadline = now_ms() + UPSTREAM_MS;
	int ok = write_all(u, req, (size_t)n) == 0;
	while (ok && have < size - 1) {
		long long left = deadline - now_ms();
		if (left <= 0 || !wait_fd(u, POLLIN, (int)left)) {
			ok = 0;
			have = -2;
			break;
		}
		ssize_t r = read(u, ans + have, (size_t)(size - 1 - have));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			ok = 0;
		if (r <= 0)
			break;
		have += (int)r;
	}
	close(u);
	if (have == 0)
		return -1;
	if (have < 0 || !ok)
		return -2;
	ans[have] = 0;
	return have;
}

/* Passes one request to the upstream and its answer back; a 502 when the
 * upstream cannot be reached (within UPSTREAM_RETRY_MS) or its answer is
 * cut. */
static void proxy_request(int fd, const char *path, int close_after)
{
	if (!strcmp(path, "/proxy-health")) {
		respond(fd, 200, "OK", "ok\n", close_after);
		return;
	}
	static char ans[BODY_MAX];
	long long give_up = now_ms() + retry_ms;
	int have;
	while ((have = proxy_try(path, ans, sizeof ans)) == -1 && now_ms() < give_up) {
		struct timespec t = { 0, 100 * 1000000 };
		nanosleep(&t, NULL);
	}
	if (have == -1) {
		respond(fd, 502, "Bad Gateway", "bad gateway: the upstream cannot be reached\n",
			close_after);
		return;
	}
	/* Whole: a status line, a head, and as many body bytes as it said. */
	char *end = have > 0 ? strstr(ans, "\r\n\r\n") : NULL;
	const char *cl = end ? strcasestr(ans, "\r\nContent-Length:") : NULL;
	int code = 0;
	if (end && cl && cl < end && sscanf(ans, "HTTP/1.1 %d", &code) == 1) {
		long len = strtol(cl + 17, NULL, 10);
		const char *body = end + 4;
		if ((long)(ans + have - body) == len) {
			respond(fd, code, code == 200 ? "OK" : "Upstream", body, close_after);
			return;
		}
	}
	respond(fd, 502, "Bad Gateway", "bad gateway: the upstream's answer was cut short\n",
		close_after);
}

/* --- the connection loop and the listener -------------------------------- */

typedef void (*handler)(int fd, const char *path, int close_after);

static void serve_connection(int fd, handler h)
{
	static char buf[HEAD_MAX];
	int have = 0;
	for (;;) {
		int len = read_head(fd, buf, &have, IDLE_MS);
		if (len <= 0)
			break;
		char path[256];
		request_path(buf, path, sizeof path);
		int close_after = wants_close(buf, len) || stopping;
		h(fd, path, close_after);
		/* What came after this head is the next request's start. */
		memmove(buf, buf + len, (size_t)(have - len));
		have -= len;
		if (close_after || stopping)
			break;
	}
	/* A graceful close: the answer is sent before the FIN; unread bytes
	 * would make it a reset. */
	shutdown(fd, SHUT_WR);
	while (wait_fd(fd, POLLIN, 200)) {
		char sink[512];
		if (read(fd, sink, sizeof sink) <= 0)
			break;
	}
	close(fd);
	_exit(0);
}

static pid_t children[MAX_CHILDREN];
static int nchildren;

static void forget(pid_t p)
{
	for (int i = 0; i < nchildren; i++)
		if (children[i] == p) {
			children[i] = children[--nchildren];
			return;
		}
}

static void reap(void)
{
	pid_t p;
	while ((p = waitpid(-1, NULL, WNOHANG)) > 0)
		forget(p);
}

static int listen_on(const char *addr)
{
	struct sockaddr_in a;
	if (parse_addr(addr, &a) < 0) {
		fprintf(stderr, "bad address %s\n", addr);
		exit(2);
	}
	int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	/* The previous container's listener may linger for a moment. */
	for (int i = 0; bind(fd, (struct sockaddr *)&a, sizeof a) < 0; i++) {
		if (i == 100) {
			perror("bind");
			exit(2);
		}
		struct timespec t = { 0, 50 * 1000000 };
		nanosleep(&t, NULL);
	}
	if (listen(fd, 1024) < 0) {
		perror("listen");
		exit(2);
	}
	return fd;
}

static int serve(const char *addr, handler h, long lame_duck_ms)
{
	int lfd = listen_on(addr);
	struct sigaction sa = { .sa_handler = on_stop };
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGUSR1, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);
	long long stop_at = 0;
	for (;;) {
		reap();
		if (stopping && !stop_at) {
			stop_at = now_ms() + lame_duck_ms;
			fprintf(stderr, "%s: SIGTERM, serving %ld ms more\n", instance, lame_duck_ms);
		}
		if (stop_at && now_ms() >= stop_at)
			break;
		if (!wait_fd(lfd, POLLIN, 50))
			continue;
		int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		int one = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
		pid_t p = nchildren < MAX_CHILDREN ? fork() : -1;
		if (p == 0) {
			close(lfd);
			signal(SIGUSR1, on_stop);
			stopping = 0;
			serve_connection(fd, h);
		}
		if (p > 0)
			children[nchildren++] = p;
		close(fd);
	}
	close(lfd);
	fprintf(stderr, "%s: stopped accepting; %d connections to finish\n", instance, nchildren);
	for (int i = 0; i < nchildren; i++)
		kill(children[i], SIGUSR1);
	while (nchildren > 0) {
		pid_t p = waitpid(-1, NULL, 0);
		if (p < 0 && errno == EINTR)
			continue;
		if (p < 0)
			break;
		forget(p);
	}
	fprintf(stderr, "%s: exiting\n", instance);
	return 0;
}

static int probe(const char *addr, const char *path)
{
	struct sockaddr_in a;
	if (parse_addr(addr, &a) < 0)
		return 2;
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0)
		return 1;
	char req[512], ans[512];
	int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: probe\r\nConnection: close\r\n\r\n",
			 path);
	if (write_all(fd, req, (size_t)n) < 0 || !wait_fd(fd, POLLIN, 2000))
		return 1;
	ssize_t r = read(fd, ans, sizeof ans - 1);
	if (r <= 0)
		return 1;
	ans[r] = 0;
	return strncmp(ans, "HTTP/1.1 200 ", 13) ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "backend")) {
		instance = argv[3];
		const char *ld = getenv("LAME_DUCK_MS");
		return serve(argv[2], backend_request, ld ? atol(ld) : 0);
	}
	if (argc == 4 && !strcmp(argv[1], "proxy")) {
		if (parse_addr(argv[3], &upstream) < 0)
			return 2;
		const char *id = getenv("ID");
		instance = id ? id : "?";
		const char *retry = getenv("UPSTREAM_RETRY_MS");
		retry_ms = retry ? atol(retry) : 0;
		return serve(argv[2], proxy_request, 0);
	}
	if (argc == 4 && !strcmp(argv[1], "probe"))
		return probe(argv[2], argv[3]);
	fprintf(stderr, "usage: %s backend|proxy|probe ...\n", argv[0]);
	return 2;
}
