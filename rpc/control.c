/* SPDX-License-Identifier: Apache-2.0 */
#include "rpc/control.h"

#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdbool.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <microhttpd.h>

#include "base/cleanup.h"
#include "base/clock.h"
#include "rpc/encode.h"
#include "rpc/queue.h"
#include "rpc/relay.h"
#include "rpc/server.h"

/* A POST /reload waiting, suspended, for the main thread's answer. */
struct pending {
	struct pending *next;
	struct MHD_Connection *c;
	uint64_t ticket;
	bool done;
	int result;
	char *text;
};

struct control {
	struct MHD_Daemon *d, *m;
	struct control_opts o;
	pthread_mutex_t lock; /* pending */
	struct pending *pending;
};


static enum MHD_Result reply(struct MHD_Connection *c, unsigned code, const char *type,
			     const char *body, size_t len)
{
	struct MHD_Response *r =
		MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	enum MHD_Result e = MHD_queue_response(c, code, r);
	MHD_destroy_response(r);
	return e;
}

/* Hands b's bytes to libmicrohttpd, which frees them once sent: a copy
 * would double the largest allocation of a request (the /status of a
 * large project). */
static enum MHD_Result reply_buf(struct MHD_Connection *c, const char *type, struct json_buf *b,
				 int e)
{
	if (e || !b->p) {
		json_buf_free(b);
		return e ? reply(c, 500, "text/plain", "out of memory\n", 14)
			 : reply(c, 200, type, "", 0);
	}
	struct MHD_Response *r = MHD_create_response_from_buffer(b->len, b->p, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		json_buf_free(b);
		return MHD_NO;
	}
	*b = (struct json_buf){ 0 };
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	enum MHD_Result q = MHD_queue_response(c, 200, r);
	MHD_destroy_response(r);
	return q;
}

/* The verdict exactly as the public side serves it now, stale rule included. */
static int snapshot_json(struct snapshot *s, struct json_buf *b, bool *healthy);

static int verdict_json(struct control *ct, struct json_buf *b, bool *healthy)
{
	return snapshot_json(cache_acquire(ct->o.cache), b, healthy);
}

/* Takes the reference to s. */
static int snapshot_json(struct snapshot *s, struct json_buf *b, bool *healthy)
{
	int64_t age = clock_mono_ms() - s->mono_ms;
	int e;
	if (s->max_age_ms > 0 && age > s->max_age_ms) {
		struct verdict v;
		verdict_init(&v);
		e = verdict_set_error(&v, "verdict is %lld s old; the refresh loop is not keeping it current",
				      (long long)(age / 1000));
		if (!e)
			e = encode_health_json(&v, b);
		*healthy = false;
		verdict_free(&v);
	} else {
		e = encode_health_json(&s->verdict, b);
		*healthy = s->verdict.healthy;
	}
	snapshot_unref(s);
	return e;
}

/* The table is copied to the heap: a static per-thread copy would sit in
 * every thread's TLS, public ones included. */
static int pollers_json(struct control *ct, struct json_buf *b)
{
	struct pollers_table *tp = malloc(sizeof(*tp));
	if (!tp)
		return -ENOMEM;
	pollers_copy(ct->o.pollers, tp);
	const struct pollers_table *t = tp;
	int64_t since = clock_real_ms() - POLLERS_RECENT_MS;
	int e = json_buf_puts(b, "[");
	bool first = true;
	for (size_t i = 0; !e && i < t->n; i++) {
		const struct poller *p = &t->v[i];
		if (p->last_seen_ms < since)
			continue;
		char addr[64];
		poller_addr_str(&p->addr, addr, sizeof(addr));
		e = view_printf(b, "%s{\"address\":\"%s\",\"first_seen\":", first ? "" : ",", addr);
		if (!e) e = view_json_time(b, p->first_seen_ms);
		if (!e) e = json_buf_puts(b, ",\"last_seen\":");
		if (!e) e = view_json_time(b, p->last_seen_ms);
		if (!e) e = view_printf(b, ",\"count\":%llu,\"last_healthy\":%s,\"last_seq\":%llu}",
					(unsigned long long)p->count, p->last_healthy ? "true" : "false",
					(unsigned long long)p->last_seq);
		first = false;
	}
	free(tp);
	return e ? e : json_buf_puts(b, "]");
}

/* "drain": its state and, while it hides it from the public, the app's own
 * verdict as it would be served. */
static int drain_status_json(struct control *ct, struct json_buf *b)
{
	bool healthy;
	int e = json_buf_puts(b, ",\"drain\":");
	if (!e) e = drain_json(ct->o.drain, b);
	if (!e && b->len && b->p[b->len - 1] == '}') {
		b->len--;
		e = json_buf_puts(b, ",\"app_verdict\":");
		if (!e) e = snapshot_json(cache_acquire_published(ct->o.cache), b, &healthy);
		if (!e) e = json_buf_puts(b, "}");
	}
	return e;
}

/* Counters for /status and /metrics alike: each counts one cause
 * (rpc/relay.h, rpc/gate.h), and the help says which. */
struct counter {
	const char *key, *metric, *type, *help;
	size_t off;
};

static const struct counter relay_counters[] = {
#define RELAY_COUNTER(k, m, t, h) { #k, "dstack_healthd_relay_" m, t, h, offsetof(struct relay_stats, k) }
	RELAY_COUNTER(open, "open", "gauge", "relay slots taken now, connects under way included"),
	RELAY_COUNTER(total, "total", "counter",
		      "connects to the guest agent begun (unreachable_total's among them)"),
	RELAY_COUNTER(refused_full, "refused_full_total", "counter",
		      "connections answered 503: no relay slot free and none to evict (every "
		      "relayed connection moving bytes, awaiting an answer, carrying a stream, "
		      "or connecting: the kept_ gauges say how many of each)"),
	RELAY_COUNTER(refused_queue, "refused_queue_total", "counter",
		      "connections answered 503 at once: the queue for a relay slot full "
		      "(relay_queue) and as many waiting from the newcomer's source as from "
		      "any, whether slots could have been evicted or not"),
	RELAY_COUNTER(refused_share, "refused_share_total", "counter",
		      "connections answered 503 while waiting for a relay slot: pushed out of "
		      "the full queue by a newcomer from a source with fewer waiting (the "
		      "youngest of the source with the most)"),
	RELAY_COUNTER(refused_over_share, "refused_over_share_total", "counter",
		      "connections answered 503: their client (the address in their PROXY "
		      "header, else their peer) held more than its share of the relay slots, "
		      "and none of its own relayed connections could be taken"),
	RELAY_COUNTER(refused_resources, "refused_resources_total", "counter",
		      "connections answered 503: no socket to the guest agent, or no room to "
		      "watch one (out of fds or memory)"),
	RELAY_COUNTER(unreachable, "unreachable_total", "counter",
		      "connections answered 502: the guest agent could not be reached"),
	RELAY_COUNTER(evicted, "evicted_total", "counter",
		      "relayed connections reset to make room when the slots were full: the "
		      "youngest of those idle between exchanges"),
	RELAY_COUNTER(evicted_over_share, "evicted_over_share_total", "counter",
		      "relayed connections in flight (moving bytes, awaiting an answer, a "
		      "stream) reset to make room for a client within its share: their own "
		      "client held more than its share of the slots"),
	RELAY_COUNTER(idle_closed, "idle_closed_total", "counter",
		      "relayed connections reset after relay_idle_timeout without a byte either way"),
	RELAY_COUNTER(head_timeout, "head_timeout_total", "counter",
		      "connections for the relay (first line whole, not Health) closed: first "
		      "request head not whole within header_timeout"),
	RELAY_COUNTER(head_evicted, "head_evicted_total", "counter",
		      "connections for the relay (first line whole, not Health) closed before "
		      "their first request head was whole: the longest waiting, to make room "
		      "when the listener's slots were full"),
	RELAY_COUNTER(head_too_large, "head_too_large_total", "counter",
		      "connections for the relay answered 414 or 400: first request head too large"),
	RELAY_COUNTER(reset, "reset_total", "counter",
		      "relayed connections ended by an error on one side, passed on as a reset"),
	RELAY_COUNTER(reset_resources, "reset_resources_total", "counter",
		      "relayed connections reset both ways mid-transfer: no pipe for the next "
		      "bytes (out of fds or memory)"),
	RELAY_COUNTER(dead_peer, "dead_peer_total", "counter",
		      "relayed connections whose peer stopped answering (keepalive), the other side reset"),
	RELAY_COUNTER(abandoned, "abandoned_total", "counter",
		      "relayed connections whose client was gone (a reset) before the guest "
		      "agent was asked: no connect begun"),
	RELAY_COUNTER(kept_moving, "kept_moving", "gauge",
		      "at the last refused_full: relayed connections kept because they were "
		      "moving bytes (bytes in their pipes, or one within 100 ms)"),
	RELAY_COUNTER(kept_awaiting, "kept_awaiting", "gauge",
		      "at the last refused_full: relayed connections kept because the client "
		      "spoke last (an answer awaited, a body coming), within 60 s of its request"),
	RELAY_COUNTER(kept_streams, "kept_streams", "gauge",
		      "at the last refused_full: relayed connections kept as streams (more than "
		      "one exchange, or the guest agent speaking unasked) that moved within 60 s"),
	RELAY_COUNTER(kept_connecting, "kept_connecting", "gauge",
		      "at the last refused_full: relayed connections still connecting to the "
		      "guest agent"),
#undef RELAY_COUNTER
};

static const struct counter listener_counters[] = {
#define LISTENER_COUNTER(k, m, h) \
	{ #k, "dstack_healthd_listener_" m, "counter", h, offsetof(struct gate_stats, k) }
	LISTENER_COUNTER(head_timeout, "head_timeout_total",
			 "public connections closed: no request complete within header_timeout, "
			 "of accept or of the previous request (Health's, and those whose first "
			 "line never ended; the relay's are relay_head_timeout_total)"),
	LISTENER_COUNTER(evicted, "evicted_total",
			 "public connections closed to make room when the slots were full, the "
			 "longest waiting for a request first (Health's, and those whose first "
			 "line never ended; the relay's are relay_head_evicted_total)"),
	LISTENER_COUNTER(proxy_read, "proxy_read_total",
			 "public connections whose PROXY header was read and taken off (the "
			 "listener's port declared with pp: true in app-compose.json's port_policy)"),
	LISTENER_COUNTER(proxy_none, "proxy_none_total",
			 "public connections on a port declared with pp: true that had no PROXY "
			 "header (the gateway's own requests), served as one unknown client"),
	LISTENER_COUNTER(proxy_refused, "proxy_refused_total",
			 "public connections closed for a PROXY header malformed, over-long or "
			 "cut short, nothing of them relayed or answered"),
#undef LISTENER_COUNTER
};

static uint64_t counter_value(const void *st, const struct counter *c)
{
	return *(const uint64_t *)((const char *)st + c->off);
}

/* "key":N for each counter, comma-separated; after more members: first
 * false, and a comma before the first too. */
static int counters_json(struct json_buf *b, const void *st, const struct counter *t, size_t n,
			 bool first)
{
	int e = 0;
	for (size_t i = 0; !e && i < n; i++)
		e = view_printf(b, "%s\"%s\":%llu", i == 0 && first ? "" : ",", t[i].key,
				(unsigned long long)counter_value(st, &t[i]));
	return e;
}

static int counters_prom(struct json_buf *b, const void *st, const struct counter *t, size_t n)
{
	int e = 0;
	for (size_t i = 0; !e && i < n; i++) {
		e = view_prom_family(b, t[i].metric, t[i].type, t[i].help);
		if (!e) e = view_prom_sample(b, t[i].metric, NULL, (double)counter_value(st, &t[i]));
	}
	return e;
}

/* "relay": where to and what it has done; null without one. */
static int relay_status_json(struct control *ct, struct json_buf *b)
{
	if (!ct->o.relay)
		return json_buf_puts(b, ",\"relay\":null");
	struct relay_stats st;
	relay_stats(ct->o.relay, &st);
	int e = json_buf_puts(b, ",\"relay\":{\"address\":");
	if (!e) e = json_buf_string(b, relay_address(ct->o.relay));
	if (!e) e = view_printf(b, ",\"slots\":%u,\"queue\":%u", st.slots, st.queue);
	if (!e) e = counters_json(b, &st, relay_counters, ARRAY_SIZE(relay_counters), false);
	/* Who holds the slots: the clients (the address in a connection's
	 * PROXY header, else its peer; an IPv6 one as its /64) holding the
	 * most, at most RELAY_TOP_CLIENTS of them. */
	if (!e) e = view_printf(b, ",\"clients\":%u,\"top_clients\":[", st.clients);
	for (size_t i = 0; !e && i < st.n_top; i++) {
		char who[INET6_ADDRSTRLEN + 8];
		queue_source_format(&st.top[i].key, who, sizeof(who));
		e = view_printf(b, "%s{\"client\":", i ? "," : "");
		if (!e) e = json_buf_string(b, who);
		if (!e) e = view_printf(b, ",\"links\":%u}", st.top[i].links);
	}
	return e ? e : json_buf_puts(b, "]}");
}

/* "listener": what the public listener closed for want of a request; null
 * without one (a sidecar). */
static int listener_status_json(struct control *ct, struct json_buf *b)
{
	if (!ct->o.server)
		return json_buf_puts(b, ",\"listener\":null");
	struct gate_stats st;
	rpc_server_stats(ct->o.server, &st);
	int e = json_buf_puts(b, ",\"listener\":{");
	if (!e) e = counters_json(b, &st, listener_counters, ARRAY_SIZE(listener_counters), true);
	return e ? e : json_buf_puts(b, "}");
}

static int listener_metrics(struct control *ct, struct json_buf *b)
{
	if (!ct->o.server)
		return 0;
	struct gate_stats st;
	rpc_server_stats(ct->o.server, &st);
	return counters_prom(b, &st, listener_counters, ARRAY_SIZE(listener_counters));
}

static int relay_metrics(struct control *ct, struct json_buf *b)
{
	if (!ct->o.relay)
		return 0;
	struct relay_stats st;
	relay_stats(ct->o.relay, &st);
	/* What relay_open is measured against ("near full", the shipped
	 * alert rules): the slots as fitted to the fd limit. */
	int e = view_prom_family(b, "dstack_healthd_relay_slots", "gauge",
				 "relayed connections the relay can hold at once");
	if (!e) e = view_prom_sample(b, "dstack_healthd_relay_slots", NULL, st.slots);
	if (!e) e = view_prom_family(b, "dstack_healthd_relay_queue", "gauge",
				     "new relayed connections that may wait for a slot at once");
	if (!e) e = view_prom_sample(b, "dstack_healthd_relay_queue", NULL, st.queue);
	/* Who holds the slots, as counts: never an address as a label (an
	 * unbounded set of series); /status names them. */
	if (!e) e = view_prom_family(b, "dstack_healthd_relay_clients", "gauge",
				     "clients holding relayed connections (the address in a "
				     "connection's PROXY header, else its peer)");
	if (!e) e = view_prom_sample(b, "dstack_healthd_relay_clients", NULL, st.clients);
	if (!e) e = view_prom_family(b, "dstack_healthd_relay_client_links", "gauge",
				     "relayed connections held by the clients holding the most, by "
				     "rank (1: the most; /status names them)");
	for (size_t i = 0; !e && i < st.n_top; i++) {
		char rank[32];
		snprintf(rank, sizeof(rank), "rank=\"%zu\"", i + 1);
		e = view_prom_sample(b, "dstack_healthd_relay_client_links", rank, st.top[i].links);
	}
	return e ? e : counters_prom(b, &st, relay_counters, ARRAY_SIZE(relay_counters));
}

static enum MHD_Result status(struct control *ct, struct MHD_Connection *c)
{
	struct json_buf b = { 0 };
	bool healthy;
	struct view *v = view_box_acquire(ct->o.view);
	int e = json_buf_puts(&b, "{\"verdict\":");
	if (!e) e = verdict_json(ct, &b, &healthy);
	if (!e) e = json_buf_puts(&b, ",");
	if (!e && v && v->status)
		e = json_buf_put(&b, v->status, v->status_len);
	else if (!e)
		e = json_buf_puts(&b, "\"refresh\":null");
	struct view *cf = view_box_acquire(ct->o.config);
	if (!e) e = json_buf_puts(&b, ",\"config\":");
	if (!e) e = cf && cf->status ? json_buf_put(&b, cf->status, cf->status_len)
			      : json_buf_puts(&b, "null");
	view_unref(cf);
	if (!e) e = json_buf_puts(&b, ",\"pollers\":");
	if (!e) e = pollers_json(ct, &b);
	if (!e && ct->o.drain) e = drain_status_json(ct, &b);
	if (!e) e = relay_status_json(ct, &b);
	if (!e) e = listener_status_json(ct, &b);
	if (!e) e = json_buf_puts(&b, "}\n");
	view_unref(v);
	return reply_buf(c, "application/json", &b, e);
}

static enum MHD_Result metrics(struct control *ct, struct MHD_Connection *c)
{
	struct json_buf b = { 0 };
	struct json_buf ignored = { 0 };
	bool healthy = false;
	struct pollers_table *tp = malloc(sizeof(*tp));
	if (!tp)
		return reply(c, 500, "text/plain", "out of memory\n", 14);
	const struct pollers_table *t = tp;
	int e = verdict_json(ct, &ignored, &healthy);
	json_buf_free(&ignored);
	pollers_copy(ct->o.pollers, tp);
	struct view *v = view_box_acquire(ct->o.view);
	if (!e) e = view_prom_family(&b, "dstack_healthd_healthy", "gauge",
				     "1 when the verdict served now is healthy");
	if (!e) e = view_prom_sample(&b, "dstack_healthd_healthy", NULL, healthy);
	if (!e) e = view_prom_family(&b, "dstack_healthd_pollers", "gauge",
				     "addresses that asked for Health in the last 10 minutes");
	if (!e) e = view_prom_sample(&b, "dstack_healthd_pollers", NULL,
				     (double)pollers_table_recent(t, clock_real_ms() - POLLERS_RECENT_MS));
	if (!e) e = view_prom_family(&b, "dstack_healthd_health_requests_total", "counter",
				     "Health requests answered, by HTTP status (0: any other)");
	for (size_t i = 0; !e && i < POLLERS_N_CODES; i++)
		e = view_printf(&b, "dstack_healthd_health_requests_total{code=\"%u\"} %llu\n",
				pollers_code(i), (unsigned long long)t->requests[i]);
	if (!e) e = view_prom_family(&b, "dstack_healthd_draining", "gauge",
				     "1 while the instance is drained (dstack-healthd drain)");
	if (!e) e = view_prom_sample(&b, "dstack_healthd_draining", NULL,
				     ct->o.drain && drain_active(ct->o.drain));
	if (!e) e = listener_metrics(ct, &b);
	if (!e) e = relay_metrics(ct, &b);
	if (!e && v && v->metrics)
		e = json_buf_put(&b, v->metrics, v->metrics_len);
	view_unref(v);
	free(tp);
	return reply_buf(c, "text/plain; version=0.0.4; charset=utf-8", &b, e);
}

/* POST /drain, POST /resume, GET /drain: each answers with the drain's
 * state at once. `drain --wait` polls GET /drain, so that waiting holds
 * neither this thread nor a connection. */
static enum MHD_Result drain(struct control *ct, struct MHD_Connection *c, int what)
{
	if (!ct->o.drain)
		return reply(c, 503, "text/plain", "drain is not available\n", 23);
	int e = 0;
	if (what > 0)
		e = drain_begin(ct->o.drain);
	else if (what < 0 && !drain_end(ct->o.drain)) {
		static const char held[] = "the agent is stopping: its drain stays until it exits\n";
		return reply(c, 409, "text/plain", held, sizeof(held) - 1);
	}
	struct json_buf b = { 0 };
	if (!e) e = drain_json(ct->o.drain, &b);
	if (!e) e = json_buf_puts(&b, "\n");
	return reply_buf(c, "application/json", &b, e);
}

static enum MHD_Result reload(struct control *ct, struct MHD_Connection *c, void **req_cls)
{
	struct pending *p = *req_cls == ct ? NULL : *req_cls;
	if (!ct->o.reload_ask)
		return reply(c, 503, "text/plain", "reload is not available\n", 24);
	if (p) {
		/* Resumed: the answer is in. */
		const char *t = p->text ? p->text : "out of memory\n";
		return reply(c, p->done && p->result == 0 ? 200 : 409, "text/plain; charset=utf-8", t,
			     strlen(t));
	}
	if (!(p = calloc(1, sizeof(*p))))
		return reply(c, 500, "text/plain", "out of memory\n", 14);
	p->c = c;
	*req_cls = p;
	/* The ticket is taken under the lock that control_reload_done
	 * takes: an answer that comes at once waits until p knows it. */
	pthread_mutex_lock(&ct->lock);
	p->next = ct->pending;
	ct->pending = p;
	MHD_suspend_connection(c);
	p->ticket = ct->o.reload_ask(ct->o.reload_arg);
	pthread_mutex_unlock(&ct->lock);
	return MHD_YES;
}

void control_reload_done(struct control *ct, uint64_t upto, int result, const char *text)
{
	if (!ct)
		return;
	pthread_mutex_lock(&ct->lock);
	for (struct pending *p = ct->pending; p; p = p->next) {
		if (p->done || p->ticket == 0 || p->ticket > upto)
			continue;
		p->done = true;
		p->result = result;
		p->text = strdup(text);
		MHD_resume_connection(p->c);
	}
	pthread_mutex_unlock(&ct->lock);
}

/* Root or the agent's own user (a sidecar runs as one that is not root,
 * and `docker exec` comes as it), besides the socket's 0600: a mode is one
 * chmod away from being wrong. Whoever has the agent's uid could ptrace it
 * anyway. */
static bool peer_allowed(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
	struct ucred cr;
	socklen_t len = sizeof(cr);
	if (!ci || getsockopt(ci->connect_fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0)
		return false;
	return cr.uid == 0 || cr.uid == geteuid();
}

/* True while the request is still coming in: both listeners answer only
 * once it is whole, and no request here has a body worth reading. */
static bool still_reading(struct control *ct, size_t *upload_size, void **req_cls)
{
	if (!*req_cls) {
		*req_cls = ct;
		return true;
	}
	if (*upload_size) {
		*upload_size = 0;
		return true;
	}
	return false;
}

static enum MHD_Result on_control(void *cls, struct MHD_Connection *c, const char *url,
				  const char *method, const char *version, const char *upload,
				  size_t *upload_size, void **req_cls)
{
	struct control *ct = cls;
	if (still_reading(ct, upload_size, req_cls))
		return MHD_YES;
	if (!peer_allowed(c))
		return reply(c, 403, "text/plain", "root or the agent's user only\n", 30);
	bool get = strcmp(method, "GET") == 0, post = strcmp(method, "POST") == 0;
	if (get && strcmp(url, "/status") == 0)
		return status(ct, c);
	if (get && strcmp(url, "/metrics") == 0)
		return metrics(ct, c);
	if (post && strcmp(url, "/reload") == 0)
		return reload(ct, c, req_cls);
	if ((get || post) && strcmp(url, "/drain") == 0)
		return drain(ct, c, post ? 1 : 0);
	if (post && strcmp(url, "/resume") == 0)
		return drain(ct, c, -1);
	static const char nf[] = "not found: GET /status, GET /metrics, POST /reload, "
				 "GET|POST /drain, POST /resume\n";
	return reply(c, 404, "text/plain", nf, sizeof(nf) - 1);
}

static enum MHD_Result on_metrics(void *cls, struct MHD_Connection *c, const char *url,
				  const char *method, const char *version, const char *upload,
				  size_t *upload_size, void **req_cls)
{
	struct control *ct = cls;
	if (still_reading(ct, upload_size, req_cls))
		return MHD_YES;
	if (strcmp(method, "GET") == 0 && strcmp(url, "/metrics") == 0)
		return metrics(ct, c);
	return reply(c, 404, "text/plain", "not found\n", 10);
}

/* A control request builds a few tens of KiB on a thread of its own, whose
 * malloc arena would keep them: handed back once it is answered, so that
 * looking at the agent does not raise its idle footprint. Rare (root, by
 * hand or a scraper) and cheap. */
static void on_done(void *cls, struct MHD_Connection *c, void **req_cls,
		    enum MHD_RequestTerminationCode toe)
{
	struct control *ct = cls;
	struct pending *p = *req_cls && *req_cls != ct ? *req_cls : NULL;
	if (p) {
		pthread_mutex_lock(&ct->lock);
		for (struct pending **pp = &ct->pending; *pp; pp = &(*pp)->next)
			if (*pp == p) {
				*pp = p->next;
				break;
			}
		pthread_mutex_unlock(&ct->lock);
		free(p->text);
		free(p);
		*req_cls = NULL;
	}
	malloc_trim(0);
}

void control_stop(struct control *ct)
{
	if (!ct)
		return;
	/* MHD must not be stopped with connections suspended. */
	pthread_mutex_lock(&ct->lock);
	for (struct pending *p = ct->pending; p; p = p->next)
		if (!p->done) {
			p->done = true;
			p->result = -1;
			p->text = strdup("the agent is stopping; nothing was reloaded\n");
			MHD_resume_connection(p->c);
		}
	pthread_mutex_unlock(&ct->lock);
	if (ct->d)
		MHD_stop_daemon(ct->d);
	if (ct->m)
		MHD_stop_daemon(ct->m);
	pthread_mutex_destroy(&ct->lock);
	free(ct);
}

int control_start(const struct control_opts *o, struct control **out, struct errbuf *err)
{
	struct control *ct = calloc(1, sizeof(*ct));
	if (!ct) {
		if (o->listen_fd >= 0)
			close(o->listen_fd);
		if (o->metrics_fd >= 0)
			close(o->metrics_fd);
		return errbuf_set(err, ENOMEM, "out of memory");
	}
	ct->o = *o;
	pthread_mutex_init(&ct->lock, NULL);
	/* One thread: a reload waits suspended until the main thread has
	 * applied or refused it, resumed from there (hence ITC). */
	if (o->listen_fd >= 0)
		ct->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL |
						 MHD_USE_ITC | MHD_ALLOW_SUSPEND_RESUME,
					 0, NULL, NULL, on_control, ct,
					 MHD_OPTION_LISTEN_SOCKET, (MHD_socket)o->listen_fd,
					 MHD_OPTION_CONNECTION_LIMIT, (unsigned)CONTROL_MAX_CONNECTIONS,
					 MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)60,
					 MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)CONTROL_CONNECTION_MEMORY,
					 MHD_OPTION_NOTIFY_COMPLETED, on_done, ct,
					 MHD_OPTION_END);
	if (o->metrics_fd >= 0)
		ct->m = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL, 0, NULL, NULL,
					 on_metrics, ct, MHD_OPTION_LISTEN_SOCKET,
					 (MHD_socket)o->metrics_fd, MHD_OPTION_CONNECTION_LIMIT,
					 (unsigned)CONTROL_MAX_CONNECTIONS,
					 MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)10,
					 MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)CONTROL_CONNECTION_MEMORY,
					 MHD_OPTION_NOTIFY_COMPLETED, on_done, ct, MHD_OPTION_END);
	if ((o->listen_fd >= 0 && !ct->d) || (o->metrics_fd >= 0 && !ct->m)) {
		if (!ct->d && o->listen_fd >= 0)
			close(o->listen_fd);
		if (!ct->m && o->metrics_fd >= 0)
			close(o->metrics_fd);
		control_stop(ct);
		return errbuf_set(err, EINVAL, "libmicrohttpd would not start the local listener");
	}
	*out = ct;
	return 0;
}
