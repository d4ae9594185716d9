# SPDX-License-Identifier: Apache-2.0
# Section 7 of bench/run.sh (sourced by it, with its helpers; alone with
# BENCH_ONLY=relay): the agent as the front of port 8090 (issue 18), relaying
# every connection that is not for Health to a stand-in guest agent.
#   7a. Health polls while 200 log streams stay open through the relay and 6
#       clients load the 1 MiB page in a loop: % answered, p50/p99, RssAnon.
#   7b. Relay throughput against nginx as the reference front, both passing
#       to the same upstream (a second nginx, static pages): req/s of the
#       1 KiB and 1 MiB pages, kept-alive and fresh connections; CPU/request.
#       Kept-alive figures are judged against nginx with kept-alive upstream
#       connections, fresh ones against nginx without (a fresh upstream
#       connection per request, as the relay has per client connection);
#       fresh against nginx with them is printed beside, with why.
#   7c. Health with relay set against the same build without it.
#   7d. The front held from one address (issue 26): 5000 idle relayed
#       connections and 500 slowloris heads, while a dashboard request and a
#       Health poll every 200 ms for 20 s; the agent, then nginx in its place.
#   7e. The front keeps what it carries (issue 33): a followed log (a line
#       every 4 s) while waves of 600 newcomers from one address each send a
#       request, read the answer and sit idle, one wave every 3 s for 30 s,
#       and a dashboard request every 200 ms; the agent, then nginx.
#   7f. Parked heads (issue 33): 1000 heads near 32 KiB, each trickling a
#       byte every 50 ms, from one address, for 20 s: Health p99 and the
#       agent's CPU, beside the same agent's Health p99 with nothing parked.
#   7g. Behind a gateway that says who asks (issue 43): one client floods
#       with 1000 requests the guest agent answers after 30 s while another
#       loads the dashboard every 200 ms for 20 s; the agent without PROXY
#       headers (every connection from one address, as through a gateway
#       that sends none), the agent on a port declared "pp" with the
#       gateway's version 2 header on each connection, and nginx reading
#       the header (proxy_protocol) with limit_conn by its address.
# bench/README.md says how each figure is taken.

# relay_nginx NAME TEMPLATE RUNNER [@KEY@=VALUE...]: nginx from TEMPLATE,
# with @T@, @PORT@ (a free port) and each KEY filled in, started under the
# array named RUNNER (SRV, UPS), its prefix $T/NAME; NGX_PORT and NGX_PID.
relay_nginx() {
	local name=$1 tpl=$2 s sub=()
	local -n under=$3
	shift 3
	NGX_PORT=$(free_port)
	sub=(-e "s|@T@|$T|g" -e "s|@PORT@|$NGX_PORT|g")
	for s in "$@"; do sub+=(-e "s|${s%%=*}|${s#*=}|g"); done
	sed "${sub[@]}" "$tpl" >"$T/nginx-$name.conf"
	"${under[@]}" nginx -c "$T/nginx-$name.conf" -e "$T/$name/error.log" >"$T/nginx-$name.out" 2>&1 &
	NGX_PID=$!
	PIDS+=($NGX_PID)
	wait_for 10 curl -sf -o /dev/null "http://127.0.0.1:$NGX_PORT/1k" ||
		{ say "nginx $name did not start"; cat "$T/nginx-$name.out" "$T/$name/error.log" >&2; return 1; }
}

relay_section() {
	local up_port log_port fr_port fk_port rl_port plain_port r page conn
	local rl_pid fr_pid fk_pid plain_pid up_pid
	# 200 streams hold about 1200 of the agent's fds, and nginx's too.
	ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
	mkdir -p "$T/pages" "$T/up" "$T/fr" "$T/fk"
	head -c 1024 /dev/urandom >"$T/pages/1k"
	head -c $((1024 * 1024)) /dev/urandom >"$T/pages/1m"
	chmod 711 "$T"
	chmod -R a+rX "$T/pages"

	# The stand-in guest agent: relay_load.py's log streams behind an
	# upstream nginx that serves the pages. Not pinned (the two CPUs are
	# the fronts' and the load generators'), and at SCHED_FIFO below them
	# (5): above the machine's other load, but never keeping a front or a
	# generator from running (at the same priority, wrk against it alone
	# ran three times its duration).
	UPS=("${SRV[@]}")
	[ "${UPS[0]:-}" = chrt ] && UPS=(chrt -f 5) || UPS=()
	log_port=$(free_port)
	"${UPS[@]}" python3 bench/relay_load.py serve "$log_port" >"$T/relay_logs.log" 2>&1 &
	PIDS+=($!)
	relay_nginx up bench/nginx-upstream.conf.in UPS "@LOGPORT@=$log_port" || return 1
	up_port=$NGX_PORT up_pid=$NGX_PID
	wait_for 10 sh -c "curl -s --max-time 1 'http://127.0.0.1:$up_port/logs/x' | grep -q 'log line'"

	# The fronts: the agent relaying, nginx proxying, and the agent as it
	# is without relay (7c); all three judge the same fake Docker.
	fake relay 1.52 10
	agent relay "$T/relay.sock" --relay "127.0.0.1:$up_port"
	rl_pid=$AGENT_PID rl_port=$PORT
	agent plain "$T/relay.sock"
	plain_pid=$AGENT_PID plain_port=$PORT
	relay_nginx fr bench/nginx-front.conf.in SRV "@UPPORT@=$up_port" "@NAME@=fr" "@KA@=#" || return 1
	fr_port=$NGX_PORT fr_pid=$NGX_PID
	relay_nginx fk bench/nginx-front.conf.in SRV "@UPPORT@=$up_port" "@NAME@=fk" "@KA@=" || return 1
	fk_port=$NGX_PORT fk_pid=$NGX_PID
	wait_for 15 determined "$rl_port" && wait_for 15 determined "$plain_port" ||
		{ say "no verdict from the relaying agents"; return 1; }
	# Both fronts move the page byte for byte, and Health stays the agent's.
	local want
	want=$(sha256sum <"$T/pages/1m")
	[ "$(curl -s "http://127.0.0.1:$rl_port/1m" | sha256sum)" = "$want" ] &&
		[ "$(curl -s "http://127.0.0.1:$fr_port/1m" | sha256sum)" = "$want" ] &&
		[ "$(curl -s "http://127.0.0.1:$fk_port/1m" | sha256sum)" = "$want" ] ||
		{ say "a front does not relay the 1 MiB page byte for byte"; return 1; }
	health "$rl_port" | grep -q '"healthy"' ||
		{ say "the relaying agent does not answer Health itself"; return 1; }

	# --- 7a -------------------------------------------------------------
	local LD=10 streams poll pp sp
	say "7a. Health polls for ${LD} s under 200 log streams and 6 clients on the 1 MiB page, through the relay"
	mem_start "$rl_pid"
	timeout --foreground $((LD + 30)) python3 bench/relay_load.py streams "127.0.0.1:$rl_port" 200 $((LD + 4)) \
		>"$T/relay_streams.out" 2>&1 &
	sp=$!
	PIDS+=($sp)
	# The streams first: all 200 are open before the page load and the
	# polls start.
	sleep 2
	timeout --foreground $((LD + 30)) "${GEN[@]}" wrk -t1 -c6 -d$((LD + 1))s "http://127.0.0.1:$rl_port/1m" \
		>"$T/relay_pages.out" 2>&1 &
	pp=$!
	PIDS+=($pp)
	"${MEASURE[@]}" python3 tests/fakes/gateway_poll.py --tcp "127.0.0.1:$rl_port" --duration "$LD" \
		--gap 200 --timeout 2 >"$T/relay_poll.out" 2>&1
	wait "$pp" # bounded: timeout
	wait "$sp" # bounded: timeout
	mem_stop "$rl_pid"
	poll=$(cat "$T/relay_poll.out")
	streams=$(cat "$T/relay_streams.out")
	cat "$T/relay_pages.out" "$T/relay_poll.out" "$T/relay_streams.out" >>"$T/relay.log"
	section "7a. Health through the relaying agent under load (${LD} s: gateway-style polls, fresh connection each, every 200 ms, 2 s timeout; 200 log streams (a line every 100 ms) and wrk -c6 on the 1 MiB page, all through the relay)"
	row "measure" "agent" "" "" "target" ""
	local polls okp
	polls=$(kv polls "$poll") okp=$(kv ok "$poll")
	row "polls answered" "$okp/$polls" "" "" "100%" "$(yes_no test "$okp" = "$polls")"
	row "poll latency p50 / p99 (ms)" "$(kv p50 "$poll") / $(kv p99 "$poll")" "" "" "p99 < 100" \
		"$(yes_no ge 100 "$(kv p99 "$poll")")"
	row "log streams opened / still open at the end" "$(kv opened "$streams")/$(kv open_at_end "$streams") of 200" "" "" "200/200" \
		"$(yes_no test "$(kv open_at_end "$streams")" = 200)"
	row "1 MiB pages through the relay meanwhile (req/s)" \
		"$(awk '/^Requests\/sec:/ { print $2 } /Non-2xx/ { print "non-2xx:" $NF }' "$T/relay_pages.out" | tr '\n' ' ')" "" "" "" ""
	row "agent's peak RssAnon (kB)" "$MEM_ANON" "" "" "< 16384" "$(yes_no ge 16384 "$MEM_ANON")"

	# --- 7b -------------------------------------------------------------
	say "7b. relay throughput: the agent and nginx in front of one upstream, $ROUNDS interleaved rounds"
	for page in 1k 1m; do
		for conn in keepalive close; do
			for r in $(seq "$ROUNDS"); do
				wrk_run "$rl_port" "$rl_pid" "get:/$page" $conn >>"$T/rl.agent.$page.$conn"
				wrk_run "$fr_port" "$fr_pid" "get:/$page" $conn >>"$T/rl.nginx.$page.$conn"
				wrk_run "$fk_port" "$fk_pid" "get:/$page" $conn >>"$T/rl.nginxka.$page.$conn"
			done
			# The upstream alone, once: what neither front can exceed.
			wrk_run "$up_port" "$up_pid" "get:/$page" $conn >>"$T/rl.up.$page.$conn"
		done
	done
	section "7b. Relay throughput (wrk -t1 -c$CONNS -d${D}s GET of a static page, $ROUNDS interleaved rounds, median judged; all fronts pass to one upstream nginx; ratio agent/nginx of req/s, nginx/agent of CPU per request. nginx: one worker, proxy_pass, buffering off; nginx+ka: the same with kept-alive upstream connections. Kept-alive rows are judged against nginx+ka, fresh ones against nginx)"
	row "measure" "agent (relay)" "nginx (1 wkr)" "ratio" "target" ""
	local ar a50 a99 acpu aseg nr n50 n99 ncpu nseg kr k50 k99 kcpu ur rt rc
	for page in 1k 1m; do
		for conn in keepalive close; do
			read -r ar a50 a99 acpu aseg < <(med "$T/rl.agent.$page.$conn")
			read -r nr n50 n99 ncpu nseg < <(med "$T/rl.nginx.$page.$conn")
			read -r kr k50 k99 kcpu _ < <(med "$T/rl.nginxka.$page.$conn")
			read -r ur _ < "$T/rl.up.$page.$conn"
			# Kept alive, against nginx with kept-alive upstream
			# connections; fresh, against nginx without (issue 26).
			if [ "$conn" = keepalive ]; then
				rt=$(ratio "$ar" "$kr")
				row "$page $conn: requests/s (median) vs nginx+ka" "$ar" "$kr" "$rt" ">= 1.0" "$(yes_no ge "$rt" 1.0)"
				row "$page $conn: nginx (no upstream ka) req/s" "" "$nr" "$(ratio "$ar" "$nr")" "not judged" ""
			else
				rt=$(ratio "$ar" "$nr")
				row "$page $conn: requests/s (median)" "$ar" "$nr" "$rt" ">= 1.0" "$(yes_no ge "$rt" 1.0)"
			fi
			row "$page $conn: requests/s, each round" "$(rounds "$T/rl.agent.$page.$conn" 1)" \
				"$(rounds "$T/rl.nginx.$page.$conn" 1)" "" "" ""
			rc=$(ratio "$ncpu" "$acpu")
			row "$page $conn: server CPU per request (us)" "$acpu" "$ncpu" "$rc" "" ""
			row "$page $conn: p50 / p99 latency (us)" "$a50 / $a99" "$n50 / $n99" "" "" ""
			row "$page $conn: TCP segments per request (all parties)" "$aseg" "$nseg" \
				"$(ratio "$nseg" "$aseg")" "" ""
			row "$page $conn: nginx+ka req/s, each round; median" "" \
				"$(rounds "$T/rl.nginxka.$page.$conn" 1); $kr" "$(ratio "$ar" "$kr")" \
				"$([ "$conn" = keepalive ] && echo "judged above" || echo "not judged")" ""
			[ "$conn" = close ] && [ "$page" = 1k ] &&
				say "fresh 1 KiB connections: the agent makes $(ratio "$ar" "$kr") of the requests/s of nginx with kept-alive upstream connections: nginx reuses its connections to the guest agent across clients, which a relay that never parses cannot (it cannot tell where a request ends), so each client connection costs it a connect to the guest agent" &&
				row "  (fresh vs nginx+ka: nginx reuses upstream connections; a relay that never parses cannot)" "" "" "" "" ""
			row "$page $conn: nginx+ka CPU per request (us); p50 / p99 (us)" "" \
				"$kcpu; $k50 / $k99" "$(ratio "$kcpu" "$acpu")" "" ""
			row "$page $conn: the upstream alone (req/s)" "" "$ur" "" "not the bound" ""
		done
	done

	# --- 7c -------------------------------------------------------------
	say "7c. Health with relay set and without, $ROUNDS interleaved rounds"
	for conn in keepalive close; do
		for r in $(seq "$ROUNDS"); do
			wrk_run "$rl_port" "$rl_pid" json $conn >>"$T/rh.relay.$conn"
			wrk_run "$plain_port" "$plain_pid" json $conn >>"$T/rh.plain.$conn"
		done
	done
	section "7c. Health with relay set and without (the same build; wrk -t1 -c$CONNS -d${D}s JSON Health, $ROUNDS interleaved rounds, median judged)"
	row "measure" "relay set" "no relay" "ratio" "target" ""
	local pr pcpu
	for conn in keepalive close; do
		read -r ar _ _ acpu _ < <(med "$T/rh.relay.$conn")
		read -r pr _ _ pcpu _ < <(med "$T/rh.plain.$conn")
		rt=$(ratio "$ar" "$pr")
		row "json $conn: requests/s (median)" "$ar" "$pr" "$rt" ">= 0.95" "$(yes_no ge "$rt" 0.95)"
		row "json $conn: requests/s, each round" "$(rounds "$T/rh.relay.$conn" 1)" \
			"$(rounds "$T/rh.plain.$conn" 1)" "" "" ""
		rc=$(ratio "$acpu" "$pcpu")
		row "json $conn: CPU per request (us)" "$acpu" "$pcpu" "$rc" "<= 1.05 (relay/none)" \
			"$(yes_no ge 1.05 "$rc")"
	done
	relay_hold "$rl_port" "$rl_pid" "$fr_port" "$fr_pid"
	relay_waves "$rl_port" "$rl_pid" "$fr_port"
	relay_heads "$up_port"
	relay_clients "$up_port" "$rl_port"
	stop_pid "$fr_pid"
	stop_pid "$fk_pid"
	stop_pid "$rl_pid"
	stop_pid "$plain_pid"
	stop_pid "$up_pid"
	stop_pid "$FAKE_PID"
}

# hold_run NAME PORT PID [health]: while 127.0.0.2 holds 5000 idle relayed
# connections (a whole request for /1k, answered, then nothing; reopened 1 s
# after they are closed) and 500 slowloris heads (a request line and a
# header, then a byte a second; reopened 0.5 s after), a dashboard request
# (GET /1k, fresh connection) every 200 ms for HOLD_S s, and with health a
# gateway-style Health poll beside it; PID's RssAnon sampled throughout.
# Leaves $T/hold.NAME.{dash,health,idle,slow} and MEM_ANON.
HOLD_S=20
hold_run() {
	local name=$1 port=$2 pid=$3 idle slow hp dp
	python3 tests/fakes/relay_client.py "$port" hold 5000 /1k --from 127.0.0.2 --reopen 1 \
		>"$T/hold.$name.idle" 2>>"$T/relay.log" &
	idle=$!
	PIDS+=($idle)
	python3 tests/fakes/relay_client.py "$port" hold 500 /1k --from 127.0.0.2 --line-only \
		--trickle 1 --reopen 0.5 >"$T/hold.$name.slow" 2>>"$T/relay.log" &
	slow=$!
	PIDS+=($slow)
	wait_for 60 grep -q opened= "$T/hold.$name.idle" && wait_for 60 grep -q opened= "$T/hold.$name.slow" ||
		say "$name: the holders did not open their connections in 60 s"
	sleep 2
	mem_start "$pid"
	: >"$T/hold.$name.health"
	if [ "${4:-}" = health ]; then
		timeout --foreground $((HOLD_S + 30)) "${MEASURE[@]}" python3 tests/fakes/gateway_poll.py --tcp "127.0.0.1:$port" \
			--duration "$HOLD_S" --gap 200 --timeout 2 >"$T/hold.$name.health" 2>&1 &
		hp=$!
		PIDS+=($hp)
	fi
	timeout --foreground $((HOLD_S + 30)) "${MEASURE[@]}" python3 bench/relay_load.py poll "127.0.0.1:$port" /1k \
		"$HOLD_S" 200 >"$T/hold.$name.dash" 2>&1
	[ -n "${hp:-}" ] && wait "$hp" # bounded: timeout
	mem_stop "$pid"
	stop_pid "$idle"
	stop_pid "$slow"
	cat "$T/hold.$name".* >>"$T/relay.log"
}

# relay_hold AGENT_PORT AGENT_PID NGINX_PORT NGINX_PID: 7d, the agent then
# nginx (the reference front of 7b) under the same hold.
relay_hold() {
	local wpid aa na d h
	say "7d. the front held from one address: 5000 idle relayed + 500 slowloris, ${HOLD_S} s of dashboard and Health every 200 ms; the agent, then nginx"
	hold_run agent "$1" "$2" health
	aa=$MEM_ANON
	# nginx's connections live in its worker, its master's child.
	wpid=$(cat /proc/"$4"/task/*/children 2>/dev/null | awk '{ print $1 }')
	hold_run nginx "$3" "${wpid:-$4}"
	na=$MEM_ANON
	section "7d. The front held from one address (issue 26): 127.0.0.2 holds 5000 idle relayed connections (GET /1k answered, then nothing; reopened 1 s after a close) and 500 slowloris heads (a line and a header, then a byte a second; reopened 0.5 s after); from 127.0.0.1 a dashboard request (GET /1k, fresh connection, 2 s timeout) and a gateway-style Health poll every 200 ms for ${HOLD_S} s. nginx: 7b's reference front, worker_connections 8192"
	row "measure" "agent" "nginx (1 wkr)" "" "target" ""
	d=$(cat "$T/hold.agent.dash") n=$(cat "$T/hold.nginx.dash")
	row "dashboard requests answered" "$(kv ok "$d")/$(kv polls "$d")" "$(kv ok "$n")/$(kv polls "$n")" "" "100%" \
		"$(yes_no test "$(kv ok "$d")" = "$(kv polls "$d")")"
	row "dashboard p50 / p99 (ms)" "$(kv p50 "$d") / $(kv p99 "$d")" "$(kv p50 "$n") / $(kv p99 "$n")" "" "p99 < 100" \
		"$(yes_no ge 100 "$(kv p99 "$d")")"
	h=$(cat "$T/hold.agent.health")
	row "Health polls answered" "$(kv ok "$h")/$(kv polls "$h")" "" "" "100%" \
		"$(yes_no test "$(kv ok "$h")" = "$(kv polls "$h")")"
	row "Health p50 / p99 (ms)" "$(kv p50 "$h") / $(kv p99 "$h")" "" "" "p99 < 50" \
		"$(yes_no ge 50 "$(kv p99 "$h")")"
	row "peak RssAnon (kB; nginx: its worker)" "$aa" "$na" "" "< 32768" "$(yes_no ge 32768 "$aa")"
	row "idle holder: opened / closed by the front" \
		"$(kv opened "$(tail -n1 "$T/hold.agent.idle")")/$(kv closed_by_server "$(tail -n1 "$T/hold.agent.idle")")" \
		"$(kv opened "$(tail -n1 "$T/hold.nginx.idle")")/$(kv closed_by_server "$(tail -n1 "$T/hold.nginx.idle")")" "" "" ""
	row "slowloris holder: opened / closed by the front" \
		"$(kv opened "$(tail -n1 "$T/hold.agent.slow")")/$(kv closed_by_server "$(tail -n1 "$T/hold.agent.slow")")" \
		"$(kv opened "$(tail -n1 "$T/hold.nginx.slow")")/$(kv closed_by_server "$(tail -n1 "$T/hold.nginx.slow")")" "" "" ""
}

# waves_run NAME PORT: 7e against one front. Leaves $T/waves.NAME.{log,dash,w*}.
WAVES=10
WAVE_N=600
waves_run() {
	local name=$1 port=$2 w lp
	python3 tests/fakes/front_client.py "$port" follow "/logs/w?every=4" >"$T/waves.$name.log" 2>>"$T/relay.log" &
	lp=$!
	PIDS+=($lp)
	# Opened first: its answer has begun before the first wave connects.
	wait_for 30 grep -q 'a line' "$T/waves.$name.log" || say "7e $name: the followed log printed nothing in 30 s"
	timeout --foreground $((WAVES * 3 + 40)) "${MEASURE[@]}" python3 bench/relay_load.py poll "127.0.0.1:$port" /1k \
		$((WAVES * 3)) 200 >"$T/waves.$name.dash" 2>&1 &
	local dp=$!
	PIDS+=($dp)
	for w in $(seq "$WAVES"); do
		python3 tests/fakes/relay_client.py "$port" hold "$WAVE_N" /1k --from 127.0.0.2 --reopen 3600 \
			>"$T/waves.$name.w$w" 2>>"$T/relay.log" &
		eval "WV_$w=$!"
		PIDS+=($!)
		sleep 3 # the waves' pace is the load, not an event
	done
	wait "$dp" # bounded: timeout
	stop_pid "$lp"
	for w in $(seq "$WAVES"); do eval "stop_pid \$WV_$w"; done
}

# answered NAME: newcomers answered / opened, over every wave.
waves_answered() {
	local a=0 o=0 w l
	for w in $(seq "$WAVES"); do
		l=$(tail -n1 "$T/waves.$1.w$w")
		a=$((a + $(kv answered "$l"))) o=$((o + $(kv opened "$l")))
	done
	echo "$a/$o"
}

# relay_waves AGENT_PORT AGENT_PID NGINX_PORT: 7e.
relay_waves() {
	local d n
	say "7e. waves of idle newcomers beside a followed log: the agent, then nginx"
	waves_run agent "$1"
	waves_run nginx "$3"
	section "7e. The front keeps what it carries (issue 33): a followed log (a line every 4 s) opened first; from 127.0.0.2 $WAVES waves of $WAVE_N newcomers, one every 3 s, each sending GET /1k, reading the answer and sitting idle (more than the 512 relay slots); a dashboard request (GET /1k, fresh connection) every 200 ms. nginx: 7b's reference front, worker_connections 8192"
	row "measure" "agent" "nginx (1 wkr)" "" "target" ""
	row "the followed log at the end" "$(tail -n1 "$T/waves.agent.log")" "$(tail -n1 "$T/waves.nginx.log")" "" \
		"end=open" "$(yes_no grep -q end=open "$T/waves.agent.log")"
	row "newcomers answered / opened" "$(waves_answered agent)" "$(waves_answered nginx)" "" "all" ""
	d=$(cat "$T/waves.agent.dash") n=$(cat "$T/waves.nginx.dash")
	row "dashboard requests answered" "$(kv ok "$d")/$(kv polls "$d")" "$(kv ok "$n")/$(kv polls "$n")" "" "100%" \
		"$(yes_no test "$(kv ok "$d")" = "$(kv polls "$d")")"
	row "dashboard p50 / p99 (ms)" "$(kv p50 "$d") / $(kv p99 "$d")" "$(kv p50 "$n") / $(kv p99 "$n")" "" "" ""
}

# relay_heads UPSTREAM_PORT: 7f, on an agent of its own (header_timeout 30 s,
# so that the heads stay parked), Health polled with nothing parked, then
# under 1000 parked heads.
relay_heads() {
	local pid port base under cpu0 cpu1 t0 t1 hd
	agent heads "$T/relay.sock" --relay "127.0.0.1:$1" --header-timeout 30
	pid=$AGENT_PID port=$PORT
	wait_for 15 determined "$port"
	say "7f. 1000 parked heads trickling: Health with nothing parked, then under them"
	timeout --foreground 60 "${MEASURE[@]}" python3 tests/fakes/gateway_poll.py --tcp "127.0.0.1:$port" \
		--duration 20 --gap 50 --timeout 2 >"$T/heads.base" 2>&1
	timeout 90 python3 tests/fakes/front_client.py "$port" heads 1000 32000 0.05 30 --from 127.0.0.3 \
		>"$T/heads.client" 2>>"$T/relay.log" &
	hd=$!
	PIDS+=($hd)
	sleep 5 # the heads connect and fill up: the load, not an event
	cpu0=$(awk '{ print $14 + $15 }' "/proc/$pid/stat") t0=$(date +%s%N)
	timeout --foreground 60 "${MEASURE[@]}" python3 tests/fakes/gateway_poll.py --tcp "127.0.0.1:$port" \
		--duration 20 --gap 50 --timeout 2 >"$T/heads.under" 2>&1
	cpu1=$(awk '{ print $14 + $15 }' "/proc/$pid/stat") t1=$(date +%s%N)
	wait "$hd" # bounded: timeout
	stop_pid "$pid"
	base=$(cat "$T/heads.base") under=$(cat "$T/heads.under")
	local pct
	pct=$(awk -v c=$((cpu1 - cpu0)) -v hz="$(getconf CLK_TCK)" -v ns=$((t1 - t0)) \
		'BEGIN { printf "%.1f", 100 * c / hz / (ns / 1e9) }')
	section "7f. Parked heads (issue 33): 1000 connections from 127.0.0.3, each a relay-bound head of 32000 bytes never ended, then a byte every 50 ms (header_timeout 30 s); gateway-style Health polls every 50 ms for 20 s, with nothing parked (reference, same agent, same run) and under the heads"
	row "measure" "under heads" "nothing parked" "ratio" "target" ""
	row "Health polls answered" "$(kv ok "$under")/$(kv polls "$under")" "$(kv ok "$base")/$(kv polls "$base")" "" "100%" \
		"$(yes_no test "$(kv ok "$under")" = "$(kv polls "$under")")"
	row "Health p50 / p99 (ms)" "$(kv p50 "$under") / $(kv p99 "$under")" "$(kv p50 "$base") / $(kv p99 "$base")" \
		"$(ratio "$(kv p99 "$under")" "$(kv p99 "$base")")" "p99 < 20" "$(yes_no ge 20 "$(kv p99 "$under")")"
	row "agent CPU under the heads (% of a core)" "$pct" "" "" "< 30" "$(yes_no ge 30 "$pct")"
	row "the heads' client" "$(cat "$T/heads.client")" "" "" "" ""
}

# clients_run NAME PORT [proxy]: 7g against one front: 127.0.0.2 floods
# (with proxy, every connection with a v2 header naming its client; without,
# the flood from 127.0.0.1 too: one address for all), then the dashboard
# from 127.0.0.1 every 200 ms for CLIENTS_S s. Leaves $T/clients.NAME.{flood,dash}.
CLIENTS_S=20
CLIENTS_FLOOD=1000
clients_run() {
	local name=$1 port=$2 fl from=127.0.0.1 hdr=()
	[ "${3:-}" = proxy ] && from=127.0.0.2 hdr=(--proxy v2)
	python3 tests/fakes/relay_client.py "$port" hold "$CLIENTS_FLOOD" "/slow/f?s=30" --from "$from" \
		"${hdr[@]}" --reopen 0.2 >"$T/clients.$name.flood" 2>>"$T/relay.log" &
	fl=$!
	PIDS+=($fl)
	wait_for 60 grep -q opened= "$T/clients.$name.flood" || say "7g $name: the flood did not open in 60 s"
	sleep 3 # the flood fills the slots and the queue: the load, not an event
	timeout --foreground $((CLIENTS_S + 30)) "${MEASURE[@]}" python3 bench/relay_load.py poll \
		"127.0.0.1:$port" /1k "$CLIENTS_S" 200 ${3:+127.0.0.1} >"$T/clients.$name.dash" 2>&1
	stop_pid "$fl"
	cat "$T/clients.$name".* >>"$T/relay.log"
}

# relay_clients UPSTREAM_PORT AGENT_PORT: 7g.
relay_clients() {
	local up=$1 plain=$2 pp pp_pid np np_pid d n
	say "7g. one client's flood of slow requests beside another's dashboard: the agent without and with PROXY headers, nginx with proxy_protocol and limit_conn"
	pp=$(free_port)
	printf '{"manifest_version":"3","name":"bench","runner":"docker-compose","port_policy":{"ports":[{"port":%s,"pp":true}]}}\n' \
		"$pp" >"$T/app-pp.json"
	"${SRV[@]}" "$AGENT" --listen "127.0.0.1:$pp" --compose-file "$T/app-pp.json" \
		--relay "127.0.0.1:$up" >"$T/pp.log" 2>&1 &
	pp_pid=$!
	PIDS+=($pp_pid)
	wait_for 10 grep -q 'serving on 127.0.0.1:' "$T/pp.log" || { say "the pp agent did not start"; return 1; }
	np=$(free_port)
	mkdir -p "$T/np"
	sed -e "s|@T@|$T|g" -e "s|@PORT@|$np|g" -e "s|@UPPORT@|$up|g" -e "s|@NAME@|np|g" \
		-e "s|@LIMIT@|$NGINX_PER_CLIENT|g" bench/nginx-proxy.conf.in >"$T/nginx-np.conf"
	"${SRV[@]}" nginx -c "$T/nginx-np.conf" -e "$T/np/error.log" >"$T/nginx-np.out" 2>&1 &
	np_pid=$!
	PIDS+=($np_pid)
	wait_for 10 sh -c "ss -Hltn '( sport = :$np )' | grep -q ." || { say "nginx np did not start"; return 1; }
	clients_run plain "$plain"
	clients_run pp "$pp" proxy
	clients_run nginx "$np" proxy
	stop_pid "$pp_pid"
	stop_pid "$np_pid"
	section "7g. Behind a gateway that says who asks (issue 43): 127.0.0.2 holds $CLIENTS_FLOOD connections of GET /slow (the guest agent answers after 30 s; reopened 0.2 s after a close), more than the 512 relay slots; from 127.0.0.1 a dashboard request (GET /1k, fresh connection, 2 s timeout) every 200 ms for ${CLIENTS_S} s. The agent without headers: every connection from 127.0.0.1, one address, as through a gateway that sends none; with: its port declared \"pp\", each connection with the gateway's version 2 header naming its client. nginx: proxy_protocol on its listener, limit_conn $NGINX_PER_CLIENT by \$proxy_protocol_addr"
	row "measure" "agent" "nginx (1 wkr)" "" "target" ""
	d=$(cat "$T/clients.plain.dash")
	row "no headers: dashboard answered" "$(kv ok "$d")/$(kv polls "$d")" "" "" "(one client: its share is all)" ""
	d=$(cat "$T/clients.pp.dash") n=$(cat "$T/clients.nginx.dash")
	row "PROXY v2: dashboard answered" "$(kv ok "$d")/$(kv polls "$d")" "$(kv ok "$n")/$(kv polls "$n")" "" "100%" \
		"$(yes_no test "$(kv ok "$d")" = "$(kv polls "$d")")"
	row "PROXY v2: dashboard p50 / p99 (ms)" "$(kv p50 "$d") / $(kv p99 "$d")" "$(kv p50 "$n") / $(kv p99 "$n")" "" "" ""
	row "the flood: opened / closed by the front (PROXY v2)" \
		"$(kv opened "$(tail -n1 "$T/clients.pp.flood")")/$(kv closed_by_server "$(tail -n1 "$T/clients.pp.flood")")" \
		"$(kv opened "$(tail -n1 "$T/clients.nginx.flood")")/$(kv closed_by_server "$(tail -n1 "$T/clients.nginx.flood")")" "" "" ""
}
# nginx's limit per client in 7g: half of the relay's 512 slots, the share
# each of two clients has.
NGINX_PER_CLIENT=256
