#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The suite's own rules, read from its source, so that a slip cannot come
# back unseen. No unbounded `wait`: a test that waits on a process that
# hangs must name it at a deadline (`reap DEADLINE PID`, tests/lib/tap.sh),
# not sit until its runner's limit. A `wait` is allowed only where its line
# says why it cannot hang, in a comment this test reads:
#   # bounded: gone     the process has ended (or was killed), or is not a
#                       live child of this shell (wait returns at once)
#   # bounded: timeout  every process it waits on runs under timeout(1)
#   # bounded: reap     inside reap() itself (tests/lib/tap.sh only)
# A marker with no wait on its line is stale, and fails too.
# Reads files only:
# tests/run: once
# tests/run: no coverage (it reads the test scripts; no agent runs)
set -u
cd "$(dirname "$0")/../.."
. tests/lib/tap.sh

# unbounded_waits FILE...: "FILE:LINE: why" for each wait in command
# position that no marker allows, and each marker that allows none.
unbounded_waits() {
	awk '
	function unended() { if (doc != "") print last ": here-document <<" doc " never ends" }
	FNR == 1 { unended(); fn = ""; doc = "" }
	{ last = FILENAME ":" FNR }
	END { unended() }
	# A here-document is text, not commands (this file holds its cases in one).
	doc != "" { t = $0; sub(/^\t+/, "", t); if (t == doc) doc = ""; next }
	match($0, /<<-?[\047"]?[A-Za-z_]+/) {
		doc = substr($0, RSTART + 2, RLENGTH - 2); sub(/^-/, "", doc); gsub(/[\047"]/, "", doc)
	}
	# The function a line is in: "name() {" opens one, "}" in column 1 ends it.
	/^[A-Za-z_][A-Za-z0-9_]*\(\)/ { fn = $0; sub(/\(.*/, "", fn) }
	/^}/ { fn = "" }
	{
		line = $0
		sub(/^[ \t]+/, "", line)
		if (line ~ /^#/) next
		w = line ~ /(^|[;&|({!]|(^|[ \t])(then|do|else|if|elif|while|until|time|command|builtin))[ \t]*wait([ \t;)]|$)/
		m = ""
		if (match(line, /# bounded: [a-z]+/))
			m = substr(line, RSTART + 11, RLENGTH - 11)
		where = FILENAME ":" FNR ": "
		if (w && m == "")
			print where "unbounded wait: " line
		else if (!w && m != "")
			print where "marker \"bounded: " m "\" with no wait on its line"
		else if (w && m != "gone" && m != "timeout" && m != "reap")
			print where "unknown marker \"bounded: " m "\""
		else if (w && m == "reap" && (FILENAME != "tests/lib/tap.sh" || fn != "reap"))
			print where "\"bounded: reap\" outside reap() of tests/lib/tap.sh"
	}' "$@"
}

# The check itself, on cases whose answer is known: each form it must
# catch, and each it must let pass.
S=$(mktemp -d -t suite.XXXXXX) || exit 1
trap 'rm -rf "$S"' EXIT
cat >"$S/cases.sh" <<'SH'
kill "$p"; wait "$p"
wait
	wait -n
x || { wait "$p" 2>/dev/null; }
if wait "$p"; then :; fi
for p in "${pids[@]}"; do wait "$p"; done
out=$(wait "$p")
wait "$p" # bounded: reap
wait "$p" # bounded: soon
: # bounded: gone
wait "$p" # bounded: gone (killed)
wait "$p" # bounded: timeout
# wait "$p" in a comment
echo "nothing to wait for"
wait_for 10 pid_gone "$p"
SH
got=$(unbounded_waits "$S/cases.sh" | sed 's|^[^:]*:||' | cut -d: -f1 | paste -sd' ')
is "$got" "1 2 3 4 5 6 7 8 9 10" \
	"the check flags bare waits in every command position, a reap marker outside reap(), an unknown or stale marker; passes marked waits, comments, strings, wait_for"

files=(tests/e2e/*.sh tests/lib/*.sh bench/*.sh)
bad=$(unbounded_waits "${files[@]}")
ok "$([ -z "$bad" ]; echo $?)" "no unbounded wait in tests/e2e, tests/lib, bench (${#files[@]} files): use reap DEADLINE PID, or mark why it cannot hang"
[ -z "$bad" ] || printf '%s\n' "$bad" | sed 's/^/#   /'

done_testing
