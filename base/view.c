/* SPDX-License-Identifier: Apache-2.0 */
#include "base/view.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

struct view *view_new(char *status, size_t status_len, char *metrics, size_t metrics_len)
{
	struct view *v = calloc(1, sizeof(*v));
	if (!v)
		return NULL;
	v->status = status;
	v->status_len = status_len;
	v->metrics = metrics;
	v->metrics_len = metrics_len;
	v->refs = 1;
	return v;
}

struct view *view_copy(const char *status, size_t status_len, const char *metrics,
		       size_t metrics_len)
{
	size_t len = sizeof(struct view) + status_len + 1 + metrics_len + 1;
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	struct view *v = p;
	char *s = (char *)(v + 1), *m = s + status_len + 1;
	memcpy(s, status ? status : "", status_len);
	s[status_len] = '\0';
	memcpy(m, metrics ? metrics : "", metrics_len);
	m[metrics_len] = '\0';
	*v = (struct view){ .status = s, .status_len = status_len, .metrics = m,
			    .metrics_len = metrics_len, .refs = 1, .mapped = len };
	return v;
}

struct view *view_ref(struct view *v)
{
	__atomic_add_fetch(&v->refs, 1, __ATOMIC_RELAXED);
	return v;
}

void view_unref(struct view *v)
{
	if (!v || __atomic_sub_fetch(&v->refs, 1, __ATOMIC_ACQ_REL) != 0)
		return;
	if (v->mapped) {
		munmap(v, v->mapped);
		return;
	}
	free(v->status);
	free(v->metrics);
	free(v);
}

void view_box_init(struct view_box *b)
{
	pthread_mutex_init(&b->lock, NULL);
	b->cur = NULL;
}

void view_box_destroy(struct view_box *b)
{
	view_unref(b->cur);
	b->cur = NULL;
	pthread_mutex_destroy(&b->lock);
}

void view_box_publish(struct view_box *b, struct view *v)
{
	pthread_mutex_lock(&b->lock);
	struct view *old = b->cur;
	b->cur = v;
	pthread_mutex_unlock(&b->lock);
	view_unref(old);
}

struct view *view_box_acquire(struct view_box *b)
{
	pthread_mutex_lock(&b->lock);
	struct view *v = b->cur ? view_ref(b->cur) : NULL;
	pthread_mutex_unlock(&b->lock);
	return v;
}

void view_time(char *buf, size_t n, int64_t ms)
{
	struct tm tm;
	time_t s = (time_t)(ms / 1000);
	if (ms <= 0 || !gmtime_r(&s, &tm)) {
		if (n)
			buf[0] = '\0';
		return;
	}
	snprintf(buf, n, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
		 tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(ms % 1000));
}

int view_json_time(struct json_buf *b, int64_t ms)
{
	char t[40];
	if (ms <= 0)
		return json_buf_puts(b, "null");
	view_time(t, sizeof(t), ms);
	return json_buf_string(b, t);
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

int64_t view_percentile(const int64_t *v, size_t n, unsigned pct)
{
	int64_t s[1024];
	if (n == 0)
		return 0;
	if (n > 1024)
		n = 1024;
	memcpy(s, v, n * sizeof(*v));
	qsort(s, n, sizeof(*s), cmp_i64);
	/* Nearest rank: the smallest value with at least pct% at or below. */
	size_t rank = (pct * n + 99) / 100;
	if (rank == 0)
		rank = 1;
	return s[(rank > n ? n : rank) - 1];
}

/* Where to cut s[0..len) at most max bytes in, not inside a UTF-8
 * sequence. */
static size_t cut_at(const char *s, size_t len, size_t max)
{
	if (len <= max)
		return len;
	size_t i = max;
	while (i > 0 && ((unsigned char)s[i] & 0xC0) == 0x80)
		i--;
	return i;
}

int view_escape_output(struct json_buf *out, const char *s, size_t len)
{
	size_t end = cut_at(s, len, VIEW_OUTPUT_MAX), from = 0;
	int r = 0;
	for (size_t i = 0; r == 0 && i < end; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c >= 0x20 && c != 0x7f)
			continue;
		char esc[8];
		if (c == '\n' || c == '\t' || c == '\r')
			snprintf(esc, sizeof(esc), "\\%c", c == '\n' ? 'n' : c == '\t' ? 't' : 'r');
		else
			snprintf(esc, sizeof(esc), "\\x%02x", c);
		if ((r = json_buf_put(out, s + from, i - from)) == 0)
			r = json_buf_puts(out, esc);
		from = i + 1;
	}
	if (r == 0)
		r = json_buf_put(out, s + from, end - from);
	if (r == 0 && end < len)
		r = json_buf_puts(out, "...[cut]");
	return r;
}

int view_printf(struct json_buf *b, const char *fmt, ...)
{
	char tmp[512];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n < 0)
		return -EINVAL;
	if ((size_t)n < sizeof(tmp))
		return json_buf_put(b, tmp, (size_t)n);
	char *big = malloc((size_t)n + 1);
	if (!big)
		return -ENOMEM;
	va_start(ap, fmt);
	vsnprintf(big, (size_t)n + 1, fmt, ap);
	va_end(ap);
	int r = json_buf_put(b, big, (size_t)n);
	free(big);
	return r;
}

int view_prom_label(struct json_buf *b, const char *v)
{
	int r = 0;
	for (const char *p = v; *p && r == 0; p++) {
		if (*p == '\\')
			r = json_buf_puts(b, "\\\\");
		else if (*p == '"')
			r = json_buf_puts(b, "\\\"");
		else if (*p == '\n')
			r = json_buf_puts(b, "\\n");
		else
			r = json_buf_put(b, p, 1);
	}
	return r;
}

int view_prom_family(struct json_buf *b, const char *name, const char *type, const char *help)
{
	return view_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

int view_prom_sample(struct json_buf *b, const char *name, const char *labels, double value)
{
	if (labels && *labels)
		return view_printf(b, "%s{%s} %.17g\n", name, labels, value);
	return view_printf(b, "%s %.17g\n", name, value);
}

int view_prom_histogram(struct json_buf *b, const char *name, const char *help,
			const double *bounds, const uint64_t *counts, size_t n, double sum)
{
	int r = view_prom_family(b, name, "histogram", help);
	uint64_t cum = 0;
	for (size_t i = 0; r == 0 && i < n; i++) {
		cum += counts[i];
		r = view_printf(b, "%s_bucket{le=\"%g\"} %llu\n", name, bounds[i],
				(unsigned long long)cum);
	}
	cum += counts[n];
	if (r == 0)
		r = view_printf(b, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.17g\n%s_count %llu\n", name,
				(unsigned long long)cum, name, sum, name, (unsigned long long)cum);
	return r;
}

int view_put_str(struct json_buf *b, const char *key, const char *val)
{
	int r = view_printf(b, "\"%s\":", key);
	return r ? r : val ? json_buf_string(b, val) : json_buf_puts(b, "null");
}

int view_put_time(struct json_buf *b, const char *key, int64_t ms)
{
	int r = view_printf(b, "\"%s\":", key);
	return r ? r : view_json_time(b, ms);
}
