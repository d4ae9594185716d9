#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The libFuzzer targets (fuzz/): every seed of the corpus replayed, then a
# short run of each (FUZZ_SMOKE_SECONDS, default 10), under ASan and UBSan.
# One test point per target. The fuzz build is its own sanitizer build, so it
# runs once, with the release build's turn, not again with build-asan's.
# Nothing in it is shared with another script (its build folder is its own):
# it runs beside the first round.
# tests/run: beside
set -u
cd "$(dirname "$0")/../.."
. tests/lib/tap.sh
case "${HEALTHD_BUILD:-build}" in
build) ;;
*) skip_all "fuzz-smoke runs once, with the release build" ;;
esac
command -v clang >/dev/null || skip_all "clang is not installed (build-aux/deps.sh build fuzz)"
out=$(make --no-print-directory -s fuzz-smoke 2>&1)
rc=$?
# fuzz/run.sh prints the TAP; the compiler's lines become diagnostics.
printf '%s\n' "$out" | grep -E '^(ok|not ok) [0-9]+|^1\.\.[0-9]+|^#'
printf '%s\n' "$out" | grep -vE '^(ok|not ok) [0-9]+|^1\.\.[0-9]+|^#' | tail -n 20 | sed 's/^/# /'
if ! printf '%s\n' "$out" | grep -qE '^1\.\.[0-9]+'; then
	echo "not ok 1 - make fuzz-smoke did not run its targets (exit status $rc)"
	echo "1..1"
	exit 1
fi
exit $rc
