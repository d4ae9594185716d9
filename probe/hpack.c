/* SPDX-License-Identifier: Apache-2.0 */
/* HPACK decoding (RFC 7541). Pure. Every function that reads the block
 * returns an enum hpack_error: HPACK_OK having read what it reads, else why
 * the block is refused. */
#include "probe/hpack.h"

#include <stdbool.h>
#include <string.h>

/* ---- The static table (RFC 7541 Appendix A) ---- */

struct static_entry {
	const char *name, *value;
	uint8_t name_len, value_len;
};
#define E(n, v) { n, v, sizeof(n) - 1, sizeof(v) - 1 }
static const struct static_entry static_table[HPACK_STATIC_ENTRIES] = {
	E(":authority", ""), E(":method", "GET"), E(":method", "POST"), E(":path", "/"),
	E(":path", "/index.html"), E(":scheme", "http"), E(":scheme", "https"),
	E(":status", "200"), E(":status", "204"), E(":status", "206"), E(":status", "304"),
	E(":status", "400"), E(":status", "404"), E(":status", "500"),
	E("accept-charset", ""), E("accept-encoding", "gzip, deflate"), E("accept-language", ""),
	E("accept-ranges", ""), E("accept", ""), E("access-control-allow-origin", ""),
	E("age", ""), E("allow", ""), E("authorization", ""), E("cache-control", ""),
	E("content-disposition", ""), E("content-encoding", ""), E("content-language", ""),
	E("content-length", ""), E("content-location", ""), E("content-range", ""),
	E("content-type", ""), E("cookie", ""), E("date", ""), E("etag", ""), E("expect", ""),
	E("expires", ""), E("from", ""), E("host", ""), E("if-match", ""),
	E("if-modified-since", ""), E("if-none-match", ""), E("if-range", ""),
	E("if-unmodified-since", ""), E("last-modified", ""), E("link", ""), E("location", ""),
	E("max-forwards", ""), E("proxy-authenticate", ""), E("proxy-authorization", ""),
	E("range", ""), E("referer", ""), E("refresh", ""), E("retry-after", ""), E("server", ""),
	E("set-cookie", ""), E("strict-transport-security", ""), E("transfer-encoding", ""),
	E("user-agent", ""), E("vary", ""), E("via", ""), E("www-authenticate", ""),
};
#undef E

/* ---- The Huffman code (RFC 7541 Appendix B) ----
 * The code is canonical: within a length, codes count up in symbol order,
 * and each length's first code follows the last of the shorter ones. So
 * the table is, for each length, how many symbols have it, and the symbols
 * by length then value. (tests/unit/test_hpack.c decodes every byte as an
 * independent encoder, Python's hpack, writes it.) */
#define HUFF_MAX_BITS 30
#define HUFF_EOS 256
static const uint8_t huff_count[HUFF_MAX_BITS + 1] = {
	0, 0, 0, 0, 0, 10, 26, 32, 6, 0, 5, 3, 2, 6, 2, 3,
	0, 0, 0, 3, 8, 13, 26, 29, 12, 4, 15, 19, 29, 0, 4,
};
static const uint16_t huff_symbol[HUFF_EOS + 1] = {
	/* 5 bits */ 48, 49, 50, 97, 99, 101, 105, 111, 115, 116,
	/* 6 */ 32, 37, 45, 46, 47, 51, 52, 53, 54, 55, 56, 57, 61, 65, 95, 98, 100, 102, 103, 104,
	108, 109, 110, 112, 114, 117,
	/* 7 */ 58, 66, 67, 68, 69, 70, 71, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 83, 84, 85,
	86, 87, 89, 106, 107, 113, 118, 119, 120, 121, 122,
	/* 8 */ 38, 42, 44, 59, 88, 90,
	/* 10 */ 33, 34, 40, 41, 63,
	/* 11 */ 39, 43, 124,
	/* 12 */ 35, 62,
	/* 13 */ 0, 36, 64, 91, 93, 126,
	/* 14 */ 94, 125,
	/* 15 */ 60, 96, 123,
	/* 19 */ 92, 195, 208,
	/* 20 */ 128, 130, 131, 162, 184, 194, 224, 226,
	/* 21 */ 153, 161, 167, 172, 176, 177, 179, 209, 216, 217, 227, 229, 230,
	/* 22 */ 129, 132, 133, 134, 136, 146, 154, 156, 160, 163, 164, 169, 170, 173, 178, 181,
	185, 186, 187, 189, 190, 196, 198, 228, 232, 233,
	/* 23 */ 1, 135, 137, 138, 139, 140, 141, 143, 147, 149, 150, 151, 152, 155, 157, 158, 165,
	166, 168, 174, 175, 180, 182, 183, 188, 191, 197, 231, 239,
	/* 24 */ 9, 142, 144, 145, 148, 159, 171, 206, 215, 225, 236, 237,
	/* 25 */ 199, 207, 234, 235,
	/* 26 */ 192, 193, 200, 201, 202, 205, 210, 213, 218, 219, 238, 240, 242, 243, 255,
	/* 27 */ 203, 204, 211, 212, 214, 221, 222, 223, 241, 244, 245, 246, 247, 248, 250, 251,
	252, 253, 254,
	/* 28 */ 2, 3, 4, 5, 6, 7, 8, 11, 12, 14, 15, 16, 17, 18, 19, 20, 21, 23, 24, 25, 26, 27,
	28, 29, 30, 31, 127, 220, 249,
	/* 30 */ 10, 13, 22, HUFF_EOS,
};

/* Decodes n bytes of Huffman code into out (at most cap bytes; over it:
 * too_long). Bit by bit, MSB first: code holds the bits of the symbol
 * being read, len their count; the codes of length len are first to
 * first + huff_count[len] - 1, and their symbols start at huff_symbol[index]. */
static enum hpack_error huffman_decode(const uint8_t *in, size_t n, char *out, size_t cap,
				       size_t *out_len, enum hpack_error too_long)
{
	uint32_t code = 0, first = 0;
	unsigned len = 0, index = 0;
	size_t used = 0;
	for (size_t i = 0; i < n; i++) {
		for (int bit = 7; bit >= 0; bit--) {
			code = code << 1 | ((in[i] >> bit) & 1u);
			len++;
			if (code - first >= huff_count[len]) {
				/* Not a code of this length: on to the next. */
				index += huff_count[len];
				first = (first + huff_count[len]) << 1;
			} else {
				unsigned symbol = huff_symbol[index + code - first];
				if (symbol == HUFF_EOS)
					return HPACK_E_HUFFMAN_EOS;
				if (used == cap)
					return too_long;
				out[used++] = (char)symbol;
				code = first = 0;
				len = index = 0;
			}
		}
	}
	/* The last bits must be a prefix of EOS (all ones), shorter than a
	 * byte (RFC 7541 §5.2). */
	if (len > 7 || code != (1u << len) - 1)
		return HPACK_E_HUFFMAN_PADDING;
	*out_len = used;
	return HPACK_OK;
}

/* ---- Integers and strings (RFC 7541 §5) ---- */

/* An integer with a prefix of bits bits, from *p (which is before end). */
static enum hpack_error read_int(const uint8_t **p, const uint8_t *end, unsigned bits,
				 uint32_t *out)
{
	uint32_t prefix_max = (1u << bits) - 1;
	uint64_t v = **p & prefix_max;
	(*p)++;
	if (v < prefix_max) {
		*out = (uint32_t)v;
		return HPACK_OK;
	}
	for (unsigned octets = 0; *p < end; octets++) {
		if (octets == HPACK_INT_MAX_OCTETS)
			return HPACK_E_INTEGER;
		uint8_t b = *(*p)++;
		v += (uint64_t)(b & 0x7f) << (7 * octets);
		if (v > HPACK_INT_MAX)
			return HPACK_E_INTEGER;
		if (!(b & 0x80)) {
			*out = (uint32_t)v;
			return HPACK_OK;
		}
	}
	return HPACK_E_TRUNCATED;
}

/* A string (§5.2) of at most cap bytes decoded: its bytes in the block
 * when plain, in scratch when Huffman-coded. */
static enum hpack_error read_string(const uint8_t **p, const uint8_t *end, char *scratch,
				    size_t cap, enum hpack_error too_long, const char **out,
				    size_t *out_len)
{
	if (*p == end)
		return HPACK_E_TRUNCATED;
	bool huffman = **p & 0x80;
	uint32_t n;
	enum hpack_error e = read_int(p, end, 7, &n);
	if (e)
		return e;
	if (n > (size_t)(end - *p))
		return HPACK_E_TRUNCATED;
	const uint8_t *s = *p;
	*p += n;
	if (huffman) {
		*out = scratch;
		return huffman_decode(s, n, scratch, cap, out_len, too_long);
	}
	if (n > cap)
		return too_long;
	*out = (const char *)s;
	*out_len = n;
	return HPACK_OK;
}

/* ---- The dynamic table (§2.3.2, §4) ---- */

void hpack_init(struct hpack *h)
{
	memset(h, 0, sizeof(*h));
	h->max = HPACK_TABLE_SIZE;
}

static uint32_t entry_size(size_t name_len, size_t value_len)
{
	return (uint32_t)(name_len + value_len + HPACK_ENTRY_OVERHEAD);
}

static void evict_oldest(struct hpack *h)
{
	const struct hpack_entry *e = &h->ring[h->oldest];
	h->size -= entry_size(e->name_len, e->value_len);
	h->start = (uint16_t)(e->off + e->name_len + e->value_len);
	h->oldest = (uint16_t)((h->oldest + 1) % HPACK_MAX_ENTRIES);
	h->count--;
}

/* Evicts until the table is within h->max with room for room more. */
static void evict_for(struct hpack *h, uint32_t room)
{
	while (h->count > 0 && h->size + room > h->max)
		evict_oldest(h);
}

/* Adds f as the newest entry (§4.4): the oldest are evicted to make room;
 * an entry larger than the whole table empties it and is not added. */
static void table_add(struct hpack *h, const struct hpack_field *f)
{
	uint32_t size = entry_size(f->name_len, f->value_len);
	const char *name = f->name;
	/* The name may be an entry's that the eviction below frees, and that
	 * moving the bytes down would overwrite (§4.4): it is copied first. A
	 * name in the table is at most HPACK_MAX_NAME, and h->name is free when
	 * the name is not a Huffman string of this field. */
	if (name >= (const char *)h->bytes && name < (const char *)h->bytes + sizeof(h->bytes)) {
		memcpy(h->name, name, f->name_len);
		name = h->name;
	}
	evict_for(h, size);
	if (size > h->max)
		return;
	size_t len = f->name_len + f->value_len;
	if (h->end + len > sizeof(h->bytes)) {
		/* The entries' bytes and the new one's are at most the
		 * table's size less 32 for each: moved down to 0, the new
		 * entry fits after them. */
		memmove(h->bytes, h->bytes + h->start, (size_t)(h->end - h->start));
		for (unsigned i = 0; i < h->count; i++)
			h->ring[(h->oldest + i) % HPACK_MAX_ENTRIES].off -= h->start;
		h->end = (uint16_t)(h->end - h->start);
		h->start = 0;
	}
	struct hpack_entry *e = &h->ring[(h->oldest + h->count) % HPACK_MAX_ENTRIES];
	e->off = h->end;
	e->name_len = (uint16_t)f->name_len;
	e->value_len = (uint16_t)f->value_len;
	memcpy(h->bytes + h->end, name, f->name_len);
	memcpy(h->bytes + h->end + f->name_len, f->value, f->value_len);
	h->end = (uint16_t)(h->end + len);
	h->count++;
	h->size += size;
}

/* The field at index (§2.3.3): the static table's 1-61, then the dynamic
 * table's, newest first. */
static enum hpack_error lookup(const struct hpack *h, uint32_t index, struct hpack_field *f)
{
	if (index == 0)
		return HPACK_E_INDEX_ZERO;
	if (index <= HPACK_STATIC_ENTRIES) {
		const struct static_entry *s = &static_table[index - 1];
		*f = (struct hpack_field){ s->name, s->value, s->name_len, s->value_len };
		return HPACK_OK;
	}
	index -= HPACK_STATIC_ENTRIES;
	if (index > h->count)
		return HPACK_E_INDEX;
	const struct hpack_entry *e =
		&h->ring[(h->oldest + h->count - index) % HPACK_MAX_ENTRIES];
	const char *b = (const char *)h->bytes + e->off;
	*f = (struct hpack_field){ b, b + e->name_len, e->name_len, e->value_len };
	return HPACK_OK;
}

/* ---- Field representations (§6) ---- */

/* A literal (§6.2): a name by index (bits of prefix) or as a string, then
 * a value; added to the table when index_it. */
static enum hpack_error literal(struct hpack *h, const uint8_t **p, const uint8_t *end,
				unsigned bits, bool index_it, hpack_emit_fn emit, void *arg)
{
	struct hpack_field f;
	uint32_t index;
	enum hpack_error e = read_int(p, end, bits, &index);
	if (e)
		return e;
	if (index > 0)
		e = lookup(h, index, &f);
	else
		e = read_string(p, end, h->name, sizeof(h->name), HPACK_E_NAME_TOO_LONG, &f.name,
				&f.name_len);
	if (e)
		return e;
	e = read_string(p, end, h->value, sizeof(h->value), HPACK_E_VALUE_TOO_LONG, &f.value,
			&f.value_len);
	if (e)
		return e;
	emit(arg, &f);
	if (index_it)
		table_add(h, &f);
	return HPACK_OK;
}

/* A dynamic table size update (§6.3): only before the block's first field
 * (§4.2), and never over the size the agent allows. */
static enum hpack_error size_update(struct hpack *h, const uint8_t **p, const uint8_t *end,
				    bool after_field)
{
	if (after_field)
		return HPACK_E_SIZE_UPDATE_LATE;
	uint32_t size;
	enum hpack_error e = read_int(p, end, 5, &size);
	if (e)
		return e;
	if (size > HPACK_TABLE_SIZE)
		return HPACK_E_SIZE_UPDATE_OVER;
	h->max = size;
	evict_for(h, 0);
	return HPACK_OK;
}

static enum hpack_error decode(struct hpack *h, const uint8_t *p, const uint8_t *end,
			       hpack_emit_fn emit, void *arg)
{
	bool after_field = false;
	while (p < end) {
		uint8_t b = *p;
		enum hpack_error e;
		if (b & 0x80) { /* indexed (§6.1) */
			struct hpack_field f;
			uint32_t index;
			e = read_int(&p, end, 7, &index);
			if (!e)
				e = lookup(h, index, &f);
			if (!e)
				emit(arg, &f);
		} else if (b & 0x40) { /* literal with incremental indexing (§6.2.1) */
			e = literal(h, &p, end, 6, true, emit, arg);
		} else if (b & 0x20) { /* dynamic table size update (§6.3) */
			e = size_update(h, &p, end, after_field);
			if (e)
				return e;
			continue;
		} else { /* without indexing (0000), never indexed (0001): §6.2.2, §6.2.3 */
			e = literal(h, &p, end, 4, false, emit, arg);
		}
		if (e)
			return e;
		after_field = true;
	}
	return HPACK_OK;
}

enum hpack_error hpack_decode(struct hpack *h, const uint8_t *block, size_t len, hpack_emit_fn emit,
			      void *arg)
{
	if (h->error == HPACK_OK)
		h->error = decode(h, block, block + len, emit, arg);
	return h->error;
}

const char *hpack_error_text(enum hpack_error e)
{
	static const char *const t[HPACK_N_ERRORS] = {
		[HPACK_OK] = "decoded",
		[HPACK_E_TRUNCATED] = "the block ends inside a field",
		[HPACK_E_INTEGER] = "an integer over the decoder's bound",
		[HPACK_E_INDEX_ZERO] = "index 0",
		[HPACK_E_INDEX] = "an index past the tables",
		[HPACK_E_SIZE_UPDATE_LATE] = "a table size update after a field",
		[HPACK_E_SIZE_UPDATE_OVER] = "a table size update over 4096",
		[HPACK_E_HUFFMAN_EOS] = "EOS inside a Huffman string",
		[HPACK_E_HUFFMAN_PADDING] = "Huffman padding that is not EOS's first bits",
		[HPACK_E_NAME_TOO_LONG] = "a field name over 256 bytes",
		[HPACK_E_VALUE_TOO_LONG] = "a field value over 1024 bytes",
	};
	return (unsigned)e < HPACK_N_ERRORS ? t[e] : "?";
}
