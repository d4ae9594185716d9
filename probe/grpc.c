/* SPDX-License-Identifier: Apache-2.0 */
/* gRPC health probes over HTTP/2 (RFC 9113): the request, and the frame
 * reader of its answer. Pure. docs/design/probes.md says why the
 * answer's headers are never decoded. */
#include "probe/grpc.h"

#include <errno.h>
#include <string.h>

#include "grpc_health.pb-c.h"

/* Frame types and flags (RFC 9113 §6). */
enum {
	F_DATA = 0, F_HEADERS = 1, F_PRIORITY = 2, F_RST_STREAM = 3, F_SETTINGS = 4,
	F_PUSH_PROMISE = 5, F_PING = 6, F_GOAWAY = 7, F_WINDOW_UPDATE = 8, F_CONTINUATION = 9,
};
#define FL_END_STREAM 0x1
#define FL_ACK 0x1
#define FL_END_HEADERS 0x4
#define FL_PADDED 0x8
/* The one stream a probe opens. */
#define STREAM 1u
#define SETTINGS_ENABLE_PUSH 0x2
#define SERVING 1

const char grpc_settings_ack[GRPC_SETTINGS_ACK_LEN] = { 0, 0, 0, F_SETTINGS, FL_ACK, 0, 0, 0, 0 };

static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/* ---- The request ---- */

struct out {
	char *p;
	size_t len, cap;
	bool full;
};

static void put(struct out *o, const void *b, size_t n)
{
	if (o->full || n > o->cap - o->len) {
		o->full = true;
		return;
	}
	memcpy(o->p + o->len, b, n);
	o->len += n;
}

static void put_frame_head(struct out *o, size_t len, uint8_t type, uint8_t flags,
			   uint32_t stream)
{
	uint8_t h[9] = { (uint8_t)(len >> 16), (uint8_t)(len >> 8), (uint8_t)len, type, flags,
			 (uint8_t)(stream >> 24), (uint8_t)(stream >> 16), (uint8_t)(stream >> 8),
			 (uint8_t)stream };
	put(o, h, sizeof(h));
}

/* An HPACK integer with an N-bit prefix (RFC 7541 §5.1); the prefix's
 * other bits are 0: for a string, no Huffman (§5.2). */
static void put_hpack_int(struct out *o, size_t v, unsigned bits)
{
	size_t max = ((size_t)1 << bits) - 1;
	uint8_t b;
	if (v < max) {
		b = (uint8_t)v;
		put(o, &b, 1);
		return;
	}
	b = (uint8_t)max;
	put(o, &b, 1);
	for (v -= max; v >= 128; v >>= 7) {
		b = (uint8_t)(0x80 | (v & 0x7f));
		put(o, &b, 1);
	}
	b = (uint8_t)v;
	put(o, &b, 1);
}

/* "Literal Header Field without Indexing -- New Name" (RFC 7541 §6.2.2):
 * a 0 byte, then name and value as plain strings. Nothing enters the
 * server's dynamic table, and no Huffman code is needed to write it. */
static void put_header(struct out *o, const char *name, const char *value)
{
	uint8_t zero = 0;
	put(o, &zero, 1);
	put_hpack_int(o, strlen(name), 7);
	put(o, name, strlen(name));
	put_hpack_int(o, strlen(value), 7);
	put(o, value, strlen(value));
}

int grpc_request(const char *authority, const char *service, bool tls, char *buf, size_t cap,
		 size_t *len)
{
	struct out o = { .p = buf, .cap = cap };
	char block[GRPC_MAX_REQUEST];
	struct out h = { .p = block, .cap = sizeof(block) };
	put(&o, preface, sizeof(preface) - 1);
	/* SETTINGS: no server push (RFC 9113 §6.5.2); the rest stays at
	 * its defaults, so a frame larger than 16 KiB is the server's error. */
	static const uint8_t no_push[6] = { 0, SETTINGS_ENABLE_PUSH, 0, 0, 0, 0 };
	put_frame_head(&o, sizeof(no_push), F_SETTINGS, 0, 0);
	put(&o, no_push, sizeof(no_push));
	put_header(&h, ":method", "POST");
	put_header(&h, ":scheme", tls ? "https" : "http");
	put_header(&h, ":path", "/grpc.health.v1.Health/Check");
	put_header(&h, ":authority", authority);
	put_header(&h, "content-type", "application/grpc");
	put_header(&h, "te", "trailers");
	put_header(&h, "user-agent", "dstack-healthd-probe/" HEALTHD_VERSION);
	if (h.full)
		return -E2BIG;
	put_frame_head(&o, h.len, F_HEADERS, FL_END_HEADERS, STREAM);
	put(&o, block, h.len);
	Grpc__Health__V1__HealthCheckRequest req = GRPC__HEALTH__V1__HEALTH_CHECK_REQUEST__INIT;
	req.service = (char *)service;
	size_t n = grpc__health__v1__health_check_request__get_packed_size(&req);
	if (n > PROBE_PATH_MAX + 8)
		return -E2BIG;
	uint8_t msg[5 + PROBE_PATH_MAX + 8] = { 0, (uint8_t)(n >> 24), (uint8_t)(n >> 16),
						(uint8_t)(n >> 8), (uint8_t)n };
	grpc__health__v1__health_check_request__pack(&req, msg + 5);
	put_frame_head(&o, 5 + n, F_DATA, FL_END_STREAM, STREAM);
	put(&o, msg, 5 + n);
	if (o.full)
		return -E2BIG;
	*len = o.len;
	return 0;
}

/* ---- The answer ---- */

void grpc_answer_init(struct grpc_answer *a)
{
	memset(a, 0, sizeof(*a));
}

/* Decided: 1, with the result. */
static int decide(enum probe_result r, int d, enum probe_result *res, int *detail)
{
	*res = r;
	*detail = d;
	return 1;
}

static uint32_t be32(const uint8_t *b)
{
	return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

/* A frame's header is in: checks what can be checked before its payload. */
static int frame_begin(struct grpc_answer *a, enum probe_result *res, int *detail)
{
	const uint8_t *h = a->head;
	a->len = (uint32_t)h[0] << 16 | (uint32_t)h[1] << 8 | h[2];
	a->type = h[3];
	a->flags = h[4];
	a->stream = be32(h + 5) & 0x7fffffffu;
	a->off = 0;
	a->pad = 0;
	/* The server's connection preface is a SETTINGS frame (§3.4): an
	 * HTTP/1 answer ("HTTP/1.1 400") fails here, not as a huge frame. */
	if (!a->settings && (a->type != F_SETTINGS || (a->flags & FL_ACK)))
		return decide(PROBE_GRPC_BAD, 0, res, detail);
	if (++a->frames > GRPC_MAX_FRAMES || a->len > GRPC_MAX_FRAME)
		return decide(PROBE_BOUNDS, 0, res, detail);
	/* A header block is one run of frames: nothing in between (§6.10). */
	if (a->continuation != (a->type == F_CONTINUATION))
		return decide(PROBE_GRPC_BAD, 0, res, detail);
	switch (a->type) {
	case F_SETTINGS:
		if (a->stream || a->len % 6 || ((a->flags & FL_ACK) && a->len))
			return decide(PROBE_GRPC_BAD, 0, res, detail);
		a->settings = true;
		return 0;
	case F_DATA:
		/* Data comes after the answer's headers, on the one stream. */
		if (a->stream != STREAM || !a->headers || (a->flags & FL_PADDED && a->len == 0))
			return decide(PROBE_GRPC_BAD, 0, res, detail);
		return 0;
	case F_HEADERS:
		if (a->stream != STREAM)
			return decide(PROBE_GRPC_BAD, 0, res, detail);
		/* A block after the first is the trailers, which end the
		 * stream; a second message's headers do not exist. */
		if (a->headers && !(a->flags & FL_END_STREAM))
			return decide(PROBE_GRPC_BAD, 0, res, detail);
		a->headers = true;
		a->block_ends = a->flags & FL_END_STREAM;
		a->continuation = !(a->flags & FL_END_HEADERS);
		return 0;
	case F_CONTINUATION:
		if (a->stream != STREAM)
			return decide(PROBE_GRPC_BAD, 0, res, detail);
		a->continuation = !(a->flags & FL_END_HEADERS);
		return 0;
	case F_RST_STREAM:
		return a->stream == 0 || a->len != 4 ? decide(PROBE_GRPC_BAD, 0, res, detail) : 0;
	case F_GOAWAY:
		return a->stream != 0 || a->len < 8 ? decide(PROBE_GRPC_BAD, 0, res, detail) : 0;
	case F_PUSH_PROMISE:
		/* Refused in our SETTINGS. */
		return decide(PROBE_GRPC_BAD, 0, res, detail);
	default:
		/* PRIORITY, PING, WINDOW_UPDATE and unknown types are skipped
		 * (§4.1; a probe's one small request needs no window). */
		return 0;
	}
}

/* The message is whole: its status decides, unless it is SERVING, which
 * waits for the stream's end. */
static int message_whole(struct grpc_answer *a, enum probe_result *res, int *detail)
{
	Grpc__Health__V1__HealthCheckResponse *m =
		grpc__health__v1__health_check_response__unpack(NULL, a->msg_len - 5, a->msg + 5);
	if (!m)
		return decide(PROBE_GRPC_BAD, 0, res, detail);
	int status = (int)m->status;
	grpc__health__v1__health_check_response__free_unpacked(m, NULL);
	if (status != SERVING)
		return decide(PROBE_GRPC_STATUS, status, res, detail);
	a->message = true;
	return 0;
}

/* DATA bytes of stream 1: gRPC's length-prefixed message (a byte saying
 * whether it is compressed, 4 bytes of length), one of them. */
static int data_bytes(struct grpc_answer *a, const uint8_t *b, size_t n, enum probe_result *res,
		      int *detail)
{
	for (size_t i = 0; i < n; i++) {
		if (a->message || (a->msg_len >= 5 && a->msg_len == 5 + be32(a->msg + 1)))
			return decide(PROBE_GRPC_BAD, 0, res, detail); /* a second message */
		a->msg[a->msg_len++] = b[i];
		if (a->msg_len == 5) {
			/* Never asked for compression (no grpc-accept-encoding). */
			if (a->msg[0] != 0)
				return decide(PROBE_GRPC_BAD, 0, res, detail);
			if (be32(a->msg + 1) > GRPC_MAX_MESSAGE)
				return decide(PROBE_BOUNDS, 0, res, detail);
		}
		if (a->msg_len >= 5 && a->msg_len == 5 + be32(a->msg + 1) &&
		    message_whole(a, res, detail))
			return 1;
	}
	return 0;
}

/* Payload bytes of the current frame. */
static int payload(struct grpc_answer *a, const uint8_t *b, size_t n, enum probe_result *res,
		   int *detail)
{
	uint32_t at = a->off;
	a->off += (uint32_t)n;
	if (a->type == F_RST_STREAM || a->type == F_GOAWAY) {
		for (size_t i = 0; i < n && at + i < sizeof(a->fixed); i++)
			a->fixed[at + i] = b[i];
		return 0;
	}
	if (a->type != F_DATA)
		return 0; /* header blocks and the rest: skipped by length */
	if (a->flags & FL_PADDED) {
		if (at == 0) {
			a->pad = b[0];
			/* The padding must fit in the frame (§6.1). */
			if (a->pad >= a->len)
				return decide(PROBE_GRPC_BAD, 0, res, detail);
			b++;
			n--;
			at = 1;
		}
	}
	uint32_t end = a->len - a->pad;
	if (at >= end)
		return 0;
	if (at + n > end)
		n = end - at;
	return data_bytes(a, b, n, res, detail);
}

/* The current frame ended. */
static int frame_end(struct grpc_answer *a, enum probe_result *res, int *detail)
{
	a->head_len = 0;
	switch (a->type) {
	case F_SETTINGS:
		if (!(a->flags & FL_ACK))
			a->acks++;
		return 0;
	case F_RST_STREAM:
		if (a->stream != STREAM)
			return 0;
		return decide(PROBE_STREAM_RESET, (int)be32(a->fixed), res, detail);
	case F_GOAWAY:
		return decide(PROBE_GOAWAY, (int)(be32(a->fixed + 4) & 0x7fffffff), res, detail);
	case F_DATA:
		/* gRPC ends a call with trailers, never with data (its
		 * status is there): a stream ended here is not a gRPC answer. */
		if (a->flags & FL_END_STREAM)
			return decide(a->message || a->msg_len ? PROBE_GRPC_BAD : PROBE_GRPC_NO_MESSAGE,
				      0, res, detail);
		return 0;
	case F_HEADERS:
	case F_CONTINUATION:
		if (a->continuation || !a->block_ends)
			return 0;
		/* The stream ended with this header block. */
		if (a->message)
			return decide(PROBE_PASS, 0, res, detail);
		/* Trailers only: a gRPC error (UNIMPLEMENTED, NOT_FOUND for
		 * an unknown service), whose code is in the block. */
		return decide(a->msg_len ? PROBE_GRPC_BAD : PROBE_GRPC_NO_MESSAGE, 0, res, detail);
	default:
		return 0;
	}
}

int grpc_answer_feed(struct grpc_answer *a, const char *buf, size_t len, enum probe_result *res,
		     int *detail)
{
	const uint8_t *b = (const uint8_t *)buf;
	*detail = 0;
	/* The bytes within the bound are read first, so that what they decide
	 * does not depend on how the reads were cut. */
	bool over = len > GRPC_MAX_BYTES - a->bytes;
	if (over)
		len = GRPC_MAX_BYTES - a->bytes;
	a->bytes += len;
	while (len > 0) {
		if (a->head_len < sizeof(a->head)) {
			size_t n = sizeof(a->head) - a->head_len;
			if (n > len)
				n = len;
			memcpy(a->head + a->head_len, b, n);
			a->head_len += n;
			b += n;
			len -= n;
			if (a->head_len < sizeof(a->head))
				break;
			if (frame_begin(a, res, detail))
				return 1;
		} else {
			size_t n = a->len - a->off;
			if (n > len)
				n = len;
			if (payload(a, b, n, res, detail))
				return 1;
			b += n;
			len -= n;
		}
		if (a->head_len == sizeof(a->head) && a->off == a->len &&
		    frame_end(a, res, detail))
			return 1;
	}
	return over ? decide(PROBE_BOUNDS, 0, res, detail) : 0;
}

void grpc_answer_eof(struct grpc_answer *a, enum probe_result *res, int *detail)
{
	/* Closed before the stream ended: nothing whole enough to pass. */
	*res = PROBE_CUT;
	*detail = 0;
}
