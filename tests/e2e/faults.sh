#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# A misbehaving Docker runtime (tests/fakes/docker_fake.py, scripted through a
# routes file) against the real agent. For each fault the agent starts
# healthy (one running container with a passing healthcheck), then the list
# request starts failing in that way, and we check:
#   - a refresh ends within its timeout (--once against the fault, timed): 1 s
#     for the faults that are about the timeout (a runtime that never
#     answers, or drips), 10 s for the others, so that a loaded machine's
#     slow fake is not taken for a timeout and served as the wrong error;
#   - the 3-failure rule: the served verdict stays healthy through the first
#     two failed refreshes (the log shows both), then healthy:false with an
#     error saying what failed in the agent's own words (docs/operator.md, "Errors"),
#     the runtime's detail in the log only;
#   - a gateway-style poll (fresh connection, POST /prpc/v1/Health?json, {})
#     is answered within 50 ms at the 99th percentile during the fault (from
#     its start until the verdict turns). Each
#     poll alternates with one of a control agent under no fault (gating
#     off): on a machine so loaded that the control itself is slow, the bound
#     is twice the control's p99 (said in a diagnostic), since that is the
#     scheduler's noise, not the agent's; a window spoilt by a burst of load
#     is polled again, up to three, the best judged (in the sanitizer build
#     the latency is the sanitizer's: shown, not judged);
#   - memory stays bounded (VmRSS before, VmHWM peak, VmRSS after).
# A table of the figures is printed as diagnostics.
set -u
cd "$(dirname "$0")/../.."
. tests/lib/tap.sh
B=${HEALTHD_BUILD:-build}
BIN=$B/dstack-healthd
FAKE=tests/fakes/docker_fake.py
POLL=tests/fakes/gateway_poll.py
R=tests/fakes/docker
[ -x "$BIN" ] || skip_all "$BIN not built"
command -v python3 >/dev/null || skip_all "python3 is not installed"

# Bounds. The body cap is 16 MiB (DOCKER_MAX_BODY): an oversized chunked
# body may be buffered up to it once, never beyond.
P99_MAX_MS=50
ONCE_START_MS=5000 # beyond the refresh timeout: the process's start and exit (3.2 s seen at load 30)
PEAK_GROWTH_MAX_KB=$((40 * 1024))
AFTER_GROWTH_MAX_KB=$((24 * 1024))
TIME_POLLS=1
# Memory is judged in the release build: the sanitizer's allocator keeps and
# maps memory of its own (a 16 MiB body cost it 300 MiB at a high load).
JUDGE_MEMORY=1
case "$B" in
*asan*) # The sanitizer build's latency is the sanitizer's: shown, not
	# judged. Its memory is, with room for its allocator (a small
	# quarantine, so that freed 16 MiB buffers do not pile up).
	export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=16"
	TIME_POLLS=0
	ONCE_START_MS=8000
	JUDGE_MEMORY=0 ;;
esac

. tests/lib/scratch.sh

WEB=f897beb9f2f72abe70da3e5bb2a41f499053b573037353b36e598027ac26dcd3
LIST='[{"Id":"'$WEB'","Names":["/demo-web-1"],"Labels":{"com.docker.compose.project":"demo"},"State":"running","Health":{"Status":"healthy","FailingStreak":0}}]'
printf '{"manifest_version":"3","name":"t","runner":"docker-compose","requirements":{"health_check":true}}\n' >"$T/app.json"
printf '{"project":"demo"}\n' >"$T/runtime.json"
: >"$T/routes"

# Two fakes read the same routes file: one on a unix socket (reached through
# a symlink, so that "refused" can swap it for a socket nobody listens on),
# one on TCP, where a reset is a real RST.
python3 "$FAKE" --listen "unix:$T/fake.sock" --routes-file "$T/routes" \
	"/_ping=file:$R/ping-1.52.http" "/v1\.52/containers/json.*=status:200:$LIST" &
PIDS+=($!)
python3 "$FAKE" --listen "tcp:127.0.0.1:0" --port-file "$T/port" --routes-file "$T/routes" \
	"/_ping=file:$R/ping-1.52.http" "/v1\.52/containers/json.*=status:200:$LIST" &
PIDS+=($!)
python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$T/dead.sock"
wait_for 30 test -S "$T/fake.sock" -a -s "$T/port" || { echo "not ok 1 - fakes did not start"; echo "1..1"; exit 1; }
TCP_PORT=$(cat "$T/port")

set_fault() { # set_fault ROUTE-ACTION ("" for none)
	if [ -n "$1" ]; then
		printf '/v1\\.[0-9]+/containers/json.*=%s\n' "$1" >"$T/routes.tmp"
	else
		: >"$T/routes.tmp"
	fi
	mv "$T/routes.tmp" "$T/routes"
}
host_for() { # host_for unix|tcp
	if [ "$1" = tcp ]; then echo "tcp://127.0.0.1:$TCP_PORT"; else echo "unix://$T/link.sock"; fi
}
kb() { awk -v k="$2" '$1 == k":" { print $2 }' "/proc/$1/status"; }
healthy_now() { curl -s --max-time 5 --unix-socket "$T/a.sock" -X POST 'http://x/prpc/v1/Health?json' -d '{}' | grep -q '"healthy":true'; }

# The control agent: gating off, no runtime, same binary.
printf '{"manifest_version":"3","name":"c","runner":"docker-compose"}\n' >"$T/ctl.json"
"$BIN" --listen "unix:$T/ctl.sock" --compose-file "$T/ctl.json" 2>/dev/null &
PIDS+=($!)
wait_for 30 test -S "$T/ctl.sock" || { echo "not ok 1 - control agent did not start"; echo "1..1"; exit 1; }

ROWS=()
# fault NAME TRANSPORT ACTION ERROR-REGEX
fault() {
	local name=$1 transport=$2 action=$3 public=$4 re=$5 host out rc start once_ms pid
	local rt=10
	# The timeout is the fault: 1 s.
	[ "$public" = "$SLOW" ] && rt=1
	local once_max=$((rt * 1000 + ONCE_START_MS))
	host=$(host_for "$transport")
	ln -sfn "$T/fake.sock" "$T/link.sock"
	set_fault ""

	# The agent starts healthy.
	rm -f "$T/a.sock"
	"$BIN" --listen "unix:$T/a.sock" --interval 0.3 --refresh-timeout "$rt" --log-level debug \
		--compose-file "$T/app.json" --runtime-file "$T/runtime.json" \
		--docker-host "$host" 2>"$T/$name.log" &
	pid=$!
	PIDS+=($pid)
	if ! wait_for 30 healthy_now; then
		ok 1 "$name: the agent is healthy before the fault"
		sed 's/^/#   /' "$T/$name.log" | tail -n 5
		kill -9 "$pid"; reap 10 "$pid" 2>/dev/null
		return
	fi
	local rss0 rss1 hwm control limit
	rss0=$(kb "$pid" VmRSS)

	# The fault starts; the gateway keeps polling through it, until the
	# verdict turns (the three failed refreshes, however long a loaded
	# machine makes them; 60 s at most). The log is read from here on
	# (marked before the switch: the first failure may be logged at once).
	local mark
	mark=$(wc -l <"$T/$name.log")
	if [ "$action" = refuse ]; then
		ln -sfn "$T/dead.sock" "$T/link.sock"
	else
		set_fault "$action"
	fi
	local summary
	summary=$(python3 "$POLL" --unix "$T/a.sock" --control-unix "$T/ctl.sock" --duration 60 --until-unhealthy \
		--gap 10 --out "$T/$name.polls")
	local polls okp p99 first
	polls=$(sed -n 's/.*polls=\([0-9]*\).*/\1/p' <<<"$summary")
	okp=$(sed -n 's/.* ok=\([0-9]*\).*/\1/p' <<<"$summary")
	p99=$(sed -n 's/.* p99=\([0-9.]*\).*/\1/p' <<<"$summary")
	first=$(sed -n 's/.*first_unhealthy_ms=\([0-9-]*\).*/\1/p' <<<"$summary")
	control=$(sed -n 's/.*control_p99=\([0-9.]*\).*/\1/p' <<<"$summary")
	limit=$(awk -v c="$control" -v m="$P99_MAX_MS" 'BEGIN { l = 2 * c; print (l > m ? l : m) }')
	[ "$limit" = "$P99_MAX_MS" ] || diag "$name: the machine is loaded (control p99 ${control} ms): bound ${limit} ms"
	# A burst of load from elsewhere can spoil one window; the fault goes
	# on, so up to two more windows are polled and the best one judged.
	# An agent that stalls its listener during the fault fails all three.
	local w more
	for w in 2 3; do
		awk -v p="$p99" -v m="$limit" 'BEGIN { exit !(p >= m) }' || break
		[ "$TIME_POLLS" = 1 ] || break
		more=$(python3 "$POLL" --unix "$T/a.sock" --control-unix "$T/ctl.sock" --duration 4 --gap 10)
		diag "$name: window $((w - 1)) p99 ${p99} ms (control ${control}); window $w: $more"
		p99=$(sed -n 's/.* p99=\([0-9.]*\).*/\1/p' <<<"$more")
		control=$(sed -n 's/.*control_p99=\([0-9.]*\).*/\1/p' <<<"$more")
		limit=$(awk -v c="$control" -v m="$P99_MAX_MS" 'BEGIN { l = 2 * c; print (l > m ? l : m) }')
		okp=$((okp + $(sed -n 's/.* ok=\([0-9]*\).*/\1/p' <<<"$more")))
		polls=$((polls + $(sed -n 's/.*polls=\([0-9]*\).*/\1/p' <<<"$more")))
	done
	rss1=$(kb "$pid" VmRSS)
	hwm=$(kb "$pid" VmHWM)

	# One refresh against the fault, timed from the outside: the faster of
	# two, since a loaded machine delays some process starts, never all.
	local i t
	once_ms=999999
	for i in 1 2; do
		start=$(date +%s%N)
		out=$("$BIN" --once --refresh-timeout "$rt" --compose-file "$T/app.json" \
			--runtime-file "$T/runtime.json" --docker-host "$host" 2>"$T/$name.once")
		rc=$?
		t=$(( ($(date +%s%N) - start) / 1000000 ))
		[ "$t" -lt "$once_ms" ] && once_ms=$t
	done

	kill -TERM "$pid"
	reap 30 "$pid"
	local stop_rc=$?

	local after err
	after=$(tail -n 1 "$T/$name.polls" | cut -d' ' -f4-)
	err=$(sed -n 's/.*"error":"\(.*\)"}$/\1/p' <<<"$after")
	is "$okp" "$polls" "$name: every poll answered ($okp/$polls)"
	if [ "$TIME_POLLS" = 1 ]; then
		ok $(awk -v p="$p99" -v m="$limit" 'BEGIN { exit !(p < m) }'; echo $?) \
			"$name: poll p99 ${p99} ms < ${limit} ms (control p99 ${control} ms)"
	else
		diag "$name: poll p99 ${p99} ms (control p99 ${control} ms), not judged in this build"
	fi
	ok $([ "$first" != - ]; echo $?) "$name: the verdict turned unhealthy (after ${first} ms)"
	like "$after" '^\{"healthy":false,"unhealthy":\[\],"error":"' \
		"$name: healthy:false with an empty list and an error"
	is "$err" "$public" "$name: the error says what failed, in the agent's words"
	like "$(tail -n +"$((mark + 1))" "$T/$name.log")" "$re" "$name: the log has the detail"
	# The first two failures kept the verdict: both are in the log before
	# the verdict changed, and every poll before the change was healthy.
	local f1 f2 fv
	f1=$(tail -n +"$((mark + 1))" "$T/$name.log" | grep -n 'refresh failed: .*keeping the previous verdict' | head -n1 | cut -d: -f1)
	f2=$(tail -n +"$((mark + 1))" "$T/$name.log" | grep -n 'refresh failed again (2 in a row)' | head -n1 | cut -d: -f1)
	fv=$(tail -n +"$((mark + 1))" "$T/$name.log" | grep -n 'verdict: unhealthy' | head -n1 | cut -d: -f1)
	ok $([ -n "$f1" ] && [ -n "$f2" ] && [ -n "$fv" ] && [ "$f1" -lt "$f2" ] && [ "$f2" -lt "$fv" ]; echo $?) \
		"$name: failures 1 and 2 kept the verdict, the 3rd changed it (log lines ${f1:-?} < ${f2:-?} < ${fv:-?})"
	local early
	early=$(awk -v f="${first:--1}" '$1 < f && $0 !~ /"healthy":true/' "$T/$name.polls" | wc -l)
	is "$early" 0 "$name: every answer before the change was the previous (healthy) verdict"
	is "$rc" 3 "$name: --once exits 3 (could not judge)"
	ok $([ "$once_ms" -lt "$once_max" ]; echo $?) "$name: --once ended in ${once_ms} ms (< ${once_max}, refresh timeout ${rt} s)"
	is "$out" "{\"healthy\":false,\"unhealthy\":[],\"error\":\"$public\"}" \
		"$name: --once says the same"
	like "$(cat "$T/$name.once")" "$re" "$name: --once logs the detail"
	if [ "$JUDGE_MEMORY" = 1 ]; then
		ok $([ $((hwm - rss0)) -lt "$PEAK_GROWTH_MAX_KB" ] && [ $((rss1 - rss0)) -lt "$AFTER_GROWTH_MAX_KB" ]; echo $?) \
			"$name: memory bounded (RSS ${rss0} KiB before, peak ${hwm}, ${rss1} after)"
	else
		diag "$name: RSS ${rss0} KiB before, peak ${hwm}, ${rss1} after (not judged in this build)"
	fi
	is "$stop_rc" 0 "$name: SIGTERM during the fault: exit 0"
	ROWS+=("$(printf '%-16s | %-62.62s | %5s ms | %5s ms (%5s) | %4s/%-4s | %6s/%6s/%6s' \
		"$name" "$err" "$once_ms" "$p99" "$control" "$okp" "$polls" "$rss0" "$hwm" "$rss1")")
}

REACH='cannot reach the container runtime'
SLOW='the container runtime took longer than the refresh timeout'
READ="the container runtime's answer could not be read"
STATUS='the container runtime answered with an error status'
fault refused         unix refuse            "$REACH" 'cannot connect to unix://.*link.sock: .*refused'
# "timed out after" the time the refresh gave the call: 1 s, or a few ms
# less when the refresh spent them before asking Docker.
fault never-answers   unix hang              "$SLOW" 'GET /containers/json: timed out after (1 s|9[0-9][0-9] ms)'
fault byte-a-second   unix "drip:1:$R/list-1.41.http" "$SLOW" 'GET /containers/json: timed out after (1 s|9[0-9][0-9] ms)'
fault garbage         unix garbage           "$READ" 'GET /containers/json: .*(line|HTTP)'
fault bad-chunk-size  unix badchunk          "$READ" 'GET /containers/json: .*chunk'
fault cut-mid-chunk   unix cutchunk          "$READ" 'GET /containers/json: .*closed in the middle of a chunked body'
fault http-500        unix 'status:500:{"message":"Internal Server Error"}' \
	"$STATUS" 'GET /containers/json: HTTP 500: Internal Server Error'
fault version-too-old unix 'status:400:{"message":"client version 1.52 is too old. Minimum supported API version is 1.53, please upgrade your client to a newer version"}' \
	"$STATUS" 'GET /containers/json: HTTP 400: client version 1.52 is too old'
fault version-too-new unix 'status:400:{"message":"client version 1.52 is too new. Maximum supported API version is 1.41"}' \
	"$STATUS" 'GET /containers/json: HTTP 400: client version .* is too new'
fault body-over-cap   unix big:33554432      "$READ" 'GET /containers/json: .*exceeds 16777216 bytes'
fault chunked-over-cap unix bigchunked:33554432 "$READ" 'GET /containers/json: .*exceeds 16777216 bytes'
fault reset-mid-body  tcp  reset:100000      "$READ" 'GET /containers/json: .*(reset|closed after)'

diag "fault            | verdict error (served)                                         | --once   | poll p99 (control) | polls ok  | RSS KiB before/peak/after"
for r in "${ROWS[@]}"; do diag "$r"; done
done_testing
