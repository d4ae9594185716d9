#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The verdict file (issue 21) on the host, no container runtime: an app with
# gating off is served healthy:true, so the file says healthy and only the
# agent's own rules can make it say anything else. Checked: the file after
# the first refresh, in the status-file format; a drain and a resume reach it
# at once (the timer is 60 s away: only the control thread's wake explains
# a prompt write); a folder that goes missing is a failure logged once with
# the path, shown in /status and /metrics, recovered once; no public
# listener with `listen` empty, the control socket still serving; a stop
# leaves the file; a relative path is refused at start.
set -u
cd "$(dirname "$0")/../.."
. tests/lib/tap.sh
BIN=$PWD/${HEALTHD_BUILD:-build}/dstack-healthd
[ -x "$BIN" ] || skip_all "$BIN not built"
command -v curl >/dev/null 2>&1 || skip_all "curl is not installed"
. tests/lib/scratch.sh

CTL=$T/ctl.sock
OUT=$T/out
mkdir -p "$OUT"
printf '{"manifest_version":"3","name":"t","runner":"docker-compose","requirements":{"health_check":false}}\n' \
	>"$T/app.json"
st() { curl -s --max-time 5 --unix-socket "$CTL" http://x/status; }
json() { python3 -c 'import json,sys; d=json.load(sys.stdin); v=eval(sys.argv[1]); print(v if isinstance(v,str) else json.dumps(v,separators=(",",":")))' "$1"; }
line1() { head -n1 "$OUT/status" 2>/dev/null; }

"$BIN" --listen= --control-socket "$CTL" --compose-file "$T/app.json" --interval 60 \
	--verdict-file "$OUT/status" >"$T/agent.log" 2>&1 &
AGENT=$!
PIDS+=($AGENT)
wait_for 20 test "$(line1)" = healthy
is "$(line1)" healthy "the first refresh writes healthy (gating off is served healthy:true)"
like "$(cat "$OUT/status")" $'^healthy\n[0-9]+$' "two lines: the word and the Unix time"
t=$(sed -n 2p "$OUT/status")
ok $([ $((t - $(date +%s))) -le 1 ] && [ $(($(date +%s) - t)) -le 30 ]; echo $?) \
	"the time is the time of the write ($t, now $(date +%s))"
like "$(head -n1 "$T/agent.log")" 'serving on no public listener;' "listen empty: no public listener"
is "$(ss -Hltnp 2>/dev/null | grep -c "pid=$AGENT,")" 0 "no TCP socket is listening in the agent"
is "$(st | json 'd["verdict_file"]["last_written"]')" healthy "the control socket serves; /status shows the write"

"$BIN" drain --control-socket "$CTL" >"$T/drain.out" 2>&1
ok $? "dstack-healthd drain"
wait_for 10 test "$(line1)" = unhealthy
is "$(line1)" unhealthy "the drain reaches the file at once (the timer is 60 s away)"
"$BIN" resume --control-socket "$CTL" >/dev/null 2>&1
wait_for 10 test "$(line1)" = healthy
is "$(line1)" healthy "the resume too"
kill -TERM "$AGENT"
reap 30 "$AGENT"
is "$?" 0 "the agent stops (exit 0)"
is "$(line1)" healthy "the stop left the file as it was"
ok $([ -z "$(find "$OUT" -name 'status.*')" ]; echo $?) "no temporary file is left beside it"

# A folder that goes missing, then comes back: refreshes every 0.2 s.
rm -rf "$OUT"
"$BIN" --listen= --control-socket "$CTL" --compose-file "$T/app.json" --interval 0.2 \
	--verdict-file "$OUT/status" >"$T/agent2.log" 2>&1 &
AGENT=$!
PIDS+=($AGENT)
failing() { [ "$(st | json 'd["verdict_file"]["failures"]')" -ge 5 ]; }
wait_for 20 failing
ok $? "the failing writes are counted in /status"
is "$(grep -c "warning: verdict file $OUT/status: " "$T/agent2.log")" 1 \
	"the failure is logged once, at warning, with the path"
is "$(st | json 'd["verdict_file"]["failing"]')" true "/status says it is failing"
like "$(curl -s --unix-socket "$CTL" http://x/metrics)" $'dstack_healthd_verdict_file_failing 1\n' \
	"/metrics says so too"
mkdir -p "$OUT"
wait_for 20 test "$(line1)" = healthy
is "$(line1)" healthy "the folder back, the file is written again"
wait_for 10 grep -q "notice: verdict file $OUT/status written again" "$T/agent2.log"
is "$(grep -c 'written again' "$T/agent2.log")" 1 "the recovery is logged once, at notice"
kill -TERM "$AGENT"
reap 30 "$AGENT"

ERR=$("$BIN" --verdict-file rel/status --compose-file "$T/app.json" 2>&1)
is "$?:$ERR" "2:dstack-healthd: error: --verdict-file: 'rel/status' is not an absolute path" \
	"a relative path stops the agent at start (exit 2)"
ok $(! grep -qE 'AddressSanitizer|runtime error' "$T"/agent*.log; echo $?) \
	"no sanitizer report in the agents' logs"
done_testing
