/* SPDX-License-Identifier: Apache-2.0 */
/* The HTTP/1.1 response parser (Docker's answers, probes'). Framing follows RFC 9112
 * §6.3, strictly: this client talks to one daemon, so anything ambiguous
 * (conflicting lengths, a length next to chunked, bare LF) is refused rather
 * than guessed at. */
#include "base/http_parse.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/grow.h"

enum {
	ST_STATUS,
	ST_HEADERS,
	ST_BODY,
	ST_BODY_EOF,
	ST_CHUNK_SIZE,
	ST_CHUNK_DATA,
	ST_CHUNK_CR,
	ST_CHUNK_LF,
	ST_TRAILERS,
	ST_DONE,
	ST_ERROR,
};

void http_parser_init(struct http_parser *p, size_t max_body)
{
	memset(p, 0, sizeof(*p));
	p->state = ST_STATUS;
	p->max_body = max_body;
}

void http_parser_init_stream(struct http_parser *p)
{
	http_parser_init(p, SIZE_MAX);
	p->stream = true;
}

bool http_parser_head_done(const struct http_parser *p)
{
	return p->head_done;
}

static void free_headers(struct http_response *r)
{
	for (size_t i = 0; i < r->nheaders; i++) {
		free(r->headers[i].name);
		free(r->headers[i].value);
	}
	free(r->headers);
	r->headers = NULL;
	r->nheaders = 0;
}

void http_response_free(struct http_response *r)
{
	free_headers(r);
	free(r->body);
	memset(r, 0, sizeof(*r));
}

void http_parser_free(struct http_parser *p)
{
	http_response_free(&p->resp);
	free(p->line);
	p->line = NULL;
	p->line_len = p->line_cap = 0;
}

void http_parser_take(struct http_parser *p, struct http_response *out)
{
	*out = p->resp;
	memset(&p->resp, 0, sizeof(p->resp));
}

const char *http_header(const struct http_response *r, const char *name)
{
	for (size_t i = 0; i < r->nheaders; i++)
		if (strcasecmp(r->headers[i].name, name) == 0)
			return r->headers[i].value;
	return NULL;
}

static int fail(struct http_parser *p, struct errbuf *err, int e, const char *what)
{
	p->state = ST_ERROR;
	return errbuf_set(err, e, "%s", what);
}

static int body_too_big(struct http_parser *p, struct errbuf *err)
{
	p->state = ST_ERROR;
	return errbuf_set(err, E2BIG, "response body exceeds %zu bytes", p->max_body);
}

/* Collects one CRLF-terminated line into p->line (without the CRLF, NUL
 * terminated). Returns 1 with a whole line, 0 when all of buf was used. */
static int read_line(struct http_parser *p, const char *buf, size_t len, size_t *i,
		     bool chunk, struct errbuf *err)
{
	size_t limit = chunk ? HTTP_MAX_CHUNK_LINE : HTTP_MAX_HEADER_BYTES;
	while (*i < len) {
		char c = buf[(*i)++];
		if (++p->header_bytes > limit)
			return fail(p, err, E2BIG, chunk ? "chunk size line too long" :
				    "response headers too large");
		if (c == '\n') {
			if (p->line_len == 0 || p->line[p->line_len - 1] != '\r')
				return fail(p, err, EPROTO, "line not ended by CRLF");
			p->line[--p->line_len] = '\0';
			if (memchr(p->line, '\r', p->line_len) || memchr(p->line, '\0', p->line_len))
				return fail(p, err, EPROTO, "stray CR or NUL in a line");
			return 1;
		}
		if (p->line_len + 2 > p->line_cap) {
			size_t cap = p->line_cap ? p->line_cap * 2 : 256;
			char *l = realloc(p->line, cap);
			if (!l)
				return fail(p, err, ENOMEM, "out of memory");
			p->line = l;
			p->line_cap = cap;
		}
		p->line[p->line_len++] = c;
	}
	return 0;
}

static int parse_status(struct http_parser *p, struct errbuf *err)
{
	const char *l = p->line;
	if (p->line_len < 12 || memcmp(l, "HTTP/1.", 7) != 0 || l[7] < '0' || l[7] > '9' ||
	    l[8] != ' ' || (l[12] != ' ' && l[12] != '\0'))
		return fail(p, err, EPROTO, "malformed status line");
	int st = 0;
	for (int k = 9; k < 12; k++) {
		if (l[k] < '0' || l[k] > '9')
			return fail(p, err, EPROTO, "malformed status line");
		st = st * 10 + (l[k] - '0');
	}
	if (st < 100 || st > 599)
		return fail(p, err, EPROTO, "status code out of range");
	p->resp.status = st;
	return 0;
}

static bool is_tchar(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

static int parse_header(struct http_parser *p, bool keep, struct errbuf *err)
{
	char *l = p->line, *colon = strchr(l, ':');
	if (l[0] == ' ' || l[0] == '\t')
		return fail(p, err, EPROTO, "obsolete header line folding");
	if (!colon || colon == l)
		return fail(p, err, EPROTO, "malformed header line");
	for (char *c = l; c < colon; c++)
		if (!is_tchar(*c))
			return fail(p, err, EPROTO, "malformed header name");
	if (!keep) /* a trailer: counted, not kept */
		return ++p->ntrailers > HTTP_MAX_HEADERS ?
			fail(p, err, E2BIG, "too many trailer fields") : 0;
	if (p->resp.nheaders >= HTTP_MAX_HEADERS)
		return fail(p, err, E2BIG, "too many response headers");
	char *v = colon + 1, *end = l + p->line_len;
	while (*v == ' ' || *v == '\t')
		v++;
	while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
		end--;
	*colon = '\0';
	*end = '\0';
	struct http_header *h = realloc(p->resp.headers,
					(p->resp.nheaders + 1) * sizeof(*h));
	if (!h)
		return fail(p, err, ENOMEM, "out of memory");
	p->resp.headers = h;
	h += p->resp.nheaders;
	h->name = strdup(l);
	h->value = strdup(v);
	if (!h->name || !h->value) {
		free(h->name);
		free(h->value);
		return fail(p, err, ENOMEM, "out of memory");
	}
	p->resp.nheaders++;
	return 0;
}

/* One Content-Length header value: a comma-separated list of equal decimal
 * numbers (RFC 9110 §8.6). Combined with earlier ones into *len. */
static int content_length(struct http_parser *p, const char *v, bool *seen, uint64_t *len,
			  struct errbuf *err)
{
	for (;;) {
		while (*v == ' ' || *v == '\t')
			v++;
		if (*v < '0' || *v > '9')
			return fail(p, err, EPROTO, "malformed Content-Length");
		uint64_t n = 0;
		while (*v >= '0' && *v <= '9') {
			if (n > (UINT64_MAX - 9) / 10)
				return body_too_big(p, err);
			n = n * 10 + (uint64_t)(*v++ - '0');
		}
		while (*v == ' ' || *v == '\t')
			v++;
		if (*seen && n != *len)
			return fail(p, err, EPROTO, "conflicting Content-Length values");
		*seen = true;
		*len = n;
		if (*v == '\0')
			return 0;
		if (*v++ != ',')
			return fail(p, err, EPROTO, "malformed Content-Length");
	}
}

static int end_of_headers(struct http_parser *p, struct errbuf *err)
{
	const struct http_response *r = &p->resp;
	int st = r->status;
	if (st >= 100 && st < 200) {
		if (st == 101)
			return fail(p, err, EPROTO, "unexpected 101 Switching Protocols");
		/* Interim response: the real one follows, after at most
		 * HTTP_MAX_INTERIM of them, as Go's client (kubelet's) allows:
		 * an endless run must not hold a reader until its timeout. */
		if (++p->interim > HTTP_MAX_INTERIM)
			return fail(p, err, E2BIG, "more than 5 interim (1xx) responses");
		free_headers(&p->resp);
		p->header_bytes = 0;
		p->state = ST_STATUS;
		return 0;
	}
	bool te = false, cl = false;
	uint64_t len = 0;
	for (size_t i = 0; i < r->nheaders; i++) {
		const char *n = r->headers[i].name, *v = r->headers[i].value;
		if (strcasecmp(n, "Transfer-Encoding") == 0) {
			if (te || strcasecmp(v, "chunked") != 0)
				return fail(p, err, EPROTO, "unsupported Transfer-Encoding");
			te = true;
		} else if (strcasecmp(n, "Content-Length") == 0) {
			int rc = content_length(p, v, &cl, &len, err);
			if (rc < 0)
				return rc;
		}
	}
	if (te && cl)
		return fail(p, err, EPROTO, "both Transfer-Encoding and Content-Length");
	p->head_done = true;
	p->pause = true;
	if (st == 204 || st == 304) {
		p->framing = HTTP_FRAME_NONE;
		p->state = ST_DONE;
	} else if (te) {
		p->framing = HTTP_FRAME_CHUNKED;
		p->state = ST_CHUNK_SIZE;
	} else if (cl) {
		if (len > p->max_body)
			return body_too_big(p, err);
		p->framing = HTTP_FRAME_LENGTH;
		p->remaining = len;
		p->state = len ? ST_BODY : ST_DONE;
	} else {
		p->framing = HTTP_FRAME_EOF;
		p->state = ST_BODY_EOF;
	}
	return 0;
}

static int body_append(struct http_parser *p, const char *s, size_t n, struct errbuf *err)
{
	struct http_response *r = &p->resp;
	if (p->stream) {
		p->piece = s;
		p->piece_len = n;
		p->pause = true;
		return 0;
	}
	if (n > p->max_body - r->body_len)
		return body_too_big(p, err);
	char *b = grow(r->body, &p->body_cap, r->body_len + n + 1, 1, 4096, p->max_body + 1);
	if (!b)
		return fail(p, err, ENOMEM, "out of memory");
	r->body = b;
	memcpy(r->body + r->body_len, s, n);
	r->body_len += n;
	r->body[r->body_len] = '\0';
	return 0;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* chunk-size [ BWS ";" chunk-ext ] (RFC 9112 §7.1); extensions ignored.
 * The one check of a chunk's size, in both modes: at most 16 hex digits (as
 * Go's net/http, so that n * 16 cannot wrap: a stream has no body cap to
 * catch it), then the room left under the cap. */
static int parse_chunk_size(struct http_parser *p, struct errbuf *err)
{
	const char *l = p->line;
	uint64_t n = 0;
	size_t k = 0;
	for (; hexval(l[k]) >= 0; k++) {
		if (k == 16)
			return fail(p, err, E2BIG, "chunk size has more than 16 hex digits");
		n = n * 16 + (uint64_t)hexval(l[k]);
	}
	if (k == 0)
		return fail(p, err, EPROTO, "malformed chunk size");
	if (n > p->max_body - p->resp.body_len)
		return body_too_big(p, err);
	while (l[k] == ' ' || l[k] == '\t')
		k++;
	if (l[k] != '\0' && l[k] != ';')
		return fail(p, err, EPROTO, "malformed chunk size");
	p->remaining = n;
	p->state = n ? ST_CHUNK_DATA : ST_TRAILERS;
	p->header_bytes = 0;
	return 0;
}

/* Handles one complete line in the states that read lines. */
static int on_line(struct http_parser *p, struct errbuf *err)
{
	switch (p->state) {
	case ST_STATUS:
		p->state = ST_HEADERS;
		return parse_status(p, err);
	case ST_HEADERS:
		if (p->line_len == 0)
			return end_of_headers(p, err);
		return parse_header(p, true, err);
	case ST_CHUNK_SIZE:
		return parse_chunk_size(p, err);
	default: /* ST_TRAILERS */
		if (p->line_len == 0) {
			p->state = ST_DONE;
			return 0;
		}
		return parse_header(p, false, err);
	}
}

static int feed_bytes(struct http_parser *p, const char *buf, size_t len, size_t *i,
		      struct errbuf *err)
{
	size_t n;
	int r;
	switch (p->state) {
	case ST_BODY:
	case ST_CHUNK_DATA:
		n = len - *i;
		if (n > p->remaining)
			n = (size_t)p->remaining;
		r = body_append(p, buf + *i, n, err);
		if (r < 0)
			return r;
		*i += n;
		p->remaining -= n;
		if (p->remaining == 0)
			p->state = p->state == ST_BODY ? ST_DONE : ST_CHUNK_CR;
		return 0;
	case ST_BODY_EOF:
		n = len - *i;
		*i = len;
		return body_append(p, buf + *i - n, n, err);
	case ST_CHUNK_CR:
	case ST_CHUNK_LF: {
		char want = p->state == ST_CHUNK_CR ? '\r' : '\n';
		if (buf[(*i)++] != want)
			return fail(p, err, EPROTO, "chunk data not followed by CRLF");
		p->state = p->state == ST_CHUNK_CR ? ST_CHUNK_LF : ST_CHUNK_SIZE;
		return 0;
	}
	default: {
		bool chunk = p->state == ST_CHUNK_SIZE;
		r = read_line(p, buf, len, i, chunk, err);
		if (r <= 0)
			return r;
		r = on_line(p, err);
		p->line_len = 0;
		if (chunk && p->state != ST_ERROR)
			p->header_bytes = 0;
		return r;
	}
	}
}

int http_parser_feed(struct http_parser *p, const char *buf, size_t len, size_t *used,
		     struct errbuf *err)
{
	size_t i = 0;
	*used = 0;
	if (p->state == ST_ERROR)
		return errbuf_set(err, EPROTO, "parser already failed");
	while (i < len && p->state != ST_DONE) {
		int r = feed_bytes(p, buf, len, &i, err);
		if (r < 0)
			return r;
	}
	*used = i;
	return p->state == ST_DONE;
}

int http_parser_feed_piece(struct http_parser *p, const char *buf, size_t len, size_t *used,
			   const char **piece, size_t *piece_len, struct errbuf *err)
{
	size_t i = 0;
	*used = 0;
	*piece = NULL;
	*piece_len = 0;
	p->piece = NULL;
	p->piece_len = 0;
	p->pause = false;
	if (p->state == ST_ERROR)
		return errbuf_set(err, EPROTO, "parser already failed");
	while (i < len && p->state != ST_DONE && !p->pause) {
		int r = feed_bytes(p, buf, len, &i, err);
		if (r < 0)
			return r;
	}
	*used = i;
	*piece = p->piece;
	*piece_len = p->piece_len;
	return p->state == ST_DONE;
}

int http_parser_eof(struct http_parser *p, struct errbuf *err)
{
	switch (p->state) {
	case ST_DONE:
		return 1;
	case ST_BODY_EOF:
		p->state = ST_DONE;
		return 1;
	case ST_STATUS:
		if (p->header_bytes == 0)
			return fail(p, err, EPROTO, "connection closed without a response");
		/* fall through */
	case ST_HEADERS:
		return fail(p, err, EPROTO, "connection closed in the middle of the headers");
	case ST_BODY:
		p->state = ST_ERROR;
		return errbuf_set(err, EPROTO, "connection closed after %zu of %zu body bytes",
				  p->resp.body_len, p->resp.body_len + (size_t)p->remaining);
	case ST_ERROR:
		return errbuf_set(err, EPROTO, "parser already failed");
	default:
		return fail(p, err, EPROTO, "connection closed in the middle of a chunked body");
	}
}
