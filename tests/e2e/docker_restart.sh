#!/bin/bash
# dockerd fails under a long-running agent, twice, and comes back each time.
#
# First it hangs (SIGSTOP): every refresh runs into its deadline, and nothing
# kicks the agent's events thread, so refreshes keep the timer's pace and the
# rule can be timed: the first 2 failed refreshes keep the previous verdict,
# the 3rd turns it into healthy:false with an empty list and an error that
# says what failed. SIGCONT: the same agent recovers.
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
healthd_start rst "$DH_T/rt-hrst.json" --interval 1 --refresh-timeout 2
ok $? "agent: long-running agent listening"
wait_for 15 healthd_query_is rst "$HEALTHD_OK"
is "$(healthd_query rst)" "$HEALTHD_OK" "agent: hrst is healthy"

# sample_until_error LIMIT_MS: answers from t0 on, one line each,
# "<ms since t0> <body>", into $DH_T/samples, until the first one that
# carries an error. Sets first_ms, first_body and before (the distinct
# answers before it).
sample_until_error() {
	local body
	: >"$DH_T/samples"
	while :; do
		body=$(healthd_query rst)
		echo "$(( $(dh_now_ms) - t0 )) $body" >>"$DH_T/samples"
		case $body in *'"error":""}') ;; *) break ;; esac
		[ $(( $(dh_now_ms) - t0 )) -lt "$1" ] || break
		sleep 0.05
	done
	first=$(tail -n 1 "$DH_T/samples")
	first_ms=${first%% *}
	first_body=${first#* }
	before=$(head -n -1 "$DH_T/samples" | cut -d' ' -f2- | sort -u)
	diag "$(wc -l <"$DH_T/samples") answers; the first with an error after ${first_ms} ms:"
	diag "  $first_body"
}

# expect_error_verdict WHAT: the shape of first_body.
expect_error_verdict() {
	is "$(printf '%s' "$first_body" | dh_json '[d["healthy"], d["unhealthy"]]')" \
		'[false,[]]' "agent: $1: healthy:false with an empty list"
	like "$(printf '%s' "$first_body" | dh_json 'd["error"]')" "$2" \
		"agent: $1: the error says what failed"
}

# --- dockerd hangs ---------------------------------------------------------

t0=$(dh_now_ms)
kill -STOP "$DH_DOCKERD_PID"
sample_until_error 30000
is "$before" "$HEALTHD_OK" \
	"agent: dockerd hung: until the error, every answer is the previous verdict"
# Failure k ends at t1 + kT + (k-1)I, with T the deadline, I the interval
# and t1 in [0, I): the 3rd no earlier than 3T+2I after the hang, the 2nd
# before 2T+2I.
[ "$first_ms" -ge $(( 2 * TIMEOUT_MS + 2 * INTERVAL_MS )) ] &&
	[ "$first_ms" -le $(( 3 * TIMEOUT_MS + 3 * INTERVAL_MS + 5000 )) ]
ok $? "agent: dockerd hung: the first 2 failed refreshes keep the previous verdict, the 3rd does not (error after ${first_ms} ms)"
expect_error_verdict "dockerd hung" '[Tt]ime|[Dd]eadline|[Dd]ocker'
kill -CONT "$DH_DOCKERD_PID"
wait_for 15 healthd_query_is rst "$HEALTHD_OK"
is "$(healthd_query rst)" "$HEALTHD_OK" "agent: dockerd answers again: healthy"

# --- dockerd stops -----------------------------------------------------------

t0=$(dh_now_ms)
kill -TERM "$DH_DOCKERD_PID"
sample_until_error 20000
is "$before" "$HEALTHD_OK" \
	"agent: dockerd stopping: until the error, every answer is the previous verdict"
expect_error_verdict "dockerd stopped" \
	'[Dd]ocker|[Cc]onnect|[Rr]efused|[Ss]ocket|[Nn]o such file'

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
