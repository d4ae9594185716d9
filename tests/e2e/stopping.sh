#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# A container being stopped is unhealthy at once (issue 29), on a real
# dockerd: the agent's timer is 60 s, so whatever changes within seconds
# came through Docker's events. `docker stop -t 8` of a healthy container
# whose process ignores SIGTERM: Docker says "running healthy" for 8 s, the
# agent "stopping" within a fraction of a second (the time is printed); a
# `docker kill -s HUP` (a reload) is not a stop; a Compose recreate is never
# healthy from its first kill until the new container is; a service without
# a container (removed, about to be created again) holds the app unhealthy
# for at most --service-gap (kept across a reload), then is forgotten; the
# recreate's gap is judged by the default 60 s bound, so that a slow Compose
# on a loaded machine cannot run the 8 s one out on the way.
# tests/run: tsan
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
# A second agent for the gap of a recreate, with a short bound and timer.
healthd_start gap "$DH_T/rt.json" --interval 1 --service-gap 8 --log-level debug
wait_for 30 healthd_query_is gap "$HEALTHD_OK"
is "$(healthd_query gap)" "$HEALTHD_OK" "gap agent (--service-gap 8 --interval 1): healthy"

# --- docker stop: stopping on the kill event, long before the container dies ---
STOPPING=$(healthd_expect false stop_web_1 "stopping (last health check: healthy)")
t0=$(dh_now_ms)
"$DH_DOCKER" stop -t 8 stop_web_1 >/dev/null 2>&1 &
STOP_PID=$!
dh_track "$STOP_PID"
wait_for 30 healthd_query_is ev "$STOPPING"
t1=$(dh_now_ms)
ms=$((t1 - t0))
is "$(healthd_query ev)" "$STOPPING" "agent: stop_web_1 is stopping"
is "$(dh_state stop_web_1)" "running healthy" "runtime: ...while Docker still says running healthy"
# The agent's own share: from the kill Docker logged to the answer seen
# (which polls every 50 ms). The container takes 8 s to die, and the timer
# is 60 s away. Measured from the kill, not from the command: a loaded
# machine's docker CLI can take seconds to start, which is not the agent's.
kill_ns=$("$DH_DOCKER" events --since "$((t0 / 1000 - 1))" --until "$((t1 / 1000 + 1))" \
	--filter container=stop_web_1 --filter event=kill --format '{{.TimeNano}}' | head -n1)
[ -n "$kill_ns" ] && ms=$((t1 - kill_ns / 1000000))
[ "$ms" -lt 5000 ]
ok $? "agent: stopping served ${ms} ms after Docker's kill event (< 5000, the default interval; $((t1 - t0)) ms after docker stop was run)"
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

# --- a Compose recreate: never healthy from its first kill until the new one is ---
# Compose 1.29 stops the old container, renames it, creates and starts the
# new one, then removes the old: each step is judged (stopping, exited,
# created, starting); the journal's verdict changes show the sequence.
verdict_lines() { grep -c ": verdict: $1" "$LOG"; }
old_id=$("$DH_DOCKER" inspect -f '{{.Id}}' stop_web_1)
h0=$(verdict_lines healthy) u0=$(verdict_lines unhealthy)
dh_compose stop stopping.yml up -d --force-recreate -t 2 web >"$DH_T/recreate.log" 2>&1
ok $? "docker-compose up -d --force-recreate -t 2 web"
dh_expect_state 30 stop_web_1 "running healthy"
new_id=$("$DH_DOCKER" inspect -f '{{.Id}}' stop_web_1)
[ -n "$new_id" ] && [ "$new_id" != "$old_id" ]
ok $? "runtime: stop_web_1 is a new container"
wait_for 30 healthd_query_is ev "$HEALTHD_OK"
is "$(healthd_query ev)" "$HEALTHD_OK" "agent: healthy once the new container is"
is "$(($(verdict_lines healthy) - h0))" 1 "agent: healthy said once, at the end, not in between"
first=$(grep ": verdict: unhealthy" "$LOG" | sed -n "$((u0 + 1))p")
like "$first" 'verdict: unhealthy: stop_web_1: stopping \(' "agent: the recreate's first verdict was stopping (the kill)"
diag "the recreate's verdicts: $(grep -E ': verdict: ' "$LOG" | tail -n +$((h0 + u0 + 1)) |
	sed 's/.*verdict: //' | tr '\n' '/')"

# --- a service without a container: held until one is back, then judged ---
# The events agent, whose bound is the default 60 s: how long Compose takes
# to bring web back on a loaded machine is no part of what is tested here
# (the gap agent's 8 s bound can run out on the way, and then healthy in
# between is right). The bound itself is the next part's.
GAPPED=$(healthd_expect false "<service:web>" \
	"no container (being recreated, or removed: unhealthy for at most 60 s)")
e0=$(grep -c ': verdict: healthy$' "$LOG")
t0=$(dh_now_ms)
"$DH_DOCKER" rm -f stop_web_1 >/dev/null
ok $? "docker rm -f stop_web_1"
wait_for 30 healthd_query_is ev "$GAPPED"
is "$(healthd_query ev)" "$GAPPED" "agent: <service:web> while web has no container, api healthy"
dh_compose stop stopping.yml up -d web >"$DH_T/up-web.log" 2>&1
ok $? "docker-compose up -d web: a new container"
dh_expect_state 30 stop_web_1 "running healthy"
wait_for 30 healthd_query_is ev "$HEALTHD_OK"
is "$(healthd_query ev)" "$HEALTHD_OK" "agent: healthy once the new container is"
diag "web had no healthy container for $(($(dh_now_ms) - t0)) ms"
is "$(($(grep -c ': verdict: healthy$' "$LOG") - e0))" 1 \
	"agent: healthy said once, at the end, not in between"

# --- a service removed for good: held for the bound, then forgotten ---
GAPPED=$(healthd_expect false "<service:web>" \
	"no container (being recreated, or removed: unhealthy for at most 8 s)")
wait_for 30 healthd_query_is gap "$HEALTHD_OK"
is "$(healthd_query gap)" "$HEALTHD_OK" "gap agent: healthy with the new web"
t0=$(dh_now_ms)
"$DH_DOCKER" rm -f stop_web_1 >/dev/null
ok $? "docker rm -f stop_web_1, for good"
wait_for 30 healthd_query_is gap "$GAPPED"
is "$(healthd_query gap)" "$GAPPED" "gap agent: <service:web> after its removal"
# A reload that keeps the source keeps what was seen, as it keeps the
# failure count: the gap goes on.
GLOG=$DH_T/hd-gap.log
reloads() { grep -c ': reloaded' "$GLOG"; }
more_reloads() { [ "$(reloads)" -gt "$1" ]; }
r0=$(reloads)
kill -HUP "$HD_PID_gap"
wait_for 30 more_reloads "$r0"
ok $? "gap agent: reloaded (SIGHUP)"
g=$(healthd_query gap)
if [ $(($(dh_now_ms) - t0)) -lt 6000 ]; then
	is "$g" "$GAPPED" "gap agent: still <service:web> after the reload"
else
	ok 0 "gap agent: still <service:web> after the reload # SKIP the reload took past the bound"
fi
wait_for 30 healthd_query_is gap "$HEALTHD_OK"
ms=$(($(dh_now_ms) - t0))
is "$(healthd_query gap)" "$HEALTHD_OK" "gap agent: healthy again after the bound"
# The bound counts from the last refresh that saw web, at most an interval
# (1 s) before the removal began; it is seen at the first refresh past it.
[ "$ms" -ge 7000 ] && [ "$ms" -lt 20000 ]
ok $? "gap agent: held ${ms} ms (the 8 s bound, give or take the 1 s interval)"

healthd_sanitizer_clean
ok $? "agent: no sanitizer report"
dockerd_stop
ok $? "dockerd and everything it started are gone"
done_testing
