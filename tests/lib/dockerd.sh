# SPDX-License-Identifier: Apache-2.0
# A private, real dockerd for the end-to-end tests (sourced after tap.sh).
#
# dockerd_start makes a short mktemp -d folder $DH_T (unix socket paths must
# fit in 108 bytes, and containerd puts its own sockets under the exec root),
# starts dockerd there with no bridge and no iptables (DH_DOCKERD_NET=bridge:
# Docker's default bridge and its iptables rules, for a test that runs in a
# network namespace of its own: see dh_net_args), exports DOCKER_HOST for
# /usr/bin/docker and docker-compose 1.29, and builds two images from the
# static busybox: healthd-test:1 (no healthcheck) and healthd-test-hc:1 (an
# image-level HEALTHCHECK, 1 s interval). It installs an EXIT trap that stops
# every process registered with dh_track, then the daemon, unmounts what the
# shims left under $DH_T and removes it. Containers need network_mode: none
# or a Compose network, but for DH_DOCKERD_NET=bridge.
#
# It installs nothing: when dockerd, the docker CLI, docker-compose or a
# static busybox is missing, the whole test is skipped.
#
# DH_COMPOSE_V2=1, set before dockerd_start: Compose v2 (`docker compose`,
# the Go plugin) instead of docker-compose 1.29, skipping the test where the
# CLI has no v2 plugin (Debian 12); dh_compose runs the one chosen.
#
# The agent helpers (healthd_*) run $HEALTHD_BUILD/dstack-healthd against it.

DH_DOCKER=/usr/bin/docker
DH_T=
DH_DOCKERD_PID=
DH_PIDS=
DH_STOPPED=

dh_now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

# dh_track PID: a process this test started, stopped by the EXIT trap.
dh_track() { DH_PIDS="$DH_PIDS $1"; }

# dh_child PID: PID is a live child of this shell. A pid that bash has
# already reaped may belong to someone else by now (and `jobs -p` still
# lists finished jobs, so it cannot tell).
dh_child() {
	local st
	st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1,2)
	[ -n "$st" ] && [ "${st% *}" != Z ] && [ "${st#* }" = "$$" ]
}

# dh_kill PID: TERM, wait up to 10 s, then KILL, and reap. Only a live child
# of this shell is signalled.
dh_kill() {
	dh_child "$1" || { wait "$1" 2>/dev/null; return 0; } # bounded: gone (not a live child)
	kill -TERM "$1" 2>/dev/null
	if ! wait_for 30 pid_gone "$1"; then
		diag "pid $1 ignored SIGTERM for 10 s, killing it"
		kill -KILL "$1" 2>/dev/null
	fi
	reap 10 "$1" 2>/dev/null
	return 0
}

dh_ping() {
	curl -fs --max-time 2 --unix-socket "$DH_T/docker.sock" http://d/_ping \
		>/dev/null 2>&1
}

dh_skip_unless_usable() {
	[ "$(id -u)" = 0 ] || skip_all "dockerd needs root"
	command -v dockerd >/dev/null 2>&1 || skip_all "dockerd is not installed"
	[ -x "$DH_DOCKER" ] || skip_all "$DH_DOCKER is not installed"
	if [ -n "${DH_COMPOSE_V2:-}" ]; then
		"$DH_DOCKER" compose version --short 2>/dev/null | grep -Eq '^v?2\.' ||
			skip_all "Compose v2 (docker compose) is not installed"
	else
		command -v docker-compose >/dev/null 2>&1 ||
			skip_all "docker-compose is not installed"
	fi
	command -v curl >/dev/null 2>&1 || skip_all "curl is not installed"
	command -v python3 >/dev/null 2>&1 || skip_all "python3 is not installed"
	[ -x /bin/busybox ] || skip_all "busybox-static is not installed"
	# The image has no libc: only a static busybox runs in it.
	if ldd /bin/busybox >/dev/null 2>&1; then
		skip_all "/bin/busybox is not static (install busybox-static)"
	fi
	if [ "${DH_DOCKERD_NET:-none}" = bridge ]; then
		command -v iptables >/dev/null 2>&1 || skip_all "iptables is not installed"
		dh_own_netns || skip_all "a bridge needs a network namespace of its own (tests/lib/netns.sh)"
	fi
}

# dh_own_netns: this shell is in another network namespace than PID 1's, so
# that what dockerd does to the network there (a bridge, iptables rules,
# forwarding) ends with the namespace and never reaches the machine's.
dh_own_netns() {
	[ "$(readlink /proc/self/ns/net)" != "$(readlink /proc/1/ns/net 2>/dev/null)" ]
}

# dh_net_args: dockerd's network flags. By default no bridge and no iptables
# rules, so that a test needs no namespace of its own. DH_DOCKERD_NET=bridge:
# Docker's defaults (docker0, iptables, published ports, host-gateway), as on
# a dstack guest; dh_skip_unless_usable has checked that the test runs in a
# network namespace of its own.
dh_net_args() {
	case ${DH_DOCKERD_NET:-none} in
	bridge) echo "--iptables=true" ;;
	*) echo "--bridge=none --iptables=false --ip-masq=false" ;;
	esac
}

# dockerd_launch: start dockerd on $DH_T (again, on the same data root, when
# it was halted) and wait for /_ping. Returns non-zero, with the log's tail
# as diagnostics, when it does not come up within 30 s.
dockerd_launch() {
	dockerd --host "unix://$DH_T/docker.sock" --data-root "$DH_T/data" \
		--exec-root "$DH_T/exec" --pidfile "$DH_T/docker.pid" \
		$(dh_net_args) ${DH_DOCKERD_ARGS:-} >>"$DH_T/dockerd.log" 2>&1 &
	DH_DOCKERD_PID=$!
	if ! wait_for 30 dh_ping_or_dead; then
		diag "dockerd did not answer /_ping within 30 s"
	fi
	if ! dh_ping; then
		tail -n 20 "$DH_T/dockerd.log" | sed 's/^/# dockerd: /'
		return 1
	fi
	return 0
}

dh_ping_or_dead() { dh_ping || pid_gone "$DH_DOCKERD_PID"; }

# dockerd_halt: stop the daemon only (containers and data stay), by its pid.
# A test may have left it SIGSTOPped.
dockerd_halt() {
	[ -n "$DH_DOCKERD_PID" ] || return 0
	kill -CONT "$DH_DOCKERD_PID" 2>/dev/null
	kill -TERM "$DH_DOCKERD_PID" 2>/dev/null
	dockerd_wait_exit
}

# dockerd_wait_exit: after a TERM was sent, wait up to 30 s, then KILL.
dockerd_wait_exit() {
	[ -n "$DH_DOCKERD_PID" ] || return 0
	if ! wait_for 30 pid_gone "$DH_DOCKERD_PID"; then
		diag "dockerd ignored SIGTERM for 30 s, killing it"
		kill -KILL "$DH_DOCKERD_PID" 2>/dev/null
	fi
	reap 10 "$DH_DOCKERD_PID" 2>/dev/null
	DH_DOCKERD_PID=
}

# dh_busybox_root DIR: a root filesystem of the static busybox and a link in
# /bin for each of its applets (sh, wget, httpd...).
dh_busybox_root() {
	mkdir -p "$1/bin" || return 1
	cp /bin/busybox "$1/bin/busybox" || return 1
	# A link for every applet but busybox itself, made by busybox in one
	# process (a fork per link costs seconds on a loaded machine).
	chroot "$1" /bin/busybox --install -s /bin || return 1
	[ -L "$1/bin/sh" ] && [ ! -L "$1/bin/busybox" ]
}

dh_make_images() {
	local r="$DH_T/rootfs"
	dh_busybox_root "$r" || return 1
	tar -C "$r" -c . | "$DH_DOCKER" import --change 'ENV PATH=/bin' - \
		healthd-test:1 >/dev/null || return 1
	tar -C "$r" -c . | "$DH_DOCKER" import --change 'ENV PATH=/bin' \
		--change 'HEALTHCHECK --interval=1s --timeout=30s --retries=100 CMD true' \
		- healthd-test-hc:1 >/dev/null || return 1
}

dockerd_start() {
	dh_skip_unless_usable
	DH_T=$(mktemp -d /tmp/dh.XXXXXX) || { echo "Bail out! mktemp"; exit 1; }
	python_first "$DH_T/.bin"
	# A fatal signal skips the EXIT trap: turn the likely ones into exits
	# (PIPE: the output went to a reader that stopped reading).
	trap dh_exit EXIT
	trap 'exit 143' TERM
	trap 'exit 130' INT
	trap 'exit 129' HUP
	trap 'exit 141' PIPE
	export DOCKER_HOST="unix://$DH_T/docker.sock"
	# docker-compose 1.29 must not pick up a user's config or context.
	export DOCKER_CONFIG="$DH_T/cli"
	unset DOCKER_CONTEXT DOCKER_TLS_VERIFY DOCKER_CERT_PATH
	mkdir -p "$DH_T/cli"
	if ! dockerd_launch; then
		echo "Bail out! dockerd did not start"
		exit 1
	fi
	if ! dh_make_images; then
		echo "Bail out! could not build the test images"
		exit 1
	fi
}

# The mounts a killed shim can leave behind, deepest first.
dh_mounts() {
	awk -v t="$DH_T" 'index($2, t "/") == 1 { print $2 }' /proc/mounts |
		sort -r
}

# Processes whose command line names $DH_T: dockerd, containerd, shims and
# agents started here. Prints their pids.
dh_leftovers() {
	# The pattern comes on stdin so that this grep does not match itself.
	printf '%s\n' "$DH_T/" | grep -lasFf - /proc/[0-9]*/cmdline | cut -d/ -f3
}

# dockerd_stop: everything this test started goes, in order: tracked
# processes, containers, the daemon, stray shims, mounts, the folder.
# Idempotent. Returns non-zero when something had to be forced or is left.
dockerd_stop() {
	local rc=0 p m left
	[ -n "$DH_T" ] && [ -z "$DH_STOPPED" ] || return 0
	DH_STOPPED=1
	for p in $DH_PIDS; do
		dh_kill "$p"
	done
	if [ -n "$DH_DOCKERD_PID" ] && dh_ping; then
		"$DH_DOCKER" ps -aq | xargs -r timeout 60 "$DH_DOCKER" rm -f \
			>/dev/null 2>&1 || { diag "docker rm -f failed"; rc=1; }
	fi
	dockerd_halt
	for p in $(dh_leftovers); do
		diag "left running after dockerd stopped: $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null)"
		kill -KILL "$p" 2>/dev/null
		rc=1
	done
	for m in $(dh_mounts); do
		diag "left mounted: $m"
		umount -l "$m" || rc=1
	done
	left=$(dh_leftovers)
	[ -z "$left" ] || { diag "still running: $left"; rc=1; }
	rm -rf "$DH_T" || rc=1
	[ ! -e "$DH_T" ] || rc=1
	return $rc
}

dh_exit() {
	local rc=$?
	dockerd_stop || true
	exit $rc
}

# --- runtime state, as dockerd reports it ---------------------------------

# dh_state NAME: "<State.Status> <State.Health.Status or ->".
dh_state() {
	"$DH_DOCKER" inspect -f \
		'{{.State.Status}} {{if .State.Health}}{{.State.Health.Status}}{{else}}-{{end}}' \
		"$1" 2>/dev/null
}

# dh_state_is NAME "STATUS HEALTH"
dh_state_is() { [ "$(dh_state "$1")" = "$2" ]; }

# dh_expect_state DEADLINE NAME "STATUS HEALTH": a TAP line, after waiting.
dh_expect_state() {
	wait_for "$1" dh_state_is "$2" "$3"
	is "$(dh_state "$2")" "$3" "runtime: $2 is $3"
}

# dh_compose PROJECT FILE ARGS...: docker-compose on a file of tests/e2e/compose
# (with DH_COMPOSE_V2, `docker compose`).
dh_compose() {
	local project=$1 file=$2
	shift 2
	if [ -n "${DH_COMPOSE_V2:-}" ]; then
		timeout 120 "$DH_DOCKER" compose --ansi never --progress plain \
			-p "$project" -f "$DH_COMPOSE_DIR/$file" "$@"
	else
		timeout 120 docker-compose --no-ansi -p "$project" \
			-f "$DH_COMPOSE_DIR/$file" "$@"
	fi
}

DH_COMPOSE_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/../e2e/compose" && pwd)

# --- the agent ------------------------------------------------------------

HEALTHD_BIN=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." &&
	pwd)/${HEALTHD_BUILD:-build}/dstack-healthd
HEALTHD_OK='{"healthy":true,"unhealthy":[],"error":""}'

healthd_app_compose() {
	[ -e "$DH_T/app-compose.json" ] && return 0
	printf '%s\n' '{"manifest_version":"3","name":"t","runner":"docker-compose","requirements":{"health_check":true}}' \
		>"$DH_T/app-compose.json"
}

# healthd_runtime FILE PROJECT: the runtime file, written atomically.
healthd_runtime() {
	printf '{"project":"%s","namespace":"","snapshotter":""}\n' "$2" >"$1.tmp" &&
		mv "$1.tmp" "$1"
}

# healthd_once RUNTIME_FILE: one verdict; sets HD_OUT (stdout) and HD_RC.
# stderr accumulates in $DH_T/hd-once.log (checked for sanitizer reports).
healthd_once() {
	healthd_app_compose
	HD_OUT=$(timeout 30 "$HEALTHD_BIN" --once \
		--compose-file "$DH_T/app-compose.json" --runtime-file "$1" \
		--docker-host "unix://$DH_T/docker.sock" 2>>"$DH_T/hd-once.log")
	HD_RC=$?
}

# healthd_start NAME RUNTIME_FILE [ARGS...]: a long-running agent listening
# on $DH_T/NAME.sock, logging to $DH_T/hd-NAME.log; its pid in HD_PID_<NAME>.
healthd_start() {
	local name=$1 rt=$2
	shift 2
	healthd_app_compose
	"$HEALTHD_BIN" --listen "unix:$DH_T/$name.sock" \
		--compose-file "$DH_T/app-compose.json" --runtime-file "$rt" \
		--docker-host "unix://$DH_T/docker.sock" "$@" \
		>"$DH_T/hd-$name.log" 2>&1 &
	eval "HD_PID_$name=$!"
	dh_track "$!"
	wait_for 30 test -S "$DH_T/$name.sock"
}

# healthd_query NAME: the JSON body of a Health call (empty on failure).
healthd_query() {
	curl -s --max-time 3 --unix-socket "$DH_T/$1.sock" -X POST \
		'http://x/prpc/v1/Health?json' -d '{}'
}

# healthd_query_is NAME WANT
healthd_query_is() { [ "$(healthd_query "$1")" = "$2" ]; }

# healthd_query_like NAME ERE
healthd_query_like() { healthd_query "$1" | grep -Eq -- "$2"; }

# healthd_stop NAME: stop one agent by its pid.
healthd_stop() {
	local pid
	eval "pid=\${HD_PID_$1:-}"
	[ -n "$pid" ] && dh_kill "$pid"
}

# healthd_sanitizer_clean: no ASan/UBSan report in any agent log.
healthd_sanitizer_clean() {
	! cat "$DH_T"/hd-*.log 2>/dev/null |
		grep -E 'ERROR: (Address|Leak)Sanitizer|runtime error:'
}

# dh_json EXPR: the Python expression EXPR over d, the JSON document on
# stdin; a string prints as is, anything else as compact JSON, and a document
# that is not JSON or lacks what EXPR reads prints "<unreadable>".
dh_json() {
	python3 -c 'import json, sys
try:
    d = json.load(sys.stdin)
    v = eval(sys.argv[1], {"d": d})
except Exception:
    v = "<unreadable>"
print(v if isinstance(v, str) else json.dumps(v, separators=(",", ":")))' "$1"
}

# The compact Health answer that a verdict with these entries must be,
# serialised by Python's json so that the quoting is not ours.
healthd_expect() { # healthd_expect true|false [NAME STATUS]...
	python3 -c 'import json, sys
a = sys.argv[2:]
print(json.dumps({"healthy": sys.argv[1] == "true",
                  "unhealthy": [{"name": a[i], "status": a[i + 1]}
                                for i in range(0, len(a), 2)],
                  "error": ""}, separators=(",", ":")))' "$@"
}
