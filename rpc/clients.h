/* SPDX-License-Identifier: Apache-2.0 */
/* Who holds the relay's slots (issue 43): a table of the clients holding at
 * least one relayed link, each with how many, so that the relay can give
 * every client its share when the slots run short (rpc/victim.h) and the
 * operator can see who holds the most. A client is what the queue calls a
 * source (rpc/queue.h): the address in the connection's PROXY header on a
 * port the app declared, none ("unknown") when it had none there, else
 * its peer's; an IPv6 address counts as its /64.
 * Fixed arrays sized at the start (a client per slot at most), a hash of
 * the key; pure: the relay holds its lock around every call. */
#ifndef HEALTHD_CLIENTS_H
#define HEALTHD_CLIENTS_H

#include <stddef.h>
#include <stdint.h>

#include "rpc/queue.h"

#define CLIENTS_NONE UINT32_MAX

struct client {
	struct queue_source key;
	unsigned links;     /* 0: the entry is free */
	uint32_t hash_next; /* in its bucket, or the free list */
};

struct clients {
	unsigned cap, held; /* entries; those in use */
	struct client *c;
	uint32_t *bucket;
	unsigned buckets;
	uint32_t free_list;
};

/* A table for at most cap clients (the relay's slots): 0 or -ENOMEM. */
int clients_init(struct clients *t, unsigned cap);
void clients_free(struct clients *t);
/* A link more for key's client: its number (below cap), or CLIENTS_NONE
 * when cap clients already hold links (never, while every link is a slot). */
uint32_t clients_add(struct clients *t, const struct queue_source *key);
/* key's client's number, or CLIENTS_NONE when it holds no link. */
uint32_t clients_find(const struct clients *t, const struct queue_source *key);
/* A link less for client no; the entry is freed with its last link. */
void clients_drop(struct clients *t, uint32_t no);

/* One of the clients holding the most. */
struct clients_top {
	struct queue_source key;
	unsigned links;
};
/* The k clients holding the most links, the most first (O(cap * k)). */
size_t clients_top(const struct clients *t, struct clients_top *out, size_t k);

#endif
