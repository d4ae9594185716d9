/* SPDX-License-Identifier: Apache-2.0 */
/* Table tests for the gate's first look (rpc/gate.c, gate_route_first):
 * where a connection goes from the bytes it has sent so far, with and
 * without a relay; and the bound of what it looks at, by lengths written
 * out here (32 KiB, issue 26: no tighter than nginx's 4 x 8 KiB), not taken
 * from the constant, so that moving the bound either way fails. */
#include <string.h>

#include "rpc/gate.h"
#include "tests/lib/tap.h"

static const struct {
	const char *name;
	const char *bytes;
	bool ended, relay;
	enum gate_route want;
} cases[] = {
	/* Without a relay: the first bytes decide, as before issue 18. */
	{ "no relay: a method's first byte is enough", "P", false, false, GATE_AGENT },
	{ "no relay: any path is the agent's", "GET / HTTP/1.1\r\n", false, false, GATE_AGENT },
	{ "no relay: a TLS hello is closed", "\x16\x03\x01\x02\x00", false, false, GATE_CLOSE },
	{ "no relay: binary is closed", "\x00\x01", false, false, GATE_CLOSE },
	{ "no relay: a DEL in the method is closed", "GE\x7fT / HTTP/1.1\r\n", false, false,
	  GATE_CLOSE },
	{ "no relay: a space before the method is closed", " GET / HTTP/1.1\r\n", false, false,
	  GATE_CLOSE },

	/* With a relay: Health is the agent's, by its target alone. */
	{ "the gateway's poll", "POST /prpc/v1/Health?json HTTP/1.1\r\n", false, true, GATE_AGENT },
	{ "Health with no query", "GET /prpc/v1/Health HTTP/1.1\r\n", false, true, GATE_AGENT },
	{ "Health with any method", "DELETE /prpc/v1/Health HTTP/1.1\r\n", false, true, GATE_AGENT },
	{ "Health, a bare LF", "GET /prpc/v1/Health?x=1\n", false, true, GATE_AGENT },
	{ "Health, HTTP/0.9 style (no version)", "GET /prpc/v1/Health\r\n", false, true, GATE_AGENT },
	{ "Health after empty lines", "\r\n\r\nPOST /prpc/v1/Health HTTP/1.1\r\n", false, true,
	  GATE_AGENT },
	{ "Health, the rest of the head still to come", "POST /prpc/v1/Health?json HTTP/1.1\r\nHo",
	  false, true, GATE_AGENT },
	{ "the dashboard", "GET / HTTP/1.1\r\nHost: x\r\n\r\n", false, true, GATE_RELAY },
	{ "v1 Version is the guest agent's", "GET /prpc/v1/Version HTTP/1.1\r\n\r\n", false,
	  true, GATE_RELAY },
	{ "the port-policy fetch, its body still to come",
	  "POST /prpc/Info?json HTTP/1.1\r\nContent-Length: 2\r\n\r\n", false, true, GATE_RELAY },
	{ "a log stream", "GET /logs/app?follow=true&ansi=false HTTP/1.1\r\nHost: x\r\n\r\n",
	  false, true, GATE_RELAY },
	{ "Health as a prefix is not Health", "GET /prpc/v1/Healthz HTTP/1.1\r\n\r\n", false,
	  true, GATE_RELAY },
	{ "Health with a trailing slash is not Health", "GET /prpc/v1/Health/ HTTP/1.1\r\n\r\n",
	  false, true, GATE_RELAY },
	{ "case matters", "GET /prpc/v1/health HTTP/1.1\r\n\r\n", false, true, GATE_RELAY },
	{ "absolute form is relayed", "GET http://x/prpc/v1/Health HTTP/1.1\r\n\r\n", false, true,
	  GATE_RELAY },
	{ "a second space: empty target", "GET  /prpc/v1/Health HTTP/1.1\r\n\r\n", false, true,
	  GATE_RELAY },
	{ "a head ended by bare LFs", "GET / HTTP/1.1\nHost: x\n\n", false, true, GATE_RELAY },
	{ "a head ended by LF CRLF", "GET / HTTP/1.1\nHost: x\n\r\n", false, true, GATE_RELAY },

	/* The relay's only once the whole first head is there. */
	{ "a line, no header yet", "GET / HTTP/1.1\r\n", false, true, GATE_WAIT_HEAD },
	{ "a header, the head not ended", "GET / HTTP/1.1\r\nHost: x\r\n", false, true,
	  GATE_WAIT_HEAD },
	{ "the empty line's CR alone", "GET / HTTP/1.1\r\nHost: x\r\n\r", false, true,
	  GATE_WAIT_HEAD },
	{ "a header cut short", "GET /logs/a HTTP/1.1\r\nCookie: a=", false, true, GATE_WAIT_HEAD },
	{ "a CR inside a header is no end", "GET / HTTP/1.1\r\nX: a\rb\r\n", false, true,
	  GATE_WAIT_HEAD },
	{ "the head ended by the peer's end of stream", "GET / HTTP/1.1\r\nHost: x", true, true,
	  GATE_RELAY },

	/* Routed only on a whole line. */
	{ "nothing yet but empty lines", "\r\n", false, true, GATE_WAIT },
	{ "a method alone", "GET", false, true, GATE_WAIT },
	{ "a target cut short that could be Health", "POST /prpc/v1/He", false, true, GATE_WAIT },
	{ "Health's path, its line not ended", "GET /prpc/v1/Health", false, true, GATE_WAIT },
	{ "a path that is not Health, its line not ended", "GET / HTTP/1.1", false, true, GATE_WAIT },
	{ "the line ended by the peer's end of stream, not Health", "GET / HTTP/1.1", true, true,
	  GATE_RELAY },
	{ "the line ended by the peer's end of stream, Health", "GET /prpc/v1/Health", true, true,
	  GATE_AGENT },
	{ "only empty lines, then the end", "\r\n\r\n", true, true, GATE_CLOSE },
	{ "no target at the end: the daemon's to refuse", "GET", true, true, GATE_AGENT },

	/* Garbage is closed in relay mode too. */
	{ "relay: a TLS hello is closed", "\x16\x03\x01\x02\x00", false, true, GATE_CLOSE },
	{ "relay: a separator in the method", "GE/T / HTTP/1.1\r\n", false, true, GATE_CLOSE },
	{ "relay: a control byte in the method", "G\x01T / HTTP/1.1\r\n", false, true, GATE_CLOSE },
};

static const char *const names[] = { "WAIT",  "WAIT_HEAD",     "CLOSE",
				      "AGENT", "RELAY",         "LINE_TOO_LONG",
				      "HEAD_TOO_LARGE" };

int main(void)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *b = cases[i].bytes;
		/* The NUL-led case's length is its literal's, not strlen's. */
		size_t n = b[0] ? strlen(b) : 2;
		enum gate_route r = gate_route_first((const unsigned char *)b, n, cases[i].ended,
						     cases[i].relay);
		is_str(names[r], names[cases[i].want], "%s", cases[i].name);
	}
	/* The bound, 32768 bytes: a head that ends in its last byte is
	 * relayed; one byte more, or no end in it, is refused. */
	static unsigned char head[32769];
	const char *line = "GET /logs/a HTTP/1.1\r\nCookie: ";
	memset(head, 'a', sizeof(head));
	memcpy(head, line, strlen(line));
	memcpy(head + 32768 - 4, "\r\n\r\n", 4);
	is_str(names[gate_route_first(head, 32768, false, true)], "RELAY",
	       "a head of 32768 bytes (4 x 8 KiB) is relayed");
	memcpy(head + 32768 - 3, "\r\n\r\n", 4);
	is_str(names[gate_route_first(head, 32769, false, true)], "HEAD_TOO_LARGE",
	       "a head of 32769 bytes is too large: the bytes past 32768 are not looked at");
	is_str(names[gate_route_first(head, 32768, false, true)], "HEAD_TOO_LARGE",
	       "32768 bytes and no end of head: too large");
	is_str(names[gate_route_first(head, 32768, true, true)], "HEAD_TOO_LARGE",
	       "32768 bytes and no end of head, then the peer's end: too large all the same");
	is_str(names[gate_route_first(head, 32767, false, true)], "WAIT_HEAD",
	       "32767 bytes and no end of head: its end may still come");
	/* A request line as long: its own refusal (414). */
	static unsigned char longline[32768];
	memset(longline, 'a', sizeof(longline));
	memcpy(longline, "GET /logs/", 10);
	is_str(names[gate_route_first(longline, sizeof(longline), false, true)], "LINE_TOO_LONG",
	       "a request line of 32768 bytes, not Health: too long");
	is_str(names[gate_route_first(longline, 32767, false, true)], "WAIT",
	       "a request line of 32767 bytes: its end may still come");
	memcpy(longline, "GET /prpc/v1/Health?", 20);
	is_str(names[gate_route_first(longline, sizeof(longline), false, true)], "AGENT",
	       "a request line of 32768 bytes, Health: the daemon's (it answers 414)");
	return done_testing();
}
