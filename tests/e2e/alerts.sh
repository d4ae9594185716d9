#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The shipped Prometheus alerting rules (packaging/prometheus, docs/operator.md
# "Alerts"): promtool checks them and runs their unit tests (series for each
# alert and its near misses); and every metric they read is one the agent
# exports, on an agent that has all of them (a relay, a verdict file), with
# every label value they select, so that renaming a metric or a label value
# fails here rather than silence an alert; and the failures the runtime rule
# reads are the runtime's: an agent whose Docker is not there counts them under
# cause="runtime", a status-file app under none. The rules do not depend on the
# build; the agent's metrics code they read runs under the sanitizers in
# relay_front.sh, status.sh and others: tests/run: once
set -u
cd "$(dirname "$0")/../.."
. tests/lib/tap.sh
command -v promtool >/dev/null 2>&1 || skip_all "promtool is not installed (Debian: prometheus)"
command -v curl >/dev/null 2>&1 || skip_all "curl is not installed"
BIN=${HEALTHD_BUILD:-build}/dstack-healthd
RULES=packaging/prometheus/dstack-healthd.rules.yml
. tests/lib/scratch.sh

diag "$(promtool --version 2>&1 | head -n 1)"
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
# Each selector's label values, e.g. {cause="runtime"}: a series with each.
missing= n=0
for sel in $(grep -o 'dstack_healthd_[a-z_]*{[^}]*}' "$RULES" | sort -u); do
	m=${sel%%\{*}
	for kv in $(printf '%s\n' "${sel#*\{}" | tr -d '}' | tr ',' ' '); do
		n=$((n + 1))
		grep -q "^$m{\(.*,\)\?$kv[,}]" "$T/metrics" || missing="$missing $m{$kv}"
	done
done
is "$missing" "" "every label value the rules select is on /metrics ($n of them)"
failures() { awk -v s="dstack_healthd_refresh_failures_total{cause=\"$2\"}" '$1 == s { print $2 }' "$1"; }
is "$(failures "$T/metrics" runtime)" 0 "a status-file app: no refresh failure counted as the runtime's"

# An agent whose Docker socket is not there: its failures are the runtime's.
printf '{"manifest_version":"3","name":"a","runner":"docker-compose","requirements":{"health_check":true}}\n' \
	>"$T/docker.json"
printf '{"project":"a","namespace":"","snapshotter":""}\n' >"$T/rt.json"
"$BIN" --listen 127.0.0.1:0 --control-socket "$T/ctl2.sock" --compose-file "$T/docker.json" \
	--runtime-file "$T/rt.json" --docker-host "unix://$T/none.sock" --interval 0.5 >"$T/agent2.log" 2>&1 &
PIDS+=($!)
failed_twice() {
	curl -s --max-time 5 --unix-socket "$T/ctl2.sock" http://x/metrics >"$T/metrics2" &&
		[ "$(failures "$T/metrics2" runtime)" -ge 2 ] 2>/dev/null
}
wait_for 30 failed_twice
ok $? "Docker not there: refresh failures counted under cause=\"runtime\" ($(failures "$T/metrics2" runtime))"
is "$(failures "$T/metrics2" other) $(failures "$T/metrics2" runtime_file) $(failures "$T/metrics2" memory)" "0 0 0" \
	"and under no other cause"
done_testing
