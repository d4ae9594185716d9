/* SPDX-License-Identifier: Apache-2.0 */
/* The relay (issues 18 and 26, docs/design/front.md): connections whose first
 * request is not Health, handed over by the gate once their whole first
 * request head has arrived, are joined to a fresh connection to the guest
 * agent and their bytes moved both ways in the kernel (splice(2) through a
 * pipe per direction, so at most a pipe's worth per direction is held),
 * never parsed, until both directions have ended or either side fails.
 * Half-closes are passed on, and so are resets. It runs on its own thread
 * with its own epoll set and its own bounded slots, so that relayed traffic
 * never waits on, or is waited on by, the gate's Health slots.
 *
 * Every slot has a way back that needs no other traffic: a link ends when
 * both sides are done, at the first error either way (the other side is
 * reset), when it has moved no byte either way for the idle limit, when TCP
 * keepalive finds its peer gone, or when a newcomer finds every slot taken
 * and it is idle between exchanges (rpc/keep.h): then the youngest such
 * link is evicted (reset both ways) and the newcomer takes its slot. Links
 * that move bytes, await an answer or carry a stream are kept. A newcomer
 * is answered 503 when every link is kept or still connecting, or when the
 * queue of newcomers waiting for the relay thread is full. */
#ifndef HEALTHD_RELAY_H
#define HEALTHD_RELAY_H

#include <stdint.h>
#include <sys/socket.h>

#include "base/err.h"
#include "rpc/clients.h"

/* Relayed connections at once, by default (the fd limit may lower it: each
 * holds RELAY_FDS_PER_CONN fds). Each also holds one of the guest agent's
 * connections, and the guest agent (its unit sets no LimitNOFILE: 1024
 * fds) serves the app's own dstack.sock and tappd.sock from the same fds:
 * half of them for the relay leaves it room. */
#define RELAY_MAX_CONNECTIONS 512
/* The client's socket, the guest agent's, and a pipe each way (at most:
 * a pipe is held only while bytes wait in it). */
#define RELAY_FDS_PER_CONN 6
/* Empty pipes kept for the next bytes to move, made at the start: most
 * links hold no pipe between two reads, so creating and closing two per
 * connection would be the relay's largest cost for small answers. */
#define RELAY_PIPE_POOL 8
/* A guest agent that has not accepted the connection this long after the
 * connect is unreachable: the client gets 502. */
#define RELAY_CONNECT_TIMEOUT_MS 1000
/* Connections the gate could not give a free slot, waiting for the relay
 * thread to make room (their fds are in relay_fds_wanted, which the fd
 * limit is raised to fit; under a lower limit the queue is as long as the
 * slots are many, relay_budget); with the queue full, the gate answers 503
 * itself. A client that reconnects all it was evicted from at once
 * (hundreds in a burst) must not find the queue full while evictable
 * slots remain. */
#define RELAY_PENDING 512
/* The idle limit's default: a link that moves no byte either way for this
 * long is closed. Longer than the dstack gateway's own proxy keeps a quiet
 * connection (Dstack-TEE/dstack dstack/gateway/gateway.toml
 * [core.proxy.timeouts] idle = "10m", sampled by
 * dstack/gateway/src/proxy/idle.rs four times per window: cut after 10 to
 * 12.5 minutes), so that a followed log stream that is quiet is ended by
 * the gateway, or by the guest agent itself (its /logs stream ends after
 * 600 s without a line, dstack/guest-agent/src/http_routes.rs), never by
 * the relay. */
#define RELAY_IDLE_TIMEOUT_MS (15 * 60 * 1000)
/* TCP keepalive's default, seconds (relay_keepalive): see relay_keepalive(). */
#define RELAY_KEEPALIVE_S 60
/* The clients holding the most links that the operator's view names. */
#define RELAY_TOP_CLIENTS 8

struct relay_opts {
	const char *address;     /* HOST:PORT, [IPv6]:PORT or unix:PATH */
	unsigned slots;          /* 0: RELAY_MAX_CONNECTIONS */
	int64_t idle_timeout_ms; /* 0: RELAY_IDLE_TIMEOUT_MS */
	unsigned keepalive_s;    /* 0: RELAY_KEEPALIVE_S */
};

/* What the relay has done, for the local view only. Past open and
 * total, each counter counts one way a connection for the relay ended,
 * and a connection ends one way only. The gate's head_* are of
 * connections whose first line was whole and not Health's; those whose
 * first line never ended are the gate's own (struct gate_stats). */
struct relay_stats {
	uint64_t open;              /* slots taken now (connecting included) */
	uint64_t total;             /* connects to the guest agent begun (unreachable's
				     * among them) */
	uint64_t refused_full;      /* answered 503: no slot free and none to evict
				     * (every link moving, awaiting an answer, a stream,
				     * or connecting) */
	uint64_t refused_queue;     /* answered 503 by the gate: the queue already full
				     * of newcomers waiting for a slot, as many from its
				     * source as from any (rpc/queue.h) */
	uint64_t refused_share;     /* answered 503 by the gate: waiting in a full queue,
				     * pushed out by a newcomer from a source with fewer
				     * waiting (rpc/queue.h) */
	uint64_t refused_over_share; /* answered 503: its client held more than its share
				      * of the slots and none of its own links could be
				      * taken (rpc/victim.h) */
	uint64_t refused_resources; /* answered 503: no socket for the guest agent, or no
				     * room to watch one (out of fds or memory) */
	uint64_t unreachable;       /* answered 502: the guest agent could not be reached */
	uint64_t evicted;           /* idle, reset to make room for a newcomer */
	uint64_t evicted_over_share; /* in flight (moving, awaiting, a stream), reset to
				      * make room for a newcomer of a client within its
				      * share: its own client held more than its share */
	uint64_t idle_closed;       /* reset: no byte either way for the idle limit */
	uint64_t head_timeout;      /* first head not whole within header_timeout (gate) */
	uint64_t head_evicted;      /* first head not whole, closed to make room in the
				     * gate's slots, the longest waiting first (gate) */
	uint64_t head_too_large;    /* first head past the bound: answered 414/400 (gate) */
	uint64_t reset;             /* one side failed: the other reset */
	uint64_t reset_resources;   /* reset both ways mid-transfer: no pipe for the next
				     * bytes (out of fds or memory) */
	uint64_t dead_peer;         /* one side timed out (keepalive): the other reset */
	uint64_t abandoned;         /* the client was gone (reset) before the guest
				     * agent was asked: no connect begun */
	/* What kept every slot at the last refused_full: links moving bytes,
	 * awaiting an answer, carrying a stream, and connecting. */
	uint64_t kept_moving, kept_awaiting, kept_streams, kept_connecting;
	unsigned slots;
	unsigned queue; /* newcomers that may wait for a slot at once */
	/* Clients holding links, and those holding the most (rpc/clients.h). */
	unsigned clients;
	size_t n_top;
	struct clients_top top[RELAY_TOP_CLIENTS];
};

struct relay;

/* Parses the address (err names it) and starts the thread. */
int relay_start(const struct relay_opts *o, struct relay **out, struct errbuf *err);
/* Resets every relayed connection and joins the thread. NULL is fine. */
void relay_stop(struct relay *r);
/* The address check alone, for the configuration: what="relay address". */
int relay_parse(const char *address, struct errbuf *err);

/* The gate's side; called from one thread only. */
/* fds the relay may hold at most. */
unsigned relay_fds_wanted(const struct relay *r);
/* How many slots (at most max) and places in the queue fit in fds: the
 * pipe pool's first, then RELAY_FDS_PER_CONN a slot and one a place, so
 * that everything the relay may hold at once stays within the fd limit
 * and the gate's accept never meets EMFILE on its account. */
void relay_budget(unsigned long fds, unsigned max, unsigned *slots, unsigned *queue);
/* Lowers the slots and the queue to what fds leaves (relay_budget),
 * before any relay_take. */
void relay_fit(struct relay *r, unsigned long fds);
/* Sets on a TCP socket what every relayed socket carries, so that a peer
 * that vanished (a gateway node gone, a WireGuard path dropped) frees its
 * slot: keepalive probes after keepalive_s seconds without a byte from the
 * peer, and the socket fails (ETIMEDOUT) once the peer has answered nothing
 * for twice that (TCP_USER_TIMEOUT: also what was sent and not
 * acknowledged, or a window kept shut). The gate sets it on the public
 * listener, whose accepted sockets inherit it; the relay on each socket to
 * the guest agent. -errno (a unix socket has none of it). */
int relay_keepalive(const struct relay *r, int fd);
/* Takes fd, a client connection from sa whose whole first request head is
 * in its receive buffer, unread. sa is its client: the address its PROXY
 * header gave on a port the app declared (AF_UNSPEC when it had none),
 * else its peer's. A free slot is taken at once; with none,
 * fd waits in the queue (rpc/queue.h: its turn shared between sources, a
 * source with fewer waiters pushing out the youngest of the source with the
 * most when the queue is full), and the relay thread evicts an idle link
 * for it (rpc/keep.h) or answers 503. -EBUSY when fd was answered 503 and
 * closed here. */
int relay_take(struct relay *r, int fd, const struct sockaddr *sa, socklen_t alen);
/* The gate's ends of a relay-bound connection, for the counters. */
enum relay_head_end { RELAY_HEAD_TIMEOUT, RELAY_HEAD_EVICTED, RELAY_HEAD_TOO_LARGE };
void relay_count_head(struct relay *r, enum relay_head_end why);

/* Any thread. */
void relay_stats(struct relay *r, struct relay_stats *out);
const char *relay_address(const struct relay *r);

#endif
