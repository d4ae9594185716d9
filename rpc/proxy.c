/* SPDX-License-Identifier: Apache-2.0 */
#include "rpc/proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

static const unsigned char v2_sig[PROXY_V2_SIG_LEN] = { 0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d,
							0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a };
static const char v1_sig[] = "PROXY ";
#define V1_SIG_LEN (sizeof(v1_sig) - 1)
/* The 16 bytes before a version 2 header's addresses. */
#define V2_HEAD 16
/* A TLV's type and length. */
#define TLV_HEAD 3
/* Its address block, by family: IPv4, IPv6 (addresses and ports), AF_UNIX. */
#define V2_INET_LEN 12
#define V2_INET6_LEN 36
#define V2_UNIX_LEN 216
/* The longest address text of either family (IPv6 with an IPv4 tail). */
#define V1_ADDRESS_TEXT 45

static enum proxy_result bad(struct proxy_header *out, enum proxy_why why)
{
	out->why = why;
	return PROXY_BAD;
}

/* Whether p[0..n) is sig, or its first n bytes. */
static bool starts(const unsigned char *p, size_t n, const void *sig, size_t len)
{
	return memcmp(p, sig, n < len ? n : len) == 0;
}

/* A port: decimal digits, no leading zero, at most 65535 (checked at each
 * digit, so that no number of digits can wrap around). */
static bool v1_port(const unsigned char *p, size_t n, uint16_t *out)
{
	unsigned v = 0;
	if (n == 0 || (n > 1 && p[0] == '0'))
		return false;
	for (size_t i = 0; i < n; i++) {
		if (p[i] < '0' || p[i] > '9')
			return false;
		v = v * 10 + (unsigned)(p[i] - '0');
		if (v > 65535)
			return false;
	}
	*out = (uint16_t)v;
	return true;
}

/* An address of family af, in the form inet_pton(3) reads (for IPv4 that
 * is the specification's: four numbers without leading zeros). */
static bool v1_address(const unsigned char *p, size_t n, int af, struct proxy_addr *out)
{
	char text[V1_ADDRESS_TEXT + 1];
	/* inet_pton reads up to a NUL: one inside the field would hide the
	 * rest of it. */
	if (n > V1_ADDRESS_TEXT || memchr(p, '\0', n))
		return false;
	memcpy(text, p, n);
	text[n] = '\0';
	out->family = (sa_family_t)af;
	return inet_pton(af, text, out->ip) == 1;
}

/* The line's fields after "PROXY TCP4 " or "TCP6 ", line[0..n) without its
 * CRLF: source, destination, source port, destination port, each not
 * empty, one space apart, the last one up to the line's end. */
static enum proxy_result v1_fields(const unsigned char *line, size_t n, int af,
				   struct proxy_header *out)
{
	const unsigned char *field[4], *at = line, *end = line + n;
	size_t len[4];
	for (int f = 0; f < 4; f++) {
		const unsigned char *space = f < 3 ? memchr(at, ' ', (size_t)(end - at)) : end;
		if (!space || space == at)
			return bad(out, PROXY_V1_FIELDS);
		field[f] = at;
		len[f] = (size_t)(space - at);
		at = space + 1;
	}
	if (memchr(field[3], ' ', len[3]))
		return bad(out, PROXY_V1_FIELDS);
	if (!v1_address(field[0], len[0], af, &out->src) ||
	    !v1_address(field[1], len[1], af, &out->dst))
		return bad(out, PROXY_V1_ADDRESS);
	if (!v1_port(field[2], len[2], &out->src.port) || !v1_port(field[3], len[3], &out->dst.port))
		return bad(out, PROXY_V1_PORT);
	out->kind = PROXY_ADDRESS;
	return PROXY_OK;
}

/* p starts with "PROXY ": the line is read once its CRLF is there, and not
 * a byte after it. */
static enum proxy_result v1(const unsigned char *p, size_t n, struct proxy_header *out)
{
	size_t end = 0; /* the CR's place */
	out->version = 1;
	for (size_t i = V1_SIG_LEN; !end; i++) {
		if (i + 1 >= PROXY_V1_MAX && (i >= n || p[i] != '\r'))
			return bad(out, PROXY_V1_TOO_LONG);
		if (i >= n)
			return PROXY_MORE;
		if (p[i] == '\n')
			return bad(out, PROXY_V1_LINE_END);
		if (p[i] != '\r')
			continue;
		if (i + 1 >= PROXY_V1_MAX)
			return bad(out, PROXY_V1_TOO_LONG);
		if (i + 1 == n)
			return PROXY_MORE;
		if (p[i + 1] != '\n')
			return bad(out, PROXY_V1_LINE_END);
		end = i;
	}
	out->len = end + 2;
	const unsigned char *proto = p + V1_SIG_LEN;
	size_t left = end - V1_SIG_LEN;
	/* UNKNOWN: whatever follows it on the line is ignored. */
	if (left >= 7 && memcmp(proto, "UNKNOWN", 7) == 0 && (left == 7 || proto[7] == ' ')) {
		out->kind = PROXY_UNKNOWN;
		return PROXY_OK;
	}
	if (left < 5 || (memcmp(proto, "TCP4 ", 5) != 0 && memcmp(proto, "TCP6 ", 5) != 0))
		return bad(out, PROXY_V1_PROTOCOL);
	return v1_fields(proto + 5, left - 5, proto[3] == '4' ? AF_INET : AF_INET6, out);
}

/* Each TLV of p[off..total) fits: its type and length, then its value. */
static bool v2_tlvs_fit(const unsigned char *p, size_t off, size_t total)
{
	while (off < total) {
		if (total - off < TLV_HEAD)
			return false;
		size_t value = (size_t)p[off + 1] << 8 | p[off + 2];
		if (total - off - TLV_HEAD < value)
			return false;
		off += TLV_HEAD + value;
	}
	return true;
}

/* p starts with the 12-byte signature: the version, the command, the family
 * and transport and the length first, then, once all of it is there, the
 * addresses and TLVs. */
static enum proxy_result v2(const unsigned char *p, size_t n, struct proxy_header *out)
{
	out->version = 2;
	if (n < V2_HEAD)
		return PROXY_MORE;
	unsigned version = p[12] >> 4, command = p[12] & 0xf;
	unsigned family = p[13] >> 4, transport = p[13] & 0xf;
	size_t total = V2_HEAD + ((size_t)p[14] << 8 | p[15]);
	if (version != 2)
		return bad(out, PROXY_V2_VERSION);
	if (command > 1)
		return bad(out, PROXY_V2_COMMAND);
	/* LOCAL: the proxy's own connection; its block, family included, is
	 * skipped whatever it holds. */
	if (command == 1 && (family > 3 || transport > 2))
		return bad(out, PROXY_V2_FAMILY);
	if (total > PROXY_V2_MAX)
		return bad(out, PROXY_V2_TOO_LONG);
	/* The address block a PROXY header of its family and transport holds;
	 * none for LOCAL or UNSPEC. */
	size_t need = command == 0 || transport == 0 ? 0
		      : family == 1		     ? V2_INET_LEN
		      : family == 2		     ? V2_INET6_LEN
		      : family == 3		     ? V2_UNIX_LEN
						     : 0;
	if (total - V2_HEAD < need)
		return bad(out, PROXY_V2_ADDRESS_SHORT);
	if (n < total)
		return PROXY_MORE;
	out->len = total;
	if (command == 0) {
		out->kind = PROXY_LOCAL;
		return PROXY_OK;
	}
	/* UNSPEC (family or transport), AF_UNIX: no client address. */
	if ((family != 1 && family != 2) || transport == 0) {
		out->kind = PROXY_UNKNOWN;
		return PROXY_OK;
	}
	size_t ip = family == 1 ? 4 : 16;
	const unsigned char *a = p + V2_HEAD;
	out->src.family = out->dst.family = family == 1 ? AF_INET : AF_INET6;
	memcpy(out->src.ip, a, ip);
	memcpy(out->dst.ip, a + ip, ip);
	out->src.port = (uint16_t)(a[2 * ip] << 8 | a[2 * ip + 1]);
	out->dst.port = (uint16_t)(a[2 * ip + 2] << 8 | a[2 * ip + 3]);
	if (!v2_tlvs_fit(p, V2_HEAD + need, total))
		return bad(out, PROXY_V2_TLV);
	out->kind = PROXY_ADDRESS;
	return PROXY_OK;
}

enum proxy_result proxy_parse(const unsigned char *p, size_t n, struct proxy_header *out)
{
	*out = (struct proxy_header){ .kind = PROXY_UNKNOWN, .why = PROXY_WHY_NONE };
	/* Nothing yet is the start of either signature: more. */
	if (starts(p, n, v2_sig, PROXY_V2_SIG_LEN))
		return n < PROXY_V2_SIG_LEN ? PROXY_MORE : v2(p, n, out);
	if (starts(p, n, v1_sig, V1_SIG_LEN))
		return n < V1_SIG_LEN ? PROXY_MORE : v1(p, n, out);
	return PROXY_NONE;
}

const char *proxy_why_name(enum proxy_why why)
{
	switch (why) {
	case PROXY_WHY_NONE: break;
	case PROXY_V1_TOO_LONG: return "v1 line longer than 107 bytes";
	case PROXY_V1_LINE_END: return "v1 line end not CRLF";
	case PROXY_V1_PROTOCOL: return "v1 protocol not TCP4, TCP6 or UNKNOWN";
	case PROXY_V1_FIELDS: return "v1 fields not four, one space apart";
	case PROXY_V1_ADDRESS: return "v1 address malformed";
	case PROXY_V1_PORT: return "v1 port malformed";
	case PROXY_V2_VERSION: return "v2 version not 2";
	case PROXY_V2_COMMAND: return "v2 command neither LOCAL nor PROXY";
	case PROXY_V2_FAMILY: return "v2 family or transport unknown";
	case PROXY_V2_TOO_LONG: return "v2 header longer than 2048 bytes";
	case PROXY_V2_ADDRESS_SHORT: return "v2 length shorter than its addresses";
	case PROXY_V2_TLV: return "v2 TLV past the header's end";
	}
	return "no error";
}

socklen_t proxy_addr_sockaddr(const struct proxy_addr *a, struct sockaddr_storage *out)
{
	memset(out, 0, sizeof(*out));
	if (a->family == AF_INET) {
		struct sockaddr_in *in = (struct sockaddr_in *)out;
		in->sin_family = AF_INET;
		in->sin_port = htons(a->port);
		memcpy(&in->sin_addr, a->ip, 4);
		return sizeof(*in);
	}
	if (a->family == AF_INET6) {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)out;
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons(a->port);
		memcpy(&in6->sin6_addr, a->ip, 16);
		return sizeof(*in6);
	}
	out->ss_family = AF_UNSPEC;
	return sizeof(sa_family_t);
}
