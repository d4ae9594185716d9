#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# docker_list over TLS (DOCKER_TLS_VERIFY=1, DOCKER_CERT_PATH with ca.pem,
# cert.pem, key.pem) to the scripted Docker peer behind python's ssl, with a
# CA made here by openssl: a good chain works; a wrong CA, a name mismatch, a
# missing client certificate and a peer that never completes the handshake
# each fail with a clear error. Then the real dockerd with --tlsverify on
# loopback TCP, addressed by IP: a certificate with that IP as an iPAddress
# SAN is accepted, a wrong IP and a DNS-only certificate are refused, as the
# docker CLI does.
set -u
cd "$(dirname "$0")/../.."
. tests/lib/tap.sh
B=${HEALTHD_BUILD:-build}
LIST=$B/tests/helpers/docker_list
FAKE=tests/fakes/docker_fake.py
R=tests/fakes/docker
command -v python3 >/dev/null || skip_all "python3 is not installed"
command -v openssl >/dev/null || skip_all "openssl is not installed"
[ -x "$LIST" ] || { echo "not ok 1 - $LIST is not built"; echo "1..1"; exit 1; }

. tests/lib/scratch.sh
. tests/lib/dockerd.sh
# The fakes and the helpers in PIDS are killed by scratch.sh; dockerd has its
# own orderly stop.
scratch_more() { dockerd_stop; }

# ca NAME: a self-signed CA in $T/NAME-ca.pem / $T/NAME-ca-key.pem.
ca() {
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
		-subj "/CN=$1 test CA" -keyout "$T/$1-ca-key.pem" -out "$T/$1-ca.pem" 2>/dev/null
}
# leaf NAME CN EXT: a key and a certificate signed by the "good" CA.
leaf() {
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=$2" \
		-keyout "$T/$1-key.pem" -out "$T/$1.csr" 2>/dev/null &&
		printf '%s\n' "$3" >"$T/$1.ext" &&
		openssl x509 -req -in "$T/$1.csr" -CA "$T/good-ca.pem" -CAkey "$T/good-ca-key.pem" \
			-CAcreateserial -days 2 -extfile "$T/$1.ext" -out "$T/$1.pem" 2>/dev/null
}
ca good && ca other &&
	leaf server localhost "subjectAltName=DNS:localhost
extendedKeyUsage=serverAuth" &&
	leaf client client "extendedKeyUsage=clientAuth"
ok $? "made a CA, a server and a client certificate"

# Cert folders as the docker CLI reads them.
mkdir -p "$T/good" "$T/wrongca" "$T/nocert" "$T/empty"
cp "$T/good-ca.pem" "$T/good/ca.pem"
cp "$T/client.pem" "$T/good/cert.pem"
cp "$T/client-key.pem" "$T/good/key.pem"
cp "$T/good"/* "$T/wrongca/" && cp "$T/other-ca.pem" "$T/wrongca/ca.pem"
cp "$T/good-ca.pem" "$T/nocert/ca.pem"

# At API 1.52 the stopped db and the running but unhealthy worker are
# inspected (the list's health is not the last word on either): each gets
# its own answer.
WEB=f897beb9f2f72abe70da3e5bb2a41f499053b573037353b36e598027ac26dcd3
python3 "$FAKE" --listen tcp:127.0.0.1:0 --port-file "$T/port" \
	--tls "$T/server.pem" "$T/server-key.pem" --client-ca "$T/good-ca.pem" \
	"/_ping=file:$R/ping-1.52.http" "/v1\.52/containers/json\?.*=file:$R/list-1.52.http" \
	"/v1\.52/containers/bf941dbe9c15[0-9a-f]*/json=file:$R/inspect-worker.http" \
	"/v1\.52/containers/[0-9a-f]*/json=file:$R/inspect-db.http" &
PIDS+=($!)
wait_for 30 test -s "$T/port"
PORT=$(cat "$T/port")
H=tcp://localhost:$PORT

tls() { # tls CERTDIR ARGS...: docker_list with TLS verification on
	local dir=$1
	shift
	DOCKER_TLS_VERIFY=1 DOCKER_CERT_PATH=$dir "$LIST" "$@"
}
is "$(tls "$T/good" "$H" demo 5000 | sort)" \
	"demo-cache-1 state=running running=1 paused=0 health=none
demo-db-1 state=exited running=0 paused=0 health=unhealthy
demo-web-1 state=running running=1 paused=0 health=healthy
demo-worker-1 state=running running=1 paused=0 health=unhealthy" \
	"TLS with the right CA and a client certificate lists the project"
is "$(tls "$T/good" --check "$H")" "ok" "check: the cert folder loads"
is "$(tls "$T/wrongca" "$H" demo 5000)" \
	"error: cannot connect to $H: TLS handshake: server certificate not trusted: The certificate is not correctly signed by the trusted CA" \
	"a server not signed by ca.pem is refused"
like "$(tls "$T/good" "tcp://127.0.0.1:$PORT" demo 5000)" \
	"^error: cannot connect to tcp://127.0.0.1:$PORT: TLS handshake: server certificate not trusted: .*(CN|Common Name).*match" \
	"a certificate for another name is refused"
# Under TLS 1.3 (mbedtls 3.6) the client's handshake is over before the
# server has checked its certificate: the refusal meets the first request,
# as it is written or as its answer is read.
like "$(tls "$T/nocert" "$H" demo 5000)" \
	"^error: (cannot connect to $H: TLS handshake|GET /_ping: (sending the request|reading the response)): " \
	"without a client certificate the server hangs up, and we say where"
is "$(tls "$T/empty" "$H" demo 5000)" "error: cannot read $T/empty/ca.pem: No such file or directory" \
	"no ca.pem"
is "$(tls "$T/empty" --check "$H")" "error: cannot read $T/empty/ca.pem: No such file or directory" \
	"check: no ca.pem stops start-up"
echo "not a certificate" >"$T/empty/ca.pem"
like "$(tls "$T/empty" --check "$H")" "^error: $T/empty/ca.pem: .*X509" "check: a ca.pem that is not PEM"
is "$(tls "$T/good" --check unix:///var/run/docker.sock)" \
	'error: invalid Docker host "unix:///var/run/docker.sock": TLS needs a tcp:// host' \
	"check: TLS with a unix socket"

# A peer that accepts and never answers the ClientHello.
python3 "$FAKE" --listen tcp:127.0.0.1:0 --port-file "$T/port2" "/.*=hang" &
PIDS+=($!)
wait_for 30 test -s "$T/port2"
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
t0=$(now_ms)
out=$(tls "$T/good" "tcp://localhost:$(cat "$T/port2")" demo 1000)
dt=$(( $(now_ms) - t0 ))
is "$out" "error: cannot connect to tcp://localhost:$(cat "$T/port2"): timed out after 1 s" \
	"a handshake that never completes: timed out"
# The peer never answers: without the deadline this would not end at all.
ok $(( dt >= 950 && dt < 10000 ? 0 : 1 )) "the deadline held during the handshake (${dt} ms)"

# The TLS 1.2 floor (the docker CLI's): a server that offers only TLS 1.0 or
# 1.1 is refused at the handshake, whatever mbedtls would still speak (2.28
# has both compiled in). openssl s_server without the system's config, at
# security level 0, so that it does offer them; the same server at TLS 1.2
# shows that the refusal is the version's: that handshake completes and only
# the answer (s_server's status page, not Docker's) is refused.
# old_tls VERSION: the s_server offering only VERSION, its port in OLD_PORT.
old_tls() {
	rm -f "$T/old-$1.out"
	OPENSSL_CONF=/dev/null openssl s_server -accept 127.0.0.1:0 -cert "$T/server.pem" \
		-key "$T/server-key.pem" "-$1" -cipher 'DEFAULT:@SECLEVEL=0' -www \
		>"$T/old-$1.out" 2>&1 </dev/null &
	PIDS+=($!)
	wait_for 30 grep -q '^ACCEPT ' "$T/old-$1.out"
	OLD_PORT=$(sed -n 's/^ACCEPT .*:\([0-9]*\)$/\1/p' "$T/old-$1.out")
}
for v in tls1 tls1_1; do
	old_tls "$v"
	like "$(tls "$T/good" "tcp://localhost:$OLD_PORT" demo 5000)" \
		"^error: cannot connect to tcp://localhost:$OLD_PORT: TLS handshake: " \
		"a server that offers only $v is refused at the handshake"
done
old_tls tls1_2
out=$(tls "$T/good" "tcp://localhost:$OLD_PORT" demo 5000)
like "$out" "^error: " "the same server at TLS 1.2: an error..."
ok $(! grep -q 'TLS handshake' <<<"$out"; echo $?) \
	"...but not the handshake's: the refusals above are the version's ($out)"

# An IP-addressed peer whose certificate carries that IP as an iPAddress SAN
# (what dockerd's TLS guide makes), without dockerd: accepted for that IP,
# refused for a name. mbedtls 3.6.3 and later refuse any verifying handshake
# whose name was never set: this is where the NULL name for an IP host shows.
leaf ipsan dockerd "subjectAltName=IP:127.0.0.1
extendedKeyUsage=serverAuth"
ok $? "made an IP-only server certificate"
python3 "$FAKE" --listen tcp:127.0.0.1:0 --port-file "$T/port3" \
	--tls "$T/ipsan.pem" "$T/ipsan-key.pem" --client-ca "$T/good-ca.pem" \
	"/_ping=file:$R/ping-1.52.http" "/v1\.52/containers/json\?.*=file:$R/list-1.52.http" \
	"/v1\.52/containers/[0-9a-f]*/json=file:$R/inspect-db.http" &
PIDS+=($!)
wait_for 20 test -s "$T/port3"
like "$(tls "$T/good" "tcp://127.0.0.1:$(cat "$T/port3")" demo 5000)" "^demo-web-1 state=" \
	"host 127.0.0.1, certificate with IP:127.0.0.1: accepted"
like "$(tls "$T/good" "tcp://localhost:$(cat "$T/port3")" demo 5000)" \
	"^error: cannot connect to tcp://localhost:$(cat "$T/port3"): TLS handshake: server certificate not trusted: .*(CN|Common Name).*match" \
	"host localhost, certificate with IP:127.0.0.1 only: refused"

# --- The real dockerd, --tlsverify on 127.0.0.1 and 127.0.0.2 ----------------
if [ "$(id -u)" != 0 ] || ! command -v dockerd >/dev/null || ! command -v curl >/dev/null; then
	diag "skipping the real dockerd: needs root, dockerd and curl"
	done_testing
	exit
fi
# The IP-only certificate is what dockerd's TLS guide makes (IP:... in the
# SAN); the DNS-only one spells the IP as a DNS name and a CN, which a client
# that compared names as text would take for a match.
leaf iponly dockerd "subjectAltName=IP:127.0.0.1
extendedKeyUsage=serverAuth" &&
	leaf dnsonly 127.0.0.1 "subjectAltName=DNS:127.0.0.1,DNS:localhost
extendedKeyUsage=serverAuth"
ok $? "made an IP-only and a DNS-only server certificate"
DH_T=$(mktemp -d /tmp/dh.XXXXXX)
export DOCKER_HOST="unix://$DH_T/docker.sock" DOCKER_CONFIG="$DH_T/cli"
unset DOCKER_CONTEXT DOCKER_TLS_VERIFY DOCKER_CERT_PATH
# A port free on both addresses (another test may hold it by the time
# dockerd binds it: then dockerd_tls tries another).
free_port() {
	python3 -c 'import socket
a = socket.socket(); a.bind(("127.0.0.1", 0)); p = a.getsockname()[1]
b = socket.socket(); b.bind(("127.0.0.2", p)); print(p)'
}
listening() {
	python3 -c 'import socket, sys
for h in ("127.0.0.1", "127.0.0.2"):
    socket.create_connection((h, int(sys.argv[1])), timeout=1).close()' "$DP"
}
dockerd_tls() { # dockerd_tls CERT: (re)start dockerd serving CERT over TLS on $DP
	local try
	for try in 1 2 3; do
		dockerd_halt
		DP=$(free_port) || continue
		DH_DOCKERD_ARGS="--host tcp://127.0.0.1:$DP --host tcp://127.0.0.2:$DP --tlsverify
			--tlscacert $T/good-ca.pem --tlscert $T/$1.pem --tlskey $T/$1-key.pem"
		dockerd_launch && wait_for 30 listening && return 0
		diag "dockerd did not listen on port $DP (try $try)"
	done
	return 1
}
NOTRUST="TLS handshake: server certificate not trusted: .*(CN|Common Name).*match"
dockerd_tls iponly
ok $? "dockerd with --tlsverify and the IP-only certificate on 127.0.0.1 and 127.0.0.2"
is "$(tls "$T/good" "tcp://127.0.0.1:$DP" demo 5000)" "" \
	"dockerd: host 127.0.0.1, certificate with IP:127.0.0.1: accepted"
is "$(tls "$T/good" "tcp://[::ffff:127.0.0.1]:$DP" demo 5000)" "" \
	"dockerd: host ::ffff:127.0.0.1 is the same IP: accepted"
like "$(tls "$T/good" "tcp://127.0.0.2:$DP" demo 5000)" \
	"^error: cannot connect to tcp://127.0.0.2:$DP: $NOTRUST" \
	"dockerd: host 127.0.0.2, certificate with IP:127.0.0.1: refused"
like "$(tls "$T/good" "tcp://localhost:$DP" demo 5000)" \
	"^error: cannot connect to tcp://localhost:$DP: $NOTRUST" \
	"dockerd: host localhost, certificate with no DNS name: refused"
dockerd_tls dnsonly
ok $? "dockerd restarted with the DNS-only certificate"
like "$(tls "$T/good" "tcp://127.0.0.1:$DP" demo 5000)" \
	"^error: cannot connect to tcp://127.0.0.1:$DP: $NOTRUST" \
	"dockerd: host 127.0.0.1, certificate with DNS:127.0.0.1 and CN=127.0.0.1 only: refused"
is "$(tls "$T/good" "tcp://localhost:$DP" demo 5000)" "" \
	"dockerd: host localhost, certificate with DNS:localhost: accepted"
done_testing
