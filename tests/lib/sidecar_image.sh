# SPDX-License-Identifier: Apache-2.0
# The sidecar's image as `make image` builds it (README, "The sidecar's
# image"), loaded into the private dockerd of tests/lib/dockerd.sh (sourced
# after it): the archive's docker manifest is what Debian 12's `docker load`
# reads. Built from the plain build folder (build/), whichever build the
# test runs with: an ASan agent needs libraries the image does not carry.
#
# sidecar_image IMAGE: 0 loaded and tagged IMAGE, with SIDECAR_DIGEST its
# manifest digest and SIDECAR_ARCHIVE the archive; 1 the build or the load
# failed (its log's tail on stdout as TAP comments); 2 it could not be tried
# (no python3 or gzip), the reason in SIDECAR_WHY. The image goes with the
# private dockerd's data root.
SIDECAR_WHY=
SIDECAR_DIGEST=
SIDECAR_ARCHIVE=
sidecar_image() {
	local image=$1 loaded
	command -v python3 >/dev/null 2>&1 || { SIDECAR_WHY="python3 is not installed"; return 2; }
	command -v gzip >/dev/null 2>&1 || { SIDECAR_WHY="gzip is not installed"; return 2; }
	if ! env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS make --no-print-directory image BUILD=build \
		>"$DH_T/build.log" 2>&1; then
		tail -n 20 "$DH_T/build.log" | sed 's/^/#   /'
		return 1
	fi
	SIDECAR_ARCHIVE=$(sed -n 's/^\(.*\.oci\.tar\): sha256:.*/\1/p' "$DH_T/build.log" | tail -n 1)
	SIDECAR_DIGEST=$(cat "$SIDECAR_ARCHIVE.digest")
	loaded=$("$DH_DOCKER" load -i "$SIDECAR_ARCHIVE" 2>&1) || {
		printf '%s\n' "$loaded" | sed 's/^/#   /'
		return 1
	}
	"$DH_DOCKER" tag "${loaded##*Loaded image: }" "$image"
}
