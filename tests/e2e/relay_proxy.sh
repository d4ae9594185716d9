#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# tests/run: timeout 900
# The front behind a gateway that speaks the PROXY protocol (issue 43), end
# to end, with Debian's haproxy as the gateway's stand-in (send-proxy-v2, as
# the dstack gateway writes, and send-proxy for version 1) and clients from
# several loopback addresses:
#   - the headers haproxy writes (v1, v2, v2 with its CRC32C and unique-id
#     TLVs, IPv6) are read by the agent's reader as the client's own
#     address and port (tests/helpers/proxy_decode);
#   - through haproxy, on the port app-compose.json declares with "pp":
#     true: Health answered behind the header, an upload relayed byte for
#     byte (the guest agent gets exactly what followed the header), the
#     client's address in /status and /metrics;
#   - one client's flood of requests the guest agent is slow to answer
#     holds every relay slot, and another client's dashboard is still
#     answered, every time, by taking a link of the client over its share;
#     the same flood through a proxy that sends no header (one address for
#     all) refuses it (503): the share is what serves it;
#   - headers written by the test: v2 with TLVs, IPv6, LOCAL, UNSPEC, v1
#     UNKNOWN, a header and request cut into one-byte reads, none at all
#     (the gateway's own requests): each served; malformed, over-long or
#     cut short: closed, nothing relayed, counted, and logged once per
#     cause however many come;
#   - the policy followed as app-compose.json can first be read, and as a
#     reload changes it;
#   - on a port not declared, a v1 line is relayed as the bytes it is (the
#     guest agent gets it as its request line) and a v2 header closed as
#     any binary opening is; nothing of either is read as an address.
set -u
cd "$(dirname "$0")/../.."
. tests/lib/tap.sh
. tests/lib/relay.sh
. tests/lib/front.sh
. tests/lib/haproxy.sh
command -v haproxy >/dev/null || skip_all "haproxy is not installed (build-aux/deps.sh test)"
PC=tests/fakes/proxy_client.py
DEC=$B/tests/helpers/proxy_decode
[ -x "$DEC" ] || skip_all "$DEC not built"
python3 -c 'import socket; s = socket.socket(socket.AF_INET6); s.bind(("::1", 0))' 2>/dev/null ||
	skip_all "no IPv6 loopback"

# agent_on NAME PORT FDS ARGS...: an agent listening on 127.0.0.1:PORT (so
# that its app-compose.json can name the port), its control socket
# $T/NAME.sock; its pid in NAME_PID.
agent_on() {
	local name=$1 port=$2 fds=$3
	shift 3
	rm -f "$T/$name.log"
	(
		[ "$fds" = - ] || ulimit -n "$fds"
		unpiped exec "$BIN" --listen "127.0.0.1:$port" --header-timeout "$HT" \
			--control-socket "$T/$name.sock" "$@"
	) 2>"$T/$name.log" &
	PIDS+=($!)
	eval "${name}_PID=$!"
	eval "$name=$port"
	wait_for 20 grep -q 'serving on 127.0.0.1:' "$T/$name.log"
}
# declared PORT: an app-compose.json whose port_policy declares PORT "pp".
declared() {
	printf '{"manifest_version":"3","name":"t","runner":"docker-compose","port_policy":{"restrict_mode":false,"ports":[{"port":%s,"pp":true}]}}\n' "$1"
}
listener_field() {
	ctl "$1" status | python3 -c "import json,sys; print(json.load(sys.stdin)['listener']['$2'])"
}
# top AGENT: /status's top clients, "client=links" each.
top() {
	ctl "$1" status | python3 -c '
import json, sys
print(" ".join("%s=%d" % (c["client"], c["links"]) for c in json.load(sys.stdin)["relay"]["top_clients"]))'
}
health_json() { python3 "$PC" "$@" --path '/prpc/v1/Health?json' --post '{}'; }

stand_in S || { echo "not ok 1 - no stand-in S"; exit 1; }

# --- the headers haproxy writes, read by the agent's reader ---------------------------
mkdir -p "$T/cap"
python3 tests/fakes/proxy_capture.py --listen 127.0.0.1:0 --ready "$T/cap.port" --dir "$T/cap" 2>"$T/cap.log" &
PIDS+=($!)
wait_for 30 test -s "$T/cap.port"
CAP=$(cat "$T/cap.port")
C1=$(free_port) C2=$(free_port) C3=$(free_port) C6=$(free_port)
{
	haproxy_defaults
	cat <<-CFG
	frontend v1
	    bind 127.0.0.1:$C1
	    default_backend v1
	backend v1
	    server capture 127.0.0.1:$CAP send-proxy
	frontend v2
	    bind 127.0.0.1:$C2
	    default_backend v2
	backend v2
	    server capture 127.0.0.1:$CAP send-proxy-v2
	frontend v2tlv
	    bind 127.0.0.1:$C3
	    unique-id-format %{+X}o\ %ci:%cp_%fi:%fp_%Ts_%rt
	    default_backend v2tlv
	backend v2tlv
	    server capture 127.0.0.1:$CAP send-proxy-v2 proxy-v2-options crc32c,unique-id
	frontend v6
	    bind [::1]:$C6
	    default_backend v2
	CFG
} >"$T/capture.cfg"
haproxy_start HC "$T/capture.cfg" "$C1" "$C2" "$C3" "$C6" || { echo "not ok 1 - haproxy did not start"; exit 1; }
n=0
for case in "$C1 v1 127.0.0.7" "$C2 v2 127.0.0.7" "$C3 v2-crc32c-unique-id 127.0.0.7" "$C6 v2-ipv6 ::1"; do
	read -r port what from <<<"$case"
	n=$((n + 1))
	host=127.0.0.1
	[ "$from" = ::1 ] && host=::1
	me=$(python3 "$PC" "$port" --host "$host" --from "$from" --path /capture | sed -n 's/^local=//p')
	wait_for 30 test -e "$T/cap/$n.bin"
	got=$("$DEC" "$T/cap/$n.bin")
	want=$([ "$from" = ::1 ] && echo "[::1]:${me##*:}" || echo "$me")
	is "$(echo "$got" | cut -d' ' -f1,3,4)" "ok address $want" \
		"haproxy send-proxy ($what): the header it wrote reads as the client's address and port ($got)"
done
haproxy_stop HC

# --- the agent behind haproxy, on its declared port -----------------------------------
P=$(free_port) H1=$(free_port) H2=$(free_port)
declared "$P" >"$T/declared.json"
HT=10 agent_on A "$P" "$(slots_limit 8)" --compose-file "$T/declared.json" --relay "127.0.0.1:$S" ||
	{ echo "not ok - agent A did not start"; exit 1; }
like "$(cat "$T/A.log")" "declares port $P with \"pp\": true" "app-compose.json declares the listener's port with pp: said at start"
{
	haproxy_defaults
	cat <<-CFG
	frontend v2
	    bind 127.0.0.1:$H2
	    default_backend agent_v2
	backend agent_v2
	    server agent 127.0.0.1:$P send-proxy-v2
	frontend v1
	    bind 127.0.0.1:$H1
	    default_backend agent_v1
	backend agent_v1
	    server agent 127.0.0.1:$P send-proxy
	CFG
} >"$T/gateway.cfg"
haproxy_start HG "$T/gateway.cfg" "$H1" "$H2" || { echo "not ok - haproxy did not start"; exit 1; }
for v in 2 1; do
	eval "hp=\$H$v"
	like "$(health_json "$hp" --from 127.0.0.7 | tail -n1)" '"healthy":true' \
		"haproxy send-proxy$([ $v = 2 ] && echo -v2): Health behind the header is the agent's, answered"
	out=$(python3 "$PC" "$hp" --from 127.0.0.7 --path /echo --post "body after the v$v header" | tr '\n' ' ')
	like "$out" "HTTP/1.1 200 OK server=stand-in body=24 b'body after the v$v header'" \
		"...an upload relayed to the guest agent byte for byte, the header taken off ($out)"
done
is "$(listener_field A proxy_read) $(listener_field A proxy_refused)" "4 0" \
	"/status: the four headers read (listener proxy_read), none refused"

# One client's flood: every slot awaiting a slow answer, and more coming
# as fast as they are refused or cut.
bg_client FLOOD "$H2" hold 12 /slow?20 --from 127.0.0.2 --reopen 0.2
wait_for 60 relay_is A open 8
ok $? "127.0.0.2 floods through haproxy with requests the guest agent is slow to answer: every relay slot taken ($(relay_field A open) open)"
like "$(top A)" '^127\.0\.0\.2=8$' "/status: the client holding them is named by its header's address ($(top A))"
ctl A metrics >"$T/metrics"
like "$(grep -E '^dstack_healthd_relay_(clients|client_links)' "$T/metrics" | tr '\n' ' ')" \
	'dstack_healthd_relay_clients 1 dstack_healthd_relay_client_links\{rank="1"\} 8 ' \
	"/metrics: the clients holding links and the most one holds, as counts by rank, no address"
before=$(counts A)
served=0
for i in 1 2 3 4 5; do
	out=$(python3 "$PC" "$H2" --from 127.0.0.3 --path /small | sed -n 2p)
	[ "$out" = "HTTP/1.1 200 OK" ] && served=$((served + 1))
done
is "$served" 5 "...and 127.0.0.3's dashboard through the same haproxy is answered, 5 of 5"
like "$(moved A "$before")" 'evicted_over_share\+[1-9]' \
	"/status: by links of the client over its share, cut though awaiting (evicted_over_share) ($(moved A "$before"))"
# A flood's newcomer is answered 503 once it has waited its queue time out
# (a second) for one of its own client's links: not always before the
# dashboard is done. The first 503 the journal names is the flood's.
wait_for 60 grep -q 'relay: answered 503' "$T/A.log"
like "$(grep 'relay: answered 503' "$T/A.log" | head -n1)" 'to a newcomer of client 127\.0\.0\.2: ' \
	"the flood's own newcomers answered 503, logged naming their client"
bg_end FLOOD
# Its links end once the guest agent has answered them (a client's end is
# passed on as a half-close).
wait_for 90 relay_is A open 0

# The same flood through a proxy that sends no header: one address for all.
Q=$(free_port) HN=$(free_port)
agent_on N "$Q" "$(slots_limit 8)" --compose-file "$T/app.json" --relay "127.0.0.1:$S" ||
	{ echo "not ok - agent N did not start"; exit 1; }
{
	haproxy_defaults
	cat <<-CFG
	frontend plain
	    bind 127.0.0.1:$HN
	    default_backend agent
	backend agent
	    server agent 127.0.0.1:$Q
	CFG
} >"$T/plain.cfg"
haproxy_start HN "$T/plain.cfg" "$HN" || { echo "not ok - haproxy did not start"; exit 1; }
bg_client FLOODN "$HN" hold 12 /slow?50 --from 127.0.0.2 --reopen 3600
wait_for 60 relay_is N open 8
out=$(python3 "$PC" "$HN" --from 127.0.0.3 --path /small | sed -n 2p)
is "$out" "HTTP/1.1 503 Service Unavailable" \
	"without PROXY headers the same flood and dashboard come from one address: the dashboard is refused (503)"
bg_end FLOODN
haproxy_stop HN

# --- headers written by the test, straight to the declared port ------------------------
small() { python3 "$PC" "$P" "$@" --path /small | sed -n 2p; }
before=$(counts A)
is "$(small --from 127.0.0.4 --header v2tlv)" "HTTP/1.1 200 OK" "a v2 header with TLVs (authority, NOOP, unique id): relayed"
is "$(small --from 127.0.0.4 --header v2 --client 2001:db8::7)" "HTTP/1.1 200 OK" "a v2 header naming an IPv6 client: relayed"
is "$(small --from 127.0.0.4 --header v1 --client 2001:db8::8)" "HTTP/1.1 200 OK" "a v1 TCP6 line: relayed"
is "$(small --from 127.0.0.4 --header v2local)" "HTTP/1.1 200 OK" "v2 LOCAL (the proxy's own connection): relayed"
is "$(small --from 127.0.0.4 --header v2unspec)" "HTTP/1.1 200 OK" "v2 UNSPEC: relayed"
is "$(small --from 127.0.0.4 --header v1unknown)" "HTTP/1.1 200 OK" "v1 UNKNOWN: relayed"
is "$(small --from 127.0.0.4 --header v2 --cut)" "HTTP/1.1 200 OK" "a v2 header sent a byte at a time: read whole, relayed"
is "$(small --from 127.0.0.4 --header v1 --cut)" "HTTP/1.1 200 OK" "a v1 line sent a byte at a time: read whole, relayed"
is "$(small --from 127.0.0.4)" "HTTP/1.1 200 OK" "no header at all (the gateway's own requests): served"
like "$(health_json "$P" --from 127.0.0.4 --header v2 --cut | tail -n1)" '"healthy":true' \
	"Health behind a header sent a byte at a time: answered"
is "$(moved A "$before")" "total+9 listener_proxy_read+9 listener_proxy_none+1" \
	"/status: nine headers read, one connection without (counted apart), nine relayed (Health not)"
# An IPv6 client is held by its /64 while it holds a link.
bg_client V6 "$P" hold 1 /slow?50 --proxy v2 --client 2001:db8:0:7::1 --reopen 3600
wait_for 30 eval '[ "$(top A)" = "2001:db8:0:7::/64=1" ]'
ok $? "an IPv6 client holding a link: named by its /64 ($(top A))"
bg_end V6

before=$(counts A)
bad=(
	"hex:0d0a0d0a000d0a515549540a3111000c7f0000017f00000100010002 v2 version 3"
	"hex:0d0a0d0a000d0a515549540a2111000b7f0000017f000001000100 v2 length shorter than its addresses"
	"hex:0d0a0d0a000d0a515549540a211107f1 v2 header longer than 2048 bytes"
	"text:PROXY\x20TCP4\x201.2.3.4\x205.6.7.8\x201\r\n v1 fields not four"
	"text:PROXY\x20TCP4\x201.2.3.4\x205.6.7.8\x2001\x202\r\n v1 port malformed"
	"text:PROXY\x20UNKNOWN\x20aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa v1 line longer than 107 bytes"
)
for b in "${bad[@]}"; do
	hdr=${b%% *} why=${b#* }
	out=$(python3 "$PC" "$P" --from 127.0.0.5 --header "$hdr" | sed -n 2p)
	like "$out" '^(closed|reset.*|send failed.*)$' "a header broken ($why): the connection closed, no answer ($out)"
done
out=$(python3 "$PC" "$P" --from 127.0.0.5 --header hex:0d0a0d0a000d0a515549540a2111000c7f000001 --end | sed -n 2p)
like "$out" '^(closed|reset.*)$' "a v2 header cut short by the client's end: closed ($out)"
is "$(moved A "$before")" "listener_proxy_refused+7" \
	"/status: seven refused (listener proxy_refused), nothing relayed (the relay's total unmoved)"
# Twenty more of one cause within a few seconds: the journal gets one line.
python3 "$PC" "$P" --from 127.0.0.5 --header "text:PROXY TCP9 x\r\n" --repeat 20 >/dev/null
lines=$(grep -c 'PROXY header v1 protocol' "$T/A.log")
is "$lines" 1 "twenty broken headers of one cause: one line in the journal, not twenty"
is "$(listener_field A proxy_refused)" 27 "...all twenty counted"

# --- the policy learned when app-compose.json can be read ----------------------------------
# An agent started before its app-compose.json exists reads no header
# (nothing says the gateway writes one); once the file is there and read
# (the next refresh), it does; a reload to a file that no longer declares
# the port stops it.
L=$(free_port)
agent_on LA "$L" - --compose-file "$T/late.json" --relay "127.0.0.1:$S" --interval 1 ||
	{ echo "not ok - agent LA did not start"; exit 1; }
out=$(python3 "$PC" "$L" --from 127.0.0.6 --header v2 | sed -n 2p)
like "$out" '^(closed|reset.*|send failed.*)$' "app-compose.json not there yet: a v2 header is closed, as on any port not declared ($out)"
declared "$L" >"$T/late.json.tmp" && mv "$T/late.json.tmp" "$T/late.json"
wait_for 60 grep -q "declares port $L" "$T/LA.log"
ok $? "the file written: the next refresh reads it, and says the port is declared"
is "$(python3 "$PC" "$L" --from 127.0.0.6 --header v2 | sed -n 2p)" "HTTP/1.1 200 OK" "...and a v2 header is read, the request relayed"
cp "$T/app.json" "$T/late.json"
kill -HUP "$LA_PID"
wait_for 60 grep -q "no longer declares port $L" "$T/LA.log"
ok $? "a reload to a file without the port: said once"
out=$(python3 "$PC" "$L" --from 127.0.0.6 --header v2 | sed -n 2p)
like "$out" '^(closed|reset.*|send failed.*)$' "...and a v2 header is closed again ($out)"

# --- a port not declared -----------------------------------------------------------------
# The app declares other ports "pp" (and this one "pp": false): the
# gateway writes headers on those, never on this one, so none is read here.
# (app-compose.json without port_policy at all: the late agent above.)
U=$(free_port)
printf '{"manifest_version":"3","name":"t","runner":"docker-compose","port_policy":{"ports":[{"port":%s,"pp":false},{"port":%s,"pp":true},{"port":%s,"pp":true}]}}\n' \
	"$U" "$((U == 65535 ? 1 : U + 1))" "$((U == 1 ? 65535 : U - 1))" >"$T/other.json"
agent_on U "$U" - --compose-file "$T/other.json" --relay "127.0.0.1:$S" || { echo "not ok - agent U did not start"; exit 1; }
! grep -q 'declares port' "$T/U.log"
ok $? "app-compose.json declaring the ports beside the listener's pp, and its own not: nothing said of PROXY headers at start (none is read)"
out=$(python3 "$PC" "$U" --from 127.0.0.6 --header "text:PROXY UNKNOWN marker-4711\r\n" | tr '\n' ' ')
like "$out" "Bad request version \('marker-4711'\)" \
	"a v1 line on a port not declared is relayed as the bytes it is: the guest agent read it as its request line (its answer: $(echo "$out" | grep -o "Bad request version ('[^']*')"))"
out=$(python3 "$PC" "$U" --from 127.0.0.6 --header v2 --client 10.9.9.9 | sed -n 2p)
like "$out" '^(closed|reset.*|send failed.*)$' "a v2 header on a port not declared is closed at once, as any binary opening ($out)"
is "$(moved U '')" "total+1" \
	"/status: the v1 line relayed, the v2 one never; no header read or refused (no listener proxy_*)"
out=$(python3 "$PC" "$U" --from 127.0.0.6 --header v2 --client 10.9.9.9 --path '/prpc/v1/Health?json' --post '{}' | sed -n 2p)
like "$out" '^(closed|reset.*|send failed.*)$' "...nor Health behind a v2 header: closed ($out)"
! grep -q '10\.9\.9\.9' "$T/U.log"
ok $? "...and the address the v2 header named appears nowhere in the agent's log"
haproxy_stop HG
done_testing
