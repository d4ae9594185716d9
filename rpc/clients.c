/* SPDX-License-Identifier: Apache-2.0 */
#include "rpc/clients.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static unsigned bucket_of(const struct clients *t, const struct queue_source *s)
{
	uint32_t h = 2166136261u; /* FNV-1a */
	for (size_t i = 0; i < sizeof(s->b); i++)
		h = (h ^ s->b[i]) * 16777619u;
	return h % t->buckets;
}

int clients_init(struct clients *t, unsigned cap)
{
	*t = (struct clients){ .cap = cap, .buckets = 2 * cap + 1, .free_list = CLIENTS_NONE };
	t->c = calloc(cap ? cap : 1, sizeof(*t->c));
	t->bucket = malloc(t->buckets * sizeof(*t->bucket));
	if (!t->c || !t->bucket) {
		clients_free(t);
		return -ENOMEM;
	}
	for (unsigned b = 0; b < t->buckets; b++)
		t->bucket[b] = CLIENTS_NONE;
	for (unsigned i = cap; i-- > 0;) {
		t->c[i].hash_next = t->free_list;
		t->free_list = i;
	}
	return 0;
}

void clients_free(struct clients *t)
{
	free(t->c);
	free(t->bucket);
	*t = (struct clients){ .free_list = CLIENTS_NONE };
}

uint32_t clients_find(const struct clients *t, const struct queue_source *key)
{
	uint32_t i = t->cap ? t->bucket[bucket_of(t, key)] : CLIENTS_NONE;
	while (i != CLIENTS_NONE && memcmp(&t->c[i].key, key, sizeof(*key)) != 0)
		i = t->c[i].hash_next;
	return i;
}

uint32_t clients_add(struct clients *t, const struct queue_source *key)
{
	unsigned b = bucket_of(t, key);
	uint32_t i = clients_find(t, key);
	if (i == CLIENTS_NONE) {
		if ((i = t->free_list) == CLIENTS_NONE)
			return CLIENTS_NONE;
		t->free_list = t->c[i].hash_next;
		t->c[i] = (struct client){ .key = *key, .hash_next = t->bucket[b] };
		t->bucket[b] = i;
		t->held++;
	}
	t->c[i].links++;
	return i;
}

void clients_drop(struct clients *t, uint32_t no)
{
	if (no >= t->cap || t->c[no].links == 0 || --t->c[no].links > 0)
		return;
	uint32_t *p = &t->bucket[bucket_of(t, &t->c[no].key)];
	while (*p != no)
		p = &t->c[*p].hash_next;
	*p = t->c[no].hash_next;
	t->c[no].hash_next = t->free_list;
	t->free_list = no;
	t->held--;
}

size_t clients_top(const struct clients *t, struct clients_top *out, size_t k)
{
	size_t n = 0;
	for (unsigned i = 0; i < t->cap; i++) {
		if (!t->c[i].links)
			continue;
		/* Insertion into the k most, kept sorted. */
		size_t at = n < k ? n : k;
		while (at > 0 && out[at - 1].links < t->c[i].links)
			at--;
		if (at == k)
			continue;
		size_t last = n < k ? n : k - 1;
		memmove(out + at + 1, out + at, (last - at) * sizeof(*out));
		out[at] = (struct clients_top){ .key = t->c[i].key, .links = t->c[i].links };
		if (n < k)
			n++;
	}
	return n;
}
