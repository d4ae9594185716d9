# SPDX-License-Identifier: Apache-2.0
# What the front's end-to-end tests share (sourced after tests/lib/relay.sh):
# stand-in guest agents and agents on free ports, the agent's /status
# counters read and compared, and clients in the background.
# stand_in NAME [OPTIONS...]: a stand-in guest agent on a free port, its
# port in NAME and its pid in NAME_PID.
stand_in() {
	local name=$1
	shift
	python3 "$GA" --listen 127.0.0.1:0 --ready "$T/$name.port" "$@" 2>>"$T/$name.log" &
	PIDS+=($!)
	eval "${name}_PID=$!"
	wait_for 60 test -s "$T/$name.port" || { sed 's/^/# stand-in: /' "$T/$name.log"; return 1; }
	eval "$name=$(cat "$T/$name.port")"
}
# agent NAME FDS ARGS...: an agent on a free port under an fd limit of FDS
# (- for ours), its control socket $T/NAME.sock; its port in NAME, its pid
# in NAME_PID.
agent() {
	local name=$1 fds=$2
	shift 2
	(
		[ "$fds" = - ] || ulimit -n "$fds"
		exec "$BIN" --listen 127.0.0.1:0 --compose-file "$T/app.json" \
			--header-timeout "$HT" --control-socket "$T/$name.sock" "$@"
	) 2>"$T/$name.log" &
	PIDS+=($!)
	eval "${name}_PID=$!"
	wait_for 20 grep -q 'serving on 127.0.0.1:' "$T/$name.log" || return 1
	eval "$name=$(sed -n 's/.*serving on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$T/$name.log" | head -n1)"
}
# An fd limit that leaves the relay N slots: Health's 1024 and the gate's
# 128 spare first (rpc/gate.c), then 6 fds a relayed connection.
slots_limit() { echo $((1024 + 64 + 64 + $1 * 6)); }
ctl() { curl -s --max-time 20 --unix-socket "$T/$1.sock" "http://x/$2"; }
# relay_field AGENT KEY: /status's relay.KEY
relay_field() {
	ctl "$1" status | python3 -c "import json,sys; print(json.load(sys.stdin)['relay']['$2'])"
}
# relay_is AGENT KEY VALUE: /status's relay.KEY is VALUE (for wait_for,
# which runs its command again each time).
relay_is() { [ "$(relay_field "$1" "$2")" = "$3" ]; }
# counts AGENT: every counter /status has, "KEY=N" a line: the relay's
# (not its gauges) and the listener's, as listener_KEY.
counts() {
	ctl "$1" status | python3 -c '
import json, sys
d = json.load(sys.stdin)
for k, v in d["relay"].items():
    if k not in ("address", "slots", "open"):
        print("%s=%s" % (k, v))
for k, v in d["listener"].items():
    print("listener_%s=%s" % (k, v))'
}
# moved AGENT BEFORE: the counters that moved since BEFORE (what counts said
# then; empty: every one at 0), "KEY+N" each, in /status's order; so that a
# point names every counter its cause moves, and shows no other moved.
moved() {
	counts "$1" | python3 -c '
import sys
before = dict(l.split("=") for l in sys.argv[1].split())
now = [l.split("=") for l in sys.stdin.read().split()]
print(" ".join("%s+%d" % (k, int(v) - int(before.get(k, 0)))
               for k, v in now if v != before.get(k, "0")))' "$2"
}
# moved_is AGENT BEFORE WANT: moved says WANT (for wait_for).
moved_is() { [ "$(moved "$1" "$2")" = "$3" ]; }
# code PORT PATH: the status of a GET, and its seconds ("200 0.004")
code() { curl -s -o /dev/null --max-time 20 -w '%{http_code} %{time_total} %{time_connect} %{time_starttransfer}' "http://127.0.0.1:$1$2"; }
# accepted PORT: the listener on PORT has accepted every connection made to it.
accepted() { [ "$(ss -Hltn "( sport = :$1 )" | awk '{ print $2 }')" = 0 ]; }
# Connections between an agent and stand-in port P, in any state but closed.
upstream_conns() { ss -Htn "( dport = :$1 )" | grep -vc TIME-WAIT; }
# bg_client NAME ARGS...: relay_client.py in the background, its output in
# $T/NAME.out, its pid in NAME_PID; bg_end NAME stops it (SIGTERM: it prints
# its summary) and reaps it.
bg_client() {
	local name=$1
	shift
	python3 "$CL" "$@" >"$T/$name.out" 2>>"$T/$name.err" &
	PIDS+=($!)
	eval "${name}_PID=$!"
}
bg_end() {
	local pid
	eval "pid=\$${1}_PID"
	kill -TERM "$pid"
	reap 60 "$pid"
}
