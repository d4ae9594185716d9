/* One refresh: asks the source the app chose (nothing, its status file, or its
 * Compose containers through Docker or nerdctl) and judges the answer. */
#ifndef HEALTHD_SOURCE_H
#define HEALTHD_SOURCE_H

#include <stdint.h>

#include "agent/compose.h"
#include "agent/config.h"
#include "base/err.h"
#include "base/verdict.h"

/* Fills out (initialised by the caller) with a verdict and returns 0, or
 * returns a negative errno when the source could not be asked (runtime
 * unreachable, runtime file unreadable): err says what failed. deadline is
 * CLOCK_MONOTONIC ms; when cancel_fd (-1 for none) becomes readable, a query
 * in progress gives up at once with -ECANCELED. */
int source_refresh(const struct config *cfg, const struct app_compose *app,
		   int64_t deadline, int cancel_fd, struct verdict *out,
		   struct errbuf *err);

/* The verdict served before the first refresh completes. -ENOMEM. */
int source_initial_verdict(const struct app_compose *app, struct verdict *out);

#endif
