#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# tests/run: timeout 900
# The front keeps what it carries (issue 33): from one address, as everything
# public reaches a CVM from the gateway's one address, a followed log that
# prints a line every 4 s and a WebSocket that pings every 25 s, opened
# first (the log's second line and the WebSocket's first ping come before
# the first wave: a link is known as a stream once it has shown it), and a
# log that has printed one line of a line every 2 minutes (not yet a stream:
# kept as one of the 4 oldest of the 16 slots, the reserve), outlive
# waves of newcomers that each send a whole request, read the answer and sit
# idle, each wave as many as the slots (and as the queue for a slot, which
# the fd limit sizes with them: a larger wave arriving at once may find it
# full, refused_queue), six waves in all; every newcomer is answered (room
# is made from the idle ones, the youngest first, and a wave waits for its
# own links to be answered); nothing is reset on the stream or the WebSocket. Three rounds: two against the
# stand-in guest agent, one against the one that keeps connections as Rocket
# does (a connection quiet for 10 s between requests is closed). Then the
# other side of the rule: two slots whose links await slow answers, then two
# moving bytes, and each time a newcomer is answered 503, the counters
# saying what kept them. Last, a client that speaks to a quiet server: a
# WebSocket whose server never answers and an upload that moves with
# pauses keep their slots past the minute a request awaiting its answer is
# held from its start, and a newcomer takes the slot of a link idle since
# its answer instead (issue 43).
set -u
cd "$(dirname "$0")/../.."
. tests/lib/netns.sh
. tests/lib/tap.sh
. tests/lib/relay.sh
. tests/lib/front.sh
FC=tests/fakes/front_client.py
SLOTS=16
WAVE=16
diag "network namespace: ${NETNS:-none}"

stand_in S || { echo "not ok 1 - no stand-in S"; exit 1; }
stand_in G --keepalive 10 || { echo "not ok 1 - no stand-in G"; exit 1; }

# round N UPSTREAM: an agent with $SLOTS relay slots in front of UPSTREAM;
# the stream and the WebSocket, then a wave of $WAVE idle newcomers every 5 s
# for 30 s.
round() {
	local n=$1 up=$2 w waves=6 ans=0 lines
	agent "R$n" "$(slots_limit $SLOTS)" --relay "127.0.0.1:$up" || { ok 1 "agent R$n did not start"; return; }
	local port
	eval "port=\$R$n"
	piped "LOG$n" python3 "$FC" "$port" follow "/logs/r$n?every=4"
	piped "WS$n" python3 "$FC" "$port" ws 25
	# A log that prints a line every 2 minutes: after its first line it
	# has not shown it is a stream, and is kept as one of the 4 oldest
	# links (the reserve, rpc/keep.h).
	piped "ONE$n" python3 "$FC" "$port" follow "/logs/o$n?every=120"
	# Both have shown what they are: the log its second line (the guest
	# agent speaking unasked), the WebSocket a ping answered.
	wait_for 60 grep -q 'two lines' "$T/LOG$n.out" && wait_for 60 grep -q pong "$T/WS$n.out" &&
		wait_for 60 grep -q 'a line' "$T/ONE$n.out"
	for w in $(seq $waves); do
		bg_client "W$n$w" "$port" hold $WAVE /small --from 127.0.0.2 --reopen 3600
		wait_for 60 grep -q "answered=$WAVE" "$T/W$n$w.out" && ans=$((ans + 1))
		# A wave every 5 s, whatever the time its answers took.
		local end=$(($(date +%s%N) / 1000000 + 5000))
		wait_for 30 eval '[ $(($(date +%s%N) / 1000000)) -ge $end ]'
	done
	# The counters before the test's own clients go (a close with bytes
	# unread is a reset, passed on as one).
	local counted
	counted="$(relay_field "R$n" reset) $(relay_field "R$n" refused_full) $(relay_field "R$n" refused_queue)"
	# Where a stream's bytes wait, should its lines have stopped: every
	# socket's queues, before the clients go.
	ss -tn >"$T/ss$n.txt" 2>&1
	kill -TERM "$(eval echo "\$LOG${n}_PID")" "$(eval echo "\$WS${n}_PID")" "$(eval echo "\$ONE${n}_PID")"
	reap 30 "$(eval echo "\$LOG${n}_PID")"
	reap 30 "$(eval echo "\$WS${n}_PID")"
	reap 30 "$(eval echo "\$ONE${n}_PID")"
	lines=$(sed -n 's/^lines=\([0-9]*\).*/\1/p' "$T/LOG$n.out")
	is "$ans" "$waves" "round $n: every newcomer of $waves waves of $WAVE ($((waves * WAVE)) against $SLOTS slots) answered"
	like "$(tail -n1 "$T/LOG$n.out")" 'end=open' "round $n: the followed log outlived them ($(tail -n1 "$T/LOG$n.out"))"
	local kept=0
	[ "${lines:-0}" -ge 6 ] || kept=1
	ok $kept "round $n: ...and its lines kept coming ($lines lines in $((waves * 5)) s, one every 4 s)"
	if [ $kept -ne 0 ]; then
		diag "the sockets before the clients went (ss -tn; the agent on $port, the guest agent on $up):"
		diag "$(sed 's/^/  /' "$T/ss$n.txt")"
		diag "the follower's errors: $(cat "$T/LOG$n.err" 2>/dev/null)"
		diag "the guest agent's log: $(tail -n 20 "$T/$([ "$up" = "$S" ] && echo S || echo G).log" 2>/dev/null)"
	fi
	like "$(tail -n1 "$T/ONE$n.out")" '^lines=1 .*end=open$' \
		"round $n: a log opened first with one line shown, not yet a stream, outlived them too ($(tail -n1 "$T/ONE$n.out"))"
	like "$(tail -n1 "$T/WS$n.out")" '^pings=([1-9][0-9]*) pongs=\1 end=open$' \
		"round $n: the WebSocket outlived them, every ping answered ($(tail -n1 "$T/WS$n.out"))"
	local ev closes=0 least
	ev=$(relay_field "R$n" evicted)
	is "$counted" "0 0 0" "round $n: /status: no reset, no newcomer refused ($ev evicted)"
	# Room the guest agent made itself, closing links quiet for its
	# keep-alive, is room no eviction had to make.
	[ "$up" = "$G" ] && closes=$(grep -c 'keep-alive close' "$T/G.log")
	least=$((waves * WAVE - SLOTS - closes))
	[ "$ev" -ge "$least" ]
	ok $? "round $n: ...room made by evicting idle newcomers ($ev evicted, at least $least: $((waves * WAVE)) newcomers, $SLOTS slots, $closes closed by the guest agent)"
	for w in $(seq $waves); do bg_end "W$n$w"; done
}

round 1 "$S"
round 2 "$S"
round 3 "$G"

# --- every slot kept: a newcomer waits, then 503 -----------------------------------------
# Two slots, each a request the stand-in answers only when told (/reset?F
# waits for F.go): both await their answers. A newcomer waits for either to
# end (a second), then is answered 503, and /status says both slots were
# kept as awaiting an answer. Then two slots whose clients stop reading a
# 1 MiB answer: bytes wait in both links (a 1 MiB answer may fit whole in
# the kernel's buffers, the pipes empty: then in the agent's send queue),
# both are moving however long they wait, and a newcomer is answered 503
# again.
agent K "$(slots_limit 2)" --relay "127.0.0.1:$S" || { echo "not ok - agent K did not start"; exit 1; }
for i in 1 2; do
	curl -s --max-time 60 "http://127.0.0.1:$K/reset?$T/slow$i" >/dev/null 2>&1 &
	PIDS+=($!)
done
wait_for 30 test -e "$T/slow1.got" && wait_for 30 test -e "$T/slow2.got"
out=$(curl -s -o /dev/null --max-time 20 -w '%{http_code}' "http://127.0.0.1:$K/small")
is "$out" 503 "two slots awaiting slow answers: a newcomer is answered 503"
is "$(relay_field K refused_full) $(relay_field K kept_awaiting) $(relay_field K kept_moving) $(relay_field K evicted)" \
	"1 2 0 0" "/status: refused_full 1, both slots kept as awaiting an answer, none evicted"
touch "$T/slow1.go" "$T/slow2.go"
wait_for 30 relay_is K open 0
piped STALL python3 "$CL" "$K" stall 1 2
wait_for 30 grep -q stalled "$T/STALL.out"
out=$(curl -s -o /dev/null --max-time 20 -w '%{http_code}' "http://127.0.0.1:$K/small")
is "$out" 503 "two slots moving bytes (their clients read nothing): a newcomer is answered 503"
is "$(relay_field K refused_full) $(relay_field K kept_moving) $(relay_field K kept_awaiting)" \
	"2 2 0" "/status: refused_full 2, both slots kept as moving bytes"
exec {STALL_IN}>&-
reap 30 "$STALL_PID"

# --- a client speaking to a quiet server keeps its hold ---------------------------------
# Three slots: a request answered and quiet since (opened first); a
# WebSocket whose server never answers, its client pinging every 20 s; and
# a first request's upload moving 1 KiB a second (the stand-in reads it
# all, answering only at its end). 75 s on, past the minute a request
# awaiting its answer was held from its start, a newcomer takes the quiet
# request's slot; the WebSocket and the upload are kept. Held by that
# minute alone, both would be idle between their bytes, and the upload, the
# youngest, reset.
now_ms() { echo $(($(date +%s%N) / 1000000)); }
agent QS "$(slots_limit 3)" --relay "127.0.0.1:$S" || { echo "not ok - agent QS did not start"; exit 1; }
bg_client QI "$QS" hold 1 /small --reopen 3600
wait_for 20 grep -q answered= "$T/QI.out"
piped QW python3 "$FC" "$QS" ws 20 quiet
is "$(line QW 1)" upgraded "a WebSocket to a server that never answers: upgraded"
piped QU python3 "$FC" "$QS" upload "/upload?$T/qu" 1000000 1024 1
is "$(line QU 1)" sending "an upload of a first request, 1 KiB a second: under way"
end=$(($(now_ms) + 75000))
wait_for 120 eval '[ "$(now_ms)" -ge "$end" ]'
is "$(code "$QS" /small | cut -d' ' -f1)" 200 "75 s on, a newcomer in the three slots: relayed"
is "$(relay_field QS evicted) $(relay_field QS reset)" "1 0" "/status: one evicted, nothing reset"
bg_end QI
like "$(tail -n1 "$T/QI.out")" 'reset=1' "...in the slot of the request answered and quiet since ($(tail -n1 "$T/QI.out"))"
kill -TERM "$QW_PID" "$QU_PID"
reap 30 "$QW_PID"
reap 30 "$QU_PID"
like "$(tail -n1 "$T/QW.out")" 'end=open$' "...the quiet server's WebSocket kept: its client's pings count ($(tail -n1 "$T/QW.out"))"
like "$(tail -n1 "$T/QU.out")" 'end=open$' "...the upload kept: its bytes buy it time ($(tail -n1 "$T/QU.out"))"
done_testing
