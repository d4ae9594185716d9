#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# A container being stopped is unhealthy at once (issue 29), on a real
# dockerd: the agent's timer is 60 s, so whatever changes within seconds
# came through Docker's events. `docker stop -t 8` of a healthy container
# whose process ignores SIGTERM: Docker says "running healthy" for 8 s, the
# agent "stopping" within a fraction of a second (the time is printed); a
# `docker kill -s HUP` (a reload) is not a stop; a Compose recreate is never
# healthy from its first kill until the new container is.
cd "$(dirname "$0")/../.." || exit 1
. tests/lib/tap.sh
. tests/lib/dockerd.sh

dockerd_start
dh_compose stop stopping.yml up -d >"$DH_T/up.log" 2>&1
ok $? "docker-compose up -d"
dh_expect_state 30 stop_web_1 "running healthy"
dh_expect_state 30 stop_api_1 "running healthy"

healthd_runtime "$DH_T/rt.json" stop
LOG=$DH_T/hd-ev.log
healthd_start ev "$DH_T/rt.json" --interval 60 --log-level debug
ok $? "agent: listening, --interval 60"
log_has() { grep -q -- "$1" "$LOG"; }
wait_for 30 log_has "Docker events: following project stop"
ok $? "agent: follows the events of project stop"
wait_for 30 healthd_query_is ev "$HEALTHD_OK"
is "$(healthd_query ev)" "$HEALTHD_OK" "agent: healthy"

# --- docker stop: stopping on the kill event, long before the container dies ---
STOPPING=$(healthd_expect false stop_web_1 "stopping (last health check: healthy)")
t0=$(dh_now_ms)
"$DH_DOCKER" stop -t 8 stop_web_1 >/dev/null 2>&1 &
STOP_PID=$!
dh_track "$STOP_PID"
wait_for 30 healthd_query_is ev "$STOPPING"
ms=$(($(dh_now_ms) - t0))
is "$(healthd_query ev)" "$STOPPING" "agent: stop_web_1 is stopping"
is "$(dh_state stop_web_1)" "running healthy" "runtime: ...while Docker still says running healthy"
# Measured from the command, so the docker CLI's own start is in it; the
# container takes 8 s to die, and the timer is 60 s away.
[ "$ms" -lt 5000 ]
ok $? "agent: stopping served ${ms} ms after docker stop was run (< 5000, the default interval)"
log_has 'Docker event: stop_web_1 kill, signal 15'
ok $? "agent: through the kill event, signal 15"
reap 30 "$STOP_PID"
ok $? "docker stop returned"
EXITED=$(healthd_expect false stop_web_1 "exited (last health check: unhealthy)")
wait_for 30 healthd_query_is ev "$EXITED"
is "$(healthd_query ev)" "$EXITED" "agent: then exited, as Docker says"

# A start forgets the stop: judged by Docker's health again.
"$DH_DOCKER" start stop_web_1 >/dev/null
dh_expect_state 30 stop_web_1 "running healthy"
wait_for 30 healthd_query_is ev "$HEALTHD_OK"
is "$(healthd_query ev)" "$HEALTHD_OK" "agent: healthy again once started and healthy"

# --- docker kill -s HUP: a reload, not a stop -----------------------------------
# The kill's refresh is the only one (the timer is 60 s away): once a refresh
# has run after the event was logged, what it published is the answer.
refreshes() { grep -c 'refresh (' "$LOG"; }
more_refreshes() { [ "$(refreshes)" -gt "$1" ]; }
n0=$(refreshes)
"$DH_DOCKER" kill -s HUP stop_web_1 >/dev/null
ok $? "docker kill -s HUP stop_web_1"
wait_for 30 log_has 'Docker event: stop_web_1 kill, signal 1$'
ok $? "agent: saw the kill, signal 1"
wait_for 30 more_refreshes "$n0"
ok $? "agent: refreshed after it"
is "$(healthd_query ev)" "$HEALTHD_OK" "agent: still healthy (SIGHUP is not web's stop signal)"
is "$(dh_state stop_web_1)" "running healthy" "runtime: web still running healthy"

healthd_sanitizer_clean
ok $? "agent: no sanitizer report"
dockerd_stop
ok $? "dockerd and everything it started are gone"
done_testing
