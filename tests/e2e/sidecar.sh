#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The agent as a Compose sidecar (issue 21), end to end on a private dockerd:
# the image `make image` builds (docker load of its archive: no registry),
# run as the example Compose file runs it (issue 35: its non-root user with
# the socket's group, a read-only root, no capability, no new privileges),
# a project of a web service whose healthcheck flips plus the sidecar, and
# the file it writes, in a named volume,
# judged by this agent's own status-file reader (--once, health_status_file
# pointing at it) as the guest agent would read it. Checked: healthy ->
# unhealthy -> healthy follows the flips; the sidecar's own container (whose
# healthcheck always fails, and whose service sets hostname:) is found and
# not judged; a drain through `docker exec` makes the file unhealthy at once
# and resume healthy; docker-compose stop and down stop the sidecar first:
# it writes unhealthy at once, holds until a guest agent stand-in serves it
# and one gateway poll more, and exits before web stops (issue 29); a
# restart of the sidecar alone drains the instance for its hold; a killed
# sidecar leaves the file as it was and no longer writes, and the file ages
# out: judged at a clock 61 s later (faketime) rather than waited for. The
# sidecar refreshes every 10 s: a drain's write must carry a time before the
# next timer refresh's.
# The agent it runs is the image's, built from build/ whatever the round (an
# ASan agent needs libraries the image does not carry), so the sanitizer
# round would run the same image again:
# tests/run: once
cd "$(dirname "$0")/../.." || exit 1
. tests/lib/tap.sh
. tests/lib/dockerd.sh
. tests/lib/sidecar_image.sh

command -v faketime >/dev/null 2>&1 || skip_all "faketime is not installed"
# Containers in a cgroup namespace of their own, as Docker makes them on
# cgroup v2 (a dstack guest): then /proc/self/cgroup says "0::/" and only the
# /etc/hostname mount names the sidecar's container.
DH_DOCKERD_ARGS=--default-cgroupns-mode=private
dockerd_start

IMAGE=dstack-healthd:sidecar-test
sidecar_image "$IMAGE"
case $? in
0) ok 0 "make image, docker load of its archive ($SIDECAR_DIGEST)" ;;
2) skip_all "$SIDECAR_WHY" ;;
*) ok 1 "make image, docker load of its archive"; done_testing; exit 1 ;;
esac
SIZE=$("$DH_DOCKER" image inspect -f '{{.Size}}' "$IMAGE")
diag "image size: $((SIZE / 1024 / 1024)) MiB ($SIZE bytes)"
is "$("$DH_DOCKER" image inspect -f '{{json .Config.Entrypoint}}' "$IMAGE")" \
	'["/usr/sbin/dstack-healthd"]' "the entrypoint is exec form, no shell"

# The guest's app-compose.json as the sidecar sees it (its status file is
# what the sidecar writes), the verdict folder (the named volume's, where
# this dockerd keeps it), and the judge's manifest.
SC_VOLUME=healthd-sidecar-verdict
OUT=$DH_T/data/volumes/$SC_VOLUME/_data
printf '%s\n' '{"manifest_version":"3","name":"t","runner":"docker-compose","requirements":{"health_check":true,"health_status_file":"/dstack/healthd/status"}}' \
	>"$DH_T/app-compose.json"
printf '{"manifest_version":"3","name":"t","runner":"bash","requirements":{"health_check":true,"health_status_file":"%s"}}\n' \
	"$OUT/status" >"$DH_T/judge.json"
# The guest agent as the sidecar reaches it on stop: a stand-in that reads
# the file as upstream's does (every 2 s here, 5 s there) and serves Health
# on a unix socket (the test's containers have no network).
mkdir -p "$DH_T/ga"
python3 tests/fakes/guest_health.py --file "$OUT/status" --unix "$DH_T/ga/ga.sock" \
	--reread 2 --log "$DH_T/ga/heard.log" &
dh_track $!
# Its socket, for the sidecar's user (python's is its umask's 0755).
wait_for 30 test -S "$DH_T/ga/ga.sock" && chmod 0666 "$DH_T/ga/ga.sock"
# The sidecar reaches the Docker socket through its group, added by gid.
export SC_DOCKER_GID=$(stat -c %g "$DH_T/docker.sock") SC_VOLUME
export SC_IMAGE=$IMAGE SC_DOCKER_SOCK=$DH_T/docker.sock \
	SC_APP_COMPOSE=$DH_T/app-compose.json SC_INTERVAL=10 SC_LOG_LEVEL=debug \
	SC_GA=$DH_T/ga

# judge [FAKETIME_OFFSET]: the file as the guest agent would judge it now
# (or at a later clock); sets J (the JSON) and JRC.
judge() {
	if [ -n "${1:-}" ]; then
		# libfaketime is preloaded: the ASan build must be told that its
		# runtime need not come first, or it exits 1 before judging.
		J=$(ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0 \
			FAKETIME_DONT_FAKE_MONOTONIC=1 faketime -f "$1" \
			"$HEALTHD_BIN" --once --compose-file "$DH_T/judge.json" 2>>"$DH_T/judge.log")
	else
		J=$("$HEALTHD_BIN" --once --compose-file "$DH_T/judge.json" 2>>"$DH_T/judge.log")
	fi
	JRC=$?
}
judged() { judge; [ "$J" = "$1" ]; }
UNHEALTHY_FILE='{"healthy":false,"unhealthy":[{"name":"<health_file>","status":"the app reports unhealthy"}],"error":""}'
line1() { head -n1 "$OUT/status" 2>/dev/null; }
line2() { sed -n 2p "$OUT/status" 2>/dev/null; }
# For wait_for, which runs its command again each time.
line1_is() { [ "$(line1)" = "$1" ]; }

dh_compose sidecar sidecar.yml up -d >"$DH_T/up.log" 2>&1
ok $? "docker-compose up -d of the web service and the sidecar"
SC=sidecar_healthd_1
dh_expect_state 20 sidecar_web_1 "running healthy"
dh_expect_state 20 "$SC" "running unhealthy"

wait_for 20 judged "$HEALTHD_OK"
is "$J" "$HEALTHD_OK" "the file is judged healthy (the web service is)"

# Least privilege (issue 35), as the kernel sees the sidecar's process: it
# reads the Docker socket and writes the file all the same.
sidecar_least_privilege "$SC" "$SC_DOCKER_GID"
is "$(dh_state "$SC")" "running unhealthy" \
	"meanwhile the sidecar's own container is unhealthy to Docker: it is not judged"
is "$("$DH_DOCKER" inspect -f '{{.Config.Hostname}}' "$SC")" healthd-sidecar \
	"...though the service sets hostname: healthd-sidecar, it found itself"
like "$(cat "$OUT/status")" $'^healthy\n[0-9]+$' "the file is two lines, healthy and a time"
is "$(stat -c %F "$OUT/status")" "regular file" "a regular file, as the guest agent requires"
"$DH_DOCKER" exec "$SC" dstack-healthd status >"$DH_T/status.out" 2>&1
is "$?" 0 "docker exec dstack-healthd status (as the sidecar's user): exit 0, healthy"
like "$("$DH_DOCKER" exec "$SC" dstack-healthd status --json)" \
	'"skipped":"the agent itself"' "status shows the sidecar's container skipped as the agent itself"
is "$("$DH_DOCKER" exec "$SC" dstack-healthd status --json | python3 -c \
	'import json,sys; v=json.load(sys.stdin); print(v["source"]["project"], v["verdict_file"]["path"], v["verdict_file"]["failing"])')" \
	"sidecar /verdict/status False" \
	"the project came from its own container's label (no runtime file mounted); the file is written"

"$DH_DOCKER" exec sidecar_web_1 rm /ok
wait_for 20 judged "$UNHEALTHY_FILE"
is "$J" "$UNHEALTHY_FILE" "the web service fails its healthcheck: the file turns unhealthy"
"$DH_DOCKER" exec sidecar_web_1 touch /ok
wait_for 20 judged "$HEALTHD_OK"
is "$J" "$HEALTHD_OK" "it passes again: the file turns healthy"

# A drain: nothing but the drain makes the file unhealthy while the app is
# healthy. Written when the drain began (its `since`, as the agent took it),
# not at the next timer refresh up to 10 s later; 3 s of slack for a loaded
# machine. (tests/e2e/verdict_file.sh, with the timer 60 s away, is the
# strict guard of the wake; here a broken one still fails 7 times in 10.)
T0=$(dh_now_ms)
"$DH_DOCKER" exec "$SC" dstack-healthd drain --wait >"$DH_T/drain.out" 2>&1
ok $? "docker exec dstack-healthd drain --wait (no poller: returns at once)"
wait_for 10 line1_is unhealthy
is "$(line1)" unhealthy "the drain makes the file unhealthy"
SINCE=$("$DH_DOCKER" exec "$SC" dstack-healthd status --json | python3 -c '
import datetime, json, sys
s = json.load(sys.stdin)["drain"]["since"]
print(int(datetime.datetime.strptime(s, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.timezone.utc).timestamp()))')
W=$(line2)
ok $([ -n "$SINCE" ] && [ "$W" -ge "$SINCE" ] && [ "$W" -le $((SINCE + 3)) ]; echo $?) \
	"at once: written at $W, the drain began at $SINCE"
diag "from the docker exec to the unhealthy file: $(( $(dh_now_ms) - T0 )) ms"
"$DH_DOCKER" exec "$SC" dstack-healthd resume >/dev/null 2>&1
ok $? "docker exec dstack-healthd resume"
wait_for 10 judged "$HEALTHD_OK"
is "$J" "$HEALTHD_OK" "resume makes it healthy again"

"$DH_DOCKER" logs "$SC" >"$DH_T/sidecar.log" 2>&1
# Its own container is looked up once (by the refresh thread and the events
# watcher, which may both ask at the start): every refresh after that knows
# it (two requests to the daemon less, and a flip seen that much sooner).
LOOKUPS=$(grep -c "asking Docker for container [0-9a-f]\{12\} (from .*), the agent's own" "$DH_T/sidecar.log")
REFRESHES=$(grep -c 'refresh (' "$DH_T/sidecar.log")
ok "$([ "$LOOKUPS" -ge 1 ] && [ "$LOOKUPS" -le 2 ] && [ "$REFRESHES" -ge 5 ]; echo $?)" \
	"the sidecar's own container was looked up $LOOKUPS times over $REFRESHES refreshes"
is "$(grep -c 'running in container [0-9a-f]\{12\} of Compose project sidecar (found by its /etc/hostname mount)' "$DH_T/sidecar.log")" 1 \
	"...and said once: found by its /etc/hostname mount (the cgroup names no id, the hostname is not one)"
if grep -q "verdict file.*cannot\|AddressSanitizer" "$DH_T/sidecar.log"; then
	sed 's/^/#   /' "$DH_T/sidecar.log" | tail -n 20
	ok 1 "the sidecar's log has no failed write"
else
	ok 0 "the sidecar's log has no failed write"
fi

# --- The sidecar drains on stop (issue 29). It depends on web, so Compose
# stops it first and web only once it has exited; on SIGTERM it writes
# unhealthy at once, asks the guest agent (the stand-in re-reads the file
# every 2 s) until it serves unhealthy, then holds one gateway poll
# (stop_hold, 2 s here) before it exits, leaving the file unhealthy.
# died_ms NAME SINCE: when container NAME died (Docker's event, in ms since
# the epoch) after SINCE (Unix seconds): the events outlive a removal.
died_ms() {
	"$DH_DOCKER" events --since "$2" --until "$(date +%s.%N)" --filter event=die \
		--filter "container=$1" --format '{{.TimeNano}}' | tail -n1 |
		awk '{ printf "%.0f\n", $1 / 1000000 }'
}
# written_as STATE: true once the file says STATE, with T_W_MS the time it
# was written (the mtime of the inode whose line was read: each write is a
# rename): a hold starts at a write, and the moment this test happens to see
# it may come later by a poll and a process start.
written_as() {
	local l m
	{ IFS= read -r l && m=$(stat -L -c %.3Y /dev/stdin); } <"$OUT/status" 2>/dev/null || return 1
	[ "$l" = "$1" ] && T_W_MS=${m/./}
}
# stop_proof VERB: docker-compose VERB (stop or down) of the whole project;
# sets HOLD_MS (the file written unhealthy to the sidecar's exit) and points.
stop_proof() {
	local verb=$1 pid t_unh web_then sc_end web_end since
	since=$(date +%s)
	dh_compose sidecar sidecar.yml "$verb" >"$DH_T/$verb.log" 2>&1 &
	pid=$!
	T_W_MS=
	wait_for 30 written_as unhealthy
	t_unh=${T_W_MS:-0}
	web_then=$(dh_state sidecar_web_1)
	reap 120 "$pid"
	ok $? "docker-compose $verb"
	is "$web_then" "running healthy" "$verb: the file said unhealthy while the app still ran"
	sc_end=$(died_ms "$SC" "$since")
	web_end=$(died_ms sidecar_web_1 "$since")
	HOLD_MS=$((sc_end - t_unh))
	diag "$verb: the file unhealthy, then the sidecar held ${HOLD_MS} ms; web stopped $((web_end - sc_end)) ms after the sidecar exited"
	ok $([ -n "$sc_end" ] && [ -n "$web_end" ] && [ "$web_end" -ge "$sc_end" ]; echo $?) \
		"$verb: the app's container stopped after the sidecar had exited"
	is "$(line1)" unhealthy "$verb: the sidecar left the file unhealthy"
}
STOP_SINCE=$(date +%s)
stop_proof stop
ok $([ "$HOLD_MS" -ge 2000 ] && [ "$HOLD_MS" -lt 20000 ]; echo $?) \
	"the hold lasted one gateway poll (2 s) or more after the unhealthy write, within the stop grace (${HOLD_MS} ms)"
is "$("$DH_DOCKER" inspect -f '{{.State.ExitCode}}' "$SC")" 0 "the sidecar exited 0, before the grace's SIGKILL"
"$DH_DOCKER" logs "$SC" >"$DH_T/stop.log" 2>&1
like "$(cat "$DH_T/stop.log")" 'stop: the guest agent serves unhealthy after [0-9.]+ s; one gateway poll more' \
	"it asked the guest agent (the stand-in) and saw it serve unhealthy"
GA_HEARD=$(awk '$2 == "unhealthy" { t = $1 } END { printf "%.0f\n", t * 1000 }' "$DH_T/ga/heard.log")
ok $([ "$GA_HEARD" -gt 0 ] && [ $((GA_HEARD + 2000)) -le "$(died_ms "$SC" "$STOP_SINCE")" ]; echo $?) \
	"the sidecar exited a gateway poll (2 s) or more after the guest agent heard it"

# A restart of the sidecar alone drains the instance for the hold: the cost
# the app developer's guide states.
dh_compose sidecar sidecar.yml up -d >>"$DH_T/up.log" 2>&1
wait_for 60 judged "$HEALTHD_OK"
is "$J" "$HEALTHD_OK" "up -d again: healthy"
dh_compose sidecar sidecar.yml restart healthd >"$DH_T/restart.log" 2>&1 &
RPID=$!
T_W_MS=
wait_for 30 written_as unhealthy
t_out=${T_W_MS:-0}
T_W_MS=
wait_for 60 written_as healthy
t_in=${T_W_MS:-0}
reap 60 "$RPID"
diag "a restart of the sidecar alone: out of rotation for $((t_in - t_out)) ms (the hold, then a start and a refresh; from write to write)"
ok $([ "$(line1)" = healthy ] && [ $((t_in - t_out)) -ge 2000 ]; echo $?) \
	"a restart of the sidecar alone drains the instance for its hold, then serves healthy again"

# A sidecar that dies (SIGKILL: no hold) leaves the file as it was and no
# longer writes (a flip of the web service is not followed); the file ages
# out: judged at a clock 61 s later (faketime) rather than waited for.
"$DH_DOCKER" kill -s KILL "$SC" >/dev/null
ok $? "docker kill -s KILL of the sidecar"
LAST=$(cat "$OUT/status")
is "$(line1)" healthy "the killed sidecar left the file as it was"
"$DH_DOCKER" exec sidecar_web_1 rm /ok
dh_expect_state 20 sidecar_web_1 "running unhealthy"
file_changed() { [ "$(cat "$OUT/status")" != "$LAST" ]; }
wait_for 12 file_changed
is "$(cat "$OUT/status")" "$LAST" "the web service turned unhealthy: nothing wrote the file"
judge "+61s"
like "$J" '"status":"written [0-9]+ s ago; older than 60 s' "judged 61 s later, the file has aged out"
is "$JRC" 1 "--once at that clock exits 1 (unhealthy)"

# down stops as stop does: the sidecar first, the app after its hold.
"$DH_DOCKER" exec sidecar_web_1 touch /ok
dh_compose sidecar sidecar.yml up -d >>"$DH_T/up.log" 2>&1
wait_for 60 judged "$HEALTHD_OK"
is "$J" "$HEALTHD_OK" "up -d again: healthy"
stop_proof down
"$DH_DOCKER" rmi -f "$IMAGE" >/dev/null 2>&1
done_testing
