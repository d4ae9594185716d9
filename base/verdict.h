/* SPDX-License-Identifier: Apache-2.0 */
/* A verdict: the answer to "can this instance serve?", in the shape of the
 * HealthResponse message (docs/design/prpc.md). Sources build one; the cache holds one;
 * the encoders turn one into bytes. */
#ifndef HEALTHD_VERDICT_H
#define HEALTHD_VERDICT_H

#include <stdbool.h>
#include <stddef.h>

#include "base/err.h"

struct health_entry {
	char *name;   /* "<health_file>", "<compose>", or a container name */
	char *status; /* the rule that failed, in words */
	/* The rule that failed as a fixed key, for an entry whose words carry
	 * a number that changes from one refresh to the next (a status file's
	 * age): the journal logs a change of the verdict's state or cause, not
	 * of such a number (verdict_same_cause). A static string, never
	 * freed; NULL when the words themselves are the cause. */
	const char *cause;
};

struct verdict {
	bool healthy;
	struct health_entry *entries;
	size_t n_entries;
	size_t cap;
	char *error; /* NULL when there is none; encoded as "" */
	/* The error in full (runtime messages, paths), for the journal and the
	 * local operator view. The public encoders never read it. NULL: none. */
	char *detail;
};

/* An empty verdict: healthy=false, no entries, no error. */
void verdict_init(struct verdict *v);
void verdict_free(struct verdict *v);

/* Appends an entry; both strings are copied. -ENOMEM. */
int verdict_add(struct verdict *v, const char *name, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* verdict_add with the entry's cause (a static string, see health_entry):
 * for words that carry a number that changes while the cause stays. */
int verdict_add_cause(struct verdict *v, const char *name, const char *cause,
		      const char *fmt, ...) __attribute__((format(printf, 4, 5)));
int verdict_set_error(struct verdict *v, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Sets error to e's public text and detail to e's message. -ENOMEM. */
int verdict_set_failure(struct verdict *v, const struct errbuf *e);

/* Sorts entries by name, then status (the gateway and people diff them). */
void verdict_sort(struct verdict *v);

/* Deep copy into an initialised-or-garbage dst. -ENOMEM. */
int verdict_copy(struct verdict *dst, const struct verdict *src);

/* True when both have the same state and cause: healthy, the error and
 * each entry's name alike, and each entry's words, or its cause when both
 * sides have one (the detail is not compared). What decides whether a refresh logs a verdict line: one line
 * when the state or its cause changes, not one per refresh because a number
 * in the words moved (docs/design.md §5). */
bool verdict_same_cause(const struct verdict *a, const struct verdict *b);

/* One line in words for STATUS= and logs, e.g. "healthy" or
 * "unhealthy: web: starting; db: unhealthy (+2 more)". */
void verdict_summary(const struct verdict *v, char *buf, size_t n);

#endif
