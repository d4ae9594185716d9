#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The public `error` is the agent's own words (docs/operator.md, "Errors"): a marker
# placed in Docker's error message, in nerdctl's stderr, and in the paths of
# the Docker socket, the runtime file, the status file and app-compose.json
# never reaches the JSON or protobuf answer, which says which source failed
# and how from a fixed list; the agent's log (stderr here, the journal under
# systemd) carries the detail.
set -u
cd "$(dirname "$0")/../.."
. tests/lib/tap.sh
BIN=${HEALTHD_BUILD:-build}/dstack-healthd
[ -x "$BIN" ] || skip_all "$BIN not built"
for tool in curl protoc python3; do
	command -v "$tool" >/dev/null || skip_all "$tool is not installed"
done

. tests/lib/scratch.sh

MARK=Zq7Marker
D="$T/$MARK-dir"
mkdir -p "$D"
printf '{"manifest_version":"3","name":"t","runner":"docker-compose","requirements":{"health_check":true}}\n' \
	>"$D/docker.json"
printf '{"manifest_version":"3","name":"t","runner":"nerdctl-compose","requirements":{"health_check":true}}\n' \
	>"$D/nerdctl.json"
printf '{"project":"demo"}' >"$D/runtime.json"

json() { curl -s --max-time 10 --unix-socket "$1" -X POST 'http://x/prpc/v1/Health?json' -d '{}'; }
pb() { curl -s --max-time 10 --unix-socket "$1" -X POST -H 'Content-Type:' --data-binary '' \
	-o "$2" 'http://x/prpc/v1/Health'; }
# protoc quotes ' as \'.
decode() { protoc --decode=dstack.guest.v1.HealthResponse -I rpc rpc/health.proto <"$1" 2>&1 |
	sed "s/\\\\'/'/g"; }

# served LABEL WANT-ERROR AGENT-ARGS...: runs the agent until it serves an
# error (the third failed refresh), then checks both encodings and the log.
# The refresh timeout is 15 s ($REFRESH_TIMEOUT for the case that is about
# the timeout itself): the nerdctl stand-in is a Python program started on
# every refresh, which on a loaded machine can take over a second to start,
# and a refresh cut short by the timeout would serve the wrong error. The
# interval is 0.2 s ($INTERVAL: 2 s where each refresh takes its 1 s timeout,
# so that a loaded machine's late timer does not make the verdict stale,
# 3 intervals + the timeout, before the error is read).
served() {
	local label=$1 want=$2 sock="$T/$1.sock" log="$T/$1.log" pid body
	shift 2
	"$BIN" --listen "unix:$sock" --interval "${INTERVAL:-0.2}" --refresh-timeout "${REFRESH_TIMEOUT:-15}" \
		"$@" 2>"$log" &
	pid=$!
	PIDS+=($pid)
	wait_for 60 sh -c "curl -s --max-time 10 --unix-socket '$sock' -X POST \
		'http://x/prpc/v1/Health?json' -d '{}' | grep -q '\"error\":\"[^\"]'"
	body=$(json "$sock")
	is "$body" "{\"healthy\":false,\"unhealthy\":[],\"error\":\"$want\"}" \
		"$label: JSON says it in the agent's words"
	pb "$sock" "$T/$label.pb"
	is "$(decode "$T/$label.pb" | grep '^error:')" "error: \"$want\"" \
		"$label: protobuf says the same"
	ok $(! grep -aq "$MARK" "$T/$label.pb" && ! grep -q "$MARK" <<<"$body"; echo $?) \
		"$label: no marker in either answer"
	agent_stop "$pid" "$label"
	ok $(grep -q "$MARK" "$log"; echo $?) "$label: the log carries the detail"
}

# Docker's error message and the socket's path.
python3 tests/fakes/docker_fake.py --listen "unix:$D/d.sock" \
	"/_ping=file:tests/fakes/docker/ping-1.41.http" \
	"/v1\.41/containers/json\?.*=status:500:{\"message\":\"$MARK daemon says no\"}" &
PIDS+=($!)
wait_for 30 python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).connect(sys.argv[1])' "$D/d.sock"
served docker-status "the container runtime answered with an error status" \
	--compose-file "$D/docker.json" --runtime-file "$D/runtime.json" --docker-host "unix://$D/d.sock"
like "$(cat "$T/docker-status.log")" "HTTP 500: $MARK daemon says no" \
	"docker-status: the log has the daemon's message"

served docker-unreachable "cannot reach the container runtime" \
	--compose-file "$D/docker.json" --runtime-file "$D/runtime.json" --docker-host "unix://$D/none.sock"

hung_socket "$D/hang.sock"
INTERVAL=2 REFRESH_TIMEOUT=1 served docker-timeout "the container runtime took longer than the refresh timeout" \
	--compose-file "$D/docker.json" --runtime-file "$D/runtime.json" --docker-host "unix://$D/hang.sock"

python3 tests/fakes/docker_fake.py --listen "unix:$D/g.sock" "/_ping=garbage" &
PIDS+=($!)
wait_for 30 python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).connect(sys.argv[1])' "$D/g.sock"
served docker-garbage "the container runtime's answer could not be read" \
	--compose-file "$D/docker.json" --runtime-file "$D/runtime.json" --docker-host "unix://$D/g.sock"

# nerdctl's stderr.
mkdir -p "$D/nerdctl"
echo "$MARK containerd is down" >"$D/nerdctl/ps.fail"
NERDCTL_FAKE_DIR="$D/nerdctl" served nerdctl-status "the container runtime answered with an error status" \
	--compose-file "$D/nerdctl.json" --runtime-file "$D/runtime.json" --nerdctl "$PWD/tests/fakes/nerdctl"
like "$(cat "$T/nerdctl-status.log")" "$MARK containerd is down" "nerdctl-status: the log has nerdctl's stderr"
served nerdctl-missing "cannot reach the container runtime" \
	--compose-file "$D/nerdctl.json" --runtime-file "$D/runtime.json" --nerdctl "$D/no-nerdctl"

# The runtime file and the status file.
printf '{"project":' >"$D/broken-runtime.json"
served runtime-file "app-compose-runtime.json is not valid" \
	--compose-file "$D/docker.json" --runtime-file "$D/broken-runtime.json" --docker-host "unix://$D/d.sock"
served runtime-file-dir "app-compose-runtime.json cannot be read" \
	--compose-file "$D/docker.json" --runtime-file "$D" --docker-host "unix://$D/d.sock"
mkfifo "$D/health"
printf '{"manifest_version":"3","runner":"docker-compose","requirements":{"health_check":true,"health_status_file":"%s"}}\n' \
	"$D/health" >"$D/sf.json"
# A status file that is not a regular file is an entry, not an error: in the
# agent's words, without the path.
out=$("$BIN" --once --compose-file "$D/sf.json" 2>/dev/null)
is "$out" '{"healthy":false,"unhealthy":[{"name":"<health_file>","status":"the status file is a FIFO; it must be a regular file"}],"error":""}' \
	"statusfile-fifo: an entry in the agent's words, error empty, no path"

# A status file's refresh that overruns its timeout asked no runtime, and
# the public words must not blame one: strace holds each open of the file
# for 1.5 s, past a 1 s refresh timeout (the read itself never waits).
if command -v strace >/dev/null 2>&1 &&
	strace -qq -o /dev/null -e trace=none true 2>/dev/null; then
	printf 'healthy\n%s\n' "$(date +%s)" >"$D/slow-health"
	printf '{"manifest_version":"3","runner":"bash","requirements":{"health_check":true,"health_status_file":"%s"}}\n' \
		"$D/slow-health" >"$D/slow.json"
	# LeakSanitizer cannot run under ptrace (it ends the exit with status 1):
	# off for this one agent; ASan's other checks stay.
	ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
	strace -f -qq -o /dev/null -P "$D/slow-health" -e trace=openat \
		-e inject=openat:delay_exit=1500000 \
		"$BIN" --listen "unix:$T/slow.sock" --interval 2 --refresh-timeout 1 \
		--compose-file "$D/slow.json" 2>"$T/slow.log" &
	spid=$!
	PIDS+=($spid)
	# strace waits for the agent it started: the agent is the one signalled.
	wait_for 30 test -s "/proc/$spid/task/$spid/children"
	apid=$(cat "/proc/$spid/task/$spid/children")
	PIDS+=($apid)
	wait_for 60 sh -c "curl -s --max-time 10 --unix-socket '$T/slow.sock' -X POST \
		'http://x/prpc/v1/Health?json' -d '{}' | grep -q '\"error\":\"[^\"]'"
	is "$(json "$T/slow.sock")" '{"healthy":false,"unhealthy":[],"error":"the refresh took longer than the refresh timeout"}' \
		"statusfile-timeout: a status file's overrun blames no container runtime"
	like "$(cat "$T/slow.log")" 'refresh took [0-9.]+ s, longer than the 1.0 s limit' \
		"statusfile-timeout: the log has the time it took"
	agent_stop "$apid" "statusfile-timeout, under strace" "$spid"
else
	diag "statusfile-timeout: skipped, strace cannot trace here"
fi

# app-compose.json: named, its path is not; the field names are.
printf '{"manifest_version":"3","runner":"docker-compose","requirements":{"health_status_file":"rel"}}\n' \
	>"$D/rel.json"
served compose "app-compose.json: requirements.health_status_file: must be an absolute path" \
	--compose-file "$D/rel.json"

# --once: the answer has the public text, stderr the detail.
out=$("$BIN" --once --compose-file "$D/docker.json" --runtime-file "$D/runtime.json" \
	--docker-host "unix://$D/d.sock" 2>"$T/once.err"); rc=$?
is "$rc" 3 "--once: exit status 3 (could not judge)"
is "$out" '{"healthy":false,"unhealthy":[],"error":"the container runtime answered with an error status"}' \
	"--once: the answer is in the agent's words"
like "$(cat "$T/once.err")" "HTTP 500: $MARK daemon says no" \
	"--once: stderr has the detail"

done_testing
