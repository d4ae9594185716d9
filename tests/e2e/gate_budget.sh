#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The gate's one peek budget for every parked head (rpc/gate.c, PEEK_PER_MS
# and PEEK_BURST; issue 44): a look again at a head for the relay peeks all
# of it from its first byte, so 200 heads of 30 KiB, each trickled a byte
# every 20 ms, ask for some 120 MB of peeks a second (a look at each every
# LOOK_LATER_MS). The gate's thread, which also answers Health, peeks at most
# 16 KiB a ms (and a burst of 128 KiB) for all of them together. Counted
# from the outside: strace on the gate's thread alone (healthd-gate) sums
# the bytes of its MSG_PEEK reads, with their times, for 5 s; the sum must
# stay within the budget for the time it covers, while the looks asked for
# several times that. Health polls are answered meanwhile. Loopback only.
# Without the budget (every look paid), the peeks run at what the thread
# can do, far over it.
# tests/run: tsan
set -u
cd "$(dirname "$0")/../.."
. tests/lib/tap.sh
. tests/lib/relay.sh
command -v strace >/dev/null || skip_all "strace is not installed"
strace -qq -o /dev/null -e trace=none true 2>/dev/null || skip_all "strace cannot trace here"
. tests/lib/front.sh

HEADS=200
stand_in S || { echo "not ok 1 - no stand-in"; echo "1..1"; exit 1; }
HT=60 agent A - --relay "127.0.0.1:$S" || { echo "not ok 1 - the agent did not start"; echo "1..1"; exit 1; }
gate_tid=$(grep -lx healthd-gate /proc/"$A_PID"/task/*/comm | cut -d/ -f5)
ok $([ -n "$gate_tid" ]; echo $?) "the agent's gate thread (healthd-gate: $gate_tid)"

# The heads: 30 KiB each, never ended, a byte more on each every 20 ms.
cat >"$T/trickle.py" <<'PY'
import socket, sys, time
port, n = int(sys.argv[1]), int(sys.argv[2])
socks = []
for i in range(n):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"GET / HTTP/1.1\r\nX-Pad: " + b"a" * 30 * 1024)
    socks.append(s)
print("open", flush=True)
sent = 0
while True:
    t = time.monotonic()
    for s in socks:
        s.send(b"a")
        sent += 1
    time.sleep(max(0, 0.02 - (time.monotonic() - t)))
PY
unpiped exec python3 "$T/trickle.py" "$A" "$HEADS" >"$T/trickle.out" 2>"$T/trickle.err" &
TRICKLE_PID=$!
PIDS+=($TRICKLE_PID)
wait_for 60 grep -q open "$T/trickle.out"
ok $? "$HEADS heads of 30 KiB are parked, each trickled a byte every 20 ms"
is "$(relay_field A open)" 0 "none of them is the relay's yet (no head is whole)"

# 5 s of the gate thread's reads, each with its time and size.
timeout -s INT 5 strace -qq -s 0 -ttt -e trace=recvfrom -e signal=none -o "$T/peeks" \
	-p "$gate_tid" 2>"$T/strace.err"
summary=$(awk '/MSG_PEEK/ && / = [0-9]+$/ {
		if (!first) first = $1; last = $1; n++; bytes += $NF
	} END { printf "%d %d %.0f\n", n, bytes, (last - first) * 1000 }' "$T/peeks")
read -r looks bytes ms <<<"$summary"
# What the budget pays for in that time (PEEK_BURST, then PEEK_PER_MS a
# ms), and what the heads asked for: a look at each per LOOK_LATER_MS.
budget=$((128 * 1024 + (ms + 1) * 16 * 1024))
asked=$((HEADS * 30 * 1024 * (ms / 50)))
diag "the gate peeked $bytes bytes in $looks looks over $ms ms; the budget pays $budget, the heads asked for about $asked"
ok $([ "${looks:-0}" -gt 10 ] && [ "${ms:-0}" -ge 2000 ]; echo $?) \
	"strace saw the gate's looks for 2 s or more ($looks looks, $ms ms)"
ok $([ "${bytes:-0}" -le "$budget" ]; echo $?) \
	"the gate's looks peeked at most the budget: $bytes bytes <= 128 KiB + 16 KiB a ms ($budget)"
health=0
for i in 1 2 3 4 5; do
	curl -s --max-time 20 -X POST "http://127.0.0.1:$A/prpc/v1/Health?json" -d '{}' |
		grep -q '^{"healthy":' && health=$((health + 1))
done
is "$health" 5 "Health polls are answered meanwhile (5 of 5)"
kill -TERM "$TRICKLE_PID"
reap 30 "$TRICKLE_PID" >/dev/null
done_testing
