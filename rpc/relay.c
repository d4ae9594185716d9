/* SPDX-License-Identifier: Apache-2.0 */
#include "rpc/relay.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <syslog.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/clock.h"
#include "base/log.h"
#include "rpc/server.h"

/* Asked of one splice from a socket: a default pipe's whole size. */
#define SPLICE_CHUNK (64 * 1024)
/* A refused client's request bytes read (and dropped) before the answer,
 * so that closing does not reset the connection under it. */
#define REFUSE_DRAIN (64 * 1024)

/* Public bodies, in the agent's words (README.md, "In a dstack guest image"). */
#define TEXT_UNREACHABLE "bad gateway: the guest agent cannot be reached"
#define TEXT_FULL "service unavailable: too many relayed connections"

/* Which end of a link an epoll event is about. */
struct end {
	struct link *l;
	int side;
};

/* A relayed connection: fd[0] the client, fd[1] the guest agent. Direction
 * d moves fd[d]'s bytes to fd[!d] through pipe[d]. */
struct link {
	struct link *prev, *next; /* connecting list (oldest first), or free list */
	struct end end[2];
	int fd[2];
	int pipe[2][2];
	size_t held[2]; /* bytes in pipe[d] */
	bool eof[2];    /* fd[d] has read its end of stream */
	bool shut[2];   /* ...and fd[!d]'s sending side is shut */
	bool connecting;
	int64_t deadline;
};

struct relay {
	struct sockaddr_storage addr;
	socklen_t alen;
	char address[256];
	pthread_t thread;
	int ep, stop_fd, queue[2]; /* queue: client fds from the gate */
	unsigned max, limit;
	struct link *links, *free_list;
	struct link connecting; /* sentinel of a circular list */
	bool down;              /* the last connect failed: an outage is logged */
	atomic_uint used;       /* slots taken, queued ones included */
	atomic_uint_fast64_t total, refused, unreachable;
};

/* The client is told why in a few words and closed. Its request is read
 * first (as much as has arrived), so that the close does not reset the
 * connection before the answer is read. */
static void refuse(int fd, unsigned code, const char *reason, const char *body)
{
	char buf[4096];
	size_t drained = 0;
	ssize_t n;
	while (drained < REFUSE_DRAIN && (n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT)) > 0)
		drained += (size_t)n;
	int len = snprintf(buf, sizeof(buf),
			   "HTTP/1.1 %u %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
			   "Content-Length: %zu\r\nConnection: close\r\n\r\n%s\n",
			   code, reason, strlen(body) + 1, body);
	if (len > 0 && (size_t)len < sizeof(buf) &&
	    send(fd, buf, (size_t)len, MSG_NOSIGNAL | MSG_DONTWAIT) == len)
		shutdown(fd, SHUT_WR);
	close(fd);
}

static void unlink_link(struct link *l)
{
	l->prev->next = l->next;
	l->next->prev = l->prev;
	l->prev = l->next = l;
}

static void link_close(struct relay *r, struct link *l)
{
	if (l->connecting)
		unlink_link(l);
	for (int d = 0; d < 2; d++) {
		if (l->fd[d] >= 0)
			close(l->fd[d]); /* also leaves the epoll set */
		l->fd[d] = -1;
		for (int e = 0; e < 2; e++)
			if (l->pipe[d][e] >= 0)
				close(l->pipe[d][e]);
	}
	l->next = r->free_list;
	r->free_list = l;
	atomic_fetch_sub(&r->used, 1);
}

/* Log transitions, not connections: one warning per outage, one info line
 * when it ends. */
static void note_reach(struct relay *r, int e)
{
	if (e && !r->down)
		log_msg(LOG_WARNING, "relay: the guest agent at %s cannot be reached: %s; "
				     "relayed requests are answered 502 until it can",
			r->address, strerror(e));
	else if (!e && r->down)
		log_msg(LOG_INFO, "relay: the guest agent at %s is reachable again", r->address);
	r->down = e != 0;
}

static void link_unreachable(struct relay *r, struct link *l, int e)
{
	note_reach(r, e);
	atomic_fetch_add(&r->unreachable, 1);
	refuse(l->fd[0], 502, "Bad Gateway", TEXT_UNREACHABLE);
	l->fd[0] = -1;
	link_close(r, l);
}

/* Moves what can move now from fd[d] to fd[!d]: 0, or -errno when the
 * link is broken. The pipe is emptied before more is read, so EAGAIN from
 * either splice means that side is not ready; the next edge on either
 * socket brings us back. */
static int pump(struct link *l, int d)
{
	for (;;) {
		ssize_t n;
		if (l->held[d]) {
			n = splice(l->pipe[d][0], NULL, l->fd[!d], NULL, l->held[d],
				   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
			if (n < 0)
				return errno == EAGAIN || errno == EINTR ? 0 : -errno;
			l->held[d] -= (size_t)n;
			continue;
		}
		if (l->eof[d]) {
			/* A half-close is passed on: the other side may still
			 * answer (a request body ended by the client's FIN). */
			if (!l->shut[d] && shutdown(l->fd[!d], SHUT_WR) < 0 && errno != ENOTCONN)
				return -errno;
			l->shut[d] = true;
			return 0;
		}
		n = splice(l->fd[d], NULL, l->pipe[d][1], NULL, SPLICE_CHUNK,
			   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
		if (n == 0)
			l->eof[d] = true;
		else if (n < 0)
			return errno == EAGAIN || errno == EINTR ? 0 : -errno;
		else
			l->held[d] += (size_t)n;
	}
}

/* failed: a socket reported an error (a reset) that pumping may not
 * have met; what could still move has moved. */
static void link_run(struct relay *r, struct link *l, bool failed)
{
	int e = pump(l, 0);
	if (!e)
		e = pump(l, 1);
	if (e || failed || (l->shut[0] && l->shut[1]))
		link_close(r, l);
}

static void link_connected(struct relay *r, struct link *l)
{
	int e = 0;
	socklen_t len = sizeof(e);
	if (getsockopt(l->fd[1], SOL_SOCKET, SO_ERROR, &e, &len) < 0)
		e = errno;
	if (e == 0) {
		/* An event without an error, before the connect is done,
		 * cannot happen for EPOLLOUT; for safety wait again. */
		struct sockaddr_storage peer;
		socklen_t plen = sizeof(peer);
		if (getpeername(l->fd[1], (struct sockaddr *)&peer, &plen) < 0) {
			if (errno == ENOTCONN)
				return;
			e = errno;
		}
	}
	if (e) {
		link_unreachable(r, l, e);
		return;
	}
	unlink_link(l);
	l->connecting = false;
	note_reach(r, 0);
	link_run(r, l, false);
}

static int watch(struct relay *r, struct link *l, int side)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET,
				  .data.ptr = &l->end[side] };
	return epoll_ctl(r->ep, EPOLL_CTL_ADD, l->fd[side], &ev);
}

/* A client from the gate: a slot was taken for it there. */
static void link_open(struct relay *r, int fd, int64_t now)
{
	struct link *l = r->free_list;
	r->free_list = l->next;
	memset(l, 0, sizeof(*l));
	l->prev = l->next = l;
	l->end[0] = (struct end){ l, 0 };
	l->end[1] = (struct end){ l, 1 };
	l->fd[0] = fd;
	l->fd[1] = -1;
	for (int d = 0; d < 2; d++)
		l->pipe[d][0] = l->pipe[d][1] = -1;
	atomic_fetch_add(&r->total, 1);
	if (pipe2(l->pipe[0], O_NONBLOCK | O_CLOEXEC) < 0 ||
	    pipe2(l->pipe[1], O_NONBLOCK | O_CLOEXEC) < 0 ||
	    (l->fd[1] = socket(r->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
			       0)) < 0) {
		/* Out of fds or memory: what a full relay answers. */
		atomic_fetch_add(&r->refused, 1);
		refuse(l->fd[0], 503, "Service Unavailable", TEXT_FULL);
		l->fd[0] = -1;
		link_close(r, l);
		return;
	}
	/* Bytes go on as they come: a head and its body in two segments must
	 * not wait for an ACK each (Nagle) on the way through. Unix sockets
	 * have no such option; failing here costs only latency. */
	int one = 1;
	for (int s = 0; s < 2; s++)
		setsockopt(l->fd[s], IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (watch(r, l, 0) < 0 || watch(r, l, 1) < 0) {
		link_close(r, l);
		return;
	}
	if (connect(l->fd[1], (struct sockaddr *)&r->addr, r->alen) == 0) {
		note_reach(r, 0);
		link_run(r, l, false);
		return;
	}
	/* A unix socket whose backlog is full says EAGAIN: unreachable too. */
	if (errno != EINPROGRESS) {
		link_unreachable(r, l, errno);
		return;
	}
	l->connecting = true;
	l->deadline = now + RELAY_CONNECT_TIMEOUT_MS;
	l->prev = r->connecting.prev;
	l->next = &r->connecting;
	r->connecting.prev->next = l;
	r->connecting.prev = l;
}

static void take_queued(struct relay *r)
{
	int fds[64];
	ssize_t n;
	while ((n = read(r->queue[0], fds, sizeof(fds))) > 0) {
		int64_t now = clock_mono_ms();
		/* A pipe's writes of an int are whole (below PIPE_BUF). */
		for (size_t i = 0; i < (size_t)n / sizeof(int); i++)
			link_open(r, fds[i], now);
	}
}

/* Fails the connects past their deadline; ms to the next one, or -1. */
static int sweep(struct relay *r, int64_t now)
{
	struct link *l;
	while ((l = r->connecting.next) != &r->connecting && now >= l->deadline)
		link_unreachable(r, l, ETIMEDOUT);
	return l != &r->connecting ? (int)(l->deadline - now) : -1;
}

static void *relay_run(void *arg)
{
	struct relay *r = arg;
	struct epoll_event ev[64];
	for (;;) {
		int n = epoll_wait(r->ep, ev, ARRAY_SIZE(ev), sweep(r, clock_mono_ms()));
		for (int i = 0; i < n; i++) {
			void *p = ev[i].data.ptr;
			if (p == &r->stop_fd)
				return NULL;
			if (p == &r->queue[0]) {
				take_queued(r);
				continue;
			}
			struct end *e = p;
			struct link *l = e->l;
			/* Closed earlier in this batch: its slot is free, or
			 * taken again by a newer client. Both fds of a link
			 * came in one batch at most once each; a closed link's
			 * fds are -1 or reused, which the side check tells. */
			if (l->fd[e->side] < 0)
				continue;
			if (l->connecting) {
				if (e->side == 1)
					link_connected(r, l);
			} else {
				link_run(r, l, ev[i].events & EPOLLERR);
			}
		}
	}
}

int relay_parse(const char *address, struct errbuf *err)
{
	struct sockaddr_storage ss;
	socklen_t alen;
	int r = rpc_addr_parse("relay address", address, &ss, &alen, err);
	if (r < 0)
		return r;
	if ((ss.ss_family == AF_INET && ((struct sockaddr_in *)&ss)->sin_port == 0) ||
	    (ss.ss_family == AF_INET6 && ((struct sockaddr_in6 *)&ss)->sin6_port == 0))
		return errbuf_set(err, EINVAL, "relay address '%s': port 0 cannot be connected to",
				  address);
	return 0;
}

static void relay_free(struct relay *r)
{
	if (r->links)
		for (unsigned i = 0; i < r->max; i++)
			if (r->links[i].end[0].l && r->links[i].fd[0] >= 0)
				link_close(r, &r->links[i]);
	int *fds[] = { &r->ep, &r->stop_fd, &r->queue[0], &r->queue[1] };
	for (size_t i = 0; i < ARRAY_SIZE(fds); i++)
		if (*fds[i] >= 0)
			close(*fds[i]);
	/* fds queued and never taken */
	free(r->links);
	free(r);
}

static int watch_own(int ep, int *fd)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = fd };
	return epoll_ctl(ep, EPOLL_CTL_ADD, *fd, &ev);
}

int relay_start(const struct relay_opts *o, struct relay **out, struct errbuf *err)
{
	int e = relay_parse(o->address, err);
	if (e < 0)
		return e;
	struct relay *r = calloc(1, sizeof(*r));
	if (!r)
		return errbuf_set(err, ENOMEM, "relay: out of memory");
	r->ep = r->stop_fd = r->queue[0] = r->queue[1] = -1;
	rpc_addr_parse("relay address", o->address, &r->addr, &r->alen, err);
	snprintf(r->address, sizeof(r->address), "%s", o->address);
	r->max = r->limit = o->slots ? o->slots : RELAY_MAX_CONNECTIONS;
	r->connecting.prev = r->connecting.next = &r->connecting;
	if (!(r->links = calloc(r->max, sizeof(*r->links)))) {
		relay_free(r);
		return errbuf_set(err, ENOMEM, "relay: out of memory");
	}
	for (unsigned i = r->max; i-- > 0;) {
		r->links[i].next = r->free_list;
		r->free_list = &r->links[i];
	}
	if ((r->ep = epoll_create1(EPOLL_CLOEXEC)) < 0 ||
	    (r->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0 ||
	    pipe2(r->queue, O_CLOEXEC | O_NONBLOCK) < 0 || watch_own(r->ep, &r->stop_fd) < 0 ||
	    watch_own(r->ep, &r->queue[0]) < 0) {
		e = errno;
		relay_free(r);
		return errbuf_set(err, e, "relay: %s", strerror(e));
	}
	if ((e = pthread_create(&r->thread, NULL, relay_run, r))) {
		relay_free(r);
		return errbuf_set(err, e, "relay: starting the thread: %s", strerror(e));
	}
	*out = r;
	return 0;
}

void relay_stop(struct relay *r)
{
	if (!r)
		return;
	uint64_t one = 1;
	if (write(r->stop_fd, &one, sizeof(one)) == sizeof(one))
		pthread_join(r->thread, NULL);
	int fd;
	while (read(r->queue[0], &fd, sizeof(fd)) == sizeof(fd))
		close(fd);
	relay_free(r);
}

unsigned relay_fds_wanted(const struct relay *r)
{
	return r->max * RELAY_FDS_PER_CONN;
}

void relay_fit(struct relay *r, unsigned slots)
{
	r->limit = slots < r->max ? slots : r->max;
}

int relay_take(struct relay *r, int fd)
{
	/* Only this thread takes slots: the check and the add cannot race
	 * with another taker, only with the relay giving one back. */
	if (atomic_load(&r->used) >= r->limit) {
		atomic_fetch_add(&r->refused, 1);
		refuse(fd, 503, "Service Unavailable", TEXT_FULL);
		return -EBUSY;
	}
	atomic_fetch_add(&r->used, 1);
	if (write(r->queue[1], &fd, sizeof(fd)) != sizeof(fd)) {
		int e = errno;
		atomic_fetch_sub(&r->used, 1);
		atomic_fetch_add(&r->refused, 1);
		refuse(fd, 503, "Service Unavailable", TEXT_FULL);
		return -e;
	}
	return 0;
}

void relay_stats(struct relay *r, struct relay_stats *out)
{
	out->open = atomic_load(&r->used);
	out->total = atomic_load(&r->total);
	out->refused = atomic_load(&r->refused);
	out->unreachable = atomic_load(&r->unreachable);
	out->slots = r->limit;
}

const char *relay_address(const struct relay *r)
{
	return r->address;
}
