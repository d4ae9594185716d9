/* SPDX-License-Identifier: Apache-2.0 */
#include "rpc/prpc.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/err.h"
#include "base/json.h"
#include "health.pb-c.h"

/* Longest method name quoted back in "Service not found: ..."; request bytes
 * are never echoed at length. */
#define METHOD_SHOWN_MAX 64

static void set(struct prpc_route *rt, enum prpc_outcome o, int status, const char *text)
{
	rt->outcome = o;
	rt->status = status;
	snprintf(rt->error, sizeof(rt->error), "%s", text);
}

/* The reference (ra-rpc) reads `json` as a flag when it is bare, empty,
 * "true" or "1". */
static bool json_flag(const char *v)
{
	return v && (!strcmp(v, "") || !strcmp(v, "true") || !strcmp(v, "1"));
}

/* application/json with any parameters ("; charset=utf-8"), any case. */
static bool json_content_type(const char *ct)
{
	static const char want[] = "application/json";
	if (!ct)
		return false;
	ct += strspn(ct, " \t");
	if (strncasecmp(ct, want, sizeof(want) - 1) != 0)
		return false;
	ct += sizeof(want) - 1;
	ct += strspn(ct, " \t");
	return *ct == '\0' || *ct == ';';
}

/* Content-Length as a number; false when absent or not a plain decimal. */
static bool content_length(const char *s, uint64_t *out)
{
	if (!s || !*s || strspn(s, "0123456789") != strlen(s))
		return false;
	errno = 0;
	uint64_t n = strtoull(s, NULL, 10);
	*out = errno == ERANGE ? UINT64_MAX : n;
	return true;
}

static enum prpc_call lookup(const char *name)
{
	/* The reference mounts Worker with its "Worker." prefix trimmed, so
	 * both spellings name the same method. */
	if (!strncmp(name, "Worker.", 7))
		name += 7;
	if (!strcmp(name, "Health"))
		return PRPC_CALL_HEALTH;
	if (!strcmp(name, "Version"))
		return PRPC_CALL_VERSION;
	return PRPC_CALL_NONE;
}

static void route_path(const char *path, struct prpc_route *rt)
{
	size_t m = strlen(PRPC_MOUNT);
	if (!path || strncmp(path, PRPC_MOUNT, m) != 0 || path[m] == '\0' ||
	    strchr(path + m, '/')) {
		set(rt, PRPC_NOT_MOUNTED, 404, PRPC_TEXT_NOT_MOUNTED);
		return;
	}
	rt->call = lookup(path + m);
	if (rt->call == PRPC_CALL_NONE) {
		char shown[METHOD_SHOWN_MAX + 1];
		err_clean(shown, sizeof(shown), path + m, METHOD_SHOWN_MAX);
		rt->outcome = PRPC_NO_SERVICE;
		rt->status = 404;
		snprintf(rt->error, sizeof(rt->error), "Service not found: %s", shown);
	}
}

void prpc_route_head(const struct prpc_request *rq, struct prpc_route *rt)
{
	memset(rt, 0, sizeof(*rt));
	rt->get = rq->method && !strcmp(rq->method, "GET");
	bool post = rq->method && !strcmp(rq->method, "POST");
	/* A GET is always answered in JSON. */
	rt->json = rt->get || json_flag(rq->json_arg) || json_content_type(rq->content_type);
	if (!rt->get && !post) {
		set(rt, PRPC_BAD_METHOD, 405, PRPC_TEXT_BAD_METHOD);
		return;
	}
	route_path(rq->path, rt);
	if (rt->status)
		return;
	uint64_t len;
	if (rt->get) {
		/* The payload of a GET is its query string, and any query
		 * string is a valid (empty) request. */
		rt->outcome = PRPC_OK;
		rt->status = 200;
	} else if (content_length(rq->content_length, &len) && len > PRPC_MAX_BODY) {
		set(rt, PRPC_TOO_LARGE, 413, PRPC_TEXT_TOO_LARGE);
	} else {
		rt->outcome = PRPC_PENDING;
	}
}

static void check_json(struct prpc_route *rt, const char *body, size_t len)
{
	/* The gateway's poll; spared the tokenizer and its allocation. */
	if (len == 2 && body[0] == '{' && body[1] == '}')
		return;
	struct json j;
	struct errbuf e = { "" };
	if (json_parse(&j, body, len, PRPC_MAX_JSON_TOKENS, &e) < 0) {
		rt->outcome = PRPC_BAD_REQUEST;
		rt->status = 400;
		snprintf(rt->error, sizeof(rt->error), "request body is not valid JSON: %s", e.msg);
		return;
	}
	if (!json_is_object(&j, 0)) {
		rt->outcome = PRPC_BAD_REQUEST;
		rt->status = 400;
		snprintf(rt->error, sizeof(rt->error),
			 "request body must be a JSON object, not %s", json_type_name(&j, 0));
	}
	json_free(&j);
}

static void check_pb(struct prpc_route *rt, const uint8_t *body, size_t len)
{
	const ProtobufCMessageDescriptor *d =
		rt->call == PRPC_CALL_HEALTH ? &dstack__guest__v1__health_request__descriptor
					     : &dstack__guest__v1__version_request__descriptor;
	ProtobufCMessage *m = protobuf_c_message_unpack(d, NULL, len, body);
	if (m) {
		protobuf_c_message_free_unpacked(m, NULL);
		return;
	}
	rt->outcome = PRPC_BAD_REQUEST;
	rt->status = 400;
	snprintf(rt->error, sizeof(rt->error), "request body is not a protobuf %s", d->short_name);
}

void prpc_route_body(struct prpc_route *rt, const void *body, size_t len)
{
	if (rt->outcome != PRPC_PENDING)
		return;
	if (len > PRPC_MAX_BODY) {
		set(rt, PRPC_TOO_LARGE, 413, PRPC_TEXT_TOO_LARGE);
		return;
	}
	rt->outcome = PRPC_OK;
	rt->status = 200;
	if (len == 0)
		return;
	if (rt->json)
		check_json(rt, body, len);
	else
		check_pb(rt, body, len);
}
