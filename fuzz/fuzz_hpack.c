/* SPDX-License-Identifier: Apache-2.0 */
/* HPACK header blocks (issue 42), decoded by probe/hpack.c and by
 * libnghttp2's inflater, one after the other on one table each, as a
 * server's HEADERS and trailers would be. The input is blocks, each two
 * bytes of length (big-endian) and then its bytes; the last may be short.
 * Oracle (fuzz/hpack_oracle.h): the same header list or the same refusal,
 * block by block; only ours may refuse alone, for one of its own bounds
 * that the field nghttp2 decoded there breaks. */
#include <stdlib.h>

#include "fuzz/fuzz.h"
#include "fuzz/hpack_oracle.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct hpack_oracle o;
	hpack_oracle_init(&o);
	for (size_t off = 0; off + 2 <= size;) {
		size_t len = (size_t)data[off] << 8 | data[off + 1];
		off += 2;
		if (len > size - off)
			len = size - off;
		if (hpack_oracle_block(&o, data + off, len))
			abort();
		off += len;
	}
	hpack_oracle_free(&o);
	return 0;
}
