# SPDX-License-Identifier: Apache-2.0
# Debian's haproxy as the dstack gateway's stand-in in front of the agent
# (sourced after tests/lib/relay.sh): it writes PROXY headers as a real
# proxy does (send-proxy, send-proxy-v2), in TCP mode, as the gateway's
# TLS proxy passes bytes on.
# free_port: a port no one listens on now.
free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
# haproxy_start NAME CONFIG PORT...: haproxy in the foreground on CONFIG,
# its output in $T/NAME.log and its pid in NAME_PID (in PIDS, stopped with
# SIGTERM by haproxy_stop); returns once it listens on every PORT.
haproxy_start() {
	local name=$1 cfg=$2 p
	shift 2
	haproxy -c -q -f "$cfg" >"$T/$name.check" 2>&1 || { sed 's/^/# haproxy: /' "$T/$name.check"; return 1; }
	unpiped exec haproxy -db -f "$cfg" >"$T/$name.log" 2>&1 &
	PIDS+=($!)
	eval "${name}_PID=$!"
	for p in "$@"; do
		wait_for 30 eval "ss -Hltn '( sport = :$p )' | grep -q ." || { sed 's/^/# haproxy: /' "$T/$name.log"; return 1; }
	done
}
haproxy_stop() {
	local pid
	eval "pid=\$${1}_PID"
	kill -TERM "$pid" 2>/dev/null
	reap 30 "$pid"
}
# haproxy_defaults: the config's head, as the gateway's proxy runs (TCP,
# timeouts longer than any test's wait).
haproxy_defaults() {
	cat <<-CFG
	global
	    maxconn 8000
	defaults
	    mode tcp
	    timeout connect 5s
	    timeout client 300s
	    timeout server 300s
	CFG
}
