/* SPDX-License-Identifier: Apache-2.0 */
/* A gRPC server's answer to the agent's health probe (issue 34), read by
 * the frame reader of probe/grpc.c. Byte 0 is the size of each read (0: all
 * at once), byte 1's low bit says whether the peer closes after the rest,
 * which is the answer. Oracles: the reads' sizes never change the result;
 * nothing past the byte bound is ever read undecided; and a pass is written
 * again here, whole-buffer and plain: up to where the reader stopped, the
 * frames begin with SETTINGS, none is over 16 KiB, there are at most 64,
 * the DATA of stream 1 (padding aside) is exactly one uncompressed message
 * that decodes to SERVING, and the last frame ends a header block whose
 * HEADERS ended the stream. */
#include <stdlib.h>
#include <string.h>

#include "fuzz/fuzz.h"
#include "grpc_health.pb-c.h"
#include "probe/grpc.h"

struct outcome {
	int decided;
	enum probe_result res;
	int detail;
	size_t used; /* bytes fed when it decided */
};

static struct outcome run(const uint8_t *in, size_t len, size_t step, int eof)
{
	struct grpc_answer a;
	struct outcome o = { 0, PROBE_NONE, 0, 0 };
	grpc_answer_init(&a);
	while (o.used < len && !o.decided) {
		size_t n = step && len - o.used > step ? step : len - o.used;
		o.decided = grpc_answer_feed(&a, (const char *)in + o.used, n, &o.res, &o.detail);
		o.used += n;
		if (a.acks > a.frames)
			abort();
	}
	if (!o.decided && eof) {
		grpc_answer_eof(&a, &o.res, &o.detail);
		o.decided = 1;
	}
	return o;
}

/* Does in[0..len) end, exactly, as a passing answer ends? */
static int passes(const uint8_t *in, size_t len)
{
	uint8_t data[5 + GRPC_MAX_MESSAGE];
	size_t dn = 0, off = 0, frames = 0;
	int block_ends = 0;
	while (off + 9 <= len) {
		size_t fl = (size_t)in[off] << 16 | (size_t)in[off + 1] << 8 | in[off + 2];
		uint8_t type = in[off + 3], flags = in[off + 4];
		uint32_t stream = ((uint32_t)in[off + 5] << 24 | (uint32_t)in[off + 6] << 16 |
				   (uint32_t)in[off + 7] << 8 | in[off + 8]) & 0x7fffffffu;
		const uint8_t *p = in + off + 9;
		if (fl > 16384 || ++frames > 64 || off + 9 + fl > len)
			return 0;
		if (frames == 1 && (type != 4 || (flags & 1)))
			return 0;
		off += 9 + fl;
		if (type == 0 && stream == 1) {
			size_t pad = 0, start = 0;
			if (flags & 0x8) {
				if (fl == 0)
					return 0;
				pad = p[0];
				start = 1;
			}
			if (start + pad > fl || dn + (fl - start - pad) > sizeof(data))
				return 0;
			memcpy(data + dn, p + start, fl - start - pad);
			dn += fl - start - pad;
		}
		if (type == 1)
			block_ends = flags & 1;
		if ((type == 1 || type == 9) && (flags & 4) && block_ends) {
			if (off != len || dn < 5 || data[0] != 0)
				return 0;
			size_t ml = (size_t)data[1] << 24 | (size_t)data[2] << 16 |
				    (size_t)data[3] << 8 | data[4];
			if (ml != dn - 5)
				return 0;
			Grpc__Health__V1__HealthCheckResponse *m =
				grpc__health__v1__health_check_response__unpack(NULL, ml, data + 5);
			int serving = m && m->status == 1;
			if (m)
				grpc__health__v1__health_check_response__free_unpacked(m, NULL);
			return serving;
		}
	}
	return 0;
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
	if (o.decided != whole.decided || o.res != whole.res || o.detail != whole.detail)
		abort();
	if (!o.decided && len > GRPC_MAX_BYTES)
		abort();
	if (o.decided && (o.res <= PROBE_NONE || o.res >= PROBE_N_RESULTS))
		abort();
	if (o.decided && o.res == PROBE_GRPC_STATUS && o.detail == 1)
		abort();
	/* One byte at a time says exactly where a decision fell. */
	if (o.decided && o.res == PROBE_PASS) {
		struct outcome b = run(in, len, 1, 0);
		if (b.res != PROBE_PASS || !passes(in, b.used))
			abort();
	}
	return 0;
}
