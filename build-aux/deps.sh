#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Checks that the Debian packages a purpose needs are installed; installs the
# missing ones when run as root on Debian, names them otherwise.
#   build-aux/deps.sh build [image] [test] [fuzz] [bench] [cross]
#   build-aux/deps.sh --list PURPOSE...   the packages, one line, no check
# Only the targets a person runs on a fresh machine call it (make deps, test,
# bench, run, fuzz, image-deps); plain `make` and the package build never do.
# `build-aux/deps.sh image` alone is what `make image` needs on a fresh
# Debian 12 (a container has no make yet): the build's list and the image's.
set -eu

pkgs_build="gcc make pkg-config libmicrohttpd-dev libprotobuf-c-dev protobuf-c-compiler libjsmn-dev libmbedtls-dev libsystemd-dev"
# make image packs the sidecar's image with python3 (build-aux/image.py) and
# stamps it with the commit and its time, which git reads from the checkout.
pkgs_image="python3 git"
pkgs_test="curl protobuf-compiler docker.io docker-compose busybox-static python3 iproute2 procps openssl"
# promtool, which checks /metrics (tests/e2e/status.sh).
pkgs_test="$pkgs_test prometheus"
# The package and the real-systemd test (tests/e2e/systemd.sh):
# dpkg-buildpackage, dh, debootstrap, and systemd-socket-activate.
pkgs_test="$pkgs_test dpkg-dev debhelper debootstrap systemd valgrind"
# lintian, which the package tests run on both packages (systemd.sh, front.sh).
pkgs_test="$pkgs_test lintian"
# The sidecar's verdict file judged at a later clock, so that ageing out
# needs no minute of waiting (tests/e2e/sidecar.sh).
pkgs_test="$pkgs_test faketime"
# A status file whose open is held past the refresh timeout, injected by
# strace (tests/e2e/public_errors.sh).
pkgs_test="$pkgs_test strace"
# The relay front's test in its own network namespace (tests/e2e/relay_front.sh):
# unshare and prlimit (util-linux), nft to make a peer vanish; ip, ss and
# sysctl come with iproute2 and procps above. Without them its points skip.
pkgs_test="$pkgs_test util-linux nftables"
# A real gRPC server with the standard health service, for the gRPC probes
# (tests/e2e/grpc_probes.sh, bench/probes.sh).
pkgs_test="$pkgs_test python3-grpcio"
# Encoders and decoders of HPACK and HTTP/2 nobody here wrote, to check the
# gRPC probes' decoder against (issue 42): Python's hpack and h2 make the
# blocks tests/unit/test_hpack.c decodes and the peers of grpc_probes.sh;
# libnghttp2's inflater is test_hpack's second decoder. Tests only: the
# agent links none of them.
pkgs_test="$pkgs_test python3-hpack python3-h2 libnghttp2-dev"
# The sidecar's image pushed as built and pulled by digest (tests/e2e/image.sh):
# skopeo and a registry on loopback; diffoscope's account of two builds that
# differ (tests/e2e/reproducible.sh too).
pkgs_test="$pkgs_test skopeo docker-registry diffoscope-minimal"
# The example app's proxy: Debian's Caddy in a busybox root
# (tests/e2e/example.sh; the iptables its bridge needs comes with docker.io).
pkgs_test="$pkgs_test caddy"
# libnghttp2's inflater: the second decoder of the HPACK oracle
# (fuzz/hpack_oracle.h, fuzz_hpack and fuzz_grpc).
pkgs_fuzz="clang libclang-rt-14-dev libnghttp2-dev"

pkgs_bench="wrk nginx valgrind util-linux curl python3 docker.io docker-compose busybox-static python3-grpcio"
# The arm64 cross build (tests/e2e/cross.sh), as a Yocto build drives the
# Makefile: Debian's cross compiler and the arm64 -dev packages (multiarch);
# pkgconf:arm64 brings aarch64-linux-gnu-pkg-config, and protoc-c runs on the
# host. libjsmn-dev is Architecture: all.
cross_arch=arm64
pkgs_cross="gcc-aarch64-linux-gnu libc6-dev-arm64-cross binutils pkgconf:arm64 protobuf-c-compiler libjsmn-dev libmicrohttpd-dev:arm64 libprotobuf-c-dev:arm64 libsystemd-dev:arm64 libmbedtls-dev:arm64"

list=
[ "${1:-}" = --list ] && { list=1; shift; }
want=""
foreign=""
for purpose in "$@"; do
	case "$purpose" in
	build) want="$want $pkgs_build" ;;
	image) want="$want $pkgs_build $pkgs_image" ;;
	test) want="$want $pkgs_test" ;;
	bench) want="$want $pkgs_bench" ;;
	fuzz) want="$want $pkgs_fuzz" ;;
	cross) want="$want $pkgs_cross"; foreign=$cross_arch ;;
	*) echo "deps.sh: unknown purpose '$purpose'" >&2; exit 2 ;;
	esac
done

# The list alone, e.g. for a root made with debootstrap --include
# (tests/lib/rootfs.sh), so that it cannot drift from what is checked here.
if [ -n "$list" ]; then
	echo $want
	exit 0
fi

# Packages of another architecture are known to apt only once dpkg has it.
add_arch=""
if [ -n "$foreign" ] && ! dpkg --print-foreign-architectures | grep -qx "$foreign"; then
	add_arch=$foreign
fi

missing=""
for p in $want; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed'; then
		missing="$missing $p"
	fi
done
[ -z "$missing" ] && exit 0

if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
	echo "deps.sh: installing:$missing" >&2
	# One update per machine is enough (and one after adding an
	# architecture, whose lists apt does not have yet); a failed install
	# after a stale list gets a fresh one.
	if [ -n "$add_arch" ]; then
		echo "deps.sh: adding the $add_arch architecture" >&2
		dpkg --add-architecture "$add_arch"
		apt-get update -qq >&2
	elif [ ! -e /var/lib/apt/lists/lock ] || ! ls /var/lib/apt/lists/*Packages >/dev/null 2>&1; then
		apt-get update -qq >&2
	fi
	# What diffoscope-minimal recommends is some 360 packages (compilers,
	# viewers for every format); the tests need only its tar and text
	# comparison, so it comes without them, in a second install.
	norec="" rest=""
	for p in $missing; do
		case "$p" in diffoscope-minimal) norec="$norec $p" ;; *) rest="$rest $p" ;; esac
	done
	for group in rest norec; do
		eval "pkgs=\$$group"
		[ -n "$pkgs" ] || continue
		flags=""
		[ "$group" = norec ] && flags=--no-install-recommends
		# shellcheck disable=SC2086
		if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $flags $pkgs >&2; then
			apt-get update -qq >&2
			DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $flags $pkgs >&2
		fi
	done
	exit 0
fi
echo "deps.sh: missing Debian packages:$missing" >&2
[ -z "$add_arch" ] || echo "deps.sh: first: dpkg --add-architecture $add_arch && apt-get update" >&2
echo "deps.sh: install them with: apt-get install$missing" >&2
exit 1
