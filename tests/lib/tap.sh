# SPDX-License-Identifier: Apache-2.0
# TAP for the end-to-end tests (sourced). Counts go to tests/run.

# Agents started by a test must not create the system-wide control socket
# (/run/dstack-healthd/control.sock, the default): empty disables it. A test
# that needs the operator's view passes --control-socket in its scratch folder.
export DSTACK_HEALTHD_CONTROL_SOCKET=
TAP_N=0
TAP_FAILED=0

ok() { # ok COND-EXIT-STATUS DESCRIPTION
	TAP_N=$((TAP_N + 1))
	if [ "$1" -eq 0 ]; then
		echo "ok $TAP_N - $2"
	else
		echo "not ok $TAP_N - $2"
		TAP_FAILED=$((TAP_FAILED + 1))
	fi
}

# is GOT WANT DESCRIPTION
is() {
	if [ "$1" = "$2" ]; then
		ok 0 "$3"
	else
		ok 1 "$3"
		printf '#   got:  %s\n#   want: %s\n' "$1" "$2"
	fi
}

# like GOT REGEX DESCRIPTION (extended regex)
like() {
	if printf '%s' "$1" | grep -Eq -- "$2"; then
		ok 0 "$3"
	else
		ok 1 "$3"
		printf '#   got:  %s\n#   want match: %s\n' "$1" "$2"
	fi
}

diag() { echo "# $*"; }

# python_first DIR: Debian's python3 ahead of a version manager's shim on
# PATH, through a link in DIR (a scratch folder). On a loaded machine (load
# 14) a pyenv shim took 6.5 s to start an interpreter, /usr/bin/python3 under
# one; the stand-ins and helpers the tests start must not wait on that.
python_first() {
	if [ -x /usr/bin/python3 ] && [ "$(command -v python3)" != /usr/bin/python3 ]; then
		mkdir -p "$1" && ln -sf /usr/bin/python3 "$1/python3" && PATH=$1:$PATH
	fi
}

# build_kind: what the build under test ($HEALTHD_BUILD) was built with:
# address (ASan and UBSan, build-asan), thread (ThreadSanitizer), coverage,
# or release. The Makefile writes the last two into the folder's file
# "sanitizer". A sanitizer's allocator and shadow memory make RssAnon bounds
# say nothing of the agent, and its speed makes latency bounds say little:
# such points scale or skip by kind, and say so.
build_kind() {
	local b=${HEALTHD_BUILD:-build} k
	k=$(cat "$b/sanitizer" 2>/dev/null)
	[ -n "$k" ] || case $b in *asan*) k=address ;; *) k=release ;; esac
	echo "$k"
}

skip_all() {
	echo "1..0 # SKIP $*"
	exit 0
}

# The plan comes last: every agent this test started and left running is
# stopped first, each a test point of its own (agent_stop).
done_testing() {
	agents_stop_all
	echo "1..$TAP_N"
	[ "$TAP_FAILED" -eq 0 ]
}

# --- Agents stop as systemd stops them (issue 44 §1) --------------------------
# SIGTERM, then a bounded wait, never SIGKILL first: a killed agent writes
# no coverage data and no sanitizer report, and its own stop goes untested.
# The unit gives it 5 s (TimeoutStopSec); a loaded machine and a sanitizer
# build get AGENT_STOP_LIMIT seconds, after which it is killed and its point
# fails, naming it.
AGENT_STOP_LIMIT=${AGENT_STOP_LIMIT:-30}
# The last line of a graceful stop (agent/main.c): every thread joined.
AGENT_LAST_LINE='dstack-healthd: info: stopped'

# is_agent PID [PARENT]: PID is a live dstack-healthd (not a zombie), a
# child of this shell (or of PARENT), so that its exit status can be had. A
# pid that bash has reaped may be someone else's by now.
is_agent() {
	local st
	case $(readlink "/proc/$1/exe" 2>/dev/null) in
	*/dstack-healthd | */dstack-healthd" (deleted)") ;;
	*) return 1 ;;
	esac
	st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1,2)
	[ -n "$st" ] && [ "${st% *}" != Z ] && [ "${st#* }" = "${2:-$$}" ]
}

# agent_child PID: the agent that PID (a timeout, a tracer) runs as its
# only child, if any; prints its pid.
agent_child() {
	local c
	c=$(cat "/proc/$1/task/$1/children" 2>/dev/null) || return 1
	c=${c% }
	[ -n "$c" ] && [ "${c#* }" = "$c" ] && is_agent "$c" "$1" && echo "$c"
}

# agent_stop PID [NAME [PARENT]]: stops the agent PID, a child of this
# shell, with SIGTERM and makes one test point of how it went: gone within
# the bound by itself, exit status 0, the last line of its log (its stderr,
# a file) "stopped", and no ThreadSanitizer report of its own
# (HEALTHD_SAN_DIR, set by tests/run for a TSan build). NAME defaults to its
# log's name. An agent started under a tracer is a child of the tracer:
# PARENT, the child of this shell that exits with the agent's status
# (strace -f), is waited for instead. Sets AGENT_STOP_MS (how long it took)
# and AGENT_STATUS; returns 0 when the point passed.
agent_stop() {
	local pid=${1%% *} name=${2:-} child=${3:-${1%% *}} log last t0 why= f stacks=
	log=$(readlink "/proc/$pid/fd/2" 2>/dev/null)
	[ -n "$name" ] || { name=${log##*/}; name=${name%.log}; }
	# A hold the test began with its own first SIGTERM ends with this one.
	AGENT_HELD=
	[ ! -f "$log" ] || ! grep -q 'stop: the verdict file says unhealthy; holding' "$log" ||
		AGENT_HELD=1
	t0=$(date +%s%N)
	kill -TERM "$pid" 2>/dev/null
	if wait_for "$AGENT_STOP_LIMIT" agent_gone "$pid" "$child" "$log"; then
		AGENT_STOP_MS=$(( ($(date +%s%N) - t0) / 1000000 ))
		wait "$child" 2>/dev/null # bounded: gone
		AGENT_STATUS=$?
		[ "$AGENT_STATUS" -eq 0 ] || why="exit status $AGENT_STATUS"
	else
		AGENT_STOP_MS=timeout
		why="still running $AGENT_STOP_LIMIT s after SIGTERM: $(agent_where "$pid"); killed"
		stacks=$(agent_stacks "$pid")
		kill -KILL "$pid" 2>/dev/null
		wait_for 10 pid_gone "$child"
		wait "$child" 2>/dev/null # bounded: gone (killed; a tracer ends with it)
		AGENT_STATUS=$?
	fi
	if [ -f "$log" ]; then
		last=$(tail -n 1 "$log")
		[ "$last" = "$AGENT_LAST_LINE" ] || why="${why:+$why; }last line: $last"
	else
		why="${why:+$why; }its stderr is ${log:-gone}, not a file: no last line to read"
	fi
	for f in "${HEALTHD_SAN_DIR:-/nonexistent}"/*."$pid"; do
		[ -e "$f" ] || continue
		why="${why:+$why; }$(grep -m1 '^SUMMARY:' "$f" || echo "a sanitizer report") (${f##*/})"
		sed 's/^/#   /' "$f" | head -n 60
		mv "$f" "$f.seen"
	done
	if [ -z "$why" ]; then
		ok 0 "agent $name: SIGTERM stops it, status 0, \"stopped\" its last line ($AGENT_STOP_MS ms)"
	else
		ok 1 "agent $name: SIGTERM stops it, status 0, \"stopped\" its last line"
		diag "agent $name (pid $pid): $why"
		[ ! -f "$log" ] || tail -n 5 "$log" | sed 's/^/#   log: /'
		[ -z "$stacks" ] || printf '%s\n' "$stacks"
		return 1
	fi
}

# agent_gone PID CHILD LOG: CHILD has ended. A sidecar (a verdict file, no
# public listener) holds its stop after the first SIGTERM until a gateway
# has seen it unhealthy (agent/stophold.c); a second signal ends the hold,
# as a second `docker stop` would: sent once, when the log says it holds,
# unless AGENT_STOP_HOLD=wait (a test of the hold itself lets it run out).
agent_gone() {
	pid_gone "$2" && return 0
	if [ -z "$AGENT_HELD" ] && [ "${AGENT_STOP_HOLD:-}" != wait ] && [ -f "$3" ] &&
		grep -q 'stop: the verdict file says unhealthy; holding' "$3"; then
		AGENT_HELD=1
		kill -TERM "$1" 2>/dev/null
	fi
	return 1
}

# agent_where PID: what a process that does not stop is doing, for the
# diagnostic: its state and, thread by thread, the kernel's wait channel,
# then its state, user and system clock ticks ([R/1415/364]: a thread
# that runs, not one that waits).
agent_where() {
	local t out=
	for t in /proc/"$1"/task/*; do
		out="$out ${t##*/}:$(cat "$t/comm" 2>/dev/null)@$(cat "$t/wchan" 2>/dev/null)"
		out="$out[$(sed 's/.*) //' "$t/stat" 2>/dev/null | cut -d' ' -f1,12,13 | tr ' ' /)]"
	done
	echo "state $(sed -n 's/^State:[[:space:]]*//p' "/proc/$1/status" 2>/dev/null), threads$out"
}

# agent_stacks PID: each thread's stack, as diagnostic lines, when gdb is
# there (a developer's machine; root may attach): where the agent's own
# code went that does not stop.
agent_stacks() {
	command -v gdb >/dev/null || return 0
	timeout 60 gdb -p "$1" -batch -ex "thread apply all bt" 2>/dev/null |
		grep -E '^(Thread |#[0-9]+ )' | head -n 60 | sed 's/^/#   stack: /'
}

# agents_stop_all: agent_stop for every live agent among the processes this
# test tracked (scratch.sh's PIDS, dockerd.sh's dh_track), or run by one of
# them (timeout, strace), once each.
agents_stop_all() {
	local p c
	for p in ${PIDS[@]+"${PIDS[@]}"} ${DH_PIDS:-}; do
		if is_agent "$p"; then
			agent_stop "$p"
		elif c=$(agent_child "$p"); then
			agent_stop "$c" "" "$p"
		fi
	done
	return 0
}

# wait_for DEADLINE_SECONDS COMMAND...: polls COMMAND every 50 ms until it
# succeeds or the deadline passes. Never a fixed sleep.
wait_for() {
	_deadline=$(( $(date +%s%N) / 1000000 + $1 * 1000 ))
	shift
	while ! "$@" >/dev/null 2>&1; do
		if [ $(( $(date +%s%N) / 1000000 )) -ge "$_deadline" ]; then
			return 1
		fi
		sleep 0.05
	done
	return 0
}

# reap DEADLINE_SECONDS PID: waits for PID, a child of this shell, to end;
# returns its exit status. One still running at the deadline is named in a
# diagnostic (its command, state and kernel wait channel), killed, and 124
# returned: a test that waited on it would otherwise hang until its runner's
# limit, and say nothing of what it waited on.
reap() {
	if ! wait_for "$1" pid_gone "$2"; then
		diag "pid $2 still running after $1 s: $(tr '\0' ' ' <"/proc/$2/cmdline" 2>/dev/null)" \
			"state $(sed -n 's/^State:[[:space:]]*//p' "/proc/$2/status" 2>/dev/null)," \
			"waiting in $(cat "/proc/$2/wchan" 2>/dev/null)"
		kill -KILL "$2" 2>/dev/null
		wait "$2" 2>/dev/null # bounded: reap (killed)
		return 124
	fi
	wait "$2" # bounded: reap (gone)
}
# pid_gone PID: a zombie child still answers kill -0; a process that is gone
# or a zombie has ended.
pid_gone() { ! kill -0 "$1" 2>/dev/null || grep -q '^State:.*[ZX]' "/proc/$1/status" 2>/dev/null; }
