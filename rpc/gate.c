/* SPDX-License-Identifier: Apache-2.0 */
#include "rpc/gate.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <linux/sockios.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/clock.h"
#include "base/log.h"
#include "rpc/addr.h"
#include "rpc/proxy.h"
#include "rpc/refuse.h"
#include "rpc/relay.h"

/* Accepted per turn of the loop before libmicrohttpd reads them. It also
 * bounds the connections being closed beyond the slots at any moment, so
 * the daemon's own limit is slots + ACCEPT_BATCH and is never what refuses
 * a connection. */
#define ACCEPT_BATCH 64
/* After accept() fails for want of fds or memory, the next try. */
#define RETRY_MS 100
/* A parked connection's next look, when what arrived since its last one
 * is less than what that look saw (a trickle). Each look peeks everything
 * from the first byte, so a look on every arrival costs a head trickled a
 * byte per segment a peek of up to GATE_HEAD_MAX per byte. Looked at only
 * when what is there has doubled, or this long after, a head costs at most
 * 15 + header_timeout/LOOK_LATER_MS peeks however it trickles; one sent
 * whole is looked at on arrival, and one whose last segment is small, this
 * much later. */
#define LOOK_LATER_MS 50
/* What every look again at a parked connection may peek, all connections
 * together: a budget of bytes refilled with time (PEEK_PER_MS a ms, at
 * most PEEK_BURST at once), so that a thousand parked heads near the bound,
 * each trickling, cost the thread that answers Health a bounded share of a
 * core rather than a peek of up to 32 KiB per head per LOOK_LATER_MS. A
 * look the budget cannot pay for is put off like a trickle's. A first look
 * (a connection's first bytes, usually its whole head) and a look at a
 * peer's end are not charged. */
#define PEEK_PER_MS (16 * 1024)
#define PEEK_BURST (4 * GATE_HEAD_MAX)

/* A connection we accepted; in the waiting list until it has completed a
 * request, and again from the end of each one. One that has sent nothing
 * yet is parked in the gate's own epoll set, not handed to the daemon, so
 * that its first bytes can be looked at before libmicrohttpd reads them
 * (and it holds no libmicrohttpd memory while it is silent). */
struct conn {
	struct conn *prev, *next; /* waiting list (oldest first), or free list */
	struct conn *lprev, *lnext; /* the later list, while look_at is set */
	int64_t since;            /* accept, or the end of the previous request */
	int64_t look_at;          /* a look put off (LOOK_LATER_MS), or 0 */
	size_t peeked;            /* bytes there at the last look */
	int fd;
	bool ours;                /* not handed to the daemon (yet) */
	bool parked;              /* ours, and in our epoll set */
	bool doomed;              /* shut down; the daemon closes it next turn */
	bool head;                /* the relay's, waiting for the rest of its head */
	bool proxy_pending;       /* its PROXY header not read yet (a declared port) */
	bool from_header;         /* the client is the header's, not the peer */
	struct proxy_addr client; /* from_header: its address (AF_UNSPEC: unknown) */
};

struct gate {
	struct MHD_Daemon *d;
	int lfd, ep, stop_fd, mhd_fd;
	pthread_t thread;
	bool listening;
	int64_t retry_at;
	unsigned slots, pool, open, doomed; /* open: parked ones too */
	struct conn *adding; /* being handed to the daemon */
	bool handed;         /* since the daemon's last turn */
	int64_t head_timeout_ms;
	struct conn *conns, *free_list;
	struct conn waiting; /* sentinel of a circular list */
	struct conn later;   /* sentinel: looks put off, the first due first */
	MHD_RequestCompletedCallback completed;
	void *completed_cls;
	struct relay *relay;
	int64_t peek_budget, peek_at; /* bytes that may be peeked, as of peek_at */
	atomic_bool proxy;            /* the port is declared "pp" (gate_set_proxy) */
	struct log_limit proxy_log[PROXY_V2_TLV + 2]; /* by enum proxy_why; the last: cut short */
	atomic_uint_fast64_t head_timeout, evicted; /* struct gate_stats */
	atomic_uint_fast64_t proxy_read, proxy_none, proxy_refused;
};

static void unlink_conn(struct conn *k)
{
	k->prev->next = k->next;
	k->next->prev = k->prev;
	k->prev = k->next = k;
}

/* Looks are put off by the same time, so the list is in due order. */
static void later_add(struct gate *g, struct conn *k, int64_t now)
{
	k->look_at = now + LOOK_LATER_MS;
	k->lprev = g->later.lprev;
	k->lnext = &g->later;
	g->later.lprev->lnext = k;
	g->later.lprev = k;
}

static void later_del(struct conn *k)
{
	if (!k->look_at)
		return;
	k->lprev->lnext = k->lnext;
	k->lnext->lprev = k->lprev;
	k->lprev = k->lnext = k;
	k->look_at = 0;
}

static void wait_from(struct gate *g, struct conn *k, int64_t now)
{
	k->since = now;
	k->prev = g->waiting.prev;
	k->next = &g->waiting;
	g->waiting.prev->next = k;
	g->waiting.prev = k;
}

static struct conn *conn_get(struct gate *g, int fd, int64_t now)
{
	struct conn *k = g->free_list;
	g->free_list = k->next;
	k->fd = fd;
	k->ours = true;
	k->parked = k->doomed = k->head = false;
	/* Decided once, at the accept: a connection is read as it came. */
	k->proxy_pending = k->from_header = atomic_load(&g->proxy);
	k->client.family = AF_UNSPEC;
	k->look_at = 0;
	k->peeked = 0;
	wait_from(g, k, now);
	g->open++;
	return k;
}

static void conn_put(struct gate *g, struct conn *k)
{
	k->next = g->free_list;
	g->free_list = k;
	g->open--;
}

static struct conn *oldest(struct gate *g)
{
	return g->waiting.next == &g->waiting ? NULL : g->waiting.next;
}

/* libmicrohttpd has no call to close a connection it owns: a socket shut
 * down both ways reads as end of stream at its next turn, and it closes the
 * connection then, on this thread, so the fd cannot have been reused. */
static void doom(struct gate *g, struct conn *k)
{
	unlink_conn(k);
	later_del(k);
	if (k->ours) {
		/* Taken out of our epoll set before the close: a copy of the
		 * fd in a child (between a spawn's fork and its exec) keeps
		 * the socket, and its events, alive past our close, and they
		 * would reach the slot's next owner. */
		if (k->parked)
			epoll_ctl(g->ep, EPOLL_CTL_DEL, k->fd, NULL);
		close(k->fd);
		k->parked = false;
		conn_put(g, k);
		return;
	}
	k->doomed = true;
	g->doomed++;
	shutdown(k->fd, SHUT_RDWR);
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
			  enum MHD_ConnectionNotificationCode code)
{
	struct gate *g = cls;
	struct conn *k = *socket_context;
	if (code == MHD_CONNECTION_NOTIFY_STARTED) {
		/* Called from within MHD_add_connection(), on this thread. */
		*socket_context = g->adding;
		g->adding = NULL;
		return;
	}
	if (!k)
		return;
	if (k->doomed)
		g->doomed--;
	else
		unlink_conn(k);
	conn_put(g, k);
	*socket_context = NULL;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **req_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct gate *g = cls;
	if (toe == MHD_REQUEST_TERMINATED_COMPLETED_OK) {
		const union MHD_ConnectionInfo *ci =
			MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
		struct conn *k = ci ? ci->socket_context : NULL;
		if (k && !k->doomed) { /* kept alive: the next request's clock */
			unlink_conn(k);
			wait_from(g, k, clock_mono_ms());
		}
	}
	if (g->completed)
		g->completed(g->completed_cls, c, req_cls, toe);
}

/* Closes a connection still waiting for its request, at its deadline
 * (timeout) or to make room. Counted as the relay's when its first line
 * said it was for the relay, else as the gate's. */
static void cut(struct gate *g, struct conn *k, bool timeout)
{
	if (k->head)
		relay_count_head(g->relay, timeout ? RELAY_HEAD_TIMEOUT : RELAY_HEAD_EVICTED);
	else
		atomic_fetch_add(timeout ? &g->head_timeout : &g->evicted, 1);
	doom(g, k);
}

/* Closes what is past its deadline; ms to the next deadline, or -1. */
static int sweep(struct gate *g, int64_t now)
{
	struct conn *k;
	while ((k = oldest(g)) && now - k->since >= g->head_timeout_ms)
		cut(g, k, true);
	return k ? (int)(k->since + g->head_timeout_ms - now) : -1;
}

static bool has_room(struct gate *g)
{
	return g->open < g->pool && (g->open - g->doomed < g->slots || oldest(g));
}

/* While nothing can be accepted the listener leaves the epoll set (it is
 * level-triggered and would spin); connections wait in the backlog. */
static void set_listening(struct gate *g, bool on)
{
	struct epoll_event ev = { .events = on ? EPOLLIN : 0, .data.ptr = &g->lfd };
	if (on != g->listening && epoll_ctl(g->ep, EPOLL_CTL_MOD, g->lfd, &ev) == 0)
		g->listening = on;
}

/* Whether the first bytes can start a request: optional empty lines, then
 * a method token and a space. Anything else (binary, a TLS hello) is closed
 * at once; libmicrohttpd would wait on some of it (a line that starts with
 * a NUL reads to it as an empty line). */
static bool looks_like_http(const unsigned char *p, size_t n)
{
	size_t i = 0, tok = 0;
	while (i < n && (p[i] == '\r' || p[i] == '\n'))
		i++;
	for (; i < n && p[i] != ' '; i++, tok++)
		if (p[i] <= ' ' || p[i] >= 0x7f || strchr("\"(),/:;<=>?@[\\]{}", p[i]))
			return false;
	return i == n || tok > 0;
}

/* Whether p[0..n), which follows the end of a line, holds the end of a
 * head: an empty line, CRLF or a bare LF (RFC 9112 §2.2 lets a recipient
 * take a bare LF for a line's end, and the guest agent's parser does). */
static bool head_ends(const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n;) {
		if (p[i] == '\n' || (p[i] == '\r' && i + 1 < n && p[i + 1] == '\n'))
			return true;
		const unsigned char *eol = memchr(p + i, '\n', n - i);
		if (!eol)
			return false;
		i = (size_t)(eol - p) + 1;
	}
	return false;
}

enum gate_route gate_route_first(const unsigned char *p, size_t n, bool ended, bool relay)
{
	if (n > GATE_HEAD_MAX)
		n = GATE_HEAD_MAX;
	if (!looks_like_http(p, n))
		return GATE_CLOSE;
	if (!relay)
		return GATE_AGENT;
	/* Nothing more will be looked at: the bound is reached. */
	bool full = n == GATE_HEAD_MAX;
	/* Empty lines before a request are allowed (RFC 9112 §2.2). */
	size_t i = 0;
	while (i < n && (p[i] == '\r' || p[i] == '\n'))
		i++;
	if (i == n)
		return ended || full ? GATE_CLOSE : GATE_WAIT;
	/* Routed only once the line is whole: until then the connection is
	 * the gate's, under header_timeout, however slowly it trickles. */
	const unsigned char *eol = memchr(p + i, '\n', n - i);
	if (!eol && !ended && !full)
		return GATE_WAIT;
	const unsigned char *end = eol ? eol : p + n;
	const unsigned char *sp = memchr(p + i, ' ', (size_t)(end - p - i));
	if (!sp)
		return GATE_AGENT; /* no target: the daemon says what is wrong */
	const unsigned char *t = sp + 1;
	size_t tlen = 0;
	while (t + tlen < end && t[tlen] != ' ' && t[tlen] != '\r' && t[tlen] != '?')
		tlen++;
	if (tlen == strlen(GATE_HEALTH_PATH) && !memcmp(t, GATE_HEALTH_PATH, tlen))
		return GATE_AGENT; /* a line too long is the daemon's to refuse */
	/* The relay's, once its whole head is here: the guest agent has no
	 * deadline of its own for a head (rwf2/Rocket issue 1405), so the gate
	 * keeps the connection under header_timeout until then. The peer's
	 * end of stream ends the head early; the bound does not. */
	if (!eol)
		return full ? GATE_LINE_TOO_LONG : GATE_RELAY;
	if (head_ends(eol + 1, (size_t)(p + n - eol - 1)))
		return GATE_RELAY;
	return full ? GATE_HEAD_TOO_LARGE : ended ? GATE_RELAY : GATE_WAIT_HEAD;
}

/* A connection's first look. hup: the peer has ended its stream (or
 * failed), so what is there is all there will be. *seen: the bytes looked
 * at. */
/* Whether the peer's end of stream has come: the event said so, and this
 * socket says so. The event may be a closed connection's whose slot this
 * one took in the same batch. */
static bool peer_ended(int fd, bool hup)
{
	struct pollfd pf = { .fd = fd, .events = POLLRDHUP };
	return hup && poll(&pf, 1, 0) == 1 && (pf.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

static enum gate_route first_look(struct gate *g, int fd, bool hup, size_t *seen)
{
	unsigned char buf[GATE_HEAD_MAX];
	/* Without a relay the first bytes decide: no more is peeked. */
	size_t want = g->relay ? sizeof(buf) : 32;
	ssize_t n = recv(fd, buf, want, MSG_PEEK | MSG_DONTWAIT);
	if (n < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? GATE_WAIT
										 : GATE_CLOSE;
	if (n == 0)
		return GATE_CLOSE;
	*seen = (size_t)n;
	return gate_route_first(buf, (size_t)n, peer_ended(fd, hup), g->relay != NULL);
}

/* A header refused: counted, and logged at most once a LOG_LIMIT_MS for
 * each way it was wrong (a client's flood of them must not flood the
 * journal), with the peer that sent it. cut: the peer ended it short. */
static void proxy_refused(struct gate *g, int fd, enum proxy_why why, bool cut)
{
	union rpc_addr peer;
	socklen_t len = sizeof(peer);
	char who[80] = "?";
	unsigned more;
	atomic_fetch_add(&g->proxy_refused, 1);
	if (!log_limit_pass(&g->proxy_log[cut ? PROXY_V2_TLV + 1 : why], clock_mono_ms(), &more))
		return;
	if (getpeername(fd, &peer.sa, &len) < 0 || rpc_addr_format(&peer, who, sizeof(who)) < 0)
		snprintf(who, sizeof(who), "?");
	char since[96] = "";
	if (more)
		snprintf(since, sizeof(since), " (and %u more for this since the last such line)", more);
	log_msg(LOG_WARNING, "listener: closed a connection from %s: PROXY header %s%s", who,
		cut ? "cut short by the peer's end" : proxy_why_name(why), since);
}

/* A connection on a port declared "pp": its PROXY header, peeked, then
 * taken off the socket exactly (rpc/proxy.h never looks past it), so that
 * what follows is routed and relayed as if it came first. GATE_WAIT while
 * it is not whole; GATE_CLOSE for a bad one; GATE_AGENT when it is read,
 * or the connection has none (the gateway's own requests: one unknown
 * client), and routing goes on. */
static enum gate_route read_proxy(struct gate *g, struct conn *k, bool hup)
{
	unsigned char buf[PROXY_V2_MAX];
	ssize_t n = recv(k->fd, buf, sizeof(buf), MSG_PEEK | MSG_DONTWAIT);
	if (n < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? GATE_WAIT
										 : GATE_CLOSE;
	if (n == 0)
		return GATE_CLOSE;
	k->peeked = (size_t)n;
	struct proxy_header h;
	switch (proxy_parse(buf, (size_t)n, &h)) {
	case PROXY_MORE:
		if (!peer_ended(k->fd, hup))
			return GATE_WAIT;
		proxy_refused(g, k->fd, PROXY_WHY_NONE, true);
		return GATE_CLOSE;
	case PROXY_BAD:
		proxy_refused(g, k->fd, h.why, false);
		return GATE_CLOSE;
	case PROXY_NONE:
		atomic_fetch_add(&g->proxy_none, 1);
		break;
	case PROXY_OK:
		if (recv(k->fd, buf, h.len, MSG_DONTWAIT) != (ssize_t)h.len)
			return GATE_CLOSE;
		atomic_fetch_add(&g->proxy_read, 1);
		if (h.kind == PROXY_ADDRESS)
			k->client = h.src;
		k->peeked = 0;
		break;
	}
	k->proxy_pending = false;
	return GATE_AGENT;
}

/* Room for any peer's address (accept4, getpeername), read as a sockaddr. */
union peer_addr {
	struct sockaddr sa;
	struct sockaddr_storage ss;
};

/* The slot belongs to whoever saw it last. Once libmicrohttpd has said
 * STARTED (on_connection takes g->adding), its CLOSED frees the slot, even
 * when MHD_add_connection then fails: it says CLOSED before it returns
 * MHD_NO when its own epoll_ctl fails (ENOMEM, or ENOSPC with root's
 * max_user_watches used up). Only a connection it never started is still
 * ours to free here; freeing the other again would make the free list
 * point at itself. */
static void hand_over(struct gate *g, struct conn *k, const struct sockaddr *sa, socklen_t alen)
{
	g->handed = true;
	g->adding = k;
	/* Closes the fd when refused. */
	MHD_add_connection(g->d, k->fd, sa, alen);
	if (g->adding == k) {
		unlink_conn(k);
		conn_put(g, k);
	}
	g->adding = NULL;
}

/* Routed to the relay: the gate's slot is free at once; the relay's own
 * slots bound what it holds. The relay is told who the client is: the
 * address in its PROXY header on a declared port (none: unknown), else
 * its peer. */
static void relay_over(struct gate *g, struct conn *k, const struct sockaddr *sa, socklen_t alen)
{
	struct sockaddr_storage client;
	if (k->from_header) {
		alen = proxy_addr_sockaddr(&k->client, &client);
		sa = (const struct sockaddr *)&client;
	}
	unlink_conn(k);
	int fd = k->fd;
	conn_put(g, k);
	relay_take(g->relay, fd, sa, alen);
}

/* A relay-bound head past the bound: answered as nginx answers it, and
 * closed (refuse reads what has arrived first, so that the answer is not
 * reset away). */
static void too_large(struct gate *g, struct conn *k, enum refusal why)
{
	unlink_conn(k);
	int fd = k->fd;
	conn_put(g, k);
	relay_count_head(g->relay, RELAY_HEAD_TOO_LARGE);
	refuse(fd, why);
}

static void look(struct gate *g, struct conn *k, const struct sockaddr *sa, socklen_t alen,
		 bool hup)
{
	later_del(k);
	enum gate_route r = k->proxy_pending ? read_proxy(g, k, hup) : GATE_AGENT;
	if (r == GATE_AGENT)
		r = first_look(g, k->fd, hup, &k->peeked);
	if (r == GATE_CLOSE) {
		doom(g, k);
	} else if (r == GATE_WAIT || r == GATE_WAIT_HEAD) {
		k->head = r == GATE_WAIT_HEAD;
		if (k->parked)
			return;
		/* Edge-triggered: woken by each new arrival, not by bytes
		 * already looked at (a line or a head still short of its end). */
		struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP | EPOLLET, .data.ptr = k };
		k->parked = true;
		if (epoll_ctl(g->ep, EPOLL_CTL_ADD, k->fd, &ev) < 0)
			doom(g, k);
	} else {
		if (k->parked)
			epoll_ctl(g->ep, EPOLL_CTL_DEL, k->fd, NULL);
		k->parked = k->ours = false;
		if (r == GATE_RELAY)
			relay_over(g, k, sa, alen);
		else if (r == GATE_AGENT)
			hand_over(g, k, sa, alen);
		else
			too_large(g, k, r == GATE_LINE_TOO_LONG ? REFUSE_LINE_TOO_LONG
								 : REFUSE_HEAD_TOO_LARGE);
	}
}

static void take_new(struct gate *g, int64_t now)
{
	for (int n = 0; n < ACCEPT_BATCH; n++) {
		if (!has_room(g)) {
			set_listening(g, false);
			return;
		}
		union peer_addr a;
		socklen_t alen = sizeof(a);
		int fd = accept4(g->lfd, &a.sa, &alen, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK) { /* EMFILE, ENOBUFS... */
				g->retry_at = now + RETRY_MS;
				set_listening(g, false);
			}
			return;
		}
		/* Full: the connection that has waited longest for its request
		 * makes room (a poll in the backlog is newer than any of them). */
		if (g->open - g->doomed >= g->slots)
			cut(g, oldest(g), false);
		look(g, conn_get(g, fd, now), &a.sa, alen, false);
	}
}

/* The bytes in a parked connection's receive queue: the kernel keeps the
 * count (SIOCINQ), so asking costs no walk of the queue; -1 if it cannot
 * say. */
static ssize_t queued(const struct conn *k)
{
	int q;
	return ioctl(k->fd, SIOCINQ, &q) < 0 || q < 0 ? -1 : q;
}

/* A parked connection's first bytes (or its end) arrived, or a look put
 * off is due. It may have been closed since, earlier in the same batch of
 * events (to make room). getpeername is also what turns away a connection
 * reset while parked: recv still returns the bytes queued before the
 * reset, and with the end seen, a partial first line would be routed on
 * them (relay.sh's flood ends in resets: without this, 520 of them were
 * relayed). */
static void look_again(struct gate *g, struct conn *k, bool hup)
{
	union peer_addr a;
	socklen_t alen = sizeof(a);
	if (getpeername(k->fd, &a.sa, &alen) < 0)
		doom(g, k);
	else
		look(g, k, &a.sa, alen, hup);
}

/* Whether the peek budget pays for a look at q bytes now (-1: unknown,
 * taken as the bound), and if so takes them. */
static bool peek_paid(struct gate *g, ssize_t q, int64_t now)
{
	int64_t cost = q < 0 || q > GATE_HEAD_MAX ? GATE_HEAD_MAX : q;
	if (now > g->peek_at) {
		g->peek_budget += (now - g->peek_at) * PEEK_PER_MS;
		if (g->peek_budget > PEEK_BURST)
			g->peek_budget = PEEK_BURST;
		g->peek_at = now;
	}
	if (g->peek_budget < cost)
		return false;
	g->peek_budget -= cost;
	return true;
}

/* ms until the budget pays for the look at k: at least 1. */
static int peek_wait(const struct gate *g, const struct conn *k)
{
	ssize_t q = queued(k);
	int64_t cost = q < 0 || q > GATE_HEAD_MAX ? GATE_HEAD_MAX : q;
	int64_t ms = (cost - g->peek_budget + PEEK_PER_MS - 1) / PEEK_PER_MS;
	return ms < 1 ? 1 : (int)ms;
}

/* New bytes are looked at now when they are the first, double what the
 * last look saw, or reach the bound, and the peek budget pays for it; else
 * the look is put off (LOOK_LATER_MS), unless it already is. The peer's
 * end is looked at now. */
static void unpark(struct gate *g, struct conn *k, uint32_t events, int64_t now)
{
	if (!k->parked)
		return;
	bool hup = events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR);
	ssize_t q = hup ? -1 : queued(k);
	if (!hup && (((size_t)q < 2 * k->peeked && q < GATE_HEAD_MAX) || !peek_paid(g, q, now))) {
		if (!k->look_at && (size_t)q != k->peeked)
			later_add(g, k, now);
		return;
	}
	look_again(g, k, hup);
}

/* The looks put off and now due, taken when anything came since the last
 * (an end of stream would have been looked at on its own event), as far
 * as the peek budget pays; ms to the next, or -1. */
static int look_later(struct gate *g, int64_t now)
{
	struct conn *k;
	while ((k = g->later.lnext) != &g->later && now >= k->look_at) {
		ssize_t q = queued(k);
		if (q == (ssize_t)k->peeked) {
			later_del(k);
			continue;
		}
		if (!peek_paid(g, q, now))
			return peek_wait(g, k);
		later_del(k);
		look_again(g, k, false);
	}
	return k == &g->later ? -1 : (int)(k->look_at - now);
}

static void *gate_run(void *arg)
{
	struct gate *g = arg;
	struct epoll_event ev[64];
	/* Told apart in top -H and /proc/PID/task (its CPU, a test's ptrace). */
	pthread_setname_np(pthread_self(), "healthd-gate");
	for (;;) {
		int64_t now = clock_mono_ms();
		int wait = sweep(g, now), later = look_later(g, now);
		if (later >= 0 && (wait < 0 || later < wait))
			wait = later;
		if (!g->listening && has_room(g)) {
			if (now >= g->retry_at)
				set_listening(g, true);
			else if (wait < 0 || g->retry_at - now < wait)
				wait = (int)(g->retry_at - now);
		}
		/* The daemon wants a turn when its epoll set has news, when a
		 * connection was handed to it, or at its own timeout (0 when it
		 * has work pending without news); a turn for nothing costs a
		 * syscall, paid by every relayed connection otherwise. */
		MHD_UNSIGNED_LONG_LONG mt;
		int64_t mhd_due = -1;
		if (MHD_get_timeout(g->d, &mt) == MHD_YES) {
			if (wait < 0 || mt < (unsigned)wait)
				wait = mt > INT_MAX ? INT_MAX : (int)mt;
			mhd_due = mt > INT_MAX ? INT64_MAX : now + (int64_t)mt;
		}
		int n = epoll_wait(g->ep, ev, ARRAY_SIZE(ev), wait);
		bool news = false;
		for (int i = 0; i < n; i++) {
			void *p = ev[i].data.ptr;
			if (p == &g->stop_fd)
				return NULL;
			if (p == &g->lfd)
				take_new(g, clock_mono_ms());
			else if (p == &g->mhd_fd)
				news = true;
			else
				unpark(g, p, ev[i].events, clock_mono_ms());
		}
		if (news || g->handed || (mhd_due >= 0 && clock_mono_ms() >= mhd_due)) {
			g->handed = false;
			MHD_run(g->d);
		}
	}
}

/* The soft fd limit raised to fit want (systemd leaves it at 1024 and
 * expects a program that needs more, and polls with epoll, to raise it);
 * what fits if it cannot be. Past the fd limit accept() fails. */
static rlim_t raise_fd_limit(rlim_t want)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return want;
	if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want) {
		struct rlimit up = { .rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > want ?
							 want : rl.rlim_max,
				     .rlim_max = rl.rlim_max };
		if (setrlimit(RLIMIT_NOFILE, &up) == 0)
			rl.rlim_cur = up.rlim_cur;
	}
	return rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > want ? want : rl.rlim_cur;
}

/* Health's slots first; the relay's get what the fd limit leaves. */
static unsigned slots_that_fit(unsigned slots, struct relay *relay)
{
	const rlim_t spare = 64; /* the agent's own fds, nerdctl's pipes */
	rlim_t relay_fds = relay ? relay_fds_wanted(relay) : 0;
	rlim_t fit = raise_fd_limit((rlim_t)slots + ACCEPT_BATCH + spare + relay_fds);
	unsigned health = slots;
	if (fit < (rlim_t)slots + ACCEPT_BATCH + spare)
		health = fit > ACCEPT_BATCH + 2 * spare ? (unsigned)(fit - ACCEPT_BATCH - spare) : 16;
	if (relay) {
		rlim_t used = (rlim_t)health + ACCEPT_BATCH + spare;
		rlim_t left = fit > used ? fit - used : 0;
		relay_fit(relay, (unsigned long)left);
	}
	return health;
}

static void gate_free(struct gate *g)
{
	if (g->d)
		MHD_stop_daemon(g->d);
	if (g->ep >= 0)
		close(g->ep);
	if (g->stop_fd >= 0)
		close(g->stop_fd);
	if (g->lfd >= 0)
		close(g->lfd);
	free(g->conns);
	free(g);
}

/* What every relayed client socket needs, set once on the listener:
 * accepted sockets take it from there (Linux copies the listener's options
 * to each), so it costs no call per connection. libmicrohttpd sets
 * TCP_NODELAY on its own connections anyway, and Health's connections
 * live seconds, so keepalive on them changes nothing. A unix listener has
 * none of these options. */
static void for_relay(int lfd, struct relay *relay)
{
	int one = 1, rcv = 2 * GATE_HEAD_MAX;
	/* A relayed client's bytes go on as they come. */
	setsockopt(lfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	/* A vanished client frees its relay slot (rpc/relay.h). */
	relay_keepalive(relay, lfd);
	/* The receive buffer is four times the bound (the kernel doubles what
	 * it is asked for, and keeps about half for its own bookkeeping of
	 * small segments), whatever net.ipv4.tcp_rmem or ReceiveBuffer= say.
	 * No less: the whole head must fit while the gate waits for its end,
	 * or the client stalls until header_timeout instead of getting its
	 * answer (or its 400). No more: a peek costs the kernel a walk of the
	 * receive queue for each segment it copies, and with autotuning a
	 * head trickled a byte per segment queued thousands of them (50 such
	 * connections kept the gate thread so busy that Health polls timed
	 * out); at this size the kernel merges small segments once they fill
	 * it. The cost: a relayed upload is not autotuned, and has
	 * at most about 128 KiB in flight per round trip from the gateway. */
	setsockopt(lfd, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof(rcv));
}

/* Our own fds are told apart from parked connections by address. */
static int watch_fd(int ep, int *fd)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = fd };
	return epoll_ctl(ep, EPOLL_CTL_ADD, *fd, &ev);
}

static int gate_setup(struct gate *g, const struct gate_opts *o, struct errbuf *err)
{
	int fl = fcntl(g->lfd, F_GETFL);
	/* A listener from systemd comes blocking; accept must not block. */
	if (fl < 0 || fcntl(g->lfd, F_SETFL, fl | O_NONBLOCK) < 0)
		return errbuf_set(err, errno, "listener: %s", strerror(errno));
	g->relay = o->relay;
	if (o->relay)
		for_relay(g->lfd, o->relay);
	g->slots = slots_that_fit(o->slots, o->relay);
	g->pool = g->slots + ACCEPT_BATCH;
	g->head_timeout_ms = o->head_timeout_ms;
	g->peek_budget = PEEK_BURST;
	g->peek_at = clock_mono_ms();
	g->waiting.prev = g->waiting.next = &g->waiting;
	g->later.lprev = g->later.lnext = &g->later;
	if (!(g->conns = calloc(g->pool, sizeof(*g->conns))))
		return errbuf_set(err, ENOMEM, "out of memory");
	for (unsigned i = 0; i < g->pool; i++) {
		g->conns[i].next = g->free_list;
		g->free_list = &g->conns[i];
	}
	/* No thread of its own: this one drives it, so that deadlines and
	 * accepting are decided where the connections live. */
	g->d = MHD_start_daemon(MHD_USE_EPOLL | MHD_USE_NO_LISTEN_SOCKET, 0, NULL, NULL,
				o->handler, o->handler_cls,
				MHD_OPTION_CONNECTION_LIMIT, g->pool,
				MHD_OPTION_CONNECTION_MEMORY_LIMIT, o->conn_memory,
				MHD_OPTION_CONNECTION_TIMEOUT, o->idle_timeout_s,
				MHD_OPTION_NOTIFY_COMPLETED, on_completed, g,
				MHD_OPTION_NOTIFY_CONNECTION, on_connection, g,
				MHD_OPTION_END);
	if (!g->d)
		return errbuf_set(err, errno ? errno : EINVAL, "libmicrohttpd would not start");
	const union MHD_DaemonInfo *di = MHD_get_daemon_info(g->d, MHD_DAEMON_INFO_EPOLL_FD);
	if (!di)
		return errbuf_set(err, EINVAL, "libmicrohttpd has no epoll fd");
	g->mhd_fd = di->epoll_fd;
	if ((g->ep = epoll_create1(EPOLL_CLOEXEC)) < 0 ||
	    (g->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0 ||
	    watch_fd(g->ep, &g->stop_fd) < 0 || watch_fd(g->ep, &g->mhd_fd) < 0 ||
	    watch_fd(g->ep, &g->lfd) < 0)
		return errbuf_set(err, errno, "epoll: %s", strerror(errno));
	g->listening = true;
	int e = pthread_create(&g->thread, NULL, gate_run, g);
	if (e)
		return errbuf_set(err, e, "starting the thread: %s", strerror(e));
	return 0;
}

int gate_start(const struct gate_opts *o, struct gate **out, struct errbuf *err)
{
	struct gate *g = calloc(1, sizeof(*g));
	if (!g) {
		close(o->listen_fd);
		return errbuf_set(err, ENOMEM, "out of memory");
	}
	g->lfd = o->listen_fd;
	g->ep = g->stop_fd = -1;
	g->completed = o->completed;
	g->completed_cls = o->completed_cls;
	int r = gate_setup(g, o, err);
	if (r < 0) {
		gate_free(g);
		return r;
	}
	*out = g;
	return 0;
}

void gate_stats(struct gate *g, struct gate_stats *out)
{
	out->head_timeout = atomic_load(&g->head_timeout);
	out->evicted = atomic_load(&g->evicted);
	out->proxy_read = atomic_load(&g->proxy_read);
	out->proxy_none = atomic_load(&g->proxy_none);
	out->proxy_refused = atomic_load(&g->proxy_refused);
}

void gate_set_proxy(struct gate *g, bool declared)
{
	atomic_store(&g->proxy, declared);
}

void gate_stop(struct gate *g)
{
	if (!g)
		return;
	uint64_t one = 1;
	if (write(g->stop_fd, &one, sizeof(one)) == sizeof(one))
		pthread_join(g->thread, NULL);
	gate_free(g);
}
