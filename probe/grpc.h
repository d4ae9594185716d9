/* SPDX-License-Identifier: Apache-2.0 */
/* gRPC health probes (issues 34, 42; docs/design/probes.md): one
 * unary call of grpc.health.v1.Health/Check over HTTP/2, with prior
 * knowledge on cleartext (h2c) or with ALPN h2 over TLS. Pure: the
 * request's bytes, and a reader of the answer that judges the call as a
 * gRPC client does, by its final status. The sockets are probe/prober.c's. */
#ifndef HEALTHD_GRPC_H
#define HEALTHD_GRPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "probe/hpack.h"
#include "probe/probe.h"

/* Bounds on an answer. A frame over SETTINGS_MAX_FRAME_SIZE's default (the
 * agent announces no other, so a server may send no larger, RFC 9113
 * §4.2); frames and bytes in all, so that an endless run of CONTINUATION,
 * PING or WINDOW_UPDATE frames ends long before the timeout; a message far
 * over a HealthCheckResponse's few bytes; a header block (its fragments
 * joined) far over what a gRPC server sends, a few dozen bytes. */
#define GRPC_MAX_FRAME 16384u
#define GRPC_MAX_FRAMES 64u
#define GRPC_MAX_BYTES (64u << 10)
#define GRPC_MAX_MESSAGE 256u
#define GRPC_MAX_BLOCK 1536u
/* Replies the server is owed and the socket has not taken yet: SETTINGS
 * ACKs (9 bytes) and PING ACKs (17). */
#define GRPC_MAX_OWED 256u
/* Bytes kept of the grpc-message and content-type fields, for the
 * operator's view only. */
#define GRPC_MAX_TEXT 96u
/* The request: the preface, SETTINGS, HEADERS and DATA, whatever the
 * service's name (at most PROBE_PATH_MAX bytes) and the address. */
#define GRPC_MAX_REQUEST (PROBE_PATH_MAX + 512)

/* The whole request into out (GRPC_MAX_REQUEST bytes): the client preface,
 * a SETTINGS frame (no server push), one HEADERS frame whose block is HPACK
 * literals without indexing and without Huffman (:method POST, :scheme,
 * :path /grpc.health.v1.Health/Check, :authority, grpc-timeout the
 * timeout less a margin, content-type application/grpc, te trailers,
 * user-agent), and one DATA frame that ends the stream: a
 * HealthCheckRequest for service ("" asks for the server as a whole)
 * behind gRPC's 5-byte prefix. 0, or -E2BIG when it does not fit. */
int grpc_request(const char *authority, const char *service, bool tls, int64_t timeout_ms,
		 char *out, size_t cap, size_t *len);
/* The grpc-timeout a probe of timeout_ms sends, in ms: the server's
 * deadline ends first, so that its DEADLINE_EXCEEDED reaches the agent. */
int64_t grpc_timeout_ms(int64_t timeout_ms);

/* Where the reader is. One at a time, in this order; a Trailers-Only
 * answer (a gRPC error, one header block that ends the stream) goes from
 * GRPC_AWAIT_HEADERS to GRPC_IN_TRAILERS_ONLY, and trailers may come
 * without a message (a call that failed). */
enum grpc_state {
	GRPC_AWAIT_SETTINGS,    /* the server's preface: a SETTINGS frame (RFC 9113 §3.4) */
	GRPC_HTTP1,             /* an HTTP/1 status line came instead: its code */
	GRPC_AWAIT_HEADERS,     /* the response's header block on stream 1 */
	GRPC_IN_HEADERS,        /* ... being read (HEADERS, then CONTINUATION) */
	GRPC_IN_TRAILERS_ONLY,  /* the one block of a Trailers-Only answer, being read */
	GRPC_AWAIT_MESSAGE,     /* 200 and gRPC: the message's bytes, in DATA */
	GRPC_HAVE_MESSAGE,      /* one whole message said SERVING: the trailers decide */
	GRPC_IN_TRAILERS,       /* the trailers' block, which ends the stream, being read */
	GRPC_DONE,              /* decided: a->outcome */
};

/* Which rule decided: every decision of the reader has its own, for the
 * operator's view (grpc_answer_detail) and the tests. The public words are
 * the result's (probe_result_text). */
enum grpc_reason {
	GRPC_R_NONE = 0,
	GRPC_R_PASS,               /* SERVING, then grpc-status 0 */
	GRPC_R_SERVING_STATUS,     /* the message's serving status is not SERVING */
	GRPC_R_CALL_STATUS,        /* the trailers' grpc-status is not 0 */
	GRPC_R_NO_MESSAGE,         /* grpc-status 0, and no message */
	GRPC_R_HTTP_STATUS,        /* :status other than 200 */
	GRPC_R_HTTP1,              /* an HTTP/1 status line, not HTTP/2 */
	GRPC_R_RESET,              /* RST_STREAM on stream 1 */
	GRPC_R_GOAWAY_ERROR,       /* GOAWAY with an error code before the end */
	GRPC_R_GOAWAY_EXCLUDES,    /* GOAWAY whose last stream is 0: the call was not taken */
	GRPC_R_CLOSED,             /* the connection closed before the call ended */
	/* Not HTTP/2 or gRPC as written (PROBE_GRPC_BAD) */
	GRPC_R_FIRST_FRAME,        /* the first frame is not SETTINGS */
	GRPC_R_SETTINGS,           /* SETTINGS not on stream 0, not 6-byte entries, an ACK with a payload */
	GRPC_R_PING,               /* PING not on stream 0, or not 8 bytes */
	GRPC_R_RST_STREAM,         /* RST_STREAM on stream 0, or not 4 bytes */
	GRPC_R_GOAWAY,             /* GOAWAY not on stream 0, or under 8 bytes */
	GRPC_R_PUSH,               /* PUSH_PROMISE, which our SETTINGS refused */
	GRPC_R_STREAM,             /* HEADERS or DATA on a stream other than 1 */
	GRPC_R_DATA_EARLY,         /* DATA before the response headers ended */
	GRPC_R_PADDING,            /* padding (and priority) longer than the frame */
	GRPC_R_INTERRUPTED,        /* a header block interrupted by another frame */
	GRPC_R_CONTINUATION,       /* CONTINUATION with no header block to go on */
	GRPC_R_BLOCK_AFTER,        /* a header block after the headers that does not end the stream */
	GRPC_R_DATA_END,           /* DATA ended the stream: no trailers, no status */
	GRPC_R_COMPRESSED,         /* a compressed message (none was offered) */
	GRPC_R_SECOND_MESSAGE,     /* a second message */
	GRPC_R_UNDECODABLE,        /* a message that is no HealthCheckResponse */
	GRPC_R_MESSAGE_CUT,        /* trailers inside a message */
	GRPC_R_HPACK,              /* a header block HPACK refuses (code: the hpack_error) */
	GRPC_R_FIELD_NAME,         /* a field name HTTP/2 refuses (RFC 9113 §8.2.1) */
	GRPC_R_FIELD_VALUE,        /* a field value HTTP/2 refuses (RFC 9113 §8.2.1) */
	GRPC_R_PSEUDO,             /* a pseudo-header other than one :status first in the headers */
	GRPC_R_NO_HTTP_STATUS,     /* no :status of three digits */
	GRPC_R_CONTENT_TYPE,       /* no single content-type application/grpc[+...] */
	GRPC_R_GRPC_STATUS,        /* trailers without exactly one grpc-status that is a number */
	/* Over the agent's bounds (PROBE_BOUNDS) */
	GRPC_R_FRAME_SIZE,         /* a frame over GRPC_MAX_FRAME */
	GRPC_R_FRAMES,             /* over GRPC_MAX_FRAMES frames */
	GRPC_R_BYTES,              /* over GRPC_MAX_BYTES in all */
	GRPC_R_MESSAGE_SIZE,       /* a message over GRPC_MAX_MESSAGE */
	GRPC_R_BLOCK_SIZE,         /* a header block over GRPC_MAX_BLOCK */
	GRPC_R_FIELD_SIZE,         /* a field over HPACK's name or value bound */
	GRPC_R_OWED,               /* replies owed over GRPC_MAX_OWED, unsent */
	GRPC_N_REASONS
};
/* "DATA before the response headers ended": the agent's own words. */
const char *grpc_reason_text(enum grpc_reason r);
/* "GRPC_R_DATA_EARLY": the name, for tests and fuzz crashes. */
const char *grpc_reason_name(enum grpc_reason r);
/* How the call ended. code: the serving status (PROBE_GRPC_STATUS), the
 * gRPC status (PROBE_GRPC_CALL_STATUS), the HTTP status (PROBE_STATUS,
 * PROBE_HTTP1; 0 when not 3 digits), the HTTP/2 error code
 * (PROBE_STREAM_RESET, PROBE_GOAWAY), the hpack_error (GRPC_R_HPACK,
 * GRPC_R_FIELD_SIZE), the grpc_state it was in (GRPC_R_CLOSED); else 0. */
struct grpc_outcome {
	enum probe_result result;
	enum grpc_reason reason;
	int code;
};

/* What the fields of one header block said, as they came. */
struct grpc_fields {
	enum grpc_reason bad;  /* the first field that breaks a rule; 0: none */
	uint8_t statuses;      /* :status fields */
	int http_status;       /* the last one's value; -1 when not 3 digits */
	bool regular;          /* a field that is not a pseudo-header came */
	uint8_t content_types; /* content-type fields */
	bool grpc_type;        /* the last one is application/grpc[+...] */
	uint8_t grpc_statuses; /* grpc-status fields */
	int grpc_status;       /* the last one's value; -1 when not a number */
	/* For the operator: the first grpc-message and content-type, cut. */
	char message[GRPC_MAX_TEXT], content_type[GRPC_MAX_TEXT];
	uint8_t message_len, content_type_len;
	bool message_cut, content_type_cut;
};

/* The answer of one call, read frame by frame: about 9 KiB, of which the
 * HPACK decoder and the block it decodes are 7.5 (hpack, block). Fields
 * are private to grpc.c. */
struct grpc_answer {
	enum grpc_state state;
	struct grpc_outcome outcome; /* once state is GRPC_DONE */
	/* The frame being read. */
	uint8_t head[9];
	size_t head_len;    /* bytes of its header read */
	uint32_t len, off;  /* its payload's length; bytes of it read */
	uint8_t type, flags;
	uint32_t stream;
	uint32_t lead;      /* HEADERS: its pad length and priority bytes */
	uint32_t pad;       /* DATA, HEADERS: padding bytes at its end */
	uint8_t fixed[8];   /* the payload of PING, RST_STREAM, GOAWAY's first 8; HTTP/1's code */
	/* The header block being read, and what its fields said. */
	struct hpack hpack;
	uint8_t block[GRPC_MAX_BLOCK];
	size_t block_len;
	struct grpc_fields fields;
	/* The message. */
	uint8_t msg[5 + GRPC_MAX_MESSAGE];
	size_t msg_len;
	size_t frames, bytes;
	/* Replies the server is owed, in order: grpc_answer_owed. */
	uint8_t owed[GRPC_MAX_OWED];
	size_t owed_len;
};

void grpc_answer_init(struct grpc_answer *a);
/* Results of grpc_answer_feed. */
enum { GRPC_MORE = 0, GRPC_DECIDED = 1 };
/* Bytes read: GRPC_MORE (wants more) or GRPC_DECIDED (a->outcome). Never
 * fails otherwise: a malformed answer is an outcome. Fed after it decided,
 * it decides the same. After each call, grpc_answer_owed has the replies
 * to write. */
int grpc_answer_feed(struct grpc_answer *a, const char *buf, size_t len);
/* The peer closed the connection: decides, if it had not. */
void grpc_answer_eof(struct grpc_answer *a);
/* The replies owed (SETTINGS and PING ACKs, in order): *len bytes. */
const uint8_t *grpc_answer_owed(const struct grpc_answer *a, size_t *len);
/* n of them were written. */
void grpc_answer_sent(struct grpc_answer *a, size_t n);
/* For the operator: what decided, beyond the public words, with the
 * server's grpc-message or content-type percent-decoded, cut and escaped
 * ("grpc-message \"no backend\"", "DATA before the response headers
 * ended"); where it stopped when undecided (a timeout: "waiting for the
 * trailers"); "" when there is nothing to add. */
void grpc_answer_detail(const struct grpc_answer *a, char *buf, size_t n);

#endif
