# SPDX-License-Identifier: Apache-2.0
# Rollouts through a stand-in of the gateway (sourced after tap.sh and
# dockerd.sh, once dockerd_start has run): tests/e2e/rollout.sh proves them
# at shortened timings, bench/rollout.sh measures them at upstream's.
#
# Three instances of one app, each a Compose project (roN, file
# tests/e2e/compose/rollout.yml) of a proxy container in front of a backend
# (tests/fakes/rollout_app.c, built static here), on its own loopback
# address $RO_NET.1N (host networking): the proxy on :8080, the backend on
# :9000, the instance's Health on :8090. Two gateways of two nodes each
# (tests/fakes/gateway.py), one with connect_top_n 3 (group n3, nodes
# $RO_NET.2 and .3), one with connect_top_n 1 (group n1, .4 and .5), both
# polling every instance; clients (tests/fakes/rollout_clients.py) through
# both all the time. What answers Health on :8090 is the phase's:
#   agent     this agent on the host, Docker mode on its own project, and the
#             drain unit's commands around a restart;
#   sidecar   this agent as a service of the project (verdict file), read by
#             a stand-in of upstream's guest agent (tests/fakes/guest_health.py);
#   upstream  the stand-in of upstream's guest agent judging Docker itself.
#
# Timings, set by the caller before ro_setup: RO_INTERVAL, RO_TIMEOUT,
# RO_THRESHOLD, RO_CACHE (the gateway's), RO_REREAD (the guest agent's
# timer), RO_LAME_MS (how long the backend serves after SIGTERM), RO_GRACE
# (its stop_grace_period), RO_HC (the Docker healthchecks' interval),
# RO_STOP_HOLD (the sidecar's stop_hold: the gateway's interval + timeout);
# RO_FRESH, the clients' fresh connections a second (30); RO_RETRY_MS, how
# long the app's proxy retries a backend that is away (0, never: see
# ro_retrying).

RO_APP=app
RO_HOST=$RO_APP-8080.gw
RO_IDS="1 2 3"
RO_PHASE=
RO_TAG=1
RO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
RO_FAKES=$RO_ROOT/tests/fakes

ro_now() { echo $(( $(date +%s%N) / 1000000 )); }

# A /24 of loopback of this run's own (another test may use 127.0.0.x), its
# addresses checked free on the ports used here.
ro_pick_net() {
	local try
	for try in 1 2 3 4 5 6 7 8; do
		RO_NET=127.$((RANDOM % 120 + 100)).$((RANDOM % 200 + 20))
		python3 - "$RO_NET" <<'EOF' && return 0
import socket, sys
for h in (2, 3, 4, 5, 11, 12, 13):
    for p in (8080, 8090, 8443, 8444, 9000):
        s = socket.socket()
        try:
            s.bind(("%s.%d" % (sys.argv[1], h), p))
        except OSError:
            sys.exit(1)
        finally:
            s.close()
EOF
	done
	return 1
}

# The app's image, twice (tags 1 and 2: a recreate has a new image to take),
# and the sidecar's: this build's agent and the libraries ldd names, without
# apt or a registry.
ro_images() {
	local r=$DH_T/rootfs t lib
	cc -static -O2 -Wall -o "$r/app" "$RO_FAKES/rollout_app.c" 2>"$DH_T/cc.log" || {
		sed 's/^/# /' "$DH_T/cc.log"
		return 1
	}
	for t in 1 2; do
		tar -C "$r" -c . | "$DH_DOCKER" import --change 'ENV PATH=/bin' \
			--change "ENV TAG=$t" - "rollout-app:$t" >/dev/null || return 1
	done
	r=$DH_T/sc-root
	mkdir -p "$r/usr/sbin" "$r/run" "$r/tmp" "$r/etc" "$r/verdict" "$r/dstack/.host-shared"
	cp "$HEALTHD_BIN" "$r/usr/sbin/dstack-healthd" || return 1
	for lib in $(ldd "$HEALTHD_BIN" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }'); do
		mkdir -p "$r$(dirname "$lib")" && cp -L "$lib" "$r$lib" || return 1
	done
	# As the image of `make image` sets them (build-aux/image.py).
	tar -C "$r" -c . | "$DH_DOCKER" import \
		--change 'ENV DSTACK_HEALTHD_LISTEN=' --change 'ENV DSTACK_HEALTHD_VERDICT_FILE=/verdict/status' \
		--change 'ENV LD_LIBRARY_PATH=/lib/x86_64-linux-gnu:/usr/lib/x86_64-linux-gnu' \
		--change 'ENTRYPOINT ["/usr/sbin/dstack-healthd"]' - rollout-healthd:1 >/dev/null
}

# ro_compose N ARGS...: docker-compose on instance N's project, with the
# sidecar's service in the sidecar phase.
ro_compose() {
	local n=$1 files=(-f "$DH_COMPOSE_DIR/rollout.yml")
	shift
	[ "$RO_PHASE" = sidecar ] && files+=(-f "$DH_COMPOSE_DIR/rollout-sidecar.yml")
	RO_ADDR=$RO_NET.1$n RO_ID=i$n RO_TAG=$RO_TAG RO_LAME_MS=$RO_LAME_MS RO_GRACE=$RO_GRACE \
		RO_HC=$RO_HC RO_SOCK=$DH_T/docker.sock RO_VERDICT=$DH_T/verdict$n \
		RO_APP_COMPOSE=$DH_T/sidecar-app.json RO_SC_GRACE=${RO_SC_GRACE:-30s} \
		RO_STOP_HOLD=${RO_STOP_HOLD:-7} RO_RETRY_MS=${RO_RETRY_MS:-0} \
		timeout 300 docker-compose --no-ansi -p "ro$n" "${files[@]}" "$@" \
		>>"$DH_T/compose$n.log" 2>&1
}

ro_compose_all() { # in parallel, on every instance
	local n pids=() rc=0 p
	for n in $RO_IDS; do
		ro_compose "$n" "$@" &
		pids+=($!)
	done
	for p in "${pids[@]}"; do wait "$p" || rc=1; done # bounded: timeout (ro_compose)
	return $rc
}

ro_setup() {
	ro_pick_net || { diag "no free loopback /16 found"; return 1; }
	ro_images || { diag "could not build the images"; return 1; }
	printf '%s\n' '{"manifest_version":"3","name":"ro","runner":"docker-compose","requirements":{"health_check":true}}' \
		>"$DH_T/app.json"
	printf '%s\n' '{"manifest_version":"3","name":"ro","runner":"docker-compose","requirements":{"health_check":true,"health_status_file":"/dstack/healthd/status"}}' \
		>"$DH_T/sidecar-app.json"
	local n g
	for n in $RO_IDS; do
		healthd_runtime "$DH_T/rt$n.json" "ro$n"
		mkdir -p "$DH_T/verdict$n"
	done
	ro_compose_all up -d || { diag "docker-compose up failed"; tail -n 5 "$DH_T"/compose*.log; return 1; }
	# The gateways: n3 on .2 and .3, n1 on .4 and .5.
	for g in 2 3 4 5; do
		python3 "$RO_FAKES/gateway.py" --listen "$RO_NET.$g:8443" --control "$RO_NET.$g:8444" \
			--app "$RO_APP" --instance "i1=$RO_NET.11" --instance "i2=$RO_NET.12" --instance "i3=$RO_NET.13" \
			--interval "$RO_INTERVAL" --timeout "$RO_TIMEOUT" --failure-threshold "$RO_THRESHOLD" \
			--cache-top-n "$RO_CACHE" --connect-top-n "$([ $g -le 3 ] && echo 3 || echo 1)" \
			--name "gw$g" --log "$DH_T/gw$g.log" >/dev/null 2>"$DH_T/gw$g.err" &
		dh_track $!
	done
	for g in 2 3 4 5; do
		wait_for 30 ro_gw_state "$g" || { diag "gateway node $g did not start"; cat "$DH_T/gw$g.err"; return 1; }
	done
}

ro_gw_state() { curl -s --max-time 3 "http://$RO_NET.$1:8444/state"; }

# ro_gw_healthy N: every node has instance N healthy.
ro_gw_healthy() {
	local g
	for g in 2 3 4 5; do
		ro_gw_state "$g" | grep -q "\"i$1\": \"healthy\"" || return 1
	done
}
ro_gw_all_healthy() { ro_gw_healthy 1 && ro_gw_healthy 2 && ro_gw_healthy 3; }

# ro_bump N: instance N's WireGuard handshake is now the freshest on every
# node; ro_top_is N: both connect_top_n 1 nodes route the app to N.
ro_bump() {
	local g
	for g in 2 3 4 5; do
		curl -s --max-time 3 -X POST "http://$RO_NET.$g:8444/handshake?id=i$1" >/dev/null || return 1
	done
}
ro_top_is() {
	local g
	for g in 4 5; do
		ro_gw_state "$g" | grep -q "\"top\": \[\"i$1\"\]" || return 1
	done
}

# --- what answers Health ----------------------------------------------------

RO_HEALTH_PIDS=()
ro_health_stop() {
	local p
	for p in "${RO_HEALTH_PIDS[@]}"; do dh_kill "$p"; done
	RO_HEALTH_PIDS=()
}

# ro_phase agent|sidecar|upstream: starts what answers Health in that phase
# (the previous phase's stopped), and brings the projects to its shape.
ro_phase() {
	local n src
	ro_health_stop
	RO_PHASE=$1
	ro_compose_all up -d --remove-orphans || return 1
	for n in $RO_IDS; do
		case $RO_PHASE in
		agent)
			"$HEALTHD_BIN" --listen "$RO_NET.1$n:8090" --compose-file "$DH_T/app.json" \
				--runtime-file "$DH_T/rt$n.json" --docker-host "unix://$DH_T/docker.sock" \
				--control-socket "$DH_T/ctl$n.sock" >>"$DH_T/hd-$n.log" 2>&1 &
			;;
		*)
			if [ "$RO_PHASE" = sidecar ]; then
				src=(--status-file "$DH_T/verdict$n/status")
			else
				src=(--docker "$DH_T/docker.sock" --project "ro$n")
			fi
			python3 "$RO_FAKES/guest_health.py" --listen "$RO_NET.1$n:8090" "${src[@]}" \
				--interval "$RO_REREAD" --log "$DH_T/guest$n.log" >/dev/null 2>>"$DH_T/guest$n.err" &
			;;
		esac
		dh_track $!
		RO_HEALTH_PIDS+=($!)
	done
	wait_for 120 ro_gw_all_healthy
}

# --- the clients -------------------------------------------------------------

ro_clients_start() {
	python3 "$RO_FAKES/rollout_clients.py" run --host "$RO_HOST" --out "$DH_T/requests" --fresh "${RO_FRESH:-30}" \
		--group "n3=$RO_NET.2:8443,$RO_NET.3:8443" --group "n1=$RO_NET.4:8443,$RO_NET.5:8443" \
		>/dev/null 2>"$DH_T/clients.err" &
	RO_CLIENTS=$!
	dh_track $RO_CLIENTS
	wait_for 30 test -s "$DH_T/requests"
}
ro_clients_stop() { dh_kill "$RO_CLIENTS"; }

# --- the operator's steps --------------------------------------------------------

# The drain unit's own command lines, as systemd runs them (a leading "-"
# only says that a failure is ignored), against this instance's agent.
ro_unit_cmd() { # ro_unit_cmd ExecStop|ExecStart
	sed -n "s|^$1=-\{0,1\}/usr/sbin/dstack-healthd ||p" "$RO_ROOT/systemd/dstack-healthd-drain.service"
}

# ro_back N T_MS: waits until instance N serves again and every gateway node
# has it back, as an operator of a rolling change waits before the next
# instance: its backend started after T_MS (the step's start) and both
# containers are running and healthy to Docker, then every node has polled
# twice since and says healthy.
ro_back() {
	local g polls=()
	wait_for 120 ro_serving "$1" "$2" || {
		diag "instance $1's containers did not come back within 120 s"
		return 1
	}
	for g in 2 3 4 5; do polls[g]=$(ro_polls "$g"); done
	for g in 2 3 4 5; do wait_for 60 ro_polled "$g" $((polls[g] + 2)); done
	wait_for 120 ro_gw_healthy "$1" || {
		diag "instance $1 did not come back on every gateway node within 120 s"
		return 1
	}
}
ro_serving() {
	local started
	started=$("$DH_DOCKER" inspect -f '{{.State.StartedAt}}' "ro$1_backend_1" 2>/dev/null) &&
		[ "$(date -d "$started" +%s%3N)" -gt "$2" ] &&
		dh_state_is "ro$1_backend_1" "running healthy" && dh_state_is "ro$1_proxy_1" "running healthy"
}

# ro_turn N: before acting on N, the connect_top_n 1 gateways route to it
# (the worst case: the instance that stops is the one they send traffic to).
ro_turn() {
	ro_bump "$1"
	wait_for $((${RO_CACHE%.*} + 30)) ro_top_is "$1" || diag "the n1 nodes do not route to i$1"
}

# After acting on N, the next instance gets the freshest handshake, so that
# the n1 gateways move to it when N comes back.
ro_next() { [ "$1" -lt 3 ] && ro_bump $(($1 + 1)); return 0; }

# systemctl restart app-compose: the drain unit's ExecStop (it is ordered
# after app-compose, so it stops first), app-compose.sh stop (docker compose
# stop), app-compose.sh (docker compose up), the drain unit's ExecStart.
ro_restart() {
	local n=$1 t0
	ro_turn "$n"
	t0=$(ro_now)
	if [ "$RO_PHASE" = agent ]; then
		# shellcheck disable=SC2046
		"$HEALTHD_BIN" $(ro_unit_cmd ExecStop) --control-socket "$DH_T/ctl$n.sock" \
			>>"$DH_T/drain$n.log" 2>&1 || diag "drain of i$n: $(tail -n1 "$DH_T/drain$n.log")"
	fi
	ro_compose "$n" stop || return 1
	# Not before the stop: a gateway that moves away on a fresher
	# handshake would hide what the stop costs where nothing moved it.
	ro_next "$n"
	ro_compose "$n" up --remove-orphans -d || return 1
	if [ "$RO_PHASE" = agent ]; then
		# shellcheck disable=SC2046
		"$HEALTHD_BIN" $(ro_unit_cmd ExecStart) --control-socket "$DH_T/ctl$n.sock" \
			>>"$DH_T/drain$n.log" 2>&1
	fi
	ro_back "$n" "$t0"
}

# A new image for the backend: the tag changes and docker compose up -d
# recreates it (the old one is stopped, then the new one created and started).
ro_recreate() {
	local n=$1 t0
	ro_turn "$n"
	t0=$(ro_now)
	RO_TAG=$((3 - RO_TAG))
	ro_compose "$n" up -d
	RO_TAG=$((3 - RO_TAG))
	ro_next "$n"
	ro_back "$n" "$t0"
}

# ro_retrying MS: the proxies retry a backend that is away for MS (0:
# never), as docs/operator.md advises an app whose kept-alive connections must
# survive a backend's recreate: each proxy recreated with it in turn (its
# environment changed), outside any window, each instance back on every
# gateway node before the next.
ro_retrying() {
	local n t0
	RO_RETRY_MS=$1
	for n in $RO_IDS; do
		t0=$(ro_now)
		ro_compose "$n" up -d || return 1
		wait_for 120 ro_proxy_since "$n" "$t0" || {
			diag "instance $n's proxy was not recreated within 120 s"
			return 1
		}
		wait_for 120 ro_gw_healthy "$n" || return 1
	done
}
ro_proxy_since() {
	local started
	started=$("$DH_DOCKER" inspect -f '{{.State.StartedAt}}' "ro$1_proxy_1" 2>/dev/null) &&
		[ "$(date -d "$started" +%s%3N)" -gt "$2" ] && dh_state_is "ro$1_proxy_1" "running healthy"
}

# The backend dies (SIGKILL from outside Docker, as the kernel's OOM killer
# sends it); its restart policy brings it back.
ro_kill() {
	local n=$1 pid t0
	ro_turn "$n"
	t0=$(ro_now)
	pid=$("$DH_DOCKER" inspect -f '{{.State.Pid}}' "ro${n}_backend_1")
	kill -KILL "$pid"
	ro_next "$n"
	ro_back "$n" "$t0"
}

# The gap of a replace: the old backend stopped and removed first
# (docker compose rm -sf), then the new one pulled and created; the pull is
# two gateway polls long here (every node has polled twice since the rm).
ro_replace() {
	local n=$1 g t0
	ro_turn "$n"
	t0=$(ro_now)
	ro_compose "$n" rm -s -f backend
	local -A seen
	for g in 2 3 4 5; do seen[$g]=$(ro_polls "$g"); done
	for g in 2 3 4 5; do wait_for 60 ro_polled "$g" $((seen[$g] + 2)); done
	ro_compose "$n" up -d
	ro_next "$n"
	ro_back "$n" "$t0"
}
ro_polls() { ro_gw_state "$1" | sed -n 's/.*"polls": \([0-9]*\).*/\1/p'; }
ro_polled() { [ "$(ro_polls "$1")" -ge "$2" ]; }

# ro_window NAME STEP [N...]: runs STEP on each instance in turn (all three
# when none is named) and records the window; a line "NAME FROM_MS TO_MS RC"
# in $DH_T/windows.
ro_window() {
	local name=$1 step=$2 from rc=0 n
	shift 2
	[ $# -gt 0 ] || set -- $RO_IDS
	from=$(ro_now)
	for n in "$@"; do
		"$step" "$n" || rc=1
	done
	echo "$name $from $(ro_now) $rc" >>"$DH_T/windows"
	return $rc
}

# ro_count NAME GROUP: the count line of that window and group, with the
# time out of rotation on that group's nodes.
ro_count() {
	local from to logs
	read -r from to < <(awk -v n="$1" '$1 == n { print $2, $3 }' "$DH_T/windows")
	case $2 in n3) logs=(--gwlog "$DH_T/gw2.log" --gwlog "$DH_T/gw3.log") ;;
	n1) logs=(--gwlog "$DH_T/gw4.log" --gwlog "$DH_T/gw5.log") ;; esac
	python3 "$RO_FAKES/rollout_clients.py" count --out "$DH_T/requests" --from "$from" --to "$to" \
		--group "$2" "${logs[@]}"
}

# ro_keep: with RO_KEEP=DIR, the logs (requests, windows, gateways, agents,
# compose) are copied there before dockerd_stop removes them.
ro_keep() {
	[ -n "${RO_KEEP:-}" ] || return 0
	mkdir -p "$RO_KEEP" && cp "$DH_T"/requests "$DH_T"/windows "$DH_T"/*.log "$DH_T"/*.err "$RO_KEEP"/ 2>/dev/null
	local n
	for n in $RO_IDS; do "$DH_DOCKER" logs "ro${n}_backend_1" >"$RO_KEEP/backend$n.out" 2>&1; done
	return 0
}
