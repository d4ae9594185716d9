#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Runs the libFuzzer targets (called by `make fuzz` and `make fuzz-smoke`).
#   fuzz/run.sh run   BUILD SECONDS JOBS TARGET...  each target SECONDS on a
#       work copy of its corpus (BUILD/corpus/T keeps what it finds), JOBS
#       targets at a time; a table of executions, time and crashes at the end.
#   fuzz/run.sh smoke BUILD SECONDS JOBS TARGET...  replays every seed of
#       fuzz/corpus/T, then fuzzes SECONDS from them; TAP, one point a target.
# A crash leaves its input in BUILD/crashes/T-*; replay it with
# `BUILD/fuzz_T FILE`. Exit status 1 when any target failed.
# Every target runs with one seed, FUZZ_SEED or one drawn here, printed
# first: the same seed, corpus and run count replay the same inputs
# (fuzz/README, "Replaying a run"). A failed smoke point prints both
# replays: the input's file, and the seed with the count of runs up to the
# failing one (libFuzzer's final stats, which it prints on a crash too,
# where its "Done N runs" line is missing).
set -u
cd "$(dirname "$0")/.."
mode=$1 build=$2 secs=$3 jobs=$4
shift 4
seed=${FUZZ_SEED:-}
while [ -z "$seed" ] || [ "$seed" = 0 ]; do # libFuzzer takes 0 for "draw one"
	seed=$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')
done
case "$seed" in *[!0-9]*) echo "fuzz/run.sh: FUZZ_SEED must be a number" >&2; exit 2 ;; esac
echo "# fuzz seed $seed: replay with FUZZ_SEED=$seed (fuzz/README)"
# Real inputs are a few KiB (one inspect object is ~5 KiB); larger ones only
# slow the search down. A target whose parser has a byte bound over that
# gets a -max_len above its bound, or the fuzzer never reaches it (issue
# 42); the bounds of megabytes (a Docker body, app-compose.json) are left to
# the unit tests.
opts=(-rss_limit_mb=2048 -timeout=10 -print_final_stats=1 -seed="$seed")
max_len() {
	case $1 in
	grpc) echo 66000 ;;   # GRPC_MAX_BYTES (64 KiB), after the input's 2 bytes of layout
	prpc) echo 66000 ;;   # PRPC_MAX_BODY (64 KiB)
	gate) echo 33000 ;;   # GATE_HEAD_MAX (32 KiB)
	probe) echo 27000 ;;  # HTTP_MAX_HEADER_BYTES (16 KiB) and PROBE_MAX_BODY (10 KiB)
	http | events) echo 17000 ;; # HTTP_MAX_HEADER_BYTES (16 KiB)
	*) echo 8192 ;;
	esac
}
mkdir -p "$build/crashes" "$build/corpus"

one() { # one TARGET: runs it, leaves BUILD/fuzz_T.log and .rc
	local t=$1 bin=$build/fuzz_$1 seeds=fuzz/corpus/$1 log=$build/${mode}_$1.log work rc=0
	: >"$log"
	if [ "$mode" = smoke ]; then
		"$bin" "${opts[@]}" -max_len="$(max_len "$t")" -runs=0 -artifact_prefix="$build/crashes/$t-" "$seeds" >>"$log" 2>&1 || rc=$?
		work=$(mktemp -d "$build/corpus/$t.XXXXXX")
	else
		work=$build/corpus/$t
		mkdir -p "$work"
	fi
	if [ $rc -eq 0 ]; then
		# FUZZ_RUNS (a replay) bounds the run by its count, not its time.
		"$bin" "${opts[@]}" -max_len="$(max_len "$t")" ${FUZZ_RUNS:+-runs="$FUZZ_RUNS"} \
			-max_total_time="$([ -n "${FUZZ_RUNS:-}" ] && echo 0 || echo "$secs")" \
			-artifact_prefix="$build/crashes/$t-" \
			"$work" "$seeds" >>"$log" 2>&1 || rc=$?
	fi
	[ "$mode" = smoke ] && rm -rf "$work"
	echo $rc >"$build/${mode}_$t.rc"
}

running=0
for t in "$@"; do
	if [ "$running" -ge "$jobs" ]; then
		wait -n
		running=$((running - 1))
	fi
	one "$t" &
	running=$((running + 1))
done
wait

failed=0 n=0
[ "$mode" = run ] && printf '== fuzz: %s s per target, %s at a time\n' "$secs" "$jobs"
for t in "$@"; do
	n=$((n + 1))
	log=$build/${mode}_$t.log rc=$(cat "$build/${mode}_$t.rc")
	# The last run's, ended or crashed (smoke: the seeds' replay, then the
	# run from them; a crash in the first ends it).
	runs=$(sed -n 's/^stat::number_of_executed_units: *\([0-9]*\)$/\1/p' "$log" | tail -n1)
	took=$(sed -n 's/^Done \([0-9]*\) runs in \([0-9]*\) second.*/\2/p' "$log" | tail -n1)
	unit=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -n1)
	fuzzing=$(grep -c '^INFO: Seed: ' "$log")
	crashes=$(grep -c 'Test unit written to' "$log")
	if [ "$rc" -ne 0 ]; then
		failed=1
		grep -E 'ERROR|SUMMARY|Test unit written' "$log" | head -n 5 | sed 's/^/# /'
	fi
	if [ "$mode" = smoke ]; then
		if [ "$rc" -eq 0 ]; then
			echo "ok $n - fuzz_$t: seeds replayed, ${runs:-?} runs in ${took:-?} s (seed $seed)"
		else
			echo "not ok $n - fuzz_$t: exit status $rc (log: $log)"
			[ -z "$unit" ] || echo "# replay the input: $build/fuzz_$t $unit"
			if [ "$fuzzing" -lt 2 ]; then
				echo "# a seed of fuzz/corpus/$t failed: FUZZ_SEED=$seed make fuzz-smoke FUZZ_TARGETS=$t"
			elif [ -n "$runs" ]; then
				echo "# replay the run: FUZZ_SEED=$seed FUZZ_RUNS=$runs make fuzz-smoke FUZZ_TARGETS=$t"
			else
				echo "# replay the run: FUZZ_SEED=$seed make fuzz-smoke FUZZ_TARGETS=$t (no run count in $log)"
			fi
		fi
	else
		printf '%-14s %12s runs %6s s %3s crash(es)%s\n' "$t" "${runs:-?}" "${took:-?}" \
			"$crashes" "$([ "$rc" -ne 0 ] && echo "  exit $rc, see $log")"
	fi
done
[ "$mode" = smoke ] && echo "1..$n"
exit $failed
