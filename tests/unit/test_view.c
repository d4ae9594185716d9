/* SPDX-License-Identifier: Apache-2.0 */
/* Table tests for the pure parts of the operator's view: the pollers table
 * (bounded, least recently seen dropped first), the percentile, probe output
 * escaping, the Prometheus text encoders, what the inspect parser and the
 * status file peek keep for the view, and the cause a failed refresh is
 * counted under. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "agent/opview.h"
#include "base/pollers.h"
#include "base/view.h"
#include "runtime/inspect.h"
#include "statusfile/statusfile.h"
#include "tests/lib/tap.h"

static struct poller_addr v4(unsigned n)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000000u + n) };
	struct poller_addr a;
	poller_addr_from((struct sockaddr *)&sa, &a);
	return a;
}

static const struct poller *find(const struct pollers_table *t, unsigned n)
{
	struct poller_addr a = v4(n);
	for (size_t i = 0; i < t->n; i++)
		if (!memcmp(&t->v[i].addr, &a, sizeof(a)))
			return &t->v[i];
	return NULL;
}

static void test_pollers(void)
{
	static struct pollers_table t;
	memset(&t, 0, sizeof(t));
	struct poller_addr a = v4(1);
	pollers_table_note(&t, &a, true, false, 1000);
	pollers_table_note(&t, &a, false, false, 2000);
	const struct poller *p = find(&t, 1);
	ok(p && p->count == 2 && p->first_seen_ms == 1000 && p->last_seen_ms == 2000 &&
		   !p->last_healthy && p->last_seq == 2,
	   "one address twice: one entry, count 2, first and last seen, last told, seq");
	char s[64];
	poller_addr_str(&a, s, sizeof(s));
	is_str(s, "127.0.0.1", "the address as text, without the port");

	/* 1000 distinct addresses: the table stays at its bound, and the
	 * gateway (address 1), seen again and again, is never dropped. */
	for (unsigned i = 2; i < 1002; i++) {
		struct poller_addr b = v4(i);
		pollers_table_note(&t, &b, true, false, 3000 + i);
		pollers_table_note(&t, &a, true, false, 3000 + i);
	}
	is_int(t.n, POLLERS_MAX, "1000 addresses: at most %d kept", POLLERS_MAX);
	ok(find(&t, 1) && find(&t, 1)->count == 1002, "the steady poller is kept, count 1002");
	ok(!find(&t, 2) && !find(&t, 746) && find(&t, 747) && find(&t, 1001),
	   "the least recently seen went first: 2..746 dropped, 747..1001 kept");
	is_int(pollers_table_recent(&t, 3000 + 1001), 2, "recent: seen at or after a time");

	memset(&t, 0, sizeof(t));
	unsigned codes[] = { 200, 200, 405, 400, 413, 404, 500 };
	for (size_t i = 0; i < sizeof(codes) / sizeof(*codes); i++)
		pollers_table_count(&t, codes[i]);
	ok(t.requests[0] == 2 && t.requests[1] == 1 && t.requests[2] == 1 && t.requests[3] == 1 &&
		   t.requests[4] == 1 && t.requests[5] == 1,
	   "requests by code: 200 twice, 400, 404, 405, 413 once, 500 as other");
}

static void test_percentile(void)
{
	int64_t v[100];
	for (int i = 0; i < 100; i++)
		v[i] = 100 - i; /* 100..1, unsorted */
	static const struct {
		size_t n;
		unsigned pct;
		int64_t want;
	} cases[] = {
		{ 0, 50, 0 }, { 1, 50, 100 }, { 1, 99, 100 }, { 100, 50, 50 },
		{ 100, 99, 99 }, { 100, 100, 100 }, { 2, 50, 99 }, { 10, 99, 100 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++)
		is_int(view_percentile(v, cases[i].n, cases[i].pct), cases[i].want,
		       "p%u of the first %zu", cases[i].pct, cases[i].n);
	ok(v[0] == 100 && v[99] == 1, "the samples are left as they were");
}

static void test_escape(void)
{
	static const struct {
		const char *in, *want;
	} cases[] = {
		{ "", "" },
		{ "plain text", "plain text" },
		{ "line 1\nline 2\r\n", "line 1\\nline 2\\r\\n" },
		{ "tab\there", "tab\\there" },
		{ "\x1b[31mred\x1b[0m", "\\x1b[31mred\\x1b[0m" },
		{ "del\x7f bell\a", "del\\x7f bell\\x07" },
		{ "caf\xc3\xa9", "caf\xc3\xa9" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		struct json_buf b = { 0 };
		view_escape_output(&b, cases[i].in, strlen(cases[i].in));
		is_str(b.p ? b.p : "", cases[i].want, "escape case %zu", i);
		json_buf_free(&b);
	}
	char *big = malloc(10000);
	struct json_buf b = { 0 };
	memset(big, 'a', 10000);
	view_escape_output(&b, big, 10000);
	ok(b.len == VIEW_OUTPUT_MAX + 8 && !strcmp(b.p + VIEW_OUTPUT_MAX, "...[cut]"),
	   "10000 bytes: cut at %d, marked", VIEW_OUTPUT_MAX);
	json_buf_free(&b);
	/* A 2-byte sequence straddling the cut is not split. */
	memset(big, 'a', VIEW_OUTPUT_MAX - 1);
	memcpy(big + VIEW_OUTPUT_MAX - 1, "\xc3\xa9zz", 4);
	view_escape_output(&b, big, VIEW_OUTPUT_MAX + 3);
	ok(b.len == VIEW_OUTPUT_MAX - 1 + 8 && b.p[VIEW_OUTPUT_MAX - 1] == '.',
	   "a UTF-8 sequence across the cut is dropped whole");
	json_buf_free(&b);
	memset(big, '\n', 10000);
	view_escape_output(&b, big, 10000);
	is_int(b.len, 2 * VIEW_OUTPUT_MAX + 8, "4096 newlines: each two characters, cut at 4096 bytes in");
	json_buf_free(&b);
	free(big);
}

static void test_prom(void)
{
	struct json_buf b = { 0 };
	view_prom_label(&b, "a\\b\"c\nd");
	is_str(b.p, "a\\\\b\\\"c\\nd", "label value: backslash, quote and newline escaped");
	json_buf_free(&b);

	double bounds[] = { 0.01, 0.1, 1 };
	uint64_t counts[] = { 3, 0, 2, 1 };
	view_prom_histogram(&b, "x_seconds", "help text", bounds, counts, 3, 1.5);
	is_str(b.p,
	       "# HELP x_seconds help text\n# TYPE x_seconds histogram\n"
	       "x_seconds_bucket{le=\"0.01\"} 3\nx_seconds_bucket{le=\"0.1\"} 3\n"
	       "x_seconds_bucket{le=\"1\"} 5\nx_seconds_bucket{le=\"+Inf\"} 6\n"
	       "x_seconds_sum 1.5\nx_seconds_count 6\n",
	       "histogram: cumulative buckets, +Inf, sum, count");
	json_buf_free(&b);
	view_prom_sample(&b, "g", NULL, 1);
	view_prom_sample(&b, "c", "code=\"200\"", 12345678901.0);
	is_str(b.p, "g 1\nc{code=\"200\"} 12345678901\n", "samples with and without labels");
	json_buf_free(&b);

	char t[40];
	view_time(t, sizeof(t), 1796082941495);
	is_str(t, "2026-11-30T23:55:41.495Z", "RFC 3339 UTC with milliseconds");
}

static void test_inspect_probe(void)
{
	static const char doc[] =
		"[{\"Id\":\"0123456789012345678901234567890123456789012345678901234567890123\","
		"\"Name\":\"/p-web-1\",\"State\":{\"Status\":\"running\",\"Running\":true,"
		"\"Health\":{\"Status\":\"unhealthy\",\"FailingStreak\":7,\"Log\":["
		"{\"Start\":\"2026-11-30T10:00:00Z\",\"End\":\"2026-11-30T10:00:02Z\",\"ExitCode\":1,\"Output\":\"older\"},"
		"{\"Start\":\"2026-11-30T10:00:05Z\",\"End\":\"2026-11-30T10:00:06Z\",\"ExitCode\":3,\"Output\":\"MARKER\\nsecond\"}"
		"]}},\"Config\":{\"Labels\":{\"com.docker.compose.service\":\"web\"}}}]";
	struct container_list l = { 0 };
	struct errbuf err = { "" };
	int r = inspect_parse_array(doc, sizeof(doc) - 1, &l, &err);
	ok(r == 0 && l.n == 1, "inspect: parsed (%s)", err.msg);
	if (l.n == 1) {
		const struct container *c = &l.v[0];
		ok(c->has_probe && c->probe_exit_code == 3, "the newest log entry's exit code");
		is_str(c->probe_output, "MARKER\nsecond", "the newest log entry's output");
		is_int(c->failing_streak, 7, "FailingStreak");
		is_str(c->service, "web", "the Compose service label");
	}
	container_list_free(&l);
}

static void test_statusfile_peek(void)
{
	static const struct {
		const char *in, *word;
		bool has;
		int64_t written;
	} cases[] = {
		{ "healthy\n1700000000\n", "healthy", true, 1700000000 },
		{ "UNHEALTHY\n1700000000", "unhealthy", true, 1700000000 },
		{ "maybe\nsoon\n", "", false, 0 },
		{ "", "", false, 0 },
		/* The failclosed rules: '+' and padding as the judge reads them, a
		 * future time shown as written, bytes that are not UTF-8 not parsed,
		 * a time too large to print not shown. */
		{ " healthy \r\n+1700000000 \r\n", "healthy", true, 1700000000 },
		{ "healthy\n99999999999\n", "healthy", true, 99999999999 },
		{ "healthy\n1700000000\n\xff", "", false, 0 },
		{ "healthy\n18446744073709551615\n", "healthy", false, 0 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		struct statusfile_info in = { 0 };
		statusfile_peek(cases[i].in, strlen(cases[i].in), &in);
		ok(!strcmp(in.word, cases[i].word) && in.has_written == cases[i].has &&
			   (!in.has_written || in.written == cases[i].written),
		   "status file peek case %zu: word '%s', time %s", i, in.word,
		   in.has_written ? "parsed" : "not parsed");
	}
}

/* dstack_healthd_refresh_failures_total{cause}: "runtime" only where a
 * runtime was asked (the alert DstackHealthdRuntimeUnreachable reads it). */
static void test_failure_cause(void)
{
	static const struct {
		enum source_kind k;
		enum err_kind e;
		const char *cause;
	} cases[] = {
		{ SOURCE_DOCKER, ERR_KIND_RUNTIME_UNREACHABLE, "runtime" },
		{ SOURCE_DOCKER, ERR_KIND_RUNTIME_STATUS, "runtime" },
		{ SOURCE_DOCKER, ERR_KIND_RUNTIME_ANSWER, "runtime" },
		{ SOURCE_DOCKER, ERR_KIND_RUNTIME_TIMEOUT, "runtime" },
		{ SOURCE_DOCKER, ERR_KIND_RUNTIME_TOO_OLD, "runtime" },
		{ SOURCE_DOCKER, ERR_KIND_NONE, "runtime" },
		{ SOURCE_NERDCTL, ERR_KIND_RUNTIME_UNREACHABLE, "runtime" },
		{ SOURCE_NERDCTL, ERR_KIND_RUNTIME_FILE_UNREADABLE, "runtime_file" },
		{ SOURCE_DOCKER, ERR_KIND_RUNTIME_FILE_INVALID, "runtime_file" },
		{ SOURCE_DOCKER, ERR_KIND_NOMEM, "memory" },
		{ SOURCE_STATUS_FILE, ERR_KIND_NOMEM, "memory" },
		/* A status file's refresh that overran asked no runtime. */
		{ SOURCE_STATUS_FILE, ERR_KIND_REFRESH_TIMEOUT, "other" },
		{ SOURCE_STATUS_FILE, ERR_KIND_RUNTIME_TIMEOUT, "other" },
		{ SOURCE_STATUS_FILE, ERR_KIND_NONE, "other" },
		{ SOURCE_NONE, ERR_KIND_COMPOSE, "other" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		is_str(opview_cause_name(opview_failure_cause(cases[i].k, cases[i].e)), cases[i].cause,
		       "failure cause case %zu: source %d, kind %d", i, cases[i].k, cases[i].e);
}

int main(void)
{
	test_pollers();
	test_percentile();
	test_escape();
	test_prom();
	test_inspect_probe();
	test_statusfile_peek();
	test_failure_cause();
	return done_testing();
}
