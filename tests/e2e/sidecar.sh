#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The agent as a Compose sidecar (issue 21), end to end on a private dockerd:
# the image built from packaging/container/Dockerfile on a Debian 12 base
# made here (debootstrap, docker import: no registry), a project of a web
# service whose healthcheck flips plus the sidecar, and the file it writes
# judged by this agent's own status-file reader (--once, health_status_file
# pointing at it) as the guest agent would read it. Checked: healthy ->
# unhealthy -> healthy follows the flips; the sidecar's own container (whose
# healthcheck always fails) is not judged; a drain through `docker exec` makes
# the file unhealthy at once and resume healthy; a stopped sidecar leaves the
# file as it was and no longer writes (a flip of the web service is not
# followed), and the file ages out: judged at a clock 61 s later (faketime)
# rather than waited for. The sidecar refreshes every 10 s: a drain's write
# must carry a time before the next timer refresh's.
cd "$(dirname "$0")/../.." || exit 1
. tests/lib/tap.sh
. tests/lib/dockerd.sh
. tests/lib/rootfs.sh
. tests/lib/sidecar_image.sh

command -v faketime >/dev/null 2>&1 || skip_all "faketime is not installed"
dockerd_start

IMAGE=dstack-healthd:sidecar-test
sidecar_image "$IMAGE"
case $? in
0) ok 0 "docker build of packaging/container/Dockerfile" ;;
2) skip_all "$SIDECAR_WHY" ;;
*) ok 1 "docker build of packaging/container/Dockerfile"; done_testing; exit 1 ;;
esac
SIZE=$("$DH_DOCKER" image inspect -f '{{.Size}}' "$IMAGE")
diag "image size: $((SIZE / 1024 / 1024)) MiB ($SIZE bytes)"
is "$("$DH_DOCKER" image inspect -f '{{json .Config.Entrypoint}}' "$IMAGE")" \
	'["/usr/sbin/dstack-healthd"]' "the entrypoint is exec form, no shell"

# The guest's app-compose.json as the sidecar sees it (its status file is
# what the sidecar writes), the verdict folder, and the judge's manifest.
OUT=$DH_T/verdict
mkdir -p "$OUT"
printf '%s\n' '{"manifest_version":"3","name":"t","runner":"docker-compose","requirements":{"health_check":true,"health_status_file":"/dstack/healthd/status"}}' \
	>"$DH_T/app-compose.json"
printf '{"manifest_version":"3","name":"t","runner":"bash","requirements":{"health_check":true,"health_status_file":"%s"}}\n' \
	"$OUT/status" >"$DH_T/judge.json"
export SC_IMAGE=$IMAGE SC_DOCKER_SOCK=$DH_T/docker.sock SC_OUT=$OUT \
	SC_APP_COMPOSE=$DH_T/app-compose.json SC_INTERVAL=10 SC_LOG_LEVEL=debug

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
is "$(dh_state "$SC")" "running unhealthy" \
	"meanwhile the sidecar's own container is unhealthy to Docker: it is not judged"
like "$(cat "$OUT/status")" $'^healthy\n[0-9]+$' "the file is two lines, healthy and a time"
is "$(stat -c %F "$OUT/status")" "regular file" "a regular file, as the guest agent requires"
"$DH_DOCKER" exec "$SC" dstack-healthd status >"$DH_T/status.out" 2>&1
is "$?" 0 "docker exec dstack-healthd status: exit 0, healthy"
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

# A stop leaves the file: a restarting sidecar must not flap the instance.
"$DH_DOCKER" stop -t 10 "$SC" >/dev/null
ok $? "docker stop of the sidecar"
LAST=$(cat "$OUT/status")
is "$(line1)" healthy "the stopped sidecar left the file as it was"
# A live sidecar follows a flip within milliseconds; a stopped one writes
# nothing: over 12 s (a timer interval and more) the file stays as it was.
"$DH_DOCKER" exec sidecar_web_1 rm /ok
dh_expect_state 20 sidecar_web_1 "running unhealthy"
wait_for 12 test "$(cat "$OUT/status")" != "$LAST"
is "$(cat "$OUT/status")" "$LAST" "the web service turned unhealthy: nothing wrote the file"
judge
is "$J" "$HEALTHD_OK" "still fresh now: no flap when the sidecar restarts soon"
judge "+61s"
like "$J" '"status":"written [0-9]+ s ago; older than 60 s' "judged 61 s later, the file has aged out"
is "$JRC" 1 "--once at that clock exits 1 (unhealthy)"

"$DH_DOCKER" logs "$SC" >"$DH_T/sidecar.log" 2>&1
# Its own container is looked up once (by the refresh thread and the events
# watcher, which may both ask at the start): every refresh after that knows
# it (two requests to the daemon less, and a flip seen that much sooner).
LOOKUPS=$(grep -c "asking Docker for container [0-9a-f]\{12\}, the agent's own" "$DH_T/sidecar.log")
REFRESHES=$(grep -c 'refresh (' "$DH_T/sidecar.log")
ok "$([ "$LOOKUPS" -ge 1 ] && [ "$LOOKUPS" -le 2 ] && [ "$REFRESHES" -ge 5 ]; echo $?)" \
	"the sidecar's own container was looked up $LOOKUPS times over $REFRESHES refreshes"
is "$(grep -c 'running in container [0-9a-f]\{12\} of Compose project sidecar' "$DH_T/sidecar.log")" 1 \
	"...and said once"
if grep -q "verdict file.*cannot\|AddressSanitizer" "$DH_T/sidecar.log"; then
	sed 's/^/#   /' "$DH_T/sidecar.log" | tail -n 20
	ok 1 "the sidecar's log has no failed write"
else
	ok 0 "the sidecar's log has no failed write"
fi
dh_compose sidecar sidecar.yml down -t 5 >/dev/null 2>&1
"$DH_DOCKER" rmi -f "$IMAGE" >/dev/null 2>&1
done_testing
