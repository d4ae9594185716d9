/* SPDX-License-Identifier: Apache-2.0 */
/* The HPACK decoder (probe/hpack.c, issue 42), against what nobody here
 * wrote: RFC 7541's own examples (Appendix C), header blocks that Debian's
 * python3-hpack and python3-h2 encode at test time
 * (tests/lib/hpack_vectors.py), blocks that libnghttp2's deflater encodes,
 * and libnghttp2's inflater on every block and on damaged copies of them
 * (fuzz/hpack_oracle.h). Then every rule of the decoder, one row each. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "probe/hpack.h"
#include "tests/lib/tap.h"
#ifdef HAVE_NGHTTP2
#include "fuzz/hpack_oracle.h"
#endif

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* Hex digits, spaces skipped, into out; the byte count. */
static size_t unhex(const char *hex, uint8_t *out, size_t cap)
{
	size_t n = 0;
	for (const char *p = hex; *p && n < cap;) {
		if (*p == ' ') {
			p++;
			continue;
		}
		unsigned v;
		if (sscanf(p, "%2x", &v) != 1)
			break;
		out[n++] = (uint8_t)v;
		p += 2;
	}
	return n;
}

/* A decoded list as text: "name: value\n" each, bytes outside printable
 * ASCII as \xNN. */
struct text {
	char s[16384];
	size_t len;
};

static void put_text(struct text *t, const char *b, size_t n)
{
	for (size_t i = 0; i < n && t->len + 5 < sizeof(t->s); i++) {
		unsigned char c = (unsigned char)b[i];
		if (c < 0x20 || c >= 0x7f || c == '\\')
			t->len += (size_t)snprintf(t->s + t->len, 5, "\\x%02x", c);
		else
			t->s[t->len++] = (char)c;
	}
	t->s[t->len] = '\0';
}

/* Separators, as they are. */
static void put_raw(struct text *t, const char *s)
{
	size_t n = strlen(s);
	if (t->len + n < sizeof(t->s)) {
		memcpy(t->s + t->len, s, n + 1);
		t->len += n;
	}
}

static void emit_text(void *arg, const struct hpack_field *f)
{
	struct text *t = arg;
	put_text(t, f->name, f->name_len);
	put_raw(t, ": ");
	put_text(t, f->value, f->value_len);
	put_raw(t, "\n");
}

static enum hpack_error decode_bytes(struct hpack *h, const uint8_t *b, size_t n, struct text *t)
{
	t->len = 0;
	t->s[0] = '\0';
	return hpack_decode(h, b, n, emit_text, t);
}

static enum hpack_error decode_hex(struct hpack *h, const char *hex, struct text *t)
{
	static uint8_t b[8192];
	return decode_bytes(h, b, unhex(hex, b, sizeof(b)), t);
}

/* The dynamic table, newest first, as the list its indices decode to. */
static void table_text(struct hpack *h, struct text *t)
{
	uint8_t b[3 * HPACK_MAX_ENTRIES];
	size_t n = 0;
	for (unsigned i = 1; i <= h->count; i++) {
		unsigned index = HPACK_STATIC_ENTRIES + i;
		if (index < 127) {
			b[n++] = (uint8_t)(0x80 | index);
		} else {
			b[n++] = 0xff;
			b[n++] = (uint8_t)(index - 127);
		}
	}
	decode_bytes(h, b, n, t);
}

static const char *error_name(enum hpack_error e)
{
	static const char *const t[HPACK_N_ERRORS] = {
		"HPACK_OK", "HPACK_E_TRUNCATED", "HPACK_E_INTEGER", "HPACK_E_INDEX_ZERO",
		"HPACK_E_INDEX", "HPACK_E_SIZE_UPDATE_LATE", "HPACK_E_SIZE_UPDATE_OVER",
		"HPACK_E_HUFFMAN_EOS", "HPACK_E_HUFFMAN_PADDING", "HPACK_E_NAME_TOO_LONG",
		"HPACK_E_VALUE_TOO_LONG",
	};
	return (unsigned)e < HPACK_N_ERRORS ? t[e] : "?";
}

/* ---- RFC 7541 Appendix C ---- */

struct rfc_block {
	const char *hex, *fields, *table;
	unsigned size;
};
struct rfc_seq {
	const char *name;
	struct rfc_block b[3];
};

#define C5_DATE1 "date: Mon, 21 Oct 2013 20:13:21 GMT\n"
#define C5_DATE2 "date: Mon, 21 Oct 2013 20:13:22 GMT\n"
#define C5_LOC "location: https://www.example.com\n"
#define C5_COOKIE "set-cookie: foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1\n"
#define C3_REQ1 ":method: GET\n:scheme: http\n:path: /\n:authority: www.example.com\n"
#define C3_REQ3 ":method: GET\n:scheme: https\n:path: /index.html\n:authority: www.example.com\n" \
		"custom-key: custom-value\n"
#define C3_T2 "cache-control: no-cache\n:authority: www.example.com\n"
#define C5_R1 ":status: 302\ncache-control: private\n" C5_DATE1 C5_LOC
#define C5_R2 ":status: 307\ncache-control: private\n" C5_DATE1 C5_LOC
#define C5_R3 ":status: 200\ncache-control: private\n" C5_DATE2 C5_LOC \
	      "content-encoding: gzip\n" C5_COOKIE
#define C5_T1 C5_LOC C5_DATE1 "cache-control: private\n:status: 302\n"
#define C5_T2 ":status: 307\n" C5_LOC C5_DATE1 "cache-control: private\n"
#define C5_T3 C5_COOKIE "content-encoding: gzip\n" C5_DATE2
/* C.5 and C.6 assume a table of 256 bytes agreed beforehand; here a size
 * update (3fe101: 256) at the first block's start says so. */
#define TO_256 "3fe101 "

static const struct rfc_seq rfc[] = {
	{ "C.2.1 literal with indexing",
	  { { "400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572",
	      "custom-key: custom-header\n", "custom-key: custom-header\n", 55 } } },
	{ "C.2.2 literal without indexing",
	  { { "040c 2f73 616d 706c 652f 7061 7468", ":path: /sample/path\n", "", 0 } } },
	{ "C.2.3 literal never indexed",
	  { { "1008 7061 7373 776f 7264 0673 6563 7265 74", "password: secret\n", "", 0 } } },
	{ "C.2.4 indexed", { { "82", ":method: GET\n", "", 0 } } },
	{ "C.3 requests without Huffman",
	  { { "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d", C3_REQ1,
	      ":authority: www.example.com\n", 57 },
	    { "8286 84be 5808 6e6f 2d63 6163 6865", C3_REQ1 "cache-control: no-cache\n", C3_T2,
	      110 },
	    { "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65", C3_REQ3,
	      "custom-key: custom-value\n" C3_T2, 164 } } },
	{ "C.4 requests with Huffman",
	  { { "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff", C3_REQ1,
	      ":authority: www.example.com\n", 57 },
	    { "8286 84be 5886 a8eb 1064 9cbf", C3_REQ1 "cache-control: no-cache\n", C3_T2, 110 },
	    { "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf", C3_REQ3,
	      "custom-key: custom-value\n" C3_T2, 164 } } },
	{ "C.5 responses without Huffman (table of 256)",
	  { { TO_256 "4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 "
		     "3133 2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 "
		     "7861 6d70 6c65 2e63 6f6d",
	      C5_R1, C5_T1, 222 },
	    { "4803 3330 37c1 c0bf", C5_R2, C5_T2, 222 },
	    { "88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d "
	      "54c0 5a04 677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049 "
	      "5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 3630 303b 2076 6572 7369 6f6e "
	      "3d31",
	      C5_R3, C5_T3, 215 } } },
	{ "C.6 responses with Huffman (table of 256)",
	  { { TO_256 "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 "
		     "82a6 2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
	      C5_R1, C5_T1, 222 },
	    { "4883 640e ffc1 c0bf", C5_R2, C5_T2, 222 },
	    { "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab "
	      "77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f "
	      "9587 3160 65c0 03ed 4ee5 b106 3d50 07",
	      C5_R3, C5_T3, 215 } } },
};

static void test_rfc(void)
{
	for (size_t i = 0; i < NELEM(rfc); i++) {
		struct hpack h;
		hpack_init(&h);
		for (size_t k = 0; k < NELEM(rfc[i].b) && rfc[i].b[k].hex; k++) {
			const struct rfc_block *b = &rfc[i].b[k];
			struct text t;
			enum hpack_error e = decode_hex(&h, b->hex, &t);
			is_str(error_name(e), "HPACK_OK", "RFC 7541 %s, block %zu: decoded", rfc[i].name,
			       k + 1);
			is_str(t.s, b->fields, "RFC 7541 %s, block %zu: the header list", rfc[i].name,
			       k + 1);
			table_text(&h, &t);
			is_str(t.s, b->table, "RFC 7541 %s, block %zu: the dynamic table", rfc[i].name,
			       k + 1);
			is_int(h.size, b->size, "RFC 7541 %s, block %zu: the table's size", rfc[i].name,
			       k + 1);
		}
	}
}

/* ---- Every rule, one row each ---- */

struct edge {
	const char *name;
	const char *setup; /* decoded first, on the same decoder; must decode */
	const char *hex;
	enum hpack_error want;
	const char *fields; /* what was handed out (before the error, if any) */
};

static const struct edge edges[] = {
	/* Integers (§5.1) */
	{ "an index of 5 bits' prefix and one octet: 1337 (C.1.2) as a table size", NULL,
	  "3f9a0a 82", HPACK_OK, ":method: GET\n" },
	{ "index 65535, the integer bound: past the tables", NULL, "ff80ff03", HPACK_E_INDEX, "" },
	{ "index 65536: over the integer bound", NULL, "ff81ff03", HPACK_E_INTEGER, "" },
	{ "an integer of 5 octets after its prefix (zeros): 127", NULL, "ff8080808000",
	  HPACK_E_INDEX, "" },
	{ "an integer of 6 octets after its prefix", NULL, "ff808080808000", HPACK_E_INTEGER, "" },
	{ "an integer whose continuation is missing", NULL, "ff", HPACK_E_TRUNCATED, "" },
	{ "an integer cut after a continuation octet", NULL, "ff80", HPACK_E_TRUNCATED, "" },
	{ "an integer of one byte at the prefix's largest less one: index 126", NULL, "fe",
	  HPACK_E_INDEX, "" },
	/* Indices (§2.3.3, §6.1) */
	{ "index 0", NULL, "80", HPACK_E_INDEX_ZERO, "" },
	{ "a literal's name at index 0 is a new name", NULL, "0001610162", HPACK_OK, "a: b\n" },
	{ "index 61, the static table's last", NULL, "bd", HPACK_OK, "www-authenticate: \n" },
	{ "index 62 with an empty dynamic table", NULL, "be", HPACK_E_INDEX, "" },
	{ "index 62: the newest entry", "40016101314001620132", "be", HPACK_OK, "b: 2\n" },
	{ "index 63: the entry before it", "40016101314001620132", "bf", HPACK_OK, "a: 1\n" },
	{ "index 64 past two entries", "40016101314001620132", "c0", HPACK_E_INDEX, "" },
	{ "a literal's name from the dynamic table", "4001610131", "7e0132", HPACK_OK, "a: 2\n" },
	{ "a literal's name index past the tables", NULL, "7e0132", HPACK_E_INDEX, "" },
	{ "a literal without indexing leaves no entry", "0001610131", "be", HPACK_E_INDEX, "" },
	{ "a never-indexed literal leaves no entry", "1001610131", "be", HPACK_E_INDEX, "" },
	{ "a never-indexed literal with an indexed name", NULL, "1f0803736563", HPACK_OK,
	  "authorization: sec\n" },
	/* Strings (§5.2) */
	{ "a literal cut inside its name", NULL, "400361", HPACK_E_TRUNCATED, "" },
	{ "a literal cut before its value", NULL, "41", HPACK_E_TRUNCATED, "" },
	{ "a literal cut before its name's length", NULL, "40", HPACK_E_TRUNCATED, "" },
	{ "a value one byte short", NULL, "410361", HPACK_E_TRUNCATED, "" },
	{ "an empty name and value", NULL, "000000", HPACK_OK, ": \n" },
	{ "an empty Huffman string", NULL, "008000", HPACK_OK, ": \n" },
	{ "fields before an error are handed out", NULL, "8280", HPACK_E_INDEX_ZERO,
	  ":method: GET\n" },
	/* Huffman (§5.2, Appendix B) */
	{ "Huffman 'a' and 3 bits of EOS's ones", NULL, "00811f00", HPACK_OK, "a: \n" },
	{ "Huffman 'aaaaa' and 7 bits of padding", NULL, "008418c631ff00", HPACK_OK, "aaaaa: \n" },
	{ "Huffman padding of 8 ones", NULL, "00821fff00", HPACK_E_HUFFMAN_PADDING, "" },
	{ "Huffman padding of a whole byte of ones after 8 symbols", NULL, "00860000000000ff00",
	  HPACK_E_HUFFMAN_PADDING, "" },
	{ "8 symbols of 5 bits and no padding", NULL, "0085000000000000", HPACK_OK, "00000000: \n" },
	{ "Huffman padding of zeros", NULL, "00811800", HPACK_E_HUFFMAN_PADDING, "" },
	{ "Huffman padding of ones then a zero", NULL, "00811e00", HPACK_E_HUFFMAN_PADDING, "" },
	{ "EOS inside a Huffman string", NULL, "0084ffffffff00", HPACK_E_HUFFMAN_EOS, "" },
	{ "EOS then a symbol", NULL, "0085fffffffc7f00", HPACK_E_HUFFMAN_EOS, "" },
	{ "the longest codes: \\n, \\r and 0x16 (30 bits)", NULL,
	  "008c" "fffffff3ffffffdfffffffbf" "00", HPACK_OK, "\\x0a\\x0d\\x16: \n" },
	/* Table size updates (§4.2, §6.3) */
	{ "a size update at the start", NULL, "3fe11f82", HPACK_OK, ":method: GET\n" },
	{ "two size updates at the start", NULL, "203fe11f82", HPACK_OK, ":method: GET\n" },
	{ "a size update after a field", NULL, "8220", HPACK_E_SIZE_UPDATE_LATE, ":method: GET\n" },
	{ "a size update after a literal", NULL, "000161016220", HPACK_E_SIZE_UPDATE_LATE,
	  "a: b\n" },
	{ "a size update of 4097", NULL, "3fe21f", HPACK_E_SIZE_UPDATE_OVER, "" },
	{ "a size update cut", NULL, "3f", HPACK_E_TRUNCATED, "" },
	{ "a size update of 0 empties the table", "40016101314001620132", "20be", HPACK_E_INDEX,
	  "" },
	{ "a size update keeps what fits: the newest entry", "40016101314001620132", "3f03be",
	  HPACK_OK, "b: 2\n" },
	{ "... and evicts the oldest", "40016101314001620132", "3f03bf", HPACK_E_INDEX, "" },
	{ "an entry over the table's size (42 of 40) empties it, and is not added",
	  "3f09 4001610131", "40016309313233343536373839 be", HPACK_E_INDEX, "c: 123456789\n" },
	{ "an entry of exactly the table's size (40) is added", "3f09 4001610131",
	  "40016307 31323334353637 be", HPACK_OK, "c: 1234567\nc: 1234567\n" },
};

static void test_edges(void)
{
	for (size_t i = 0; i < NELEM(edges); i++) {
		const struct edge *c = &edges[i];
		struct hpack h;
		struct text t;
		hpack_init(&h);
		if (c->setup && decode_hex(&h, c->setup, &t) != HPACK_OK)
			ok(0, "%s: the setup decodes", c->name);
		enum hpack_error e = decode_hex(&h, c->hex, &t);
		is_str(error_name(e), error_name(c->want), "%s", c->name);
		is_str(t.s, c->fields, "%s: the fields handed out", c->name);
	}
}

/* Strings at and over their bounds, plain and Huffman-coded. */
static void test_string_bounds(void)
{
	static uint8_t b[4 + HPACK_MAX_VALUE + 8];
	struct hpack h;
	struct text t;
	const struct {
		const char *name;
		bool value, huffman;
		size_t len;
		enum hpack_error want;
	} rows[] = {
		{ "a name of 256 bytes", false, false, HPACK_MAX_NAME, HPACK_OK },
		{ "a name of 257 bytes", false, false, HPACK_MAX_NAME + 1, HPACK_E_NAME_TOO_LONG },
		{ "a Huffman name decoding to 256 bytes", false, true, HPACK_MAX_NAME, HPACK_OK },
		{ "a Huffman name decoding to 257 bytes", false, true, HPACK_MAX_NAME + 1,
		  HPACK_E_NAME_TOO_LONG },
		{ "a value of 1024 bytes", true, false, HPACK_MAX_VALUE, HPACK_OK },
		{ "a value of 1025 bytes", true, false, HPACK_MAX_VALUE + 1, HPACK_E_VALUE_TOO_LONG },
		{ "a Huffman value decoding to 1024 bytes", true, true, HPACK_MAX_VALUE, HPACK_OK },
		{ "a Huffman value decoding to 1025 bytes", true, true, HPACK_MAX_VALUE + 1,
		  HPACK_E_VALUE_TOO_LONG },
	};
	for (size_t i = 0; i < NELEM(rows); i++) {
		/* Plain: 'a' len times. Huffman: '0' (00000) eight at a time in
		 * 5 bytes of zeros, len a multiple of 8 plus one 'a' (00011 +
		 * 111 of padding) for the odd one. */
		size_t n = 0, len = rows[i].len, enc = rows[i].huffman ? len / 8 * 5 + len % 8 : len;
		if (rows[i].huffman && len % 8 > 1) {
			ok(0, "%s: the row's length", rows[i].name);
			continue;
		}
		b[n++] = 0x00;
		if (rows[i].value) /* the name "x" */
			n += unhex("0178", b + n, 2);
		b[n++] = (uint8_t)((rows[i].huffman ? 0x80 : 0) | 0x7f);
		b[n++] = (uint8_t)(0x80 | ((enc - 127) & 0x7f));
		b[n++] = (uint8_t)((enc - 127) >> 7);
		if (rows[i].huffman) {
			memset(b + n, 0, len / 8 * 5);
			n += len / 8 * 5;
			if (len % 8)
				b[n++] = 0x1f;
		} else {
			memset(b + n, 'a', len);
			n += len;
		}
		if (!rows[i].value)
			b[n++] = 0x00; /* an empty value */
		hpack_init(&h);
		enum hpack_error e = decode_bytes(&h, b, n, &t);
		is_str(error_name(e), error_name(rows[i].want), "%s", rows[i].name);
		ok(e != HPACK_OK || t.len == len + (rows[i].value ? 4 : 3),
		   "%s: decoded whole", rows[i].name);
	}
}

/* The dynamic table: eviction by size as the RFC counts it, the ring over
 * its end, the bytes moved down, and a new entry named after one it evicts. */
static void test_table(void)
{
	struct hpack h;
	struct text t;
	uint8_t b[2048];
	size_t n;

	/* 300 entries of 34 bytes (name "k", value a letter): 120 fit in 4096,
	 * and the ring goes round more than twice. */
	hpack_init(&h);
	bool fine = true;
	for (unsigned i = 0; i < 300 && fine; i++) {
		uint8_t lit[] = { 0x40, 0x01, 'k', 0x01, (uint8_t)('A' + i % 26) };
		fine = decode_bytes(&h, lit, sizeof(lit), &t) == HPACK_OK;
		unsigned want = i + 1 < 120 ? i + 1 : 120;
		fine = fine && h.count == want && h.size == want * 34 &&
		       (uint32_t)(h.end - h.start) == h.size - 32u * h.count;
	}
	ok(fine, "300 entries of 34 bytes: the table keeps the newest 120, 4080 bytes");
	n = unhex("be ff36", b, sizeof(b)); /* 62 and 61 + 120 = 181 */
	decode_bytes(&h, b, n, &t);
	is_str(t.s, "k: N\nk: Y\n", "the newest and the oldest entries after the ring went round");
	is_str(error_name(decode_hex(&h, "ff37", &t)), "HPACK_E_INDEX", "index 182 is past them");

	/* Entries a, b, c of 1000 bytes each, then d named after a (which it
	 * evicts), then e named after b: b is evicted, and e's bytes no longer
	 * fit after d's, so the entries' bytes are moved down, over where b's
	 * name was. */
	hpack_init(&h);
	ok(decode_bytes(&h, b, 0, &t) == HPACK_OK && t.len == 0, "an empty block decodes");
	{
		static uint8_t big[4 * 1010];
		size_t m = 0;
		const struct {
			uint8_t name; /* a letter, or an index */
			char fill;
		} add[] = { { 'a', '1' }, { 'b', '2' }, { 'c', '3' }, { 64, '4' }, { 64, '5' } };
		for (size_t i = 0; i < NELEM(add); i++) {
			m = 0;
			if (add[i].name < 'a') {
				big[m++] = 0x40 | add[i].name; /* 64 > 63: 0x7f then 1 */
				if (add[i].name >= 63) {
					big[m - 1] = 0x7f;
					big[m++] = (uint8_t)(add[i].name - 63);
				}
			} else {
				big[m++] = 0x40;
				big[m++] = 0x01;
				big[m++] = add[i].name;
			}
			m += unhex("7fe906", big + m, 3); /* 1000 */
			memset(big + m, add[i].fill, 1000);
			m += 1000;
			/* The live bytes are the entries' names and values,
			 * no more: the table's size less 32 for each. */
			fine = decode_bytes(&h, big, m, &t) == HPACK_OK &&
			       (uint32_t)(h.end - h.start) == h.size - 32u * h.count;
			if (!fine)
				break;
		}
		ok(fine && h.count == 3 && h.size == 3 * 1033,
		   "five entries of 1033 bytes: the newest three kept");
		decode_hex(&h, "be", &t);
		ok(t.len > 3 && memcmp(t.s, "b: 555", 6) == 0,
		   "the newest keeps the name of the entry it evicted, though the bytes moved");
		decode_hex(&h, "bf", &t);
		ok(t.len > 3 && memcmp(t.s, "a: 444", 6) == 0, "the one before is intact");
		decode_hex(&h, "c0", &t);
		ok(t.len > 3 && memcmp(t.s, "c: 333", 6) == 0, "and the oldest");
	}

	/* A failed decoder refuses every block after. */
	hpack_init(&h);
	decode_hex(&h, "80", &t);
	is_str(error_name(decode_hex(&h, "82", &t)), "HPACK_E_INDEX_ZERO",
	       "after an error, a good block is refused with the first error");
	is_str(t.s, "", "... and nothing is handed out");
	for (int e = 0; e < HPACK_N_ERRORS; e++)
		ok(strcmp(hpack_error_text(e), "?") != 0, "%s has words", error_name(e));
	is_str(hpack_error_text(HPACK_N_ERRORS), "?", "past the errors: ?");
}

/* ---- Independent encoders: python3-hpack and python3-h2 ---- */

struct vectors {
	struct hpack h;
	char name[128];
	unsigned blocks, bad;
	char first_bad[256];
	uint8_t block[8192];
	size_t block_len;
	struct text want;
	bool refuse, have_block;
	uint8_t *all;   /* every block, for the damaged copies */
	size_t all_len;
#ifdef HAVE_NGHTTP2
	struct hpack_oracle oracle;
	unsigned disagree;
#endif
};

static void vector_flush(struct vectors *v)
{
	if (!v->have_block)
		return;
	struct text got;
	enum hpack_error e = decode_bytes(&v->h, v->block, v->block_len, &got);
	bool good = v->refuse ? (e == HPACK_E_NAME_TOO_LONG || e == HPACK_E_VALUE_TOO_LONG) :
				(e == HPACK_OK && strcmp(got.s, v->want.s) == 0);
	v->blocks++;
	if (!good && v->bad++ == 0)
		snprintf(v->first_bad, sizeof(v->first_bad), "block %u: %s; got '%.80s' want '%.80s'",
			 v->blocks, error_name(e), got.s, v->want.s);
#ifdef HAVE_NGHTTP2
	if (hpack_oracle_block(&v->oracle, v->block, v->block_len))
		v->disagree++;
#endif
	/* Kept for the damaged copies: two bytes of length, then the block. */
	v->all = realloc(v->all, v->all_len + 2 + v->block_len);
	if (v->all) {
		v->all[v->all_len] = (uint8_t)(v->block_len >> 8);
		v->all[v->all_len + 1] = (uint8_t)v->block_len;
		memcpy(v->all + v->all_len + 2, v->block, v->block_len);
		v->all_len += 2 + v->block_len;
	}
	v->have_block = false;
}

static void vector_end(struct vectors *v)
{
	vector_flush(v);
	if (!v->name[0])
		return;
	ok(v->blocks > 0 && v->bad == 0, "python3-hpack/h2 %s: %u blocks decoded to their lists%s%s",
	   v->name, v->blocks, v->bad ? ": " : "", v->bad ? v->first_bad : "");
#ifdef HAVE_NGHTTP2
	is_int(v->disagree, 0, "python3-hpack/h2 %s: libnghttp2 decodes every block the same",
	       v->name);
	hpack_oracle_free(&v->oracle);
#endif
	v->name[0] = '\0';
}

/* A field's hex ("-": empty) onto t, as emit_text writes it. */
static void hex_text(struct text *t, const char *hex)
{
	static uint8_t b[4096];
	size_t n = strcmp(hex, "-") == 0 ? 0 : unhex(hex, b, sizeof(b));
	put_text(t, (const char *)b, n);
}

/* Runs tests/lib/hpack_vectors.py; the blocks of every sequence, joined,
 * into *all for the damaged copies. */
static void test_python(uint8_t **all, size_t *all_len)
{
	if (system("/usr/bin/python3 -c 'import hpack, h2' >/dev/null 2>&1") != 0) {
		ok(1, "# SKIP python3-hpack and python3-h2 are not installed (build-aux/deps.sh test)");
		return;
	}
	FILE *f = popen("/usr/bin/python3 tests/lib/hpack_vectors.py", "r");
	if (!f) {
		ok(0, "tests/lib/hpack_vectors.py runs: %s", strerror(errno));
		return;
	}
	static struct vectors v;
	static char line[65536];
	unsigned seqs = 0;
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		if (strncmp(line, "seq ", 4) == 0) {
			vector_end(&v);
			hpack_init(&v.h);
			snprintf(v.name, sizeof(v.name), "%.100s", line + 4);
			v.blocks = v.bad = 0;
#ifdef HAVE_NGHTTP2
			hpack_oracle_init(&v.oracle);
			v.disagree = 0;
#endif
			seqs++;
		} else if (strncmp(line, "block ", 6) == 0) {
			vector_flush(&v);
			v.block_len = strcmp(line + 6, "-") == 0 ? 0 :
								     unhex(line + 6, v.block, sizeof(v.block));
			v.want.len = 0;
			v.want.s[0] = '\0';
			v.refuse = false;
			v.have_block = true;
		} else if (strncmp(line, "field ", 6) == 0) {
			char *sp = strchr(line + 6, ' ');
			if (!sp)
				continue;
			*sp = '\0';
			hex_text(&v.want, line + 6);
			put_raw(&v.want, ": ");
			hex_text(&v.want, sp + 1);
			put_raw(&v.want, "\n");
		} else if (strcmp(line, "refuse") == 0) {
			v.refuse = true;
		}
	}
	vector_end(&v);
	int rc = pclose(f);
	ok(rc == 0 && seqs >= 8, "tests/lib/hpack_vectors.py wrote %u sequences (exit status %d)",
	   seqs, rc);
	*all = v.all;
	*all_len = v.all_len;
}

/* ---- libnghttp2: its deflater as a third encoder, its inflater on
 * damaged blocks ---- */

#ifdef HAVE_NGHTTP2
static uint32_t rnd_state = 12345;
static uint32_t rnd(void)
{
	rnd_state = rnd_state * 1103515245u + 12345u;
	return rnd_state >> 8;
}

static void test_nghttp2_deflater(void)
{
	nghttp2_hd_deflater *def;
	struct hpack h;
	unsigned blocks = 0, bad = 0;
	static const char *const names[] = { "grpc-status", "grpc-message", ":status",
					     "content-type", "x-a", "set-cookie", "date", "etag" };
	if (nghttp2_hd_deflate_new(&def, HPACK_TABLE_SIZE) != 0) {
		ok(0, "nghttp2_hd_deflate_new");
		return;
	}
	hpack_init(&h);
	for (unsigned i = 0; i < 400; i++) {
		nghttp2_nv nv[8];
		static char values[8][600];
		size_t n = rnd() % 8;
		struct text want = { .len = 0 }, got;
		want.s[0] = '\0';
		if (rnd() % 20 == 0)
			nghttp2_hd_deflate_change_table_size(def, (size_t[]){ 0, 100, 1000, 4096 }[rnd() % 4]);
		for (size_t k = 0; k < n; k++) {
			const char *name = names[rnd() % NELEM(names)];
			size_t vl = rnd() % (rnd() % 4 ? 40 : 600);
			for (size_t j = 0; j < vl; j++)
				values[k][j] = (char)(rnd() % 3 ? 'a' + rnd() % 26 : rnd() % 256);
			nv[k] = (nghttp2_nv){ (uint8_t *)name, (uint8_t *)values[k], strlen(name), vl,
					      rnd() % 5 == 0 ? NGHTTP2_NV_FLAG_NO_INDEX : 0 };
			emit_text(&want, &(struct hpack_field){ name, values[k], strlen(name), vl });
		}
		uint8_t buf[8192];
		ssize_t len = nghttp2_hd_deflate_hd(def, buf, sizeof(buf), nv, n);
		blocks++;
		if (len < 0 || decode_bytes(&h, buf, (size_t)len, &got) != HPACK_OK ||
		    strcmp(got.s, want.s) != 0)
			bad++;
	}
	nghttp2_hd_deflate_del(def);
	ok(bad == 0, "libnghttp2's deflater: %u of %u blocks decoded to their lists", blocks - bad,
	   blocks);
}

/* Blocks of every sequence, damaged (a byte changed, a bit flipped, cut,
 * a byte put in), decoded alone by both. */
static void test_damaged(const uint8_t *all, size_t all_len)
{
	unsigned runs = 0, disagree = 0, both_refused = 0, ours_bound = 0;
	char first[200] = "";
	for (size_t off = 0; off + 2 <= all_len;) {
		size_t len = (size_t)all[off] << 8 | all[off + 1];
		const uint8_t *block = all + off + 2;
		off += 2 + len;
		for (int m = 0; m < 8 && len > 0; m++) {
			static uint8_t b[8200];
			size_t n = len, at = rnd() % len;
			memcpy(b, block, len);
			switch (m % 4) {
			case 0: b[at] = (uint8_t)rnd(); break;
			case 1: b[at] ^= (uint8_t)(1u << (rnd() % 8)); break;
			case 2: n = at; break;
			default:
				memmove(b + at + 1, b + at, len - at);
				b[at] = (uint8_t)rnd();
				n++;
			}
			struct hpack_oracle o;
			hpack_oracle_init(&o);
			const char *why = hpack_oracle_block(&o, b, n);
			runs++;
			both_refused += o.a.refused && o.b.refused;
			ours_bound += o.a.refused && !o.b.refused;
			if (why && disagree++ == 0)
				snprintf(first, sizeof(first), "%s (%s)", why, error_name(o.a.error));
			hpack_oracle_free(&o);
		}
	}
	ok(runs > 1000 && disagree == 0,
	   "%u damaged blocks: the same list as libnghttp2's, or the same refusal (%u refused by "
	   "both, %u by ours alone for a bound)%s%s",
	   runs, both_refused, ours_bound, disagree ? ": " : "", first);
}
#endif

int main(void)
{
	uint8_t *all = NULL;
	size_t all_len = 0;
	printf("# a decoder is %zu bytes (struct hpack), all it ever uses\n", sizeof(struct hpack));
	ok(sizeof(struct hpack) <= 6 * 1024, "a decoder fits in 6 KiB (%zu bytes)",
	   sizeof(struct hpack));
	test_rfc();
	test_edges();
	test_string_bounds();
	test_table();
	test_python(&all, &all_len);
#ifdef HAVE_NGHTTP2
	test_nghttp2_deflater();
	if (all_len)
		test_damaged(all, all_len);
#else
	ok(1, "# SKIP libnghttp2-dev is not installed: no second decoder (build-aux/deps.sh test)");
#endif
	free(all);
	return done_testing();
}
