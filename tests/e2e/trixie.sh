#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The tree on the other library generation (docs/design/dependencies.md and
# testing.md): the one of Debian 13 and of Yocto wrynose, where dstack's
# images are built (mbedtls 3.6, libmicrohttpd 1.0, protobuf-c 1.5, GCC 14). In a Debian 13 root made by
# debootstrap (tests/lib/rootfs.sh: the mirror read from apt's sources, the
# tarball cached per day), in private mount, PID and network namespaces: the
# tracked tree is built there with WERROR=1, its unit tests and the
# end-to-end scripts that need no systemd run there, and each of their test
# points is re-emitted here as one of ours. Among them the Compose scenarios
# on Docker 26 and Compose v2, as dstack's current images carry them
# (compose_v2.sh: the root has Debian 13's docker.io and docker-compose, and
# the agent under test is the one built there).
#
# It fails, rather than skips, when the root cannot be made: this is the
# proof that the tree builds where dstack's images are built. On a machine
# without network, HEALTHD_TRIXIE=0 skips it, and says so.
# It builds its own tree, so the sanitizer build has nothing to add:
# tests/run: once
# Nothing in it is shared with another script: it runs beside the first round.
# tests/run: beside
# tests/run: timeout 1800
set -u
cd "$(dirname "$0")/../.."
. tests/lib/tap.sh

# The end-to-end scripts run there: of those that need no systemd, the ones
# on what the library generation changes: the HTTP server and protobuf (rpc),
# TLS (docker_tls), libsystemd's notify and socket activation (notify); and
# the Compose scenarios on Debian 13's Docker 26 and Compose v2 (compose_v2),
# which Debian 12 has not. A few minutes on a busy machine; TRIXIE_E2E
# chooses.
TRIXIE_E2E=${TRIXIE_E2E:-rpc docker_tls notify compose_v2}

[ "${HEALTHD_TRIXIE:-1}" = 0 ] && skip_all "HEALTHD_TRIXIE=0: the Debian 13 build is not run"
[ "$(id -u)" = 0 ] || skip_all "needs root (debootstrap, pivot_root, namespaces)"
for c in debootstrap unshare pivot_root git; do
	command -v "$c" >/dev/null 2>&1 || skip_all "$c is not installed"
done

ROOTFS_PRESET=trixie-build
. tests/lib/rootfs.sh
. tests/lib/scratch.sh

t0=$(date +%s)
TAR=$(rootfs_tarball 2>"$T/rootfs.err")
ok $? "a Debian 13 root ($(basename "${TAR:-none}"))"
if [ -z "$TAR" ]; then
	sed 's/^/# /' "$T/rootfs.err"
	done_testing
	exit
fi
R=$T/root
mkdir "$R" && tar -C "$R" --numeric-owner -xf "$TAR" && mkdir "$R/src" &&
	git ls-files -z -c -o --exclude-standard | xargs -0 cp --parents -t "$R/src"
ok $? "unpacked it, and copied the tree in"
diag "root ready in $(( $(date +%s) - t0 )) s"

# Inside: the versions, the build, then each test's TAP in /out/NAME.tap
# and its exit status in /out/NAME.rc.
mkdir "$R/out"
cat >"$R/out/run.sh" <<'EOF'
set -u
mount -t tmpfs tmpfs /tmp && mount -t tmpfs tmpfs /dev/shm || exit 1
ip link set lo up || exit 1
cd /src
{
	dpkg-query -W -f='${Version}\n' libmbedtls-dev
	dpkg-query -W -f='${Version}\n' libmicrohttpd-dev
	dpkg-query -W -f='${Version}\n' libprotobuf-c-dev
	gcc -dumpfullversion
	printf '#include <mbedtls/build_info.h>\nMBEDTLS_VERSION_STRING\n' | gcc -E -P - | tail -n1
	dpkg-query -W -f='${Package} ${Version}\n' docker.io containerd runc docker-cli docker-compose |
		paste -sd, | sed 's/,/, /g'
} >/out/versions
make -j2 WERROR=1 all >/out/build.log 2>&1
echo $? >/out/build.rc
[ "$(cat /out/build.rc)" = 0 ] || exit 0
for t in build/tests/test_*; do
	n=unit-${t##*/}
	timeout -k 5 120 "$t" >/out/$n.tap 2>&1
	echo $? >/out/$n.rc
done
for s in $TRIXIE_E2E; do
	t0=$(date +%s)
	HEALTHD_BUILD=build timeout -k 5 600 tests/e2e/$s.sh >/out/e2e-$s.tap 2>&1
	echo $? >/out/e2e-$s.rc
	echo $(( $(date +%s) - t0 )) >/out/e2e-$s.secs
done
EOF
# The root becomes the namespace's root (pivot_root, not chroot: dockerd
# runs there, for compose_v2; tests/lib/rootfs.sh says why).
export -f rootfs_pivot
TRIXIE_E2E="$TRIXIE_E2E" timeout -k 5 1500 unshare --mount --pid --net --fork --kill-child \
	--mount-proc="$R/proc" /bin/bash -c 'rootfs_pivot "$1" /bin/bash /out/run.sh' \
	pivot "$R" >"$T/run.log" 2>&1
ok $? "ran in the root" || sed 's/^/# /' "$T/run.log"

mapfile -t v <"$R/out/versions"
diag "Debian 13: mbedtls ${v[0]:-?} (${v[4]:-?}), libmicrohttpd ${v[1]:-?}, protobuf-c ${v[2]:-?}, gcc ${v[3]:-?}"
diag "Debian 13: ${v[5]:-no docker.io}"
# The other generation, not this machine's again.
like "${v[4]:-}" '^"3\.' "the root's mbedtls is 3.x"
like "${v[1]:-}" '^1\.' "the root's libmicrohttpd is 1.x"
is "$(cat "$R/out/build.rc" 2>/dev/null)" 0 "make WERROR=1 in the root"
if [ "$(cat "$R/out/build.rc" 2>/dev/null)" != 0 ]; then
	grep -E -A3 'error|warning' "$R/out/build.log" | head -n 40 | sed 's/^/# /'
fi

# retap NAME: NAME's test points as ours ("trixie NAME: ..."); a file that
# stopped early or exited non-zero with every point passing is one failure.
retap() {
	local name=$1 tap=$R/out/$1.tap rc p=0 f=0 line shown=0
	rc=$(cat "$R/out/$name.rc" 2>/dev/null || echo missing)
	while IFS= read -r line; do
		case $line in
		"ok "*) ok 0 "trixie $name: ${line#ok * - }"; p=$((p + 1)); shown=0 ;;
		"not ok "*) ok 1 "trixie $name: ${line#not ok * - }"; f=$((f + 1)); shown=1 ;;
		# The got/want lines under a failure.
		"#"*) [ "$shown" = 0 ] || echo "$line" ;;
		"1..0 # SKIP"*) diag "trixie $name: skipped: ${line#1..0 # SKIP }" ;;
		esac
	done <"$tap"
	if ! grep -qE '^1\.\.[0-9]+' "$tap"; then
		ok 1 "trixie $name: printed a plan (exit status $rc)"
	elif [ "$rc" != 0 ] && [ "$f" -eq 0 ]; then
		ok 1 "trixie $name: exit status $rc"
	fi
	diag "trixie $name: $p passed, $f failed$([ -e "$R/out/$name.secs" ] && echo " ($(cat "$R/out/$name.secs") s)")"
}
units=0 e2es=0
for tap in "$R"/out/unit-*.tap; do
	[ -e "$tap" ] || continue
	n=${tap##*/}
	retap "${n%.tap}"
	units=$((units + 1))
done
for s in $TRIXIE_E2E; do
	[ -e "$R/out/e2e-$s.tap" ] || { ok 1 "trixie e2e-$s: ran"; continue; }
	retap "e2e-$s"
	e2es=$((e2es + 1))
done
ok $(( units > 0 ? 0 : 1 )) "the unit tests ran in the root ($units files, $e2es end-to-end scripts)"
diag "Debian 13 step: $(( $(date +%s) - t0 )) s"
done_testing
