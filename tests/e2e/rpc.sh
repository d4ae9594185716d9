#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# End-to-end: the real dstack-healthd binary's pRPC listener, spoken to as
# the gateway and curl speak it (docs/design/prpc.md), checked with curl and a real
# protobuf decoder. HEALTHD_BUILD names the build folder (default build).
set -u
cd "$(dirname "$0")/../.."
. tests/lib/tap.sh

B=${HEALTHD_BUILD:-build}
BIN=$B/dstack-healthd
SERVE=$B/tests/helpers/rpc_serve
for tool in curl protoc python3; do
	command -v "$tool" >/dev/null || skip_all "$tool is not installed"
done

. tests/lib/scratch.sh
alive() { kill -0 "$1" 2>/dev/null; }
# stop PID: SIGTERM, then SIGKILL if it is still there after 8 s; reaps it.
# An agent runs under `timeout -k 5`, which forwards the TERM and kills the
# agent itself 5 s later: the 8 s leave it time to, so that no agent is
# orphaned by killing its timeout first.
stop() {
	kill -TERM "$1" 2>/dev/null
	wait_for 20 sh -c "! kill -0 $1 2>/dev/null" || kill -KILL "$1" 2>/dev/null
	reap 10 "$1" 2>/dev/null
}
# Each gets the stop above, not scratch.sh's KILL, which would orphan the
# agent under its timeout.
scratch_more() {
	local p
	for p in "${PIDS[@]}"; do
		stop "$p"
	done
	PIDS=()
}

if ! [ -x "$BIN" ]; then
	ok 1 "the binary $BIN exists"
	done_testing
	exit
fi

# start_agent NAME ARGS...: runs the binary in the background; its stderr
# goes to $T/NAME.log and its pid to $T/NAME.pid.
start_agent() {
	local name=$1
	shift
	# Truncated by the child only when it runs: gone first, so that a
	# name used again is never read with the last agent's lines.
	rm -f "$T/$name.log"
	# Nothing inherited: a stuck agent must not hold the runner's pipe.
	timeout -k 5 300 "$BIN" "$@" </dev/null >"$T/$name.out" 2>"$T/$name.log" &
	echo $! >"$T/$name.pid"
	PIDS+=("$(cat "$T/$name.pid")")
}
serving() { grep -q 'serving on' "$T/$1.log"; }
addr_of() { sed -n 's/.*serving on \([^;]*\);.*/\1/p' "$T/$1.log" | head -n1; }

# hdr FILE NAME: the value of header NAME in a curl -D dump.
hdr() { tr -d '\r' <"$1" | sed -n "s/^$2: //Ip" | tail -n1; }
status() { tr -d '\r' <"$1" | sed -n 's/^HTTP\/[0-9.]* \([0-9]*\).*/\1/p' | tail -n1; }

# req NAME CURL-ARGS...: one request on a fresh connection; headers in
# $T/NAME.h, body in $T/NAME.b. 20 s: a ceiling for a hang, not a rule; a
# poll that stands for the gateway's passes its 2 s (spec: timeout = "2s")
# after, which curl takes instead.
req() {
	local name=$1
	shift
	curl -s --max-time 20 -D "$T/$name.h" -o "$T/$name.b" "$@"
}

decode() { protoc --decode="$1" -I rpc rpc/"$2" <"$3" 2>&1; }

APPVER_RE='^v[0-9]+\.[0-9]+\.[0-9]+ \(git:([0-9a-f]{20}|unknown)\)$'

cat >"$T/off.json" <<'JSON'
{"manifest_version":"3","name":"t","runner":"docker-compose","requirements":{"health_check":false}}
JSON
start_agent off --listen 127.0.0.1:0 --compose-file "$T/off.json" \
	--runtime-file "$T/none.json" --interval 1
wait_for 30 serving off
ok $? "the agent starts and logs where it serves"
A=$(addr_of off)
like "$A" '^127\.0\.0\.1:[0-9]+$' "port 0 is logged as the real port ($A)"
U="http://$A"
HEALTHY='{"healthy":true,"unhealthy":[],"error":""}'

# The gateway's poll: fresh connection, POST ?json, body {}, no Content-Type.
req poll --max-time 2 -X POST -H 'Content-Type:' --data-binary '{}' "$U/prpc/v1/Health?json"
is "$(status "$T/poll.h")" 200 "gateway poll: 200"
is "$(cat "$T/poll.b")" "$HEALTHY" "gateway poll: health_check off is healthy, every field"
is "$(hdr "$T/poll.h" Content-Type)" application/json "gateway poll: JSON content type"
like "$(hdr "$T/poll.h" X-App-Version)" "$APPVER_RE" "gateway poll: X-App-Version"
APPVER=$(hdr "$T/poll.h" X-App-Version)

# JSON mode, every way to ask for it.
while IFS='|' read -r label method path ctype body; do
	args=(-X "$method" -H "Content-Type: $ctype")
	[ "$method" = POST ] && args+=(--data-binary "$body")
	req jm "${args[@]}" "$U$path"
	is "$(status "$T/jm.h")/$(hdr "$T/jm.h" Content-Type)" 200/application/json "$label: 200 JSON"
	is "$(cat "$T/jm.b")" "$HEALTHY" "$label: body"
	is "$(hdr "$T/jm.h" X-App-Version)" "$APPVER" "$label: X-App-Version"
done <<'CASES'
GET|GET|/prpc/v1/Health||
GET with a query string|GET|/prpc/v1/Health?foo=bar&baz||
GET with a protobuf content type|GET|/prpc/v1/Health|application/octet-stream|
?json=true|POST|/prpc/v1/Health?json=true||{}
?json=1|POST|/prpc/v1/Health?json=1||{}
?json=|POST|/prpc/v1/Health?json=||{}
empty POST with ?json|POST|/prpc/v1/Health?json||
JSON content type with charset|POST|/prpc/v1/Health|application/json; charset=utf-8|{}
Worker.Health as the reference names it|POST|/prpc/v1/Worker.Health?json||{}
CASES

# Protobuf mode.
req pb -X POST -H 'Content-Type:' --data-binary '' "$U/prpc/v1/Health"
is "$(status "$T/pb.h")/$(hdr "$T/pb.h" Content-Type)" 200/application/octet-stream \
	"empty POST without json: 200 protobuf"
is "$(decode dstack.guest.v1.HealthResponse health.proto "$T/pb.b")" "healthy: true" \
	"protobuf body decodes to healthy: true"
is "$(hdr "$T/pb.h" X-App-Version)" "$APPVER" "protobuf: X-App-Version"
req pbq -X POST -H 'Content-Type: application/octet-stream' --data-binary '' \
	"$U/prpc/v1/Health?json=false"
is "$(hdr "$T/pbq.h" Content-Type)" application/octet-stream "?json=false stays protobuf"

# Version, both modes, the same strings as the header.
req vj "$U/prpc/v1/Version"
VER=$(sed -n 's/^{"version":"\([^"]*\)","rev":"\([^"]*\)"}$/v\1 (\2)/p' "$T/vj.b")
is "$VER" "$APPVER" "Version JSON is {version,rev} and matches X-App-Version"
req vp -X POST -H 'Content-Type:' --data-binary '' "$U/prpc/v1/Version"
like "$(decode dstack.guest.v1.VersionResponse health.proto "$T/vp.b" | tr '\n' ' ')" \
	'^version: "[0-9.]+" rev: "git:' "Version protobuf decodes"

# 404s: unknown method says so; a path outside the mount never does.
req nf -X POST -H 'Content-Type:' --data-binary '{}' "$U/prpc/v1/Nope?json"
is "$(status "$T/nf.h")" 404 "unknown method: 404"
is "$(cat "$T/nf.b")" '{"error":"Service not found: Nope"}' "unknown method: Service not found"
is "$(hdr "$T/nf.h" X-App-Version)" "$APPVER" "unknown method: X-App-Version"
req nfp -X POST -H 'Content-Type:' --data-binary '' "$U/prpc/v1/Nope"
is "$(decode prpc.PrpcError prpc.proto "$T/nfp.b")" 'message: "Service not found: Nope"' \
	"unknown method in protobuf mode: a PrpcError"
LONG=$(printf 'M%.0s' $(seq 1 3000))
req nfl "$U/prpc/v1/$LONG"
ok $(($(wc -c <"$T/nfl.b") < 200 ? 0 : 1)) "a long method name is not echoed at length"
for path in /prpc/Health /prpc/v0/Health /prpc/v2/Health /prpc/v1/a/b /; do
	for method in GET POST; do
		req out -X "$method" -H 'Content-Type:' --data-binary '{}' "$U$path?json"
		st=$(status "$T/out.h")
		is "$st" 404 "$method $path: 404"
		ok $(grep -q 'Service not found' "$T/out.b" && echo 1 || echo 0) \
			"$method $path: body does not say Service not found"
		is "$(hdr "$T/out.h" X-App-Version)" "$APPVER" "$method $path: X-App-Version"
	done
done

# 400, 413, 405.
while IFS='|' read -r label path ctype body want_status; do
	req e -X POST -H "Content-Type: $ctype" --data-binary "$body" "$U$path"
	is "$(status "$T/e.h")" "$want_status" "$label: $want_status"
	like "$(cat "$T/e.b")" '^\{"error":"[^"]+"\}$' "$label: {\"error\": ...}"
	is "$(hdr "$T/e.h" X-App-Version)" "$APPVER" "$label: X-App-Version"
done <<'CASES'
garbage JSON|/prpc/v1/Health?json||{"a":|400
a JSON array|/prpc/v1/Health|application/json|[]|400
CASES
printf '\x0f\xff' >"$T/garbage.pb"
req gp -X POST -H 'Content-Type:' --data-binary @"$T/garbage.pb" "$U/prpc/v1/Health"
is "$(status "$T/gp.h")/$(hdr "$T/gp.h" Content-Type)" 400/application/octet-stream \
	"garbage protobuf: 400 in protobuf mode"
like "$(decode prpc.PrpcError prpc.proto "$T/gp.b")" '^message: "request body is not a protobuf' \
	"garbage protobuf: the error is a PrpcError"
is "$(hdr "$T/gp.h" X-App-Version)" "$APPVER" "garbage protobuf: X-App-Version"
head -c 70000 /dev/zero | tr '\0' ' ' >"$T/big"
for te in "" "Transfer-Encoding: chunked"; do
	req big -X POST -H 'Content-Type:' -H "$te" --data-binary @"$T/big" "$U/prpc/v1/Health?json"
	is "$(status "$T/big.h")" 413 "70000-byte body ${te:-with Content-Length}: 413"
	is "$(cat "$T/big.b")" '{"error":"payload too large"}' "413 says payload too large"
	is "$(hdr "$T/big.h" X-App-Version)" "$APPVER" "413: X-App-Version"
done
for method in PUT DELETE HEAD; do
	req m -X "$method" "$U/prpc/v1/Health"
	is "$(status "$T/m.h")" 405 "$method: 405"
	is "$(hdr "$T/m.h" X-App-Version)" "$APPVER" "$method: X-App-Version"
done

# Request heads: the pool per connection (RPC_CONNECTION_MEMORY, 4 KiB)
# serves 3000 bytes of headers; a head well past it gets a 431.
pad=$(printf '%03000d' 0)
req big -H "X-Pad: $pad" "$U/prpc/v1/Health"
is "$(status "$T/big.h")" 200 "a request head of 3 KiB is served"
req big -H "X-Pad: $pad$pad" "$U/prpc/v1/Health"
is "$(status "$T/big.h")" 431 "a request head of 6 KiB gets 431"

# Keep-alive: two GETs on one connection (the second made no connection of
# its own; curl's verbose text for a reuse differs between its versions).
is "$(curl -s --max-time 20 -o /dev/null -o /dev/null -w '%{num_connects} ' \
	"$U/prpc/v1/Health" "$U/prpc/v1/Version")" "1 0 " "GETs keep the connection alive"

# Misbehaving clients (from other loopback addresses): idle connections,
# half-sent headers, a body that trickles, and a crowd from one address.
# The gateway's poll must still be answered within its 2 s.
python3 - "${A%:*}" "${A##*:}" >"$T/abuse.log" 2>&1 <<'PY' &
import socket, sys, time
host, port = sys.argv[1], int(sys.argv[2])
held = []
def conn(src):
    s = socket.socket()
    s.bind((src, 0))
    s.settimeout(2)
    try:
        s.connect((host, port))
    except OSError:
        return None
    held.append(s)
    return s
for i in range(20):
    conn("127.0.0.2")
for i in range(10):
    s = conn("127.0.0.3")
    if s: s.send(b"POST /prpc/v1/Health?json HTTP/1.1\r\nHost: x\r\n")
for i in range(10):
    s = conn("127.0.0.4")
    if s: s.send(b"POST /prpc/v1/Health?json HTTP/1.1\r\nHost: x\r\nContent-Length: 60000\r\n\r\n{")
crowd = [s for s in (conn("127.0.0.5") for i in range(60)) if s]
# None of them completes a request: header_timeout (2 s) closes them all
# (10 s for a loaded machine; left open, none would be).
closed = 0
deadline = time.time() + 10
for s in crowd:
    s.settimeout(max(0.01, deadline - time.time()))
    try:
        closed += s.recv(1) == b""
    except socket.timeout:
        pass
    except OSError:
        closed += 1
print("holding", len(held), "closed", closed, flush=True)
time.sleep(120)
PY
PIDS+=($!)
wait_for 30 grep -q holding "$T/abuse.log"
ok $? "misbehaving clients are connected ($(cat "$T/abuse.log"))"
closed=$(sed -n 's/.* closed \([0-9]*\)$/\1/p' "$T/abuse.log")
ok $((${closed:-0} == 60 ? 0 : 1)) "idle connections are closed at header_timeout (${closed:-?} of 60 within 10 s)"
for i in 1 2 3; do
	t0=$(date +%s%N)
	req gw --max-time 2 -X POST -H 'Content-Type:' --data-binary '{}' "$U/prpc/v1/Health?json"
	ms=$((($(date +%s%N) - t0) / 1000000))
	is "$(status "$T/gw.h"):$(cat "$T/gw.b")" "200:$HEALTHY" \
		"gateway poll $i answered while others misbehave (${ms} ms)"
done

# A prompt stop.
P=$(cat "$T/off.pid")
t0=$(date +%s%N)
kill -TERM "$P"
wait_for 5 sh -c "! kill -0 $P" # the unit's TimeoutStopSec
ok $? "SIGTERM stops the agent within 5 s ($((($(date +%s%N) - t0) / 1000000)) ms)"
if alive "$P"; then
	stop "$P"
	ok 1 "the agent exits 0 after SIGTERM (it had to be killed)"
else
	reap 10 "$P"
	is "$?" 0 "the agent exits 0 after SIGTERM"
fi
ok $(grep -qE 'Sanitizer|runtime error' "$T/off.log" && echo 1 || echo 0) \
	"no sanitizer report from the agent"

# A status-file app on a unix socket: entries reach both encodings.
printf 'healthy\n%s\n' $(($(date +%s) - 3600)) >"$T/status"
cat >"$T/sf.json" <<JSON
{"manifest_version":"3","name":"t","runner":"docker-compose",
 "requirements":{"health_check":true,"health_status_file":"$T/status"}}
JSON
start_agent sf --listen "unix:$T/sock" --compose-file "$T/sf.json" \
	--runtime-file "$T/none.json" --interval 1
wait_for 30 serving sf
ok $? "the agent serves on a unix socket"
is "$(addr_of sf)" "unix:$T/sock" "the unix socket is logged"
judged() {
	curl -s --max-time 20 --unix-socket "$T/sock" http://x/prpc/v1/Health >"$T/sf.b" &&
		grep -q '<health_file>' "$T/sf.b" && ! grep -q 'not been determined' "$T/sf.b"
}
wait_for 30 judged
ok $? "a stale status file is judged"
like "$(cat "$T/sf.b")" '^\{"healthy":false,"unhealthy":\[\{"name":"<health_file>","status":"[^"]+"\}\],"error":""\}$' \
	"unix socket, JSON: healthy:false with the status-file entry"
curl -s --max-time 20 --unix-socket "$T/sock" -X POST -H 'Content-Type:' --data-binary '' \
	http://x/prpc/v1/Health >"$T/sfp.b"
like "$(decode dstack.guest.v1.HealthResponse health.proto "$T/sfp.b" | tr '\n' ' ')" \
	'^unhealthy \{ +name: "<health_file>" +status: "[^"]+" +\} *$' \
	"unix socket, protobuf: the same entry, healthy left out as false"

P=$(cat "$T/sf.pid")
kill -TERM "$P"
wait_for 5 sh -c "! kill -0 $P" # the unit's TimeoutStopSec
ok $? "the unix-socket agent stops within 5 s"
stop "$P"
ok $(grep -qE 'Sanitizer|runtime error' "$T/sf.log" && echo 1 || echo 0) \
	"no sanitizer report from the unix-socket agent"

# A verdict the refresh loop stopped renewing is not served as current;
# the binary cannot be made to stall on demand, so the server is run alone.
if [ -x "$SERVE" ]; then
	"$SERVE" "unix:$T/stale.sock" stale </dev/null >"$T/stale.out" 2>&1 &
	PIDS+=($!)
	wait_for 20 grep -q 'listening on' "$T/stale.out"
	curl -s --max-time 20 --unix-socket "$T/stale.sock" http://x/prpc/v1/Health >"$T/stale.b"
	like "$(cat "$T/stale.b")" \
		'^\{"healthy":false,"unhealthy":\[\],"error":"verdict is [0-9]+ s old; the refresh loop is not keeping it current"\}$' \
		"a stale snapshot answers healthy:false and says how old it is"
fi

done_testing
