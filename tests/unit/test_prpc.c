/* SPDX-License-Identifier: Apache-2.0 */
/* Table tests for rpc/prpc.c: every routing rule of docs/design/prpc.md. */
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "rpc/prpc.h"
#include "tests/lib/tap.h"

#define B(s) s, sizeof(s) - 1 /* a body literal with its exact length */
#define NOBODY NULL, 0

enum { ANY = -1 };

static const struct {
	const char *method, *path, *json_arg, *ctype, *clen;
	const char *body;
	size_t len;
	enum prpc_outcome outcome;
	enum prpc_call call;
	int json; /* 0, 1 */
	int status;
	const char *error; /* substring the error must contain; NULL: none */
} cases[] = {
	/* Mode */
	{ "GET", "/prpc/v1/Health", NULL, NULL, NULL, NOBODY, PRPC_OK, PRPC_CALL_HEALTH, 1, 200, NULL },
	{ "GET", "/prpc/v1/Health", "0", "application/octet-stream", NULL, NOBODY,
	  PRPC_OK, PRPC_CALL_HEALTH, 1, 200, NULL },
	{ "GET", "/prpc/v1/Version", NULL, NULL, NULL, NOBODY, PRPC_OK, PRPC_CALL_VERSION, 1, 200, NULL },
	{ "POST", "/prpc/v1/Health", "", NULL, "2", B("{}"), PRPC_OK, PRPC_CALL_HEALTH, 1, 200, NULL },
	{ "POST", "/prpc/v1/Health", "true", NULL, NULL, B("{}"), PRPC_OK, PRPC_CALL_HEALTH, 1, 200, NULL },
	{ "POST", "/prpc/v1/Health", "1", NULL, NULL, B("{}"), PRPC_OK, PRPC_CALL_HEALTH, 1, 200, NULL },
	{ "POST", "/prpc/v1/Health", "false", NULL, NULL, NOBODY, PRPC_OK, PRPC_CALL_HEALTH, 0, 200, NULL },
	{ "POST", "/prpc/v1/Health", "yes", NULL, NULL, NOBODY, PRPC_OK, PRPC_CALL_HEALTH, 0, 200, NULL },
	{ "POST", "/prpc/v1/Health", NULL, "application/json; charset=utf-8", NULL, B("{}"),
	  PRPC_OK, PRPC_CALL_HEALTH, 1, 200, NULL },
	{ "POST", "/prpc/v1/Health", NULL, "Application/JSON", NULL, B("{}"),
	  PRPC_OK, PRPC_CALL_HEALTH, 1, 200, NULL },
	{ "POST", "/prpc/v1/Health", NULL, "application/jsonx", NULL, NOBODY,
	  PRPC_OK, PRPC_CALL_HEALTH, 0, 200, NULL },
	{ "POST", "/prpc/v1/Health", NULL, "application/octet-stream", NULL, NOBODY,
	  PRPC_OK, PRPC_CALL_HEALTH, 0, 200, NULL },
	{ "POST", "/prpc/v1/Worker.Health", "", NULL, NULL, NOBODY, PRPC_OK, PRPC_CALL_HEALTH, 1, 200, NULL },
	{ "POST", "/prpc/v1/Version", NULL, NULL, NULL, NOBODY, PRPC_OK, PRPC_CALL_VERSION, 0, 200, NULL },
	/* JSON bodies */
	{ "POST", "/prpc/v1/Health", "", NULL, NULL, B(" { } "), PRPC_OK, PRPC_CALL_HEALTH, 1, 200, NULL },
	{ "POST", "/prpc/v1/Health", "", NULL, NULL, B("{\"x\":[1,2]}"), PRPC_OK, PRPC_CALL_HEALTH, 1, 200, NULL },
	{ "POST", "/prpc/v1/Health", "", NULL, NULL, B("[]"), PRPC_BAD_REQUEST, PRPC_CALL_HEALTH, 1, 400,
	  "must be a JSON object, not an array" },
	{ "POST", "/prpc/v1/Health", "", NULL, NULL, B("null"), PRPC_BAD_REQUEST, PRPC_CALL_HEALTH, 1, 400,
	  "request body " },
	{ "POST", "/prpc/v1/Health", "", NULL, NULL, B("\"s\""), PRPC_BAD_REQUEST, PRPC_CALL_HEALTH, 1, 400,
	  "not a string" },
	{ "POST", "/prpc/v1/Health", "", NULL, NULL, B("{"), PRPC_BAD_REQUEST, PRPC_CALL_HEALTH, 1, 400,
	  "not valid JSON" },
	{ "POST", "/prpc/v1/Health", "", NULL, NULL, B("garbage"), PRPC_BAD_REQUEST, PRPC_CALL_HEALTH, 1, 400,
	  "not valid JSON" },
	{ "POST", "/prpc/v1/Health", "", NULL, NULL, B("  "), PRPC_BAD_REQUEST, PRPC_CALL_HEALTH, 1, 400,
	  "not valid JSON" },
	{ "POST", "/prpc/v1/Version", NULL, "application/json", NULL, B("{}{}"), PRPC_BAD_REQUEST,
	  PRPC_CALL_VERSION, 1, 400, "trailing data" },
	/* Protobuf bodies */
	{ "POST", "/prpc/v1/Health", NULL, NULL, NULL, B("\x08\x01"), PRPC_OK, PRPC_CALL_HEALTH, 0, 200, NULL },
	{ "POST", "/prpc/v1/Health", NULL, NULL, NULL, B("\x0f"), PRPC_BAD_REQUEST, PRPC_CALL_HEALTH, 0, 400,
	  "not a protobuf HealthRequest" },
	{ "POST", "/prpc/v1/Health", NULL, NULL, NULL, B("\x08"), PRPC_BAD_REQUEST, PRPC_CALL_HEALTH, 0, 400,
	  "not a protobuf HealthRequest" },
	{ "POST", "/prpc/v1/Health", NULL, NULL, NULL, B("{}"), PRPC_BAD_REQUEST, PRPC_CALL_HEALTH, 0, 400,
	  "not a protobuf HealthRequest" },
	{ "POST", "/prpc/v1/Version", NULL, NULL, NULL, B("\xff\xff"), PRPC_BAD_REQUEST, PRPC_CALL_VERSION, 0,
	  400, "not a protobuf VersionRequest" },
	/* Size */
	{ "POST", "/prpc/v1/Health", "", NULL, "65537", NOBODY, PRPC_TOO_LARGE, PRPC_CALL_HEALTH, 1, 413,
	  "payload too large" },
	{ "POST", "/prpc/v1/Health", NULL, NULL, "99999999999999999999999", NOBODY, PRPC_TOO_LARGE,
	  PRPC_CALL_HEALTH, 0, 413, "payload too large" },
	{ "POST", "/prpc/v1/Health", "", NULL, NULL, NULL, PRPC_MAX_BODY + 1, PRPC_TOO_LARGE,
	  PRPC_CALL_HEALTH, 1, 413, "payload too large" },
	{ "GET", "/prpc/v1/Health", NULL, NULL, "65537", NOBODY, PRPC_OK, PRPC_CALL_HEALTH, 1, 200, NULL },
	/* Methods */
	{ "PUT", "/prpc/v1/Health", NULL, NULL, NULL, NOBODY, PRPC_BAD_METHOD, PRPC_CALL_NONE, 0, 405,
	  "method not allowed" },
	{ "HEAD", "/prpc/v1/Health", "", NULL, NULL, NOBODY, PRPC_BAD_METHOD, PRPC_CALL_NONE, 1, 405,
	  "method not allowed" },
	{ "get", "/prpc/v1/Health", NULL, NULL, NULL, NOBODY, PRPC_BAD_METHOD, PRPC_CALL_NONE, 0, 405,
	  "method not allowed" },
	/* Outside the mount: 404 that never says "Service not found" */
	{ "GET", "/prpc/Health", NULL, NULL, NULL, NOBODY, PRPC_NOT_MOUNTED, PRPC_CALL_NONE, 1, 404, "not found: " },
	{ "GET", "/prpc/v0/Health", NULL, NULL, NULL, NOBODY, PRPC_NOT_MOUNTED, PRPC_CALL_NONE, 1, 404, "not found: " },
	{ "POST", "/prpc/v2/Health", NULL, NULL, NULL, NOBODY, PRPC_NOT_MOUNTED, PRPC_CALL_NONE, 0, 404, "not found: " },
	{ "GET", "/prpc/v1/a/b", NULL, NULL, NULL, NOBODY, PRPC_NOT_MOUNTED, PRPC_CALL_NONE, 1, 404, "not found: " },
	{ "GET", "/prpc/v1/Health/", NULL, NULL, NULL, NOBODY, PRPC_NOT_MOUNTED, PRPC_CALL_NONE, 1, 404, "not found: " },
	{ "GET", "/prpc/v1/", NULL, NULL, NULL, NOBODY, PRPC_NOT_MOUNTED, PRPC_CALL_NONE, 1, 404, "not found: " },
	{ "GET", "/prpc/v1", NULL, NULL, NULL, NOBODY, PRPC_NOT_MOUNTED, PRPC_CALL_NONE, 1, 404, "not found: " },
	{ "GET", "/", NULL, NULL, NULL, NOBODY, PRPC_NOT_MOUNTED, PRPC_CALL_NONE, 1, 404, "not found: " },
	{ "GET", "/prpc/v1Health", NULL, NULL, NULL, NOBODY, PRPC_NOT_MOUNTED, PRPC_CALL_NONE, 1, 404, "not found: " },
	/* Unknown methods */
	{ "GET", "/prpc/v1/Nope", NULL, NULL, NULL, NOBODY, PRPC_NO_SERVICE, PRPC_CALL_NONE, 1, 404,
	  "Service not found: Nope" },
	{ "POST", "/prpc/v1/health", NULL, NULL, NULL, B("{}"), PRPC_NO_SERVICE, PRPC_CALL_NONE, 0, 404,
	  "Service not found: health" },
	{ "POST", "/prpc/v1/Bad\x01\xc3\xa9", "", NULL, NULL, NOBODY, PRPC_NO_SERVICE, PRPC_CALL_NONE, 1, 404,
	  "Service not found: Bad???" },
};

static void test_table(void)
{
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		const struct prpc_request rq = {
			cases[i].method, cases[i].path, cases[i].json_arg, cases[i].ctype, cases[i].clen,
		};
		struct prpc_route rt;
		prpc_route_head(&rq, &rt);
		if (rt.outcome == PRPC_PENDING)
			prpc_route_body(&rt, cases[i].body, cases[i].len);
		const char *what = cases[i].path;
		is_int(rt.outcome, cases[i].outcome, "%zu %s %s: outcome", i, cases[i].method, what);
		is_int(rt.status, cases[i].status, "%zu %s %s: status", i, cases[i].method, what);
		is_int(rt.call, cases[i].call, "%zu %s %s: call", i, cases[i].method, what);
		is_int(rt.json, cases[i].json, "%zu %s %s: json mode", i, cases[i].method, what);
		if (cases[i].error) {
			if (!ok(strstr(rt.error, cases[i].error) != NULL, "%zu %s %s: error says '%s'",
				i, cases[i].method, what, cases[i].error))
				printf("#   got: '%s'\n", rt.error);
		}
		if (rt.outcome == PRPC_NOT_MOUNTED)
			ok(!strstr(rt.error, "Service not found"),
			   "%zu %s: outside the mount never says Service not found", i, what);
	}
}

static void test_long_method_is_cut(void)
{
	char path[600];
	memcpy(path, "/prpc/v1/", 9);
	memset(path + 9, 'M', sizeof(path) - 10);
	path[sizeof(path) - 1] = '\0';
	const struct prpc_request rq = { "GET", path, NULL, NULL, NULL };
	struct prpc_route rt;
	prpc_route_head(&rq, &rt);
	is_int(rt.status, 404, "long unknown method: 404");
	ok(strlen(rt.error) <= strlen("Service not found: ") + 64,
	   "long unknown method: the name is cut (%zu bytes)", strlen(rt.error));
	ok(strstr(rt.error, "...") != NULL, "long unknown method: the cut is marked");
}

static void test_token_limit(void)
{
	/* An object holding more values than the token bound allows. */
	size_t n = 2 * PRPC_MAX_JSON_TOKENS;
	char *body = malloc(n * 2 + 16);
	size_t len = 6;
	memcpy(body, "{\"a\":[", len);
	for (size_t k = 0; k < n; k++)
		body[len++] = '1', body[len++] = ',';
	len--;
	memcpy(body + len, "]}", 2);
	len += 2;
	const struct prpc_request rq = { "POST", "/prpc/v1/Health", "", NULL, NULL };
	struct prpc_route rt;
	prpc_route_head(&rq, &rt);
	prpc_route_body(&rt, body, len);
	is_int(rt.status, 400, "a JSON body past the token bound is refused");
	ok(strstr(rt.error, "tokens") != NULL, "and says why: %s", rt.error);
	free(body);
}

int main(void)
{
	test_table();
	test_long_method_is_cut();
	test_token_limit();
	return done_testing();
}
