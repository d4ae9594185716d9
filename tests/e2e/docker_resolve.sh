#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# A tcp://NAME Docker host whose resolver never answers: the name lookup
# must end at the refresh deadline (--once --refresh-timeout 1 under 10 s, where
# the resolver's own timeout is 30 s) and must not hold up a stop (SIGTERM to
# exit under 10 s, with a refresh of 20 s and a lookup of 30 s in flight). The
# bounds leave a loaded machine's process start room and still tell the bug. The test runs in private mount and network
# namespaces: /etc/resolv.conf, /etc/hosts and /etc/nsswitch.conf are bound
# to our own, and the name server is a UDP socket on the namespace's loopback
# that notes each query and never answers.
# tests/run: tsan
cd "$(dirname "$0")/../.." || exit 1
. tests/lib/tap.sh
if [ -z "${HEALTHD_RESOLVE_NS:-}" ]; then
	[ "$(id -u)" = 0 ] || skip_all "needs root for private namespaces"
	command -v unshare >/dev/null || skip_all "unshare is not installed"
	command -v python3 >/dev/null || skip_all "python3 is not installed"
	HEALTHD_RESOLVE_NS=1 exec unshare --mount --net --propagation private "$0" "$@"
fi
B=${HEALTHD_BUILD:-build}
BIN=$B/dstack-healthd
[ -x "$BIN" ] || { echo "not ok 1 - $BIN is not built"; echo "1..1"; exit 1; }
. tests/lib/scratch.sh

ip link set lo up
ok $? "private network namespace: loopback up"
printf 'nameserver 127.0.0.1\noptions timeout:30 attempts:1\n' >"$T/resolv.conf"
printf '127.0.0.1 localhost\n' >"$T/hosts"
printf 'hosts: files dns\n' >"$T/nsswitch.conf"
for f in resolv.conf hosts nsswitch.conf; do
	mount --bind "$T/$f" "/etc/$f" || break
done
ok $? "private mounts: our resolv.conf, hosts and nsswitch.conf"

# The name server: takes queries, answers none.
python3 -c '
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.1", 53))
open(sys.argv[1] + ".ready", "w").close()
while True:
    s.recvfrom(4096)
    open(sys.argv[1], "a").write("q\n")
' "$T/asked" &
PIDS+=($!)
wait_for 30 test -e "$T/asked.ready"
ok $? "a name server on 127.0.0.1:53 that never answers"

printf '%s\n' '{"manifest_version":"3","name":"t","runner":"docker-compose","requirements":{"health_check":true}}' \
	>"$T/app-compose.json"
printf '{"project":"p","namespace":"","snapshotter":""}\n' >"$T/rt.json"
H=tcp://dockerd.test:2375
now_ms() { echo $(($(date +%s%N) / 1000000)); }

t0=$(now_ms)
out=$(timeout 60 "$BIN" --once --refresh-timeout 1 --compose-file "$T/app-compose.json" \
	--runtime-file "$T/rt.json" --docker-host "$H" 2>"$T/once.err")
rc=$?
dt=$(($(now_ms) - t0))
test -s "$T/asked"
ok $? "--once: the name server was asked for dockerd.test"
is "$rc" 3 "--once: exit status 3 (the source could not be asked)"
like "$out" '^\{"healthy":false,.*"error":"[^"]+' "--once: healthy:false with an error"
diag "--once --refresh-timeout 1 with a resolver that never answers: ${dt} ms"
ok $((dt < 10000 ? 0 : 1)) "--once --refresh-timeout 1 ended within 10 s, not at the resolver's 30 s (${dt} ms)"

: >"$T/asked"
"$BIN" --listen "unix:$T/a.sock" --refresh-timeout 20 --compose-file "$T/app-compose.json" \
	--runtime-file "$T/rt.json" --docker-host "$H" >"$T/agent.log" 2>&1 &
AGENT=$!
PIDS+=($AGENT)
wait_for 30 test -S "$T/a.sock" && wait_for 30 test -s "$T/asked"
ok $? "agent: serving, its first refresh waiting on the name server"
agent_stop "$AGENT" "a name lookup in flight"
dt=$AGENT_STOP_MS
diag "SIGTERM to exit with a name lookup in flight: ${dt} ms"
ok $([ "$dt" != timeout ] && [ "$dt" -lt 10000 ]; echo $?) \
	"agent: stopped within 10 s of SIGTERM, not at the lookup's 30 s (${dt} ms)"
# Every refresh (1 s apart) gives up on a lookup that runs on for 30 s: no
# more than LOOKUPS_MAX (4) of them may be left running, later refreshes fail
# at once saying so.
"$BIN" --listen "unix:$T/b.sock" --interval 1 --refresh-timeout 1 --log-level debug \
	--compose-file "$T/app-compose.json" --runtime-file "$T/rt.json" --docker-host "$H" \
	>"$T/agent-b.log" 2>&1 &
AGENT=$!
PIDS+=($AGENT)
wait_for 40 grep -q 'name lookup: 4 earlier lookups still unanswered' "$T/agent-b.log"
ok $? "agent: with lookups piling up, a refresh fails at once: 4 earlier lookups still unanswered"
base=$(ls "/proc/$AGENT/task" | wc -l)
most=$base
threads_peak() { # never true: wait_for samples it until its deadline
	local n
	n=$(ls "/proc/$AGENT/task" | wc -l)
	[ "$n" -gt "$most" ] && most=$n
	return 1
}
wait_for 4 threads_peak
diag "agent threads with the lookups capped: $base, at most $most over 4 s"
ok $((most <= base ? 0 : 1)) "agent: no more threads pile up ($most)"
! grep -E 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$T/once.err" "$T/agent.log" "$T/agent-b.log"
ok $? "no sanitizer report"
done_testing
