/* SPDX-License-Identifier: Apache-2.0 */
/* The first-request classifier (rpc/gate.c, gate_route_first): where an
 * anonymous connection goes from the bytes it has sent so far. Layout: a
 * flags byte (bit 0: the peer's end of stream has come, bit 1: relay mode,
 * bit 2: grow), then the bytes. With grow, two more bytes give a count K,
 * and K bytes of 'a' are put where the first 0xff byte is (or at the end),
 * so that heads past the bound (32 KiB) are reached within the fuzzer's
 * -max_len.
 * Oracle, from RFC 9112 and docs/design/front.md's routing rule rather than
 * from gate.c, and exact: for each input one route is right, and any other fails.
 *   - Without a relay: the agent's when the bytes can begin a request,
 *     else closed.
 *   - With one, bytes that cannot begin a request are closed, and so are
 *     empty lines alone once nothing more will come.
 *   - The first line is there once its LF has come, or nothing more will
 *     come (the peer's end, or the bound reached: nothing past it is looked
 *     at). Until then: wait, whatever it begins with.
 *   - Once it is there: the agent's when its target's path is exactly
 *     /prpc/v1/Health (or there is no target for the daemon to refuse);
 *     else the relay's, and for the relay the whole head must be there: an
 *     empty line after the first line's LF. Relayed then, or at the peer's
 *     end short of the bound; at the bound, too large (the line too long
 *     when it has no LF); until then, wait for the head.
 *   - Nothing past the bound is read (ASan poisons it).
 */
#include <sanitizer/asan_interface.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz/fuzz.h"
#include "rpc/gate.h"

/* RFC 9110 §5.6.2. */
static bool tchar(unsigned char c)
{
	return c > ' ' && c < 0x7f && !strchr("\"(),/:;<=>?@[\\]{}", c);
}

/* An empty line after position i (the start of a line) within [0, n). */
static bool has_empty_line(const unsigned char *p, size_t i, size_t n)
{
	for (; i < n; i++) {
		if (p[i] == '\n' || (p[i] == '\r' && i + 1 < n && p[i + 1] == '\n'))
			return true;
		while (i < n && p[i] != '\n')
			i++;
	}
	return false;
}

/* The route the rule above gives p[0..n). */
static enum gate_route rule(const unsigned char *p, size_t n, bool ended, bool relay)
{
	size_t m = n < GATE_HEAD_MAX ? n : GATE_HEAD_MAX;
	bool full = m == GATE_HEAD_MAX, last = ended || full; /* nothing more to look at */
	size_t i = 0;
	while (i < m && (p[i] == '\r' || p[i] == '\n'))
		i++;
	size_t tok = i;
	while (tok < m && tchar(p[tok]))
		tok++;
	/* The first bytes can begin a request: a method token, then a space
	 * or nothing yet. */
	bool http = tok == m || (tok > i && p[tok] == ' ');
	if (!relay)
		return http ? GATE_AGENT : GATE_CLOSE;
	if (!http || (i == m && last))
		return GATE_CLOSE;
	const unsigned char *eol = memchr(p + i, '\n', m - i);
	if (i == m || (!eol && !last))
		return GATE_WAIT;
	/* The target: after the method's space, up to a space, CR, '?' or the
	 * line's end. */
	size_t line_end = eol ? (size_t)(eol - p) : m;
	const unsigned char *sp = memchr(p + i, ' ', line_end - i);
	if (!sp)
		return GATE_AGENT;
	size_t t = (size_t)(sp - p) + 1, te = t;
	while (te < line_end && p[te] != ' ' && p[te] != '\r' && p[te] != '?')
		te++;
	if (te - t == strlen("/prpc/v1/Health") && !memcmp(p + t, "/prpc/v1/Health", te - t))
		return GATE_AGENT;
	if (!eol)
		return full ? GATE_LINE_TOO_LONG : GATE_RELAY;
	if (has_empty_line(p, line_end + 1, m))
		return GATE_RELAY;
	return full ? GATE_HEAD_TOO_LARGE : ended ? GATE_RELAY : GATE_WAIT_HEAD;
}

static void check(const unsigned char *p, size_t n, bool ended, bool relay)
{
	if (gate_route_first(p, n, ended, relay) != rule(p, n, ended, relay))
		__builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	bool ended = data[0] & 1, relay = data[0] & 2, grow = data[0] & 4;
	const uint8_t *p = data + 1, *end = data + size;
	size_t k = 0;
	if (grow && end - p >= 2) {
		k = (size_t)p[0] << 8 | p[1];
		p += 2;
	}
	const uint8_t *at = memchr(p, 0xff, (size_t)(end - p));
	size_t before = (size_t)((at ? at : end) - p), after = at ? (size_t)(end - at - 1) : 0;
	size_t n = before + k + after;
	/* Exactly n bytes: ASan sees any read past them. */
	unsigned char *buf = malloc(n ? n : 1);
	if (!buf)
		return 0;
	memcpy(buf, p, before);
	memset(buf + before, 'a', k);
	if (after)
		memcpy(buf + before + k, at + 1, after);
	/* Nothing past the bound may be read. */
	if (n > GATE_HEAD_MAX)
		ASAN_POISON_MEMORY_REGION(buf + GATE_HEAD_MAX, n - GATE_HEAD_MAX);
	check(buf, n, ended, relay);
	if (n > GATE_HEAD_MAX)
		ASAN_UNPOISON_MEMORY_REGION(buf + GATE_HEAD_MAX, n - GATE_HEAD_MAX);
	free(buf);
	return 0;
}
