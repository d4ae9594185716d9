#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Containers of the app's project vanish between the agent's list and its
# inspect. Loops create and force-remove short-lived containers in the
# project (no healthcheck, so they are skipped whatever state they are caught
# in) while an agent refreshes quickly; beside them a passing web. A 404 on
# inspect means the container is gone and must be skipped, so every answer
# must be exactly healthy, with no error.
#
# Whether the race was actually hit is read from dockerd's debug log: an
# inspect (GET /containers/ID/json) that dockerd received after it had
# destroyed ID (its destroy event) is one the agent got a 404 for.
cd "$(dirname "$0")/../.." || exit 1
. tests/lib/tap.sh
. tests/lib/dockerd.sh

DH_DOCKERD_ARGS=--debug
dockerd_start
dh_compose hchurn churn.yml up -d >"$DH_T/up-hchurn.log" 2>&1
ok $? "docker-compose up -d hchurn"
dh_expect_state 20 hchurn_web_1 "running healthy"
dh_expect_state 20 hchurn_pad_8 "running -"

api() { # api METHOD PATH [BODY]
	curl -s --max-time 10 --unix-socket "$DH_T/docker.sock" -X "$1" \
		-H 'Content-Type: application/json' "http://d/v1.41$2" ${3:+-d "$3"}
}

# churn_loop I: create, sometimes start, then force-remove, until told to stop.
churn_loop() {
	local i=$1 n=0 id
	while [ ! -e "$DH_T/stop-churn" ]; do
		n=$((n + 1))
		id=$(api POST "/containers/create?name=hchurn_churn_${i}_$n" \
			'{"Image":"healthd-test:1","Cmd":["sleep","60"],
			  "Labels":{"com.docker.compose.project":"hchurn",
				    "com.docker.compose.service":"churn",
				    "com.docker.compose.oneoff":"False"},
			  "HostConfig":{"NetworkMode":"none","Init":true}}' |
			dh_json 'd["Id"]')
		[ "$id" != "<unreadable>" ] || continue
		[ $((n % 3)) -eq 0 ] || api POST "/containers/$id/start" >/dev/null
		api DELETE "/containers/$id?force=1" >/dev/null
	done
}

# The inspects that reached dockerd after the container was destroyed.
# Times are compared as nanoseconds of the UTC day.
late_inspects() {
	"$DH_DOCKER" events --since "$since" --until "$(date +%s.%N)" \
		--filter type=container --filter event=destroy \
		--format '{{.Actor.ID}} {{.TimeNano}}' >"$DH_T/destroyed"
	awk '
	NR == FNR {
		gone[$1] = (substr($2, 1, 10) % 86400) * 1e9 + substr($2, 11, 9)
		next
	}
	/msg="Calling GET \/v[0-9.]+\/containers\/[^\/?"]+\/json/ {
		t = $0; sub(/^time="[0-9-]+T/, "", t); sub(/Z".*/, "", t)
		split(t, hms, /[:.]/)
		ns = ((hms[1] * 60 + hms[2]) * 60 + hms[3]) * 1e9 + hms[4]
		id = $0; sub(/.*\/containers\//, "", id); sub(/\/json.*/, "", id)
		if (id in gone && ns > gone[id]) n++
	}
	END { print n + 0 }' "$DH_T/destroyed" "$DH_T/dockerd.log"
}

healthd_runtime "$DH_T/rt-hchurn.json" hchurn
# A generous refresh deadline: behind a removal, dockerd holds an inspect on
# the container's lock for seconds on a loaded host, and the rule under test
# is the 404, not the deadline.
healthd_start churn "$DH_T/rt-hchurn.json" --interval 0.2 --refresh-timeout 10
ok $? "agent: long-running agent listening"
wait_for 15 healthd_query_is churn "$HEALTHD_OK"
is "$(healthd_query churn)" "$HEALTHD_OK" "agent: hchurn is healthy before the churn"

since=$(date +%s)
CHURN_PIDS=
for i in 1 2 3 4; do
	churn_loop $i &
	dh_track $!
	CHURN_PIDS="$CHURN_PIDS $!"
done
churn_done() {
	local p
	for p in $CHURN_PIDS; do
		dh_child "$p" && return 1
	done
	return 0
}

# Sample for up to 20 s, stopping early once the race was hit often enough.
t0=$(dh_now_ms)
hits=0
while [ $(( $(dh_now_ms) - t0 )) -lt 20000 ]; do
	healthd_query churn >>"$DH_T/samples"
	echo >>"$DH_T/samples"
	if [ $(( $(wc -l <"$DH_T/samples") % 40 )) -eq 0 ]; then
		hits=$(late_inspects)
		[ "$hits" -lt 10 ] || break
	fi
	sleep 0.05
done
touch "$DH_T/stop-churn"
wait_for 20 churn_done
for p in $CHURN_PIDS; do dh_kill "$p"; done
hits=$(late_inspects)
created=$(grep -c 'msg="Calling POST /v1.41/containers/create' "$DH_T/dockerd.log")

diag "$created containers churned; $(wc -l <"$DH_T/samples") answers sampled"
diag "inspects that dockerd received after destroying the container: $hits"
if [ "$hits" -eq 0 ]; then
	diag "the list/inspect race was NOT provoked in this run"
fi
is "$(sort -u "$DH_T/samples")" "$HEALTHD_OK" \
	"agent: every answer during the churn is exactly healthy, no error"
grep -Eiq 'no such container|\b404\b' "$DH_T/hd-churn.log"
ok $((!$?)) "agent: nothing logged about a vanished container"
is "$(healthd_query churn)" "$HEALTHD_OK" "agent: still healthy after the churn"

healthd_stop churn
healthd_sanitizer_clean
ok $? "agent: no sanitizer report"
dockerd_stop
ok $? "dockerd and everything it started are gone"
done_testing
