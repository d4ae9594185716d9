#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The agent's gRPC probes (issues 34, 42): grpc:// and grpcs:// against a
# real gRPC server (Debian's python3-grpcio, tests/fakes/grpc_health.py)
# whose health a test flips, SERVING with a final status other than OK
# among them, then against HTTP/2 peers, some written with python3-h2 (a
# PING first, graceful GOAWAYs), and hostile ones (tests/fakes/h2_peer.py). The containers come from a Docker stand-in
# (bench/fake_docker.py) whose containers' own address is loopback.
# Everything runs in a network namespace of its own (unshare -n), so the
# ports are the test's alone.
# tests/run: timeout 300
cd "$(dirname "$0")/../.." || exit 1
if [ -z "${HEALTHD_GRPC_NETNS:-}" ]; then
	if [ "$(id -u)" != 0 ] || ! command -v unshare >/dev/null; then
		echo "1..0 # SKIP needs root and unshare"
		exit 0
	fi
	HEALTHD_GRPC_NETNS=1 exec unshare --net -- bash "$0" "$@"
fi
ip link set lo up
set -u
. tests/lib/tap.sh
B=${HEALTHD_BUILD:-build}
AGENT=$B/dstack-healthd
PY=/usr/bin/python3
[ -x "$AGENT" ] || { echo "not ok 1 - $AGENT is not built"; echo "1..1"; exit 1; }
$PY -c 'import grpc' 2>/dev/null || skip_all "python3-grpcio is not installed"
$PY -c 'import h2, hpack' 2>/dev/null || skip_all "python3-h2 and python3-hpack are not installed"
command -v openssl >/dev/null || skip_all "openssl is not installed"
. tests/lib/scratch.sh

printf '%s\n' '{"manifest_version":"3","name":"g","runner":"docker-compose","requirements":{"health_check":true}}' >"$T/app.json"
printf '{"project":"g","namespace":"","snapshotter":""}\n' >"$T/rt.json"

# agent NAME PORT N LABEL: a Docker stand-in with N containers probed at
# LABEL ({port} is PORT + the container's index), and an agent on it.
agent() {
	$PY bench/fake_docker.py --listen "$T/d-$1.sock" --containers "$3" --project g \
		--probe-port "$2" --probe-interval 1s --probe-label "$4" >"$T/fake-$1.log" 2>&1 &
	PIDS+=($!)
	wait_for 30 test -S "$T/d-$1.sock"
	"$AGENT" --listen "unix:$T/$1.sock" --compose-file "$T/app.json" --runtime-file "$T/rt.json" \
		--docker-host "unix://$T/d-$1.sock" --control-socket "$T/ctl-$1.sock" \
		--interval 1 --log-level debug >"$T/agent-$1.log" 2>&1 &
	PIDS+=($!)
	eval "AGENT_PID_$1=$!"
	wait_for 30 test -S "$T/$1.sock"
}
query() { curl -s --max-time 3 --unix-socket "$T/$1.sock" -X POST 'http://x/prpc/v1/Health?json' -d '{}'; }
query_is() { [ "$(query "$1")" = "$2" ]; }
unhealthy() { # unhealthy CONTAINER WORDS: the public answer
	printf '{"healthy":false,"unhealthy":[{"name":"%s","status":"%s"}],"error":""}' "$1" "$2"
}
OK='{"healthy":true,"unhealthy":[],"error":""}'
# probe_field AGENT INDEX FIELD: the operator's view of container INDEX.
probe_field() {
	"$AGENT" status --json --control-socket "$T/ctl-$1.sock" 2>/dev/null | $PY -c '
import json, sys
d = json.load(sys.stdin)
c = [c for c in d["containers"] if c["name"] == "g-svc%s-1" % sys.argv[1]][0]
print(c["agent_probe"][sys.argv[2]])' "$2" "$3"
}
field_is() { [ "$(probe_field "$1" "$2" "$3")" = "$4" ]; }
# stop_agents: SIGTERM, as systemd stops the agent, then reaped (the
# sanitizer build reports only on a clean exit).
stop_agents() {
	local v
	for v in ${!AGENT_PID_*}; do kill -TERM "${!v}" 2>/dev/null; done
	for v in ${!AGENT_PID_*}; do reap 20 "${!v}"; done
}

# --- a real gRPC server: SERVING, then each other answer ---------------------
mkdir -p "$T/st"
echo SERVING >"$T/st/app"
$PY tests/fakes/grpc_health.py "$T/st" 50051 --ready "$T/grpc.ready" >"$T/grpc.log" 2>&1 &
GRPC_PID=$!
PIDS+=($GRPC_PID)
wait_for 90 test -e "$T/grpc.ready"
ok $? "a real gRPC server (python3-grpcio) listens" || sed 's/^/# /' "$T/grpc.log"
agent a 50051 1 'grpc://:{port}/app'
wait_for 30 query_is a "$OK"
is "$(query a)" "$OK" "grpc://:PORT/SERVICE, the service SERVING: healthy"
is "$(probe_field a 0 target)" "grpc://127.0.0.1:50051/app" "status: the target, with the service"
is "$(probe_field a 0 last_result)" "pass" "status: the last probe passed"

# Kubernetes' rule is one failure in a row with its default failureThreshold
# of 3: the agent's retries (3, the label's default) count the same way.
# The trailers decide (issue 42): SERVING, then UNAVAILABLE, is a failed
# call, as it is for every gRPC client; grpcio sends exactly that (the
# message, then grpc-status 14 in the trailers). An unknown service is
# grpcio's Trailers-Only NOT_FOUND.
for flip in "NOT_SERVING:gRPC health status NOT_SERVING:grpc_status" \
	"UNKNOWN:gRPC health status UNKNOWN:grpc_status" \
	"SERVICE_UNKNOWN:gRPC health status SERVICE_UNKNOWN:grpc_status" \
	"SERVING/UNAVAILABLE/down 50% done, n\xc3\xa4chste:gRPC status UNAVAILABLE:grpc_call_status" \
	"SERVING/PERMISSION_DENIED:gRPC status PERMISSION_DENIED:grpc_call_status" \
	"-:gRPC status NOT_FOUND:grpc_call_status"; do
	IFS=: read -r word text name <<<"$flip"
	if [ "$word" = - ]; then rm -f "$T/st/app"; else printf '%b\n' "$word" >"$T/st/app"; fi
	want=$(unhealthy g-svc0-1 "probe unhealthy ($text)")
	wait_for 30 query_is a "$want"
	is "$(query a)" "$want" "the server answers $word: unhealthy, in the agent's words"
	is "$(probe_field a 0 last_result)" "$name" "status: $name"
	case $word in
	SERVING/UNAVAILABLE/*)
		# The server's grpc-message for the operator: percent-decoded,
		# bytes outside printable ASCII escaped.
		is "$(probe_field a 0 last_reason)" \
			'gRPC status UNAVAILABLE, grpc-message "down 50% done, n\xc3\xa4chste"' \
			"status: the server's grpc-message, decoded and escaped, for the operator"
		grep -q 'probe of container [0-9a-f]*: last probe gRPC status UNAVAILABLE, grpc-message "down 50% done' \
			"$T/agent-a.log"
		ok $? "the journal has it too, once the words change" ;;
	-)
		is "$(probe_field a 0 last_reason)" 'gRPC status NOT_FOUND, grpc-message "unknown service"' \
			"status: NOT_FOUND with grpcio's words for it" ;;
	esac
	echo SERVING >"$T/st/app"
	wait_for 30 query_is a "$OK"
	is "$(query a)" "$OK" "SERVING again: healthy"
done
# grpc-timeout reaches the server: a deadline a tenth under the probe's
# timeout (the stand-in's label: 500 ms, so 450 ms).
echo ECHO_DEADLINE >"$T/st/app"
wait_for 30 test -s "$T/st/_deadline"
left=$(cat "$T/st/_deadline" 2>/dev/null)
ok "$(awk -v l="${left:-0}" 'BEGIN { exit !(l > 0.2 && l <= 0.45) }'; echo $?)" \
	"grpcio sees the probe's grpc-timeout: ${left:-none} s left of 0.45"
echo SERVING >"$T/st/app"
wait_for 30 query_is a "$OK"
kill "$GRPC_PID"
want=$(unhealthy g-svc0-1 "probe unhealthy (connection refused)")
wait_for 30 query_is a "$want"
is "$(query a)" "$want" "the server gone: connection refused"

# --- grpcs: TLS with ALPN h2, no certificate check --------------------------
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
	-subj /CN=app.example -keyout "$T/key.pem" -out "$T/cert.pem" >"$T/openssl.log" 2>&1
ok $? "a self-signed certificate for another name" || sed 's/^/# /' "$T/openssl.log"
$PY tests/fakes/grpc_health.py "$T/st" 50061 --tls "$T/cert.pem" "$T/key.pem" \
	--ready "$T/grpcs.ready" >"$T/grpcs.log" 2>&1 &
PIDS+=($!)
wait_for 90 test -e "$T/grpcs.ready"
agent b 50061 1 'grpcs://:{port}/app'
wait_for 30 query_is b "$OK"
is "$(query b)" "$OK" "grpcs:// over TLS with ALPN h2: healthy"
echo NOT_SERVING >"$T/st/app"
want=$(unhealthy g-svc0-1 "probe unhealthy (gRPC health status NOT_SERVING)")
wait_for 30 query_is b "$want"
is "$(query b)" "$want" "grpcs://: NOT_SERVING is unhealthy"
echo SERVING >"$T/st/app"
# A TLS server that is not HTTP/2 (no ALPN h2): the handshake fails.
openssl s_server -accept 50071 -cert "$T/cert.pem" -key "$T/key.pem" -www -quiet \
	>"$T/s_server.log" 2>&1 &
PIDS+=($!)
agent c 50071 1 'grpcs://:{port}'
want=$(unhealthy g-svc0-1 "probe unhealthy (TLS handshake failed)")
wait_for 30 query_is c "$want"
is "$(query c)" "$want" "grpcs:// to a TLS server without h2: the handshake fails"

# --- hostile HTTP/2 peers ----------------------------------------------------
# One container each, on port 51000 + its index; the probe's timeout is
# 500 ms (the stand-in's label).
modes=(serving framed trickle notserving trailersonly rst goaway continuation huge winupdate
	nosettings slow headersfirst notrailers http1
	unavailable http502 pingfirst goawayfirst goawayafter goawayzero tablegrow manyentries
	hufpad intoverflow)
results=(pass pass pass grpc_status grpc_call_status stream_reset goaway bounds bounds bounds
	timeout timeout grpc_bad_answer grpc_bad_answer http1
	grpc_call_status status pass pass pass goaway grpc_bad_answer grpc_bad_answer
	grpc_bad_answer grpc_bad_answer)
failing=0
for r in "${results[@]}"; do [ "$r" = pass ] || failing=$((failing + 1)); done
args=()
for i in "${!modes[@]}"; do args+=("$((51000 + i))=${modes[$i]}"); done
$PY tests/fakes/h2_peer.py "${args[@]}" --ready "$T/h2.ready" >"$T/h2.log" 2>&1 &
PIDS+=($!)
wait_for 90 test -e "$T/h2.ready"
ok $? "the HTTP/2 peers listen" || sed 's/^/# /' "$T/h2.log"
agent h 51000 "${#modes[@]}" 'grpc://:{port}/x'
for i in "${!modes[@]}"; do
	wait_for 30 field_is h "$i" last_result "${results[$i]}"
	is "$(probe_field h "$i" last_result)" "${results[$i]}" "peer ${modes[$i]}: ${results[$i]}"
done
is "$(probe_field h 6 last_reason)" "connection closed by the server (GOAWAY), HTTP/2 error code 11 ENHANCE_YOUR_CALM" \
	"status: the GOAWAY's error code, for the operator"
# The rule each one broke, for the operator (the public words stay few).
reason_of() { # reason_of MODE: the operator's last_reason of that peer
	local i
	for i in "${!modes[@]}"; do [ "${modes[$i]}" = "$1" ] && probe_field h "$i" last_reason; done
}
is "$(reason_of unavailable)" 'gRPC status UNAVAILABLE, grpc-message "backend\x0adown \xc3\xbc\x01"' \
	"status: an h2 peer's SERVING then UNAVAILABLE, its message escaped"
is "$(reason_of trailersonly)" 'gRPC status NOT_FOUND, grpc-message "unknown service"' \
	"status: Trailers-Only NOT_FOUND reads NOT_FOUND"
is "$(reason_of http502)" 'HTTP status 502, content-type "text/html"' "status: a proxy's 502 page"
is "$(reason_of http1)" 'HTTP/1 answer, not HTTP/2, status line HTTP/1.x 400' "status: an HTTP/1 server"
is "$(reason_of goawayzero)" \
	"connection closed by the server (GOAWAY), HTTP/2 error code 0 NO_ERROR, last stream 0: the call was not taken" \
	"status: a graceful GOAWAY that excludes the call"
is "$(reason_of tablegrow)" \
	'not a gRPC answer, a header block that does not decode (HPACK): a table size update over 4096' \
	"status: a table grown past its bound"
is "$(reason_of manyentries)" \
	'not a gRPC answer, a header block that does not decode (HPACK): an index past the tables' \
	"status: trailers naming an entry the table evicted"
is "$(reason_of hufpad)" \
	"not a gRPC answer, a header block that does not decode (HPACK): Huffman padding that is not EOS's first bits" \
	"status: Huffman padding that is not EOS"
is "$(reason_of intoverflow)" \
	"not a gRPC answer, a header block that does not decode (HPACK): an integer over the decoder's bound" \
	"status: an integer that overflows"
is "$(reason_of nosettings)" "timed out, waiting for the server's SETTINGS" \
	"status: where a timed-out answer stopped"
# Three failures in a row (retries) make each failing one unhealthy; the
# public words come from the agent's table alone.
# A peer still in its start period is listed too, as "probe starting": only
# the words "probe unhealthy" say that its retries are spent.
all_unhealthy() {
	[ "$(query h | $PY -c 'import json,sys
print(sum(1 for c in json.load(sys.stdin)["unhealthy"] if c["status"].startswith("probe unhealthy (")))')" = "$failing" ]
}
wait_for 60 all_unhealthy
ok $? "the $failing failing peers are unhealthy, the $(( ${#modes[@]} - failing )) passing ones are not"
out=$(query h)
ok "$(printf '%s' "$out" | grep -q 'grpc-status\|grpc-message\|debug\|ENHANCE\|HTTP/1.1 400\|backend\|unknown service\|text/html\|Bad Gateway\|content-type\|HPACK\|NO_ERROR'; echo $(( ! $? )))" \
	"the public answer holds no byte of a peer's and no error code"
like "$out" 'probe unhealthy \(answer over the agent.s bounds\)' "a flood is 'answer over the agent's bounds'"
like "$out" 'probe unhealthy \(gRPC status UNAVAILABLE\)' "SERVING then UNAVAILABLE: 'gRPC status UNAVAILABLE'"
like "$out" 'probe unhealthy \(gRPC status NOT_FOUND\)' "Trailers-Only NOT_FOUND: 'gRPC status NOT_FOUND'"
like "$out" 'probe unhealthy \(HTTP status 502\)' "a proxy's 502 page: 'HTTP status 502'"
like "$out" 'probe unhealthy \(HTTP/1 answer, not HTTP/2\)' "an HTTP/1 server: 'HTTP/1 answer, not HTTP/2'"
# The floods cost a bounded read per probe, not a core: over three rounds
# of probes the agent spends under half of one on 15 probes a second, 3 of
# them floods.
pid=$AGENT_PID_h
hz=$(getconf CLK_TCK)
runs0=$(probe_field h 7 runs)
runs_past() { [ "$(probe_field h 7 runs)" -ge $((runs0 + 3)) ]; }
c0=$(awk '{ print $14 + $15 }' "/proc/$pid/stat") t0=$(date +%s%N)
wait_for 30 runs_past
c1=$(awk '{ print $14 + $15 }' "/proc/$pid/stat") t1=$(date +%s%N)
pct=$(awk -v c=$((c1 - c0)) -v hz="$hz" -v ns=$((t1 - t0)) 'BEGIN { printf "%d", 100 * c / hz / (ns / 1e9) }')
ok "$([ "$pct" -lt 50 ]; echo $?)" "the agent under the floods: $pct% of a core"
stop_agents
ok "$( ! grep -E 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$T"/agent-*.log; echo $?)" \
	"no sanitizer report"
done_testing
