/* SPDX-License-Identifier: Apache-2.0 */
/* The operator's view (issue 11): what the refresh thread publishes for the
 * local control socket beside the verdict snapshot, and the pure helpers
 * that format it. A view is immutable once published; readers take a
 * reference under a lock held only for that, as with the verdict cache. */
#ifndef HEALTHD_VIEW_H
#define HEALTHD_VIEW_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/json.h"

/* Probe output is cut at this many bytes before escaping. */
#define VIEW_OUTPUT_MAX 4096

struct view {
	/* JSON object members without the braces ("\"source\":{...},..."):
	 * the body of /status but for the verdict and the pollers, which the
	 * server adds as it answers. */
	char *status;
	size_t status_len;
	/* Prometheus text lines for every family the refresh thread owns. */
	char *metrics;
	size_t metrics_len;
	unsigned refs; /* atomic */
	size_t mapped; /* view_copy: the length of the mapping holding it all */
};

/* Takes ownership of both buffers (malloc'd; NULL is empty). NULL on ENOMEM,
 * the buffers then still the caller's. */
struct view *view_new(char *status, size_t status_len, char *metrics, size_t metrics_len);
/* A view holding copies of both texts in one private mapping of its own,
 * outside malloc's heaps: a view lives from one refresh to the next, and
 * among the refresh's short-lived allocations it would pin the heap's top
 * (the refresh thread's arena grew by some 50 KiB that way). NULL on
 * ENOMEM. */
struct view *view_copy(const char *status, size_t status_len, const char *metrics,
		       size_t metrics_len);
struct view *view_ref(struct view *v);
void view_unref(struct view *v);

struct view_box {
	pthread_mutex_t lock;
	struct view *cur; /* NULL until the first publish */
};
void view_box_init(struct view_box *b);
void view_box_destroy(struct view_box *b);
/* Takes the caller's reference. */
void view_box_publish(struct view_box *b, struct view *v);
/* A new reference, or NULL before the first publish. */
struct view *view_box_acquire(struct view_box *b);

/* RFC 3339 UTC with milliseconds ("2026-11-30T23:51:06.123Z") for a
 * CLOCK_REALTIME time in ms; "" for 0. */
void view_time(char *buf, size_t n, int64_t realtime_ms);
/* Appends view_time(t) as a JSON string, or null for 0. -ENOMEM. */
int view_json_time(struct json_buf *b, int64_t realtime_ms);

/* Pure: the pct-th percentile (nearest rank) of v[0..n), n <= 1024; 0 when
 * n is 0. v is not changed. */
int64_t view_percentile(const int64_t *v, size_t n, unsigned pct);

/* Pure: appends s[0..len) to out cut at VIEW_OUTPUT_MAX bytes (never inside
 * a UTF-8 sequence) with control characters escaped (\n, \t, \r, others
 * \xNN). A cut is marked with "...[cut]". -ENOMEM. */
int view_escape_output(struct json_buf *out, const char *s, size_t len);

/* Prometheus text format 0.0.4. A label value with \, " and newline
 * escaped. -ENOMEM. */
int view_prom_label(struct json_buf *b, const char *value);
/* "# HELP name help\n# TYPE name type\n". -ENOMEM. */
int view_prom_family(struct json_buf *b, const char *name, const char *type, const char *help);
/* One sample line: name{labels} value; labels is the already formatted
 * inside of the braces or NULL. -ENOMEM. */
int view_prom_sample(struct json_buf *b, const char *name, const char *labels, double value);
/* A histogram over cumulative le buckets: bounds[0..n) and counts[0..n]
 * (counts[n] is +Inf: all), per bucket (not cumulative). -ENOMEM. */
int view_prom_histogram(struct json_buf *b, const char *name, const char *help,
			const double *bounds, const uint64_t *counts, size_t n, double sum);

/* Appends formatted text. -ENOMEM. */
int view_printf(struct json_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* "KEY":"VAL" (null when val is NULL) and "KEY":TIME (view_json_time). */
int view_put_str(struct json_buf *b, const char *key, const char *val);
int view_put_time(struct json_buf *b, const char *key, int64_t ms);

#endif
