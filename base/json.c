/* SPDX-License-Identifier: Apache-2.0 */
#include "base/json.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/grow.h"

/* jsmn's strict mode checks only the first byte of a primitive; a document
 * is accepted only when every primitive is a literal or an RFC 8259 number. */
static bool primitive_valid(const char *s, size_t n)
{
	if ((n == 4 && !memcmp(s, "true", 4)) || (n == 5 && !memcmp(s, "false", 5)) ||
	    (n == 4 && !memcmp(s, "null", 4)))
		return true;
	size_t i = 0;
	if (i < n && s[i] == '-')
		i++;
	if (i < n && s[i] == '0')
		i++;
	else if (i < n && s[i] >= '1' && s[i] <= '9')
		while (i < n && s[i] >= '0' && s[i] <= '9')
			i++;
	else
		return false;
	if (i < n && s[i] == '.') {
		size_t d = ++i;
		while (i < n && s[i] >= '0' && s[i] <= '9')
			i++;
		if (i == d)
			return false;
	}
	if (i < n && (s[i] == 'e' || s[i] == 'E')) {
		i++;
		if (i < n && (s[i] == '+' || s[i] == '-'))
			i++;
		size_t d = i;
		while (i < n && s[i] >= '0' && s[i] <= '9')
			i++;
		if (i == d)
			return false;
	}
	return i == n;
}

/* json_parse without the cleanup: j may hold tokens on failure. */
static int tokenize(struct json *j, const char *s, size_t len, int max_tokens,
		    struct errbuf *err)
{
	if (len > INT_MAX / 2)
		return errbuf_set(err, E2BIG, "document of %zu bytes is too large", len);
	j->s = s;
	j->len = len;
	int cap = 64;
	/* Out of tokens, jsmn stops where it was: with more room it goes on
	 * from there, so a large document is read once, not once per size. */
	jsmn_parser p;
	jsmn_init(&p);
	for (;;) {
		if (cap > max_tokens)
			cap = max_tokens;
		jsmntok_t *t = realloc(j->tok, (size_t)cap * sizeof(*t));
		if (!t)
			return errbuf_set(err, ENOMEM, "out of memory");
		j->tok = t;
		int r = jsmn_parse(&p, s, len, j->tok, (unsigned)cap);
		if (r >= 0) {
			if (r == 0)
				return errbuf_set(err, EINVAL, "document is empty");
			j->n = r;
			for (int k = 0; k < r; k++) {
				const jsmntok_t *pt = &j->tok[k];
				if (pt->type == JSMN_PRIMITIVE &&
				    !primitive_valid(s + pt->start, (size_t)(pt->end - pt->start))) {
					return errbuf_set(err, EINVAL, "malformed JSON value at byte %u",
							  (unsigned)pt->start);
				}
			}
			/* jsmn accepts several top-level values in a row; a
			 * document is one value. */
			if (json_next(j, 0) != r)
				return errbuf_set(err, EINVAL,
						  "trailing data after the top-level value");
			return 0;
		}
		if (r == JSMN_ERROR_NOMEM && cap < max_tokens) {
			cap = cap > max_tokens / 4 ? max_tokens : cap * 4;
			continue;
		}
		if (r == JSMN_ERROR_NOMEM)
			return errbuf_set(err, E2BIG, "more than %d JSON tokens", max_tokens);
		if (r == JSMN_ERROR_PART)
			return errbuf_set(err, EINVAL, "truncated JSON");
		return errbuf_set(err, EINVAL, "malformed JSON near byte %u", p.pos);
	}
}

int json_parse(struct json *j, const char *s, size_t len, int max_tokens,
	       struct errbuf *err)
{
	memset(j, 0, sizeof(*j));
	int r = tokenize(j, s, len, max_tokens, err);
	if (r < 0)
		json_free(j);
	return r;
}

void json_free(struct json *j)
{
	free(j->tok);
	j->tok = NULL;
	j->n = 0;
}

int json_next(const struct json *j, int i)
{
	/* Iterative subtree skip: `pending` counts values still to pass. */
	int pending = 1;
	while (pending > 0 && i < j->n) {
		const jsmntok_t *t = &j->tok[i];
		pending--;
		if (t->type == JSMN_OBJECT)
			pending += 2 * t->size;
		else if (t->type == JSMN_ARRAY)
			pending += t->size;
		i++;
	}
	return i;
}

bool json_is_string(const struct json *j, int i)
{
	return i >= 0 && i < j->n && j->tok[i].type == JSMN_STRING;
}

bool json_is_object(const struct json *j, int i)
{
	return i >= 0 && i < j->n && j->tok[i].type == JSMN_OBJECT;
}

bool json_is_array(const struct json *j, int i)
{
	return i >= 0 && i < j->n && j->tok[i].type == JSMN_ARRAY;
}

bool json_is_null(const struct json *j, int i)
{
	return i >= 0 && i < j->n && j->tok[i].type == JSMN_PRIMITIVE &&
	       j->s[j->tok[i].start] == 'n';
}

const char *json_type_name(const struct json *j, int i)
{
	if (i < 0 || i >= j->n)
		return "nothing";
	switch (j->tok[i].type) {
	case JSMN_OBJECT:
		return "an object";
	case JSMN_ARRAY:
		return "an array";
	case JSMN_STRING:
		return "a string";
	case JSMN_PRIMITIVE:
		switch (j->s[j->tok[i].start]) {
		case 't':
		case 'f':
			return "a boolean";
		case 'n':
			return "null";
		default:
			return "a number";
		}
	default:
		return "an unknown value";
	}
}

static int hex4(const char *p, unsigned *out)
{
	unsigned v = 0;
	for (int k = 0; k < 4; k++) {
		char c = p[k];
		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v |= (unsigned)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			v |= (unsigned)(c - 'A' + 10);
		else
			return -EINVAL;
	}
	*out = v;
	return 0;
}

static size_t put_utf8(char *d, unsigned cp)
{
	if (cp < 0x80) {
		d[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		d[0] = (char)(0xc0 | (cp >> 6));
		d[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		d[0] = (char)(0xe0 | (cp >> 12));
		d[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		d[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	d[0] = (char)(0xf0 | (cp >> 18));
	d[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
	d[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
	d[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

/* Unescapes into d (at least as long as the source: escapes never grow). */
static int unescape(const char *s, size_t n, char *d, size_t *outlen)
{
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (c != '\\') {
			d[o++] = c;
			continue;
		}
		if (++i >= n)
			return -EINVAL;
		switch (s[i]) {
		case '"': d[o++] = '"'; break;
		case '\\': d[o++] = '\\'; break;
		case '/': d[o++] = '/'; break;
		case 'b': d[o++] = '\b'; break;
		case 'f': d[o++] = '\f'; break;
		case 'n': d[o++] = '\n'; break;
		case 'r': d[o++] = '\r'; break;
		case 't': d[o++] = '\t'; break;
		case 'u': {
			unsigned cp, lo;
			if (n - i - 1 < 4 || hex4(s + i + 1, &cp) < 0)
				return -EINVAL;
			i += 4;
			if (cp >= 0xd800 && cp <= 0xdbff) {
				if (n - i - 1 < 6 || s[i + 1] != '\\' || s[i + 2] != 'u' ||
				    hex4(s + i + 3, &lo) < 0 || lo < 0xdc00 || lo > 0xdfff)
					return -EINVAL;
				cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
				i += 6;
			} else if (cp >= 0xdc00 && cp <= 0xdfff) {
				return -EINVAL;
			}
			if (cp == 0)
				return -EINVAL;
			o += put_utf8(d + o, cp);
			break;
		}
		default:
			return -EINVAL;
		}
	}
	*outlen = o;
	return 0;
}

int json_strdup(const struct json *j, int i, char **out)
{
	if (!json_is_string(j, i))
		return -EINVAL;
	const char *s = j->s + j->tok[i].start;
	size_t n = (size_t)(j->tok[i].end - j->tok[i].start), len;
	if (memchr(s, '\0', n))
		return -EINVAL;
	char *d = malloc(n + 1);
	if (!d)
		return -ENOMEM;
	if (unescape(s, n, d, &len) < 0) {
		free(d);
		return -EINVAL;
	}
	d[len] = '\0';
	*out = d;
	return 0;
}

bool json_str_eq(const struct json *j, int i, const char *lit)
{
	if (!json_is_string(j, i))
		return false;
	const char *s = j->s + j->tok[i].start;
	size_t n = (size_t)(j->tok[i].end - j->tok[i].start);
	size_t litlen = strlen(lit);
	if (!memchr(s, '\\', n))
		return n == litlen && memcmp(s, lit, n) == 0;
	char *d;
	if (json_strdup(j, i, &d) < 0)
		return false;
	bool eq = strcmp(d, lit) == 0;
	free(d);
	return eq;
}

int json_get(const struct json *j, int obj, const char *key)
{
	if (!json_is_object(j, obj))
		return -1;
	JSON_OBJECT_FOREACH(j, obj, k, v, cnt)
		if (json_str_eq(j, k, key))
			return v;
	return -1;
}

int json_bool(const struct json *j, int i, bool *out)
{
	if (i < 0 || i >= j->n || j->tok[i].type != JSMN_PRIMITIVE)
		return -EINVAL;
	char c = j->s[j->tok[i].start];
	if (c != 't' && c != 'f')
		return -EINVAL;
	*out = c == 't';
	return 0;
}

/* Copies primitive token i into buf as a C string; -EINVAL if it is not a
 * number or too long to be one. */
static int number_text(const struct json *j, int i, char *buf, size_t n)
{
	if (i < 0 || i >= j->n || j->tok[i].type != JSMN_PRIMITIVE)
		return -EINVAL;
	size_t len = (size_t)(j->tok[i].end - j->tok[i].start);
	const char *s = j->s + j->tok[i].start;
	if (len == 0 || len >= n || !(s[0] == '-' || (s[0] >= '0' && s[0] <= '9')))
		return -EINVAL;
	memcpy(buf, s, len);
	buf[len] = '\0';
	return 0;
}

int json_int64(const struct json *j, int i, int64_t *out)
{
	char buf[32], *end;
	if (number_text(j, i, buf, sizeof(buf)) < 0 || strpbrk(buf, ".eE"))
		return -EINVAL;
	errno = 0;
	long long v = strtoll(buf, &end, 10);
	if (*end)
		return -EINVAL;
	if (errno == ERANGE)
		return -ERANGE;
	*out = v;
	return 0;
}

int json_double(const struct json *j, int i, double *out)
{
	char buf[64], *end;
	if (number_text(j, i, buf, sizeof(buf)) < 0)
		return -EINVAL;
	errno = 0;
	double v = strtod(buf, &end);
	if (*end || errno == ERANGE || !isfinite(v))
		return -EINVAL;
	*out = v;
	return 0;
}

int json_buf_put(struct json_buf *b, const char *s, size_t n)
{
	char *p = grow(b->p, &b->cap, b->len + n + 1, 1, 64, 0);
	if (!p)
		return -ENOMEM;
	b->p = p;
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
	return 0;
}

int json_buf_puts(struct json_buf *b, const char *s)
{
	return json_buf_put(b, s, strlen(s));
}

size_t json_utf8_len(const unsigned char *s, size_t n)
{
	unsigned cp;
	size_t len;
	if (s[0] < 0x80)
		return 1;
	if ((s[0] & 0xe0) == 0xc0) {
		len = 2;
		cp = s[0] & 0x1f;
	} else if ((s[0] & 0xf0) == 0xe0) {
		len = 3;
		cp = s[0] & 0x0f;
	} else if ((s[0] & 0xf8) == 0xf0) {
		len = 4;
		cp = s[0] & 0x07;
	} else {
		return 0;
	}
	if (len > n)
		return 0;
	for (size_t k = 1; k < len; k++) {
		if ((s[k] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[k] & 0x3f);
	}
	if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) ||
	    (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

int json_buf_string(struct json_buf *b, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *p = (const unsigned char *)s;
	size_t n = strlen(s);
	if (json_buf_put(b, "\"", 1) < 0)
		return -ENOMEM;
	for (size_t i = 0; i < n;) {
		size_t run = i;
		while (run < n && p[run] >= 0x20 && p[run] < 0x80 && p[run] != '"' &&
		       p[run] != '\\')
			run++;
		if (run > i && json_buf_put(b, s + i, run - i) < 0)
			return -ENOMEM;
		i = run;
		if (i >= n)
			break;
		char esc[7];
		int r;
		if (p[i] == '"' || p[i] == '\\') {
			esc[0] = '\\';
			esc[1] = (char)p[i];
			r = json_buf_put(b, esc, 2);
			i++;
		} else if (p[i] < 0x20) {
			memcpy(esc, "\\u00", 4);
			esc[4] = hex[p[i] >> 4];
			esc[5] = hex[p[i] & 15];
			r = json_buf_put(b, esc, 6);
			i++;
		} else {
			size_t len = json_utf8_len(p + i, n - i);
			if (len) {
				r = json_buf_put(b, s + i, len);
				i += len;
			} else {
				r = json_buf_put(b, "\xef\xbf\xbd", 3);
				i++;
			}
		}
		if (r < 0)
			return -ENOMEM;
	}
	return json_buf_put(b, "\"", 1);
}

void json_buf_free(struct json_buf *b)
{
	free(b->p);
	b->p = NULL;
	b->len = b->cap = 0;
}
