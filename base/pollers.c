/* SPDX-License-Identifier: Apache-2.0 */
#include "base/pollers.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

static const unsigned codes[POLLERS_N_CODES] = POLLERS_CODES;

unsigned pollers_code(size_t i)
{
	return i < POLLERS_N_CODES ? codes[i] : 0;
}

void pollers_init(struct pollers *p)
{
	/* p->t is zeroed storage already (pollers.h): not touched here, so
	 * that its pages cost memory only once addresses fill them. */
	pthread_mutex_init(&p->lock, NULL);
}

void pollers_destroy(struct pollers *p)
{
	pthread_mutex_destroy(&p->lock);
}

static bool addr_eq(const struct poller_addr *a, const struct poller_addr *b)
{
	return a->family == b->family && memcmp(a->a, b->a, sizeof(a->a)) == 0;
}

void pollers_table_note(struct pollers_table *t, const struct poller_addr *addr, bool healthy,
			bool draining, int64_t now_ms)
{
	struct poller *p = NULL, *oldest = NULL;
	for (size_t i = 0; i < t->n && !p; i++) {
		if (addr_eq(&t->v[i].addr, addr))
			p = &t->v[i];
		else if (!oldest || t->v[i].last_seen_ms < oldest->last_seen_ms)
			oldest = &t->v[i];
	}
	if (!p) {
		/* Full: the least recently seen makes room, so a flood of
		 * addresses cannot push out the gateway that polls every few
		 * seconds. */
		p = t->n < POLLERS_MAX ? &t->v[t->n++] : oldest;
		memset(p, 0, sizeof(*p));
		p->addr = *addr;
		p->first_seen_ms = now_ms;
	}
	p->last_seen_ms = now_ms;
	p->count++;
	p->last_seq = ++t->seq;
	p->last_healthy = healthy;
	if (draining)
		p->drain_seq = p->last_seq;
}

void pollers_table_count(struct pollers_table *t, unsigned code)
{
	size_t i = 0;
	while (i < POLLERS_N_CODES - 1 && codes[i] != code)
		i++;
	t->requests[i]++;
}

size_t pollers_table_recent(const struct pollers_table *t, int64_t since_ms)
{
	size_t n = 0;
	for (size_t i = 0; i < t->n; i++)
		n += t->v[i].last_seen_ms >= since_ms;
	return n;
}

void poller_addr_from(const struct sockaddr *sa, struct poller_addr *out)
{
	memset(out, 0, sizeof(*out));
	if (!sa)
		return;
	out->family = (uint8_t)sa->sa_family;
	if (sa->sa_family == AF_INET)
		memcpy(out->a, &((const struct sockaddr_in *)sa)->sin_addr, 4);
	else if (sa->sa_family == AF_INET6)
		memcpy(out->a, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
	else if (sa->sa_family != AF_UNIX)
		out->family = 0;
}

void poller_addr_str(const struct poller_addr *a, char *buf, size_t n)
{
	if (a->family == AF_INET || a->family == AF_INET6) {
		if (inet_ntop(a->family, a->a, buf, (socklen_t)n))
			return;
	}
	snprintf(buf, n, "%s", a->family == AF_UNIX ? "unix" : "unknown");
}

uint64_t pollers_seq(struct pollers *p)
{
	pthread_mutex_lock(&p->lock);
	uint64_t s = p->t.seq;
	pthread_mutex_unlock(&p->lock);
	return s;
}

void pollers_note(struct pollers *p, const struct sockaddr *sa, bool healthy, bool draining,
		  int64_t now_ms)
{
	struct poller_addr a;
	poller_addr_from(sa, &a);
	pthread_mutex_lock(&p->lock);
	pollers_table_note(&p->t, &a, healthy, draining, now_ms);
	pollers_table_count(&p->t, 200);
	pthread_mutex_unlock(&p->lock);
}

void pollers_count(struct pollers *p, unsigned code)
{
	pthread_mutex_lock(&p->lock);
	pollers_table_count(&p->t, code);
	pthread_mutex_unlock(&p->lock);
}

void pollers_copy(struct pollers *p, struct pollers_table *out)
{
	/* The entries in use only: the rest of out (18 KiB of a fresh
	 * malloc) is never written, so its pages are never made resident. */
	pthread_mutex_lock(&p->lock);
	memcpy(out->v, p->t.v, p->t.n * sizeof(out->v[0]));
	out->n = p->t.n;
	out->seq = p->t.seq;
	memcpy(out->requests, p->t.requests, sizeof(out->requests));
	pthread_mutex_unlock(&p->lock);
}
