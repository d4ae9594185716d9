#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# A stop as systemd makes it, in the middle of everything at once (issue 44
# §1): SIGTERM to an agent that has a probe in flight (to a server that
# accepted and never answers; the probe's timeout is 30 s), a refresh stuck
# in the runtime (nerdctl's stand-in hangs in `ps`; the refresh timeout is
# 60 s) and a relayed log stream moving bytes. It must exit by itself, well
# before any of those timeouts, with status 0 and "stopped" as its last line
# (agent_stop), end the client's stream, and leave no process of its own:
# the hung nerdctl and its child are gone too. In private mount and network
# namespaces: the probed container is 10.4.0.5, on this namespace's loopback.
# tests/run: tsan
cd "$(dirname "$0")/../.." || exit 1
. tests/lib/tap.sh
if [ -z "${HEALTHD_STOP_NS:-}" ]; then
	[ "$(id -u)" = 0 ] || skip_all "needs root for private namespaces"
	command -v unshare >/dev/null || skip_all "unshare is not installed"
	command -v ip >/dev/null || skip_all "ip is not installed (iproute2)"
	HEALTHD_STOP_NS=1 exec unshare --mount --net --propagation private "$0" "$@"
fi
B=${HEALTHD_BUILD:-build}
BIN=$B/dstack-healthd
[ -x "$BIN" ] || { echo "not ok 1 - $BIN is not built"; echo "1..1"; exit 1; }
command -v python3 >/dev/null || skip_all "python3 is not installed"
. tests/lib/scratch.sh

ip link set lo up && ip addr add 10.4.0.5/32 dev lo
ok $? "a network namespace of its own: 10.4.0.5 on its loopback"

# The probed container's address: accepts, notes each connection, answers
# nothing.
python3 -c '
import socket, sys
s = socket.socket(); s.bind(("10.4.0.5", 18081)); s.listen(16)
held = []
with open(sys.argv[1], "a", buffering=1) as log:
    while True:
        c, _ = s.accept(); held.append(c); log.write("accepted\n")
' "$T/probed.log" &
PIDS+=($!)
wait_for 30 python3 -c 'import socket; socket.create_connection(("10.4.0.5", 18081), 5)'
ok $? "a server on 10.4.0.5:18081 that never answers"
: >"$T/probed.log"

# The nerdctl stand-in's container: probe-web.json, probed there with a
# timeout of 30 s.
mkdir -p "$T/nscen"
python3 - "$T/nscen/web.json" <<'PY'
import json, sys
d = json.load(open("tests/fakes/nerdctl-data/probe-web.json"))
d["Config"]["Labels"].update({"dstack.healthd.probe": "http://:18081/",
                              "dstack.healthd.probe.timeout": "30s"})
json.dump(d, open(sys.argv[1], "w"))
PY
printf '%s\n' web.json >"$T/nscen/containers"
printf '%s\n' '{"manifest_version":"3","name":"t","runner":"nerdctl-compose","requirements":{"health_check":true}}' \
	>"$T/app.json"
printf '{"project":"demo","namespace":"dstack","snapshotter":""}\n' >"$T/rt.json"

# The guest agent behind the relay, with its followed log streams.
python3 tests/fakes/guest_agent.py --listen 127.0.0.1:0 --ready "$T/ga.port" 2>>"$T/ga.log" &
PIDS+=($!)
wait_for 60 test -s "$T/ga.port"
GP=$(cat "$T/ga.port")

NERDCTL_FAKE_DIR="$T/nscen" "$BIN" --listen 127.0.0.1:0 --relay "127.0.0.1:$GP" \
	--compose-file "$T/app.json" --runtime-file "$T/rt.json" \
	--nerdctl "$PWD/tests/fakes/nerdctl" --interval 1 --refresh-timeout 60 \
	--control-socket "$T/ctl.sock" 2>"$T/agent.log" &
AGENT=$!
PIDS+=($AGENT)
wait_for 30 grep -q 'serving on 127.0.0.1:' "$T/agent.log"
PORT=$(sed -n 's/.*serving on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$T/agent.log" | head -n1)
ok $([ -n "$PORT" ]; echo $?) "the agent serves on 127.0.0.1:$PORT, relaying to 127.0.0.1:$GP"

# 1. A probe in flight: the server has its connection, and 30 s to answer.
wait_for 40 test -s "$T/probed.log"
ok $? "a probe is in flight: the server at 10.4.0.5:18081 has accepted it"
# 2. A relayed stream moving bytes.
curl -sN --max-time 120 "http://127.0.0.1:$PORT/logs/app?follow=true" >"$T/stream.out" 2>/dev/null &
STREAM=$!
PIDS+=($STREAM)
wait_for 30 eval '[ "$(grep -c "^line" "$T/stream.out")" -ge 5 ]'
ok $? "a followed log stream flows through the relay"
# 3. A refresh stuck in nerdctl ps, and then in nothing but its timeout.
touch "$T/nscen/ps.hang"
wait_for 30 test -s "$T/nscen/hang.pids"
ok $? "a refresh is stuck: nerdctl ps hangs ($(cat "$T/nscen/hang.pids" 2>/dev/null))"
is "$(wc -l <"$T/probed.log")" 1 "the probe is still in flight (no second connection yet)"

agent_stop "$AGENT" "a probe in flight, a refresh stuck, a stream relayed"
ok $([ "$AGENT_STOP_MS" != timeout ] && [ "$AGENT_STOP_MS" -lt 15000 ]; echo $?) \
	"it stopped in $AGENT_STOP_MS ms, far from the probe's 30 s and the refresh's 60 s"
like "$(cat "$T/agent.log")" 'Terminated: stopping' "it says why it stopped"
wait_for 20 pid_gone "$STREAM"
ok $? "the client's relayed stream ended with it"
hung_gone() {
	local p
	for p in $(cat "$T/nscen/hang.pids"); do pid_gone "$p" || return 1; done
}
wait_for 20 hung_gone
ok $? "the hung nerdctl and its child are gone too ($(cat "$T/nscen/hang.pids"))"
ok $(! grep -E 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$T/agent.log"; echo $?) "no sanitizer report"
done_testing
