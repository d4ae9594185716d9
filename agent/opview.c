/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/opview.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "base/version.h"
#include "probe/probe_view.h"

static const char *const trigger_names[N_HISTORY_TRIGGERS] = { "timer", "event", "reload",
								 "start", "drain", "resume" };
/* Seconds; a refresh normally takes a few ms, its limit is 10 s. */
static const double bucket_bounds[OPVIEW_BUCKETS] = { 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
						       0.5,   1,    2.5,   5,    10 };


void opview_init(struct opview *v)
{
	/* Zeroed storage already (see opview.h): clearing it again would
	 * touch every page of the tables for nothing. */
	view_box_init(&v->box);
	view_box_init(&v->config);
	pollers_init(&v->pollers);
	pthread_mutex_init(&v->drain_lock, NULL);
	v->first_trigger = TRIGGER_START;
}

void opview_destroy(struct opview *v)
{
	view_box_destroy(&v->box);
	view_box_destroy(&v->config);
	pollers_destroy(&v->pollers);
	pthread_mutex_destroy(&v->drain_lock);
	verdict_free(&v->last);
	free(v->since);
	v->since = NULL;
}

/* Against what the view last recorded, not the refresher's own memory:
 * a reload starts a refresher afresh, and the verdict served across it may
 * well be the same. A drain's entries are not the app's: they are not
 * compared. A change is one of state or cause, as in the journal: a stale
 * status file's age moving is not one. */
static bool changed(const struct opview *v, const struct verdict *now)
{
	return !v->have_last || !verdict_same_cause(&v->last, now);
}

static struct opview_change *history_push(struct opview *v)
{
	struct opview_change *c = &v->history[v->history_next];
	v->history_next = (v->history_next + 1) % OPVIEW_HISTORY;
	if (v->history_n < OPVIEW_HISTORY)
		v->history_n++;
	return c;
}

void opview_note_drain(struct opview *v, bool draining, int64_t at_ms, const struct verdict *served)
{
	pthread_mutex_lock(&v->drain_lock);
	if (v->drain_pending_n < OPVIEW_DRAIN_PENDING) {
		struct opview_change *c = &v->drain_pending[v->drain_pending_n++];
		c->time_ms = at_ms;
		c->healthy = served->healthy;
		c->trigger = draining ? TRIGGER_DRAIN : TRIGGER_RESUME;
		verdict_summary(served, c->summary, sizeof(c->summary));
	}
	pthread_mutex_unlock(&v->drain_lock);
}

static void take_drains(struct opview *v)
{
	pthread_mutex_lock(&v->drain_lock);
	for (unsigned i = 0; i < v->drain_pending_n; i++)
		*history_push(v) = v->drain_pending[i];
	v->drain_pending_n = 0;
	pthread_mutex_unlock(&v->drain_lock);
}

enum opview_cause opview_failure_cause(enum source_kind k, enum err_kind e)
{
	if (e == ERR_KIND_NOMEM)
		return CAUSE_MEMORY;
	if (e == ERR_KIND_RUNTIME_FILE_UNREADABLE || e == ERR_KIND_RUNTIME_FILE_INVALID)
		return CAUSE_RUNTIME_FILE;
	/* Whatever else failed while the runtime was asked is the runtime's;
	 * a status file's refresh that overran its timeout is not, whatever
	 * its tag says. */
	return k == SOURCE_DOCKER || k == SOURCE_NERDCTL ? CAUSE_RUNTIME : CAUSE_OTHER;
}

const char *opview_cause_name(enum opview_cause c)
{
	static const char *const names[N_CAUSES] = {
		[CAUSE_RUNTIME] = "runtime", [CAUSE_RUNTIME_FILE] = "runtime_file",
		[CAUSE_MEMORY] = "memory", [CAUSE_OTHER] = "other",
	};
	return (unsigned)c < N_CAUSES ? names[c] : "other";
}

static void record(struct opview *v, const struct opview_refresh *r)
{
	take_drains(v);
	int64_t d = r->duration_us;
	v->refreshes[r->trigger]++;
	v->last_start_ms = r->start_ms;
	v->last_end_ms = r->end_ms;
	v->last_duration_us = d;
	v->durations[v->durations_next] = d;
	v->durations_next = (v->durations_next + 1) % OPVIEW_DURATIONS;
	if (v->durations_n < OPVIEW_DURATIONS)
		v->durations_n++;
	size_t b = 0;
	while (b < OPVIEW_BUCKETS && (double)d / 1e6 > bucket_bounds[b])
		b++;
	v->buckets[b]++;
	v->duration_sum += (double)d / 1e6;
	if (r->result < 0) {
		v->failures[opview_failure_cause(r->manifest_error ? SOURCE_NONE : source_kind(r->app),
						 r->error_kind)]++;
		v->last_failure_ms = r->end_ms;
		snprintf(v->last_failure, sizeof(v->last_failure), "%s", r->error ? r->error : "");
	}
	if (changed(v, r->published)) {
		verdict_free(&v->last);
		/* Out of memory: the next refresh counts as a change again. */
		v->have_last = verdict_copy(&v->last, r->published) == 0;
		struct opview_change *c = history_push(v);
		v->changes_total++;
		c->time_ms = r->end_ms;
		c->healthy = r->published->healthy;
		c->trigger = (uint8_t)r->trigger;
		verdict_summary(r->published, c->summary, sizeof(c->summary));
	}
}

/* The status a container is served with: its verdict entry, else healthy
 * when judged, else why it is skipped. */
static const char *served_status(const struct verdict *v, const struct container *c,
				 const char *skipped)
{
	if (skipped)
		return "not judged";
	for (size_t i = 0; i < v->n_entries; i++)
		if (c->name && strcmp(v->entries[i].name, c->name) == 0)
			return v->entries[i].status;
	return "healthy";
}

static const char *since_str(const struct opview_since *t, size_t n, uint32_t off)
{
	return (const char *)(t + n) + off;
}

/* The table for this refresh, every entry since now (since_carry finds
 * the older ones): exactly sized, one allocation. NULL on ENOMEM. */
static struct opview_since *since_new(const struct opview_refresh *r)
{
	const struct container_list *l = &r->detail->containers;
	size_t bytes = 0;
	for (size_t i = 0; i < l->n; i++) {
		const struct container *c = &l->v[i];
		bytes += strlen(c->name ? c->name : "") + 1 +
			 strlen(served_status(r->published, c, container_skip_reason(c))) + 1;
	}
	if (bytes > UINT32_MAX)
		return NULL;
	struct opview_since *t = malloc(l->n * sizeof(*t) + bytes + 1);
	if (!t)
		return NULL;
	char *s = (char *)(t + l->n);
	size_t off = 0;
	for (size_t i = 0; i < l->n; i++) {
		const struct container *c = &l->v[i];
		const char *name = c->name ? c->name : "";
		const char *status = served_status(r->published, c, container_skip_reason(c));
		size_t nl = strlen(name) + 1, sl = strlen(status) + 1;
		t[i] = (struct opview_since){ .since_ms = r->end_ms, .name = (uint32_t)off,
					      .status = (uint32_t)(off + nl) };
		memcpy(s + off, name, nl);
		memcpy(s + off + nl, status, sl);
		off += nl + sl;
	}
	return t;
}

/* When the container at t[i] entered the status it has now, as far as
 * the previous table saw. */
static void since_carry(const struct opview *v, struct opview_since *t, size_t n, size_t i)
{
	const char *name = since_str(t, n, t[i].name), *status = since_str(t, n, t[i].status);
	for (size_t k = 0; k < v->n_since; k++)
		if (strcmp(since_str(v->since, v->n_since, v->since[k].name), name) == 0 &&
		    strcmp(since_str(v->since, v->n_since, v->since[k].status), status) == 0)
			t[i].since_ms = v->since[k].since_ms;
}

static int container_json(struct json_buf *b, const struct container *c, const char *status,
			  const char *skipped, int64_t since)
{
	int r = json_buf_puts(b, "{");
	if (!r) r = view_put_str(b, "name", c->name);
	if (!r) r = json_buf_puts(b, ",");
	if (!r) r = view_put_str(b, "service", c->service);
	if (!r) r = json_buf_puts(b, ",");
	if (!r) r = view_put_str(b, "state", c->state);
	if (!r) r = json_buf_puts(b, ",");
	if (!r) r = view_put_str(b, "health", c->health && *c->health ? c->health : NULL);
	if (!r) r = view_printf(b, ",\"judged\":%s,", skipped ? "false" : "true");
	if (!r) r = view_put_str(b, "skipped", skipped);
	if (!r) r = json_buf_puts(b, ",");
	if (!r) r = view_put_str(b, "status", status);
	if (!r) r = view_printf(b, ",\"failing_streak\":%lld,", (long long)c->failing_streak);
	if (!r) r = view_put_time(b, "since", since);
	if (!r) r = json_buf_puts(b, ",\"agent_probe\":");
	if (!r) r = probe_view_json(b, c->probe_labels.probe, c->probe);
	if (!r) r = json_buf_puts(b, ",\"last_probe\":");
	if (!r && !c->has_probe)
		r = json_buf_puts(b, "null");
	else if (!r) {
		struct json_buf esc = { 0 };
		const char *o = c->probe_output ? c->probe_output : "";
		r = view_escape_output(&esc, o, strlen(o));
		if (!r) r = view_printf(b, "{\"exit_code\":%lld,", (long long)c->probe_exit_code);
		if (!r) r = view_put_time(b, "end", c->health_log_end_ns / 1000000);
		if (!r) r = json_buf_puts(b, ",");
		if (!r) r = view_put_str(b, "output", esc.p ? esc.p : "");
		if (!r) r = json_buf_puts(b, "}");
		json_buf_free(&esc);
	}
	return r ? r : json_buf_puts(b, "}");
}

static int containers_json(struct opview *v, struct json_buf *b, const struct opview_refresh *r)
{
	const struct container_list *l = &r->detail->containers;
	struct opview_since *next = since_new(r);
	if (!next)
		return -1;
	int e = json_buf_puts(b, "[");
	for (size_t i = 0; !e && i < l->n; i++) {
		const struct container *c = &l->v[i];
		since_carry(v, next, l->n, i);
		if (i)
			e = json_buf_puts(b, ",");
		if (!e)
			e = container_json(b, c, since_str(next, l->n, next[i].status),
					   container_skip_reason(c), next[i].since_ms);
	}
	if (e) {
		free(next);
		return e;
	}
	free(v->since);
	v->since = next;
	v->n_since = l->n;
	return json_buf_puts(b, "]");
}

static const char *source_name(const struct opview_refresh *r)
{
	static const char *const names[] = {
		[SOURCE_NONE] = "none", [SOURCE_STATUS_FILE] = "status_file",
		[SOURCE_DOCKER] = "docker", [SOURCE_NERDCTL] = "nerdctl",
	};
	return r->manifest_error ? "unusable" : names[source_kind(r->app)];
}

static int source_json(struct json_buf *b, const struct opview_refresh *r)
{
	const struct app_compose *app = r->app;
	const struct source_detail *d = r->detail;
	int e;
	if (r->manifest_error) {
		e = json_buf_puts(b, "{\"kind\":\"unusable\",");
		if (!e) e = view_put_str(b, "why", r->manifest_error);
		return e ? e : json_buf_puts(b, "}");
	}
	enum source_kind k = source_kind(app);
	if (k == SOURCE_NONE)
		return json_buf_puts(b, "{\"kind\":\"none\",\"why\":\"health_check is off\"}");
	if (k == SOURCE_STATUS_FILE) {
		e = json_buf_puts(b, "{\"kind\":\"status_file\",");
		if (!e) e = view_put_str(b, "path", app->health_status_file);
		return e ? e : json_buf_puts(b, "}");
	}
	bool nerd = k == SOURCE_NERDCTL;
	e = view_printf(b, "{\"kind\":\"%s\",", source_name(r));
	if (!e && nerd) {
		e = view_put_str(b, "nerdctl", r->cfg->nerdctl);
		if (!e) e = json_buf_puts(b, ",");
		if (!e) e = view_put_str(b, "namespace", d->nerdctl_namespace[0] ? d->nerdctl_namespace : NULL);
	} else if (!e) {
		int av = d->containers.api_version;
		e = view_put_str(b, "host", r->cfg->docker_host);
		if (!e && av)
			e = view_printf(b, ",\"api_version\":\"%d.%d\"", av / 100, av % 100);
		else if (!e)
			e = json_buf_puts(b, ",\"api_version\":null");
	}
	if (!e) e = json_buf_puts(b, ",");
	if (!e) e = view_put_str(b, "project", d->project[0] ? d->project : NULL);
	return e ? e : json_buf_puts(b, "}");
}

static int statusfile_json(struct json_buf *b, const struct opview_refresh *r)
{
	const struct statusfile_info *s = &r->detail->statusfile;
	if (!r->detail->have_statusfile)
		return json_buf_puts(b, "null");
	if (!s->read)
		return json_buf_puts(b, "{\"read\":false}");
	int e = view_printf(b, "{\"read\":true,\"age_s\":%lld,", (long long)(r->end_ms / 1000 - s->mtime));
	if (!e) e = view_put_time(b, "modified", s->mtime * 1000);
	if (!e) e = json_buf_puts(b, ",");
	if (!e) e = view_put_str(b, "state", s->word[0] ? s->word : NULL);
	if (!e) e = json_buf_puts(b, ",");
	if (!e) e = view_put_time(b, "timestamp", s->has_written ? s->written * 1000 : 0);
	if (!e) e = json_buf_puts(b, ",");
	if (!e) e = view_put_time(b, "app_start", s->start * 1000);
	if (!e) e = json_buf_puts(b, ",");
	if (!e) e = view_put_str(b, "app_start_from", s->start_from[0] ? s->start_from : NULL);
	return e ? e : json_buf_puts(b, "}");
}

static int refresh_json(struct opview *v, struct json_buf *b, const struct opview_refresh *r)
{
	struct watch_stats ws;
	watch_stats_get(r->watcher, &ws);
	int64_t interval = r->cfg->interval_ms, due = r->start_ms + interval;
	if (due < r->end_ms)
		due = r->end_ms + interval;
	int e = json_buf_puts(b, "{");
	if (!e) e = view_put_time(b, "last_start", v->last_start_ms);
	if (!e) e = json_buf_puts(b, ",");
	if (!e) e = view_put_time(b, "last_end", v->last_end_ms);
	if (!e) e = view_printf(b, ",\"last_duration_ms\":%.3f,\"p50_ms\":%.3f,\"p99_ms\":%.3f,"
				"\"failures_in_row\":%u,\"last_failure\":",
				(double)v->last_duration_us / 1000,
				(double)view_percentile(v->durations, v->durations_n, 50) / 1000,
				(double)view_percentile(v->durations, v->durations_n, 99) / 1000,
				r->failures_in_row);
	if (!e && v->last_failure_ms) {
		e = json_buf_puts(b, "{");
		if (!e) e = view_put_time(b, "time", v->last_failure_ms);
		if (!e) e = json_buf_puts(b, ",");
		if (!e) e = view_put_str(b, "error", v->last_failure);
		if (!e) e = json_buf_puts(b, "}");
	} else if (!e) {
		e = json_buf_puts(b, "null");
	}
	if (!e) e = json_buf_puts(b, ",");
	if (!e) e = view_put_time(b, "next_due", due);
	if (!e) e = json_buf_puts(b, ",\"events\":");
	if (!e && !r->watcher) {
		e = json_buf_puts(b, "null");
	} else if (!e) {
		e = view_printf(b, "{\"connected\":%s,", ws.connected ? "true" : "false");
		if (!e) e = view_put_time(b, "connected_since", ws.connected ? ws.connected_since_ms : 0);
		if (!e) e = view_printf(b, ",\"reconnects\":%llu,", (unsigned long long)ws.reconnects);
		if (!e) e = view_put_time(b, "last_event_time", ws.last_event_ms);
		if (!e) e = json_buf_puts(b, ",");
		if (!e) e = view_put_str(b, "last_event", ws.last_event[0] ? ws.last_event : NULL);
		if (!e) e = json_buf_puts(b, ",");
		if (!e) e = view_put_str(b, "last_error", ws.last_error[0] ? ws.last_error : NULL);
		if (!e) e = json_buf_puts(b, "}");
	}
	return e ? e : json_buf_puts(b, "}");
}

static int history_json(struct opview *v, struct json_buf *b)
{
	int e = json_buf_puts(b, "[");
	/* Newest first. */
	for (unsigned k = 0; !e && k < v->history_n; k++) {
		const struct opview_change *c =
			&v->history[(v->history_next + OPVIEW_HISTORY - 1 - k) % OPVIEW_HISTORY];
		e = json_buf_puts(b, k ? ",{" : "{");
		if (!e) e = view_put_time(b, "time", c->time_ms);
		if (!e) e = view_printf(b, ",\"healthy\":%s,", c->healthy ? "true" : "false");
		if (!e) e = view_put_str(b, "summary", c->summary);
		if (!e) e = view_printf(b, ",\"trigger\":\"%s\"}", trigger_names[c->trigger]);
	}
	return e ? e : json_buf_puts(b, "]");
}

/* The verdict file's writes (issue 21); null when there is none. */
static int vfile_json(const struct opview *v, struct json_buf *b, const struct opview_refresh *r)
{
	const struct opview_vfile *f = &v->vfile;
	if (!*r->cfg->verdict_file)
		return json_buf_puts(b, "null");
	int e = json_buf_puts(b, "{");
	if (!e) e = view_put_str(b, "path", r->cfg->verdict_file);
	if (!e) e = view_printf(b, ",\"writes\":%llu,\"failures\":%llu,\"failing\":%s,",
				(unsigned long long)f->writes, (unsigned long long)f->failures,
				f->failing ? "true" : "false");
	if (!e) e = view_put_time(b, "last_write", f->last_write_ms);
	if (!e) e = json_buf_puts(b, ",");
	if (!e) e = view_put_str(b, "last_written", !f->writes ? NULL
					      : f->last_healthy ? "healthy" : "unhealthy");
	if (!e) e = json_buf_puts(b, ",\"last_failure\":");
	if (!e && f->last_failure_ms) {
		e = json_buf_puts(b, "{");
		if (!e) e = view_put_time(b, "time", f->last_failure_ms);
		if (!e) e = json_buf_puts(b, ",");
		if (!e) e = view_put_str(b, "error", f->last_error);
		if (!e) e = json_buf_puts(b, "}");
	} else if (!e) {
		e = json_buf_puts(b, "null");
	}
	return e ? e : json_buf_puts(b, "}");
}

static int status_json(struct opview *v, struct json_buf *b, const struct opview_refresh *r)
{
	int e = json_buf_puts(b, "\"source\":");
	if (!e) e = source_json(b, r);
	if (!e) e = json_buf_puts(b, ",\"containers\":");
	if (!e) e = r->detail->have_containers ? containers_json(v, b, r) : json_buf_puts(b, "null");
	if (!e) e = json_buf_puts(b, ",\"status_file\":");
	if (!e) e = statusfile_json(b, r);
	if (!e) e = json_buf_puts(b, ",\"refresh\":");
	if (!e) e = refresh_json(v, b, r);
	if (!e) e = json_buf_puts(b, ",\"verdict_file\":");
	if (!e) e = vfile_json(v, b, r);
	if (!e) e = json_buf_puts(b, ",\"history\":");
	return e ? e : history_json(v, b);
}

static int containers_metrics(struct json_buf *b, const struct opview_refresh *r)
{
	int e = view_prom_family(b, "dstack_healthd_container_healthy", "gauge",
				 "1 when the container is served as healthy, per judged container");
	const struct container_list *l = &r->detail->containers;
	for (size_t i = 0; !e && i < l->n; i++) {
		const struct container *c = &l->v[i];
		const char *skipped = container_skip_reason(c);
		if (skipped)
			continue;
		struct json_buf lab = { 0 };
		e = json_buf_puts(&lab, "name=\"");
		if (!e) e = view_prom_label(&lab, c->name ? c->name : "");
		if (!e) e = json_buf_puts(&lab, "\",service=\"");
		if (!e) e = view_prom_label(&lab, c->service ? c->service : "");
		if (!e) e = json_buf_puts(&lab, "\"");
		if (!e)
			e = view_prom_sample(b, "dstack_healthd_container_healthy", lab.p,
					     strcmp(served_status(r->published, c, NULL), "healthy") == 0);
		json_buf_free(&lab);
	}
	return e;
}

/* The agent's probes (issue 27), counted by result since the start. */
static int probes_metrics(struct json_buf *b, const struct opview_refresh *r)
{
	if (!r->detail->have_probes)
		return 0;
	int e = view_prom_family(b, "dstack_healthd_probes_total", "counter",
				 "probes the agent ran, by result");
	for (int k = PROBE_PASS; !e && k < PROBE_N_RESULTS; k++)
		e = view_printf(b, "dstack_healthd_probes_total{result=\"%s\"} %llu\n",
				probe_result_name(k),
				(unsigned long long)r->detail->probe_counts[k]);
	return e;
}

static int metrics_text(struct opview *v, struct json_buf *b, const struct opview_refresh *r)
{
	struct watch_stats ws;
	watch_stats_get(r->watcher, &ws);
	int e = view_prom_family(b, "dstack_healthd_info", "gauge", "the agent's version and source");
	if (!e) e = view_printf(b, "dstack_healthd_info{version=\"%s\",source=\"%s\"} 1\n",
				HEALTHD_VERSION, source_name(r));
	if (!e) e = containers_metrics(b, r);
	if (!e) e = probes_metrics(b, r);
	if (!e) e = view_prom_histogram(b, "dstack_healthd_refresh_duration_seconds",
					"how long refreshes took", bucket_bounds, v->buckets,
					OPVIEW_BUCKETS, v->duration_sum);
	if (!e) e = view_prom_family(b, "dstack_healthd_refreshes_total", "counter",
				     "refreshes run, by what started them");
	for (int t = 0; !e && t < N_TRIGGERS; t++)
		e = view_printf(b, "dstack_healthd_refreshes_total{trigger=\"%s\"} %llu\n",
				trigger_names[t], (unsigned long long)v->refreshes[t]);
	if (!e) e = view_prom_family(b, "dstack_healthd_refresh_failures_total", "counter",
				     "refreshes that failed, by cause");
	for (int c = 0; !e && c < N_CAUSES; c++)
		e = view_printf(b, "dstack_healthd_refresh_failures_total{cause=\"%s\"} %llu\n",
				opview_cause_name(c), (unsigned long long)v->failures[c]);
	if (!e) e = view_prom_family(b, "dstack_healthd_verdict_changes_total", "counter",
				     "times the published verdict changed");
	if (!e) e = view_prom_sample(b, "dstack_healthd_verdict_changes_total", NULL,
				     (double)v->changes_total);
	if (!e) e = view_prom_family(b, "dstack_healthd_last_refresh_timestamp_seconds", "gauge",
				     "when the last refresh ended");
	if (!e) e = view_printf(b, "dstack_healthd_last_refresh_timestamp_seconds %.3f\n",
				(double)v->last_end_ms / 1000);
	if (!e) e = view_prom_family(b, "dstack_healthd_events_reconnects_total", "counter",
				     "Docker events stream subscriptions after the first");
	if (!e) e = view_prom_sample(b, "dstack_healthd_events_reconnects_total", NULL,
				     (double)ws.reconnects);
	if (!e && *r->cfg->verdict_file) {
		e = view_prom_family(b, "dstack_healthd_verdict_file_write_failures_total",
				     "counter", "writes of the verdict file that failed");
		if (!e) e = view_prom_sample(b, "dstack_healthd_verdict_file_write_failures_total",
					     NULL, (double)v->vfile.failures);
		if (!e) e = view_prom_family(b, "dstack_healthd_verdict_file_failing", "gauge",
					     "1 while the last write of the verdict file failed");
		if (!e) e = view_prom_sample(b, "dstack_healthd_verdict_file_failing", NULL,
					     v->vfile.failing);
	}
	return e;
}

void opview_refreshed(struct opview *v, const struct opview_refresh *r)
{
	record(v, r);
	/* Built in transient buffers, copied out at their exact size into a
	 * mapping of the view's own (view_copy) and freed before the view is
	 * published: nothing of the build outlives it. Large ones are mappings
	 * of their own too (M_MMAP_THRESHOLD, agent/main.c), so they do not
	 * leave the refresh arena ragged. */
	struct json_buf st = { 0 }, m = { 0 };
	int e = status_json(v, &st, r);
	if (!e)
		e = metrics_text(v, &m, r);
	struct view *nv = e ? NULL : view_copy(st.p, st.len, m.p, m.len);
	json_buf_free(&st);
	json_buf_free(&m);
	if (nv)
		view_box_publish(&v->box, nv);
}

void opview_publish_config(struct opview *v, const struct config *cfg)
{
	struct json_buf b = { 0 };
	struct view *nv = config_json(cfg, &b) == 0 ? view_new(b.p, b.len, NULL, 0) : NULL;
	if (!nv) {
		json_buf_free(&b);
		return;
	}
	view_box_publish(&v->config, nv);
}
