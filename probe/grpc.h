/* SPDX-License-Identifier: Apache-2.0 */
/* gRPC health probes (issue 34; docs/design/probes.md): one unary call
 * of grpc.health.v1.Health/Check over HTTP/2, with prior knowledge on
 * cleartext (h2c) or with ALPN h2 over TLS. Pure: the request's bytes, and
 * a reader of the answer's frames. The sockets are probe/prober.c's. */
#ifndef HEALTHD_GRPC_H
#define HEALTHD_GRPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "probe/probe.h"

/* Bounds on an answer. A frame over SETTINGS_MAX_FRAME_SIZE's default (the
 * agent announces no other, so a server may send no larger, RFC 9113
 * §4.2); frames and bytes in all, so that an endless run of CONTINUATION,
 * PING or WINDOW_UPDATE frames ends long before the timeout; a message far
 * over a HealthCheckResponse's few bytes. */
#define GRPC_MAX_FRAME 16384u
#define GRPC_MAX_FRAMES 64u
#define GRPC_MAX_BYTES (64u << 10)
#define GRPC_MAX_MESSAGE 256u
/* The request: the preface, SETTINGS, HEADERS and DATA, whatever the
 * service's name (at most PROBE_PATH_MAX bytes) and the address. */
#define GRPC_MAX_REQUEST (PROBE_PATH_MAX + 512)

/* What a server's SETTINGS asks for: an empty SETTINGS frame with ACK. */
#define GRPC_SETTINGS_ACK_LEN 9
extern const char grpc_settings_ack[GRPC_SETTINGS_ACK_LEN];

/* The whole request into out (GRPC_MAX_REQUEST bytes): the client preface,
 * a SETTINGS frame (no server push), one HEADERS frame whose block is HPACK
 * literals without indexing and without Huffman (:method POST, :scheme,
 * :path /grpc.health.v1.Health/Check, :authority, content-type
 * application/grpc, te trailers, user-agent), and one DATA frame that ends
 * the stream: a HealthCheckRequest for service ("" asks for the server as
 * a whole) behind gRPC's 5-byte prefix. -E2BIG when it does not fit. */
int grpc_request(const char *authority, const char *service, bool tls, char *out, size_t cap,
		 size_t *len);

/* The answer of one call, read frame by frame. Header blocks (HEADERS and
 * their CONTINUATION) are skipped by their length and never decoded: no
 * HPACK here. The call passes only when its one message arrived whole in
 * DATA on stream 1, decodes as a HealthCheckResponse whose status is
 * SERVING, and a header block (the trailers) then ends the stream.
 * Fields are private to grpc.c. */
struct grpc_answer {
	uint8_t head[9];
	size_t head_len;    /* bytes of the current frame's header read */
	uint32_t len, off;  /* the current frame's payload length; bytes of it read */
	uint8_t type, flags;
	uint32_t stream;
	uint32_t pad;       /* DATA: padding bytes at the payload's end */
	uint8_t fixed[8];   /* the first payload bytes of RST_STREAM and GOAWAY */
	bool settings;      /* the server's SETTINGS came (it comes first) */
	bool headers;       /* the answer's header block began */
	bool continuation;  /* a header block goes on in CONTINUATION frames */
	bool block_ends;    /* ... and its HEADERS frame ended the stream */
	uint8_t msg[5 + GRPC_MAX_MESSAGE];
	size_t msg_len;
	bool message;       /* msg holds one whole message, SERVING */
	size_t frames, bytes;
	unsigned acks;      /* SETTINGS ACKs the server is owed */
};

void grpc_answer_init(struct grpc_answer *a);
/* Bytes read: 0 wants more, 1 decided (*res; *detail the serving status
 * for PROBE_GRPC_STATUS, the HTTP/2 error code for PROBE_STREAM_RESET and
 * PROBE_GOAWAY, else 0). Never fails otherwise: a malformed answer is a
 * result. After each call, a->acks says how many SETTINGS ACKs
 * (grpc_settings_ack) the server is owed in all. */
int grpc_answer_feed(struct grpc_answer *a, const char *buf, size_t len, enum probe_result *res,
		     int *detail);
/* The peer closed the connection: always decides. */
void grpc_answer_eof(struct grpc_answer *a, enum probe_result *res, int *detail);

#endif
