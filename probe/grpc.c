/* SPDX-License-Identifier: Apache-2.0 */
/* gRPC health probes over HTTP/2 (RFC 9113): the request, and the reader
 * of its answer. Pure. docs/design/probes.md says what is decoded and why.
 *
 * The reader's functions return GRPC_MORE (read on) or GRPC_DECIDED (the
 * outcome is set, the state is GRPC_DONE), and nothing else. */
#include "probe/grpc.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
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
#define FL_PRIORITY 0x20
/* The one stream a probe opens. */
#define STREAM 1u
#define SETTINGS_ENABLE_PUSH 0x2
#define SERVING 1
#define NO_ERROR 0
#define PING_LEN 8

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

int64_t grpc_timeout_ms(int64_t timeout_ms)
{
	/* A tenth of the timeout, 20 ms at least, for the server's answer to
	 * come back on a busy machine. A probe's timeout is 100 ms at least. */
	int64_t margin = timeout_ms / 10 > 20 ? timeout_ms / 10 : 20;
	return timeout_ms - margin > 1 ? timeout_ms - margin : 1;
}

int grpc_request(const char *authority, const char *service, bool tls, int64_t timeout_ms,
		 char *buf, size_t cap, size_t *len)
{
	struct out o = { .p = buf, .cap = cap };
	char block[GRPC_MAX_REQUEST];
	struct out h = { .p = block, .cap = sizeof(block) };
	/* PROTOCOL-HTTP2.md: TimeoutValue is at most 8 digits, "m" is ms
	 * (a probe's timeout is 60 s at most). */
	char timeout[24];
	int64_t ms = grpc_timeout_ms(timeout_ms);
	snprintf(timeout, sizeof(timeout), "%" PRId64 "m", ms < 99999999 ? ms : 99999999);
	put(&o, preface, sizeof(preface) - 1);
	/* SETTINGS: no server push (RFC 9113 §6.5.2); the rest stays at
	 * its defaults, so a frame larger than 16 KiB is the server's error,
	 * and so is a dynamic table over 4096 (probe/hpack.h). */
	static const uint8_t no_push[6] = { 0, SETTINGS_ENABLE_PUSH, 0, 0, 0, 0 };
	put_frame_head(&o, sizeof(no_push), F_SETTINGS, 0, 0);
	put(&o, no_push, sizeof(no_push));
	put_header(&h, ":method", "POST");
	put_header(&h, ":scheme", tls ? "https" : "http");
	put_header(&h, ":path", "/grpc.health.v1.Health/Check");
	put_header(&h, ":authority", authority);
	put_header(&h, "grpc-timeout", timeout);
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

/* ---- Names ---- */

#define REASONS(X)                                                                          \
	X(GRPC_R_NONE, "")                                                                  \
	X(GRPC_R_PASS, "")                                                                  \
	X(GRPC_R_SERVING_STATUS, "")                                                        \
	X(GRPC_R_CALL_STATUS, "")                                                           \
	X(GRPC_R_NO_MESSAGE, "grpc-status 0 without a HealthCheckResponse")                  \
	X(GRPC_R_HTTP_STATUS, "")                                                           \
	X(GRPC_R_HTTP1, "")                                                                 \
	X(GRPC_R_RESET, "")                                                                 \
	X(GRPC_R_GOAWAY_ERROR, "")                                                          \
	X(GRPC_R_GOAWAY_EXCLUDES, "last stream 0: the call was not taken")                  \
	X(GRPC_R_CLOSED, "")                                                                \
	X(GRPC_R_FIRST_FRAME, "the first frame is not SETTINGS")                            \
	X(GRPC_R_SETTINGS, "a malformed SETTINGS frame")                                    \
	X(GRPC_R_PING, "a malformed PING frame")                                            \
	X(GRPC_R_RST_STREAM, "a malformed RST_STREAM frame")                                \
	X(GRPC_R_GOAWAY, "a malformed GOAWAY frame")                                        \
	X(GRPC_R_PUSH, "PUSH_PROMISE, which the agent's SETTINGS refused")                  \
	X(GRPC_R_STREAM, "HEADERS or DATA on a stream the agent did not open")              \
	X(GRPC_R_DATA_EARLY, "DATA before the response headers ended")                      \
	X(GRPC_R_PADDING, "padding longer than its frame")                                  \
	X(GRPC_R_INTERRUPTED, "a header block interrupted by another frame")                \
	X(GRPC_R_CONTINUATION, "CONTINUATION with no header block to go on")                \
	X(GRPC_R_BLOCK_AFTER, "a second header block that does not end the stream")         \
	X(GRPC_R_DATA_END, "DATA ended the stream: no trailers, no grpc-status")            \
	X(GRPC_R_COMPRESSED, "a compressed message, though none was offered")               \
	X(GRPC_R_SECOND_MESSAGE, "a second message")                                        \
	X(GRPC_R_UNDECODABLE, "a message that is no HealthCheckResponse")                   \
	X(GRPC_R_MESSAGE_CUT, "trailers inside the message")                                \
	X(GRPC_R_HPACK, "a header block that does not decode (HPACK)")                      \
	X(GRPC_R_FIELD_NAME, "a field name HTTP/2 refuses")                                 \
	X(GRPC_R_FIELD_VALUE, "a field value HTTP/2 refuses")                               \
	X(GRPC_R_PSEUDO, "a pseudo-header other than one :status before the fields")        \
	X(GRPC_R_NO_HTTP_STATUS, "no :status of three digits")                              \
	X(GRPC_R_CONTENT_TYPE, "not one content-type application/grpc")                     \
	X(GRPC_R_GRPC_STATUS, "trailers without exactly one numeric grpc-status")           \
	X(GRPC_R_FRAME_SIZE, "a frame over 16384 bytes")                                    \
	X(GRPC_R_FRAMES, "over 64 frames")                                                  \
	X(GRPC_R_BYTES, "over 65536 bytes")                                                 \
	X(GRPC_R_MESSAGE_SIZE, "a message over 256 bytes")                                  \
	X(GRPC_R_BLOCK_SIZE, "a header block over 1536 bytes")                              \
	X(GRPC_R_FIELD_SIZE, "a header field over the decoder's bound")                     \
	X(GRPC_R_OWED, "PING and SETTINGS acknowledgements the server does not read")

const char *grpc_reason_text(enum grpc_reason r)
{
#define TEXT(name, text) [name] = text,
	static const char *const t[GRPC_N_REASONS] = { REASONS(TEXT) };
#undef TEXT
	return (unsigned)r < GRPC_N_REASONS ? t[r] : "?";
}

const char *grpc_reason_name(enum grpc_reason r)
{
#define NAME(name, text) [name] = #name,
	static const char *const t[GRPC_N_REASONS] = { REASONS(NAME) };
#undef NAME
	return (unsigned)r < GRPC_N_REASONS ? t[r] : "?";
}

/* ---- The answer ---- */

void grpc_answer_init(struct grpc_answer *a)
{
	memset(a, 0, sizeof(*a));
	hpack_init(&a->hpack);
}

static int decide(struct grpc_answer *a, enum probe_result res, enum grpc_reason why, int code)
{
	a->state = GRPC_DONE;
	a->outcome = (struct grpc_outcome){ res, why, code };
	return GRPC_DECIDED;
}

static int bad(struct grpc_answer *a, enum grpc_reason why)
{
	return decide(a, PROBE_GRPC_BAD, why, 0);
}

static int over(struct grpc_answer *a, enum grpc_reason why)
{
	return decide(a, PROBE_BOUNDS, why, 0);
}

static uint32_t be32(const uint8_t *b)
{
	return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

/* A reply the server is owed, after the others. */
static int owe(struct grpc_answer *a, uint8_t type, const uint8_t *payload, size_t n)
{
	if (9 + n > GRPC_MAX_OWED - a->owed_len)
		return over(a, GRPC_R_OWED);
	uint8_t *h = a->owed + a->owed_len;
	h[0] = h[1] = 0;
	h[2] = (uint8_t)n;
	h[3] = type;
	h[4] = FL_ACK;
	h[5] = h[6] = h[7] = h[8] = 0;
	memcpy(h + 9, payload, n);
	a->owed_len += 9 + n;
	return GRPC_MORE;
}

const uint8_t *grpc_answer_owed(const struct grpc_answer *a, size_t *len)
{
	*len = a->owed_len;
	return a->owed;
}

void grpc_answer_sent(struct grpc_answer *a, size_t n)
{
	if (n > a->owed_len)
		n = a->owed_len;
	memmove(a->owed, a->owed + n, a->owed_len - n);
	a->owed_len -= n;
}

static bool in_block(const struct grpc_answer *a)
{
	return a->state == GRPC_IN_HEADERS || a->state == GRPC_IN_TRAILERS_ONLY ||
	       a->state == GRPC_IN_TRAILERS;
}

/* HEADERS begins a header block: which one it is depends on where the
 * answer is. */
static int headers_begin(struct grpc_answer *a)
{
	bool ends_stream = a->flags & FL_END_STREAM;
	if (a->state == GRPC_AWAIT_HEADERS) {
		a->state = ends_stream ? GRPC_IN_TRAILERS_ONLY : GRPC_IN_HEADERS;
	} else {
		/* GRPC_AWAIT_MESSAGE or GRPC_HAVE_MESSAGE (frame_begin refused
		 * HEADERS anywhere else): the only block after the headers is
		 * the trailers, which end the stream, with or without a
		 * message (a call that failed), never inside one. */
		if (a->state == GRPC_AWAIT_MESSAGE && a->msg_len > 0)
			return bad(a, GRPC_R_MESSAGE_CUT);
		if (!ends_stream)
			return bad(a, GRPC_R_BLOCK_AFTER);
		a->state = GRPC_IN_TRAILERS;
	}
	/* The pad length's byte and the priority's five come before the
	 * block's fragment (§6.2). */
	a->lead = (a->flags & FL_PADDED ? 1 : 0) + (a->flags & FL_PRIORITY ? 5 : 0);
	if (a->lead > a->len)
		return bad(a, GRPC_R_PADDING);
	a->block_len = 0;
	memset(&a->fields, 0, sizeof(a->fields));
	return GRPC_MORE;
}

/* A frame's header is in: checks what can be checked before its payload. */
static int frame_begin(struct grpc_answer *a)
{
	const uint8_t *h = a->head;
	a->len = (uint32_t)h[0] << 16 | (uint32_t)h[1] << 8 | h[2];
	a->type = h[3];
	a->flags = h[4];
	a->stream = be32(h + 5) & 0x7fffffffu;
	a->off = 0;
	a->pad = 0;
	a->lead = 0;
	if (a->state == GRPC_AWAIT_SETTINGS) {
		/* An HTTP/1 server answers the preface with a status line,
		 * whose first 9 bytes ("HTTP/1.1 ") fill a frame's header: its
		 * code is the 3 bytes after. */
		if (memcmp(h, "HTTP/1.", 7) == 0 && h[8] == ' ') {
			a->state = GRPC_HTTP1;
			a->len = 3;
			return GRPC_MORE;
		}
		/* The server's connection preface is a SETTINGS frame (§3.4). */
		if (a->type != F_SETTINGS || (a->flags & FL_ACK))
			return bad(a, GRPC_R_FIRST_FRAME);
	}
	if (++a->frames > GRPC_MAX_FRAMES)
		return over(a, GRPC_R_FRAMES);
	if (a->len > GRPC_MAX_FRAME)
		return over(a, GRPC_R_FRAME_SIZE);
	/* A header block is one run of frames: nothing in between (§6.10). */
	if (in_block(a) && a->type != F_CONTINUATION)
		return bad(a, GRPC_R_INTERRUPTED);
	/* The call's frames are on the one stream it opened. */
	if ((a->type == F_HEADERS || a->type == F_DATA) && a->stream != STREAM)
		return bad(a, GRPC_R_STREAM);
	switch (a->type) {
	case F_SETTINGS:
		if (a->stream || a->len % 6 || ((a->flags & FL_ACK) && a->len))
			return bad(a, GRPC_R_SETTINGS);
		if (a->state == GRPC_AWAIT_SETTINGS)
			a->state = GRPC_AWAIT_HEADERS;
		return GRPC_MORE;
	case F_DATA:
		/* Data comes after the answer's headers. */
		if (a->state != GRPC_AWAIT_MESSAGE && a->state != GRPC_HAVE_MESSAGE)
			return bad(a, GRPC_R_DATA_EARLY);
		if ((a->flags & FL_PADDED) && a->len == 0)
			return bad(a, GRPC_R_PADDING);
		return GRPC_MORE;
	case F_HEADERS:
		return headers_begin(a);
	case F_CONTINUATION:
		if (!in_block(a))
			return bad(a, GRPC_R_CONTINUATION);
		/* The block goes on on its own stream. */
		return a->stream == STREAM ? GRPC_MORE : bad(a, GRPC_R_INTERRUPTED);
	case F_PING:
		if (a->stream || a->len != PING_LEN)
			return bad(a, GRPC_R_PING);
		return GRPC_MORE;
	case F_RST_STREAM:
		return a->stream == 0 || a->len != 4 ? bad(a, GRPC_R_RST_STREAM) : GRPC_MORE;
	case F_GOAWAY:
		return a->stream != 0 || a->len < 8 ? bad(a, GRPC_R_GOAWAY) : GRPC_MORE;
	case F_PUSH_PROMISE:
		return bad(a, GRPC_R_PUSH);
	default:
		/* PRIORITY, WINDOW_UPDATE and unknown types are skipped (§4.1,
		 * §5.5; a probe's one small request needs no window). */
		return GRPC_MORE;
	}
}

/* ---- The message ---- */

/* The message is whole: its status decides, unless it is SERVING, which
 * waits for the trailers. */
static int message_whole(struct grpc_answer *a)
{
	Grpc__Health__V1__HealthCheckResponse *m =
		grpc__health__v1__health_check_response__unpack(NULL, a->msg_len - 5, a->msg + 5);
	if (!m)
		return bad(a, GRPC_R_UNDECODABLE);
	int status = (int)m->status;
	grpc__health__v1__health_check_response__free_unpacked(m, NULL);
	if (status != SERVING)
		return decide(a, PROBE_GRPC_STATUS, GRPC_R_SERVING_STATUS, status);
	a->state = GRPC_HAVE_MESSAGE;
	return GRPC_MORE;
}

/* DATA bytes of stream 1: gRPC's length-prefixed message (a byte saying
 * whether it is compressed, 4 bytes of length), one of them. */
static int data_bytes(struct grpc_answer *a, const uint8_t *b, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (a->state == GRPC_HAVE_MESSAGE)
			return bad(a, GRPC_R_SECOND_MESSAGE);
		a->msg[a->msg_len++] = b[i];
		if (a->msg_len == 5) {
			/* Never asked for compression (no grpc-accept-encoding). */
			if (a->msg[0] != 0)
				return bad(a, GRPC_R_COMPRESSED);
			if (be32(a->msg + 1) > GRPC_MAX_MESSAGE)
				return over(a, GRPC_R_MESSAGE_SIZE);
		}
		/* Whole once its prefix's length is in (msg[1..4] are 0 before). */
		if (a->msg_len == 5 + be32(a->msg + 1) && message_whole(a))
			return GRPC_DECIDED;
	}
	return GRPC_MORE;
}

/* ---- Header blocks ---- */

static bool is(const struct hpack_field *f, const char *name)
{
	return f->name_len == strlen(name) && memcmp(f->name, name, f->name_len) == 0;
}

/* RFC 9113 §8.2.1: no byte 0x00-0x20, 'A'-'Z' or 0x7f-0xff, and no colon
 * but a pseudo-header's first. */
static bool valid_name(const struct hpack_field *f)
{
	if (f->name_len == 0)
		return false;
	for (size_t i = 0; i < f->name_len; i++) {
		unsigned char c = (unsigned char)f->name[i];
		if (c <= 0x20 || (c >= 'A' && c <= 'Z') || c >= 0x7f || (c == ':' && i > 0))
			return false;
	}
	return true;
}

/* RFC 9113 §8.2.1: no NUL, CR or LF, and no space or tab at either end. */
static bool valid_value(const struct hpack_field *f)
{
	size_t n = f->value_len;
	if (n > 0 && (strchr(" \t", f->value[0]) || strchr(" \t", f->value[n - 1])))
		return false;
	for (size_t i = 0; i < n; i++)
		if (f->value[i] == '\0' || f->value[i] == '\r' || f->value[i] == '\n')
			return false;
	return true;
}

/* A decimal number of at most digits digits; -1 when it is not one. */
static int number(const struct hpack_field *f, size_t digits)
{
	int v = 0;
	if (f->value_len == 0 || f->value_len > digits)
		return -1;
	for (size_t i = 0; i < f->value_len; i++) {
		if (f->value[i] < '0' || f->value[i] > '9')
			return -1;
		v = v * 10 + (f->value[i] - '0');
	}
	return v;
}

/* PROTOCOL-HTTP2.md: "application/grpc" [("+proto" / "+json" / {custom})];
 * grpc-go also takes ";" and parameters after it. */
static bool grpc_content_type(const struct hpack_field *f)
{
	static const char base[] = "application/grpc";
	size_t n = sizeof(base) - 1;
	if (f->value_len < n || memcmp(f->value, base, n) != 0)
		return false;
	return f->value_len == n || f->value[n] == '+' || f->value[n] == ';';
}

static void keep_text(char *dst, uint8_t *len, bool *cut, const struct hpack_field *f)
{
	size_t n = f->value_len < GRPC_MAX_TEXT ? f->value_len : GRPC_MAX_TEXT;
	memcpy(dst, f->value, n);
	*len = (uint8_t)n;
	*cut = f->value_len > n;
}

/* One field of the block, in order: every one is read, and the first that
 * breaks a rule names the block (judged at its end). */
static void on_field(void *arg, const struct hpack_field *f)
{
	struct grpc_answer *a = arg;
	struct grpc_fields *s = &a->fields;
	if (s->bad)
		return;
	if (!valid_name(f)) {
		s->bad = GRPC_R_FIELD_NAME;
		return;
	}
	if (!valid_value(f)) {
		s->bad = GRPC_R_FIELD_VALUE;
		return;
	}
	if (f->name[0] == ':') {
		/* A response has one pseudo-header, :status, before the other
		 * fields; trailers have none (RFC 9113 §8.1, §8.3.2). */
		if (a->state == GRPC_IN_TRAILERS || s->regular || !is(f, ":status") || s->statuses) {
			s->bad = GRPC_R_PSEUDO;
			return;
		}
		s->statuses++;
		s->http_status = f->value_len == 3 ? number(f, 3) : -1;
		return;
	}
	s->regular = true;
	if (is(f, "content-type")) {
		s->content_types++;
		s->grpc_type = grpc_content_type(f);
		if (s->content_types == 1)
			keep_text(s->content_type, &s->content_type_len, &s->content_type_cut, f);
	} else if (is(f, "grpc-status")) {
		s->grpc_statuses++;
		s->grpc_status = number(f, 9);
	} else if (is(f, "grpc-message") && s->message_len == 0) {
		keep_text(s->message, &s->message_len, &s->message_cut, f);
	}
}

/* The response headers: 200, and gRPC (PROTOCOL-HTTP2.md, "Responses"). */
static int judge_headers(struct grpc_answer *a)
{
	const struct grpc_fields *s = &a->fields;
	if (s->statuses == 0 || s->http_status < 0)
		return bad(a, GRPC_R_NO_HTTP_STATUS);
	if (s->http_status != 200)
		return decide(a, PROBE_STATUS, GRPC_R_HTTP_STATUS, s->http_status);
	if (s->content_types != 1 || !s->grpc_type)
		return bad(a, GRPC_R_CONTENT_TYPE);
	return GRPC_MORE;
}

/* The trailers: the call's final status. It passes only as OK after one
 * SERVING message. */
static int judge_trailers(struct grpc_answer *a, bool message)
{
	const struct grpc_fields *s = &a->fields;
	if (s->grpc_statuses != 1 || s->grpc_status < 0)
		return bad(a, GRPC_R_GRPC_STATUS);
	if (s->grpc_status != 0)
		return decide(a, PROBE_GRPC_CALL_STATUS, GRPC_R_CALL_STATUS, s->grpc_status);
	if (!message)
		return decide(a, PROBE_GRPC_NO_MESSAGE, GRPC_R_NO_MESSAGE, 0);
	return decide(a, PROBE_PASS, GRPC_R_PASS, 0);
}

/* The block is whole: decoded, every field read, then judged by what it
 * is. The decoder sees every block, in order, since a block may refer to
 * entries an earlier one added. */
static int block_end(struct grpc_answer *a)
{
	enum hpack_error e = hpack_decode(&a->hpack, a->block, a->block_len, on_field, a);
	if (e == HPACK_E_NAME_TOO_LONG || e == HPACK_E_VALUE_TOO_LONG)
		return decide(a, PROBE_BOUNDS, GRPC_R_FIELD_SIZE, e);
	if (e != HPACK_OK)
		return decide(a, PROBE_GRPC_BAD, GRPC_R_HPACK, e);
	/* A field HTTP/2 refuses, whatever block it is in. */
	if (a->fields.bad)
		return bad(a, a->fields.bad);
	switch (a->state) {
	case GRPC_IN_HEADERS:
		if (judge_headers(a) == GRPC_DECIDED)
			return GRPC_DECIDED;
		a->state = GRPC_AWAIT_MESSAGE;
		return GRPC_MORE;
	case GRPC_IN_TRAILERS_ONLY:
		/* Headers and trailers in one (a gRPC error): both judged. */
		return judge_headers(a) ? GRPC_DECIDED : judge_trailers(a, false);
	default: /* GRPC_IN_TRAILERS */
		return judge_trailers(a, a->msg_len > 0);
	}
}

/* ---- Frames ---- */

/* Bytes of the current frame's payload from offset at: those in
 * [lo, hi), the part that is not padding or priority, go to the block or
 * the message. */
static int region(struct grpc_answer *a, const uint8_t *b, size_t n, uint32_t at, uint32_t lo,
		  uint32_t hi)
{
	if (at < lo) {
		size_t skip = lo - at < n ? lo - at : n;
		b += skip;
		n -= skip;
		at += (uint32_t)skip;
	}
	if (at >= hi)
		return GRPC_MORE;
	if (n > hi - at)
		n = hi - at;
	if (a->type == F_DATA)
		return data_bytes(a, b, n);
	if (n > GRPC_MAX_BLOCK - a->block_len)
		return over(a, GRPC_R_BLOCK_SIZE);
	memcpy(a->block + a->block_len, b, n);
	a->block_len += n;
	return GRPC_MORE;
}

/* Payload bytes of the current frame, from offset at. */
static int payload(struct grpc_answer *a, const uint8_t *b, size_t n, uint32_t at)
{
	if (a->state == GRPC_HTTP1 || a->type == F_PING || a->type == F_RST_STREAM ||
	    a->type == F_GOAWAY) {
		for (size_t i = 0; i < n && at + i < sizeof(a->fixed); i++)
			a->fixed[at + i] = b[i];
		return GRPC_MORE;
	}
	if (a->type != F_DATA && a->type != F_HEADERS && a->type != F_CONTINUATION)
		return GRPC_MORE; /* the rest: skipped by length */
	if (at == 0 && (a->type == F_DATA || a->type == F_HEADERS) &&
	    (a->flags & FL_PADDED)) {
		a->pad = b[0];
		/* The padding must fit in the frame, after what leads it
		 * (§6.1, §6.2). */
		if (a->type == F_DATA ? a->pad >= a->len : a->pad > a->len - a->lead)
			return bad(a, GRPC_R_PADDING);
	}
	uint32_t lo = a->type == F_DATA ? (a->flags & FL_PADDED ? 1 : 0) : a->lead;
	return region(a, b, n, at, lo, a->len - a->pad);
}

/* The current frame ended. */
static int frame_end(struct grpc_answer *a)
{
	a->head_len = 0;
	if (a->state == GRPC_HTTP1) {
		int code = 0;
		for (int i = 0; i < 3 && code >= 0; i++)
			code = a->fixed[i] >= '0' && a->fixed[i] <= '9' ? code * 10 + (a->fixed[i] - '0') : -1;
		return decide(a, PROBE_HTTP1, GRPC_R_HTTP1, code < 0 ? 0 : code);
	}
	switch (a->type) {
	case F_SETTINGS:
		/* Every SETTINGS is acknowledged (§6.5.3). */
		return a->flags & FL_ACK ? GRPC_MORE : owe(a, F_SETTINGS, a->fixed, 0);
	case F_PING:
		/* With the same 8 bytes (§6.7): a server may hold its answer
		 * until its PING is acknowledged. */
		return a->flags & FL_ACK ? GRPC_MORE : owe(a, F_PING, a->fixed, PING_LEN);
	case F_RST_STREAM:
		/* Another stream's is not the call's (frame_begin refused
		 * stream 0). */
		if (a->stream > STREAM)
			return GRPC_MORE;
		return decide(a, PROBE_STREAM_RESET, GRPC_R_RESET, (int)be32(a->fixed));
	case F_GOAWAY: {
		/* A graceful GOAWAY (NO_ERROR) whose last stream is 1 or more
		 * lets the call finish (§6.8); an error code, or a last stream
		 * of 0, ends it. */
		uint32_t last = be32(a->fixed) & 0x7fffffffu, code = be32(a->fixed + 4);
		if (code != NO_ERROR)
			return decide(a, PROBE_GOAWAY, GRPC_R_GOAWAY_ERROR, (int)(code & 0x7fffffff));
		if (last < STREAM)
			return decide(a, PROBE_GOAWAY, GRPC_R_GOAWAY_EXCLUDES, NO_ERROR);
		return GRPC_MORE;
	}
	case F_DATA:
		/* gRPC ends a call with trailers, never with data: its status
		 * is there. */
		if (a->flags & FL_END_STREAM)
			return bad(a, GRPC_R_DATA_END);
		return GRPC_MORE;
	case F_HEADERS:
	case F_CONTINUATION:
		return a->flags & FL_END_HEADERS ? block_end(a) : GRPC_MORE;
	default:
		return GRPC_MORE;
	}
}

int grpc_answer_feed(struct grpc_answer *a, const char *buf, size_t len)
{
	const uint8_t *b = (const uint8_t *)buf;
	if (a->state == GRPC_DONE)
		return GRPC_DECIDED;
	/* The bytes within the bound are read first, so that what they decide
	 * does not depend on how the reads were cut. */
	bool beyond = len > GRPC_MAX_BYTES - a->bytes;
	if (beyond)
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
			if (frame_begin(a))
				return GRPC_DECIDED;
		} else {
			size_t n = a->len - a->off;
			if (n > len)
				n = len;
			uint32_t at = a->off;
			a->off += (uint32_t)n;
			if (payload(a, b, n, at))
				return GRPC_DECIDED;
			b += n;
			len -= n;
		}
		if (a->head_len == sizeof(a->head) && a->off == a->len && frame_end(a))
			return GRPC_DECIDED;
	}
	return beyond ? over(a, GRPC_R_BYTES) : GRPC_MORE;
}

void grpc_answer_eof(struct grpc_answer *a)
{
	/* Closed before the call ended: nothing whole enough to pass. An
	 * HTTP/1 status line cut short is still HTTP/1. */
	if (a->state == GRPC_HTTP1)
		decide(a, PROBE_HTTP1, GRPC_R_HTTP1, 0);
	else if (a->state != GRPC_DONE)
		decide(a, PROBE_CUT, GRPC_R_CLOSED, (int)a->state);
}

/* ---- For the operator ---- */

static int hex_digit(char c)
{
	static const char digits[] = "0123456789abcdef";
	const char *at = c ? strchr(digits, tolower((unsigned char)c)) : NULL;
	return at ? (int)(at - digits) : -1;
}

/* A server's field for the operator: percent-decoded if percent (gRPC's
 * grpc-message, PROTOCOL-HTTP2.md; a malformed escape is kept as it is),
 * every byte outside printable ASCII and every backslash and quote as
 * \xNN, "..." when it was cut. */
static void quote(char *out, size_t cap, const char *in, size_t n, bool cut, bool percent)
{
	size_t o = 0;
	for (size_t i = 0; i < n && o + 8 < cap; i++) {
		unsigned char c = (unsigned char)in[i];
		if (percent && c == '%' && i + 2 < n && hex_digit(in[i + 1]) >= 0 &&
		    hex_digit(in[i + 2]) >= 0) {
			c = (unsigned char)(hex_digit(in[i + 1]) << 4 | hex_digit(in[i + 2]));
			i += 2;
		}
		if (c < 0x20 || c >= 0x7f || c == '\\' || c == '"')
			o += (size_t)snprintf(out + o, cap - o, "\\x%02x", c);
		else
			out[o++] = (char)c;
	}
	if (cut && o + 4 < cap) {
		memcpy(out + o, "...", 3);
		o += 3;
	}
	out[o] = '\0';
}

/* Where an answer stopped: for one that timed out or was cut. */
static const char *where(enum grpc_state s)
{
	static const char *const t[] = {
		[GRPC_AWAIT_SETTINGS] = "waiting for the server's SETTINGS",
		[GRPC_HTTP1] = "inside an HTTP/1 status line",
		[GRPC_AWAIT_HEADERS] = "waiting for the response headers",
		[GRPC_IN_HEADERS] = "inside the response headers",
		[GRPC_IN_TRAILERS_ONLY] = "inside a Trailers-Only answer",
		[GRPC_AWAIT_MESSAGE] = "waiting for the message",
		[GRPC_HAVE_MESSAGE] = "waiting for the trailers",
		[GRPC_IN_TRAILERS] = "inside the trailers",
		[GRPC_DONE] = "after the end",
	};
	return (unsigned)s <= GRPC_DONE ? t[s] : "?";
}

void grpc_answer_detail(const struct grpc_answer *a, char *buf, size_t n)
{
	const struct grpc_fields *s = &a->fields;
	char q[4 * GRPC_MAX_TEXT + 8];
	if (n == 0)
		return;
	buf[0] = '\0';
	if (a->state != GRPC_DONE) {
		snprintf(buf, n, "%s", where(a->state));
		return;
	}
	switch (a->outcome.reason) {
	case GRPC_R_CLOSED:
		snprintf(buf, n, "closed %s", where(a->outcome.code));
		return;
	case GRPC_R_CALL_STATUS:
		if (s->message_len == 0)
			return;
		quote(q, sizeof(q), s->message, s->message_len, s->message_cut, true);
		snprintf(buf, n, "grpc-message \"%s\"", q);
		return;
	case GRPC_R_HTTP_STATUS:
	case GRPC_R_CONTENT_TYPE:
		if (s->content_types == 0) {
			snprintf(buf, n, "no content-type");
			return;
		}
		quote(q, sizeof(q), s->content_type, s->content_type_len, s->content_type_cut, false);
		snprintf(buf, n, "content-type \"%s\"", q);
		return;
	case GRPC_R_HTTP1:
		if (a->outcome.code)
			snprintf(buf, n, "status line HTTP/1.x %d", a->outcome.code);
		return;
	case GRPC_R_HPACK:
	case GRPC_R_FIELD_SIZE:
		snprintf(buf, n, "%s: %s", grpc_reason_text(a->outcome.reason),
			 hpack_error_text(a->outcome.code));
		return;
	default:
		snprintf(buf, n, "%s", grpc_reason_text(a->outcome.reason));
	}
}
