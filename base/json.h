/* SPDX-License-Identifier: Apache-2.0 */
/* Reading JSON with jsmn: one token array per document, helpers to walk it.
 * Every parser of outside JSON in the agent goes through here, so the bounds
 * (document size, token count) are enforced in one place. */
#ifndef HEALTHD_JSON_H
#define HEALTHD_JSON_H

/* JSMN_STRICT and JSMN_PARENT_LINKS are set once, for every translation
 * unit, by the Makefile: the second changes the layout of jsmntok_t, so it
 * must be the same here and in base/jsmn.c. */
#define JSMN_HEADER
#include <jsmn.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

struct json {
	const char *s; /* not owned */
	size_t len;
	jsmntok_t *tok;
	int n; /* tokens in use; token 0 is the root */
};

/* Tokenises s[0..len). Fails with -EINVAL (malformed, errbuf says so), -E2BIG
 * (more than max_tokens tokens) or -ENOMEM. The token array grows as needed up
 * to max_tokens. */
int json_parse(struct json *j, const char *s, size_t len, int max_tokens,
	       struct errbuf *err);
void json_free(struct json *j);

/* Index of the token after the whole value at i (its subtree skipped). */
int json_next(const struct json *j, int i);

/* Value of key in the object at obj, or -1 when absent or obj is not an
 * object. Keys are compared after unescaping. */
int json_get(const struct json *j, int obj, const char *key);

/* Iterating: for (int k = json_first(j, obj), n = 0; n < j->tok[obj].size;
 * n++, k = json_next(j, k + 1)) -- for an object k is the key and k + 1 the
 * value; for an array use json_next(j, k). Helpers below hide this. */
#define JSON_OBJECT_FOREACH(j, obj, key, val, cnt)                          \
	for (int cnt = 0, key = (obj) + 1, val = key + 1;                   \
	     cnt < (j)->tok[obj].size;                                      \
	     cnt++, key = json_next((j), val), val = key + 1)
#define JSON_ARRAY_FOREACH(j, arr, el, cnt)                                 \
	for (int cnt = 0, el = (arr) + 1; cnt < (j)->tok[arr].size;         \
	     cnt++, el = json_next((j), el))

bool json_is_string(const struct json *j, int i);
bool json_is_object(const struct json *j, int i);
bool json_is_array(const struct json *j, int i);
bool json_is_null(const struct json *j, int i);

/* True when token i is a string equal to lit after unescaping. */
bool json_str_eq(const struct json *j, int i, const char *lit);

/* Unescapes string token i into a new NUL-terminated string (\uXXXX to UTF-8,
 * surrogate pairs joined). -EINVAL on a bad escape, an embedded NUL, or a token
 * that is not a string; -ENOMEM. */
int json_strdup(const struct json *j, int i, char **out);

/* true / false. -EINVAL for anything else. */
int json_bool(const struct json *j, int i, bool *out);

/* An integer primitive (no fraction, no exponent) in int64 range. -EINVAL,
 * -ERANGE. */
int json_int64(const struct json *j, int i, int64_t *out);

/* A number primitive, fractions and exponents allowed. -EINVAL. */
int json_double(const struct json *j, int i, double *out);

/* Name of the type of token i for error messages: "string", "number", ... */
const char *json_type_name(const struct json *j, int i);

/* Appends s to a growing buffer as a JSON string literal, quotes included,
 * escaping what RFC 8259 requires and replacing bytes that are not valid
 * UTF-8 with U+FFFD. -ENOMEM. */
struct json_buf {
	char *p;
	size_t len, cap;
};
int json_buf_put(struct json_buf *b, const char *s, size_t n);
int json_buf_puts(struct json_buf *b, const char *s);
int json_buf_string(struct json_buf *b, const char *s);
/* Length of the valid UTF-8 sequence at s (n bytes left, n > 0), or 0 for an
 * invalid, overlong, surrogate or truncated one. */
size_t json_utf8_len(const unsigned char *s, size_t n);
void json_buf_free(struct json_buf *b);

#endif
