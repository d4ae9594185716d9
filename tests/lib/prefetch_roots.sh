#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Builds the cached debootstrap roots (tests/lib/rootfs.sh) that
# tests/e2e/systemd.sh and tests/e2e/trixie.sh will ask for, ahead of them:
# tests/run starts it in the background as a round begins, so that the
# minutes of downloading and unpacking overlap the tests before them instead
# of adding to the suite's time on a fresh machine. They find the tarball
# made, or wait on the cache's lock while it is being made; if this fails,
# they try again themselves and say why. Prints one line a root, in the
# order they are used (image_container.sh's first). Only what those scripts
# would use is built: as root, with debootstrap; the root image_container.sh
# builds the image in and the systemd root only when dockerd is installed,
# the Debian 13 one unless HEALTHD_TRIXIE=0.
set -u
cd "$(dirname "$0")/../.."
[ "$(id -u)" = 0 ] && command -v debootstrap >/dev/null 2>&1 || {
	echo "prefetch: not root or no debootstrap: nothing to build"
	exit 0
}
presets=()
command -v dockerd >/dev/null 2>&1 && presets+=(bookworm-image systemd)
[ "${HEALTHD_TRIXIE:-1}" = 0 ] || presets+=(trixie-build)
rc=0
for p in "${presets[@]}"; do
	t0=$SECONDS
	if tar=$(ROOTFS_PRESET=$p && . tests/lib/rootfs.sh && rootfs_tarball 2>&1); then
		echo "prefetch: $p root ready in $((SECONDS - t0)) s ($(basename "$(printf '%s\n' "$tar" | tail -n 1)"))"
	else
		echo "prefetch: $p root failed after $((SECONDS - t0)) s: $(printf '%s' "$tar" | tail -n 3 | paste -sd' ')"
		rc=1
	fi
done
exit $rc
