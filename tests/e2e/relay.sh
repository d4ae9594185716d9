#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The relay (issue 18) end to end: the agent fronts a stand-in guest agent
# (tests/fakes/guest_agent.py, a real threaded HTTP/1.1 server) with
# --relay. Health is the agent's own answer, byte for byte the one an agent
# without --relay gives; everything else is the stand-in's, byte for byte
# (the 1 MiB page, a 4 MiB upload echoed, /prpc/v1/Version), kept-alive
# Info calls share one relayed connection, a followed log stream outlives
# header_timeout, a first line split across packets is routed on the whole
# line both ways, a half-closing client gets its whole answer, an answer
# that comes with its FIN leaves in one segment with it, an answer that
# comes with a reset is still relayed, a first line
# trickled forever is closed near header_timeout, a connection is routed
# once (Health then / gets the agent's 404), the stand-in stopped gives 502
# (logged once per outage) while Health is still answered, full relay slots
# give 503 while Health is still answered, /status and /metrics count it
# all, a client that stops reading and resets leaves no pipe short, and
# once every client has gone no relayed connection is left open and the
# agent's fd count is back at its baseline. Loopback only.
# tests/run: tsan
set -u
cd "$(dirname "$0")/../.."
. tests/lib/tap.sh
# The binary, the stand-ins, the scratch folder, a file limit raised for
# the client sockets, HT and $T/app.json.
. tests/lib/relay.sh

# stand_in [PORT]: starts the stand-in (a free port, or PORT), sets GP.
stand_in() {
	rm -f "$T/ga.port"
	python3 "$GA" --listen "127.0.0.1:${1:-0}" --ready "$T/ga.port" 2>>"$T/ga.log" &
	GA_PID=$!
	PIDS+=($GA_PID)
	wait_for 60 test -s "$T/ga.port" || { sed 's/^/# stand-in: /' "$T/ga.log"; return 1; }
	GP=$(cat "$T/ga.port")
}
# agent NAME ARGS...: starts an agent on a free port, sets its port in NAME
# and its pid in NAME_PID.
agent() {
	local name=$1
	shift
	rm -f "$T/$name.log" # truncated by the child only when it runs
	"$BIN" --listen 127.0.0.1:0 --compose-file "$T/app.json" "$@" 2>"$T/$name.log" &
	PIDS+=($!)
	eval "${name}_PID=$!"
	wait_for 20 grep -q 'serving on 127.0.0.1:' "$T/$name.log" || return 1
	eval "$name=$(sed -n 's/.*serving on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$T/$name.log" | head -n1)"
}
fds() { ls "/proc/$1/fd" | wc -l; }
# Connections between the agent and the stand-in, in any state but closed.
upstream_conns() { ss -Htn "( dport = :$GP )" | grep -vc TIME-WAIT; }
health() { curl -s --max-time 20 -X POST "http://127.0.0.1:$1/prpc/v1/Health${2:-}" -d '{}'; }
ctl() { curl -s --max-time 20 --unix-socket "$T/${CTL:-ctl}.sock" "http://x/$1"; }
relay_field() { ctl status | python3 -c "import json,sys; print(json.load(sys.stdin)['relay']['$1'])"; }
listener_field() { ctl status | python3 -c "import json,sys; print(json.load(sys.stdin)['listener']['$1'])"; }

stand_in || { echo "not ok 1 - the stand-in did not start"; echo "1..1"; exit 1; }
agent A --relay "127.0.0.1:$GP" --header-timeout "$HT" --control-socket "$T/ctl.sock" &&
	agent PLAIN || { echo "not ok 1 - the agents did not start"; echo "1..1"; exit 1; }
diag "stand-in on $GP, relaying agent on $A, plain agent on $PLAIN"
like "$(cat "$T/A.log")" "relaying all but Health to 127\.0\.0\.1:$GP \([0-9]+ slots\)" \
	"the start line says where the relay goes"
BASE_FDS=$(fds "$A_PID")

# --- routing --------------------------------------------------------------------
got=$(curl -s --max-time 20 -D "$T/h.head" -X POST "http://127.0.0.1:$A/prpc/v1/Health?json" -d '{}')
is "$got" "$(health "$PLAIN" '?json')" "Health (JSON) is the agent's: the same bytes as an agent without --relay"
! grep -qi '^Server: stand-in' "$T/h.head"
ok $? "Health's answer does not come from the stand-in"
is "$(health "$A" | sha256sum)" "$(health "$PLAIN" | sha256sum)" \
	"Health (protobuf) is the agent's too"
is "$(curl -s --max-time 20 "http://127.0.0.1:$A/prpc/v1/Health?json&x=1")" "$(health "$PLAIN" '?json')" \
	"Health with GET and more query is the agent's"
is "$(curl -s --max-time 20 "http://127.0.0.1:$PLAIN/" | head -c 60)" \
	'{"error":"not found: pRPC methods are served under /prpc/v1/' \
	"without --relay nothing changes: / is the agent's 404"

want=$(curl -s --max-time 20 "http://127.0.0.1:$GP/page.sha256")
got=$(curl -s --max-time 60 "http://127.0.0.1:$A/" | sha256sum | cut -d' ' -f1)
is "$got" "$want" "/ relayed: the stand-in's 1 MiB page, byte for byte (sha256)"
is "$(curl -s --max-time 20 "http://127.0.0.1:$A/prpc/v1/Version")" '{"version":"stand-in"}' \
	"/prpc/v1/Version is the guest agent's in relay mode"
head -c $((4 << 20)) /dev/urandom >"$T/up"
curl -s --max-time 60 --data-binary @"$T/up" -H 'Expect:' "http://127.0.0.1:$A/echo" >"$T/down"
cmp -s "$T/up" "$T/down"
ok $? "a 4 MiB upload relayed and echoed back byte for byte"
is "$(python3 "$CL" "$A" keepalive 3 | tr '\n' ' ')" \
	'200 {"app_id":"stand-in","n":1} 200 {"app_id":"stand-in","n":2} 200 {"app_id":"stand-in","n":3} ' \
	"three POST /prpc/Info?json on one kept-alive connection: one relayed connection answers all"
is "$(python3 "$CL" "$A" sequence /prpc/v1/Health / | tr '\n' ' ')" "200 - 404 - " \
	"routed once: Health first, then / on the same connection gets the agent's 404"
is "$(python3 "$CL" "$A" sequence / /prpc/v1/Health | tr '\n' ' ')" \
	"200 stand-in 404 stand-in " "routed once: / first, then Health on the same connection is the stand-in's"

# --- the first line -------------------------------------------------------------
out=$(python3 "$CL" "$A" split 'POST /prpc/v1/He' \
	'alth?json HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}')
like "$out" '"healthy":true' "a first line split inside Health's path: the agent answers"
! printf '%s' "$out" | grep -qi 'Server: stand-in'
ok $? "...and not the stand-in"
out=$(python3 "$CL" "$A" split 'GET /prpc/v1/Health' 'x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n')
like "$out" 'Server: stand-in' "a first line that begins like Health's and is not: the stand-in answers"
lt=$(listener_field head_timeout) rt=$(relay_field head_timeout)
out=$(python3 "$CL" "$A" trickle 'GET /logs/')
awk -v s="$out" -v h="$HT" 'BEGIN { exit !(s >= h - 0.5 && s < h + 15) }'
ok $? "a first line trickled forever is closed near header_timeout (${out:-?} s, header_timeout $HT s)"
is "$(($(listener_field head_timeout) - lt)) $(($(relay_field head_timeout) - rt))" "1 0" \
	"...counted as the listener's own head_timeout, not the relay's: a line never whole is nobody's yet"

# --- streams and half-closes ----------------------------------------------------
curl -sN --max-time 6 "http://127.0.0.1:$A/logs/app?follow=true" >"$T/log.out" 2>/dev/null
n=$(grep -c '^line ' "$T/log.out")
[ "$n" -ge 30 ]
ok $? "a followed log stream flows past header_timeout ($n lines in 6 s, a line per 100 ms)"
out=$(python3 "$CL" "$A" halfclose /echo 300000)
like "$out" '^status=200 body_sha256=([0-9a-f]+) body_len=300000 sent_sha256=\1$' \
	"a client that shuts its sending side after the request still gets the whole answer"
# The stand-in sends an answer and its FIN in one segment: the relay reads to
# the end before it writes, so the client gets them in one too, as it does
# from the stand-in directly (4 segments, not 3, if the FIN followed apart).
direct=$(python3 "$CL" "$GP" segments /closing)
is "$(python3 "$CL" "$A" segments /closing)" "$direct" \
	"an answer that comes with its FIN is relayed in as many segments as sent ($direct)"
# An answer followed at once by a reset, both there when the relay wakes
# (the agent stopped meanwhile): the answer still reaches the client.
curl -s --max-time 60 "http://127.0.0.1:$A/reset?$T/rst" >"$T/rst.out" &
RST=$!
PIDS+=($RST)
wait_for 30 test -e "$T/rst.got"
kill -STOP "$A_PID"
touch "$T/rst.go"
wait_for 30 test -e "$T/rst.sent"
kill -CONT "$A_PID"
reap 60 "$RST"
is "$(cat "$T/rst.out")" "the answer before a reset" \
	"an answer and a reset arriving together: the answer is relayed before the link closes"

# --- a flood of first lines that never end ----------------------------------------
# More than the gate's 1024 slots, from 127.0.0.2, each trickling "GET /logs/a..."
# forever: none is relayed, every one is closed at header_timeout (or evicted,
# oldest first), and a gateway-style poll meanwhile is answered every time.
python3 "$CL" "$A" flood 1100 10 >"$T/flood.out" &
FLOOD=$!
PIDS+=($FLOOD)
python3 tests/fakes/gateway_poll.py --tcp "127.0.0.1:$A" --duration 8 --gap 200 >"$T/poll.out"
reap 60 "$FLOOD"
read -r polls okn <<<"$(sed -n 's/^polls=\([0-9]*\) ok=\([0-9]*\).*/\1 \2/p' "$T/poll.out")"
[ "${polls:-0}" -ge 10 ] && [ "$okn" = "$polls" ]
ok $? "a flood of 1100 never-ending first lines: every Health poll answered ($(cat "$T/poll.out"))"
closed=$(sed -n 's/.*closed_by_server=\([0-9]*\).*/\1/p' "$T/flood.out")
[ "${closed:-0}" -ge 1100 ]
ok $? "...and every flooding connection closed by the agent at least once ($(cat "$T/flood.out"))"
is "$(relay_field total)" 10 "...and none of them relayed"
is "$(relay_field head_timeout) $(relay_field head_evicted)" "0 0" \
	"...and none counted as the relay's: no first line ended"
gone=$(($(listener_field head_timeout) + $(listener_field evicted)))
[ "$gone" -ge "${closed:-0}" ] && [ "$(listener_field evicted)" -ge 1 ]
ok $? "...each close counted by the listener, past the slots as evicted ($gone counted: head_timeout $(listener_field head_timeout), evicted $(listener_field evicted); $closed closed)"

# --- a client that stops reading, then goes -------------------------------------
# 16 pages asked for on one connection and not read: the relay stops
# reading the stand-in once its pipe toward the client is full (the agent's
# socket to the stand-in then has bytes it has not read), and the client's
# close (a reset) ends the link with bytes in that pipe: the pipe is closed
# and replaced, so the fd count below still comes back to the baseline.
coproc STALL { python3 "$CL" "$A" stall 16; }
PIDS+=("$STALL_PID")
read -r -t 30 stalled <&"${STALL[0]}"
held() { ss -Htn "( dport = :$GP )" | awk '$2 > 0 { n++ } END { exit !n }'; }
wait_for 30 held
ok $? "a client that stops reading: the relay holds the stand-in's bytes (${stalled:-no answer})"
exec {STALL[1]}>&-
reap 30 "$STALL_PID" 2>/dev/null

# --- nothing left behind --------------------------------------------------------
wait_for 20 eval '[ "$(upstream_conns)" = 0 ]'
ok $? "every client gone: no connection to the stand-in is left ($(upstream_conns) open)"
wait_for 20 eval '[ "$(fds "$A_PID")" = "$BASE_FDS" ]'
ok $? "the agent's fd count is back at its baseline ($(fds "$A_PID"), baseline $BASE_FDS)"
is "$(relay_field open)" 0 "/status: relay open 0"
is "$(relay_field total)" 11 "/status: relay total still counts the 11 relayed connections above"

# --- the guest agent down -------------------------------------------------------
kill -9 "$GA_PID"
reap 10 "$GA_PID" 2>/dev/null
for i in 1 2 3; do
	curl -s --max-time 20 -D "$T/502.head.$i" "http://127.0.0.1:$A/" >"$T/502.body.$i"
done
like "$(head -n1 "$T/502.head.1")" '^HTTP/1\.1 502 ' "the stand-in stopped: / answers 502"
is "$(cat "$T/502.body.1")" "bad gateway: the guest agent cannot be reached" \
	"...with a short body in the agent's words"
like "$(health "$A" '?json')" '"healthy":true' "the stand-in stopped: Health is still answered"
is "$(grep -c 'cannot be reached' "$T/A.log")" 1 \
	"the outage is logged once (three 502s), with the address"
like "$(grep 'cannot be reached' "$T/A.log")" "127\.0\.0\.1:$GP" "...naming the address"
is "$(relay_field unreachable)" 3 "/status: relay unreachable counts the 502s"
ctl metrics >"$T/metrics"
for m in relay_open relay_total relay_refused_full_total relay_unreachable_total; do
	grep -q "^dstack_healthd_$m " "$T/metrics"
	ok $? "/metrics: dstack_healthd_$m"
done
is "$(sed -n 's/^dstack_healthd_relay_unreachable_total //p' "$T/metrics")" 3 \
	"/metrics: unreachable agrees with /status"
stand_in "$GP" || diag "the stand-in did not come back on $GP"
is "$(curl -s --max-time 20 "http://127.0.0.1:$A/prpc/v1/Version")" '{"version":"stand-in"}' \
	"the stand-in back: relayed again"
is "$(grep -c 'reachable again' "$T/A.log")" 1 "the recovery is logged once"

# --- relay slots full -----------------------------------------------------------
# An fd limit that leaves room for Health's 1024 slots (and the gate's 128
# spare), the relay's pipe pool (16) and two relayed connections of 6 fds
# each, with a place each in the queue for a slot (rpc/relay.h).
(ulimit -n $((1024 + 64 + 64 + 16 + 2 * 7)) && exec "$BIN" --listen 127.0.0.1:0 \
	--compose-file "$T/app.json" --relay "127.0.0.1:$GP" --control-socket "$T/ctlF.sock" \
	2>"$T/F.log") &
F_PID=$!
PIDS+=($F_PID)
wait_for 20 grep -q 'serving on 127.0.0.1:' "$T/F.log"
F=$(sed -n 's/.*serving on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$T/F.log" | head -n1)
like "$(cat "$T/F.log")" '\(2 slots\)' "an fd limit that fits two relayed connections: 2 relay slots"
STREAMS=()
for i in 1 2; do
	curl -sN --max-time 60 "http://127.0.0.1:$F/logs/s$i" >"$T/s$i.out" 2>/dev/null &
	PIDS+=($!)
	STREAMS+=($!)
done
# Both streams established and moving bytes for over a second (12 lines of
# one every 100 ms): busy, so neither is evicted for a newcomer.
wait_for 30 eval '[ "$(ss -Htn state established "( dport = :$GP )" | wc -l)" -ge 2 ]' &&
	wait_for 30 eval '[ "$(grep -c "^line" "$T/s1.out")" -ge 12 ] && [ "$(grep -c "^line" "$T/s2.out")" -ge 12 ]'
out=$(curl -s --max-time 20 -w ' %{http_code}' "http://127.0.0.1:$F/" | tr -d '\n')
is "$out" "service unavailable: too many relayed connections 503" \
	"relay slots full: 503 with a short body in the agent's words"
like "$(health "$F" '?json')" '"healthy":true' "relay slots full: Health is still answered"
is "$(CTL=ctlF relay_field refused_full) $(CTL=ctlF relay_field open)" "1 2" \
	"/status: refused_full counts the 503, open the two streams"

# --- a stop with relayed links open ---------------------------------------------
# As systemd stops it: SIGTERM with both streams moving bytes. It exits by
# itself, as it does idle, and its clients see their streams end then, not
# at their own 60 s limit.
agent_stop "$F_PID" "F, two relayed streams open"
streams_gone() { for p in "${STREAMS[@]}"; do pid_gone "$p" || return 1; done; }
wait_for 20 streams_gone
ok $? "the relayed streams end with the agent (the clients' curl have exited)"
done_testing
