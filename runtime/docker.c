/* SPDX-License-Identifier: Apache-2.0 */
/* Docker Engine API backend (docs/design/verdict.md, "Containers"): ping for the API
 * version, list the project's containers, inspect those the list cannot
 * vouch for. One connection per request; every step under one deadline. */
#include "runtime/docker.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/clock.h"
#include "base/json.h"
#include "runtime/http.h"
#include "runtime/inspect.h"

/* Used when /_ping names no version: the last API before version
 * negotiation existed, as Docker's own client does. It is also the first
 * with State.Health, so nothing older is any use to us. */
#define DOCKER_API_FALLBACK "1.24"
/* From this version each list item carries Health{Status}. */
#define DOCKER_API_LIST_HEALTH 152
#define DOCKER_MAX_TOKENS (1 << 20)

struct api {
	struct http_endpoint ep;
	int64_t start, deadline;
	int version; /* major * 100 + minor */
	struct errbuf *err;
};

/* "1.41" → 141. Minor versions are below 100 in every Docker release. */
static int parse_version(const char *s, int *out)
{
	int maj = 0, min = 0, nd = 0;
	const char *p = s;
	for (; *p >= '0' && *p <= '9' && nd < 3; p++, nd++)
		maj = maj * 10 + (*p - '0');
	if (nd == 0 || *p++ != '.')
		return -EINVAL;
	for (nd = 0; *p >= '0' && *p <= '9' && nd < 2; p++, nd++)
		min = min * 10 + (*p - '0');
	if (nd == 0 || *p != '\0')
		return -EINVAL;
	*out = maj * 100 + min;
	return 0;
}

int docker_check_opts(const struct docker_opts *o, struct errbuf *err)
{
	struct http_endpoint ep;
	int r = http_endpoint_parse(o->host, o->tls_verify, o->cert_path, &ep, err);
	return r < 0 ? r : http_tls_check(&ep, err);
}

bool docker_host_is_local(const char *host)
{
	struct http_endpoint ep;
	struct errbuf e;
	struct in_addr a4;
	struct in6_addr a6;
	if (http_endpoint_parse(host, false, NULL, &ep, &e) < 0)
		return false;
	if (ep.transport == HTTP_UNIX)
		return true;
	if (strcmp(ep.host, "localhost") == 0)
		return true;
	if (inet_pton(AF_INET, ep.host, &a4) == 1)
		return (ntohl(a4.s_addr) >> 24) == 127;
	return inet_pton(AF_INET6, ep.host, &a6) == 1 && IN6_IS_ADDR_LOOPBACK(&a6);
}

/* "timed out after 10 s": the time the refresh gave the call, which is what
 * an operator compares with --refresh-timeout (what elapsed is that plus
 * scheduling noise). The call reads the clock after its caller set the
 * deadline, so a budget of 10 s may arrive as 9999 ms: within 50 ms of a
 * whole second it is that second. */
static int timed_out(struct api *a, const char *what)
{
	int64_t ms = a->deadline - a->start;
	if (ms >= 950 && (ms + 50) % 1000 < 100)
		return errbuf_set(a->err, ETIMEDOUT, "%s: timed out after %lld s", what,
				  (long long)((ms + 50) / 1000));
	return errbuf_set(a->err, ETIMEDOUT, "%s: timed out after %lld ms", what, (long long)ms);
}

/* GET target; `shown` names the request in errors (no version, no query). */
static int get(struct api *a, const char *shown, const char *target, struct http_response *resp)
{
	struct http_conn *c = NULL;
	char what[sizeof(a->ep.url) + 32];
	int r = http_connect(&a->ep, a->deadline, &c, a->err);
	if (r == -ETIMEDOUT) {
		snprintf(what, sizeof(what), "cannot connect to %s", a->ep.url);
		return errbuf_tag(a->err, ERR_KIND_RUNTIME_TIMEOUT, timed_out(a, what));
	}
	if (r < 0)
		return errbuf_tag(a->err, ERR_KIND_RUNTIME_UNREACHABLE, r);
	r = http_get(c, target, a->deadline, DOCKER_MAX_BODY, resp, a->err);
	http_close(c);
	snprintf(what, sizeof(what), "GET %s", shown);
	if (r == -ETIMEDOUT)
		return errbuf_tag(a->err, ERR_KIND_RUNTIME_TIMEOUT, timed_out(a, what));
	if (r < 0)
		errbuf_prefix(a->err, "%s", what);
	return errbuf_tag(a->err, ERR_KIND_RUNTIME_ANSWER, r);
}

/* What the daemon said: {"message": ...}, or the first line of a plain
 * text body (Docker answers a refused API version in text/plain); cleaned
 * and cut, into buf ("" if nothing). */
static void daemon_message(const struct http_response *resp, char *buf, size_t n)
{
	struct json j;
	char *m = NULL;
	buf[0] = '\0';
	if (!resp->body || resp->body_len == 0)
		return;
	if (json_parse(&j, resp->body, resp->body_len, 64, NULL) == 0) {
		if (json_strdup(&j, json_get(&j, 0, "message"), &m) == 0)
			err_clean(buf, n, m, 200);
		free(m);
		json_free(&j);
		return;
	}
	size_t line = strcspn(resp->body, "\r\n");
	if (line == 0 || resp->body[0] == '{' || resp->body[0] == '[')
		return;
	char first[256];
	if (line >= sizeof(first))
		line = sizeof(first) - 1;
	memcpy(first, resp->body, line);
	first[line] = '\0';
	err_clean(buf, n, first, 200);
}

int docker_status_error(const char *shown, const struct http_response *resp,
			struct errbuf *err)
{
	char msg[256];
	daemon_message(resp, msg, sizeof(msg));
	return errbuf_tag(err, ERR_KIND_RUNTIME_STATUS,
			  errbuf_set(err, EPROTO, "GET %s: HTTP %d%s%s", shown, resp->status,
				     msg[0] ? ": " : "", msg));
}

static int status_error(struct api *a, const char *shown, const struct http_response *resp)
{
	return docker_status_error(shown, resp, a->err);
}

static int ping(struct api *a)
{
	struct http_response resp = { 0 };
	int r = get(a, "/_ping", "/_ping", &resp), theirs;
	if (r < 0)
		return r;
	const char *v = http_header(&resp, "Api-Version");
	if (resp.status != 200)
		r = status_error(a, "/_ping", &resp);
	else if (!v)
		r = parse_version(DOCKER_API_FALLBACK, &a->version);
	else if (parse_version(v, &theirs) < 0)
		r = errbuf_set(a->err, EPROTO, "GET /_ping: malformed Api-Version header");
	else if (parse_version(DOCKER_API_MAX, &a->version) == 0 && theirs < a->version)
		a->version = theirs;
	http_response_free(&resp);
	if (r == 0 && a->version < 124)
		r = errbuf_tag(a->err, ERR_KIND_RUNTIME_TOO_OLD,
			       errbuf_set(a->err, ENOTSUP, "Docker API %d.%d is older than "
					  "1.24, the first with health checks",
					  a->version / 100, a->version % 100));
	return r;
}

int docker_ping(const struct http_endpoint *ep, int64_t deadline, int *version,
		struct errbuf *err)
{
	struct api a = { .ep = *ep, .start = clock_mono_ms(), .deadline = deadline, .err = err };
	int r = ping(&a);
	if (r == 0)
		*version = a.version;
	return r;
}

/* A daemon that refuses our version names the one it accepts ("client
 * version 1.24 is too old. Minimum supported API version is 1.44"): use it
 * once, if we speak it. */
static bool retry_version(struct api *a, const struct http_response *resp)
{
	char msg[256], num[8];
	int v, max;
	daemon_message(resp, msg, sizeof(msg));
	const char *p = strstr(msg, "supported API version is ");
	if (resp->status != 400 || !p)
		return false;
	p += strlen("supported API version is ");
	size_t n = strspn(p, "0123456789.");
	if (n == 0 || n >= sizeof(num))
		return false;
	memcpy(num, p, n);
	num[n] = '\0';
	if (parse_version(num, &v) < 0 || parse_version(DOCKER_API_MAX, &max) < 0 ||
	    v == a->version || v > max || v < 124)
		return false;
	a->version = v;
	return true;
}

int docker_label_target(int version, const char *what, const char *before,
			const char *project, const char *after, struct json_buf *out)
{
	_cleanup_(json_buf_free) struct json_buf label = { 0 }, filter = { 0 };
	char head[64];
	snprintf(head, sizeof(head), "/v%d.%d/%sfilters=", version / 100, version % 100, what);
	int r = json_buf_puts(&label, COMPOSE_PROJECT_LABEL "=");
	if (r == 0)
		r = json_buf_puts(&label, project);
	if (r == 0)
		r = json_buf_puts(&filter, before);
	if (r == 0)
		r = json_buf_string(&filter, label.p);
	if (r == 0)
		r = json_buf_puts(&filter, after);
	if (r == 0)
		r = json_buf_puts(out, head);
	if (r == 0)
		r = http_urlencode(out, filter.p);
	return r;
}

/* /v1.41/containers/json?all=1&filters={"label":["com.docker.compose.project=P"]} */
static int list_target(const struct api *a, const char *project, struct json_buf *t)
{
	return docker_label_target(a->version, "containers/json?all=1&", "{\"label\":[", project,
				   "]}", t);
}

static bool is_id(const char *s)
{
	size_t n = strlen(s);
	return n > 0 && n <= 64 && strspn(s, "0123456789abcdef") == n;
}

static int ids_add(struct docker_ids *t, const char *id)
{
	char(*v)[65] = realloc(t->v, (t->n + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	t->v = v;
	memcpy(v[t->n++], id, strlen(id) + 1);
	return 0;
}

/* A running container whose list item carries its health (API >= 1.52), or
 * the agent's own (running, since it asks; its health, when the list has
 * none, is left unknown: it is never judged). */
static int from_list(const struct json *j, int it, char **id, int hs, struct container_list *out,
		     struct errbuf *err)
{
	struct container *c = container_list_add(out);
	if (!c)
		return errbuf_set(err, ENOMEM, "out of memory");
	c->id = TAKE_PTR(*id);
	c->running = true;
	int names = json_get(j, it, "Names");
	int r = json_is_array(j, names) && j->tok[names].size > 0 ?
			json_strdup(j, names + 1, &c->name) : 0;
	if (r == 0 && c->name && c->name[0] == '/')
		memmove(c->name, c->name + 1, strlen(c->name));
	if (r == 0 && (!c->name || !*c->name)) {
		free(c->name);
		c->name = strndup(c->id, 12);
	}
	if (r == 0 && json_is_string(j, hs))
		r = json_strdup(j, hs, &c->health);
	int labels = json_get(j, it, "Labels");
	int svc = json_get(j, labels, COMPOSE_SERVICE_LABEL);
	if (r == 0 && json_is_string(j, svc) && json_strdup(j, svc, &c->service) == -ENOMEM)
		r = -ENOMEM;
	if (r < 0)
		errbuf_set(err, ENOMEM, "out of memory");
	/* dstack.healthd.optional is judged here as after an inspect: a
	 * healthy optional service must not be remembered as judged (its
	 * exit would open a gap), and a bad value is an entry (issue 34). */
	else if (json_is_object(j, labels))
		r = inspect_parse_agent_labels(j, labels, c, err);
	/* The list prints the networks as inspect does: the agent's own
	 * container, taken from here, says where its probes can reach. */
	if (r == 0)
		r = inspect_parse_network(j, it, c, err);
	if (r == 0 && (!(c->state = strdup("running")) || !c->name))
		r = errbuf_set(err, ENOMEM, "out of memory");
	if (r < 0) {
		container_free(c);
		out->n--;
	}
	return r;
}

/* One list item: skipped (another project, a one-off), taken from the list,
 * or queued for inspection. The list's word is taken only for a running
 * container: for a stopped one the API reports health "none" (docs/design/verdict.md). */
static int list_item(int version, const struct json *j, int it, const char *project,
		     const char *self_id, struct container_list *out, struct docker_ids *todo,
		     struct errbuf *err)
{
	_cleanup_free_ char *id = NULL;
	if (!json_is_object(j, it))
		return errbuf_set(err, EPROTO, "expected an object, got %s",
				  json_type_name(j, it));
	int r = json_strdup(j, json_get(j, it, "Id"), &id);
	if (r == -ENOMEM)
		return errbuf_set(err, ENOMEM, "out of memory");
	if (r < 0 || !is_id(id))
		return errbuf_set(err, EPROTO, "Id: missing or not a container ID");
	int labels = json_get(j, it, "Labels");
	/* The daemon filtered on the label already; checking again costs
	 * nothing and keeps another project out if a daemon ignored it. */
	if (!json_str_eq(j, json_get(j, labels, COMPOSE_PROJECT_LABEL), project) ||
	    json_str_eq(j, json_get(j, labels, COMPOSE_ONEOFF_LABEL), "True"))
		return 0;
	int hs = json_get(j, json_get(j, it, "Health"), "Status");
	/* Healthy, or no healthcheck at all: a probe that is failing or has not
	 * passed yet is inspected, so that the operator's view shows its last
	 * output (the list carries no health log). */
	/* A container the agent probes (issue 27) is inspected: its start
	 * time, which the list lacks, starts its probe's record afresh. */
	bool probed = json_get(j, labels, PROBE_LABEL) >= 0;
	if ((self_id && strcmp(id, self_id) == 0) ||
	    (!probed && version >= DOCKER_API_LIST_HEALTH &&
	     json_str_eq(j, json_get(j, it, "State"), "running") &&
	     (json_str_eq(j, hs, "healthy") || json_str_eq(j, hs, "none") || json_str_eq(j, hs, ""))))
		return from_list(j, it, &id, hs, out, err);
	r = ids_add(todo, id);
	return r < 0 ? errbuf_set(err, -r, "out of memory") : 0;
}

static int list_response(struct api *a, const char *project, struct http_response *resp)
{
	for (int attempt = 0;; attempt++) {
		_cleanup_(json_buf_free) struct json_buf t = { 0 };
		int r = list_target(a, project, &t);
		if (r < 0)
			return errbuf_set(a->err, ENOMEM, "out of memory");
		r = get(a, "/containers/json", t.p, resp);
		if (r < 0 || resp->status == 200)
			return r;
		if (attempt == 0 && retry_version(a, resp)) {
			http_response_free(resp);
			continue;
		}
		r = status_error(a, "/containers/json", resp);
		http_response_free(resp);
		return r;
	}
}

int docker_parse_list(const char *body, size_t len, const char *project, const char *self_id,
		      int version, struct container_list *out, struct docker_ids *todo,
		      struct errbuf *err)
{
	struct json j;
	int r = json_parse(&j, body ? body : "", len, DOCKER_MAX_TOKENS, err);
	if (r < 0)
		return r;
	if (!json_is_array(&j, 0))
		r = errbuf_set(err, EPROTO, "expected an array, got %s", json_type_name(&j, 0));
	if (r == 0) {
		JSON_ARRAY_FOREACH(&j, 0, el, cnt) {
			r = list_item(version, &j, el, project, self_id, out, todo, err);
			if (r < 0) {
				errbuf_prefix(err, "item %d", cnt);
				break;
			}
		}
	}
	json_free(&j);
	return r;
}

/* Those the caller wants inspected whatever the list said go to todo. */
static int inspect_anyway(const struct docker_opts *o, const char *self_id, size_t n0,
			  struct container_list *out, struct docker_ids *todo)
{
	size_t w = n0;
	int r = 0;
	for (size_t i = n0; i < out->n; i++) {
		struct container *c = &out->v[i];
		bool self = self_id && c->id && strcmp(c->id, self_id) == 0;
		if (r == 0 && !self && o->must_inspect && o->must_inspect(o->must_inspect_arg, c->id)) {
			r = ids_add(todo, c->id);
			container_free(c);
		} else {
			out->v[w++] = *c;
		}
	}
	out->n = w;
	return r;
}

static int list(struct api *a, const struct docker_opts *o, const char *project,
		const char *self_id, struct container_list *out, struct docker_ids *todo)
{
	struct http_response resp = { 0 };
	size_t n0 = out->n;
	int r = list_response(a, project, &resp);
	if (r < 0)
		return r;
	r = docker_parse_list(resp.body, resp.body_len, project, self_id, a->version, out, todo,
			      a->err);
	if (r < 0)
		errbuf_prefix(a->err, "GET /containers/json");
	else if (inspect_anyway(o, self_id, n0, out, todo) < 0)
		r = errbuf_set(a->err, ENOMEM, "out of memory");
	http_response_free(&resp);
	return r;
}

static int inspect_body(struct api *a, const struct http_response *resp,
			struct container_list *out)
{
	struct json j;
	int r = json_parse(&j, resp->body ? resp->body : "", resp->body_len, DOCKER_MAX_TOKENS,
			   a->err);
	if (r < 0)
		return r;
	struct container *c = container_list_add(out);
	if (!c)
		r = errbuf_set(a->err, ENOMEM, "out of memory");
	else if ((r = inspect_parse_object(&j, 0, c, a->err)) < 0)
		out->n--;
	else if (c->oneoff) {
		container_free(c);
		out->n--;
	}
	json_free(&j);
	return r;
}

/* A 404 means the container went away after the list: skip it. */
static int inspect(struct api *a, const char *id, struct container_list *out)
{
	char target[128], shown[64];
	struct http_response resp = { 0 };
	snprintf(shown, sizeof(shown), "/containers/%.12s/json", id);
	snprintf(target, sizeof(target), "/v%d.%d/containers/%s/json", a->version / 100,
		 a->version % 100, id);
	int r = get(a, shown, target, &resp);
	if (r < 0)
		return r;
	if (resp.status == 200) {
		r = inspect_body(a, &resp, out);
		if (r < 0)
			errbuf_prefix(a->err, "GET %s", shown);
	} else if (resp.status != 404) {
		r = status_error(a, shown, &resp);
	}
	http_response_free(&resp);
	return r;
}

/* Connects and negotiates the API version: the first steps of every
 * query. */
static int api_open(struct api *a, const struct docker_opts *o, struct errbuf *err)
{
	/* Checked at start when the source is Docker; an app-compose.json
	 * that became usable later is the way here. */
	int r = errbuf_tag(err, ERR_KIND_RUNTIME_UNREACHABLE,
			   http_endpoint_parse(o->host, o->tls_verify, o->cert_path, &a->ep, err));
	a->ep.cancel_fd = o->cancel_fd;
	return r ? r : ping(a);
}

int docker_find_self(const struct docker_opts *o, const char *short_id, int64_t deadline,
		     struct container *self, struct errbuf *err)
{
	struct api a = { .start = clock_mono_ms(), .deadline = deadline, .err = err };
	struct container_list l = { 0 };
	int r = api_open(&a, o, err);
	if (r == 0)
		r = inspect(&a, short_id, &l);
	/* A name that merely looks like an id prefix, or one that matches
	 * another container's name, is not this one. */
	bool mine = r == 0 && l.n == 1 && l.v[0].id &&
		    strncmp(l.v[0].id, short_id, strlen(short_id)) == 0;
	if (mine) {
		*self = l.v[0];
		l.n = 0;
	}
	container_list_free(&l);
	return r < 0 ? r : mine;
}

int docker_list(const struct docker_opts *o, const char *project, const char *self_id,
		int64_t deadline, struct container_list *out, struct errbuf *err)
{
	struct api a = { .start = clock_mono_ms(), .deadline = deadline, .err = err };
	struct docker_ids todo = { 0 };
	size_t n0 = out->n;
	int r = api_open(&a, o, err);
	if (r == 0) {
		out->api_version = a.version;
		r = list(&a, o, project, self_id, out, &todo);
	}
	for (size_t i = 0; r == 0 && i < todo.n; i++)
		r = inspect(&a, todo.v[i], out);
	free(todo.v);
	if (r < 0)
		while (out->n > n0)
			container_free(&out->v[--out->n]);
	return r;
}
