#!/bin/bash
# test_edged_upstream.sh - per-upstream visibility and control against the
# live daemon: two workers in front of two endpoints (tests/tools/
# echo_backend.py, which names itself in its answers). /metrics counts
# edge_upstream_endpoints once (2, not 4), each request under the
# endpoint that served it and under its route; `edgectl upstream list` shows both with their
# route; `edgectl upstream drain` lets a slow request in flight on the
# endpoint finish 200 while every new request goes to the other, survives
# a SIGHUP reload, and `enable` brings traffic back; unknown and malformed
# endpoints are refused. Passive health: with one endpoint stopped, its
# ejection is logged once (not once per worker) and its return once.
# Active health checks (a second configuration, tests/tools/
# health_backend.py): an endpoint whose /healthz answers 500 is ejected
# after `fall` checks (logged, traffic to the other), and back after
# `rise` once it answers 200; a TCP check of a port nobody listens on
# ejects that endpoint. Runs against build/edged and build/asan/edged.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/lib_edged.sh
. "$(dirname "$0")/../lib_edged.sh"
edged_begin curl python3

BASE=$(edged_ports 7)
P_EDGE=$BASE
P_B1=$((BASE + 1))
P_B2=$((BASE + 2))
P_ADMIN=$((BASE + 3))
P_H1=$((BASE + 4))
P_H2=$((BASE + 5))
P_NONE=$((BASE + 6)) # nothing listens there
SOCK="$T_TMP/ctl/edged.sock"
E1="127.0.0.1:$P_B1"
E2="127.0.0.1:$P_B2"

{
	edged_conf_head "$P_ADMIN" "$SOCK" 2
	cat <<CONF
pin_dir = "$T_TMP/pins";
timeouts = { drain = "5s"; upstream_connect = "1s"; };
upstream = { eject_after = 2; eject_base = "500ms"; eject_max = "1s"; };
projects = (
  { id = "app";
    environments = ( { id = "app-prod"; domains = [ "app.test" ];
      deployment = { id = "a1"; upstreams = [ "$E1", "$E2" ]; }; } );
  }
);
CONF
} >"$T_TMP/edge.conf"

H1="127.0.0.1:$P_H1"
{
	edged_conf_head "$P_ADMIN" "$SOCK" 2
	cat <<CONF
pin_dir = "$T_TMP/pins";
timeouts = { drain = "5s"; upstream_connect = "1s"; };
projects = (
  { id = "hc";
    environments = (
      { id = "hc-prod"; domains = [ "app.test" ];
        deployment = { id = "h1"; upstreams = [ "$H1", "127.0.0.1:$P_H2" ];
          health_check = { type = "http"; path = "/healthz";
            interval = "200ms"; timeout = "150ms"; expect_status = 200;
            rise = 2; fall = 2; }; }; },
      { id = "hc-tcp"; domains = [ "tcp.test" ];
        deployment = { id = "h2"; upstreams = [ "127.0.0.1:$P_NONE" ];
          health_check = { type = "tcp"; interval = "200ms";
            timeout = "100ms"; fall = 2; }; }; } );
  }
);
CONF
} >"$T_TMP/health.conf"

ctl() { "$EDGECTL" --socket "$SOCK" "$@"; }

# get PATH: the name of the backend that answered (empty on an error)
get() {
	curl -s -m 10 -H "Host: app.test" "http://127.0.0.1:$P_EDGE$1" |
		grep -o '"backend": "[^"]*"' | cut -d'"' -f4
}

# metric NAME_AND_LABELS: its value on /metrics (empty when absent)
metric() {
	curl -s -m 5 "http://127.0.0.1:$P_ADMIN/metrics" >"$T_TMP/metrics"
	awk -v k="$1" '$1 == k { print $2 }' "$T_TMP/metrics"
}

# list_field ENDPOINT KEY: a column of ENDPOINT's line in edgectl
# upstream list (admin, health, inflight, requests, routes: the last)
list_field() {
	ctl upstream list | awk -v e="$1" -v k="$2" '$1 == e {
		if (k == "admin") print $2; else if (k == "health") print $3
		else if (k == "inflight") print $4; else if (k == "requests") print $5
		else if (k == "routes") print $NF }'
}

# rep WORD N: WORD and a space, N times
rep() {
	local s="" i
	for ((i = 0; i < $2; i++)); do s+="$1 "; done
	echo "$s"
}

start_backend() { # N PORT
	edged_backend "$2" python3 "$TOOLS/echo_backend.py" "$2" "$T_TMP/b$1.jsonl" "b$1"
}

run_suite() {
	local bin=$1 v=$2 i n1 n2 names spid code e other eb ob ok
	: >"$T_TMP/b1.jsonl"
	: >"$T_TMP/b2.jsonl"
	if ! edged_start "$bin" "$T_TMP/edge.conf"; then
		t_fail "$v: edged starts" "$(tail -5 "$EDGED_LOG")"
		return
	fi

	# ---- metrics: gauges once, requests under their endpoint
	for ((i = 0; i < 10; i++)); do get /m >/dev/null; done
	n1=$(wc -l <"$T_TMP/b1.jsonl")
	n2=$(wc -l <"$T_TMP/b2.jsonl")
	if [ "$(metric edge_upstream_endpoints)" = 2 ] &&
		[ "$(metric "edge_upstream_endpoint_requests_total{endpoint=\"$E1\"}")" = "$n1" ] &&
		[ "$(metric "edge_upstream_endpoint_requests_total{endpoint=\"$E2\"}")" = "$n2" ] &&
		[ "$(metric "edge_upstream_endpoint_responses_total{endpoint=\"$E1\",class=\"2xx\"}")" = "$n1" ] &&
		[ "$((n1 + n2))" = 10 ] && [ "$n1" -gt 0 ] && [ "$n2" -gt 0 ] &&
		[ "$(metric "edge_upstream_endpoint_inflight{endpoint=\"$E1\"}")" = 0 ] &&
		[ "$(metric "edge_upstream_endpoint_healthy{endpoint=\"$E2\"}")" = 1 ] &&
		[ "$(metric "edge_upstream_endpoint_response_seconds_count{endpoint=\"$E2\"}")" = "$n2" ] &&
		[ "$(metric "edge_upstream_endpoint_bytes_total{endpoint=\"$E1\",direction=\"received\"}")" -gt 0 ] &&
		[ "$(metric "edge_route_responses_total{route=\"app.test/\",environment=\"app-prod\",class=\"2xx\"}")" = 10 ] &&
		[ "$(metric "edge_route_responses_total{route=\"app.test/\",environment=\"app-prod\",class=\"5xx\"}")" = 0 ]; then
		t_ok "$v: /metrics: edge_upstream_endpoints 2 with 2 workers; requests, classes, times, bytes by endpoint ($n1 + $n2); the route's 10 2xx"
	else
		t_fail "$v: /metrics per endpoint" "b1 $n1 b2 $n2: $(grep -E '^edge_upstream_endpoint(s|_requests|_responses_total\{[^}]*2xx)' "$T_TMP/metrics" | tr '\n' ' ')"
	fi

	# ---- edgectl upstream list
	if [ "$(list_field "$E1" routes)" = "app.test/" ] &&
		[ "$(list_field "$E2" admin)" = enabled ] &&
		[ "$(list_field "$E1" health)" = healthy ] &&
		[ "$(list_field "$E1" requests)" = "$n1" ] &&
		ctl upstream list | grep -q "^$E2 .*enabled.*healthy.*app.test/"; then
		t_ok "$v: edgectl upstream list: both endpoints, their route, admin state, health, requests"
	else
		t_fail "$v: edgectl upstream list" "$(ctl upstream list 2>&1 | tr '\n' ' ')"
	fi

	# ---- drain while a slow request is in flight on it
	: >"$T_TMP/b1.jsonl"
	: >"$T_TMP/b2.jsonl"
	curl -s -m 20 -o "$T_TMP/slow.out" -w '%{http_code}' -H "Host: app.test" \
		"http://127.0.0.1:$P_EDGE/slow/1500" >"$T_TMP/slow.code" &
	spid=$!
	e=""
	for ((i = 0; i < 100; i++)); do
		grep -q /slow/ "$T_TMP/b1.jsonl" && e=$E1 eb=b1 other=$E2 ob=b2
		grep -q /slow/ "$T_TMP/b2.jsonl" && e=$E2 eb=b2 other=$E1 ob=b1
		[ -n "$e" ] && break
		sleep 0.05
	done
	if [ -z "$e" ]; then
		t_fail "$v: the slow request reaches a backend"
		wait "$spid"
		edged_stop 10
		return
	fi
	ctl upstream drain "$e" >"$T_TMP/drain.out" 2>&1
	names=""
	for ((i = 0; i < 10; i++)); do names+="$(get /n) "; done
	wait "$spid"
	code=$(cat "$T_TMP/slow.code")
	# the client has its answer; edged ends the request (its in-flight
	# count) right after writing it: on a busy machine, a moment later
	for ((i = 0; i < 50; i++)); do
		[ "$(list_field "$e" inflight)" = 0 ] && break
		sleep 0.1
	done
	if [ "$code" = 200 ] && grep -q "\"backend\": \"$eb\"" "$T_TMP/slow.out" &&
		[ "$names" = "$(rep "$ob" 10)" ] &&
		grep -q "^$e: drain (was enabled)" "$T_TMP/drain.out" &&
		[ "$(list_field "$e" admin)" = drain ] &&
		[ "$(list_field "$e" inflight)" = 0 ] &&
		[ "$(metric "edge_upstream_endpoint_admin_state{endpoint=\"$e\",state=\"drain\"}")" = 1 ] &&
		grep -q "upstream $e: drain (was enabled; by edgectl)" "$EDGED_LOG"; then
		t_ok "$v: drain: the request in flight on $eb ends 200, the next 10 all go to $ob"
	else
		t_fail "$v: drain" "slow: $code $(head -c 80 "$T_TMP/slow.out"); names: $names; $(cat "$T_TMP/drain.out"); admin $(list_field "$e" admin), inflight $(list_field "$e" inflight), metric $(metric "edge_upstream_endpoint_admin_state{endpoint=\"$e\",state=\"drain\"}"), log $(grep -c "upstream $e: drain (was enabled; by edgectl)" "$EDGED_LOG")"
	fi

	# ---- a reload keeps the admin state
	n1=$(grep -c reloaded "$EDGED_LOG")
	kill -HUP "$EPID"
	for ((i = 0; i < 100; i++)); do
		[ "$(grep -c reloaded "$EDGED_LOG")" -gt "$n1" ] && break
		sleep 0.05
	done
	names=""
	for ((i = 0; i < 6; i++)); do names+="$(get /r) "; done
	if [ "$(grep -c reloaded "$EDGED_LOG")" -gt "$n1" ] &&
		[ "$(list_field "$e" admin)" = drain ] &&
		[ "$names" = "$(rep "$ob" 6)" ]; then
		t_ok "$v: a SIGHUP reload keeps $e drained"
	else
		t_fail "$v: drain across a reload" "$names $(list_field "$e" admin)"
	fi

	# ---- disable, enable; refusals
	ok=1
	ctl upstream disable "$e" | grep -q "^$e: disabled (was drain)" || ok=0
	[ "$(get /d)" = "$ob" ] || ok=0
	ctl upstream enable "$e" | grep -q "^$e: enabled (was disabled)" || ok=0
	names=""
	for ((i = 0; i < 10; i++)); do names+="$(get /e) "; done
	[[ "$names" == *"$eb"* ]] || ok=0
	if [ "$ok" = 1 ]; then
		t_ok "$v: disable keeps it out, enable brings traffic back"
	else
		t_fail "$v: disable/enable" "$names"
	fi
	expect "$v: an endpoint no route uses is refused" 1 \
		"edgectl: upstream drain: unknown endpoint 127.0.0.1:1 (no route uses it; see edgectl upstream list)" \
		ctl upstream drain 127.0.0.1:1
	expect "$v: a malformed endpoint is refused" 1 \
		"edgectl: upstream disable: bad endpoint 'app.test:80': \"app.test:80\": not a numeric IPv4 or IPv6 address (host names are not resolved)" \
		ctl upstream disable app.test:80

	# ---- passive health: one endpoint down, ejection logged once
	kill "$(cat "$T_TMP/pid.$ob")" 2>/dev/null
	# each worker ejects it after 2 failed connects (and retries the
	# request on the other endpoint): 20 new connections reach both
	for ((i = 0; i < 20; i++)); do get /p >/dev/null; done
	n1=$(grep -c "upstream $other ejected: .*connect failed" "$EDGED_LOG")
	if [ "$n1" = 1 ] && [ "$(list_field "$other" health)" = ejected ] &&
		[ "$(metric "edge_upstream_endpoint_healthy{endpoint=\"$other\"}")" = 0 ] &&
		[ "$(metric "edge_upstream_endpoint_ejections_total{endpoint=\"$other\"}")" = 1 ]; then
		t_ok "$v: a stopped endpoint's ejection is logged once, with the reason (2 workers)"
	else
		t_fail "$v: ejection logged once" "$n1 lines: $(grep "upstream $other" "$EDGED_LOG" | tr '\n' ' ') health $(list_field "$other" health)"
	fi
	start_backend "${ob#b}" "${other##*:}" || t_fail "$v: the backend restarts"
	echo $! >"$T_TMP/pid.$ob"
	for ((i = 0; i < 100; i++)); do
		get /b >/dev/null
		[ "$(list_field "$other" health)" = healthy ] && break
		sleep 0.05
	done
	if [ "$(grep -c "upstream $other is back" "$EDGED_LOG")" = 1 ] &&
		[ "$(list_field "$other" health)" = healthy ]; then
		t_ok "$v: its return is logged once"
	else
		t_fail "$v: return logged once" "$(grep "upstream $other" "$EDGED_LOG" | tr '\n' ' ')"
	fi

	edged_stop 10
	edged_sanitizers_clean "$v: sanitizers silent"
}

run_health() {
	local bin=$1 v=$2 i names
	echo 200 >"$T_TMP/h1.status"
	if ! edged_start "$bin" "$T_TMP/health.conf"; then
		t_fail "$v: edged starts with health checks" "$(tail -5 "$EDGED_LOG")"
		return
	fi
	echo 500 >"$T_TMP/h1.status"
	if edged_wait_log "upstream $H1 ejected: health check failed 2 times in a row \(last: health check: status 5xx\)"; then
		names=""
		for ((i = 0; i < 8; i++)); do names+="$(get /x) "; done
		if [ "$names" = "$(rep h2 8)" ] && [ "$(list_field "$H1" health)" = down ] &&
			[ "$(metric "edge_upstream_endpoint_healthy{endpoint=\"$H1\"}")" = 0 ]; then
			t_ok "$v: an endpoint answering 500 on /healthz is ejected after fall = 2 checks; traffic goes to the other"
		else
			t_fail "$v: active check ejection" "$names $(list_field "$H1" health)"
		fi
	else
		t_fail "$v: active check ejects on 500" "$(grep upstream "$EDGED_LOG" | tail -3)"
	fi
	echo 200 >"$T_TMP/h1.status"
	if edged_wait_log "upstream $H1 is back: health check passed 2 times in a row"; then
		names=""
		for ((i = 0; i < 8; i++)); do names+="$(get /y) "; done
		if [[ "$names" == *h1* ]] && [ "$(list_field "$H1" health)" = healthy ] &&
			[ "$(grep -c "upstream $H1 ejected" "$EDGED_LOG")" = 1 ]; then
			t_ok "$v: back after rise = 2 checks answering 200; traffic returns"
		else
			t_fail "$v: active check return" "$names $(list_field "$H1" health)"
		fi
	else
		t_fail "$v: active check brings it back" "$(grep upstream "$EDGED_LOG" | tail -3)"
	fi
	if edged_wait_log "upstream 127.0.0.1:$P_NONE ejected: health check failed 2 times in a row \(last: health check: connect failed: Connection refused\)"; then
		t_ok "$v: a TCP check of a port nobody listens on ejects it"
	else
		t_fail "$v: TCP check" "$(grep "$P_NONE" "$EDGED_LOG" | tail -3)"
	fi
	edged_stop 10
	edged_sanitizers_clean "$v: sanitizers silent with health checks"
}

for n in 1 2; do
	p=$P_B1
	[ "$n" = 2 ] && p=$P_B2
	if ! start_backend "$n" "$p"; then
		t_fail "backend $n starts"
		t_exit
		exit
	fi
	echo $! >"$T_TMP/pid.b$n"
done
for n in 1 2; do
	p=$P_H1
	[ "$n" = 2 ] && p=$P_H2
	if ! edged_backend "$p" python3 "$TOOLS/health_backend.py" "$p" "h$n" "$T_TMP/h$n.status"; then
		t_fail "health backend $n starts"
		t_exit
		exit
	fi
done

for bin in "$B/edged" "$EDGED_ASAN"; do
	label=normal
	[ "$bin" = "$EDGED_ASAN" ] && label=asan
	if [ ! -x "$bin" ]; then
		t_skip "$label" "$bin not built"
		continue
	fi
	[ "$label" = asan ] && { edged_asan || continue; }
	run_suite "$bin" "$label"
	run_health "$bin" "$label"
done
t_exit
