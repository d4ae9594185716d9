#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The benchmarks behind `make bench` (bench/README.md says what each figure
# means and how it is taken). Prints one table; figures, not a test: no
# number makes it fail. Everything it starts (fake Docker peers, agents,
# nginx, a private dockerd and its containers) is stopped on exit, Ctrl-C
# included; it listens on loopback and a mktemp folder only, and every load
# run is bounded in time.
#   bench/run.sh [BUILD]      BUILD defaults to build
# Environment: BENCH_SECONDS (each load run, default 5), BENCH_ROUNDS (of the
# throughput runs, interleaved; the median is judged, every round shown,
# default 3), BENCH_DOCKERD=0 skips the real-dockerd part, BENCH_RT=0 runs
# servers and load generators at normal priority instead of SCHED_FIFO,
# BENCH_BASELINE=PATH adds another build of the agent (an older commit) to
# the throughput rounds, BENCH_ONLY=listener runs sections 1 and 6 only,
# BENCH_ONLY=relay section 7 only, BENCH_ONLY=sidecar the sidecar's figures
# (bench/sidecar.sh) only, BENCH_ONLY=probes the probes' (bench/probes.sh),
# BENCH_ONLY=rollout the rollouts through the gateway (bench/rollout.sh).
set -u
# No agent started here creates the system-wide control socket; the one
# measured with the view on passes --control-socket in $T.
export DSTACK_HEALTHD_CONTROL_SOCKET=
B=${1:-build}
cd "$(dirname "$0")/.."
D=${BENCH_SECONDS:-5}
ROUNDS=${BENCH_ROUNDS:-3}
CONNS=16
BASE=${BENCH_BASELINE:-}
ONLY=${BENCH_ONLY:-}
AGENT=$B/dstack-healthd
RB=$B/bench/refresh_bench
OL=$B/bench/openloop
FAKE=bench/fake_docker.py
DOCKER=/usr/bin/docker
OUT=$B/bench/results.txt

# The sidecar's figures need a private dockerd and an image build, not the
# load tools: on their own, they are bench/sidecar.sh's (make bench runs it
# after this script).
if [ "$ONLY" = sidecar ]; then
	bench/sidecar.sh "$B"
	exit 0
fi
# The agent's own probes (issue 27): bench/probes.sh, alone with
# BENCH_ONLY=probes (make bench runs it after this script).
if [ "$ONLY" = probes ]; then
	bench/probes.sh "$B"
	exit $?
fi
if [ "$ONLY" = rollout ]; then
	bench/rollout.sh "$B"
	exit 0
fi
for f in "$AGENT" "$RB" "$OL"; do
	[ -x "$f" ] || { echo "bench: $f is not built (run make bench)" >&2; exit 1; }
done
for c in wrk nginx valgrind python3 curl taskset; do
	command -v "$c" >/dev/null || { echo "bench: $c is missing (make bench installs it)" >&2; exit 1; }
done

# Short: unix socket paths (and containerd's, under dockerd's exec root)
# must fit in 108 bytes.
T=$(mktemp -d -t hb.XXXXXX) || exit 1
PIDS=()
DOCKERD_PID=

# Ours only: a pid is signalled while it is still a live job of this shell.
stop_pid() {
	local p=$1 i
	jobs -p | grep -qx -- "$p" || { wait "$p" 2>/dev/null; return 0; } # bounded: gone (not a live job)
	kill -TERM "$p" 2>/dev/null
	for i in $(seq 100); do
		kill -0 "$p" 2>/dev/null || break
		[ "$(awk '/^State:/ {print $2}' /proc/"$p"/status 2>/dev/null)" = Z ] && break
		sleep 0.05
	done
	kill -KILL "$p" 2>/dev/null
	wait "$p" 2>/dev/null # bounded: gone (ended or killed)
	return 0
}

stop_dockerd() {
	[ -n "$DOCKERD_PID" ] || return 0
	local ids
	ids=$(dk ps -aq 2>/dev/null)
	[ -z "$ids" ] || timeout 60 "$DOCKER" -H "unix://$T/docker.sock" rm -f $ids >/dev/null 2>&1
	stop_pid "$DOCKERD_PID"
	DOCKERD_PID=
	awk -v t="$T" 'index($2, t "/") == 1 { print $2 }' /proc/mounts | sort -r |
		while read -r m; do umount -l "$m" 2>/dev/null; done
}

cleanup() {
	local p
	for p in "${PIDS[@]}"; do stop_pid "$p"; done
	stop_dockerd
	# nginx's worker is its master's child: stopping the master stops it.
	rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

say() { echo "bench: $*" >&2; }

wait_for() { # wait_for SECONDS CMD...: poll every 50 ms
	local end=$(($(date +%s%N) + $1 * 1000000000))
	shift
	while ! "$@"; do
		[ "$(date +%s%N)" -lt "$end" ] || return 1
		sleep 0.05
	done
}

# Server on one CPU, load generator on another, when there are two; both
# at SCHED_FIFO (BENCH_RT=1, the default as root) so that other load on the
# machine does not preempt them mid-request: the figures are then the
# server's, not the machine's queue. The kernel's RT throttle
# (sched_rt_runtime_us) still leaves the rest of the machine 5 %. The
# generator is round-robin: wrk's main thread, which ends the run, shares
# its CPU with its worker, and under FIFO a worker that never blocks (a
# server fast enough to keep every socket readable: the relay and the
# upstream on the 1 MiB page) kept it from running until timeout killed
# wrk, and the round had no figure.
# MEASURE: a client that times the server while the generator loads it
# (a gateway's Health poll beside relayed pages, section 7) runs above both:
# with the generator and the server at real-time priority on both CPUs, a
# poller left at normal priority waited for a CPU up to a second between
# its connect and its read (23 to 34 polls of 50 in 10 s, p99 176 to
# 982 ms, on every build of the relay), and timed that wait, not the
# agent: at priority 20 the same polls took p99 1.2 to 2.8 ms.
SRV=()
GEN=()
MEASURE=()
if [ "$(nproc)" -ge 2 ]; then
	SRV=(taskset -c 0)
	GEN=(taskset -c 1)
fi
if [ "${BENCH_RT:-1}" = 1 ] && [ "$(id -u)" = 0 ] && chrt -f 10 true 2>/dev/null; then
	SRV=(chrt -f 10 "${SRV[@]}")
	GEN=(chrt -r 10 "${GEN[@]}")
	MEASURE=(chrt -r 20)
fi

# --- Fake Docker peers and agents ------------------------------------------

# fake NAME API N [fake options...]: a fake Docker socket at $T/NAME.sock.
fake() {
	local name=$1 api=$2 n=$3
	shift 3
	rm -f "$T/$name.sock" "$T/$name.req"
	python3 "$FAKE" --listen "$T/$name.sock" --api "$api" --containers "$n" \
		--log "$T/$name.req" "$@" >"$T/$name.log" 2>&1 &
	PIDS+=($!)
	FAKE_PID=$!
	wait_for 20 test -S "$T/$name.sock" || { say "fake $name did not start"; exit 1; }
}

printf '{"manifest_version":"3","name":"bench","runner":"docker-compose","requirements":{"health_check":true}}\n' >"$T/app.json"
printf '{"project":"bench","namespace":"","snapshotter":""}\n' >"$T/runtime.json"
agent_opts() { # agent_opts SOCK
	echo --compose-file "$T/app.json" --runtime-file "$T/runtime.json" --docker-host "unix://$1"
}

# agent NAME SOCK [options...]: an agent on 127.0.0.1, its port in $PORT.
agent() {
	local name=$1 sock=$2
	shift 2
	# shellcheck disable=SC2046
	"${SRV[@]}" "$AGENT" --listen 127.0.0.1:0 $(agent_opts "$sock") "$@" >"$T/$name.log" 2>&1 &
	PIDS+=($!)
	AGENT_PID=$!
	wait_for 10 grep -q 'serving on 127.0.0.1:' "$T/$name.log" ||
		{ say "agent $name did not start"; cat "$T/$name.log" >&2; exit 1; }
	PORT=$(sed -n 's/.*serving on 127\.0\.0\.1:\([0-9]*\);.*/\1/p' "$T/$name.log" | head -1)
}

health() { curl -s --max-time 2 -X POST "http://127.0.0.1:$1/prpc/v1/Health?json" -d '{}'; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
determined() { ! health "$1" | grep -q 'not been determined'; }

# --- Memory ------------------------------------------------------------------

# A sampler in pure bash (no process per sample): max RssAnon and VmRSS of
# PID every 20 ms into $T/mem.PID until stopped.
mem_start() {
	local pid=$1
	[ -p "$T/tick" ] || mkfifo "$T/tick"
	(
		exec 9<>"$T/tick"
		ma=0 mv=0
		trap 'echo "$ma $mv" >"$T/mem.$pid"; exit 0' TERM
		while [ -e "/proc/$pid/status" ]; do
			while read -r k v _; do
				case $k in
				RssAnon:) [ "$v" -gt "$ma" ] && ma=$v ;;
				VmRSS:) [ "$v" -gt "$mv" ] && mv=$v ;;
				esac
			done <"/proc/$pid/status"
			read -r -t 0.02 -u 9 _
		done
		echo "$ma $mv" >"$T/mem.$pid"
	) &
	MEM_PID=$!
	PIDS+=($!)
}
mem_stop() { # the maxima of RssAnon and VmRSS in kB into MEM_ANON, MEM_RSS
	stop_pid "$MEM_PID"
	read -r MEM_ANON MEM_RSS <"$T/mem.$1"
}
mem_now() { awk '/^RssAnon:/ {a=$2} /^VmRSS:/ {v=$2} END {print a, v}' "/proc/$1/status"; }

# --- Result table ---------------------------------------------------------------

: >"$T/table"
row() { # row MEASURE AGENT REFERENCE RATIO TARGET VERDICT
	printf '%-52s %16s %16s %9s  %-22s %s\n' "$@" >>"$T/table"
	printf '%-52s %16s %16s %9s  %-22s %s\n' "$@" >&2
}
section() { printf '\n%s\n' "$*" >>"$T/table"; printf '\n%s\n' "$*" >&2; }
kv() { # kv KEY LINE: the value of KEY=... in a key=value line
	sed -n "s/.*\\b$1=\\([^ ]*\\).*/\\1/p" <<<"$2"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }
ge() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a >= b) }'; }
yes_no() { if "$@"; then echo met; else echo MISSED; fi; }

# --- 1. Throughput and latency ---------------------------------------------------

cat >"$T/json.lua" <<'LUA'
wrk.method = "POST"
wrk.body = "{}"
LUA
cat >"$T/pb.lua" <<'LUA'
wrk.method = "POST"
wrk.body = ""
LUA

# cpu_ticks PID: user+system clock ticks of PID and its children (nginx's
# worker is its master's child)
cpu_ticks() {
	local p kids t=0 f
	kids=$(cat /proc/"$1"/task/*/children 2>/dev/null)
	for p in "$1" $kids; do
		f=$(sed 's/^.*) //' /proc/"$p"/stat 2>/dev/null) || continue
		set -- $f
		t=$((t + ${12} + ${13}))
	done
	echo "$t"
}
TCK=$(getconf CLK_TCK)

# TCP segments sent on this machine so far (loopback: each once), all
# parties: what a request costs the client and the upstream too.
tcp_out_segs() { awk '/^Tcp:/ { if (h) print $12; h = 1 }' /proc/net/snmp; }

# wrk_run PORT PID json|pb|get:PATH keepalive|close: "req/s p50_us p99_us
# cpu_us_per_request tcp_segments_per_request"; json and pb POST to Health,
# get:PATH GETs PATH
wrk_run() {
	local port=$1 pid=$2 mode=$3 conn=$4 url hdr=() c0 c1 s0 s1 script=()
	case $mode in
	get:*) url="http://127.0.0.1:$port${mode#get:}" ;;
	*)
		url="http://127.0.0.1:$port/prpc/v1/Health"
		[ "$mode" = json ] && url="$url?json"
		script=(-s "$T/$mode.lua") ;;
	esac
	[ "$conn" = close ] && hdr=(-H 'Connection: close')
	c0=$(cpu_ticks "$pid")
	s0=$(tcp_out_segs)
	timeout --foreground $((D + 30)) "${GEN[@]}" wrk -t1 -c"$CONNS" -d"${D}s" --latency "${hdr[@]}" \
		"${script[@]}" "$url" >"$T/wrk.out" 2>&1
	s1=$(tcp_out_segs)
	c1=$(cpu_ticks "$pid")
	cat "$T/wrk.out" >>"$T/wrk.log"
	grep -q '^Requests/sec:' "$T/wrk.out" || say "wrk $mode $conn on port $port gave no figure: counted as 0"
	awk -v cpu=$(((c1 - c0) * 1000000 / TCK)) -v segs=$((s1 - s0)) '
		function us(s) {
			if (s ~ /us$/) return s + 0
			if (s ~ /ms$/) return s * 1000
			if (s ~ /s$/) return s * 1000000
			return s
		}
		/^ *50%/ { p50 = us($2) } /^ *99%/ { p99 = us($2) }
		/^Requests\/sec:/ { rps = $2 }
		/requests in/ { n = $1 }
		/Non-2xx/ { bad = 1 }
		END { if (bad) rps = 0; printf "%.0f %.0f %.0f %.1f %.1f\n", rps, p50, p99,
			n ? cpu / n : 0, n ? segs / n : 0 }' "$T/wrk.out"
}

# med FILE: the median round by requests/s (the lower middle of an even count)
med() { sort -k1,1n "$1" | awk '{ l[NR] = $0 } END { print l[int((NR + 1) / 2)] }'; }
# rounds FILE COLUMN: every round's figure, in the order run
rounds() { awk -v c="$2" '{ printf "%s%s", (NR > 1 ? "/" : ""), $c }' "$1"; }

nginx_start() { # nginx_start JSONBODY PBBODY: one worker, on $NPORT
	# The worker runs as www-data: it may traverse $T, read www/ only.
	mkdir -p "$T/www/prpc/v1" "$T/ngx"
	cp "$1" "$T/www/health.json"
	cp "$2" "$T/www/health.pb"
	# nginx answers POST with a 405 only for a file that exists.
	cp "$1" "$T/www/prpc/v1/Health"
	chmod 711 "$T"
	chmod -R a+rX "$T/www"
	NPORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
	local appver
	appver=$(curl -sI "http://127.0.0.1:$PORT/prpc/v1/Version" | sed -n 's/^X-App-Version: *//Ip' | tr -d '\r')
	sed -e "s|@T@|$T|g" -e "s|@PORT@|$NPORT|g" -e "s|@APPVER@|$appver|g" \
		bench/nginx.conf.in >"$T/nginx.conf"
	"${SRV[@]}" nginx -c "$T/nginx.conf" -e "$T/ngx/error.log" >"$T/nginx.out" 2>&1 &
	PIDS+=($!)
	NGINX_PID=$!
	wait_for 10 curl -sf -o /dev/null -X POST "http://127.0.0.1:$NPORT/prpc/v1/Health?json" ||
		{ say "nginx did not start"; cat "$T/nginx.out" "$T/ngx/error.log" >&2; exit 1; }
	cmp -s <(curl -s -X POST "http://127.0.0.1:$NPORT/prpc/v1/Health?json" -d '{}') "$1" &&
		cmp -s <(curl -s -X POST --data-binary '' "http://127.0.0.1:$NPORT/prpc/v1/Health") "$2" ||
		{ say "nginx does not serve the agent's bytes"; exit 1; }
}

# The table, printed and left in $OUT, with the machine it was taken on.
table_out() {
	{
		echo "dstack-healthd $(git describe --always --dirty 2>/dev/null) bench, $(date -u '+%Y-%m-%d %H:%M UTC')"
		echo "machine: $(nproc) CPUs ($(sed -n 's/^model name\t*: //p' /proc/cpuinfo | head -1)), kernel $(uname -r), $(. /etc/os-release && echo "$PRETTY_NAME")"
		echo "load average at start: $LOAD0; at end: $(cut -d' ' -f1-3 /proc/loadavg)"
		echo "server runs under: ${SRV[*]:-(nothing)}; load generator under: ${GEN[*]:-(nothing)}; timing clients beside a load under: ${MEASURE[*]:-(nothing)}"
		cat "$T/table"
	} >"$OUT"
	mkdir -p "$B/bench/logs"
	cp "$T"/*.log "$B/bench/logs/" 2>/dev/null
	echo
	cat "$OUT"
}

say "machine: $(nproc) CPUs, $(sed -n 's/^model name\t*: //p' /proc/cpuinfo | head -1), kernel $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg)"
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)

# BENCH_ONLY=relay: section 7 alone (bench/relay.sh).
. bench/relay.sh
if [ "$ONLY" = relay ]; then
	relay_section || exit 1
	table_out
	exit 0
fi

# The agent as deployed (5 s cadence) judging a healthy 10-container project
# through the API 1.52 list.
fake main 1.52 10
# With the operator's view on (issue 11), as deployed: its control socket.
agent main "$T/main.sock" --control-socket "$T/main.ctl"
MAIN_PID=$AGENT_PID
MAIN_PORT=$PORT
wait_for 15 determined "$MAIN_PORT" || { say "no verdict from the agent"; exit 1; }
sleep 1
read -r IDLE_ANON IDLE_RSS < <(mem_now "$MAIN_PID")
# The same after the view has been read (GET /status and /metrics, five
# times, a refresh apart).
for _ in 1 2 3 4 5; do
	curl -s --unix-socket "$T/main.ctl" http://x/status >/dev/null
	curl -s --unix-socket "$T/main.ctl" http://x/metrics >/dev/null
	sleep 5
done
read -r VIEW_ANON VIEW_RSS < <(mem_now "$MAIN_PID")
curl -s -X POST "http://127.0.0.1:$MAIN_PORT/prpc/v1/Health?json" -d '{}' >"$T/body.json"
curl -s -X POST --data-binary '' "http://127.0.0.1:$MAIN_PORT/prpc/v1/Health" >"$T/body.pb"
say "agent serves $(cat "$T/body.json") ($(stat -c %s "$T/body.pb") bytes in protobuf)"
nginx_start "$T/body.json" "$T/body.pb"

if [ -n "$BASE" ]; then
	# The same fake peer, another build: its cost beside this one's.
	AGENT_SAVED=$AGENT
	AGENT=$BASE
	agent base "$T/main.sock"
	AGENT=$AGENT_SAVED
	BASE_PID=$AGENT_PID
	BASE_PORT=$PORT
	wait_for 15 determined "$BASE_PORT" || { say "no verdict from the baseline agent"; exit 1; }
fi

say "1. throughput: wrk -t1 -c$CONNS -d${D}s, $ROUNDS rounds, agent and nginx${BASE:+ and the baseline} alternating"
mem_start "$MAIN_PID"
for mode in json pb; do
	for conn in keepalive close; do
		for r in $(seq "$ROUNDS"); do
			wrk_run "$MAIN_PORT" "$MAIN_PID" $mode $conn >>"$T/tp.agent.$mode.$conn"
			wrk_run "$NPORT" "$NGINX_PID" $mode $conn >>"$T/tp.nginx.$mode.$conn"
			[ -z "$BASE" ] || wrk_run "$BASE_PORT" "$BASE_PID" $mode $conn >>"$T/tp.base.$mode.$conn"
		done
	done
done
mem_stop "$MAIN_PID"
PEAK_ANON=$MEM_ANON PEAK_RSS=$MEM_RSS
[ -z "$BASE" ] || stop_pid "$BASE_PID"

section "1. Health throughput and latency (wrk -t1 -c$CONNS -d${D}s, $ROUNDS interleaved rounds, median judged, each round shown as a/b/c; ratio agent/nginx of req/s, nginx/agent of CPU per request)"
row "measure" "agent" "nginx (1 wkr)" "ratio" "target" ""
for mode in json pb; do
	for conn in keepalive close; do
		read -r ar a50 a99 acpu _ < <(med "$T/tp.agent.$mode.$conn")
		read -r nr n50 n99 ncpu _ < <(med "$T/tp.nginx.$mode.$conn")
		rt=$(ratio "$ar" "$nr")
		row "$mode $conn: requests/s (median)" "$ar" "$nr" "$rt" ">= 1.0" "$(yes_no ge "$rt" 1.0)"
		row "$mode $conn: requests/s, each round" "$(rounds "$T/tp.agent.$mode.$conn" 1)" \
			"$(rounds "$T/tp.nginx.$mode.$conn" 1)" "" "" ""
		# Server CPU per request of the median round: 1 s / this is the
		# peak on an otherwise idle CPU.
		rc=$(ratio "$ncpu" "$acpu")
		row "$mode $conn: server CPU per request (us)" "$acpu" "$ncpu" "$rc" ">= 1.0 (nginx/agent)" "$(yes_no ge "$rc" 1.0)"
		row "$mode $conn: CPU per request (us), each round" "$(rounds "$T/tp.agent.$mode.$conn" 4)" \
			"$(rounds "$T/tp.nginx.$mode.$conn" 4)" "" "" ""
		row "$mode $conn: p50 / p99 latency (us)" "$a50 / $a99" "$n50 / $n99" "" "" ""
		if [ -n "$BASE" ]; then
			read -r br _ _ bcpu _ < <(med "$T/tp.base.$mode.$conn")
			row "$mode $conn: baseline build req/s; CPU/req (us)" "$ar; $acpu" "$br; $bcpu" \
				"$(ratio "$ar" "$br")" ">= 0.95 (this/base)" "$(yes_no ge "$(ratio "$ar" "$br")" 0.95)"
			row "$mode $conn: baseline req/s, each round" "" "$(rounds "$T/tp.base.$mode.$conn" 1)" "" "" ""
		fi
		eval "PEAK_${mode}_${conn}=$ar"
		eval "WRK99_${mode}_${conn}=$a99"
	done
done

# Half the agent's peak, open loop (bench/openloop.c), gateway's JSON call;
# and a quarter of it, since on two CPUs the generator itself needs about
# as much CPU as the server (loopback TCP is mostly paid by the sender) and
# at half the peak it can run out: its own lateness (late p99) says when.
ol() { # ol PORT RATE CONN: one open-loop run, its key=value line
	timeout --foreground $((D + 30)) "${GEN[@]}" "$OL" "$1" "$2" "$D" "$CONNS" "$3" json
}
gen_ok() { # the generator was late by less than half the p99 it reports
	awk -v l="$(kv late_p99_us "$1")" -v p="$(kv p99_us "$1")" 'BEGIN { exit !(l < p / 2) }'
}
p99_verdict() { # p99_verdict LINE
	if ge 1000 "$(kv p99_us "$1")"; then echo met
	elif gen_ok "$1"; then echo MISSED
	else echo "generator-bound"; fi
}
if [ -z "$ONLY" ]; then
say "1b. open loop at half and a quarter of the agent's peak rate"
section "1b. Latency at half (and a quarter) of the agent's peak rate (open loop, ${D}s, from when each request was due; late = the generator's own lateness)"
row "measure" "agent" "nginx (1 wkr)" "ratio" "target" ""
for conn in keepalive close; do
	for div in 2 4; do
		eval "rate=\$((PEAK_json_${conn} / div))"
		a=$(ol "$MAIN_PORT" "$rate" $conn)
		n=$(ol "$NPORT" "$rate" $conn)
		echo "agent $conn $a" >>"$T/openloop.log"
		echo "nginx $conn $n" >>"$T/openloop.log"
		eval "OL99_${conn}_${div}=$(kv p99_us "$a") OLRATE_${conn}_${div}=$rate"
		tgt=""
		[ $div = 2 ] && tgt="< 1000 us"
		row "json $conn at 1/$div peak, $rate/s: p50 / p99 (us)" \
			"$(kv p50_us "$a") / $(kv p99_us "$a")" "$(kv p50_us "$n") / $(kv p99_us "$n")" \
			"$(ratio "$(kv p99_us "$a")" "$(kv p99_us "$n")")" "$tgt" \
			"$([ $div = 2 ] && p99_verdict "$a")"
		row "json $conn at 1/$div peak: late p99 (us); errors" \
			"$(kv late_p99_us "$a"); $(($(kv errors "$a") + $(kv timeouts "$a") + $(kv unsent "$a")))" \
			"$(kv late_p99_us "$n"); $(($(kv errors "$n") + $(kv timeouts "$n") + $(kv unsent "$n")))" "" "" ""
	done
done

stop_pid "$NGINX_PID"

# User-space instructions per request, which the load on a shared machine
# does not move: each server under callgrind, once idle and once answering
# 3000 requests (600/s for 5 s, open loop), the difference over 3000. The
# kernel's share (accept, read, write, close) is not in it.
healthy_on() { health "$1" | grep -q '"healthy":true'; }
# cg_server agent|nginx REQUESTS CONN: total Ir of one server run, in CG_IR
cg_server() {
	local port pid
	port=$(free_port)
	if [ "$1" = agent ]; then
		# shellcheck disable=SC2046
		valgrind --tool=callgrind --callgrind-out-file="$T/cgs.out" "$AGENT" \
			--listen "127.0.0.1:$port" $(agent_opts "$T/main.sock") --interval 3600 \
			>"$T/cgs.log" 2>&1 &
	else
		sed -e "s|@T@|$T|g" -e "s|@PORT@|$port|g" -e "s|@APPVER@|x|g" \
			bench/nginx.conf.in >"$T/nginx-cg.conf"
		valgrind --tool=callgrind --callgrind-out-file="$T/cgs.out" nginx \
			-c "$T/nginx-cg.conf" -g 'master_process off;' -e "$T/ngx/error.log" \
			>"$T/cgs.log" 2>&1 &
	fi
	pid=$!
	PIDS+=($pid)
	wait_for 60 healthy_on "$port" || say "$1 under callgrind did not answer"
	if [ "$2" -gt 0 ]; then
		timeout --foreground 60 "${GEN[@]}" "$OL" "$port" 600 $(($2 / 600)) "$CONNS" "$3" json >>"$T/openloop.log"
	fi
	stop_pid "$pid"
	CG_IR=$(sed -n 's/^summary: //p' "$T/cgs.out")
}
say "1c. instructions per request under callgrind"
section "1c. User-space instructions per request (callgrind, 3000 JSON requests at 600/s; nginx/agent: above 1 the agent is cheaper)"
row "measure" "agent" "nginx (1 wkr)" "nginx/agent" "" ""
cg_server agent 0 close
A0=$CG_IR
cg_server nginx 0 close
N0=$CG_IR
for conn in close keepalive; do
	cg_server agent 3000 $conn
	a=$(((CG_IR - A0) / 3000))
	cg_server nginx 3000 $conn
	n=$(((CG_IR - N0) / 3000))
	row "json $conn: instructions per request" "$a" "$n" "$(ratio "$n" "$a")" "" ""
done

# --- 2. Health while a refresh is slow ---------------------------------------------

# A runtime that answers after 3 s; the agent gives a refresh 2 s and starts
# one every second, so its refresh thread spends the whole run blocked in a
# query (and republishes a verdict each time one is abandoned).
say "2. the same load while every refresh takes the whole refresh timeout"
stop_pid "$MAIN_PID"
fake slow 1.52 10 --delay 3
agent slow "$T/slow.sock" --interval 1 --refresh-timeout 2
SLOW_PID=$AGENT_PID
SLOW_PORT=$PORT
wait_for 10 grep -q _ping "$T/slow.req"
section "2. Health while every refresh takes the whole refresh timeout (runtime answers after 3 s, timeout 2 s)"
row "measure" "slow refresh" "normal (1)" "ratio" "target" ""
for conn in keepalive close; do
	read -r sr s50 s99 _ < <(wrk_run "$SLOW_PORT" "$SLOW_PID" json $conn)
	eval "n99=\$WRK99_json_${conn}"
	row "json $conn wrk: requests/s, p99 (us)" "$sr, $s99" "$(eval echo "\$PEAK_json_${conn}"), $n99" "" "" ""
	for div in 2 4; do
		eval "rate=\$OLRATE_${conn}_${div} n99=\$OL99_${conn}_${div}"
		a=$(ol "$SLOW_PORT" "$rate" $conn)
		echo "slow $conn $a" >>"$T/openloop.log"
		s99=$(kv p99_us "$a")
		# Within noise: at most half again as slow, or less than 100 us apart.
		within() { awk -v s="$1" -v n="$2" 'BEGIN { exit !(s <= 1.5 * n || s - n < 100) }'; }
		v=$(yes_no within "$s99" "$n99")
		[ "$v" = MISSED ] && ! gen_ok "$a" && v="generator-bound"
		row "json $conn open loop at $rate/s: p99 (us); late p99" "$s99; $(kv late_p99_us "$a")" "$n99" \
			"$(ratio "$s99" "$n99")" "unchanged (noise)" "$v"
	done
done
row "requests the agent sent the hung runtime meanwhile" "$(wc -l <"$T/slow.req")" "" "" "" ""
row "verdict served at the end" "$(health "$SLOW_PORT" | cut -c1-40)" "" "" "" ""
stop_pid "$SLOW_PID"
stop_pid "$FAKE_PID"

# --- 3. Memory -------------------------------------------------------------------------

# lists FILE N: at least N refreshes have listed the containers
lists() { [ "$(grep -c containers/json "$1" 2>/dev/null)" -ge "$2" ]; }
big_memory() { # big_memory API UNHEALTHY: MEM_ANON, MEM_RSS, BIG_N over 4 refreshes
	fake big "$1" 1000 --unhealthy "$2"
	agent big "$T/big.sock" --interval 0.5
	mem_start "$AGENT_PID"
	wait_for 120 lists "$T/big.req" 5
	mem_stop "$AGENT_PID"
	BIG_N=$(health "$PORT" | grep -o '"name"' | wc -l)
	stop_pid "$AGENT_PID"
	stop_pid "$FAKE_PID"
}
say "3. memory while judging 1000 containers"
big_memory 1.41 1000
B41_ANON=$MEM_ANON B41_RSS=$MEM_RSS B41_N=$BIG_N
big_memory 1.52 0
B52_ANON=$MEM_ANON B52_RSS=$MEM_RSS
section "3. Memory (kB, /proc/PID/status; VmRSS is mostly shared library pages)"
row "measure" "RssAnon" "VmRSS" "" "target" ""
row "idle, verdict cached (10 containers)" "$IDLE_ANON" "$IDLE_RSS" "" "RssAnon < 1024" "$(yes_no ge 1024 "$IDLE_ANON")"
row "idle, after reading /status, /metrics" "$VIEW_ANON" "$VIEW_RSS" "" "RssAnon < 1024" "$(yes_no ge 1024 "$VIEW_ANON")"
row "peak under the throughput runs of (1)" "$PEAK_ANON" "$PEAK_RSS" "" "" ""
row "peak, 1000 cont., API 1.41, $B41_N unhealthy listed" "$B41_ANON" "$B41_RSS" "" "RssAnon < 4096" "$(yes_no ge 4096 "$B41_ANON")"
row "peak, 1000 cont., API 1.52, all healthy" "$B52_ANON" "$B52_RSS" "" "RssAnon < 4096" "$(yes_no ge 4096 "$B52_ANON")"

# --- 4. Refresh cost and scaling ------------------------------------------------------------

cli_once() { # cli_once SOCK PROJECT: what a shell agent would run
	local ids
	ids=$("$DOCKER" -H "unix://$1" ps -q --filter "label=com.docker.compose.project=$2" 2>/dev/null) ||
		return 1
	[ -z "$ids" ] || "$DOCKER" -H "unix://$1" inspect $ids >/dev/null 2>&1
}
# cli_cost SOCK PROJECT RUNS: medians of user+sys CPU and wall, in us, of
# the CLI processes (bash's `time` counts every waited-for descendant).
cli_cost() {
	local i TIMEFORMAT='%R %U %S'
	: >"$T/cli.times"
	for i in $(seq "$3"); do
		# No `timeout` wrapper: its own CPU would be charged to the CLI.
		{ time cli_once "$1" "$2"; } 2>>"$T/cli.times"
	done
	CLI_CPU=$(awk '{ print ($2 + $3) * 1e6 }' "$T/cli.times" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
	CLI_WALL=$(awk '{ print $1 * 1e6 }' "$T/cli.times" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
}
# callgrind_ir SOCK K: instructions of bench_refresh (one refresh) over K
# refreshes, divided by K
callgrind_ir() {
	# shellcheck disable=SC2046
	timeout --foreground 600 valgrind --tool=callgrind --callgrind-out-file="$T/cg.out" \
		--toggle-collect=bench_refresh "$RB" "$2" $(agent_opts "$1") >/dev/null 2>"$T/cg.log"
	awk -v k="$2" '/^(summary|totals):/ { s = $2 } END { printf "%.0f", s / k }' "$T/cg.out"
}

export DOCKER_CONFIG="$T/cli"
mkdir -p "$T/cli"
say "4. refresh cost: 1, 10, 100, 1000 containers, both API paths, docker CLI reference"
section "4. One refresh against a fake Docker socket (recorded responses; agent: CPU and wall of the refresh thread's work, median; CLI: docker ps + docker inspect, user+sys, median of 3)"
row "measure" "agent" "docker CLI" "CLI/agent" "target" ""
for api in 1.41 1.52; do
	for n in 1 10 100 1000; do
		fake rc "$api" "$n"
		k=20
		[ "$n" -ge 1000 ] && k=5
		# shellcheck disable=SC2046
		line=$("$RB" "$k" $(agent_opts "$T/rc.sock"))
		echo "$api $n $line" >>"$T/refresh.log"
		cpu=$(kv cpu_us_median "$line")
		wall=$(kv wall_us_median "$line")
		ir=$(callgrind_ir "$T/rc.sock" 2)
		eval "IR_${api/./_}_$n=$ir CPU_${api/./_}_$n=$cpu"
		if [ "$api" = 1.41 ]; then
			# The 20.10 CLI speaks 1.41 at most: one reference for both paths.
			cli_cost "$T/rc.sock" bench 3
			eval "CLICPU_$n=$CLI_CPU CLIWALL_$n=$CLI_WALL"
		fi
		eval "ccpu=\$CLICPU_$n cwall=\$CLIWALL_$n"
		row "API $api, $n containers: CPU (us)" "$cpu" "$ccpu" "$(ratio "$ccpu" "$cpu")" "" ""
		row "API $api, $n containers: wall (us)" "$wall" "$cwall" "$(ratio "$cwall" "$wall")" "" ""
		row "API $api, $n containers: instructions (callgrind Ir)" "$ir" "" "" "" ""
		stop_pid "$FAKE_PID"
	done
	# Linear: what each container adds stays flat from 10→100 to 100→1000.
	eval "i10=\$IR_${api/./_}_10 i100=\$IR_${api/./_}_100 i1000=\$IR_${api/./_}_1000"
	m1=$(awk -v a="$i10" -v b="$i100" 'BEGIN { printf "%.0f", (b - a) / 90 }')
	m2=$(awk -v a="$i100" -v b="$i1000" 'BEGIN { printf "%.0f", (b - a) / 900 }')
	lin() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(b <= 1.25 * a) }'; }
	row "API $api: Ir per added container, 10→100 / 100→1000" "$m1 / $m2" "" "$(ratio "$m2" "$m1")" "linear (ratio ~1)" \
		"$(yes_no lin "$m1" "$m2")"
done
r10=$(ratio "$CLICPU_10" "$CPU_1_41_10")
row "CPU at 10 containers, CLI/agent (API 1.41)" "$CPU_1_41_10" "$CLICPU_10" "$r10" ">= 20" "$(yes_no ge "$r10" 20)"

# --- 4b. Real dockerd ------------------------------------------------------------------------

dk() { "$DOCKER" -H "unix://$T/docker.sock" "$@"; }
dockerd_up() {
	command -v dockerd >/dev/null && [ -x "$DOCKER" ] && [ -x /bin/busybox ] || return 1
	dockerd --host "unix://$T/docker.sock" --data-root "$T/data" --exec-root "$T/exec" \
		--pidfile "$T/docker.pid" --bridge=none --iptables=false --ip-masq=false \
		>"$T/dockerd.log" 2>&1 &
	DOCKERD_PID=$!
	wait_for 60 dk version >/dev/null 2>&1 || return 1
	mkdir -p "$T/rootfs/bin"
	cp /bin/busybox "$T/rootfs/bin/busybox"
	for a in sh sleep true; do ln -s busybox "$T/rootfs/bin/$a"; done
	tar -C "$T/rootfs" -c . | dk import --change 'ENV PATH=/bin' - healthd-bench:1 >/dev/null
}
# Containers of project rN, healthcheck every 10 s (rarely enough not to
# load the machine while it is measured).
real_project() { # real_project N
	local i
	for i in $(seq "$1"); do
		dk run -d --name "r$1-svc$i-1" --network none \
			--label "com.docker.compose.project=r$1" --label "com.docker.compose.service=svc$i" \
			--health-cmd true --health-interval 10s --health-timeout 10s --health-retries 3 \
			healthd-bench:1 sleep 3600 >/dev/null || return 1
	done
}
# Every container has a health result (the inspect bodies then carry a
# health log, as in production); passing or not does not change the work.
probed() { [ -z "$(dk ps -q --filter health=starting)" ]; }

if [ "${BENCH_DOCKERD:-1}" = 1 ] && [ "$(id -u)" = 0 ]; then
	say "4b. real dockerd: 1, 10, 30 containers"
	section "4b. One refresh against a real dockerd $(dockerd --version 2>/dev/null | cut -d, -f1 | cut -d' ' -f3) (API 1.41: list, then inspect each; median of 10 agent / 5 CLI)"
	row "measure" "agent" "docker CLI" "CLI/agent" "target" ""
	if dockerd_up && real_project 1 && real_project 10 && real_project 30 &&
		wait_for 120 probed; then
		for n in 1 10 30; do
			printf '{"project":"r%s","namespace":"","snapshotter":""}\n' "$n" >"$T/runtime.json"
			# shellcheck disable=SC2046
			line=$("$RB" 10 $(agent_opts "$T/docker.sock"))
			echo "real $n $line" >>"$T/refresh.log"
			cli_cost "$T/docker.sock" "r$n" 5
			cpu=$(kv cpu_us_median "$line")
			wall=$(kv wall_us_median "$line")
			row "$n containers: wall (us)" "$wall" "$CLI_WALL" "$(ratio "$CLI_WALL" "$wall")" "" ""
			row "$n containers: CPU (us)" "$cpu" "$CLI_CPU" "$(ratio "$CLI_CPU" "$cpu")" \
				"$([ "$n" = 10 ] && echo '>= 20')" \
				"$([ "$n" = 10 ] && yes_no ge "$(ratio "$CLI_CPU" "$cpu")" 20)"
		done
		printf '{"project":"bench","namespace":"","snapshotter":""}\n' >"$T/runtime.json"
	else
		row "dockerd did not start, or its containers were not probed in 120 s (dockerd.log)" "" "" "" "" ""
		tail -n 20 "$T/dockerd.log" >&2
	fi
	stop_dockerd
else
	section "4b. Real dockerd: skipped (needs root; BENCH_DOCKERD=0 was given, or not root)"
fi

# --- 5. Start-up ------------------------------------------------------------------------------

say "5. start-up"
SPORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
# shellcheck disable=SC2046
line=$(timeout --foreground 120 python3 bench/startup.py 10 "$SPORT" "$AGENT" --listen "127.0.0.1:$SPORT" \
	$(agent_opts "$T/main.sock"))
section "5. Start-up (10 runs; 10 containers, API 1.52 fake; ms from posix_spawn)"
row "measure" "median" "max" "" "" ""
row "exec → READY=1 (NOTIFY_SOCKET datagram)" "$(kv ready_ms_median "$line")" "$(kv ready_ms_max "$line")" "" "" ""
row "exec → first 200 answer (not determined yet)" "$(kv first_answer_ms_median "$line")" "$(kv first_answer_ms_max "$line")" "" "" ""
row "exec → first served verdict" "$(kv first_verdict_ms_median "$line")" "$(kv first_verdict_ms_max "$line")" "" "" ""

fi # BENCH_ONLY

# --- 6. The listener under attack ---------------------------------------------------------

# The gateway's poll (tests/fakes/gateway_poll.py: fresh connection, 2 s
# timeout, one every 200 ms, from 127.0.0.1) beside each attack of
# tests/fakes/abuse_client.py, from 64 loopback addresses or from the
# poller's own; the agent's peak RssAnon meanwhile.
ips() { # ips N: 127.0.0.2 ... 127.0.0.(N+1)
	local i out=
	for i in $(seq 2 $(($1 + 1))); do out+="${out:+,}127.0.0.$i"; done
	echo "$out"
}
LS=${BENCH_ATTACK_SECONDS:-8}
listener_attack() { # listener_attack LABEL KIND SOURCES CONNS
	local label=$1 sum res pp
	mem_start "$L_PID"
	timeout --foreground $((LS + 30)) python3 tests/fakes/gateway_poll.py --tcp "127.0.0.1:$L_PORT" \
		--duration $((LS + 1)) --gap 200 --timeout 2 >"$T/poll.$label" &
	pp=$!
	PIDS+=($pp)
	res=$(timeout --foreground $((LS + 30)) python3 tests/fakes/abuse_client.py \
		--target "127.0.0.1:$L_PORT" --attack "$2" --duration "$LS" --sources "$3" --conns "$4")
	wait "$pp" # bounded: timeout
	mem_stop "$L_PID"
	sum=$(cat "$T/poll.$label")
	echo "$label $sum $res" >>"$T/listener.log"
	local polls okp
	polls=$(kv polls "$sum")
	okp=$(kv ok "$sum")
	row "$label: polls answered; p50 / p99 (ms)" "$okp/$polls" "$(kv p50 "$sum") / $(kv p99 "$sum")" \
		"" "100%" "$(yes_no test "$okp" = "$polls")"
	row "$label: agent's peak RssAnon (kB)" "$MEM_ANON" "" "" "< 8192" "$(yes_no ge 8192 "$MEM_ANON")"
	LRES=$res
}
say "6. the listener under attack"
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
agent listener "$T/main.sock"
L_PID=$AGENT_PID
L_PORT=$PORT
wait_for 15 determined "$L_PORT" || { say "no verdict from the agent"; exit 1; }
section "6. The listener under attack (${LS} s each; gateway-style polls from 127.0.0.1, one every 200 ms, 2 s timeout)"
row "measure" "agent" "p50 / p99" "" "target" ""
read -r a _ < <(mem_now "$L_PID")
row "RssAnon before the attacks (kB)" "$a" "" "" "< 1024" "$(yes_no ge 1024 "$a")"
listener_attack "held 2000 heads, 64 addrs" slowloris "$(ips 64)" 2000
listener_attack "trickle 1500, 64 addrs" slowloris "$(ips 64)" 1500
listener_attack "idle 2000, 64 addrs" idle "$(ips 64)" 2000
listener_attack "bursts of 500, 1 addr" burst "$(ips 1)" 500
row "bursts of 500, 1 addr: burst polls 200 in 2 s; p50 / p99 (ms)" "$(kv burst_ok "$LRES")" \
	"$(kv burst_p50 "$LRES") / $(kv burst_p99 "$LRES")" "" "100%" \
	"$(yes_no awk -v v="$(kv burst_ok "$LRES")" 'BEGIN { split(v, a, "/"); exit !(a[1] == a[2] && a[2] > 0) }')"
listener_attack "trickle 200, poller's addr" slowloris 127.0.0.1 200
listener_attack "idle 2000, poller's addr" idle 127.0.0.1 2000
stop_pid "$L_PID"

# --- 7. The agent as the front of port 8090 (bench/relay.sh) -------------------------------------

if [ -z "$ONLY" ]; then
	say "7. the relay"
	relay_section || say "the relay section stopped (above)"
fi

# --- The table -----------------------------------------------------------------------------------

table_out
