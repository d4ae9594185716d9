/* SPDX-License-Identifier: Apache-2.0 */
/* Probes the agent runs itself (issue 27): labels, answers and results.
 * Pure; docs/design/probes.md says why each rule is what it is. */
#include "probe/probe.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>


/* Ranges a label may ask for, in ns; 0 is Docker's "the default" for every
 * one (moby daemon/health.go timeoutWithDefault, daemon/container.go
 * validateHealthCheck). The floors are the agent's, not Docker's (1 ms): an
 * interval of a second at least keeps a label from making the agent a load
 * generator against its own app and from taking the one probe thread's
 * time from the other probes; a timeout under 100 ms fails on a loaded
 * machine's scheduling delay alone, and 60 s bounds how long a probe holds
 * one of the 64 sockets. Below Docker's 1 ms a start_period is refused, as
 * Docker refuses it. */
#define MS 1000000LL
#define INTERVAL_MIN (1000 * MS)
#define INTERVAL_MAX (3600 * 1000 * MS)
#define TIMEOUT_MIN (100 * MS)
#define TIMEOUT_MAX (60 * 1000 * MS)
#define START_PERIOD_MIN MS
#define START_PERIOD_MAX (3600 * 1000 * MS)
#define COUNT_MAX 100

/* The defaults the issue fixes (Docker's are 30 s / 30 s; a dstack gateway
 * polls every 5 s). */
#define DEFAULT_INTERVAL (5000 * MS)
#define DEFAULT_TIMEOUT (2000 * MS)
#define DEFAULT_RETRIES 3

void probe_labels_free(struct probe_labels *l)
{
	if (!l)
		return;
	free(l->probe);
	free(l->interval);
	free(l->timeout);
	free(l->start_period);
	free(l->retries);
	free(l->success_threshold);
	memset(l, 0, sizeof(*l));
}

/* ---- Labels ---- */

int probe_parse_duration(const char *s, int64_t *ns)
{
	static const struct {
		const char *unit;
		int64_t ns;
	} units[] = {
		{ "ns", 1 }, { "us", 1000 }, { "\xc2\xb5s", 1000 }, { "\xce\xbcs", 1000 },
		{ "ms", MS }, { "s", 1000 * MS }, { "m", 60000 * MS }, { "h", 3600000 * MS },
	};
	const int64_t max_ns = 86400000 * MS;
	int64_t total = 0;
	bool neg = false;
	if (!s)
		return -EINVAL;
	/* Go's time.ParseDuration: a sign, then "0" alone or a run of
	 * number-and-unit pieces. */
	if (*s == '-' || *s == '+')
		neg = *s++ == '-';
	if (strcmp(s, "0") == 0) {
		*ns = 0;
		return 0;
	}
	if (!*s)
		return -EINVAL;
	while (*s) {
		int64_t whole = 0, frac = 0;
		double scale = 1;
		bool digits = false;
		for (; *s >= '0' && *s <= '9'; s++, digits = true) {
			if (whole > max_ns)
				return -ERANGE;
			whole = whole * 10 + (*s - '0');
		}
		if (*s == '.') {
			/* Go keeps the digits that fit; past 12 they are below
			 * a nanosecond of any unit. */
			for (s++; *s >= '0' && *s <= '9'; s++, digits = true) {
				if (scale < 1e12) {
					frac = frac * 10 + (*s - '0');
					scale *= 10;
				}
			}
		}
		if (!digits)
			return -EINVAL;
		/* The unit is all up to the next digit or dot, matched whole. */
		size_t ul = strcspn(s, "0123456789."), k;
		for (k = 0; k < sizeof(units) / sizeof(units[0]); k++)
			if (strlen(units[k].unit) == ul && strncmp(s, units[k].unit, ul) == 0)
				break;
		if (k == sizeof(units) / sizeof(units[0]))
			return -EINVAL;
		int64_t u = units[k].ns;
		if (whole > max_ns / u)
			return -ERANGE;
		total += whole * u + (int64_t)((double)frac * ((double)u / scale));
		if (total > max_ns)
			return -ERANGE;
		s += ul;
	}
	*ns = neg ? -total : total;
	return 0;
}

/* "label NAME: RULE", the agent's words only: a label's value is the
 * app's and never shown. */
static int say(char *why, size_t n, const char *label, const char *rule)
{
	snprintf(why, n, "label %s: %s", label, rule);
	return -EINVAL;
}

struct duration_rule {
	const char *name;
	int64_t def, min, max; /* ns */
	const char *range;     /* min and max, in words */
};

static int duration_label(const char *v, const struct duration_rule *d, int64_t *ms,
			  char *why, size_t n)
{
	int64_t ns = 0;
	int r = v ? probe_parse_duration(v, &ns) : 0;
	if (r == -EINVAL)
		return say(why, n, d->name, "not a duration (Go's syntax, as Docker reads it: "
					    "10s, 1m30s, 1.5s, 500ms)");
	if (r == 0 && ns < 0)
		return say(why, n, d->name, "negative");
	if (r == 0 && ns == 0) {
		*ms = d->def / MS; /* absent, or 0: Docker's "the default" */
		return 0;
	}
	if (r < 0 || ns < d->min || ns > d->max) {
		char rule[80];
		snprintf(rule, sizeof(rule), "out of range (%s, or 0 for the default)", d->range);
		return say(why, n, d->name, rule);
	}
	*ms = ns / MS;
	return 0;
}

/* A whole number of 0 to COUNT_MAX, 0 meaning def (Docker's retries, and
 * Kubernetes' successThreshold, whose API defaults 0 to 1). */
static int count_label(const char *v, const char *name, unsigned def, unsigned *out,
		       char *why, size_t n)
{
	unsigned x = 0;
	size_t len = v ? strlen(v) : 0;
	if (!v || strcmp(v, "0") == 0) {
		*out = def;
		return 0;
	}
	if (v[0] == '-' && len > 1 && strspn(v + 1, "0123456789") == len - 1)
		return say(why, n, name, "negative");
	if (len == 0 || strspn(v, "0123456789") != len)
		return say(why, n, name, "not a whole number");
	for (const char *p = v; *p && x <= COUNT_MAX; p++)
		x = x * 10 + (unsigned)(*p - '0');
	if (x == 0 || x > COUNT_MAX)
		return say(why, n, name, "out of range (1 to 100, or 0 for the default)");
	*out = x;
	return 0;
}

/* RFC 3986 pchar, '/' and '?' and the query's characters: what an
 * origin-form request target may hold, written as is. */
static bool target_char(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       strchr("-._~!$&'()*+,;=:@/?%", c);
}

static int parse_target(const char *v, struct probe_spec *s, char *why, size_t n)
{
	static const char shape[] = "must be http://:PORT/PATH, https://:PORT/PATH, "
				    "grpc://:PORT/SERVICE, grpcs://:PORT/SERVICE or tcp://:PORT";
	const char *rest;
	if (strncasecmp(v, "http://", 7) == 0) {
		s->kind = PROBE_HTTP;
		rest = v + 7;
	} else if (strncasecmp(v, "https://", 8) == 0) {
		s->kind = PROBE_HTTPS;
		rest = v + 8;
	} else if (strncasecmp(v, "tcp://", 6) == 0) {
		s->kind = PROBE_TCP;
		rest = v + 6;
	} else if (strncasecmp(v, "grpc://", 7) == 0) {
		s->kind = PROBE_GRPC;
		rest = v + 7;
	} else if (strncasecmp(v, "grpcs://", 8) == 0) {
		s->kind = PROBE_GRPCS;
		rest = v + 8;
	} else {
		return say(why, n, PROBE_LABEL, shape);
	}
	/* No host part: the address is the container's own, from the
	 * runtime. Anything before the port (a name, an IP, a user) is a
	 * label aiming elsewhere. */
	if (*rest != ':')
		return say(why, n, PROBE_LABEL,
			   "names a host; a probe goes only to the container's own "
			   "address (write http://:PORT/PATH)");
	rest++;
	size_t pl = strspn(rest, "0123456789");
	unsigned port = 0;
	for (size_t i = 0; i < pl && i < 6; i++)
		port = port * 10 + (unsigned)(rest[i] - '0');
	if (pl == 0 || pl > 5 || port < 1 || port > 65535)
		return say(why, n, PROBE_LABEL, "the port must be a number from 1 to 65535");
	s->port = port;
	rest += pl;
	if (s->kind == PROBE_TCP) {
		if (*rest && strcmp(rest, "/") != 0)
			return say(why, n, PROBE_LABEL, "a tcp:// probe takes no path");
		return 0;
	}
	if (!*rest)
		rest = "/";
	if (*rest != '/')
		return say(why, n, PROBE_LABEL, shape);
	bool grpc = s->kind == PROBE_GRPC || s->kind == PROBE_GRPCS;
	/* gRPC: the path is the service asked about (Kubernetes' grpc.service),
	 * sent as written, not a URL's path; none asks for the server as a
	 * whole. */
	if (grpc) {
		rest++;
		if (strchr(rest, '?'))
			return say(why, n, PROBE_LABEL, "a gRPC service name takes no query");
	}
	size_t len = strlen(rest);
	if (len > PROBE_PATH_MAX)
		return say(why, n, PROBE_LABEL, "the path is longer than 1024 bytes");
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)rest[i];
		/* The service's name is shown in the operator's view and the
		 * journal as it is, so it must be plain text. */
		if (grpc && (c < 0x20 || c > 0x7e))
			return say(why, n, PROBE_LABEL,
				   "a gRPC service name must be printable ASCII (it is shown in "
				   "entries and logs)");
		if (!grpc && !target_char(c))
			return say(why, n, PROBE_LABEL,
				   "the path has a character that must be percent-encoded");
	}
	memcpy(s->path, rest, len + 1);
	return 0;
}

int probe_spec_parse(const struct probe_labels *l, struct probe_spec *s, char *why, size_t n)
{
	memset(s, 0, sizeof(*s));
	if (!l->probe)
		return say(why, n, PROBE_LABEL, "missing");
	int r = parse_target(l->probe, s, why, n);
	static const struct duration_rule interval = { PROBE_LABEL_INTERVAL, DEFAULT_INTERVAL,
							INTERVAL_MIN, INTERVAL_MAX, "1 s to 1 h" },
					  timeout = { PROBE_LABEL_TIMEOUT, DEFAULT_TIMEOUT,
						      TIMEOUT_MIN, TIMEOUT_MAX, "100 ms to 60 s" },
					  start = { PROBE_LABEL_START_PERIOD, 0, START_PERIOD_MIN,
						    START_PERIOD_MAX, "1 ms to 1 h" };
	if (r == 0)
		r = duration_label(l->interval, &interval, &s->interval_ms, why, n);
	if (r == 0)
		r = duration_label(l->timeout, &timeout, &s->timeout_ms, why, n);
	if (r == 0)
		r = duration_label(l->start_period, &start, &s->start_period_ms, why, n);
	if (r == 0)
		r = count_label(l->retries, PROBE_LABEL_RETRIES, DEFAULT_RETRIES, &s->retries,
				why, n);
	if (r == 0)
		r = count_label(l->success_threshold, PROBE_LABEL_SUCCESS_THRESHOLD, 1,
				&s->success_threshold, why, n);
	return r;
}

/* ---- Results ---- */

const char *probe_result_text(enum probe_result r)
{
	static const char *const t[PROBE_N_RESULTS] = {
		[PROBE_NONE] = "no probe has run yet",
		[PROBE_PASS] = "passed",
		[PROBE_STATUS] = "HTTP status outside 200-399",
		[PROBE_REFUSED] = "connection refused",
		[PROBE_TIMEOUT] = "timed out",
		[PROBE_UNREACHABLE] = "address unreachable",
		[PROBE_RESET] = "connection reset",
		[PROBE_CUT] = "answer cut short",
		[PROBE_BAD_ANSWER] = "not an HTTP answer",
		[PROBE_TOO_BIG] = "answer head too large",
		[PROBE_TLS] = "TLS handshake failed",
		[PROBE_ERROR] = "probe could not run",
		[PROBE_GRPC_STATUS] = "gRPC health status not SERVING",
		[PROBE_GRPC_NO_MESSAGE] = "gRPC call ended without an answer",
		[PROBE_GRPC_CALL_STATUS] = "gRPC call failed",
		[PROBE_HTTP1] = "HTTP/1 answer, not HTTP/2",
		[PROBE_GRPC_BAD] = "not a gRPC answer",
		[PROBE_STREAM_RESET] = "gRPC call reset (RST_STREAM)",
		[PROBE_GOAWAY] = "connection closed by the server (GOAWAY)",
		[PROBE_BOUNDS] = "answer over the agent's bounds",
		[PROBE_STALLED] = "probe stalled",
	};
	return r >= 0 && r < PROBE_N_RESULTS ? t[r] : "?";
}

const char *probe_result_name(enum probe_result r)
{
	static const char *const t[PROBE_N_RESULTS] = {
		[PROBE_NONE] = "none", [PROBE_PASS] = "pass", [PROBE_STATUS] = "status",
		[PROBE_REFUSED] = "refused", [PROBE_TIMEOUT] = "timeout",
		[PROBE_UNREACHABLE] = "unreachable", [PROBE_RESET] = "reset",
		[PROBE_CUT] = "cut", [PROBE_BAD_ANSWER] = "bad_answer",
		[PROBE_TOO_BIG] = "too_big", [PROBE_TLS] = "tls", [PROBE_ERROR] = "error",
		[PROBE_GRPC_STATUS] = "grpc_status", [PROBE_GRPC_NO_MESSAGE] = "grpc_no_message",
		[PROBE_GRPC_BAD] = "grpc_bad_answer", [PROBE_STREAM_RESET] = "stream_reset",
		[PROBE_GOAWAY] = "goaway", [PROBE_BOUNDS] = "bounds", [PROBE_STALLED] = "stalled",
		[PROBE_GRPC_CALL_STATUS] = "grpc_call_status", [PROBE_HTTP1] = "http1",
	};
	return r >= 0 && r < PROBE_N_RESULTS ? t[r] : "?";
}

void probe_answer_init(struct probe_answer *a)
{
	memset(a, 0, sizeof(*a));
	/* Stream mode: the body is counted as it passes, never kept. */
	http_parser_init_stream(&a->p);
}

void probe_answer_free(struct probe_answer *a)
{
	if (a)
		http_parser_free(&a->p);
}

/* Kubernetes' rule (probe/http/http.go): 200 <= code < 400 passes; a
 * redirect is not followed, its status is the answer. */
static bool passing_status(int st)
{
	return st >= 200 && st < 400;
}

int probe_answer_feed(struct probe_answer *a, const char *buf, size_t len,
		      enum probe_result *res, int *status)
{
	struct errbuf err;
	*status = 0;
	while (len > 0) {
		size_t used = 0, n = 0;
		const char *piece = NULL;
		int r = http_parser_feed_piece(&a->p, buf, len, &used, &piece, &n, &err);
		if (r < 0) {
			*status = a->p.resp.status;
			*res = r == -E2BIG ? PROBE_TOO_BIG : PROBE_BAD_ANSWER;
			return 1;
		}
		buf += used;
		len -= used;
		if (http_parser_head_done(&a->p)) {
			*status = a->p.resp.status;
			if (!passing_status(*status)) {
				*res = PROBE_STATUS;
				return 1;
			}
			a->body += n;
			if (r == 1 || a->body >= PROBE_MAX_BODY) {
				*res = PROBE_PASS;
				return 1;
			}
		}
		if (r == 1) { /* cannot happen before the head; defensive */
			*res = PROBE_BAD_ANSWER;
			return 1;
		}
		if (used == 0 && n == 0)
			break;
	}
	return 0;
}

void probe_answer_eof(struct probe_answer *a, enum probe_result *res, int *status)
{
	struct errbuf err;
	*status = a->p.resp.status;
	if (!http_parser_head_done(&a->p)) {
		*res = a->p.header_bytes == 0 && a->p.resp.status == 0 ? PROBE_CUT : PROBE_BAD_ANSWER;
		*status = 0;
		return;
	}
	if (!passing_status(*status))
		*res = PROBE_STATUS;
	else
		*res = http_parser_eof(&a->p, &err) == 1 ? PROBE_PASS : PROBE_CUT;
}

/* ---- The record: Docker's handleProbeResult ---- */

void probe_state_init(struct probe_state *s, int64_t now_ms)
{
	memset(s, 0, sizeof(*s));
	s->status = PROBE_STARTING;
	s->since_ms = now_ms;
}

bool probe_state_apply(struct probe_state *s, const struct probe_spec *spec,
		       enum probe_result r, int http_status, int64_t start_ms,
		       int64_t started_ms, int64_t now_ms)
{
	enum probe_status old = s->status;
	s->runs++;
	s->last = r;
	s->last_status = http_status;
	/* The prober adds a refused key and its detail after this. */
	memset(&s->last_key, 0, sizeof(s->last_key));
	s->last_detail[0] = '\0';
	s->last_ms = now_ms;
	if (r == PROBE_PASS) {
		s->failing_streak = 0;
		if (s->passing_streak < UINT32_MAX)
			s->passing_streak++;
		/* Docker: one pass is healthy. success_threshold (Kubernetes)
		 * asks for more in a row, from starting as from unhealthy. */
		if (s->passing_streak >= spec->success_threshold)
			s->status = PROBE_HEALTHY;
	} else {
		s->passing_streak = 0;
		/* Docker: while starting (never passed), a failure within
		 * start_period of the container's start is not counted. */
		bool grace = s->status == PROBE_STARTING && started_ms > 0 &&
			     start_ms - started_ms < spec->start_period_ms;
		if (!grace) {
			if (s->failing_streak < UINT32_MAX)
				s->failing_streak++;
			if (s->failing_streak >= spec->retries)
				s->status = PROBE_UNHEALTHY;
		}
	}
	if (s->status != old) {
		s->since_ms = now_ms;
		return true;
	}
	return false;
}

/* The health service's serving statuses: the public words name them from
 * this table, never from the answer. */
static const char *serving_name(int status)
{
	static const char *const t[] = { "UNKNOWN", "SERVING", "NOT_SERVING", "SERVICE_UNKNOWN" };
	return status >= 0 && status < 4 ? t[status] : NULL;
}

/* gRPC's status codes (grpc's doc/statuscodes.md): the public words name a
 * call's final status from this table, never from the answer. */
static const char *grpc_code_name(int code)
{
	static const char *const t[] = {
		"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
		"ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
		"ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
		"UNAUTHENTICATED",
	};
	return code >= 0 && code < (int)(sizeof(t) / sizeof(t[0])) ? t[code] : NULL;
}

/* HTTP/2's error codes (RFC 9113 §7), for the operator. */
static const char *h2_error_name(int code)
{
	static const char *const t[] = {
		"NO_ERROR", "PROTOCOL_ERROR", "INTERNAL_ERROR", "FLOW_CONTROL_ERROR",
		"SETTINGS_TIMEOUT", "STREAM_CLOSED", "FRAME_SIZE_ERROR", "REFUSED_STREAM",
		"CANCEL", "COMPRESSION_ERROR", "CONNECT_ERROR", "ENHANCE_YOUR_CALM",
		"INADEQUATE_SECURITY", "HTTP_1_1_REQUIRED",
	};
	return code >= 0 && code < (int)(sizeof(t) / sizeof(t[0])) ? t[code] : NULL;
}

void probe_last_detail(const struct probe_state *s, char *buf, size_t n)
{
	char last[64], code[96];
	const char *name = h2_error_name(s->last_status);
	probe_last_text(s, last, sizeof(last));
	const struct probe_key_refusal *key = &s->last_key;
	if (s->last == PROBE_STREAM_RESET || s->last == PROBE_GOAWAY)
		snprintf(code, sizeof(code), ", HTTP/2 error code %d%s%s", s->last_status,
			 name ? " " : "", name ? name : "");
	else if (s->last == PROBE_TLS && key->bound == PROBE_KEY_BITS)
		snprintf(code, sizeof(code), ", server RSA key of %u bits, over %u", key->bits,
			 PROBE_RSA_MAX_BITS);
	else if (s->last == PROBE_TLS && key->bound == PROBE_KEY_EXPONENT && key->bits <= 64)
		snprintf(code, sizeof(code), ", server RSA exponent %llu, over %u",
			 (unsigned long long)key->exponent, PROBE_RSA_MAX_EXPONENT);
	else if (s->last == PROBE_TLS && key->bound == PROBE_KEY_EXPONENT)
		snprintf(code, sizeof(code), ", server RSA exponent of %u bits, over %u", key->bits,
			 PROBE_RSA_MAX_EXPONENT);
	else
		code[0] = '\0';
	snprintf(buf, n, "%s%s%s%.*s", last, code, s->last_detail[0] ? ", " : "",
		 (int)sizeof(s->last_detail), s->last_detail);
}

void probe_last_text(const struct probe_state *s, char *buf, size_t n)
{
	const char *serving = serving_name(s->last_status), *code = grpc_code_name(s->last_status);
	if (s->last == PROBE_GRPC_STATUS)
		snprintf(buf, n, "gRPC health status %s", serving ? serving : "out of range");
	else if (s->last == PROBE_GRPC_CALL_STATUS && code)
		snprintf(buf, n, "gRPC status %s", code);
	else if (s->last == PROBE_GRPC_CALL_STATUS)
		snprintf(buf, n, "gRPC status code %d", s->last_status);
	else if (s->last_status && (s->last == PROBE_PASS || s->last == PROBE_STATUS))
		snprintf(buf, n, "%s%sHTTP status %d%s", s->last == PROBE_PASS ? "passed" : "",
			 s->last == PROBE_PASS ? " (" : "", s->last_status,
			 s->last == PROBE_PASS ? ")" : "");
	else
		snprintf(buf, n, "%s", probe_result_text(s->last));
}

void probe_state_text(const struct probe_state *s, char *buf, size_t n)
{
	char last[64];
	probe_last_text(s, last, sizeof(last));
	if (s->status == PROBE_HEALTHY)
		snprintf(buf, n, "healthy");
	else if (s->runs == 0)
		snprintf(buf, n, "probe starting (no probe has run yet)");
	else if (s->status == PROBE_STARTING)
		snprintf(buf, n, "probe starting (last probe: %s)", last);
	else if (s->last == PROBE_PASS)
		snprintf(buf, n, "probe unhealthy (last probe: %s)", last);
	else
		snprintf(buf, n, "probe unhealthy (%s)", last);
}
