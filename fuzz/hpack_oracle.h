/* SPDX-License-Identifier: Apache-2.0 */
/* The HPACK oracle (issue 42): libnghttp2's inflater, a decoder nobody here
 * wrote, decodes the same blocks as probe/hpack.c, in the same order, each
 * with its own table. They must give the same header list, or both refuse
 * the block. Only ours may refuse where nghttp2 does not, and only for one
 * of the agent's own bounds: the field it stopped at must then break that
 * bound in nghttp2's list. For the fuzz targets and the tests only: the
 * agent never links libnghttp2. */
#ifndef HEALTHD_FUZZ_HPACK_ORACLE_H
#define HEALTHD_FUZZ_HPACK_ORACLE_H

#include <nghttp2/nghttp2.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "probe/hpack.h"

/* A decoded list: each field's name and value, their lengths first. */
struct hpack_list {
	size_t n, len, cap;
	uint8_t *b;
	bool refused;
	enum hpack_error error; /* ours only */
};

static inline void hpack_list_put(struct hpack_list *l, const void *name, size_t nl,
				  const void *value, size_t vl)
{
	size_t need = l->len + 2 * sizeof(size_t) + nl + vl;
	if (need > l->cap) {
		l->cap = need * 2;
		l->b = realloc(l->b, l->cap);
		if (!l->b)
			abort();
	}
	memcpy(l->b + l->len, &nl, sizeof(nl));
	memcpy(l->b + l->len + sizeof(nl), &vl, sizeof(vl));
	memcpy(l->b + l->len + 2 * sizeof(size_t), name, nl);
	memcpy(l->b + l->len + 2 * sizeof(size_t) + nl, value, vl);
	l->len = need;
	l->n++;
}

/* The field at *off: its name and value; *off moves past it. */
static inline void hpack_list_get(const struct hpack_list *l, size_t *off, const uint8_t **name,
				  size_t *nl, const uint8_t **value, size_t *vl)
{
	memcpy(nl, l->b + *off, sizeof(*nl));
	memcpy(vl, l->b + *off + sizeof(*nl), sizeof(*vl));
	*name = l->b + *off + 2 * sizeof(size_t);
	*value = *name + *nl;
	*off += 2 * sizeof(size_t) + *nl + *vl;
}

static inline void hpack_list_reset(struct hpack_list *l)
{
	l->n = l->len = 0;
	l->refused = false;
	l->error = HPACK_OK;
}

static inline void hpack_oracle_emit(void *arg, const struct hpack_field *f)
{
	hpack_list_put(arg, f->name, f->name_len, f->value, f->value_len);
}

/* nghttp2's decoding of one block, into l. */
static inline void hpack_oracle_nghttp2(nghttp2_hd_inflater *inf, const uint8_t *in, size_t len,
					struct hpack_list *l)
{
	hpack_list_reset(l);
	for (;;) {
		nghttp2_nv nv;
		int flags = 0;
		ssize_t r = nghttp2_hd_inflate_hd2(inf, &nv, &flags, in, len, 1);
		if (r < 0) {
			l->refused = true;
			return;
		}
		in += r;
		len -= (size_t)r;
		if (flags & NGHTTP2_HD_INFLATE_EMIT)
			hpack_list_put(l, nv.name, nv.namelen, nv.value, nv.valuelen);
		if (flags & NGHTTP2_HD_INFLATE_FINAL) {
			nghttp2_hd_inflate_end_headers(inf);
			return;
		}
		if (!(flags & NGHTTP2_HD_INFLATE_EMIT) && r == 0)
			abort(); /* no progress: the loop would never end */
	}
}

/* Whether a field of these lengths breaks the bound that error names. */
static inline bool hpack_oracle_breaks(enum hpack_error e, size_t nl, size_t vl)
{
	switch (e) {
	case HPACK_E_NAME_TOO_LONG:
		return nl > HPACK_MAX_NAME;
	case HPACK_E_VALUE_TOO_LONG:
		return vl > HPACK_MAX_VALUE;
	case HPACK_E_INTEGER: /* the only integers nghttp2 takes past ours: lengths */
		return nl > HPACK_INT_MAX || vl > HPACK_INT_MAX;
	default:
		return false;
	}
}

/* Compares ours with nghttp2's for one block; NULL when they agree, else
 * why not. */
static inline const char *hpack_oracle_compare(const struct hpack_list *ours,
					       const struct hpack_list *theirs)
{
	if (ours->refused && theirs->refused)
		return NULL;
	if (theirs->refused)
		return "nghttp2 refuses a block that probe/hpack.c decodes";
	size_t a = 0, b = 0;
	for (size_t i = 0; i < ours->n; i++) {
		const uint8_t *n1, *v1, *n2, *v2;
		size_t nl1, vl1, nl2, vl2;
		if (i >= theirs->n)
			return "probe/hpack.c decodes more fields than nghttp2";
		hpack_list_get(ours, &a, &n1, &nl1, &v1, &vl1);
		hpack_list_get(theirs, &b, &n2, &nl2, &v2, &vl2);
		if (nl1 != nl2 || vl1 != vl2 || memcmp(n1, n2, nl1) != 0 || memcmp(v1, v2, vl1) != 0)
			return "a field differs";
	}
	if (!ours->refused)
		return ours->n == theirs->n ? NULL : "nghttp2 decodes more fields";
	/* Ours refused alone: the next field of nghttp2's must break the
	 * bound ours named. */
	if (theirs->n == ours->n)
		return "probe/hpack.c refuses a block that nghttp2 decodes, and not for a field";
	const uint8_t *n2, *v2;
	size_t nl2, vl2;
	hpack_list_get(theirs, &b, &n2, &nl2, &v2, &vl2);
	return hpack_oracle_breaks(ours->error, nl2, vl2) ?
		       NULL : "probe/hpack.c refuses a field within its bounds that nghttp2 decodes";
}

/* Both decoders, one table each, and the lists of the last block. */
struct hpack_oracle {
	struct hpack ours;
	nghttp2_hd_inflater *inf;
	struct hpack_list a, b;
	bool diverged; /* refused alone once: the tables now differ */
};

static inline void hpack_oracle_init(struct hpack_oracle *o)
{
	memset(o, 0, sizeof(*o));
	hpack_init(&o->ours);
	if (nghttp2_hd_inflate_new(&o->inf) != 0)
		abort();
}

static inline void hpack_oracle_free(struct hpack_oracle *o)
{
	nghttp2_hd_inflate_del(o->inf);
	free(o->a.b);
	free(o->b.b);
}

/* One block through both; NULL when they agree. After ours refused alone
 * (a bound), the later blocks are not compared: nghttp2's table has the
 * entries ours never added. */
static inline const char *hpack_oracle_block(struct hpack_oracle *o, const uint8_t *in, size_t len)
{
	hpack_list_reset(&o->a);
	o->a.error = hpack_decode(&o->ours, in, len, hpack_oracle_emit, &o->a);
	o->a.refused = o->a.error != HPACK_OK;
	hpack_oracle_nghttp2(o->inf, in, len, &o->b);
	if (o->diverged)
		return NULL;
	const char *why = hpack_oracle_compare(&o->a, &o->b);
	if (!why && o->a.refused && !o->b.refused)
		o->diverged = true;
	return why;
}

#endif
