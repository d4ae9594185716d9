#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The example app (issues 35, 45): the Compose file the app developer's
# guide shows (docs/app-developer.md, "The Compose file", taken from the
# page itself: tests/lib/guide_example.sh), run as it is written, on a real
# dockerd with Docker's bridge (in a network namespace of its own, so nothing
# reaches this machine's network). Only its "# SET:" lines are filled (each
# image by the digest a registry on loopback serves, the Docker socket's gid)
# and the host side of its two bind mounts pointed at this dockerd's socket
# and the guide's app-compose.json; a point checks the file run differs from
# the guide's in those lines and no other. The images are the test's: the proxy Debian's
# caddy in a busybox root, web busybox's httpd with a /healthz the test
# creates, api the static tests/fakes/probe_server.c alone at /app/server (no
# shell: the sidecar probes it by its label; the test flips its answer with
# `docker cp` of a mode file), and the sidecar the image `make image` builds.
# The user's outcome, as the gateway would have it from a guest agent
# (tests/fakes/guest_health.py on host-gateway's port 8090, reading the file
# where the example's app-compose.json says; every 2 s here, 5 s upstream):
# unhealthy while web starts, healthy once web and api are, unhealthy again
# while api's probe fails; the proxy serves web and api by their service
# names; the sidecar runs hardened (shared checks with sidecar.sh, and its
# user, memory and pids limits as Docker applied them); the
# verdict is in the named volume; `docker-compose down` stops the sidecar
# first, which writes unhealthy, holds until the guest agent serves it and
# one gateway poll more (7 s), while the app still serves, then exits 0
# before the rest stops.
# tests/run: once
# tests/run: timeout 1200
cd "$(dirname "$0")/../.." || exit 1
. tests/lib/netns.sh
. tests/lib/tap.sh
[ -n "$NETNS" ] || skip_all "needs a network namespace of its own (root, unshare, ip)"
. tests/lib/dockerd.sh
. tests/lib/sidecar_image.sh
. tests/lib/registry.sh
. tests/lib/guide_example.sh
command -v cc >/dev/null 2>&1 || skip_all "cc is not installed"
[ -x /usr/bin/caddy ] || skip_all "caddy is not installed (build-aux/deps.sh test installs it)"

DH_DOCKERD_NET=bridge
dockerd_start
EXAMPLE=$DH_T/guide-docker-compose.yaml
guide_example docker-compose.yaml "$EXAMPLE"
ok $? "the Compose file of $GUIDE" || { done_testing; exit 1; }
P=example # the Compose project
SC=${P}_healthd_1

# --- the images, each pushed to a registry on loopback -------------------------
registry_start "$DH_T/registry"
rc=$?
[ -z "$REGISTRY_PID" ] || dh_track "$REGISTRY_PID"
[ $rc -ne 2 ] || skip_all "$REGISTRY_WHY"
[ $rc -eq 0 ] || { echo "Bail out! the registry did not start"; exit 1; }
REG=localhost:$REGISTRY_PORT
sidecar_build
case $? in
0) ok 0 "make image ($SIDECAR_DIGEST)" ;;
2) skip_all "$SIDECAR_WHY" ;;
*) ok 1 "make image"; done_testing; exit 1 ;;
esac
registry_push "oci-archive:$SIDECAR_ARCHIVE" dstack-healthd:example
is "$(registry_digest dstack-healthd:example)" "$SIDECAR_DIGEST" \
	"skopeo copy of the archive: the registry serves the digest make image printed"

R=$DH_T/roots
# proxy: Debian's caddy and the libraries it loads, in a busybox root (the
# example's command is a shell writing the Caddyfile).
dh_busybox_root "$R/proxy" && mkdir -p "$R/proxy/etc/caddy" "$R/proxy/usr/bin" &&
	cp /usr/bin/caddy "$R/proxy/usr/bin/" &&
	ldd /usr/bin/caddy | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' |
	xargs -r cp -L --parents -t "$R/proxy"
ok $? "proxy's root: busybox, caddy and its libraries"
# web: busybox's httpd on 8080, which exits on SIGTERM (a shell as PID 1
# ignores it by default). /healthz is the test's to create.
dh_busybox_root "$R/web" && mkdir -p "$R/web/www" && echo "the web service" >"$R/web/www/index.html"
ok $? "web's root: busybox, a page"
# api: one static binary and nothing else.
mkdir -p "$R/api/app" && cc -static -O2 -o "$R/api/app/server" tests/fakes/probe_server.c 2>"$DH_T/cc.log"
ok $? "api's root: tests/fakes/probe_server.c built static, alone at /app/server" ||
	sed 's/^/# /' "$DH_T/cc.log"
is "$(cd "$R/api" && find . ! -type d)" "./app/server" "...no shell, no other file (distroless)"

# image NAME [CHANGE...]: the root $R/NAME imported, pushed to the registry,
# and removed from this dockerd again, so that Compose must pull it by
# digest; sets DIGEST_<NAME>.
image() {
	local name=$1 c=() d x
	shift
	for x in "$@"; do c+=(--change "$x"); done
	tar -C "$R/$name" -c . | "$DH_DOCKER" import "${c[@]}" - "$REG/$name:example" >/dev/null &&
		"$DH_DOCKER" push -q "$REG/$name:example" >"$DH_T/push-$name.log" 2>&1 &&
		"$DH_DOCKER" rmi -f "$REG/$name:example" >/dev/null || return 1
	d=$(registry_digest "$name:example")
	eval "DIGEST_$name=\$d"
	[[ $d == sha256:* ]]
}
image proxy 'ENV PATH=/bin:/usr/bin'
ok $? "proxy's image in the registry ($DIGEST_proxy)"
image web 'ENV PATH=/bin' \
	"CMD [\"sh\", \"-c\", \"trap 'exit 0' TERM; httpd -f -p 8080 -h /www & wait\"]"
ok $? "web's image in the registry ($DIGEST_web)"
image api
ok $? "api's image in the registry ($DIGEST_api)"
is "$("$DH_DOCKER" images --format '{{.Repository}}' | grep -c "^$REG/")" 0 \
	"none of them is in the dockerd: each must be pulled"

# --- the example, as written but for its SET lines ------------------------------
# The app-compose.json of the example's header, and the folder where this
# dockerd keeps the verdict's volume (the guest's /var/lib/docker).
mkdir -p "$DH_T/host-shared"
# It is the guide's, as written.
guide_example app-compose.json "$DH_T/host-shared/app-compose.json"
STATUS=$(dh_json "d['requirements']['health_status_file']" <"$DH_T/host-shared/app-compose.json")
is "$STATUS" /var/lib/docker/volumes/dstack-healthd-verdict/_data/status \
	"the example's app-compose.json reads, with its health_status_file"
STATUS=$DH_T/data${STATUS#/var/lib/docker}
GID=$(stat -c %g "$DH_T/docker.sock")
RUN=$DH_T/example/docker-compose.yaml
mkdir -p "$DH_T/example"
# The "# SET:" lines filled, the bind mounts' host paths rewritten; any other
# line is copied as it is. A SET line it does not know fails the run.
python3 - "$EXAMPLE" "$RUN" "proxy=$REG/proxy@$DIGEST_proxy" "web=$REG/web@$DIGEST_web" \
	"api=$REG/api@$DIGEST_api" "healthd=$REG/dstack-healthd@$SIDECAR_DIGEST" "gid=$GID" \
	"/var/run/docker.sock=$DH_T/docker.sock" \
	"/dstack/.host-shared/app-compose.json=$DH_T/host-shared/app-compose.json" <<'EOF'
import re, sys
src, dst = sys.argv[1:3]
fill = dict(a.split("=", 1) for a in sys.argv[3:])
out, service, top = [], None, None
for n, line in enumerate(open(src), 1):
    if re.match(r"\S", line):
        top, service = line.split(":")[0], None
    elif top == "services" and re.match(r"  [A-Za-z0-9_.-]+:\s*$", line):
        service = line.strip()[:-1]
    if "# SET:" in line and not line.lstrip().startswith("#"):
        m = re.match(r"(\s*image:\s*)\S+(\s+# SET:.*\n)$", line)
        g = re.match(r"(\s*group_add:\s*)\[[^]]*\](\s+# SET:.*\n)$", line)
        if m and service in fill:
            line = m.group(1) + fill[service] + m.group(2)
        elif g:
            line = g.group(1) + '["%s"]' % fill["gid"] + g.group(2)
        else:
            sys.exit("line %d: a # SET: line this test cannot fill: %s" % (n, line.strip()))
    m = re.match(r"(\s*- )(/[^:]+)(:.*\n)$", line)
    if m and m.group(2) in fill:
        line = m.group(1) + fill[m.group(2)] + m.group(3)
    out.append(line)
open(dst, "w").write("".join(out))
EOF
ok $? "the run copy: SET lines filled, the bind mounts' host paths this dockerd's" ||
	{ done_testing; exit 1; }
# The guard of "as written": line for line, the run copy differs from the
# guide's file only in its SET lines (the value before the comment) and in
# the host path of a bind mount, and every SET line is filled.
is "$(python3 - "$EXAMPLE" "$RUN" <<'EOF'
import re, sys
a, b = (open(f).read().split("\n") for f in sys.argv[1:3])
bad, sets, paths = [], 0, 0
if len(a) != len(b):
    bad.append("%d lines, the guide's file %d" % (len(b), len(a)))
for n, (x, y) in enumerate(zip(a, b), 1):
    if "# SET:" in x and not x.lstrip().startswith("#"):
        sets += 1
        # The key and the comment kept, the value between them changed.
        filled = ("# SET:" in y and x != y and x.split(":")[0] == y.split(":")[0]
                  and x[x.index("# SET:"):] == y[y.index("# SET:"):])
        if not filled:
            bad.append("line %d not filled as a SET line: %s" % (n, y.strip()))
    elif x != y:
        mx, my = (re.match(r"(\s*- )(/[^:]+)(:.*)$", s) for s in (x, y))
        if not (mx and my and mx.group(1) == my.group(1) and mx.group(3) == my.group(3)):
            bad.append("line %d: %s" % (n, y.strip()))
        paths += 1
print("; ".join(bad) or "%d SET lines, %d host paths, nothing else" % (sets, paths))
EOF
)" "5 SET lines, 2 host paths, nothing else" \
	"the file run differs from the guide's only in its SET lines (4 images, a gid) and bind mounts' host paths"
diff "$EXAMPLE" "$RUN" | grep '^>' | sed 's/^/# run: /'

# The guest agent, where the sidecar asks it during a stop
# (host.docker.internal:8090, the host's address on Docker's bridge), reading
# the file where the app-compose.json says.
python3 tests/fakes/guest_health.py --listen 0.0.0.0:8090 --status-file "$STATUS" \
	--interval 2 --log "$DH_T/ga.log" >"$DH_T/ga.out" 2>&1 &
dh_track $!
GA='http://127.0.0.1:8090/prpc/v1/Health?json'
ga_healthy() { curl -s --max-time 3 "$GA" | dh_json "d['healthy']"; }
ga_is() { [ "$(ga_healthy)" = "$1" ]; }
wait_for 30 curl -fs --max-time 2 "$GA"
ok $? "the guest agent stand-in serves Health on port 8090"

compose() { timeout 300 docker-compose --no-ansi -p "$P" -f "$RUN" "$@"; }
T_UP=$(date +%s)
compose up -d >"$DH_T/up.log" 2>&1
if ! ok $? "docker-compose up -d of the example (pulls each image; $SECONDS s into the test)"; then
	tail -n 20 "$DH_T/up.log" | sed 's/^/# /'
	done_testing
	exit 1
fi
for s in proxy web api; do
	eval "want=\$REG/$s@\$DIGEST_$s"
	is "$("$DH_DOCKER" inspect -f '{{.Config.Image}}' "${P}_${s}_1" 2>&1)" "$want" "$s runs its image pulled by digest"
done
is "$("$DH_DOCKER" inspect -f '{{.Config.Image}}' "$SC" 2>&1)" "$REG/dstack-healthd@$SIDECAR_DIGEST" \
	"the sidecar runs the image make image built, pulled by digest"
sidecar_least_privilege "$SC" "$GID"
is "$("$DH_DOCKER" inspect -f '{{.Config.User}} {{.HostConfig.Memory}} {{.HostConfig.PidsLimit}}' "$SC")" \
	"65532:65532 67108864 32" "its user, 64 MiB of memory and 32 pids, as the file says and Docker applied"
SC_PID=$("$DH_DOCKER" inspect -f '{{.State.Pid}}' "$SC")
diag "the sidecar's threads: $(ls "/proc/$SC_PID/task" | wc -l); RssAnon $(awk '/^RssAnon/ { print $2, $3 }' "/proc/$SC_PID/status")"

# --- the gate ------------------------------------------------------------------
line1() { head -n1 "$STATUS" 2>/dev/null; }
line1_is() { [ "$(line1)" = "$1" ]; }
# entries: the sidecar's view of what is unhealthy, "NAME: STATUS; ..."
entries() {
	"$DH_DOCKER" exec "$SC" dstack-healthd status --json 2>/dev/null |
		dh_json "'; '.join(e['name'] + ': ' + e['status'] for e in d['verdict']['unhealthy'])"
}
entries_like() { entries | grep -Eq -- "$1"; }

# web has no /healthz yet: Docker keeps it starting for its start_period
# (60 s), unhealthy after that (a machine slow enough to get here that late).
# api passes its probe meanwhile.
web_not_yet() { dh_state "${P}_web_1" | grep -Eqx 'running (starting|unhealthy)'; }
wait_for 60 web_not_yet
like "$(dh_state "${P}_web_1")" '^running (starting|unhealthy)$' "web runs, its healthcheck failing"
wait_for 60 entries_like "^${P}_web_1: (starting|unhealthy)[^;]*\$"
like "$(entries)" "^${P}_web_1: (starting|unhealthy)[^;]*\$" "web is the sidecar's only entry ($(entries))"
wait_for 30 line1_is unhealthy
is "$(line1)" unhealthy "the file in the volume says unhealthy"
wait_for 30 ga_is false
is "$(ga_healthy)" false "the guest agent serves unhealthy: the gateway keeps the instance out"

"$DH_DOCKER" exec "${P}_web_1" touch /www/healthz
dh_expect_state 60 "${P}_web_1" "running healthy"
wait_for 30 line1_is healthy
is "$(line1)" healthy "web healthy by its healthcheck and api by its probe label: the file says healthy"
is "$(entries)" "" "...no entry"
wait_for 30 ga_is true
is "$(ga_healthy)" true "the guest agent serves healthy"
like "$("$DH_DOCKER" exec "$SC" dstack-healthd status 2>&1)" \
	"agent probe http://[0-9.]+:8080/healthz: healthy" "status: api is probed at its own address, healthy"

# The proxy on the published port 80, to each service by its name.
is "$(curl -s --max-time 10 http://127.0.0.1/)" "the web service" "the proxy serves web (port 80 to web:8080)"
# The probe server's answer is its own (web has no such page).
is "$(curl -s --max-time 10 -w ' %{http_code}' http://127.0.0.1/api/healthz)" "SECRET-BODY 200" \
	"...and api under /api/ (api:8080)"

# api's probe fails: two failures 2 s apart (retries 2) make it unhealthy.
mkdir -p "$DH_T/ctl" && echo 500 >"$DH_T/ctl/mode"
"$DH_DOCKER" cp "$DH_T/ctl/." "${P}_api_1:/ctl"
ok $? "docker cp of a mode file into api (no shell needed): its /healthz answers 500"
wait_for 60 entries_like "^${P}_api_1: probe unhealthy \(HTTP status 500\)\$"
is "$(entries)" "${P}_api_1: probe unhealthy (HTTP status 500)" "api's probe fails: the sidecar's only entry"
wait_for 30 line1_is unhealthy
is "$(line1)" unhealthy "the file says unhealthy"
wait_for 30 ga_is false
is "$(ga_healthy)" false "the guest agent serves unhealthy"
echo 200 >"$DH_T/ctl/mode"
"$DH_DOCKER" cp "$DH_T/ctl/." "${P}_api_1:/ctl"
wait_for 60 line1_is healthy
wait_for 30 ga_is true
is "$(line1) $(ga_healthy)" "healthy true" "api passes again: healthy, and the guest agent serves it"

# The verdict lives in the named volume, where the guest agent reads it.
is "$("$DH_DOCKER" volume inspect -f '{{.Mountpoint}}' dstack-healthd-verdict)" "${STATUS%/status}" \
	"the verdict's volume is dstack-healthd-verdict, at the folder app-compose.json names"
is "$(stat -c '%F %u' "$STATUS")" "regular file 65532" "the file is a regular file, the sidecar user's"

# --- down: the sidecar first, with its stop hold ---------------------------------
"$DH_DOCKER" logs -f "$SC" >"$DH_T/sidecar.log" 2>&1 &
dh_track $!
# written_as STATE: the file says STATE; T_W_MS its write (the mtime of the
# inode read: each write is a rename).
written_as() {
	local l m
	{ IFS= read -r l && m=$(stat -L -c %.3Y /dev/stdin); } <"$STATUS" 2>/dev/null || return 1
	[ "$l" = "$1" ] && T_W_MS=${m/./}
}
# died NAME: when NAME died (ms since the epoch) and its exit code, from
# Docker's events since the up (they outlive the removal).
died() {
	"$DH_DOCKER" events --since "$T_UP" --until "$(date +%s.%N)" --filter event=die \
		--filter "container=$1" --format '{{.TimeNano}} {{index .Actor.Attributes "exitCode"}}' |
		tail -n1 | awk '{ printf "%.0f %s\n", $1 / 1000000, $2 }'
}
compose down >"$DH_T/down.log" 2>&1 &
DOWN=$!
T_W_MS=
wait_for 30 written_as unhealthy
ok $? "down: the sidecar writes unhealthy at once"
T_UNH=${T_W_MS:-0}
states=$(for s in proxy web api; do printf '%s ' "$(dh_state "${P}_${s}_1")"; done)
is "$states" "running - running healthy running - " "...while proxy, web and api still run"
is "$(curl -s --max-time 10 http://127.0.0.1/)" "the web service" "...and the app still serves through the proxy"
reap 120 "$DOWN"
ok $? "docker-compose down" || tail -n 20 "$DH_T/down.log" | sed 's/^/# /'
read -r SC_END SC_RC <<<"$(died "$SC")"
is "$SC_RC" 0 "the sidecar exited 0, before the grace's SIGKILL"
first=
for s in proxy web api; do
	read -r end _ <<<"$(died "${P}_${s}_1")"
	[ -n "$end" ] && [ -n "$SC_END" ] && [ "$end" -ge "$SC_END" ] || first="$first $s"
	diag "$s stopped $((end - SC_END)) ms after the sidecar exited"
done
is "$first" "" "depends_on: proxy, web and api stopped only after the sidecar had exited"
GA_HEARD=$(awk '$2 == "unhealthy" { t = $1 } END { printf "%.0f\n", t * 1000 }' "$DH_T/ga.log")
diag "the file unhealthy, the guest agent heard it $((GA_HEARD - T_UNH)) ms later, the sidecar exited $((SC_END - T_UNH)) ms after the write"
ok $([ "$GA_HEARD" -ge "$T_UNH" ] && [ $((GA_HEARD + 7000)) -le "$SC_END" ]; echo $?) \
	"the hold: the sidecar exited a gateway poll (7 s) or more after the guest agent served unhealthy"
like "$(cat "$DH_T/sidecar.log")" 'stop: the guest agent serves unhealthy after [0-9.]+ s; one gateway poll more' \
	"...having asked it at host.docker.internal:8090 (host-gateway)"
is "$(line1)" unhealthy "the sidecar left the file unhealthy"
done_testing
