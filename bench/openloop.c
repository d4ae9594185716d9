/* SPDX-License-Identifier: Apache-2.0 */
/* An open-loop HTTP load generator: requests leave at a fixed rate whether
 * or not earlier ones were answered, and each latency is measured from the
 * moment its request was due, so a stalled server is charged for the queue
 * it causes (no coordinated omission, unlike a closed loop such as wrk).
 * Debian has no wrk2; this is the part of it the benchmark needs.
 *   openloop PORT RATE SECONDS CONNS keepalive|close json|pb
 * sends POST /prpc/v1/Health[?json] to 127.0.0.1:PORT ("{}" in JSON mode,
 * an empty body in protobuf mode; with "close", a fresh connection per
 * request and Connection: close, as the gateway polls), at most CONNS
 * connections at once, and prints one line of key=value. A request not
 * answered within 2 s is a timeout; a request that could not be sent for
 * lack of a free connection waits, and that wait is part of its latency. */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAXCONN 256
#define TIMEOUT_NS 2000000000LL

enum cstate { C_FREE, C_CONNECTING, C_BUSY, C_IDLE };

struct conn {
	int fd;
	enum cstate st;
	int64_t due, sent;
	size_t got;
	char buf[4096];
};

struct gen {
	struct sockaddr_in addr;
	bool keepalive;
	char req[256];
	size_t req_len;
	int ep, conns, open;
	struct conn c[MAXCONN];
	int64_t *lat, *late;
	size_t n_lat, sent;
	size_t errors, timeouts;
};

static int64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void conn_close(struct gen *g, struct conn *c)
{
	close(c->fd);
	c->fd = -1;
	c->st = C_FREE;
	g->open--;
}

static void conn_send(struct gen *g, struct conn *c)
{
	c->sent = now_ns();
	c->got = 0;
	c->st = C_BUSY;
	if (write(c->fd, g->req, g->req_len) != (ssize_t)g->req_len) {
		g->errors++;
		conn_close(g, c);
	}
}

static struct conn *conn_open(struct gen *g)
{
	struct conn *c = NULL;
	for (int i = 0; i < g->conns && !c; i++)
		if (g->c[i].st == C_FREE)
			c = &g->c[i];
	if (!c)
		return NULL;
	c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (c->fd < 0)
		return NULL;
	int one = 1;
	setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	g->open++;
	struct epoll_event ev = { .events = EPOLLIN | EPOLLOUT | EPOLLET, .data.ptr = c };
	epoll_ctl(g->ep, EPOLL_CTL_ADD, c->fd, &ev);
	c->st = C_CONNECTING;
	if (connect(c->fd, (struct sockaddr *)&g->addr, sizeof(g->addr)) == 0) {
		c->st = C_IDLE;
	} else if (errno != EINPROGRESS) {
		g->errors++;
		conn_close(g, c);
		return NULL;
	}
	return c;
}

/* A connection to carry the request due at `due`, or NULL: the request
 * waits (and is charged for the wait). */
static bool dispatch(struct gen *g, int64_t due)
{
	struct conn *c = NULL;
	if (g->keepalive)
		for (int i = 0; i < g->conns && !c; i++)
			if (g->c[i].st == C_IDLE)
				c = &g->c[i];
	if (!c) {
		/* One connecting at a time per request still waiting. */
		for (int i = 0; i < g->conns; i++)
			if (g->c[i].st == C_CONNECTING && g->c[i].due == due)
				return false;
		if (!(c = conn_open(g)))
			return false;
		c->due = due;
		if (c->st != C_IDLE)
			return false;
	}
	c->due = due;
	g->late[g->sent++] = now_ns() - due;
	conn_send(g, c);
	return true;
}

/* Complete when the headers and Content-Length bytes are in. */
static int response_done(struct conn *c, bool *close_it)
{
	c->buf[c->got < sizeof(c->buf) ? c->got : sizeof(c->buf) - 1] = '\0';
	char *end = strstr(c->buf, "\r\n\r\n");
	if (!end)
		return 0;
	size_t head = (size_t)(end - c->buf) + 4;
	long cl = 0;
	for (char *p = strstr(c->buf, "\r\n"); p && p < end; p = strstr(p + 2, "\r\n")) {
		if (!strncasecmp(p + 2, "Content-Length:", 15))
			cl = strtol(p + 17, NULL, 10);
		if (!strncasecmp(p + 2, "Connection: close", 17))
			*close_it = true;
	}
	if (c->got < head + (size_t)cl)
		return 0;
	return strncmp(c->buf, "HTTP/1.1 200", 12) == 0 ? 1 : -1;
}

static void on_readable(struct gen *g, struct conn *c)
{
	for (;;) {
		ssize_t n = read(c->fd, c->buf + c->got, sizeof(c->buf) - 1 - c->got);
		if (n < 0 && errno == EAGAIN)
			return;
		if (n <= 0 || c->st != C_BUSY) {
			if (c->st == C_BUSY)
				g->errors++;
			conn_close(g, c);
			return;
		}
		c->got += (size_t)n;
		bool close_it = !g->keepalive;
		int r = response_done(c, &close_it);
		if (r == 0 && c->got < sizeof(c->buf) - 1)
			continue;
		if (r == 1)
			g->lat[g->n_lat++] = now_ns() - c->due;
		else
			g->errors++;
		if (close_it || r != 1)
			conn_close(g, c);
		else
			c->st = C_IDLE;
		return;
	}
}

static void on_event(struct gen *g, struct epoll_event *ev, int64_t *next_due, size_t *next,
		     size_t total, int64_t period)
{
	struct conn *c = ev->data.ptr;
	if (c->st == C_FREE)
		return;
	if (c->st == C_CONNECTING && (ev->events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
		int e = 0;
		socklen_t l = sizeof(e);
		getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &e, &l);
		if (e) {
			g->errors++;
			conn_close(g, c);
			return;
		}
		/* The request it was opened for is still the oldest waiting. */
		if (*next < total && c->due == *next_due) {
			g->late[g->sent++] = now_ns() - c->due;
			conn_send(g, c);
			(*next)++;
			*next_due += period;
		} else {
			c->st = C_IDLE;
		}
		return;
	}
	if (ev->events & (EPOLLIN | EPOLLHUP | EPOLLERR))
		on_readable(g, c);
}

static void expire(struct gen *g, int64_t now)
{
	for (int i = 0; i < g->conns; i++) {
		struct conn *c = &g->c[i];
		if ((c->st == C_BUSY || c->st == C_CONNECTING) && now - c->due > TIMEOUT_NS &&
		    c->due) {
			if (c->st == C_BUSY)
				g->timeouts++;
			conn_close(g, c);
		}
	}
}

static int cmp(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

static double pct(int64_t *v, size_t n, double p)
{
	if (!n)
		return -1;
	size_t i = (size_t)(p * (double)(n - 1) + 0.5);
	return v[i] / 1e3;
}

static void build_request(struct gen *g, int port, bool json)
{
	int n = snprintf(g->req, sizeof(g->req),
			 "POST /prpc/v1/Health%s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
			 "Content-Length: %d\r\n%s\r\n%s",
			 json ? "?json" : "", port, json ? 2 : 0,
			 g->keepalive ? "" : "Connection: close\r\n", json ? "{}" : "");
	g->req_len = (size_t)n;
}

static int run(struct gen *g, double rate, double seconds)
{
	int64_t period = (int64_t)(1e9 / rate);
	size_t total = (size_t)(rate * seconds), next = 0;
	g->lat = calloc(total + 1, sizeof(int64_t));
	g->late = calloc(total + 1, sizeof(int64_t));
	if (!g->lat || !g->late)
		return -1;
	int64_t t0 = now_ns() + 10000000, next_due = t0;
	int64_t stop = t0 + (int64_t)(seconds * 1e9) + TIMEOUT_NS;
	struct epoll_event evs[64];
	for (;;) {
		int64_t now = now_ns();
		while (next < total && next_due <= now && dispatch(g, next_due)) {
			next++;
			next_due += period;
		}
		bool waiting = next < total && next_due <= now;
		if ((next >= total && g->open == 0) || now > stop)
			break;
		if (g->keepalive && next >= total) {
			bool busy = false;
			for (int i = 0; i < g->conns; i++)
				busy |= g->c[i].st == C_BUSY || g->c[i].st == C_CONNECTING;
			if (!busy)
				break;
		}
		int64_t wait = waiting || next >= total ? 1000000 : next_due - now;
		struct timespec ts = { wait / 1000000000, wait % 1000000000 };
		int n = epoll_pwait2(g->ep, evs, 64, &ts, NULL);
		for (int i = 0; i < n; i++)
			on_event(g, &evs[i], &next_due, &next, total, period);
		expire(g, now_ns());
	}
	size_t unsent = total - next;
	qsort(g->lat, g->n_lat, sizeof(int64_t), cmp);
	qsort(g->late, g->sent, sizeof(int64_t), cmp);
	printf("rate=%.0f seconds=%.1f sent=%zu ok=%zu errors=%zu timeouts=%zu unsent=%zu "
	       "p50_us=%.1f p90_us=%.1f p99_us=%.1f p999_us=%.1f max_us=%.1f late_p99_us=%.1f\n",
	       rate, seconds, g->sent, g->n_lat, g->errors, g->timeouts, unsent,
	       pct(g->lat, g->n_lat, 0.5), pct(g->lat, g->n_lat, 0.9),
	       pct(g->lat, g->n_lat, 0.99), pct(g->lat, g->n_lat, 0.999),
	       pct(g->lat, g->n_lat, 1.0), pct(g->late, g->sent, 0.99));
	return 0;
}

int main(int argc, char **argv)
{
	static struct gen g;
	if (argc != 7) {
		fprintf(stderr, "usage: %s PORT RATE SECONDS CONNS keepalive|close json|pb\n",
			argv[0]);
		return 2;
	}
	int port = atoi(argv[1]);
	double rate = atof(argv[2]), seconds = atof(argv[3]);
	g.conns = atoi(argv[4]);
	g.keepalive = strcmp(argv[5], "keepalive") == 0;
	if (port <= 0 || rate <= 0 || seconds <= 0 || g.conns < 1 || g.conns > MAXCONN)
		return 2;
	/* Timers fire when due, not up to 50 us later. */
	prctl(PR_SET_TIMERSLACK, 1UL);
	g.addr.sin_family = AF_INET;
	g.addr.sin_port = htons((uint16_t)port);
	g.addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	build_request(&g, port, strcmp(argv[6], "json") == 0);
	for (int i = 0; i < MAXCONN; i++)
		g.c[i].fd = -1;
	if ((g.ep = epoll_create1(EPOLL_CLOEXEC)) < 0)
		return 1;
	return run(&g, rate, seconds) < 0 ? 1 : 0;
}
