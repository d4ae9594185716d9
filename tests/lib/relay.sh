# SPDX-License-Identifier: Apache-2.0
# What the relay's end-to-end tests share (sourced after tap.sh): the
# binary and the stand-ins, the checks that skip the file, a file limit
# raised for many client sockets (the agent and the clients inherit it),
# the scratch folder, and an app-compose.json that judges nothing.
B=${HEALTHD_BUILD:-build}
BIN=$B/dstack-healthd
GA=tests/fakes/guest_agent.py
CL=tests/fakes/relay_client.py
[ -x "$BIN" ] || skip_all "$BIN not built"
command -v python3 >/dev/null || skip_all "python3 is not installed"
command -v ss >/dev/null || skip_all "ss is not installed (iproute2)"
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
. tests/lib/scratch.sh

HT=2 # --header-timeout, seconds
printf '{"manifest_version":"3","name":"t","runner":"docker-compose"}\n' >"$T/app.json"
