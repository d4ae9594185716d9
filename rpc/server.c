/* SPDX-License-Identifier: Apache-2.0 */
#include "rpc/server.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "base/clock.h"
#include "rpc/encode.h"
#include "rpc/gate.h"
#include "rpc/prpc.h"

/* Room for a body in a request context before it moves to the heap: the
 * gateway sends "{}", curl users a little more. */
#define INLINE_BODY 256
/* Past PRPC_MAX_BODY a body is counted, not kept, so that the answer can be
 * a 413; a client that goes on this long is cut off instead. */
#define DISCARD_MAX (16 * PRPC_MAX_BODY)

/* A POST whose body is still arriving. Contexts are recycled through a free
 * list (every callback runs on the one MHD thread), so that the gateway's
 * poll costs no allocation once the first few have been made. */
struct req {
	struct req *next_free, *next_all;
	enum prpc_call call;
	bool json;
	size_t len;        /* body bytes received */
	char *heap;        /* the body once it outgrows inline_body */
	size_t heap_cap;
	char inline_body[INLINE_BODY];
};

/* Answers that do not depend on the verdict, per mode ([0] protobuf,
 * [1] JSON), built once at start. */
struct fixed {
	struct MHD_Response *version[2], *bad_method[2], *not_mounted[2], *too_large[2];
};

struct rpc_server {
	struct gate *gate;
	struct cache *cache;
	struct pollers *pollers;
	struct fixed fx;
	struct req *free_list, *all;
};

static struct req *req_get(struct rpc_server *s)
{
	struct req *r = s->free_list;
	if (r) {
		s->free_list = r->next_free;
	} else {
		r = calloc(1, sizeof(*r));
		if (!r)
			return NULL;
		r->next_all = s->all;
		s->all = r;
	}
	r->len = 0;
	return r;
}

static void req_put(struct rpc_server *s, struct req *r)
{
	/* A large body's buffer is not kept: it was a rare caller. */
	free(r->heap);
	r->heap = NULL;
	r->heap_cap = 0;
	r->next_free = s->free_list;
	s->free_list = r;
}

static const char *req_body(const struct req *r)
{
	return r->heap ? r->heap : r->inline_body;
}

/* Keeps the body up to PRPC_MAX_BODY; beyond that only counts it. */
static int req_append(struct req *r, const char *data, size_t n)
{
	size_t total = r->len + n;
	if (total > PRPC_MAX_BODY) {
		r->len = total;
		return total > DISCARD_MAX ? -E2BIG : 0;
	}
	if (total > INLINE_BODY && total > r->heap_cap) {
		size_t cap = r->heap_cap ? r->heap_cap : 2 * INLINE_BODY;
		while (cap < total)
			cap *= 2;
		char *p = realloc(r->heap, cap);
		if (!p)
			return -ENOMEM;
		if (!r->heap)
			memcpy(p, r->inline_body, r->len);
		r->heap = p;
		r->heap_cap = cap;
	}
	memcpy((r->heap ? r->heap : r->inline_body) + r->len, data, n);
	r->len = total;
	return 0;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **req_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct rpc_server *s = cls;
	if (*req_cls && *req_cls != (void *)s) {
		req_put(s, *req_cls);
		*req_cls = NULL;
	}
}

static enum MHD_Result queue_owned(struct MHD_Connection *c, int status,
				   struct MHD_Response *resp)
{
	if (!resp)
		return MHD_NO;
	enum MHD_Result r = MHD_queue_response(c, (unsigned)status, resp);
	MHD_destroy_response(resp); /* the connection holds its own reference */
	return r;
}

/* A snapshot the refresh loop has not replaced for too long says nothing
 * about now (docs/design/verdict.md): answer unhealthy and say how old it is. */
static struct MHD_Response *stale_response(bool json, int64_t age_ms)
{
	struct verdict v;
	verdict_init(&v);
	if (verdict_set_error(&v, "verdict is %lld s old; the refresh loop is not keeping it current",
			      (long long)(age_ms / 1000)) < 0)
		return NULL;
	struct MHD_Response *resp = rpc_response_health(json, &v);
	verdict_free(&v);
	return resp;
}

/* For the local view: who asked and what it was told (rpc/control.h). */
static void note_poller(struct pollers *p, struct MHD_Connection *c, bool healthy,
			bool draining)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	pollers_note(p, ci ? ci->client_addr : NULL, healthy, draining, clock_real_ms());
}

static enum MHD_Result answer_health(struct rpc_server *s, struct MHD_Connection *c, bool json)
{
	struct snapshot *snap = cache_acquire(s->cache);
	int64_t age = clock_mono_ms() - snap->mono_ms;
	enum MHD_Result r;
	if (snap->max_age_ms > 0 && age > snap->max_age_ms)
		r = queue_owned(c, MHD_HTTP_OK, stale_response(json, age));
	else {
		const struct rpc_encoded *enc = snap->enc;
		r = MHD_queue_response(c, MHD_HTTP_OK, json ? enc->health_json : enc->health_pb);
	}
	if (s->pollers)
		note_poller(s->pollers, c, snap->verdict.healthy && !(snap->max_age_ms > 0 &&
								     age > snap->max_age_ms),
			    snap->draining && r == MHD_YES);
	snapshot_unref(snap);
	return r;
}

static enum MHD_Result answer(struct rpc_server *s, struct MHD_Connection *c,
			      const struct prpc_route *rt)
{
	const struct fixed *fx = &s->fx;
	int j = rt->json;
	switch (rt->outcome) {
	case PRPC_OK:
		if (rt->call == PRPC_CALL_VERSION)
			return MHD_queue_response(c, MHD_HTTP_OK, fx->version[j]);
		return answer_health(s, c, rt->json);
	case PRPC_BAD_METHOD:
		if (s->pollers && rt->call == PRPC_CALL_HEALTH)
			pollers_count(s->pollers, MHD_HTTP_METHOD_NOT_ALLOWED);
		return MHD_queue_response(c, MHD_HTTP_METHOD_NOT_ALLOWED, fx->bad_method[j]);
	case PRPC_NOT_MOUNTED:
		return MHD_queue_response(c, MHD_HTTP_NOT_FOUND, fx->not_mounted[j]);
	case PRPC_TOO_LARGE:
		if (s->pollers && rt->call == PRPC_CALL_HEALTH)
			pollers_count(s->pollers, MHD_HTTP_CONTENT_TOO_LARGE);
		return MHD_queue_response(c, MHD_HTTP_CONTENT_TOO_LARGE, fx->too_large[j]);
	case PRPC_NO_SERVICE:
	case PRPC_BAD_REQUEST:
		if (s->pollers && rt->call == PRPC_CALL_HEALTH)
			pollers_count(s->pollers, (unsigned)rt->status);
		/* The text names what the caller sent: built on this rare path. */
		return queue_owned(c, (unsigned)rt->status, rpc_response_error(rt->json, rt->error));
	case PRPC_PENDING:
		break;
	}
	return MHD_NO;
}

static void read_request(struct MHD_Connection *c, const char *method, const char *url,
			 struct prpc_request *rq)
{
	const char *json = NULL;
	size_t json_len = 0;
	rq->method = method;
	rq->path = url;
	rq->json_arg = NULL;
	/* A bare "?json" is present with no value. */
	if (MHD_lookup_connection_value_n(c, MHD_GET_ARGUMENT_KIND, "json", 4, &json,
					  &json_len) == MHD_YES)
		rq->json_arg = json ? json : "";
	rq->content_type = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
						       MHD_HTTP_HEADER_CONTENT_TYPE);
	rq->content_length = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
							 MHD_HTTP_HEADER_CONTENT_LENGTH);
}

/* A request with no body to come can wait for MHD's final call: a response
 * queued before it makes MHD close the connection, and keep-alive callers
 * (curl loops, monitoring) would reconnect for every GET. */
static bool bodyless(struct MHD_Connection *c)
{
	return !MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH) &&
	       !MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
				  const char *method, const char *version, const char *upload,
				  size_t *upload_size, void **req_cls)
{
	struct rpc_server *s = cls;
	struct req *r = *req_cls;
	struct prpc_route rt;
	struct prpc_request rq;
	if (!r || r == (void *)s) {
		read_request(c, method, url, &rq);
		prpc_route_head(&rq, &rt);
		if (rt.outcome != PRPC_PENDING) {
			if (!r && bodyless(c)) {
				*req_cls = s; /* a marker, not a context */
				return MHD_YES;
			}
			*upload_size = 0;
			return answer(s, c, &rt);
		}
		if (!(r = req_get(s)))
			return MHD_NO;
		r->call = rt.call;
		r->json = rt.json;
		*req_cls = r;
		return MHD_YES;
	}
	if (*upload_size) {
		int e = req_append(r, upload, *upload_size);
		*upload_size = 0;
		return e < 0 ? MHD_NO : MHD_YES;
	}
	memset(&rt, 0, sizeof(rt));
	rt.outcome = PRPC_PENDING;
	rt.call = r->call;
	rt.json = r->json;
	prpc_route_body(&rt, r->len > PRPC_MAX_BODY ? NULL : req_body(r), r->len);
	return answer(s, c, &rt);
}

static struct MHD_Response *allow_get_post(struct MHD_Response *resp)
{
	if (resp && MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, "GET, POST") != MHD_YES) {
		MHD_destroy_response(resp);
		return NULL;
	}
	return resp;
}

static void fixed_free(struct fixed *fx)
{
	struct MHD_Response **all = (struct MHD_Response **)fx;
	for (size_t i = 0; i < sizeof(*fx) / sizeof(*all); i++)
		if (all[i])
			MHD_destroy_response(all[i]);
	memset(fx, 0, sizeof(*fx));
}

static int fixed_build(struct fixed *fx)
{
	for (int j = 0; j < 2; j++) {
		fx->version[j] = rpc_response_version(j);
		fx->bad_method[j] = allow_get_post(rpc_response_error(j, PRPC_TEXT_BAD_METHOD));
		fx->not_mounted[j] = rpc_response_error(j, PRPC_TEXT_NOT_MOUNTED);
		fx->too_large[j] = rpc_response_error(j, PRPC_TEXT_TOO_LARGE);
		if (!fx->version[j] || !fx->bad_method[j] || !fx->not_mounted[j] ||
		    !fx->too_large[j]) {
			fixed_free(fx);
			return -ENOMEM;
		}
	}
	return 0;
}

static void server_free(struct rpc_server *s)
{
	fixed_free(&s->fx);
	for (struct req *r = s->all, *next; r; r = next) {
		next = r->next_all;
		free(r->heap);
		free(r);
	}
	free(s);
}

int rpc_server_start(const struct rpc_server_opts *o, struct rpc_server **out,
		     struct errbuf *err)
{
	struct rpc_server *s = calloc(1, sizeof(*s));
	if (!s || fixed_build(&s->fx) < 0) {
		free(s);
		close(o->listen_fd);
		return errbuf_set(err, ENOMEM, "pRPC server: out of memory");
	}
	s->cache = o->cache;
	s->pollers = o->pollers;
	/* One thread (the gate's): requests only queue ready responses, so a
	 * thread per connection would buy nothing but memory. */
	struct gate_opts go = {
		.listen_fd = o->listen_fd,
		.slots = RPC_MAX_CONNECTIONS,
		.head_timeout_ms = o->header_timeout_ms > 0 ? o->header_timeout_ms
							    : RPC_HEADER_TIMEOUT_MS,
		.conn_memory = RPC_CONNECTION_MEMORY,
		.idle_timeout_s = RPC_IDLE_TIMEOUT_S,
		.handler = on_request,
		.handler_cls = s,
		.completed = on_completed,
		.completed_cls = s,
		.relay = o->relay,
	};
	int r = gate_start(&go, &s->gate, err);
	if (r < 0) {
		server_free(s);
		errbuf_prefix(err, "pRPC server");
		return r;
	}
	*out = s;
	return 0;
}

void rpc_server_stats(struct rpc_server *s, struct gate_stats *out)
{
	gate_stats(s->gate, out);
}

void rpc_server_set_proxy(struct rpc_server *s, bool declared)
{
	gate_set_proxy(s->gate, declared);
}

void rpc_server_stop(struct rpc_server *s)
{
	if (!s)
		return;
	/* Joins the thread, closes the listener and every connection. */
	gate_stop(s->gate);
	server_free(s);
}
