/* SPDX-License-Identifier: Apache-2.0 */
/* Docker's /events stream as the agent reads it: the HTTP response parser in
 * stream mode (head, then body pieces, chunked or not), the pieces cut into
 * lines, each line parsed as an event. Byte 0 is the size of each read
 * (0: all at once). Oracle: stream mode frames the body exactly as the
 * collecting parser does (a stream has no body cap, so a framing check that
 * leans on the cap, like a chunk size that wraps, shows up as a difference). */
#include <stdlib.h>
#include <string.h>

#include "base/http_parse.h"
#include "fuzz/fuzz.h"
#include "runtime/events.h"

static void lines(struct events_lines *l, const char *piece, size_t n)
{
	struct errbuf err = { "" };
	struct event ev;
	while (n > 0) {
		int r = events_lines_take(l, &piece, &n, &err);
		if (r < 0)
			return;
		if (r == 1)
			events_parse(l->line, l->len, "demo", &ev, &err);
	}
}

/* The same bytes, collected whole with a cap no framed body can exceed:
 * 1 and the body, or the error. */
static int collect(const char *in, size_t len, struct http_response *out)
{
	struct http_parser p;
	struct errbuf err = { "" };
	size_t used;
	http_parser_init(&p, len);
	int r = http_parser_feed(&p, in, len, &used, &err);
	if (r == 0)
		r = http_parser_eof(&p, &err);
	if (r == 1)
		http_parser_take(&p, out);
	http_parser_free(&p);
	return r;
}

static void same_framing(const char *in, size_t len, int r, const char *body, size_t body_len)
{
	struct http_response whole = { 0 };
	int rw = collect(in, len, &whole);
	if ((r == 1) != (rw == 1) ||
	    (r == 1 && (whole.body_len != body_len || memcmp(whole.body ? whole.body : "", body, body_len))))
		__builtin_trap();
	http_response_free(&whole);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	size_t step = data[0], off = 0;
	const char *in = (const char *)data + 1;
	size_t len = size - 1;
	struct http_parser p;
	struct events_lines l = { 0 };
	struct errbuf err = { "" };
	int r = 0, stalled = 0;
	char *body = malloc(len + 1);
	size_t body_len = 0;
	if (!body)
		return 0;
	http_parser_init_stream(&p);
	while (r == 0 && off < len) {
		size_t n = step && len - off > step ? step : len - off, used = 0, piece_len = 0;
		const char *piece = NULL;
		r = http_parser_feed_piece(&p, in + off, n, &used, &piece, &piece_len, &err);
		if (used > n || (piece_len && (piece < in + off || piece + piece_len > in + off + used)))
			__builtin_trap(); /* pieces lie inside what was taken */
		/* A pause makes no progress once; a parser that never moves
		 * would spin its reader forever. */
		stalled = used || piece_len ? 0 : stalled + 1;
		if (stalled > 2)
			__builtin_trap();
		if (piece_len) {
			memcpy(body + body_len, piece, piece_len);
			body_len += piece_len;
			lines(&l, piece, piece_len);
		}
		off += used;
	}
	if (r == 0)
		r = http_parser_eof(&p, &err);
	same_framing(in, len, r, body, body_len);
	free(body);
	events_lines_free(&l);
	http_parser_free(&p);
	return 0;
}
