#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# dockerd fails under long-running agents and comes back.
#
# It hangs (SIGSTOP): every refresh runs into its deadline T and, in a steady
# state, nothing kicks the agent's events thread, so refreshes keep the
# timer's pace I and the rule can be timed: the first 2 failed refreshes keep
# the previous verdict, the 3rd turns it into healthy:false with an empty list
# and an error that says what failed. Failure k ends at t1 + kT + (k-1)I with
# t1 in [0, I): the 3rd no earlier than 3T+2I after the hang, the 2nd before
# 2T+2I. SIGCONT: the same agent recovers. This is done twice: right after an
# agent subscribed to Docker's events (the subscription kicks a refresh,
# which then hangs), and in a steady state.
#
# Then it is stopped for real (SIGTERM): dockerd stops the containers as it
# goes, and the agent ends up with the error verdict; started again on the
# same data root (which restarts the restart: always containers), the same
# agent recovers to healthy.
cd "$(dirname "$0")/../.." || exit 1
. tests/lib/tap.sh
. tests/lib/dockerd.sh

dockerd_start
dh_compose hrst restart.yml up -d >"$DH_T/up-hrst.log" 2>&1
ok $? "docker-compose up -d hrst"
dh_expect_state 20 hrst_api_1 "running healthy"
dh_expect_state 20 hrst_web_1 "running healthy"

INTERVAL_MS=1000
TIMEOUT_MS=2000
healthd_runtime "$DH_T/rt-hrst.json" hrst

# sample_until_error NAME LIMIT_MS: agent NAME's answers from t0 on, one line
# each, "<ms since t0> <body>", into $DH_T/samples, until the first one that
# carries an error. Sets first_ms, first_body and before (the distinct
# answers before it).
sample_until_error() {
	local body
	: >"$DH_T/samples"
	while :; do
		body=$(healthd_query "$1")
		echo "$(( $(dh_now_ms) - t0 )) $body" >>"$DH_T/samples"
		case $body in *'"error":""}') ;; *) break ;; esac
		[ $(( $(dh_now_ms) - t0 )) -lt "$2" ] || break
		sleep 0.05
	done
	first=$(tail -n 1 "$DH_T/samples")
	first_ms=${first%% *}
	first_body=${first#* }
	before=$(head -n -1 "$DH_T/samples" | cut -d' ' -f2- | sort -u)
	diag "$(wc -l <"$DH_T/samples") answers; the first with an error after ${first_ms} ms:"
	diag "  $first_body"
}

# expect_error_verdict WHAT ERE: the shape of first_body.
expect_error_verdict() {
	is "$(printf '%s' "$first_body" | dh_json '[d["healthy"], d["unhealthy"]]')" \
		'[false,[]]' "agent: $1: healthy:false with an empty list"
	like "$(printf '%s' "$first_body" | dh_json 'd["error"]')" "$2" \
		"agent: $1: the error says what failed"
}

# hang_and_check NAME WHAT: SIGSTOP dockerd now, check the rule, SIGCONT.
hang_and_check() {
	t0=$(dh_now_ms)
	kill -STOP "$DH_DOCKERD_PID"
	sample_until_error "$1" 30000
	is "$before" "$HEALTHD_OK" \
		"agent: $2: until the error, every answer is the previous verdict"
	[ "$first_ms" -ge $(( 2 * TIMEOUT_MS + 2 * INTERVAL_MS )) ] &&
		[ "$first_ms" -le $(( 3 * TIMEOUT_MS + 3 * INTERVAL_MS + 5000 )) ]
	ok $? "agent: $2: the first 2 failed refreshes keep the previous verdict, the 3rd does not (error after ${first_ms} ms)"
	expect_error_verdict "$2" '^the container runtime took longer than the refresh timeout$'
	kill -CONT "$DH_DOCKERD_PID"
	wait_for 15 healthd_query_is "$1" "$HEALTHD_OK"
	is "$(healthd_query "$1")" "$HEALTHD_OK" "agent: $2: dockerd answers again: healthy"
}

# The agent's debug log tells when its events subscription is up and when
# it is steady: the refresh the subscription kicked has run (the 3rd refresh
# logged after it at the latest) and the last one was the timer's, so that
# nothing is kicked or in flight when dockerd hangs.
subscribed() { grep -q 'Docker events: following project' "$DH_T/hd-$1.log"; }
steady() {
	local after
	after=$(sed -n '/Docker events: following project/,$p' "$DH_T/hd-$1.log" |
		grep -E 'refresh \((timer|event)\)')
	[ "$(printf '%s\n' "$after" | grep -c .)" -ge 3 ] &&
		printf '%s\n' "$after" | tail -n 1 | grep -q 'refresh (timer) took'
}

# --- dockerd hangs just after an agent subscribed ---------------------------

healthd_start kick "$DH_T/rt-hrst.json" --interval 1 --refresh-timeout 2 \
	--log-level debug
ok $? "agent: long-running agent listening"
wait_for 15 subscribed kick
ok $? "agent: subscribed to Docker's events"
# The rule is about the previous verdict: there must be one (healthy) when
# dockerd hangs. On a loaded machine the subscription came before the first
# refresh had ended, and every answer was "not determined yet".
wait_for 15 healthd_query_is kick "$HEALTHD_OK"
hang_and_check kick "dockerd hung after the agent subscribed"
if grep -q 'refresh (event) failed' "$DH_T/hd-kick.log"; then
	diag "an event-kicked refresh was in flight when dockerd hung"
else
	diag "no event-kicked refresh was in flight when dockerd hung (race not hit)"
fi
healthd_stop kick

# --- dockerd hangs in a steady state ----------------------------------------

healthd_start rst "$DH_T/rt-hrst.json" --interval 1 --refresh-timeout 2 \
	--log-level debug
ok $? "agent: long-running agent listening"
wait_for 15 healthd_query_is rst "$HEALTHD_OK"
is "$(healthd_query rst)" "$HEALTHD_OK" "agent: hrst is healthy"
wait_for 15 steady rst
ok $? "agent: steady (subscribed, last refresh the timer's)"
hang_and_check rst "dockerd hung"

# --- dockerd stops -----------------------------------------------------------

t0=$(dh_now_ms)
kill -TERM "$DH_DOCKERD_PID"
sample_until_error rst 20000
is "$before" "$HEALTHD_OK" \
	"agent: dockerd stopping: until the error, every answer is the previous verdict"
expect_error_verdict "dockerd stopped" \
	"^(cannot reach the container runtime|the container runtime's answer could not be read|the container runtime answered with an error status)\$"

dockerd_wait_exit
dh_ping
ok $((!$?)) "dockerd is stopped"
like "$(healthd_query rst)" '^\{"healthy":false,"unhealthy":\[\],"error":"[^"]+"\}$' \
	"agent: still healthy:false with an error while dockerd is down"

dockerd_launch
ok $? "dockerd started again on the same data root"
dh_expect_state 30 hrst_api_1 "running healthy"
dh_expect_state 30 hrst_web_1 "running healthy"
wait_for 15 healthd_query_is rst "$HEALTHD_OK"
is "$(healthd_query rst)" "$HEALTHD_OK" "agent: recovers to healthy"
kill -0 "$HD_PID_rst" 2>/dev/null
ok $? "agent: the same agent process answered throughout"
healthd_stop rst

healthd_sanitizer_clean
ok $? "agent: no sanitizer report"
dockerd_stop
ok $? "dockerd and everything it started are gone"
done_testing
