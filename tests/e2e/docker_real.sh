#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# docker_list against a real dockerd (Debian's 20.10, API 1.41) started on a
# private socket in its scratch folder: containers with passing, failing and no
# healthchecks, a stopped one, another project, a one-off, and a project name
# that needs URL encoding. Everything started here is stopped on exit.
set -u
cd "$(dirname "$0")/../.."
. tests/lib/tap.sh
B=${HEALTHD_BUILD:-build}
LIST=$B/tests/helpers/docker_list
DOCKERD=/usr/sbin/dockerd
DOCKER_CLI=/usr/bin/docker

[ "$(id -u)" -eq 0 ] || skip_all "needs root to run dockerd"
[ -x "$DOCKERD" ] && [ -x "$DOCKER_CLI" ] || skip_all "docker.io is not installed"
BUSYBOX=$(command -v busybox) || skip_all "busybox-static is not installed"
[ -x "$LIST" ] || { echo "not ok 1 - $LIST is not built"; echo "1..1"; exit 1; }

. tests/lib/scratch.sh
DPID=
scratch_more() {
	if [ -n "$DPID" ]; then
		# Containers first, so that no shim outlives its daemon.
		ids=$(d ps -aq 2>/dev/null)
		[ -z "$ids" ] || d rm -f $ids >/dev/null 2>&1
		kill "$DPID" 2>/dev/null
		for _ in $(seq 200); do kill -0 "$DPID" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$DPID" 2>/dev/null
		reap 10 "$DPID" 2>/dev/null
	fi
	# Whatever dockerd left mounted under its folders.
	grep -o " $T/[^ ]*" /proc/mounts | sort -r | while read -r m; do umount -l "$m"; done
}
d() { "$DOCKER_CLI" -H "unix://$T/docker.sock" "$@"; }

"$DOCKERD" --host "unix://$T/docker.sock" --data-root "$T/data" --exec-root "$T/exec" \
	--pidfile "$T/docker.pid" --bridge=none --iptables=false --ip-masq=false \
	>"$T/dockerd.log" 2>&1 &
DPID=$!
if ! wait_for 60 d version; then
	ok 1 "dockerd did not come up"
	tail -n 20 "$T/dockerd.log" | sed 's/^/# /'
	done_testing
	exit 1
fi

mkdir -p "$T/rootfs/bin"
cp "$BUSYBOX" "$T/rootfs/bin/busybox"
for a in sh sleep true false; do ln -s busybox "$T/rootfs/bin/$a"; done
tar -C "$T/rootfs" -c . | d import - healthd-test:1 >/dev/null
ok $? "imported a busybox image"

P=p1
run() { # run NAME PROJECT [docker run options...]
	local name=$1 project=$2
	shift 2
	d run -d --name "$name" --network none --label "com.docker.compose.project=$project" \
		"$@" healthd-test:1 sleep 3600 >/dev/null
}
# A 10 s probe timeout: a passing probe must not fail on a loaded machine.
HC=(--health-interval 1s --health-timeout 10s --health-retries 1)
run p1-web-1 $P --health-cmd true "${HC[@]}"
run p1-bad-1 $P --health-cmd false "${HC[@]}"
run p1-plain-1 $P
run p1-stopped-1 $P --health-cmd true "${HC[@]}"
run p1-run-1 $P --label com.docker.compose.oneoff=True --health-cmd false "${HC[@]}"
run p2-web-1 p2 --health-cmd false "${HC[@]}"
WEIRD='we ird&x=1+"/%'
run weird-1 "$WEIRD" --health-cmd true "${HC[@]}"
health() { [ "$(d inspect -f '{{.State.Health.Status}}' "$1")" = "$2" ]; }
wait_for 30 health p1-web-1 healthy
ok $? "p1-web-1 became healthy"
wait_for 30 health p1-bad-1 unhealthy
ok $? "p1-bad-1 became unhealthy"
wait_for 30 health weird-1 healthy
ok $? "weird-1 became healthy"
wait_for 30 health p1-stopped-1 healthy && d kill p1-stopped-1 >/dev/null
ok $? "p1-stopped-1 was healthy, then killed"

out=$("$LIST" "unix://$T/docker.sock" $P 10000)
ok $? "docker_list succeeded"
is "$(printf '%s\n' "$out" | sort)" "p1-bad-1 state=running running=1 paused=0 health=unhealthy
p1-plain-1 state=running running=1 paused=0 health=-
p1-stopped-1 state=exited running=0 paused=0 health=unhealthy
p1-web-1 state=running running=1 paused=0 health=healthy" \
	"project p1: one-off and other project skipped, stopped one inspected"

out=$("$LIST" "unix://$T/docker.sock" "$WEIRD" 10000)
is "$out" "weird-1 state=running running=1 paused=0 health=healthy" \
	"a project name with &, =, + and quotes is encoded into the filter"

out=$("$LIST" "unix://$T/docker.sock" nothing-here 10000)
is "$?:$out" "0:" "an unknown project lists nothing"

d rm -f p1-bad-1 >/dev/null
out=$("$LIST" "unix://$T/docker.sock" $P 10000 | sort | cut -d' ' -f1 | tr '\n' ' ')
is "$out" "p1-plain-1 p1-stopped-1 p1-web-1 " "a removed container is gone"

d rm -f $(d ps -aq) >/dev/null
kill "$DPID"
wait_for 20 sh -c "! kill -0 $DPID 2>/dev/null"
out=$("$LIST" "unix://$T/docker.sock" $P 10000)
like "$out" "^error: cannot connect to unix://$T/docker.sock: (No such file or directory|Connection refused)$" \
	"a stopped daemon is a clear error"
reap 30 "$DPID" 2>/dev/null
DPID=
done_testing
