#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The Makefile as a Yocto build drives it (packaging/yocto/): the agent
# cross-built for arm64 with Debian's cross compiler and the arm64 -dev
# packages (multiarch, build-aux/deps.sh cross), through CC, AR, PKG_CONFIG,
# CFLAGS and LDFLAGS only, in a build folder of its own, then staged with
# `make install DESTDIR=`. The result must be an aarch64 ELF linking the
# libraries, built with the caller's flags added to the project's, without
# -Werror, and without the build asking apt or dpkg anything.
# It builds its own binaries, so the sanitizer build has nothing to add:
# tests/run: once
# Nothing in it is shared with another script: it runs beside the first round.
# tests/run: beside
set -u
cd "$(dirname "$0")/../.."
. tests/lib/tap.sh

TRIPLET=aarch64-linux-gnu
for c in "$TRIPLET-gcc" "$TRIPLET-pkg-config" readelf protoc-c; do
	command -v "$c" >/dev/null 2>&1 ||
		skip_all "$c is not installed (build-aux/deps.sh cross)"
done
"$TRIPLET-pkg-config" --exists libmicrohttpd libprotobuf-c libsystemd ||
	skip_all "the arm64 -dev packages are not installed (build-aux/deps.sh cross)"

. tests/lib/scratch.sh

# apt-get, dpkg and dpkg-query on PATH record their call and fail: a build
# must never install anything.
mkdir -p "$T/shim"
for c in apt-get apt dpkg dpkg-query; do
	printf '#!/bin/sh\necho "%s $*" >>"%s/shim.log"\nexit 1\n' "$c" "$T" >"$T/shim/$c"
	chmod +x "$T/shim/$c"
done

# What the recipe's EXTRA_OEMAKE (packaging/yocto/dstack-healthd_git.bb)
# hands make, with Debian's cross tools for Yocto's.
cross_make() {
	env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS -u CFLAGS -u CPPFLAGS -u LDFLAGS \
		PATH="$T/shim:$PATH" \
		make --no-print-directory BUILD="$T/arm64" \
		CC="$TRIPLET-gcc" AR="$TRIPLET-ar" PKG_CONFIG="$TRIPLET-pkg-config" \
		CFLAGS="-O2 -pipe -g" CPPFLAGS="" LDFLAGS="-Wl,-O1 -Wl,--hash-style=gnu" \
		PREFIX=/usr SBINDIR=/usr/sbin MANDIR=/usr/share/man \
		DOCDIR=/usr/share/doc/dstack-healthd SYSTEMDUNITDIR=/usr/lib/systemd/system "$@"
}
cross_make -j2 "$T/arm64/dstack-healthd" >"$T/make.log" 2>&1
rc=$?
[ $rc -eq 0 ] || tail -n 20 "$T/make.log" | sed 's/^/# /'
is "$rc" 0 "make builds the agent with the arm64 cross compiler"
BIN=$T/arm64/dstack-healthd

hdr=$(readelf -h "$BIN" 2>&1)
is "$(awk -F: '/^  Class:/ { gsub(/ /, "", $2); print $2 }' <<<"$hdr")" ELF64 "readelf -h: ELF64"
is "$(awk -F: '/^  Machine:/ { gsub(/^ +/, "", $2); print $2 }' <<<"$hdr")" AArch64 "readelf -h: Machine AArch64"
needed=$(readelf -d "$BIN" 2>&1 | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
diag "NEEDED: $needed"
for lib in libmicrohttpd libprotobuf-c libsystemd libmbedtls libmbedx509 libmbedcrypto; do
	like "$needed" "(^| )$lib\.so\.[0-9]+ " "links $lib"
done
# jsmn is header-only: its parser is compiled into the agent.
like "$(readelf -sW "$BIN" | awk '$4 == "FUNC" && $7 != "UND" { print $8 }')" \
	'(^|[[:space:]])jsmn_parse($|[[:space:]])' "jsmn's parser is built in"

# The caller's flags come after the project's, and warnings are no errors.
compile=$(grep -m1 -- " -c -o $T/arm64/obj/base/err.o" "$T/make.log")
like "$compile" '-std=c11 .*-fstack-protector-strong .*-O2 -pipe -g ' \
	"the compile line has the project's flags, then CFLAGS"
like "$(grep -m1 -- "-o $BIN " "$T/make.log")" '-pie .*-Wl,-O1 -Wl,--hash-style=gnu ' \
	"the link line has the project's flags, then LDFLAGS"
is "$(grep -c -- -Werror "$T/make.log")" 0 "no -Werror unless WERROR=1"

# do_install: make install with DESTDIR, the same variables, no rebuild.
cross_make install DESTDIR="$T/stage" >"$T/install.log" 2>&1
rc=$?
[ $rc -eq 0 ] || tail -n 20 "$T/install.log" | sed 's/^/# /'
is "$rc" 0 "make install DESTDIR= stages the cross build"
like "$(readelf -h "$T/stage/usr/sbin/dstack-healthd" 2>&1)" 'Machine: +AArch64' \
	"the staged agent is the aarch64 one"
staged=$(cd "$T/stage" && find . -type f | sort | tr '\n' ' ')
is "$staged" "./usr/lib/systemd/system/dstack-healthd-drain.service ./usr/lib/systemd/system/dstack-healthd.service ./usr/lib/systemd/system/dstack-healthd.socket ./usr/sbin/dstack-healthd ./usr/share/doc/dstack-healthd/examples/healthd.json ./usr/share/dstack-healthd/dstack-healthd.rules.yml ./usr/share/dstack-healthd/health.proto ./usr/share/man/man8/dstack-healthd.8 " \
	"the staged files: the agent, the three units, the man page, the .proto, the alert rules, the example"
is "$(grep '^ExecStart=' "$T/stage/usr/lib/systemd/system/dstack-healthd.service")" \
	"ExecStart=/usr/sbin/dstack-healthd" "the service starts the staged agent"

# do_install:append: install-front, for ${PN}-front, with the recipe's
# SYSCONFDIR; what it stages is what the package's FILES and CONFFILES name.
cross_make install-front DESTDIR="$T/stage-front" SYSCONFDIR=/etc >"$T/install-front.log" 2>&1
is "$?:$(cd "$T/stage-front" && find . -type f | sort | tr '\n' ' ')" \
	"0:./etc/dstack/dstack.toml ./etc/dstack/healthd.json " "make install-front stages the front's two files"
recipe=packaging/yocto/dstack-healthd_git.bb
for v in 'FILES:${PN}-front' 'CONFFILES:${PN}-front'; do
	is "$(awk -v v="$v" '$1 == v { sub(/^[^"]*"/, ""); sub(/"$/, ""); print }' "$recipe" |
		sed 's|${sysconfdir}|/etc|g')" "/etc/dstack/dstack.toml /etc/dstack/healthd.json" \
		"the recipe's $v names them"
done

is "$(cat "$T/shim.log" 2>/dev/null)" "" "the build asked neither apt nor dpkg"

done_testing
