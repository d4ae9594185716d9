/* SPDX-License-Identifier: Apache-2.0 */
/* Table tests for the gRPC probe's frame reader (probe/grpc.c): every case
 * is fed whole, a byte at a time, and split in two at every byte, and must
 * decide the same each way. Then the request it sends, read back. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "probe/grpc.h"
#include "tests/lib/tap.h"
#include "grpc_health.pb-c.h"

enum { RAW = -2, END = -1 };
enum { DATA = 0, HEADERS = 1, PRIORITY = 2, RST = 3, SETTINGS = 4, PUSH = 5, PING = 6,
       GOAWAY = 7, WINDOW = 8, CONT = 9 };
#define ES 0x1
#define EH 0x4
#define PAD 0x8

struct fr {
	int type; /* a frame type, RAW for bytes as they are, END */
	int flags;
	unsigned stream;
	const char *pl;
	int pl_len;
	long len;   /* the length field, when not pl_len (-1: pl_len) */
	int repeat; /* this frame so many times (0: once) */
};

#define F(t, fl, s, ...) { t, fl, s, __VA_ARGS__, -1, 0 }
#define S0 F(SETTINGS, 0, 0, "", 0)
#define HDR F(HEADERS, EH, 1, "\x88", 1)
#define TRL F(HEADERS, EH | ES, 1, "\x40\x0bgrpc-status\x01" "0", 15)
#define MSG(st) "\0\0\0\0\2\x08" st, 7
#define SERVING_MSG F(DATA, 0, 1, MSG("\x01"))
#define FIN { END, 0, 0, NULL, 0, 0, 0 }

struct gcase {
	const char *name;
	struct fr f[12];
	enum probe_result want; /* PROBE_NONE: still undecided, wants more */
	int detail;
	bool eof; /* the peer closes after the bytes */
};

static const struct gcase cases[] = {
	{ "SERVING, then trailers", { S0, HDR, SERVING_MSG, TRL, FIN }, PROBE_PASS, 0 },
	{ "padded DATA", { S0, HDR, F(DATA, PAD, 1, "\x03\0\0\0\0\2\x08\x01\0\0\0", 11), TRL, FIN },
	  PROBE_PASS, 0 },
	{ "header blocks in CONTINUATION",
	  { S0, F(HEADERS, 0, 1, "\x88", 1), F(CONT, EH, 1, "\x88", 1), SERVING_MSG,
	    F(HEADERS, ES, 1, "\x40", 1), F(CONT, 0, 1, "\x0b", 1), F(CONT, EH, 1, "x", 1), FIN },
	  PROBE_PASS, 0 },
	{ "the message in DATA frames of one byte",
	  { S0, HDR, F(DATA, 0, 1, "\0", 1), F(DATA, 0, 1, "\0\0\0", 3), F(DATA, 0, 1, "\2", 1),
	    F(DATA, 0, 1, "", 0), F(DATA, 0, 1, "\x08", 1), F(DATA, 0, 1, "\x01", 1), TRL, FIN },
	  PROBE_PASS, 0 },
	{ "PING, WINDOW_UPDATE, PRIORITY, an unknown type and an ACK skipped",
	  { S0, F(PING, 0, 0, "12345678", 8), F(WINDOW, 0, 0, "\0\0\1\0", 4),
	    F(PRIORITY, 0, 1, "\0\0\0\0\x10", 5), F(0x20, 0, 0, "xyz", 3), F(SETTINGS, 1, 0, "", 0),
	    HDR, SERVING_MSG, F(RST, 0, 3, "\0\0\0\x08", 4), TRL, FIN },
	  PROBE_PASS, 0 },
	{ "SERVING and no trailers yet: undecided", { S0, HDR, SERVING_MSG, FIN }, PROBE_NONE, 0 },
	{ "SERVING, then the connection closes before the trailers",
	  { S0, HDR, SERVING_MSG, FIN }, PROBE_CUT, 0, true },
	{ "nothing, then closed", { FIN }, PROBE_CUT, 0, true },
	{ "NOT_SERVING decides at the message", { S0, HDR, F(DATA, 0, 1, MSG("\x02")), FIN },
	  PROBE_GRPC_STATUS, 2 },
	{ "UNKNOWN: the empty message", { S0, HDR, F(DATA, 0, 1, "\0\0\0\0\0", 5), FIN },
	  PROBE_GRPC_STATUS, 0 },
	{ "SERVICE_UNKNOWN", { S0, HDR, F(DATA, 0, 1, MSG("\x03")), FIN }, PROBE_GRPC_STATUS, 3 },
	{ "a status past the enum", { S0, HDR, F(DATA, 0, 1, MSG("\x07")), FIN },
	  PROBE_GRPC_STATUS, 7 },
	{ "trailers only (NOT_FOUND, UNIMPLEMENTED)", { S0, TRL, FIN }, PROBE_GRPC_NO_MESSAGE, 0 },
	{ "RST_STREAM", { S0, F(RST, 0, 1, "\0\0\0\x07", 4), FIN }, PROBE_STREAM_RESET, 7 },
	{ "GOAWAY", { S0, F(GOAWAY, 0, 0, "\0\0\0\0\0\0\0\x0b", 8), FIN }, PROBE_GOAWAY, 11 },
	{ "GOAWAY after a SERVING message", { S0, HDR, SERVING_MSG,
	  F(GOAWAY, 0, 0, "\0\0\0\1\0\0\0\0debug", 13), FIN }, PROBE_GOAWAY, 0 },
	{ "HEADERS before SETTINGS", { HDR, S0, FIN }, PROBE_GRPC_BAD, 0 },
	{ "a SETTINGS ACK first", { F(SETTINGS, 1, 0, "", 0), FIN }, PROBE_GRPC_BAD, 0 },
	{ "an HTTP/1.1 answer", { { RAW, 0, 0, "HTTP/1.1 400 Bad Request\r\n\r\n", 28, -1, 0 }, FIN },
	  PROBE_GRPC_BAD, 0 },
	{ "a frame one byte over 16 KiB", { S0, { PING, 0, 0, "", 0, 16385, 0 }, FIN },
	  PROBE_BOUNDS, 0 },
	{ "a frame of 16 MiB - 1", { S0, { DATA, 0, 1, "", 0, 0xffffff, 0 }, FIN }, PROBE_BOUNDS, 0 },
	{ "CONTINUATION without end",
	  { S0, F(HEADERS, 0, 1, "\x88", 1), { CONT, 0, 1, "0123456789abcdef", 16, -1, 100 }, FIN },
	  PROBE_BOUNDS, 0 },
	{ "WINDOW_UPDATE without end", { S0, { WINDOW, 0, 0, "\0\0\0\1", 4, -1, 100 }, FIN },
	  PROBE_BOUNDS, 0 },
	{ "PING without end", { S0, { PING, 0, 0, "12345678", 8, -1, 100 }, FIN }, PROBE_BOUNDS, 0 },
	{ "64 KiB in few frames", { S0, { 0x20, 0, 0, NULL, 0, 16384, 4 }, FIN }, PROBE_BOUNDS, 0 },
	{ "a pass, then 80 KiB more in the same read: the pass stands",
	  { S0, HDR, SERVING_MSG, TRL, { 0x20, 0, 0, NULL, 0, 16384, 5 }, FIN }, PROBE_PASS, 0 },
	{ "DATA before the headers", { S0, SERVING_MSG, FIN }, PROBE_GRPC_BAD, 0 },
	{ "DATA on stream 3", { S0, HDR, F(DATA, 0, 3, MSG("\x01")), FIN }, PROBE_GRPC_BAD, 0 },
	{ "the stream ended by DATA: no trailers",
	  { S0, HDR, F(DATA, ES, 1, MSG("\x01")), FIN }, PROBE_GRPC_BAD, 0 },
	{ "a compressed message", { S0, HDR, F(DATA, 0, 1, "\1\0\0\0\2\x08\x01", 7), FIN },
	  PROBE_GRPC_BAD, 0 },
	{ "a message over the bound", { S0, HDR, F(DATA, 0, 1, "\0\0\0\1\1", 5), FIN },
	  PROBE_BOUNDS, 0 },
	{ "two messages", { S0, HDR, F(DATA, 0, 1, "\0\0\0\0\2\x08\x01\0", 8), FIN },
	  PROBE_GRPC_BAD, 0 },
	{ "a message that does not decode", { S0, HDR, F(DATA, 0, 1, "\0\0\0\0\2\x08\x80", 7), FIN },
	  PROBE_GRPC_BAD, 0 },
	{ "PUSH_PROMISE", { S0, F(PUSH, EH, 1, "\0\0\0\2\x88", 5), FIN }, PROBE_GRPC_BAD, 0 },
	{ "a header block interrupted", { S0, F(HEADERS, 0, 1, "\x88", 1), SERVING_MSG, FIN },
	  PROBE_GRPC_BAD, 0 },
	{ "padding as long as the frame", { S0, HDR, F(DATA, PAD, 1, "\x03\0\0", 3), FIN },
	  PROBE_GRPC_BAD, 0 },
	{ "SETTINGS of 5 bytes", { F(SETTINGS, 0, 0, "\0\2\0\0\0", 5), FIN }, PROBE_GRPC_BAD, 0 },
	{ "SETTINGS on stream 1", { F(SETTINGS, 0, 1, "", 0), FIN }, PROBE_GRPC_BAD, 0 },
	{ "a second header block that does not end the stream",
	  { S0, HDR, SERVING_MSG, HDR, FIN }, PROBE_GRPC_BAD, 0 },
	{ "a message cut by the trailers", { S0, HDR, F(DATA, 0, 1, "\0\0\0\0\2\x08", 6), TRL, FIN },
	  PROBE_GRPC_BAD, 0 },
};

/* The case's bytes; *n their count. */
static char *build(const struct gcase *c, size_t *n)
{
	size_t cap = 1 << 20, len = 0;
	char *b = malloc(cap);
	for (const struct fr *f = c->f; b && f->type != END; f++) {
		for (int r = 0; r <= f->repeat - (f->repeat > 0); r++) {
			if (f->type == RAW) {
				memcpy(b + len, f->pl, (size_t)f->pl_len);
				len += (size_t)f->pl_len;
				continue;
			}
			unsigned long fl = f->len >= 0 ? (unsigned long)f->len : (unsigned long)f->pl_len;
			unsigned char h[9] = { (unsigned char)(fl >> 16), (unsigned char)(fl >> 8),
					       (unsigned char)fl, (unsigned char)f->type,
					       (unsigned char)f->flags, 0, 0, 0,
					       (unsigned char)f->stream };
			memcpy(b + len, h, 9);
			len += 9;
			/* A length beyond the payload: the rest is zeros, as far
			 * as the reader should ever get (the bound's own length). */
			size_t body = f->len >= 0 && f->len <= 16384 ? (size_t)f->len : (size_t)f->pl_len;
			memset(b + len, 0, body);
			if (f->pl)
				memcpy(b + len, f->pl, (size_t)f->pl_len);
			len += body;
		}
	}
	*n = len;
	return b;
}

struct got {
	int decided;
	enum probe_result res;
	int detail;
};

/* Feeds in pieces of step bytes (0: whole), split once at split when > 0. */
static struct got run(const char *in, size_t len, size_t split, size_t step, bool eof)
{
	struct grpc_answer a;
	struct got g = { 0, PROBE_NONE, 0 };
	size_t off = 0;
	grpc_answer_init(&a);
	while (off < len && !g.decided) {
		size_t n = len - off;
		if (split && off < split && n > split - off)
			n = split - off;
		if (step && n > step)
			n = step;
		g.decided = grpc_answer_feed(&a, in + off, n, &g.res, &g.detail);
		off += n;
	}
	if (!g.decided && eof) {
		grpc_answer_eof(&a, &g.res, &g.detail);
		g.decided = 1;
	}
	if (!g.decided)
		g.res = PROBE_NONE;
	return g;
}

static void test_cases(void)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct gcase *c = &cases[i];
		size_t len;
		char *in = build(c, &len);
		struct got whole = run(in, len, 0, 0, c->eof);
		is_str(probe_result_name(whole.res), probe_result_name(c->want), "%s", c->name);
		is_int(whole.detail, c->detail, "%s: detail", c->name);
		struct got bytewise = run(in, len, 0, 1, c->eof);
		ok(bytewise.res == whole.res && bytewise.detail == whole.detail,
		   "%s: the same a byte at a time", c->name);
		bool same = true;
		for (size_t s = 1; s < len && len < 4096 && same; s++) {
			struct got g = run(in, len, s, 0, c->eof);
			same = g.res == whole.res && g.detail == whole.detail;
		}
		ok(same, "%s: the same split anywhere", c->name);
		free(in);
	}
}

static void test_acks(void)
{
	static const char two[] = { 0, 0, 0, SETTINGS, 0, 0, 0, 0, 0, 0, 0, 6, SETTINGS, 0,
				    0, 0, 0, 0, 0, 3, 0, 0, 0, 100 };
	struct grpc_answer a;
	enum probe_result r;
	int d;
	grpc_answer_init(&a);
	is_int(grpc_answer_feed(&a, two, sizeof(two), &r, &d), 0, "two SETTINGS: undecided");
	is_int(a.acks, 2, "each SETTINGS is owed an ACK");
	is_int(grpc_settings_ack[3], SETTINGS, "the ACK is a SETTINGS frame");
	is_int(grpc_settings_ack[4], 1, "with the ACK flag");
}

/* The request, read back: frames, a header block of plain literals only,
 * and the HealthCheckRequest. */
static void test_request(void)
{
	char buf[GRPC_MAX_REQUEST];
	size_t len = 0;
	is_int(grpc_request("172.18.0.2:50051", "app.Store", false, buf, sizeof(buf), &len), 0,
	       "the request is built");
	ok(len > 24 && memcmp(buf, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 24) == 0,
	   "it opens with the client preface");
	const unsigned char *p = (const unsigned char *)buf + 24, *end = (const unsigned char *)buf + len;
	int types[8], nf = 0;
	const unsigned char *block = NULL, *data = NULL;
	size_t block_len = 0, data_len = 0;
	while (p + 9 <= end && nf < 8) {
		size_t fl = (size_t)p[0] << 16 | (size_t)p[1] << 8 | p[2];
		types[nf++] = p[3];
		if (p[3] == HEADERS) {
			block = p + 9;
			block_len = fl;
			ok(p[4] == EH && p[8] == 1, "HEADERS: one block on stream 1");
		}
		if (p[3] == DATA) {
			data = p + 9;
			data_len = fl;
			ok(p[4] == ES && p[8] == 1, "DATA ends stream 1");
		}
		p += 9 + fl;
	}
	ok(p == end && nf == 3 && types[0] == SETTINGS && types[1] == HEADERS && types[2] == DATA,
	   "SETTINGS, HEADERS, DATA and nothing else");
	/* Each header: 0x00, then two strings of a 7-bit length, no Huffman. */
	char got[512] = "";
	size_t got_len = 0;
	bool plain = block != NULL;
	for (size_t i = 0; plain && i < block_len;) {
		plain = block[i++] == 0;
		for (int k = 0; k < 2 && plain; k++) {
			plain = i < block_len && !(block[i] & 0x80) && block[i] < 127;
			size_t sl = plain ? block[i++] : 0;
			plain = plain && i + sl <= block_len;
			if (plain) {
				/* Bounded: a block too long for got fails the point. */
				int w = snprintf(got + got_len, sizeof(got) - got_len, "%.*s%s",
						 (int)sl, (const char *)block + i, k ? "\n" : ": ");
				plain = w >= 0 && (size_t)w < sizeof(got) - got_len;
				got_len += plain ? (size_t)w : 0;
			}
			i += sl;
		}
	}
	ok(plain, "the header block is literals without indexing, without Huffman");
	is_str(got, ":method: POST\n:scheme: http\n:path: /grpc.health.v1.Health/Check\n"
		    ":authority: 172.18.0.2:50051\ncontent-type: application/grpc\nte: trailers\n"
		    "user-agent: dstack-healthd-probe/" HEALTHD_VERSION "\n",
	       "the headers a gRPC server expects");
	ok(data && data_len >= 5 && data[0] == 0 &&
	   ((size_t)data[1] << 24 | (size_t)data[2] << 16 | (size_t)data[3] << 8 | data[4]) ==
		   data_len - 5, "DATA: one uncompressed message of its length");
	Grpc__Health__V1__HealthCheckRequest *m =
		data ? grpc__health__v1__health_check_request__unpack(NULL, data_len - 5, data + 5) : NULL;
	is_str(m ? m->service : NULL, "app.Store", "a HealthCheckRequest for the service");
	if (m)
		grpc__health__v1__health_check_request__free_unpacked(m, NULL);

	is_int(grpc_request("10.0.0.1:1", "", true, buf, sizeof(buf), &len), 0, "no service");
	ok(memmem(buf, len, ":scheme\x05https", 13) != NULL, "grpcs says :scheme https");
	char longest[PROBE_PATH_MAX + 1];
	memset(longest, 'a', PROBE_PATH_MAX);
	longest[PROBE_PATH_MAX] = '\0';
	is_int(grpc_request("255.255.255.255:65535", longest, true, buf, sizeof(buf), &len), 0,
	       "the longest service and address fit");
	is_int(grpc_request("10.0.0.1:1", "", false, buf, 100, &len), -E2BIG,
	       "a buffer too small is -E2BIG");
}

int main(void)
{
	test_cases();
	test_acks();
	test_request();
	return done_testing();
}
