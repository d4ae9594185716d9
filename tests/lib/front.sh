# SPDX-License-Identifier: Apache-2.0
# What the front's end-to-end tests share (sourced after tests/lib/relay.sh):
# stand-in guest agents and agents on free ports, the agent's /status
# counters read and compared, and clients in the background.
# stand_in NAME [OPTIONS...]: a stand-in guest agent on a free port, its
# port in NAME and its pid in NAME_PID.
stand_in() {
	local name=$1
	shift
	unpiped exec python3 "$GA" --listen 127.0.0.1:0 --ready "$T/$name.port" "$@" 2>>"$T/$name.log" &
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
	# The child truncates the log when it runs: gone first, a name used
	# again is never read with the last agent's port in it.
	rm -f "$T/$name.log"
	(
		[ "$fds" = - ] || ulimit -n "$fds"
		unpiped exec "$BIN" --listen 127.0.0.1:0 --compose-file "$T/app.json" \
			--header-timeout "$HT" --control-socket "$T/$name.sock" "$@"
	) 2>"$T/$name.log" &
	PIDS+=($!)
	eval "${name}_PID=$!"
	wait_for 20 grep -q 'serving on 127.0.0.1:' "$T/$name.log" || return 1
	eval "$name=$(sed -n 's/.*serving on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$T/$name.log" | head -n1)"
}
# An fd limit that leaves the relay N slots (N up to 512): Health's 1024
# and the gate's 128 spare first (rpc/gate.c), the relay's pipe pool (16),
# then 6 fds a relayed connection and one for a place in the queue for a
# slot (relay_budget).
slots_limit() { echo $((1024 + 64 + 64 + 16 + $1 * 7)); }
ctl() { curl -s --max-time 20 --unix-socket "$T/$1.sock" "http://x/$2"; }
# relay_field AGENT KEY: /status's relay.KEY
relay_field() {
	ctl "$1" status | python3 -c "import json,sys; print(json.load(sys.stdin)['relay']['$2'])"
}
# relay_is AGENT KEY VALUE: /status's relay.KEY is VALUE (for wait_for,
# which runs its command again each time).
relay_is() { [ "$(relay_field "$1" "$2")" = "$3" ]; }
# counts AGENT: every counter /status has, "KEY=N" a line: the relay's
# (not its gauges: slots, queue, open, kept_*, clients, top_clients) and
# the listener's, as listener_KEY.
counts() {
	ctl "$1" status | python3 -c '
import json, sys
d = json.load(sys.stdin)
for k, v in d["relay"].items():
    if k not in ("address", "slots", "queue", "open", "clients", "top_clients") and not k.startswith("kept_"):
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
	unpiped exec python3 "$CL" "$@" >"$T/$name.out" 2>>"$T/$name.err" &
	PIDS+=($!)
	eval "${name}_PID=$!"
}
bg_end() {
	local pid
	eval "pid=\$${1}_PID"
	kill -TERM "$pid"
	reap 60 "$pid"
}
# unpiped CMD...: CMD without the write ends of piped's pipes, so that a
# background process never holds another one's input open.
unpiped() {
	local f
	for f in $PIPED_FDS; do eval "exec $f>&-"; done
	"$@"
}
# piped NAME CMD...: CMD in the background with its standard input a pipe
# held open here (its fd in NAME_IN; `exec {NAME_IN}>&-` ends the input),
# its output in $T/NAME.out and its pid in NAME_PID. Bash keeps one coproc
# at a time; this keeps as many as a test needs.
PIPED_FDS=
piped() {
	local name=$1 fd
	shift
	mkfifo "$T/$name.in"
	unpiped exec "$@" <"$T/$name.in" >"$T/$name.out" 2>>"$T/$name.err" &
	PIDS+=($!)
	eval "${name}_PID=$!"
	exec {fd}>"$T/$name.in"
	eval "${name}_IN=$fd"
	PIPED_FDS="$PIPED_FDS $fd"
}
# line NAME N [SECONDS]: line N of NAME's output, once it has come (within
# SECONDS, 60 by default).
line() {
	wait_for "${3:-60}" eval "[ \"\$(wc -l <'$T/$1.out')\" -ge $2 ]"
	sed -n "$2p" "$T/$1.out"
}
