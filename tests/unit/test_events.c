/* SPDX-License-Identifier: Apache-2.0 */
/* Reacting to Docker's events: when refreshes start for given event arrival
 * times (coalescing, spacing, the timer as backstop), the reconnection
 * backoff, the request target, splitting the stream into lines, judging a
 * line, and the HTTP parser handing a chunked body out piece by piece. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/refresh.h"
#include "runtime/events.h"
#include "runtime/http.h"
#include "tests/lib/tap.h"

/* ---- scheduling: event times in, refresh start times out ---- */

#define MAX_EV 10240

/* Runs the loop's decisions over simulated time: refreshes take dur ms;
 * events that arrive while one runs ask for one more. Appends the start
 * times to out as "t,t,...", up to horizon. Returns how many ran. */
static int simulate(int64_t interval, int64_t spacing, int64_t dur, const int64_t *ev,
		    size_t nev, int64_t horizon, char *out, size_t outlen, int64_t *min_gap)
{
	struct refresh_sched sc;
	int64_t t = 0, prev = -1;
	size_t e = 0;
	int n = 0;
	refresh_sched_init(&sc, 0);
	out[0] = '\0';
	*min_gap = INT64_MAX;
	for (;;) {
		int64_t due = refresh_sched_due(&sc, spacing);
		if (e < nev && ev[e] < due && ev[e] < horizon) {
			t = ev[e] > t ? ev[e] : t;
			sc.kicked = true;
			e++;
			continue;
		}
		t = due > t ? due : t;
		if (t >= horizon)
			break;
		size_t l = strlen(out);
		snprintf(out + l, outlen - l, "%s%lld", n ? "," : "", (long long)t);
		if (prev >= 0 && t - prev < *min_gap)
			*min_gap = t - prev;
		prev = t;
		n++;
		sc.kicked = false;
		while (e < nev && ev[e] < t + dur) {
			sc.kicked = true;
			e++;
		}
		refresh_sched_ran(&sc, t, t + dur, interval);
		t += dur;
	}
	return n;
}

static const struct {
	const char *name;
	int64_t interval, spacing, dur, horizon;
	const char *events; /* "t,t,..." or "from-to/step" */
	const char *want;
} sched_cases[] = {
	{ "no events: the timer alone", 5000, 250, 10, 16000, "", "0,5000,10000,15000" },
	{ "one event: a refresh at once, the timer counts from it", 5000, 250, 10, 13000,
	  "2000", "0,2000,7000,12000" },
	{ "an event right after a refresh waits out the spacing", 5000, 250, 10, 6000, "100",
	  "0,250,5250" },
	{ "a burst is coalesced into one refresh per spacing", 5000, 250, 10, 8000,
	  "1000-1990/10", "0,1000,1250,1500,1750,2000,7000" },
	{ "events while a refresh runs ask for exactly one more", 5000, 250, 400, 6000,
	  "100,150,200", "0,400,5400" },
	{ "a longer spacing", 5000, 1000, 10, 8000, "100,200,300,1500", "0,1000,2000,7000" },
	{ "a refresh longer than the interval: never two back to back", 1000, 250, 1500, 6000,
	  "", "0,2500,5000" },
	{ "the timer fires before a spaced kick would", 300, 1000, 10, 700, "310",
	  "0,300,600" },
	{ "events far apart each get their own refresh", 60000, 250, 5, 5000,
	  "1000,2000,3000,4000", "0,1000,2000,3000,4000" },
};

static size_t parse_events(const char *s, int64_t *ev)
{
	long long a, b, step;
	size_t n = 0;
	if (sscanf(s, "%lld-%lld/%lld", &a, &b, &step) == 3) {
		for (long long t = a; t <= b && n < MAX_EV; t += step)
			ev[n++] = t;
		return n;
	}
	for (const char *p = s; *p && n < MAX_EV;) {
		ev[n++] = strtoll(p, (char **)&p, 10);
		if (*p == ',')
			p++;
	}
	return n;
}

static void test_sched(void)
{
	static int64_t ev[MAX_EV];
	char got[4096];
	int64_t gap;
	for (size_t i = 0; i < sizeof(sched_cases) / sizeof(sched_cases[0]); i++) {
		size_t n = parse_events(sched_cases[i].events, ev);
		simulate(sched_cases[i].interval, sched_cases[i].spacing, sched_cases[i].dur, ev, n,
			 sched_cases[i].horizon, got, sizeof(got), &gap);
		is_str(got, sched_cases[i].want, "sched: %s", sched_cases[i].name);
	}
	/* A storm: an event every millisecond for 10 s. */
	static const int64_t spacings[] = { 250, 100, 1000 };
	for (size_t i = 0; i < 3; i++) {
		size_t n = parse_events("1-10000/1", ev);
		int runs = simulate(5000, spacings[i], 3, ev, n, 10001, got, sizeof(got), &gap);
		ok(gap >= spacings[i], "sched: storm, spacing %lld: closest starts %lld ms apart",
		   (long long)spacings[i], (long long)gap);
		is_int(runs, 1 + 10000 / spacings[i],
		       "sched: storm, spacing %lld: one refresh per spacing, no more, no less",
		       (long long)spacings[i]);
	}
}

/* ---- backoff ---- */

static void test_backoff(void)
{
	static const int64_t want[] = { 100, 200, 400, 800, 1600, 3200, 5000, 5000 };
	int64_t b = 0;
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		b = events_backoff_next(b);
		is_int(b, want[i], "backoff: try %zu waits %lld ms", i + 1, (long long)want[i]);
	}
}

/* ---- target ---- */

static void test_target(void)
{
	struct json_buf t = { 0 };
	int r = events_target(141, "my app", 0, &t);
	is_int(r, 0, "target: built");
	is_str(t.p,
	       "/v1.41/events?filters=%7B%22type%22%3A%5B%22container%22%5D%2C%22label%22%3A%5B"
	       "%22com.docker.compose.project%3Dmy%20app%22%5D%2C%22event%22%3A%5B%22kill%22%2C"
	       "%22stop%22%2C%22start%22%2C%22die%22%2C%22destroy%22%2C%22pause%22%2C%22unpause%22%2C%22health_status%22%5D%7D",
	       "target: the project's label and the actions, URL-encoded");
	json_buf_free(&t);
	r = events_target(152, "a\"b", 0, &t);
	ok(r == 0 && strstr(t.p, "project%3Da%5C%22b%22"), "target: a quote in the project is escaped JSON");
	json_buf_free(&t);
	/* A stream opened again asks from the last event's time (issue 34). */
	r = events_target(152, "p", 1700000000000000001LL, &t);
	ok(r == 0 && strncmp(t.p, "/v1.52/events?since=1700000000.000000001&filters=%7B", 52) == 0,
	   "target: since as seconds.nanoseconds, before the filters (%s)", t.p);
	json_buf_free(&t);
}

/* ---- lines ---- */

static const struct {
	const char *name;
	const char *chunks[4];
	const char *want; /* lines joined by '|' */
} line_cases[] = {
	{ "one line per chunk", { "{\"a\":1}\n", "{\"b\":2}\n" }, "{\"a\":1}|{\"b\":2}" },
	{ "two lines in a chunk", { "x\ny\n" }, "x|y" },
	{ "a line across chunks", { "ab", "cd", "e\nf", "\n" }, "abcde|f" },
	{ "an empty line", { "\n\nz\n" }, "||z" },
	{ "an unfinished line is not a line", { "abc" }, "" },
};

static void test_lines(void)
{
	for (size_t i = 0; i < sizeof(line_cases) / sizeof(line_cases[0]); i++) {
		struct events_lines l = { 0 };
		struct errbuf err = { "" };
		char got[256] = "";
		int lines = 0;
		for (size_t k = 0; k < 4 && line_cases[i].chunks[k]; k++) {
			const char *p = line_cases[i].chunks[k];
			size_t n = strlen(p);
			while (n > 0) {
				int r = events_lines_take(&l, &p, &n, &err);
				if (r == 1) {
					size_t g = strlen(got);
					snprintf(got + g, sizeof(got) - g, "%s%s", lines++ ? "|" : "",
						 l.line);
				}
			}
		}
		is_str(got, line_cases[i].want, "lines: %s", line_cases[i].name);
		events_lines_free(&l);
	}
	/* A line over the limit is refused, not cut. */
	struct events_lines l = { 0 };
	struct errbuf err = { "" };
	char *big = malloc(EVENTS_MAX_LINE + 2);
	memset(big, 'x', EVENTS_MAX_LINE + 1);
	big[EVENTS_MAX_LINE + 1] = '\n';
	const char *p = big;
	size_t n = EVENTS_MAX_LINE / 2;
	int r = events_lines_take(&l, &p, &n, &err);
	n = EVENTS_MAX_LINE + 2 - EVENTS_MAX_LINE / 2;
	if (r == 0)
		r = events_lines_take(&l, &p, &n, &err);
	is_int(r, -E2BIG, "lines: a line longer than the limit is an error");
	free(big);
	events_lines_free(&l);
}

/* ---- one line judged ---- */

#define EV(type, action, project)                                                        \
	"{\"status\":\"x\",\"Type\":\"" type "\",\"Action\":\"" action "\",\"Actor\":{\"ID\":" \
	"\"abc\",\"Attributes\":{\"com.docker.compose.project\":\"" project "\",\"image\":"  \
	"\"i\",\"name\":\"p_web_1\"}},\"scope\":\"local\",\"time\":1,\"timeNano\":1}"

static const struct {
	const char *name, *line;
	int want;
	const char *action;
} parse_cases[] = {
	{ "a health change of the project", EV("container", "health_status: unhealthy", "p"), 1,
	  "health_status: unhealthy" },
	{ "a die of the project", EV("container", "die", "p"), 1, "die" },
	{ "another project's", EV("container", "die", "q"), 0, "" },
	{ "a project whose name extends ours", EV("container", "die", "pp"), 0, "" },
	{ "not a container", EV("network", "connect", "p"), 0, "" },
	{ "no labels at all", "{\"Type\":\"container\",\"Action\":\"die\",\"Actor\":{}}", 0, "" },
	{ "a blank line", "  \r", 0, "" },
	{ "not JSON", "die", -EPROTO, "" },
	{ "not an object", "[1]", -EPROTO, "" },
	{ "no Action", "{\"Type\":\"container\"}", -EPROTO, "" },
	{ "control bytes in the action are cleaned",
	  EV("container", "health_status: \\u001b[31m", "p"), 1, "health_status: ?[31m" },
};

static void test_parse(void)
{
	for (size_t i = 0; i < sizeof(parse_cases) / sizeof(parse_cases[0]); i++) {
		struct event ev = { "", "" };
		struct errbuf err = { "" };
		const char *l = parse_cases[i].line;
		int r = events_parse(l, strlen(l), "p", &ev, &err);
		is_int(r, parse_cases[i].want, "parse: %s", parse_cases[i].name);
		if (r == 1) {
			is_str(ev.action, parse_cases[i].action, "parse: %s: the action",
			       parse_cases[i].name);
			is_str(ev.name, "p_web_1", "parse: %s: the name", parse_cases[i].name);
		}
		if (r < 0)
			ok(err.msg[0] != '\0', "parse: %s: says why (%s)", parse_cases[i].name, err.msg);
	}
}

/* A kill as moby logs it (daemon/kill.go): the container's id, the signal in
 * decimal among the attributes, the time in ns. */
#define KILL(id, attrs, time)                                                             \
	"{\"status\":\"kill\",\"id\":\"" id "\",\"Type\":\"container\",\"Action\":\"kill\","  \
	"\"Actor\":{\"ID\":\"" id "\",\"Attributes\":{\"com.docker.compose.project\":\"p\","     \
	"\"name\":\"p_web_1\"" attrs "}},\"scope\":\"local\",\"time\":1,\"timeNano\":" time "}"
#define ID64 "c210b328f8dd5f3e8a4b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f"

static const struct {
	const char *name, *line;
	const char *id;
	int signal;
	long long time_ns;
} kill_cases[] = {
	{ "docker stop: its stop signal, SIGTERM", KILL(ID64, ",\"signal\":\"15\"",
	  "1767225600123456789"), ID64, 15, 1767225600123456789LL },
	{ "docker kill: SIGKILL", KILL("abc", ",\"signal\":\"9\"", "5"), "abc", 9, 5 },
	{ "docker kill -s HUP: read like any other", KILL("abc", ",\"signal\":\"1\"", "5"),
	  "abc", 1, 5 },
	{ "no signal attribute: unknown", KILL("abc", "", "5"), "abc", -1, 5 },
	{ "a signal that is not a number: unknown",
	  KILL("abc", ",\"signal\":\"TERM\"", "5"), "abc", -1, 5 },
	{ "a signal out of range: unknown", KILL("abc", ",\"signal\":\"1000\"", "5"), "abc",
	  -1, 5 },
	{ "signal 0: unknown", KILL("abc", ",\"signal\":\"0\"", "5"), "abc", -1, 5 },
	{ "a signal with a sign: unknown", KILL("abc", ",\"signal\":\"+9\"", "5"), "abc", -1,
	  5 },
	{ "an id that is not hex is not kept", KILL("../x", ",\"signal\":\"9\"", "5"), "", 9,
	  5 },
	{ "an id longer than Docker's is not kept",
	  KILL(ID64 "0", ",\"signal\":\"9\"", "5"), "", 9, 5 },
	{ "no timeNano: 0", KILL("abc", ",\"signal\":\"9\"", "\"x\""), "abc", 9, 0 },
	{ "a die carries no signal", EV("container", "die", "p"), "abc", 0, 1 },
};

static void test_parse_kill(void)
{
	for (size_t i = 0; i < sizeof(kill_cases) / sizeof(kill_cases[0]); i++) {
		struct event ev;
		struct errbuf err = { "" };
		const char *l = kill_cases[i].line;
		memset(&ev, 0x55, sizeof(ev));
		int r = events_parse(l, strlen(l), "p", &ev, &err);
		is_int(r, 1, "kill: %s: an event of the project", kill_cases[i].name);
		if (r != 1)
			continue;
		is_str(ev.id, kill_cases[i].id, "kill: %s: the id", kill_cases[i].name);
		is_int(ev.signal, kill_cases[i].signal, "kill: %s: the signal", kill_cases[i].name);
		ok(ev.time_ns == kill_cases[i].time_ns, "kill: %s: the time (%lld)",
		   kill_cases[i].name, (long long)ev.time_ns);
	}
}

/* ---- the parser, streaming ---- */

static const char chunked[] =
	"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
	"8\r\n{\"a\":1}\n\r\n"
	"11\r\n{\"b\":2}\n{\"c\":33}\n\r\n"
	"0\r\n\r\n";

/* Feeds s in slices of step bytes; returns the pieces joined, the status and
 * whether the head was seen before the first piece. */
static int stream_parse(const char *s, size_t len, size_t step, char *body, size_t cap,
			int *status, bool *head_first)
{
	struct http_parser p;
	struct errbuf err = { "" };
	size_t off = 0, bl = 0;
	int r = 0;
	http_parser_init_stream(&p);
	*head_first = true;
	while (off < len && r == 0) {
		size_t n = len - off < step ? len - off : step, used;
		const char *piece;
		size_t plen;
		r = http_parser_feed_piece(&p, s + off, n, &used, &piece, &plen, &err);
		if (plen && !http_parser_head_done(&p))
			*head_first = false;
		if (plen && bl + plen < cap) {
			memcpy(body + bl, piece, plen);
			bl += plen;
		}
		if (used == 0 && r == 0)
			break;
		off += used;
	}
	body[bl] = '\0';
	*status = p.resp.status;
	http_parser_free(&p);
	return r;
}

static void test_stream(void)
{
	static const size_t steps[] = { 1, 2, 7, 64, sizeof(chunked) };
	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		char body[256];
		int status;
		bool head_first;
		int r = stream_parse(chunked, sizeof(chunked) - 1, steps[i], body, sizeof(body),
				     &status, &head_first);
		is_int(r, 1, "stream: fed %zu bytes at a time: complete", steps[i]);
		is_str(body, "{\"a\":1}\n{\"b\":2}\n{\"c\":33}\n", "stream: %zu at a time: the body, "
		       "piece by piece", steps[i]);
		is_int(status, 200, "stream: %zu at a time: status", steps[i]);
		ok(head_first, "stream: %zu at a time: the head is done before any piece", steps[i]);
	}
	/* Nothing of the body is kept, so a body far beyond any collect limit
	 * streams through. */
	struct http_parser p;
	struct errbuf err = { "" };
	const char *head = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
	static char chunk[70000];
	size_t used, plen, total = 0;
	const char *piece;
	http_parser_init_stream(&p);
	int r = http_parser_feed_piece(&p, head, strlen(head), &used, &piece, &plen, &err);
	ok(r == 0 && used == strlen(head) && http_parser_head_done(&p), "stream: head alone");
	for (int k = 0; k < 100 && r == 0; k++) {
		int hl = snprintf(chunk, sizeof(chunk), "10000\r\n");
		memset(chunk + hl, 'x', 0x10000);
		memcpy(chunk + hl + 0x10000, "\r\n", 2);
		size_t len = (size_t)hl + 0x10000 + 2, off = 0;
		while (off < len && r == 0) {
			r = http_parser_feed_piece(&p, chunk + off, len - off, &used, &piece, &plen,
						   &err);
			off += used;
			total += plen;
		}
	}
	is_int(total, 100 * 0x10000, "stream: 6.4 MB of body handed out, none of it kept");
	ok(p.resp.body == NULL, "stream: no body buffer was allocated");
	http_parser_free(&p);
}

/* A stream has no body cap, so the digit bound alone keeps a chunk size from
 * wrapping: 0x10000000000000003 would otherwise frame a 3-byte chunk. */
static void test_stream_chunk_size(void)
{
	static const struct {
		const char *size;
		int want;
	} cases[] = {
		{ "10000000000000003", -E2BIG },
		{ "00000000000000003", -E2BIG },
		{ "0000000000000003", 1 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char in[256], body[64];
		int status;
		bool head_first;
		int n = snprintf(in, sizeof(in),
				 "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
				 "%s\r\nabc\r\n0\r\n\r\n", cases[i].size);
		int r = stream_parse(in, (size_t)n, (size_t)n, body, sizeof(body), &status,
				     &head_first);
		is_int(r, cases[i].want, "stream: chunk size %s", cases[i].size);
		if (cases[i].want < 0)
			is_str(body, "", "stream: chunk size %s: nothing handed out", cases[i].size);
	}
}

int main(void)
{
	test_sched();
	test_backoff();
	test_target();
	test_lines();
	test_parse();
	test_parse_kill();
	test_stream();
	test_stream_chunk_size();
	return done_testing();
}
