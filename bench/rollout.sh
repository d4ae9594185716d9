#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Rollouts through the gateway at upstream's default timings (issue 29):
# tests/e2e/rollout.sh's three instances, gateways and clients
# (tests/lib/rollout.sh), with the gateway polling every 5 s with a 2 s
# timeout (threshold 2) and caching a selection 30 s, the guest agent's
# 5 s timer, the backend serving 13 s after SIGTERM (the sidecar's worst
# case: the guest agent's re-read, an interval and a timeout, and a second)
# within a 30 s stop grace. Clients: 63 requests a second to each gateway
# (40 fresh connections, open loop; 2 kept-alive connections at 10 and 3
# loops of 1 s requests, which lag when answers are slow: a loaded machine
# still sends 50).
#
# For each way of judging Health, the four scenarios one after another:
#   agent     this agent on the host, Docker mode, drain unit around restarts
#   sidecar   this agent as the app's sidecar, its verdict file read by the
#             stand-in of upstream's guest agent every 5 s
#   upstream  the stand-in of upstream's guest agent judging Docker itself:
#             its 5 s timer, no events, no stopping rule, no drain
#             (tests/fakes/guest_health.py cites what it follows)
# and, for this agent's two ways, the recreate once more with proxies that
# retry a backend that is away for 4 s (recreate-retrying: the operator's
# guide's advice for kept-alive connections; the plain proxies again after it).
# Prints a row per scenario, judge and connect_top_n: requests sent, failed
# (fresh / kept-alive / 1 s), the instance-seconds out of rotation (mean of the
# group's two nodes), the scenario's length.
#
# Figures, not a test: exits 0, or 2 on a setup error. Needs root.
#   bench/rollout.sh [BUILD_DIR]       (BENCH_ONLY=rollout make bench)
set -u
cd "$(dirname "$0")/.." || exit 1
export HEALTHD_BUILD=${1:-${HEALTHD_BUILD:-build}}
. tests/lib/tap.sh
. tests/lib/dockerd.sh
. tests/lib/rollout.sh
OUT=$HEALTHD_BUILD/bench/rollout.txt
mkdir -p "$(dirname "$OUT")"
dockerd_start >/dev/null

RO_INTERVAL=5 RO_TIMEOUT=2 RO_THRESHOLD=2 RO_CACHE=30 RO_REREAD=5
RO_LAME_MS=13000 RO_GRACE=30s RO_HC=1s RO_FRESH=40
say() { echo "rollout: $*" >&2; }
ro_setup >&2 || { echo "error: setup failed"; exit 2; }
T0=$(ro_now)
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
for judge in ${BENCH_ROLLOUT_JUDGES:-agent sidecar upstream}; do
	say "$judge: waiting for every instance to be healthy on every node"
	ro_phase "$judge" || { echo "error: $judge: not every instance came up healthy"; exit 2; }
	[ -n "${RO_CLIENTS:-}" ] || ro_clients_start || { echo "error: the clients did not start"; exit 2; }
	retrying=
	[ "$judge" = upstream ] || retrying=recreate-retrying
	for s in restart recreate replace kill $retrying; do
		say "$judge: $s"
		case $s in
		restart | recreate) ro_window "$judge:$s" "ro_$s" ;;
		replace) ro_window "$judge:$s" ro_replace 3 ;;
		kill) ro_window "$judge:$s" ro_kill 1 ;;
		recreate-retrying)
			ro_retrying 4000 >&2 || { echo "error: $judge: the proxies did not come back retrying"; exit 2; }
			ro_window "$judge:$s" ro_recreate
			ro_retrying 0 >&2 || { echo "error: $judge: the proxies did not come back"; exit 2; }
			;;
		esac
	done
done
ro_clients_stop
ro_keep

kv() { sed -n "s/.*\\b$1=\\([^ ]*\\).*/\\1/p" <<<"$line"; } # KEY of $line
f() { kv "$1" | cut -d/ -f1; }                                  # failed of KIND
{
	echo "dstack-healthd $(git rev-parse --short HEAD 2>/dev/null || echo '?') rollout bench, $(date -u '+%Y-%m-%d %H:%M UTC')"
	echo "load average at start: $LOAD0; at end: $(cut -d' ' -f1-3 /proc/loadavg); $(( ($(ro_now) - T0) / 1000 )) s"
	printf '%-17s %-9s %3s %6s %5s %7s %7s %10s %5s %8s %8s\n' scenario judge top sent "/s" failed fresh kept-alive "1 s" "out (s)" "time (s)"
	while read -r name from to rc; do
		for g in n3 n1; do
			line=$(ro_count "$name" "$g")
			printf '%-17s %-9s %3s %6s %5s %7s %7s %10s %5s %8s %8s%s\n' "${name#*:}" "${name%%:*}" "${g#n}" \
				"$(kv sent)" "$(( $(kv sent) * 1000 / (to - from) ))" \
				"$(kv failed)" "$(f fresh)" "$(f keepalive)" "$(f slow)" \
				"$(kv out_of_rotation)" "$(( (to - from) / 1000 ))" \
				"$([ "$rc" = 0 ] || echo "  (not every step done)")"
		done
	done <"$DH_T/windows"
} | tee "$OUT"
