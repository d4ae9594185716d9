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
#include "rpc/addr.h"

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

enum link_state {
	LINK_FREE,
	LINK_NEW,        /* handed over by the gate, its first event not yet seen */
	LINK_CONNECTING, /* to the guest agent, in the connecting list */
	LINK_OPEN,
};

/* A relayed connection: fd[0] the client, fd[1] the guest agent. Direction
 * d moves fd[d]'s bytes to fd[!d] through pipe[d], which the link holds only
 * while bytes are in it (held[d] > 0); an empty pipe goes back to the pool. */
struct link {
	struct link *prev, *next; /* connecting list (oldest first), or free list */
	struct end end[2];
	int fd[2];
	int pipe[2][2];
	size_t held[2]; /* bytes in pipe[d] */
	bool eof[2];    /* fd[d] has read its end of stream */
	bool shut[2];   /* ...and fd[!d]'s sending side is shut */
	enum link_state state;
	int64_t deadline;
};

struct relay {
	union rpc_addr addr;
	socklen_t alen;
	char address[256];
	pthread_t thread;
	int ep, stop_fd;
	unsigned max;
	struct link *links;
	/* Empty pipes, made at the start and kept at RELAY_PIPE_POOL when
	 * nothing is relayed: a link takes one only while it holds bytes. */
	int pool[RELAY_PIPE_POOL][2];
	unsigned pooled;
	struct link connecting; /* sentinel of a circular list */
	struct link *dead;      /* closed in this batch of events: freed after it */
	bool down;              /* the last connect failed: an outage is logged */
	/* The gate takes links, the relay thread gives them back. */
	pthread_mutex_t lock;
	struct link *free_list;
	unsigned limit;
	atomic_uint used; /* slots taken, new ones included */
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

/* An empty pipe: the pool's, else a new one. */
static int pipe_take(struct relay *r, int p[2])
{
	if (r->pooled) {
		r->pooled--;
		p[0] = r->pool[r->pooled][0];
		p[1] = r->pool[r->pooled][1];
		return 0;
	}
	return pipe2(p, O_NONBLOCK | O_CLOEXEC) < 0 ? -errno : 0;
}

/* A pipe given back: to the pool when it is empty and the pool has room.
 * One closed with bytes in it is replaced, so that the pool is whole again
 * once nothing is relayed (the fd count then is what it was at the start). */
static void pipe_give(struct relay *r, int p[2], bool empty)
{
	if (p[0] < 0)
		return;
	if (empty && r->pooled < RELAY_PIPE_POOL) {
		r->pool[r->pooled][0] = p[0];
		r->pool[r->pooled][1] = p[1];
		r->pooled++;
	} else {
		close(p[0]);
		close(p[1]);
		if (!empty && r->pooled < RELAY_PIPE_POOL &&
		    pipe2(r->pool[r->pooled], O_NONBLOCK | O_CLOEXEC) == 0)
			r->pooled++;
	}
	p[0] = p[1] = -1;
}

static void unlink_link(struct link *l)
{
	l->prev->next = l->next;
	l->next->prev = l->prev;
	l->prev = l->next = l;
}

/* Its slot goes back to the gate after the batch of events it was closed
 * in: an event of this batch about it must not find it taken again. */
static void link_close(struct relay *r, struct link *l)
{
	if (l->state == LINK_CONNECTING)
		unlink_link(l);
	for (int d = 0; d < 2; d++) {
		if (l->fd[d] >= 0)
			close(l->fd[d]); /* also leaves the epoll set */
		l->fd[d] = -1;
		pipe_give(r, l->pipe[d], l->held[d] == 0);
	}
	l->state = LINK_FREE;
	l->next = r->dead;
	r->dead = l;
}

/* Slots first..last (n of them, linked by next) back to the gate. */
static void slots_give(struct relay *r, struct link *first, struct link *last, unsigned n)
{
	pthread_mutex_lock(&r->lock);
	last->next = r->free_list;
	r->free_list = first;
	atomic_fetch_sub(&r->used, n);
	pthread_mutex_unlock(&r->lock);
}

static void free_dead(struct relay *r)
{
	unsigned n = 0;
	struct link *last = NULL;
	for (struct link *l = r->dead; l; l = l->next) {
		last = l;
		n++;
	}
	if (n)
		slots_give(r, r->dead, last, n);
	r->dead = NULL;
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
 * socket brings us back (edge-triggered: a read stops only at EAGAIN or the
 * end of stream).
 * fin: fd[d]'s end of stream has already arrived (EPOLLRDHUP), so a read
 * from it returns bytes or the end, never EAGAIN for want of them. Then the
 * pipe is filled first and its EAGAIN means full: the rest of the stream is
 * read before it is written, and the last bytes are held (SPLICE_F_MORE)
 * for the shutdown that follows, which sends them and the FIN in one
 * segment instead of two (an HTTP answer and its close: one wakeup fewer
 * for the client). */
static int pump(struct relay *r, struct link *l, int d, bool fin)
{
	int e = 0;
	bool full = false;
	for (;;) {
		ssize_t n;
		if (l->held[d] && (!fin || full || l->eof[d])) {
			n = splice(l->pipe[d][0], NULL, l->fd[!d], NULL, l->held[d],
				   SPLICE_F_MOVE | SPLICE_F_NONBLOCK | (l->eof[d] ? SPLICE_F_MORE : 0));
			if (n < 0) {
				e = errno == EAGAIN || errno == EINTR ? 0 : -errno;
				break;
			}
			l->held[d] -= (size_t)n;
			full = false;
			continue;
		}
		if (l->eof[d]) {
			/* A half-close is passed on: the other side may still
			 * answer (a request body ended by the client's FIN).
			 * When the other way has ended too, the link closes
			 * now and the close ends the stream. */
			if (!l->shut[d] && !l->shut[!d] && shutdown(l->fd[!d], SHUT_WR) < 0 &&
			    errno != ENOTCONN)
				e = -errno;
			l->shut[d] = true;
			break;
		}
		if (l->pipe[d][0] < 0 && (e = pipe_take(r, l->pipe[d])) < 0)
			break;
		n = splice(l->fd[d], NULL, l->pipe[d][1], NULL, SPLICE_CHUNK,
			   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
		if (n == 0) {
			l->eof[d] = true;
		} else if (n < 0 && errno == EAGAIN && fin && l->held[d]) {
			full = true;
		} else if (n < 0 && errno != EAGAIN && errno != EINTR && l->held[d]) {
			/* A reset after bytes read ahead (only a read with the
			 * end in sight holds bytes): they go on as far as the
			 * other side takes them now, as they would have gone
			 * before the read that found the reset. */
			e = -errno;
			while (l->held[d] && (n = splice(l->pipe[d][0], NULL, l->fd[!d], NULL, l->held[d],
							 SPLICE_F_MOVE | SPLICE_F_NONBLOCK)) > 0)
				l->held[d] -= (size_t)n;
			break;
		} else if (n < 0) {
			e = errno == EAGAIN || errno == EINTR ? 0 : -errno;
			break;
		} else {
			l->held[d] += (size_t)n;
		}
	}
	if (!l->held[d])
		pipe_give(r, l->pipe[d], true);
	return e;
}

/* An event on fd[s]: what came in on it moves on, and what waited for room
 * on it moves in. A socket that failed (a reset) closes the link once what
 * could still move has moved. */
static void link_run(struct relay *r, struct link *l, int s, uint32_t ev)
{
	int e = 0;
	if (ev & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
		e = pump(r, l, s, ev & (EPOLLRDHUP | EPOLLHUP));
	if (!e && l->held[!s] && (ev & (EPOLLOUT | EPOLLHUP | EPOLLERR)))
		e = pump(r, l, !s, false);
	if (e || (ev & EPOLLERR) || (l->shut[0] && l->shut[1]))
		link_close(r, l);
}

static int watch(struct relay *r, struct link *l, int side)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET,
				  .data.ptr = &l->end[side] };
	return epoll_ctl(r->ep, EPOLL_CTL_ADD, l->fd[side], &ev);
}

/* The guest agent's socket was watched only once its connect was under
 * way: an event on it means the connect has ended. EPOLLOUT without an
 * error is a connection (a connecting socket never reports it). */
static void link_connected(struct relay *r, struct link *l, uint32_t ev)
{
	if ((ev & (EPOLLERR | EPOLLHUP)) || !(ev & EPOLLOUT)) {
		int e = 0;
		socklen_t len = sizeof(e);
		if (getsockopt(l->fd[1], SOL_SOCKET, SO_ERROR, &e, &len) < 0)
			e = errno;
		link_unreachable(r, l, e ? e : ECONNRESET);
		return;
	}
	unlink_link(l);
	l->state = LINK_OPEN;
	note_reach(r, 0);
	/* The request has waited; an answer may have come with the connect. */
	link_run(r, l, 0, EPOLLIN);
	if (l->state == LINK_OPEN && (ev & (EPOLLIN | EPOLLRDHUP)))
		link_run(r, l, 1, ev);
}

/* A client from the gate, its first event: the connect to the guest agent. */
static void link_open(struct relay *r, struct link *l, int64_t now)
{
	atomic_fetch_add(&r->total, 1);
	l->fd[1] = socket(r->addr.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (l->fd[1] < 0) {
		/* Out of fds or memory: what a full relay answers. */
		atomic_fetch_add(&r->refused, 1);
		refuse(l->fd[0], 503, "Service Unavailable", TEXT_FULL);
		l->fd[0] = -1;
		link_close(r, l);
		return;
	}
	/* Bytes go on as they come: a head and its body in two segments must
	 * not wait for an ACK each (Nagle) on the way through. The client's
	 * socket has it from the listener (rpc/gate.c); a unix socket has no
	 * such option. */
	int one = 1;
	if (r->addr.sa.sa_family != AF_UNIX)
		setsockopt(l->fd[1], IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	int c = connect(l->fd[1], &r->addr.sa, r->alen);
	/* A unix socket whose backlog is full says EAGAIN: unreachable too. */
	if (c < 0 && errno != EINPROGRESS) {
		link_unreachable(r, l, errno);
		return;
	}
	/* Watched after the connect began: before it, an unconnected socket
	 * reports a hang-up. */
	if (watch(r, l, 1) < 0) {
		link_close(r, l);
		return;
	}
	if (c == 0) {
		l->state = LINK_OPEN;
		note_reach(r, 0);
		link_run(r, l, 0, EPOLLIN);
		return;
	}
	l->state = LINK_CONNECTING;
	l->deadline = now + RELAY_CONNECT_TIMEOUT_MS;
	l->prev = r->connecting.prev;
	l->next = &r->connecting;
	r->connecting.prev->next = l;
	r->connecting.prev = l;
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
			struct end *e = p;
			struct link *l = e->l;
			/* Closed earlier in this batch: its slot stays unused
			 * until the batch is done. */
			if (l->fd[e->side] < 0)
				continue;
			switch (l->state) {
			case LINK_NEW:
				link_open(r, l, clock_mono_ms());
				break;
			case LINK_CONNECTING:
				/* The client's bytes wait for the connect. */
				if (e->side == 1)
					link_connected(r, l, ev[i].events);
				break;
			case LINK_OPEN:
				link_run(r, l, e->side, ev[i].events);
				break;
			case LINK_FREE:
				break;
			}
		}
		free_dead(r);
	}
}

int relay_parse(const char *address, struct errbuf *err)
{
	union rpc_addr a;
	socklen_t alen;
	int r = rpc_addr_parse("relay address", address, &a, &alen, err);
	if (r < 0)
		return r;
	if ((a.sa.sa_family == AF_INET && a.in.sin_port == 0) ||
	    (a.sa.sa_family == AF_INET6 && a.in6.sin6_port == 0))
		return errbuf_set(err, EINVAL, "relay address '%s': port 0 cannot be connected to",
				  address);
	return 0;
}

static void relay_free(struct relay *r)
{
	if (r->links)
		for (unsigned i = 0; i < r->max; i++)
			if (r->links[i].state != LINK_FREE)
				link_close(r, &r->links[i]);
	for (unsigned i = 0; i < r->pooled; i++) {
		close(r->pool[i][0]);
		close(r->pool[i][1]);
	}
	if (r->ep >= 0)
		close(r->ep);
	if (r->stop_fd >= 0)
		close(r->stop_fd);
	pthread_mutex_destroy(&r->lock);
	free(r->links);
	free(r);
}

int relay_start(const struct relay_opts *o, struct relay **out, struct errbuf *err)
{
	int e = relay_parse(o->address, err);
	if (e < 0)
		return e;
	struct relay *r = calloc(1, sizeof(*r));
	if (!r)
		return errbuf_set(err, ENOMEM, "relay: out of memory");
	r->ep = r->stop_fd = -1;
	pthread_mutex_init(&r->lock, NULL);
	rpc_addr_parse("relay address", o->address, &r->addr, &r->alen, err);
	snprintf(r->address, sizeof(r->address), "%s", o->address);
	r->max = r->limit = o->slots ? o->slots : RELAY_MAX_CONNECTIONS;
	r->connecting.prev = r->connecting.next = &r->connecting;
	if (!(r->links = calloc(r->max, sizeof(*r->links)))) {
		relay_free(r);
		return errbuf_set(err, ENOMEM, "relay: out of memory");
	}
	for (unsigned i = r->max; i-- > 0;) {
		r->links[i].fd[0] = r->links[i].fd[1] = -1;
		r->links[i].next = r->free_list;
		r->free_list = &r->links[i];
	}
	while (r->pooled < RELAY_PIPE_POOL &&
	       pipe2(r->pool[r->pooled], O_NONBLOCK | O_CLOEXEC) == 0)
		r->pooled++;
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &r->stop_fd };
	if (r->pooled < RELAY_PIPE_POOL || (r->ep = epoll_create1(EPOLL_CLOEXEC)) < 0 ||
	    (r->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0 ||
	    epoll_ctl(r->ep, EPOLL_CTL_ADD, r->stop_fd, &ev) < 0) {
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
	/* Links handed over and never seen are closed with the rest. */
	relay_free(r);
}

unsigned relay_fds_wanted(const struct relay *r)
{
	return r->max * RELAY_FDS_PER_CONN + 2 * RELAY_PIPE_POOL;
}

void relay_fit(struct relay *r, unsigned slots)
{
	pthread_mutex_lock(&r->lock);
	r->limit = slots < r->max ? slots : r->max;
	pthread_mutex_unlock(&r->lock);
}

int relay_take(struct relay *r, int fd)
{
	pthread_mutex_lock(&r->lock);
	struct link *l = atomic_load(&r->used) < r->limit ? r->free_list : NULL;
	if (l) {
		r->free_list = l->next;
		atomic_fetch_add(&r->used, 1);
	}
	pthread_mutex_unlock(&r->lock);
	int e = EBUSY;
	if (l) {
		/* Ready before the relay can see it: adding the fd to its
		 * epoll set is the handover (the first line waits unread, so
		 * the first event comes at once). */
		l->prev = l->next = l;
		l->end[0] = (struct end){ l, 0 };
		l->end[1] = (struct end){ l, 1 };
		l->fd[0] = fd;
		l->fd[1] = -1;
		for (int d = 0; d < 2; d++) {
			l->pipe[d][0] = l->pipe[d][1] = -1;
			l->held[d] = 0;
			l->eof[d] = l->shut[d] = false;
		}
		l->state = LINK_NEW;
		if (watch(r, l, 0) == 0)
			return 0;
		e = errno;
		l->fd[0] = -1;
		l->state = LINK_FREE;
		slots_give(r, l, l, 1);
	}
	atomic_fetch_add(&r->refused, 1);
	refuse(fd, 503, "Service Unavailable", TEXT_FULL);
	return -e;
}

void relay_stats(struct relay *r, struct relay_stats *out)
{
	out->open = atomic_load(&r->used);
	out->total = atomic_load(&r->total);
	out->refused = atomic_load(&r->refused);
	out->unreachable = atomic_load(&r->unreachable);
	pthread_mutex_lock(&r->lock);
	out->slots = r->limit;
	pthread_mutex_unlock(&r->lock);
}

const char *relay_address(const struct relay *r)
{
	return r->address;
}
