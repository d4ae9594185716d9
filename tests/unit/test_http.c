/* SPDX-License-Identifier: Apache-2.0 */
/* Table tests for the HTTP/1.1 response parser in runtime/http.c: every case
 * is run whole, split in two at every byte boundary, and a byte at a time,
 * and must come out the same each way. Also the endpoint parser. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "runtime/http.h"
#include "tests/lib/tap.h"

struct outcome {
	int rc; /* 1 complete, or a negative errno */
	int status;
	char *body;
	size_t body_len;
	char api[32];
	char err[ERRBUF_SIZE];
};

/* Feeds in pieces of the given size (0: whole), split once at `split` when
 * split > 0, then signals EOF if the parser still wants more. */
static void run(const char *in, size_t len, size_t cap, size_t split, size_t step,
		struct outcome *o)
{
	struct http_parser p;
	struct errbuf e = { "" };
	size_t off = 0;
	int r = 0;
	memset(o, 0, sizeof(*o));
	http_parser_init(&p, cap);
	while (off < len && r == 0) {
		size_t n = len - off, used = 0;
		if (step && n > step)
			n = step;
		if (split && off < split && off + n > split)
			n = split - off;
		r = http_parser_feed(&p, in + off, n, &used, &e);
		if (r == 0 && used != n)
			r = -999; /* a parser that wants more must take everything */
		off += n;
	}
	if (r == 0)
		r = http_parser_eof(&p, &e);
	o->rc = r;
	if (r == 1) {
		struct http_response resp;
		http_parser_take(&p, &resp);
		o->status = resp.status;
		o->body_len = resp.body_len;
		o->body = resp.body ? malloc(resp.body_len + 1) : NULL;
		if (o->body)
			memcpy(o->body, resp.body, resp.body_len + 1);
		const char *api = http_header(&resp, "api-version");
		snprintf(o->api, sizeof(o->api), "%s", api ? api : "");
		http_response_free(&resp);
	} else {
		snprintf(o->err, sizeof(o->err), "%s", e.msg);
	}
	http_parser_free(&p);
}

static bool same(const struct outcome *a, const struct outcome *b)
{
	if (a->rc != b->rc || a->status != b->status || a->body_len != b->body_len ||
	    strcmp(a->api, b->api) != 0 || strcmp(a->err, b->err) != 0)
		return false;
	return a->body_len == 0 || memcmp(a->body, b->body, a->body_len) == 0;
}

struct pcase {
	const char *name;
	const char *in;
	size_t cap;
	int want; /* 1 or -errno */
	int status;
	const char *body; /* or the substring of the error */
};

#define H200 "HTTP/1.1 200 OK\r\n"
#define TE "Transfer-Encoding: chunked\r\n"

static const struct pcase cases[] = {
	{ "content-length", H200 "Content-Length: 5\r\n\r\nhello", 100, 1, 200, "hello" },
	{ "content-length 0", H200 "Content-Length: 0\r\n\r\n", 100, 1, 200, "" },
	{ "bytes after the body ignored", H200 "Content-Length: 2\r\n\r\nokEXTRA", 100, 1, 200, "ok" },
	{ "body exactly at the cap", H200 "Content-Length: 5\r\n\r\nhello", 5, 1, 200, "hello" },
	{ "length with OWS", H200 "Content-Length: \t 3 \t\r\n\r\nabc", 100, 1, 200, "abc" },
	{ "duplicate equal lengths", H200 "Content-Length: 3\r\nContent-Length: 3\r\n\r\nabc", 100, 1, 200, "abc" },
	{ "length list of equal values", H200 "Content-Length: 3, 3\r\n\r\nabc", 100, 1, 200, "abc" },
	{ "chunked", H200 TE "\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n", 100, 1, 200, "hello world" },
	{ "chunked, extensions and trailers",
	  H200 TE "\r\n5;a=b;c=\"d\"\r\nhello\r\n0 ;x\r\nX-Trailer: t\r\nY: u\r\n\r\n", 100, 1, 200, "hello" },
	{ "chunk size of 16 digits", H200 TE "\r\n0000000000000003\r\nabc\r\n0\r\n\r\n", 100, 1, 200, "abc" },
	{ "chunked, hex case and zeros", H200 TE "\r\n000A\r\n0123456789\r\n00\r\n\r\n", 100, 1, 200, "0123456789" },
	{ "Transfer-Encoding case-insensitive", H200 "transfer-encoding: Chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n", 100, 1, 200, "x" },
	{ "chunked at the cap", H200 TE "\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n", 5, 1, 200, "abcde" },
	{ "until EOF", H200 "Connection: close\r\n\r\nuntil the end", 100, 1, 200, "until the end" },
	{ "HTTP/1.0 until EOF", "HTTP/1.0 500 Oops\r\n\r\n{\"message\":\"x\"}", 100, 1, 500, "{\"message\":\"x\"}" },
	{ "empty body until EOF", H200 "\r\n", 100, 1, 200, "" },
	{ "100 Continue skipped", "HTTP/1.1 100 Continue\r\nX: y\r\n\r\n" H200 "Content-Length: 2\r\n\r\nok", 100, 1, 200, "ok" },
	{ "two 1xx skipped", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early\r\n\r\n" H200 "Content-Length: 1\r\n\r\nz", 100, 1, 200, "z" },
	{ "five 1xx skipped (Go's bound)", "HTTP/1.1 100 A\r\n\r\nHTTP/1.1 100 A\r\n\r\nHTTP/1.1 100 A\r\n\r\n"
	  "HTTP/1.1 100 A\r\n\r\nHTTP/1.1 103 B\r\n\r\n" H200 "Content-Length: 1\r\n\r\nz", 100, 1, 200, "z" },
	{ "a sixth 1xx refused", "HTTP/1.1 100 A\r\n\r\nHTTP/1.1 100 A\r\n\r\nHTTP/1.1 100 A\r\n\r\n"
	  "HTTP/1.1 100 A\r\n\r\nHTTP/1.1 103 B\r\n\r\nHTTP/1.1 100 A\r\n\r\n" H200 "Content-Length: 1\r\n\r\nz",
	  100, -E2BIG, 0, "more than 5 interim (1xx) responses" },
	{ "204 has no body", "HTTP/1.1 204 No Content\r\n\r\nignored", 100, 1, 204, "" },
	{ "304 has no body", "HTTP/1.1 304 Not Modified\r\nContent-Length: 9\r\n\r\n", 100, 1, 304, "" },
	{ "status without a reason", "HTTP/1.1 404\r\nContent-Length: 0\r\n\r\n", 100, 1, 404, "" },
	{ "empty header value", H200 "X-Empty:\r\nContent-Length: 1\r\n\r\n!", 100, 1, 200, "!" },

	{ "conflicting lengths", H200 "Content-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", 100, -EPROTO, 0, "conflicting Content-Length" },
	{ "conflicting length list", H200 "Content-Length: 3, 4\r\n\r\nabcd", 100, -EPROTO, 0, "conflicting Content-Length" },
	{ "negative length", H200 "Content-Length: -1\r\n\r\n", 100, -EPROTO, 0, "malformed Content-Length" },
	{ "empty length", H200 "Content-Length: \r\n\r\n", 100, -EPROTO, 0, "malformed Content-Length" },
	{ "length with junk", H200 "Content-Length: 3x\r\n\r\nabc", 100, -EPROTO, 0, "malformed Content-Length" },
	{ "length with trailing comma", H200 "Content-Length: 3,\r\n\r\nabc", 100, -EPROTO, 0, "malformed Content-Length" },
	{ "hex length", H200 "Content-Length: 0x10\r\n\r\n", 100, -EPROTO, 0, "malformed Content-Length" },
	{ "overflowing length", H200 "Content-Length: 99999999999999999999999999\r\n\r\n", 100, -E2BIG, 0, "response body exceeds 100 bytes" },
	{ "length over the cap", H200 "Content-Length: 11\r\n\r\n", 10, -E2BIG, 0, "response body exceeds 10 bytes" },
	{ "EOF body over the cap", H200 "\r\n0123456789A", 10, -E2BIG, 0, "response body exceeds 10 bytes" },
	{ "chunks over the cap", H200 TE "\r\n6\r\nabcdef\r\n5\r\nghijk\r\n0\r\n\r\n", 10, -E2BIG, 0, "response body exceeds 10 bytes" },
	{ "chunk size overflow", H200 TE "\r\nffffffffffffffffffffffff\r\n", 100, -E2BIG, 0, "more than 16 hex digits" },
	{ "chunk size of 17 digits that wraps to 3",
	  H200 TE "\r\n10000000000000003\r\nabc\r\n0\r\n\r\n", 100, -E2BIG, 0, "more than 16 hex digits" },
	{ "chunk size of 17 digits, leading zeros", H200 TE "\r\n00000000000000003\r\nabc\r\n0\r\n\r\n", 100, -E2BIG, 0, "more than 16 hex digits" },
	{ "chunk size of 16 digits over the cap", H200 TE "\r\nffffffffffffffff\r\n", 100, -E2BIG, 0, "response body exceeds 100 bytes" },
	{ "bad chunk size", H200 TE "\r\nxyz\r\n", 100, -EPROTO, 0, "malformed chunk size" },
	{ "empty chunk size", H200 TE "\r\n\r\nabc\r\n", 100, -EPROTO, 0, "malformed chunk size" },
	{ "negative chunk size", H200 TE "\r\n-5\r\nhello\r\n0\r\n\r\n", 100, -EPROTO, 0, "malformed chunk size" },
	{ "chunk size with junk", H200 TE "\r\n5 x\r\nhello\r\n0\r\n\r\n", 100, -EPROTO, 0, "malformed chunk size" },
	{ "chunk without CRLF", H200 TE "\r\n5\r\nhelloX\r\n0\r\n\r\n", 100, -EPROTO, 0, "chunk data not followed by CRLF" },
	{ "chunk with LF only", H200 TE "\r\n5\r\nhello\n0\r\n\r\n", 100, -EPROTO, 0, "chunk data not followed by CRLF" },
	{ "chunk size line with LF only", H200 TE "\r\n5\nhello\r\n0\r\n\r\n", 100, -EPROTO, 0, "line not ended by CRLF" },
	{ "bare LF status line", "HTTP/1.1 200 OK\nContent-Length: 0\n\n", 100, -EPROTO, 0, "line not ended by CRLF" },
	{ "bare LF header", H200 "Content-Length: 0\n\r\n", 100, -EPROTO, 0, "line not ended by CRLF" },
	{ "stray CR", H200 "X: a\rb\r\n\r\n", 100, -EPROTO, 0, "stray CR" },
	{ "obsolete folding", H200 "X: a\r\n b\r\nContent-Length: 0\r\n\r\n", 100, -EPROTO, 0, "folding" },
	{ "space before colon", H200 "Content-Length : 5\r\n\r\nhello", 100, -EPROTO, 0, "malformed header name" },
	{ "no colon", H200 "Nonsense\r\n\r\n", 100, -EPROTO, 0, "malformed header line" },
	{ "empty name", H200 ": x\r\n\r\n", 100, -EPROTO, 0, "malformed header line" },
	{ "chunked and length", H200 TE "Content-Length: 5\r\n\r\nhello", 100, -EPROTO, 0, "both Transfer-Encoding and Content-Length" },
	{ "gzip transfer coding", H200 "Transfer-Encoding: gzip\r\n\r\n", 100, -EPROTO, 0, "unsupported Transfer-Encoding" },
	{ "gzip, chunked", H200 "Transfer-Encoding: gzip, chunked\r\n\r\n", 100, -EPROTO, 0, "unsupported Transfer-Encoding" },
	{ "chunked twice", H200 TE TE "\r\n0\r\n\r\n", 100, -EPROTO, 0, "unsupported Transfer-Encoding" },
	{ "HTTP/2 status line", "HTTP/2 200 OK\r\n\r\n", 100, -EPROTO, 0, "malformed status line" },
	{ "not HTTP", "SSH-2.0-OpenSSH_9.2\r\n\r\n", 100, -EPROTO, 0, "malformed status line" },
	{ "two-digit status", "HTTP/1.1 20 OK\r\n\r\n", 100, -EPROTO, 0, "malformed status line" },
	{ "status out of range", "HTTP/1.1 999 X\r\n\r\n", 100, -EPROTO, 0, "status code out of range" },
	{ "status glued to reason", "HTTP/1.1 200OK\r\n\r\n", 100, -EPROTO, 0, "malformed status line" },
	{ "101", "HTTP/1.1 101 Switching Protocols\r\n\r\n", 100, -EPROTO, 0, "101" },
	{ "body cut short", H200 "Content-Length: 10\r\n\r\nhello", 100, -EPROTO, 0, "connection closed after 5 of 10 body bytes" },
	{ "chunked cut short", H200 TE "\r\n5\r\nhel", 100, -EPROTO, 0, "in the middle of a chunked body" },
	{ "trailers cut short", H200 TE "\r\n0\r\n", 100, -EPROTO, 0, "in the middle of a chunked body" },
	{ "headers cut short", H200 "Content-Length: 5\r\n", 100, -EPROTO, 0, "in the middle of the headers" },
	{ "status cut short", "HTTP/1.1 2", 100, -EPROTO, 0, "in the middle of the headers" },
	{ "nothing at all", "", 100, -EPROTO, 0, "connection closed without a response" },
};

static size_t case_len(const char *s)
{
	return strlen(s);
}

static void check_case(const char *name, const char *in, size_t len, size_t cap, int want,
		       int status, const char *body)
{
	struct outcome whole, o;
	run(in, len, cap, 0, 0, &whole);
	if (want == 1) {
		ok(whole.rc == 1 && whole.status == status && whole.body_len == strlen(body) &&
		   memcmp(whole.body ? whole.body : "", body, whole.body_len) == 0,
		   "%s: status %d body '%s' (rc %d, %s)", name, whole.status,
		   whole.body ? whole.body : "", whole.rc, whole.err);
	} else {
		ok(whole.rc == want && strstr(whole.err, body) != NULL, "%s: %d '%s'", name,
		   whole.rc, whole.err);
	}
	bool agree = true;
	size_t bad = 0;
	for (size_t k = 1; k < len && agree; k++) {
		run(in, len, cap, k, 0, &o);
		agree = same(&whole, &o);
		bad = k;
		free(o.body);
	}
	if (agree) {
		run(in, len, cap, 0, 1, &o);
		agree = same(&whole, &o);
		bad = 0;
		free(o.body);
	}
	ok(agree, "%s: same outcome at every split (first difference at %zu)", name,
	   agree ? (size_t)0 : bad);
	free(whole.body);
}

static void test_table(void)
{
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++)
		check_case(cases[i].name, cases[i].in, case_len(cases[i].in), cases[i].cap,
			   cases[i].want, cases[i].status, cases[i].body);
}

/* Cases too large to write out. */
static void test_limits(void)
{
	size_t big = HTTP_MAX_HEADER_BYTES + 10;
	char *in = malloc(big + 200);
	int n = snprintf(in, big + 200, H200 "X-Big: ");
	memset(in + n, 'a', big);
	n += (int)big;
	n += snprintf(in + n, 200, "\r\nContent-Length: 0\r\n\r\n");
	check_case("oversized header", in, (size_t)n, 100, -E2BIG, 0, "response headers too large");

	n = snprintf(in, big + 200, H200);
	for (int k = 0; k <= HTTP_MAX_HEADERS; k++)
		n += snprintf(in + n, big + 200 - (size_t)n, "X-%d: v\r\n", k);
	n += snprintf(in + n, big + 200 - (size_t)n, "\r\n");
	check_case("too many headers", in, (size_t)n, 100, -E2BIG, 0, "too many response headers");

	n = snprintf(in, big + 200, H200);
	for (int k = 0; k < HTTP_MAX_HEADERS; k++)
		n += snprintf(in + n, big + 200 - (size_t)n, "X-%d: v\r\n", k);
	n += snprintf(in + n, big + 200 - (size_t)n, "Content-Length: 0\r\n\r\n");
	check_case("too many headers, one over", in, (size_t)n, 100, -E2BIG, 0,
		   "too many response headers");

	n = snprintf(in, big + 200, H200 TE "\r\n5;");
	memset(in + n, 'e', HTTP_MAX_CHUNK_LINE);
	n += HTTP_MAX_CHUNK_LINE;
	n += snprintf(in + n, 200, "\r\nhello\r\n0\r\n\r\n");
	check_case("chunk line too long", in, (size_t)n, 100, -E2BIG, 0, "chunk size line too long");

	const char nul[] = H200 "X: a\0b\r\nContent-Length: 0\r\n\r\n";
	check_case("NUL in a header", nul, sizeof(nul) - 1, 100, -EPROTO, 0, "stray CR or NUL");
	free(in);
}

static void test_header_lookup(void)
{
	struct outcome o;
	const char *in = H200 "API-Version: 1.41\r\nContent-Length: 0\r\n\r\n";
	run(in, strlen(in), 100, 0, 0, &o);
	is_str(o.api, "1.41", "header lookup is case-insensitive");
	free(o.body);
	in = H200 "Api-Version:  1.52 \r\nApi-Version: 9.99\r\nContent-Length: 0\r\n\r\n";
	run(in, strlen(in), 100, 0, 0, &o);
	is_str(o.api, "1.52", "first value wins, OWS trimmed");
	free(o.body);
	in = "HTTP/1.1 100 Continue\r\nApi-Version: 0.1\r\n\r\n" H200 "Content-Length: 0\r\n\r\n";
	run(in, strlen(in), 100, 0, 0, &o);
	is_str(o.api, "", "headers of a 1xx are dropped");
	free(o.body);
}

static void test_endpoints(void)
{
	static const struct {
		const char *url;
		bool tls;
		int want;
		const char *path_or_host, *port, *err;
	} ecases[] = {
		{ "unix:///var/run/docker.sock", false, 0, "/var/run/docker.sock", "", NULL },
		{ "tcp://127.0.0.1:2375", false, 0, "127.0.0.1", "2375", NULL },
		{ "tcp://localhost", false, 0, "localhost", "2375", NULL },
		{ "tcp://localhost", true, 0, "localhost", "2376", NULL },
		{ "tcp://[::1]:65535", false, 0, "::1", "65535", NULL },
		{ "tcp://docker.example:1", false, 0, "docker.example", "1", NULL },
		{ "tcp://h:0", false, -EINVAL, NULL, NULL, "invalid Docker host \"tcp://h:0\": port must be" },
		{ "tcp://h:65536", false, -EINVAL, NULL, NULL, "port must be a number from 1 to 65535" },
		{ "tcp://h:123456", false, -EINVAL, NULL, NULL, "port must be" },
		{ "tcp://h:", false, -EINVAL, NULL, NULL, "port must be" },
		{ "tcp://h:-1", false, -EINVAL, NULL, NULL, "port must be" },
		{ "tcp://h:80/v1", false, -EINVAL, NULL, NULL, "takes no path" },
		{ "tcp://h/x", false, -EINVAL, NULL, NULL, "takes no path" },
		{ "tcp://:2375", false, -EINVAL, NULL, NULL, "malformed host name" },
		{ "tcp://a b:1", false, -EINVAL, NULL, NULL, "malformed host name" },
		{ "tcp://[::1", false, -EINVAL, NULL, NULL, "unclosed" },
		{ "http://h:1", false, -EINVAL, NULL, NULL, "\"http://h:1\": the scheme must be unix:// or tcp://" },
		{ "ssh://u@h", false, -EINVAL, NULL, NULL, "scheme" },
		{ "", false, -EINVAL, NULL, NULL, "scheme" },
		{ "unix://relative.sock", false, -EINVAL, NULL, NULL, "must be absolute" },
		{ "unix:///x.sock", true, -EINVAL, NULL, NULL, "TLS needs a tcp:// host" },
		{ "tcp://h:1\n", false, -EINVAL, NULL, NULL, "\"tcp://h:1?\"" },
	};
	for (size_t i = 0; i < ARRAY_SIZE(ecases); i++) {
		struct http_endpoint ep;
		struct errbuf e = { "" };
		int r = http_endpoint_parse(ecases[i].url, ecases[i].tls, "/certs", &ep, &e);
		if (ecases[i].want == 0)
			ok(r == 0 && strcmp(ecases[i].port[0] ? ep.host : ep.path,
					    ecases[i].path_or_host) == 0 &&
				   strcmp(ep.port, ecases[i].port) == 0,
			   "endpoint %s: '%s' '%s' (%s)", ecases[i].url,
			   ecases[i].port[0] ? ep.host : ep.path, ep.port, e.msg);
		else
			ok(r == ecases[i].want && strstr(e.msg, ecases[i].err), "endpoint case %zu: %s",
			   i, e.msg);
	}
	char longp[200] = "unix:///";
	memset(longp + 8, 'p', 120);
	struct http_endpoint ep;
	struct errbuf e = { "" };
	is_int(http_endpoint_parse(longp, false, NULL, &ep, &e), -ENAMETOOLONG,
	       "socket path too long for sun_path: %s", e.msg);
	memset(longp + 8, 0, 150);
	memset(longp + 8, 'p', 107 - 1);
	is_int(http_endpoint_parse(longp, false, NULL, &ep, &e), 0, "socket path of 107 bytes fits");
	is_int(http_endpoint_parse("tcp://h:1", true, NULL, &ep, &e), -EINVAL,
	       "TLS without a cert path: %s", e.msg);
}

int main(void)
{
	test_table();
	test_limits();
	test_header_lookup();
	test_endpoints();
	return done_testing();
}
