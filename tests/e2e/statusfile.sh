#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# End to end: every rule of the status file (spec, "health_status_file: the
# app answers for itself") against the real binary, with --once and with a
# long-running server answered over a unix socket; then app-compose errors.
set -u
cd "$(dirname "$0")/../.."
. tests/lib/tap.sh

BIN=${HEALTHD_BUILD:-build}/dstack-healthd
. tests/lib/scratch.sh
SERVER_PID=
scratch_more() {
	if [ -n "$SERVER_PID" ] && is_agent "$SERVER_PID"; then
		agent_stop "$SERVER_PID"
	fi
}

command -v python3 >/dev/null || skip_all "python3 is needed to read the JSON answers"
command -v curl >/dev/null || skip_all "curl is needed to ask the server"
if [ ! -x "$BIN" ]; then
	ok 1 "the binary $BIN exists"
	done_testing
	exit 1
fi

# compose PATH [OUT]: an app-compose.json gating on the status file at PATH
# (any bytes; python3 writes them as a JSON string).
compose() {
	python3 - "$1" "${2:-$T/app-compose.json}" <<'EOF'
import json, os, sys
path = os.fsdecode(os.fsencode(sys.argv[1]))
doc = {"manifest_version": "3", "name": "e2e", "runner": "bash",
       "requirements": {"health_check": True, "health_status_file": path}}
open(sys.argv[2], "w").write(json.dumps(doc))
EOF
}

# once: runs one refresh; sets OUT (stdout), RC, and the parsed HEALTHY and
# STATUS (the entries as "name=status" lines).
once() {
	OUT=$(timeout 60 "$BIN" --once --compose-file "$T/app-compose.json" \
		--runtime-file "$T/no-runtime.json" 2>"$T/stderr")
	RC=$?
	AFTER=$(date +%s)
	parse "$OUT"
}

parse() {
	HEALTHY=$(printf '%s' "$1" | python3 -c '
import json, sys
try:
    d = json.load(sys.stdin)
    print(str(d["healthy"]).lower())
except Exception:
    print("undecodable")')
	STATUS=$(printf '%s' "$1" | python3 -c '
import json, sys
try:
    d = json.load(sys.stdin)
    print("\n".join(e["name"] + "=" + e["status"] for e in d["unhealthy"]))
except Exception:
    pass')
	ERROR=$(printf '%s' "$1" | python3 -c '
import json, sys
try:
    print(json.load(sys.stdin)["error"])
except Exception:
    pass')
}

now() { date +%s; }

# expect DESC RC HEALTHY STATUS-REGEX: checks the last `once`.
expect() {
	is "$RC" "$2" "$1: exit status $2"
	is "$HEALTHY" "$3" "$1: healthy is $3"
	if [ "$3" = true ]; then
		is "$STATUS" "" "$1: no entries"
	else
		like "$STATUS" "^<health_file>=$4\$" "$1: the reason"
	fi
	is "$ERROR" "" "$1: error is empty (judged, not a failed refresh)"
}

S=$T/st/health
mkdir -p "$T/st"
compose "$S"

# --- content rules ---------------------------------------------------------
printf 'healthy\n%s\n' "$(now)" >"$S"; once
expect "fresh healthy" 0 true
like "$OUT" '^\{"healthy":true,"unhealthy":\[\],"error":""\}$' "the healthy answer is the full JSON"

printf 'unhealthy\n%s\n' "$(now)" >"$S"; once
expect "unhealthy word" 1 false "the app reports unhealthy"

printf 'HeAlThY\r\n%s\r\n' "$(now)" >"$S"; once
expect "mixed case with CRLF" 0 true

printf 'healthy\n%s\n' "$(( $(now) - 61 ))" >"$S"; once
expect "stale 61 s" 1 false "written 6[1-9] s ago; older than 60 s counts as unhealthy"

# Exactly 60 s is fresh. The agent reads its own clock: with libfaketime,
# stopped at the second the file names plus 60, so that the age is 60 s
# by construction (beside a CPU hog at load 30, ten tries of the release
# build never began and ended within one second);
# without it, a run that began and ended within the same second counts.
exact=
if command -v faketime >/dev/null 2>&1; then
	before=$(now)
	printf 'healthy\n%s\n' "$((before - 60))" >"$S"
	# libfaketime is preloaded: the ASan build must be told that its runtime
	# need not come first, or it exits 1 before judging.
	OUT=$(ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0 FAKETIME_DONT_FAKE_MONOTONIC=1 \
		timeout 60 faketime -f "$(date -d "@$before" '+%Y-%m-%d %H:%M:%S')" "$BIN" --once \
		--compose-file "$T/app-compose.json" --runtime-file "$T/no-runtime.json" 2>"$T/stderr")
	RC=$?
	parse "$OUT"
	exact=$HEALTHY
	[ "$exact" = true ] || diag "under faketime: exit $RC, $OUT; $(tail -n 3 "$T/stderr")"
else
	for _ in 1 2 3 4 5 6 7 8 9 10; do
		before=$(now)
		printf 'healthy\n%s\n' "$((before - 60))" >"$S"; once
		[ "$AFTER" = "$before" ] || continue
		exact=$HEALTHY
		break
	done
fi
is "$exact" true "exactly 60 s old is fresh"

# The app writes on the agent's clock: fresh is within 60 s either side.
# Written 60 s ahead, it is at most 60 s ahead when the agent reads it.
printf 'healthy\n%s\n' "$(( $(now) + 60 ))" >"$S"; once
expect "60 s in the future is fresh" 0 true

FUTURE_RULE='more than 60 s ahead counts as unhealthy \(line 2 must be in seconds, not milliseconds\)'
printf 'healthy\n%s\n' "$(( $(now) + 3600 ))" >"$S"; once
expect "an hour in the future" 1 false "written 3[56][0-9][0-9] s in the future; $FUTURE_RULE"

printf 'healthy\n%s\n' "$(( $(date +%s%3N) - 3600000 ))" >"$S"; once
expect "milliseconds from an hour ago" 1 false "written [0-9]{13} s in the future; $FUTURE_RULE"

printf 'unhealthy\n%s\n' "$(( $(now) - 120 ))" >"$S"; once
expect "stale and unhealthy: stale is named" 1 false "written 1[2-9][0-9] s ago; older than 60 s counts as unhealthy"

# --- written before the app's current start (issue 29) ------------------------
# The guest rewrites the runtime file each time it starts Compose: a status
# file older than its mtime is the previous run's, however fresh.
BEFORE_RULE="a status file from before the start is not trusted"
once_rt() { # once_rt RUNTIME_FILE [PREFIX...]: once, with that runtime file
	local rt=$1
	shift
	OUT=$(timeout 60 "$@" "$BIN" --once --compose-file "$T/app-compose.json" \
		--runtime-file "$rt" 2>"$T/stderr")
	RC=$?
	parse "$OUT"
}
printf '{"project":"p"}' >"$T/rt.json"
t=$(now)
printf 'healthy\n%s\n' "$((t - 20))" >"$S"
touch -d "@$((t - 10))" "$T/rt.json"
once_rt "$T/rt.json"
expect "healthy, fresh, but written 10 s before the runtime file (a restart)" 1 false \
	"written 10 s before the app's current start; $BEFORE_RULE"
printf 'healthy\n%s\n' "$((t - 5))" >"$S"; once_rt "$T/rt.json"
expect "written after the runtime file" 0 true
printf 'unhealthy\n%s\n' "$((t - 20))" >"$S"; once_rt "$T/rt.json"
expect "unhealthy and before the start: the start is named" 1 false \
	"written 10 s before the app's current start; $BEFORE_RULE"
# No runtime file (runner bash): the boot marks the start. A time namespace
# moves the boot to 20 s ago for the agent alone.
if unshare --time --fork --boottime 0 true 2>/dev/null; then
	up=$(cut -d. -f1 /proc/uptime)
	printf 'healthy\n%s\n' "$(($(now) - 40))" >"$S"
	once_rt "$T/no-runtime.json" unshare --time --fork --boottime "-$((up - 20))"
	expect "no runtime file: written 40 s ago, the boot 20 s ago" 1 false \
		"written (19|2[0-1]) s before the app's current start; $BEFORE_RULE"
	printf 'healthy\n%s\n' "$(($(now) - 10))" >"$S"
	once_rt "$T/no-runtime.json" unshare --time --fork --boottime "-$((up - 20))"
	expect "no runtime file: written 10 s ago, after the boot" 0 true
else
	ok 0 "no runtime file: the boot marks the start # SKIP no time namespaces (unshare --time)"
fi

printf 'nope\nsoon\n' >"$S"; once
expect "bad word and bad number: line 2 is named" 1 false "line 2 is not a Unix timestamp in seconds"

printf 'healthy\n +%s \n' "$(now)" >"$S"; once
expect "a leading + and blanks" 0 true

rm -f "$S"; once
expect "missing file" 1 false "status file .*/st/health does not exist"

: >"$S"; once
expect "empty file" 1 false "the status file is empty"

printf 'healthy\n' >"$S"; once
expect "one line only" 1 false "the status file has only one line; line 2 must be the Unix timestamp at which it was written"

printf 'healthy\nsoon\n' >"$S"; once
expect "bad number" 1 false "line 2 is not a Unix timestamp in seconds"

printf 'healthy\n99999999999999999999\n' >"$S"; once
expect "number overflow" 1 false "line 2 is not a Unix timestamp in seconds"

printf 'fine\n%s\n' "$(now)" >"$S"; once
expect "unknown word" 1 false "line 1 is neither healthy nor unhealthy"

printf 'healthy\n%s\nmore\n' "$(now)" >"$S"; once
expect "a third line is ignored" 0 true

printf 'healthy\n%s\n1\nunhealthy\n' "$(now)" >"$S"; once
expect "a second timestamp and a fourth line are ignored" 0 true

printf 'healthy\n%s\n\xff\n' "$(now)" >"$S"; once
expect "invalid UTF-8 after two good lines" 1 false "the status file cannot be read as text: it is not valid UTF-8"

# --- the bytes are never quoted back ----------------------------------------
MARK=e2eMARKER7f3a
for body in "$MARK\n%s\n" "healthy\n${MARK}\n" "healthy\n%s\n$MARK\n" "$MARK"; do
	# shellcheck disable=SC2059
	printf "$body" "$(now)" >"$S"; once
	ok "$([[ "$OUT$(cat "$T/stderr")" != *"$MARK"* ]]; echo $?)" \
		"the file's bytes are not in the answer ($STATUS)"
done

# --- what sits at the path --------------------------------------------------
mkdir -p "$T/real"
printf 'healthy\n%s\n' "$(now)" >"$T/real/health"
ln -s "$T/real/health" "$T/st/link"
compose "$T/st/link"; once
expect "symlink followed" 0 true

ln -s "$T/real" "$T/linkdir"
compose "$T/linkdir/health"; once
expect "symlinked parent directory followed" 0 true

ln -s "$T/real" "$T/st/dirlink"
compose "$T/st/dirlink"; once
expect "symlink to a directory" 1 false "the status file is a directory; it must be a regular file"

compose "$T/real"; once
expect "a directory" 1 false "the status file is a directory; it must be a regular file"

compose /dev/null; once
expect "a device" 1 false "the status file is a character device; it must be a regular file"

# A larger file is judged on its first 4096 bytes, as if it ended there.
{ printf 'healthy\n%s\n' "$(now)"; head -c 4096 /dev/zero | tr '\0' '\n'; } >"$T/st/big"
compose "$T/st/big"; once
expect "file over 4096 bytes: its first 4096 judged" 0 true

{ printf 'healthy'; head -c 4088 /dev/zero | tr '\0' ' '; printf '\n%s\n' "$(now)"; } >"$T/st/beyond"
compose "$T/st/beyond"; once
expect "line 2 starting at byte 4096: one line" 1 false "the status file has only one line; line 2 must be the Unix timestamp at which it was written"

{ printf 'healthy\n%s\n' "$(now)"; head -c 4076 /dev/zero | tr '\0' 'a'; printf '\xc3\xa9\n'; } >"$T/st/cut"
compose "$T/st/cut"; once
expect "a character cut at byte 4096" 1 false "the status file cannot be read as text: it is not valid UTF-8"

{ printf 'healthy\n%s\n' "$(now)"; head -c 100 /dev/zero | tr '\0' '\n'; } >"$T/st/small"
compose "$T/st/small"; once
expect "trailing blank lines accepted" 0 true

# Non-ASCII bytes in the path are shown as '?'; control characters are
# refused when app-compose.json is read (below).
compose "$T/st/caf$(printf '\xc3\xa9')"; once
expect "non-ASCII path shown cleaned" 1 false "status file .*/st/caf\?\? does not exist"

# A path longer than 256 bytes is cut.
long=$T/$(printf 'a%.0s' $(seq 200))/$(printf 'b%.0s' $(seq 200))/health
compose "$long"; once
expect "very long path" 1 false "status file .*\.\.\. does not exist"
ok "$([[ "$STATUS" != *"$long"* && ${#STATUS} -lt 340 ]]; echo $?)" \
	"the long path is cut at 256 bytes (${#STATUS} bytes shown)"

# A FIFO with no writer is judged at once, never opened for a blocking read,
# and its status names no path: --once first.
mkfifo "$T/st/fifo"
compose "$T/st/fifo"
start=$(date +%s%N); once; took=$(( ($(date +%s%N) - start) / 1000000 ))
expect "FIFO" 1 false "the status file is a FIFO; it must be a regular file"
# A stalled --once would be killed by once's timeout (60 s: a ceiling a
# loaded machine's start of the sanitizer build cannot reach).
ok "$([ "$took" -lt 30000 ]; echo $?)" "a FIFO does not stall --once (${took} ms)"
mkdir "$T/st/dir"
compose "$T/st/dir"; once
expect "directory" 1 false "the status file is a directory; it must be a regular file"
compose "$T/st/fifo"

# --- the long-running server --------------------------------------------------
ask() {
	curl --unix-socket "$T/sock" -s --max-time 20 -X POST \
		'http://x/prpc/v1/Health?json' -d '{}'
}
says() { ask | grep -q -- "$1"; }

"$BIN" --listen "unix:$T/sock" --compose-file "$T/app-compose.json" \
	--runtime-file "$T/no-runtime.json" --interval 0.2 2>"$T/server.log" &
SERVER_PID=$!
ok "$(wait_for 30 test -S "$T/sock"; echo $?)" "the server listens on a unix socket"
ok "$(wait_for 20 says 'the status file is a FIFO; it must be a regular file'; echo $?)" "the server reports the FIFO"
ok "$(grep -q 'is a FIFO; it must be a regular file' "$T/server.log"; echo $?)" "the log names it"
# Several refresh periods with the FIFO in place: every poll is answered
# (within 20 s, a ceiling for a hang), so no thread is parked on the FIFO.
slow=0
for _ in $(seq 10); do
	ans=$(ask) || slow=$((slow + 1))
	[[ "$ans" == *'is a FIFO'* ]] || slow=$((slow + 1))
	sleep 0.1
done
is "$slow" 0 "10 polls with the FIFO in place each answered (none hung 20 s)"
# The refresh thread still runs: replace the FIFO and the verdict follows.
printf 'healthy\n%s\n' "$(now)" >"$T/st/new" && mv "$T/st/new" "$T/st/fifo"
ok "$(wait_for 20 says '"healthy":true'; echo $?)" "after the FIFO is replaced the server reports healthy"
parse "$(ask)"
is "$HEALTHY" true "the server's answer decodes as healthy"
printf 'unhealthy\n%s\n' "$(now)" >"$T/st/new" && mv "$T/st/new" "$T/st/fifo"
ok "$(wait_for 20 says 'the app reports unhealthy'; echo $?)" "a rename-in-place update is seen"
printf 'healthy\n%s\n' "$(( $(now) - 120 ))" >"$T/st/new" && mv "$T/st/new" "$T/st/fifo"
ok "$(wait_for 20 says 'older than 60 s counts as unhealthy'; echo $?)" "a stale file is seen by the server"
agent_stop "$SERVER_PID"
SERVER_PID=

# --- an unreadable file is judged on the very next refresh ------------------
# A FIFO or a directory put in place of a fresh healthy file is an entry on
# the first refresh that starts after the swap, not a failed refresh that
# keeps healthy:true for two more. Judged on the first refresh that started
# after the swap, from the /status object that reports that refresh: no
# wall-time bound.
CTL=$T/ctl.sock
ctl() { curl -s --max-time 10 --unix-socket "$CTL" "http://x/$1"; }
# first_after MS: /status reports a refresh that started after MS (ms since
# the epoch); its verdict goes to $T/first.json.
first_after() {
	ctl status | python3 -c 'import calendar, json, sys, time
d = json.load(sys.stdin)
t = d["refresh"]["last_start"]
ms = calendar.timegm(time.strptime(t[:19], "%Y-%m-%dT%H:%M:%S")) * 1000 + int(t[20:23])
if ms <= int(sys.argv[1]):
    sys.exit(1)
json.dump(d["verdict"], open(sys.argv[2], "w"))' "$1" "$T/first.json"
}
# served PATTERN: the verdict /status serves (not its history) matches.
served() {
	ctl status | python3 -c 'import json, re, sys
sys.exit(0 if re.search(sys.argv[1], json.dumps(json.load(sys.stdin)["verdict"])) else 1)' "$1"
}
# The path is a symlink, replaced in one rename: no refresh may see it
# missing in between (that would be an entry of its own).
printf 'healthy\n%s\n' "$(now)" >"$T/st/good"
ln -s good "$T/st/swap"
compose "$T/st/swap"
"$BIN" --listen "unix:$T/sock2" --control-socket "$CTL" --compose-file "$T/app-compose.json" \
	--runtime-file "$T/no-runtime.json" --interval 2 2>"$T/server2.log" &
SERVER_PID=$!
ok "$(wait_for 20 served '"healthy": true'; echo $?)" "next refresh: the fresh file is served healthy"
# swap_in KIND MAKE...: points the path at what MAKE makes, in one rename,
# once the fresh file is served healthy; checks the first refresh after.
swap_in() {
	local kind=$1 n
	shift
	printf 'healthy\n%s\n' "$(now)" >"$T/st/good"
	ln -sfn good "$T/st/swap"
	ok "$(wait_for 20 served '"healthy": true'; echo $?)" "next refresh ($kind): healthy before the swap"
	rm -rf "$T/st/bad"; "$@" "$T/st/bad"
	ln -sfn bad "$T/st/swap.new" && mv -T "$T/st/swap.new" "$T/st/swap"
	swapped=$(date +%s%3N)
	ok "$(wait_for 30 first_after "$swapped"; echo $?)" "next refresh ($kind): a refresh started after the swap"
	parse "$(cat "$T/first.json")"
	is "$HEALTHY" false "next refresh ($kind): healthy:false on that refresh"
	is "$STATUS" "<health_file>=the status file is $kind; it must be a regular file" \
		"next refresh ($kind): the entry says why, no path"
	is "$ERROR" "" "next refresh ($kind): error stays empty"
}
swap_in "a FIFO" mkfifo
swap_in "a directory" mkdir

# --- `dstack-healthd status` shows the status file --------------------------
# The source and where, the file's state, its timestamp and age against the
# 60 s limit, the last refresh: all read from /status.
# mlike TEXT REGEX DESC: like, with a REGEX that may span lines.
mlike() {
	if python3 -c 'import re, sys; sys.exit(0 if re.search(sys.argv[2], sys.argv[1]) else 1)' "$1" "$2"; then
		ok 0 "$3"
	else
		ok 1 "$3"
		printf '#   got:  %s\n#   want match: %s\n' "$1" "$2"
	fi
}
printf 'healthy\n%s\n' "$(( $(now) - 5 ))" >"$T/st/good"
ln -sfn good "$T/st/swap"
wait_for 20 sh -c "curl -s --max-time 20 --unix-socket '$CTL' http://x/status | grep -q '\"state\":\"healthy\"'"
view=$("$BIN" status --control-socket "$CTL"); rc=$?
is "$rc" 0 "status: exit 0 (healthy)"
mlike "$view" "Source:
  status file $T/st/swap
  healthy, written [0-9T:.-]+Z, [0-9]+ s old at the last refresh \(limit 60 s\)" \
	"status: the source, its path, the file's state, timestamp, age and limit"
mlike "$view" "Refresh:
  last [0-9T:.-]+Z, took [0-9.]+ ms, next [0-9T:.-]+Z" "status: the last refresh's time and duration"
mkfifo "$T/st/fifo2" && mv "$T/st/fifo2" "$T/st/swap"
wait_for 20 served 'is a FIFO'
view=$("$BIN" status --control-socket "$CTL"); rc=$?
is "$rc" 1 "status: exit 1 (not healthy)"
mlike "$view" "  <health_file>: the status file is a FIFO; it must be a regular file
(.*
)*  status file $T/st/swap
  not read: the entry above says why" "status: an unreadable file names the path locally, the entry says why"
agent_stop "$SERVER_PID"
SERVER_PID=

# --- app-compose restarted without a reboot (issue 29) -------------------------
# The previous run's "healthy" is still fresh when the guest starts Compose
# again and rewrites the runtime file: not healthy until the app writes anew.
printf 'healthy\n%s\n' "$(( $(now) - 2 ))" >"$T/st/run"
compose "$T/st/run"
printf '{"project":"p"}' >"$T/rt2.json"
touch -d "@$(( $(now) - 30 ))" "$T/rt2.json"
"$BIN" --listen "unix:$T/sock4" --control-socket "$CTL" --compose-file "$T/app-compose.json" \
	--runtime-file "$T/rt2.json" --interval 0.2 2>"$T/server4.log" &
SERVER_PID=$!
ok "$(wait_for 20 served '"healthy": true'; echo $?)" "restart: healthy, written after the runtime file"
view=$("$BIN" status --control-socket "$CTL")
mlike "$view" "  the app started [0-9T:.-]+Z \\(runtime file\\); not before it" \
	"status: the start the file is judged against, and what marked it"
touch "$T/rt2.json"
ok "$(wait_for 20 served "written [0-9]+ s before the app's current start"; echo $?)" \
	"restart: the runtime file rewritten, the previous run's file is not trusted"
view=$("$BIN" status --control-socket "$CTL")
mlike "$view" "  the app started [0-9T:.-]+Z \\(runtime file\\); written before it" \
	"status: says the file was written before the start"
printf 'healthy\n%s\n' "$(now)" >"$T/st/run.new" && mv "$T/st/run.new" "$T/st/run"
ok "$(wait_for 20 served '"healthy": true'; echo $?)" "restart: healthy once the app writes anew"
agent_stop "$SERVER_PID"
SERVER_PID=

# A failing refresh's detail (here Docker's socket is not there), with the
# source line of a container source.
printf '{"manifest_version":"3","name":"e2e","runner":"docker-compose","requirements":{"health_check":true}}' \
	>"$T/docker-compose.json"
printf '{"project":"demo"}' >"$T/rt.json"
"$BIN" --listen "unix:$T/sock3" --control-socket "$CTL" --compose-file "$T/docker-compose.json" \
	--runtime-file "$T/rt.json" --docker-host "unix://$T/no-docker.sock" --interval 0.5 \
	2>"$T/server3.log" &
SERVER_PID=$!
wait_for 20 sh -c "curl -s --max-time 20 --unix-socket '$CTL' http://x/status | grep -q '\"failures_in_row\":[1-9]'"
view=$("$BIN" status --control-socket "$CTL")
mlike "$view" "Source:
  docker unix://$T/no-docker.sock \(API -\), project demo" "status: the Docker source line"
mlike "$view" "  failing, [0-9]+ in a row: .*no-docker\.sock.* \([0-9T:.-]+Z\)" \
	"status: a failing refresh's detail, in full (local only)"
agent_stop "$SERVER_PID"
SERVER_PID=

# --- app-compose.json errors with --once: exit 2, naming the field ----------
# config_error DESC JSON FIELD-MESSAGE-REGEX
config_error() {
	printf '%s' "$2" >"$T/bad-compose.json"
	timeout 60 "$BIN" --once --compose-file "$T/bad-compose.json" \
		--runtime-file "$T/no-runtime.json" >"$T/out" 2>"$T/err"
	is "$?" 2 "$1: exit status 2"
	like "$(cat "$T/err")" "^dstack-healthd: error: app-compose\.json: $3" "$1: names the file (not its path) and the field"
}
config_error "relative status file" \
	'{"manifest_version":"3","runner":"bash","requirements":{"health_check":true,"health_status_file":"dstack/health"}}' \
	'requirements\.health_status_file: must be an absolute path'
config_error "control characters in the status file path" \
	'{"manifest_version":"3","runner":"bash","requirements":{"health_check":true,"health_status_file":"/a\u001b[31mb"}}' \
	'requirements\.health_status_file: must not contain control characters'
config_error "empty status file path" \
	'{"manifest_version":"3","runner":"bash","requirements":{"health_check":true,"health_status_file":""}}' \
	'requirements\.health_status_file: must be an absolute path'
config_error "status file path not a string" \
	'{"manifest_version":"3","runner":"bash","requirements":{"health_check":true,"health_status_file":7}}' \
	'requirements\.health_status_file: must be a string, not a number'
config_error "unknown requirement" \
	'{"manifest_version":"3","runner":"bash","requirements":{"health_check":true,"health_file":"/x"}}' \
	'requirements\.health_file: unknown field'
config_error "health_check not a boolean" \
	'{"manifest_version":"3","runner":"docker-compose","requirements":{"health_check":"yes"}}' \
	'requirements\.health_check: must be true or false'
config_error "requirements below manifest version 3" \
	'{"manifest_version":2,"runner":"docker-compose","requirements":{"health_check":true}}' \
	'requirements: needs manifest_version "3" or later'
config_error "bash runner gating without a status file" \
	'{"manifest_version":"3","runner":"bash","requirements":{"health_check":true}}' \
	'requirements\.health_check: runner "bash" has no Compose containers to judge'
config_error "missing runner" '{"manifest_version":"3"}' 'runner: missing'
config_error "missing manifest_version" '{"runner":"bash"}' 'manifest_version: missing'
config_error "not JSON" '{"manifest_version":' 'truncated JSON'

timeout 60 "$BIN" --once --compose-file "$T/nowhere.json" \
	--runtime-file "$T/no-runtime.json" >"$T/out" 2>"$T/err"
is "$?" 2 "missing app-compose.json: exit status 2"
is "$(cat "$T/err")" 'dstack-healthd: error: app-compose.json: does not exist' "missing app-compose.json: names the file"

done_testing
