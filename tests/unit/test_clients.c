/* SPDX-License-Identifier: Apache-2.0 */
/* Table tests for who holds the relay's slots (rpc/clients.c): a number per
 * client while it holds links, counts that follow its links, and the
 * clients holding the most for the operator's view. */
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include "rpc/clients.h"
#include "tests/lib/tap.h"

static struct queue_source key(unsigned n)
{
	struct sockaddr_in in = { .sin_family = AF_INET };
	struct queue_source s;
	in.sin_addr.s_addr = htonl(0x0a000000u | n);
	queue_source_of((struct sockaddr *)&in, sizeof(in), &s);
	return s;
}

/* The table's top k as "address=links ...". */
static void top(const struct clients *t, size_t k, char *buf, size_t n)
{
	struct clients_top out[8];
	size_t m = clients_top(t, out, k), used = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < m; i++) {
		char who[64];
		queue_source_format(&out[i].key, who, sizeof(who));
		used += (size_t)snprintf(buf + used, n - used, "%s%s=%u", i ? " " : "", who, out[i].links);
	}
}

int main(void)
{
	struct clients t;
	char got[256];
	ok(clients_init(&t, 4) == 0, "a table for 4 clients");
	struct queue_source a = key(1), b = key(2), c = key(3), d = key(4), e = key(5);
	uint32_t na = clients_add(&t, &a);
	is_int(clients_add(&t, &a), na, "a client's links share its number");
	uint32_t nb = clients_add(&t, &b);
	ok(nb != na && nb < 4, "another client, another number below the cap");
	is_int(clients_find(&t, &a), na, "found by its key");
	is_int(clients_find(&t, &c), CLIENTS_NONE, "a client holding none is not found");
	is_int(t.held, 2, "two clients hold links");
	clients_add(&t, &c);
	clients_add(&t, &c);
	clients_add(&t, &c);
	top(&t, 8, got, sizeof(got));
	is_str(got, "10.0.0.3=3 10.0.0.1=2 10.0.0.2=1", "the top: the most first");
	top(&t, 2, got, sizeof(got));
	is_str(got, "10.0.0.3=3 10.0.0.1=2", "...the top 2 only");
	clients_add(&t, &d);
	is_int(clients_add(&t, &e), CLIENTS_NONE, "a fifth client in a table of 4: none");
	clients_drop(&t, nb);
	is_int(clients_find(&t, &b), CLIENTS_NONE, "a client's last link gone: it is gone");
	is_int(t.held, 3, "...three hold links");
	ok(clients_add(&t, &e) != CLIENTS_NONE, "...and its entry is free for another");
	clients_drop(&t, na);
	is_int(clients_find(&t, &a), na, "a link less, the client stays");
	top(&t, 8, got, sizeof(got));
	is_str(got, "10.0.0.3=3 10.0.0.1=1 10.0.0.5=1 10.0.0.4=1", "...with its count lowered; equals in their numbers' order (10.0.0.5 took 10.0.0.2's)");
	top(&t, 2, got, sizeof(got));
	is_str(got, "10.0.0.3=3 10.0.0.1=1", "...the top 2: later equals left out");
	clients_drop(&t, CLIENTS_NONE);
	is_int(t.held, 4, "dropping no client changes nothing");
	clients_free(&t);
	/* A thousand clients through a table of 512 and back. */
	ok(clients_init(&t, 512) == 0, "a table for 512");
	uint32_t no[512];
	for (unsigned round = 0; round < 3; round++) {
		for (unsigned i = 0; i < 512; i++)
			no[i] = clients_add(&t, &(struct queue_source){ 0 });
		for (unsigned i = 0; i < 512; i++)
			clients_drop(&t, no[i]);
		for (unsigned i = 0; i < 512; i++)
			no[i] = clients_add(&t, &(struct queue_source[]){ key(round * 1000 + i) }[0]);
		for (unsigned i = 0; i < 512; i++)
			clients_drop(&t, no[i]);
	}
	is_int(t.held, 0, "churn: every client given back");
	ok(clients_add(&t, &a) != CLIENTS_NONE, "...and the table still takes one");
	clients_free(&t);
	return done_testing();
}
