/* SPDX-License-Identifier: Apache-2.0 */
/* An HPACK decoder (RFC 7541), for the header blocks a gRPC server sends the
 * agent's probe (issue 42, docs/design/probes.md). Pure: a decoder's
 * state is its dynamic table; blocks go in whole, fields come out in order.
 * The shape is nghttp2's lib/nghttp2_hd.c and Go's x/net/http2/hpack: every
 * integer and string bounded, the dynamic table's size accounted as the RFC
 * counts it, errors as values. Nothing is allocated: a struct hpack is all
 * the memory a decoder uses (test_hpack and test_grpc print its size). */
#ifndef HEALTHD_HPACK_H
#define HEALTHD_HPACK_H

#include <stddef.h>
#include <stdint.h>

/* The dynamic table's largest size, as RFC 7541 §4.1 counts it: the
 * default of SETTINGS_HEADER_TABLE_SIZE (RFC 9113 §6.5.2), which the agent
 * never lowers. So no block, before or after the server has our SETTINGS,
 * may ask for more (RFC 9113 §6.5.3), and a size update above it is an
 * error (RFC 7541 §6.3). */
#define HPACK_TABLE_SIZE 4096
/* What an entry costs beyond its name and value (RFC 7541 §4.1). */
#define HPACK_ENTRY_OVERHEAD 32
/* So the table holds at most this many entries (of empty name and value). */
#define HPACK_MAX_ENTRIES (HPACK_TABLE_SIZE / HPACK_ENTRY_OVERHEAD)
/* The static table (RFC 7541 Appendix A). */
#define HPACK_STATIC_ENTRIES 61
/* A decoded name and a decoded value, at most: far over what a gRPC answer
 * carries (grpc-message is a sentence), well under the table's size. */
#define HPACK_MAX_NAME 256
#define HPACK_MAX_VALUE 1024
/* An integer (RFC 7541 §5.1), at most: every bound above fits in it, so a
 * larger one can only be refused. The RFC lets a decoder refuse integers
 * over its limits, in value or in octets: after the prefix, at most 5
 * octets (35 bits; more can only be zeros that pad a small value). */
#define HPACK_INT_MAX 65535u
#define HPACK_INT_MAX_OCTETS 5

/* Why a block was refused. Every one is a connection error
 * (COMPRESSION_ERROR, RFC 9113 §4.3): the decoder keeps it, and refuses
 * every later block with it. */
enum hpack_error {
	HPACK_OK = 0,
	HPACK_E_TRUNCATED,        /* the block ends inside a field */
	HPACK_E_INTEGER,          /* an integer over HPACK_INT_MAX or its octets */
	HPACK_E_INDEX_ZERO,       /* index 0 (RFC 7541 §6.1) */
	HPACK_E_INDEX,            /* an index past both tables (§2.3.3) */
	HPACK_E_SIZE_UPDATE_LATE, /* a table size update after a field (§4.2) */
	HPACK_E_SIZE_UPDATE_OVER, /* a table size over HPACK_TABLE_SIZE (§6.3) */
	HPACK_E_HUFFMAN_EOS,      /* EOS decoded inside a string (§5.2) */
	HPACK_E_HUFFMAN_PADDING,  /* padding over 7 bits, or not EOS's first bits (§5.2) */
	HPACK_E_NAME_TOO_LONG,    /* a name over HPACK_MAX_NAME */
	HPACK_E_VALUE_TOO_LONG,   /* a value over HPACK_MAX_VALUE */
	HPACK_N_ERRORS
};
/* "Huffman padding is not EOS", ...: the agent's own words. */
const char *hpack_error_text(enum hpack_error e);

/* One decoded field. Bytes, not C strings (a value may hold any byte);
 * valid only during the call that hands them out. */
struct hpack_field {
	const char *name, *value;
	size_t name_len, value_len;
};
typedef void (*hpack_emit_fn)(void *arg, const struct hpack_field *f);

/* An entry of the dynamic table: its name then its value, at off in bytes. */
struct hpack_entry {
	uint16_t off, name_len, value_len;
};

/* A decoder. The entries are a ring, oldest first; their bytes lie
 * in bytes[start, end), oldest first, and are moved down to 0 when a new
 * entry does not fit after end. Private to hpack.c. */
struct hpack {
	enum hpack_error error; /* the first error: every later block is refused */
	uint32_t size;          /* of the entries, as RFC 7541 §4.1 counts it */
	uint32_t max;           /* the size the last size update set */
	uint16_t oldest, count; /* the ring's first entry, and how many */
	uint16_t start, end;
	struct hpack_entry ring[HPACK_MAX_ENTRIES];
	/* Names and values: at most the table's size less one entry's overhead. */
	uint8_t bytes[HPACK_TABLE_SIZE - HPACK_ENTRY_OVERHEAD];
	/* Huffman-decoded strings of the field being read. */
	char name[HPACK_MAX_NAME];
	char value[HPACK_MAX_VALUE];
};

void hpack_init(struct hpack *h);

/* Decodes one whole header block (HEADERS and its CONTINUATION frames'
 * fragments joined, padding and priority taken out) and hands each field
 * to emit, in order. HPACK_OK when the whole block decoded; else the error,
 * after the fields before it were handed out. A decoder that failed once
 * refuses every block after. */
enum hpack_error hpack_decode(struct hpack *h, const uint8_t *block, size_t len, hpack_emit_fn emit,
			      void *arg);

#endif
