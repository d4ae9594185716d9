/* SPDX-License-Identifier: Apache-2.0 */
#include "rpc/victim.h"

/* Which links the choice is made among: every one, or one client's. */
struct pool {
	bool all;
	unsigned client;
};

static bool in_pool(const struct pool *p, const struct victim_link *l)
{
	return p->all || l->client == p->client;
}

/* Links of the pool the table does not list: handed over and not seen by
 * the relay thread yet. Their clients' counts say they are there; they
 * count as connecting. */
static unsigned unlisted(const struct victim_link *links, size_t n, const struct pool *p,
			 const struct victim_ask *ask)
{
	uint64_t held = 0, listed = 0;
	for (unsigned c = 0; c < ask->clients; c++)
		if (p->all || c == p->client)
			held += ask->held[c];
	for (size_t i = 0; i < n; i++)
		if (in_pool(p, &links[i]))
			listed++;
	return held > listed ? (unsigned)(held - listed) : 0;
}

/* The earlier of two times, -1 being none. */
static int64_t earlier(int64_t a, int64_t b)
{
	return a < 0 || (b >= 0 && b < a) ? b : a;
}

/* Whether the victim is in the reserve of the pool's oldest links: fewer
 * older connected links than the reserve holds. */
static bool in_reserve(const struct victim_link *links, size_t n, const struct pool *p,
		       int victim, unsigned slots)
{
	unsigned older = 0;
	for (size_t i = 0; i < n; i++)
		if (!links[i].connecting && in_pool(p, &links[i]) && links[i].start < links[victim].start)
			older++;
	return keep_reserved(older, slots);
}

/* When a link of the pool younger than the victim (or as young), or one
 * connecting (younger than any connected one), may have settled: the
 * reserve's victim is spared until then. -1: none may. */
static int64_t younger_settle(const struct victim_link *links, size_t n, const struct pool *p,
			      int victim, const struct victim_choice *out, int64_t now)
{
	int64_t at = out->kept[KEEP_NONE] ? now + KEEP_SETTLE_MS : -1;
	for (size_t i = 0; i < n; i++)
		if (in_pool(p, &links[i]) && !links[i].connecting && links[i].rule != KEEP_NONE &&
		    links[i].start >= links[victim].start)
			at = earlier(at, links[i].look_at);
	return at;
}

/* The rule of rpc/victim.h over the pool. */
static void choose_by_rule(const struct victim_link *links, size_t n, const struct pool *p,
			   const struct victim_ask *ask, struct victim_choice *out)
{
	out->kept[KEEP_NONE] = unlisted(links, n, p, ask);
	for (size_t i = 0; i < n; i++) {
		const struct victim_link *l = &links[i];
		if (!in_pool(p, l))
			continue;
		if (l->connecting) {
			out->kept[KEEP_NONE]++;
		} else if (l->rule != KEEP_NONE) {
			out->kept[l->rule]++;
			out->look_at = earlier(out->look_at, l->look_at);
		} else if (out->victim < 0 || l->start > links[out->victim].start) {
			out->victim = (int)i;
		}
	}
	/* A link connecting is about to await its answer: worth a look again
	 * a settle from now. */
	if (out->kept[KEEP_NONE])
		out->look_at = earlier(out->look_at, ask->now + KEEP_SETTLE_MS);
	if (out->victim >= 0)
		out->look_at = in_reserve(links, n, p, out->victim, ask->slots)
				       ? younger_settle(links, n, p, out->victim, out, ask->now)
				       : -1;
}

/* Whether a is a better link to cut than b, of a client over its share:
 * idle before in flight, then the one that moved the fewest bytes (the
 * least work lost), then the youngest. */
static bool cut_before(const struct victim_link *a, const struct victim_link *b)
{
	bool a_idle = a->rule == KEEP_NONE, b_idle = b->rule == KEEP_NONE;
	if (a_idle != b_idle)
		return a_idle;
	if (!a_idle && a->moved != b->moved)
		return a->moved < b->moved;
	return a->start > b->start;
}

/* A link of the client holding the most, over its share, for a newcomer
 * within its own: taken now; with only links connecting, looked again at
 * a settle from now. */
static void choose_from_largest(const struct victim_link *links, size_t n, unsigned client,
				const struct victim_ask *ask, struct victim_choice *out)
{
	unsigned connecting = unlisted(links, n, &(struct pool){ .client = client }, ask);
	for (size_t i = 0; i < n; i++) {
		const struct victim_link *l = &links[i];
		if (l->client != client)
			continue;
		if (l->connecting)
			connecting++;
		else if (out->victim < 0 || cut_before(l, &links[out->victim]))
			out->victim = (int)i;
	}
	out->kept[KEEP_NONE] = connecting;
	if (out->victim >= 0)
		out->cut = links[out->victim].rule != KEEP_NONE;
	else if (connecting)
		out->look_at = ask->now + KEEP_SETTLE_MS;
}

void victim_choose(const struct victim_link *links, size_t n, const struct victim_ask *ask,
		   struct victim_choice *out)
{
	*out = (struct victim_choice){ .victim = -1, .look_at = -1, .pool = VICTIM_ALL };
	/* The clients holding links, the newcomer's counted if it holds none,
	 * and the one holding the most (the first of equals). */
	unsigned holders = 0, largest = 0;
	for (unsigned c = 0; c < ask->clients; c++) {
		if (!ask->held[c])
			continue;
		holders++;
		if (ask->held[c] > ask->held[largest])
			largest = c;
	}
	unsigned mine = ask->newcomer < ask->clients ? ask->held[ask->newcomer] : 0;
	if (!mine)
		holders++;
	/* Over its share: holding more than slots / holders. */
	bool over = (uint64_t)mine * holders > ask->slots;
	bool largest_over = (uint64_t)ask->held[largest] * holders > ask->slots;
	if (over) {
		out->pool = VICTIM_OWN;
		choose_by_rule(links, n, &(struct pool){ .client = ask->newcomer }, ask, out);
	} else if (largest_over) { /* not the newcomer's: it would be over too */
		out->pool = VICTIM_LARGEST;
		choose_from_largest(links, n, largest, ask, out);
	} else {
		choose_by_rule(links, n, &(struct pool){ .all = true }, ask, out);
	}
}

int64_t victim_wait_until(const struct victim_choice *c, int64_t since, int64_t wait_ms,
			  int64_t now)
{
	int64_t until = since + wait_ms;
	if (c->look_at < 0 || now >= until)
		return -1;
	return c->look_at < until ? c->look_at : until;
}
