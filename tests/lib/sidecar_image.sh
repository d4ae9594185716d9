# SPDX-License-Identifier: Apache-2.0
# The sidecar's image (packaging/container/Dockerfile) on the private dockerd
# of tests/lib/dockerd.sh (sourced after it and tests/lib/rootfs.sh): the
# base is a bare Debian 12 made here (debootstrap, cached per day by
# rootfs.sh, slimmed and `docker import`ed under the Dockerfile's base tag:
# no registry), then `docker build` with host networking so that apt reaches
# the mirror the root was made from. The legacy builder: BuildKit needs the
# buildx plugin, which Debian 12's docker.io does not ship.
#
# sidecar_image IMAGE: 0 built; 1 the build failed (its log's tail on
# stdout as TAP comments); 2 it could not be tried (no root for the base, no
# mirror reachable), the reason in SIDECAR_WHY. The image and the base go
# with the private dockerd's data root.
SIDECAR_WHY=
sidecar_image() {
	local image=$1 tar base
	command -v debootstrap >/dev/null 2>&1 || { SIDECAR_WHY="debootstrap is not installed"; return 2; }
	if ! tar=$(ROOTFS_FLAVOR=minbase ROOTFS_INCLUDE= rootfs_tarball 2>"$DH_T/rootfs.err"); then
		SIDECAR_WHY="no Debian 12 root: $(tr '\n' ' ' <"$DH_T/rootfs.err")"
		return 2
	fi
	base=$(sed -n 's/^ARG BASE=//p' packaging/container/Dockerfile)
	# Slimmed as Debian's -slim images are: no package lists or cached
	# debs (apt-get update fetches what the build needs), no locales,
	# documentation or manual pages.
	mkdir -p "$DH_T/base"
	tar -C "$DH_T/base" -xf "$tar" --exclude='./var/lib/apt/lists/*' \
		--exclude='./var/cache/apt/*' --exclude='./usr/share/locale/*' \
		--exclude='./usr/share/doc/*' --exclude='./usr/share/man/*' 2>"$DH_T/import.err" &&
		tar -C "$DH_T/base" --numeric-owner -c . |
		"$DH_DOCKER" import - "$base" >/dev/null 2>>"$DH_T/import.err"
	local rc=$?
	rm -rf "$DH_T/base"
	if [ "$rc" -ne 0 ]; then
		SIDECAR_WHY="docker import of the root failed: $(cat "$DH_T/import.err")"
		return 2
	fi
	DOCKER_BUILDKIT=0 timeout 1200 "$DH_DOCKER" build --network host \
		-f packaging/container/Dockerfile -t "$image" . >"$DH_T/build.log" 2>&1 && return 0
	if grep -Eq "Temporary failure resolving|Could not resolve|Failed to fetch|Unable to connect" \
		"$DH_T/build.log"; then
		SIDECAR_WHY="the image build could not reach the Debian mirror: $(grep -Em1 'resolv|fetch|connect' "$DH_T/build.log")"
		return 2
	fi
	tail -n 20 "$DH_T/build.log" | sed 's/^/#   /'
	return 1
}
