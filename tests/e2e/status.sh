#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The operator's view (issue 11) against a real dockerd: the control socket
# (0600, root only), GET /status with the last probe's output, since and
# failing_streak moving as the probe flips, the pollers and the history, GET
# /metrics checked by promtool and against /status, `dstack-healthd status`
# and `reload` (applied, refused), and none of it reachable or leaking on the
# public listener. Ends with 1000 distinct poller addresses: the table and
# the memory stay bounded.
# tests/run: tsan
cd "$(dirname "$0")/../.." || exit 1
. tests/lib/tap.sh
. tests/lib/scratch.sh
. tests/lib/dockerd.sh
command -v promtool >/dev/null 2>&1 || skip_all "promtool is not installed (Debian: prometheus)"
command -v setpriv >/dev/null 2>&1 || skip_all "setpriv is not installed (util-linux)"

dockerd_start
# dockerd_start installs its own EXIT trap: scratch.sh's runs instead, and
# stops the daemon (and the agent, tracked) before it removes $T.
scratch_more() { dockerd_stop; }
trap scratch_cleanup EXIT

MARKER=PROBE-MARKER-7f3a
CTL=$T/ctl.sock
LOG=$DH_T/hd-st.log
cp tests/e2e/compose/probe.yml "$T/probe.yml"
timeout 120 docker-compose --no-ansi -p hst -f "$T/probe.yml" up -d >"$T/up.log" 2>&1
ok $? "docker-compose up -d (web with a probe that prints a marker, plain without one)"
dh_expect_state 30 hst_web_1 "running healthy"

healthd_app_compose
healthd_runtime "$T/rt.json" hst
printf '{"interval": 1}\n' >"$T/cfg.json"
"$HEALTHD_BIN" -c "$T/cfg.json" --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 \
	--control-socket "$CTL" --compose-file "$DH_T/app-compose.json" \
	--runtime-file "$T/rt.json" --docker-host "unix://$DH_T/docker.sock" >"$LOG" 2>&1 &
AGENT=$!
dh_track "$AGENT"
wait_for 30 grep -q 'metrics on http://127' "$LOG"
ok $? "agent: started, control socket and metrics listener logged"
PORT=$(sed -n 's/.*serving on 127\.0\.0\.1:\([0-9]*\);.*/\1/p' "$LOG" | head -1)
MPORT=$(sed -n 's|.*metrics on http://127\.0\.0\.1:\([0-9]*\)/metrics.*|\1|p' "$LOG" | head -1)

st() { curl -s --max-time 5 --unix-socket "$CTL" http://x/status; }
stj() { st | dh_json "$1"; }
web() { stj "[c for c in d['containers'] if c['name']=='hst_web_1'][0]$1"; }
POLLS=0
verdict_is() { [ "$(stj 'd["verdict"]["healthy"]')" = "$1" ]; }
poll() { # a Health poll from 127.0.0.1, counted
	POLLS=$((POLLS + 1))
	curl -s --max-time 3 -X POST "http://127.0.0.1:$PORT/prpc/v1/Health?json" -d '{}'
}

# --- the socket ----------------------------------------------------------------
is "$(stat -c '%a %U' "$CTL")" "600 root" "control socket: mode 0600, owned by the agent's user"
out=$(setpriv --reuid=65534 --regid=65534 --clear-groups \
	curl -s -o /dev/null -w '%{http_code}' --unix-socket "$CTL" http://x/status 2>&1)
is "$out" "000" "a non-root user cannot even connect (mode 0600)"
# A non-root user allowed past the file modes (CAP_DAC_OVERRIDE) reaches the
# socket, and the agent itself refuses it.
out=$(setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=+dac_override \
	--ambient-caps=+dac_override \
	curl -s -w ' %{http_code}' --unix-socket "$CTL" http://x/status 2>&1)
is "$out" "root or the agent's user only
 403" "a non-root peer past the file modes is refused by the agent (SO_PEERCRED)"

# --- healthy -------------------------------------------------------------------
wait_for 15 verdict_is true
is "$(stj 'd["verdict"]')" "$HEALTHD_OK" "status: verdict is the public Health object"
is "$(stj 'd["source"]["kind"]+" "+d["source"]["project"]+" "+str(d["source"]["api_version"] is not None)')" \
	"docker hst True" "status: source docker, project, the negotiated API version"
is "$(stj '[(c["name"],c["service"],c["judged"],c["skipped"]) for c in sorted(d["containers"], key=lambda c: c["name"])]')" \
	'[["hst_plain_1","plain",false,"no healthcheck"],["hst_web_1","web",true,null]]' \
	"status: every container of the project, judged or why not"
is "$(stj 'd["config"]["interval"]["value"], d["config"]["interval"]["from"], d["config"]["listen"]["from"], d["config"]["runtime_file"]["from"]')" \
	"[1,\"file $T/cfg.json\",\"flag --listen\",\"flag --runtime-file\"]" \
	"status: config values say where they came from"
is "$(stj 'd["history"][-1]["trigger"], d["history"][-1]["healthy"]')" '["start",true]' \
	"history: the first verdict, trigger start"
since_healthy=$(web '["since"]')
for _ in 1 2 3; do poll >/dev/null; done

# --- the probe fails -----------------------------------------------------------
"$DH_DOCKER" exec hst_web_1 rm /ok
wait_for 20 verdict_is false
is "$(stj 'd["verdict"]["healthy"]')" "false" "status: unhealthy once the probe fails"
is "$(web '["status"]')" "unhealthy" "status: web served as unhealthy"
like "$(web '["last_probe"]["output"]')" "^$MARKER\\\\x1b\\[0m\\\\nsecond line\\\\n$" \
	"status: the last probe's output, control characters escaped"
is "$(web '["last_probe"]["exit_code"]')" "1" "status: the last probe's exit code"
[ "$(web '["since"]')" != "$since_healthy" ]
ok $? "status: since moved when the status changed"
streak_ge() { [ "$(web '["failing_streak"]')" -ge "$1" ] 2>/dev/null; }
wait_for 30 streak_ge 2
ok $? "status: failing_streak counts up while the probe fails"
since_unhealthy=$(web '["since"]')
streak_now=$(web '["failing_streak"]')
wait_for 30 streak_ge $((streak_now + 1))
is "$(web '["since"]')" "$since_unhealthy" "status: since held across refreshes in the same status"
for _ in 1 2; do poll >/dev/null; done
out=$("$HEALTHD_BIN" status --control-socket "$CTL"); rc=$?
is "$rc" 1 "dstack-healthd status: exit 1 when not healthy"
like "$out" "hst_web_1 +unhealthy" "dstack-healthd status: a row per container"
like "$out" "last probe: $MARKER" "dstack-healthd status: the last probe's first line"
like "$out" "127\\.0\\.0\\.1 +$POLLS polls" "dstack-healthd status: the pollers"
! printf '%s' "$out" | grep -q $'\033'
ok $? "dstack-healthd status: no colour when not on a terminal"
out=$("$HEALTHD_BIN" status --json --control-socket "$CTL"); rc=$?
is "$rc:$(printf '%s' "$out" | dh_json 'd["verdict"]["healthy"]')" "1:false" "dstack-healthd status --json: the raw object"

# --- nothing public leaks, nothing local is public --------------------------
pub=$(poll; curl -s -X POST --data-binary '' "http://127.0.0.1:$PORT/prpc/v1/Health";
	curl -s "http://127.0.0.1:$PORT/prpc/v1/Health?json"; curl -s "http://127.0.0.1:$PORT/prpc/v1/Version?json")
POLLS=$((POLLS + 3)) # poll's own count was lost in the subshell
! printf '%s' "$pub" | grep -aq "$MARKER"
ok $? "the marker is in no public answer (JSON, protobuf, Version)"
for path in /status /metrics /reload /prpc/v1/status /../status; do
	code=$(curl -s -o "$T/pub.out" -w '%{http_code}' -X GET --path-as-is "http://127.0.0.1:$PORT$path")
	code2=$(curl -s -o /dev/null -w '%{http_code}' -X POST --path-as-is "http://127.0.0.1:$PORT$path")
	! grep -q "$MARKER\|containers" "$T/pub.out" && [ "$code" = 404 ] && [ "$code2" = 404 ]
	ok $? "public listener: $path is not the local view ($code, $code2)"
done
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$MPORT/status")
is "$code" 404 "metrics listener: /status is not served there"

# --- healthy again -------------------------------------------------------------
"$DH_DOCKER" exec hst_web_1 touch /ok
wait_for 20 verdict_is true
is "$(web '["status"]') $(web '["failing_streak"]')" "healthy 0" "status: healthy again, streak back to 0"
[ "$(web '["since"]')" != "$since_unhealthy" ]
ok $? "status: since moved again"
is "$(stj '[(h["healthy"], h["trigger"] in ("event","timer")) for h in d["history"][:2]]')" \
	'[[true,true],[false,true]]' "history: both flips, newest first, each with its trigger"
poll >/dev/null
is "$(stj '[(p["count"], p["last_healthy"]) for p in d["pollers"] if p["address"]=="127.0.0.1"]')" \
	"[[$POLLS,true]]" "pollers: 127.0.0.1 with the right count and what it was last told"

# --- metrics -------------------------------------------------------------------
curl -s --unix-socket "$CTL" http://x/metrics >"$T/m.txt"
promtool check metrics <"$T/m.txt" >"$T/promtool.out" 2>&1
ok $? "promtool check metrics passes"
sed 's/^/# /' "$T/promtool.out"
curl -s "http://127.0.0.1:$MPORT/metrics" | promtool check metrics >/dev/null 2>&1
ok $? "metrics listener: /metrics, and it passes promtool"
metric() { awk -v m="$1" '$1 == m { print $2 }' "$T/m.txt"; }
st >"$T/s.json"
is "$(metric dstack_healthd_healthy)" \
	"$(dh_json 'int(d["verdict"]["healthy"])' <"$T/s.json")" "metrics: healthy matches /status"
is "$(metric 'dstack_healthd_health_requests_total{code="200"}')" \
	"$(dh_json 'sum(p["count"] for p in d["pollers"])' <"$T/s.json")" \
	"metrics: Health requests answered 200 match the pollers' counts"
is "$(metric dstack_healthd_pollers)" "$(dh_json 'len(d["pollers"])' <"$T/s.json")" \
	"metrics: pollers matches /status"
is "$(metric 'dstack_healthd_container_healthy{name="hst_web_1",service="web"}')" 1 \
	"metrics: the judged container, healthy"
is "$(metric dstack_healthd_verdict_changes_total)" "$(dh_json 'len(d["history"])' <"$T/s.json")" \
	"metrics: verdict changes match the history"
like "$(metric 'dstack_healthd_info{version="0.1.0",source="docker"}')" "^1$" "metrics: info"

# --- reload --------------------------------------------------------------------
printf '{"interval": 2}\n' >"$T/cfg.json"
out=$("$HEALTHD_BIN" reload --control-socket "$CTL"); rc=$?
is "$rc" 0 "reload: applied, exit 0"
like "$out" "interval: 1 → 2" "reload: says what changed, old → new"
is "$(stj 'd["config"]["interval"]["value"]')" 2 "reload: in force at once (the answer came after it)"
printf '{"interval": "soon"}\n' >"$T/cfg.json"
out=$("$HEALTHD_BIN" reload --control-socket "$CTL" 2>&1); rc=$?
is "$rc" 1 "reload: a bad config is refused, exit 1"
like "$out" "refused.*cfg.json: interval" "reload: says why"
is "$(stj 'd["config"]["interval"]["value"]')" 2 "reload: the running configuration stays"
printf '{"interval": 1}\n' >"$T/cfg.json"
"$DH_DOCKER" exec hst_web_1 rm /ok
wait_for 20 verdict_is false
printf '%s\n' '{"manifest_version":"3","name":"t","runner":"docker-compose","requirements":{"health_check":false}}' \
	>"$DH_T/app-compose.json"
out=$("$HEALTHD_BIN" reload --control-socket "$CTL"); rc=$?
is "$rc $(printf '%s' "$out" | grep -c '^app-compose.json sha256: [0-9a-f]* → [0-9a-f]*$')" "0 1" \
	"reload: an app-compose change is named"
wait_for 30 verdict_is true
is "$(stj 'd["history"][0]["trigger"], d["history"][0]["healthy"]')" '["reload",true]' \
	"history: a verdict changed by a reload says so"
kill -HUP "$AGENT"
wait_for 30 sh -c "[ \$(grep -c 'notice: reloaded' '$LOG') -ge 3 ]"
ok $? "SIGHUP still reloads"
out=$("$HEALTHD_BIN" status --control-socket "$T/nothing.sock" 2>&1); rc=$?
is "$rc" 3 "dstack-healthd status: exit 3 when the agent is not reachable"

# --- 1000 distinct pollers -----------------------------------------------------
anon() { awk '/^RssAnon:/ { print $2 }' "/proc/$AGENT/status"; }
before=$(anon)
python3 - "$PORT" <<'PY'
import socket, sys
port = int(sys.argv[1])
for i in range(1000):
    s = socket.socket()
    s.bind(("127.0.%d.%d" % (1 + i // 250, 1 + i % 250), 0))
    s.connect(("127.0.0.1", port))
    s.sendall(b"POST /prpc/v1/Health?json HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")
    while s.recv(4096):
        pass
    s.close()
PY
ok $? "1000 Health polls from 1000 distinct addresses"
after=$(anon)
is "$(stj 'len(d["pollers"])')" 256 "pollers: at most 256 kept"
diag "RssAnon before $before kB, after $after kB"
# The table is 256 fixed entries (16 KiB); the rest of the answer path
# allocates nothing per address. (The idle figure is bench/run.sh's.) The
# sanitizer's allocator keeps memory of its own: judged in the release
# build only.
case $(build_kind) in
address | thread) diag "sanitizer build: memory not judged" ;;
*)	[ $((after - before)) -lt 64 ]
	ok $? "memory stays bounded: RssAnon grew $((after - before)) kB (< 64) for 1000 addresses" ;;
esac

healthd_sanitizer_clean
ok $? "no sanitizer report"
dh_kill "$AGENT"
timeout 120 docker-compose --no-ansi -p hst -f "$T/probe.yml" down -t 1 >/dev/null 2>&1
done_testing
