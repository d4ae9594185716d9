/* SPDX-License-Identifier: Apache-2.0 */
/* Table tests for the PROXY header reader (rpc/proxy.c), after HAProxy's
 * specification (doc/proxy-protocol.txt): its examples and lengths, each
 * rule of each version broken once, every prefix of a good header waited
 * for, and the bytes after a header never looked at. Headers written by
 * haproxy itself are decoded end to end (tests/e2e/relay_proxy.sh). */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rpc/proxy.h"
#include "tests/lib/proxy_show.h"
#include "tests/lib/tap.h"

/* A header and what must come of it. Version 2 headers are written as hex
 * (spaces ignored), version 1 as text (\r \n escapes). want: "none",
 * "more", "bad: <why>", or "ok LEN KIND SRC DST" with KIND address, local
 * or unknown, and SRC/DST as ip:port (or -). */
struct row {
	const char *name;
	const char *text; /* or NULL */
	const char *hex;  /* or NULL */
	const char *want;
};

#define SIG "0d0a0d0a000d0a515549540a"

static const struct row rows[] = {
	/* Version 1: the specification's example and its longest lines. */
	{ "v1: the specification's example, before an HTTP request",
	  "PROXY TCP4 192.168.0.1 192.168.0.11 56324 443\r\nGET / HTTP/1.1\r\nHost: 192.168.0.11\r\n\r\n",
	  NULL, "ok 47 address 192.168.0.1:56324 192.168.0.11:443" },
	{ "v1: the longest IPv4 line (56 bytes)",
	  "PROXY TCP4 255.255.255.255 255.255.255.255 65535 65535\r\n", NULL,
	  "ok 56 address 255.255.255.255:65535 255.255.255.255:65535" },
	{ "v1: the longest IPv6 line (104 bytes)",
	  "PROXY TCP6 ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 65535\r\n",
	  NULL,
	  "ok 104 address [ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:65535 [ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:65535" },
	{ "v1: UNKNOWN, short form (15 bytes)", "PROXY UNKNOWN\r\n", NULL, "ok 15 unknown - -" },
	{ "v1: UNKNOWN, the worst case (107 bytes): the rest of the line ignored",
	  "PROXY UNKNOWN ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 65535\r\n",
	  NULL, "ok 107 unknown - -" },
	{ "v1: TCP6, compressed form", "PROXY TCP6 2001:db8::1 2001:db8::2 1 0\r\n", NULL,
	  "ok 40 address [2001:db8::1]:1 [2001:db8::2]:0" },
	{ "v1: a lone LF ends nothing", "PROXY TCP4 1.2.3.4 5.6.7.8 1 2\n", NULL,
	  "bad: v1 line end not CRLF" },
	{ "v1: a CR not followed by LF", "PROXY TCP4 1.2.3.4 5.6.7.8 1 2\rX", NULL,
	  "bad: v1 line end not CRLF" },
	{ "v1: a protocol other than TCP4, TCP6, UNKNOWN", "PROXY UDP4 1.2.3.4 5.6.7.8 1 2\r\n",
	  NULL, "bad: v1 protocol not TCP4, TCP6 or UNKNOWN" },
	{ "v1: UNKNOWNX is no protocol", "PROXY UNKNOWNX\r\n", NULL,
	  "bad: v1 protocol not TCP4, TCP6 or UNKNOWN" },
	{ "v1: nothing after PROXY", "PROXY \r\n", NULL, "bad: v1 protocol not TCP4, TCP6 or UNKNOWN" },
	{ "v1: TCP4 alone", "PROXY TCP4\r\n", NULL, "bad: v1 protocol not TCP4, TCP6 or UNKNOWN" },
	{ "v1: two spaces", "PROXY TCP4 1.2.3.4  5.6.7.8 1 2\r\n", NULL,
	  "bad: v1 fields not four, one space apart" },
	{ "v1: three fields", "PROXY TCP4 1.2.3.4 5.6.7.8 1\r\n", NULL,
	  "bad: v1 fields not four, one space apart" },
	{ "v1: five fields", "PROXY TCP4 1.2.3.4 5.6.7.8 1 2 3\r\n", NULL,
	  "bad: v1 fields not four, one space apart" },
	{ "v1: a trailing space", "PROXY TCP4 1.2.3.4 5.6.7.8 1 2 \r\n", NULL,
	  "bad: v1 fields not four, one space apart" },
	{ "v1: the fourth field empty", "PROXY TCP4 1.2.3.4 5.6.7.8 1 \r\n", NULL,
	  "bad: v1 fields not four, one space apart" },
	{ "v1: the first field empty", "PROXY TCP4  1.2.3.4 5.6.7.8 1\r\n", NULL,
	  "bad: v1 fields not four, one space apart" },
	{ "v1: an IPv4 number with a leading zero (octal?)", "PROXY TCP4 01.2.3.4 5.6.7.8 1 2\r\n",
	  NULL, "bad: v1 address malformed" },
	{ "v1: an IPv4 number over 255", "PROXY TCP4 1.2.3.256 5.6.7.8 1 2\r\n", NULL,
	  "bad: v1 address malformed" },
	{ "v1: an IPv6 address after TCP4", "PROXY TCP4 ::1 5.6.7.8 1 2\r\n", NULL,
	  "bad: v1 address malformed" },
	{ "v1: an IPv4 address after TCP6", "PROXY TCP6 1.2.3.4 ::1 1 2\r\n", NULL,
	  "bad: v1 address malformed" },
	{ "v1: a destination malformed", "PROXY TCP4 1.2.3.4 5.6.7 1 2\r\n", NULL,
	  "bad: v1 address malformed" },
	{ "v1: an address longer than any of its family", "PROXY TCP4 1.2.3.4.......... 5.6.7.8 1 2\r\n",
	  NULL, "bad: v1 address malformed" },
	{ "v1: a port with a leading zero", "PROXY TCP4 1.2.3.4 5.6.7.8 080 2\r\n", NULL,
	  "bad: v1 port malformed" },
	{ "v1: a port over 65535", "PROXY TCP4 1.2.3.4 5.6.7.8 1 65536\r\n", NULL,
	  "bad: v1 port malformed" },
	{ "v1: a port of six digits", "PROXY TCP4 1.2.3.4 5.6.7.8 100000 2\r\n", NULL,
	  "bad: v1 port malformed" },
	{ "v1: a port not a number", "PROXY TCP4 1.2.3.4 5.6.7.8 1 -2\r\n", NULL,
	  "bad: v1 port malformed" },
	{ "v1: a port with a letter in it", "PROXY TCP4 1.2.3.4 5.6.7.8 1a 2\r\n", NULL,
	  "bad: v1 port malformed" },
	{ "v1: a port of ten digits that would wrap to 1", "PROXY TCP4 1.2.3.4 5.6.7.8 4294967297 2\r\n",
	  NULL, "bad: v1 port malformed" },
	{ "v1: port 0", "PROXY TCP4 1.2.3.4 5.6.7.8 0 0\r\n", NULL, "ok 32 address 1.2.3.4:0 5.6.7.8:0" },
	{ "v1: the bytes after the CRLF never looked at (a lone LF)", "PROXY TCP4 1.2.3.4 5.6.7.8 1 2\r\n\n",
	  NULL, "ok 32 address 1.2.3.4:1 5.6.7.8:2" },
	/* What is no header, or may be one. */
	{ "an HTTP request is no header", "GET / HTTP/1.1\r\n", NULL, "none" },
	{ "POST is no header", "POST / HTTP/1.1\r\n", NULL, "none" },
	{ "\"PROXYX\" is no header", "PROXYX / HTTP/1.1\r\n", NULL, "none" },
	{ "\"P\" may begin one", "P", NULL, "more" },
	{ "\"PROXY\" may begin one", "PROXY", NULL, "more" },
	{ "an empty line before a request is no header", "\r\n\r\nGET / HTTP/1.1\r\n", NULL, "none" },
	{ "nothing yet", "", NULL, "more" },
	/* Version 2. */
	{ "v2: TCP over IPv4, as the gateway writes it", NULL,
	  SIG "21 11 000c 7f000002 7f000001 d431 1f9a", "ok 28 address 127.0.0.2:54321 127.0.0.1:8090" },
	{ "v2: TCP over IPv6", NULL,
	  SIG "21 21 0024 20010db8000000000000000000000001 20010db8000000000000000000000002 0050 1f9a",
	  "ok 52 address [2001:db8::1]:80 [2001:db8::2]:8090" },
	{ "v2: UDP over IPv4 carries an address too", NULL, SIG "21 12 000c 01020304 05060708 0001 0002",
	  "ok 28 address 1.2.3.4:1 5.6.7.8:2" },
	{ "v2: with TLVs (authority, unique id, NOOP, CRC32C), skipped by length", NULL,
	  SIG "21 11 002b 01020304 05060708 0001 0002 02000b6578616d706c652e636f6d 0500047a7a7a7a 040000 030004deadbeef",
	  "ok 59 address 1.2.3.4:1 5.6.7.8:2" },
	{ "v2: a TLV longer than what is left", NULL, SIG "21 11 0012 01020304 05060708 0001 0002 020004616263",
	  "bad: v2 TLV past the header's end" },
	{ "v2: a TLV's head cut by the length", NULL, SIG "21 11 000e 01020304 05060708 0001 0002 0200",
	  "bad: v2 TLV past the header's end" },
	{ "v2: LOCAL, nothing after", NULL, SIG "20 00 0000", "ok 16 local - -" },
	{ "v2: LOCAL, its block skipped whatever its family says", NULL, SIG "20 ff 0004 deadbeef",
	  "ok 20 local - -" },
	{ "v2: PROXY, UNSPEC: no client address", NULL, SIG "21 00 0000", "ok 16 unknown - -" },
	{ "v2: PROXY, UNSPEC with bytes: skipped", NULL, SIG "21 00 0003 010203", "ok 19 unknown - -" },
	{ "v2: PROXY, IPv4 with transport UNSPEC: no client address", NULL, SIG "21 10 0000",
	  "ok 16 unknown - -" },
	{ "v2: PROXY, AF_UNIX: no client address, its block skipped", NULL,
	  SIG "21 31 00d8 "
	      "000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
	      "000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000",
	  "ok 232 unknown - -" },
	{ "v2: version 1 in the version nibble", NULL, SIG "11 11 000c 01020304 05060708 0001 0002",
	  "bad: v2 version not 2" },
	{ "v2: version 3", NULL, SIG "31 11 000c 01020304 05060708 0001 0002", "bad: v2 version not 2" },
	{ "v2: command 2", NULL, SIG "22 11 000c 01020304 05060708 0001 0002",
	  "bad: v2 command neither LOCAL nor PROXY" },
	{ "v2: family 4", NULL, SIG "21 41 000c 01020304 05060708 0001 0002",
	  "bad: v2 family or transport unknown" },
	{ "v2: transport 3", NULL, SIG "21 13 000c 01020304 05060708 0001 0002",
	  "bad: v2 family or transport unknown" },
	{ "v2: IPv4 with 11 bytes of addresses", NULL, SIG "21 11 000b 01020304 05060708 0001 00",
	  "bad: v2 length shorter than its addresses" },
	{ "v2: IPv6 with the length of IPv4's", NULL, SIG "21 21 000c 01020304 05060708 0001 0002",
	  "bad: v2 length shorter than its addresses" },
	{ "v2: AF_UNIX with fewer than 216 bytes", NULL, SIG "21 31 0004 01020304",
	  "bad: v2 length shorter than its addresses" },
	{ "v2: a length past 2048 is refused before its bytes come", NULL, SIG "21 11 07f1",
	  "bad: v2 header longer than 2048 bytes" },
	{ "v2: a length of 2048 in all waits for them", NULL, SIG "21 11 07f0 01020304", "more" },
	{ "v2: the signature's first bytes", NULL, "0d0a0d0a00", "more" },
	{ "v2: the signature whole, no version yet", NULL, SIG, "more" },
	{ "v2: 15 bytes", NULL, SIG "21 11 00", "more" },
	{ "v2: the addresses not all there", NULL, SIG "21 11 000c 01020304 0506", "more" },
	{ "v2: a signature broken at its NUL", NULL, "0d0a0d0a01", "none" },
	{ "v2: the bytes after the header never looked at", NULL,
	  SIG "21 11 000c 01020304 05060708 0001 0002 0d0a0d0a000d0a515549540a ff", "ok 28 address 1.2.3.4:1 5.6.7.8:2" },
};

static size_t unhex(const char *h, unsigned char *out)
{
	size_t n = 0;
	while (*h) {
		if (*h == ' ') {
			h++;
			continue;
		}
		unsigned v;
		sscanf(h, "%2x", &v);
		out[n++] = (unsigned char)v;
		h += 2;
	}
	return n;
}

static size_t untext(const char *t, unsigned char *out)
{
	size_t n = 0;
	for (; *t; t++)
		out[n++] = (unsigned char)*t;
	return n;
}

/* p[0..n) parsed from a buffer of exactly n bytes, so that a read past
 * them is ASan's to find (make asan); the normal build sees the zeros the
 * callers put after them. */
static enum proxy_result parse_exact(const unsigned char *p, size_t n, struct proxy_header *h)
{
	unsigned char *copy = malloc(n ? n : 1);
	memcpy(copy, p, n);
	enum proxy_result r = proxy_parse(copy, n, h);
	free(copy);
	return r;
}

/* Version 1 lines of exact lengths around the bound. */
static void v1_lengths(void)
{
	static const struct {
		size_t len;
		bool crlf;
		const char *want;
	} lines[] = {
		{ 107, true, "ok 107 unknown - -" },
		{ 108, true, "bad: v1 line longer than 107 bytes" },
		{ 106, false, "bad: v1 line longer than 107 bytes" },
		{ 105, false, "more" },
	};
	for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
		unsigned char line[200];
		size_t n = untext("PROXY UNKNOWN ", line);
		memset(line + n, 'a', lines[i].len - n);
		if (lines[i].crlf)
			memcpy(line + lines[i].len - 2, "\r\n", 2);
		struct proxy_header h;
		char got[128];
		proxy_show(parse_exact(line, lines[i].len, &h), &h, got, sizeof(got));
		is_str(got, lines[i].want, "v1: a line of %zu bytes, %s", lines[i].len,
		       lines[i].crlf ? "its CRLF last" : "no CRLF yet");
	}
}

int main(void)
{
	static unsigned char buf[4096];
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		memset(buf, 0, sizeof(buf));
		size_t n = rows[i].text ? untext(rows[i].text, buf) : unhex(rows[i].hex, buf);
		struct proxy_header h;
		char got[512];
		enum proxy_result r = parse_exact(buf, n, &h);
		proxy_show(r, &h, got, sizeof(got));
		is_str(got, rows[i].want, "%s", rows[i].name);
		/* A header cut anywhere (a byte at a time) is waited for,
		 * whole or broken: every prefix says "more", or the same
		 * verdict once the bytes that decide it are there. */
		if (r == PROXY_OK) {
			size_t cut = 0;
			for (size_t k = 0; k < h.len && !cut; k++) {
				struct proxy_header p;
				if (parse_exact(buf, k, &p) != PROXY_MORE)
					cut = k + 1;
			}
			ok(cut == 0, "...every prefix of it waits for more%s",
			   cut ? " (not the one cut short)" : "");
		}
	}
	v1_lengths();
	/* A v2 header of exactly PROXY_V2_MAX bytes: one TLV filling it. */
	size_t n = unhex(SIG "21 11 07f0 01020304 05060708 0001 0002 0107e1", buf);
	memset(buf + n, 'x', 2017);
	struct proxy_header h;
	char got[512];
	proxy_show(proxy_parse(buf, n + 2017, &h), &h, got, sizeof(got));
	is_str(got, "ok 2048 address 1.2.3.4:1 5.6.7.8:2", "v2: a header of exactly 2048 bytes is read");
	/* An embedded NUL would hide the rest of an address from inet_pton. */
	n = untext("PROXY TCP4 1.2.3.4", buf);
	memcpy(buf + n, "\0x 5.6.7.8 1 2\r\n", 16);
	proxy_show(proxy_parse(buf, n + 16, &h), &h, got, sizeof(got));
	is_str(got, "bad: v1 address malformed", "v1: a NUL inside an address");
	struct sockaddr_storage ss;
	struct proxy_addr a = { .family = AF_INET, .port = 8090, .ip = { 10, 0, 0, 1 } };
	socklen_t len = proxy_addr_sockaddr(&a, &ss);
	ok(len == sizeof(struct sockaddr_in) && ss.ss_family == AF_INET &&
		   ((struct sockaddr_in *)&ss)->sin_port == htons(8090),
	   "an IPv4 address as a socket address");
	a.family = AF_UNSPEC;
	len = proxy_addr_sockaddr(&a, &ss);
	ok(len == sizeof(sa_family_t) && ss.ss_family == AF_UNSPEC, "no address: AF_UNSPEC");
	return done_testing();
}
