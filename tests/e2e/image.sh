#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The sidecar's image (issue 35; docs/app-developer.md, "The sidecar's image"):
#   1. `make image` in two copies of the tree, in two folders of different
#      depth, one after the other: the same manifest digest and the same
#      archive bit for bit (cmp; on a difference the first differing file
#      inside is named, with diffoscope's account when Debian's diffoscope
#      or diffoscope-minimal is installed);
#   2. what is in it: no file outside the expected list (the agent, the
#      libraries ldd names for it and the loader, copyright files,
#      build-inputs, passwd, group, nsswitch.conf, the verdict folder), so no
#      shell and no package manager; at most 16 MiB unpacked; every time in
#      it the commit's, owners numeric, tar entries sorted, no pax header;
#      the config's user, entrypoint and time;
#   3. pushed as built (skopeo, to Debian's docker-registry on loopback): the
#      registry shows the digest `make image` printed, Debian 12's dockerd
#      pulls it by that digest and runs it as its user, and `make
#      verify-image` says "same" for it and names build-inputs for an image
#      built with another commit.
# It builds its own copies, so the sanitizer build has nothing to add:
# tests/run: once
# tests/run: timeout 2400
set -u
cd "$(dirname "$0")/../.."
. tests/lib/tap.sh
command -v git >/dev/null 2>&1 || skip_all "git is not installed"
git rev-parse --git-dir >/dev/null 2>&1 || skip_all "not a git checkout (the tree is copied by git ls-files)"
command -v python3 >/dev/null 2>&1 || skip_all "python3 is not installed"
command -v dpkg-query >/dev/null 2>&1 || skip_all "not a Debian system (the image lists its packages)"
. tests/lib/scratch.sh

REV=git:$(git rev-parse --verify -q HEAD | cut -c1-20)
COMMIT=$(git rev-parse HEAD)
EPOCH=$(git log -1 --format=%ct)
DIFFOSCOPE=$(command -v diffoscope 2>/dev/null)
ARCHIVE=build/dstack-healthd-$(sed -n 's/^VERSION := //p' Makefile).oci.tar

copy() {
	mkdir -p "$1" && git ls-files -z -c -o --exclude-standard |
		xargs -0 cp --parents -t "$1"
}
# first_difference A B: the first file that differs between two builds'
# OUT.d folders (the root, the config, the layout), or nothing.
first_difference() {
	local a=$1 b=$2 f
	# A file both have first (config.json, a library): a blob's name is its
	# hash, so one that differs is also "only in one build".
	while IFS= read -r f; do
		[ -f "$b/$f" ] || continue
		cmp -s "$a/$f" "$b/$f" || { echo "${f#./}"; return; }
	done < <(cd "$a" && find . -type f | LC_ALL=C sort)
	f=$( (cd "$a" && find . -type f; cd "$b" && find . -type f) | LC_ALL=C sort | uniq -u | head -n 1)
	[ -z "$f" ] || echo "only in one build: ${f#./}"
}

# --- 1. two builds, two folders ------------------------------------------------
ONE=$T/a/src TWO=$T/a-longer-folder/nested/src
for d in "$ONE" "$TWO"; do
	copy "$d" || { ok 1 "copied the tree into $d"; done_testing; exit 1; }
	started=$(date -u +%H:%M:%S)
	t0=$SECONDS
	(cd "$d" && env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS -u CFLAGS -u CPPFLAGS -u LDFLAGS \
		make --no-print-directory -j2 REV="$REV" COMMIT="$COMMIT" SOURCE_DATE_EPOCH="$EPOCH" \
		image) >"$d.log" 2>&1
	rc=$?
	[ $rc -eq 0 ] || tail -n 20 "$d.log" | sed 's/^/# /'
	is "$rc" 0 "make image in ${d#"$T"/} (started $started, $((SECONDS - t0)) s with the agent's build)"
done
D1=$(cat "$ONE/$ARCHIVE.digest" 2>/dev/null) D2=$(cat "$TWO/$ARCHIVE.digest" 2>/dev/null)
like "$D1" '^sha256:[0-9a-f]{64}$' "it prints a manifest digest ($D1)"
like "$(tail -n 1 "$ONE.log")" "^$ARCHIVE: $D1\$" "...as the last line of make image"
is "$D2" "$D1" "the two builds have one manifest digest"
cmp "$ONE/$ARCHIVE" "$TWO/$ARCHIVE" >"$T/cmp" 2>&1
ok $? "the two archives are the same bytes (cmp)"
if [ -s "$T/cmp" ]; then
	diag "$(cat "$T/cmp")"
	diag "first to differ: $(first_difference "$ONE/$ARCHIVE.d" "$TWO/$ARCHIVE.d")"
	if [ -n "$DIFFOSCOPE" ]; then
		timeout 300 "$DIFFOSCOPE" --text - "$ONE/$ARCHIVE" "$TWO/$ARCHIVE" 2>&1 | head -n 40 | sed 's/^/#   /'
	else
		diag "(install diffoscope-minimal for an account of the difference)"
	fi
fi

# --- 2. what is in it ----------------------------------------------------------
X=$ONE/$ARCHIVE.d
AGENT=$ONE/build/dstack-healthd
# Every path the loader opens for the agent, and the loader.
ldd "$AGENT" | awk '$2 == "=>" && $3 ~ /^\// { print substr($3, 2) } $1 ~ /^\// { print substr($1, 2) }' |
	LC_ALL=C sort -u >"$T/libs"
expected() {
	cat "$T/libs"
	printf '%s\n' usr/sbin/dstack-healthd etc/passwd etc/group etc/nsswitch.conf \
		usr/share/doc/dstack-healthd/copyright usr/share/doc/dstack-healthd/build-inputs
}
awk '$4 != "-" { print $1 }' "$X/files" | LC_ALL=C sort >"$T/files"
extra=$(LC_ALL=C comm -23 "$T/files" <(expected | LC_ALL=C sort) | grep -v '^usr/share/doc/[^/]*/copyright$' | head -n 5)
is "$extra" "" "no file outside the expected list: the agent, its $(wc -l <"$T/libs") libraries and loader, copyright files, build-inputs, passwd, group, nsswitch.conf"
missing=$(LC_ALL=C comm -13 "$T/files" <(expected | LC_ALL=C sort) | head -n 5)
is "$missing" "" "...and every one of those is there"
is "$(awk '$4 == "-" && !($2 == "0755" && $3 == 0) { print $1, $2, $3 }' "$X/files")" \
	"verdict 0755 65532" "the folders: root's, 0755; /verdict the user's (a named volume takes it)"
ok $([ -z "$(grep -E '(^|/)(sh|bash|busybox|dash|apt|apt-get|dpkg)$' "$T/files")" ]; echo $?) \
	"no shell, no package manager"
cmp -s "$AGENT" "$X/rootfs/usr/sbin/dstack-healthd"
ok $? "the agent in it is the one make built, byte for byte"
UNPACKED=$(awk '$4 != "-" { s += $4 } END { print s }' "$X/files")
LAYER=$(python3 -c 'import json,sys; m=json.load(open(sys.argv[1]))[0]; print(m["Layers"][0])' "$X/layout/manifest.json")
diag "unpacked $UNPACKED bytes ($(awk -v s="$UNPACKED" 'BEGIN { printf "%.2f", s / 1048576 }') MiB) in $(wc -l <"$T/files") files; the layer $(stat -c %s "$X/layout/$LAYER") bytes gzipped; the archive $(stat -c %s "$ONE/$ARCHIVE") bytes"
ok $([ "$UNPACKED" -le $((16 * 1024 * 1024)) ]; echo $?) "at most 16 MiB unpacked"

# The tar headers of the layer and of the archive.
tar_report() { # tar_report FILE: sorted? pax headers? times, owners
	python3 - "$1" "$EPOCH" <<'EOF'
import sys, tarfile
bad = []
with tarfile.open(sys.argv[1]) as t:
    names = []
    for m in t.getmembers():
        names.append(m.name)
        if m.pax_headers:
            bad.append("pax header on " + m.name)
        if m.mtime != int(sys.argv[2]):
            bad.append("time %d on %s" % (m.mtime, m.name))
        if m.uname or m.gname:
            bad.append("owner name on " + m.name)
        if (m.uid, m.gid) != (0, 0) and not (m.name == "verdict" and (m.uid, m.gid) == (65532, 65532)):
            bad.append("owner %d:%d on %s" % (m.uid, m.gid, m.name))
    if names != sorted(names):
        bad.append("entries not sorted")
print("; ".join(bad[:3]))
EOF
}
is "$(tar_report "$X/layout/$LAYER")" "" "the layer: sorted, no pax header, every time the commit's, owners 0 (the user's /verdict aside), numeric"
is "$(tar_report "$ONE/$ARCHIVE")" "" "the archive: the same"
is "$(python3 -c '
import json, sys, time
c = json.load(open(sys.argv[1]))
print(c["created"] == time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(sys.argv[2]))),
      c["config"]["User"], c["config"]["Entrypoint"], c["config"]["Labels"]["org.opencontainers.image.revision"])
' "$X/config.json" "$EPOCH")" "True 65532:65532 ['/usr/sbin/dstack-healthd'] $COMMIT" \
	"the config: the commit's time, user 65532, the agent as entrypoint, the commit"
BI=$X/rootfs/usr/share/doc/dstack-healthd/build-inputs
like "$(cat "$BI")" "commit $COMMIT" "build-inputs names the commit"
grep -Eq '^libmicrohttpd12(:[a-z0-9]+)? [^ ]+$' "$BI"
ok $? "...and the packages at their versions (libmicrohttpd12 among them)"

# The guide's Compose file runs this image as tests/e2e/sidecar.sh does:
# the same hardening, the image's own user said again, memory and pids
# limits, every image by digest, the verdict's volume where the guide's
# app-compose.json says the guest agent reads it.
. tests/lib/guide_example.sh
if /usr/bin/python3 -c 'import yaml' 2>/dev/null &&
	guide_example docker-compose.yaml "$T/guide.yaml" && guide_example app-compose.json "$T/guide.json"; then
	is "$(/usr/bin/python3 - "$T/guide.yaml" tests/e2e/compose/sidecar.yml "$T/guide.json" <<'EOF'
import re, sys, yaml
ex, test = (yaml.safe_load(open(f)) for f in sys.argv[1:3])
sc, tsc = ex["services"]["healthd"], test["services"]["healthd"]
bad = []
for k in ("read_only", "cap_drop", "security_opt", "tmpfs"):
    if sc.get(k) != tsc.get(k):
        bad.append("%s: %r, the test's %r" % (k, sc.get(k), tsc.get(k)))
if not (isinstance(sc.get("group_add"), list) and all(re.fullmatch(r"[0-9]+", str(g)) for g in sc["group_add"])):
    bad.append("group_add is not a gid")
if sc.get("user") != "65532:65532":
    bad.append("user: %r, not the image's 65532:65532" % sc.get("user"))
if not sc.get("mem_limit") or not sc.get("pids_limit"):
    bad.append("no memory or no pids limit")
for k in ("privileged", "cap_add", "pid", "network_mode"):
    if k in sc:
        bad.append("sets " + k)
if "verdict:/verdict" not in sc.get("volumes", []) or ex["volumes"]["verdict"]["name"] != "dstack-healthd-verdict":
    bad.append("the verdict is not the named volume dstack-healthd-verdict")
if "/var/lib/docker/volumes/dstack-healthd-verdict/_data/status" not in open(sys.argv[3]).read():
    bad.append("app-compose.json's path is not the volume's")
for name, svc in ex["services"].items():
    if "@sha256:" not in svc.get("image", ""):
        bad.append(name + " is not pinned by digest")
print("; ".join(bad))
EOF
)" "" "the guide's Compose file's sidecar: the test's hardening, its user and limits, every image by digest, the volume app-compose.json names"
else
	diag "no python3-yaml, or no example in $GUIDE: the guide's Compose file is not read"
fi

# --- 3. push as built, pull by digest, run --------------------------------------
. tests/lib/registry.sh
registry_start "$T/registry"
rc=$?
[ -z "$REGISTRY_PID" ] || PIDS+=("$REGISTRY_PID")
if [ $rc -eq 2 ]; then
	diag "$REGISTRY_WHY: the push is not tried"
	done_testing
	exit
fi
REG=$REGISTRY
ok $rc "Debian's docker-registry on $REG"
registry_push "oci-archive:$ONE/$ARCHIVE" dstack-healthd:test
is "$?" 0 "skopeo copy of the archive to the registry"
is "$(registry_digest dstack-healthd:test)" "$D1" \
	"the registry shows the digest make image printed"
(env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS SKOPEO_OPTS=--tls-verify=false make --no-print-directory -C "$ONE" \
	REV="$REV" COMMIT="$COMMIT" SOURCE_DATE_EPOCH="$EPOCH" verify-image IMAGE="$REG/dstack-healthd@$D1") \
	>"$T/verify.log" 2>&1
is "$?" 0 "make verify-image IMAGE=$REG/dstack-healthd@$D1: exit 0"
like "$(tail -n 1 "$T/verify.log")" "^verify-image: same: .* is $D1, built here from $COMMIT" "...and it says so"
# An image of another commit (the same agent): verify-image names the file.
SOURCE_DATE_EPOCH=$EPOCH COMMIT=0000000000000000000000000000000000000000 REV=$REV VERSION=x TREE=clean \
	build-aux/image.py "$T/other.oci.tar" "$AGENT" >/dev/null 2>"$T/other.log" &&
	registry_push "oci-archive:$T/other.oci.tar" dstack-healthd:other >>"$T/other.log"
ok $? "an image of another commit pushed beside it"
(env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS SKOPEO_OPTS=--tls-verify=false make --no-print-directory -C "$ONE" \
	REV="$REV" COMMIT="$COMMIT" SOURCE_DATE_EPOCH="$EPOCH" verify-image IMAGE="$REG/dstack-healthd:other") \
	>"$T/verify2.log" 2>&1
rc=$?
ok $([ $rc -ne 0 ]; echo $?) "make verify-image of that one fails"
grep -q '^verify-image: DIFFERENT: ' "$T/verify2.log" &&
	grep -qx 'differs: usr/share/doc/dstack-healthd/build-inputs' "$T/verify2.log"
ok $? "...naming the file that differs (build-inputs)" || sed 's/^/#   /' "$T/verify2.log"

# Pulled by digest and run, by Debian 12's dockerd (loopback registries are
# plain HTTP to it), as the Compose example runs it.
if [ "$(id -u)" != 0 ] || ! command -v dockerd >/dev/null 2>&1 || [ ! -x /usr/bin/docker ]; then
	diag "no root or no dockerd: the pull is not tried"
	done_testing
	exit
fi
. tests/lib/dockerd.sh
dockerd_start
trap scratch_cleanup EXIT
scratch_more() { dockerd_stop; }
"$DH_DOCKER" pull -q "$REG/dstack-healthd@$D1" >"$T/pull.log" 2>&1
rc=$?
[ $rc -eq 0 ] || sed 's/^/# /' "$T/pull.log"
is "$rc" 0 "docker pull $REG/dstack-healthd@$D1"
is "$("$DH_DOCKER" image inspect -f '{{index .RepoDigests 0}}' "$REG/dstack-healthd@$D1" 2>&1)" \
	"$REG/dstack-healthd@$D1" "Docker knows it by that digest"
is "$("$DH_DOCKER" run --rm --network none --read-only --cap-drop ALL \
	--security-opt no-new-privileges "$REG/dstack-healthd@$D1" --version 2>&1)" \
	"dstack-healthd v$(sed -n 's/^VERSION := //p' Makefile) ($REV)" \
	"it runs, as its user, read-only, without capabilities: --version names the commit"
done_testing
