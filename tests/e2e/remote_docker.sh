#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Probes through a remote Docker (issue 44): a docker_host that is neither a
# unix socket nor loopback reports its containers' addresses on another
# host, so a probed container is an entry that says so, and nothing is
# probed (docs/design.md §4 "Probes"). docker_host_is_local and
# probe_prepare's remote flag are unit-tested alone; this is the wiring
# between them in agent/source.c, which no unit test reaches: with it
# broken, the probe below would pass and the app be served healthy. The
# flag is Docker's: a nerdctl app with the same DOCKER_HOST in its
# environment is probed. In private mount and network namespaces: the
# Docker stand-in (tests/fakes/docker_fake.py) listens on 192.0.2.10 and
# the app's container "is" 192.0.2.20 (TEST-NET-1, on this namespace's
# loopback only), where a web server would answer the probe 200; the
# nerdctl stand-in's container is 10.4.0.5, as in probes.sh.
cd "$(dirname "$0")/../.." || exit 1
. tests/lib/tap.sh
if [ -z "${HEALTHD_REMOTE_NS:-}" ]; then
	[ "$(id -u)" = 0 ] || skip_all "needs root for private namespaces"
	command -v unshare >/dev/null || skip_all "unshare is not installed"
	command -v ip >/dev/null || skip_all "ip is not installed (iproute2)"
	HEALTHD_REMOTE_NS=1 exec unshare --mount --net --propagation private "$0" "$@"
fi
B=${HEALTHD_BUILD:-build}
BIN=$B/dstack-healthd
[ -x "$BIN" ] || { echo "not ok 1 - $BIN is not built"; echo "1..1"; exit 1; }
command -v python3 >/dev/null || skip_all "python3 is not installed"
. tests/lib/scratch.sh

ip link set lo up && ip addr add 192.0.2.10/32 dev lo && ip addr add 192.0.2.20/32 dev lo &&
	ip addr add 10.4.0.5/32 dev lo
ok $? "a network namespace of its own: 192.0.2.10, 192.0.2.20 and 10.4.0.5 on its loopback"

# A web server where each container's address is, answering the probe 200
# and logging every request.
mkdir -p "$T/www" && : >"$T/www/healthz"
web() { # web IP NAME
	python3 -u -m http.server 18080 --bind "$1" --directory "$T/www" >"$T/$2.log" 2>&1 &
	PIDS+=($!)
	wait_for 30 grep -q 'Serving HTTP' "$T/$2.log"
}
web 192.0.2.20 web-docker && web 10.4.0.5 web-nerdctl
ok $? "a web server on 192.0.2.20:18080 and one on 10.4.0.5:18080"
is "$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 http://192.0.2.20:18080/healthz)" 200 \
	"the docker container's address answers the probe's path 200"
: >"$T/web-docker.log"

# The Docker stand-in: one running container of project demo, probed at
# http://:18080/healthz, on a network where it is 192.0.2.20.
ID=5a1de0c0a3e34b1d9c2f7e6b8a4d3c2b1a0f9e8d7c6b5a4f3e2d1c0b9a8f7e6d
LABELS='{"com.docker.compose.project":"demo","com.docker.compose.service":"web","dstack.healthd.probe":"http://:18080/healthz","dstack.healthd.probe.interval":"1s","dstack.healthd.probe.retries":"1"}'
NETS='{"demo_default":{"NetworkID":"3f1c2b","IPAddress":"192.0.2.20"}}'
LIST='[{"Id":"'$ID'","Names":["/demo-web-1"],"Labels":'$LABELS',"State":"running","HostConfig":{"NetworkMode":"demo_default"},"NetworkSettings":{"Networks":'$NETS'}}]'
STARTED=$(date -u -d @$(($(date +%s) - 60)) +%Y-%m-%dT%H:%M:%SZ)
INSPECT='{"Id":"'$ID'","Name":"/demo-web-1","State":{"Status":"running","Running":true,"Paused":false,"StartedAt":"'$STARTED'"},"Config":{"Labels":'$LABELS'},"HostConfig":{"NetworkMode":"demo_default"},"NetworkSettings":{"IPAddress":"","Networks":'$NETS'}}'
python3 tests/fakes/docker_fake.py --listen tcp:192.0.2.10:2375 --log "$T/docker.log" \
	"/_ping=file:tests/fakes/docker/ping-1.52.http" \
	"/v1\.52/containers/json\?.*=status:200:$LIST" \
	"/v1\.52/containers/$ID/json=status:200:$INSPECT" "/v1\.52/events.*=hang" &
PIDS+=($!)
wait_for 30 python3 -c 'import socket; socket.create_connection(("192.0.2.10", 2375), 5)'
ok $? "a Docker stand-in on tcp://192.0.2.10:2375"

printf '%s\n' '{"manifest_version":"3","name":"t","runner":"docker-compose","requirements":{"health_check":true}}' \
	>"$T/docker.json"
printf '{"project":"demo","namespace":"","snapshotter":""}\n' >"$T/rt.json"
query() { curl -s --max-time 10 --unix-socket "$T/$1.sock" -X POST 'http://x/prpc/v1/Health?json' -d '{}'; }
query_is() { [ "$(query "$1")" = "$2" ]; }

REMOTE='{"healthy":false,"unhealthy":[{"name":"demo-web-1","status":"probe: Docker is not on this machine (docker_host is neither a unix socket nor loopback): its container addresses are another host'"'"'s"}],"error":""}'
"$BIN" --listen "unix:$T/d.sock" --compose-file "$T/docker.json" --runtime-file "$T/rt.json" \
	--docker-host tcp://192.0.2.10:2375 --interval 0.5 --refresh-timeout 10 \
	--control-socket "$T/ctl-d.sock" 2>"$T/agent-docker.log" &
PIDS+=($!)
wait_for 30 query_is d "$REMOTE"
is "$(query d)" "$REMOTE" \
	"docker_host tcp://192.0.2.10 (not loopback): the probed container is an entry saying why, not probed"
# Refreshes go on (each one would start the probe, were it wired): a few
# more, and still no request reached the container's address.
inspects() { grep -c "/containers/$ID/json" "$T/docker.log"; }
n=$(inspects)
wait_for 30 eval '[ "$(inspects)" -ge $((n + 4)) ]'
ok $? "four refreshes more have listed and inspected the container"
is "$(grep -c 'GET /healthz' "$T/web-docker.log")" 0 \
	"nothing connected to the address the remote Docker reported"

# nerdctl with the same DOCKER_HOST in the environment (a machine-wide
# setting): the remote rule is Docker's, the nerdctl stand-in's container
# at 10.4.0.5 is probed and passes.
mkdir -p "$T/nscen"
printf '%s\n' probe-web.json >"$T/nscen/containers"
printf '%s\n' '{"manifest_version":"3","name":"t","runner":"nerdctl-compose","requirements":{"health_check":true}}' \
	>"$T/nerdctl.json"
printf '{"project":"demo","namespace":"dstack","snapshotter":""}\n' >"$T/n-rt.json"
DOCKER_HOST=tcp://192.0.2.10:2375 NERDCTL_FAKE_DIR="$T/nscen" "$BIN" --listen "unix:$T/n.sock" \
	--compose-file "$T/nerdctl.json" --runtime-file "$T/n-rt.json" \
	--nerdctl "$PWD/tests/fakes/nerdctl" --interval 1 --control-socket "" \
	2>"$T/agent-nerdctl.log" &
PIDS+=($!)
OK='{"healthy":true,"unhealthy":[],"error":""}'
wait_for 40 query_is n "$OK"
is "$(query n)" "$OK" "nerdctl with DOCKER_HOST=tcp://192.0.2.10 set: its container is probed and passes"
ok $(grep -q 'GET /healthz' "$T/web-nerdctl.log"; echo $?) "the probe reached 10.4.0.5, the address nerdctl printed"

ok $(! grep -E 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$T"/agent-*.log; echo $?) "no sanitizer report"
done_testing
