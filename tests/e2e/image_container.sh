#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The sidecar's image built as the app developer's guide says on a machine
# that is not Debian 12 (issue 45 §2; docs/app-developer.md, step 1): its
# `docker run ... debian:12 sh -c '...'` line, taken from the page and run
# as printed, in a checkout owned by another user (a host's checkout mounted
# into a root container, where git refuses a tree it does not own unless it
# is named safe). `debian:12` is a debootstrapped bookworm with the packages
# `build-aux/deps.sh image` names (tests/lib/rootfs.sh, preset
# bookworm-image), so that deps.sh finds them and the container needs no
# network. Checked: the build ends with the archive and its digest; the image
# names the commit (git read the checkout) and a clean tree; the build folder
# is given back to the checkout's owner; and, when the container's packages
# are the versions this machine built with (build-inputs alike), the digest
# is the one `make image` gives here: the same inputs, the same image.
# tests/run: once
cd "$(dirname "$0")/../.." || exit 1
# The root is made (debootstrap needs the network) before the test starts
# over in a network namespace of its own, for Docker's bridge.
if [ -z "${HEALTHD_NETNS:-}" ] && [ "$(id -u)" = 0 ] && command -v debootstrap >/dev/null 2>&1; then
	IMAGE_ROOT_TAR=$(ROOTFS_PRESET=bookworm-image && . tests/lib/rootfs.sh && rootfs_tarball 2>&1 | tail -n 3)
	export IMAGE_ROOT_TAR
fi
. tests/lib/netns.sh
. tests/lib/tap.sh
[ -n "$NETNS" ] || skip_all "needs a network namespace of its own (root, unshare, ip)"
[ -s "${IMAGE_ROOT_TAR:-}" ] || skip_all "no Debian 12 root with the image's packages: ${IMAGE_ROOT_TAR:-no debootstrap}"
. tests/lib/dockerd.sh
DH_DOCKERD_NET=bridge
dockerd_start

GUIDE=docs/app-developer.md
CMD=$(grep -E '^    docker run .* debian:12 ' "$GUIDE" | sed 's/^    //')
is "$(printf '%s\n' "$CMD" | grep -c .)" 1 "$GUIDE shows one docker run line for debian:12"
like "$CMD" "build-aux/deps.sh image && make image" "...which installs the image's list, then builds it"

"$DH_DOCKER" import "$IMAGE_ROOT_TAR" debian:12 >/dev/null 2>"$DH_T/import.err"
ok $? "debian:12 here: the bookworm root with the image's packages, imported" ||
	{ sed 's/^/# /' "$DH_T/import.err"; done_testing; exit 1; }

# The checkout: a clone of this commit with the work tree's changes over it
# (HOST, built here below), and a copy of it owned by someone else, as a host
# user's checkout is inside the container (SRC): one tree for both builds.
COMMIT=$(git rev-parse HEAD)
HOST=$DH_T/host
SRC=$DH_T/src
git clone -q "$PWD" "$HOST" && git ls-files -z -c -o --exclude-standard |
	xargs -0 cp --parents -t "$HOST" 2>/dev/null && cp -a "$HOST" "$SRC"
ok $? "a checkout of ${COMMIT:0:7} with the work tree's files"
chown -R 4321:4321 "$SRC"
like "$(cd "$SRC" && git rev-parse HEAD 2>&1)" "dubious ownership" \
	"git run by root refuses it unless told it is safe (the trap the guide's command falls in)"

(cd "$SRC" && timeout 900 bash -c "$CMD") >"$DH_T/build.log" 2>&1
rc=$?
is "$rc" 0 "the guide's command, as printed: exit 0" ||
	{ tail -n 20 "$DH_T/build.log" | sed 's/^/# /'; done_testing; exit 1; }
LAST=$(tail -n 1 "$DH_T/build.log")
like "$LAST" '^build/dstack-healthd-[0-9.]+\.oci\.tar: sha256:[0-9a-f]{64}$' "it ends with the archive and its digest: $LAST"
ARCHIVE=$SRC/${LAST%%:*}
D_CONTAINER=${LAST##*: }
is "$(stat -c %u:%g "$SRC/build" "$ARCHIVE" 2>&1 | sort -u)" "4321:4321" \
	"the build folder is given back to the checkout's owner"
BI=$ARCHIVE.d/rootfs/usr/share/doc/dstack-healthd/build-inputs
is "$(sed -n 's/^commit //p' "$BI")" "$COMMIT" "the image names the commit: git read the checkout"
like "$(sed -n 's/^tree //p' "$BI")" '^(clean|differs from the commit in [0-9]+ file\(s\))$' \
	"...and says whether the tree was the commit's"

# The same tree built here, by `make image` as this machine runs it.
(cd "$HOST" && env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS make --no-print-directory image) >"$DH_T/host.log" 2>&1
ok $? "make image here, on the same tree" || tail -n 10 "$DH_T/host.log" | sed 's/^/# /'
D_HOST=$(tail -n 1 "$DH_T/host.log" | sed -n 's/.*: \(sha256:[0-9a-f]*\)$/\1/p')
HBI=$HOST/${LAST%%:*}.d/rootfs/usr/share/doc/dstack-healthd/build-inputs
if cmp -s "$BI" "$HBI"; then
	is "$D_CONTAINER" "$D_HOST" "the same inputs (build-inputs alike): the same digest in the container as here"
else
	# debootstrap takes the suite's packages, without its point updates.
	diag "the container's packages are not this machine's; the digests are not compared:"
	diff "$HBI" "$BI" | grep '^[<>]' | head -n 20 | sed 's/^/#   /'
	is "$(grep -v '^[a-z0-9.+:-]* [^ ]*$' "$BI" | grep -vE '^(rev|commit|tree|arch) ')" "" \
		"...build-inputs lists only packages at their versions"
fi
"$DH_DOCKER" rmi -f debian:12 >/dev/null 2>&1
done_testing
