#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The agent as a program: --help, --version, config errors (exit 2 before
# ready, naming the source and field), app-compose.json errors (served; exit
# 2 with --once), --once exit codes, gating off, the not-yet-determined
# verdict, reloads, and a clean stop on SIGTERM.
# tests/run: tsan
set -u
cd "$(dirname "$0")/../.."
. tests/lib/tap.sh
BIN=${HEALTHD_BUILD:-build}/dstack-healthd
[ -x "$BIN" ] || skip_all "$BIN not built"

. tests/lib/scratch.sh

compose() { # compose FILE JSON-REQUIREMENTS [RUNNER]
	printf '{"manifest_version":"3","name":"t","runner":"%s","requirements":%s}\n' \
		"${3:-docker-compose}" "$2" > "$1"
}

out=$("$BIN" --help); rc=$?
is "$rc" 0 "--help exits 0"
like "$out" "--compose-file=FILE" "--help lists --compose-file"
like "$out" "DSTACK_HEALTHD_" "--help explains the environment variables"
out=$("$BIN" --version); rc=$?
is "$rc" 0 "--version exits 0"
like "$out" '^dstack-healthd v[0-9]+\.[0-9]+\.[0-9]+ \(git:' "--version prints version and rev"

# Usage and config errors: exit 2, message names the source and field.
check_error() { # check_error DESCRIPTION REGEX ARGS...
	local desc=$1 re=$2 err rc
	shift 2
	err=$("$BIN" "$@" 2>&1 >/dev/null); rc=$?
	is "$rc" 2 "$desc: exit status 2"
	like "$err" "$re" "$desc: message names it"
}
compose "$T/ok.json" '{"health_check":false}'
check_error "unknown flag" "--frobnicate: unknown option" --frobnicate
check_error "bad interval" "--interval: must be a number" --interval=never --compose-file "$T/ok.json"
# app-compose.json with --once: exit 2 too, the file named, its path not.
check_error "missing compose file" "^dstack-healthd: error: app-compose.json: does not exist$" --once --compose-file "$T/nope.json"
printf '{"manifest_version":"3","runner":"docker-compose","requirements":{"health_check":"yes"}}' > "$T/badtype.json"
check_error "health_check of the wrong type" "^dstack-healthd: error: app-compose.json: requirements.health_check: " --once --compose-file "$T/badtype.json"
printf '{"manifest_version":"3","runner":"docker-compose","requirements":{"health_check":true,"health_status_file":"rel/path"}}' > "$T/rel.json"
check_error "relative status file" "^dstack-healthd: error: app-compose.json: requirements.health_status_file: must be an absolute path$" --once --compose-file "$T/rel.json"
printf '{"manifest_version":"3","runner":"docker-compose","requirements":{"healthcheck":true}}' > "$T/unknown.json"
check_error "unknown requirement" "^dstack-healthd: error: app-compose.json: requirements.healthcheck: " --once --compose-file "$T/unknown.json"
printf '{"manifest_version":2,"runner":"docker-compose","requirements":{"health_check":true}}' > "$T/v2.json"
check_error "requirements below manifest 3" "^dstack-healthd: error: app-compose.json: requirements: " --once --compose-file "$T/v2.json"
compose "$T/bash.json" '{"health_check":true}' bash
check_error "bash runner without a status file" "^dstack-healthd: error: app-compose.json: .*health_status_file" --once --compose-file "$T/bash.json"
printf '{"listen":"127.0.0.1:1","interval":"five"}' > "$T/cfg.json"
check_error "config file field of the wrong type" "cfg.json: interval" -c "$T/cfg.json" --once --compose-file "$T/ok.json"
DSTACK_HEALTHD_REFRESH_TIMEOUT=x check_error "bad environment variable" \
	"DSTACK_HEALTHD_REFRESH_TIMEOUT" --once --compose-file "$T/ok.json"
check_error "bad listen address" "listen" --listen "nonsense" --compose-file "$T/ok.json"

# --once: gating off is healthy without any runtime.
out=$("$BIN" --once --compose-file "$T/ok.json" --docker-host unix://$T/none.sock); rc=$?
is "$rc" 0 "--once with gating off exits 0"
is "$out" '{"healthy":true,"unhealthy":[],"error":""}' "--once with gating off: healthy, every field"

# --once against an unreachable Docker: not healthy, error says what failed.
compose "$T/gated.json" '{"health_check":true}'
printf '{"project":"p"}' > "$T/runtime.json"
out=$("$BIN" --once --compose-file "$T/gated.json" --runtime-file "$T/runtime.json" \
	--docker-host unix://$T/none.sock --refresh-timeout 2 2>"$T/once.err"); rc=$?
is "$rc" 3 "--once with Docker unreachable exits 3 (could not judge)"
is "$out" '{"healthy":false,"unhealthy":[],"error":"cannot reach the container runtime"}' \
	"--once: the error in the agent's words, no path"
like "$(cat "$T/once.err")" "cannot connect to unix://$T/none.sock" "--once: stderr names the unreachable socket"

out=$("$BIN" --once --compose-file "$T/gated.json" --runtime-file "$T/absent.json" \
	--docker-host unix://$T/none.sock); rc=$?
is "$rc" 1 "--once before Compose wrote the runtime file exits 1"
like "$out" '"name":"<compose>","status":"no container has been created yet"' \
	"no runtime file: no container has been created yet"

# Serving: not determined before the first refresh completes is not healthy;
# gating off answers healthy; SIGTERM stops well within the unit's
# TimeoutStopSec (5 s), with room for a loaded machine.
health() { curl -s --max-time 10 --unix-socket "$1" -X POST 'http://x/prpc/v1/Health?json' -d '{}'; }
"$BIN" --listen "unix:$T/off.sock" --compose-file "$T/ok.json" 2>"$T/off.log" &
PIDS+=($!)
off=$!
wait_for 20 test -S "$T/off.sock"
is "$(health "$T/off.sock")" '{"healthy":true,"unhealthy":[],"error":""}' "served: gating off is healthy"
agent_stop "$off" "serving"
ms=$AGENT_STOP_MS
ok $([ "$ms" != timeout ] && [ "$ms" -lt 5000 ]; echo $?) "SIGTERM: stopped in ${ms} ms (< 5000)"
ok $([ ! -e "$T/off.sock" ] || ! curl -s --max-time 1 --unix-socket "$T/off.sock" http://x/ >/dev/null; echo $?) \
	"SIGTERM: the listener is closed"

# A Docker socket that accepts and never answers keeps the first refresh from
# completing: the served verdict is "not determined yet", and never healthy.
hung_socket "$T/hang.sock"
"$BIN" --listen "unix:$T/gated.sock" --compose-file "$T/gated.json" --runtime-file "$T/runtime.json" \
	--docker-host "unix://$T/hang.sock" --refresh-timeout 30 --interval 60 2>"$T/gated.log" &
gated=$!
PIDS+=($gated)
wait_for 20 test -S "$T/gated.sock"
is "$(health "$T/gated.sock")" \
	'{"healthy":false,"unhealthy":[{"name":"<health>","status":"health has not been determined yet"}],"error":""}' \
	"before the first refresh completes: not determined yet, not healthy"
wait_for 20 test -s "$T/hang.sock.accepted"
agent_stop "$gated" "during a hung refresh"
ms=$AGENT_STOP_MS
ok $([ "$ms" != timeout ] && [ "$ms" -lt 10000 ]; echo $?) "SIGTERM during a hung refresh (30 s timeout): stopped in ${ms} ms (< 10000)"

# A reload that lengthens the interval moves the staleness limit with it:
# with --interval 0.2 and --refresh-timeout 0.5 a verdict is stale after
# 1.1 s; after SIGHUP with interval 3 s (config file beats nothing here: the
# flags are gone from the file's view, so use the environment), the verdict
# must still be served as current 2 s after the last refresh.
printf 'healthy\n%s\n' "$(date +%s)" > "$T/health"
compose "$T/sf.json" "{\"health_check\":true,\"health_status_file\":\"$T/health\"}"
printf '{"interval":0.2,"refresh_timeout":0.5}' > "$T/reload.json"
"$BIN" -c "$T/reload.json" --listen "unix:$T/reload.sock" --compose-file "$T/sf.json" 2>"$T/reload.log" &
rl=$!
PIDS+=($rl)
wait_for 20 test -S "$T/reload.sock"
wait_for 20 sh -c "curl -s --unix-socket $T/reload.sock -X POST 'http://x/prpc/v1/Health?json' -d '{}' | grep -q '\"healthy\":true'"
ok $? "reload: healthy before the reload"
printf '{"interval":3,"refresh_timeout":0.5}' > "$T/reload.json"
kill -HUP "$rl"
wait_for 20 grep -q "reload: interval" "$T/reload.log"
ok $? "reload: the interval change is logged"
stale=0
for _ in $(seq 25); do
	health "$T/reload.sock" | grep -q '"healthy":true' || stale=$((stale + 1))
	sleep 0.1
done
is "$stale" 0 "reload: the longer interval does not make the verdict look stale"
agent_stop "$rl" reload

# An unusable app-compose.json does not take the agent down: it is served
# (healthy:false, no entries, the file and field named, not its path), logged
# once, read again on every refresh until it is usable, then kept until a
# SIGHUP reads it again.
REL_ERR='{"healthy":false,"unhealthy":[],"error":"app-compose.json: requirements.health_status_file: must be an absolute path"}'
cp "$T/rel.json" "$T/m.json"
"$BIN" --listen "unix:$T/m.sock" --compose-file "$T/m.json" --interval 0.2 --log-level debug \
	2>"$T/m.log" &
m=$!
PIDS+=($m)
wait_for 20 test -S "$T/m.sock"
ok $? "unusable app-compose.json: the agent serves"
is "$(health "$T/m.sock")" "$REL_ERR" "unusable app-compose.json: healthy:false, the field named"
refreshes() { grep -c 'refresh (timer) took' "$T/m.log"; }
n=$(refreshes)
wait_for 20 sh -c "[ \$(grep -c 'refresh (timer) took' '$T/m.log') -ge $((n + 3)) ]"
is "$(grep -c 'must be an absolute path' "$T/m.log")" 1 "unusable app-compose.json: logged once"
is "$(health "$T/m.sock")" "$REL_ERR" "unusable app-compose.json: still served after refreshes"
cp "$T/ok.json" "$T/m.json"
wait_for 20 sh -c "curl -s --unix-socket $T/m.sock -X POST 'http://x/prpc/v1/Health?json' -d '{}' | grep -q '\"healthy\":true'"
ok $? "app-compose.json usable: read again on a refresh, healthy (gating off)"
ok $(grep -q 'app-compose.json is usable now' "$T/m.log"; echo $?) "app-compose.json usable: logged"
cp "$T/rel.json" "$T/m.json"
n=$(refreshes)
wait_for 20 sh -c "[ \$(grep -c 'refresh (timer) took' '$T/m.log') -ge $((n + 3)) ]"
is "$(health "$T/m.sock")" '{"healthy":true,"unhealthy":[],"error":""}' \
	"app-compose.json usable: kept (measured, it does not change during a boot)"
kill -HUP "$m"
wait_for 20 sh -c "curl -s --unix-socket $T/m.sock -X POST 'http://x/prpc/v1/Health?json' -d '{}' | grep -q 'must be an absolute path'"
ok $? "SIGHUP reads app-compose.json again"
ok $(kill -0 "$m"; echo $?) "SIGHUP with an unusable app-compose.json: still up"
agent_stop "$m" "unusable app-compose.json"
rm -f "$T/m.json"
"$BIN" --listen "unix:$T/m2.sock" --compose-file "$T/m.json" 2>"$T/m2.log" &
m=$!
PIDS+=($m)
wait_for 20 test -S "$T/m2.sock"
is "$(health "$T/m2.sock")" '{"healthy":false,"unhealthy":[],"error":"app-compose.json: does not exist"}' \
	"missing app-compose.json: served, the path not shown"
like "$(cat "$T/m2.log")" "app-compose.json: does not exist \\($T/m.json\\)" "missing app-compose.json: the log has the path"
agent_stop "$m" "missing app-compose.json"

# A SIGHUP that turns gating on says "not determined yet" at once, not after
# the first refresh (Docker here never answers; the refresh timeout is 30 s).
cp "$T/ok.json" "$T/g.json"
"$BIN" --listen "unix:$T/g.sock" --compose-file "$T/g.json" --runtime-file "$T/runtime.json" \
	--docker-host "unix://$T/hang.sock" --refresh-timeout 30 --interval 60 2>"$T/g.log" &
g=$!
PIDS+=($g)
wait_for 20 test -S "$T/g.sock"
is "$(health "$T/g.sock")" '{"healthy":true,"unhealthy":[],"error":""}' "gating off: healthy"
cp "$T/gated.json" "$T/g.json"
start=$(date +%s%N)
kill -HUP "$g"
wait_for 20 sh -c "curl -s --unix-socket $T/g.sock -X POST 'http://x/prpc/v1/Health?json' -d '{}' | grep -q '<health>'"
ms=$(( ($(date +%s%N) - start) / 1000000 ))
ok $([ "$ms" -lt 10000 ]; echo $?) "SIGHUP turning gating on: not determined yet in ${ms} ms (< 10000; the refresh has 30 s)"
is "$(health "$T/g.sock")" \
	'{"healthy":false,"unhealthy":[{"name":"<health>","status":"health has not been determined yet"}],"error":""}' \
	"SIGHUP turning gating on: the <health> entry"
agent_stop "$g" "gating turned on"

# A reload that does not change the source keeps the failure count: two
# reloads after one failure make three failures in a row, and the error is
# served (a reset count would keep "not determined yet" forever).
"$BIN" --listen "unix:$T/k.sock" --compose-file "$T/gated.json" --runtime-file "$T/runtime.json" \
	--docker-host "unix://$T/none.sock" --interval 60 --log-level debug 2>"$T/k.log" &
k=$!
PIDS+=($k)
wait_for 20 grep -q 'refresh failed: ' "$T/k.log"
ok $? "reload count: the first refresh failed"
kill -HUP "$k"
wait_for 20 grep -q 'refresh failed again (2 in a row)' "$T/k.log"
ok $? "reload count: the refresh after a SIGHUP is the second failure"
is "$(health "$T/k.sock")" \
	'{"healthy":false,"unhealthy":[{"name":"<health>","status":"health has not been determined yet"}],"error":""}' \
	"reload count: two failures keep the previous verdict"
kill -HUP "$k"
wait_for 20 sh -c "curl -s --unix-socket $T/k.sock -X POST 'http://x/prpc/v1/Health?json' -d '{}' | grep -q 'cannot reach'"
is "$(health "$T/k.sock")" '{"healthy":false,"unhealthy":[],"error":"cannot reach the container runtime"}' \
	"reload count: the third failure, across reloads, is served"
agent_stop "$k" "reload count"

# agent_stop's own bound (tests/lib/tap.sh): an agent that does not stop
# (here frozen by SIGSTOP) is killed once the bound has passed, and its
# point fails, naming it, saying where it was and what its log ended with.
# In a command substitution, so that its failed point is its output, not
# this test's.
out=$(
	TAP_N=0 TAP_FAILED=0
	"$BIN" --listen "unix:$T/stuck.sock" --compose-file "$T/ok.json" 2>"$T/stuck.log" &
	s=$!
	echo "pid=$s"
	wait_for 20 test -S "$T/stuck.sock"
	kill -STOP "$s"
	AGENT_STOP_LIMIT=2 agent_stop "$s" "frozen"
	echo "rc=$? status=$AGENT_STATUS ms=$AGENT_STOP_MS"
)
stuck=$(printf '%s\n' "$out" | sed -n 's/^pid=//p')
like "$out" 'not ok 1 - agent frozen: SIGTERM stops it' "agent_stop: an agent that does not stop fails its point, named"
like "$out" '# agent frozen \(pid [0-9]+\): still running 2 s after SIGTERM: state T .*; killed' \
	"agent_stop: the diagnostic says it was killed after the bound, and where it was"
like "$out" 'rc=1 status=137 ms=timeout' "agent_stop: returns 1; the agent ended by SIGKILL"
ok $([ -n "$stuck" ] && pid_gone "$stuck"; echo $?) "agent_stop: the frozen agent is gone"

done_testing
