#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# verify-image.sh ARCHIVE REF: is the image at REF the one `make image` just
# built into ARCHIVE? (`make verify-image IMAGE=REF` runs it.) REF is what
# skopeo reads: docker://REGISTRY/NAME@sha256:... (the default transport when
# none is named), docker-daemon:NAME:TAG, oci-archive:FILE. SKOPEO_OPTS is
# passed to skopeo (e.g. --tls-verify=false for a registry on loopback).
# Exit 0 and "same" when the manifest digests are equal; otherwise 1, and
# what differs: the config's fields, else the first file of the layer that
# differs in its bytes or its metadata (mode, owner, time), with diffoscope's
# account of it when Debian's diffoscope is installed.
set -u
archive=$1 ref=$2
case $ref in *:*//* | docker-daemon:* | oci-archive:* | oci:* | dir:* | docker-archive:*) ;;
*) ref=docker://$ref ;; esac
command -v skopeo >/dev/null || { echo "verify-image: needs skopeo (apt-get install skopeo)" >&2; exit 2; }
ours=$(cat "$archive.digest") || exit 2
# shellcheck disable=SC2086 # SKOPEO_OPTS is a list of options
theirs=$(skopeo inspect ${SKOPEO_OPTS:-} --format '{{.Digest}}' "$ref") || {
	echo "verify-image: cannot read $ref" >&2
	exit 2
}
if [ "$ours" = "$theirs" ]; then
	echo "verify-image: same: $ref is $ours, built here from $(sed -n 's/^commit //p' \
		"$archive.d/rootfs/usr/share/doc/dstack-healthd/build-inputs")"
	exit 0
fi
echo "verify-image: DIFFERENT: $ref is $theirs, the build here $ours"
t=$(mktemp -d) && trap 'rm -rf "$t"' EXIT
# shellcheck disable=SC2086
skopeo copy -q ${SKOPEO_OPTS:-} "$ref" "oci:$t/theirs:x" || exit 2
python3 - "$archive.d/layout" "$t/theirs" "$t" <<'EOF'
import json, os, sys
def image(layout):
    idx = json.load(open(os.path.join(layout, "index.json")))
    blob = lambda d: os.path.join(layout, "blobs", "sha256", d.split(":")[1])
    man = json.load(open(blob(idx["manifests"][0]["digest"])))
    return json.load(open(blob(man["config"]["digest"]))), [blob(l["digest"]) for l in man["layers"]]
(c1, l1), (c2, l2) = image(sys.argv[1]), image(sys.argv[2])
for k in sorted(set(c1) | set(c2)):
    if c1.get(k) != c2.get(k):
        print("config: %s: here %s, there %s" % (k, json.dumps(c1.get(k)), json.dumps(c2.get(k))))
if len(l1) != len(l2):
    print("layers: here %d, there %d" % (len(l1), len(l2)))
with open(os.path.join(sys.argv[3], "layers"), "w") as f:
    f.write("%s\n%s\n" % (l1[-1], l2[-1]))
EOF
{ read -r ours_layer && read -r their_layer; } <"$t/layers"
mkdir "$t/a" "$t/b"
tar -C "$t/a" -xzf "$ours_layer" && tar -C "$t/b" -xzf "$their_layer" || exit 2
first=$( (cd "$t/a" && find . ; cd "$t/b" && find .) | LC_ALL=C sort | uniq -u | head -n 1)
if [ -n "$first" ]; then
	[ -e "$t/a/$first" ] && echo "only here: ${first#./}" || echo "only there: ${first#./}"
	exit 1
fi
while IFS= read -r f; do
	[ -f "$t/a/$f" ] || continue
	cmp -s "$t/a/$f" "$t/b/$f" && continue
	echo "differs: ${f#./}"
	if command -v diffoscope >/dev/null; then
		timeout 300 diffoscope --text - "$t/a/$f" "$t/b/$f" 2>&1 | head -n 40
	fi
	exit 1
done < <(cd "$t/a" && find . | LC_ALL=C sort)
# Same bytes: the metadata then (tar's listing, line by line).
diff <(tar -tvzf "$ours_layer" | LC_ALL=C sort -k6) <(tar -tvzf "$their_layer" | LC_ALL=C sort -k6) |
	head -n 4 | sed 's/^</here: /; s/^>/there:/'
exit 1
