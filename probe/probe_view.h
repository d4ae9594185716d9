/* SPDX-License-Identifier: Apache-2.0 */
/* One probe as the operator's view shows it (issue 27; docs/design/public-local.md):
 * so that the view's JSON says what a probe is without the agent knowing
 * how one works. */
#ifndef HEALTHD_PROBE_VIEW_H
#define HEALTHD_PROBE_VIEW_H

#include "base/json.h"
#include "probe/probe.h"

/* The JSON object of probe p declared by label (null when p is NULL):
 * the label, and either why it is refused or its target, its settings, its
 * status, the last result with its reason (the operator's words, details
 * included), the streaks, the runs and the last change. -ENOMEM. */
int probe_view_json(struct json_buf *b, const char *label, const struct container_probe *p);

#endif
