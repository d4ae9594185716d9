#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The agent as a Compose sidecar (issue 21), on a private real dockerd: the
# image `make image` builds (tests/lib/sidecar_image.sh), run as its user,
# a project of a web service whose healthcheck flips plus the sidecar, its
# timer at 60 s so that only Docker's events can explain a prompt write.
#
# 1. From Docker's health_status event (its timeNano) to the verdict file's
#    new first line, polled every 1 ms from the host through the bind mount:
#    BENCH_TRANSITIONS flips (default 100). Target: p99 under 100 ms. The
#    reference, on the same flips: the same agent's Health answer on a unix
#    listener in the mounted folder, which changes before the write begins;
#    the difference is the write's own cost (fsync included).
# 2. The sidecar's RssAnon after 10 s idle, from the host's /proc of the
#    container's process. Target: under 1 MiB, as on the host.
# 3. The image's size, reported.
# 4. From a drain or a resume to the verdict file while a refresh is stuck
#    on a Docker socket that never answers (bench/drain_file.py, on the host,
#    no dockerd): 50 of each. Target: p99 under 100 ms (issue 28 §1). The
#    reference: the same while the runtime answers.
#
# Prints "key: value" lines; exits 1 when a target is missed, 2 on a setup
# error. Usage: bench/sidecar.sh [BUILD_DIR]   (needs root)
set -u
cd "$(dirname "$0")/.." || exit 1
export HEALTHD_BUILD=${1:-${HEALTHD_BUILD:-build}}
. tests/lib/tap.sh
. tests/lib/dockerd.sh
. tests/lib/sidecar_image.sh

N=${BENCH_TRANSITIONS:-100}
command -v python3 >/dev/null || { echo "error: python3 is needed"; exit 2; }
VT=$(mktemp -d /tmp/hv.XXXXXX) || exit 2
python3 bench/drain_file.py "$HEALTHD_BUILD/dstack-healthd" "$VT" 50 >"$VT/out.txt"
VRC=$?
cat "$VT/out.txt"
rm -rf "$VT"
[ "$VRC" -le 1 ] || { echo "error: the drain-to-file run failed"; exit 2; }
dockerd_start >/dev/null
IMAGE=dstack-healthd:sidecar-bench
sidecar_image "$IMAGE"
case $? in
0) ;;
2) echo "sidecar: skipped: $SIDECAR_WHY"; exit 0 ;;
*) echo "error: make image or its docker load failed ($DH_T/build.log)"; exit 2 ;;
esac
SIZE=$("$DH_DOCKER" image inspect -f '{{.Size}}' "$IMAGE")

# The verdict's folder: the named volume's, where this dockerd keeps it.
SC_VOLUME=healthd-bench-verdict
OUT=$DH_T/data/volumes/$SC_VOLUME/_data
printf '%s\n' '{"manifest_version":"3","name":"b","runner":"docker-compose","requirements":{"health_check":true,"health_status_file":"/dstack/healthd/status"}}' \
	>"$DH_T/app-compose.json"
# The timer at 60 s, so that only events explain a prompt write; the log at
# info, as a sidecar runs.
# SC_GA: the folder the test's guest agent stand-in listens in; none here.
mkdir -p "$DH_T/ga"
export SC_DOCKER_GID=$(stat -c %g "$DH_T/docker.sock") SC_VOLUME
export SC_IMAGE=$IMAGE SC_DOCKER_SOCK=$DH_T/docker.sock \
	SC_APP_COMPOSE=$DH_T/app-compose.json SC_INTERVAL=60 SC_LOG_LEVEL=info SC_GA=$DH_T/ga
# The reference's listener: a unix socket beside the file.
sed 's|      DSTACK_HEALTHD_INTERVAL: ${SC_INTERVAL}|&\n      DSTACK_HEALTHD_LISTEN: unix:/verdict/h.sock|' \
	tests/e2e/compose/sidecar.yml >"$DH_T/sidecar.yml"
compose() { timeout 300 docker-compose --no-ansi -p bside -f "$DH_T/sidecar.yml" "$@" >>"$DH_T/compose.log" 2>&1; }
compose up -d || { echo "error: docker-compose up failed"; exit 2; }
healthy_file() { [ "$(head -n1 "$OUT/status" 2>/dev/null)" = healthy ]; }
wait_for 30 healthy_file || { echo "error: the verdict file never said healthy"; cat "$DH_T/compose.log"; exit 2; }

wait_for 30 test -S "$OUT/h.sock" || { echo "error: no Health socket"; exit 2; }
python3 bench/flip_latency.py "$DH_T/docker.sock" bside_web_1 "$N" --agent "$OUT/h.sock" \
	--file "$OUT/status" --every 1 >"$DH_T/latency.txt" || { echo "error: latency run failed"; exit 2; }
pct() { # pct COLUMN: p50 p99 max count
	awk -v c="$1" '{ print $c }' "$DH_T/latency.txt" | sort -n | awk '
		{ v[NR] = $1 } END {
			i50 = int(NR * 0.50 + 0.999); i99 = int(NR * 0.99 + 0.999)
			printf "%s %s %s %d\n", v[i50], v[i99], v[NR], NR }'
}
read -r p50 p99 max cnt < <(pct 2)
read -r a50 a99 amax _ < <(pct 1)

# Idle: nothing flips for 10 s (two of Docker's probes of each container).
PID=$("$DH_DOCKER" inspect -f '{{.State.Pid}}' bside_healthd_1)
sleep 10
anon=$(awk '/^RssAnon:/ { print $2 }' "/proc/$PID/status")
rss=$(awk '/^VmRSS:/ { print $2 }' "/proc/$PID/status")
compose down -t 5

echo "sidecar_image_bytes: $SIZE"
echo "sidecar_image_mib: $(awk -v s="$SIZE" 'BEGIN { printf "%.1f", s / 1048576 }')"
echo "sidecar_verdict_fs: $(stat -f -c %T "$OUT")"
echo "sidecar_transitions: $cnt"
echo "sidecar_flip_to_file_p50_ms: $p50"
echo "sidecar_flip_to_file_p99_ms: $p99"
echo "sidecar_flip_to_file_max_ms: $max"
echo "sidecar_flip_to_answer_p50_ms: $a50"
echo "sidecar_flip_to_answer_p99_ms: $a99"
echo "sidecar_flip_to_answer_max_ms: $amax"
echo "sidecar_file_over_answer_p50: $(awk -v a="$p50" -v b="$a50" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }')"
echo "sidecar_flip_latencies_ms (answer file): $(tr '\n' ',' <"$DH_T/latency.txt" | sed 's/,$//')"
echo "sidecar_idle_rssanon_kb: $anon"
echo "sidecar_idle_vmrss_kb: $rss"
echo "loadavg: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs"
rc=$VRC
awk -v v="$p99" 'BEGIN { exit !(v < 100) }' || { echo "target missed: p99 $p99 ms >= 100 ms"; rc=1; }
[ "$anon" -lt 1024 ] || { echo "target missed: idle RssAnon $anon kB >= 1024 kB"; rc=1; }
exit $rc
