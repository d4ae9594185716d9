#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The agent's own probes (issue 27) against a real dockerd: an image with no
# shell (one static C server, tests/fakes/probe_server.c) on a Compose
# network, its answer flipped by a file it reads (200, 500, refused, slow,
# and the hostile ones), a TCP probe, start_period, retries, a label aiming
# elsewhere, a container that keeps restarting; then the nerdctl path with
# its stand-in. Everything runs in a network namespace of its own (unshare
# -n): the containers' addresses are on a bridge that exists only there.
# tests/run: timeout 900
cd "$(dirname "$0")/../.." || exit 1
if [ -z "${HEALTHD_PROBES_NETNS:-}" ]; then
	if [ "$(id -u)" != 0 ] || ! command -v unshare >/dev/null; then
		echo "1..0 # SKIP needs root and unshare"
		exit 0
	fi
	HEALTHD_PROBES_NETNS=1 exec unshare --net -- bash "$0" "$@"
fi
ip link set lo up
. tests/lib/tap.sh
. tests/lib/dockerd.sh

command -v cc >/dev/null || skip_all "cc is not installed"
dockerd_start
diag "dockerd $("$DH_DOCKER" version -f '{{.Server.Version}} (API {{.Server.APIVersion}})')"

# --- the image: one static binary, no shell ---------------------------------
mkdir -p "$DH_T/img"
cc -static -O2 -o "$DH_T/img/probe_server" tests/fakes/probe_server.c 2>"$DH_T/cc.log"
ok $? "the probe server builds static" || sed 's/^/# /' "$DH_T/cc.log"
tar -C "$DH_T/img" -c . | "$DH_DOCKER" import --change 'ENTRYPOINT ["/probe_server"]' - \
	probe-srv:1 >/dev/null
ok $? "image probe-srv:1: the server alone"
ok "$( ! "$DH_DOCKER" run --rm --network none --entrypoint /bin/sh probe-srv:1 -c true \
	>/dev/null 2>&1; echo $?)" "the image has no shell"

for s in web db late crash rpc; do mkdir -p "$DH_T/ctl-$s" && echo 200 >"$DH_T/ctl-$s/mode"; done
echo grpc-serving >"$DH_T/ctl-rpc/mode"
echo refuse >"$DH_T/ctl-late/mode"
echo exit >"$DH_T/ctl-crash/mode"
cat >"$DH_T/probes.yml" <<EOF
version: "2.4"
services:
  web:
    image: probe-srv:1
    command: ["8080"]
    volumes: ["$DH_T/ctl-web:/ctl"]
    labels:
      dstack.healthd.probe: "http://:8080/healthz?x=1"
      dstack.healthd.probe.interval: "2s"
      dstack.healthd.probe.timeout: "1s"
      dstack.healthd.probe.retries: "3"
  db:
    image: probe-srv:1
    command: ["5432"]
    volumes: ["$DH_T/ctl-db:/ctl"]
    labels:
      dstack.healthd.probe: "tcp://:5432"
      dstack.healthd.probe.interval: "1s"
      dstack.healthd.probe.retries: "1"
  rpc:
    image: probe-srv:1
    command: ["50051"]
    volumes: ["$DH_T/ctl-rpc:/ctl"]
    labels:
      dstack.healthd.probe: "grpc://:50051/shop.Orders"
      dstack.healthd.probe.interval: "1s"
      dstack.healthd.probe.retries: "1"
  evil:
    image: probe-srv:1
    command: ["80"]
    labels:
      dstack.healthd.probe: "http://169.254.169.254:80/latest/meta-data"
EOF
timeout 120 docker-compose --no-ansi -p pr -f "$DH_T/probes.yml" up -d >"$DH_T/up.log" 2>&1
ok $? "docker-compose up: web (HTTP), db (TCP), evil (a label aiming elsewhere)" ||
	sed 's/^/# /' "$DH_T/up.log"
dh_expect_state 30 pr_web_1 "running -"
ip=$("$DH_DOCKER" inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' pr_web_1)
like "$ip" '^[0-9.]+$' "web has an address on the project's network ($ip)"

# Where the evil label aims: an address on this namespace's loopback with a
# listener that writes a line per connection, so that "never connected" is
# shown by the peer, not by what the agent logs (issue 34).
ip addr add 169.254.169.254/32 dev lo
python3 -c '
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("169.254.169.254", 80)); s.listen(64)
with open(sys.argv[1], "a", buffering=1) as log:
    while True:
        c, a = s.accept(); log.write("accepted %s\n" % a[0]); c.close()
' "$DH_T/meta.log" &
dh_track $!
wait_for 20 python3 -c 'import socket; socket.create_connection(("169.254.169.254", 80), 2)'
ok $? "a listener on 169.254.169.254:80 (this namespace's loopback)"
wait_for 10 test -s "$DH_T/meta.log"
is "$(wc -l <"$DH_T/meta.log")" 1 "it counts connections: the test's own is there"
: >"$DH_T/meta.log"

healthd_runtime "$DH_T/rt.json" pr
CTL="$DH_T/ctl.sock"
# Services are removed for good below (docker rm -f): --service-gap 1 lets
# each gap (issue 29, tests/e2e/stopping.sh) end within a refresh or two.
healthd_start a "$DH_T/rt.json" --interval 1 --control-socket "$CTL" \
	--metrics-listen "" --log-level debug --service-gap 1
status_json() { "$HEALTHD_BIN" status --json --control-socket "$CTL" 2>/dev/null; }
probe_of() { # probe_of SERVICE FIELD
	status_json | dh_json "[c['agent_probe']['$2'] for c in d['containers'] if c['service'] == '$1'][0]"
}
probe_is() { [ "$(probe_of "$1" "$2")" = "$3" ]; }

want=$(healthd_expect false pr_evil_1 "label dstack.healthd.probe: names a host; a probe goes only to the container's own address (write http://:PORT/PATH)")
wait_for 30 healthd_query_is a "$want"
is "$(healthd_query a)" "$want" "a label aiming elsewhere is an entry with a clear status; web and db pass"
is "$(probe_of evil refused)" "label dstack.healthd.probe: names a host; a probe goes only to the container's own address (write http://:PORT/PATH)" \
	"status: the refused label, and no target for it"
is "$(probe_of web target)" "http://$ip:8080/healthz?x=1" "status: web's target is its own address"
ok "$( ! grep -q '169.254' "$DH_T/hd-a.log"; echo $?)" "the agent never names the address the label aimed at"
# Three more refreshes with evil judged: not one connection reached it.
refreshes_a() { grep -c 'refresh (' "$DH_T/hd-a.log"; }
more_refreshes_a() { [ "$(refreshes_a)" -ge "$1" ]; }
wait_for 30 more_refreshes_a $(($(refreshes_a) + 3))
is "$(cat "$DH_T/meta.log")" "" "no connection ever reached 169.254.169.254:80 (its listener saw none)"

"$DH_DOCKER" rm -f pr_evil_1 >/dev/null
wait_for 30 healthd_query_is a "$HEALTHD_OK"
is "$(healthd_query a)" "$HEALTHD_OK" "HTTP and TCP probes pass: healthy"
is "$(probe_of db target)" "tcp://$("$DH_DOCKER" inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' pr_db_1):5432" \
	"status: db's TCP target"

# --- gRPC (issue 34): the same shell-less image answering Health/Check -------
is "$(probe_of rpc target)" "grpc://$("$DH_DOCKER" inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' pr_rpc_1):50051/shop.Orders" \
	"status: rpc's gRPC target, with its service"
is "$(probe_of rpc last_result)" "pass" "a container gated by a grpc:// probe passes while SERVING"
echo grpc-notserving >"$DH_T/ctl-rpc/mode"
want=$(healthd_expect false pr_rpc_1 "probe unhealthy (gRPC health status NOT_SERVING)")
wait_for 30 healthd_query_is a "$want"
is "$(healthd_query a)" "$want" "NOT_SERVING: the container is unhealthy, in the agent's words"
echo grpc-serving >"$DH_T/ctl-rpc/mode"
wait_for 30 healthd_query_is a "$HEALTHD_OK"
is "$(healthd_query a)" "$HEALTHD_OK" "SERVING again: healthy"

# --- flips: 500, refused, slow; retries counted ----------------------------
unhealthy_web() { healthd_expect false pr_web_1 "$1"; }
# Each /status is one refresh: web's probe record and the verdict published
# with it. Every one is kept from the flip on until one is unhealthy. web's
# interval (2 s) is twice the refresh's, so that each streak below retries
# is seen by a refresh, however loaded the machine.
web_snap() {
	status_json | dh_json "[' '.join([str(c['agent_probe']['failing_streak']), 'true' if d['verdict']['healthy'] else 'false', str(c['agent_probe']['last_time']), str(c['agent_probe']['last_change'])]) for c in d['containers'] if c['service'] == 'web'][0]"
}
snap_unhealthy() {
	local s
	s=$(web_snap)
	printf '%s\n' "$s" >>"$DH_T/snaps"
	case $s in [0-9]*" false "*) return 0 ;; esac
	return 1
}
# A second agent whose timer (60 s) is far longer than web's interval (2 s):
# only the prober's kick can show it web's flip in time (issue 34; the first
# agent's 1 s timer would show it anyway).
healthd_start k "$DH_T/rt.json" --interval 60 --control-socket "" --metrics-listen "" \
	--service-gap 1
K_START=$(dh_now_ms)
wait_for 40 healthd_query_is k "$HEALTHD_OK"
is "$(healthd_query k)" "$HEALTHD_OK" "agent k (--interval 60): healthy"
echo 500 >"$DH_T/ctl-web/mode"
: >"$DH_T/snaps"
wait_for 40 snap_unhealthy
ok $? "HTTP 500: a refresh shows web unhealthy" || tail -n 5 "$DH_T/snaps" | sed 's/^/# /'
n=$(awk '$1 == 2 && $2 == "true"' "$DH_T/snaps" | wc -l)
ok "$([ "$n" -ge 1 ]; echo $?)" \
	"retries 3: after 2 failures in a row /status shows the streak, the verdict still healthy (seen in $n reads)"
is "$(awk '$1 < 3 && $2 == "false"' "$DH_T/snaps" | head -n 3)" "" \
	"never unhealthy below 3 failures in a row"
first=$(awk '$2 == "false" { print; exit }' "$DH_T/snaps")
# The third failure kicks a refresh at once, so the first unhealthy one
# shows a streak of 3 and the change at that very probe (last_change =
# last_time); one a whole interval late shows more, and the change at an
# earlier probe.
if [ "${first%% *}" = 3 ]; then
	ok "$(set -- $first; [ "$3" = "$4" ]; echo $?)" \
		"unhealthy at the third failure: its last change is that probe ($first)"
else
	ok "$(set -- $first; [ "$1" -gt 3 ] && [ "$3" != "$4" ]; echo $?)" \
		"unhealthy at the third failure, seen late by a refresh ($first)"
fi
wait_for 30 healthd_query_is a "$(unhealthy_web 'probe unhealthy (HTTP status 500)')"
is "$(healthd_query a)" "$(unhealthy_web 'probe unhealthy (HTTP status 500)')" \
	"HTTP 500: unhealthy after retries, in the agent's words"
k_unhealthy() { healthd_query_like k '"healthy":false'; }
wait_for 20 k_unhealthy
k_ms=$(($(dh_now_ms) - K_START))
ok "$(k_unhealthy && [ "$k_ms" -lt 55000 ]; echo $?)" \
	"agent k serves web's flip ${k_ms} ms after its start, before its 60 s timer: the probe's kick"
healthd_stop k
out=$(healthd_query a)
ok "$(printf '%s' "$out" | grep -Eq 'SECRET|X-Secret|10\.9\.9\.9|'"${ip//./\\.}"; echo $(( ! $? )))" \
	"the public answer carries no body, header or address of the app's"
is "$(probe_of web last_reason)" "HTTP status 500" "status: the last result and its reason"

echo refuse >"$DH_T/ctl-web/mode"
wait_for 30 healthd_query_is a "$(unhealthy_web 'probe unhealthy (connection refused)')"
is "$(healthd_query a)" "$(unhealthy_web 'probe unhealthy (connection refused)')" "refused"

echo slow >"$DH_T/ctl-web/mode"
wait_for 30 healthd_query_is a "$(unhealthy_web 'probe unhealthy (timed out)')"
is "$(healthd_query a)" "$(unhealthy_web 'probe unhealthy (timed out)')" "slow past the timeout"

echo 200 >"$DH_T/ctl-web/mode"
wait_for 30 healthd_query_is a "$HEALTHD_OK"
is "$(healthd_query a)" "$HEALTHD_OK" "200 again: healthy after success_threshold (1)"
echo 302 >"$DH_T/ctl-web/mode"
sleep_until_runs() { # the next few probes have run
	local want=$(( $(probe_of web runs) + $1 ))
	wait_for 30 probe_runs_ge "$want"
}
probe_runs_ge() { [ "$(probe_of web runs)" -ge "$1" ] 2>/dev/null; }
sleep_until_runs 3
is "$(healthd_query a)" "$HEALTHD_OK" "a redirect is a pass (not followed)"

echo refuse >"$DH_T/ctl-db/mode"
wait_for 30 healthd_query_is a "$(healthd_expect false pr_db_1 'probe unhealthy (connection refused)')"
is "$(healthd_query a)" "$(healthd_expect false pr_db_1 'probe unhealthy (connection refused)')" \
	"TCP: a refused connect is a failure"
echo 200 >"$DH_T/ctl-db/mode"
wait_for 30 healthd_query_is a "$HEALTHD_OK"

# --- hostile answers: bounded in bytes and time -----------------------------
rss() { awk '/^RssAnon:/ {print $2}' "/proc/$HD_PID_a/status"; }
for m in "header:probe unhealthy (answer head too large)" \
	"trickle:probe unhealthy (timed out)" "reset:probe unhealthy (connection reset)"; do
	echo "${m%%:*}" >"$DH_T/ctl-web/mode"
	wait_for 40 healthd_query_is a "$(unhealthy_web "${m#*:}")"
	is "$(healthd_query a)" "$(unhealthy_web "${m#*:}")" "hostile ${m%%:*}: ${m#*:}"
done
echo body >"$DH_T/ctl-web/mode"
wait_for 30 healthd_query_is a "$HEALTHD_OK"
sleep_until_runs 5
is "$(healthd_query a)" "$HEALTHD_OK" "a 1 GiB body behind a 200: a pass after 10 KiB of it"
anon=$(rss)
# A body kept whole would be 1 GiB; ASan's shadow and quarantine alone take
# tens of MiB.
limit=16384
# A sanitizer's allocator and shadow memory: room for them.
case $(build_kind) in address | thread) limit=262144 ;; esac
ok "$([ "${anon:-9999999}" -lt "$limit" ]; echo $?)" \
	"the agent's RssAnon stays bounded meanwhile (${anon} kB < $limit kB)"
echo 200 >"$DH_T/ctl-web/mode"
wait_for 30 healthd_query_is a "$HEALTHD_OK"

# --- start_period; a container that keeps restarting -----------------------
cat >"$DH_T/late.yml" <<EOF
version: "2.4"
services:
  late:
    image: probe-srv:1
    command: ["8081"]
    volumes: ["$DH_T/ctl-late:/ctl"]
    labels:
      dstack.healthd.probe: "http://:8081/"
      dstack.healthd.probe.interval: "1s"
      dstack.healthd.probe.retries: "1"
      dstack.healthd.probe.start_period: "25s"
  crash:
    image: probe-srv:1
    command: ["8082"]
    restart: always
    volumes: ["$DH_T/ctl-crash:/ctl"]
    labels:
      dstack.healthd.probe: "http://:8082/"
      dstack.healthd.probe.interval: "1s"
EOF
timeout 120 docker-compose --no-ansi -p pr -f "$DH_T/late.yml" up -d >"$DH_T/up2.log" 2>&1
ok $? "docker-compose up: late (start_period 25s, refusing), crash (restart: always, exits)" ||
	sed 's/^/# /' "$DH_T/up2.log"
late_runs_ge() { [ "$(probe_of late runs)" -ge "$1" ] 2>/dev/null; }
wait_for 30 late_runs_ge 3
started=$("$DH_DOCKER" inspect -f '{{.State.StartedAt}}' pr_late_1)
age=$(( $(date +%s) - $(date -d "$started" +%s) ))
s=$(healthd_query a | dh_json "[e['status'] for e in d['unhealthy'] if e['name'] == 'pr_late_1'][0]")
if [ "$age" -lt 24 ]; then
	is "$s" "probe starting (last probe: connection refused)" \
		"start_period: failures within it are not counted (${age} s in, $(probe_of late runs) probes)"
else
	ok 0 "# SKIP start_period check: the machine took ${age} s to get here"
fi
wait_for 60 healthd_query_like a '"pr_late_1","status":"probe unhealthy \(connection refused\)"'
ok $? "start_period over: unhealthy after retries"
# What the entry says depends on when a refresh saw it: down between two
# starts (restarting, exited), or up for the moment before it exits, when
# its probe has started over and not passed (probe starting). A refresh runs
# right after each of Docker's start and die events, so both are served.
like "$(healthd_query a)" '"name":"pr_crash_1","status":"(restarting|exited|probe starting)[^"]*"' \
	"a container that keeps restarting: an entry, never a pass"
healthy_n=0
for _ in 1 2 3 4 5 6; do
	healthd_query a | grep -q '"pr_crash_1"' || healthy_n=$((healthy_n + 1))
	sleep 0.5
done
is "$healthy_n" 0 "crash: never judged healthy while it restarts"
"$DH_DOCKER" rm -f pr_crash_1 pr_late_1 >/dev/null
wait_for 30 healthd_query_is a "$HEALTHD_OK"
is "$(healthd_query a)" "$HEALTHD_OK" "back to healthy; the agent still answers"

# A reload that keeps the source keeps every probe's record: no flip back to
# "starting" (the verdict does not change), as the failure count is kept.
metric() { curl -s --max-time 3 --unix-socket "$CTL" http://x/metrics | awk -v m="$1" '$1 == m { print $2 }'; }
refreshes() { curl -s --max-time 3 --unix-socket "$CTL" http://x/metrics |
	awk '/^dstack_healthd_refreshes_total/ { n += $2 } END { print n + 0 }'; }
more_refreshes() { [ "$(refreshes)" -ge "$1" ]; }
changes=$(metric dstack_healthd_verdict_changes_total)
"$HEALTHD_BIN" reload --control-socket "$CTL" >/dev/null 2>&1
ok $? "dstack-healthd reload"
wait_for 30 more_refreshes $(( $(refreshes) + 3 ))
is "$(metric dstack_healthd_verdict_changes_total)" "$changes" \
	"a reload keeps the probes' records: the verdict never went back to starting"
is "$(healthd_query a)" "$HEALTHD_OK" "healthy after the reload"

# --- operator's view and metrics -------------------------------------------
out=$("$HEALTHD_BIN" status --control-socket "$CTL")
like "$out" "agent probe http://$ip:8080/healthz\\?x=1: healthy, last passed \\(HTTP status 200\\)" \
	"dstack-healthd status: target, status, last result"
m=$(curl -s --max-time 3 --unix-socket "$CTL" http://x/metrics)
like "$m" 'dstack_healthd_probes_total\{result="pass"\} [1-9]' "metrics: probes counted by result (pass)"
like "$m" 'dstack_healthd_probes_total\{result="refused"\} [1-9]' "metrics: refused counted"
like "$m" 'dstack_healthd_probes_total\{result="timeout"\} [1-9]' "metrics: timeouts counted"

healthd_stop a
ok "$(healthd_sanitizer_clean >/dev/null; echo $?)" "no sanitizer report"

# --- from a sidecar: the agent takes itself for container pr_agent_1 (its
# /etc/hostname bind-mounted from a folder named by that id, as Docker
# mounts it; runtime/selfid.c), a service on the project's networks default
# and front. It probes only at addresses on networks that container is on:
# "both" at its front address (back's comes first by name), "backonly" is
# an entry, and so is "hostnet", whose loopback is not the sidecar's. ------
cat >"$DH_T/side.yml" <<EOF
version: "2.4"
services:
  agent:
    image: probe-srv:1
    command: ["8090"]
    networks: [default, front]
  both:
    image: probe-srv:1
    command: ["8091"]
    networks: [front, back]
    labels:
      dstack.healthd.probe: "http://:8091/"
      dstack.healthd.probe.interval: "1s"
  backonly:
    image: probe-srv:1
    command: ["8092"]
    networks: [back]
    labels:
      dstack.healthd.probe: "http://:8092/"
  hostnet:
    image: probe-srv:1
    command: ["8093"]
    network_mode: host
    labels:
      dstack.healthd.probe: "http://:8093/"
networks:
  front: {}
  back: {}
EOF
timeout 120 docker-compose --no-ansi -p pr -f "$DH_T/side.yml" up -d >"$DH_T/up3.log" 2>&1
ok $? "docker-compose up: the sidecar's container, both, backonly, hostnet" ||
	sed 's/^/# /' "$DH_T/up3.log"
me=$("$DH_DOCKER" inspect -f '{{.Id}}' pr_agent_1)
mkdir -p "$DH_T/containers/$me" && echo sidecar >"$DH_T/containers/$me/hostname"
cat >"$DH_T/in-container" <<EOF
#!/bin/bash
exec unshare -m -- sh -c 'mount --bind "\$0" /etc/hostname && exec "\$@"' \\
	"$DH_T/containers/$me/hostname" "$HEALTHD_BIN" "\$@"
EOF
chmod +x "$DH_T/in-container"
real_bin=$HEALTHD_BIN
HEALTHD_BIN=$DH_T/in-container healthd_start s "$DH_T/rt.json" --interval 1 \
	--control-socket "$DH_T/ctl-s.sock" --metrics-listen "" --log-level debug
HEALTHD_BIN=$real_bin
side_json() { "$HEALTHD_BIN" status --json --control-socket "$DH_T/ctl-s.sock" 2>/dev/null; }
front=$("$DH_DOCKER" inspect -f '{{(index .NetworkSettings.Networks "pr_front").IPAddress}}' pr_both_1)
want=$(healthd_expect false \
	pr_backonly_1 "probe: the container is on no network the agent's own container is on" \
	pr_hostnet_1 "probe: the container has network_mode host and the agent's own container does not: loopback there is the agent's own")
wait_for 40 healthd_query_is s "$want"
is "$(healthd_query s)" "$want" \
	"sidecar: a service on no network it shares and a host-network one are entries; the rest pass"
is "$(side_json | dh_json "[c['agent_probe']['target'] for c in d['containers'] if c['service'] == 'both'][0]")" \
	"http://$front:8091/" "sidecar: both is probed at its address on front, a network the sidecar is on"
is "$(side_json | dh_json "[c['skipped'] for c in d['containers'] if c['service'] == 'agent'][0]")" \
	"the agent itself" "sidecar: its own container found by its /etc/hostname mount, and skipped"
healthd_stop s
ok "$(healthd_sanitizer_clean >/dev/null; echo $?)" "no sanitizer report (sidecar)"
"$DH_DOCKER" rm -f pr_agent_1 pr_both_1 pr_backonly_1 pr_hostnet_1 >/dev/null

# --- nerdctl: the stand-in prints nerdctl 2.x's inspect; the address it
# gives (10.4.0.5 on unknown-eth0) is made to exist in this namespace ---------
ip addr add 10.4.0.5/32 dev lo
ok $? "10.4.0.5 exists in this network namespace only"
mkdir -p "$DH_T/nctl" "$DH_T/nscen"
echo 200 >"$DH_T/nctl/mode"
"$DH_T/img/probe_server" 18080 "$DH_T/nctl" >/dev/null 2>&1 &
dh_track $!
printf '%s\n' probe-web.json >"$DH_T/nscen/containers"
printf '%s\n' '{"manifest_version":"3","name":"t","runner":"nerdctl-compose","requirements":{"health_check":true}}' \
	>"$DH_T/n-compose.json"
printf '{"project":"demo","namespace":"dstack","snapshotter":""}\n' >"$DH_T/n-rt.json"
NERDCTL_FAKE_DIR="$DH_T/nscen" "$HEALTHD_BIN" --listen "unix:$DH_T/n.sock" \
	--compose-file "$DH_T/n-compose.json" --runtime-file "$DH_T/n-rt.json" \
	--nerdctl "$PWD/tests/fakes/nerdctl" --interval 1 --control-socket "" \
	>"$DH_T/hd-n.log" 2>&1 &
HD_PID_n=$!
dh_track $!
wait_for 30 healthd_query_is n "$HEALTHD_OK"
is "$(healthd_query n)" "$HEALTHD_OK" "nerdctl: the probe reaches the address nerdctl printed and passes"
echo 500 >"$DH_T/nctl/mode"
wait_for 30 healthd_query_is n "$(healthd_expect false web-1 'probe unhealthy (HTTP status 500)')"
is "$(healthd_query n)" "$(healthd_expect false web-1 'probe unhealthy (HTTP status 500)')" \
	"nerdctl: a failing probe is unhealthy"
healthd_stop n
ok "$(healthd_sanitizer_clean >/dev/null; echo $?)" "no sanitizer report (nerdctl)"
done_testing
