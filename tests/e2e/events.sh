#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Docker's events under a long-running agent whose timer is 60 s, so that any
# change seen within seconds was seen through the event stream: a container
# turning unhealthy and back; events of another project ignored; dockerd
# restarted under the stream (the agent reconnects and reacts to the next
# event); and a prompt stop with the stream open.
# tests/run: tsan
cd "$(dirname "$0")/../.." || exit 1
. tests/lib/tap.sh
. tests/lib/dockerd.sh

dockerd_start

cp tests/e2e/compose/toggle.yml "$DH_T/ev.yml"
ev_compose() { # ev_compose PROJECT ARGS...
	local p=$1
	shift
	timeout 120 docker-compose --no-ansi -p "$p" -f "$DH_T/ev.yml" "$@"
}
ev_compose hev up -d >"$DH_T/up-hev.log" 2>&1
ok $? "docker-compose up -d hev (the app)"
ev_compose hoth up -d >"$DH_T/up-hoth.log" 2>&1
ok $? "docker-compose up -d hoth (another project)"
dh_expect_state 20 hev_web_1 "running healthy"
dh_expect_state 20 hoth_web_1 "running healthy"

LOG=$DH_T/hd-ev.log
UNHEALTHY=$(healthd_expect false hev_web_1 unhealthy)
refreshes() { grep -c 'refresh (' "$LOG"; }
log_has() { grep -q -- "$1" "$LOG"; }

healthd_runtime "$DH_T/rt-hev.json" hev
healthd_start ev "$DH_T/rt-hev.json" --interval 60 --log-level debug
ok $? "agent: listening, --interval 60"
wait_for 30 log_has "Docker events: following project hev"
ok $? "agent: follows the events of project hev"
wait_for 30 healthd_query_is ev "$HEALTHD_OK"
is "$(healthd_query ev)" "$HEALTHD_OK" "agent: hev is healthy"

# flip NAME HOW WANT_HEALTH: make the probe fail (rm) or pass (touch) and
# wait until dockerd says so.
flip() {
	"$DH_DOCKER" exec "$1" "$2" /ok
	wait_for 15 dh_state_is "$1" "running $3"
}

# --- a container turning unhealthy, and healthy again ------------------------
t0=$(dh_now_ms)
flip hev_web_1 rm unhealthy
wait_for 30 healthd_query_is ev "$UNHEALTHY"
is "$(healthd_query ev)" "$UNHEALTHY" "agent: hev_web_1 turned unhealthy"
ms=$(($(dh_now_ms) - t0))
[ "$ms" -lt 30000 ]
ok $? "agent: ...seen ${ms} ms after the probe was made to fail, not at the 60 s tick"
log_has 'Docker event: hev_web_1 health_status: unhealthy'
ok $? "agent: through the health_status event"
t0=$(dh_now_ms)
flip hev_web_1 touch healthy
wait_for 30 healthd_query_is ev "$HEALTHD_OK"
is "$(healthd_query ev)" "$HEALTHD_OK" \
	"agent: healthy again $(($(dh_now_ms) - t0)) ms after the probe passes"

# --- another project's events cause nothing ------------------------------------
# hoth flips both ways; then hev flips once, as a barrier: the stream keeps
# the daemon's order, so once hev's change is served, any event of hoth has
# been seen already. Exactly one refresh, hev's, may have run meanwhile.
before=$(refreshes)
flip hoth_web_1 rm unhealthy
ok $? "runtime: hoth_web_1 unhealthy"
flip hoth_web_1 touch healthy
ok $? "runtime: hoth_web_1 healthy again"
flip hev_web_1 rm unhealthy
wait_for 30 healthd_query_is ev "$UNHEALTHY"
is "$(healthd_query ev)" "$UNHEALTHY" "agent: the barrier (hev unhealthy) is served"
is "$(($(refreshes) - before))" 1 "agent: one refresh in all, for hev's event, none for hoth's"
is "$(grep -c 'Docker event: hoth' "$LOG")" 0 "agent: no event of hoth reached the agent"
flip hev_web_1 touch healthy
wait_for 30 healthd_query_is ev "$HEALTHD_OK"
is "$(healthd_query ev)" "$HEALTHD_OK" "agent: hev healthy again"

# --- dockerd restarted under the stream ----------------------------------------
reconnects() { grep -c 'Docker events: following project hev' "$LOG"; }
n0=$(reconnects)
dockerd_halt
dh_ping
ok $((!$?)) "dockerd is stopped"
dockerd_launch
ok $? "dockerd is back on the same data root"
dh_expect_state 30 hev_web_1 "running healthy"
more_reconnects() { [ "$(reconnects)" -gt "$n0" ]; }
wait_for 20 more_reconnects
ok $? "agent: subscribed again after dockerd came back"
log_has 'Docker events: following project hev again'
ok $? "agent: says so, once"
wait_for 30 healthd_query_is ev "$HEALTHD_OK"
is "$(healthd_query ev)" "$HEALTHD_OK" "agent: healthy after the restart (a refresh followed the reconnect)"
t0=$(dh_now_ms)
flip hev_web_1 rm unhealthy
wait_for 30 healthd_query_is ev "$UNHEALTHY"
is "$(healthd_query ev)" "$UNHEALTHY" "agent: reacts to the next event"
ms=$(($(dh_now_ms) - t0))
[ "$ms" -lt 30000 ]
ok $? "agent: ...within ${ms} ms"

# --- the runtime file names another project: the stream follows it ----------------
flip hev_web_1 touch healthy
wait_for 30 healthd_query_is ev "$HEALTHD_OK"
healthd_runtime "$DH_T/rt-hev.json" hoth
wait_for 15 log_has "Docker events: following project hoth"
ok $? "agent: follows project hoth once the runtime file names it"
t0=$(dh_now_ms)
flip hoth_web_1 rm unhealthy
want=$(healthd_expect false hoth_web_1 unhealthy)
wait_for 30 healthd_query_is ev "$want"
is "$(healthd_query ev)" "$want" "agent: hoth_web_1 turned unhealthy, $(($(dh_now_ms) - t0)) ms after its probe was made to fail"

# --- stopping with the stream open -------------------------------------------------
agent_stop "$HD_PID_ev" "the events stream open"
ms=$AGENT_STOP_MS
ok $([ "$ms" != timeout ] && [ "$ms" -lt 5000 ]; echo $?) \
	"agent: stopped ${ms} ms after SIGTERM with the events stream open (< 5000)"

# --- a hung stream never delays the timer; a dropping one backs off -------------
# A scripted peer (tests/fakes/docker_fake.py) answers the refresh's queries
# (no containers) but never answers GET /events, or closes it at once.
# at_least N COMMAND...: COMMAND's output, a count, is at least N (for
# wait_for, which must run the count afresh at each poll).
at_least() {
	local n=$1
	shift
	[ "$("$@")" -ge "$n" ]
}
FAKE_PID=
fake() { # fake EVENTS_ACTION: (re)starts the peer on $DH_T/fake.sock
	[ -n "$FAKE_PID" ] && dh_kill "$FAKE_PID"
	rm -f "$DH_T/fake.sock"
	: >"$DH_T/fake.log"
	python3 tests/fakes/docker_fake.py --listen "unix:$DH_T/fake.sock" --log "$DH_T/fake.log" \
		'/_ping=status:200:"OK"' '/v1\.24/containers/json.*=status:200:[]' \
		"/v1\\.24/events.*=$1" &
	FAKE_PID=$!
	dh_track "$FAKE_PID"
	wait_for 30 python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).connect(sys.argv[1])' \
		"$DH_T/fake.sock"
}
NONE_YET=$(healthd_expect false "<compose>" "no container has been created yet")
LOG=$DH_T/hd-hung.log
fake hang
healthd_start hung "$DH_T/rt-hev.json" --docker-host "unix://$DH_T/fake.sock" \
	--interval 0.5 --refresh-timeout 10 --log-level debug
wait_for 30 healthd_query_is hung "$NONE_YET"
is "$(healthd_query hung)" "$NONE_YET" "hung stream: the refreshes answer"
wait_for 30 grep -q "^/v1.24/events?" "$DH_T/fake.log"
ok $? "hung stream: the agent asked for /events"
n0=$(grep -c 'refresh (timer)' "$LOG")
t0=$(dh_now_ms)
wait_for 30 at_least $((n0 + 6)) grep -c 'refresh (timer)' "$LOG"
ms=$(($(dh_now_ms) - t0))
# 3 s at the interval; one refresh held up by the stream until the refresh
# timeout (10 s) would make it 13 s.
[ "$ms" -lt 10000 ]
ok $? "hung stream: 6 timer refreshes in ${ms} ms at a 0.5 s interval (< 10000), the stream hanging"
wait_for 30 grep -q 'Docker events: GET /events: timed out' "$LOG"
ok $? "hung stream: given up after the refresh timeout, and said so"
agent_stop "$HD_PID_hung" "the events stream hung"
ms=$AGENT_STOP_MS
ok $([ "$ms" != timeout ] && [ "$ms" -lt 5000 ]; echo $?) "hung stream: stopped ${ms} ms after SIGTERM (< 5000)"

LOG=$DH_T/hd-drop.log
fake close
healthd_start drop "$DH_T/rt-hev.json" --docker-host "unix://$DH_T/fake.sock" \
	--interval 60 --log-level debug
t0=$(dh_now_ms)
wait_for 30 at_least 4 grep -c '^/v1.24/events?' "$DH_T/fake.log"
ok $? "dropping stream: the agent tries again"
ms=$(($(dh_now_ms) - t0))
# 4 tries wait 100 + 200 + 400 ms between them: at least 0.7 s.
[ "$ms" -ge 600 ]
ok $? "dropping stream: 4 tries took ${ms} ms (backoff, no hot loop)"
is "$(grep -c 'warning: Docker events' "$LOG")" 1 "dropping stream: one warning, repeats at debug"
healthd_stop drop

healthd_sanitizer_clean
ok $? "agent: no sanitizer report"
dockerd_stop
ok $? "dockerd and everything it started are gone"
done_testing
