/* SPDX-License-Identifier: Apache-2.0 */
/* Table tests for the gRPC probe's reader (probe/grpc.c, issues 34 and 42):
 * every case is fed whole, a byte at a time, and split in two at every
 * byte, and must decide the same each way: the result, the rule that
 * decided (its reason) and its code. Then the replies it owes, the
 * operator's words, and the request it sends, read back. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "probe/grpc.h"
#include "tests/lib/tap.h"
#include "grpc_health.pb-c.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

enum { RAW = -2, END = -1 };
enum { DATA = 0, HEADERS = 1, PRIORITY = 2, RST = 3, SETTINGS = 4, PUSH = 5, PING = 6,
       GOAWAY = 7, WINDOW = 8, CONT = 9 };
#define ES 0x1
#define ACK 0x1
#define EH 0x4
#define PAD 0x8
#define PRIO 0x20

struct fr {
	int type; /* a frame type, RAW for bytes as they are, END */
	int flags;
	unsigned stream;
	const char *pl;
	int pl_len;
	long len;   /* the length field, when not pl_len (-1: pl_len) */
	int repeat; /* this frame so many times (0: once) */
};

/* A payload and its length, NULs included. */
#define P(s) s, (int)sizeof(s) - 1
#define F(t, fl, s, ...) { t, fl, s, __VA_ARGS__, -1, 0 }
#define FIN { END, 0, 0, NULL, 0, 0, 0 }
#define S0 F(SETTINGS, 0, 0, P(""))

/* Header blocks (HPACK). :status 200 (static 8), then content-type
 * (static 31) application/grpc, a literal without indexing. */
#define B_CT "\x0f\x10\x10" "application/grpc"
#define B_HDR "\x88" B_CT
/* grpc-status as a literal with a new name, without indexing. */
#define B_STATUS(len, v) "\x00\x0b" "grpc-status" len v
#define B_OK B_STATUS("\x01", "0")
#define B_MESSAGE(len, v) "\x00\x0c" "grpc-message" len v
#define HDR F(HEADERS, EH, 1, P(B_HDR))
#define TRL F(HEADERS, EH | ES, 1, P(B_OK))
#define TRL_B(b) F(HEADERS, EH | ES, 1, P(b))
#define HDR_B(b) F(HEADERS, EH, 1, P(b))
#define MSG(st) "\0\0\0\0\2\x08" st
#define SERVING_MSG F(DATA, 0, 1, P(MSG("\x01")))
#define OK3 S0, HDR, SERVING_MSG /* the answer up to its trailers */

struct gcase {
	const char *name;
	struct fr f[14];
	enum probe_result want; /* PROBE_NONE: still undecided, wants more */
	enum grpc_reason why;
	int code;
	bool eof; /* the peer closes after the bytes */
};

static const struct gcase cases[] = {
	/* Passes: SERVING, then grpc-status 0, after :status 200 and gRPC. */
	{ "SERVING, then grpc-status 0", { OK3, TRL, FIN }, PROBE_PASS, GRPC_R_PASS, 0 },
	{ "content-type application/grpc+proto",
	  { S0, HDR_B("\x88\x0f\x10\x16" "application/grpc+proto"), SERVING_MSG, TRL, FIN },
	  PROBE_PASS, GRPC_R_PASS, 0 },
	{ "content-type application/grpc;charset",
	  { S0, HDR_B("\x88\x0f\x10\x18" "application/grpc;charset"), SERVING_MSG, TRL, FIN },
	  PROBE_PASS, GRPC_R_PASS, 0 },
	{ "padded DATA",
	  { S0, HDR, F(DATA, PAD, 1, P("\x03" MSG("\x01") "\0\0\0")), TRL, FIN }, PROBE_PASS,
	  GRPC_R_PASS, 0 },
	{ "padded HEADERS with a priority; trailers padded with 0 bytes",
	  { S0, F(HEADERS, EH | PAD | PRIO, 1, P("\x02" "\x80\0\0\x03\x10" B_HDR "\0\0")),
	    SERVING_MSG, F(HEADERS, EH | ES | PAD, 1, P("\0" B_OK)), FIN },
	  PROBE_PASS, GRPC_R_PASS, 0 },
	{ "header blocks in CONTINUATION, split inside fields",
	  { S0, F(HEADERS, 0, 1, P("\x88\x0f")), F(CONT, 0, 1, P("\x10\x10" "applic")),
	    F(CONT, EH, 1, P("ation/grpc")), SERVING_MSG, F(HEADERS, ES, 1, P("\x00\x0b" "grpc")),
	    F(CONT, 0, 1, P("")), F(CONT, EH, 1, P("-status\x01" "0")), FIN },
	  PROBE_PASS, GRPC_R_PASS, 0 },
	{ "the message in DATA frames of one byte",
	  { S0, HDR, F(DATA, 0, 1, P("\0")), F(DATA, 0, 1, P("\0\0\0")), F(DATA, 0, 1, P("\2")),
	    F(DATA, 0, 1, P("")), F(DATA, 0, 1, P("\x08")), F(DATA, 0, 1, P("\x01")), TRL, FIN },
	  PROBE_PASS, GRPC_R_PASS, 0 },
	{ "PING, WINDOW_UPDATE, PRIORITY, an unknown type and ACKs skipped",
	  { S0, F(PING, 0, 0, P("12345678")), F(WINDOW, 0, 0, P("\0\0\1\0")),
	    F(PRIORITY, 0, 1, P("\0\0\0\0\x10")), F(0x20, 0, 0, P("xyz")), F(SETTINGS, ACK, 0, P("")),
	    F(PING, ACK, 0, P("abcdefgh")), HDR, SERVING_MSG, F(RST, 0, 3, P("\0\0\0\x08")), TRL,
	    FIN },
	  PROBE_PASS, GRPC_R_PASS, 0 },
	{ "a graceful GOAWAY before the answer lets the call finish",
	  { S0, F(GOAWAY, 0, 0, P("\0\0\0\1\0\0\0\0")), HDR, SERVING_MSG, TRL, FIN }, PROBE_PASS,
	  GRPC_R_PASS, 0 },
	{ "a graceful GOAWAY (last stream 2^31-1) before the trailers",
	  { OK3, F(GOAWAY, 0, 0, P("\x7f\xff\xff\xff\0\0\0\0debug")), TRL, FIN }, PROBE_PASS,
	  GRPC_R_PASS, 0 },
	/* The trailers may refer to entries the headers added: both blocks
	 * go through one decoder, in order. */
	{ "trailers that name an entry the headers added (grpc-status 0)",
	  { S0, HDR_B(B_HDR "\x40\x0b" "grpc-status\x01" "0"), SERVING_MSG, TRL_B("\xbe"), FIN },
	  PROBE_PASS, GRPC_R_PASS, 0 },
	{ "trailers that name an entry the headers added (grpc-status 14)",
	  { S0, HDR_B(B_HDR "\x40\x0b" "grpc-status\x02" "14"), SERVING_MSG, TRL_B("\xbe"), FIN },
	  PROBE_GRPC_CALL_STATUS, GRPC_R_CALL_STATUS, 14 },
	/* The call's final status. */
	{ "SERVING, then grpc-status 14 (UNAVAILABLE): no pass",
	  { OK3, TRL_B(B_STATUS("\x02", "14") B_MESSAGE("\x04", "down")), FIN },
	  PROBE_GRPC_CALL_STATUS, GRPC_R_CALL_STATUS, 14 },
	{ "grpc-status of 9 digits", { OK3, TRL_B(B_STATUS("\x09", "999999999")), FIN },
	  PROBE_GRPC_CALL_STATUS, GRPC_R_CALL_STATUS, 999999999 },
	{ "grpc-status 00 is 0", { OK3, TRL_B(B_STATUS("\x02", "00")), FIN }, PROBE_PASS,
	  GRPC_R_PASS, 0 },
	{ "trailers only: NOT_FOUND, an unknown service",
	  { S0, TRL_B(B_HDR B_STATUS("\x01", "5") B_MESSAGE("\x0f", "unknown service")), FIN },
	  PROBE_GRPC_CALL_STATUS, GRPC_R_CALL_STATUS, 5 },
	{ "trailers only: UNIMPLEMENTED", { S0, TRL_B(B_HDR B_STATUS("\x02", "12")), FIN },
	  PROBE_GRPC_CALL_STATUS, GRPC_R_CALL_STATUS, 12 },
	{ "trailers only, grpc-status 0: no message", { S0, TRL_B(B_HDR B_OK), FIN },
	  PROBE_GRPC_NO_MESSAGE, GRPC_R_NO_MESSAGE, 0 },
	{ "headers, then trailers without a message: DEADLINE_EXCEEDED",
	  { S0, HDR, TRL_B(B_STATUS("\x01", "4")), FIN }, PROBE_GRPC_CALL_STATUS,
	  GRPC_R_CALL_STATUS, 4 },
	{ "headers, then trailers of 0 without a message", { S0, HDR, TRL, FIN },
	  PROBE_GRPC_NO_MESSAGE, GRPC_R_NO_MESSAGE, 0 },
	{ "trailers without grpc-status", { OK3, TRL_B(B_MESSAGE("\x01", "x")), FIN },
	  PROBE_GRPC_BAD, GRPC_R_GRPC_STATUS, 0 },
	{ "an empty trailers block", { OK3, TRL_B(""), FIN }, PROBE_GRPC_BAD, GRPC_R_GRPC_STATUS, 0 },
	{ "grpc-status 0 then 14", { OK3, TRL_B(B_OK B_STATUS("\x02", "14")), FIN },
	  PROBE_GRPC_BAD, GRPC_R_GRPC_STATUS, 0 },
	{ "grpc-status 14 then 0", { OK3, TRL_B(B_STATUS("\x02", "14") B_OK), FIN },
	  PROBE_GRPC_BAD, GRPC_R_GRPC_STATUS, 0 },
	{ "grpc-status 0 twice", { OK3, TRL_B(B_OK B_OK), FIN }, PROBE_GRPC_BAD, GRPC_R_GRPC_STATUS,
	  0 },
	{ "grpc-status not a number", { OK3, TRL_B(B_STATUS("\x02", "0x")), FIN }, PROBE_GRPC_BAD,
	  GRPC_R_GRPC_STATUS, 0 },
	{ "grpc-status empty", { OK3, TRL_B(B_STATUS("\x00", "")), FIN }, PROBE_GRPC_BAD,
	  GRPC_R_GRPC_STATUS, 0 },
	{ "grpc-status of 10 digits", { OK3, TRL_B(B_STATUS("\x0a", "0000000000")), FIN },
	  PROBE_GRPC_BAD, GRPC_R_GRPC_STATUS, 0 },
	{ "grpc-status 1/ (below the digits)", { OK3, TRL_B(B_STATUS("\x02", "1/")), FIN },
	  PROBE_GRPC_BAD, GRPC_R_GRPC_STATUS, 0 },
	{ "grpc-status 1: (above the digits)", { OK3, TRL_B(B_STATUS("\x02", "1:")), FIN },
	  PROBE_GRPC_BAD, GRPC_R_GRPC_STATUS, 0 },
	{ "a field named grpc is not grpc-status",
	  { OK3, TRL_B(B_OK "\x00\x04" "grpc\x02" "14"), FIN }, PROBE_PASS, GRPC_R_PASS, 0 },
	{ "grpc-status in the headers does not decide", /* the trailers do */
	  { S0, HDR_B(B_HDR B_OK), SERVING_MSG, TRL_B(B_STATUS("\x02", "13")), FIN },
	  PROBE_GRPC_CALL_STATUS, GRPC_R_CALL_STATUS, 13 },
	/* The response headers: :status 200 and gRPC. */
	{ "a proxy's 502 page", { S0, HDR_B("\x08\x03" "502" "\x0f\x10\x09" "text/html"),
	  F(DATA, ES, 1, P("<html>")), FIN }, PROBE_STATUS, GRPC_R_HTTP_STATUS, 502 },
	{ ":status 503 in a Trailers-Only answer with grpc-status",
	  { S0, TRL_B("\x08\x03" "503" B_CT B_STATUS("\x02", "14")), FIN }, PROBE_STATUS,
	  GRPC_R_HTTP_STATUS, 503 },
	{ "200 with content-type text/html", { S0, HDR_B("\x88\x0f\x10\x09" "text/html"), FIN },
	  PROBE_GRPC_BAD, GRPC_R_CONTENT_TYPE, 0 },
	{ "200 with content-type application/grpcx",
	  { S0, HDR_B("\x88\x0f\x10\x11" "application/grpcx"), FIN }, PROBE_GRPC_BAD,
	  GRPC_R_CONTENT_TYPE, 0 },
	{ "200 with content-type application/json (as long)",
	  { S0, HDR_B("\x88\x0f\x10\x10" "application/json"), FIN }, PROBE_GRPC_BAD,
	  GRPC_R_CONTENT_TYPE, 0 },
	{ "200 with content-type application/grp+",
	  { S0, HDR_B("\x88\x0f\x10\x10" "application/grp+"), FIN }, PROBE_GRPC_BAD,
	  GRPC_R_CONTENT_TYPE, 0 },
	{ "200 with content-type application/grp",
	  { S0, HDR_B("\x88\x0f\x10\x0f" "application/grp"), FIN }, PROBE_GRPC_BAD,
	  GRPC_R_CONTENT_TYPE, 0 },
	{ "200 without content-type", { S0, HDR_B("\x88"), FIN }, PROBE_GRPC_BAD,
	  GRPC_R_CONTENT_TYPE, 0 },
	{ "two content-types", { S0, HDR_B(B_HDR B_CT), FIN }, PROBE_GRPC_BAD, GRPC_R_CONTENT_TYPE,
	  0 },
	{ "text/html then application/grpc", { S0, HDR_B("\x88\x0f\x10\x09" "text/html" B_CT), FIN },
	  PROBE_GRPC_BAD, GRPC_R_CONTENT_TYPE, 0 },
	{ "no :status", { S0, HDR_B(B_CT), FIN }, PROBE_GRPC_BAD, GRPC_R_NO_HTTP_STATUS, 0 },
	{ ":status of two digits", { S0, HDR_B("\x08\x02" "20" B_CT), FIN }, PROBE_GRPC_BAD,
	  GRPC_R_NO_HTTP_STATUS, 0 },
	{ ":status not a number", { S0, HDR_B("\x08\x03" "2x0" B_CT), FIN }, PROBE_GRPC_BAD,
	  GRPC_R_NO_HTTP_STATUS, 0 },
	{ "two :status", { S0, HDR_B("\x88\x88" B_CT), FIN }, PROBE_GRPC_BAD, GRPC_R_PSEUDO, 0 },
	{ ":status after a field", { S0, HDR_B(B_CT "\x88"), FIN }, PROBE_GRPC_BAD, GRPC_R_PSEUDO,
	  0 },
	{ "a pseudo-header other than :status", { S0, HDR_B("\x88\x84" B_CT), FIN },
	  PROBE_GRPC_BAD, GRPC_R_PSEUDO, 0 },
	{ "a pseudo-header other than :status, alone", { S0, HDR_B("\x84" B_CT), FIN },
	  PROBE_GRPC_BAD, GRPC_R_PSEUDO, 0 },
	{ ":status 204, a 2xx other than 200", { S0, HDR_B("\x89" B_CT), FIN }, PROBE_STATUS,
	  GRPC_R_HTTP_STATUS, 204 },
	{ ":status in the trailers", { OK3, TRL_B("\x88" B_OK), FIN }, PROBE_GRPC_BAD,
	  GRPC_R_PSEUDO, 0 },
	{ "a pseudo-header in the trailers", { OK3, TRL_B(B_OK "\x84"), FIN }, PROBE_GRPC_BAD,
	  GRPC_R_PSEUDO, 0 },
	/* Fields as HTTP/2 writes them (RFC 9113 §8.2.1): every field read,
	 * the first one that breaks a rule decides. */
	{ "an uppercase name (Grpc-Status 14 beside grpc-status 0)",
	  { OK3, TRL_B(B_OK "\x00\x0b" "Grpc-Status\x02" "14"), FIN }, PROBE_GRPC_BAD,
	  GRPC_R_FIELD_NAME, 0 },
	{ "a name with a Z", { OK3, TRL_B(B_OK "\x00\x01" "Z\x00"), FIN }, PROBE_GRPC_BAD,
	  GRPC_R_FIELD_NAME, 0 },
	{ "names with @ and [ (beside the uppercase range) are fine",
	  { OK3, TRL_B(B_OK "\x00\x01" "@\x00" "\x00\x01" "[\x00"), FIN }, PROBE_PASS, GRPC_R_PASS, 0 },
	{ "a name with a space", { OK3, TRL_B(B_OK "\x00\x03" "a b\x00"), FIN }, PROBE_GRPC_BAD,
	  GRPC_R_FIELD_NAME, 0 },
	{ "a name with a !, just above space, is fine",
	  { OK3, TRL_B(B_OK "\x00\x01" "!\x00"), FIN }, PROBE_PASS, GRPC_R_PASS, 0 },
	{ "a name with DEL", { OK3, TRL_B(B_OK "\x00\x01" "\x7f\x00"), FIN }, PROBE_GRPC_BAD,
	  GRPC_R_FIELD_NAME, 0 },
	{ "a name with a ~, just below DEL, is fine",
	  { OK3, TRL_B(B_OK "\x00\x01" "~\x00"), FIN }, PROBE_PASS, GRPC_R_PASS, 0 },
	{ "an empty name", { OK3, TRL_B(B_OK "\x00\x00\x00"), FIN }, PROBE_GRPC_BAD,
	  GRPC_R_FIELD_NAME, 0 },
	{ "a colon inside a name", { OK3, TRL_B(B_OK "\x00\x03" "a:b\x00"), FIN }, PROBE_GRPC_BAD,
	  GRPC_R_FIELD_NAME, 0 },
	{ "a value with CR", { OK3, TRL_B(B_OK "\x00\x01" "a\x03" "x\ry"), FIN }, PROBE_GRPC_BAD,
	  GRPC_R_FIELD_VALUE, 0 },
	{ "a value with LF", { OK3, TRL_B(B_OK "\x00\x01" "a\x03" "x\ny"), FIN }, PROBE_GRPC_BAD,
	  GRPC_R_FIELD_VALUE, 0 },
	{ "a value with NUL", { OK3, TRL_B(B_OK "\x00\x01" "a\x03" "x\0y"), FIN }, PROBE_GRPC_BAD,
	  GRPC_R_FIELD_VALUE, 0 },
	{ "grpc-status with a space before", { OK3, TRL_B(B_STATUS("\x02", " 0")), FIN },
	  PROBE_GRPC_BAD, GRPC_R_FIELD_VALUE, 0 },
	{ "a value ending in a tab", { OK3, TRL_B(B_OK "\x00\x01" "a\x02" "x\t"), FIN },
	  PROBE_GRPC_BAD, GRPC_R_FIELD_VALUE, 0 },
	{ "a value ending in a space", { OK3, TRL_B(B_OK "\x00\x01" "a\x02" "x "), FIN },
	  PROBE_GRPC_BAD, GRPC_R_FIELD_VALUE, 0 },
	{ "a value beginning with a tab", { OK3, TRL_B(B_OK "\x00\x01" "a\x02" "\tx"), FIN },
	  PROBE_GRPC_BAD, GRPC_R_FIELD_VALUE, 0 },
	{ "an empty value is fine", { OK3, TRL_B(B_OK "\x00\x01" "a\x00"), FIN }, PROBE_PASS,
	  GRPC_R_PASS, 0 },
	{ "a space inside a value is fine", { OK3, TRL_B(B_OK "\x00\x01" "a\x03" "x y"), FIN },
	  PROBE_PASS, GRPC_R_PASS, 0 },
	{ "the first broken rule names the block", { OK3, TRL_B("\x00\x01" "A\x00" "\x88"), FIN },
	  PROBE_GRPC_BAD, GRPC_R_FIELD_NAME, 0 },
	/* HPACK refusals (probe/hpack.c has them all): a connection error. */
	{ "Huffman padding that is not EOS", { OK3, TRL_B("\x00\x81\x18\x00"), FIN },
	  PROBE_GRPC_BAD, GRPC_R_HPACK, HPACK_E_HUFFMAN_PADDING },
	{ "an integer that overflows", { OK3, TRL_B("\xff\x81\xff\x03"), FIN }, PROBE_GRPC_BAD,
	  GRPC_R_HPACK, HPACK_E_INTEGER },
	{ "a table size update over 4096", { S0, HDR_B("\x3f\xe2\x1f" B_HDR), FIN }, PROBE_GRPC_BAD,
	  GRPC_R_HPACK, HPACK_E_SIZE_UPDATE_OVER },
	{ "an index past the tables", { OK3, TRL_B("\xbe"), FIN }, PROBE_GRPC_BAD, GRPC_R_HPACK,
	  HPACK_E_INDEX },
	{ "a block cut inside a field", { OK3, TRL_B("\x00\x0b" "grpc"), FIN }, PROBE_GRPC_BAD,
	  GRPC_R_HPACK, HPACK_E_TRUNCATED },
	/* HTTP/1 where HTTP/2 was spoken. */
	{ "an HTTP/1.1 answer", { { RAW, 0, 0, P("HTTP/1.1 400 Bad Request\r\n\r\n"), -1, 0 }, FIN },
	  PROBE_HTTP1, GRPC_R_HTTP1, 400 },
	{ "an HTTP/1.0 503", { { RAW, 0, 0, P("HTTP/1.0 503 x\r\n\r\n"), -1, 0 }, FIN }, PROBE_HTTP1,
	  GRPC_R_HTTP1, 503 },
	{ "an HTTP/1.1 status line that is no number", { { RAW, 0, 0, P("HTTP/1.1 4x0 x"), -1, 0 },
	  FIN }, PROBE_HTTP1, GRPC_R_HTTP1, 0 },
	{ "an HTTP/1.1 status line with a byte below the digits",
	  { { RAW, 0, 0, P("HTTP/1.1 4/0 x"), -1, 0 }, FIN }, PROBE_HTTP1, GRPC_R_HTTP1, 0 },
	{ "an HTTP/1.1 status line cut short", { { RAW, 0, 0, P("HTTP/1.1 4"), -1, 0 }, FIN },
	  PROBE_HTTP1, GRPC_R_HTTP1, 0, true },
	{ "HTTP/1.1 without its space", { { RAW, 0, 0, P("HTTP/1.1x400 x"), -1, 0 }, FIN },
	  PROBE_GRPC_BAD, GRPC_R_FIRST_FRAME, 0 },
	{ "HTTP/2 (not 1.x) as text", { { RAW, 0, 0, P("HTTP/2.0 400 x"), -1, 0 }, FIN },
	  PROBE_GRPC_BAD, GRPC_R_FIRST_FRAME, 0 },
	{ "HTTP/1x1 (no dot) as text", { { RAW, 0, 0, P("HTTP/1x1 400 x"), -1, 0 }, FIN },
	  PROBE_GRPC_BAD, GRPC_R_FIRST_FRAME, 0 },
	/* Undecided, and closed. */
	{ "SERVING and no trailers yet: undecided", { OK3, FIN }, PROBE_NONE, GRPC_R_NONE, 0 },
	{ "SERVING, then closed before the trailers", { OK3, FIN }, PROBE_CUT, GRPC_R_CLOSED,
	  GRPC_HAVE_MESSAGE, true },
	{ "nothing, then closed", { FIN }, PROBE_CUT, GRPC_R_CLOSED, GRPC_AWAIT_SETTINGS, true },
	{ "closed inside the headers", { S0, F(HEADERS, 0, 1, P("\x88")), FIN }, PROBE_CUT,
	  GRPC_R_CLOSED, GRPC_IN_HEADERS, true },
	{ "a graceful GOAWAY, then closed before the answer",
	  { S0, F(GOAWAY, 0, 0, P("\0\0\0\1\0\0\0\0")), FIN }, PROBE_CUT, GRPC_R_CLOSED,
	  GRPC_AWAIT_HEADERS, true },
	/* The message's serving status decides at once. */
	{ "NOT_SERVING decides at the message", { S0, HDR, F(DATA, 0, 1, P(MSG("\x02"))), FIN },
	  PROBE_GRPC_STATUS, GRPC_R_SERVING_STATUS, 2 },
	{ "UNKNOWN: the empty message", { S0, HDR, F(DATA, 0, 1, P("\0\0\0\0\0")), FIN },
	  PROBE_GRPC_STATUS, GRPC_R_SERVING_STATUS, 0 },
	{ "SERVICE_UNKNOWN", { S0, HDR, F(DATA, 0, 1, P(MSG("\x03"))), FIN }, PROBE_GRPC_STATUS,
	  GRPC_R_SERVING_STATUS, 3 },
	{ "a status past the enum", { S0, HDR, F(DATA, 0, 1, P(MSG("\x07"))), FIN },
	  PROBE_GRPC_STATUS, GRPC_R_SERVING_STATUS, 7 },
	/* RST_STREAM and GOAWAY. */
	{ "RST_STREAM", { S0, F(RST, 0, 1, P("\0\0\0\x07")), FIN }, PROBE_STREAM_RESET,
	  GRPC_R_RESET, 7 },
	{ "RST_STREAM after SERVING", { OK3, F(RST, 0, 1, P("\0\0\0\x02")), FIN },
	  PROBE_STREAM_RESET, GRPC_R_RESET, 2 },
	{ "GOAWAY with an error", { S0, F(GOAWAY, 0, 0, P("\0\0\0\1\0\0\0\x0b")), FIN },
	  PROBE_GOAWAY, GRPC_R_GOAWAY_ERROR, 11 },
	{ "GOAWAY with an error after SERVING, before the trailers",
	  { OK3, F(GOAWAY, 0, 0, P("\0\0\0\1\0\0\0\x02")), FIN }, PROBE_GOAWAY, GRPC_R_GOAWAY_ERROR,
	  2 },
	{ "a graceful GOAWAY that excludes stream 1",
	  { OK3, F(GOAWAY, 0, 0, P("\0\0\0\0\0\0\0\0debug")), FIN }, PROBE_GOAWAY,
	  GRPC_R_GOAWAY_EXCLUDES, 0 },
	{ "a GOAWAY's reserved bit is not its last stream",
	  { OK3, F(GOAWAY, 0, 0, P("\x80\0\0\0\0\0\0\0")), FIN }, PROBE_GOAWAY,
	  GRPC_R_GOAWAY_EXCLUDES, 0 },
	/* Frames as HTTP/2 writes them. */
	{ "HEADERS before SETTINGS", { HDR, S0, FIN }, PROBE_GRPC_BAD, GRPC_R_FIRST_FRAME, 0 },
	{ "a SETTINGS ACK first", { F(SETTINGS, ACK, 0, P("")), FIN }, PROBE_GRPC_BAD,
	  GRPC_R_FIRST_FRAME, 0 },
	{ "SETTINGS of 5 bytes", { F(SETTINGS, 0, 0, P("\0\2\0\0\0")), FIN }, PROBE_GRPC_BAD,
	  GRPC_R_SETTINGS, 0 },
	{ "SETTINGS of 6 bytes", { F(SETTINGS, 0, 0, P("\0\2\0\0\0\0")), OK3, TRL, FIN },
	  PROBE_PASS, GRPC_R_PASS, 0 },
	{ "SETTINGS on stream 1", { F(SETTINGS, 0, 1, P("")), FIN }, PROBE_GRPC_BAD,
	  GRPC_R_SETTINGS, 0 },
	{ "a SETTINGS ACK with a payload", { S0, F(SETTINGS, ACK, 0, P("\0\2\0\0\0\0")), FIN },
	  PROBE_GRPC_BAD, GRPC_R_SETTINGS, 0 },
	{ "PING on stream 1", { S0, F(PING, 0, 1, P("12345678")), FIN }, PROBE_GRPC_BAD,
	  GRPC_R_PING, 0 },
	{ "PING of 7 bytes", { S0, F(PING, 0, 0, P("1234567")), FIN }, PROBE_GRPC_BAD, GRPC_R_PING,
	  0 },
	{ "PING of 9 bytes", { S0, F(PING, 0, 0, P("123456789")), FIN }, PROBE_GRPC_BAD,
	  GRPC_R_PING, 0 },
	{ "RST_STREAM on stream 0", { S0, F(RST, 0, 0, P("\0\0\0\x07")), FIN }, PROBE_GRPC_BAD,
	  GRPC_R_RST_STREAM, 0 },
	{ "RST_STREAM of 3 bytes", { S0, F(RST, 0, 1, P("\0\0\x07")), FIN }, PROBE_GRPC_BAD,
	  GRPC_R_RST_STREAM, 0 },
	{ "RST_STREAM of 5 bytes", { S0, F(RST, 0, 1, P("\0\0\0\x07\0")), FIN }, PROBE_GRPC_BAD,
	  GRPC_R_RST_STREAM, 0 },
	{ "GOAWAY on stream 1", { S0, F(GOAWAY, 0, 1, P("\0\0\0\1\0\0\0\0")), FIN },
	  PROBE_GRPC_BAD, GRPC_R_GOAWAY, 0 },
	{ "GOAWAY of 7 bytes", { S0, F(GOAWAY, 0, 0, P("\0\0\0\1\0\0\0")), FIN }, PROBE_GRPC_BAD,
	  GRPC_R_GOAWAY, 0 },
	{ "PUSH_PROMISE", { S0, F(PUSH, EH, 1, P("\0\0\0\2\x88")), FIN }, PROBE_GRPC_BAD,
	  GRPC_R_PUSH, 0 },
	{ "DATA before the headers", { S0, SERVING_MSG, FIN }, PROBE_GRPC_BAD, GRPC_R_DATA_EARLY, 0 },
	{ "DATA on stream 3", { S0, HDR, F(DATA, 0, 3, P(MSG("\x01"))), FIN }, PROBE_GRPC_BAD,
	  GRPC_R_STREAM, 0 },
	{ "HEADERS on stream 3", { S0, F(HEADERS, EH, 3, P(B_HDR)), FIN }, PROBE_GRPC_BAD,
	  GRPC_R_STREAM, 0 },
	{ "the stream ended by DATA: no trailers",
	  { S0, HDR, F(DATA, ES, 1, P(MSG("\x01"))), FIN }, PROBE_GRPC_BAD, GRPC_R_DATA_END, 0 },
	{ "an empty DATA ending the stream after SERVING", { OK3, F(DATA, ES, 1, P("")), FIN },
	  PROBE_GRPC_BAD, GRPC_R_DATA_END, 0 },
	{ "a compressed message", { S0, HDR, F(DATA, 0, 1, P("\1\0\0\0\2\x08\x01")), FIN },
	  PROBE_GRPC_BAD, GRPC_R_COMPRESSED, 0 },
	{ "a message of 256 bytes is read", { S0, HDR, F(DATA, 0, 1, P("\0\0\0\1\0")), FIN },
	  PROBE_NONE, GRPC_R_NONE, 0 },
	{ "a message over the bound", { S0, HDR, F(DATA, 0, 1, P("\0\0\0\1\1")), FIN },
	  PROBE_BOUNDS, GRPC_R_MESSAGE_SIZE, 0 },
	{ "two messages", { S0, HDR, F(DATA, 0, 1, P(MSG("\x01") "\0")), FIN }, PROBE_GRPC_BAD,
	  GRPC_R_SECOND_MESSAGE, 0 },
	{ "a message that does not decode", { S0, HDR, F(DATA, 0, 1, P(MSG("\x80"))), FIN },
	  PROBE_GRPC_BAD, GRPC_R_UNDECODABLE, 0 },
	{ "a message cut by the trailers", { S0, HDR, F(DATA, 0, 1, P("\0\0\0\0\2\x08")), TRL, FIN },
	  PROBE_GRPC_BAD, GRPC_R_MESSAGE_CUT, 0 },
	{ "one byte of a message, then grpc-status 0", { S0, HDR, F(DATA, 0, 1, P("\0")), TRL, FIN },
	  PROBE_GRPC_BAD, GRPC_R_MESSAGE_CUT, 0 },
	{ "a header block interrupted by DATA",
	  { S0, F(HEADERS, 0, 1, P("\x88")), SERVING_MSG, FIN }, PROBE_GRPC_BAD, GRPC_R_INTERRUPTED,
	  0 },
	{ "a header block interrupted by PING",
	  { S0, F(HEADERS, 0, 1, P("\x88")), F(PING, 0, 0, P("12345678")), FIN }, PROBE_GRPC_BAD,
	  GRPC_R_INTERRUPTED, 0 },
	{ "a header block continued on stream 3",
	  { S0, F(HEADERS, 0, 1, P("\x88")), F(CONT, EH, 3, P(B_CT)), FIN }, PROBE_GRPC_BAD,
	  GRPC_R_INTERRUPTED, 0 },
	{ "CONTINUATION with no block", { S0, HDR, F(CONT, EH, 1, P("")), FIN }, PROBE_GRPC_BAD,
	  GRPC_R_CONTINUATION, 0 },
	{ "a Trailers-Only block interrupted",
	  { S0, F(HEADERS, ES, 1, P("\x88")), F(PING, 0, 0, P("12345678")), FIN }, PROBE_GRPC_BAD,
	  GRPC_R_INTERRUPTED, 0 },
	{ "trailers interrupted", { OK3, F(HEADERS, ES, 1, P("\x00")), F(DATA, 0, 1, P("")), FIN },
	  PROBE_GRPC_BAD, GRPC_R_INTERRUPTED, 0 },
	{ "a Trailers-Only block in CONTINUATION",
	  { S0, F(HEADERS, ES, 1, P("\x88")), F(CONT, EH, 1, P(B_CT B_STATUS("\x01", "5"))), FIN },
	  PROBE_GRPC_CALL_STATUS, GRPC_R_CALL_STATUS, 5 },
	{ "CONTINUATION's PADDED flag means nothing (no padding there)",
	  { S0, F(HEADERS, 0, 1, P("\x88")), F(CONT, EH | PAD, 1, P(B_CT)), SERVING_MSG, TRL, FIN },
	  PROBE_PASS, GRPC_R_PASS, 0 },
	{ "a second header block that does not end the stream", { OK3, HDR, FIN }, PROBE_GRPC_BAD,
	  GRPC_R_BLOCK_AFTER, 0 },
	{ "a second header block before the message, not ending the stream", { S0, HDR, HDR, FIN },
	  PROBE_GRPC_BAD, GRPC_R_BLOCK_AFTER, 0 },
	{ "DATA padding as long as the frame", { S0, HDR, F(DATA, PAD, 1, P("\x03\0\0")), FIN },
	  PROBE_GRPC_BAD, GRPC_R_PADDING, 0 },
	{ "DATA padding one short of the frame", { S0, HDR, F(DATA, PAD, 1, P("\x02\0\0")), FIN },
	  PROBE_NONE, GRPC_R_NONE, 0 },
	{ "padded DATA of no byte", { S0, HDR, F(DATA, PAD, 1, P("")), FIN }, PROBE_GRPC_BAD,
	  GRPC_R_PADDING, 0 },
	{ "HEADERS padding longer than the fragment's room",
	  { S0, F(HEADERS, EH | PAD, 1, P("\x03\x88\0")), FIN }, PROBE_GRPC_BAD, GRPC_R_PADDING, 0 },
	{ "HEADERS padding of all the fragment's room",
	  { S0, F(HEADERS, EH | PAD, 1, P("\x02\0\0")), FIN }, PROBE_GRPC_BAD, GRPC_R_NO_HTTP_STATUS,
	  0 },
	{ "padded HEADERS of no byte", { S0, F(HEADERS, EH | PAD, 1, P("")), FIN }, PROBE_GRPC_BAD,
	  GRPC_R_PADDING, 0 },
	{ "HEADERS with a priority of 4 bytes", { S0, F(HEADERS, EH | PRIO, 1, P("\0\0\0\0")), FIN },
	  PROBE_GRPC_BAD, GRPC_R_PADDING, 0 },
	{ "padded HEADERS with a priority, padding past the priority",
	  { S0, F(HEADERS, EH | PAD | PRIO, 1, P("\x02" "\0\0\0\0\x10" "\0")), FIN }, PROBE_GRPC_BAD,
	  GRPC_R_PADDING, 0 },
	/* Bounds. */
	{ "a frame one byte over 16 KiB", { S0, { PING, 0, 0, P(""), 16385, 0 }, FIN }, PROBE_BOUNDS,
	  GRPC_R_FRAME_SIZE, 0 },
	{ "a frame of 16 KiB is read", { S0, { 0x20, 0, 0, P(""), 16384, 0 }, FIN }, PROBE_NONE,
	  GRPC_R_NONE, 0 },
	{ "a frame of 16 MiB - 1", { S0, { DATA, 0, 1, P(""), 0xffffff, 0 }, FIN }, PROBE_BOUNDS,
	  GRPC_R_FRAME_SIZE, 0 },
	{ "CONTINUATION without end",
	  { S0, F(HEADERS, 0, 1, P("\x88")), { CONT, 0, 1, P("\x88"), -1, 100 }, FIN }, PROBE_BOUNDS,
	  GRPC_R_FRAMES, 0 },
	{ "64 frames are read", { S0, { WINDOW, 0, 0, P("\0\0\0\1"), -1, 63 }, FIN }, PROBE_NONE,
	  GRPC_R_NONE, 0 },
	{ "a 65th frame", { S0, { WINDOW, 0, 0, P("\0\0\0\1"), -1, 64 }, FIN }, PROBE_BOUNDS,
	  GRPC_R_FRAMES, 0 },
	/* 511 fields of an empty name, whole: a block HPACK decodes. */
	{ "a header block over 1536 bytes",
	  { S0, F(HEADERS, 0, 1, P("\x88")), { CONT, 0, 1, P(""), 1533, 0 },
	    F(CONT, EH, 1, P("\x88\x88\x88")), FIN }, PROBE_BOUNDS, GRPC_R_BLOCK_SIZE, 0 },
	{ "a header block of 1536 bytes is decoded",
	  { S0, F(HEADERS, 0, 1, P("\x88")), { CONT, 0, 1, P(""), 1533, 0 },
	    F(CONT, EH, 1, P("\x88\x88")), FIN }, PROBE_GRPC_BAD, GRPC_R_FIELD_NAME, 0 },
	/* A Huffman value of 645 zero bytes: 1032 '0's. */
	{ "a name over the decoder's bound",
	  { OK3, { HEADERS, EH | ES, 1, P("\x00\xff\x26"), 3 + 165, 0 }, FIN },
	  PROBE_BOUNDS, GRPC_R_FIELD_SIZE, HPACK_E_NAME_TOO_LONG },
	{ "a field over the decoder's bound",
	  { OK3, { HEADERS, EH | ES, 1, P("\x00\x01" "a\xff\x86\x04"), 6 + 645, 0 }, FIN },
	  PROBE_BOUNDS, GRPC_R_FIELD_SIZE, HPACK_E_VALUE_TOO_LONG },
	{ "64 KiB in few frames", { S0, { 0x20, 0, 0, NULL, 0, 16384, 4 }, FIN }, PROBE_BOUNDS,
	  GRPC_R_BYTES, 0 },
	{ "PINGs owed past 256 bytes", { S0, { PING, 0, 0, P("12345678"), -1, 15 }, FIN },
	  PROBE_BOUNDS, GRPC_R_OWED, 0 },
	{ "14 PINGs and a SETTINGS owed fit", { S0, { PING, 0, 0, P("12345678"), -1, 14 }, FIN },
	  PROBE_NONE, GRPC_R_NONE, 0 },
	{ "a pass, then 80 KiB more in the same read: the pass stands",
	  { OK3, TRL, { 0x20, 0, 0, NULL, 0, 16384, 5 }, FIN }, PROBE_PASS, GRPC_R_PASS, 0 },
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
	bool decided;
	struct grpc_outcome o;
};

/* Feeds in pieces of step bytes (0: whole), split once at split when > 0. */
static struct got run(const char *in, size_t len, size_t split, size_t step, bool eof)
{
	static struct grpc_answer a;
	struct got g = { false, { PROBE_NONE, GRPC_R_NONE, 0 } };
	size_t off = 0;
	grpc_answer_init(&a);
	while (off < len && !g.decided) {
		size_t n = len - off;
		if (split && off < split && n > split - off)
			n = split - off;
		if (step && n > step)
			n = step;
		g.decided = grpc_answer_feed(&a, in + off, n) == GRPC_DECIDED;
		off += n;
	}
	if (!g.decided && eof) {
		grpc_answer_eof(&a);
		g.decided = true;
	}
	if (g.decided)
		g.o = a.outcome;
	return g;
}

static bool same(struct got a, struct got b)
{
	return a.decided == b.decided && a.o.result == b.o.result && a.o.reason == b.o.reason &&
	       a.o.code == b.o.code;
}

static void test_cases(void)
{
	for (size_t i = 0; i < NELEM(cases); i++) {
		const struct gcase *c = &cases[i];
		size_t len;
		char *in = build(c, &len);
		struct got whole = run(in, len, 0, 0, c->eof);
		is_str(probe_result_name(whole.o.result), probe_result_name(c->want), "%s", c->name);
		is_str(grpc_reason_name(whole.o.reason), grpc_reason_name(c->why), "%s: the rule",
		       c->name);
		is_int(whole.o.code, c->code, "%s: the code", c->name);
		ok(same(run(in, len, 0, 1, c->eof), whole), "%s: the same a byte at a time", c->name);
		bool all = true;
		for (size_t s = 1; s < len && len < 4096 && all; s++)
			all = same(run(in, len, s, 0, c->eof), whole);
		ok(all, "%s: the same split anywhere", c->name);
		free(in);
	}
}

/* A decided answer stays decided; what it owes is written in order. */
static void test_owed(void)
{
	static const char two[] = { 0, 0, 0, SETTINGS, 0, 0, 0, 0, 0, 0, 0, 8, PING, 0, 0, 0, 0, 0,
				    'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 0, 0, 0, SETTINGS, ACK,
				    0, 0, 0, 0, 0, 0, 8, PING, ACK, 0, 0, 0, 0, '1', '2', '3', '4',
				    '5', '6', '7', '8' };
	static struct grpc_answer a;
	size_t len;
	grpc_answer_init(&a);
	is_int(grpc_answer_feed(&a, two, sizeof(two)), GRPC_MORE,
	       "SETTINGS, PING, a SETTINGS ACK and a PING ACK: undecided");
	const uint8_t *o = grpc_answer_owed(&a, &len);
	static const uint8_t want[] = { 0, 0, 0, SETTINGS, ACK, 0, 0, 0, 0, 0, 0, 8, PING, ACK, 0,
					0, 0, 0, 'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h' };
	ok(len == sizeof(want) && memcmp(o, want, len) == 0,
	   "owed: a SETTINGS ACK, then a PING ACK with the PING's 8 bytes; no reply to an ACK");
	grpc_answer_sent(&a, 5);
	o = grpc_answer_owed(&a, &len);
	ok(len == sizeof(want) - 5 && memcmp(o, want + 5, len) == 0, "5 bytes sent: the rest is owed");
	grpc_answer_sent(&a, 1000);
	grpc_answer_owed(&a, &len);
	is_int(len, 0, "all sent: nothing owed");

	static const char gone[] = { 0, 0, 0, SETTINGS, 0, 0, 0, 0, 0, 0, 0, 8, GOAWAY, 0, 0, 0, 0,
				     0, 0, 0, 0, 0, 0, 0, 0, 11 };
	grpc_answer_init(&a);
	is_int(grpc_answer_feed(&a, gone, sizeof(gone)), GRPC_DECIDED, "a GOAWAY with an error");
	is_int(grpc_answer_feed(&a, two, sizeof(two)), GRPC_DECIDED, "fed again: still decided");
	grpc_answer_eof(&a);
	ok(a.outcome.result == PROBE_GOAWAY && a.outcome.code == 11,
	   "the end after a decision changes nothing");
}

/* What the operator sees beyond the public words. */
static void test_detail(void)
{
	static const struct {
		const char *name;
		struct fr f[6];
		bool eof;
		const char *want;
	} rows[] = {
		{ "grpc-message percent-decoded and escaped",
		  { OK3, TRL_B(B_STATUS("\x02", "14") B_MESSAGE("\x16", "no%20backend%0A\x01\\%zz%4")),
		    FIN },
		  false, "grpc-message \"no backend\\x0a\\x01\\x5c%zz%4\"" },
		{ "a grpc-message over 96 bytes is cut",
		  { OK3, TRL_B(B_STATUS("\x01", "5") B_MESSAGE("\x64", "0123456789012345678901234567"
					"890123456789012345678901234567890123456789012345678901234567"
					"890123456789")), FIN },
		  false, "grpc-message \"0123456789012345678901234567890123456789012345678901234"
			 "56789012345678901234567890123456789012345...\"" },
		{ "a first grpc-message cut is kept, not a second",
		  { OK3, TRL_B(B_MESSAGE("\x64", "0123456789012345678901234567890123456789"
					"012345678901234567890123456789012345678901234567890123456789")
			       B_MESSAGE("\x01", "b") B_STATUS("\x01", "2")), FIN },
		  false, "grpc-message \"01234567890123456789012345678901234567890123456789012345"
			 "6789012345678901234567890123456789012345...\"" },
		{ "a percent escape at the end", { OK3, TRL_B(B_STATUS("\x01", "2")
		  B_MESSAGE("\x04", "x%41")), FIN }, false, "grpc-message \"xA\"" },
		{ "percent escapes need two hex digits", { OK3, TRL_B(B_STATUS("\x01", "2")
		  B_MESSAGE("\x08", "x%z4%4zy")), FIN }, false, "grpc-message \"x%z4%4zy\"" },
		{ "bytes past ASCII escaped", { OK3, TRL_B(B_STATUS("\x01", "2")
		  B_MESSAGE("\x0c", "%C3%A4%7F%7E")), FIN }, false,
		  "grpc-message \"\\xc3\\xa4\\x7f~\"" },
		{ "a content-type is not percent-decoded",
		  { S0, HDR_B("\x08\x03" "502" "\x0f\x10\x08" "text/%41"), FIN }, false,
		  "content-type \"text/%41\"" },
		{ "the first grpc-message is kept",
		  { OK3, TRL_B(B_MESSAGE("\x01", "a") B_MESSAGE("\x01", "b") B_STATUS("\x01", "2")),
		    FIN },
		  false, "grpc-message \"a\"" },
		{ "no grpc-message: nothing more", { OK3, TRL_B(B_STATUS("\x01", "2")), FIN }, false, "" },
		{ "a 502's content-type", { S0, HDR_B("\x08\x03" "502" "\x0f\x10\x0a" "text/\"html"), FIN }, false,
		  "content-type \"text/\\x22html\"" },
		{ "no content-type", { S0, HDR_B("\x88"), FIN }, false, "no content-type" },
		{ "the first content-type is shown",
		  { S0, HDR_B("\x88\x0f\x10\x01" "a" "\x0f\x10\x01" "b"), FIN }, false,
		  "content-type \"a\"" },
		{ "HTTP/1's status", { { RAW, 0, 0, P("HTTP/1.1 426 x"), -1, 0 }, FIN }, false,
		  "status line HTTP/1.x 426" },
		{ "an HTTP/1 status that is no number", { { RAW, 0, 0, P("HTTP/1.1 4x6 x"), -1, 0 },
		  FIN }, false, "" },
		{ "an HPACK refusal", { OK3, TRL_B("\xbe"), FIN }, false,
		  "a header block that does not decode (HPACK): an index past the tables" },
		{ "a rule's words", { S0, SERVING_MSG, FIN }, false,
		  "DATA before the response headers ended" },
		{ "closed waiting for the trailers", { OK3, FIN }, true,
		  "closed waiting for the trailers" },
		{ "undecided: where it stopped", { S0, HDR, FIN }, false, "waiting for the message" },
		{ "a pass: nothing more", { OK3, TRL, FIN }, false, "" },
	};
	for (size_t i = 0; i < NELEM(rows); i++) {
		struct gcase c = { .name = rows[i].name };
		memcpy(c.f, rows[i].f, sizeof(rows[i].f));
		size_t len;
		char *in = build(&c, &len), buf[PROBE_DETAIL_MAX];
		static struct grpc_answer a;
		grpc_answer_init(&a);
		grpc_answer_feed(&a, in, len);
		if (rows[i].eof)
			grpc_answer_eof(&a);
		grpc_answer_detail(&a, buf, sizeof(buf));
		is_str(buf, rows[i].want, "detail: %s", rows[i].name);
		free(in);
	}
	for (int r = 0; r < GRPC_N_REASONS; r++)
		ok(strcmp(grpc_reason_name(r), "?") != 0 && strcmp(grpc_reason_text(r), "?") != 0,
		   "%s has a name and words", grpc_reason_name(r));
	is_str(grpc_reason_name(GRPC_N_REASONS), "?", "past the reasons: ?");
	is_str(grpc_reason_text(GRPC_N_REASONS), "?", "past the reasons' words: ?");
}

/* The decoder and the block it decodes are what issue 42 adds to a probe
 * in flight: 8 KiB at most. */
static void test_memory(void)
{
	size_t decoder = sizeof(struct hpack) + GRPC_MAX_BLOCK;
	printf("# a gRPC probe in flight: struct grpc_answer %zu bytes, of which the HPACK "
	       "decoder and its block %zu\n", sizeof(struct grpc_answer), decoder);
	ok(decoder <= 8192, "the decoder and its block: %zu bytes, 8 KiB at most", decoder);
}

/* The request, read back: frames, a header block of plain literals only,
 * and the HealthCheckRequest. */
static void test_request(void)
{
	char buf[GRPC_MAX_REQUEST];
	size_t len = 0;
	is_int(grpc_request("172.18.0.2:50051", "app.Store", false, 2000, buf, sizeof(buf), &len), 0,
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
		    ":authority: 172.18.0.2:50051\ngrpc-timeout: 1800m\n"
		    "content-type: application/grpc\nte: trailers\n"
		    "user-agent: dstack-healthd-probe/" HEALTHD_VERSION "\n",
	       "the headers a gRPC server expects, grpc-timeout the timeout less a tenth");
	ok(data && data_len >= 5 && data[0] == 0 &&
	   ((size_t)data[1] << 24 | (size_t)data[2] << 16 | (size_t)data[3] << 8 | data[4]) ==
		   data_len - 5, "DATA: one uncompressed message of its length");
	Grpc__Health__V1__HealthCheckRequest *m =
		data ? grpc__health__v1__health_check_request__unpack(NULL, data_len - 5, data + 5) : NULL;
	is_str(m ? m->service : NULL, "app.Store", "a HealthCheckRequest for the service");
	if (m)
		grpc__health__v1__health_check_request__free_unpacked(m, NULL);

	is_int(grpc_request("10.0.0.1:1", "", true, 100, buf, sizeof(buf), &len), 0, "no service");
	ok(memmem(buf, len, ":scheme\x05https", 13) != NULL, "grpcs says :scheme https");
	ok(memmem(buf, len, "grpc-timeout\x03" "80m", 16) != NULL,
	   "a timeout of 100 ms sends grpc-timeout 80m (20 ms at least are kept)");
	char longest[PROBE_PATH_MAX + 1];
	memset(longest, 'a', PROBE_PATH_MAX);
	longest[PROBE_PATH_MAX] = '\0';
	is_int(grpc_request("255.255.255.255:65535", longest, true, 60000, buf, sizeof(buf), &len), 0,
	       "the longest service, address and timeout fit");
	ok(memmem(buf, len, "grpc-timeout\x06" "54000m", 19) != NULL, "60 s: grpc-timeout 54000m");
	is_int(grpc_request("10.0.0.1:1", "", false, 1000000000, buf, sizeof(buf), &len), 0,
	       "a timeout past 8 digits of ms");
	ok(memmem(buf, len, "grpc-timeout\x09" "99999999m", 22) != NULL,
	   "grpc-timeout is at most 8 digits (PROTOCOL-HTTP2.md)");
	is_int(grpc_request("10.0.0.1:1", "", false, 2000, buf, 100, &len), -E2BIG,
	       "a buffer too small is -E2BIG");
	static const int64_t t[][2] = { { 100, 80 }, { 200, 180 }, { 210, 189 }, { 2000, 1800 },
					{ 60000, 54000 }, { 1, 1 }, { 21, 1 } };
	for (size_t i = 0; i < NELEM(t); i++)
		is_int(grpc_timeout_ms(t[i][0]), t[i][1], "grpc_timeout_ms(%lld)", (long long)t[i][0]);
}

int main(void)
{
	test_cases();
	test_owed();
	test_detail();
	test_memory();
	test_request();
	return done_testing();
}
