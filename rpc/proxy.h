/* SPDX-License-Identifier: Apache-2.0 */
/* The PROXY protocol header (HAProxy's doc/proxy-protocol.txt, versions 1
 * and 2), as the dstack gateway writes it at the start of every connection
 * it opens to a port the app declared with "pp": true (docs/design/front.md,
 * "Who is asking"). A pure reader: no sockets, no allocation, no state
 * between calls; it is given the first bytes of a connection (peeked) and
 * says whether they hold a whole header, how long it is and whose address
 * it carries, or that more must come, or that they are not one, or which
 * rule a bad one broke. It never looks at a byte past the header's end, so
 * that the caller can take exactly the header and leave the rest to go on.
 *
 * Modelled on HAProxy's reader (src/connection.c, conn_recv_proxy()): the
 * signatures are checked first ("PROXY " for version 1, the 12-byte block
 * for version 2), lengths before anything is copied, LOCAL and UNSPEC are
 * cases of their own, and every way a header can be wrong has a name.
 * Where the specification leaves a choice, the stricter reading is taken:
 * a version 1 line must end in CRLF within 107 bytes, a lone CR or LF is
 * wrong, IPv4 numbers and ports have no leading zeros, fields are one
 * space apart; a version 2 header is at most PROXY_V2_MAX bytes, its TLVs
 * must each fit in its length (they are skipped, their contents never
 * read: a CRC32C is not checked, which the specification allows a receiver
 * that does not support it). */
#ifndef HEALTHD_PROXY_H
#define HEALTHD_PROXY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* A version 1 line, CRLF included, is at most this long (the
 * specification's worst case, "PROXY UNKNOWN" with two IPv6 addresses). */
#define PROXY_V1_MAX 107
/* A version 2 header, its 16 bytes and what its length announces, is at
 * most this long: the dstack gateway's own reader of inbound headers bounds
 * it there, and a TCP header with the TLVs HAProxy writes (authority,
 * unique id, CRC32C, SSL) fits with room to spare. */
#define PROXY_V2_MAX 2048
/* The first bytes that can tell a header from anything else. */
#define PROXY_V2_SIG_LEN 12

enum proxy_result {
	PROXY_NONE, /* no header: the bytes are the connection's own */
	PROXY_MORE, /* a header, or the start of one: more bytes must come */
	PROXY_OK,   /* a whole header of out->len bytes */
	PROXY_BAD,  /* a header broken as out->why says */
};

/* Every way a header is wrong (HAProxy names them too: CO_ER_PRX_*). */
enum proxy_why {
	PROXY_WHY_NONE,
	PROXY_V1_TOO_LONG,      /* no CRLF within PROXY_V1_MAX bytes */
	PROXY_V1_LINE_END,      /* a CR or LF that is not a CRLF ending the line */
	PROXY_V1_PROTOCOL,      /* neither TCP4, TCP6 nor UNKNOWN */
	PROXY_V1_FIELDS,        /* not four fields, one space apart */
	PROXY_V1_ADDRESS,       /* an address not of its family's form */
	PROXY_V1_PORT,          /* a port not a decimal 0..65535 without leading zero */
	PROXY_V2_VERSION,       /* the version nibble is not 2 */
	PROXY_V2_COMMAND,       /* neither LOCAL nor PROXY */
	PROXY_V2_FAMILY,        /* an address family or transport not in the specification */
	PROXY_V2_TOO_LONG,      /* its length announces more than PROXY_V2_MAX */
	PROXY_V2_ADDRESS_SHORT, /* its length is shorter than its family's addresses */
	PROXY_V2_TLV,           /* a TLV runs past the header's end */
};

enum proxy_kind {
	PROXY_ADDRESS, /* the client's address is in src */
	PROXY_LOCAL,   /* version 2 LOCAL: the proxy's own connection (a health check) */
	PROXY_UNKNOWN, /* version 1 UNKNOWN, version 2 UNSPEC or AF_UNIX: no client address */
};

/* An address from a header: family AF_INET, AF_INET6, or AF_UNSPEC (none). */
struct proxy_addr {
	sa_family_t family;
	uint16_t port;  /* host order */
	uint8_t ip[16]; /* IPv4 in the first 4 bytes */
};

struct proxy_header {
	size_t len;         /* PROXY_OK: the header's bytes, to be taken off */
	unsigned version;   /* 1 or 2, once known */
	enum proxy_kind kind;
	struct proxy_addr src, dst; /* PROXY_ADDRESS only */
	enum proxy_why why; /* PROXY_BAD only */
};

/* p[0..n): a connection's first bytes, as many as have come. */
enum proxy_result proxy_parse(const unsigned char *p, size_t n, struct proxy_header *out);
/* The rule a bad header broke, for logs and counters: "v1 line too long". */
const char *proxy_why_name(enum proxy_why why);
/* a as a socket address (AF_UNSPEC when it is none); its length. */
socklen_t proxy_addr_sockaddr(const struct proxy_addr *a, struct sockaddr_storage *out);

#endif
