#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The front's faults of issue 33, each reproduced end to end against the
# stand-in guest agent (tests/fakes/guest_agent.py) and shown fixed:
#   - libmicrohttpd's own epoll_ctl fails for a Health connection handed to
#     it (ENOSPC, as when root's fs.epoll.max_user_watches is used up; an
#     LD_PRELOAD shim, tests/fakes/epoll_fail.c): the connection is closed and
#     its gate slot freed once, so Health is answered again right after (freed
#     twice, the free list pointed at itself and the listener was never
#     armed again);
set -u
cd "$(dirname "$0")/../.."
. tests/lib/netns.sh
. tests/lib/tap.sh
. tests/lib/relay.sh
. tests/lib/front.sh
command -v cc >/dev/null || skip_all "no C compiler for the epoll_ctl shim"

health() { curl -s --max-time 20 -X POST "http://127.0.0.1:$1/prpc/v1/Health?json" -d '{}'; }

# --- libmicrohttpd's epoll_ctl fails: the slot is freed once ---------------------------
cc -shared -fPIC -O2 -o "$T/epoll_fail.so" tests/fakes/epoll_fail.c -ldl 2>"$T/cc.log" ||
	{ sed 's/^/# cc: /' "$T/cc.log"; echo "not ok 1 - the shim did not build"; exit 1; }
# ASan wants to be the first library loaded; the shim only forwards.
HEALTHD_EPOLL_FAIL="$T/epoll.fail" LD_PRELOAD="$T/epoll_fail.so" \
	ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" \
	agent M - || { echo "not ok 1 - agent M did not start"; exit 1; }
like "$(health "$M")" '"healthy":true' "an agent with the epoll_ctl shim answers Health"
: >"$T/epoll.fail"
for i in 1 2 3; do
	out=$(health "$M")
	is "$out" "" "libmicrohttpd's epoll_ctl fails (ENOSPC): Health connection $i is closed unanswered"
done
is "$(wc -l <"$T/epoll.fail")" 3 "...each one by the shim's failure (3 failures)"
rm -f "$T/epoll.fail"
answered=0
for i in $(seq 20); do
	case "$(health "$M")" in *'"healthy":true'*) answered=$((answered + 1)) ;; esac
done
is "$answered" 20 "then every Health poll is answered again (20 of 20): each slot was freed once"
kill -0 "$M_PID"
ok $? "...and the agent is still running"
done_testing
