#!/bin/bash
# test_edged_tcp.sh - plain TCP (L4) routes through edged (tcp_routes):
# tests/tools/tcp_backend.py behind them and tcp_client.py in front: bulk
# both ways with equal SHA-256 and bounded RSS, half-close each way, a
# client EOF sent before edged connected upstream, a reset from the backend
# tearing the client side down, two endpoints balanced and one that
# refuses ejected, a TLS backend (openssl s_server) reached with openssl
# s_client and curl, the idle timeout, a reload changing an environment's
# upstream, the environment a port maps to and bringing an environment
# that was missing; unknown environments, IP rules, an environment whose
# only endpoint refuses, the connection cap and the rate limit closing
# connections (counted); edgectl routes and status, and one analytics
# event per connection with the bytes each way; as root, splice auto
# keeping a 64 KiB ping-pong (build/tools/pingpong) in the kernel.
# Runs against build/edged and build/asan/edged.
# Needs no root: 127.0.0.1 high ports, a generated configuration.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/lib_edged.sh
. "$(dirname "$0")/../lib_edged.sh"
edged_begin python3 openssl curl

BASE=$(edged_ports 17)
P_EDGE=$BASE
P_ADMIN=$((BASE + 1))
T_MAIN=$((BASE + 2))  # -> main: B1
T_BAL=$((BASE + 3))   # -> bal: B1, B2 and B_DEAD
T_MOVE=$((BASE + 4))  # -> move: B1, then B2 after a reload
T_SWAP=$((BASE + 5))  # -> swap-a (B1), then swap-b (B2) after a reload
T_GHOST=$((BASE + 6)) # -> ghost: in no source until a reload adds it
T_TLS=$((BASE + 7))   # -> tls: B_TLS
T_DENY=$((BASE + 8))  # -> deny, whose project blocks 127.0.0.1
T_NEW=$((BASE + 9))   # added by a reload: bound only at the next start
B1=$((BASE + 10))
B2=$((BASE + 11))
B_DEAD=$((BASE + 12)) # nothing listens: refuses
B_TLS=$((BASE + 13))
T_DOWN=$((BASE + 14)) # -> down: B_DEAD only
T_PP=$((BASE + 15))   # -> pp: B_PP
B_PP=$((BASE + 16))   # build/tools/pingpong serve: echoes each message
SOCK="$T_TMP/edged.sock"

# write_conf FILE [STAGE]: STAGE "reload" moves move's upstream to B2,
# points T_SWAP at swap-b, adds the ghost environment and T_NEW; EXTRA
# (the environment) goes in as top-level settings
write_conf() {
	local move=$B1 swap="swap-a" ghost="" new=""
	if [ "${2:-}" = reload ]; then
		move=$B2
		swap="swap-b"
		ghost=", { id = \"ghost\"; domains = [ \"ghost.tcp.test\" ];
        deployment = { id = \"ghost-1\"; upstreams = [ \"127.0.0.1:$B1\" ]; }; }"
		new=", { listen = \"127.0.0.1:$T_NEW\"; environment = \"main\"; }"
	fi
	{
		edged_conf_head "$P_ADMIN" "$SOCK"
		cat <<CONF
analytics = { file = "$T_TMP/events.jsonl"; };
timeouts = {
  upstream_connect = "1s";
  tunnel_idle = "3s";
  drain = "2s";
};
${EXTRA:-}
tcp_routes = (
  { listen = "127.0.0.1:$T_MAIN"; environment = "main"; },
  { listen = "127.0.0.1:$T_BAL"; environment = "bal"; },
  { listen = "127.0.0.1:$T_MOVE"; environment = "move"; },
  { listen = "127.0.0.1:$T_SWAP"; environment = "$swap"; },
  { listen = "127.0.0.1:$T_GHOST"; environment = "ghost"; },
  { listen = "127.0.0.1:$T_TLS"; environment = "tls"; },
  { listen = "127.0.0.1:$T_DENY"; environment = "deny"; },
  { listen = "127.0.0.1:$T_DOWN"; environment = "down"; },
  { listen = "127.0.0.1:$T_PP"; environment = "pp"; }$new
);
projects = (
  { id = "tcp";
    environments = (
      { id = "main"; domains = [ "main.tcp.test" ];
        deployment = { id = "main-1"; upstreams = [ "127.0.0.1:$B1" ]; }; },
      { id = "bal"; domains = [ "bal.tcp.test" ];
        deployment = { id = "bal-1";
          upstreams = [ "127.0.0.1:$B1", "127.0.0.1:$B2", "127.0.0.1:$B_DEAD" ]; }; },
      { id = "move"; domains = [ "move.tcp.test" ];
        deployment = { id = "move-1"; upstreams = [ "127.0.0.1:$move" ]; }; },
      { id = "swap-a"; domains = [ "swap-a.tcp.test" ];
        deployment = { id = "swap-a-1"; upstreams = [ "127.0.0.1:$B1" ]; }; },
      { id = "swap-b"; domains = [ "swap-b.tcp.test" ];
        deployment = { id = "swap-b-1"; upstreams = [ "127.0.0.1:$B2" ]; }; },
      { id = "tls"; domains = [ "tls.tcp.test" ];
        deployment = { id = "tls-1"; upstreams = [ "127.0.0.1:$B_TLS" ]; }; },
      { id = "down"; domains = [ "down.tcp.test" ];
        deployment = { id = "down-1"; upstreams = [ "127.0.0.1:$B_DEAD" ]; }; },
      { id = "pp"; domains = [ "pp.tcp.test" ];
        deployment = { id = "pp-1"; upstreams = [ "127.0.0.1:$B_PP" ]; }; }$ghost
    );
  },
  { id = "blocked"; ip_block = [ "127.0.0.1" ];
    environments = (
      { id = "deny"; domains = [ "deny.tcp.test" ];
        deployment = { id = "deny-1"; upstreams = [ "127.0.0.1:$B1" ]; }; }
    );
  }
);
CONF
	} >"$1"
}

client() { # MODE PORT [ARGS...]: output in $T_TMP/client.json, errors in .err
	python3 "$TOOLS/tcp_client.py" "$@" >"$T_TMP/client.json" 2>"$T_TMP/client.err"
}

# backend_last CMD: the backends' record of the last connection given CMD
backend_last() {
	python3 - "$T_TMP/backend.jsonl" "$1" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
recs = [r for r in recs if r.get("cmd") == sys.argv[2]]
print(json.dumps(recs[-1] if recs else {}))
PY
}

# metric NAME_AND_LABELS: its value on /metrics (0 when absent)
metric() {
	curl -s "http://127.0.0.1:$P_ADMIN/metrics" | awk -v k="$1" '$1 == k { v = $2 } END { print v + 0 }'
}

# reload_to STAGE: rewrite the configuration and SIGHUP; 0 once the log
# says reloaded N times in all
RELOADS=0
reload_to() {
	write_conf "$T_TMP/edge.conf" "$1"
	RELOADS=$((RELOADS + 1))
	kill -HUP "$EPID"
	local i
	for ((i = 0; i < 100; i++)); do
		[ "$(grep -c 'reloaded ' "$EDGED_LOG")" -ge "$RELOADS" ] && return 0
		sleep 0.05
	done
	return 1
}

# who PORT N: the endpoints N connections to PORT reached, one a line
# ("None": closed before the backend's banner)
who() {
	client who "$1" "$2" && python3 -c 'import json,sys; print("\n".join(str(p) for p in json.load(sys.stdin)["ports"]))' <"$T_TMP/client.json"
}

run_suite() { # BIN LABEL BYTES
	local bin=$1 v=$2 big=$3 rec growth out ports
	: >"$T_TMP/events.jsonl"
	: >"$T_TMP/backend.jsonl"
	RELOADS=0
	EXTRA=""
	write_conf "$T_TMP/edge.conf"
	EDGED_LOG="$T_TMP/edged-$v.log"
	if ! edged_start "$bin" "$T_TMP/edge.conf" -v || ! edged_wait_port "$T_MAIN"; then
		t_fail "$v: edged starts" "$(tail -5 "$EDGED_LOG")"
		return
	fi

	# (a) bulk both ways at once, SHA-256 equal at both ends, RSS bounded
	if client pump "$T_MAIN" "$big" "$EPID"; then
		rec=$(backend_last pump)
		growth=$(($(json_field "$T_TMP/client.json" rss_peak_kb) - $(json_field "$T_TMP/client.json" rss_base_kb)))
		if [ "$(echo "$rec" | json_field - recv_sha)" = "$(json_field "$T_TMP/client.json" sent_sha)" ] &&
			[ "$(echo "$rec" | json_field - sent_sha)" = "$(json_field "$T_TMP/client.json" recv_sha)" ] &&
			[ "$(echo "$rec" | json_field - recv_bytes)" = "$big" ]; then
			t_ok "$v: $((big >> 20)) MiB each way through a TCP route, SHA-256 equal at both ends ($(json_field "$T_TMP/client.json" seconds) s)"
		else
			t_fail "$v: TCP route bulk" "client $(cat "$T_TMP/client.json") backend $rec"
		fi
		if [ "$growth" -lt $((64 * 1024)) ]; then
			t_ok "$v: edged's RSS grew by $((growth / 1024)) MiB during it (< 64 MiB)"
		else
			t_fail "$v: RSS bounded" "grew by $growth kB"
		fi
	else
		t_fail "$v: TCP route bulk" "$(cat "$T_TMP/client.err")"
	fi

	# (a2) splice auto (the default), as root: two connections of 64 KiB
	# request/response messages for 3 s are taken by the kernel and stay
	# there (never taken for bulk), every echo checked by pingpong
	if [ "$v" = edged ] && [ "$(id -u)" = 0 ] && grep -q "sockmap self-test passed" "$EDGED_LOG"; then
		"$EDGECTL" --socket "$SOCK" splice --json >"$T_TMP/sp0.json" 2>&1
		out=$("$B/tools/pingpong" client --dst 127.0.0.1 --port "$T_PP" --duration 3 \
			--size 65536 --conns 2 2>&1)
		"$EDGECTL" --socket "$SOCK" splice --json >"$T_TMP/sp1.json" 2>&1
		if [[ $out == *" errors=0 "* ]] &&
			[ "$(json_field "$T_TMP/sp1.json" spliced)" -ge $(($(json_field "$T_TMP/sp0.json" spliced) + 2)) ] &&
			[ "$(json_field "$T_TMP/sp1.json" handed_back)" = "$(json_field "$T_TMP/sp0.json" handed_back)" ]; then
			t_ok "$v: splice auto: 64 KiB ping-pong taken by the kernel and kept there (${out#pingpong: })"
		else
			t_fail "$v: splice auto keeps 64 KiB messages in the kernel" "$out; before $(cat "$T_TMP/sp0.json"); after $(cat "$T_TMP/sp1.json")"
		fi
	fi

	# (b) half-close each way: our EOF reaches the backend and its answer
	# still reaches us; the backend's EOF reaches us and ours still flows
	if client halfclose "$T_MAIN" 300000 &&
		[ "$(backend_last halfclose | json_field - recv_bytes)" = 100000 ]; then
		t_ok "$v: client half-close: EOF forwarded, 300000 bytes received after it"
	else
		t_fail "$v: client half-close" "$(cat "$T_TMP/client.err") $(backend_last halfclose)"
	fi
	if client serverfirst "$T_MAIN" 300000 && sleep 0.2 &&
		[ "$(backend_last serverfirst | json_field - recv_bytes)" = 200000 ]; then
		t_ok "$v: backend half-close: its EOF forwarded, 200000 bytes sent to it after it"
	else
		t_fail "$v: backend half-close" "$(cat "$T_TMP/client.err") $(backend_last serverfirst)"
	fi

	# (c) a client that sends its bytes and EOF before edged has
	# connected upstream loses neither
	if client earlyeof "$T_MAIN"; then
		t_ok "$v: bytes and EOF sent before the upstream connect: echoed, then EOF"
	else
		t_fail "$v: early EOF" "$(cat "$T_TMP/client.err")"
	fi

	# (d) a reset from the backend mid-stream ends the client's side at
	# once (tunnel_idle is 3 s)
	if client reset "$T_MAIN" 100000 &&
		python3 -c 'import json,sys; sys.exit(0 if json.load(sys.stdin)["after"] < 1.5 else 1)' <"$T_TMP/client.json" &&
		[ "$(backend_last reset | json_field - reset)" = True ]; then
		t_ok "$v: a reset from the backend tears the client side down ($(json_field "$T_TMP/client.json" ended) after $(json_field "$T_TMP/client.json" after) s)"
	else
		t_fail "$v: backend reset" "$(cat "$T_TMP/client.err" "$T_TMP/client.json")"
	fi

	# (e) two endpoints balanced; the one that refuses is skipped for
	# each connection and ejected
	ports=$(who "$T_BAL" 30)
	if [ "$(sort -u <<<"$ports" | tr '\n' ' ')" = "$B1 $B2 " ] &&
		[ "$(grep -c "^$B1$" <<<"$ports")" -ge 5 ] && [ "$(grep -c "^$B2$" <<<"$ports")" -ge 5 ]; then
		t_ok "$v: 30 connections over two endpoints ($(grep -c "^$B1$" <<<"$ports") and $(grep -c "^$B2$" <<<"$ports")), none to the refusing one"
	else
		t_fail "$v: balancing" "$(tr '\n' ' ' <<<"$ports") $(cat "$T_TMP/client.err")"
	fi
	sleep 1.2 # the workers publish their upstream counters every second
	if [ "$(metric edge_upstream_ejections_total)" -ge 1 ]; then
		t_ok "$v: the refusing endpoint is ejected (edge_upstream_ejections_total $(metric edge_upstream_ejections_total))"
	else
		t_fail "$v: ejection" "edge_upstream_ejections_total is $(metric edge_upstream_ejections_total)"
	fi

	# (f) TLS end to end through the route: the backend's certificate,
	# verified by openssl s_client and by curl
	out=$(timeout 10 openssl s_client -connect "127.0.0.1:$T_TLS" -servername tls.tcp.test \
		-CAfile "$T_TMP/tls.crt" -verify_return_error -brief </dev/null 2>&1)
	if grep -q "Verification: OK" <<<"$out" && grep -q "CN = tls.tcp.test" <<<"$out"; then
		t_ok "$v: openssl s_client through a TCP route: the backend's certificate verified"
	else
		t_fail "$v: openssl s_client" "$(head -c 400 <<<"$out")"
	fi
	if curl -s --max-time 5 --cacert "$T_TMP/tls.crt" \
		--resolve "tls.tcp.test:$T_TLS:127.0.0.1" "https://tls.tcp.test:$T_TLS/" >"$T_TMP/curl.out" 2>&1 &&
		grep -q "s_server" "$T_TMP/curl.out"; then
		t_ok "$v: curl https through a TCP route to a TLS backend"
	else
		t_fail "$v: curl through TCP route" "$(head -c 300 "$T_TMP/curl.out")"
	fi

	# (g) the idle timeout (tunnel_idle 3s) closes both sides
	if client idle "$T_MAIN" 8 &&
		python3 -c 'import json,sys; d=json.load(sys.stdin)["closed_after"]; sys.exit(0 if 2.5 <= d <= 5 else 1)' <"$T_TMP/client.json" &&
		sleep 0.3 && [ "$(backend_last echo | json_field - recv_bytes)" = 1 ]; then
		t_ok "$v: an idle TCP route connection is closed after tunnel_idle, both sides ($(json_field "$T_TMP/client.json" closed_after) s)"
	else
		t_fail "$v: idle timeout" "$(cat "$T_TMP/client.err" "$T_TMP/client.json") $(backend_last idle)"
	fi

	# (h) an environment in no source, a project whose IP rules block
	# the client, an environment whose one endpoint refuses: closed
	# without a byte, counted
	if client refused "$T_GHOST" && client refused "$T_DENY" && client refused "$T_DOWN" &&
		[ "$(metric 'edge_requests_total{outcome="environment_not_found"}')" = 1 ] &&
		[ "$(metric 'edge_requests_total{outcome="ip_denied"}')" = 1 ] &&
		[ "$(metric 'edge_requests_total{outcome="upstream_unavailable"}')" = 1 ]; then
		t_ok "$v: unknown environment, IP rules, no endpoint that connects: closed at once, counted by outcome"
	else
		t_fail "$v: refused connections" "$(cat "$T_TMP/client.err") $(metric 'edge_requests_total{outcome="environment_not_found"}')"
	fi

	# (i) edgectl routes shows the TCP routes, status counts them
	out=$("$EDGECTL" --socket "$SOCK" routes 2>&1)
	if "$EDGECTL" --socket "$SOCK" status 2>&1 | grep -q "^daemon: .*, 2 workers, 9 TCP routes (0 connections open) (" &&
		grep -q "^127.0.0.1:$T_BAL  *file  *tcp  *bal  *bal-1  *0  *127.0.0.1:$B1,127.0.0.1:$B2,127.0.0.1:$B_DEAD$" <<<"$out" &&
		grep -q "^127.0.0.1:$T_GHOST  *file  *-  *ghost .*(environment not found" <<<"$out"; then
		t_ok "$v: edgectl routes lists the TCP routes, status counts them"
	else
		t_fail "$v: edgectl routes" "$out"
	fi

	# (j) a reload: a new upstream for move, swap's port to another
	# environment, ghost brought in: each for the next connection; T_NEW
	# waits for the next start and says so
	ports="$(who "$T_MOVE" 1) $(who "$T_SWAP" 1)"
	if [ "$ports" = "$B1 $B1" ] && reload_to reload &&
		[ "$(who "$T_MOVE" 1) $(who "$T_SWAP" 1) $(who "$T_GHOST" 1)" = "$B2 $B2 $B1" ]; then
		t_ok "$v: a reload moves an environment's upstream, a port's environment and brings a missing one, live"
	else
		t_fail "$v: reload" "before: $ports; after: $(who "$T_MOVE" 1) $(who "$T_SWAP" 1) $(who "$T_GHOST" 1)"
	fi
	if grep -q "changed the listen addresses, sni or proxy_protocol of tcp_routes: these apply at the next start" "$EDGED_LOG" &&
		! python3 -c "import socket,sys; socket.create_connection(('127.0.0.1', $T_NEW), 1)" 2>/dev/null; then
		t_ok "$v: a TCP route's new listen address is for the next start, as the log says"
	else
		t_fail "$v: new listen address" "$(grep -i tcp_routes "$EDGED_LOG" | tail -2)"
	fi

	# (k) limits.max_connections: three held, the fourth closed at once
	EXTRA="limits = { max_connections = 3; };"
	if reload_to reload && client cap "$T_MAIN" 3 &&
		[ "$(metric 'edge_requests_total{outcome="connection_limit"}')" = 1 ]; then
		t_ok "$v: limits.max_connections 3: the fourth connection is closed at once, counted"
	else
		t_fail "$v: connection cap" "$(cat "$T_TMP/client.err" "$T_TMP/client.json")"
	fi

	# (l) the per-client rate limit (per worker: two workers, burst 2)
	EXTRA='ratelimit = { rate = "1/m"; burst = 2; };'
	if reload_to reload; then
		ports=$(who "$T_MAIN" 6)
		if [ "$(grep -c "^$B1$" <<<"$ports")" -ge 2 ] && [ "$(grep -c '^None$' <<<"$ports")" -ge 2 ] &&
			[ "$(metric 'edge_requests_total{outcome="rate_limited"}')" -ge 2 ]; then
			t_ok "$v: ratelimit: connections over the rate are closed, counted"
		else
			t_fail "$v: rate limit" "$(tr '\n' ' ' <<<"$ports")"
		fi
	else
		t_fail "$v: rate limit" "reload: $(tail -3 "$EDGED_LOG")"
	fi

	edged_stop
	edged_sanitizers_clean "$v: sanitizers clean" && t_ok "$v: no sanitizer report"

	# (m) one analytics event per connection, kind tunnel, with the bytes
	# each way exactly (the backend's banner and the command included)
	if python3 - "$T_TMP/events.jsonl" "$big" "$B1" <<'PY'; then
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
big, b1 = int(sys.argv[2]), int(sys.argv[3])
banner = len("edge-test-backend %d\n" % b1)
assert all(e["kind"] == "tunnel" and e["status"] == 0 for e in ev), ev
assert len({e["request_id"] for e in ev}) == len(ev), "ids not unique"
by = {}
for e in ev:
    by.setdefault(e["outcome"], []).append(e)
tun = by["tunnel"]
assert all(e["project_id"] == "tcp" and e["duration_ns"] > 0 for e in tun)
pump = [e for e in tun if e["bytes_in"] > big and e["environment_id"] == "main"]
assert len(pump) == 1, pump
cmd = len("pump %d\n" % big)
assert pump[0]["bytes_in"] == cmd + big, pump
assert pump[0]["bytes_out"] == banner + big, pump
assert pump[0]["environment_id"] == "main" and pump[0]["deployment_id"] == "main-1"
assert pump[0]["upstream_addr"] == "127.0.0.1:%d" % b1, pump
assert all(e["http_version"] is None and e["upstream_status"] is None for e in ev)
assert by["ip_denied"][0]["upstream_addr"] is None and by["ip_denied"][0]["duration_ns"] > 0
hc = [e for e in tun if e["bytes_out"] == banner + 300000 and e["bytes_in"] == len("halfclose 300000\n") + 100000]
assert len(hc) == 1, [(e["bytes_in"], e["bytes_out"]) for e in tun]
idle = [e for e in tun if e["bytes_in"] == len("echo\nx")]
assert idle and idle[0]["duration_ns"] > 2.5e9, idle
bal = [e for e in tun if e["environment_id"] == "bal"]
assert len(bal) == 30 and all(e["upstream_ns"] > 0 for e in bal), len(bal)
assert len(by["environment_not_found"]) == 1 and by["environment_not_found"][0]["environment_id"] is None
assert len(by["ip_denied"]) == 1 and by["ip_denied"][0]["project_id"] == "blocked"
assert len(by["connection_limit"]) == 1 and len(by["rate_limited"]) >= 2
assert len(by["upstream_unavailable"]) == 1 and by["upstream_unavailable"][0]["environment_id"] == "down"
PY
		t_ok "$v: analytics: one tunnel event per connection, bytes each way exact, upstream_addr, refusals by outcome"
	else
		t_fail "$v: analytics" "$(grep -c . "$T_TMP/events.jsonl") events"
	fi
}

edged_need_build
for p in "$B1" "$B2"; do
	edged_backend "$p" python3 "$TOOLS/tcp_backend.py" "$p" "$T_TMP/backend.jsonl" ||
		t_fail "backend $p starts"
done
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=tls.tcp.test \
	-addext subjectAltName=DNS:tls.tcp.test \
	-keyout "$T_TMP/tls.key" -out "$T_TMP/tls.crt" >/dev/null 2>&1 ||
	t_fail "a self-signed certificate"
edged_backend "$B_PP" "$B/tools/pingpong" serve --bind 127.0.0.1 --port "$B_PP" --duration 3600 ||
	t_fail "pingpong serve starts"
edged_backend "$B_TLS" openssl s_server -quiet -www -accept "127.0.0.1:$B_TLS" \
	-cert "$T_TMP/tls.crt" -key "$T_TMP/tls.key" ||
	t_fail "openssl s_server starts"

run_suite "$EDGED" edged $((256 << 20))
edged_asan quarantine_size_mb=4 && run_suite "$EDGED_ASAN" asan $((64 << 20))
t_exit
