/* SPDX-License-Identifier: Apache-2.0 */
/* One probe in the operator's view. */
#include "probe/probe_view.h"

#include <stdio.h>

#include "base/view.h"

int probe_view_json(struct json_buf *b, const char *label, const struct container_probe *p)
{
	static const char *const st[] = { "starting", "healthy", "unhealthy" };
	char last[64 + 96 + PROBE_DETAIL_MAX], target[sizeof(p->target) + PROBE_PATH_MAX + 8];
	if (!p)
		return json_buf_puts(b, "null");
	int r = json_buf_puts(b, "{");
	if (!r) r = view_put_str(b, "label", label);
	if (!r && !p->usable) {
		r = json_buf_puts(b, ",");
		if (!r) r = view_put_str(b, "refused", p->why);
		return r ? r : json_buf_puts(b, "}");
	}
	/* gRPC's path is the service: shown after a '/', none for the server. */
	bool grpc = p->spec.kind == PROBE_GRPC || p->spec.kind == PROBE_GRPCS;
	snprintf(target, sizeof(target), "%s%s%s", p->target, grpc && p->spec.path[0] ? "/" : "",
		 p->spec.kind == PROBE_TCP ? "" : p->spec.path);
	probe_last_detail(&p->state, last, sizeof(last));
	if (!r) r = json_buf_puts(b, ",");
	if (!r) r = view_put_str(b, "target", target);
	if (!r) r = view_printf(b, ",\"interval_ms\":%lld,\"timeout_ms\":%lld,"
				"\"start_period_ms\":%lld,\"retries\":%u,\"success_threshold\":%u,",
				(long long)p->spec.interval_ms, (long long)p->spec.timeout_ms,
				(long long)p->spec.start_period_ms, p->spec.retries,
				p->spec.success_threshold);
	if (!r) r = view_put_str(b, "status", p->probed ? st[p->state.status] : NULL);
	if (!r) r = json_buf_puts(b, ",");
	if (!r) r = view_put_str(b, "last_result",
				 p->state.runs ? probe_result_name(p->state.last) : NULL);
	if (!r) r = json_buf_puts(b, ",");
	if (!r) r = view_put_str(b, "last_reason", p->state.runs ? last : NULL);
	if (!r) r = json_buf_puts(b, ",");
	if (!r) r = view_put_time(b, "last_time", p->state.last_ms);
	if (!r) r = view_printf(b, ",\"failing_streak\":%u,\"passing_streak\":%u,\"runs\":%llu,",
				p->state.failing_streak, p->state.passing_streak,
				(unsigned long long)p->state.runs);
	if (!r) r = view_put_time(b, "last_change", p->probed ? p->state.since_ms : 0);
	return r ? r : json_buf_puts(b, "}");
}
