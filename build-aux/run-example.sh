#!/bin/bash
# `make run`: the agent on dstack.example.json, with no container runtime
# needed. The example app answers for itself through a status file under
# build/example/ that this script keeps fresh; the flags override the example
# config's paths (flags beat the config file) and listen on loopback only.
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
# directory, then rename, at least twice a minute.
write_status() {
	printf 'healthy\n%s\n' "$(date +%s)" > "$dir/health.tmp"
	mv "$dir/health.tmp" "$dir/health"
}
write_status
( while sleep 10; do write_status; done ) &
writer=$!
trap 'kill "$writer" 2>/dev/null; wait "$writer" 2>/dev/null || true' EXIT

cat <<MSG
dstack-healthd on http://127.0.0.1:$port (Ctrl-C stops it). Try:
  curl -s -X POST 'http://127.0.0.1:$port/prpc/v1/Health?json' -d '{}'
  curl -s 'http://127.0.0.1:$port/prpc/v1/Version'
Make the app unhealthy:  printf 'unhealthy\n%s\n' \$(date +%s) > $dir/health
MSG
"$bin" -c dstack.example.json --listen "127.0.0.1:$port" \
	--compose-file "$dir/app-compose.json" --interval 1 &
agent=$!
trap 'kill "$agent" "$writer" 2>/dev/null; wait "$agent" "$writer" 2>/dev/null || true' EXIT INT TERM
wait "$agent"
