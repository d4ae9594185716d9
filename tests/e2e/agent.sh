#!/bin/bash
# The agent as a program: --help, --version, config and app-compose errors
# (exit 2 before ready, naming the file and field), --once exit codes, gating
# off, the not-yet-determined verdict, and a clean stop on SIGTERM.
set -u
cd "$(dirname "$0")/../.."
. tests/lib/tap.sh
BIN=${HEALTHD_BUILD:-build}/dstack-healthd
[ -x "$BIN" ] || skip_all "$BIN not built"

. tests/lib/scratch.sh

compose() { # compose FILE JSON-REQUIREMENTS [RUNNER]
	printf '{"manifest_version":"3","name":"t","runner":"%s","requirements":%s}\n' \
		"${3:-docker-compose}" "$2" > "$1"
}

out=$("$BIN" --help); rc=$?
is "$rc" 0 "--help exits 0"
like "$out" "--compose-file=FILE" "--help lists --compose-file"
like "$out" "DSTACK_HEALTHD_" "--help explains the environment variables"
out=$("$BIN" --version); rc=$?
is "$rc" 0 "--version exits 0"
like "$out" '^dstack-healthd v[0-9]+\.[0-9]+\.[0-9]+ \(git:' "--version prints version and rev"

# Usage and config errors: exit 2, message names the source and field.
check_error() { # check_error DESCRIPTION REGEX ARGS...
	local desc=$1 re=$2 err rc
	shift 2
	err=$("$BIN" "$@" 2>&1 >/dev/null); rc=$?
	is "$rc" 2 "$desc: exit status 2"
	like "$err" "$re" "$desc: message names it"
}
compose "$T/ok.json" '{"health_check":false}'
check_error "unknown flag" "--frobnicate: unknown option" --frobnicate
check_error "bad interval" "--interval: must be a number" --interval=never --compose-file "$T/ok.json"
check_error "missing compose file" "$T/nope.json: does not exist" --once --compose-file "$T/nope.json"
printf '{"manifest_version":"3","runner":"docker-compose","requirements":{"health_check":"yes"}}' > "$T/badtype.json"
check_error "health_check of the wrong type" "badtype.json: .*requirements.health_check" --once --compose-file "$T/badtype.json"
printf '{"manifest_version":"3","runner":"docker-compose","requirements":{"health_check":true,"health_status_file":"rel/path"}}' > "$T/rel.json"
check_error "relative status file" "rel.json: .*requirements.health_status_file" --once --compose-file "$T/rel.json"
printf '{"manifest_version":"3","runner":"docker-compose","requirements":{"healthcheck":true}}' > "$T/unknown.json"
check_error "unknown requirement" "unknown.json: .*requirements.healthcheck" --once --compose-file "$T/unknown.json"
printf '{"manifest_version":2,"runner":"docker-compose","requirements":{"health_check":true}}' > "$T/v2.json"
check_error "requirements below manifest 3" "v2.json: .*requirements" --once --compose-file "$T/v2.json"
compose "$T/bash.json" '{"health_check":true}' bash
check_error "bash runner without a status file" "bash.json: .*health_status_file" --once --compose-file "$T/bash.json"
printf '{"listen":"127.0.0.1:1","interval":"five"}' > "$T/cfg.json"
check_error "config file field of the wrong type" "cfg.json: interval" -c "$T/cfg.json" --once --compose-file "$T/ok.json"
DSTACK_HEALTHD_REFRESH_TIMEOUT=x check_error "bad environment variable" \
	"DSTACK_HEALTHD_REFRESH_TIMEOUT" --once --compose-file "$T/ok.json"
check_error "bad listen address" "listen" --listen "nonsense" --compose-file "$T/ok.json"

# --once: gating off is healthy without any runtime.
out=$("$BIN" --once --compose-file "$T/ok.json" --docker-host unix://$T/none.sock); rc=$?
is "$rc" 0 "--once with gating off exits 0"
is "$out" '{"healthy":true,"unhealthy":[],"error":""}' "--once with gating off: healthy, every field"

# --once against an unreachable Docker: not healthy, error says what failed.
compose "$T/gated.json" '{"health_check":true}'
printf '{"project":"p"}' > "$T/runtime.json"
out=$("$BIN" --once --compose-file "$T/gated.json" --runtime-file "$T/runtime.json" \
	--docker-host unix://$T/none.sock --refresh-timeout 2); rc=$?
is "$rc" 1 "--once with Docker unreachable exits 1"
like "$out" '^\{"healthy":false,"unhealthy":\[\],"error":".*none.sock' "--once names the unreachable socket"
out=$("$BIN" --once --compose-file "$T/gated.json" --runtime-file "$T/absent.json" \
	--docker-host unix://$T/none.sock); rc=$?
is "$rc" 1 "--once before Compose wrote the runtime file exits 1"
like "$out" '"name":"<compose>","status":"no container has been created yet"' \
	"no runtime file: no container has been created yet"

# Serving: not determined before the first refresh completes is not healthy;
# gating off answers healthy; SIGTERM stops within a second.
health() { curl -s --max-time 2 --unix-socket "$1" -X POST 'http://x/prpc/v1/Health?json' -d '{}'; }
"$BIN" --listen "unix:$T/off.sock" --compose-file "$T/ok.json" 2>"$T/off.log" &
PIDS+=($!)
off=$!
wait_for 5 test -S "$T/off.sock"
is "$(health "$T/off.sock")" '{"healthy":true,"unhealthy":[],"error":""}' "served: gating off is healthy"
start=$(date +%s%N)
kill -TERM "$off"
wait "$off"; rc=$?
ms=$(( ($(date +%s%N) - start) / 1000000 ))
is "$rc" 0 "SIGTERM: exit status 0"
ok $([ "$ms" -lt 1000 ]; echo $?) "SIGTERM: stopped in ${ms} ms (< 1000)"
ok $([ ! -e "$T/off.sock" ] || ! curl -s --max-time 1 --unix-socket "$T/off.sock" http://x/ >/dev/null; echo $?) \
	"SIGTERM: the listener is closed"

# A Docker socket that accepts and never answers keeps the first refresh from
# completing: the served verdict is "not determined yet", and never healthy.
python3 -c '
import socket, sys, time
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(16)
conns = []
while True:
    c, _ = s.accept(); conns.append(c)
' "$T/hang.sock" &
PIDS+=($!)
wait_for 5 test -S "$T/hang.sock"
"$BIN" --listen "unix:$T/gated.sock" --compose-file "$T/gated.json" --runtime-file "$T/runtime.json" \
	--docker-host "unix://$T/hang.sock" --refresh-timeout 30 --interval 60 2>"$T/gated.log" &
gated=$!
PIDS+=($gated)
wait_for 5 test -S "$T/gated.sock"
is "$(health "$T/gated.sock")" \
	'{"healthy":false,"unhealthy":[{"name":"<health>","status":"health has not been determined yet"}],"error":""}' \
	"before the first refresh completes: not determined yet, not healthy"
start=$(date +%s%N)
kill -TERM "$gated"
wait "$gated"; rc=$?
ms=$(( ($(date +%s%N) - start) / 1000000 ))
is "$rc" 0 "SIGTERM during a hung refresh: exit status 0"
ok $([ "$ms" -lt 1000 ]; echo $?) "SIGTERM during a hung refresh: stopped in ${ms} ms (< 1000)"

# A reload that lengthens the interval moves the staleness limit with it:
# with --interval 0.2 and --refresh-timeout 0.5 a verdict is stale after
# 1.1 s; after SIGHUP with interval 3 s (config file beats nothing here: the
# flags are gone from the file's view, so use the environment), the verdict
# must still be served as current 2 s after the last refresh.
printf 'healthy\n%s\n' "$(date +%s)" > "$T/health"
compose "$T/sf.json" "{\"health_check\":true,\"health_status_file\":\"$T/health\"}"
printf '{"interval":0.2,"refresh_timeout":0.5}' > "$T/reload.json"
"$BIN" -c "$T/reload.json" --listen "unix:$T/reload.sock" --compose-file "$T/sf.json" 2>"$T/reload.log" &
rl=$!
PIDS+=($rl)
wait_for 5 test -S "$T/reload.sock"
wait_for 5 sh -c "curl -s --unix-socket $T/reload.sock -X POST 'http://x/prpc/v1/Health?json' -d '{}' | grep -q '\"healthy\":true'"
ok $? "reload: healthy before the reload"
printf '{"interval":3,"refresh_timeout":0.5}' > "$T/reload.json"
kill -HUP "$rl"
wait_for 5 grep -q "reload: interval" "$T/reload.log"
ok $? "reload: the interval change is logged"
stale=0
for _ in $(seq 25); do
	health "$T/reload.sock" | grep -q '"healthy":true' || stale=$((stale + 1))
	sleep 0.1
done
is "$stale" 0 "reload: the longer interval does not make the verdict look stale"
kill -TERM "$rl"; wait "$rl"

done_testing
