/* SPDX-License-Identifier: Apache-2.0 */
/* Docker's /events stream (Engine API "Monitor events"). Facts it relies on,
 * from moby's daemon/events/filter.go and api/types/filters: the filters
 * "type", "label" (key=value against the actor's attributes, which carry the
 * container's labels) and "event" combine with AND, values of one filter with
 * OR; "event" matches the Action exactly, except that a filter naming
 * health_status matches by prefix, because the Action of a health change is
 * "health_status: healthy" (or ": unhealthy", ": starting"). The daemon
 * writes one JSON object and a newline per event and flushes it.
 *
 * What a stop looks like on the stream (moby v20.10.24, Debian 12's docker.io,
 * and master alike: daemon/kill.go killWithSignal, daemon/stop.go): `docker
 * stop` sends the container's stop signal and logs "kill" with the attribute
 * "signal" (the number, in decimal) once it was sent, then "die" when the
 * process exits, then "stop"; past the timeout a second "kill" with signal 9
 * comes between. `docker kill -s SIG` logs "kill" with that signal only, and
 * is a stop only when SIG is the container's stop signal or SIGKILL (that is
 * also when Docker itself stops restarting it). `docker restart` adds "start"
 * and "restart"; a restart policy brings a container that exited by itself
 * back with "die" then "start" (daemon/monitor.go), never one sent a kill.
 * Compose recreates with kill, die, stop, then "destroy" of the old one (v2
 * creates the new one before, which is seen at that kill: "create" is not
 * followed). The
 * attributes also carry the container's labels, which overwrite Docker's own
 * (daemon/events.go copyAttributes): a label named "signal" changes what a
 * kill says, which only its app can do to itself. */
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

int events_target(int version, const char *project, int64_t since_ns, struct json_buf *out)
{
	/* since=SECONDS.NANOSECONDS, as the docker CLI sends it: the daemon
	 * replays what it still keeps (its last 256 events, moby
	 * daemon/events/events.go eventsLimit) from that time on, then
	 * streams. */
	char head[64] = "events?";
	if (since_ns > 0)
		snprintf(head, sizeof(head), "events?since=%lld.%09lld&",
			 (long long)(since_ns / 1000000000), (long long)(since_ns % 1000000000));
	return docker_label_target(version, head, "{\"type\":[\"container\"],\"label\":[",
				   project,
				   "],\"event\":[\"kill\",\"stop\",\"start\",\"die\","
				   "\"destroy\",\"pause\",\"unpause\",\"health_status\"]}",
				   out);
}

static void copy_string(const struct json *j, int i, char *dst, size_t n)
{
	_cleanup_free_ char *s = NULL;
	dst[0] = '\0';
	if (json_strdup(j, i, &s) == 0)
		err_clean(dst, n, s, n - 4);
}

/* Actor.ID, kept only when it is what Docker makes a container id: hex. */
static void copy_id(const struct json *j, int i, char *dst, size_t n)
{
	_cleanup_free_ char *s = NULL;
	dst[0] = '\0';
	if (json_strdup(j, i, &s) == 0 && s[0] && strlen(s) < n &&
	    strspn(s, "0123456789abcdef") == strlen(s))
		memcpy(dst, s, strlen(s) + 1);
}

/* A kill's "signal" attribute: decimal, as daemon/kill.go formats it. */
static int kill_signal(const struct json *j, int attrs)
{
	_cleanup_free_ char *s = NULL;
	if (json_strdup(j, json_get(j, attrs, "signal"), &s) < 0)
		return -1;
	size_t n = strspn(s, "0123456789");
	if (n == 0 || n > 3 || s[n] != '\0')
		return -1;
	int v = atoi(s);
	return v >= 1 && v <= 127 ? v : -1;
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
		int64_t t = 0;
		copy_string(&j, action, ev->action, sizeof(ev->action));
		copy_string(&j, json_get(&j, attrs, "name"), ev->name, sizeof(ev->name));
		copy_id(&j, json_get(&j, json_get(&j, 0, "Actor"), "ID"), ev->id, sizeof(ev->id));
		ev->signal = json_str_eq(&j, action, "kill") ? kill_signal(&j, attrs) : 0;
		ev->time_ns = json_int64(&j, json_get(&j, 0, "timeNano"), &t) == 0 && t > 0 ? t : 0;
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
		     int64_t since_ns, int64_t deadline, struct errbuf *err)
{
	_cleanup_(json_buf_free) struct json_buf t = { 0 };
	_cleanup_(http_response_free) struct http_response head = { 0 };
	if (events_target(version, e->project, since_ns, &t) < 0)
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

int events_subscribe(const struct docker_opts *o, const char *project, int64_t since_ns,
		     int64_t deadline, struct events **out, struct errbuf *err)
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
	if ((r = subscribe(e, &ep, version, since_ns, deadline, err)) < 0) {
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
