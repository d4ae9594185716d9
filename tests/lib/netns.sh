# SPDX-License-Identifier: Apache-2.0
# Runs the sourcing test again in a private network namespace of its own when
# it may make one (root, unshare, ip), with only loopback up; NETNS is 1 there
# and empty where it could not (the points that need one are skipped then).
# Sourced first, before anything is started: the script starts over.
if [ -z "${HEALTHD_NETNS:-}" ] && [ "$(id -u)" = 0 ] && command -v ip >/dev/null &&
	unshare -n true 2>/dev/null; then
	exec env HEALTHD_NETNS=1 unshare -n -- "$0" "$@"
fi
NETNS=
[ -n "${HEALTHD_NETNS:-}" ] && ip link set lo up && NETNS=1
