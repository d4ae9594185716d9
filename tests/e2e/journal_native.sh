#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The journal's native protocol, without systemd: under systemd (stderr the
# stream JOURNAL_STREAM names) the agent sends each line to
# /run/systemd/journal/socket with PRIORITY, SYSLOG_IDENTIFIER and its own
# fields (HEALTHD_VERDICT, HEALTHD_REASON on a verdict line), read here by
# a datagram listener of ours bound there in a private mount namespace (a
# tmpfs over /run); with no journal to take them (its socket refusing) the
# lines go to stderr, none lost. systemd.sh checks the journal itself.
cd "$(dirname "$0")/../.." || exit 1
. tests/lib/tap.sh
if [ -z "${HEALTHD_JOURNAL_NS:-}" ]; then
	[ "$(id -u)" = 0 ] || skip_all "needs root for a private mount namespace"
	command -v unshare >/dev/null || skip_all "unshare is not installed"
	HEALTHD_JOURNAL_NS=1 exec unshare --mount --propagation private "$0" "$@"
fi
B=${HEALTHD_BUILD:-build}
BIN=$PWD/$B/dstack-healthd
[ -x "$BIN" ] || { echo "not ok 1 - $BIN is not built"; echo "1..1"; exit 1; }
command -v python3 >/dev/null || skip_all "python3 is not installed"
. tests/lib/scratch.sh

mount -t tmpfs tmpfs /run && mkdir -p /run/systemd/journal
ok $? "a private /run"
# The listener: each datagram's fields as one JSON line.
python3 -c '
import json, socket, struct, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind("/run/systemd/journal/socket")
out = open(sys.argv[1], "a", buffering=1)
while True:
    d, f = s.recvfrom(1 << 20), {}
    d = d[0]
    while d:
        nl = d.index(b"\n")
        line, d = d[:nl], d[nl + 1:]
        if b"=" in line:
            k, v = line.split(b"=", 1)
        else:  # KEY, then a 64-bit little-endian length, the value, a newline
            k, (n,) = line, struct.unpack("<Q", d[:8])
            v, d = d[8:8 + n], d[8 + n + 1:]
        f[k.decode()] = v.decode("utf-8", "replace")
    out.write(json.dumps(f) + "\n")
' "$T/journal.jsonl" &
LISTENER=$!
PIDS+=($LISTENER)
wait_for 20 test -S /run/systemd/journal/socket
ok $? "a listener on /run/systemd/journal/socket"

printf 'healthy\n%s\n' "$(date +%s)" >"$T/health"
printf '{"manifest_version":"3","name":"j","runner":"bash","requirements":{"health_check":true,"health_status_file":"%s"}}\n' \
	"$T/health" >"$T/app.json"
: >"$T/agent.log"
JOURNAL_STREAM=$(stat -c '%d:%i' "$T/agent.log") "$BIN" --listen "unix:$T/a.sock" \
	--compose-file "$T/app.json" --interval 0.2 2>>"$T/agent.log" &
AGENT=$!
PIDS+=($AGENT)
fields() { # fields EXPR: EXPR over each entry f, one line each
	python3 -c 'import json, sys
for l in open(sys.argv[1]):
    f = json.loads(l)
    print(eval(sys.argv[2]))' "$T/journal.jsonl" "$1" 2>/dev/null
}
wait_for 30 grep -q 'serving on unix:' "$T/journal.jsonl"
ok $? "the start line went to the journal"
like "$(fields 'f.get("PRIORITY"), f.get("SYSLOG_IDENTIFIER")' | head -n1)" "^\('6', 'dstack-healthd'\)$" \
	"at PRIORITY 6 (info), SYSLOG_IDENTIFIER dstack-healthd"
wait_for 30 grep -q 'HEALTHD_VERDICT' "$T/journal.jsonl"
like "$(fields '" ".join([f.get("PRIORITY", ""), f.get("HEALTHD_VERDICT", ""), f["MESSAGE"]]) if "HEALTHD_VERDICT" in f else ""' | grep . | head -n1)" \
	'^5 healthy verdict: healthy$' "the verdict line: notice, HEALTHD_VERDICT=healthy"
printf 'unhealthy\n%s\n' "$(date +%s)" >"$T/health.tmp" && mv "$T/health.tmp" "$T/health"
wait_for 30 grep -q '"HEALTHD_VERDICT": "unhealthy"' "$T/journal.jsonl"
like "$(fields '"|".join([f.get("PRIORITY", ""), f.get("HEALTHD_REASON", ""), f.get("HEALTHD_COMPOSE_HASH", "")]) if f.get("HEALTHD_VERDICT") == "unhealthy" else ""' | grep . | head -n1)" \
	'^4\|<health_file>: the app reports unhealthy\|[0-9a-f]{64}$' \
	"the unhealthy line: warning, its reason and the app-compose.json hash as fields"
is "$(cat "$T/agent.log")" "" "nothing on stderr while the journal takes the lines"

# The journal goes away, its socket left behind: the lines come on stderr.
# (With no socket at all libsystemd drops a line and says it was sent: a
# journal that is not there at all takes the unit's stderr with it.)
kill -TERM "$LISTENER"
reap 20 "$LISTENER" >/dev/null
printf 'healthy\n%s\n' "$(date +%s)" >"$T/health.tmp" && mv "$T/health.tmp" "$T/health"
wait_for 30 grep -q 'verdict: healthy' "$T/agent.log"
ok $? "no journal to send to: the next line is on stderr ($(head -n1 "$T/agent.log"))"
done_testing
