# A Debian 12 root with systemd as PID 1, for tests that need a real systemd
# (sourced). debootstrap takes most of a minute, so the tarball is cached per
# machine under $ROOTFS_CACHE, keyed by the day and the package list; a
# concurrent run waits on the lock rather than building it twice.
ROOTFS_CACHE=${ROOTFS_CACHE:-/var/cache/dstack-healthd-tests}
ROOTFS_SUITE=bookworm
ROOTFS_MIRROR=${ROOTFS_MIRROR:-http://deb.debian.org/debian}
# systemd to boot, curl to ask the agent, and the agent's shared libraries
# (the container has no network, so dpkg -i cannot fetch them).
ROOTFS_INCLUDE=systemd,systemd-sysv,dbus,curl,ca-certificates,libmicrohttpd12,libprotobuf-c1,libmbedtls14,libmbedx509-1,libmbedcrypto7,libsystemd0

# rootfs_tarball: prints the path of the cached tarball, building it first if
# today's is missing. Returns non-zero (with the reason on stderr) if
# debootstrap fails.
rootfs_tarball() {
	local key tar tmp rc
	key=$(printf '%s %s' "$ROOTFS_SUITE" "$ROOTFS_INCLUDE" | sha256sum | cut -c1-12)
	tar="$ROOTFS_CACHE/$ROOTFS_SUITE-systemd-$(date +%Y%m%d)-$key.tar"
	mkdir -p "$ROOTFS_CACHE" || return 1
	(
		flock 9 || exit 1
		[ -s "$tar" ] && exit 0
		tmp=$(mktemp -d "$ROOTFS_CACHE/build.XXXXXX") || exit 1
		trap 'rm -rf "$tmp"' EXIT
		if ! debootstrap --variant=minbase --include="$ROOTFS_INCLUDE" \
			"$ROOTFS_SUITE" "$tmp/root" "$ROOTFS_MIRROR" >"$tmp/log" 2>&1; then
			echo "debootstrap failed; last lines:" >&2
			tail -n 5 "$tmp/log" >&2
			exit 1
		fi
		# Older days' tarballs are superseded by this one.
		find "$ROOTFS_CACHE" -maxdepth 1 -name "$ROOTFS_SUITE-systemd-*.tar" -delete
		tar -C "$tmp/root" --numeric-owner -cf "$tmp/root.tar" . &&
			mv "$tmp/root.tar" "$tar"
	) 9>"$ROOTFS_CACHE/.lock"
	rc=$?
	[ "$rc" -eq 0 ] || return "$rc"
	printf '%s\n' "$tar"
}
