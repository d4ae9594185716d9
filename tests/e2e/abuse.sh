#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Abusive clients against the agent's TCP listener on 127.0.0.1 (a free
# port): slowloris, thousands of idle connections, bursts of fresh polls,
# oversized headers and bodies, invalid methods and paths, pipelined garbage
# (tests/fakes/abuse_client.py). Attackers connect from other loopback
# addresses (127.0.0.2...), from 64 of them at once, and from the poller's
# own 127.0.0.1 (one NAT in front of both), so that more connections than
# the listener's 1024 slots (rpc/server.h) come from anywhere. Throughout
# each attack a gateway-style poll (fresh connection, POST
# /prpc/v1/Health?json, body {}, 2 s timeout, one every 200 ms, from
# 127.0.0.1) must succeed every time, and the agent's peak RssAnon must stay
# under RSS_MAX_KB. Every attack is bounded in time. Then the rules
# themselves: a request head trickled at 1 byte per 100 ms is cut at
# header_timeout (2 s), fresh or kept alive, and binary garbage is closed at
# once.
set -u
cd "$(dirname "$0")/../.."
. tests/lib/tap.sh
B=${HEALTHD_BUILD:-build}
BIN=$B/dstack-healthd
POLL=tests/fakes/gateway_poll.py
ABUSE=tests/fakes/abuse_client.py
[ -x "$BIN" ] || skip_all "$BIN not built"
command -v python3 >/dev/null || skip_all "python3 is not installed"

# What an agent under attack may hold (private memory, RssAnon): 1024
# connections with their libmicrohttpd pools, the 64 KiB bodies in flight.
case $(build_kind) in
address | thread) # The sanitizer's allocator keeps and maps memory of its
	# own (peaks of 300-500 MiB were seen at a high load; TSan's shadow
	# too): memory is judged in the release build only.
	export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=16"
	RSS_MAX_KB= ;;
*) RSS_MAX_KB=$((8 * 1024)) ;;
esac
ATTACK_S=${ABUSE_SECONDS:-12}

# Thousands of client sockets: raise our limit (the agent inherits it).
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"

. tests/lib/scratch.sh

printf '{"manifest_version":"3","name":"t","runner":"docker-compose"}\n' >"$T/app.json"
"$BIN" --listen 127.0.0.1:0 --compose-file "$T/app.json" 2>"$T/agent.log" &
AGENT=$!
PIDS+=($AGENT)
served() { grep -q 'serving on 127.0.0.1:' "$T/agent.log"; }
wait_for 30 served || { echo "not ok 1 - the agent did not start"; echo "1..1"; exit 1; }
PORT=$(sed -n 's/.*serving on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$T/agent.log" | head -n1)
kb() { awk -v k="$1" '$1 == k":" { print $2 }' "/proc/$AGENT/status"; }
# mem_peak_start / mem_peak_stop: the agent's peak RssAnon (KiB) meanwhile,
# sampled every 50 ms, in $PEAK.
mem_peak_start() {
	(
		m=0
		trap 'echo "$m" >"$T/peak"; exit 0' TERM
		while [ -e "/proc/$AGENT/status" ]; do
			v=$(kb RssAnon)
			[ "${v:-0}" -gt "$m" ] && m=$v
			sleep 0.05
		done
	) &
	SAMPLER=$!
	PIDS+=($SAMPLER)
}
mem_peak_stop() {
	kill -TERM "$SAMPLER" 2>/dev/null
	reap 10 "$SAMPLER" 2>/dev/null
	PEAK=$(cat "$T/peak" 2>/dev/null)
}
diag "agent on 127.0.0.1:$PORT, RssAnon $(kb RssAnon) KiB at start; bound ${RSS_MAX_KB:-none in this build} KiB"

ips() { # ips N: 127.0.0.2 ... 127.0.0.(N+1)
	local i out=
	for i in $(seq 2 $(($1 + 1))); do out+="${out:+,}127.0.0.$i"; done
	echo "$out"
}

ROWS=()
# Every wait is bounded: a client or poller that hangs is named, killed and
# failed (through an empty summary), not left to the runner's limit.
attack() { # attack LABEL ATTACK SOURCES CONNS
	local label=$1 kind=$2 sources=$3 conns=$4 pp res summary polls okp p50 p99 max t0=$SECONDS
	mem_peak_start
	python3 "$POLL" --tcp "127.0.0.1:$PORT" --duration $((ATTACK_S + 1)) --gap 200 --timeout 2 \
		--out "$T/$label.polls" >"$T/$label.sum" &
	pp=$!
	PIDS+=($pp)
	res=$(timeout -k 5 $((ATTACK_S + 30)) python3 "$ABUSE" --target "127.0.0.1:$PORT" --attack "$kind" \
		--duration "$ATTACK_S" --sources "$sources" --conns "$conns")
	reap 30 "$pp"
	mem_peak_stop
	summary=$(cat "$T/$label.sum")
	polls=$(sed -n 's/.*polls=\([0-9]*\).*/\1/p' <<<"$summary")
	okp=$(sed -n 's/.* ok=\([0-9]*\).*/\1/p' <<<"$summary")
	p50=$(sed -n 's/.* p50=\([0-9.]*\).*/\1/p' <<<"$summary")
	p99=$(sed -n 's/.* p99=\([0-9.]*\).*/\1/p' <<<"$summary")
	max=$(sed -n 's/.* max=\([0-9.]*\).*/\1/p' <<<"$summary")
	ok $([ -n "$polls" ] && [ "$polls" -gt 0 ] && [ "$okp" = "$polls" ]; echo $?) \
		"$label: every gateway poll answered (${okp:-?}/${polls:-?}, p50 ${p50:-?} ms, p99 ${p99:-?} ms, max ${max:-?} ms)"
	if [ "$okp" != "$polls" ]; then
		grep -v ' 200 ' "$T/$label.polls" | head -n 3 | sed 's/^/#   /'
	fi
	if [ -n "$RSS_MAX_KB" ]; then
		ok $([ -n "$PEAK" ] && [ "$PEAK" -lt "$RSS_MAX_KB" ]; echo $?) \
			"$label: peak RssAnon ${PEAK:-?} KiB < ${RSS_MAX_KB} KiB"
	else
		diag "$label: peak RssAnon ${PEAK} KiB (not judged in this build)"
	fi
	ok $(kill -0 "$AGENT" 2>/dev/null; echo $?) "$label: the agent is still running"
	diag "$label ($((SECONDS - t0)) s): $res"
	ROWS+=("$(printf '%-24s | %5s/%-5s | %6s ms | %6s ms | %6s ms | %6s KiB | %s' "$label" "$okp" \
		"$polls" "$p50" "$p99" "$max" "$PEAK" "$res")")
	LAST=$res
}

attack trickle-1500-64-addrs  slowloris "$(ips 64)" 1500
attack idle-2000-64-addrs     idle      "$(ips 64)" 2000
attack burst-500-1-addr       burst     "$(ips 1)" 500
ok_burst=$(sed -n 's/.*burst_ok=\([0-9]*\)\/\([0-9]*\).*/\1 \2/p' <<<"$LAST")
read -r bok bsent <<<"$ok_burst"
ok $([ -n "$bok" ] && [ "$bok" = "$bsent" ]; echo $?) \
	"burst-500-1-addr: every poll of the bursts answered 200 within 2 s (${bok:-?}/${bsent:-?})"
attack trickle-200-poller-addr slowloris 127.0.0.1 200
attack idle-2000-poller-addr  idle      127.0.0.1 2000
attack oversized-headers      bigheaders "$(ips 2)" 1
attack oversized-bodies       bigbody   "$(ips 2)" 1
attack garbage-pipelined      garbage   "$(ips 2)" 1

# header_timeout (2 s by default) bounds the whole request head however it
# trickles: from the accept, and from the end of the previous answer on a
# kept-alive connection. 1 byte per 100 ms would take a minute; the upper
# bound leaves a loaded machine room and still tells that.
res=$(timeout -k 5 30 python3 "$ABUSE" --target "127.0.0.1:$PORT" --attack deadline --sources 127.0.0.2)
fresh=$(sed -n 's/.*fresh_ms=\([0-9-]*\).*/\1/p' <<<"$res")
ka=$(sed -n 's/.*keepalive_ms=\([0-9-]*\).*/\1/p' <<<"$res")
ok $([ "${fresh:-0}" -ge 1900 ] && [ "${fresh:-0}" -le 5000 ]; echo $?) \
	"a head trickled at 1 byte/100 ms is cut at header_timeout (${fresh:-?} ms after connect)"
ok $([ "${ka:-0}" -ge 1900 ] && [ "${ka:-0}" -le 5000 ]; echo $?) \
	"on a kept-alive connection, at header_timeout after the previous answer (${ka:-?} ms)"
# The issue's request line of binary garbage: answered or closed at once,
# not held until a timeout. Against an agent of its own whose
# header_timeout is 30 s, so that "at once" and "at the timeout" stay
# apart on a loaded machine (at 2 s, the bound had to be 1.5 s).
"$BIN" --listen 127.0.0.1:0 --compose-file "$T/app.json" --header-timeout 30 2>"$T/nul.log" &
NUL_AGENT=$!
PIDS+=($NUL_AGENT)
wait_for 30 grep -q 'serving on 127.0.0.1:' "$T/nul.log"
NUL_PORT=$(sed -n 's/.*serving on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$T/nul.log" | head -n1)
res=$(timeout -k 5 90 python3 "$ABUSE" --target "127.0.0.1:${NUL_PORT:-1}" --attack nul --sources 127.0.0.2)
nul=$(sed -n 's/.*nul_ms=\([0-9]*\).*/\1/p' <<<"$res")
ok $([ -n "$nul" ] && [ "$nul" -lt 15000 ]; echo $?) \
	"binary garbage is closed at once (${nul:-?} ms, < 15000; header_timeout 30 s)"
agent_stop "$NUL_AGENT" "against garbage"
agent_stop "$AGENT" "after the attacks"
diag "attack                   | polls ok    | p50       | p99       | max       | RssAnon    | attacker's view"
for r in "${ROWS[@]}"; do diag "$r"; done
done_testing
