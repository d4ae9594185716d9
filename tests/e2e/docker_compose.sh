#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The container source against a real dockerd and real Compose projects: one
# project per scenario, all brought up at once on one private dockerd. Each
# scenario first asserts the state dockerd reports (so that it is known to
# produce what it claims), then the agent's verdict for it (--once), then a
# long-running agent whose runtime file appears after it started.
cd "$(dirname "$0")/../.." || exit 1
. tests/lib/tap.sh
. tests/lib/dockerd.sh

dockerd_start
diag "dockerd $("$DH_DOCKER" version -f '{{.Server.Version}} (API {{.Server.APIVersion}})')"

# project:file: every scenario's project, started concurrently. hbrk's up
# fails by design (a service whose program does not exist).
PROJECTS="hall:pair.yml hstart:starting.yml hunh:unhealthy.yml hstop:pair.yml
hpause:pair.yml hnone:no_healthcheck.yml hdis:disabled.yml
himg:image_only.yml hanchor:anchor.yml hleft:pair.yml hleftx:pair.yml
hrun:oneoff.yml hloop:crashloop.yml hbrk:broken_start.yml"

up_all() {
	local pf pids="" p rc=0 want
	for pf in $PROJECTS; do
		dh_compose "${pf%%:*}" "${pf#*:}" up -d >"$DH_T/up-${pf%%:*}.log" 2>&1 &
		dh_track $!
		pids="$pids $!:${pf%%:*}"
	done
	for p in $pids; do
		reap 300 "${p%%:*}"
		case "$?:${p#*:}" in
		0:hbrk) want="failed" ;;
		[1-9]*:hbrk | 0:*) continue ;;
		*) want="succeeded" ;;
		esac
		diag "docker-compose up ${p#*:} should have $want:"
		sed 's/^/#   /' "$DH_T/up-${p#*:}.log"
		rc=1
	done
	return $rc
}

up_all
ok $? "docker-compose up -d of every scenario's project (hbrk's fails)"

# --- bring the projects into the states the scenarios need ----------------

# A container with a healthcheck that passed, then was stopped.
dh_expect_state 20 hstop_web_1 "running healthy"
"$DH_DOCKER" stop -t 5 hstop_web_1 >/dev/null
ok $? "docker stop hstop_web_1"

# One that passed, then was paused.
dh_expect_state 20 hpause_web_1 "running healthy"
"$DH_DOCKER" pause hpause_web_1 >/dev/null
ok $? "docker pause hpause_web_1"

# A whole project left behind, exited, next to the app (hleft).
dh_expect_state 20 hleftx_web_1 "running healthy"
dh_compose hleftx pair.yml stop -t 5 >"$DH_T/stop-hleftx.log" 2>&1
ok $? "docker-compose stop of the leftover project hleftx"

# A one-off `compose run -d` whose probe fails, next to a passing web.
dh_compose hrun oneoff.yml run -d job >"$DH_T/run-hrun.log" 2>&1
ok $? "docker-compose run -d job (a one-off of hrun)"
ONEOFF=$("$DH_DOCKER" ps -a --format '{{.Names}}' \
	--filter label=com.docker.compose.project=hrun \
	--filter label=com.docker.compose.oneoff=True)
like "$ONEOFF" '^hrun_job_run_[0-9a-f]+$' "runtime: the one-off is labelled oneoff=True"

# --- what dockerd says each scenario is ------------------------------------

dh_expect_state 20 hall_api_1 "running healthy"
dh_expect_state 20 hall_web_1 "running healthy"
dh_expect_state 20 hstart_api_1 "running healthy"
dh_expect_state 20 hstart_web_1 "running starting"
dh_expect_state 20 hunh_a_1 "running starting"
dh_expect_state 20 hunh_b_1 "running unhealthy"
dh_expect_state 20 hunh_c_1 "running healthy"
# Docker re-marks a stopped or paused container unhealthy.
dh_expect_state 20 hstop_web_1 "exited unhealthy"
dh_expect_state 20 hstop_api_1 "running healthy"
dh_expect_state 20 hpause_web_1 "paused unhealthy"
dh_expect_state 20 hpause_api_1 "running healthy"
dh_expect_state 20 hnone_api_1 "running -"
dh_expect_state 20 hnone_web_1 "running -"
dh_expect_state 20 hdis_web_1 "running -"
is "$("$DH_DOCKER" image inspect -f '{{json .Config.Healthcheck.Test}}' healthd-test-hc:1)" \
	'["CMD-SHELL","true"]' "runtime: the image of hdis declares a HEALTHCHECK"
is "$("$DH_DOCKER" inspect -f '{{json .Config.Healthcheck.Test}}' hdis_web_1)" \
	'["NONE"]' "runtime: hdis_web_1 has it disabled"
dh_expect_state 20 himg_web_1 "running healthy"
is "$("$DH_DOCKER" inspect -f '{{.Config.Healthcheck.Test}}' himg_web_1)" \
	'[CMD-SHELL true]' "runtime: himg_web_1's healthcheck is the image's"
dh_expect_state 20 hanchor_web_1 "running healthy"
dh_expect_state 20 hanchor_worker_1 "running healthy"
is "$("$DH_DOCKER" inspect -f '{{.Config.Healthcheck.Test}}' hanchor_web_1 hanchor_worker_1 | tr '\n' ' ')" \
	'[CMD true] [CMD-SHELL true] ' "runtime: the anchored healthchecks reached both containers"
dh_expect_state 20 hleft_api_1 "running healthy"
dh_expect_state 20 hleft_web_1 "running healthy"
dh_expect_state 20 hleftx_api_1 "exited unhealthy"
dh_expect_state 20 hleftx_web_1 "exited unhealthy"
dh_expect_state 20 hrun_web_1 "running healthy"
[ -n "$ONEOFF" ] && dh_expect_state 20 "$ONEOFF" "running unhealthy"
is "$("$DH_DOCKER" ps -aq --filter label=com.docker.compose.project=hempty)" "" \
	"runtime: project hempty has no container"
dh_expect_state 20 hbrk_web_1 "running healthy"
dh_expect_state 20 hbrk_broken_1 "created -"
is "$("$DH_DOCKER" inspect -f '{{.Config.Healthcheck.Test}}' hbrk_broken_1)" \
	'[CMD true]' "runtime: hbrk_broken_1 declares a healthcheck that never ran"
dh_expect_state 20 hloop_web_1 "running healthy"

# A crash loop that has backed off to a restart delay of >= 3.2 s, so that
# the state still holds while the agent looks.
loop_backed_off() {
	dh_state_is hloop_loop_1 "restarting unhealthy" &&
		[ "$("$DH_DOCKER" inspect -f '{{.RestartCount}}' hloop_loop_1)" -ge 5 ]
}
wait_for 40 loop_backed_off
ok $? "runtime: hloop_loop_1 is restarting (RestartCount $("$DH_DOCKER" inspect -f '{{.RestartCount}}' hloop_loop_1)), health unhealthy"

# --- the agent's verdicts ----------------------------------------------------

# expect_once PROJECT RC WANT_JSON DESCRIPTION
expect_once() {
	healthd_runtime "$DH_T/rt-$1.json" "$1"
	healthd_once "$DH_T/rt-$1.json"
	is "$HD_OUT" "$3" "agent: $4"
	is "$HD_RC" "$2" "agent: $1 exits $2"
}

# expect_compose_entry DESCRIPTION ERE: one <compose> entry, no error.
expect_compose_entry() {
	is "$(printf '%s' "$HD_OUT" | dh_json '[d["healthy"], [e["name"] for e in d["unhealthy"]], d["error"]]')" \
		'[false,["<compose>"],""]' "agent: $1: one <compose> entry, no error"
	like "$(printf '%s' "$HD_OUT" | dh_json 'd["unhealthy"][0]["status"]')" "$2" \
		"agent: $1: the reason"
	is "$HD_RC" 1 "agent: $1: exits 1"
}

expect_once hall 0 "$HEALTHD_OK" "all healthy passes"
expect_once hstart 1 "$(healthd_expect false hstart_web_1 starting)" \
	"starting is not healthy"
expect_once hunh 1 "$(healthd_expect false hunh_a_1 starting hunh_b_1 unhealthy)" \
	"unhealthy and starting, sorted by name, healthy one left out"
expect_once hstop 1 \
	"$(healthd_expect false hstop_web_1 "exited (last health check: unhealthy)")" \
	"a stopped container with a healthcheck"
expect_once hpause 1 \
	"$(healthd_expect false hpause_web_1 "paused (last health check: unhealthy)")" \
	"a paused container with a healthcheck"
expect_once himg 0 "$HEALTHD_OK" "a healthcheck only the image declares counts"
expect_once hanchor 0 "$HEALTHD_OK" "healthchecks from a YAML anchor count"
expect_once hleft 0 "$HEALTHD_OK" \
	"an exited leftover of another project (hleftx) does not count"
expect_once hleftx 1 "$(healthd_expect false \
	hleftx_api_1 "exited (last health check: unhealthy)" \
	hleftx_web_1 "exited (last health check: unhealthy)")" \
	"the leftover project itself is judged unhealthy"
expect_once hrun 0 "$HEALTHD_OK" "a failing compose-run one-off is skipped"

# expect_one_entry PROJECT NAME ERE DESCRIPTION: exactly one entry, for NAME.
expect_one_entry() { # [reuse]: judge the HD_OUT of the last run
	if [ -z "${5:-}" ]; then
		healthd_runtime "$DH_T/rt-$1.json" "$1"
		healthd_once "$DH_T/rt-$1.json"
	fi
	is "$(printf '%s' "$HD_OUT" | dh_json '[d["healthy"], [e["name"] for e in d["unhealthy"]], d["error"]]')" \
		"[false,[\"$2\"],\"\"]" "agent: $4: one entry, $2"
	like "$(printf '%s' "$HD_OUT" | dh_json 'd["unhealthy"][0]["status"]')" "$3" \
		"agent: $4: its status"
	is "$HD_RC" 1 "agent: $1 exits 1"
}

expect_one_entry hbrk hbrk_broken_1 '^created' \
	"a container that declares a healthcheck but never started"
# The agent must look while the container is restarting: the same restart
# count and state before and after, or look again.
restarts() { "$DH_DOCKER" inspect -f '{{.RestartCount}}' hloop_loop_1; }
held=1
for attempt in 1 2 3 4 5; do
	wait_for 40 loop_backed_off || break
	n=$(restarts)
	healthd_runtime "$DH_T/rt-hloop.json" hloop
	healthd_once "$DH_T/rt-hloop.json"
	if loop_backed_off && [ "$(restarts)" = "$n" ]; then
		held=0
		break
	fi
done
ok $held "runtime: hloop_loop_1 stayed restarting while the agent looked"
expect_one_entry hloop hloop_loop_1 '^restarting \(last health check: unhealthy\)$' \
	"a crash-looping container" reuse

NO_HC='[Hh]ealth ?[Cc]heck'
for p in hnone hdis; do
	healthd_runtime "$DH_T/rt-$p.json" "$p"
	healthd_once "$DH_T/rt-$p.json"
	expect_compose_entry "$p: nothing declares a healthcheck" "$NO_HC"
	printf '%s' "$HD_OUT" | grep -q 'no container has been created yet'
	ok $((!$?)) "agent: $p: not reported as 'no container has been created yet'"
done

NONE_YET='no container has been created yet'
healthd_runtime "$DH_T/rt-hempty.json" hempty
healthd_once "$DH_T/rt-hempty.json"
expect_compose_entry "project without containers" "$NONE_YET"
healthd_once "$DH_T/rt-missing.json"
expect_compose_entry "no runtime file" "$NONE_YET"

# --- a long-running agent: the runtime file appears, then changes ------------

healthd_start late "$DH_T/rt-late.json" --interval 0.5 --refresh-timeout 10
ok $? "agent: long-running agent listening"
wait_for 30 healthd_query_like late "\"<compose>\".*$NONE_YET"
like "$(healthd_query late)" "^\\{\"healthy\":false,\"unhealthy\":\\[\\{\"name\":\"<compose>\",\"status\":\"[^\"]*$NONE_YET[^\"]*\"\\}\\],\"error\":\"\"\\}$" \
	"agent: before the runtime file exists: no container has been created yet"
healthd_runtime "$DH_T/rt-late.json" hall
wait_for 30 healthd_query_is late "$HEALTHD_OK"
is "$(healthd_query late)" "$HEALTHD_OK" \
	"agent: the runtime file appears (project hall): healthy, without a restart"
healthd_runtime "$DH_T/rt-late.json" hunh
want=$(healthd_expect false hunh_a_1 starting hunh_b_1 unhealthy)
wait_for 30 healthd_query_is late "$want"
is "$(healthd_query late)" "$want" "agent: the runtime file names hunh: its verdict"
kill -0 "$HD_PID_late" 2>/dev/null
ok $? "agent: the same agent process answered throughout"
healthd_stop late

healthd_sanitizer_clean
ok $? "agent: no sanitizer report"
dockerd_stop
ok $? "dockerd and everything it started are gone"
done_testing
