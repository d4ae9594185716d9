/* SPDX-License-Identifier: Apache-2.0 */
/* The PROXY header reader (rpc/proxy.c, proxy_parse): a connection's first
 * bytes on a port the app declared with "pp": true. Layout: the bytes, as
 * they come. The seeds (fuzz/corpus/proxy) include headers written by
 * haproxy itself (send-proxy, send-proxy-v2 with its TLV options).
 * Oracles, besides ASan's over the exact bytes:
 *   - the specification's reading, written again here from
 *     doc/proxy-protocol.txt the way its section 9 sample reads a header (a
 *     struct laid over version 2, sscanf and inet_pton over a version 1
 *     line) rather than as rpc/proxy.c does: the same verdict (no header,
 *     more, a header, a bad one), the same length and the same addresses;
 *   - bytes cut anywhere: every prefix shorter than what decided the
 *     verdict says "more", and every longer one the same verdict, so that
 *     a header read a byte at a time is read whole, and nothing past the
 *     bytes that decided it is ever looked at (a whole header parsed again
 *     from exactly its own bytes gives the same answer);
 *   - a header read as an address, written again (version 2 and version 1,
 *     by a writer here) and read back, gives the same address.
 */
#include <arpa/inet.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz/fuzz.h"
#include "rpc/proxy.h"

static const unsigned char sig[12] = "\r\n\r\n\0\r\nQUIT\n";

struct verdict {
	enum proxy_result r;
	size_t len;
	enum proxy_kind kind;
	struct proxy_addr src, dst;
};

static struct verdict more(void)
{
	return (struct verdict){ .r = PROXY_MORE };
}

static struct verdict bad(void)
{
	return (struct verdict){ .r = PROXY_BAD };
}

/* The specification's version 2, read through a struct. */
struct v2_head {
	uint8_t sig[12];
	uint8_t ver_cmd, fam;
	uint16_t len;
};

static struct verdict spec_v2(const uint8_t *p, size_t n)
{
	struct v2_head h;
	if (n < sizeof(h))
		return more();
	memcpy(&h, p, sizeof(h));
	size_t size = 16 + ntohs(h.len);
	unsigned cmd = h.ver_cmd & 0xf, fam = h.fam >> 4, proto = h.fam & 0xf;
	if ((h.ver_cmd & 0xf0) != 0x20 || cmd > 1)
		return bad();
	if (cmd == 1 && (fam > 3 || proto > 2))
		return bad();
	if (size > PROXY_V2_MAX)
		return bad();
	size_t addrs = 0;
	if (cmd == 1 && proto != 0)
		addrs = fam == 1 ? 12 : fam == 2 ? 36 : fam == 3 ? 216 : 0;
	if (size - 16 < addrs)
		return bad();
	if (n < size)
		return more();
	struct verdict v = { .r = PROXY_OK, .len = size, .kind = PROXY_UNKNOWN };
	if (cmd == 0) {
		v.kind = PROXY_LOCAL;
		return v;
	}
	if ((fam != 1 && fam != 2) || proto == 0)
		return v;
	size_t ip = fam == 1 ? 4 : 16;
	v.kind = PROXY_ADDRESS;
	v.src.family = v.dst.family = fam == 1 ? AF_INET : AF_INET6;
	memcpy(v.src.ip, p + 16, ip);
	memcpy(v.dst.ip, p + 16 + ip, ip);
	uint16_t ports[2];
	memcpy(ports, p + 16 + 2 * ip, 4);
	v.src.port = ntohs(ports[0]);
	v.dst.port = ntohs(ports[1]);
	for (size_t at = 16 + addrs; at < size;) {
		if (size - at < 3 || size - at - 3 < (size_t)(p[at + 1] * 256 + p[at + 2]))
			return bad();
		at += 3 + (size_t)(p[at + 1] * 256 + p[at + 2]);
	}
	return v;
}

/* A port as the specification writes it: digits, no leading zero, at most
 * 65535; read with strtoul and printed back to compare. */
static bool spec_port(const char *s, uint16_t *out)
{
	char *end, back[8];
	if (!*s || strspn(s, "0123456789") != strlen(s) || strlen(s) > 5)
		return false;
	unsigned long v = strtoul(s, &end, 10);
	snprintf(back, sizeof(back), "%lu", v);
	if (v > 65535 || strcmp(back, s) != 0)
		return false;
	*out = (uint16_t)v;
	return true;
}

static struct verdict spec_v1(const uint8_t *p, size_t n)
{
	/* The first CR or LF: a CRLF there ends the line, anything else is
	 * wrong; none in the first 105 bytes after which a CRLF could fit. */
	size_t e = 6;
	while (e < n && e < 105 && p[e] != '\r' && p[e] != '\n')
		e++;
	if (e == n && n < 106)
		return more();
	if (e >= 106 || (e < n && p[e] == '\n') || (e == 105 && p[e] != '\r'))
		return bad();
	if (e + 1 == n)
		return more();
	if (p[e + 1] != '\n')
		return bad();
	char line[128];
	memcpy(line, p + 6, e - 6);
	line[e - 6] = '\0';
	bool nul = memchr(p + 6, 0, e - 6) != NULL;
	struct verdict v = { .r = PROXY_OK, .len = e + 2, .kind = PROXY_UNKNOWN };
	if (!strncmp(line, "UNKNOWN", 7) && (e - 6 == 7 || line[7] == ' '))
		return v;
	if (nul || (strncmp(line, "TCP4 ", 5) && strncmp(line, "TCP6 ", 5)))
		return bad();
	char a[64], b[64], c[16], d[16], again[128];
	int af = line[3] == '4' ? AF_INET : AF_INET6;
	if (sscanf(line + 5, "%63s %63s %15s %15s", a, b, c, d) != 4)
		return bad();
	snprintf(again, sizeof(again), "%s %s %s %s", a, b, c, d);
	if (strcmp(again, line + 5) != 0)
		return bad(); /* not one space apart, or more fields */
	v.kind = PROXY_ADDRESS;
	v.src.family = v.dst.family = (sa_family_t)af;
	if (inet_pton(af, a, v.src.ip) != 1 || inet_pton(af, b, v.dst.ip) != 1 ||
	    !spec_port(c, &v.src.port) || !spec_port(d, &v.dst.port))
		return bad();
	return v;
}

static struct verdict spec(const uint8_t *p, size_t n)
{
	if (memcmp(p, sig, n < 12 ? n : 12) == 0)
		return n < 12 ? more() : spec_v2(p, n);
	if (memcmp(p, "PROXY ", n < 6 ? n : 6) == 0)
		return n < 6 ? more() : spec_v1(p, n);
	return (struct verdict){ .r = PROXY_NONE };
}

/* proxy_parse over exactly p[0..n): a copy ASan bounds. */
static struct verdict ours(const uint8_t *p, size_t n)
{
	struct proxy_header h;
	uint8_t *copy = malloc(n ? n : 1);
	if (!copy)
		abort();
	memcpy(copy, p, n);
	struct verdict v = { .r = proxy_parse(copy, n, &h) };
	free(copy);
	if (v.r == PROXY_OK) {
		v.len = h.len;
		v.kind = h.kind;
		if (h.kind == PROXY_ADDRESS) {
			v.src = h.src;
			v.dst = h.dst;
		}
	}
	return v;
}

static bool same_addr(const struct proxy_addr *a, const struct proxy_addr *b)
{
	size_t ip = a->family == AF_INET ? 4 : 16;
	return a->family == b->family && a->port == b->port && !memcmp(a->ip, b->ip, ip);
}

static bool same(const struct verdict *a, const struct verdict *b)
{
	if (a->r != b->r)
		return false;
	if (a->r != PROXY_OK)
		return true;
	return a->len == b->len && a->kind == b->kind &&
	       (a->kind != PROXY_ADDRESS || (same_addr(&a->src, &b->src) && same_addr(&a->dst, &b->dst)));
}

/* The address written again, as version 2 and as version 1, read back. */
static void round_trip(const struct verdict *v)
{
	uint8_t buf[128];
	size_t ip = v->src.family == AF_INET ? 4 : 16;
	memcpy(buf, sig, 12);
	buf[12] = 0x21;
	buf[13] = v->src.family == AF_INET ? 0x11 : 0x21;
	buf[14] = 0;
	buf[15] = (uint8_t)(2 * ip + 4);
	memcpy(buf + 16, v->src.ip, ip);
	memcpy(buf + 16 + ip, v->dst.ip, ip);
	uint16_t ports[2] = { htons(v->src.port), htons(v->dst.port) };
	memcpy(buf + 16 + 2 * ip, ports, 4);
	struct verdict w = ours(buf, 16 + 2 * ip + 4);
	if (w.r != PROXY_OK || !same_addr(&w.src, &v->src) || !same_addr(&w.dst, &v->dst))
		__builtin_trap();
	char s[INET6_ADDRSTRLEN], d[INET6_ADDRSTRLEN];
	int af = v->src.family;
	int len = snprintf((char *)buf, sizeof(buf), "PROXY %s %s %s %u %u\r\n",
			   af == AF_INET ? "TCP4" : "TCP6", inet_ntop(af, v->src.ip, s, sizeof(s)),
			   inet_ntop(af, v->dst.ip, d, sizeof(d)), v->src.port, v->dst.port);
	w = ours(buf, (size_t)len);
	if (len > PROXY_V1_MAX)
		return; /* an IPv6 pair printed with an IPv4 tail may not fit */
	if (w.r != PROXY_OK || w.len != (size_t)len || !same_addr(&w.src, &v->src) ||
	    !same_addr(&w.dst, &v->dst))
		__builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct verdict whole = ours(data, size), want = spec(data, size);
	if (!same(&whole, &want))
		__builtin_trap();
	/* Cut anywhere: "more" until the verdict is decided, then the same. */
	bool decided = false;
	for (size_t k = 0; k <= size; k++) {
		struct verdict v = ours(data, k);
		if (v.r == PROXY_MORE) {
			if (decided)
				__builtin_trap();
			continue;
		}
		decided = true;
		if (!same(&v, &whole))
			__builtin_trap();
		if (v.r == PROXY_OK)
			break; /* the bytes after the header are never looked at */
	}
	if (whole.r == PROXY_OK) {
		struct verdict exact = ours(data, whole.len);
		if (!same(&exact, &whole))
			__builtin_trap();
		if (whole.kind == PROXY_ADDRESS)
			round_trip(&whole);
	}
	return 0;
}
