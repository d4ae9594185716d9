/* SPDX-License-Identifier: Apache-2.0 */
/* Docker's /events stream (Engine API "Monitor events"). Facts it relies on,
 * from moby's daemon/events/filter.go and api/types/filters: the filters
 * "type", "label" (key=value against the actor's attributes, which carry the
 * container's labels) and "event" combine with AND, values of one filter with
 * OR; "event" matches the Action exactly, except that a filter naming
 * health_status matches by prefix, because the Action of a health change is
 * "health_status: healthy" (or ": unhealthy", ": starting"). The daemon
 * writes one JSON object and a newline per event and flushes it. */
#include "runtime/events.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/grow.h"
#include "runtime/container.h"
#include "runtime/http.h"

#define EVENTS_MAX_TOKENS 16384
#define EVENTS_MAX_ERROR_BODY (64u << 10)

struct events {
	struct http_conn *c;
	struct http_stream *s;
	struct events_lines lines;
	const char *piece; /* of the stream, not yet split into lines */
	size_t piece_len;
	char *project;
};

int events_target(int version, const char *project, struct json_buf *out)
{
	return docker_label_target(version, "events?", "{\"type\":[\"container\"],\"label\":[",
				   project,
				   "],\"event\":[\"start\",\"die\",\"destroy\",\"pause\","
				   "\"unpause\",\"health_status\"]}",
				   out);
}

static void copy_string(const struct json *j, int i, char *dst, size_t n)
{
	_cleanup_free_ char *s = NULL;
	dst[0] = '\0';
	if (json_strdup(j, i, &s) == 0)
		err_clean(dst, n, s, n - 4);
}

int events_parse(const char *line, size_t len, const char *project, struct event *ev,
		 struct errbuf *err)
{
	struct json j;
	if (strspn(line, " \t\r\n") >= len)
		return 0;
	int r = json_parse(&j, line, len, EVENTS_MAX_TOKENS, err);
	if (r < 0) {
		errbuf_prefix(err, "event");
		return r == -ENOMEM ? r : -EPROTO;
	}
	int type = json_get(&j, 0, "Type"), action = json_get(&j, 0, "Action");
	int attrs = json_get(&j, json_get(&j, 0, "Actor"), "Attributes");
	if (!json_is_object(&j, 0))
		r = errbuf_set(err, EPROTO, "event: expected an object, got %s",
			       json_type_name(&j, 0));
	else if (!json_is_string(&j, action))
		r = errbuf_set(err, EPROTO, "event: Action missing or not a string");
	/* The daemon filtered already; checking again keeps another project
	 * out should a daemon ignore a filter. */
	else if (json_str_eq(&j, type, "container") &&
		 json_str_eq(&j, json_get(&j, attrs, COMPOSE_PROJECT_LABEL), project))
		r = 1;
	if (r == 1) {
		copy_string(&j, action, ev->action, sizeof(ev->action));
		copy_string(&j, json_get(&j, attrs, "name"), ev->name, sizeof(ev->name));
	}
	json_free(&j);
	return r;
}

int events_lines_take(struct events_lines *l, const char **p, size_t *n, struct errbuf *err)
{
	if (l->complete) {
		l->len = 0;
		l->complete = false;
	}
	const char *nl = memchr(*p, '\n', *n);
	size_t take = nl ? (size_t)(nl - *p) : *n;
	if (take > EVENTS_MAX_LINE - l->len)
		return errbuf_set(err, E2BIG, "an event is longer than %u bytes", EVENTS_MAX_LINE);
	char *b = grow(l->line, &l->cap, l->len + take + 1, 1, 4096, 0);
	if (!b)
		return errbuf_set(err, ENOMEM, "out of memory");
	l->line = b;
	memcpy(l->line + l->len, *p, take);
	l->len += take;
	l->line[l->len] = '\0';
	take += nl ? 1 : 0;
	*p += take;
	*n -= take;
	l->complete = nl != NULL;
	return l->complete;
}

void events_lines_free(struct events_lines *l)
{
	free(l->line);
	memset(l, 0, sizeof(*l));
}

int64_t events_backoff_next(int64_t cur)
{
	if (cur < EVENTS_BACKOFF_MIN_MS)
		return EVENTS_BACKOFF_MIN_MS;
	return cur >= EVENTS_BACKOFF_MAX_MS / 2 ? EVENTS_BACKOFF_MAX_MS : cur * 2;
}

static int subscribe(struct events *e, const struct http_endpoint *ep, int version,
		     int64_t deadline, struct errbuf *err)
{
	_cleanup_(json_buf_free) struct json_buf t = { 0 };
	_cleanup_(http_response_free) struct http_response head = { 0 };
	if (events_target(version, e->project, &t) < 0)
		return errbuf_set(err, ENOMEM, "out of memory");
	int r = http_connect(ep, deadline, &e->c, err);
	if (r == 0)
		r = http_stream_open(e->c, t.p, deadline, EVENTS_MAX_ERROR_BODY, &e->s, &head, err);
	if (r < 0 && r != -ENOMEM && e->c)
		errbuf_prefix(err, "GET /events");
	else if (r == 0 && !e->s)
		r = docker_status_error("/events", &head, err);
	return r;
}

int events_subscribe(const struct docker_opts *o, const char *project, int64_t deadline,
		     struct events **out, struct errbuf *err)
{
	struct http_endpoint ep;
	int version = 0;
	int r = http_endpoint_parse(o->host, o->tls_verify, o->cert_path, &ep, err);
	if (r < 0)
		return r;
	ep.cancel_fd = o->cancel_fd;
	if ((r = docker_ping(&ep, deadline, &version, err)) < 0)
		return r;
	struct events *e = calloc(1, sizeof(*e));
	if (!e || !(e->project = strdup(project))) {
		free(e);
		return errbuf_set(err, ENOMEM, "out of memory");
	}
	if ((r = subscribe(e, &ep, version, deadline, err)) < 0) {
		events_close(e);
		return r;
	}
	*out = e;
	return 0;
}

int events_next(struct events *e, int64_t deadline, struct event *ev, struct errbuf *err)
{
	for (;;) {
		while (e->piece_len > 0) {
			int r = events_lines_take(&e->lines, &e->piece, &e->piece_len, err);
			if (r == 1)
				r = events_parse(e->lines.line, e->lines.len, e->project, ev, err);
			if (r != 0)
				return r;
		}
		int r = http_stream_read(e->s, deadline, &e->piece, &e->piece_len, err);
		if (r <= 0)
			return r;
	}
}

void events_close(struct events *e)
{
	if (!e)
		return;
	http_stream_free(e->s);
	http_close(e->c);
	events_lines_free(&e->lines);
	free(e->project);
	free(e);
}
