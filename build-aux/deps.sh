#!/bin/sh
# Checks that the Debian packages a purpose needs are installed; installs the
# missing ones when run as root on Debian, names them otherwise.
#   build-aux/deps.sh build [test] [fuzz] [bench]
set -eu

pkgs_build="gcc make pkg-config libmicrohttpd-dev libprotobuf-c-dev protobuf-c-compiler libjsmn-dev libmbedtls-dev libsystemd-dev"
pkgs_test="curl protobuf-compiler docker.io docker-compose busybox-static python3 iproute2 procps openssl"
# promtool, which checks /metrics (tests/e2e/status.sh).
pkgs_test="$pkgs_test prometheus"
# The package and the real-systemd test (tests/e2e/systemd.sh):
# dpkg-buildpackage, dh, debootstrap, and systemd-socket-activate.
pkgs_test="$pkgs_test dpkg-dev debhelper debootstrap systemd valgrind"
pkgs_fuzz="clang libclang-rt-14-dev"

pkgs_bench="wrk nginx valgrind util-linux curl python3 docker.io docker-compose busybox-static"

want=""
for purpose in "$@"; do
	case "$purpose" in
	build) want="$want $pkgs_build" ;;
	test) want="$want $pkgs_test" ;;
	bench) want="$want $pkgs_bench" ;;
	fuzz) want="$want $pkgs_fuzz" ;;
	*) echo "deps.sh: unknown purpose '$purpose'" >&2; exit 2 ;;
	esac
done

missing=""
for p in $want; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed'; then
		missing="$missing $p"
	fi
done
[ -z "$missing" ] && exit 0

if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
	echo "deps.sh: installing:$missing" >&2
	# One update per machine is enough; a failed install after a stale list
	# gets a fresh one.
	if [ ! -e /var/lib/apt/lists/lock ] || ! ls /var/lib/apt/lists/*Packages >/dev/null 2>&1; then
		apt-get update -qq >&2
	fi
	# shellcheck disable=SC2086
	if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >&2; then
		apt-get update -qq >&2
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >&2
	fi
	exit 0
fi
echo "deps.sh: missing Debian packages:$missing" >&2
echo "deps.sh: install them with: apt-get install$missing" >&2
exit 1
