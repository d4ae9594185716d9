/* SPDX-License-Identifier: Apache-2.0 */
/* The refresh thread's side of the operator's view (issue 11): what it
 * remembers across refreshes (and reloads) and the view it publishes after
 * each refresh, for the control socket to serve without asking anything. */
#ifndef HEALTHD_OPVIEW_H
#define HEALTHD_OPVIEW_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "agent/compose.h"
#include "agent/config.h"
#include "agent/source.h"
#include "agent/watch.h"
#include "base/err.h"
#include "base/pollers.h"
#include "base/view.h"

#define OPVIEW_HISTORY 64
#define OPVIEW_DURATIONS 100
#define OPVIEW_BUCKETS 11

enum opview_trigger { TRIGGER_TIMER, TRIGGER_EVENT, TRIGGER_RELOAD, TRIGGER_START, N_TRIGGERS };
/* History entries that are no refresh's: the drain's (issue 12). */
enum { TRIGGER_DRAIN = N_TRIGGERS, TRIGGER_RESUME, N_HISTORY_TRIGGERS };
#define OPVIEW_DRAIN_PENDING 8

/* Why a refresh failed, for dstack_healthd_refresh_failures_total{cause}:
 * an alert on the runtime must not count a status file's slow read. */
enum opview_cause { CAUSE_RUNTIME, CAUSE_RUNTIME_FILE, CAUSE_MEMORY, CAUSE_OTHER, N_CAUSES };
/* The cause of a failed refresh of a source of kind k (SOURCE_NONE when
 * app-compose.json is unusable) whose error was tagged e. */
enum opview_cause opview_failure_cause(enum source_kind k, enum err_kind e);
/* Its label value: "runtime", "runtime_file", "memory", "other". */
const char *opview_cause_name(enum opview_cause c);

struct opview_change {
	int64_t time_ms;
	bool healthy;
	uint8_t trigger;
	char summary[240];
};

/* When a container entered the status it has now. The table is one
 * allocation of exactly its size: the entries, then their names and
 * statuses packed behind them (a fixed 392 bytes each cost 392 KB at
 * 1000 containers, twice over while the next table was built). */
struct opview_since {
	int64_t since_ms;
	uint32_t name, status; /* offsets into the strings after the entries */
};

/* The verdict file's writes (issue 21), kept across reloads so that a
 * failure streak is logged once. Written by the refresh thread only. */
struct opview_vfile {
	uint64_t writes, failures;
	bool failing;       /* the last write failed */
	bool last_healthy;  /* what the last successful write said */
	int64_t last_write_ms, last_failure_ms; /* CLOCK_REALTIME */
	char last_error[ERRBUF_SIZE];
};

/* Owned by main; the refresh thread (one at a time, across reloads) is the
 * only writer of everything but the box and the pollers, which have their
 * own locks. */
struct opview {
	struct view_box box;
	struct view_box config; /* published by the main thread */
	struct pollers pollers;

	struct opview_change history[OPVIEW_HISTORY];
	unsigned history_n, history_next;
	/* The app's verdict the history last recorded (have_last): a change
	 * is one of state or cause (verdict_same_cause), as in the journal. */
	struct verdict last;
	bool have_last;
	int64_t durations[OPVIEW_DURATIONS]; /* us */
	unsigned durations_n, durations_next;
	uint64_t buckets[OPVIEW_BUCKETS + 1];
	double duration_sum;
	uint64_t refreshes[N_TRIGGERS], failures[N_CAUSES], changes_total;
	int64_t last_start_ms, last_end_ms, last_duration_us, last_failure_ms;
	char last_failure[ERRBUF_SIZE];
	/* The first refresh of the next refresher: start or reload. */
	enum opview_trigger first_trigger;

	/* Drains and resumes noted by the control thread, moved into the
	 * history by the next refresh (the refresh thread is its writer). */
	pthread_mutex_t drain_lock;
	struct opview_change drain_pending[OPVIEW_DRAIN_PENDING];
	unsigned drain_pending_n;

	struct opview_since *since;
	size_t n_since;

	struct opview_vfile vfile;
};

/* v must be zeroed storage (static, or calloc'd). */
void opview_init(struct opview *v);
void opview_destroy(struct opview *v);

/* One refresh as the loop saw it. */
struct opview_refresh {
	const struct config *cfg;
	const struct app_compose *app;
	/* app-compose.json is not usable (app says nothing): why, in full. */
	const char *manifest_error;
	enum opview_trigger trigger;
	int64_t start_ms, end_ms;   /* CLOCK_REALTIME */
	int64_t duration_us;        /* measured on CLOCK_MONOTONIC */
	int result;                 /* source_refresh's */
	const char *error;          /* when result < 0 */
	enum err_kind error_kind;   /* error's tag */
	unsigned failures_in_row;
	const struct verdict *published;
	const struct source_detail *detail;
	struct watcher *watcher;
};

/* Records the refresh and publishes a new view. Errors (ENOMEM) leave the
 * previous view in place. */
void opview_refreshed(struct opview *v, const struct opview_refresh *r);


/* Any thread: a drain began (or ended) at at_ms, the public side serving
 * served from then on. Shown in the history from the next refresh on. */
void opview_note_drain(struct opview *v, bool draining, int64_t at_ms, const struct verdict *served);

/* The main thread, at start and after each reload: publishes the
 * configuration in force (config_json), so that /status shows it at once. */
void opview_publish_config(struct opview *v, const struct config *cfg);

#endif
