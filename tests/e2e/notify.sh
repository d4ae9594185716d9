#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The agent as systemd sees it, without systemd: the notify protocol through a
# real NOTIFY_SOCKET listener (READY only once the listener answers, STATUS in
# words on every verdict change and only then, WATCHDOG=1 from the refresh
# loop at half of WATCHDOG_USEC and not while a refresh is wedged, STOPPING=1
# and exit within 5 s of SIGTERM), SIGHUP with a good and a bad config, and
# socket activation (LISTEN_FDS) through systemd-socket-activate.
# tests/run: tsan
set -u
cd "$(dirname "$0")/../.."
. tests/lib/tap.sh

BIN=$PWD/${HEALTHD_BUILD:-build}/dstack-healthd
LISTEN_PY=$PWD/tests/lib/notify_listen.py
[ -x "$BIN" ] || skip_all "$BIN is not built"
command -v python3 >/dev/null 2>&1 || skip_all "python3 is not installed"
command -v curl >/dev/null 2>&1 || skip_all "curl is not installed"

. tests/lib/scratch.sh
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
track() { PIDS+=("$1"); }
# stop PID: TERM, then KILL after 10 s; only our own live background jobs.
stop() {
	jobs -p | grep -qx -- "$1" || { wait "$1" 2>/dev/null; return 0; } # bounded: gone (not a live job: returns at once)
	kill -TERM "$1" 2>/dev/null
	wait_for 30 pid_gone "$1" || kill -KILL "$1" 2>/dev/null
	reap 10 "$1" 2>/dev/null
	return 0
}
# Each gets its TERM first; none is left for scratch.sh's KILL.
scratch_more() {
	for p in "${PIDS[@]}"; do stop "$p"; done
	PIDS=()
}

echo '{}' >"$T/healthd.json"
cat >"$T/app.json" <<JSON
{"manifest_version": "3", "name": "notify-test", "runner": "bash",
 "requirements": {"health_check": true, "health_status_file": "$T/health"}}
JSON
write_status() { # the app's side: write, then rename
	printf '%s\n%s\n' "$1" "$(date +%s)" >"$T/health.tmp" && mv "$T/health.tmp" "$T/health"
}

# start_listener NAME [PROBE]: a NOTIFY_SOCKET at $T/NAME.sock logging to
# $T/NAME.log.
start_listener() {
	python3 "$LISTEN_PY" "$T/$1.sock" "$T/$1.log" ${2:+"$2"} &
	track $!
	wait_for 20 test -S "$T/$1.sock"
}
n_lines() { grep -c -- "$2" "$T/$1.log" 2>/dev/null || true; }
has_line() { grep -q -- "$2" "$T/$1.log" 2>/dev/null; }
# at_least NAME PATTERN N: the log has N lines matching PATTERN.
at_least() { [ "$(n_lines "$1" "$2")" -ge "$3" ]; }
# Descendants of the agent inherit its NOTIFY_SOCKET: none may outlive it.
leftovers() {
	grep -lz "^NOTIFY_SOCKET=$T/" /proc/[0-9]*/environ 2>/dev/null |
		cut -d/ -f3 | grep -vxF -e "$$" $(printf -- '-e %s ' "${PIDS[@]}") || true
}
# term_and_time PID NAME: agent_stop (a test point); leaves the ms until the
# process was gone (or "timeout") in $ELAPSED and its exit status in
# $EXIT_STATUS.
term_and_time() {
	agent_stop "$1" "$2"
	ELAPSED=$AGENT_STOP_MS
	EXIT_STATUS=$AGENT_STATUS
}

# --- READY, STATUS, WATCHDOG, STOPPING on a status-file app -----------------
write_status healthy
start_listener n "$T/agent.sock"
NOTIFY_SOCKET=$T/n.sock WATCHDOG_USEC=4000000 "$BIN" -c "$T/healthd.json" \
	--compose-file "$T/app.json" --listen "unix:$T/agent.sock" --interval 0.2 \
	2>"$T/agent.err" &
AGENT=$!
track $AGENT

wait_for 20 has_line n ' READY=1$'
ok $? "READY=1 arrives"
ready_dgram=$(awk '$3 == "READY=1" { print $2; exit }' "$T/n.log")
wait_for 20 has_line n "^[0-9]* $ready_dgram PROBE="
like "$(awk -v d="$ready_dgram" '$2 == d && $3 ~ /^PROBE=/' "$T/n.log")" \
	'PROBE=HTTP/1\.[01] 200' "the listener answers /prpc/v1/Health when READY=1 arrives"
like "$(awk -v d="$ready_dgram" '$2 == d && $3 ~ /^STATUS=/' "$T/n.log")" \
	'STATUS=.+' "READY=1 comes with a STATUS="

wait_for 20 has_line n ' STATUS=healthy'
ok $? "STATUS= says healthy once the status file is read"
# READY=1 carries a STATUS of its own: it must not land after, and so hide,
# the first verdict's.
last_status_is() { [ "$(grep ' STATUS=' "$T/n.log" | tail -n1 | cut -d' ' -f3-)" = "STATUS=$1" ]; }
wait_for 20 last_status_is healthy
ok $? "the latest STATUS= is the current verdict"

write_status unhealthy
wait_for 20 has_line n ' STATUS=unhealthy'
ok $? "STATUS= follows the verdict to unhealthy"
like "$(grep ' STATUS=unhealthy' "$T/n.log" | head -n1)" \
	"STATUS=unhealthy: <health_file>: [a-z]" "the unhealthy STATUS names the failing check in words"

write_status healthy
wait_for 20 at_least n ' STATUS=healthy' 2
ok $? "STATUS= follows the verdict back to healthy"

# Five more pings are 10 s of refreshes every 0.2 s, none of which changes
# the verdict: none may send a STATUS.
statuses=$(n_lines n ' STATUS=')
pings=$(n_lines n ' WATCHDOG=1$')
wait_for 40 at_least n ' WATCHDOG=1$' $((pings + 5))
ok $? "WATCHDOG=1 keeps coming"
is "$(n_lines n ' STATUS=')" "$statuses" "no STATUS= while the verdict stays the same"

# Half of WATCHDOG_USEC=4000000 is 2 s; never as late as the full period.
# (A period of seconds, not 0.6 s: on a loaded machine a thread's wakeup
# can be a few hundred ms late, which is not what this checks. At 2 s, a
# ping only 1 s late would reach the period; systemd.sh saw as much.)
gaps=$(awk '$3 == "WATCHDOG=1" { if (p) print $1 - p; p = $1 }' "$T/n.log" | sort -n)
median=$(printf '%s\n' "$gaps" | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')
worst=$(printf '%s\n' "$gaps" | tail -n1)
diag "watchdog gaps (ms): $(echo $gaps)"
[ "$median" -ge 1400 ] && [ "$median" -le 2600 ]
ok $? "WATCHDOG=1 every ~2 s, half of WATCHDOG_USEC (median gap $median ms)"
[ "$worst" -lt 4000 ]
ok $? "no gap between pings reaches the watchdog period (worst $worst ms)"

# --- SIGHUP: a good config is taken, a bad one refused, the agent serves on -
echo '{"log_level": "debug"}' >"$T/healthd.json"
kill -HUP "$AGENT"
wait_for 20 grep -q 'reload' "$T/agent.err"
like "$(grep 'reload' "$T/agent.err" | head -n3)" 'log_level' "SIGHUP with a good config: the change is logged"
echo '{"no_such_option": 1}' >"$T/healthd.json"
kill -HUP "$AGENT"
wait_for 20 grep -q 'refused' "$T/agent.err"
like "$(grep 'refused' "$T/agent.err")" 'no_such_option' "SIGHUP with a bad config: refused, naming the field"
pings=$(n_lines n ' WATCHDOG=1$')
wait_for 30 at_least n ' WATCHDOG=1$' $((pings + 3))
ok $? "after the refused reload the loop still runs"
like "$(curl -s --max-time 10 --unix-socket "$T/agent.sock" http://x/prpc/v1/Health)" \
	'"healthy":true' "after the refused reload the agent still serves the verdict"

# --- SIGTERM ----------------------------------------------------------------
t_term=$(now_ms)
term_and_time "$AGENT" "status file"
is "$EXIT_STATUS" 0 "exit status 0 after SIGTERM"
[ "$ELAPSED" != timeout ] && [ "$ELAPSED" -lt 5000 ]
ok $? "exits within 5 s (TimeoutStopSec) of SIGTERM (took $ELAPSED ms)"
t_stop=$(awk '$3 == "STOPPING=1" { print $1; exit }' "$T/n.log")
[ -n "$t_stop" ] && [ "$t_stop" -ge "$t_term" ]
ok $? "STOPPING=1 is sent after SIGTERM"
curl -s --max-time 2 --unix-socket "$T/agent.sock" http://x/prpc/v1/Health >/dev/null 2>&1
ok $((!$?)) "the listener is closed"
is "$(leftovers)" "" "no process of the agent's is left"

# --- a wedged refresh stops the pings ---------------------------------------
# A Docker socket that accepts and never answers: the refresh hangs until its
# 30 s timeout, and the loop, the only pinger, sends nothing meanwhile.
cat >"$T/app-docker.json" <<JSON
{"manifest_version": "3", "name": "wedge", "runner": "docker-compose",
 "requirements": {"health_check": true}}
JSON
echo '{"namespace": "default", "project": "wedge", "snapshotter": ""}' >"$T/runtime.json"
python3 - "$T/hang.sock" "$T/hang.log" <<'PY' &
import os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(sys.argv[1] + ".tmp"); s.listen(16); os.rename(sys.argv[1] + ".tmp", sys.argv[1])
held = []
with open(sys.argv[2], "a", buffering=1) as log:
    while True:
        c, _ = s.accept()
        held.append(c)
        log.write("accepted\n")
PY
track $!
wait_for 20 test -S "$T/hang.sock"
start_listener w
echo '{}' >"$T/healthd.json"
NOTIFY_SOCKET=$T/w.sock WATCHDOG_USEC=1000000 "$BIN" -c "$T/healthd.json" \
	--compose-file "$T/app-docker.json" --runtime-file "$T/runtime.json" \
	--docker-host "unix://$T/hang.sock" --listen "unix:$T/agent-w.sock" \
	--interval 0.2 --refresh-timeout 30 2>"$T/agent-w.err" &
WEDGED=$!
track $WEDGED
wait_for 20 has_line w ' READY=1$'
ok $? "READY=1 arrives with a Docker host that never answers"
wait_for 20 test -s "$T/hang.log"
ok $? "the refresh is waiting on the silent Docker socket"
# Three watchdog periods with the refresh hanging (it has 30 s): a loop that
# still pinged would have pinged about six times.
ping_since() { awk -v t="$1" '$3 == "WATCHDOG=1" && $1 >= t { f = 1 } END { exit !f }' "$T/w.log"; }
t_hang=$(now_ms)
wait_for 3 ping_since "$t_hang"
late=$(awk -v t="$t_hang" '$3 == "WATCHDOG=1" && $1 >= t' "$T/w.log" | wc -l)
is "$late" 0 "no WATCHDOG=1 for 3 s while the refresh hangs (systemd would restart it)"
like "$(curl -s --max-time 10 --unix-socket "$T/agent-w.sock" http://x/prpc/v1/Health)" \
	'"healthy":false' "meanwhile the agent still answers, not healthy"
term_and_time "$WEDGED" "a wedged refresh"
[ "$ELAPSED" != timeout ] && [ "$ELAPSED" -lt 10000 ]
ok $? "exits within 10 s of SIGTERM even in a hung refresh of 30 s (took $ELAPSED ms)"
is "$(leftovers)" "" "no process of the agent's is left"

# --- socket activation: the listener systemd passes, not --listen -----------
if command -v systemd-socket-activate >/dev/null 2>&1; then
	write_status healthy
	start_listener a
	# It passes the agent only the environment named here: tap.sh's empty
	# DSTACK_HEALTHD_CONTROL_SOCKET too, or the agent binds the default.
	systemd-socket-activate -l "$T/act.sock" -E NOTIFY_SOCKET="$T/a.sock" \
		-E DSTACK_HEALTHD_CONTROL_SOCKET= \
		"$BIN" -c "$T/healthd.json" --compose-file "$T/app.json" \
		--listen "unix:$T/not-this.sock" --interval 0.2 2>"$T/agent-a.err" &
	ACT=$!
	track $ACT
	wait_for 20 test -S "$T/act.sock"
	# The first connection starts the agent (systemd-socket-activate execs
	# it in its own pid) with the socket as fd 3.
	answer=$(curl -s --max-time 5 --unix-socket "$T/act.sock" http://x/prpc/v1/Health)
	like "$answer" '^\{"healthy":(true|false),' "socket activation: the passed socket answers /prpc/v1/Health"
	wait_for 20 has_line a ' READY=1$'
	ok $? "socket activation: READY=1"
	ok $([ ! -e "$T/not-this.sock" ]; echo $?) "socket activation: --listen is not bound"
	term_and_time "$ACT" "socket-activated"
	is "$EXIT_STATUS" 0 "socket activation: exit status 0 after SIGTERM"
else
	diag "systemd-socket-activate is not installed: socket activation not checked"
fi

done_testing
