# SPDX-License-Identifier: Apache-2.0
# Debian's docker-registry on loopback, and images pushed to it as they are
# (skopeo), for tests that pull by digest (sourced after tap.sh). The
# registry speaks plain HTTP: skopeo is told so, and Docker takes any
# registry on 127.0.0.0/8 (localhost too) for an insecure one on its own.
#
# registry_start DIR: the registry on a free port of 127.0.0.1, its blobs
# and log under DIR; sets REGISTRY_PORT, REGISTRY (127.0.0.1:PORT) and
# REGISTRY_PID (the caller stops it: it is its child). Returns 0 once /v2/
# answers, 1 when it does not within 30 s, 2 when skopeo or docker-registry
# is missing (the reason in REGISTRY_WHY).
REGISTRY_WHY=
REGISTRY_PORT=
REGISTRY=
REGISTRY_PID=
REGISTRY_DIR=
registry_start() {
	local bin
	bin=$(command -v docker-registry 2>/dev/null)
	if ! command -v skopeo >/dev/null 2>&1 || [ -z "$bin" ]; then
		REGISTRY_WHY="skopeo or docker-registry is not installed (build-aux/deps.sh test installs both)"
		return 2
	fi
	REGISTRY_DIR=$1
	mkdir -p "$REGISTRY_DIR/blobs" || return 1
	REGISTRY_PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	REGISTRY=127.0.0.1:$REGISTRY_PORT
	printf 'version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: %s\nhttp:\n  addr: %s\n' \
		"$REGISTRY_DIR/blobs" "$REGISTRY" >"$REGISTRY_DIR/registry.yml"
	"$bin" serve "$REGISTRY_DIR/registry.yml" >"$REGISTRY_DIR/registry.log" 2>&1 &
	REGISTRY_PID=$!
	if ! wait_for 30 registry_up; then
		tail -n 5 "$REGISTRY_DIR/registry.log" | sed 's/^/# registry: /'
		return 1
	fi
}

registry_up() { curl -fs --max-time 2 "http://$REGISTRY/v2/" >/dev/null; }

# registry_push SOURCE NAME:TAG: skopeo copy of SOURCE (a skopeo transport
# and reference: oci-archive:FILE, docker-daemon:IMAGE) to the registry as
# is. Its output on failure as TAP comments.
registry_push() {
	if ! skopeo copy -q --dest-tls-verify=false "$1" "docker://$REGISTRY/$2" \
		>"$REGISTRY_DIR/push.log" 2>&1; then
		sed 's/^/# /' "$REGISTRY_DIR/push.log"
		return 1
	fi
}

# registry_digest NAME:TAG: the manifest digest the registry serves for it.
registry_digest() {
	skopeo inspect --tls-verify=false --format '{{.Digest}}' "docker://$REGISTRY/$1" 2>&1
}
