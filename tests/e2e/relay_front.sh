#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The front never takes the guest agent's port down (issue 26), end to end,
# against stand-in guest agents that are real HTTP servers
# (tests/fakes/guest_agent.py), one of them like the guest agent's Rocket (a
# connection quiet for 10 s is closed, no deadline for a head):
#   - a slot is free the moment its connection ends: a burst against a guest
#     agent that accepts nothing, then 20 requests in a row with no other
#     traffic, all relayed;
#   - no one holds the relay hostage: 2000 idle connections from one address
#     (half with a whole request relayed, half with a request line alone),
#     and the dashboard is still served whole, ten times in a row; a
#     first head trickled forever is cut at header_timeout and never
#     relayed; with every slot taken the quietest is evicted, and only busy
#     slots make a newcomer wait (503); a relayed connection quiet for
#     relay_idle_timeout is reset;
#   - heads dripped a byte per segment by 50 connections leave Health
#     polls answered;
#   - the first head's bound, 32768 bytes, by lengths written out here: a
#     30000-byte head is relayed, a 40000-byte one answered 400, a
#     40000-byte request line 414;
#   - a guest agent that resets mid-answer is seen by the client as a reset;
#   - a peer that vanishes (its packets dropped, in a private network
#     namespace) frees its slot through keepalive (relay_keepalive 1 s);
#   - a client that resets mid-upload is seen by the guest agent as a reset;
#   - HEAD answered 502 carries no body; a low fd limit is warned about;
#   - /status and /metrics count each cause apart, and each point shows
#     the counters its cause moves and that no other moved: out of fds for
#     a socket (refused_resources, no connect begun) or for a pipe mid-
#     transfer (reset_resources) is not "full" nor a reset; the gate's queue
#     for the relay full (the relay thread stopped by ptrace) is
#     refused_queue, not refused_full; the gate's closes of heads for the
#     relay (head_timeout, head_evicted) apart from its closes of first
#     lines that never ended (the listener's own head_timeout, evicted).
# Loopback only, in a private network namespace of its own when it may
# make one (root, unshare); else the points that need one are skipped.
set -u
cd "$(dirname "$0")/../.."
. tests/lib/netns.sh
. tests/lib/tap.sh
# The binary, the stand-ins, the scratch folder, a file limit raised for
# the client sockets, HT and $T/app.json.
. tests/lib/relay.sh
# stand_in, agent, the /status counters, background clients.
. tests/lib/front.sh

diag "network namespace: ${NETNS:-none (not root, or no unshare)}"

# --- a slot is free the moment its connection ends --------------------------------
# A guest agent that accepts nothing yet (listen backlog 0, taken by a
# connection of ours) and an agent with one relay slot: a burst of 8 ends in
# a 502 (the connect times out after 1 s, in the relay's last sweep) and
# 503s, with nothing after them to wake the relay. Then the guest agent
# accepts, and 20 requests in a row, with no other traffic, must all be
# relayed: none may find the slot still taken by the burst.
touch "$T/hold"
stand_in H --backlog 0 --hold "$T/hold" || { echo "not ok 1 - no stand-in"; exit 1; }
exec {FILL}<>"/dev/tcp/127.0.0.1/$H"
agent L "$(slots_limit 1)" --relay "127.0.0.1:$H" || { echo "not ok 1 - agent L did not start"; exit 1; }
like "$(cat "$T/L.log")" '\(1 slots\)' "an fd limit that fits one relayed connection: 1 relay slot, said at start"
like "$(grep 'fd limit' "$T/L.log")" \
	"warning: relay: the fd limit \\($(slots_limit 1)\\) leaves room for 1 relayed connections, not 512; raise LimitNOFILE" \
	"...and a warning at start that the fd limit cuts the slots below the default"
for i in 1 2 3 4 5 6 7 8; do
	echo "$(code "$L" /small)" >"$T/burst.$i" &
	PIDS+=($!)
	eval "BURST_$i=$!"
done
for i in 1 2 3 4 5 6 7 8; do eval "reap 60 \$BURST_$i"; done
wait_for 10 relay_is L open 0
ok $? "...and the slot is back at once, with no other traffic (/status: open $(relay_field L open))"
# The one slot connects for 1 s and gets 502; a newcomer that waits in the
# queue's one place meanwhile may take the slot after it (and get 502 too)
# or be refused when its own second of waiting ends first: which one, is the
# machine's timing. Every one is answered, 502 or 503.
n502=$(cat "$T"/burst.* | cut -d' ' -f1 | grep -c '^502$')
n503=$(cat "$T"/burst.* | cut -d' ' -f1 | grep -c '^503$')
[ "$n502" -ge 1 ] && [ "$n502" -le 2 ] && [ $((n502 + n503)) -eq 8 ]
ok $? "a burst of 8 against a guest agent that accepts nothing: $n502 x 502 (connect timeout), $n503 x 503 (the slot connecting)"
exec {FILL}>&-
rm -f "$T/hold"
wait_for 20 accepted "$H"
codes=
for i in $(seq 20); do codes+="$(code "$L" /small | cut -d' ' -f1) "; done
is "$codes" "$(printf '200 %.0s' $(seq 20))" \
	"then 20 requests in a row, with no other traffic: every one relayed (the slot not left taken by the burst)"
# The queue has one place (for one slot): a newcomer waits in it only while
# the relay thread looks, and is refused there (refused_full) or, finding
# the place taken, by the gate (refused_queue): how the 7 split is the
# machine's timing, their sum is the rule.
out=$(moved L '')
refused=$(($(echo "$out" | sed -n 's/.*refused_full+\([0-9]*\).*/\1/p') + 0$(echo "$out" | sed -n 's/.*refused_queue+\([0-9]*\).*/+\1/p')))
is "$(echo "$out" | sed 's/ refused_full+[0-9]*//; s/ refused_queue+[0-9]*//') refused=$refused $(relay_field L open)" \
	"total+$((20 + n502)) unreachable+$n502 refused=$n503 0" \
	"/status: $((20 + n502)) connects begun, unreachable $n502, $n503 refused (no slot, none to evict: refused_full; or the queue full: refused_queue), nothing else; open 0 ($out)"
is "$(relay_field L queue)" "1" "/status: one place in the queue for one slot"

# --- a low fd limit, and HEAD's 502 -------------------------------------------------
# A guest agent that is not there: every relayed connection gets 502.
DEAD=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
agent D "$(slots_limit 0)" --relay "127.0.0.1:$DEAD" || { echo "not ok - agent D did not start"; exit 1; }
like "$(cat "$T/D.log")" '\(0 slots\)' "an fd limit that leaves no relay slot: 0 slots, said at start"
like "$(cat "$T/D.log")" 'leaves room for 0 relayed connections, not 512' "...and warned about"
is "$(code "$D" / | cut -d' ' -f1)" 503 "...and a relayed request gets 503 at once"
agent U - --relay "127.0.0.1:$DEAD" || { echo "not ok - agent U did not start"; exit 1; }
! grep -q 'fd limit' "$T/U.log"
ok $? "an fd limit that fits every slot: no warning"
out=$(python3 "$CL" "$U" raw 'HEAD / HTTP/1.1\r\nHost: x\r\n\r\n' | tr '\n' ' ')
is "$out" "HTTP/1.1 502 Bad Gateway body=0 " "HEAD answered 502: no body"
out=$(python3 "$CL" "$U" raw 'GET / HTTP/1.1\r\nHost: x\r\n\r\n' | tr '\n' ' ')
is "$out" "HTTP/1.1 502 Bad Gateway body=47 " "GET answered 502: its short body"
out=$(python3 "$CL" "$D" raw 'HEAD / HTTP/1.1\r\nHost: x\r\n\r\n' | tr '\n' ' ')
is "$out" "HTTP/1.1 503 Service Unavailable body=0 " "HEAD answered 503: no body"
is "$(moved D '')" "refused_full+2" \
	"/status: refused_full counts the two 503s (no slot to take or evict), nothing else moved"
is "$(moved U '')" "total+2 unreachable+2" "/status: the two 502s are unreachable's, each a connect begun"

# --- the Rocket-like guest agent, and the agent in front of it -----------------------
stand_in G --keepalive 10 || { echo "not ok - no stand-in G"; exit 1; }
agent A - --relay "127.0.0.1:$G" --relay-keepalive 1 || { echo "not ok - agent A did not start"; exit 1; }
diag "Rocket-like stand-in on $G, agent A on $A"

# --- the first head: whole within header_timeout, and bounded -------------------------
out=$(python3 "$CL" "$A" trickle 'GET /logs/a HTTP/1.1\r\nHost: x\r\nCookie: ' 30)
awk -v s="$out" -v h="$HT" 'BEGIN { exit !(s >= h - 0.5 && s < h + 15) }'
ok $? "a first head trickled forever (its line whole) is cut near header_timeout (${out:-?} s, header_timeout $HT s)"
is "$(moved A '')" "head_timeout+1" \
	"...never relayed, and counted as the relay's head_timeout alone (its first line said it was the relay's)"
before=$(counts A)
# 30000 bytes of cookie fit in the bound (32768, nginx's 4 x 8 KiB); 40000 do not.
cookie() { python3 -c "import sys; sys.stdout.write('a' * int(sys.argv[1]))" "$1"; }
out=$(python3 "$CL" "$A" raw "GET /small HTTP/1.1\\r\\nHost: x\\r\\nConnection: close\\r\\nCookie: $(cookie 30000)\\r\\n\\r\\n" | sed -n 1p)
is "$out" "HTTP/1.1 200 OK" "a 30000-byte head (cookies) is relayed"
out=$(python3 "$CL" "$A" raw "GET /small HTTP/1.1\\r\\nHost: x\\r\\nCookie: $(cookie 40000)\\r\\n\\r\\n" | tr '\n' ' ')
is "$out" "HTTP/1.1 400 Bad Request body=43 " "a 40000-byte head is answered 400, as nginx answers it"
out=$(python3 "$CL" "$A" raw "GET /$(cookie 40000) HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n" | sed -n 1p)
is "$out" "HTTP/1.1 414 URI Too Long" "a 40000-byte request line is answered 414"
is "$(moved A "$before")" "total+1 head_too_large+2" \
	"/status: head_too_large 2, and only the 30000-byte head relayed"

# --- heads dripped a byte per segment -------------------------------------------------
# 50 connections from 127.0.0.3 send relay-bound heads one byte per send, as
# fast as they go, up to 32000 bytes, then reset and start again. Looked at
# on every arrival (a peek of all that is queued, which costs the kernel a
# walk of the queue per segment it copies), with the receive queue
# autotuned to thousands of such segments, they kept the gate thread so
# busy that 4 Health polls of 14 timed out. Every poll must be answered.
agent K - --relay "127.0.0.1:$G" || { echo "not ok - agent K did not start"; exit 1; }
bg_client DRIP "$K" drip 50 12 32000 --from 127.0.0.3
python3 tests/fakes/gateway_poll.py --tcp "127.0.0.1:$K" --duration 8 --gap 200 >"$T/drip_poll.out"
reap 60 "$DRIP_PID"
read -r polls okn <<<"$(sed -n 's/^polls=\([0-9]*\) ok=\([0-9]*\).*/\1 \2/p' "$T/drip_poll.out")"
[ "${polls:-0}" -ge 10 ] && [ "$okn" = "$polls" ]
ok $? "50 connections dripping heads a byte per segment: every Health poll answered ($(cat "$T/drip_poll.out"); $(cat "$T/DRIP.out"))"

# --- a reset mid-answer is passed on as a reset, both ways -----------------------------
before=$(counts A)
out=$(python3 "$CL" "$A" ending /cut)
like "$out" '^reset [0-9]+ ' "a guest agent that resets mid-answer (a close-delimited body): the client sees a reset ($out)"
like "$out" '^reset 72 ' "...after the 72 bytes sent before it"
wait_for 20 relay_is A reset 1
is "$(moved A "$before")" "total+1 reset+1" "/status: reset 1, nothing else"
# A client that resets mid-upload (its head and 1000 bytes of the body it
# announced sent, the stand-in reading the rest): the stand-in must see a
# reset, not a clean end, which would pass for a body cut short by a client
# that meant it.
before=$(counts A)
python3 "$CL" "$A" upload "/upload?$T/up1" 1000000 "$T/up1.got" >"$T/up1.out"
wait_for 20 test -e "$T/up1.end"
like "$(cat "$T/up1.end" 2>/dev/null)" '^reset [0-9]+$' \
	"a client that resets mid-upload: the stand-in guest agent sees a reset ($(cat "$T/up1.end" 2>/dev/null))"
wait_for 20 relay_is A reset 2
is "$(moved A "$before")" "total+1 reset+1" "/status: reset 1 more, nothing else"

# --- 2000 idle connections from one address -------------------------------------------
# 1000 with a whole request, relayed and then quiet (the Rocket-like
# stand-in keeps each for 10 s, and each is reopened 1 s after its close:
# on a loaded machine the 1000 may take longer to set up than the stand-in
# keeps the first), and 1000 with a request line and a header but no end
# of head (the gate's: cut at header_timeout and reopened 2 s later), all
# from 127.0.0.2: the dashboard is still served whole, ten times in a
# row.
bg_client IDLE "$A" hold 1000 /small --from 127.0.0.2 --reopen 1
bg_client LINES "$A" hold 1000 /logs/x --from 127.0.0.2 --line-only --reopen 2
wait_for 60 grep -q opened= "$T/IDLE.out" && wait_for 60 grep -q opened= "$T/LINES.out"
wait_for 60 relay_is A open 512
ok $? "2000 connections from 127.0.0.2: every relay slot taken ($(relay_field A open) open)"
# The agent and the stand-in have accepted them all (the stand-in is Python,
# a thread per connection): what follows measures the hold, not the burst
# of its setting up. The rule is that each request is answered in full,
# none refused (503) nor reset: so each must end with a 200, curl's own
# exit 0 (a reset is 56), and the page's sha256. How fast is a figure of
# the machine, measured in bench/ (7d); the ceiling of 30 s is only there
# so that a hang fails the point instead of the script.
wait_for 30 accepted "$A" && wait_for 30 accepted "$G"
page=$(curl -s --max-time 20 "http://127.0.0.1:$G/page.sha256")
served=0
for i in $(seq 10); do
	: >"$T/dash"
	out=$(curl -s -o "$T/dash" --max-time 30 \
		-w '%{http_code} %{time_total} %{time_connect} %{time_starttransfer}' "http://127.0.0.1:$A/")
	rc=$?
	read -r c s tc ts <<<"$out"
	sum=$(sha256sum <"$T/dash" | cut -d' ' -f1)
	[ "$rc" = 0 ] && [ "$c" = 200 ] && [ -n "$page" ] && [ "$sum" = "$page" ] && served=$((served + 1))
	diag "dashboard $i: $c, curl exit $rc, $(wc -c <"$T/dash") bytes$([ "$sum" = "$page" ] && echo ", its sha256") in $s s (connected at $tc s, first byte at $ts s)"
done
is "$served" 10 "...and the dashboard (GET /, 1 MiB) served whole, ten times in a row (200, the page's sha256, no reset)"
like "$(curl -s --max-time 20 -X POST "http://127.0.0.1:$A/prpc/v1/Health?json" -d '{}')" \
	'"healthy":true' "...and Health answered"
bg_end IDLE
bg_end LINES
diag "idle: $(tail -n1 "$T/IDLE.out"); lines: $(tail -n1 "$T/LINES.out")"
ev=$(relay_field A evicted)
[ "$ev" -ge 10 ]
ok $? "/status: evicted counts the slots taken from idle links ($ev)"

# --- eviction and the keep rules, one by one ------------------------------------------
# Two slots. Two kept-alive connections, each answered once and quiet since:
# a third takes the slot of the younger one, which is reset, and the older
# is kept (idle links go youngest first, rpc/keep.h). Two streams (a line
# every 100 ms): a third is answered 503, and /status says both slots were
# kept as streams.
# pass_time MS: the rule under test is about time gone by (KEEP_SETTLE_MS,
# 100 ms); this waits at least that long, and no pass depends on it being short.
now_ms() { echo $(($(date +%s%N) / 1000000)); }
pass_time() { local end=$(($(now_ms) + $1)); wait_for 30 eval '[ "$(now_ms)" -ge "$end" ]'; }
stand_in S || { echo "not ok - no stand-in S"; exit 1; }
agent E "$(slots_limit 2)" --relay "127.0.0.1:$S" || { echo "not ok - agent E did not start"; exit 1; }
bg_client Q1 "$E" hold 1 /small --reopen 3600
wait_for 20 relay_is E open 1 && wait_for 20 grep -q answered= "$T/Q1.out"
python3 "$CL" "$E" ending /small keep >"$T/Q2.out" &
Q2_PID=$!
PIDS+=($Q2_PID)
wait_for 20 relay_is E open 2
pass_time 300
is "$(code "$E" /small | cut -d' ' -f1)" 200 "two idle slots of two: a newcomer is relayed"
reap 40 "$Q2_PID"
like "$(cat "$T/Q2.out")" '^reset ' "...and the younger one (the second) is reset, not closed ($(cat "$T/Q2.out"))"
bg_end Q1
like "$(cat "$T/Q1.out")" 'reset=0' "...and the older one is kept ($(cat "$T/Q1.out"))"
is "$(moved E '')" "total+3 evicted+1" "/status: evicted 1, nothing else"
wait_for 20 relay_is E open 0
for i in 1 2; do
	curl -sN --max-time 60 "http://127.0.0.1:$E/logs/s$i?every=0.3" >"$T/s$i.out" 2>/dev/null &
	PIDS+=($!)
done
# Both are streams: the guest agent has spoken again, unasked, after a pause.
wait_for 30 sh -c "[ \$(grep -c '^line' '$T/s1.out') -ge 3 ] && [ \$(grep -c '^line' '$T/s2.out') -ge 3 ]"
is "$(code "$E" /small | cut -d' ' -f1)" 503 "two streams in two slots: a newcomer is answered 503"
is "$(moved E '')" "total+5 refused_full+1 evicted+1" "/status: refused_full 1, evicted still 1, nothing else"
is "$(relay_field E kept_streams) $(relay_field E kept_moving) $(relay_field E kept_awaiting)" \
	"2 0 0" "/status: at that refusal, both slots were kept as streams"
like "$(grep 'no slot can be taken' "$T/E.log")" \
	'warning: relay: answered 503 to a newcomer of client 127\.0\.0\.1: no slot can be taken \(0 moving bytes, 0 awaiting an answer, 2 streams, 0 connecting\)' \
	"the first 503 of a run is logged at warning, naming the client and what kept the slots"

# --- the idle limit -------------------------------------------------------------------
agent I - --relay "127.0.0.1:$S" --relay-idle-timeout 2 || { echo "not ok - agent I did not start"; exit 1; }
out=$(python3 "$CL" "$I" ending /small keep)
awk -v s="${out##* }" 'BEGIN { exit !(s >= 1.5 && s < 15) }' && [ "${out%% *}" = reset ]
ok $? "a relayed connection quiet for relay_idle_timeout (2 s) is reset ($out)"
is "$(moved I '')" "total+1 idle_closed+1" "/status: idle_closed 1, nothing else"

# --- out of fds: a 503 of its own cause --------------------------------------------
# The agent's soft fd limit lowered (prlimit) so that the lowest free fd
# number is the last it may use: the client's socket is accepted, the one
# to the guest agent cannot be made.
if command -v prlimit >/dev/null; then
	free=$(ls "/proc/$I_PID/fd" | sort -n | awk '$1 != n { exit } { n++ } END { print n }')
	soft=$(prlimit --pid "$I_PID" --nofile --output SOFT --noheadings)
	before=$(counts I)
	prlimit --pid "$I_PID" --nofile=$((free + 1)):
	is "$(code "$I" /small | cut -d' ' -f1)" 503 "no fd left for the guest agent's socket: 503"
	prlimit --pid "$I_PID" --nofile="$soft":
	is "$(moved I "$before")" "refused_resources+1" \
		"/status: refused_resources counts it, and nothing else (no connect was begun: total stays)"
	is "$(code "$I" /small | cut -d' ' -f1)" 200 "fds back: relayed again"
else
	for i in 1 2 3; do ok 0 "# SKIP prlimit is not installed (util-linux)"; done
fi

# --- out of fds mid-transfer: a cause of its own -------------------------------------
# A relayed upload under way holds no pipe between two reads (an emptied one
# goes back to the pool of 8). Ten clients that stop reading hold a pipe each
# with bytes in it (the pool's 8 and 2 more), so the pool is empty; then the
# agent's soft fd limit is lowered so that it can make no fd, and the upload
# goes on: its next bytes find no pipe, and both sides are reset. That is the
# agent's want of fds, not a failure of either side: reset_resources, not reset.
if command -v prlimit >/dev/null; then
	agent P - --relay "127.0.0.1:$S" || { echo "not ok - agent P did not start"; exit 1; }
	bg_client UPL "$P" upload "/upload?$T/up2" 4000000 "$T/up2.got" "$T/up2.go"
	wait_for 20 test -e "$T/up2.got"
	coproc STALLS { python3 "$CL" "$P" stall 16 10; }
	PIDS+=("$STALLS_PID")
	read -r -t 60 stalled <&"${STALLS[0]}"
	# The relay has stopped reading the stand-in for all ten: their pipes are full.
	held10() { [ "$(ss -Htn "( dport = :$S )" | awk '$2 > 0' | wc -l)" -ge 10 ]; }
	wait_for 60 held10
	ok $? "ten clients that stop reading: the relay holds a pipe of bytes for each (${stalled:-no answer})"
	before=$(counts P)
	free=$(ls "/proc/$P_PID/fd" | sort -n | awk '$1 != n { exit } { n++ } END { print n }')
	soft=$(prlimit --pid "$P_PID" --nofile --output SOFT --noheadings)
	prlimit --pid "$P_PID" --nofile="$free":
	touch "$T/up2.go"
	reap 60 "$UPL_PID"
	prlimit --pid "$P_PID" --nofile="$soft":
	like "$(cat "$T/UPL.out")" '^reset ' "no fd for a pipe mid-upload: the client sees a reset ($(cat "$T/UPL.out"))"
	wait_for 20 test -e "$T/up2.end"
	like "$(cat "$T/up2.end" 2>/dev/null)" '^reset ' \
		"...and so does the stand-in guest agent ($(cat "$T/up2.end" 2>/dev/null))"
	is "$(moved P "$before")" "reset_resources+1" "/status: reset_resources counts it, reset does not"
	exec {STALLS[1]}>&-
	reap 30 "$STALLS_PID"
else
	for i in 1 2 3 4; do ok 0 "# SKIP prlimit is not installed (util-linux)"; done
fi

# --- the gate's queue for the relay full: a cause of its own ---------------------------
# Two slots, both held by quiet connections that a newcomer could evict, and
# a queue of three (the fd limit fits a place for each slot and one more fd,
# relay_budget). The relay thread is stopped (ptrace, that thread alone):
# the gate takes 4 newcomers from 127.0.0.6, queues 3 of them for the relay
# thread and answers the fourth 503 at once (refused_queue: not
# refused_full, since no slot was kept). Their requests are ones the
# stand-in answers only when told (/reset?F), so that each keeps its slot
# awaiting the answer. A newcomer from 127.0.0.7 then finds the queue full:
# it pushes out the youngest of 127.0.0.6's (rpc/queue.h) and waits in its
# place. The relay thread let go, the queue is taken in turn by address:
# 127.0.0.6's first and 127.0.0.7's evict the quiet ones, and 127.0.0.6's
# second finds both awaiting their answers, and gets 503 (refused_full).
# First come, first served would have given 127.0.0.6 both slots.
agent Z "$(($(slots_limit 2) + 1))" --relay "127.0.0.1:$S" || { echo "not ok - agent Z did not start"; exit 1; }
bg_client QZ "$Z" hold 2 /small --reopen 3600
wait_for 20 grep -q answered= "$T/QZ.out"
coproc STOPR { python3 tests/lib/thread_stop.py "$Z_PID" healthd-relay 2>&1; }
PIDS+=("$STOPR_PID")
read -r -t 30 stopped <&"${STOPR[0]}"
if [ "$stopped" = stopped ]; then
	before=$(counts Z)
	bg_client NZ "$Z" hold 4 "/reset?$T/za" --from 127.0.0.6 --reopen 3600
	wait_for 60 eval '[ "$(relay_field Z refused_queue)" -ge 1 ]'
	is "$(moved Z "$before") $(relay_field Z queue)" "refused_queue+1 3" \
		"the relay thread stopped, 4 newcomers: 3 queued, 1 answered 503 at once, counted as refused_queue alone"
	bg_client MZ "$Z" hold 1 "/reset?$T/zb" --from 127.0.0.7 --reopen 3600
	wait_for 60 eval '[ "$(relay_field Z refused_share)" -ge 1 ]'
	is "$(moved Z "$before")" "refused_queue+1 refused_share+1" \
		"...a newcomer from a second address: the first's youngest pushed out (refused_share), not the newcomer"
	exec {STOPR[1]}>&-
	reap 30 "$STOPR_PID"
	want="total+2 refused_full+1 refused_queue+1 refused_share+1 evicted+2"
	wait_for 60 moved_is Z "$before" "$want"
	is "$(moved Z "$before")" "$want" \
		"...let go: two of the 3 queued evict the quiet ones, the third is answered 503 (refused_full)"
	wait_for 30 test -e "$T/zb.got"
	ok $? "...and the two served are the first address's first and the second address's one, in turn (its request reached the guest agent)"
	touch "$T/za.go" "$T/zb.go"
	wait_for 30 grep -q 'answered=1' "$T/MZ.out"
	like "$(cat "$T/MZ.out")" 'answered=1' "...and answered ($(cat "$T/MZ.out" | tr '\n' ' '))"
	bg_end MZ
	bg_end NZ
else
	diag "thread_stop: ${stopped:-nothing}"
	for i in 1 2 3 4 5; do ok 0 "# SKIP the relay thread cannot be stopped alone (ptrace: root)"; done
fi
bg_end QZ

# --- the gate's own closes, and the relay's, apart -------------------------------------
# An fd limit of 200 leaves the gate 72 slots (64 fds for connections being
# accepted beyond them, 64 spare: rpc/gate.c) and the relay none. 72 heads
# that never end (a request line and a header), then 28 more: each of the 28
# finds the slots full and closes the longest waiting (head_evicted), and the
# 72 left are cut at header_timeout (head_timeout). Their first lines said
# they were the relay's. Then the same with first lines that never end
# ("GET /logs/w"): nothing says whose they are, and the gate's own counters
# count them (listener_evicted, listener_head_timeout). The 28 must arrive
# while the 72 are still held: a header_timeout of 10 s, not $HT, leaves a
# loaded machine time to start their client (at load 10, the 72 were all cut
# at 2 s before the 28 came, and counted as 100 timeouts).
agent W 200 --relay "127.0.0.1:$S" --header-timeout 10 || { echo "not ok - agent W did not start"; exit 1; }
# arrived N: N connections to W from 127.0.0.4 have bytes in the agent's
# sockets, so the gate has had their arrival before anything that follows.
arrived() { [ "$(ss -Htn state established "( sport = :$W )" dst 127.0.0.4 | awk '$1 > 0' | wc -l)" -ge "$1" ]; }
for what in --line-only --partial; do
	before=$(counts W)
	bg_client W1 "$W" hold 72 /logs/w --from 127.0.0.4 "$what" --reopen 3600
	wait_for 30 arrived 72
	bg_client W2 "$W" hold 28 /logs/w --from 127.0.0.4 "$what" --reopen 3600
	if [ "$what" = --line-only ]; then
		want="head_timeout+72 head_evicted+28" whose="the relay's"
	else
		want="listener_head_timeout+72 listener_evicted+28" whose="the listener's own"
	fi
	wait_for 60 moved_is W "$before" "$want"
	is "$(moved W "$before")" "$want" \
		"100 ${what#--} heads, 72 gate slots: 28 evicted oldest first, 72 cut at header_timeout, counted as $whose"
	bg_end W1
	bg_end W2
done

# --- a peer that vanishes ---------------------------------------------------------------
# A client from 127.0.0.5 follows a log stream, another keeps an idle
# connection; then every packet to or from 127.0.0.5 is dropped. With
# relay_keepalive 1 s, both connections' slots come back within seconds
# (unanswered data for the stream, unanswered probes for the idle one).
if [ -n "$NETNS" ] && command -v nft >/dev/null; then
	wait_for 30 relay_is A open 0
	bg_client V1 "$A" hold 1 /logs/v --from 127.0.0.5 --reopen 3600
	bg_client V2 "$A" hold 1 /small --from 127.0.0.5 --reopen 3600
	wait_for 20 relay_is A open 2 && wait_for 20 grep -q answered= "$T/V1.out" &&
		wait_for 20 grep -q answered= "$T/V2.out"
	before=$(counts A)
	nft add table inet vanish && nft add chain inet vanish out '{ type filter hook output priority 0; }' &&
		nft add rule inet vanish out ip daddr 127.0.0.5 drop &&
		nft add rule inet vanish out ip saddr 127.0.0.5 drop
	ok $? "every packet to and from 127.0.0.5 dropped (nft)"
	wait_for 30 relay_is A open 0
	ok $? "both slots are free again ($(relay_field A open) open)"
	is "$(moved A "$before")" "dead_peer+2" "/status: dead_peer counts both, nothing else"
	wait_for 20 eval '[ "$(upstream_conns "$G")" = 0 ]'
	ok $? "...and the stand-in's side of both was reset ($(upstream_conns "$G") left)"
	nft delete table inet vanish
	bg_end V1
	bg_end V2
else
	for i in 1 2 3 4; do ok 0 "# SKIP a vanishing peer needs a private network namespace and nft"; done
fi

# --- what the counters say, by name ---------------------------------------------------
ctl A metrics >"$T/metrics"
for m in relay_slots relay_open relay_total relay_refused_full_total relay_refused_queue_total relay_refused_share_total \
	relay_refused_resources_total relay_unreachable_total relay_evicted_total \
	relay_idle_closed_total relay_head_timeout_total relay_head_evicted_total \
	relay_head_too_large_total relay_reset_total relay_reset_resources_total \
	relay_dead_peer_total listener_head_timeout_total listener_evicted_total; do
	grep -q "^dstack_healthd_$m " "$T/metrics"
	ok $? "/metrics: dstack_healthd_$m"
done
is "$(sed -n 's/^dstack_healthd_relay_evicted_total //p' "$T/metrics")" "$(relay_field A evicted)" \
	"/metrics: evicted agrees with /status"

# --- a receive buffer too small for the bound ----------------------------------------
# net.ipv4.tcp_rmem made small in the namespace (8 KiB): the listener's
# buffer is fixed to hold a 30000-byte head, which is relayed instead of
# stalling until header_timeout.
if [ -n "$NETNS" ]; then
	sysctl -qw net.ipv4.tcp_rmem="4096 8192 8192"
	agent R - --relay "127.0.0.1:$S" || { echo "not ok - agent R did not start"; exit 1; }
	out=$(python3 "$CL" "$R" raw "GET /small HTTP/1.1\\r\\nHost: x\\r\\nConnection: close\\r\\nCookie: $(cookie 30000)\\r\\n\\r\\n" | sed -n 1p)
	is "$out" "HTTP/1.1 200 OK" "tcp_rmem of 8 KiB: a 30000-byte head is still relayed"
else
	ok 0 "# SKIP a small tcp_rmem needs a private network namespace"
fi
done_testing
