#!/bin/bash
# Abusive clients against the agent's TCP listener on 127.0.0.1 (a free
# port): slowloris, thousands of idle connections, oversized headers and
# bodies, invalid methods and paths, pipelined garbage
# (tests/fakes/abuse_client.py). Attackers connect from other loopback
# addresses (127.0.0.2...), as one address or several, against the
# listener's per-address limit (32) and global limit (1024, rpc/server.h,
# RPC_MAX_CONNECTIONS): 16 addresses holding 32 slow connections each (512)
# must not starve the gateway either. Throughout each attack a gateway-style poll (fresh
# connection, POST /prpc/v1/Health?json, body {}, 2 s timeout, from
# 127.0.0.1) must succeed every time, and the agent's peak RSS must stay
# under RSS_MAX_KB. Every attack is bounded in time.
set -u
cd "$(dirname "$0")/../.."
. tests/lib/tap.sh
B=${HEALTHD_BUILD:-build}
BIN=$B/dstack-healthd
POLL=tests/fakes/gateway_poll.py
ABUSE=tests/fakes/abuse_client.py
[ -x "$BIN" ] || skip_all "$BIN not built"
command -v python3 >/dev/null || skip_all "python3 is not installed"

# What an agent under attack may hold: 1024 connections of 16 KiB each, the
# 64 KiB bodies in flight, and the sanitizer build's own overhead.
case "$B" in
*asan*) # The sanitizer's allocator keeps and maps memory of its own (peaks
	# of 300-500 MiB were seen at a high load): memory is judged in the
	# release build only.
	export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=16"
	RSS_MAX_KB= ;;
*) RSS_MAX_KB=$((48 * 1024)) ;;
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
wait_for 10 served || { echo "not ok 1 - the agent did not start"; echo "1..1"; exit 1; }
PORT=$(sed -n 's/.*serving on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$T/agent.log" | head -n1)
kb() { awk -v k="$1" '$1 == k":" { print $2 }' "/proc/$AGENT/status"; }
diag "agent on 127.0.0.1:$PORT, RSS $(kb VmRSS) KiB at start; bound ${RSS_MAX_KB:-none in this build} KiB"

ips() { # ips N: 127.0.0.2 ... 127.0.0.(N+1)
	local i out=
	for i in $(seq 2 $(($1 + 1))); do out+="${out:+,}127.0.0.$i"; done
	echo "$out"
}

ROWS=()
attack() { # attack LABEL ATTACK SOURCES CONNS
	local label=$1 kind=$2 sources=$3 conns=$4 pp res summary polls okp p99 max hwm
	python3 "$POLL" --tcp "127.0.0.1:$PORT" --duration $((ATTACK_S + 1)) --gap 50 --timeout 2 \
		--out "$T/$label.polls" >"$T/$label.sum" &
	pp=$!
	PIDS+=($pp)
	res=$(timeout $((ATTACK_S + 30)) python3 "$ABUSE" --target "127.0.0.1:$PORT" --attack "$kind" \
		--duration "$ATTACK_S" --sources "$sources" --conns "$conns")
	wait "$pp"
	summary=$(cat "$T/$label.sum")
	polls=$(sed -n 's/.*polls=\([0-9]*\).*/\1/p' <<<"$summary")
	okp=$(sed -n 's/.* ok=\([0-9]*\).*/\1/p' <<<"$summary")
	p99=$(sed -n 's/.* p99=\([0-9.]*\).*/\1/p' <<<"$summary")
	max=$(sed -n 's/.* max=\([0-9.]*\).*/\1/p' <<<"$summary")
	hwm=$(kb VmHWM)
	ok $([ -n "$polls" ] && [ "$polls" -gt 0 ] && [ "$okp" = "$polls" ]; echo $?) \
		"$label: every gateway poll answered ($okp/$polls, p99 ${p99} ms, max ${max} ms)"
	if [ "$okp" != "$polls" ]; then
		grep -v ' 200 ' "$T/$label.polls" | head -n 3 | sed 's/^/#   /'
	fi
	if [ -n "$RSS_MAX_KB" ]; then
		ok $([ "$hwm" -lt "$RSS_MAX_KB" ]; echo $?) "$label: peak RSS ${hwm} KiB < ${RSS_MAX_KB} KiB"
	else
		diag "$label: peak RSS ${hwm} KiB (not judged in this build)"
	fi
	ok $(kill -0 "$AGENT" 2>/dev/null; echo $?) "$label: the agent is still running"
	diag "$label: $res"
	ROWS+=("$(printf '%-22s | %5s/%-5s | %6s ms | %6s ms | %7s KiB | %s' "$label" "$okp" "$polls" \
		"$p99" "$max" "$hwm" "$res")")
}

attack slowloris-1-addr     slowloris "$(ips 1)" 300
attack slowloris-7-addrs    slowloris "$(ips 7)" 210
attack slowloris-16-addrs   slowloris "$(ips 16)" 512
attack idle-2000-1-addr     idle      "$(ips 1)" 2000
attack idle-2000-7-addrs    idle      "$(ips 7)" 2000
attack oversized-headers    bigheaders "$(ips 2)" 1
attack oversized-bodies     bigbody   "$(ips 2)" 1
attack garbage-pipelined    garbage   "$(ips 2)" 1

kill -TERM "$AGENT"
wait "$AGENT"
is "$?" 0 "SIGTERM after the attacks: exit 0"
diag "attack                 | polls ok    | p99       | max       | peak RSS    | attacker's view"
for r in "${ROWS[@]}"; do diag "$r"; done
done_testing
