#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The release binary under valgrind memcheck, end to end: a status-file app
# and a Docker app (tests/fakes/docker_fake.py replaying a recorded dockerd:
# ping, list, inspect; then garbage, then a runtime that never answers),
# each run --once and long-running (polled in JSON and protobuf, then
# SIGTERM, during a hung refresh for Docker). valgrind must report no
# errors and no definite leaks (--error-exitcode=99
# --errors-for-leak-kinds=definite), and the agent must exit 0.
set -u
cd "$(dirname "$0")/../.."
. tests/lib/tap.sh
B=${HEALTHD_BUILD:-build}
BIN=$B/dstack-healthd
FAKE=tests/fakes/docker_fake.py
R=tests/fakes/docker
case $(build_kind) in
address | thread) skip_all "the sanitizer build does not run under valgrind" ;;
esac
[ -x "$BIN" ] || skip_all "$BIN not built"
command -v valgrind >/dev/null || skip_all "valgrind is not installed"
command -v python3 >/dev/null || skip_all "python3 is not installed"

. tests/lib/scratch.sh
VG=(valgrind --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite
	--show-leak-kinds=definite --track-fds=no --quiet)

health() { # health SOCKET [json|pb]
	if [ "${2:-json}" = json ]; then
		curl -s --max-time 5 --unix-socket "$1" -X POST 'http://x/prpc/v1/Health?json' -d '{}'
	else
		curl -s --max-time 5 --unix-socket "$1" -X POST 'http://x/prpc/v1/Health' \
			--data-binary '' -o /dev/null -w '%{http_code}'
	fi
}
says() { health "$1" | grep -Eq -- "$2"; }

# check LABEL LOG RC WANT: valgrind's verdict on one run.
check() {
	local label=$1 log=$2 rc=$3 want=$4
	is "$rc" "$want" "$label: exit status $want under valgrind (99 is a memcheck error)"
	local errs
	errs=$(grep -c '^==[0-9]*== ' "$log")
	is "$errs" 0 "$label: valgrind printed no error or definite leak"
	[ "$errs" -eq 0 ] || head -n 20 "$log" | sed 's/^/#   /'
}

# --- Status file app.
printf '{"manifest_version":"3","name":"t","runner":"bash","requirements":{"health_check":true,"health_status_file":"%s/health"}}\n' \
	"$T" >"$T/sf.json"
printf 'healthy\n%s\n' "$(date +%s)" >"$T/health"
"${VG[@]}" --log-file="$T/vg-sf-once.log" "$BIN" --once --compose-file "$T/sf.json" >"$T/out"
check "status file --once" "$T/vg-sf-once.log" $? 0
like "$(cat "$T/out")" '^\{"healthy":true' "status file --once: healthy"

"${VG[@]}" --log-file="$T/vg-sf.log" "$BIN" --listen "unix:$T/sf.sock" --interval 0.3 \
	--compose-file "$T/sf.json" 2>"$T/sf.log" &
pid=$!
PIDS+=($pid)
ok $(wait_for 90 says "$T/sf.sock" '"healthy":true'; echo $?) "status file, served: healthy"
printf 'unhealthy\n%s\n' "$(date +%s)" >"$T/health"
ok $(wait_for 30 says "$T/sf.sock" 'the app reports unhealthy'; echo $?) "status file, served: unhealthy when the app says so"
rm "$T/health"
ok $(wait_for 30 says "$T/sf.sock" 'does not exist'; echo $?) "status file, served: a missing file"
is "$(health "$T/sf.sock" pb)" 200 "status file, served: protobuf"
kill -TERM "$pid"
reap 120 "$pid"
check "status file, long-running" "$T/vg-sf.log" $? 0

# --- Docker app, against recorded answers.
WEB=f897beb9f2f72abe70da3e5bb2a41f499053b573037353b36e598027ac26dcd3
WORKER=bf941dbe9c153976f97b5e4ca6dffe40905bc2acb4d8df8cc7874c3d0c64f632
CACHE=422c7a8188508e386e1388f33cc23c38a57df5851fdd608195c57cf89de85e9d
DB=4237c056497c5e1de0024b05a918ce572f83448cef865dee9b61314497eb6b09
: >"$T/routes"
python3 "$FAKE" --listen "unix:$T/d.sock" --routes-file "$T/routes" \
	"/_ping=file:$R/ping-1.41.http" "/v1\.41/containers/json.*=file:$R/list-1.41.http" \
	"/v1\.41/containers/$WEB/json=file:$R/inspect-web.http" \
	"/v1\.41/containers/$WORKER/json=file:$R/inspect-worker.http" \
	"/v1\.41/containers/$CACHE/json=file:$R/inspect-cache.http" \
	"/v1\.41/containers/$DB/json=file:$R/inspect-db.http" &
PIDS+=($!)
wait_for 30 test -S "$T/d.sock" || echo "# the fake did not start"
printf '{"manifest_version":"3","name":"t","runner":"docker-compose","requirements":{"health_check":true}}\n' >"$T/d.json"
printf '{"project":"demo"}\n' >"$T/runtime.json"
DARGS=(--compose-file "$T/d.json" --runtime-file "$T/runtime.json" --docker-host "unix://$T/d.sock")

"${VG[@]}" --log-file="$T/vg-d-once.log" "$BIN" --once "${DARGS[@]}" >"$T/out"
check "docker --once, unhealthy (worker failing, db exited)" "$T/vg-d-once.log" $? 1
like "$(cat "$T/out")" '"name":"demo-worker-1"' "docker --once: names the failing container"

# A refresh timeout of 3 s: under valgrind on a loaded machine a refresh
# that reads the fake's answers can take over a second, and one cut short
# would be served as the wrong error.
"${VG[@]}" --log-file="$T/vg-d.log" "$BIN" --listen "unix:$T/a.sock" --interval 0.3 \
	--refresh-timeout 3 "${DARGS[@]}" 2>"$T/d.log" &
pid=$!
PIDS+=($pid)
ok $(wait_for 90 says "$T/a.sock" '"name":"demo-worker-1"'; echo $?) "docker, served: the recorded verdict"
is "$(health "$T/a.sock" pb)" 200 "docker, served: protobuf"
echo '.*/containers/json.*=garbage' >"$T/routes"
ok $(wait_for 60 says "$T/a.sock" '"error":"the container runtime.s answer could not be read"'; echo $?) "docker, served: garbage becomes an error verdict"
echo '.*=hang' >"$T/routes"
ok $(wait_for 60 says "$T/a.sock" 'took longer than the refresh timeout'; echo $?) "docker, served: a runtime that never answers times out"
kill -TERM "$pid"
reap 120 "$pid"
check "docker, long-running, stopped during a hung refresh" "$T/vg-d.log" $? 0
done_testing
