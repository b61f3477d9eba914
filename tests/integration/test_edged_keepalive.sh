#!/bin/bash
# test_edged_keepalive.sh - timeouts.tunnel_keepalive: a tunnel whose
# client vanishes is closed by edged within the keepalive's time. The
# client (tests/tools/keepalive_peer.py) in one network namespace, edged
# and the backend (keepalive_peer.py backend, which logs when each
# connection closes) in another, a veth pair between them; once the
# tunnel carries bytes the veth is deleted (the client's machine gone:
# no FIN, no reset), and with tunnel_keepalive = "2s" (idle 2 s, then 3
# probes 1 s apart: 5 s) edged closes both sides: the backend sees its
# connection end, edge_tunnels_timed_out_total and
# edge_tunnels_ended_total{end="client_error"} count it, the log says
# the client stopped answering, the analytics record is written. Cases:
# a TCP route's tunnel and a WebSocket-style upgrade, copied (splice =
# "off") and in the kernel's sockmap (edgectl splice sockmap), idle or
# with the backend pushing bytes the vanished client never acknowledges
# (TCP_USER_TIMEOUT's part: keepalive sends no probe while data waits);
# both of edged's sockets of a tunnel carry the keepalive timer (ss -o);
# with tunnel_keepalive = "0" (a reload) the same vanished client's
# tunnel stays open past that time; --check refuses bad values.
# Runs against build/edged and build/asan/edged. Needs root.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/lib_edged.sh
. "$(dirname "$0")/../lib_edged.sh"
edged_begin python3 nsenter ss ip
t_require_root
edged_need_build

# fixed ports and addresses: the namespaces are the test's own
P_EDGE=8080
P_ADMIN=8081
P_TCP=8082
P_BACK=9001
A_CLIENT=10.204.0.1
A_EDGE=10.204.0.2
NS_C=edge-kac-$T_ID
NS_E=edge-kae-$T_ID
DEV_C=kac$T_ID
DEV_E=kae$T_ID
SOCK=$T_TMP/edged.sock
BLOG=$T_TMP/backend.jsonl
# idle 2 s + 3 probes 1 s apart = 5 s; what a busy machine may add
KA_BOUND=12

nsx() { # NS CMD...: CMD in namespace NS
	local ns=$1
	shift
	nsenter --net="/run/netns/$ns" "$@"
}

# veth_up: the pair between the namespaces (again after a deletion)
veth_up() {
	ip link add "$DEV_C" netns "$NS_C" type veth peer name "$DEV_E" netns "$NS_E" &&
		ip -n "$NS_C" addr add "$A_CLIENT/24" dev "$DEV_C" &&
		ip -n "$NS_E" addr add "$A_EDGE/24" dev "$DEV_E" &&
		ip -n "$NS_C" link set "$DEV_C" up &&
		ip -n "$NS_E" link set "$DEV_E" up
}

write_conf() { # KEEPALIVE
	cat >"$T_TMP/edge.conf" <<CONF
listen = [ "0.0.0.0:$P_EDGE" ];
workers = 2;
user = "$(id -un)";
control_socket = "$SOCK";
admin_listen = "127.0.0.1:$P_ADMIN";
analytics = { file = "$T_TMP/events.jsonl"; };
splice = "off";
timeouts = { tunnel_keepalive = "$1"; tunnel_idle = "10m"; drain = "2s"; };
tcp_routes = ( { listen = "0.0.0.0:$P_TCP"; environment = "raw"; } );
projects = (
  { id = "ka";
    environments = (
      { id = "raw"; domains = [ "raw.test" ];
        deployment = { id = "raw-1"; upstreams = [ "127.0.0.1:$P_BACK" ]; }; },
      { id = "ws"; domains = [ "ws.test" ];
        deployment = { id = "ws-1"; upstreams = [ "127.0.0.1:$P_BACK" ]; }; }
    );
  }
);
CONF
}

start_edged() { # BIN
	local i
	: >"$EDGED_LOG"
	nsenter --net="/run/netns/$NS_E" "$1" -c "$T_TMP/edge.conf" -f >"$EDGED_LOG" 2>&1 &
	EPID=$!
	edged_track "$EPID"
	for ((i = 0; i < 600; i++)); do
		grep -q "serving on" "$EDGED_LOG" && return 0
		kill -0 "$EPID" 2>/dev/null || return 1
		sleep 0.05
	done
	return 1
}

metric() { # NAME: edged's series NAME (0 when absent)
	nsx "$NS_E" curl -s -m 5 "http://127.0.0.1:$P_ADMIN/metrics" |
		awk -v k="$1" '$1 == k { v = $2 } END { print v + 0 }'
}

ctl() { nsx "$NS_E" "$EDGECTL" --socket "$SOCK" "$@"; }

eq() { # NAME GOT WANT
	if [ "$2" = "$3" ]; then t_ok "$1"; else t_fail "$1" "got '$2', want '$3'"; fi
}

# closed_at N: when the backend's connection N closed (empty while open)
closed_at() {
	python3 -c 'import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r["conn"] == int(sys.argv[2]) and r["event"] == "closed":
        print("%.3f" % r["t"]); break' "$BLOG" "$1"
}

# client_up MODE [push]: a client tunnel through edged (MODE raw: the TCP
# route; upgrade: an Upgrade on the HTTP listener), its output in
# $T_TMP/client.out; CONN the backend's connection number. 1 if it never
# says ready.
client_up() {
	local mode=$1 port=$P_TCP host=raw.test i
	[ "$mode" = upgrade ] && port=$P_EDGE host=ws.test
	N_CONN=$(grep -c '"open"' "$BLOG")
	nsenter --net="/run/netns/$NS_C" python3 "$TOOLS/keepalive_peer.py" client \
		"$A_EDGE" "$port" "$mode" "$host" "${2:-}" >"$T_TMP/client.out" 2>&1 &
	CPID=$!
	edged_track "$CPID"
	CONN=$((N_CONN + 1))
	for ((i = 0; i < 200; i++)); do
		grep -q '^ready' "$T_TMP/client.out" && return 0
		kill -0 "$CPID" 2>/dev/null || break
		sleep 0.05
	done
	return 1
}

# keepalive_on_both PORT: edged's socket to the client (local port PORT)
# and its socket to the backend both run the keepalive timer
keepalive_on_both() {
	local out i
	# the client may see the 101 before edged has made the tunnel
	for ((i = 0; i < 50; i++)); do
		out=$(nsx "$NS_E" ss -tnoH state established "( sport = :$1 or dport = :$P_BACK )")
		if [ "$(grep -c 'timer:(keepalive' <<<"$out")" -ge 2 ] &&
			grep -q "$A_EDGE:$1 " <<<"$out"; then
			return 0
		fi
		sleep 0.1
	done
	echo "$out"
	return 1
}

# vanish_case LABEL MODE [push]: a tunnel, its client's veth deleted;
# edged closes it within KA_BOUND seconds
vanish_case() {
	local L=$1 mode=$2 push=${3:-} port=$P_TCP to0 ce0 t0 t1 i at out
	[ "$mode" = upgrade ] && port=$P_EDGE
	if ! veth_up; then
		t_fail "$L: veth pair" "could not be made"
		return
	fi
	if ! client_up "$mode" "$push"; then
		t_fail "$L: the client's tunnel is up" "$(cat "$T_TMP/client.out")"
		ip -n "$NS_C" link del "$DEV_C" 2>/dev/null
		return
	fi
	if [ -z "$push" ]; then
		if out=$(keepalive_on_both "$port"); then
			t_ok "$L: both of edged's sockets of the tunnel run a keepalive timer"
		else
			t_fail "$L: keepalive timers" "$out"
		fi
	fi
	if [ "$SPLICED" = 1 ]; then
		for ((i = 0; i < 60; i++)); do
			ctl splice --json >"$T_TMP/splice.json" 2>&1
			[ "$(json_field "$T_TMP/splice.json" open_spliced)" = 1 ] && break
			sleep 0.05
		done
		eq "$L: the tunnel is in the kernel's sockmap" \
			"$(json_field "$T_TMP/splice.json" open_spliced)" 1
	fi
	to0=$(metric edge_tunnels_timed_out_total)
	ce0=$(metric 'edge_tunnels_ended_total{end="client_error"}')
	t0=$(date +%s.%N)
	ip -n "$NS_C" link del "$DEV_C"
	at=""
	for ((i = 0; i < 30 * 10; i++)); do
		at=$(closed_at "$CONN")
		[ -n "$at" ] && break
		sleep 0.1
	done
	if [ -z "$at" ]; then
		t_fail "$L: the backend's connection closed after the client vanished" "still open after 30 s"
	else
		t1=$(python3 -c "print('%.1f' % ($at - $t0))")
		if python3 -c "import sys; sys.exit(0 if $t1 <= $KA_BOUND else 1)"; then
			t_ok "$L: the vanished client's tunnel closed, the backend saw it after ${t1}s (keepalive 2s + 3 x 1s)"
		else
			t_fail "$L: closed within ${KA_BOUND}s" "after ${t1}s"
		fi
	fi
	sleep 0.3 # the metrics come from the stats thread
	eq "$L: edge_tunnels_timed_out_total counted it" \
		"$(metric edge_tunnels_timed_out_total)" $((to0 + 1))
	eq "$L: as the client's error" \
		"$(metric 'edge_tunnels_ended_total{end="client_error"}')" $((ce0 + 1))
	kill "$CPID" 2>/dev/null
	wait "$CPID" 2>/dev/null
}

run_suite() { # LABEL
	local L=$1 out at
	SPLICED=0
	vanish_case "$L: tcp route, copied, idle" raw
	if grep -q 'the client stopped answering' "$EDGED_LOG"; then
		t_ok "$L: edged's log says the client stopped answering"
	else
		t_fail "$L: the log line" "$(grep tunnel "$EDGED_LOG" | tail -3)"
	fi
	sleep 0.5
	if python3 -c 'import json, sys
r = [json.loads(l) for l in open(sys.argv[1])]
r = [x for x in r if x.get("outcome") == "tunnel"]
sys.exit(0 if r else 1)' "$T_TMP/events.jsonl" 2>/dev/null; then
		t_ok "$L: the tunnel's analytics record was written"
	else
		t_fail "$L: analytics record" "$(tail -2 "$T_TMP/events.jsonl")"
	fi
	vanish_case "$L: upgrade, copied, idle" upgrade
	vanish_case "$L: tcp route, copied, the backend pushing" raw push
	vanish_case "$L: upgrade, copied, the backend pushing" upgrade push
	ctl splice sockmap >/dev/null 2>&1
	ctl splice --json >"$T_TMP/splice.json" 2>&1
	if [ "$(json_field "$T_TMP/splice.json" kernel)" = True ]; then
		SPLICED=1
		vanish_case "$L: tcp route, spliced, idle" raw
		vanish_case "$L: upgrade, spliced, the backend pushing" upgrade push
		SPLICED=0
		ctl splice off >/dev/null 2>&1
	else
		t_skip "$L: spliced cases" "the kernel path is not usable: $(cat "$T_TMP/splice.json")"
	fi

	# off: the same vanished client's tunnel stays open
	write_conf 0
	if ! ctl reload >/dev/null 2>&1; then
		t_fail "$L: reload with tunnel_keepalive = \"0\"" "$(tail -3 "$EDGED_LOG")"
	elif ! veth_up || ! client_up raw; then
		t_fail "$L: keepalive off: the tunnel is up" "$(cat "$T_TMP/client.out")"
	else
		out=$(nsx "$NS_E" ss -tnoH state established "( sport = :$P_TCP or dport = :$P_BACK )")
		if grep -q 'timer:(keepalive' <<<"$out"; then
			t_fail "$L: keepalive off: no keepalive timer" "$out"
		else
			t_ok "$L: keepalive off: edged's sockets of the tunnel run no keepalive timer"
		fi
		ip -n "$NS_C" link del "$DEV_C"
		sleep $((KA_BOUND - 2))
		at=$(closed_at "$CONN")
		eq "$L: keepalive off: the vanished client's tunnel is still open after $((KA_BOUND - 2))s" "$at" ""
		kill "$CPID" 2>/dev/null
		wait "$CPID" 2>/dev/null
	fi
	write_conf 2s
}

# --check: what tunnel_keepalive takes
check_value() { # VALUE WANT(ERE, empty: accepted)
	local out rc=0
	sed "s/tunnel_keepalive = \"[^\"]*\"/tunnel_keepalive = $1/" "$T_TMP/edge.conf" >"$T_TMP/check.conf"
	out=$("$EDGED" -c "$T_TMP/check.conf" --check 2>&1) || rc=$?
	if [ -z "$2" ]; then
		if [ "$rc" -eq 0 ]; then t_ok "--check takes tunnel_keepalive = $1"; else t_fail "--check takes $1" "$out"; fi
	elif [ "$rc" -ne 0 ] && grep -qE "check.conf:[0-9]+: .*timeouts.tunnel_keepalive.*$2" <<<"$out"; then
		t_ok "--check refuses tunnel_keepalive = $1"
	else
		t_fail "--check refuses tunnel_keepalive = $1" "$out"
	fi
}
write_conf 2s
check_value '"0"' ""
check_value '"0s"' ""
check_value '"90s"' ""
check_value '"3h"' "out of range"
check_value '"1500ms"' ""
check_value '"-1s"' "."
check_value '60' "duration string"

if ! t_netns "$NS_C" || ! t_netns "$NS_E"; then
	t_fail "namespaces" "could not be made"
	t_exit
	exit
fi
ip -n "$NS_C" link set lo up
ip -n "$NS_E" link set lo up
: >"$BLOG"
nsenter --net="/run/netns/$NS_E" python3 "$TOOLS/keepalive_peer.py" backend "$P_BACK" "$BLOG" &
edged_track $!

if start_edged "$EDGED"; then
	run_suite "normal"
	edged_stop 20
	eq "normal: edged ends cleanly" "$?" 0
else
	t_fail "normal: edged starts" "$(tail -5 "$EDGED_LOG")"
fi
if edged_asan; then
	if start_edged "$EDGED_ASAN"; then
		run_suite "asan"
		edged_stop 20
		edged_sanitizers_clean "asan: no sanitizer report" && t_ok "asan: no sanitizer report"
	else
		t_fail "asan: edged starts" "$(tail -5 "$EDGED_LOG")"
	fi
fi
t_exit
