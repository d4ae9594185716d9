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
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <syslog.h>
#include <unistd.h>

#include <linux/sockios.h>

#include "base/cleanup.h"
#include "base/clock.h"
#include "base/log.h"
#include "rpc/addr.h"
#include "rpc/keep.h"
#include "rpc/queue.h"
#include "rpc/refuse.h"

/* Asked of one splice from a socket: a default pipe's whole size. */
#define SPLICE_CHUNK (64 * 1024)
/* A newcomer that finds no slot free and no link idle waits this long at
 * most, looking again every KEEP_SETTLE_MS, while a link is still
 * connecting, moving bytes or awaiting its answer: a burst of newcomers
 * larger than the slots then takes room from its own links once they are
 * answered, and a guest agent slow under load has time to answer, before
 * anyone is refused. */
#define RELAY_QUEUE_WAIT_MS 1000

_Static_assert(RELAY_PENDING <= QUEUE_MAX, "the queue holds RELAY_PENDING places");

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

/* TCP urgent data on fd[d]. splice stops at its mark, so the urgent byte
 * is read by hand (SO_OOBINLINE keeps it in the stream) and sent on as
 * urgent, after every byte before it. */
enum urgent {
	URGENT_NONE,
	URGENT_SEEN, /* announced (EPOLLPRI); its mark not reached yet */
	URGENT_HELD, /* read, waiting for room to be sent on */
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
	size_t held[2];   /* bytes in pipe[d] */
	bool eof[2];      /* fd[d] has read its end of stream */
	bool shut[2];     /* ...and fd[!d]'s sending side is shut */
	bool moved[2];    /* direction d moved a byte during this event */
	enum urgent urgent[2];
	unsigned char urgent_byte[2];
	enum link_state state;
	int64_t deadline; /* of the connect */
	int64_t queued_until; /* bytes were found in a socket's send queue: held till then */
	struct keep keep; /* its history, once connected (rpc/keep.h) */
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
	int64_t retry_at;       /* the first newcomer waits for a link to settle until
				 * then; -1: it does not wait */
	atomic_uint fresh;      /* links handed over (by either thread) whose first
				 * event has not come */
	bool down;              /* the last connect failed: an outage is logged */
	bool full;              /* the last newcomer was refused: logged */
	/* The gate takes links and queues connections, the relay thread
	 * gives links back and takes the queued connections. */
	pthread_mutex_t lock;
	struct link *free_list;
	unsigned limit;
	/* Connections the gate could not give a free slot, and when each
	 * came; as many places as relay_budget leaves (rpc/queue.h). */
	struct queue waiting;
	atomic_uint used; /* slots taken, new ones included */
	atomic_uint_fast64_t total, refused_full, refused_queue, refused_share, refused_resources, unreachable,
		evicted, idle_closed, head_timeout, head_evicted, head_too_large, reset,
		reset_resources, dead_peer, abandoned;
	/* What kept every slot at the last refused_full (struct relay_stats). */
	atomic_uint kept[4];
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

/* Bytes moved: the link's history notes which way, and it goes to the end
 * of the quiet order, in O(1). */
static void touch(struct relay *r, struct link *l)
{
	for (int d = 0; d < 2; d++)
		if (l->moved[d])
			keep_moved(&l->keep, d == 0, r->now);
	l->moved[0] = l->moved[1] = false;
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
			/* Out of the epoll set before the close: a child that
			 * holds a copy of the fd (between the nerdctl runner's
			 * fork and its exec) keeps the socket alive, and its
			 * events would reach the slot's next owner. ENOENT for
			 * a socket never watched. */
			epoll_ctl(r->ep, EPOLL_CTL_DEL, l->fd[d], NULL);
			close(l->fd[d]);
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

/* kept: what kept each slot, by enum keep_rule (KEEP_NONE: connecting). */
static void note_full(struct relay *r, bool full, const unsigned kept[4])
{
	if (full && !r->full)
		log_msg(LOG_WARNING, "relay: no slot can be taken (%u moving bytes, %u awaiting an "
				     "answer, %u streams, %u connecting); new relayed connections "
				     "are answered 503 until one is idle",
			kept[KEEP_MOVING], kept[KEEP_AWAITING], kept[KEEP_STREAM], kept[KEEP_NONE]);
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

/* splice found nothing to read: when that is because fd[d]'s next byte is
 * urgent (splice stops at the mark), it is read now and held to be sent on
 * as urgent. Whether it found one. */
static bool at_urgent_mark(struct link *l, int d)
{
	int at = 0;
	if (l->urgent[d] != URGENT_SEEN || ioctl(l->fd[d], SIOCATMARK, &at) < 0 || !at)
		return false;
	if (recv(l->fd[d], &l->urgent_byte[d], 1, MSG_DONTWAIT) != 1)
		return false;
	l->urgent[d] = URGENT_HELD;
	l->moved[d] = true;
	return true;
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
			l->moved[d] = true;
			full = false;
			continue;
		}
		if (!l->held[d] && l->urgent[d] == URGENT_HELD) {
			/* Every byte before it has gone: the urgent byte now. */
			if (send(l->fd[!d], &l->urgent_byte[d], 1, MSG_OOB | MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
				e = errno == EAGAIN || errno == EINTR ? 0 : -errno;
				break;
			}
			l->urgent[d] = URGENT_NONE;
			l->moved[d] = true;
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
		} else if (n < 0 && errno == EAGAIN && !l->held[d] && at_urgent_mark(l, d)) {
			continue;
		} else if (n < 0 && errno == EAGAIN && fin && l->held[d]) {
			full = true;
		} else if (n < 0 && errno != EAGAIN && errno != EINTR && l->held[d]) {
			/* A reset after bytes read ahead (only a read with the
			 * end in sight holds bytes): they are written to the
			 * other side, which sends at once what its window takes;
			 * the reset that follows discards the rest. */
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
			l->moved[d] = true;
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
	if ((ev & EPOLLPRI) && l->urgent[s] == URGENT_NONE)
		l->urgent[s] = URGENT_SEEN;
	if (ev & (EPOLLIN | EPOLLPRI | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
		e = pump(r, l, s, ev & (EPOLLRDHUP | EPOLLHUP));
	if (!e && (l->held[!s] || l->urgent[!s] == URGENT_HELD) &&
	    (ev & (EPOLLOUT | EPOLLHUP | EPOLLERR)))
		e = pump(r, l, !s, false);
	if (!e && (ev & EPOLLERR))
		e = sock_error(l->fd[s]);
	if (l->moved[0] || l->moved[1])
		touch(r, l);
	if (e)
		link_failed(r, l, e);
	else if (l->shut[0] && l->shut[1])
		link_close(r, l, false);
}

/* Urgent data stays in the stream (SO_OOBINLINE), where pump reads it at
 * its mark. */
static int watch(struct relay *r, struct link *l, int side)
{
	static const int one = 1;
	struct epoll_event ev = { .events = EPOLLIN | EPOLLPRI | EPOLLOUT | EPOLLRDHUP | EPOLLET,
				  .data.ptr = &l->end[side] };
	setsockopt(l->fd[side], SOL_SOCKET, SO_OOBINLINE, &one, sizeof(one));
	return epoll_ctl(r->ep, EPOLL_CTL_ADD, l->fd[side], &ev);
}

/* Connected: from now on in the quiet order, where the idle limit and
 * eviction find it. A connect still under way has its own deadline, and
 * is never evicted: a burst of newcomers is answered 503 rather than
 * resetting the connections ahead of it before they could be answered. */
static void link_opened(struct relay *r, struct link *l)
{
	l->state = LINK_OPEN;
	keep_start(&l->keep, r->now);
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

/* A client from the gate, its first event: the connect to the guest agent,
 * unless the client has already gone. A reset (or a close both ways) that
 * came after its head was routed costs the guest agent nothing: no connect
 * is begun for a client that cannot take the answer. A half-close is a
 * request body ended by the client's FIN, and is relayed. */
static void link_open(struct relay *r, struct link *l, uint32_t ev)
{
	static const unsigned none[4];
	atomic_fetch_sub(&r->fresh, 1);
	note_full(r, false, none);
	if (ev & (EPOLLERR | EPOLLHUP)) {
		atomic_fetch_add(&r->abandoned, 1);
		link_close(r, l, false);
		return;
	}
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
	while ((l = RING_FIRST(&r->quiet, quiet)) && now - l->keep.last >= r->idle_ms) {
		atomic_fetch_add(&r->idle_closed, 1);
		link_close(r, l, true);
	}
	if (l && (next < 0 || l->keep.last + r->idle_ms - now < next))
		next = l->keep.last + r->idle_ms - now;
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
	l->moved[0] = l->moved[1] = false;
	l->urgent[0] = l->urgent[1] = URGENT_NONE;
	l->queued_until = 0;
	l->state = LINK_NEW;
	if (watch(r, l, 0) == 0) {
		atomic_fetch_add(&r->fresh, 1);
		return 0;
	}
	l->fd[0] = -1;
	l->state = LINK_FREE;
	return -errno;
}

/* What a newcomer with no free slot can take: the youngest link idle
 * between exchanges (rpc/keep.h); when to look again for one (none idle,
 * or the youngest in the reserve of the oldest while younger links are in
 * flight); and what keeps the others, for the counters.
 * O(slots), twice at most (the second to count a victim's elders, when it
 * may be in the reserve), once an eviction (and once more for each
 * would-be victim found with bytes in a send queue, held then for
 * KEEP_SETTLE_MS) and at most once a KEEP_SETTLE_MS while newcomers wait. */
struct pick {
	struct link *victim; /* the youngest idle link */
	int64_t look_at;     /* with none idle, when one may be: the first to settle,
			      * or KEEP_SETTLE_MS from now while one is connecting,
			      * moving or awaiting; with the victim in the reserve
			      * (spare_reserve), when a younger one may; -1: none may */
	unsigned kept[4];    /* by enum keep_rule; KEEP_NONE counts the connecting */
};

/* Bytes of the link wait to be sent on: in its pipes, or, found there by
 * link_queued within KEEP_SETTLE_MS, in a socket's send queue. */
static bool link_held(const struct relay *r, const struct link *l)
{
	return l->held[0] || l->held[1] || l->urgent[0] == URGENT_HELD ||
	       l->urgent[1] == URGENT_HELD || r->now < l->queued_until;
}

/* Bytes wait in a socket's send queue that the other side has not taken:
 * a client that reads nothing may leave a whole answer there, the pipes
 * empty. That is an answer in flight, not a link idle between exchanges;
 * it is noted, and the link is held, for KEEP_SETTLE_MS. Asked of the
 * kernel only of the link pick() is about to evict, so that an eviction
 * costs an ioctl or two, not two for every slot. */
static bool link_queued(struct relay *r, struct link *l)
{
	for (int d = 0; d < 2; d++) {
		int q = 0;
		if (l->fd[d] >= 0 && ioctl(l->fd[d], SIOCOUTQ, &q) == 0 && q > 0) {
			l->queued_until = r->now + KEEP_SETTLE_MS;
			return true;
		}
	}
	return false;
}

#define QUIET_LINK(n) ((struct link *)((char *)(n) - offsetof(struct link, quiet)))

/* When a link, held (link_held) and kept by k, may have become idle, worth
 * a waiting newcomer's look again: when it settles, or KEEP_SETTLE_MS from
 * now while it moves bytes or awaits an answer; -1 when it is idle already,
 * or a stream (kept for a minute). */
static int64_t link_look_at(const struct relay *r, const struct link *l, bool held,
			    enum keep_rule k)
{
	int64_t at = keep_settles_at(&l->keep, held, r->now);
	if (at < 0 && (k == KEEP_MOVING || k == KEEP_AWAITING))
		at = r->now + KEEP_SETTLE_MS;
	return at;
}

/* The earlier of two times, -1 being none. */
static int64_t earlier(int64_t a, int64_t b)
{
	return a < 0 || (b >= 0 && b < a) ? b : a;
}

/* The youngest idle link, p->victim, is spared while it is in the reserve
 * of the oldest (rpc/keep.h) and links younger than it are connecting,
 * moving or awaiting their answers: the newcomer then looks again when the
 * first of those may have settled (p->look_at), and takes the reserve's
 * link only when its wait is over (wait_until). */
static void spare_reserve(const struct relay *r, struct pick *p)
{
	const struct link *v = p->victim;
	unsigned older = 0;
	int64_t at = p->kept[KEEP_NONE] ? r->now + KEEP_SETTLE_MS : -1;
	p->look_at = -1;
	for (struct ring *n = r->quiet.next; n != &r->quiet; n = n->next) {
		const struct link *l = QUIET_LINK(n);
		if (l->keep.start < v->keep.start) {
			if (!keep_reserved(++older, r->limit))
				return;
			continue;
		}
		bool held = link_held(r, l);
		at = earlier(at, link_look_at(r, l, held, keep_rule(&l->keep, held, r->now)));
	}
	if (keep_reserved(older, r->limit))
		p->look_at = at;
}

static void scan(struct relay *r, struct pick *p)
{
	struct ring *n;
	*p = (struct pick){ .look_at = -1 };
	for (n = r->connecting.next; n != &r->connecting; n = n->next)
		p->kept[KEEP_NONE]++;
	/* Links handed over or connecting are younger than any connected one,
	 * and about to await their answers. */
	p->kept[KEEP_NONE] += atomic_load(&r->fresh);
	if (p->kept[KEEP_NONE])
		p->look_at = r->now + KEEP_SETTLE_MS;
	for (n = r->quiet.next; n != &r->quiet; n = n->next) {
		struct link *l = QUIET_LINK(n);
		bool held = link_held(r, l);
		enum keep_rule k = keep_rule(&l->keep, held, r->now);
		if (k == KEEP_NONE) {
			if (!p->victim || l->keep.start > p->victim->keep.start)
				p->victim = l;
			continue;
		}
		p->kept[k]++;
		p->look_at = earlier(p->look_at, link_look_at(r, l, held, k));
	}
	if (p->victim)
		spare_reserve(r, p);
}

/* A victim found with bytes in a send queue is held, and the slots are
 * looked through again: each look holds one more link, never the same. */
static void pick(struct relay *r, struct pick *p)
{
	do
		scan(r, p);
	while (p->victim && link_queued(r, p->victim));
}

/* The victim is reset both ways and its slot is the newcomer's. */
static struct link *evict(struct relay *r, struct link *l)
{
	atomic_fetch_add(&r->evicted, 1);
	link_end(r, l, true);
	return l;
}

static void pending_drop(struct relay *r)
{
	pthread_mutex_lock(&r->lock);
	queue_drop_first(&r->waiting);
	pthread_mutex_unlock(&r->lock);
}

static void refuse_full(struct relay *r, int fd, const unsigned kept[4])
{
	note_full(r, true, kept);
	for (int k = 0; k < 4; k++)
		atomic_store(&r->kept[k], kept[k]);
	atomic_fetch_add(&r->refused_full, 1);
	refuse(fd, REFUSE_FULL);
}

/* When the first newcomer, queued at since, looks again for a slot; -1: it
 * does not wait, and takes the victim's slot or is refused. */
static int64_t wait_until(const struct relay *r, const struct pick *k, int64_t since)
{
	int64_t until = since + RELAY_QUEUE_WAIT_MS;
	if (k->look_at < 0 || r->now >= until)
		return -1;
	return k->look_at < until ? k->look_at : until;
}

/* The newcomers the gate queued for want of a free slot, in their turn
 * (rpc/queue.h: the sources in turn, first come first within each): each
 * takes a slot freed since, or the youngest idle link's (rpc/keep.h),
 * or is answered 503 when every link moves bytes, awaits an answer,
 * carries a stream or is connecting. With none idle, or the youngest idle
 * in the reserve of the oldest while younger links are in flight, the first
 * waits (wait_until) while one may still become idle, or a younger one; the
 * rest wait behind it.
 * Run between batches of events, so that no event of a batch is about an
 * evicted link whose slot is taken again. */
static void take_pending(struct relay *r)
{
	for (;;) {
		struct queue_waiter p;
		pthread_mutex_lock(&r->lock);
		bool any = queue_first(&r->waiting, &p);
		struct link *l = any ? slot_take_locked(r) : NULL;
		pthread_mutex_unlock(&r->lock);
		if (!any) {
			r->retry_at = -1;
			return;
		}
		if (!l) {
			if (r->retry_at >= 0 && r->now < r->retry_at)
				return;
			struct pick k;
			pick(r, &k);
			if ((r->retry_at = wait_until(r, &k, p.since)) >= 0)
				return;
			if (!k.victim) {
				pending_drop(r);
				r->retry_at = -1;
				refuse_full(r, p.fd, k.kept);
				continue;
			}
			l = evict(r, k.victim);
		}
		pending_drop(r);
		r->retry_at = -1;
		if (link_init(r, l, p.fd) < 0) {
			slots_give(r, l, l, 1);
			atomic_fetch_add(&r->refused_resources, 1);
			refuse(p.fd, REFUSE_FULL);
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
		 * before the wait, and the newcomers waiting take what they
		 * can: none waits for some other event. */
		free_dead(r);
		take_pending(r);
		if (r->retry_at >= 0 && (wait < 0 || r->retry_at - r->now < wait))
			wait = (int)(r->retry_at - r->now);
		int n = epoll_wait(r->ep, ev, ARRAY_SIZE(ev), wait);
		r->now = clock_mono_ms();
		for (int i = 0; i < n; i++) {
			void *p = ev[i].data.ptr;
			if (p == &r->stop_fd)
				return NULL;
			if (p == &r->kick_fd) {
				/* Read only to rearm it: the queue says what waits. */
				uint64_t v;
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
				link_open(r, l, ev[i].events);
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
				link_end(r, &r->links[i], true);
	struct queue_waiter w;
	for (; queue_first(&r->waiting, &w); queue_drop_first(&r->waiting))
		close(w.fd);
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
	queue_init(&r->waiting, RELAY_PENDING);
	r->retry_at = -1;
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

void relay_budget(unsigned long fds, unsigned max, unsigned *slots, unsigned *queue)
{
	unsigned long left = fds > 2 * RELAY_PIPE_POOL ? fds - 2 * RELAY_PIPE_POOL : 0;
	/* A slot and a place in the queue each, while the queue is short of
	 * RELAY_PENDING; past that, the queue is whole and the rest is slots. */
	unsigned long n = left / (RELAY_FDS_PER_CONN + 1);
	if (n > RELAY_PENDING)
		n = (left - RELAY_PENDING) / RELAY_FDS_PER_CONN;
	if (n > max)
		n = max;
	unsigned long q = left - n * RELAY_FDS_PER_CONN;
	*slots = (unsigned)n;
	*queue = (unsigned)(q < RELAY_PENDING ? q : RELAY_PENDING);
}

void relay_fit(struct relay *r, unsigned long fds)
{
	pthread_mutex_lock(&r->lock);
	unsigned places;
	relay_budget(fds, r->max, &r->limit, &places);
	queue_set_cap(&r->waiting, places);
	pthread_mutex_unlock(&r->lock);
}

int relay_take(struct relay *r, int fd, const struct sockaddr *sa, socklen_t alen)
{
	enum queue_added added = QUEUE_FULL;
	struct queue_waiter pushed, w = { .fd = fd, .since = clock_mono_ms() };
	struct queue_source source;
	queue_source_of(sa, alen, &source);
	pthread_mutex_lock(&r->lock);
	/* A slot freed while others wait is theirs. */
	bool waited = r->waiting.n > 0;
	struct link *l = waited ? NULL : slot_take_locked(r);
	if (!l)
		added = queue_add(&r->waiting, &source, &w, &pushed);
	pthread_mutex_unlock(&r->lock);
	if (added == QUEUE_PUSHED) {
		atomic_fetch_add(&r->refused_share, 1);
		refuse(pushed.fd, REFUSE_FULL);
	}
	if (added != QUEUE_FULL) {
		uint64_t one = 1;
		/* One wakeup per run: the relay thread looks at the whole
		 * queue each turn. */
		if (!waited && write(r->kick_fd, &one, sizeof(one)) != sizeof(one))
			return -errno; /* cannot happen to an eventfd below its maximum */
		return 0;
	}
	if (l && link_init(r, l, fd) == 0)
		return 0;
	if (l)
		slots_give(r, l, l, 1);
	/* Every slot taken and the queue full of newcomers already waiting
	 * for the relay thread to make room, as many from this source as
	 * from any; or no slot at all. */
	atomic_fetch_add(l ? &r->refused_resources : r->limit ? &r->refused_queue : &r->refused_full, 1);
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
	out->refused_share = atomic_load(&r->refused_share);
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
	out->abandoned = atomic_load(&r->abandoned);
	out->kept_awaiting = atomic_load(&r->kept[KEEP_AWAITING]);
	out->kept_moving = atomic_load(&r->kept[KEEP_MOVING]);
	out->kept_streams = atomic_load(&r->kept[KEEP_STREAM]);
	out->kept_connecting = atomic_load(&r->kept[KEEP_NONE]);
	pthread_mutex_lock(&r->lock);
	out->slots = r->limit;
	out->queue = r->waiting.cap;
	pthread_mutex_unlock(&r->lock);
}

const char *relay_address(const struct relay *r)
{
	return r->address;
}
