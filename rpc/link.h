/* SPDX-License-Identifier: Apache-2.0 */
/* The relay's insides (rpc/relay.h), shared by the files that make it up
 * and by nothing else: a relayed connection (a link) and the relay that
 * holds them. rpc/relay.c is the relay thread's loop and the gate's calls,
 * rpc/link.c a link's life (handed over, connected, ended), rpc/pump.c
 * the bytes it moves, rpc/pipes.c the pool of empty pipes, rpc/evict.c
 * the table of links told to the victim choice (rpc/victim.c, pure), and
 * rpc/clients.c who holds the slots. */
#ifndef HEALTHD_LINK_H
#define HEALTHD_LINK_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/log.h"
#include "rpc/addr.h"
#include "rpc/clients.h"
#include "rpc/keep.h"
#include "rpc/pipes.h"
#include "rpc/pump.h"
#include "rpc/queue.h"
#include "rpc/relay.h"
#include "rpc/victim.h"

/* A newcomer that finds no slot free and no link idle waits this long at
 * most, looking again every KEEP_SETTLE_MS, while a link is still
 * connecting, moving bytes or awaiting its answer: a burst of newcomers
 * larger than the slots then takes room from its own links once they are
 * answered, and a guest agent slow under load has time to answer, before
 * anyone is refused. */
#define RELAY_QUEUE_WAIT_MS 1000

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
 * d moves fd[d]'s bytes to fd[!d] (rpc/pump.h). */
struct link {
	struct ring quiet;      /* in the quiet order, least recently moved first */
	struct ring connecting; /* in the connecting list, oldest first */
	struct link *next;      /* the free list or the dead list, when free */
	struct end end[2];
	int fd[2];
	struct flow flow[2];
	enum link_state state;
	int64_t deadline; /* of the connect */
	int64_t queued_until; /* bytes were found in a socket's send queue: unsent till then */
	struct keep keep; /* its history, once connected (rpc/keep.h) */
	/* Its client (rpc/clients.h): set with r->lock held by whoever took
	 * the slot for it, before the handover. */
	struct queue_source client;
	uint32_t client_no;
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
	/* The links told to the victim choice (rpc/evict.c), and which is which. */
	struct victim_link *table;
	struct link **table_links;
	struct pipe_pool pipes;
	struct ring connecting; /* links whose connect is under way, oldest first */
	struct ring quiet;      /* connected links, least recently moved first */
	struct link *dead;      /* closed in this turn: freed before the next wait */
	int64_t now;            /* the time of this turn */
	int64_t retry_at;       /* the first newcomer waits for a link to settle until
				 * then; -1: it does not wait */
	bool down;              /* the last connect failed: an outage is logged */
	/* Lines a flood could cause once per connection, each cause at most
	 * once a LOG_LIMIT_MS (base/log.h). */
	struct log_limit log_full, log_over_share;
	/* The gate takes links and queues connections, the relay thread
	 * gives links back and takes the queued connections. */
	pthread_mutex_t lock;
	struct link *free_list;
	unsigned limit;
	/* Connections the gate could not give a free slot, and when each
	 * came; as many places as relay_budget leaves (rpc/queue.h). */
	struct queue waiting;
	/* Who holds the slots (rpc/clients.h), and a copy of how many each
	 * holds for the relay thread's victim choice. */
	struct clients clients;
	unsigned *held;
	atomic_uint used; /* slots taken, new ones included */
	atomic_uint_fast64_t total, refused_full, refused_queue, refused_share, refused_over_share,
		refused_resources, unreachable, evicted, evicted_over_share, idle_closed, head_timeout,
		head_evicted, head_too_large, reset, reset_resources, dead_peer, abandoned;
	/* What kept every slot at the last refused_full (struct relay_stats). */
	atomic_uint kept[4];
};

/* Taking a node out of a list it is not in changes nothing. */
static inline void ring_del(struct ring *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
	n->prev = n->next = n;
}

static inline void ring_add_tail(struct ring *head, struct ring *n)
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

#define QUIET_LINK(n) ((struct link *)((char *)(n) - offsetof(struct link, quiet)))

/* What a newcomer with no free slot can take (rpc/victim.h), as the relay
 * holds it. */
struct eviction {
	struct link *victim; /* NULL: none now */
	struct victim_choice choice;
};

/* rpc/link.c */
void link_close_sockets(struct relay *r, struct link *l, bool reset);
void link_close(struct relay *r, struct link *l, bool reset);
void link_unreachable(struct relay *r, struct link *l, int e);
void link_on_event(struct relay *r, struct link *l, int s, uint32_t ev);
void link_finish_connect(struct relay *r, struct link *l, uint32_t ev);
void link_begin_connect(struct relay *r, struct link *l, uint32_t ev);
int link_hand_over(struct relay *r, struct link *l, int fd);

/* rpc/evict.c */
/* The choice for a newcomer from client. */
void evict_choose(struct relay *r, const struct queue_source *client, struct eviction *out);
/* The victim reset both ways, its slot the newcomer's (from client). */
struct link *evict_take(struct relay *r, struct link *victim, bool cut,
			const struct queue_source *client);

/* rpc/relay.c */
void relay_give_slots(struct relay *r, struct link *first, struct link *last, unsigned n);
/* A slot's new owner: l's client is client from now on (r->lock held). */
void relay_own_slot_locked(struct relay *r, struct link *l, const struct queue_source *client);

#endif
