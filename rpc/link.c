/* SPDX-License-Identifier: Apache-2.0 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <syslog.h>
#include <unistd.h>

#include "base/log.h"
#include "rpc/link.h"
#include "rpc/refuse.h"

/* Bytes moved: the link's history notes which way, and it goes to the end
 * of the quiet order, in O(1). */
static void link_note_moved(struct relay *r, struct link *l)
{
	for (int d = 0; d < 2; d++) {
		if (l->flow[d].moved)
			keep_moved(&l->keep, d == 0, l->flow[d].read_in, r->now);
		l->flow[d].moved = false;
		l->flow[d].read_in = 0;
	}
	ring_del(&l->quiet);
	ring_add_tail(&r->quiet, &l->quiet);
}

/* Closes a link's sockets and pipes and takes it out of both lists; its
 * slot stays taken. reset: each socket is closed with a reset (SO_LINGER
 * zero) rather than a FIN, so that a peer never takes an end the other
 * side did not make for a clean one (an answer delimited by the close, cut
 * short, would look whole). */
/* Takes fd[side] out of the relay's epoll set and hands it to the caller
 * (to answer and close): every socket leaves the set before it is closed,
 * whatever ends its link. A child that holds a copy of the fd (between the
 * nerdctl runner's fork and its exec, or a debugger) keeps the socket
 * alive, and a registration left behind would send its events to the
 * slot's next owner. ENOENT for a socket never watched. */
static int link_unwatch(struct relay *r, struct link *l, int side)
{
	int fd = l->fd[side];
	if (fd >= 0)
		epoll_ctl(r->ep, EPOLL_CTL_DEL, fd, NULL);
	l->fd[side] = -1;
	return fd;
}

void link_close_sockets(struct relay *r, struct link *l, bool reset)
{
	static const struct linger now = { .l_onoff = 1, .l_linger = 0 };
	ring_del(&l->connecting);
	ring_del(&l->quiet);
	for (int d = 0; d < 2; d++) {
		int fd = link_unwatch(r, l, d);
		if (fd >= 0) {
			if (reset)
				setsockopt(fd, SOL_SOCKET, SO_LINGER, &now, sizeof(now));
			close(fd);
		}
		pipes_give(&r->pipes, l->flow[d].pipe, l->flow[d].in_pipe == 0);
	}
	l->state = LINK_FREE;
}

/* Its slot goes back to the gate before the relay thread waits again, and
 * not during a batch of events: an event of this batch about it must not
 * find it taken again. */
void link_close(struct relay *r, struct link *l, bool reset)
{
	link_close_sockets(r, l, reset);
	l->next = r->dead;
	r->dead = l;
}

/* Log transitions, not connections: one warning per outage (naming the
 * client of the first request it failed), one info line when it ends. */
static void relay_log_reach(struct relay *r, const struct link *l, int e)
{
	char who[INET6_ADDRSTRLEN + 8];
	if (e && !r->down) {
		queue_source_format(&l->client, who, sizeof(who));
		log_msg(LOG_WARNING, "relay: the guest agent at %s cannot be reached: %s; "
				     "relayed requests are answered 502 until it can (first: a "
				     "request of client %s)",
			r->address, strerror(e), who);
	}
	else if (!e && r->down)
		log_msg(LOG_INFO, "relay: the guest agent at %s is reachable again", r->address);
	r->down = e != 0;
}

void link_unreachable(struct relay *r, struct link *l, int e)
{
	relay_log_reach(r, l, e);
	atomic_fetch_add(&r->unreachable, 1);
	refuse(link_unwatch(r, l, 0), REFUSE_UNREACHABLE);
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
void link_on_event(struct relay *r, struct link *l, int s, uint32_t ev)
{
	int e = 0;
	if ((ev & EPOLLPRI) && l->flow[s].urgent == URGENT_NONE)
		l->flow[s].urgent = URGENT_SEEN;
	if (ev & (EPOLLIN | EPOLLPRI | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
		e = pump_move(l->fd, l->flow, s, ev & (EPOLLRDHUP | EPOLLHUP), &r->pipes);
	if (!e && pump_unsent(&l->flow[!s]) && (ev & (EPOLLOUT | EPOLLHUP | EPOLLERR)))
		e = pump_move(l->fd, l->flow, !s, false, &r->pipes);
	if (!e && (ev & EPOLLERR))
		e = sock_error(l->fd[s]);
	if (l->flow[0].moved || l->flow[1].moved)
		link_note_moved(r, l);
	if (e)
		link_failed(r, l, e);
	else if (l->flow[0].phase == FLOW_ENDED && l->flow[1].phase == FLOW_ENDED)
		link_close(r, l, false);
}

/* Urgent data stays in the stream (SO_OOBINLINE), where pump_move reads
 * it at its mark. */
static int link_watch(struct relay *r, struct link *l, int side)
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
static void link_mark_connected(struct relay *r, struct link *l)
{
	l->state = LINK_OPEN;
	keep_start(&l->keep, r->now);
	ring_add_tail(&r->quiet, &l->quiet);
	relay_log_reach(r, l, 0);
}

/* The guest agent's socket was watched only once its connect was under
 * way: an event on it means the connect has ended. EPOLLOUT without an
 * error is a connection (a connecting socket never reports it). */
void link_finish_connect(struct relay *r, struct link *l, uint32_t ev)
{
	if ((ev & (EPOLLERR | EPOLLHUP)) || !(ev & EPOLLOUT)) {
		link_unreachable(r, l, -sock_error(l->fd[1]));
		return;
	}
	ring_del(&l->connecting);
	link_mark_connected(r, l);
	/* The request has waited; an answer may have come with the connect. */
	link_on_event(r, l, 0, EPOLLIN);
	if (l->state == LINK_OPEN && (ev & (EPOLLIN | EPOLLRDHUP)))
		link_on_event(r, l, 1, ev);
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
	refuse(link_unwatch(r, l, 0), REFUSE_FULL);
	link_close(r, l, false);
}

/* A client from the gate, its first event: the connect to the guest agent,
 * unless the client has already gone. A reset (or a close both ways) that
 * came after its head was routed costs the guest agent nothing: no connect
 * is begun for a client that cannot take the answer. A half-close is a
 * request body ended by the client's FIN, and is relayed. */
void link_begin_connect(struct relay *r, struct link *l, uint32_t ev)
{
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
	if (link_watch(r, l, 1) < 0) {
		link_no_resources(r, l);
		return;
	}
	if (c == 0) {
		link_mark_connected(r, l);
		link_on_event(r, l, 0, EPOLLIN);
		return;
	}
	l->state = LINK_CONNECTING;
	l->deadline = r->now + RELAY_CONNECT_TIMEOUT_MS;
	ring_add_tail(&r->connecting, &l->connecting);
}

/* Ready before the relay thread can see it: adding the fd to its epoll
 * set is the handover (the head waits unread, so the first event comes at
 * once). -errno, the slot then still taken. */
int link_hand_over(struct relay *r, struct link *l, int fd)
{
	l->quiet.prev = l->quiet.next = &l->quiet;
	l->connecting.prev = l->connecting.next = &l->connecting;
	l->end[0] = (struct end){ l, 0 };
	l->end[1] = (struct end){ l, 1 };
	l->fd[0] = fd;
	l->fd[1] = -1;
	pump_flow_init(&l->flow[0]);
	pump_flow_init(&l->flow[1]);
	l->queued_until = 0;
	l->state = LINK_NEW;
	if (link_watch(r, l, 0) == 0)
		return 0;
	l->fd[0] = -1;
	l->state = LINK_FREE;
	return -errno;
}
