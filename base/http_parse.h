/* SPDX-License-Identifier: Apache-2.0 */
/* The pure part of HTTP/1.1 for the Docker client and the agent's HTTP
 * probes: an incremental response parser that bounds headers and body, for
 * a response read whole or a body handed out as it arrives (Docker's
 * /events, a probe's answer). No I/O: runtime/http.c and probe/prober.c
 * feed it what they read. Here, below both, so that neither reaches across
 * to the other. */
#ifndef HEALTHD_HTTP_PARSE_H
#define HEALTHD_HTTP_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

/* Bounds on the header section (status line, headers, trailers). */
#define HTTP_MAX_HEADER_BYTES (16u << 10)
#define HTTP_MAX_HEADERS 64
/* A chunk-size line, extensions included. */
#define HTTP_MAX_CHUNK_LINE 1024

struct http_header {
	char *name;
	char *value;
};

struct http_response {
	int status;
	struct http_header *headers; /* trailers are not kept */
	size_t nheaders;
	char *body; /* NUL-terminated for convenience; body_len excludes it */
	size_t body_len;
};

enum http_framing { HTTP_FRAME_NONE, HTTP_FRAME_LENGTH, HTTP_FRAME_CHUNKED, HTTP_FRAME_EOF };

/* Incremental parser state; fields are private to http_parse.c and the
 * stream reader of http.c. */
/* Interim (1xx) responses skipped before the real one; the next is refused
 * (Go's net/http: max1xxResponses, "too many 1xx informational responses"). */
#define HTTP_MAX_INTERIM 5

struct http_parser {
	int state;
	enum http_framing framing;
	size_t max_body;
	size_t header_bytes; /* of the current header section or chunk line */
	size_t ntrailers;
	int interim; /* 1xx responses skipped so far */
	char *line;          /* the line being read */
	size_t line_len, line_cap;
	uint64_t remaining; /* bytes left of the body or the current chunk */
	size_t body_cap;
	struct http_response resp;
	/* Streaming (http_parser_init_stream): body bytes are handed out, not
	 * collected; feeding pauses after the head and after each piece. */
	bool stream, head_done, pause;
	const char *piece;
	size_t piece_len;
};

void http_parser_init(struct http_parser *p, size_t max_body);
/* Feeds len bytes. Returns 1 when the response is complete (*used says how
 * many bytes it took; what follows is ignored), 0 when more is needed (all
 * bytes used), or a negative errno with err naming the rule that failed
 * (-EPROTO for a malformed response, -E2BIG for a limit, -ENOMEM). */
int http_parser_feed(struct http_parser *p, const char *buf, size_t len, size_t *used,
		     struct errbuf *err);
/* The peer closed the connection: 1 when that ends the response (a body
 * delimited by the end of the connection), else -EPROTO. */
int http_parser_eof(struct http_parser *p, struct errbuf *err);
/* Moves the parsed response out (after feed or eof returned 1). */
void http_parser_take(struct http_parser *p, struct http_response *out);
void http_parser_free(struct http_parser *p);

/* A parser for a long-lived response whose body is consumed as it arrives
 * (Docker's /events): nothing of the body is kept, so no body limit applies;
 * the caller bounds what it keeps of the pieces. */
void http_parser_init_stream(struct http_parser *p);
/* Like http_parser_feed, but stops early: after the header section of the
 * final response ended (http_parser_head_done turns true), and after each run
 * of body bytes, which *piece and *piece_len point to (inside buf; none when
 * *piece_len is 0). Returns 1 when the response is complete, else 0. */
int http_parser_feed_piece(struct http_parser *p, const char *buf, size_t len, size_t *used,
			   const char **piece, size_t *piece_len, struct errbuf *err);
bool http_parser_head_done(const struct http_parser *p);

/* First value of the header name (case-insensitive), or NULL. */
const char *http_header(const struct http_response *r, const char *name);
void http_response_free(struct http_response *r);

#endif
