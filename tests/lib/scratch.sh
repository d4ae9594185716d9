# SPDX-License-Identifier: Apache-2.0
# A test's scratch folder $T and the processes it starts (append their pids
# to PIDS): on exit, even a failed one, every process is killed and reaped
# and the folder removed. Sourced; a test that needs more cleanup defines
# scratch_more(). An agent still running (the test ended before
# done_testing stopped it) gets SIGTERM and its point first (agent_stop);
# then scratch_more runs, and the other processes are killed.
T=$(mktemp -d /tmp/healthd-test.XXXXXX)
PIDS=()
python_first "$T/.bin"
scratch_cleanup() {
	agents_stop_all
	declare -F scratch_more >/dev/null && scratch_more
	for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; reap 10 "$p" 2>/dev/null; done
	rm -rf "$T"
}
trap scratch_cleanup EXIT

# hung_socket PATH: a unix socket that accepts every connection and never
# answers (a wedged Docker daemon), tracked in PIDS; returns once it listens.
# Each connection it holds is a line in PATH.accepted, for a test to wait on
# (rather than sleep) until a refresh is stuck in it.
hung_socket() {
	python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(16)
conns = []
with open(sys.argv[1] + ".accepted", "a", buffering=1) as log:
    while True:
        c, _ = s.accept(); conns.append(c); log.write("accepted\n")
' "$1" &
	PIDS+=($!)
	wait_for 20 test -S "$1"
}
