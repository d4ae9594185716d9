#!/bin/bash
# dockerd goes away under a long-running agent and comes back. A refresh that
# fails keeps the previous verdict for the first 2 failures; from the 3rd the
# verdict is healthy:false with an empty list and an error that says what
# failed. When dockerd is back on the same data root (and has restarted the
# restart: always containers) the same agent recovers to healthy.
cd "$(dirname "$0")/../.." || exit 1
. tests/lib/tap.sh
. tests/lib/dockerd.sh

dockerd_start
dh_compose hrst restart.yml up -d >"$DH_T/up-hrst.log" 2>&1
ok $? "docker-compose up -d hrst"
dh_expect_state 20 hrst_api_1 "running healthy"
dh_expect_state 20 hrst_web_1 "running healthy"

INTERVAL_MS=1000
healthd_runtime "$DH_T/rt-hrst.json" hrst
healthd_start rst "$DH_T/rt-hrst.json" --interval 1 --refresh-timeout 2
ok $? "agent: long-running agent listening"
wait_for 15 healthd_query_is rst "$HEALTHD_OK"
is "$(healthd_query rst)" "$HEALTHD_OK" "agent: hrst is healthy"

# Sample the verdict from the moment dockerd is told to stop until the first
# answer that carries an error (or 20 s). Each line: "<ms since TERM> <body>".
t0=$(dh_now_ms)
kill -TERM "$DH_DOCKERD_PID"
while :; do
	body=$(healthd_query rst)
	echo "$(( $(dh_now_ms) - t0 )) $body" >>"$DH_T/samples"
	case $body in *'"error":""}') ;; *) break ;; esac
	[ $(( $(dh_now_ms) - t0 )) -lt 20000 ] || break
	sleep 0.05
done
first=$(tail -n 1 "$DH_T/samples")
first_ms=${first%% *}
first_body=${first#* }
before=$(head -n -1 "$DH_T/samples" | cut -d' ' -f2- | sort -u)
diag "$(wc -l <"$DH_T/samples") samples; first one with an error after ${first_ms} ms:"
diag "  $first_body"

is "$before" "$HEALTHD_OK" \
	"agent: until then, every answer is the previous verdict"
[ "$first_ms" -ge $(( 2 * INTERVAL_MS - 200 )) ]
ok $? "agent: the first 2 failed refreshes keep the previous verdict (error after ${first_ms} ms >= 2 intervals)"
[ -n "$(printf '%s' "$first_body" | jq -r .error 2>/dev/null)" ] &&
	[ "$first_ms" -le $(( 6 * INTERVAL_MS + 2000 )) ]
ok $? "agent: the 3rd failure turns the verdict (after ${first_ms} ms)"
is "$(printf '%s' "$first_body" | jq -c '[.healthy, .unhealthy]' 2>&1)" \
	'[false,[]]' "agent: healthy:false with an empty list"
like "$(printf '%s' "$first_body" | jq -r .error 2>&1)" \
	'[Dd]ocker|[Cc]onnect|[Rr]efused|[Ss]ocket|[Nn]o such file' \
	"agent: the error says what failed"

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
