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

skip_all() {
	echo "1..0 # SKIP $*"
	exit 0
}

done_testing() {
	echo "1..$TAP_N"
	[ "$TAP_FAILED" -eq 0 ]
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
