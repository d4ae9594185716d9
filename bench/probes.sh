#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The agent's own probes (issue 27), figures only (bench/README.md, "Probes"):
#   1. detection: one probed container (interval 1 s, retries 3) flipped
#      between 200 and 500 BENCH_FLIPS times (20) at random phases; the time
#      from the flip to the agent's served verdict, failing (target
#      interval x retries + 50 ms) and recovering (interval x
#      success_threshold + 50 ms), p50/p99/max.
#   2. load: 50 probed containers at 1 s intervals against the same 50
#      containers judged by their Docker healthchecks (no probe), each agent
#      for 2 x BENCH_PROBE_SECONDS (30): its CPU (utime+stime over wall time)
#      first alone, then under an open loop of 100 Health requests/s
#      (bench/openloop, fresh connections) whose p99 is taken; peak RssAnon
#      (/proc/PID/status sampled every 20 ms) over both.
#   3. gRPC (issues 34, 42): detection as in 1, against a real gRPC server
#      (tests/fakes/grpc_health.py, python3-grpcio) flipped between SERVING
#      and NOT_SERVING, with retries 1, so that the target is one interval
#      + 50 ms; then flipped between SERVING and SERVING with grpc-status 14
#      (the trailers alone say it failed); and the load of 2 with 50
#      containers probed by gRPC. The memory a gRPC probe in flight takes is
#      the sizes test_grpc prints (the HPACK decoder and its block).
# Everything runs on loopback and in a mktemp folder, bounded in time; the
# Docker peer is bench/fake_docker.py, whose containers' address is
# 127.0.0.1 (the probed ports are served by bench/probes.py).
#   bench/probes.sh [BUILD]
set -u
B=${1:-build}
cd "$(dirname "$0")/.."
AGENT=$B/dstack-healthd
OL=$B/bench/openloop
PY=/usr/bin/python3
FLIPS=${BENCH_FLIPS:-20}
SECS=${BENCH_PROBE_SECONDS:-30}
for f in "$AGENT" "$OL"; do
	[ -x "$f" ] || { echo "bench: $f is not built (run make bench)" >&2; exit 2; }
done
T=$(mktemp -d -t hp.XXXXXX) || exit 2
PIDS=()
stop_all() {
	local p
	for p in "${PIDS[@]}"; do
		kill -TERM "$p" 2>/dev/null
	done
	for p in "${PIDS[@]}"; do ended "$p"; done
	PIDS=()
}
# ended PID: after its TERM, 10 s for PID to end, then KILL; reaped.
ended() {
	timeout 10 tail --pid="$1" -f /dev/null 2>/dev/null || kill -KILL "$1" 2>/dev/null
	wait "$1" 2>/dev/null # bounded: gone (ended or killed)
}
trap 'stop_all; rm -rf "$T"' EXIT
trap 'exit 130' INT TERM

printf '%s\n' '{"manifest_version":"3","name":"b","runner":"docker-compose","requirements":{"health_check":true}}' >"$T/app.json"
printf '{"project":"bench","namespace":"","snapshotter":""}\n' >"$T/rt.json"

wait_sock() { local i; for i in $(seq 300); do [ -S "$1" ] && return 0; sleep 0.1; done; return 1; }

# As bench/run.sh does: on two CPUs or more the agent runs on CPU 0 and the
# load generator on CPU 1, both real-time (BENCH_RT=0: neither), so that a
# shared machine's run queue is not what is measured.
SRV=() GEN=()
if [ "${BENCH_RT:-1}" != 0 ] && [ "$(nproc)" -ge 2 ] && command -v taskset >/dev/null &&
	chrt -f 10 true 2>/dev/null; then
	SRV=(taskset -c 0 chrt -f 10)
	GEN=(taskset -c 1 chrt -r 10)
fi

# agent NAME DOCKER_SOCK LISTEN: started in the background, pid in APID.
agent() {
	"${SRV[@]}" "$AGENT" --listen "$3" --compose-file "$T/app.json" --runtime-file "$T/rt.json" \
		--docker-host "unix://$2" --control-socket "" --log-level warning \
		>"$T/agent-$1.log" 2>&1 &
	APID=$!
	PIDS+=($!)
}

pct() { # pct P numbers...: nearest rank
	local p=$1
	shift
	printf '%s\n' "$@" | sort -n | awk -v p="$p" '{ v[NR] = $1 } END {
		i = int((p * NR + 99) / 100); if (i < 1) i = 1; print v[i] }'
}

# --- 1. detection and recovery ------------------------------------------------
$PY bench/fake_docker.py --listen "$T/d1.sock" --containers 1 --project bench \
	--probe-port 19100 --probe-interval 1s >"$T/fake1.log" 2>&1 &
PIDS+=($!)
echo 200 >"$T/mode1"
$PY bench/probes.py serve 19100 1 "$T/mode1" >"$T/peer1.log" 2>&1 &
PIDS+=($!)
wait_sock "$T/d1.sock" || { echo "bench: the fake Docker did not start" >&2; exit 2; }
agent det "$T/d1.sock" "unix:$T/a1.sock"
wait_sock "$T/a1.sock" || { echo "bench: the agent did not start" >&2; exit 2; }
line=$(timeout $((FLIPS * 20 + 120)) $PY bench/probes.py flips "$T/a1.sock" "$T/mode1" "$FLIPS")
stop_all
fails=$(printf '%s' "$line" | sed -n 's/.*fail_ms=\([^ ]*\).*/\1/p' | tr , ' ')
recs=$(printf '%s' "$line" | sed -n 's/.*rec_ms=\([^ ]*\).*/\1/p' | tr , ' ')
[ -n "$fails" ] || { echo "bench: no flips measured ($line)" >&2; exit 2; }
# shellcheck disable=SC2086
F50=$(pct 50 $fails) F99=$(pct 99 $fails) R50=$(pct 50 $recs) R99=$(pct 99 $recs)

# --- 2. 50 probed containers at 1 s, against the same without probes -----------
# load NAME EXTRA...: one agent on its own fake Docker; sets CPU_PCT, ANON,
# P99_MS.
load() {
	local name=$1 port=$((19300 + RANDOM % 500))
	shift
	$PY bench/fake_docker.py --listen "$T/d-$name.sock" --containers 50 --project bench "$@" \
		>"$T/fake-$name.log" 2>&1 &
	PIDS+=($!)
	wait_sock "$T/d-$name.sock" || { echo "bench: the fake Docker did not start" >&2; exit 2; }
	agent "$name" "$T/d-$name.sock" "127.0.0.1:$port"
	local pid=$APID i
	for i in $(seq 300); do
		curl -s --max-time 2 -X POST "http://127.0.0.1:$port/prpc/v1/Health?json" -d '{}' |
			grep -q '"healthy":true' && break
		sleep 0.1
	done
	sleep 2
	# Phase A, no Health load: what the probes (or the refreshes alone)
	# cost. Phase B, the open loop: Health's latency, and the CPU with it.
	local ma=0 v t0 c0 t1 c1 hz
	hz=$(getconf CLK_TCK)
	cpu_now() { awk '{ print $14 + $15 }' "/proc/$pid/stat"; }
	sample() { v=$(awk '/^RssAnon:/ { print $2 }' "/proc/$pid/status"); [ "${v:-0}" -gt "$ma" ] && ma=$v; }
	t0=$(date +%s%N) c0=$(cpu_now)
	local until=$(( $(date +%s) + SECS ))
	while [ "$(date +%s)" -lt "$until" ]; do sample; sleep 0.02; done
	t1=$(date +%s%N) c1=$(cpu_now)
	CPU_PCT=$(awk -v c=$((c1 - c0)) -v hz="$hz" -v ns=$((t1 - t0)) \
		'BEGIN { printf "%.2f", 100 * c / hz / (ns / 1e9) }')
	t0=$(date +%s%N) c0=$(cpu_now)
	timeout --foreground $((SECS + 30)) "${GEN[@]}" "$OL" "$port" 100 "$SECS" 8 close json \
		>"$T/ol-$name.txt" 2>&1 &
	local ol=$!
	while kill -0 "$ol" 2>/dev/null; do sample; sleep 0.02; done
	wait "$ol" # bounded: timeout
	t1=$(date +%s%N) c1=$(cpu_now)
	CPU_LOAD=$(awk -v c=$((c1 - c0)) -v hz="$hz" -v ns=$((t1 - t0)) \
		'BEGIN { printf "%.2f", 100 * c / hz / (ns / 1e9) }')
	ANON=$ma
	P99_MS=$(sed -n 's/.*p99_us=\([0-9.]*\).*/\1/p' "$T/ol-$name.txt" | awk '{ printf "%.2f", $1 / 1000 }')
	OK=$(sed -n 's/.* ok=\([0-9]*\).*/\1/p' "$T/ol-$name.txt")
	stop_all
}
$PY bench/probes.py serve 19200 50 "$T/mode50" >"$T/peer50.log" 2>&1 &
PEER=$!
load probes --probe-port 19200 --probe-interval 1s
P_CPU=$CPU_PCT P_CPUL=$CPU_LOAD P_ANON=$ANON P_P99=$P99_MS P_OK=$OK
kill -TERM "$PEER" 2>/dev/null
ended "$PEER"
load noprobes
N_CPU=$CPU_PCT N_CPUL=$CPU_LOAD N_ANON=$ANON N_P99=$P99_MS N_OK=$OK

# --- 3. gRPC: detection with retries 1, then 50 containers at 1 s -----------------
mkdir -p "$T/gst"
# grpc_flips NAME BAD: a real gRPC server flipped between SERVING and BAD,
# probed at 1 s with retries 1 by an agent of its own; sets FAILS and RECS.
grpc_flips() {
	echo SERVING >"$T/gst/app"
	$PY tests/fakes/grpc_health.py "$T/gst" 19500 --ready "$T/$1.ready" >"$T/$1-grpc.log" 2>&1 &
	PIDS+=($!)
	$PY bench/fake_docker.py --listen "$T/d-$1.sock" --containers 1 --project bench \
		--probe-port 19500 --probe-interval 1s --probe-label 'grpc://:{port}/app' \
		--probe-retries 1 >"$T/fake-$1.log" 2>&1 &
	PIDS+=($!)
	wait_sock "$T/d-$1.sock" && timeout 30 bash -c "until [ -e '$T/$1.ready' ]; do sleep 0.1; done" ||
		{ echo "bench: the gRPC server or the fake Docker did not start" >&2; exit 2; }
	agent "$1" "$T/d-$1.sock" "unix:$T/a-$1.sock"
	wait_sock "$T/a-$1.sock" || { echo "bench: the agent did not start" >&2; exit 2; }
	line=$(timeout $((FLIPS * 20 + 120)) $PY bench/probes.py flips "$T/a-$1.sock" "$T/gst/app" \
		"$FLIPS" "$2" SERVING)
	stop_all
	FAILS=$(printf '%s' "$line" | sed -n 's/.*fail_ms=\([^ ]*\).*/\1/p' | tr , ' ')
	RECS=$(printf '%s' "$line" | sed -n 's/.*rec_ms=\([^ ]*\).*/\1/p' | tr , ' ')
	[ -n "$FAILS" ] || { echo "bench: no gRPC flips measured ($line)" >&2; exit 2; }
}
grpc_flips flip-serving NOT_SERVING
gfails=$FAILS grecs=$RECS
# The final status decides (issue 42): SERVING, then UNAVAILABLE in the trailers.
grpc_flips flip-trailers SERVING/UNAVAILABLE
tfails=$FAILS trecs=$RECS
# shellcheck disable=SC2086
GF50=$(pct 50 $gfails) GF99=$(pct 99 $gfails) GR50=$(pct 50 $grecs) GR99=$(pct 99 $grecs)
# shellcheck disable=SC2086
TF50=$(pct 50 $tfails) TF99=$(pct 99 $tfails) TR50=$(pct 50 $trecs) TR99=$(pct 99 $trecs)
MEM=$("$B/tests/test_grpc" 2>/dev/null | sed -n 's/^# a gRPC probe in flight: struct grpc_answer \([0-9]*\) bytes, of which the HPACK decoder and its block \([0-9]*\)$/\1 \/ \2/p')
$PY tests/fakes/grpc_health.py "$T/gst" $(seq 19600 19649) --ready "$T/g50.ready" \
	>"$T/grpc50.log" 2>&1 &
PEER=$!
timeout 30 bash -c "until [ -e '$T/g50.ready' ]; do sleep 0.1; done" ||
	{ echo "bench: the gRPC server did not start" >&2; exit 2; }
load grpc --probe-port 19600 --probe-interval 1s --probe-label 'grpc://:{port}/app'
G_CPU=$CPU_PCT G_CPUL=$CPU_LOAD G_ANON=$ANON G_P99=$P99_MS G_OK=$OK
kill -TERM "$PEER" 2>/dev/null
ended "$PEER"

# --- the table -----------------------------------------------------------------------
{
	echo "== probes (issues 27, 34, 42): $FLIPS flips; 50 containers for $SECS s each"
	printf '%-52s %12s %12s  %s\n' "measure" "probes" "reference" "target"
	printf '%-52s %12s %12s  %s\n' "detection p50 / p99 (ms), interval 1 s x retries 3" \
		"$F50 / $F99" "3000" "p99 < 3050"
	printf '%-52s %12s %12s  %s\n' "recovery p50 / p99 (ms), interval 1 s x 1" \
		"$R50 / $R99" "1000" "p99 < 1050"
	printf '%-52s %12s %12s  %s\n' "agent CPU, % of one core (50 containers)" \
		"$P_CPU" "$N_CPU" "probes < 2"
	printf '%-52s %12s %12s  %s\n' "agent CPU, %, with Health at 100/s" \
		"$P_CPUL" "$N_CPUL" ""
	printf '%-52s %12s %12s  %s\n' "agent peak RssAnon, kB (50 containers)" \
		"$P_ANON" "$N_ANON" "probes < 2048"
	printf '%-52s %12s %12s  %s\n' "Health p99, ms, open loop 100/s (answered)" \
		"$P_P99 ($P_OK)" "$N_P99 ($N_OK)" "probes < 5"
	printf '%-52s %12s %12s  %s\n' "gRPC detection p50 / p99 (ms), interval 1 s x 1" \
		"$GF50 / $GF99" "1000" "p99 < 1050"
	printf '%-52s %12s %12s  %s\n' "gRPC recovery p50 / p99 (ms), interval 1 s x 1" \
		"$GR50 / $GR99" "1000" "p99 < 1050"
	printf '%-52s %12s %12s  %s\n' "gRPC SERVING then status 14: detection p50 / p99" \
		"$TF50 / $TF99" "1000" "p99 < 1050"
	printf '%-52s %12s %12s  %s\n' "gRPC SERVING then status 14: recovery p50 / p99" \
		"$TR50 / $TR99" "1000" "p99 < 1050"
	printf '%-52s %12s %12s  %s\n' "gRPC probe in flight / its decoder, bytes" \
		"${MEM:-?}" "" "decoder <= 8192"
	printf '%-52s %12s %12s  %s\n' "agent CPU, % of one core (50 gRPC containers)" \
		"$G_CPU" "$N_CPU" "gRPC < 2"
	printf '%-52s %12s %12s  %s\n' "agent CPU, %, gRPC, with Health at 100/s" \
		"$G_CPUL" "$N_CPUL" ""
	printf '%-52s %12s %12s  %s\n' "agent peak RssAnon, kB (50 gRPC containers)" \
		"$G_ANON" "$N_ANON" ""
	printf '%-52s %12s %12s  %s\n' "Health p99, ms, gRPC probes, open loop 100/s" \
		"$G_P99 ($G_OK)" "$N_P99 ($N_OK)" ""
	echo "detection ms: $fails"
	echo "recovery ms: $recs"
	echo "gRPC detection ms: $gfails"
	echo "gRPC recovery ms: $grecs"
	echo "gRPC SERVING then status 14, detection ms: $tfails"
	echo "gRPC SERVING then status 14, recovery ms: $trecs"
} | tee "$B/bench/probes.txt"
