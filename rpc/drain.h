/* SPDX-License-Identifier: Apache-2.0 */
/* The drain (issue 12): `dstack-healthd drain` takes the instance out of
 * rotation by overriding what the public side serves (cache_override) with
 * one ready-encoded verdict, healthy:false with the single entry <drain>;
 * the refresh loop goes on publishing underneath, so `resume` serves the
 * app's latest verdict at once. The state lives as long as the process:
 * a reload keeps it, a restart forgets it. */
#ifndef HEALTHD_RPC_DRAIN_H
#define HEALTHD_RPC_DRAIN_H

#include <stdbool.h>
#include <stdint.h>

#include "base/cache.h"
#include "base/err.h"
#include "base/json.h"
#include "base/pollers.h"
#include "base/verdict.h"

#define DRAIN_NAME "<drain>"
#define DRAIN_STATUS "draining: the instance is being taken out of rotation"

/* Told of each drain and resume as it happens, with the verdict the public
 * side serves from then on (for the history); under the drain's lock. */
typedef void drain_changed_fn(void *arg, bool draining, int64_t at_ms, const struct verdict *served);

struct drain;

int drain_new(struct cache *cache, struct pollers *pollers, int64_t window_ms,
	      drain_changed_fn *changed, void *arg, struct drain **out);
void drain_free(struct drain *d);
/* The window changes with a reload; the drain itself does not. */
void drain_set_window(struct drain *d, int64_t window_ms);

/* Starts a drain (one in progress goes on from when it began). -ENOMEM. */
int drain_begin(struct drain *d);
/* The drain of a sidecar that is stopping (issue 29): begins one (or goes
 * on with the one in progress) that drain_end no longer lifts; drain_json
 * says "stopping":true. -ENOMEM. */
int drain_hold(struct drain *d);
/* Ends the drain, if any, unless it is held: false then. */
bool drain_end(struct drain *d);
bool drain_active(struct drain *d);

/* The state as a JSON object: draining, since, window, and when draining
 * everyone_told with the addresses told and not told. -ENOMEM. */
int drain_json(struct drain *d, struct json_buf *b);

#endif
