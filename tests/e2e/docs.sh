#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Every command README.md, the guides under docs/, dstack-healthd(8) and
# --help show runs as printed and has the outcome they say. The commands are
# taken from the documents (the Markdown files' indented blocks, the page's
# .EX blocks, --help's Examples), so a new one without a check here fails:
# each must match a case of check().
# Only what a command needs in order to run here is changed: HOST:8090 is the
# agent this test starts on a free loopback port, the control socket is in
# the scratch folder, /usr/share/dstack-healthd is a `make install DESTDIR=`.
# Commands that need the package under a real systemd (journalctl,
# systemctl, dpkg -i) are run by tests/e2e/systemd.sh.
# It runs `make run` and `make install`, which use build/:
# tests/run: once
set -u
cd "$(dirname "$0")/../.."
. tests/lib/tap.sh

BIN=$PWD/${HEALTHD_BUILD:-build}/dstack-healthd
[ -x "$BIN" ] || skip_all "$BIN is not built"
for c in curl protoc setsid; do
	command -v "$c" >/dev/null 2>&1 || skip_all "$c is not installed"
done
. tests/lib/scratch.sh
GROUPS_=()
scratch_more() { for g in "${GROUPS_[@]}"; do kill -TERM -- "-$g" 2>/dev/null; done; }

PAGE=docs/dstack-healthd.8
plain() { sed -e 's/\\-/-/g' -e 's/\\(aq/\x27/g' -e 's/\\f[BIRP]//g' -e 's/\\&//g'; }

# --- the commands, as the documents print them ------------------------------
# Markdown: indented lines, a trailing backslash joins the next; comments
# cut. Fenced blocks are files (YAML, JSON), never commands.
GUIDES="README.md docs/app-developer.md docs/image-builder.md docs/operator.md"
readme_cmds() {
	awk '/^```/ { f = !f; next } f { next }
		/^    / && (j != "" || /^    [^ ]/) { l = substr($0, 5); if (j != "") l = j " " l; j = "";
		if (l ~ /\\$/) { j = substr(l, 1, length(l) - 1); next } print l }' "$1" |
		sed -E 's/ +# .*$//; s/ +$//; s/ +/ /g'
}
# The page: .EX blocks; a line ending in | joins the next; comment lines and
# example output (JSON) skipped.
page_cmds() {
	awk '/^\.EX/ { on = 1; next } /^\.EE/ { on = 0; next }
		on { l = $0; if (j != "") l = j " " l; j = "";
		if (l ~ /\|$/) { j = l; next } print l }' "$PAGE" | plain |
		sed -E 's/ +# .*$//; s/ +$//; s/ +/ /g' | grep -vE '^(#|\{)'
}
help_cmds() {
	"$BIN" --help | awk '/^Examples:/ { on = 1; next } on && /^$/ { exit } on' |
		sed -E 's/^ +//'
}

# --- what they run against ---------------------------------------------------
cat >"$T/app.json" <<JSON
{"manifest_version": "3", "name": "docs", "runner": "bash",
 "requirements": {"health_check": true, "health_status_file": "$T/health"}}
JSON
# Kept fresh (it goes stale after 60 s, and on a loaded machine the
# commands below take longer than that).
( while :; do printf 'healthy\n%s\n' "$(date +%s)" >"$T/health.tmp" && mv "$T/health.tmp" "$T/health"; sleep 5; done ) &
PIDS+=($!)
wait_for 20 test -e "$T/health"
"$BIN" --listen 127.0.0.1:0 --compose-file "$T/app.json" --control-socket "$T/control.sock" \
	2>"$T/agent.log" &
PIDS+=($!)
port_of() { sed -n 's/.* serving on [^ ]*:\([0-9]*\);.*/\1/p' "$1" | head -n1; }
started() { [ -n "$(port_of "$T/agent.log")" ]; }
wait_for 30 started || { cat "$T/agent.log"; echo "not ok 1 - the agent did not start"; exit 1; }
PORT=$(port_of "$T/agent.log")
healthy() { curl -s "http://127.0.0.1:$PORT/prpc/v1/Health" | grep -q '"healthy":true'; }
wait_for 30 healthy
ok $? "the agent this test runs the commands against is healthy (port $PORT)"
export DSTACK_HEALTHD_CONTROL_SOCKET=$T/control.sock
make -s install DESTDIR="$T/inst" PREFIX=/usr BUILD="${HEALTHD_BUILD:-build}" >"$T/install.log" 2>&1
ok $? "make install DESTDIR=... PREFIX=/usr"
is "$(ls "$T/inst/usr/share/dstack-healthd" | tr '\n' ' ')" "dstack-healthd.rules.yml health.proto " \
	"make install ships health.proto and the alert rules under PREFIX/share/dstack-healthd"
make -s install DESTDIR="$T/inst2" PREFIX=/opt/dh BUILD="${HEALTHD_BUILD:-build}" >"$T/install2.log" 2>&1
page2=$T/inst2/opt/dh/share/man/man8/dstack-healthd.8
like "$(sed -n '/^\.SH FILES/,/^\.SH /p' "$page2" | plain)" '/opt/dh/share/dstack-healthd/health.proto' \
	"with PREFIX=/opt/dh the installed man page's FILES follow it"
ok $(! sed -n '/^\.SH FILES/,/^\.SH /p' "$page2" | plain | grep -q '/usr/share'; echo $?) \
	"and name no /usr/share path"

# run CMD: the command as printed, with only the local substitutions; sets
# OUT, ERR and RC.
run() {
	local c=$1
	c=${c//HOST:8090/127.0.0.1:$PORT}
	c=${c//\/run\/dstack-healthd\/control.sock/$T\/control.sock}
	c=${c//\/usr\/share\/dstack-healthd/$T\/inst\/usr\/share\/dstack-healthd}
	OUT=$(PATH="$(dirname "$BIN"):$PATH" bash -o pipefail -c "$c" 2>"$T/err")
	RC=$?
	ERR=$(cat "$T/err")
}

health_json='^\{"healthy":true,"unhealthy":\[\],"error":""\}$'
# check DOC CMD: runs CMD and checks what DOC says of it.
check() {
	local doc=$1 cmd=$2 what="$1: $2"
	case "$cmd" in
	"make run")
		check_make_run "$what" ;;
	"make test")
		# The whole suite (15 minutes, and it runs this test): only that
		# the target exists and runs tests/run, ending in the count.
		like "$(make -n test 2>&1)" 'tests/run build build-asan' "$what: runs the suite (make -n)" ;;
	"curl -s -X POST 'HOST:8090/prpc/v1/Health?json' -d '{}'" | \
	"curl -s -X POST 'http://HOST:8090/prpc/v1/Health?json' -d '{}'" | \
	"curl -s 'http://HOST:8090/prpc/v1/Health'")
		run "$cmd"; like "$RC:$OUT" "^0:${health_json#^}" "$what: the JSON verdict" ;;
	"curl -s 'http://HOST:8090/prpc/v1/Version'")
		run "$cmd"; like "$RC:$OUT" '^0:\{"version":"[0-9.]+","rev":"[^"]+"\}$' "$what: the version" ;;
	"curl -s -X POST --data-binary '' 'http://HOST:8090/prpc/v1/Health' | protoc --decode=dstack.guest.v1.HealthResponse -I rpc health.proto" | \
	"curl -s -X POST --data-binary '' 'http://HOST:8090/prpc/v1/Health' | protoc --decode=dstack.guest.v1.HealthResponse -I /usr/share/dstack-healthd health.proto")
		run "$cmd"; is "$RC:$OUT" "0:healthy: true" "$what: decodes the protobuf answer" ;;
	"dstack-healthd status")
		run "$cmd"; like "$RC:$OUT" '^0:.*healthy' "$what: a summary, exit 0 (healthy)" ;;
	"dstack-healthd status --json")
		run "$cmd"; like "$RC:$OUT" '^0:\{.*"verdict":\{"healthy":true' "$what: the raw object, exit 0" ;;
	"curl -s --unix-socket /run/dstack-healthd/control.sock http://localhost/status")
		run "$cmd"; like "$RC:$OUT" '^0:\{.*"verdict":' "$what: /status" ;;
	"curl -s --unix-socket /run/dstack-healthd/control.sock http://localhost/metrics")
		run "$cmd"; like "$RC:$OUT" 'dstack_healthd_healthy 1' "$what: /metrics" ;;
	"dstack-healthd drain --wait --timeout 15")
		# Everyone who polled within drain_window must hear it: earlier
		# commands polled from 127.0.0.1, so one more poll during the
		# wait is what lets it return 0.
		PATH="$(dirname "$BIN"):$PATH" bash -c "$cmd" >"$T/drain.out" 2>&1 &
		local dp=$!
		drained() { curl -s "http://127.0.0.1:$PORT/prpc/v1/Health" | grep -q '"<drain>"'; }
		wait_for 30 drained
		ok $? "$what: Health answers draining at once"
		reap 60 "$dp"; RC=$?
		like "$RC:$(cat "$T/drain.out")" '^0:.*127\.0\.0\.1' "$what: exit 0, naming who was told" ;;
	"dstack-healthd resume")
		run "$cmd"
		is "$RC" 0 "$what: exit 0"
		wait_for 30 healthy
		ok $? "$what: Health answers healthy again" ;;
	"dstack-healthd --once --log-level=debug")
		OUT=$(DSTACK_HEALTHD_COMPOSE_FILE=$T/app.json "$BIN" --once --log-level=debug 2>"$T/err"); RC=$?
		is "$RC:$OUT" '0:{"healthy":true,"unhealthy":[],"error":""}' "$what: healthy, exit 0" ;;
	"dstack-healthd --listen=localhost:8091 --interval=2")
		# localhost:0, so that the port is free; the next example's curl
		# goes to the port it got.
		: >"$T/ex.log"
		DSTACK_HEALTHD_COMPOSE_FILE=$T/app.json DSTACK_HEALTHD_CONTROL_SOCKET= \
			"$BIN" --listen=localhost:0 --interval=2 2>"$T/ex.log" &
		PIDS+=($!)
		ex_started() { [ -n "$(port_of "$T/ex.log")" ]; }
		wait_for 30 ex_started
		ok $? "$what: serves (on localhost)"
		like "$(head -n1 "$T/ex.log")" 'serving on 127\.0\.0\.1:' "$what: localhost is 127.0.0.1"
		EXPORT=$(port_of "$T/ex.log") ;;
	"curl -s 'http://localhost:8091/prpc/v1/Health'")
		ex_up() { curl -s "http://localhost:$EXPORT/prpc/v1/Health" | grep -q healthy; }
		wait_for 30 ex_up
		run "${cmd//8091/$EXPORT}"; like "$RC:$OUT" '^0:\{"healthy":' "$what: the example agent answers" ;;
	"dstack-healthd: error: DSTACK_HEALTHD_LISTEN: listen address 'nowhere': ...")
		ERR=$(DSTACK_HEALTHD_LISTEN=nowhere "$BIN" --compose-file "$T/app.json" 2>&1); RC=$?
		is "$RC:${ERR:0:$((${#cmd} - 3))}" "2:${cmd%...}" "$what: as printed, exit 2" ;;
	'dstack-healthd: error: /etc/dstack/healthd.json: docker_host: invalid Docker host "bogus": ...')
		# The printed file, as -c names it here.
		echo '{"docker_host": "bogus"}' >"$T/healthd.json"
		printf '{"manifest_version":"3","runner":"docker-compose","requirements":{"health_check":true}}' >"$T/d.json"
		ERR=$("$BIN" -c "$T/healthd.json" --compose-file "$T/d.json" 2>&1); RC=$?
		want=${cmd%...}
		want=${want//\/etc\/dstack\/healthd.json/$T\/healthd.json}
		is "$RC:${ERR:0:${#want}}" "2:$want" "$what: as printed, exit 2" ;;
	"dpkg -i build/dstack-healthd_*.deb" | "systemctl status dstack-healthd" | \
	"journalctl -u dstack-healthd -p warning" | "journalctl -u dstack-healthd -p err" | \
	"journalctl -u dstack-healthd HEALTHD_VERDICT=unhealthy")
		grep -qF -- "$(systemd_form "$cmd")" tests/e2e/systemd.sh
		ok $? "$what: run by tests/e2e/systemd.sh under a real systemd" ;;
	"curl -s -o /dev/null -w '%{http_code}' 'http://HOST:8090/'")
		front_up
		run "${cmd//HOST:8090/127.0.0.1:$FRONT_PORT}"
		is "$RC:$OUT" "0:200" "$what: the stand-in guest agent's page, through a relaying agent" ;;
	"curl -s -o /dev/null -w '%{http_code}' 'http://127.0.0.1:18090/'")
		front_up
		run "${cmd//127.0.0.1:18090/127.0.0.1:$GA_PORT}"
		is "$RC:$OUT" "0:200" "$what: the stand-in guest agent itself" ;;
	"build-aux/deps.sh image")
		# The image's own list, installed already (make test installs it
		# first): nothing to do, nothing to say.
		run "$cmd"; is "$RC:$OUT" "0:" "$what: its packages are installed, exit 0" ;;
	"docker run --rm -v \"\$PWD:/src\" -w /src debian:12 sh -c 'build-aux/deps.sh image && make image && chown -R \"\$(stat -c %u:%g .)\" build'")
		# Run by image_container.sh, which takes it from the page itself.
		grep -qF "grep -E '^    docker run .* debian:12 ' \"\$GUIDE\"" tests/e2e/image_container.sh
		ok $? "$what: run as printed by tests/e2e/image_container.sh (a Debian 12 root, a checkout of another owner)" ;;
	"make image" | \
	"make verify-image IMAGE=REGISTRY/dstack-healthd@sha256:...")
		grep -qF -- "$(image_form "$cmd")" tests/e2e/image.sh
		ok $? "$what: run by tests/e2e/image.sh, with a registry on loopback" ;;
	"skopeo copy oci-archive:build/dstack-healthd-0.1.0.oci.tar docker://REGISTRY/dstack-healthd:0.1.0")
		grep -qF -- "$(image_form "$cmd")" tests/e2e/image.sh &&
			grep -qF -- 'skopeo copy -q --dest-tls-verify=false "$1" "docker://$REGISTRY/$2"' \
				tests/lib/registry.sh
		ok $? "$what: run by tests/e2e/image.sh (registry_push), with a registry on loopback" ;;
	"docker exec APP-healthd-1 dstack-healthd status" | \
	"docker exec APP-healthd-1 dstack-healthd drain --wait")
		grep -qF -- "$(sidecar_form "$cmd")" tests/e2e/sidecar.sh tests/lib/sidecar_image.sh
		ok $? "$what: run by tests/e2e/sidecar.sh on a real dockerd" ;;
	*)
		ok 1 "$what: shown, but this test has no check for it" ;;
	esac
}
# How systemd.sh spells the command (in_c runs it in the container).
systemd_form() {
	case "$1" in
	dpkg*) echo 'in_c dpkg -i /tmp/healthd.deb' ;;
	*) echo "in_c $1" ;;
	esac
}

# "In a dstack guest image": a stand-in guest agent (a static page on a free
# loopback port, for 127.0.0.1:18090) and an agent relaying to it (for
# HOST:8090), started once, by the first command that needs them.
FRONT_UP=0
front_up() {
	[ "$FRONT_UP" = 0 ] || return 0
	FRONT_UP=1
	mkdir -p "$T/ga"
	echo 'stand-in dashboard' >"$T/ga/index.html"
	python3 -u -m http.server 0 --bind 127.0.0.1 --directory "$T/ga" >"$T/ga.log" 2>&1 &
	PIDS+=($!)
	ga_started() { grep -q 'port [0-9]' "$T/ga.log"; }
	# Generous: Python alone can take seconds to start on a busy machine.
	wait_for 30 ga_started
	GA_PORT=$(sed -n 's/.* port \([0-9]*\) .*/\1/p' "$T/ga.log" | head -n1)
	"$BIN" --listen 127.0.0.1:0 --compose-file "$T/app.json" --control-socket= \
		--relay "127.0.0.1:$GA_PORT" 2>"$T/front.log" &
	PIDS+=($!)
	front_started() { [ -n "$(port_of "$T/front.log")" ]; }
	wait_for 30 front_started
	FRONT_PORT=$(port_of "$T/front.log")
	# The agent's own answer, whatever the verdict: the stand-in has no Health.
	front_healthy() { curl -s "http://127.0.0.1:$FRONT_PORT/prpc/v1/Health" | grep -q '^{"healthy":'; }
	wait_for 20 front_healthy
	ok $? "the relaying agent (port $FRONT_PORT, relay to the stand-in on $GA_PORT) answers Health itself"
	is "$(curl -s "http://127.0.0.1:$FRONT_PORT/")" 'stand-in dashboard' "and relays / to the stand-in guest agent"
}

# How sidecar.sh spells the command: its container's name.
sidecar_form() { echo "exec \"\$SC\" ${1#docker exec APP-healthd-1 }"; }
# How image.sh spells the command: its copies' archive, its registry.
image_form() {
	case "$1" in
	"make image") echo 'image) >"$d.log"' ;;
	skopeo*) echo 'registry_push "oci-archive:$ONE/$ARCHIVE" dstack-healthd:test' ;;
	*) echo 'verify-image IMAGE="$REG/dstack-healthd@$D1"' ;;
	esac
}

check_make_run() {
	local what=$1 free
	# A free port: the kernel's pick for a moment ago.
	"$BIN" --listen 127.0.0.1:0 --compose-file "$T/app.json" --control-socket= 2>"$T/free.log" &
	local p=$!
	wait_for 30 sh -c "grep -q 'serving on' '$T/free.log'"
	free=$(port_of "$T/free.log")
	kill "$p"; reap 30 "$p" 2>/dev/null
	setsid env PORT="$free" make -s run BUILD="${HEALTHD_BUILD:-build}" >"$T/run.out" 2>"$T/run.err" &
	GROUPS_+=($!)
	announced() { grep -q 'Try:' "$T/run.out"; }
	wait_for 60 announced
	ok $? "$what: announces the URL (port $free)"
	like "$(grep ' serving on ' "$T/run.err")" '; config file dstack\.example\.json;' \
		"$what: the start line names the config file it read"
	local flip
	flip=$(grep -E "^ +printf 'unhealthy" "$T/run.out" | sed 's/^ *//')
	run "curl -s 'http://127.0.0.1:$free/prpc/v1/Health'"
	like "$OUT" '"healthy":true' "$what: the example app is healthy"
	bash -c "$flip"
	run_unhealthy() { curl -s "http://127.0.0.1:$free/prpc/v1/Health" | grep -q '"healthy":false'; }
	wait_for 20 run_unhealthy
	ok $? "$what: the printed command flips it to unhealthy"
	# The writer renews the file every 10 s: past one renewal it must
	# still say unhealthy (the time renewed, the state kept).
	local m0
	m0=$(stat -c %Y "$(dirname "$(echo "$flip" | awk '{ print $NF }')")/health")
	renewed() { [ "$(stat -c %Y "$(echo "$flip" | awk '{ print $NF }')")" -gt "$m0" ]; }
	wait_for 15 renewed
	ok $? "$what: the writer renewed the status file"
	# The agent refreshes every second: for 3 s after the renewal, every
	# answer must still be unhealthy.
	local end=$(( $(date +%s%N) / 1000000 + 3000 )) bad=0 polls=0
	while [ $(( $(date +%s%N) / 1000000 )) -lt "$end" ]; do
		curl -s "http://127.0.0.1:$free/prpc/v1/Health" | grep -q '"healthy":false' || bad=$((bad + 1))
		polls=$((polls + 1))
	done
	ok $([ "$bad" -eq 0 ] && [ "$polls" -gt 0 ]; echo $?) \
		"$what: and it stays unhealthy ($bad of $polls answers over 3 s were not)"
	# A taken port: said before any URL, with the way out.
	PORT_TAKEN=$PORT
	env PORT="$PORT_TAKEN" make -s run BUILD="${HEALTHD_BUILD:-build}" >"$T/run2.out" 2>"$T/run2.err"
	local rc=$?
	ok $([ "$rc" -ne 0 ] && ! grep -q 'http://' "$T/run2.out"; echo $?) \
		"$what: on a taken port it fails (exit $rc) without announcing a URL"
	like "$(cat "$T/run2.err")" 'PORT=8091 make run' "$what: and says how to choose another port"
	kill -TERM -- "-${GROUPS_[-1]}" 2>/dev/null
}

n=0
while IFS= read -r line; do
	[ -n "$line" ] || continue
	n=$((n + 1))
	check "${line%%|*}" "${line#*|}"
done < <(for g in $GUIDES; do readme_cmds "$g" | sed "s|^|$g\||"; done; page_cmds | sed 's/^/dstack-healthd.8|/';
	help_cmds | sed 's/^/--help|/')
ok $([ "$n" -ge 20 ]; echo $?) "found the documents' commands ($n)"

done_testing
