/* SPDX-License-Identifier: Apache-2.0 */
/* The agent's own probes (issue 27), the pure parts: labels, durations,
 * answers, Docker's state machine, the judge, the container's address. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "probe/probe.h"
#include "runtime/container.h"
#include "runtime/inspect.h"
#include "runtime/probes.h"
#include "tests/lib/tap.h"

/* Go's time.ParseDuration, case by case as Go answers it. */
static void durations(void)
{
	static const struct {
		const char *s;
		int r;
		int64_t ns;
	} t[] = {
		{ "10s", 0, 10000000000LL },  { "1m30s", 0, 90000000000LL },
		{ "500ms", 0, 500000000 },    { "1.5s", 0, 1500000000 },
		{ "0", 0, 0 },                { "+0", 0, 0 },
		{ "-0", 0, 0 },               { "0s", 0, 0 },
		{ "2h", 0, 7200000000000LL }, { "1h", 0, 3600000000000LL },
		{ "1500us", 0, 1500000 },     { "2us", 0, 2000 },
		{ "1\xc2\xb5s", 0, 1000 },    { "1\xce\xbcs", 0, 1000 },
		{ "7ns", 0, 7 },              { "1h1m1s", 0, 3661000000000LL },
		{ "0.5m", 0, 30000000000LL }, { ".5s", 0, 500000000 },
		{ "5.s", 0, 5000000000LL },   { "+5s", 0, 5000000000LL },
		{ "-5s", 0, -5000000000LL },  { "1m1m", 0, 120000000000LL },
		{ "", -EINVAL, 0 },           { "10", -EINVAL, 0 },
		{ "0.0", -EINVAL, 0 },        { "00", -EINVAL, 0 },
		{ "+", -EINVAL, 0 },          { "-", -EINVAL, 0 },
		{ "s", -EINVAL, 0 },          { "1x", -EINVAL, 0 },
		{ "1s ", -EINVAL, 0 },        { " 1s", -EINVAL, 0 },
		{ "1 s", -EINVAL, 0 },        { "1S", -EINVAL, 0 },
		{ "1d", -EINVAL, 0 },         { "1h30", -EINVAL, 0 },
		{ ".s", -EINVAL, 0 },         { "1sm", -EINVAL, 0 },
		{ "--1s", -EINVAL, 0 },       { "25h", -ERANGE, 0 },
		{ "99999999999999999999s", -ERANGE, 0 },
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		int64_t ns = -1;
		int r = probe_parse_duration(t[i].s, &ns);
		is_int(r, t[i].r, "duration \"%s\": result", t[i].s);
		if (r == 0)
			is_int(ns, t[i].ns, "duration \"%s\": ns", t[i].s);
	}
}

static void labels(void)
{
	static const struct {
		const char *probe, *interval, *timeout, *start, *retries, *succ;
		int ok;
		enum probe_kind kind;
		unsigned port;
		const char *path, *why; /* a piece of why */
	} t[] = {
		{ "http://:8080/healthz", NULL, NULL, NULL, NULL, NULL, 1, PROBE_HTTP, 8080, "/healthz", NULL },
		{ "https://:8443", NULL, NULL, NULL, NULL, NULL, 1, PROBE_HTTPS, 8443, "/", NULL },
		{ "HTTP://:80/a?b=c&d=%20", NULL, NULL, NULL, NULL, NULL, 1, PROBE_HTTP, 80, "/a?b=c&d=%20", NULL },
		{ "tcp://:5432", "1s", "500ms", "30s", "5", "2", 1, PROBE_TCP, 5432, "", NULL },
		{ "tcp://:5432/", NULL, NULL, NULL, NULL, NULL, 1, PROBE_TCP, 5432, "", NULL },
		/* A label aiming elsewhere: never a connection. */
		{ "http://169.254.169.254/latest", NULL, NULL, NULL, NULL, NULL, 0, 0, 0, NULL, "names a host" },
		{ "http://localhost:80/", NULL, NULL, NULL, NULL, NULL, 0, 0, 0, NULL, "names a host" },
		{ "http://user@:80/", NULL, NULL, NULL, NULL, NULL, 0, 0, 0, NULL, "names a host" },
		{ "http://[::1]:80/", NULL, NULL, NULL, NULL, NULL, 0, 0, 0, NULL, "names a host" },
		{ "tcp://10.0.0.1:22", NULL, NULL, NULL, NULL, NULL, 0, 0, 0, NULL, "names a host" },
		{ "unix:///var/run/docker.sock", NULL, NULL, NULL, NULL, NULL, 0, 0, 0, NULL, "must be http://" },
		/* gRPC (issue 34): the path is the service, "" the server. */
		{ "grpc://:50051", NULL, NULL, NULL, NULL, NULL, 1, PROBE_GRPC, 50051, "", NULL },
		{ "grpc://:50051/", NULL, NULL, NULL, NULL, NULL, 1, PROBE_GRPC, 50051, "", NULL },
		{ "GRPC://:9000/grpc.health.v1.Health", NULL, NULL, NULL, NULL, NULL, 1, PROBE_GRPC, 9000, "grpc.health.v1.Health", NULL },
		{ "grpcs://:443/app.Store", "1s", "2s", NULL, "2", NULL, 1, PROBE_GRPCS, 443, "app.Store", NULL },
		{ "grpc://10.0.0.1:50051", NULL, NULL, NULL, NULL, NULL, 0, 0, 0, NULL, "names a host" },
		{ "grpc://:50051/a?b", NULL, NULL, NULL, NULL, NULL, 0, 0, 0, NULL, "takes no query" },
		/* A gRPC service name is shown as it is: printable ASCII only
		 * (issue 42), a URL's rules aside. */
		{ "grpc://:50051/a b", NULL, NULL, NULL, NULL, NULL, 1, PROBE_GRPC, 50051, "a b", NULL },
		{ "grpc://:50051/[x]{y}|~", NULL, NULL, NULL, NULL, NULL, 1, PROBE_GRPC, 50051, "[x]{y}|~", NULL },
		{ "grpc://:50051/a\x1f", NULL, NULL, NULL, NULL, NULL, 0, 0, 0, NULL, "a gRPC service name must be printable ASCII (it is shown in entries and logs)" },
		{ "grpc://:50051/a\x7f", NULL, NULL, NULL, NULL, NULL, 0, 0, 0, NULL, "printable ASCII" },
		{ "grpc://:50051/caf\xc3\xa9", NULL, NULL, NULL, NULL, NULL, 0, 0, 0, NULL, "printable ASCII" },
		{ "grpcs://:50051/a\r\nb", NULL, NULL, NULL, NULL, NULL, 0, 0, 0, NULL, "printable ASCII" },
		{ "grpc://:0", NULL, NULL, NULL, NULL, NULL, 0, 0, 0, NULL, "port" },
		{ "http://:0/", NULL, NULL, NULL, NULL, NULL, 0, 0, 0, NULL, "port" },
		{ "http://:65536/", NULL, NULL, NULL, NULL, NULL, 0, 0, 0, NULL, "port" },
		{ "http://:80@x/", NULL, NULL, NULL, NULL, NULL, 0, 0, 0, NULL, "must be http://" },
		{ "http://:80/a b", NULL, NULL, NULL, NULL, NULL, 0, 0, 0, NULL, "percent-encoded" },
		{ "http://:80/a\r\nX: y", NULL, NULL, NULL, NULL, NULL, 0, 0, 0, NULL, "percent-encoded" },
		{ "http://:80/#frag", NULL, NULL, NULL, NULL, NULL, 0, 0, 0, NULL, "percent-encoded" },
		{ "tcp://:80/x", NULL, NULL, NULL, NULL, NULL, 0, 0, 0, NULL, "takes no path" },
		{ "http://:80/", "10", NULL, NULL, NULL, NULL, 0, 0, 0, NULL, "interval: not a duration" },
		{ "http://:80/", "1d", NULL, NULL, NULL, NULL, 0, 0, 0, NULL, "interval: not a duration" },
		{ "http://:80/", "10ms", NULL, NULL, NULL, NULL, 0, 0, 0, NULL, "interval: out of range (1 s to 1 h" },
		{ "http://:80/", "500ms", NULL, NULL, NULL, NULL, 0, 0, 0, NULL, "interval: out of range" },
		/* 2 µs is not 0: never the default, whatever ms it rounds to. */
		{ "http://:80/", "2us", NULL, NULL, NULL, NULL, 0, 0, 0, NULL, "interval: out of range" },
		{ "http://:80/", "-5s", NULL, NULL, NULL, NULL, 0, 0, 0, NULL, "interval: negative" },
		{ "http://:80/", "1h0m0.001s", NULL, NULL, NULL, NULL, 0, 0, 0, NULL, "interval: out of range" },
		{ "http://:80/", NULL, "2m", NULL, NULL, NULL, 0, 0, 0, NULL, "timeout: out of range (100 ms to 60 s" },
		{ "http://:80/", NULL, "99ms", NULL, NULL, NULL, 0, 0, 0, NULL, "timeout: out of range" },
		{ "http://:80/", NULL, NULL, "-5s", NULL, NULL, 0, 0, 0, NULL, "start_period: negative" },
		{ "http://:80/", NULL, NULL, "999us", NULL, NULL, 0, 0, 0, NULL, "start_period: out of range (1 ms to 1 h" },
		{ "http://:80/", NULL, NULL, NULL, "-1", NULL, 0, 0, 0, NULL, "retries: negative" },
		{ "http://:80/", NULL, NULL, NULL, "three", NULL, 0, 0, 0, NULL, "retries: not a whole number" },
		{ "http://:80/", NULL, NULL, NULL, "1.5", NULL, 0, 0, 0, NULL, "retries: not a whole number" },
		{ "http://:80/", NULL, NULL, NULL, "1000", NULL, 0, 0, 0, NULL, "retries: out of range (1 to 100" },
		{ "http://:80/", NULL, NULL, NULL, "99999999999999999999", NULL, 0, 0, 0, NULL, "retries: out of range" },
		{ "http://:80/", NULL, NULL, NULL, "101", NULL, 0, 0, 0, NULL, "retries: out of range" },
		{ "http://:80/", NULL, NULL, NULL, NULL, "1000", 0, 0, 0, NULL, "success_threshold: out of range (1 to 100" },
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		struct probe_labels l = { .probe = (char *)t[i].probe, .interval = (char *)t[i].interval,
					  .timeout = (char *)t[i].timeout,
					  .start_period = (char *)t[i].start,
					  .retries = (char *)t[i].retries,
					  .success_threshold = (char *)t[i].succ };
		struct probe_spec s;
		char why[160] = "";
		int r = probe_spec_parse(&l, &s, why, sizeof(why));
		ok((r == 0) == t[i].ok, "label %zu %s (%s)", i, t[i].ok ? "taken" : "refused", why);
		if (r == 0) {
			is_int(s.kind, t[i].kind, "label %zu: kind", i);
			is_int(s.port, t[i].port, "label %zu: port", i);
			if (t[i].kind != PROBE_TCP)
				is_str(s.path, t[i].path, "label %zu: path", i);
		} else {
			ok(strstr(why, t[i].why) != NULL, "label %zu: why says \"%s\"", i, t[i].why);
			/* The value is the app's: never quoted back. */
			ok(strstr(why, t[i].probe) == NULL, "label %zu: value not quoted", i);
		}
	}
	/* What each set of labels reads as: absent are the defaults, and 0
	 * is Docker's "the default" for every one of them. */
	static const struct {
		const char *name;
		struct probe_labels l;
		int64_t interval, timeout, start;
		unsigned retries, succ;
	} v[] = {
		{ "absent: 5s, 2s, 0s, 3, 1", { .probe = "http://:1/" }, 5000, 2000, 0, 3, 1 },
		{ "every label read", { .probe = "tcp://:1", .interval = "1s", .timeout = "500ms",
					 .start_period = "30s", .retries = "5", .success_threshold = "2" },
		  1000, 500, 30000, 5, 2 },
		{ "0 is the default", { .probe = "tcp://:1", .interval = "0", .timeout = "0s",
					 .start_period = "0ms", .retries = "0", .success_threshold = "0" },
		  5000, 2000, 0, 3, 1 },
		{ "Go's forms at the edges: +1h, 1.5s, 1ms, 100, 007",
		  { .probe = "tcp://:1", .interval = "+1h", .timeout = "1.5s", .start_period = "1ms",
		    .retries = "100", .success_threshold = "007" },
		  3600000, 1500, 1, 100, 7 },
	};
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		struct probe_spec s;
		char why[160] = "";
		int r = probe_spec_parse(&v[i].l, &s, why, sizeof(why));
		ok(r == 0 && s.interval_ms == v[i].interval && s.timeout_ms == v[i].timeout &&
			   s.start_period_ms == v[i].start && s.retries == v[i].retries &&
			   s.success_threshold == v[i].succ,
		   "%s (%s)", v[i].name, why);
	}
}

#define I1XX "HTTP/1.1 100 Continue\r\n\r\n"
static void answers(void)
{
	static const struct {
		const char *bytes;
		bool eof;
		enum probe_result res;
		int status;
	} t[] = {
		{ "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", false, PROBE_PASS, 200 },
		{ "HTTP/1.1 204 No Content\r\n\r\n", false, PROBE_PASS, 204 },
		{ "HTTP/1.1 302 Found\r\nLocation: http://elsewhere/\r\nContent-Length: 0\r\n\r\n", false, PROBE_PASS, 302 },
		{ "HTTP/1.1 399 X\r\nContent-Length: 0\r\n\r\n", false, PROBE_PASS, 399 },
		{ "HTTP/1.1 400 Bad\r\nContent-Length: 0\r\n\r\n", false, PROBE_STATUS, 400 },
		{ "HTTP/1.1 500 Oops\r\n\r\n", false, PROBE_STATUS, 500 },
		{ "HTTP/1.1 199 X\r\n\r\n", true, PROBE_BAD_ANSWER, 0 },
		{ "HTTP/1.0 200 OK\r\n\r\nbody until the end", true, PROBE_PASS, 200 },
		{ "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", true, PROBE_CUT, 200 },
		{ "HTTP/1.1 200 OK\r\nContent-Le", true, PROBE_BAD_ANSWER, 0 },
		{ "", true, PROBE_CUT, 0 },
		{ "SSH-2.0-OpenSSH_9.2\r\n", false, PROBE_BAD_ANSWER, 0 },
		{ "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", false, PROBE_PASS, 200 },
		/* Five interim answers at most, as Go's client (kubelet's): the
		 * sixth ends the probe at once, not at its timeout (issue 34). */
		{ I1XX I1XX I1XX I1XX I1XX "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", false, PROBE_PASS, 200 },
		{ I1XX I1XX I1XX I1XX I1XX I1XX, false, PROBE_TOO_BIG, 100 },
		{ "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n", false, PROBE_PASS, 200 },
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		struct probe_answer a;
		enum probe_result res = PROBE_NONE;
		int status = -1;
		probe_answer_init(&a);
		const char *b = t[i].bytes;
		int done = 0;
		/* One byte at a time: the worst split a socket can give. */
		for (size_t k = 0; b[k] && !done; k++)
			done = probe_answer_feed(&a, b + k, 1, &res, &status);
		if (!done && t[i].eof)
			probe_answer_eof(&a, &res, &status);
		else if (!done)
			res = PROBE_NONE;
		is_int(res, t[i].res, "answer %zu: %s", i, probe_result_name(t[i].res));
		is_int(status, t[i].status, "answer %zu: status", i);
		probe_answer_free(&a);
	}
	/* Bounds: an endless head fails at 16 KiB, a 1 GiB body passes after
	 * 10 KiB of it, whatever comes after. */
	struct probe_answer a;
	enum probe_result res = PROBE_NONE;
	int status = 0, done = 0;
	char junk[4096];
	memset(junk, 'a', sizeof(junk));
	probe_answer_init(&a);
	probe_answer_feed(&a, "HTTP/1.1 200 OK\r\nX: ", 20, &res, &status);
	size_t fed = 20;
	while (!done && fed < (1u << 20)) {
		done = probe_answer_feed(&a, junk, sizeof(junk), &res, &status);
		fed += sizeof(junk);
	}
	ok(done && res == PROBE_TOO_BIG && fed <= HTTP_MAX_HEADER_BYTES + 2 * sizeof(junk),
	   "an endless header is refused within the head bound (%zu bytes fed)", fed);
	probe_answer_free(&a);
	probe_answer_init(&a);
	static const char head[] = "HTTP/1.1 200 OK\r\nContent-Length: 1073741824\r\n\r\n";
	done = probe_answer_feed(&a, head, strlen(head), &res, &status);
	fed = 0;
	while (!done && fed < (1u << 20)) {
		done = probe_answer_feed(&a, junk, sizeof(junk), &res, &status);
		fed += sizeof(junk);
	}
	ok(done && res == PROBE_PASS && fed <= PROBE_MAX_BODY + sizeof(junk),
	   "a 1 GiB body: decided after %zu bytes of it", fed);
	probe_answer_free(&a);
}

/* Docker's handleProbeResult, step by step: r is the result of each probe
 * (P pass, F fail), t its start in s after the container's start, want the
 * status after it. */
static void machine(void)
{
	static const struct {
		const char *name;
		unsigned retries, succ;
		int64_t start_period_ms;
		const char *steps; /* "P@0" "F@1" ... */
		const char *want;  /* S, H, U after each step */
	} t[] = {
		{ "first pass is healthy", 3, 1, 0, "P0", "H" },
		{ "failures counted to retries", 3, 1, 0, "F0F1F2", "SSU" },
		{ "a pass resets the streak", 3, 1, 0, "F0F1P2F3F4F5", "SSHHHU" },
		{ "healthy stays healthy until retries", 2, 1, 0, "P0F1F2", "HHU" },
		{ "unhealthy to healthy on one pass", 1, 1, 0, "F0P1", "UH" },
		{ "success_threshold from unhealthy", 1, 3, 0, "F0P1P2F3P4P5P6", "UUUUUUH" },
		{ "success_threshold from starting", 3, 2, 0, "P0P1", "SH" },
		{ "start_period: failures not counted", 1, 1, 10000, "F0F5F9F10", "SSSU" },
		{ "start_period: only while starting", 1, 1, 10000, "P0F1", "HU" },
		{ "start_period ends: counted from then", 2, 1, 5000, "F0F4F6F7", "SSSU" },
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		struct probe_spec spec = { .retries = t[i].retries, .success_threshold = t[i].succ,
					   .start_period_ms = t[i].start_period_ms };
		struct probe_state st;
		int64_t started = 1000000;
		probe_state_init(&st, started);
		char got[32] = "";
		size_t n = 0;
		for (const char *p = t[i].steps; *p && n < sizeof(got) - 1;) {
			enum probe_result r = *p++ == 'P' ? PROBE_PASS : PROBE_REFUSED;
			long sec = strtol(p, (char **)&p, 10);
			probe_state_apply(&st, &spec, r, 0, started + sec * 1000, started,
					  started + sec * 1000 + 1);
			got[n++] = "SHU"[st.status];
		}
		got[n] = '\0';
		is_str(got, t[i].want, "state machine: %s", t[i].name);
	}
	struct probe_spec spec = { .retries = 1, .success_threshold = 1 };
	struct probe_state st;
	char text[200];
	probe_state_init(&st, 0);
	probe_state_text(&st, text, sizeof(text));
	is_str(text, "probe starting (no probe has run yet)", "text before any probe");
	probe_state_apply(&st, &spec, PROBE_STATUS, 500, 0, 0, 1);
	probe_state_text(&st, text, sizeof(text));
	is_str(text, "probe unhealthy (HTTP status 500)", "text of a failing status");
	probe_state_apply(&st, &spec, PROBE_TIMEOUT, 0, 0, 0, 1);
	probe_state_text(&st, text, sizeof(text));
	is_str(text, "probe unhealthy (timed out)", "text of a timeout");
}

/* The public words name a result from the agent's own tables; the
 * operator's add the codes and what probe/grpc.c said (issue 42). */
static void words(void)
{
	static const struct {
		enum probe_result r;
		int code;
		const char *detail, *text, *full;
	} t[] = {
		{ PROBE_GRPC_CALL_STATUS, 14, "grpc-message \"no backend\"",
		  "probe unhealthy (gRPC status UNAVAILABLE)",
		  "gRPC status UNAVAILABLE, grpc-message \"no backend\"" },
		{ PROBE_GRPC_CALL_STATUS, 5, "", "probe unhealthy (gRPC status NOT_FOUND)",
		  "gRPC status NOT_FOUND" },
		{ PROBE_GRPC_CALL_STATUS, 1, "", "probe unhealthy (gRPC status CANCELLED)",
		  "gRPC status CANCELLED" },
		{ PROBE_GRPC_CALL_STATUS, 16, "", "probe unhealthy (gRPC status UNAUTHENTICATED)",
		  "gRPC status UNAUTHENTICATED" },
		{ PROBE_GRPC_CALL_STATUS, 17, "", "probe unhealthy (gRPC status code 17)",
		  "gRPC status code 17" },
		{ PROBE_GRPC_CALL_STATUS, -1, "", "probe unhealthy (gRPC status code -1)",
		  "gRPC status code -1" },
		{ PROBE_GRPC_STATUS, 2, "", "probe unhealthy (gRPC health status NOT_SERVING)",
		  "gRPC health status NOT_SERVING" },
		{ PROBE_GRPC_STATUS, 4, "", "probe unhealthy (gRPC health status out of range)",
		  "gRPC health status out of range" },
		{ PROBE_GRPC_NO_MESSAGE, 0, "grpc-status 0 without a HealthCheckResponse",
		  "probe unhealthy (gRPC call ended without an answer)",
		  "gRPC call ended without an answer, grpc-status 0 without a HealthCheckResponse" },
		{ PROBE_HTTP1, 400, "status line HTTP/1.x 400", "probe unhealthy (HTTP/1 answer, not HTTP/2)",
		  "HTTP/1 answer, not HTTP/2, status line HTTP/1.x 400" },
		{ PROBE_STATUS, 502, "content-type \"text/html\"", "probe unhealthy (HTTP status 502)",
		  "HTTP status 502, content-type \"text/html\"" },
		{ PROBE_GRPC_BAD, 0, "DATA before the response headers ended",
		  "probe unhealthy (not a gRPC answer)",
		  "not a gRPC answer, DATA before the response headers ended" },
		{ PROBE_STREAM_RESET, 7, "", "probe unhealthy (gRPC call reset (RST_STREAM))",
		  "gRPC call reset (RST_STREAM), HTTP/2 error code 7 REFUSED_STREAM" },
		{ PROBE_GOAWAY, 0, "last stream 0: the call was not taken",
		  "probe unhealthy (connection closed by the server (GOAWAY))",
		  "connection closed by the server (GOAWAY), HTTP/2 error code 0 NO_ERROR, last stream 0: "
		  "the call was not taken" },
		{ PROBE_BOUNDS, 0, "a header block over 1536 bytes",
		  "probe unhealthy (answer over the agent's bounds)",
		  "answer over the agent's bounds, a header block over 1536 bytes" },
	};
	struct probe_spec spec = { .retries = 1, .success_threshold = 1 };
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		struct probe_state st;
		char text[200], full[400];
		probe_state_init(&st, 0);
		probe_state_apply(&st, &spec, t[i].r, t[i].code, 0, 0, 1);
		snprintf(st.last_detail, sizeof(st.last_detail), "%s", t[i].detail);
		probe_state_text(&st, text, sizeof(text));
		probe_last_detail(&st, full, sizeof(full));
		is_str(text, t[i].text, "public words of %s %d", probe_result_name(t[i].r), t[i].code);
		is_str(full, t[i].full, "operator's words of %s %d", probe_result_name(t[i].r),
		       t[i].code);
		ok(strstr(text, "no backend") == NULL && strstr(text, "content-type") == NULL,
		   "no server byte in the public words of %s", probe_result_name(t[i].r));
	}
	struct probe_state st;
	probe_state_init(&st, 0);
	snprintf(st.last_detail, sizeof(st.last_detail), "old");
	probe_state_apply(&st, &spec, PROBE_REFUSED, 0, 0, 0, 1);
	is_str(st.last_detail, "", "a new result clears the last one's detail");
	for (int r = 0; r < PROBE_N_RESULTS; r++)
		ok(probe_result_text(r) && probe_result_name(r) && strcmp(probe_result_text(r), "?") &&
		   strcmp(probe_result_name(r), "?"), "result %d has words and a name", r);
}

/* Docker's and nerdctl's inspect shapes give the container's own address;
 * the judge serves what the probe says. */
static const char docker_obj[] =
	"{\"Id\":\"c1\",\"Name\":\"/web\",\"State\":{\"Status\":\"running\",\"Running\":true,"
	"\"StartedAt\":\"2026-01-01T00:00:00Z\"},\"Config\":{\"Labels\":{"
	"\"com.docker.compose.project\":\"demo\",\"dstack.healthd.probe\":\"http://:8080/h\"%s}},"
	"\"HostConfig\":{\"NetworkMode\":\"%s\"},\"NetworkSettings\":{\"IPAddress\":\"\","
	"\"Networks\":{%s}}}";

static int parse_obj(const char *fmt_extra, const char *mode, const char *nets,
		     struct container *c)
{
	char buf[2048];
	struct json j;
	struct errbuf err;
	snprintf(buf, sizeof(buf), docker_obj, fmt_extra, mode, nets);
	int r = json_parse(&j, buf, strlen(buf), 1024, &err);
	if (r == 0)
		r = inspect_parse_object(&j, 0, c, &err);
	json_free(&j);
	return r;
}

static int parse_one(const char *fmt_extra, const char *mode, const char *nets,
		     struct container *c)
{
	int r = parse_obj(fmt_extra, mode, nets, c);
	return r < 0 ? r : probe_prepare(c, NULL, false);
}

#define NET(name, ip) "\"" name "\":{\"IPAddress\":\"" ip "\"}"
#define NETID(name, id, ip) "\"" name "\":{\"NetworkID\":\"" id "\",\"IPAddress\":\"" ip "\"}"

/* The address probed, from where the agent is: self_mode NULL is an agent
 * on the machine (not in a container); else its own container (a sidecar)
 * with that NetworkMode and those networks. */
static void addresses(void)
{
	static const struct {
		const char *mode, *nets, *self_mode, *self_nets, *target, *why;
	} t[] = {
		{ "demo_default", NET("demo_default", "172.18.0.2"), NULL, NULL, "http://172.18.0.2:8080", NULL },
		{ "demo_b", NET("demo_b", "172.19.0.3") "," NET("demo_a", "172.20.0.4"), NULL, NULL,
		  "http://172.20.0.4:8080", NULL },
		{ "host", NET("host", ""), NULL, NULL, "http://127.0.0.1:8080", NULL },
		{ "none", NET("none", ""), NULL, NULL, NULL, "no IPv4 address" },
		{ "container:abc", "", NULL, NULL, NULL, "no IPv4 address" },
		{ "x", "\"x\":{\"IPAddress\":\"not-an-ip\"}", NULL, NULL, NULL, "no IPv4 address" },
		{ "x", "\"x\":{\"IPAddress\":7}", NULL, NULL, NULL, "no IPv4 address" },
		/* The first by name with a valid address: a bad first one hides none. */
		{ "a", NET("a", "bogus") "," NET("b", "172.20.0.4"), NULL, NULL, "http://172.20.0.4:8080", NULL },
		{ "a", NET("a", "") "," NET("b", "172.20.0.5"), NULL, NULL, "http://172.20.0.5:8080", NULL },
		{ "a", "\"a\":{\"IPAddress\":7}," NET("b", "172.20.0.6"), NULL, NULL, "http://172.20.0.6:8080", NULL },
		/* A sidecar on a network of its own: one it shares, first by name. */
		{ "demo_a", NET("demo_a", "172.20.0.4") "," NET("demo_b", "172.19.0.3") "," NET("demo_c", "172.21.0.3"),
		  "demo_b", NET("demo_c", "172.21.0.9") "," NET("demo_b", "172.19.0.9"),
		  "http://172.19.0.3:8080", NULL },
		{ "demo_a", NET("demo_a", "172.20.0.4"), "other", NET("other", "172.30.0.9"), NULL,
		  "on no network the agent's own container is on" },
		{ "demo_a", NET("demo_a", "172.20.0.4"), "none", NET("none", ""), NULL,
		  "on no network the agent's own container is on" },
		/* The same name, another network (NetworkID): not shared. */
		{ "demo_a", NETID("demo_a", "n2", "172.20.0.4"), "demo_a", NETID("demo_a", "n1", "172.20.0.9"),
		  NULL, "on no network the agent's own container is on" },
		{ "demo_a", NETID("demo_a", "n1", "172.20.0.4"), "demo_a", NETID("demo_a", "n1", "172.20.0.9"),
		  "http://172.20.0.4:8080", NULL },
		/* Host networking: loopback is the machine's only from the machine's stack. */
		{ "host", NET("host", ""), "demo_a", NET("demo_a", "172.20.0.9"), NULL,
		  "network_mode host and the agent's own container does not" },
		{ "host", NET("host", ""), "host", NET("host", ""), "http://127.0.0.1:8080", NULL },
		{ "demo_b", NET("demo_b", "172.19.0.3") "," NET("demo_a", "172.20.0.4"), "host", NET("host", ""),
		  "http://172.20.0.4:8080", NULL },
		/* A sidecar in another's stack has no networks to compare. */
		{ "demo_a", NET("demo_a", "172.20.0.4"), "container:abc", "", "http://172.20.0.4:8080", NULL },
		/* Addresses the runtime reports that are never connected to
		 * (issue 34): a macvlan's ipv4_address can name anything. */
		{ "mv", NET("mv", "169.254.169.254"), NULL, NULL, NULL, "link-local (169.254.0.0/16): not probed" },
		{ "mv", NET("mv", "127.0.0.2"), NULL, NULL, NULL, "loopback (127.0.0.0/8)" },
		{ "mv", NET("mv", "0.1.2.3"), NULL, NULL, NULL, "in 0.0.0.0/8" },
		{ "mv", NET("mv", "224.0.0.1"), NULL, NULL, NULL, "multicast (224.0.0.0/4)" },
		{ "mv", NET("mv", "239.255.255.250"), NULL, NULL, NULL, "multicast" },
		{ "mv", NET("mv", "255.255.255.255"), NULL, NULL, NULL, "reserved or broadcast" },
		{ "mv", NET("mv", "240.0.0.1"), NULL, NULL, NULL, "reserved or broadcast" },
		{ "mv", NET("mv", "169.253.255.255"), NULL, NULL, "http://169.253.255.255:8080", NULL },
		{ "mv", NET("mv", "223.255.255.254"), NULL, NULL, "http://223.255.255.254:8080", NULL },
		{ "mv", NET("mv", "10.0.0.7"), NULL, NULL, "http://10.0.0.7:8080", NULL },
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		struct container c, self = { 0 };
		int r = parse_obj("", t[i].mode, t[i].nets, &c);
		if (r == 0 && t[i].self_mode)
			r = parse_obj("", t[i].self_mode, t[i].self_nets, &self);
		if (r == 0)
			r = probe_prepare(&c, t[i].self_mode ? &self : NULL, false);
		ok(r == 0 && c.probe, "address %zu parsed", i);
		if (r == 0 && c.probe && t[i].target)
			is_str(c.probe->usable ? c.probe->target : c.probe->why, t[i].target,
			       "address %zu: %s", i, t[i].target);
		else if (r == 0 && c.probe)
			ok(!c.probe->usable && strstr(c.probe->why, t[i].why),
			   "address %zu: none (%s)", i, c.probe->why);
		container_free(&c);
		container_free(&self);
	}
	/* A remote Docker (tcp:// to another host): its addresses are that
	 * host's networks; no probe, an entry that says why (issue 34). */
	struct container c;
	int r = parse_obj("", "demo_default", NET("demo_default", "172.18.0.2"), &c);
	if (r == 0)
		r = probe_prepare(&c, NULL, true);
	ok(r == 0 && c.probe && !c.probe->usable && strstr(c.probe->why, "Docker is not on this machine"),
	   "a remote Docker: no probe (%s)", r == 0 && c.probe ? c.probe->why : "");
	container_free(&c);
}

static const char *judged(struct container *c, size_t n)
{
	static char buf[512];
	struct container_list l = { .v = c, .n = n, .cap = n };
	struct verdict v;
	verdict_init(&v);
	containers_judge(&l, &v);
	snprintf(buf, sizeof(buf), "%s", v.healthy ? "healthy" : v.n_entries ? v.entries[0].status : "?");
	verdict_free(&v);
	return buf;
}

static void judge(void)
{
	struct container c;
	parse_one("", "demo_default", "\"demo_default\":{\"IPAddress\":\"172.18.0.2\"}", &c);
	is_str(judged(&c, 1), "probe starting (no probe has run yet)", "judge: not probed yet");
	c.probe->probed = true;
	c.probe->state.status = PROBE_HEALTHY;
	is_str(judged(&c, 1), "healthy", "judge: a healthy probe passes");
	c.probe->state.status = PROBE_UNHEALTHY;
	c.probe->state.runs = 3;
	c.probe->state.last = PROBE_REFUSED;
	is_str(judged(&c, 1), "probe unhealthy (connection refused)", "judge: unhealthy probe");
	/* Both a Docker healthcheck and a probe: both must pass. */
	c.healthcheck_configured = true;
	c.health = strdup("healthy");
	is_str(judged(&c, 1), "probe unhealthy (connection refused)", "judge: Docker healthy, probe not");
	c.probe->state.status = PROBE_HEALTHY;
	free(c.health);
	c.health = strdup("unhealthy");
	is_str(judged(&c, 1), "unhealthy", "judge: probe healthy, Docker not");
	free(c.health);
	c.health = strdup("healthy");
	is_str(judged(&c, 1), "healthy", "judge: both healthy");
	/* A probe never prepared is not a pass. */
	free(c.probe);
	c.probe = NULL;
	is_str(judged(&c, 1), "probe starting (no probe has run yet)", "judge: labels never prepared");
	container_free(&c);

	parse_one(",\"dstack.healthd.probe.retries\":\"x\"", "n", "\"n\":{\"IPAddress\":\"10.0.0.2\"}", &c);
	is_str(judged(&c, 1), "label dstack.healthd.probe.retries: not a whole number",
	       "judge: an unusable label is an entry");
	container_free(&c);
	parse_one(",\"dstack.healthd.optional\":\"true\"", "n", "\"n\":{\"IPAddress\":\"10.0.0.2\"}", &c);
	struct container two[2];
	two[0] = c;
	parse_one("", "n", "\"n\":{\"IPAddress\":\"10.0.0.3\"}", &two[1]);
	free(two[1].name);
	two[1].name = strdup("api");
	two[1].probe->probed = true;
	two[1].probe->state.status = PROBE_HEALTHY;
	is_str(judged(two, 2), "healthy", "judge: an optional service is left out");
	is_str(container_skip_reason(&two[0]), "optional (dstack.healthd.optional)",
	       "skip reason: optional");
	free(two[0].optional_label);
	two[0].optional_label = strdup("yes");
	is_str(judged(two, 2), "label dstack.healthd.optional: must be true or false",
	       "judge: an optional label that is neither true nor false");
	container_free(&two[0]);
	container_free(&two[1]);
}

int main(void)
{
	durations();
	labels();
	answers();
	machine();
	words();
	addresses();
	judge();
	return done_testing();
}
