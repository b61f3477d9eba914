#!/bin/bash
# test_edged_challenge_keys_pg.sh - the challenge's signing keys from the
# database (migration 0023, challenge_keys; docs/gates.md, "Keys")
# against a real PostgreSQL 15 this test starts (tests/lib_pg.sh), edged
# in database mode as the user nobody, an environment challenged always:
#   - no row: a key made at start signs (said), a pass of key A refused;
#   - key A inserted: edge signs its passes with A (checked with python's
#     HMAC), a pass made with A admitted, one of another key refused;
#   - key B inserted to sign an hour later: B verifies at once (a pass of
#     B admitted) while A signs; its time moved to 2 s ahead: once it has
#     come B signs and A still verifies, by edged's own timer;
#   - key C for later: C and B verify, A no longer;
#   - every row deleted: back to a key made at start, passes of B refused;
#   - keys of zeros or not hex refused by the CHECK; with the CHECK
#     dropped, a bad row beside a good one: the good one signs, the bad
#     logged and counted in edge_db_rows_skipped_total{table="challenge_keys"};
#     the same for signs_from 'infinity' and '-infinity'.
# Runs against build/edged and build/asan/edged. Needs root (the postgres
# user, edged as nobody).
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/lib_edged.sh
. "$(dirname "$0")/../lib_edged.sh"
# shellcheck source=tests/lib_pg.sh
. "$(dirname "$0")/../lib_pg.sh"
t_require_root
edged_begin curl psql openssl
edged_need_build
id nobody >/dev/null 2>&1 || {
	t_skip "challenge keys from the database" "no user nobody"
	t_exit
	exit
}

BASE=$(edged_ports 4)
P_EDGE=$BASE
P_ADMIN=$((BASE + 1))
P_BACK=$((BASE + 2))
P_PG=$((BASE + 3))
SOCK="$T_TMP/ctl/edged.sock"
mkdir -p "$T_TMP/ctl"
chmod 755 "$T_TMP" "$T_TMP/ctl"
chown nobody "$T_TMP/ctl"
CC="$TOOLS/challenge_check.py"
KA=$(openssl rand -hex 32)
KB=$(openssl rand -hex 32)
KC=$(openssl rand -hex 32)
KX=$(openssl rand -hex 32)
pg_begin "$P_PG"
if ! edged_backend "$P_BACK" /usr/bin/python3 "$TOOLS/echo_backend.py" "$P_BACK" "$T_TMP/backend.log"; then
	t_fail "backend starts"
	t_exit
	exit
fi

# with KEY: the status of GET / on c.test with a pass made with KEY
with() {
	local p
	p=$(/usr/bin/python3 "$CC" pass "$1" c-e 127.0.0.1 $(($(date +%s) + 3600)))
	curl -s -m 10 -o /dev/null -w '%{http_code}' -H "Host: c.test" -H "Cookie: edge_pass=$p" \
		"http://127.0.0.1:$P_EDGE/"
}

# signer KEY...: which of KEY... signed the pass edge gives now (0: none)
signer() {
	local p
	p=$(/usr/bin/python3 "$CC" issued "$P_EDGE" c.test)
	[ -n "$p" ] || {
		echo none
		return
	}
	/usr/bin/python3 "$CC" signer "$p" c-e 127.0.0.1 "$@"
}

SKIP='edge_db_rows_skipped_total{table="challenge_keys"}'

# wait_lines PATTERN N: 0 once $EDGED_LOG has N lines matching PATTERN (15 s)
wait_lines() {
	local i
	for ((i = 0; i < 300; i++)); do
		[ "$(grep -Ec -- "$1" "$EDGED_LOG")" -ge "$2" ] && return 0
		sleep 0.05
	done
	return 1
}

run_suite() { # BIN LABEL
	local bin=$1 v=$2 n0 s
	if [ "$(pg_val "SELECT to_regclass('projects') IS NOT NULL")" = t ]; then
		pg_sql "TRUNCATE projects CASCADE; TRUNCATE ip_rules, edge_hosts, edge_change_log, challenge_keys" >/dev/null
	fi
	mkdir -p "$T_TMP/snap-$v"
	chown nobody "$T_TMP/snap-$v"
	pg_edged_conf "$T_TMP/edge.conf" "$T_TMP/snap-$v/db.json"
	EDGED_LOG="$T_TMP/edged-$v.log"
	if ! edged_start "$bin" "$T_TMP/edge.conf" -v; then
		t_fail "$v: edged starts" "$(tail -5 "$EDGED_LOG")"
		return
	fi
	pg_wait_applied
	pg_sql "BEGIN; INSERT INTO projects (id, name) VALUES ('c', 'c');
		INSERT INTO environments (id, project_id, name, challenge_mode, challenge_difficulty)
		VALUES ('c-e', 'c', 'production', 'always', 8);
		INSERT INTO deployments (id, environment_id, active) VALUES ('c-d', 'c-e', true);
		INSERT INTO endpoints VALUES ('c-d', '127.0.0.1:$P_BACK');
		INSERT INTO domains (domain, environment_id) VALUES ('c.test', 'c-e'); COMMIT;" >/dev/null
	pg_wait_applied
	s=$(signer "$KA")
	if [ "$(with "$KA")" = 403 ] && [ "$s" = 0 ] &&
		grep -q "no challenge.key_file: challenges sign with the database's challenge_keys" "$EDGED_LOG"; then
		t_ok "$v: no challenge_keys row: a key made at start signs, a pass of another key refused"
	else
		t_fail "$v: no rows" "with A $(with "$KA"), signer $s"
	fi

	pg_sql "INSERT INTO challenge_keys (key_hex, signs_from) VALUES ('$KA', now() - interval '1 minute')" >/dev/null
	if edged_wait_log "challenge: challenge_keys id [0-9]* signs\$" && [ "$(with "$KA")" = 200 ] &&
		[ "$(with "$KX")" = 403 ] && [ "$(signer "$KA")" = 1 ]; then
		t_ok "$v: key A inserted: edge's passes signed with A, a pass of A admitted, another key's refused"
	else
		t_fail "$v: key A" "with A $(with "$KA"), X $(with "$KX"), signer $(signer "$KA") $(grep challenge: "$EDGED_LOG" | tail -3)"
	fi

	pg_sql "INSERT INTO challenge_keys (key_hex, signs_from) VALUES ('$KB', now() + interval '1 hour')" >/dev/null
	if edged_wait_log "challenge_keys id [0-9]* signs, id [0-9]* verifies too" && [ "$(with "$KB")" = 200 ] &&
		[ "$(with "$KA")" = 200 ] && [ "$(signer "$KA" "$KB")" = 1 ]; then
		t_ok "$v: key B to sign later: it verifies at once while A signs"
	else
		t_fail "$v: key B pending" "with B $(with "$KB"), A $(with "$KA"), signer $(signer "$KA" "$KB")"
	fi
	# B's time brought to 2 s from now: the switch is edged's own timer's
	pg_sql "UPDATE challenge_keys SET signs_from = now() + interval '2 seconds' WHERE key_hex = '$KB'" >/dev/null
	wait_lines "challenge_keys id [0-9]* signs, id [0-9]* verifies too" 2
	s=$(signer "$KA" "$KB")
	if [ "$s" = 2 ] && [ "$(with "$KA")" = 200 ] && [ "$(with "$KB")" = 200 ] &&
		[ "$(grep -c "challenge_keys id [0-9]* signs, id [0-9]* verifies too" "$EDGED_LOG")" = 2 ]; then
		t_ok "$v: B's time come: B signs, A still verifies, with no change in the database at that time"
	else
		t_fail "$v: key B signs" "signer $s, with A $(with "$KA"), B $(with "$KB") $(grep challenge: "$EDGED_LOG" | tail -3)"
	fi

	pg_sql "INSERT INTO challenge_keys (key_hex, signs_from) VALUES ('$KC', now() + interval '1 hour')" >/dev/null
	if wait_lines "challenge_keys id [0-9]* signs, id [0-9]* verifies too" 3 && [ "$(with "$KC")" = 200 ] &&
		[ "$(with "$KB")" = 200 ] && [ "$(with "$KA")" = 403 ]; then
		t_ok "$v: key C for later: C and B verify, A no longer (two keys)"
	else
		t_fail "$v: key C" "with C $(with "$KC"), B $(with "$KB"), A $(with "$KA")"
	fi

	pg_sql "DELETE FROM challenge_keys" >/dev/null
	if edged_wait_log "no challenge_keys row signs" && [ "$(with "$KB")" = 403 ] && [ "$(signer "$KA" "$KB" "$KC")" = 0 ]; then
		t_ok "$v: every row deleted: a key made at start signs again, B's passes refused"
	else
		t_fail "$v: deleted" "with B $(with "$KB")"
	fi

	if ! pg_sql "INSERT INTO challenge_keys (key_hex) VALUES ('$(printf '0%.0s' {1..64})')" >/dev/null 2>&1 &&
		! pg_sql "INSERT INTO challenge_keys (key_hex) VALUES ('${KA^^}')" >/dev/null 2>&1 &&
		! pg_sql "INSERT INTO challenge_keys (key_hex) VALUES ('abc')" >/dev/null 2>&1; then
		t_ok "$v: keys of zeros, in upper case or short: refused by the CHECK"
	else
		t_fail "$v: challenge_keys CHECK"
	fi
	n0=$(edged_metric "$SKIP")
	pg_sql "ALTER TABLE challenge_keys DROP CONSTRAINT IF EXISTS challenge_keys_key_hex_check;
		BEGIN; INSERT INTO challenge_keys (key_hex, signs_from) VALUES
		('$(printf 'z%.0s' {1..64})', now() - interval '1 minute'), ('$KC', now() - interval '2 minutes'); COMMIT;" >/dev/null
	if edged_wait_log "database: challenge_keys row [0-9]*: .*skipped" && edged_wait_metric "$SKIP" $((n0 + 1)) &&
		[ "$(with "$KC")" = 200 ] && [ "$(signer "$KC")" = 1 ]; then
		t_ok "$v: a bad row (the CHECK dropped) beside a good one: the good one signs, the bad logged and counted"
	else
		t_fail "$v: bad row" "skipped $n0 -> $(edged_metric "$SKIP"), with C $(with "$KC") $(grep challenge_keys "$EDGED_LOG" | tail -2)"
	fi
	pg_sql "DELETE FROM challenge_keys; ALTER TABLE challenge_keys ADD CONSTRAINT challenge_keys_key_hex_check
		CHECK (key_hex ~ '^[0-9a-f]{64}\$' AND key_hex <> repeat('0', 64));" >/dev/null
	# a time of 'infinity' (no bigint holds it): that row alone is left out
	if ! pg_sql "INSERT INTO challenge_keys (key_hex, signs_from) VALUES ('$KB', 'infinity')" >/dev/null 2>&1; then
		t_ok "$v: signs_from 'infinity' refused by the CHECK"
	else
		t_fail "$v: signs_from CHECK"
	fi
	n0=$(edged_metric "$SKIP")
	pg_sql "ALTER TABLE challenge_keys DROP CONSTRAINT IF EXISTS challenge_keys_signs_from_check;
		BEGIN; INSERT INTO challenge_keys (key_hex, signs_from) VALUES ('$KB', 'infinity'),
		('$KA', '-infinity'), ('$KC', now() - interval '1 minute'); COMMIT;" >/dev/null
	if wait_lines "database: challenge_keys row [0-9]*: signs_from is not a finite time: skipped" 2 &&
		edged_wait_metric "$SKIP" $((n0 + 2)) && [ "$(signer "$KC")" = 1 ] && [ "$(with "$KB")" = 403 ]; then
		t_ok "$v: rows of 'infinity' and '-infinity' (the CHECK dropped) beside a good one: left out, counted; the good one signs"
	else
		t_fail "$v: infinity rows" "skipped $n0 -> $(edged_metric "$SKIP"), signer $(signer "$KC") $(grep challenge_keys "$EDGED_LOG" | tail -3)"
	fi
	pg_sql "DELETE FROM challenge_keys; ALTER TABLE challenge_keys ADD CONSTRAINT challenge_keys_signs_from_check
		CHECK (isfinite(signs_from));" >/dev/null

	edged_stop 10
	edged_sanitizers_clean "$v: no sanitizer report" && t_ok "$v: no sanitizer report"
}

run_suite "$EDGED" normal
if edged_asan; then
	run_suite "$EDGED_ASAN" asan
fi
t_exit
