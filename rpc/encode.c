/* SPDX-License-Identifier: Apache-2.0 */
#include "rpc/encode.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <microhttpd.h>

#include "base/cleanup.h"
#include "base/version.h"
#include "health.pb-c.h"
#include "prpc.pb-c.h"

const char *rpc_app_version(void)
{
	return "v" HEALTHD_VERSION " (" HEALTHD_REV ")";
}

static const char *str_or_empty(const char *s)
{
	return s ? s : "";
}

int encode_health_json(const struct verdict *v, struct json_buf *out)
{
	int r = json_buf_puts(out, v->healthy ? "{\"healthy\":true,\"unhealthy\":["
					      : "{\"healthy\":false,\"unhealthy\":[");
	for (size_t i = 0; r == 0 && i < v->n_entries; i++) {
		r = json_buf_puts(out, i ? ",{\"name\":" : "{\"name\":");
		if (r == 0)
			r = json_buf_string(out, v->entries[i].name);
		if (r == 0)
			r = json_buf_puts(out, ",\"status\":");
		if (r == 0)
			r = json_buf_string(out, v->entries[i].status);
		if (r == 0)
			r = json_buf_puts(out, "}");
	}
	if (r == 0)
		r = json_buf_puts(out, "],\"error\":");
	if (r == 0)
		r = json_buf_string(out, str_or_empty(v->error));
	if (r == 0)
		r = json_buf_puts(out, "}");
	return r;
}

/* s itself when it is valid UTF-8, else a copy in *owned with every bad byte
 * replaced by U+FFFD: proto3 decoders (the gateway's prost) refuse a string
 * field that is not UTF-8, which would read as an unreachable agent. */
static char *utf8_repaired(const char *s, char **owned)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t n = strlen(s), i = 0, bad = 0;
	while (i < n) {
		size_t l = json_utf8_len(p + i, n - i);
		bad += l == 0;
		i += l ? l : 1;
	}
	if (!bad)
		return (char *)s;
	char *d = malloc(n + 2 * bad + 1);
	if (!d)
		return NULL;
	size_t o = 0;
	for (i = 0; i < n;) {
		size_t l = json_utf8_len(p + i, n - i);
		if (l) {
			memcpy(d + o, s + i, l);
			o += l, i += l;
		} else {
			memcpy(d + o, "\xef\xbf\xbd", 3);
			o += 3, i++;
		}
	}
	d[o] = '\0';
	*owned = d;
	return d;
}

/* Packs a message into a malloc'd buffer of at least one byte, so that an
 * all-defaults message (zero bytes) is still a successful, non-NULL result. */
static int pack_message(const ProtobufCMessage *m, uint8_t **out, size_t *len)
{
	size_t n = protobuf_c_message_get_packed_size(m);
	uint8_t *buf = malloc(n ? n : 1);
	if (!buf)
		return -ENOMEM;
	*len = protobuf_c_message_pack(m, buf);
	*out = buf;
	return 0;
}

struct pb_strings {
	char **owned; /* repaired copies, freed with the message */
	size_t n;
};

static char *pb_string(struct pb_strings *ps, const char *s)
{
	char *copy = NULL;
	char *r = utf8_repaired(str_or_empty(s), &copy);
	if (copy)
		ps->owned[ps->n++] = copy;
	return r;
}

int encode_health_pb(const struct verdict *v, uint8_t **out, size_t *len)
{
	Dstack__Guest__V1__HealthResponse m = DSTACK__GUEST__V1__HEALTH_RESPONSE__INIT;
	size_t n = v->n_entries;
	_cleanup_free_ Dstack__Guest__V1__ContainerHealth *ents = calloc(n ? n : 1, sizeof(*ents));
	_cleanup_free_ Dstack__Guest__V1__ContainerHealth **ptrs = calloc(n ? n : 1, sizeof(*ptrs));
	_cleanup_free_ char **owned = calloc(2 * n + 1, sizeof(char *));
	struct pb_strings ps = { owned, 0 };
	int r = -ENOMEM;
	if (!ents || !ptrs || !owned)
		return -ENOMEM;
	m.healthy = v->healthy;
	for (size_t i = 0; i < n; i++) {
		dstack__guest__v1__container_health__init(&ents[i]);
		ents[i].name = pb_string(&ps, v->entries[i].name);
		ents[i].status = pb_string(&ps, v->entries[i].status);
		if (!ents[i].name || !ents[i].status)
			goto out;
		ptrs[i] = &ents[i];
	}
	m.n_unhealthy = n;
	m.unhealthy = n ? ptrs : NULL;
	m.error = pb_string(&ps, v->error);
	if (m.error)
		r = pack_message(&m.base, out, len);
out:
	for (size_t i = 0; i < ps.n; i++)
		free(ps.owned[i]);
	return r;
}

int encode_version_json(struct json_buf *out)
{
	int r = json_buf_puts(out, "{\"version\":");
	if (r == 0)
		r = json_buf_string(out, HEALTHD_VERSION);
	if (r == 0)
		r = json_buf_puts(out, ",\"rev\":");
	if (r == 0)
		r = json_buf_string(out, HEALTHD_REV);
	if (r == 0)
		r = json_buf_puts(out, "}");
	return r;
}

int encode_version_pb(uint8_t **out, size_t *len)
{
	Dstack__Guest__V1__VersionResponse m = DSTACK__GUEST__V1__VERSION_RESPONSE__INIT;
	m.version = (char *)HEALTHD_VERSION;
	m.rev = (char *)HEALTHD_REV;
	return pack_message(&m.base, out, len);
}

int encode_error_json(const char *msg, struct json_buf *out)
{
	int r = json_buf_puts(out, "{\"error\":");
	if (r == 0)
		r = json_buf_string(out, msg);
	if (r == 0)
		r = json_buf_puts(out, "}");
	return r;
}

int encode_error_pb(const char *msg, uint8_t **out, size_t *len)
{
	Prpc__PrpcError m = PRPC__PRPC_ERROR__INIT;
	_cleanup_free_ char *copy = NULL;
	m.message = utf8_repaired(msg, &copy);
	if (!m.message)
		return -ENOMEM;
	return pack_message(&m.base, out, len);
}

struct MHD_Response *rpc_response_new(bool json, const void *body, size_t len)
{
	/* MUST_COPY: the response owns its bytes, so it outlives the snapshot
	 * that built it for as long as a connection still sends it. */
	struct MHD_Response *resp = MHD_create_response_from_buffer(
		len, (void *)(len ? body : ""), MHD_RESPMEM_MUST_COPY);
	if (!resp)
		return NULL;
	if (MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
				    json ? "application/json"
					 : "application/octet-stream") != MHD_YES ||
	    MHD_add_response_header(resp, RPC_APP_VERSION_HEADER, rpc_app_version()) != MHD_YES) {
		MHD_destroy_response(resp);
		return NULL;
	}
	return resp;
}

/* The response for what an encoder returned (r) in the given mode; the
 * JSON buffer is freed here, the protobuf bytes stay the caller's. */
static struct MHD_Response *encoded_response(bool json, int r, struct json_buf *b,
					     const uint8_t *pb, size_t len)
{
	struct MHD_Response *resp = NULL;
	if (r == 0)
		resp = json ? rpc_response_new(true, b->p, b->len) : rpc_response_new(false, pb, len);
	json_buf_free(b);
	return resp;
}

struct MHD_Response *rpc_response_error(bool json, const char *msg)
{
	struct json_buf b = { 0 };
	_cleanup_free_ uint8_t *pb = NULL;
	size_t len = 0;
	int r = json ? encode_error_json(msg, &b) : encode_error_pb(msg, &pb, &len);
	return encoded_response(json, r, &b, pb, len);
}

struct MHD_Response *rpc_response_health(bool json, const struct verdict *v)
{
	struct json_buf b = { 0 };
	_cleanup_free_ uint8_t *pb = NULL;
	size_t len = 0;
	int r = json ? encode_health_json(v, &b) : encode_health_pb(v, &pb, &len);
	return encoded_response(json, r, &b, pb, len);
}

struct MHD_Response *rpc_response_version(bool json)
{
	struct json_buf b = { 0 };
	_cleanup_free_ uint8_t *pb = NULL;
	size_t len = 0;
	int r = json ? encode_version_json(&b) : encode_version_pb(&pb, &len);
	return encoded_response(json, r, &b, pb, len);
}

struct rpc_encoded *rpc_encode(const struct verdict *v)
{
	_cleanup_(rpc_encoded_freep) struct rpc_encoded *e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	e->health_json = rpc_response_health(true, v);
	e->health_pb = rpc_response_health(false, v);
	if (!e->health_json || !e->health_pb)
		return NULL;
	return TAKE_PTR(e);
}

void rpc_encoded_free(struct rpc_encoded *e)
{
	if (!e)
		return;
	if (e->health_json)
		MHD_destroy_response(e->health_json);
	if (e->health_pb)
		MHD_destroy_response(e->health_pb);
	free(e);
}

static void encoded_free(void *e)
{
	rpc_encoded_free(e);
}

struct snapshot *rpc_snapshot_new(struct verdict *v, int64_t mono_ms)
{
	_cleanup_(rpc_encoded_freep) struct rpc_encoded *e = rpc_encode(v);
	if (!e)
		return NULL;
	struct snapshot *s = snapshot_new(v, mono_ms, e, encoded_free);
	if (s)
		e = NULL; /* the snapshot's now */
	return s;
}
