# SPDX-License-Identifier: Apache-2.0
# A test's scratch folder $T and the processes it starts (append their pids
# to PIDS): on exit, even a failed one, every process is killed and reaped
# and the folder removed. Sourced; a test that needs more cleanup defines
# scratch_more() and it runs first.
T=$(mktemp -d /tmp/healthd-test.XXXXXX)
PIDS=()
scratch_cleanup() {
	declare -F scratch_more >/dev/null && scratch_more
	for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
	rm -rf "$T"
}
trap scratch_cleanup EXIT
