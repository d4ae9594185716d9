/* SPDX-License-Identifier: Apache-2.0 */
/* The relay (issue 18, docs/design.md §3.3): connections whose first request
 * is not Health, handed over by the gate, are joined to a fresh connection
 * to the guest agent and their bytes moved both ways in the kernel
 * (splice(2) through a pipe per direction, so at most a pipe's worth per
 * direction is held), never parsed, until both directions have ended or
 * either side fails. Half-closes are passed on. It runs on its own thread
 * with its own epoll set and its own bounded slots, so that relayed traffic
 * never waits on, or is waited on by, the gate's Health slots. */
#ifndef HEALTHD_RELAY_H
#define HEALTHD_RELAY_H

#include <stdint.h>

#include "base/err.h"

/* Relayed connections at once, by default (the fd limit may lower it: each
 * holds RELAY_FDS_PER_CONN fds). */
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

struct relay_opts {
	const char *address; /* HOST:PORT, [IPv6]:PORT or unix:PATH */
	unsigned slots;      /* 0: RELAY_MAX_CONNECTIONS */
};

/* What the relay has done, for the local view only. */
struct relay_stats {
	uint64_t open;        /* relayed connections now (connecting included) */
	uint64_t total;       /* accepted for relaying since the start */
	uint64_t refused;     /* answered 503: every relay slot was taken */
	uint64_t unreachable; /* answered 502: the guest agent could not be reached */
	unsigned slots;
};

struct relay;

/* Parses the address (err names it) and starts the thread. */
int relay_start(const struct relay_opts *o, struct relay **out, struct errbuf *err);
/* Closes every relayed connection and joins the thread. NULL is fine. */
void relay_stop(struct relay *r);
/* The address check alone, for the configuration: what="relay address". */
int relay_parse(const char *address, struct errbuf *err);

/* The gate's side; called from one thread only (relay_take hands the fd to
 * the relay thread by adding it to that thread's epoll set). */
/* fds the relay may hold at most. */
unsigned relay_fds_wanted(const struct relay *r);
/* Lowers the slots to what the fd limit leaves (before any relay_take). */
void relay_fit(struct relay *r, unsigned slots);
/* Takes fd, a client connection whose first request line is in its receive
 * buffer, unread. With every slot taken the client is answered 503 at once
 * and fd closed (-EBUSY). */
int relay_take(struct relay *r, int fd);

/* Any thread. */
void relay_stats(struct relay *r, struct relay_stats *out);
const char *relay_address(const struct relay *r);

#endif
