/* SPDX-License-Identifier: Apache-2.0 */
/* Table tests for base/json.c: the tokenizer wrapper every parser uses. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "tests/lib/tap.h"

static void test_parse(void)
{
	static const struct {
		const char *in;
		int want; /* 0, -EINVAL, -E2BIG */
	} cases[] = {
		{ "{}", 0 },
		{ "[1,2,3]", 0 },
		{ "{\"a\":true}", 0 },
		{ "", -EINVAL },
		{ "{", -EINVAL },
		{ "{} {}", -EINVAL },
		{ "{\"a\":tru}", -EINVAL },
		{ "[1,2,3,4,5,6,7,8,9,10]", -E2BIG },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct json j;
		struct errbuf e = { "" };
		int r = json_parse(&j, cases[i].in, strlen(cases[i].in), 8, &e);
		is_int(r, cases[i].want, "json_parse(%s) = %d (%s)", cases[i].in, r, e.msg);
		json_free(&j);
	}
}

static void test_strings(void)
{
	static const struct {
		const char *in;
		const char *want; /* NULL: -EINVAL */
	} cases[] = {
		{ "\"plain\"", "plain" },
		{ "\"a\\\"b\\\\c\\/d\"", "a\"b\\c/d" },
		{ "\"\\n\\t\"", "\n\t" },
		{ "\"\\u00e9\"", "\xc3\xa9" },
		{ "\"\\ud83d\\ude00\"", "\xf0\x9f\x98\x80" },
		{ "\"\\ud83d\"", NULL },
		{ "\"\\u0000\"", NULL },
		{ "\"\\x\"", NULL },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct json j;
		char *s = NULL;
		int r = json_parse(&j, cases[i].in, strlen(cases[i].in), 8, NULL);
		if (r == 0)
			r = json_strdup(&j, 0, &s);
		if (cases[i].want)
			is_str(s, cases[i].want, "unescape %s", cases[i].in);
		else
			is_int(r, -EINVAL, "unescape %s refused", cases[i].in);
		free(s);
		json_free(&j);
	}
}

static void test_get_and_numbers(void)
{
	const char *doc = "{\"a\":{\"x\":[1,{\"y\":2}]},\"b\":-42,\"c\":1.5,\"d\":false,"
			  "\"e\":99999999999999999999,\"f\\u0067\":null}";
	struct json j;
	ok(json_parse(&j, doc, strlen(doc), 64, NULL) == 0, "parse nested document");
	int b = json_get(&j, 0, "b");
	int64_t n = 0;
	ok(json_int64(&j, b, &n) == 0 && n == -42, "b is -42 after skipping a nested value");
	double d = 0;
	ok(json_double(&j, json_get(&j, 0, "c"), &d) == 0 && d == 1.5, "c is 1.5");
	ok(json_int64(&j, json_get(&j, 0, "c"), &n) == -EINVAL, "1.5 is not an integer");
	bool v = true;
	ok(json_bool(&j, json_get(&j, 0, "d"), &v) == 0 && !v, "d is false");
	is_int(json_int64(&j, json_get(&j, 0, "e"), &n), -ERANGE, "out of range integer");
	ok(json_is_null(&j, json_get(&j, 0, "fg")), "escaped key found");
	is_int(json_get(&j, 0, "zz"), -1, "absent key");
	json_free(&j);
}

static void test_encode(void)
{
	static const struct {
		const char *in, *want;
	} cases[] = {
		{ "x", "\"x\"" },
		{ "a\"b\\", "\"a\\\"b\\\\\"" },
		{ "\x01\n", "\"\\u0001\\u000a\"" },
		{ "\xc3\xa9", "\"\xc3\xa9\"" },
		{ "\xff", "\"\xef\xbf\xbd\"" },
		{ "\xed\xa0\x80", "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct json_buf b = { 0 };
		ok(json_buf_string(&b, cases[i].in) == 0, "encode case %zu", i);
		is_str(b.p, cases[i].want, "encoded case %zu", i);
		json_buf_free(&b);
	}
}

int main(void)
{
	test_parse();
	test_strings();
	test_get_and_numbers();
	test_encode();
	return done_testing();
}
