# SPDX-License-Identifier: Apache-2.0
# A Debian 12 root with systemd as PID 1, for tests that need a real systemd
# (sourced). debootstrap takes minutes on a fresh machine, so the tarball is
# cached per machine under $ROOTFS_CACHE, keyed by the day and the package
# list; a concurrent run waits on the lock rather than building it twice.
# A caller that wants another root names its preset (ROOTFS_PRESET, below)
# before sourcing this file, so that tests/lib/prefetch_roots.sh, which
# tests/run starts in the background, builds the very same tarball.
case "${ROOTFS_PRESET:-systemd}" in
systemd) ;;
trixie-build) # Debian 13's toolchain and libraries (tests/e2e/trixie.sh)
	ROOTFS_SUITE=trixie
	ROOTFS_MIRROR_SUITE=bookworm
	ROOTFS_FLAVOR=build
	ROOTFS_INCLUDE=gcc,make,pkg-config,libmicrohttpd-dev,libprotobuf-c-dev,protobuf-c-compiler,libjsmn-dev,libmbedtls-dev,libsystemd-dev,curl,python3,protobuf-compiler,procps,iproute2,openssl
	# and its Docker 26 and Compose v2 (tests/e2e/compose_v2.sh, run there):
	# debootstrap takes no Recommends, so the CLI is named; the images are
	# made of busybox-static.
	ROOTFS_INCLUDE=$ROOTFS_INCLUDE,docker.io,docker-cli,docker-compose,busybox-static
	;;
bookworm-image) # `debian:12` with what `build-aux/deps.sh image` installs
	# (tests/e2e/image_container.sh): the container has no network.
	ROOTFS_FLAVOR=image
	ROOTFS_INCLUDE=$(build-aux/deps.sh --list image | tr ' ' ',')
	;;
*) echo "tests/lib/rootfs.sh: unknown ROOTFS_PRESET ${ROOTFS_PRESET}" >&2 ;;
esac
ROOTFS_CACHE=${ROOTFS_CACHE:-/var/cache/dstack-healthd-tests}
ROOTFS_SUITE=${ROOTFS_SUITE:-bookworm}
# The mirror is this machine's own (rootfs_mirror): the URI apt's sources give
# for ROOTFS_MIRROR_SUITE, which may be another suite of the same archive (a
# bookworm machine's sources name no trixie); ROOTFS_MIRROR overrides.
ROOTFS_MIRROR=${ROOTFS_MIRROR:-}
ROOTFS_MIRROR_SUITE=${ROOTFS_MIRROR_SUITE:-$ROOTFS_SUITE}

# systemd to boot, curl to ask the agent, and the agent's shared libraries
# (the container has no network, so dpkg -i cannot fetch them).
ROOTFS_INCLUDE=${ROOTFS_INCLUDE-systemd,systemd-sysv,dbus,curl,ca-certificates,libmicrohttpd12,libprotobuf-c1,libmbedtls14,libmbedx509-1,libmbedcrypto7,libsystemd0}
# Names the tarball: a caller that sets another ROOTFS_INCLUDE (the
# container image's base: ROOTFS_FLAVOR=minbase ROOTFS_INCLUDE=) keeps its
# own cache beside this one.
ROOTFS_FLAVOR=${ROOTFS_FLAVOR:-systemd}

# rootfs_mirror: prints the first URI apt's sources give for the suite's main
# component: one-line sources.list entries ("deb [opts] URI SUITE COMP...")
# and deb822 .sources stanzas (Types/URIs/Suites/Components) alike.
rootfs_mirror() {
	local f
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[ -r "$f" ] || continue
		sed -e 's/#.*//' -e 's/\[[^]]*\]//' "$f" | awk -v s="$ROOTFS_MIRROR_SUITE" '
			$1 == "deb" && $3 == s { for (i = 4; i <= NF; i++) if ($i == "main") { print $2; exit } }'
	done
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -r "$f" ] || continue
		awk -v s="$ROOTFS_MIRROR_SUITE" '
			function has(list, w,   n, a, i) { n = split(list, a, /[ \t]+/); for (i = 1; i <= n; i++) if (a[i] == w) return 1; return 0 }
			function stanza() {
				if (has(t, "deb") && has(su, s) && has(c, "main") && tolower(en) != "no" && u != "") {
					split(u, a, /[ \t]+/); print a[1]; exit
				}
				t = u = su = c = en = ""
			}
			/^#/ { next }
			/^[ \t]*$/ { stanza(); next }
			{ k = tolower($0); sub(/:.*/, "", k); v = $0; sub(/^[^:]*:[ \t]*/, "", v) }
			k == "types" { t = v } k == "uris" { u = v } k == "suites" { su = v }
			k == "components" { c = v } k == "enabled" { en = v }
			END { stanza() }' "$f"
	done | head -n1
}

# rootfs_tarball: prints the path of the cached tarball, building it first if
# today's is missing. Returns non-zero (with the reason on stderr) if
# debootstrap fails.
rootfs_tarball() {
	local key tar tmp rc mirror
	key=$(printf '%s %s' "$ROOTFS_SUITE" "$ROOTFS_INCLUDE" | sha256sum | cut -c1-12)
	tar="$ROOTFS_CACHE/$ROOTFS_SUITE-$ROOTFS_FLAVOR-$(date +%Y%m%d)-$key.tar"
	mkdir -p "$ROOTFS_CACHE" || return 1
	# A finished tarball appears by a rename: it needs no lock, and another
	# flavour's build holding the lock must not make this one wait.
	if [ -s "$tar" ]; then
		printf '%s\n' "$tar"
		return 0
	fi
	(
		flock 9 || exit 1
		[ -s "$tar" ] && exit 0
		mirror=${ROOTFS_MIRROR:-$(rootfs_mirror)}
		if [ -z "$mirror" ]; then
			echo "apt's sources name no $ROOTFS_MIRROR_SUITE main; set ROOTFS_MIRROR" >&2
			exit 1
		fi
		tmp=$(mktemp -d "$ROOTFS_CACHE/build.XXXXXX") || exit 1
		trap 'rm -rf "$tmp"' EXIT
		if ! debootstrap --variant=minbase ${ROOTFS_INCLUDE:+--include="$ROOTFS_INCLUDE"} \
			"$ROOTFS_SUITE" "$tmp/root" "$mirror" >"$tmp/log" 2>&1; then
			echo "debootstrap failed; last lines:" >&2
			tail -n 5 "$tmp/log" >&2
			exit 1
		fi
		rm -f "$tmp"/root/var/cache/apt/archives/*.deb # installed already

		# Older days' tarballs are superseded by this one.
		find "$ROOTFS_CACHE" -maxdepth 1 -name "$ROOTFS_SUITE-$ROOTFS_FLAVOR-*.tar" -delete
		tar -C "$tmp/root" --numeric-owner -cf "$tmp/root.tar" . &&
			mv "$tmp/root.tar" "$tar"
	) 9>"$ROOTFS_CACHE/.lock"
	rc=$?
	[ "$rc" -eq 0 ] || return "$rc"
	printf '%s\n' "$tar"
}

# rootfs_pivot ROOT COMMAND...: runs COMMAND with ROOT as the root of this
# mount namespace, as a container's is, with what a dockerd run there needs
# of the machine: /sys, whose /sys/fs/cgroup holds this kernel's hierarchies
# as they are mounted here (v1, v2 or both: dockerd makes each container's
# cgroup there; a root cannot tell which to mount, a bind brings what is
# there). debootstrap made ROOT's /dev nodes already.
#
# pivot_root, not chroot: a chroot leaves the machine's / the root of the
# namespace, and so of every mount namespace runc copies from it; a process
# that joins a container's (`docker exec`, and so every healthcheck) is put
# at that root, and ran in the machine's / instead of the container's (seen:
# a healthcheck's `test -e /ok` read the machine's /ok). dockerd also makes
# / a slave mount when it unpacks an image, which fails where / is a mere
# folder: ROOT is bound onto itself first.
#
# To be called in a mount namespace of the caller's own (unshare --mount,
# whose mounts are private; refused in the machine's): the binds end with
# it, and the machine's / is detached from it before COMMAND runs.
rootfs_pivot() {
	local r=$1
	shift
	if [ "$(readlink /proc/self/ns/mnt)" = "$(readlink /proc/1/ns/mnt)" ]; then
		echo "rootfs_pivot: not in a mount namespace of its own" >&2
		return 1
	fi
	# Recursive: unshare --mount-proc has mounted ROOT/proc already.
	mount --rbind "$r" "$r" && mount --rbind /sys "$r/sys" &&
		mkdir -p "$r/.oldroot" && cd "$r" && pivot_root . .oldroot &&
		umount -l /.oldroot && rmdir /.oldroot || return 1
	exec "$@"
}
