# SPDX-License-Identifier: Apache-2.0
# The sidecar's image as `make image` builds it (docs/app-developer.md, "The
# sidecar's image"), loaded into the private dockerd of tests/lib/dockerd.sh
# (sourced after it): the archive's docker manifest is what Debian 12's `docker
# load` reads. Built from the plain build folder (build/), whichever build the
# test runs with: an ASan agent needs libraries the image does not carry.
#
# sidecar_build: `make image` alone. 0 built, with SIDECAR_DIGEST its
# manifest digest and SIDECAR_ARCHIVE the archive; 1 the build failed (its
# log's tail on stdout as TAP comments); 2 it could not be tried (no python3
# or gzip), the reason in SIDECAR_WHY.
# sidecar_image IMAGE: sidecar_build, then the archive loaded and tagged
# IMAGE (1 also when the load fails). The image goes with the private
# dockerd's data root.
SIDECAR_WHY=
SIDECAR_DIGEST=
SIDECAR_ARCHIVE=
sidecar_build() {
	command -v python3 >/dev/null 2>&1 || { SIDECAR_WHY="python3 is not installed"; return 2; }
	command -v gzip >/dev/null 2>&1 || { SIDECAR_WHY="gzip is not installed"; return 2; }
	if ! env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS make --no-print-directory image BUILD=build \
		>"$DH_T/build.log" 2>&1; then
		tail -n 20 "$DH_T/build.log" | sed 's/^/#   /'
		return 1
	fi
	SIDECAR_ARCHIVE=$(sed -n 's/^\(.*\.oci\.tar\): sha256:.*/\1/p' "$DH_T/build.log" | tail -n 1)
	SIDECAR_DIGEST=$(cat "$SIDECAR_ARCHIVE.digest")
}

sidecar_image() {
	local image=$1 loaded rc
	sidecar_build
	rc=$?
	[ $rc -eq 0 ] || return $rc
	loaded=$("$DH_DOCKER" load -i "$SIDECAR_ARCHIVE" 2>&1) || {
		printf '%s\n' "$loaded" | sed 's/^/#   /'
		return 1
	}
	"$DH_DOCKER" tag "${loaded##*Loaded image: }" "$image"
}

# sidecar_least_privilege CONTAINER GID: TAP points for the hardening the
# example Compose file gives the sidecar (issue 35), as the kernel and Docker
# see its running process: the image's user 65532 with the socket's group GID
# added, no capability and none to gain, a read-only root, no shell.
sidecar_least_privilege() {
	local c=$1 gid=$2 pid
	pid=$("$DH_DOCKER" inspect -f '{{.State.Pid}}' "$c")
	is "$(awk '/^Uid:/ { print $2, $3 }' "/proc/$pid/status")" "65532 65532" \
		"the sidecar runs as the image's user 65532, not root"
	like "$(awk '/^Groups:/' "/proc/$pid/status")" "[[:space:]]$gid( |\$)" \
		"...with the socket's group ($gid) added (group_add)"
	is "$(awk '/^CapEff:|^CapPrm:|^CapBnd:|^NoNewPrivs:/ { printf "%s%s ", $1, $2 }' "/proc/$pid/status")" \
		"CapPrm:0000000000000000 CapEff:0000000000000000 CapBnd:0000000000000000 NoNewPrivs:1 " \
		"no capability, none to gain (cap_drop ALL), no new privileges"
	is "$("$DH_DOCKER" inspect -f '{{.HostConfig.ReadonlyRootfs}}' "$c")" true "a read-only root"
	"$DH_DOCKER" exec "$c" /bin/sh -c true >/dev/null 2>&1
	ok $([ $? -ne 0 ]; echo $?) "no shell in the image"
}
