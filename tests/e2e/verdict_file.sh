#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The verdict file (issue 21) on the host, no container runtime: an app with
# gating off is served healthy:true, so the file says healthy and only the
# agent's own rules can make it say anything else. Checked: the file after
# the first refresh, in the status-file format; a drain and a resume reach it
# at once (the timer is 60 s away: only the control thread's wake explains
# a prompt write); a folder that goes missing is a failure logged once with
# the path, shown in /status and /metrics, recovered once; no public
# listener with `listen` empty, the control socket still serving; then a
# stop writes unhealthy and holds (a second signal ends the hold), while an
# agent with a public listener leaves the file at stop; a relative path is
# refused at start. Then, through a Docker stand-in: the one writer (issue 28
# §1) with a runtime that stops answering, and the agent's own container,
# listed unhealthy, not judged.
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
# Conditions for wait_for, which runs its command again each time (a
# "$(...)" in its arguments would be expanded once, before it starts).
line1_is() { [ "$(line1)" = "$1" ]; }

"$BIN" --listen= --control-socket "$CTL" --compose-file "$T/app.json" --interval 60 \
	--verdict-file "$OUT/status" >"$T/agent.log" 2>&1 &
AGENT=$!
PIDS+=($AGENT)
wait_for 20 line1_is healthy
is "$(line1)" healthy "the first refresh writes healthy (gating off is served healthy:true)"
like "$(cat "$OUT/status")" $'^healthy\n[0-9]+$' "two lines: the word and the Unix time"
t=$(sed -n 2p "$OUT/status")
ok $([ $((t - $(date +%s))) -le 1 ] && [ $(($(date +%s) - t)) -le 30 ]; echo $?) \
	"the time is the time of the write ($t, now $(date +%s))"
like "$(head -n1 "$T/agent.log")" 'serving on no public listener;' "listen empty: no public listener"
is "$(ss -Hltnp 2>/dev/null | grep -c "pid=$AGENT,")" 0 "no TCP socket is listening in the agent"
is "$(st | json 'd["verdict_file"]["last_written"]')" healthy "the control socket serves; /status shows the write"
like "$("$BIN" status --control-socket "$CTL")" "^  $OUT/status: healthy at [0-9T:.-]+Z \(writes: [0-9]+, failed: 0\)\$" \
	"dstack-healthd status shows the file, what was written last and when"

"$BIN" drain --control-socket "$CTL" >"$T/drain.out" 2>&1
ok $? "dstack-healthd drain"
wait_for 10 line1_is unhealthy
is "$(line1)" unhealthy "the drain reaches the file at once (the timer is 60 s away)"
"$BIN" resume --control-socket "$CTL" >/dev/null 2>&1
wait_for 10 line1_is healthy
is "$(line1)" healthy "the resume too"
# No public listener: a sidecar's stop writes unhealthy at once and holds
# (tests/e2e/sidecar.sh shows the whole hold); a second signal ends it.
kill -TERM "$AGENT"
wait_for 10 line1_is unhealthy
is "$(line1)" unhealthy "a sidecar's stop writes unhealthy at once"
wait_for 20 grep -q 'stop: the verdict file says unhealthy; holding' "$T/agent.log"
ok $? "...and holds its exit ($(grep -o 'at most [0-9.]* s' "$T/agent.log"): not in a container, no stop grace bounds it)"
"$BIN" resume --control-socket "$CTL" >"$T/resume.out" 2>&1
is "$?:$(st | json 'd["drain"]["draining"]'):$(st | json 'd["drain"]["stopping"]')" "1:true:true" \
	"resume cannot lift a stopping sidecar's drain (exit 1; /status: draining, stopping)"
kill -TERM "$AGENT"
reap 20 "$AGENT"
is "$?" 0 "a second SIGTERM ends the hold: the agent stops (exit 0)"
like "$(cat "$T/agent.log")" 'stop: held [0-9.]+ s \(cut short by a second signal\); exiting with the verdict file unhealthy' \
	"it says the hold was cut short"
is "$(line1)" unhealthy "it exited leaving the file unhealthy"
ok $([ -z "$(find "$OUT" -name 'status.*')" ]; echo $?) "no temporary file is left beside it"

# A folder that goes missing, then comes back: refreshes every 0.2 s. This
# agent has a public listener: its stop leaves the file as it was (its
# unit's drain is the way out of rotation, docs/operator.md "Draining").
rm -rf "$OUT"
"$BIN" --listen "unix:$T/public.sock" --control-socket "$CTL" --compose-file "$T/app.json" \
	--interval 0.2 --verdict-file "$OUT/status" >"$T/agent2.log" 2>&1 &
AGENT=$!
PIDS+=($AGENT)
failing() { [ "$(st | json 'd["verdict_file"]["failures"]')" -ge 5 ]; }
wait_for 20 failing
ok $? "the failing writes are counted in /status"
is "$(grep -c "warning: verdict file $OUT/status: " "$T/agent2.log")" 1 \
	"the failure is logged once, at warning, with the path"
is "$(st | json 'd["verdict_file"]["failing"]')" true "/status says it is failing"
like "$("$BIN" status --control-socket "$CTL")" "^  failing: verdict file $OUT/status: cannot create a temporary file beside it: No such file or directory" \
	"...and dstack-healthd status says why"
like "$(curl -s --unix-socket "$CTL" http://x/metrics)" $'dstack_healthd_verdict_file_failing 1\n' \
	"/metrics says so too"
mkdir -p "$OUT"
wait_for 20 line1_is healthy
is "$(line1)" healthy "the folder back, the file is written again"
wait_for 10 grep -q "notice: verdict file $OUT/status written again" "$T/agent2.log"
is "$(grep -c 'written again' "$T/agent2.log")" 1 "the recovery is logged once, at notice"
kill -TERM "$AGENT"
reap 20 "$AGENT"
is "$?:$(line1)" "0:healthy" "with a public listener a stop leaves the file as it was (exit 0)"

# --- A runtime that accepts and never answers (issue 28 §1). A Docker
# stand-in serves a healthy project, then hangs every request: each refresh
# is stuck for the whole refresh timeout (12 s). The file must follow a drain
# and a resume at once all the same, a refresh that ends after the drain
# must not write back the healthy it was judging, and a verdict gone stale
# must not be written healthy. Each write is a rename (a new inode), never a
# write in place that a reader could catch half done.
WEB=5a1de0c0a3e34b1d9c2f7e6b8a4d3c2b1a0f9e8d7c6b5a4f3e2d1c0b9a8f7e6d
LIST='[{"Id":"'$WEB'","Names":["/demo-web-1"],"Labels":{"com.docker.compose.project":"demo","com.docker.compose.service":"web"},"State":"running","Health":{"Status":"healthy","FailingStreak":0}}]'
: >"$T/routes"
: >"$T/d.log"
python3 tests/fakes/docker_fake.py --listen "unix:$T/d.sock" --log "$T/d.log" \
	--routes-file "$T/routes" "/_ping=file:tests/fakes/docker/ping-1.52.http" \
	"/v1\.52/containers/json\?.*=status:200:$LIST" "/v1\.52/events.*=hang" &
PIDS+=($!)
wait_for 30 python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).connect(sys.argv[1])' "$T/d.sock"
printf '{"manifest_version":"3","name":"t","runner":"docker-compose","requirements":{"health_check":true}}\n' \
	>"$T/gated.json"
printf '{"project":"demo","namespace":"","snapshotter":""}\n' >"$T/rt.json"
rm -f "$OUT/status"
"$BIN" --listen= --control-socket "$CTL" --compose-file "$T/gated.json" --runtime-file "$T/rt.json" \
	--docker-host "unix://$T/d.sock" --interval 0.5 --refresh-timeout 12 --stop-hold 0.5 \
	--verdict-file "$OUT/status" >"$T/agent3.log" 2>&1 &
AGENT=$!
PIDS+=($AGENT)
wait_for 30 line1_is healthy
is "$(line1)" healthy "a healthy project through the Docker stand-in: the file says healthy"
ino() { stat -c %i "$OUT/status" 2>/dev/null; }
ino_not() { [ "$(ino)" != "$1" ]; }
I0=$(ino)
wait_for 10 ino_not "$I0"
ok $([ "$(ino)" != "$I0" ]; echo $?) "each write replaces the file (a new inode), never writes into it"

# Every request hangs from now on; wait until a refresh is stuck in one.
n0=$(wc -l <"$T/d.log")
echo '.*=hang' >"$T/routes"
log_grew() { [ "$(wc -l <"$T/d.log")" -gt "$1" ]; }
wait_for 20 log_grew "$n0"
stuck_since=$(date +%s%N)
ms_since() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
"$BIN" drain --control-socket "$CTL" >/dev/null 2>&1
t=$(date +%s%N)
wait_for 20 line1_is unhealthy
DRAIN_MS=$(ms_since "$t")
diag "drain: the file said unhealthy ${DRAIN_MS} ms after drain returned (a refresh stuck for $(( (t - stuck_since) / 1000000 )) ms then)"
ok $([ "$(line1)" = unhealthy ] && [ "$DRAIN_MS" -lt 5000 ]; echo $?) \
	"a drain reaches the file at once while a refresh is stuck (${DRAIN_MS} ms; the refresh has 12 s)"
"$BIN" resume --control-socket "$CTL" >/dev/null 2>&1
t=$(date +%s%N)
wait_for 20 line1_is healthy
RESUME_MS=$(ms_since "$t")
ok $([ "$(line1)" = healthy ] && [ "$RESUME_MS" -lt 5000 ]; echo $?) \
	"so does a resume (${RESUME_MS} ms)"
"$BIN" drain --control-socket "$CTL" >/dev/null 2>&1
wait_for 20 line1_is unhealthy
I1=$(ino)
# The stuck refresh fails at its limit and publishes the healthy it keeps
# (one failure is not a verdict); the write it asks for must say what is
# served, the drain, not what that refresh judged.
failed_once() { [ "$(st | json 'd["refresh"]["failures_in_row"]')" -ge 1 ]; }
wait_for 30 failed_once
failed_at=$(date +%s%N)
wait_for 10 ino_not "$I1"
ok $([ "$(ino)" != "$I1" ] && [ "$(line1)" = unhealthy ]; echo $?) \
	"the refresh that ended after the drain wrote the drain's unhealthy, not its own healthy"
# A verdict gone stale (older than 3 intervals and the timeout, 13.5 s) is
# not written healthy. A reload cancels the stuck refresh without publishing
# and starts one that is stuck in turn: the last publish ages past its limit
# before anything publishes again.
waited() { [ "$(ms_since "$1")" -ge "$2" ]; }
wait_for 20 waited "$failed_at" 5000
"$BIN" reload --control-socket "$CTL" >/dev/null 2>&1
stale() { st | json 'd["drain"]["app_verdict"]["error"]' | grep -q 'old;'; }
wait_for 20 stale
ok $? "the published verdict went stale ($(st | json 'd["drain"]["app_verdict"]["error"]'))"
I2=$(ino)
"$BIN" resume --control-socket "$CTL" >/dev/null 2>&1
wait_for 10 ino_not "$I2"
is "$(line1)" unhealthy "a resume while the verdict is stale writes unhealthy"
kill -TERM "$AGENT"
reap 30 "$AGENT"

# --- The agent's own container reporting a health state of its own. Docker
# from API 1.52 puts each running container's health in the list, so a
# sidecar with a failing healthcheck of its own is listed unhealthy: it must
# not be judged. The agent runs in a UTS namespace whose hostname is the
# short id of a container the stand-in knows (no mountinfo line names one
# on a host: the hostname is what is left), without a runtime file: the
# project comes from that container's label.
if unshare --uts true 2>/dev/null; then
	SELF=0123456789ab
	SELFID=${SELF}cdef0123456789abcdef0123456789abcdef0123456789abcdef
	SELF_INSPECT='{"Id":"'$SELFID'","Name":"/demo-healthd-1","State":{"Status":"running","Running":true,"Paused":false,"StartedAt":"2026-12-02T10:00:00Z","Health":{"Status":"unhealthy","FailingStreak":3,"Log":[]}},"Config":{"Healthcheck":{"Test":["CMD","/no/such/probe"]},"Labels":{"com.docker.compose.project":"demo","com.docker.compose.service":"healthd"}}}'
	LIST2='[{"Id":"'$WEB'","Names":["/demo-web-1"],"Labels":{"com.docker.compose.project":"demo","com.docker.compose.service":"web"},"State":"running","Health":{"Status":"healthy","FailingStreak":0}},{"Id":"'$SELFID'","Names":["/demo-healthd-1"],"Labels":{"com.docker.compose.project":"demo","com.docker.compose.service":"healthd"},"State":"running","Health":{"Status":"unhealthy","FailingStreak":3}}]'
	printf '%s\n' "/v1\.52/containers/$SELF/json=status:200:$SELF_INSPECT" \
		"/v1\.52/containers/json\?.*=status:200:$LIST2" >"$T/routes"
	rm -f "$OUT/status"
	unshare --uts sh -c 'hostname "$1" && shift && exec "$@"' sh "$SELF" \
		"$BIN" --listen= --control-socket "$CTL" --compose-file "$T/gated.json" \
		--runtime-file "$T/none.json" --docker-host "unix://$T/d.sock" --interval 0.5 \
		--stop-hold 0.1 --log-level debug --verdict-file "$OUT/status" >"$T/agent4.log" 2>&1 &
	AGENT=$!
	PIDS+=($AGENT)
	wait_for 30 line1_is healthy
	is "$(line1)" healthy "the agent's own container, listed unhealthy, is not judged: the file says healthy"
	like "$(st | json '[c["skipped"] for c in d["containers"] if c["name"] == "demo-healthd-1"]')" \
		'"the agent itself"' "status shows it skipped as the agent itself"
	like "$(cat "$T/agent4.log")" "running in container $SELF of Compose project demo \\(found by its hostname\\)" \
		"found by its hostname, the last resort, as no mountinfo line names a container here"
	kill -TERM "$AGENT"
	wait_for 10 grep -q 'stop: the verdict file says unhealthy' "$T/agent4.log"
	kill -TERM "$AGENT"
	reap 20 "$AGENT"
else
	diag "unshare --uts is not allowed here: the own-container point is skipped"
fi

ERR=$("$BIN" --verdict-file rel/status --compose-file "$T/app.json" 2>&1)
is "$?:$ERR" "2:dstack-healthd: error: --verdict-file: 'rel/status' is not an absolute path" \
	"a relative path stops the agent at start (exit 2)"
ok $(! grep -qE 'AddressSanitizer|runtime error' "$T"/agent*.log; echo $?) \
	"no sanitizer report in the agents' logs"
done_testing
