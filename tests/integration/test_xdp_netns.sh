#!/bin/bash
# test_xdp_netns.sh - edgectl and the XDP program with real traffic.
#
# Two namespaces joined by a veth pair: "srv" (edge attached on its end,
# servers on 8080 and 9090) and "cli" (clients with several IPv4 and IPv6
# source addresses). Runs the attach/traffic/rules/detach cycle in native
# mode, then again in skb mode.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
t_require_root
t_begin

PROBE="$T_ROOT/tests/tools/netprobe.py" # the servers
CLIENT="$B/tools/probe"                  # the clients (C: fast in VMs)
SRV="edge-srv-$T_ID"
CLI="edge-cli-$T_ID"
S4=198.18.0.1
C4A=198.18.0.2 # the one we block
C4B=198.18.0.3 # stays allowed
S6=2001:db8:200::1
C6A=2001:db8:200::2
C6B=2001:db8:200::3

setup_net() {
	t_netns "$SRV" && t_netns "$CLI" || return 1
	ip link add "vs$T_ID" netns "$SRV" type veth peer name "vc$T_ID" netns "$CLI" || return 1
	ip -n "$SRV" link set lo up
	ip -n "$CLI" link set lo up
	ip -n "$SRV" addr add $S4/24 dev "vs$T_ID"
	ip -n "$SRV" addr add $S6/64 dev "vs$T_ID" nodad
	ip -n "$CLI" addr add $C4A/24 dev "vc$T_ID"
	ip -n "$CLI" addr add $C4B/24 dev "vc$T_ID"
	ip -n "$CLI" addr add $C6A/64 dev "vc$T_ID" nodad
	ip -n "$CLI" addr add $C6B/64 dev "vc$T_ID" nodad
	ip -n "$SRV" link set "vs$T_ID" up
	ip -n "$CLI" link set "vc$T_ID" up
	# veth native XDP needs GRO or an XDP program on the peer to get
	# multi-buffer-free frames; GRO on keeps native mode usable.
	ip netns exec "$CLI" ethtool -K "vc$T_ID" gro on >/dev/null 2>&1 || true
	ip netns exec "$SRV" python3 "$PROBE" serve 8080 9090 >"$T_TMP/server.log" 2>&1 &
	t_cleanup_add "kill $!"
	for _ in $(seq 50); do
		grep -q ready "$T_TMP/server.log" 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}

ctl() { t_in "$SRV" "$EDGECTL" "$@"; }
reach() { ip netns exec "$CLI" "$CLIENT" "$@" >/dev/null 2>&1; }

# expect_reach NAME PROTO SRC DST PORT / expect_blocked ...
expect_reach() {
	local name=$1
	shift
	if reach "$@"; then t_ok "$name"; else t_fail "$name" "no answer for $*"; fi
}
expect_blocked() {
	local name=$1
	shift
	if reach "$@"; then t_fail "$name" "answered: $*"; else t_ok "$name"; fi
}

counter() { # counter NAME: the counter's total from stats --json
	ctl stats --json | python3 -c "import json,sys; print(json.load(sys.stdin)['counters']['$1'])"
}

cycle() {
	local mode=$1 want
	want=$([ "$mode" = native ] && echo xdp || echo xdpgeneric)

	t_check "$mode: attach" ctl attach "vs$T_ID" --mode "$mode"
	if ip -n "$SRV" link show "vs$T_ID" | grep -qw "$want"; then
		t_ok "$mode: interface shows $want"
	else
		t_fail "$mode: interface shows $want" "$(ip -n "$SRV" link show "vs$T_ID" | head -3)"
	fi
	if ctl attach "vs$T_ID" --mode "$mode" >"$T_TMP/out" 2>&1; then
		t_fail "$mode: attaching twice is refused"
	else
		if grep -qi "already" "$T_TMP/out"; then
			t_ok "$mode: attaching twice is refused"
		else
			t_fail "$mode: attaching twice is refused" "$(cat "$T_TMP/out")"
		fi
	fi

	# rules restored from the state file (saved in the first cycle)
	if [ "$mode" = skb ]; then
		expect_blocked "skb: saved block rule restored on attach" tcp $C4A $S4 8080
		t_check "skb: clear restored rule" ctl ip del $C4A/32
	fi

	expect_reach "$mode: tcp v4 baseline" tcp $C4A $S4 8080
	expect_reach "$mode: udp v4 baseline" udp $C4A $S4 8080
	expect_reach "$mode: tcp v6 baseline" tcp $C6A $S6 8080

	t_check "$mode: block v4 /32" ctl ip block $C4A/32 --comment "test client"
	expect_blocked "$mode: blocked v4 source: tcp" tcp $C4A $S4 8080
	expect_blocked "$mode: blocked v4 source: udp" udp $C4A $S4 9090
	expect_reach "$mode: other v4 source still served" tcp $C4B $S4 8080
	if [ "$(counter dropped_rule)" -gt 0 ]; then
		t_ok "$mode: dropped_rule counted"
	else
		t_fail "$mode: dropped_rule counted"
	fi
	if ctl ip list --json | python3 -c "
import json,sys
r=[x for x in json.load(sys.stdin) if x['cidr']=='$C4A/32']
sys.exit(0 if r and r[0]['hits']>0 and r[0]['action']=='block' else 1)"; then
		t_ok "$mode: rule hits counted"
	else
		t_fail "$mode: rule hits counted" "$(ctl ip list)"
	fi

	t_check "$mode: block v6 /128" ctl ip block $C6A
	expect_blocked "$mode: blocked v6 source: tcp" tcp $C6A $S6 8080
	expect_blocked "$mode: blocked v6 source: udp" udp $C6A $S6 8080
	expect_reach "$mode: other v6 source still served" tcp $C6B $S6 8080
	t_check "$mode: unblock v6" ctl ip del $C6A/128
	expect_reach "$mode: unblocked v6 source served" tcp $C6A $S6 8080

	# longest prefix: block the /24, allow one /32 inside
	t_check "$mode: block /24" ctl ip block 198.18.0.0/24
	t_check "$mode: allow /32 inside" ctl ip allow $C4B/32
	expect_reach "$mode: allowed /32 inside blocked /24" tcp $C4B $S4 8080
	expect_blocked "$mode: rest of /24 blocked" tcp $C4A $S4 8080
	t_check "$mode: del /24" ctl ip del 198.18.0.0/24
	t_check "$mode: del allow" ctl ip del $C4B/32

	# a rule change applies to the next packet of an open connection
	rm -f "$T_TMP/flag"
	ip netns exec "$CLI" "$CLIENT" hold $C4B $S4 8080 "$T_TMP/flag" >"$T_TMP/hold" 2>&1 &
	local hp=$!
	for _ in $(seq 30); do grep -q "first" "$T_TMP/hold" && break; sleep 0.1; done
	ctl ip block $C4B >/dev/null
	touch "$T_TMP/flag"
	wait $hp
	if grep -q "first ok" "$T_TMP/hold" && grep -q "second blocked" "$T_TMP/hold"; then
		t_ok "$mode: block applies to an established connection's next packet"
	else
		t_fail "$mode: block applies to an established connection's next packet" "$(cat "$T_TMP/hold")"
	fi
	t_check "$mode: unblock" ctl ip del $C4B
	expect_reach "$mode: unblocked source served again" tcp $C4B $S4 8080

	# TTL: expires in the kernel with no process running
	# (5 s: a slow VM must still probe before it expires). Its clock
	# starts when the rule is made, which on a slow VM under load can
	# be seconds after the command started: the expiry is awaited from
	# there, and then for up to 10 s more (a probe of a busy guest can
	# itself take seconds); a rule that never expires still fails.
	local t0 ok=0
	t_check "$mode: block with ttl" ctl ip block $C4B --ttl 5s
	t0=$SECONDS
	expect_blocked "$mode: ttl rule applies" tcp $C4B $S4 8080
	while [ $((SECONDS - t0)) -lt 6 ]; do sleep 0.5; done
	while [ $((SECONDS - t0)) -lt 16 ]; do
		if reach tcp $C4B $S4 8080; then
			ok=1
			break
		fi
		sleep 0.5
	done
	if [ "$ok" = 1 ]; then
		t_ok "$mode: ttl rule expired"
	else
		t_fail "$mode: ttl rule expired" "still no answer 16 s after the 5 s rule was made"
	fi

	# allowlist policy guards 8080 only
	t_check "$mode: allow C4A" ctl ip allow $C4A/32
	t_check "$mode: allowlist on 8080" ctl ip policy allowlist --ports 8080
	expect_reach "$mode: allowlist: allowed source served" tcp $C4A $S4 8080
	expect_blocked "$mode: allowlist: other source refused on 8080" tcp $C4B $S4 8080
	expect_blocked "$mode: allowlist: other source refused on udp 8080" udp $C4B $S4 8080
	expect_blocked "$mode: allowlist: v6 source refused on 8080" tcp $C6B $S6 8080
	expect_reach "$mode: allowlist: unguarded port 9090 open" tcp $C4B $S4 9090
	ip -n "$CLI" neigh flush all
	ip -n "$CLI" -6 neigh flush all
	expect_reach "$mode: allowlist: ARP and ND still work" tcp $C6B $S6 9090
	if ip netns exec "$CLI" ping -c1 -W1 -I $C4B $S4 >/dev/null 2>&1; then
		t_ok "$mode: allowlist: ping works"
	else
		t_fail "$mode: allowlist: ping works"
	fi
	t_check "$mode: back to blocklist" ctl ip policy blocklist
	expect_reach "$mode: blocklist again: served" tcp $C4B $S4 8080
	t_check "$mode: del allow C4A" ctl ip del $C4A/32

	# SYN rate limit: a burst of 3 new connections per source, then one a
	# minute: the 4th to 6th (and their SYN retransmits) are dropped
	t_check "$mode: ratelimit" ctl ratelimit set 1/m --burst 3
	local ok=0 i
	for i in 1 2 3 4 5 6; do reach tcp $C4B $S4 9090 && ok=$((ok + 1)); done
	if [ $ok -eq 3 ]; then
		t_ok "$mode: syn rate limit lets the burst through, then drops"
	else
		t_fail "$mode: syn rate limit lets the burst through, then drops" "$ok of 6 connected"
	fi
	if [ "$(counter dropped_ratelimit)" -gt 0 ]; then
		t_ok "$mode: dropped_ratelimit counted"
	else
		t_fail "$mode: dropped_ratelimit counted"
	fi
	expect_reach "$mode: another source is not limited" tcp $C4A $S4 9090
	# QUIC: an Initial to a guarded port (8080, since the allowlist step)
	# takes a token as a SYN does: the same source's bucket is empty
	expect_blocked "$mode: a QUIC Initial to a guarded port is a new connection" quic $C4B $S4 8080
	expect_reach "$mode: other UDP to it is not" udp $C4B $S4 8080
	expect_reach "$mode: nor an Initial to an unguarded port" quic $C4B $S4 9090
	if [ "$(counter ratelimit_quic)" -gt 0 ]; then
		t_ok "$mode: ratelimit_quic counted"
	else
		t_fail "$mode: ratelimit_quic counted"
	fi
	t_check "$mode: ratelimit off" ctl ratelimit off
	expect_reach "$mode: limit off: served" tcp $C4B $S4 9090

	# leave a rule for the next attach, then detach
	t_check "$mode: block before detach" ctl ip block $C4A/32
	t_check "$mode: detach" ctl detach "vs$T_ID"
	if ip -n "$SRV" link show "vs$T_ID" | grep -q "prog/xdp"; then
		t_fail "$mode: detach leaves no program" "$(ip -n "$SRV" link show "vs$T_ID")"
	else
		t_ok "$mode: detach leaves no program"
	fi
	if [ -e "$EDGE_PIN_DIR" ]; then
		t_fail "$mode: pins removed after the last detach" "$(ls "$EDGE_PIN_DIR")"
	else
		t_ok "$mode: pins removed after the last detach"
	fi
	expect_reach "$mode: detached: blocked source reaches the server" tcp $C4A $S4 8080
	if ctl detach "vs$T_ID" >/dev/null 2>&1; then
		t_fail "$mode: detaching what is not attached fails"
	else
		t_ok "$mode: detaching what is not attached fails"
	fi
}

if ! setup_net; then
	t_fail "namespace setup" "$(cat "$T_TMP/server.log" 2>/dev/null)"
	t_exit
	exit $?
fi
t_ok "namespace setup"
cycle native
cycle skb
if ctl ip list | grep -q "$C4A/32"; then
	t_ok "rules survived two detach/attach cycles"
else
	t_fail "rules survived two detach/attach cycles" "$(ctl ip list)"
fi
t_exit
