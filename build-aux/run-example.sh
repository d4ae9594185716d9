#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# `make run`: the agent on dstack.example.json, with no container runtime
# needed. The example app answers for itself through a status file under
# build/example/ that this script keeps fresh; the flags override the example
# config's paths (flags beat the config file) and listen on loopback only.
# PORT=N picks another port than 8090.
set -eu
bin=${1:-build/dstack-healthd}
dir=$(cd "$(dirname "$0")/.." && pwd)/build/example
port=${PORT:-8090}
mkdir -p "$dir"

cat > "$dir/app-compose.json" <<JSON
{
  "manifest_version": "3",
  "name": "example-app",
  "runner": "bash",
  "requirements": {
    "health_check": true,
    "health_status_file": "$dir/health"
  }
}
JSON

# The app's side of the contract: write a temporary file in the same
# directory, then rename, at least twice a minute. The state is whatever
# line 1 says now (healthy unless someone wrote otherwise): only the time is
# renewed, so a person who flips it sees it stay flipped.
write_status() {
	local state=healthy
	[ -f "$dir/health" ] && IFS= read -r state < "$dir/health" || true
	case "$state" in healthy|unhealthy) ;; *) state=healthy ;; esac
	printf '%s\n%s\n' "$state" "$(date +%s)" > "$dir/health.tmp"
	mv "$dir/health.tmp" "$dir/health"
}
rm -f "$dir/health"
write_status
( while sleep 10; do write_status; done ) &
writer=$!
agent=
cleanup() {
	kill $agent "$writer" 2>/dev/null || true
	wait $agent "$writer" 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 0' INT TERM

# The agent's stderr goes to the terminal and to a log, for its start line.
: > "$dir/agent.log"
"$bin" -c dstack.example.json --listen "127.0.0.1:$port" \
	--compose-file "$dir/app-compose.json" --interval 1 2> >(tee -a "$dir/agent.log" >&2) &
agent=$!

# Announce the URL only once the agent says it serves there; if it exits
# first (the port is taken, say), it has said why on stderr.
until grep -q ' serving on ' "$dir/agent.log"; do
	if ! kill -0 "$agent" 2>/dev/null; then
		wait "$agent" && rc=0 || rc=$?
		agent=
		echo "make run: the agent could not start on 127.0.0.1:$port (exit status $rc);" \
			"if the port is taken, choose another: PORT=8091 make run" >&2
		exit 1
	fi
	sleep 0.1
done

cat <<MSG
dstack-healthd on http://127.0.0.1:$port (Ctrl-C stops it; PORT=N make run for another port). Try:
  curl -s -X POST 'http://127.0.0.1:$port/prpc/v1/Health?json' -d '{}'
  curl -s 'http://127.0.0.1:$port/prpc/v1/Version'
Make the app unhealthy (it stays so: only the time is renewed), then healthy again:
  printf 'unhealthy\n%s\n' \$(date +%s) > $dir/health
  printf 'healthy\n%s\n' \$(date +%s) > $dir/health
MSG
wait "$agent"
