/* SPDX-License-Identifier: Apache-2.0 */
/* A gRPC server's answer to the agent's health probe (issues 34, 42), read
 * by probe/grpc.c. Byte 0 is the size of each read (0: all at once), byte
 * 1's low bit says whether the peer closes after the rest, which is the
 * answer. Oracles: the reads' sizes never change the outcome; nothing past
 * the byte bound is read undecided; and a pass, or a final status, is read
 * again here, whole-buffer, with libnghttp2's inflater (fuzz/hpack_oracle.h)
 * decoding the header blocks: up to where the reader stopped, the frames
 * begin with SETTINGS, none is over 16 KiB, there are at most 64; the first
 * block says :status 200 and content-type application/grpc[+;...], once
 * each; the DATA of stream 1 (padding aside) is exactly one uncompressed
 * message that decodes to SERVING; and the last frame ends the block that
 * ended the stream, whose one grpc-status is 0. A final status other than
 * OK must be the one grpc-status nghttp2 reads in the last block. */
#include <stdlib.h>
#include <string.h>

#include "fuzz/fuzz.h"
#include "fuzz/hpack_oracle.h"
#include "grpc_health.pb-c.h"
#include "probe/grpc.h"

struct outcome {
	bool decided;
	struct grpc_outcome o;
	size_t used; /* bytes fed when it decided */
};

static struct outcome run(const uint8_t *in, size_t len, size_t step, int eof)
{
	static struct grpc_answer a;
	struct outcome r = { false, { PROBE_NONE, GRPC_R_NONE, 0 }, 0 };
	grpc_answer_init(&a);
	while (r.used < len && !r.decided) {
		size_t n = step && len - r.used > step ? step : len - r.used;
		r.decided = grpc_answer_feed(&a, (const char *)in + r.used, n) == GRPC_DECIDED;
		r.used += n;
		size_t owed;
		grpc_answer_owed(&a, &owed);
		if (owed > GRPC_MAX_OWED)
			abort();
	}
	if (!r.decided && eof) {
		grpc_answer_eof(&a);
		r.decided = true;
	}
	if (r.decided)
		r.o = a.outcome;
	return r;
}

/* The answer read again, whole: its header blocks decoded by nghttp2. */
struct reread {
	struct hpack_list blocks[8];
	size_t nblocks;
	uint8_t data[5 + GRPC_MAX_MESSAGE];
	size_t data_len;
	bool ended; /* the last frame ended the block that ended the stream */
	bool bad;   /* not a well-formed run of frames */
};

/* The one field named name in l: its value's bytes, or NULL (none, or
 * more than one). */
static const uint8_t *one(const struct hpack_list *l, const char *name, size_t *vl)
{
	const uint8_t *found = NULL, *n, *v;
	size_t off = 0, nl, len, count = 0;
	for (size_t i = 0; i < l->n; i++) {
		hpack_list_get(l, &off, &n, &nl, &v, &len);
		if (nl == strlen(name) && memcmp(n, name, nl) == 0) {
			found = v;
			*vl = len;
			count++;
		}
	}
	return count == 1 ? found : NULL;
}

static bool value_is(const struct hpack_list *l, const char *name, const char *want)
{
	size_t vl;
	const uint8_t *v = one(l, name, &vl);
	return v && vl == strlen(want) && memcmp(v, want, vl) == 0;
}

static void reread(const uint8_t *in, size_t len, struct reread *r)
{
	static uint8_t block[GRPC_MAX_BLOCK];
	size_t block_len = 0, off = 0, frames = 0;
	bool ends_stream = false;
	nghttp2_hd_inflater *inf;
	if (nghttp2_hd_inflate_new(&inf) != 0)
		abort();
	while (off + 9 <= len && !r->bad) {
		size_t fl = (size_t)in[off] << 16 | (size_t)in[off + 1] << 8 | in[off + 2];
		uint8_t type = in[off + 3], flags = in[off + 4];
		uint32_t stream = ((uint32_t)in[off + 5] << 24 | (uint32_t)in[off + 6] << 16 |
				   (uint32_t)in[off + 7] << 8 | in[off + 8]) & 0x7fffffffu;
		const uint8_t *p = in + off + 9;
		r->ended = false;
		if (fl > 16384 || ++frames > 64 || off + 9 + fl > len ||
		    (frames == 1 && (type != 4 || (flags & 1)))) {
			r->bad = true;
			break;
		}
		off += 9 + fl;
		size_t lead = 0, pad = 0;
		if ((type == 0 || type == 1) && (flags & 0x8)) {
			if (fl == 0) {
				r->bad = true;
				break;
			}
			pad = p[0];
			lead = 1;
		}
		if (type == 1 && (flags & 0x20))
			lead += 5;
		if (lead + pad > fl) {
			r->bad = true;
			break;
		}
		if (type == 0 && stream == 1) {
			if (r->data_len + (fl - lead - pad) > sizeof(r->data)) {
				r->bad = true;
				break;
			}
			memcpy(r->data + r->data_len, p + lead, fl - lead - pad);
			r->data_len += fl - lead - pad;
		}
		if (type == 1) {
			block_len = 0;
			ends_stream = flags & 1;
		}
		if (type == 1 || type == 9) {
			if (block_len + (fl - lead - pad) > sizeof(block)) {
				r->bad = true;
				break;
			}
			memcpy(block + block_len, p + lead, fl - lead - pad);
			block_len += fl - lead - pad;
		}
		if ((type == 1 || type == 9) && (flags & 4)) {
			if (r->nblocks == sizeof(r->blocks) / sizeof(r->blocks[0])) {
				r->bad = true;
				break;
			}
			hpack_oracle_nghttp2(inf, block, block_len, &r->blocks[r->nblocks]);
			r->bad = r->blocks[r->nblocks++].refused;
			r->ended = ends_stream && off == len;
		}
	}
	if (off != len)
		r->bad = true;
	nghttp2_hd_inflate_del(inf);
}

static void reread_free(struct reread *r)
{
	for (size_t i = 0; i < sizeof(r->blocks) / sizeof(r->blocks[0]); i++)
		free(r->blocks[i].b);
}

/* The final status the reader named is the last block's one grpc-status. */
static bool names_status(const struct reread *r, int code)
{
	size_t vl;
	const uint8_t *v = r->nblocks ? one(&r->blocks[r->nblocks - 1], "grpc-status", &vl) : NULL;
	long n = 0;
	if (r->bad || !r->ended || !v || vl == 0)
		return false;
	for (size_t i = 0; i < vl; i++) {
		if (v[i] < '0' || v[i] > '9' || n > 1000000000000L)
			return false;
		n = n * 10 + (v[i] - '0');
	}
	return n == code;
}

/* A pass, read again: 200 and gRPC, one SERVING message, grpc-status 0. */
static bool passes(const struct reread *r)
{
	if (r->bad || !r->ended || r->nblocks != 2 || r->data_len < 5 || r->data[0] != 0)
		return false;
	size_t vl;
	const uint8_t *ct = one(&r->blocks[0], "content-type", &vl);
	static const char grpc[] = "application/grpc";
	size_t gl = sizeof(grpc) - 1;
	if (!value_is(&r->blocks[0], ":status", "200") || !ct || vl < gl ||
	    memcmp(ct, grpc, gl) != 0 || (vl > gl && ct[gl] != '+' && ct[gl] != ';'))
		return false;
	if (!names_status(r, 0))
		return false;
	size_t ml = (size_t)r->data[1] << 24 | (size_t)r->data[2] << 16 |
		    (size_t)r->data[3] << 8 | r->data[4];
	if (ml != r->data_len - 5)
		return false;
	Grpc__Health__V1__HealthCheckResponse *m =
		grpc__health__v1__health_check_response__unpack(NULL, ml, r->data + 5);
	bool serving = m && m->status == 1;
	if (m)
		grpc__health__v1__health_check_response__free_unpacked(m, NULL);
	return serving;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	size_t step = data[0];
	int eof = data[1] & 1;
	const uint8_t *in = data + 2;
	size_t len = size - 2;
	struct outcome o = run(in, len, step, eof), whole = run(in, len, 0, eof);
	if (o.decided != whole.decided || o.o.result != whole.o.result ||
	    o.o.reason != whole.o.reason || o.o.code != whole.o.code)
		abort();
	if (!o.decided && len > GRPC_MAX_BYTES)
		abort();
	if (o.decided && (o.o.result <= PROBE_NONE || o.o.result >= PROBE_N_RESULTS ||
			  o.o.reason <= GRPC_R_NONE || o.o.reason >= GRPC_N_REASONS))
		abort();
	if (o.decided && o.o.result == PROBE_GRPC_STATUS && o.o.code == 1)
		abort();
	if (o.decided && (o.o.result == PROBE_PASS) != (o.o.reason == GRPC_R_PASS))
		abort();
	/* One byte at a time says exactly where a decision fell. */
	if (o.decided && (o.o.result == PROBE_PASS || o.o.result == PROBE_GRPC_CALL_STATUS)) {
		struct outcome b = run(in, len, 1, 0);
		struct reread r;
		memset(&r, 0, sizeof(r));
		reread(in, b.used, &r);
		bool agrees = o.o.result == PROBE_PASS ? passes(&r) : names_status(&r, o.o.code);
		reread_free(&r);
		if (!agrees)
			abort();
	}
	return 0;
}
