#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# A quiet journal (issue 28 §4): the agent logs one line when the verdict's
# state or its cause changes, and nothing per refresh while it stays, in
# every steady unhealthy state: a stale status file (whose served reason
# carries an age that moves every second), one ahead of the clock, a missing
# one, an app that reports unhealthy; an unhealthy container (its probe runs
# every second, each run a Docker event); the runtime down. The agents log at
# the default level, as the journal gets it; refreshes are counted on
# /metrics, so that "quiet" is measured over a known number of them.
cd "$(dirname "$0")/../.." || exit 1
. tests/lib/tap.sh
. tests/lib/dockerd.sh

dockerd_start
BIN=$HEALTHD_BIN
CTL=$DH_T/ctl.sock

refreshes() { # refreshes: every refresh the agent on $CTL counted
	curl -s --max-time 5 --unix-socket "$CTL" http://x/metrics |
		awk '/^dstack_healthd_refreshes_total\{/ { n += $2 } END { print n + 0 }'
}
served() { curl -s --max-time 5 --unix-socket "$DH_T/$1.sock" -X POST 'http://x/prpc/v1/Health?json' -d '{}'; }
lines() { wc -l <"$LOG"; }

# quiet NAME WHAT: from now, at least 10 more refreshes, and until the
# served answer's words differ from now's when MOVES is set (a number in
# them moved); then not one line more in the log.
quiet() {
	local name=$1 what=$2 l0 r0 a0
	l0=$(lines) r0=$(refreshes) a0=$(served "$name")
	moved() { [ -z "${MOVES:-}" ] || [ "$(served "$name")" != "$a0" ]; }
	enough() { [ "$(refreshes)" -ge $((r0 + 10)) ] && moved; }
	wait_for 60 enough
	ok $? "$what: $(($(refreshes) - r0)) refreshes$([ -n "${MOVES:-}" ] && echo ", the served words moved")"
	local added
	added=$(tail -n +$((l0 + 1)) "$LOG")
	is "$added" "" "$what: no line in the journal meanwhile"
}
# one_line L0 WHAT REGEX: exactly one line since line L0, a verdict line
# matching REGEX.
one_line() {
	local added
	added=$(tail -n +$(($1 + 1)) "$LOG")
	is "$(grep -c . <<<"$added")" 1 "$2: one line in the journal" ||
		printf '%s\n' "$added" | sed 's/^/#   /'
	like "$added" "$3" "$2: the verdict line says so"
}

# --- a status file ------------------------------------------------------------
ST=$DH_T/status
printf '{"manifest_version":"3","name":"j","runner":"bash","requirements":{"health_check":true,"health_status_file":"%s"}}\n' \
	"$ST" >"$DH_T/sf.json"
write() { printf '%s\n%s\n' "$1" "$2" >"$ST.tmp" && mv "$ST.tmp" "$ST"; }
write healthy "$(date +%s)"
LOG=$DH_T/hd-sf.log
"$BIN" --listen "unix:$DH_T/sf.sock" --control-socket "$CTL" --compose-file "$DH_T/sf.json" \
	--runtime-file "$DH_T/none.json" --interval 0.2 >"$LOG" 2>&1 &
SF=$!
dh_track $SF
wait_for 30 sh -c "curl -s --max-time 5 --unix-socket '$DH_T/sf.sock' -X POST 'http://x/prpc/v1/Health?json' -d '{}' | grep -q '\"healthy\":true'"
ok $? "status file: the agent serves healthy"

# step WHAT CONTENT-OR-rm REGEX-SERVED REGEX-LOGGED [moves]: changes the file,
# waits for the answer, checks the one line, then the quiet.
step() {
	local what=$1 how=$2 served_re=$3 log_re=$4 l0
	l0=$(lines)
	case "$how" in
	rm) rm -f "$ST" ;;
	*) write ${how% *} "${how#* }" ;;
	esac
	wait_for 30 sh -c "curl -s --max-time 5 --unix-socket '$DH_T/sf.sock' -X POST 'http://x/prpc/v1/Health?json' -d '{}' | grep -Eq '$served_re'"
	ok $? "$what: served"
	# The line is written before the answer is published; the log may
	# still be on its way to the file.
	wait_for 10 sh -c "[ \$(wc -l <'$LOG') -gt $l0 ]"
	one_line "$l0" "$what" "$log_re"
	MOVES=${5:-} quiet sf "$what"
}
now=$(date +%s)
step "stale status file" "healthy $((now - 120))" 'older than 60 s' \
	'warning: verdict: unhealthy: <health_file>: written [0-9]+ s ago' moves
step "status file ahead of the clock" "healthy $((now + 600))" 'in the future' \
	'warning: verdict: unhealthy: <health_file>: written [0-9]+ s in the future' moves
step "missing status file" rm 'does not exist' \
	"warning: verdict: unhealthy: <health_file>: status file .* does not exist"
step "the app reports unhealthy" "unhealthy $(date +%s)" 'the app reports unhealthy' \
	'warning: verdict: unhealthy: <health_file>: the app reports unhealthy'
is "$(curl -s --max-time 5 --unix-socket "$CTL" http://x/metrics |
	awk '$1 == "dstack_healthd_verdict_changes_total" { print $2 }')" 5 \
	"/metrics: 5 verdict changes (healthy, stale, ahead, missing, unhealthy), not one a refresh"
dh_kill "$SF"

# --- an unhealthy container, then the runtime down ----------------------------
dh_compose jq unhealthy.yml up -d >"$DH_T/up.log" 2>&1
ok $? "docker-compose up -d (b fails its probe every second, a stays starting)"
dh_expect_state 30 jq_b_1 "running unhealthy"
# c's first probe passes within a second or so: past it, nothing of the
# project changes again (a's probe runs once an hour).
dh_expect_state 30 jq_c_1 "running healthy"
healthd_runtime "$DH_T/rt.json" jq
healthd_app_compose
LOG=$DH_T/hd-c.log
"$BIN" --listen "unix:$DH_T/c.sock" --control-socket "$CTL" --compose-file "$DH_T/app-compose.json" \
	--runtime-file "$DH_T/rt.json" --docker-host "unix://$DH_T/docker.sock" --interval 0.5 \
	>"$LOG" 2>&1 &
C=$!
dh_track $C
wait_for 30 sh -c "curl -s --max-time 5 --unix-socket '$DH_T/c.sock' -X POST 'http://x/prpc/v1/Health?json' -d '{}' | grep -q 'jq_b_1'"
ok $? "unhealthy container: served"
wait_for 30 grep -q 'Docker events: following project jq' "$LOG"
ok $? "unhealthy container: the agent follows the project's events"
quiet c "unhealthy container, its probe failing every second"

l0=$(lines)
dockerd_halt
wait_for 60 sh -c "curl -s --max-time 5 --unix-socket '$DH_T/c.sock' -X POST 'http://x/prpc/v1/Health?json' -d '{}' | grep -q 'cannot reach the container runtime'"
ok $? "runtime down: served after three failed refreshes"
wait_for 10 grep -q 'verdict: unhealthy: cannot reach' "$LOG"
ok $? "runtime down: the verdict line"
diag "runtime down, logged: $(tail -n +$((l0 + 1)) "$LOG" | cut -c1-120 | tr '\n' '|')"
quiet c "runtime down"
dh_kill "$C"
done_testing
