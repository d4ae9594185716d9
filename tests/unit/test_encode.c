/* SPDX-License-Identifier: Apache-2.0 */
/* Table tests for rpc/encode.c: exact JSON bytes, protobuf round trips
 * through the generated decoder, and the headers of the ready responses. */
#include <stdlib.h>
#include <string.h>

#include <microhttpd.h>

#include "base/cleanup.h"
#include "health.pb-c.h"
#include "prpc.pb-c.h"
#include "rpc/encode.h"
#include "tests/lib/tap.h"

struct entry {
	const char *name, *status;
};

static const struct {
	const char *label;
	bool healthy;
	struct entry e[3];
	size_t n;
	const char *error; /* NULL: none */
	const char *json;
	/* What a proto3 decoder reads back: invalid UTF-8 repaired. */
	struct entry pb[3];
	const char *pb_error;
} cases[] = {
	{ "healthy, nothing else", true, { { 0 } }, 0, NULL,
	  "{\"healthy\":true,\"unhealthy\":[],\"error\":\"\"}", { { 0 } }, "" },
	{ "unhealthy, no entries, empty error", false, { { 0 } }, 0, "",
	  "{\"healthy\":false,\"unhealthy\":[],\"error\":\"\"}", { { 0 } }, "" },
	{ "error set", false, { { 0 } }, 0, "cannot reach docker: connection refused",
	  "{\"healthy\":false,\"unhealthy\":[],\"error\":\"cannot reach docker: connection refused\"}",
	  { { 0 } }, "cannot reach docker: connection refused" },
	{ "two entries in order", false,
	  { { "db", "unhealthy" }, { "web", "starting" } }, 2, NULL,
	  "{\"healthy\":false,\"unhealthy\":[{\"name\":\"db\",\"status\":\"unhealthy\"},"
	  "{\"name\":\"web\",\"status\":\"starting\"}],\"error\":\"\"}",
	  { { "db", "unhealthy" }, { "web", "starting" } }, "" },
	{ "quotes, backslash, control bytes", false,
	  { { "a\"b\\c", "line\nnext\ttab\x01" } }, 1, "x\"y",
	  "{\"healthy\":false,\"unhealthy\":[{\"name\":\"a\\\"b\\\\c\","
	  "\"status\":\"line\\u000anext\\u0009tab\\u0001\"}],\"error\":\"x\\\"y\"}",
	  { { "a\"b\\c", "line\nnext\ttab\x01" } }, "x\"y" },
	{ "valid UTF-8 kept as is", false,
	  { { "caf\xc3\xa9", "\xf0\x9f\x98\x80 ok" } }, 1, NULL,
	  "{\"healthy\":false,\"unhealthy\":[{\"name\":\"caf\xc3\xa9\","
	  "\"status\":\"\xf0\x9f\x98\x80 ok\"}],\"error\":\"\"}",
	  { { "caf\xc3\xa9", "\xf0\x9f\x98\x80 ok" } }, "" },
	{ "invalid UTF-8 replaced", false,
	  { { "bad\xff", "cut\xc3" } }, 1, "e\x80",
	  "{\"healthy\":false,\"unhealthy\":[{\"name\":\"bad\xef\xbf\xbd\","
	  "\"status\":\"cut\xef\xbf\xbd\"}],\"error\":\"e\xef\xbf\xbd\"}",
	  { { "bad\xef\xbf\xbd", "cut\xef\xbf\xbd" } }, "e\xef\xbf\xbd" },
};

static void build(struct verdict *v, size_t i)
{
	verdict_init(v);
	v->healthy = cases[i].healthy;
	for (size_t k = 0; k < cases[i].n; k++)
		verdict_add(v, cases[i].e[k].name, "%s", cases[i].e[k].status);
	if (cases[i].error)
		verdict_set_error(v, "%s", cases[i].error);
}

static void test_json(void)
{
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct verdict v;
		struct json_buf b = { 0 };
		build(&v, i);
		is_int(encode_health_json(&v, &b), 0, "json %s: encodes", cases[i].label);
		is_str(b.p, cases[i].json, "json %s: exact bytes", cases[i].label);
		is_int(b.len, strlen(cases[i].json), "json %s: length", cases[i].label);
		json_buf_free(&b);
		verdict_free(&v);
	}
}

static void test_pb(void)
{
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct verdict v;
		uint8_t *buf = NULL;
		size_t len = 99;
		build(&v, i);
		is_int(encode_health_pb(&v, &buf, &len), 0, "pb %s: encodes", cases[i].label);
		ok(buf != NULL, "pb %s: buffer even when empty", cases[i].label);
		/* proto3 leaves out defaults: healthy:false with nothing
		 * else is the empty message; healthy:true is 08 01. */
		if (cases[i].healthy || cases[i].n || (cases[i].error && *cases[i].error))
			ok(len > 0, "pb %s: not empty", cases[i].label);
		else
			is_int(len, 0, "pb %s: all defaults pack to nothing", cases[i].label);
		if (cases[i].healthy && !cases[i].n && !cases[i].error)
			ok(len == 2 && buf[0] == 0x08 && buf[1] == 0x01,
			   "pb %s: is exactly field 1 = true", cases[i].label);
		Dstack__Guest__V1__HealthResponse *m =
			dstack__guest__v1__health_response__unpack(NULL, len, buf);
		ok(m != NULL, "pb %s: decodes", cases[i].label);
		if (m) {
			is_int(m->healthy, cases[i].healthy, "pb %s: healthy", cases[i].label);
			is_int(m->n_unhealthy, cases[i].n, "pb %s: entries", cases[i].label);
			for (size_t k = 0; k < m->n_unhealthy && k < cases[i].n; k++) {
				is_str(m->unhealthy[k]->name, cases[i].pb[k].name,
				       "pb %s: name %zu", cases[i].label, k);
				is_str(m->unhealthy[k]->status, cases[i].pb[k].status,
				       "pb %s: status %zu", cases[i].label, k);
			}
			is_str(m->error, cases[i].pb_error, "pb %s: error", cases[i].label);
			dstack__guest__v1__health_response__free_unpacked(m, NULL);
		}
		free(buf);
		verdict_free(&v);
	}
}

/* The version strings are compared with what encode.o itself reports, not
 * with this file's HEALTHD_REV: the two are compiled at different times. */
static void test_version_and_errors(void)
{
	struct json_buf b = { 0 };
	char want[256];
	const char *app = rpc_app_version();
	is_int(encode_version_json(&b), 0, "version json encodes");
	const char *rev = strstr(app, " (git:");
	ok(!strncmp(app, "v" HEALTHD_VERSION " (git:", strlen("v" HEALTHD_VERSION " (git:")) &&
		   rev && app[strlen(app) - 1] == ')',
	   "X-App-Version is v<version> (git:...): %s", app);
	rev = rev ? rev + 2 : "";
	int rl = (int)strlen(rev) - 1;
	snprintf(want, sizeof(want), "{\"version\":\"%s\",\"rev\":\"%.*s\"}", HEALTHD_VERSION,
		 rl, rev);
	is_str(b.p, want, "version json is the header's strings (no leading v, as the reference)");
	json_buf_free(&b);

	uint8_t *buf = NULL;
	size_t len = 0;
	is_int(encode_version_pb(&buf, &len), 0, "version pb encodes");
	Dstack__Guest__V1__VersionResponse *vm =
		dstack__guest__v1__version_response__unpack(NULL, len, buf);
	ok(vm && !strcmp(vm->version, HEALTHD_VERSION) && !strncmp(vm->rev, rev, (size_t)rl) &&
		   strlen(vm->rev) == (size_t)rl,
	   "version pb round trip");
	if (vm)
		dstack__guest__v1__version_response__free_unpacked(vm, NULL);
	free(buf);

	static const struct {
		const char *msg, *json;
	} errs[] = {
		{ "payload too large", "{\"error\":\"payload too large\"}" },
		{ "Service not found: Nope", "{\"error\":\"Service not found: Nope\"}" },
		{ "a\"b", "{\"error\":\"a\\\"b\"}" },
	};
	for (size_t i = 0; i < ARRAY_SIZE(errs); i++) {
		struct json_buf e = { 0 };
		is_int(encode_error_json(errs[i].msg, &e), 0, "error json %zu encodes", i);
		is_str(e.p, errs[i].json, "error json %zu bytes", i);
		json_buf_free(&e);
		buf = NULL;
		is_int(encode_error_pb(errs[i].msg, &buf, &len), 0, "error pb %zu encodes", i);
		Prpc__PrpcError *pm = prpc__prpc_error__unpack(NULL, len, buf);
		ok(pm && !strcmp(pm->message, errs[i].msg), "error pb %zu round trip", i);
		if (pm)
			prpc__prpc_error__free_unpacked(pm, NULL);
		free(buf);
	}
}

static void test_responses(void)
{
	struct verdict v;
	build(&v, 3);
	struct rpc_encoded *e = rpc_encode(&v);
	ok(e && e->health_json && e->health_pb, "rpc_encode builds both responses");
	if (e) {
		const struct {
			const char *header, *json, *pb;
		} hdrs[] = {
			{ "Content-Type", "application/json", "application/octet-stream" },
			{ "X-App-Version", rpc_app_version(), rpc_app_version() },
		};
		for (size_t i = 0; i < ARRAY_SIZE(hdrs); i++) {
			is_str(MHD_get_response_header(e->health_json, hdrs[i].header),
			       hdrs[i].json, "json response %s", hdrs[i].header);
			is_str(MHD_get_response_header(e->health_pb, hdrs[i].header),
			       hdrs[i].pb, "pb response %s", hdrs[i].header);
		}
	}
	rpc_encoded_free(e);
	rpc_encoded_free(NULL);
	verdict_free(&v);

	struct MHD_Response *r = rpc_response_error(false, "boom");
	ok(r && !strcmp(MHD_get_response_header(r, "X-App-Version"), rpc_app_version()),
	   "error response carries X-App-Version");
	if (r)
		MHD_destroy_response(r);
}

int main(void)
{
	test_json();
	test_pb();
	test_version_and_errors();
	test_responses();
	return done_testing();
}
