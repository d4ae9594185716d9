/* The refresh loop: the one thread that talks to the outside. Every interval
 * it runs one refresh (bounded by the refresh timeout), applies the
 * consecutive-failure rule, publishes the verdict into the cache, logs
 * transitions, updates STATUS= and pings the watchdog. */
#ifndef HEALTHD_REFRESH_H
#define HEALTHD_REFRESH_H

#include <stdbool.h>
#include <stdint.h>

#include "cache.h"
#include "compose.h"
#include "config.h"
#include "err.h"

/* A failed refresh keeps the previous verdict this many times in a row; the
 * next failure is reported (DESIGN.md §4). */
#define REFRESH_KEPT_FAILURES 2

/* How old a published verdict may get before readers stop passing it off as
 * current: three missed refreshes plus one that ran to its limit. */
static inline int64_t refresh_max_age_ms(const struct config *cfg)
{
	return 3 * cfg->interval_ms + cfg->refresh_timeout_ms;
}

struct refresh_state {
	unsigned failures;       /* consecutive failed refreshes */
	struct verdict current;  /* the verdict last published */
	bool have_result;        /* a refresh has completed at least once */
	char last_error[ERRBUF_SIZE];
};

/* Pure: the verdict to publish after a refresh that returned r (with verdict v
 * on success, err on failure), updating the state. *out is initialised here.
 * -ENOMEM. */
int refresh_apply(struct refresh_state *st, int r, struct verdict *v,
		  const struct errbuf *err, struct verdict *out);

struct refresher;

/* Starts the loop thread. cfg, app and cache must outlive it. The first
 * refresh runs at once. */
int refresh_start(const struct config *cfg, const struct app_compose *app,
		  struct cache *cache, struct refresher **out, struct errbuf *err);
/* Asks the loop to stop and joins it. NULL is fine. */
void refresh_stop(struct refresher *r);
/* Asks for a refresh now (coalesced with one already pending). */
void refresh_kick(struct refresher *r);

#endif
