#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The shipped Prometheus alerting rules (packaging/prometheus, README
# "Alerts"): promtool checks them and runs their unit tests (series for each
# alert and its near misses); and every metric they read is one the agent
# exports, on an agent that has all of them (a relay, a verdict file), so
# that renaming a metric fails here rather than silence an alert.
# The rules do not depend on the build: tests/run: once
set -u
cd "$(dirname "$0")/../.."
. tests/lib/tap.sh
command -v promtool >/dev/null 2>&1 || skip_all "promtool is not installed (Debian: prometheus)"
command -v curl >/dev/null 2>&1 || skip_all "curl is not installed"
BIN=${HEALTHD_BUILD:-build}/dstack-healthd
RULES=packaging/prometheus/dstack-healthd.rules.yml
. tests/lib/scratch.sh

promtool check rules "$RULES" >"$T/check.out" 2>&1
ok $? "promtool check rules $RULES"
sed 's/^/# /' "$T/check.out"
(cd packaging/prometheus && promtool test rules dstack-healthd.rules.test.yml) >"$T/test.out" 2>&1
ok $? "promtool test rules: every alert fires on its series, none on its near misses"
grep -v '^ *SUCCESS\|^Unit Testing' "$T/test.out" | head -n 40 | sed 's/^/# /'

# An agent with every metric: a status-file app, a verdict file, a relay
# (to a port nothing listens on), a public listener for the relay.
printf '{"manifest_version":"3","name":"a","runner":"bash","requirements":{"health_check":true,"health_status_file":"%s"}}\n' \
	"$T/health" >"$T/app.json"
printf 'healthy\n%s\n' "$(date +%s)" >"$T/health"
"$BIN" --listen 127.0.0.1:0 --relay 127.0.0.1:9 --control-socket "$T/ctl.sock" \
	--compose-file "$T/app.json" --verdict-file "$T/out/status" --interval 0.5 >"$T/agent.log" 2>&1 &
PIDS+=($!)
mkdir -p "$T/out"
refreshed() { curl -s --max-time 5 --unix-socket "$T/ctl.sock" http://x/metrics | grep -q '^dstack_healthd_verdict_file_failing '; }
wait_for 30 refreshed
ok $? "the agent's /metrics, after a refresh"
curl -s --max-time 5 --unix-socket "$T/ctl.sock" http://x/metrics >"$T/metrics"
missing=
for m in $(grep -o 'dstack_healthd_[a-z_]*' "$RULES" | sort -u); do
	grep -q "^$m[ {]" "$T/metrics" || missing="$missing $m"
done
is "$missing" "" "every metric the rules read is on /metrics ($(grep -o 'dstack_healthd_[a-z_]*' "$RULES" | sort -u | wc -l) of them)"
done_testing
