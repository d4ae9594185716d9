#include "rpc/control.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <microhttpd.h>

#include "base/clock.h"
#include "rpc/encode.h"

struct control {
	struct MHD_Daemon *d, *m;
	struct control_opts o;
};

static int64_t real_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

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

static enum MHD_Result reply_buf(struct MHD_Connection *c, const char *type, struct json_buf *b,
				 int e)
{
	enum MHD_Result r = e ? reply(c, 500, "text/plain", "out of memory\n", 14)
			      : reply(c, 200, type, b->p ? b->p : "", b->len);
	json_buf_free(b);
	return r;
}

/* The verdict exactly as the public side serves it now, stale rule included. */
static int verdict_json(struct control *ct, struct json_buf *b, bool *healthy)
{
	struct snapshot *s = cache_acquire(ct->o.cache);
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

static int pollers_json(struct control *ct, struct json_buf *b)
{
	static __thread struct pollers_table t;
	pollers_copy(ct->o.pollers, &t);
	int64_t since = real_ms() - POLLERS_RECENT_MS;
	int e = json_buf_puts(b, "[");
	bool first = true;
	for (size_t i = 0; !e && i < t.n; i++) {
		const struct poller *p = &t.v[i];
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
	return e ? e : json_buf_puts(b, "]");
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
	if (!e) e = json_buf_puts(&b, ",\"pollers\":");
	if (!e) e = pollers_json(ct, &b);
	if (!e) e = json_buf_puts(&b, "}\n");
	view_unref(v);
	return reply_buf(c, "application/json", &b, e);
}

static enum MHD_Result metrics(struct control *ct, struct MHD_Connection *c)
{
	struct json_buf b = { 0 };
	struct json_buf ignored = { 0 };
	bool healthy = false;
	static __thread struct pollers_table t;
	int e = verdict_json(ct, &ignored, &healthy);
	json_buf_free(&ignored);
	pollers_copy(ct->o.pollers, &t);
	struct view *v = view_box_acquire(ct->o.view);
	if (!e) e = view_prom_family(&b, "dstack_healthd_healthy", "gauge",
				     "1 when the verdict served now is healthy");
	if (!e) e = view_prom_sample(&b, "dstack_healthd_healthy", NULL, healthy);
	if (!e) e = view_prom_family(&b, "dstack_healthd_pollers", "gauge",
				     "addresses that asked for Health in the last 10 minutes");
	if (!e) e = view_prom_sample(&b, "dstack_healthd_pollers", NULL,
				     (double)pollers_table_recent(&t, real_ms() - POLLERS_RECENT_MS));
	if (!e) e = view_prom_family(&b, "dstack_healthd_health_requests_total", "counter",
				     "Health requests answered, by HTTP status (0: any other)");
	for (size_t i = 0; !e && i < POLLERS_N_CODES; i++)
		e = view_printf(&b, "dstack_healthd_health_requests_total{code=\"%u\"} %llu\n",
				pollers_code(i), (unsigned long long)t.requests[i]);
	if (!e && v && v->metrics)
		e = json_buf_put(&b, v->metrics, v->metrics_len);
	view_unref(v);
	return reply_buf(c, "text/plain; version=0.0.4; charset=utf-8", &b, e);
}

static enum MHD_Result reload(struct control *ct, struct MHD_Connection *c)
{
	char text[8192];
	if (!ct->o.reload)
		return reply(c, 503, "text/plain", "reload is not available\n", 24);
	int r = ct->o.reload(ct->o.reload_arg, text, sizeof(text));
	return reply(c, r == 0 ? 200 : 409, "text/plain; charset=utf-8", text, strlen(text));
}

/* Root only, besides the socket's 0600: a mode is one chmod away from
 * being wrong. */
static bool peer_is_root(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
	struct ucred cr;
	socklen_t len = sizeof(cr);
	if (!ci || getsockopt(ci->connect_fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0)
		return false;
	return cr.uid == 0;
}

static enum MHD_Result on_control(void *cls, struct MHD_Connection *c, const char *url,
				  const char *method, const char *version, const char *upload,
				  size_t *upload_size, void **req_cls)
{
	struct control *ct = cls;
	if (!*req_cls) {
		*req_cls = ct; /* wait for the whole request */
		return MHD_YES;
	}
	if (*upload_size) {
		*upload_size = 0; /* no request here has a body worth reading */
		return MHD_YES;
	}
	if (!peer_is_root(c))
		return reply(c, 403, "text/plain", "root only\n", 10);
	bool get = strcmp(method, "GET") == 0, post = strcmp(method, "POST") == 0;
	if (get && strcmp(url, "/status") == 0)
		return status(ct, c);
	if (get && strcmp(url, "/metrics") == 0)
		return metrics(ct, c);
	if (post && strcmp(url, "/reload") == 0)
		return reload(ct, c);
	return reply(c, 404, "text/plain", "not found: GET /status, GET /metrics, POST /reload\n",
		     51);
}

static enum MHD_Result on_metrics(void *cls, struct MHD_Connection *c, const char *url,
				  const char *method, const char *version, const char *upload,
				  size_t *upload_size, void **req_cls)
{
	struct control *ct = cls;
	if (!*req_cls) {
		*req_cls = ct;
		return MHD_YES;
	}
	if (*upload_size) {
		*upload_size = 0;
		return MHD_YES;
	}
	if (strcmp(method, "GET") == 0 && strcmp(url, "/metrics") == 0)
		return metrics(ct, c);
	return reply(c, 404, "text/plain", "not found\n", 10);
}

void control_stop(struct control *ct)
{
	if (!ct)
		return;
	if (ct->d)
		MHD_stop_daemon(ct->d);
	if (ct->m)
		MHD_stop_daemon(ct->m);
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
	/* A thread per connection: a reload holds its connection until the
	 * main thread has applied it, and must not hold up a status. */
	if (o->listen_fd >= 0)
		ct->d = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD,
					 0, NULL, NULL, on_control, ct,
					 MHD_OPTION_LISTEN_SOCKET, (MHD_socket)o->listen_fd,
					 MHD_OPTION_CONNECTION_LIMIT, (unsigned)CONTROL_MAX_CONNECTIONS,
					 MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)60,
					 MHD_OPTION_END);
	if (o->metrics_fd >= 0)
		ct->m = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL, 0, NULL, NULL,
					 on_metrics, ct, MHD_OPTION_LISTEN_SOCKET,
					 (MHD_socket)o->metrics_fd, MHD_OPTION_CONNECTION_LIMIT,
					 (unsigned)CONTROL_MAX_CONNECTIONS,
					 MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)10, MHD_OPTION_END);
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
