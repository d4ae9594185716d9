/* SPDX-License-Identifier: Apache-2.0 */
/* A verdict: the answer to "can this instance serve?", in the shape of the
 * HealthResponse message (docs/design.md §3). Sources build one; the cache holds one;
 * the encoders turn one into bytes. */
#ifndef HEALTHD_VERDICT_H
#define HEALTHD_VERDICT_H

#include <stdbool.h>
#include <stddef.h>

#include "base/err.h"

struct health_entry {
	char *name;   /* "<health_file>", "<compose>", or a container name */
	char *status; /* the rule that failed, in words */
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
int verdict_set_error(struct verdict *v, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Sets error to e's public text and detail to e's message. -ENOMEM. */
int verdict_set_failure(struct verdict *v, const struct errbuf *e);

/* Sorts entries by name, then status (the gateway and people diff them). */
void verdict_sort(struct verdict *v);

/* Deep copy into an initialised-or-garbage dst. -ENOMEM. */
int verdict_copy(struct verdict *dst, const struct verdict *src);

/* True when both say the same thing to a caller (used to log transitions
 * only): the detail is not compared. */
bool verdict_equal(const struct verdict *a, const struct verdict *b);

/* One line in words for STATUS= and logs, e.g. "healthy" or
 * "unhealthy: web: starting; db: unhealthy (+2 more)". */
void verdict_summary(const struct verdict *v, char *buf, size_t n);

#endif
