#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Builds that reproduce bit for bit (issue 28 §2; docs/image-builder.md,
# "Reproducible builds"): the same tree built twice, in two folders of
# different depth and at two times, must give the same bytes, compared with cmp
# and the first differing file named (with diffoscope's account when Debian's
# diffoscope or diffoscope-minimal is installed: for the reader only, never the
# verdict):
#   1. the plain build (`make`), the generated protobuf files, rev.h, every
#      object and the agent;
#   2. the build as a Yocto recipe drives the Makefile (packaging/yocto,
#      tests/e2e/cross.sh): cross-built for arm64 when Debian's cross
#      compiler is installed (natively otherwise), with the flags Yocto
#      passes less its own prefix maps, the build folder outside the source;
#   3. `make deb`: both packages; the agent in them stamped with the
#      commit's revision, or, built from a tree that differs from its commit,
#      a warning and the revision marked -dirty.
# It builds its own binaries, so the sanitizer build has nothing to add:
# tests/run: once
# Nothing in it is shared with another script: it runs beside the first round.
# tests/run: beside
# tests/run: timeout 1800
set -u
cd "$(dirname "$0")/../.."
. tests/lib/tap.sh
command -v git >/dev/null 2>&1 || skip_all "git is not installed"
git rev-parse --git-dir >/dev/null 2>&1 || skip_all "not a git checkout (the tree is copied by git ls-files)"
. tests/lib/scratch.sh

REV=git:$(git rev-parse --verify -q HEAD | cut -c1-20)
DIFFOSCOPE=$(command -v diffoscope 2>/dev/null)

# copy DIR: the tracked and new files of the tree into DIR, as `make deb` copies them.
copy() {
	mkdir -p "$1" && git ls-files -z -c -o --exclude-standard |
		xargs -0 cp --parents -t "$1"
}
# differ DIR1 DIR2 LIST...: LIST (a command, run in each folder) prints the
# files to compare, one a line; prints nothing when both folders list the
# same files with the same bytes, else the first file found in one folder
# only or else the first that differs, as "only in DIR: FILE" or "FILE".
differ() {
	local a=$1 b=$2 f
	shift 2
	(cd "$a" && "$@") | LC_ALL=C sort >"$T/list.1"
	(cd "$b" && "$@") | LC_ALL=C sort >"$T/list.2"
	f=$(LC_ALL=C comm -3 "$T/list.1" "$T/list.2" | head -n 1)
	case $f in
	'') ;;
	$'\t'*) echo "only in $b: ${f#$'\t'}"; return ;;
	*) echo "only in $a: $f"; return ;;
	esac
	while IFS= read -r f; do
		cmp -s "$a/$f" "$b/$f" || { echo "$f"; return; }
	done <"$T/list.1"
}
# same WHAT DIR1 DIR2 LIST...: a test point that both folders hold the same
# files, the same bytes; otherwise the first that differs is named, with
# diffoscope's first lines if it is installed.
same() {
	local what=$1 a=$2 b=$3 first
	shift 3
	first=$(differ "$a" "$b" "$@")
	ok $([ -z "$first" ]; echo $?) \
		"$what: $(wc -l <"$T/list.1") files, the same in both folders${first:+; first to differ: ${first//"$T"\//}}"
	[ -z "$first" ] && return 0
	case $first in only\ in\ *) return 1 ;; esac
	diag "$(cmp "$a/$first" "$b/$first" 2>&1)"
	if [ -n "$DIFFOSCOPE" ]; then
		timeout 300 "$DIFFOSCOPE" --text - "$a/$first" "$b/$first" 2>&1 | head -n 40 | sed 's/^/#   /'
	else
		diag "(install diffoscope-minimal for an account of the difference)"
	fi
	return 1
}
# files BUILD: what a build with build folder BUILD left to compare, from the
# folder it ran in: generated code, objects, the agent.
files() {
	find "$1/gen" "$1/obj" -type f \( -name '*.c' -o -name '*.h' -o -name '*.o' \) &&
		echo "$1/dstack-healthd"
}
debs() { ls -- *.deb 2>/dev/null; }
every_file() { find . -type f; }
stamp() { date -u +%H:%M:%S; }

# The comparison itself, on folders whose answer is known: a file the second
# has and the first has not, the other way round, one that differs.
mkdir -p "$T/c1" "$T/c2" && echo x >"$T/c1/f" && echo x >"$T/c2/f" && echo y >"$T/c2/g"
is "$(differ "$T/c1" "$T/c2" every_file)" "only in $T/c2: ./g" "the comparison names a file only the second folder has"
is "$(differ "$T/c2" "$T/c1" every_file)" "only in $T/c2: ./g" "and one only the first has"
echo z >"$T/c1/g"
is "$(differ "$T/c1" "$T/c2" every_file)" "./g" "and the first file that differs"
rm -f "$T/c1/g"

# --- 1. the plain build ---------------------------------------------------------
# Two folders of different depth and name; the second started after the
# first ended, at another second of the clock.
ONE=$T/a/src TWO=$T/a-longer-folder/nested/src
for d in "$ONE" "$TWO"; do
	copy "$d" || { ok 1 "copied the tree into $d"; done_testing; exit 1; }
	started=$(stamp)
	(cd "$d" && env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS -u CFLAGS -u CPPFLAGS -u LDFLAGS \
		make --no-print-directory -j2 REV="$REV" build/dstack-healthd) >"$d.log" 2>&1
	rc=$?
	[ $rc -eq 0 ] || tail -n 20 "$d.log" | sed 's/^/# /'
	is "$rc" 0 "make in ${d#"$T"/} (started $started)"
done
same "plain build" "$ONE" "$TWO" files build
strings -a "$ONE/build/dstack-healthd" | grep -F "$T" >"$T/paths"
is "$(head -n 3 "$T/paths")" "" "the agent names no folder of the build"
diag "build id $(readelf -n "$ONE/build/dstack-healthd" | sed -n 's/.*Build ID: //p')"

# --- 2. as Yocto drives it ------------------------------------------------------
# bitbake.conf's TARGET_CFLAGS/LDFLAGS and security_flags.inc, without
# DEBUG_PREFIX_MAP: the Makefile's own maps must do. B outside S, named
# differently in each run, as each recipe's WORKDIR is.
TRIPLET=aarch64-linux-gnu
if command -v "$TRIPLET-gcc" >/dev/null 2>&1 && "$TRIPLET-pkg-config" --exists libmicrohttpd 2>/dev/null; then
	Y_CC=$TRIPLET-gcc Y_AR=$TRIPLET-ar Y_PC=$TRIPLET-pkg-config Y_WHAT="cross-built for arm64"
else
	Y_CC=gcc Y_AR=ar Y_PC=pkg-config Y_WHAT="native (no arm64 cross compiler)"
fi
Y_CFLAGS="-O2 -pipe -g -feliminate-unused-debug-types -fstack-protector-strong -D_FORTIFY_SOURCE=2 -Wformat -Wformat-security -Werror=format-security"
Y_LDFLAGS="-Wl,-O1 -Wl,--hash-style=gnu -Wl,--as-needed -fstack-protector-strong -Wl,-z,relro,-z,now"
for w in "$T/y1" "$T/yocto-work-2/x"; do
	copy "$w/git" || { ok 1 "copied the tree into $w"; done_testing; exit 1; }
	started=$(stamp)
	(cd "$w/git" && env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS -u CFLAGS -u CPPFLAGS -u LDFLAGS \
		make --no-print-directory -j2 REV="$REV" BUILD="$w/build/build" \
		CC="$Y_CC" AR="$Y_AR" PKG_CONFIG="$Y_PC" CFLAGS="$Y_CFLAGS" CPPFLAGS="" \
		LDFLAGS="$Y_LDFLAGS" "$w/build/build/dstack-healthd") >"$w.log" 2>&1
	rc=$?
	[ $rc -eq 0 ] || tail -n 20 "$w.log" | sed 's/^/# /'
	is "$rc" 0 "Yocto's way, $Y_WHAT, in ${w#"$T"/} (started $started)"
done
same "Yocto's way" "$T/y1/build" "$T/yocto-work-2/x/build" files build

# --- 3. the Debian package -------------------------------------------------------
if command -v dpkg-buildpackage >/dev/null 2>&1 && command -v dh >/dev/null 2>&1; then
	for n in 1 2; do
		started=$(stamp)
		env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS make -s deb BUILD="$T/deb$n" >"$T/deb$n.log" 2>&1
		rc=$?
		[ $rc -eq 0 ] || tail -n 20 "$T/deb$n.log" | sed 's/^/# /'
		is "$rc" 0 "make deb, $n (started $started; $(head -n 1 "$T/deb$n.log"))"
	done
	debs=$(cd "$T/deb1" && debs)
	is "$(wc -w <<<"$debs")" 2 "two packages"
	if ! same ".deb" "$T/deb1" "$T/deb2" debs; then
		# Which file inside: unpacked, compared the same way.
		for n in 1 2; do
			for d in $debs; do dpkg-deb -R "$T/deb$n/$d" "$T/x$n/${d%%_*}"; done
		done
		same ".deb, unpacked" "$T/x1" "$T/x2" every_file
	fi
	# The stamp says which tree the package holds: the commit's revision when
	# the tree is its commit; otherwise a warning naming the difference and a
	# revision marked -dirty. The second, in a clone holding the tree as it is
	# with one file edited and one added (a tree that is surely not its commit).
	stamped() { # stamped FOLDER: the agent's --version in its .deb
		dpkg-deb --fsys-tarfile "$1"/dstack-healthd_*.deb | tar -xO ./usr/sbin/dstack-healthd >"$T/agent.x" &&
			chmod +x "$T/agent.x" && "$T/agent.x" --version
	}
	if [ -z "$(git status --porcelain --untracked-files=all)" ]; then
		like "$(stamped "$T/deb1")" " \\($REV\\)\$" "the tree is its commit: the agent is stamped $REV"
		is "$(grep -c 'differs from commit' "$T/deb1.log")" 0 "and make deb warns of nothing"
	else
		like "$(cat "$T/deb1.log")" "warning: the tree differs from commit $REV" \
			"the tree differs from its commit: make deb says so"
	fi
	D=$T/dirty/dstack-healthd
	git clone -q --shared . "$D" && copy "$D" && echo >>"$D/README.md" && echo new >"$D/NEW"
	(cd "$D" && env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS make -s deb BUILD="$T/deb3") >"$T/deb3.out" 2>"$T/deb3.err"
	is "$?" 0 "make deb in a tree with an edit and a new file"
	like "$(cat "$T/deb3.err")" "warning: the tree differs from commit $REV in [0-9]+ file\\(s\\) \\(.*(README.md|NEW)" \
		"warns on stderr that the tree differs from the commit, naming the files"
	like "$(stamped "$T/deb3")" " \\($REV-dirty\\)\$" "the agent in it is stamped $REV-dirty"
else
	diag "no dpkg-buildpackage or dh: the package is not built"
fi
done_testing
