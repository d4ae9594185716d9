#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The app's Compose project as dstack's current guest images run it: Compose
# v2 (the Go plugin, `docker compose`) on a recent engine (issue 45 §3), on a
# private dockerd (tests/lib/dockerd.sh). Where Compose v2 differs from 1.29
# it writes other names (`-` for `_`: web-1, job-run-<hex>), creates the new
# container of a recreate before it stops the old, and has features 1.29 has
# not (up --wait, deploy.replicas, depends_on conditions, profiles); the
# agent must give the same app the same verdict. Each scenario first asserts
# what dockerd and Compose say (so that it is known to produce what it
# claims), then the agent's verdict: --once, and a long-running agent that
# follows one project through up --wait, stop, start, --force-recreate and
# down on Docker's events alone (its timer is 60 s away).
#
# Debian 12 has no Compose v2, so there it is skipped: tests/e2e/trixie.sh
# runs it in its Debian 13 root (docker.io 26, docker-compose 2), with the
# agent built there.
# tests/run: once
cd "$(dirname "$0")/../.." || exit 1
. tests/lib/tap.sh
DH_COMPOSE_V2=1
. tests/lib/dockerd.sh

"$DH_DOCKER" compose version >/dev/null 2>&1 ||
	skip_all "no Compose v2 here (Debian 12 has 1.29): tests/e2e/trixie.sh runs this in its Debian 13 root"
dockerd_start

# --- what runs here ----------------------------------------------------------
component() { # the version of one of the daemon's components
	"$DH_DOCKER" version -f "{{range .Server.Components}}{{if eq .Name \"$1\"}}{{.Version}}{{end}}{{end}}"
}
ENGINE=$("$DH_DOCKER" version -f '{{.Server.Version}}')
API=$("$DH_DOCKER" version -f '{{.Server.APIVersion}}')
CLI=$("$DH_DOCKER" version -f '{{.Client.Version}}')
COMPOSE=$("$DH_DOCKER" compose version --short)
diag "dockerd $ENGINE (API $API), containerd $(component containerd), runc $(component runc), docker CLI $CLI, Compose $COMPOSE"
like "$ENGINE" '^(2[6-9]|[3-9][0-9])\.' "dockerd $ENGINE (API $API), containerd $(component containerd), runc $(component runc): Docker 26 or later"
like "$COMPOSE" '^v?2\.' "docker CLI $CLI, Compose $COMPOSE: Compose v2"

# expect_once PROJECT RC WANT_JSON DESCRIPTION: the agent's --once verdict.
expect_once() {
	healthd_runtime "$DH_T/rt-$1.json" "$1"
	healthd_once "$DH_T/rt-$1.json"
	is "$HD_OUT" "$3" "agent: $4"
	is "$HD_RC" "$2" "agent: $1 exits $2"
}
NONE_YET=$(healthd_expect false "<compose>" "no container has been created yet")
# names PROJECT: the project's containers by name, sorted, on one line.
names() {
	"$DH_DOCKER" ps -a --filter "label=com.docker.compose.project=$1" \
		--format '{{.Names}}' | sort | tr '\n' ' '
}
label() { # label CONTAINER KEY
	"$DH_DOCKER" inspect -f "{{index .Config.Labels \"$2\"}}" "$1"
}

# --- up --wait ------------------------------------------------------------------
expect_once wup 1 "$NONE_YET" "before up: no container has been created yet"
dh_compose wup v2/pair.yml up -d --wait --wait-timeout 120 >"$DH_T/up-wup.log" 2>&1
ok $? "compose up -d --wait (wup) returned 0: Compose says every container is healthy"
expect_once wup 0 "$HEALTHD_OK" "right after up --wait: healthy, as Compose said"
is "$(names wup)" "wup-api-1 wup-web-1 " "runtime: v2 names the containers project-service-1"
is "$(label wup-web-1 com.docker.compose.oneoff)/$(label wup-web-1 com.docker.compose.service)/$(label wup-web-1 com.docker.compose.container-number)" \
	"False/web/1" "runtime: labels oneoff=False, service=web, container-number=1"
# dockerd may run in a root of its own (tests/e2e/trixie.sh): what a
# healthcheck or `docker exec` runs must see the container's root, not the
# machine's, or the scenarios below would test the machine's files.
"$DH_DOCKER" exec wup-web-1 test -e /bin/busybox && ! "$DH_DOCKER" exec wup-web-1 test -e /usr
ok $? "runtime: docker exec runs in the image's root (busybox, no /usr)"
diag "the com.docker.compose labels v2 writes: $("$DH_DOCKER" inspect -f \
	'{{range $k, $v := .Config.Labels}}{{$k}} {{end}}' wup-web-1 | tr ' ' '\n' |
	grep '^com\.docker\.compose\.' | sed 's/^com\.docker\.compose\.//' | tr '\n' ' ')"

# --- profiles, and an up --wait that fails ---------------------------------------
dh_compose wprof v2/profiles.yml up -d --wait --wait-timeout 120 >"$DH_T/up-wprof.log" 2>&1
ok $? "compose up -d --wait (wprof), no profile asked for"
is "$(names wprof)" "wprof-web-1 " "runtime: the services of profiles not asked for have no container"
expect_once wprof 0 "$HEALTHD_OK" "profiles not asked for: healthy (web passes)"
dh_compose wprof v2/profiles.yml --profile debug up -d --wait --wait-timeout 120 \
	>"$DH_T/up-wprof-debug.log" 2>&1
rc=$?
[ "$rc" -ne 0 ]
ok $? "compose --profile debug up -d --wait fails (exit $rc): debug turns unhealthy"
like "$(cat "$DH_T/up-wprof-debug.log")" 'wprof-debug-1.*unhealthy|unhealthy.*wprof-debug-1' \
	"runtime: Compose names wprof-debug-1 unhealthy"
dh_expect_state 20 wprof-debug-1 "running unhealthy"
expect_once wprof 1 "$(healthd_expect false wprof-debug-1 unhealthy)" \
	"the service of the profile asked for is judged like any other; the verdict is Compose's"

# --- one-off run containers ---------------------------------------------------------
dh_compose wrun v2/profiles.yml up -d --wait --wait-timeout 120 >"$DH_T/up-wrun.log" 2>&1
ok $? "compose up -d --wait (wrun)"
dh_compose wrun v2/profiles.yml run -d job >"$DH_T/run-wrun.log" 2>&1
ok $? "compose run -d job (a one-off of wrun, of a profile not asked for)"
ONEOFF=$("$DH_DOCKER" ps -a --format '{{.Names}}' \
	--filter label=com.docker.compose.project=wrun \
	--filter label=com.docker.compose.oneoff=True)
like "$ONEOFF" '^wrun-job-run-[0-9a-f]+$' "runtime: the one-off is named wrun-job-run-<hex> and labelled oneoff=True"
is "$(label "$ONEOFF" com.docker.compose.service)" job "runtime: ...and service=job"
dh_expect_state 20 "$ONEOFF" "running unhealthy"
expect_once wrun 0 "$HEALTHD_OK" "an unhealthy one-off (compose run) is skipped"
# down leaves one-offs (only --remove-orphans takes them).
dh_compose wrun v2/profiles.yml down -t 2 >"$DH_T/down-wrun.log" 2>&1
ok $? "compose down (wrun)"
is "$(names wrun)" "$ONEOFF " "runtime: down left the one-off alone"
expect_once wrun 1 "$NONE_YET" "a project with only a one-off left: no container has been created yet"

# --- replicas ----------------------------------------------------------------------
dh_compose wrep v2/replicas.yml up -d --wait --wait-timeout 120 >"$DH_T/up-wrep.log" 2>&1
ok $? "compose up -d --wait (wrep, deploy.replicas: 3)"
is "$(names wrep)" "wrep-web-1 wrep-web-2 wrep-web-3 " "runtime: three replicas, web-1 to web-3"
is "$(label wrep-web-3 com.docker.compose.container-number)" 3 "runtime: wrep-web-3 has container-number 3"
expect_once wrep 0 "$HEALTHD_OK" "three healthy replicas"
"$DH_DOCKER" exec wrep-web-2 rm /ok
dh_expect_state 20 wrep-web-2 "running unhealthy"
expect_once wrep 1 "$(healthd_expect false wrep-web-2 unhealthy)" \
	"one replica of three unhealthy: that one, by its name"
dh_compose wrep v2/replicas.yml up -d --scale web=5 >"$DH_T/scale5.log" 2>&1
ok $? "compose up -d --scale web=5"
dh_expect_state 30 wrep-web-5 "running healthy"
dh_expect_state 30 wrep-web-4 "running healthy"
expect_once wrep 1 "$(healthd_expect false wrep-web-2 unhealthy)" \
	"scaled to five: the new replicas pass, wrep-web-2 still fails"
"$DH_DOCKER" exec wrep-web-2 touch /ok
dh_expect_state 20 wrep-web-2 "running healthy"
expect_once wrep 0 "$HEALTHD_OK" "five healthy replicas"
dh_compose wrep v2/replicas.yml up -d --scale web=2 >"$DH_T/scale2.log" 2>&1
ok $? "compose up -d --scale web=2"
diag "after --scale web=2: $(names wrep)"
is "$(names wrep | wc -w)" 2 "runtime: two replicas left"
expect_once wrep 0 "$HEALTHD_OK" "scaled down to two healthy replicas"

# --- depends_on: condition: service_healthy ------------------------------------------
# up waits for db to be healthy before it starts web: meanwhile web exists,
# created and not started, and db is starting.
dh_compose wdep v2/depends.yml up -d --wait --wait-timeout 110 >"$DH_T/up-wdep.log" 2>&1 &
UP_PID=$!
dh_track "$UP_PID"
dh_expect_state 60 wdep-db-1 "running starting"
dh_expect_state 60 wdep-web-1 "created -"
expect_once wdep 1 "$(healthd_expect false wdep-db-1 starting \
	wdep-web-1 "created (last health check: none yet)")" \
	"db starting, web created and waiting for it: both named"
dh_child "$UP_PID"
ok $? "runtime: compose up is still waiting on db meanwhile"
"$DH_DOCKER" exec wdep-db-1 touch /ok
reap 120 "$UP_PID"
ok $? "compose up -d --wait (wdep) returned 0 once db was healthy"
expect_once wdep 0 "$HEALTHD_OK" "db healthy, web started and healthy"

# --- one project through its life, under a long-running agent --------------------
# The timer is 60 s away: what changes within seconds was seen through
# Docker 26's event stream.
LOG=$DH_T/hd-lc.log
log_has() { grep -q -- "$1" "$LOG"; }
verdict_lines() { grep -c ": verdict: $1" "$LOG"; }
healthd_runtime "$DH_T/rt-wlc.json" wlc
healthd_start lc "$DH_T/rt-wlc.json" --interval 60 --log-level debug
ok $? "agent: long-running agent listening, --interval 60"
wait_for 30 log_has "Docker events: following project wlc"
ok $? "agent: follows the events of project wlc"
wait_for 30 healthd_query_is lc "$NONE_YET"
is "$(healthd_query lc)" "$NONE_YET" "agent: before up: no container has been created yet"

dh_compose wlc v2/pair.yml up -d --wait --wait-timeout 120 >"$DH_T/up-wlc.log" 2>&1
ok $? "compose up -d --wait (wlc)"
wait_for 30 healthd_query_is lc "$HEALTHD_OK"
is "$(healthd_query lc)" "$HEALTHD_OK" "agent: healthy after up --wait"

dh_compose wlc v2/pair.yml stop -t 5 >"$DH_T/stop-wlc.log" 2>&1
ok $? "compose stop (wlc)"
dh_expect_state 20 wlc-api-1 "exited unhealthy"
dh_expect_state 20 wlc-web-1 "exited unhealthy"
STOPPED=$(healthd_expect false wlc-api-1 "exited (last health check: unhealthy)" \
	wlc-web-1 "exited (last health check: unhealthy)")
wait_for 30 healthd_query_is lc "$STOPPED"
is "$(healthd_query lc)" "$STOPPED" "agent: both stopped: exited"

dh_compose wlc v2/pair.yml start >"$DH_T/start-wlc.log" 2>&1
ok $? "compose start (wlc)"
wait_for 30 healthd_query_is lc "$HEALTHD_OK"
is "$(healthd_query lc)" "$HEALTHD_OK" "agent: healthy again once started"

# v2 creates the new container first (named <old id>_wlc-web-1), then stops
# and removes the old one, renames the new one and starts it. api stays
# healthy throughout, so web alone decides: never healthy from the
# recreate's first event until the new web is.
old_id=$("$DH_DOCKER" inspect -f '{{.Id}}' wlc-web-1)
h0=$(verdict_lines healthy) u0=$(verdict_lines unhealthy)
dh_compose wlc v2/pair.yml up -d --force-recreate --wait --wait-timeout 120 -t 2 web \
	>"$DH_T/recreate-wlc.log" 2>&1
ok $? "compose up -d --force-recreate --wait web (wlc)"
new_id=$("$DH_DOCKER" inspect -f '{{.Id}}' wlc-web-1)
[ -n "$new_id" ] && [ "$new_id" != "$old_id" ]
ok $? "runtime: wlc-web-1 is a new container under the same name"
wait_for 30 healthd_query_is lc "$HEALTHD_OK"
is "$(healthd_query lc)" "$HEALTHD_OK" "agent: healthy once the new web is"
is "$(($(verdict_lines healthy) - h0))" 1 "agent: healthy said once, at the end, not in between"
[ "$(verdict_lines unhealthy)" -gt "$u0" ]
ok $? "agent: unhealthy while web was replaced"
diag "the recreate's verdicts: $(grep -E ': verdict: ' "$LOG" | tail -n +$((h0 + u0 + 1)) |
	sed 's/.*verdict: //' | tr '\n' '/')"

dh_compose wlc v2/pair.yml down -t 2 >"$DH_T/down-wlc.log" 2>&1
ok $? "compose down (wlc)"
is "$(names wlc)" "" "runtime: no container of wlc is left"
GAP="no container (being recreated, or removed: unhealthy for at most 60 s)"
DOWN=$(healthd_expect false "<compose>" "no container has been created yet" \
	"<service:api>" "$GAP" "<service:web>" "$GAP")
wait_for 30 healthd_query_is lc "$DOWN"
is "$(healthd_query lc)" "$DOWN" "agent: after down: no container, and each service it had held out"
expect_once wlc 1 "$NONE_YET" "after down, --once: no container has been created yet"

kill -TERM "$HD_PID_lc"
reap 20 "$HD_PID_lc"
is "$?" 0 "agent: exit status 0 on SIGTERM"

healthd_sanitizer_clean
ok $? "agent: no sanitizer report"
dockerd_stop
ok $? "dockerd and everything it started are gone"
done_testing
