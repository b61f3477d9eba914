#!/bin/bash
# test_edged_pg_xdp.sh - the database's global IP rules (ip_rules with
# project_id NULL) in this host's XDP maps, with real TCP and UDP between
# two network namespaces.
#
# A private PostgreSQL 15 (tests/lib_pg.sh) with edge's schema (edgectl db
# migrate); namespaces "srv" (edge's XDP attached to its veth end with
# edgectl, a TCP/UDP server on 8080) and "cli" (the clients, with several
# IPv4 and IPv6 source addresses); edged with `pg` set and the same
# pin_dir as edgectl.
# Rows are written with psql and the traffic says what happened:
#   a block row drops its source at XDP (counted: dropped_rule and the
#   rule's own hits, under a rule id of the database's range), the other
#   sources still connect; its DELETE lets the source in again; an allow
#   row inside a blocked prefix; IPv6 and IPv4-mapped IPv6 rows; an
#   expires_at a few seconds ahead blocks, then passes once it is past
#   with edged stopped (the kernel's expiry); expires_at 'infinity' and
#   far in the future (past what nanoseconds of boot time hold) stay
#   blocked; a block and an allow row on one prefix (block wins, on a
#   database without 0002's unique index); a row that would cut this
#   host off from its database refused and counted while its neighbours
#   apply; edgectl's own rule on a prefix wins and
#   survives the database rule's DELETE, and when the host's rule goes
#   the database's comes back; detach and attach again: the database's
#   rules are back in the new maps; edged's sessions killed over and over
#   (a snapshot after each reconnect) while both sources are probed
#   without pause: no datagram of the blocked source answered, no
#   connection of the allowed one lost; edge_hosts shows the XDP counters
#   and the rule's hits.
# Runs against build/edged and build/asan/edged (only the first inside a
# vmtest guest, EDGE_VMTEST: tests/run --vm runs this one test of the pg suite, and
# the host runs the ASan build). Needs root.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/lib_edged.sh
. "$(dirname "$0")/../lib_edged.sh"
# shellcheck source=tests/lib_pg.sh
. "$(dirname "$0")/../lib_pg.sh"
t_require_root
edged_begin psql jq bpftool nsenter
edged_need_build

PROBE="$T_ROOT/tests/tools/netprobe.py" # the server
CLIENT="$B/tools/probe"                  # the clients
if [ ! -x "$CLIENT" ]; then
	t_skip "$(basename "$0")" "$CLIENT not built"
	exit 77
fi
BASE=$(edged_ports 3)
P_EDGE=$BASE
P_ADMIN=$((BASE + 1))
P_PG=$((BASE + 2))
PORT=8080
SRV="edge-pgx-srv-$T_ID"
CLI="edge-pgx-cli-$T_ID"
VS="vps$T_ID"
VC="vpc$T_ID"
HOST="pgxdp-$T_ID"
S4=198.18.1.1
C4A=198.18.1.2 # the source the database blocks
C4B=198.18.1.3 # stays allowed
C4C=198.18.1.4 # a rule that expires
C4D=198.18.1.5 # rules that never expire (or only in centuries)
S6=2001:db8:201::1
C6A=2001:db8:201::2
C6B=2001:db8:201::3
# the LPM keys' addresses as bpftool prints them
K4A="198,18,1,2"
K6A="32,1,13,184,2,1,0,0,0,0,0,0,0,0,0,2"
# seconds until a rule with expires_at expires; a VM under emulation
# needs longer to see it blocked first, and longer for every change to
# show (SLOW times each deadline)
EXPIRE_S=4
SLOW=1
if [ -n "${EDGE_VMTEST:-}" ]; then
	EXPIRE_S=20 # psql alone takes seconds under TCG
	SLOW=4
fi
export EDGE_CONTROL_SOCKET="$T_TMP/edged.sock"

# ---- the network, the server, edge attached --------------------------------

setup_net() {
	t_netns "$SRV" && t_netns "$CLI" || return 1
	ip link add "$VS" netns "$SRV" type veth peer name "$VC" netns "$CLI" || return 1
	ip -n "$SRV" link set lo up
	ip -n "$CLI" link set lo up
	ip -n "$SRV" addr add $S4/24 dev "$VS"
	ip -n "$SRV" addr add $S6/64 dev "$VS" nodad
	local a
	for a in $C4A $C4B $C4C $C4D; do
		ip -n "$CLI" addr add "$a/24" dev "$VC"
	done
	ip -n "$CLI" addr add $C6A/64 dev "$VC" nodad
	ip -n "$CLI" addr add $C6B/64 dev "$VC" nodad
	ip -n "$SRV" link set "$VS" up
	ip -n "$CLI" link set "$VC" up
	# native XDP on veth wants GRO on the peer (see test_xdp_netns.sh)
	ip netns exec "$CLI" ethtool -K "$VC" gro on >/dev/null 2>&1 || true
	ip netns exec "$SRV" python3 "$PROBE" serve $PORT >"$T_TMP/server.log" 2>&1 &
	edged_track $!
	for _ in $(seq 100); do
		grep -q ready "$T_TMP/server.log" 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}

ctl() { t_in "$SRV" "$EDGECTL" "$@"; }

# reach SRC DST [MS]: 0 when a TCP connection from SRC to DST:8080 is
# answered within MS ms (2000)
reach() {
	PROBE_TIMEOUT_MS=${3:-2000} nsenter --net="/run/netns/$CLI" \
		"$CLIENT" tcp "$1" "$2" $PORT >/dev/null 2>&1
}
# blocked SRC DST: 0 when a TCP connection from SRC is not answered in 1 s
blocked() { ! reach "$1" "$2" 1000; }

# wait_blocked / wait_reach SRC DST [SECONDS]: 0 once the source is
# blocked / answered (probes of 300 ms, for 5 s or SECONDS, times SLOW);
# WAITED holds the milliseconds it took
WAITED=0
wait_blocked() {
	local t0 end
	t0=$(date +%s%N)
	end=$((t0 + ${3:-5} * SLOW * 1000000000))
	while [ "$(date +%s%N)" -lt "$end" ]; do
		if ! reach "$1" "$2" 300; then
			WAITED=$((($(date +%s%N) - t0) / 1000000))
			return 0
		fi
	done
	return 1
}
wait_reach() {
	local t0 end
	t0=$(date +%s%N)
	end=$((t0 + ${3:-5} * SLOW * 1000000000))
	while [ "$(date +%s%N)" -lt "$end" ]; do
		if reach "$1" "$2" 300; then
			WAITED=$((($(date +%s%N) - t0) / 1000000))
			return 0
		fi
		sleep 0.05
	done
	return 1
}

# counter NAME: an XDP counter's total (edgectl stats)
counter() { "$EDGECTL" stats --json | jq -r ".counters.$1"; }
# entry_id 4|6 ADDR_BYTES PREFIXLEN: the rule id of the maps' entry for
# that prefix ("" when there is none)
entry_id() {
	bpftool -j map dump pinned "$EDGE_PIN_DIR/edge_rules_v$1" 2>/dev/null |
		jq -r ".[] | select(.formatted.key.prefixlen == $3 and .formatted.key.addr == [$2]) | .formatted.value.id"
}
# hits ID: the kernel's hit counter of rule id ID, over every CPU
hits() {
	bpftool -j map lookup pinned "$EDGE_PIN_DIR/edge_rule_hits" key \
		$(($1 & 255)) $((($1 >> 8) & 255)) $((($1 >> 16) & 255)) $((($1 >> 24) & 255)) |
		jq '[.formatted.values[].value] | add'
}
# db KEY: a field of edged's database status (edgectl status)
db() { "$EDGECTL" status --json | jq -r ".daemon.status.database.$1"; }
metric() {
	curl -s -m 5 "http://127.0.0.1:$P_ADMIN/metrics" | awk -v n="$1" '$1 == n { print $2 }'
}
# synced: 0 once edged has applied every change the database logged
synced() {
	local want i
	want=$(pg_val "SELECT COALESCE(max(version), 0) FROM edge_change_log")
	for ((i = 0; i < 100; i++)); do
		[ "$(db applied_version)" -ge "$want" ] 2>/dev/null && return 0
		sleep 0.05
	done
	return 1
}
# rule CIDR ACTION [EXPIRES_SQL]: insert a global rule, print its id
rule() {
	pg_val "INSERT INTO ip_rules (cidr, action, expires_at, comment)
		VALUES ('$1', '$2', ${3:-NULL}, 'test') RETURNING id"
}
# unrule ID...: delete those rules
unrule() {
	local IFS=,
	pg_sql "DELETE FROM ip_rules WHERE id IN ($*)" >/dev/null
}

write_conf() {
	cat >"$T_TMP/edge.conf" <<CONF
$(edged_conf_head "$P_ADMIN" "$EDGE_CONTROL_SOCKET" 1)
pin_dir = "$EDGE_PIN_DIR";
pg = "$PG_CONNINFO";
pg_snapshot = "$T_TMP/snap-$1/db.json";
host_name = "$HOST";
CONF
}

# ---- the cases ---------------------------------------------------------------

run_suite() { # BIN LABEL
	local bin=$1 v=$2 id id2 id3 ids d0 h0 out i t0

	write_conf "$v"
	edged_start "$bin" "$T_TMP/edge.conf" -v
	for ((i = 0; i < 100; i++)); do
		[ "$(db state)" = up ] && break
		sleep 0.1
	done
	if [ "$(db state)" != up ]; then
		t_fail "$v: edged starts and syncs" "$(db state) $(tail -5 "$EDGED_LOG")"
		return
	fi
	# a run before this one left its rules in the maps: the snapshot
	# (none) removed them
	if [ "$(db xdp_attached)" = true ] && reach $C4A $S4 && reach $C4B $S4 &&
		reach $C4C $S4 && reach $C6A $S6 && reach $C6B $S6; then
		t_ok "$v: edged up on the database, XDP maps found; every source connects"
	else
		t_fail "$v: baseline" "attached $(db xdp_attached)"
	fi

	# 1. a block row drops its source at XDP; the others still connect
	d0=$(counter dropped_rule)
	t0=$(date +%s%N)
	id=$(rule $C4A/32 block)
	if wait_blocked $C4A $S4; then
		t_ok "$v: INSERT of a block rule: $C4A dropped $(($(date +%s%N) / 1000000 - t0 / 1000000)) ms after the COMMIT"
	else
		t_fail "$v: INSERT of a block rule" "$C4A still connects; $(grep -m2 database "$EDGED_LOG")"
	fi
	local eid
	eid=$(entry_id 4 "$K4A" 32)
	if blocked $C4A $S4 && reach $C4B $S4 && reach $C6A $S6 &&
		[ "$(counter dropped_rule)" -gt "$d0" ] && [ -n "$eid" ] &&
		[ "$eid" -ge 8192 ] && [ "$(hits "$eid")" -gt 0 ]; then
		t_ok "$v: the blocked source times out, $C4B and IPv6 connect; dropped_rule $d0 -> $(counter dropped_rule), rule id $eid (the database's range) hit $(hits "$eid") times"
	else
		t_fail "$v: block rule" "dropped_rule $d0 -> $(counter dropped_rule), entry id '$eid' hits $(hits "${eid:-0}")"
	fi
	if [ "$(db xdp_rules)" = 1 ]; then
		t_ok "$v: edgectl status: one database rule in the maps"
	else
		t_fail "$v: status xdp_rules" "$(db xdp_rules)"
	fi

	# 2. its DELETE lets the source in again
	unrule "$id"
	if wait_reach $C4A $S4 && [ -z "$(entry_id 4 "$K4A" 32)" ]; then
		t_ok "$v: DELETE of the rule: $C4A connects again ${WAITED} ms later, its entry gone from the map"
	else
		t_fail "$v: DELETE of the rule" "$C4A: $(reach $C4A $S4 && echo connects || echo blocked), entry '$(entry_id 4 "$K4A" 32)'"
	fi

	# 3. an allow row inside a blocked prefix: the longest prefix decides
	ids=$(pg_val "WITH r AS (INSERT INTO ip_rules (cidr, action) VALUES
		('198.18.1.0/24', 'block'), ('$C4B/32', 'allow') RETURNING id)
		SELECT string_agg(id::text, ',') FROM r")
	if wait_blocked $C4A $S4 && blocked $C4C $S4 && reach $C4B $S4 &&
		reach $C6A $S6; then
		t_ok "$v: block 198.18.1.0/24 with allow $C4B/32: $C4B connects, $C4A and $C4C are dropped"
	else
		t_fail "$v: allow inside a block" "$C4B $(reach $C4B $S4 && echo connects || echo dropped), $C4A $(reach $C4A $S4 && echo connects || echo dropped)"
	fi
	unrule "$ids"
	wait_reach $C4A $S4

	# 4. IPv6, and an IPv4-mapped IPv6 row (applied as the IPv4 /32)
	id=$(rule $C6A/128 block)
	id2=$(rule "::ffff:$C4D/128" block)
	if wait_blocked $C6A $S6 && reach $C6B $S6 && blocked $C4D $S4 &&
		reach $C4A $S4 && [ "$(entry_id 6 "$K6A" 128)" -ge 8192 ]; then
		t_ok "$v: IPv6 block $C6A/128: dropped, $C6B connects; ::ffff:$C4D/128 drops $C4D"
	else
		t_fail "$v: IPv6 rules" "$C6A $(reach $C6A $S6 && echo connects || echo dropped), $C4D $(reach $C4D $S4 && echo connects || echo dropped)"
	fi
	unrule "$id" "$id2"
	if wait_reach $C6A $S6 && wait_reach $C4D $S4; then
		t_ok "$v: IPv6 rules deleted: $C6A and $C4D connect"
	else
		t_fail "$v: IPv6 rules deleted" "still dropped"
	fi

	# 5. expiry, in the kernel: edged is stopped while the rule runs out;
	# 'infinity' and a date past what 64-bit nanoseconds of boot time hold
	# (584.5 years and a few seconds) never expire here
	id2=$(rule $C4D/32 block "'infinity'")
	id3=$(rule $C6A/128 block "now() + make_interval(secs => 18446744073.709551616 + $EXPIRE_S)")
	t0=$SECONDS
	id=$(rule $C4C/32 block "now() + interval '$EXPIRE_S seconds'")
	if wait_blocked $C4C $S4 && [ $((SECONDS - t0)) -lt $((EXPIRE_S - 1)) ] &&
		blocked $C4D $S4 && blocked $C6A $S6; then
		t_ok "$v: rules with expires_at (in ${EXPIRE_S} s, 'infinity', in 584 years) all drop (the first ${WAITED} ms after its COMMIT)"
	else
		t_fail "$v: rules with expires_at" "$C4C $(reach $C4C $S4 && echo connects || echo dropped) (waited ${WAITED} ms, $((SECONDS - t0)) s after the COMMIT), $C4D (infinity) $(reach $C4D $S4 && echo connects || echo dropped), $C6A (584 y) $(reach $C6A $S6 && echo connects || echo dropped); entries $(bpftool -j map dump pinned "$EDGE_PIN_DIR/edge_rules_v4" | jq -c '[.[].formatted | [.key.addr[3], .key.prefixlen, .value.id, .value.expires_ns]]'); $(grep 'database: ' "$EDGED_LOG" | tail -3)"
	fi
	local x0 exp
	x0=$(counter rule_expired)
	# the second the kernel was told (expires_at rounded up), and one more
	exp=$(pg_val "SELECT ceil(extract(epoch FROM expires_at)) FROM ip_rules WHERE id = $id")
	kill -STOP "$EPID"
	while [ "$(date +%s)" -le "${exp:-0}" ]; do sleep 0.2; done
	if wait_reach $C4C $S4 && [ -n "$(entry_id 4 "198,18,1,4" 32)" ] &&
		[ "$(counter rule_expired)" -gt "$x0" ]; then
		t_ok "$v: past its expires_at $C4C connects while edged is stopped: the kernel skipped the entry still in the map (rule_expired $x0 -> $(counter rule_expired))"
	else
		t_fail "$v: expiry in the kernel" "$C4C $(reach $C4C $S4 && echo connects || echo dropped), entry '$(entry_id 4 "198,18,1,4" 32)', rule_expired $x0 -> $(counter rule_expired)"
	fi
	if blocked $C4D $S4 && blocked $C6A $S6; then
		t_ok "$v: meanwhile the 'infinity' and the 584-year rules still drop"
	else
		t_fail "$v: rules far ahead expired" "$C4D (infinity) $(reach $C4D $S4 && echo connects || echo dropped), $C6A (584 y) $(reach $C6A $S6 && echo connects || echo dropped)"
	fi
	kill -CONT "$EPID"
	unrule "$id" "$id2" "$id3"
	wait_reach $C4D $S4
	wait_reach $C6A $S6

	# 6. a block and an allow row on one prefix (a database not migrated
	# to 0002, whose unique index refuses the second): block wins,
	# whatever order the rows come in
	pg_sql "DROP INDEX ip_rules_global_cidr" >/dev/null
	id=$(rule $C4A/32 allow)
	id2=$(rule $C4A/32 block)
	id3=$(rule $C6A/128 block)
	pg_sql "INSERT INTO ip_rules (cidr, action) VALUES ('$C6A/128', 'allow')" >/dev/null
	if synced && blocked $C4A $S4 && blocked $C6A $S6 && reach $C4B $S4; then
		t_ok "$v: a block and an allow row on one prefix: block wins (either order)"
	else
		t_fail "$v: two rows on one prefix" "$C4A $(reach $C4A $S4 && echo connects || echo dropped), $C6A $(reach $C6A $S6 && echo connects || echo dropped)"
	fi
	pg_sql "DELETE FROM ip_rules WHERE id <> $id2;
		CREATE UNIQUE INDEX ip_rules_global_cidr ON ip_rules (cidr)
		WHERE project_id IS NULL" >/dev/null

	# 7. edgectl's own rule on the database's prefix wins, and survives
	# the database rule's DELETE; when the host's goes, the database's
	# comes back
	if ! synced || ! blocked $C4A $S4; then
		t_fail "$v: the database's block before the host's rule" "$C4A connects"
	fi
	ctl ip block $C4A/32 --comment "host's own" >/dev/null
	eid=$(entry_id 4 "$K4A" 32)
	unrule "$id2"
	if synced && [ -n "$eid" ] && [ "$eid" -lt 8192 ] && blocked $C4A $S4 &&
		[ "$(entry_id 4 "$K4A" 32)" = "$eid" ]; then
		t_ok "$v: edgectl ip block on the database's prefix takes it (id $eid) and survives the database rule's DELETE"
	else
		t_fail "$v: the host's rule after the database's DELETE" "entry '$eid' -> '$(entry_id 4 "$K4A" 32)', $C4A $(reach $C4A $S4 && echo connects || echo dropped)"
	fi
	ctl ip del $C4A/32 >/dev/null
	if wait_reach $C4A $S4; then
		t_ok "$v: edgectl ip del: $C4A connects"
	else
		t_fail "$v: edgectl ip del" "$C4A dropped"
	fi
	id=$(rule $C4A/32 block)
	wait_blocked $C4A $S4
	ctl ip allow $C4A/32 >/dev/null
	# a change of the database's while the host's rule holds the prefix:
	# the set is written again, around the host's rule
	id3=$(rule $C4D/32 block)
	if synced && reach $C4A $S4 && [ "$(entry_id 4 "$K4A" 32)" -lt 8192 ] &&
		for ((i = 0; i < 40; i++)); do
			[ "$(db xdp_shadowed)" = 1 ] && break
			sleep 0.05
		done && [ "$(db xdp_shadowed)" = 1 ]; then
		t_ok "$v: the host's allow on the database's blocked prefix wins, over a change of the database's too (status: 1 shadowed)"
	else
		t_fail "$v: the host's allow" "$C4A $(reach $C4A $S4 && echo connects || echo dropped), entry '$(entry_id 4 "$K4A" 32)', shadowed $(db xdp_shadowed)"
	fi
	unrule "$id3"
	ctl ip del $C4A/32 >/dev/null
	if wait_blocked $C4A $S4 3 && [ "$(entry_id 4 "$K4A" 32)" -ge 8192 ]; then
		t_ok "$v: the host's rule deleted: the database's block is back ${WAITED} ms later, no change in the database needed"
	else
		t_fail "$v: the database's rule after the host's went" "$C4A connects; entry '$(entry_id 4 "$K4A" 32)'"
	fi

	# 8. a row that would cut this host off from its database (a block
	# covering the server's address, 127.0.0.1 here) is refused and
	# counted; the rows beside it apply
	pg_sql "BEGIN;
		INSERT INTO ip_rules (cidr, action) VALUES ('0.0.0.0/0', 'block');
		INSERT INTO ip_rules (cidr, action) VALUES ('$C4C/32', 'block');
		COMMIT" >/dev/null
	if wait_blocked $C4C $S4 && reach $C4B $S4 && blocked $C4A $S4 &&
		for ((i = 0; i < 40; i++)); do
			[ "$(metric edge_db_xdp_refused)" = 1 ] && break
			sleep 0.05
		done && [ "$(metric edge_db_xdp_refused)" = 1 ] &&
		grep -q "database: ip_rules row id [0-9]* (block 0.0.0.0/0): left out of the XDP maps: it would drop the database.s packets (127.0.0.1)" "$EDGED_LOG" &&
		[ "$(db state)" = up ]; then
		t_ok "$v: block 0.0.0.0/0 (the database's own address) refused: $C4B connects, edge_db_xdp_refused 1, logged; $C4C/32 beside it drops"
	else
		t_fail "$v: a rule cutting off the database" "$C4B $(reach $C4B $S4 && echo connects || echo dropped), $C4C $(reach $C4C $S4 && echo connects || echo dropped), refused $(metric edge_db_xdp_refused), $(grep -m1 'ip_rules row' "$EDGED_LOG")"
	fi
	pg_sql "DELETE FROM ip_rules WHERE cidr = '0.0.0.0/0'" >/dev/null

	# 9. detach and attach again: the database's rules in the new maps
	ctl detach "$VS" >/dev/null
	if ! wait_reach $C4A $S4; then
		t_fail "$v: detached: $C4A connects" "dropped"
	fi
	ctl attach "$VS" >/dev/null
	if wait_blocked $C4A $S4 5 && wait_blocked $C4C $S4 1 && reach $C4B $S4 &&
		[ "$(db xdp_reopens)" -ge 1 ]; then
		t_ok "$v: detach and attach: the database's rules are back in the new maps ${WAITED} ms after attach (status: reopened $(db xdp_reopens))"
	else
		t_fail "$v: attach again" "$C4A $(reach $C4A $S4 && echo connects || echo dropped), attached $(db xdp_attached), reopens $(db xdp_reopens)"
	fi

	# 10. edged's sessions killed again and again (a snapshot after each
	# reconnect) while both sources are probed without pause: the blocked
	# one's datagrams (one a millisecond) never answered and each counted
	# by its rule, the allowed one's connections all served
	local ms=$((4000 * SLOW)) snaps kills=0 end st rc
	synced
	eid=$(entry_id 4 "$K4A" 32)
	h0=$(hits "$eid")
	snaps=$(metric edge_db_snapshots_total)
	nsenter --net="/run/netns/$CLI" "$CLIENT" stream udp $C4A $S4 $PORT $ms >"$T_TMP/s-blocked" 2>&1 &
	local p1=$!
	PROBE_TIMEOUT_MS=2000 nsenter --net="/run/netns/$CLI" "$CLIENT" stream tcp $C4B $S4 $PORT $ms >"$T_TMP/s-allowed" 2>&1 &
	local p2=$!
	t0=$SECONDS
	while kill -0 $p1 2>/dev/null && [ $((SECONDS - t0)) -lt $((ms / 1000 - 1)) ]; do
		[ "$(pg_val "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'edged'")" -gt 0 ] &&
			kills=$((kills + 1))
		# until it has its snapshot again: the state and the count of
		# one status (from two, an "up" read before edged saw the kill
		# and a count read after let the next kill cut the snapshot
		# short: one snapshot fewer than kills)
		end=$((SECONDS + 2 * SLOW))
		while [ $SECONDS -lt $end ]; do
			read -r st rc < <("$EDGECTL" status --json | jq -r '.daemon.status.database | "\(.state) \(.reconnects)"')
			[ "$st" = up ] && [ "${rc:-0}" -ge "$kills" ] && break
			sleep 0.02
		done
	done
	wait $p1 $p2
	local sent ans tries fail
	sent=$(sed -n 's/.*sent=\([0-9]*\).*/\1/p' "$T_TMP/s-blocked")
	ans=$(sed -n 's/.*answered=\([0-9]*\).*/\1/p' "$T_TMP/s-blocked")
	tries=$(sed -n 's/.*tries=\([0-9]*\).*/\1/p' "$T_TMP/s-allowed")
	fail=$(sed -n 's/.*fail=\([0-9]*\).*/\1/p' "$T_TMP/s-allowed")
	# the edge_db_* series are refreshed every second, and the last
	# kill's snapshot may still be on its way: up to 10 s for it
	sleep 1.1
	local i
	for ((i = 0; i < 100; i++)); do
		[ "$(metric edge_db_snapshots_total)" -ge $((snaps + kills)) ] && break
		sleep 0.1
	done
	if [ "${ans:-x}" = 0 ] && [ "${fail:-x}" = 0 ] && [ "${sent:-0}" -gt 100 ] &&
		[ "${tries:-0}" -gt 10 ] && [ "$kills" -ge 2 ] &&
		[ $(($(hits "$eid") - h0)) -ge "$sent" ] &&
		[ "$(metric edge_db_snapshots_total)" -ge $((snaps + kills)) ]; then
		t_ok "$v: $kills sessions killed, each followed by a snapshot, while probing: $sent datagrams from $C4A, none answered, its rule hit $(($(hits "$eid") - h0)) times; $tries connections from $C4B, none lost"
	else
		t_fail "$v: resnapshots under probing" "blocked: $(cat "$T_TMP/s-blocked"), allowed: $(cat "$T_TMP/s-allowed"), kills $kills, hits +$(($(hits "$eid") - h0)), snapshots $snaps -> $(metric edge_db_snapshots_total)"
	fi

	# 11. edge_hosts: this host's XDP counters and the rule's hits
	id=$(pg_val "SELECT id FROM ip_rules WHERE cidr = '$C4A/32'")
	h0=$(hits "$eid")
	for ((i = 0; i < 80; i++)); do
		out=$(pg_val "SELECT (rule_hits->>'$id')::bigint >= $h0 AND
			(xdp_counters->>'dropped_rule')::bigint >= $h0 AND database_up
			FROM edge_hosts WHERE name = '$HOST'")
		[ "$out" = t ] && break
		sleep 0.1
	done
	if [ "$out" = t ]; then
		t_ok "$v: edge_hosts: $(pg_val "SELECT 'rule_hits ' || rule_hits::text || ', dropped_rule ' || (xdp_counters->>'dropped_rule') FROM edge_hosts WHERE name = '$HOST'")"
	else
		t_fail "$v: edge_hosts" "$(pg_val "SELECT rule_hits, xdp_counters FROM edge_hosts") (rule $id, hits $h0)"
	fi

	edged_stop 5
	edged_sanitizers_clean "$v: sanitizers clean" && t_ok "$v: sanitizers clean"
	# the next run starts with no rule in the database, and this run's
	# still in the maps
	pg_sql "TRUNCATE ip_rules, edge_hosts, edge_change_log" >/dev/null
}

pg_begin "$P_PG"
if ! "$EDGECTL" --pg "$PG_CONNINFO" db migrate >"$T_TMP/schema.log" 2>&1; then
	t_fail "schema" "$(tail -3 "$T_TMP/schema.log")"
	t_exit
	exit
fi
chmod 755 "$T_TMP"
if ! setup_net; then
	t_fail "namespace setup" "$(cat "$T_TMP/server.log" 2>/dev/null)"
	t_exit
	exit
fi
t_cleanup_add "t_in '$SRV' '$EDGECTL' detach '$VS'"
if ! ctl attach "$VS" >"$T_TMP/attach.log" 2>&1; then
	t_fail "attach" "$(cat "$T_TMP/attach.log")"
	t_exit
	exit
fi
t_ok "namespaces, server, PostgreSQL, edge attached to $VS"
run_suite "$EDGED" edged
if [ -n "${EDGE_VMTEST:-}" ]; then
	t_skip "asan: edged" "in a vmtest guest (the host runs it)"
elif edged_asan; then
	run_suite "$EDGED_ASAN" asan
fi

# an unprivileged edged started before edge is attached cannot open the
# maps: it says so once, and a restart (opening them while root) puts the
# database's rules in
unpriv_case() {
	local id look=1
	# whether nobody may look pins up at all (systemd mounts /sys/fs/bpf
	# 0700, as the VMs do: then edged cannot tell, and says nothing)
	setpriv --reuid=nobody --regid=nogroup --clear-groups \
		test -x "$(dirname "$EDGE_PIN_DIR")" 2>/dev/null || look=0
	t_in "$SRV" "$EDGECTL" detach "$VS" >/dev/null 2>&1
	pg_sql "DELETE FROM ip_rules" >/dev/null
	id=$(pg_val "INSERT INTO ip_rules (cidr, action) VALUES ('$C4A/32', 'block') RETURNING id")
	write_conf unpriv
	sed -i 's/^user = .*/user = "nobody";/' "$T_TMP/edge.conf"
	edged_start "$EDGED" "$T_TMP/edge.conf" -v
	ctl attach "$VS" >/dev/null
	local i
	for ((i = 0; i < 50; i++)); do
		grep -q "cannot open the XDP maps in $EDGE_PIN_DIR" "$EDGED_LOG" && break
		sleep 0.1
	done
	if [ "$look" = 0 ]; then
		t_skip "as nobody, attached after edged started" "nobody may not search the bpffs mount here"
	elif grep -q "cannot open the XDP maps in $EDGE_PIN_DIR" "$EDGED_LOG" &&
		[ "$(grep -c 'cannot open the XDP maps' "$EDGED_LOG")" = 1 ]; then
		t_ok "as nobody, attached after edged started: $(grep -m1 -o 'cannot open the XDP maps.*' "$EDGED_LOG")"
	else
		t_fail "as nobody, attached after edged started" "$(grep -m2 'database' "$EDGED_LOG")"
	fi
	edged_stop 5
	edged_start "$EDGED" "$T_TMP/edge.conf" -v
	if wait_blocked $C4A $S4 5 && reach $C4B $S4; then
		t_ok "restarted as nobody: the database's rule $id in the maps, $C4A dropped ($WAITED ms)"
	else
		t_fail "restarted as nobody" "$(entry_id 4 "$K4A" 32) $(grep -m2 'database' "$EDGED_LOG")"
	fi
	# detached and attached again: it sees the pins replaced (their
	# inodes) and says that it cannot follow them — where it may look
	# them up at all (systemd mounts /sys/fs/bpf 0700, as the VMs do)
	if [ "$look" = 0 ]; then
		t_skip "as nobody, detached and attached again" "nobody may not search the bpffs mount here"
		edged_stop 5
		return
	fi
	ctl detach "$VS" >/dev/null
	ctl attach "$VS" >/dev/null
	for ((i = 0; i < 50; i++)); do
		grep -q "cannot open the XDP maps in $EDGE_PIN_DIR" "$EDGED_LOG" && break
		sleep 0.1
	done
	if grep -q "are not the ones edge has pinned any more" "$EDGED_LOG" &&
		grep -q "cannot open the XDP maps in $EDGE_PIN_DIR" "$EDGED_LOG"; then
		t_ok "as nobody, detached and attached again: the new pins seen, and said to need a restart"
	else
		t_fail "as nobody, detached and attached again" "$(grep 'database' "$EDGED_LOG" | tail -3)"
	fi
	edged_stop 5
}
if id nobody >/dev/null 2>&1; then
	unpriv_case
fi
t_exit
