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
#include <stddef.h>
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
#include "rpc/refuse.h"

/* Asked of one splice from a socket: a default pipe's whole size. */
#define SPLICE_CHUNK (64 * 1024)

/* A node of a circular list with a sentinel: a link is in two at once. */
struct ring {
	struct ring *prev, *next;
};

/* Which end of a link an epoll event is about. */
struct end {
	struct link *l;
	int side;
};

enum link_state {
	LINK_FREE,
	LINK_NEW,        /* handed over, its first event not yet seen */
	LINK_CONNECTING, /* to the guest agent, in the connecting list */
	LINK_OPEN,
};

/* A relayed connection: fd[0] the client, fd[1] the guest agent. Direction
 * d moves fd[d]'s bytes to fd[!d] through pipe[d], which the link holds only
 * while bytes are in it (held[d] > 0); an empty pipe goes back to the pool. */
struct link {
	struct ring quiet;      /* in the quiet order, least recently moved first */
	struct ring connecting; /* in the connecting list, oldest first */
	struct link *next;      /* the free list or the dead list, when free */
	struct end end[2];
	int fd[2];
	int pipe[2][2];
	size_t held[2]; /* bytes in pipe[d] */
	bool eof[2];    /* fd[d] has read its end of stream */
	bool shut[2];   /* ...and fd[!d]'s sending side is shut */
	bool moved;     /* a byte moved during this event */
	enum link_state state;
	int64_t deadline; /* of the connect */
	int64_t start;    /* connected */
	int64_t last;     /* the last byte moved either way, or the start */
};

struct relay {
	union rpc_addr addr;
	socklen_t alen;
	char address[256];
	pthread_t thread;
	int ep, stop_fd, kick_fd;
	unsigned max;
	int64_t idle_ms;
	int keepalive_s;
	struct link *links;
	/* Empty pipes, made at the start and kept at RELAY_PIPE_POOL when
	 * nothing is relayed: a link takes one only while it holds bytes. */
	int pool[RELAY_PIPE_POOL][2];
	unsigned pooled;
	struct ring connecting; /* links whose connect is under way, oldest first */
	struct ring quiet;      /* connected links, least recently moved first */
	struct link *dead;      /* closed in this turn: freed before the next wait */
	int64_t now;            /* the time of this turn */
	bool down;              /* the last connect failed: an outage is logged */
	bool full;              /* the last newcomer was refused: logged */
	/* The gate takes links and queues connections, the relay thread
	 * gives links back and takes the queued connections. */
	pthread_mutex_t lock;
	struct link *free_list;
	unsigned limit;
	int pending[RELAY_PENDING];
	unsigned pend_first, pend_n;
	atomic_uint used; /* slots taken, new ones included */
	atomic_uint_fast64_t total, refused_full, refused_queue, refused_resources, unreachable,
		evicted, idle_closed, head_timeout, head_evicted, head_too_large, reset,
		reset_resources, dead_peer;
};

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

/* Taking a node out of a list it is not in changes nothing. */
static void ring_del(struct ring *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
	n->prev = n->next = n;
}

static void ring_add_tail(struct ring *head, struct ring *n)
{
	n->prev = head->prev;
	n->next = head;
	head->prev->next = n;
	head->prev = n;
}

/* The link at the head of a list, or NULL when it is empty. */
#define RING_FIRST(head, member) \
	((head)->next == (head) ? NULL \
			       : (struct link *)((char *)(head)->next - offsetof(struct link, member)))

/* A byte moved: the link goes to the end of the quiet order, in O(1). */
static void touch(struct relay *r, struct link *l)
{
	l->last = r->now;
	ring_del(&l->quiet);
	ring_add_tail(&r->quiet, &l->quiet);
}

/* Closes a link's sockets and pipes and takes it out of both lists; its
 * slot stays taken. reset: each socket is closed with a reset (SO_LINGER
 * zero) rather than a FIN, so that a peer never takes an end the other
 * side did not make for a clean one (an answer delimited by the close, cut
 * short, would look whole). */
static void link_end(struct relay *r, struct link *l, bool reset)
{
	static const struct linger now = { .l_onoff = 1, .l_linger = 0 };
	ring_del(&l->connecting);
	ring_del(&l->quiet);
	for (int d = 0; d < 2; d++) {
		if (l->fd[d] >= 0) {
			if (reset)
				setsockopt(l->fd[d], SOL_SOCKET, SO_LINGER, &now, sizeof(now));
			close(l->fd[d]); /* also leaves the epoll set */
		}
		l->fd[d] = -1;
		pipe_give(r, l->pipe[d], l->held[d] == 0);
	}
	l->state = LINK_FREE;
}

/* Its slot goes back to the gate before the relay thread waits again, and
 * not during a batch of events: an event of this batch about it must not
 * find it taken again. */
static void link_close(struct relay *r, struct link *l, bool reset)
{
	link_end(r, l, reset);
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

/* A free slot, if the limit allows one; with r->lock held. */
static struct link *slot_take_locked(struct relay *r)
{
	struct link *l = atomic_load(&r->used) < r->limit ? r->free_list : NULL;
	if (l) {
		r->free_list = l->next;
		atomic_fetch_add(&r->used, 1);
	}
	return l;
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

static void note_full(struct relay *r, bool full)
{
	if (full && !r->full)
		log_msg(LOG_WARNING, "relay: every slot moved bytes within the last %d ms; "
				     "new relayed connections are answered 503 until one is quiet",
			RELAY_BUSY_MS);
	else if (!full && r->full)
		log_msg(LOG_INFO, "relay: relayed connections are taken again");
	r->full = full;
}

static void link_unreachable(struct relay *r, struct link *l, int e)
{
	note_reach(r, e);
	atomic_fetch_add(&r->unreachable, 1);
	refuse(l->fd[0], REFUSE_UNREACHABLE);
	l->fd[0] = -1;
	link_close(r, l, false);
}

/* The agent's own want of fds or memory, not either side's failure. */
static bool no_resources(int e)
{
	return e == -EMFILE || e == -ENFILE || e == -ENOMEM || e == -ENOBUFS;
}

/* One side failed (a reset, EPIPE, or ETIMEDOUT when keepalive found its
 * peer gone): the other is reset, as the failure would have reached it
 * without the relay between them. Out of fds or memory for a pipe, the
 * link cannot go on: both sides are reset. */
static void link_failed(struct relay *r, struct link *l, int e)
{
	atomic_fetch_add(e == -ETIMEDOUT  ? &r->dead_peer
			 : no_resources(e) ? &r->reset_resources
					   : &r->reset,
			 1);
	link_close(r, l, true);
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
			l->moved = true;
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
			l->moved = true;
		}
	}
	if (!l->held[d])
		pipe_give(r, l->pipe[d], true);
	return e;
}

/* The error a socket reported with EPOLLERR, as -errno. */
static int sock_error(int fd)
{
	int e = 0;
	socklen_t len = sizeof(e);
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &len) < 0)
		e = errno;
	return -(e ? e : ECONNRESET);
}

/* An event on fd[s]: what came in on it moves on, and what waited for room
 * on it moves in. A socket that failed (a reset, a keepalive timeout)
 * ends the link once what could still move has moved, and the other side
 * is reset. */
static void link_run(struct relay *r, struct link *l, int s, uint32_t ev)
{
	int e = 0;
	if (ev & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
		e = pump(r, l, s, ev & (EPOLLRDHUP | EPOLLHUP));
	if (!e && l->held[!s] && (ev & (EPOLLOUT | EPOLLHUP | EPOLLERR)))
		e = pump(r, l, !s, false);
	if (!e && (ev & EPOLLERR))
		e = sock_error(l->fd[s]);
	if (l->moved) {
		l->moved = false;
		touch(r, l);
	}
	if (e)
		link_failed(r, l, e);
	else if (l->shut[0] && l->shut[1])
		link_close(r, l, false);
}

static int watch(struct relay *r, struct link *l, int side)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET,
				  .data.ptr = &l->end[side] };
	return epoll_ctl(r->ep, EPOLL_CTL_ADD, l->fd[side], &ev);
}

/* Connected: from now on in the quiet order, where the idle limit and
 * eviction find it. A connect still under way has its own deadline, and
 * is never evicted: a burst of newcomers is answered 503 rather than
 * resetting the connections ahead of it before they could be answered. */
static void link_opened(struct relay *r, struct link *l)
{
	l->state = LINK_OPEN;
	l->start = l->last = r->now;
	ring_add_tail(&r->quiet, &l->quiet);
	note_reach(r, 0);
}

/* The guest agent's socket was watched only once its connect was under
 * way: an event on it means the connect has ended. EPOLLOUT without an
 * error is a connection (a connecting socket never reports it). */
static void link_connected(struct relay *r, struct link *l, uint32_t ev)
{
	if ((ev & (EPOLLERR | EPOLLHUP)) || !(ev & EPOLLOUT)) {
		link_unreachable(r, l, -sock_error(l->fd[1]));
		return;
	}
	ring_del(&l->connecting);
	link_opened(r, l);
	/* The request has waited; an answer may have come with the connect. */
	link_run(r, l, 0, EPOLLIN);
	if (l->state == LINK_OPEN && (ev & (EPOLLIN | EPOLLRDHUP)))
		link_run(r, l, 1, ev);
}

int relay_keepalive(const struct relay *r, int fd)
{
	int one = 1, idle = r->keepalive_s, intvl = idle >= 4 ? idle / 4 : 1, cnt = 4;
	unsigned gone = 2u * (unsigned)idle * 1000;
	if (setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one)) < 0 ||
	    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle)) < 0 ||
	    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl)) < 0 ||
	    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt)) < 0 ||
	    setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &gone, sizeof(gone)) < 0)
		return -errno;
	return 0;
}

/* Out of fds or memory: the agent cannot take the client now. */
static void link_no_resources(struct relay *r, struct link *l)
{
	atomic_fetch_add(&r->refused_resources, 1);
	refuse(l->fd[0], REFUSE_FULL);
	l->fd[0] = -1;
	link_close(r, l, false);
}

/* A client from the gate, its first event: the connect to the guest agent. */
static void link_open(struct relay *r, struct link *l)
{
	note_full(r, false);
	l->fd[1] = socket(r->addr.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (l->fd[1] < 0) {
		link_no_resources(r, l);
		return;
	}
	/* Bytes go on as they come: a head and its body in two segments must
	 * not wait for an ACK each (Nagle) on the way through. The client's
	 * socket has it, and keepalive, from the listener (rpc/gate.c); a
	 * unix socket has neither. */
	if (r->addr.sa.sa_family != AF_UNIX) {
		int one = 1;
		setsockopt(l->fd[1], IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		relay_keepalive(r, l->fd[1]);
	}
	atomic_fetch_add(&r->total, 1);
	int c = connect(l->fd[1], &r->addr.sa, r->alen);
	/* A unix socket whose backlog is full says EAGAIN: unreachable too. */
	if (c < 0 && errno != EINPROGRESS) {
		link_unreachable(r, l, errno);
		return;
	}
	/* Watched after the connect began: before it, an unconnected socket
	 * reports a hang-up. */
	if (watch(r, l, 1) < 0) {
		link_no_resources(r, l);
		return;
	}
	if (c == 0) {
		link_opened(r, l);
		link_run(r, l, 0, EPOLLIN);
		return;
	}
	l->state = LINK_CONNECTING;
	l->deadline = r->now + RELAY_CONNECT_TIMEOUT_MS;
	ring_add_tail(&r->connecting, &l->connecting);
}

/* Ends what is past its time: connects past their deadline (502) and
 * links past the idle limit (reset both ways). ms to the next such time,
 * or -1. */
static int sweep(struct relay *r)
{
	struct link *l;
	int64_t now = r->now, next = -1;
	while ((l = RING_FIRST(&r->connecting, connecting)) && now >= l->deadline)
		link_unreachable(r, l, ETIMEDOUT);
	if (l)
		next = l->deadline - now;
	while ((l = RING_FIRST(&r->quiet, quiet)) && now - l->last >= r->idle_ms) {
		atomic_fetch_add(&r->idle_closed, 1);
		link_close(r, l, true);
	}
	if (l && (next < 0 || l->last + r->idle_ms - now < next))
		next = l->last + r->idle_ms - now;
	return next < 0 ? -1 : next > INT_MAX ? INT_MAX : (int)next;
}

/* Ready before the relay thread can see it: adding the fd to its epoll
 * set is the handover (the head waits unread, so the first event comes at
 * once). -errno, the slot then still taken. */
static int link_init(struct relay *r, struct link *l, int fd)
{
	l->quiet.prev = l->quiet.next = &l->quiet;
	l->connecting.prev = l->connecting.next = &l->connecting;
	l->end[0] = (struct end){ l, 0 };
	l->end[1] = (struct end){ l, 1 };
	l->fd[0] = fd;
	l->fd[1] = -1;
	for (int d = 0; d < 2; d++) {
		l->pipe[d][0] = l->pipe[d][1] = -1;
		l->held[d] = 0;
		l->eof[d] = l->shut[d] = false;
	}
	l->moved = false;
	l->state = LINK_NEW;
	if (watch(r, l, 0) == 0)
		return 0;
	l->fd[0] = -1;
	l->state = LINK_FREE;
	return -errno;
}

/* The quietest link's slot, for a newcomer, unless that link is busy:
 * then every link moved a byte within RELAY_BUSY_MS, and the newcomer is
 * refused. Busy is a transfer that has gone on for over RELAY_BUSY_MS and
 * still moves: what a link moved within its first RELAY_BUSY_MS (its own
 * request and a prompt answer) proves nothing, so that connections that
 * are answered and then sit, or a client that reconnects as fast as it is
 * evicted, never make every slot look busy (the quietest of them goes,
 * and a newcomer still gets a slot). */
static struct link *evict(struct relay *r)
{
	struct link *l = RING_FIRST(&r->quiet, quiet);
	if (!l || (r->now - l->last < RELAY_BUSY_MS && l->last - l->start >= RELAY_BUSY_MS))
		return NULL;
	atomic_fetch_add(&r->evicted, 1);
	link_end(r, l, true);
	return l;
}

/* The connections the gate queued for want of a free slot: each takes a
 * slot freed since, or the quietest link's, or is answered 503. Run
 * between batches of events, so that no event of a batch is about an
 * evicted link whose slot is taken again. */
static void take_pending(struct relay *r)
{
	for (;;) {
		int fd = -1;
		struct link *l = NULL;
		pthread_mutex_lock(&r->lock);
		if (r->pend_n) {
			fd = r->pending[r->pend_first];
			r->pend_first = (r->pend_first + 1) % RELAY_PENDING;
			r->pend_n--;
			l = slot_take_locked(r);
		}
		pthread_mutex_unlock(&r->lock);
		if (fd < 0)
			return;
		if (!l && !(l = evict(r))) {
			note_full(r, true);
			atomic_fetch_add(&r->refused_full, 1);
			refuse(fd, REFUSE_FULL);
		} else if (link_init(r, l, fd) < 0) {
			slots_give(r, l, l, 1);
			atomic_fetch_add(&r->refused_resources, 1);
			refuse(fd, REFUSE_FULL);
		}
	}
}

static void *relay_run(void *arg)
{
	struct relay *r = arg;
	struct epoll_event ev[64];
	/* Told apart in top -H and /proc/PID/task (its CPU, a test's ptrace). */
	pthread_setname_np(pthread_self(), "healthd-relay");
	for (;;) {
		r->now = clock_mono_ms();
		int wait = sweep(r);
		/* Every slot closed outside a batch (by the sweep) is free
		 * before the wait: none waits for some other event. */
		free_dead(r);
		int n = epoll_wait(r->ep, ev, ARRAY_SIZE(ev), wait);
		r->now = clock_mono_ms();
		bool kicked = false;
		for (int i = 0; i < n; i++) {
			void *p = ev[i].data.ptr;
			if (p == &r->stop_fd)
				return NULL;
			if (p == &r->kick_fd) {
				/* Read only to rearm it: the queue says what waits. */
				uint64_t v;
				kicked = true;
				if (read(r->kick_fd, &v, sizeof(v)) != sizeof(v)) {
					/* EAGAIN: nothing to read, nothing lost */
				}
				continue;
			}
			struct end *e = p;
			struct link *l = e->l;
			/* Closed earlier in this batch: its slot stays unused
			 * until the batch is done. */
			if (l->fd[e->side] < 0)
				continue;
			switch (l->state) {
			case LINK_NEW:
				link_open(r, l);
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
		if (kicked)
			take_pending(r);
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
				link_end(r, &r->links[i], true);
	for (unsigned i = 0; i < r->pend_n; i++)
		close(r->pending[(r->pend_first + i) % RELAY_PENDING]);
	for (unsigned i = 0; i < r->pooled; i++) {
		close(r->pool[i][0]);
		close(r->pool[i][1]);
	}
	if (r->ep >= 0)
		close(r->ep);
	if (r->stop_fd >= 0)
		close(r->stop_fd);
	if (r->kick_fd >= 0)
		close(r->kick_fd);
	pthread_mutex_destroy(&r->lock);
	free(r->links);
	free(r);
}

static int watch_own(struct relay *r, int *fd)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = fd };
	return epoll_ctl(r->ep, EPOLL_CTL_ADD, *fd, &ev);
}

int relay_start(const struct relay_opts *o, struct relay **out, struct errbuf *err)
{
	int e = relay_parse(o->address, err);
	if (e < 0)
		return e;
	struct relay *r = calloc(1, sizeof(*r));
	if (!r)
		return errbuf_set(err, ENOMEM, "relay: out of memory");
	r->ep = r->stop_fd = r->kick_fd = -1;
	pthread_mutex_init(&r->lock, NULL);
	rpc_addr_parse("relay address", o->address, &r->addr, &r->alen, err);
	snprintf(r->address, sizeof(r->address), "%s", o->address);
	r->max = r->limit = o->slots ? o->slots : RELAY_MAX_CONNECTIONS;
	r->idle_ms = o->idle_timeout_ms > 0 ? o->idle_timeout_ms : RELAY_IDLE_TIMEOUT_MS;
	r->keepalive_s = (int)(o->keepalive_s ? o->keepalive_s : RELAY_KEEPALIVE_S);
	r->connecting.prev = r->connecting.next = &r->connecting;
	r->quiet.prev = r->quiet.next = &r->quiet;
	if (!(r->links = calloc(r->max, sizeof(*r->links)))) {
		relay_free(r);
		return errbuf_set(err, ENOMEM, "relay: out of memory");
	}
	for (unsigned i = r->max; i-- > 0;) {
		struct link *l = &r->links[i];
		l->fd[0] = l->fd[1] = -1;
		l->quiet.prev = l->quiet.next = &l->quiet;
		l->connecting.prev = l->connecting.next = &l->connecting;
		l->next = r->free_list;
		r->free_list = l;
	}
	while (r->pooled < RELAY_PIPE_POOL &&
	       pipe2(r->pool[r->pooled], O_NONBLOCK | O_CLOEXEC) == 0)
		r->pooled++;
	if (r->pooled < RELAY_PIPE_POOL || (r->ep = epoll_create1(EPOLL_CLOEXEC)) < 0 ||
	    (r->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0 ||
	    (r->kick_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0 ||
	    watch_own(r, &r->stop_fd) < 0 || watch_own(r, &r->kick_fd) < 0) {
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
	return r->max * RELAY_FDS_PER_CONN + 2 * RELAY_PIPE_POOL + RELAY_PENDING;
}

void relay_fit(struct relay *r, unsigned slots)
{
	pthread_mutex_lock(&r->lock);
	r->limit = slots < r->max ? slots : r->max;
	pthread_mutex_unlock(&r->lock);
}

int relay_take(struct relay *r, int fd)
{
	bool queued = false, kick = false;
	pthread_mutex_lock(&r->lock);
	struct link *l = slot_take_locked(r);
	if (!l && r->pend_n < RELAY_PENDING) {
		r->pending[(r->pend_first + r->pend_n) % RELAY_PENDING] = fd;
		queued = true;
		/* The relay thread empties the queue after each wakeup: only
		 * the first of a run needs to wake it. */
		kick = r->pend_n++ == 0;
	}
	pthread_mutex_unlock(&r->lock);
	if (queued) {
		uint64_t one = 1;
		if (kick && write(r->kick_fd, &one, sizeof(one)) != sizeof(one))
			return -errno; /* cannot happen to an eventfd below its maximum */
		return 0;
	}
	if (l && link_init(r, l, fd) == 0)
		return 0;
	if (l)
		slots_give(r, l, l, 1);
	/* Every slot taken and RELAY_PENDING newcomers already waiting for
	 * the relay thread to make room. */
	atomic_fetch_add(l ? &r->refused_resources : &r->refused_queue, 1);
	refuse(fd, REFUSE_FULL);
	return -EBUSY;
}

void relay_count_head(struct relay *r, enum relay_head_end why)
{
	atomic_fetch_add(why == RELAY_HEAD_TIMEOUT   ? &r->head_timeout
			 : why == RELAY_HEAD_EVICTED ? &r->head_evicted
						     : &r->head_too_large,
			 1);
}

void relay_stats(struct relay *r, struct relay_stats *out)
{
	out->open = atomic_load(&r->used);
	out->total = atomic_load(&r->total);
	out->refused_full = atomic_load(&r->refused_full);
	out->refused_queue = atomic_load(&r->refused_queue);
	out->refused_resources = atomic_load(&r->refused_resources);
	out->unreachable = atomic_load(&r->unreachable);
	out->evicted = atomic_load(&r->evicted);
	out->idle_closed = atomic_load(&r->idle_closed);
	out->head_timeout = atomic_load(&r->head_timeout);
	out->head_evicted = atomic_load(&r->head_evicted);
	out->head_too_large = atomic_load(&r->head_too_large);
	out->reset = atomic_load(&r->reset);
	out->reset_resources = atomic_load(&r->reset_resources);
	out->dead_peer = atomic_load(&r->dead_peer);
	pthread_mutex_lock(&r->lock);
	out->slots = r->limit;
	pthread_mutex_unlock(&r->lock);
}

const char *relay_address(const struct relay *r)
{
	return r->address;
}
