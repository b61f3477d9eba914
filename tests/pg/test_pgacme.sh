#!/bin/bash
# test_pgacme.sh - the Check suite tests/pg/test_pgacme.c (pgacme: the ACME
# manager's database store; the sync's read of acme_challenges) against a
# real PostgreSQL 15 this test starts (tests/lib_pg.sh) and migrates
# (edgectl db migrate), normal and ASan/UBSan builds: one line per case.
# The suite stops and starts the server itself (EDGE_PG_STOP,
# EDGE_PG_START). No output may hold a key it saved.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/lib_pg.sh
. "$(dirname "$0")/../lib_pg.sh"
t_require_root
t_begin

P_PG=$((20000 + $$ % 20000))
pg_begin "$P_PG"
export EDGE_PG_CONNINFO="$PG_CONNINFO"
export EDGE_PG_STOP="runuser -u postgres -- '$PG_BIN/pg_ctl' -D '$PG_DIR/data' -w -t 30 -m fast stop >/dev/null 2>&1"
export EDGE_PG_START="runuser -u postgres -- '$PG_BIN/pg_ctl' -D '$PG_DIR/data' -w -t 30 -l '$PG_DIR/server.log' -o \"-p $PG_PORT -k '' -c listen_addresses=127.0.0.1 -c fsync=off\" start >/dev/null 2>&1"

if ! "$EDGECTL" --pg "$PG_CONNINFO" db migrate >"$T_TMP/migrate.txt" 2>&1; then
	t_fail "db migrate" "$(tail -3 "$T_TMP/migrate.txt")"
	t_exit
fi

for bin in "$B/tests/test_pgacme" "$B/asan/tests/test_pgacme"; do
	v=normal
	[[ $bin == */asan/* ]] && v=asan
	if [ ! -x "$bin" ]; then
		t_fail "pgacme ($v): built" "$bin missing (make)"
		continue
	fi
	# a fresh schema's tables for each build
	pg_sql "TRUNCATE acme_leases, acme_challenges; DELETE FROM certificates" >/dev/null
	# a line per case (CK_VERBOSE): "...:P:..." passed, ":F:"/":E:" not
	"$bin" >"$T_TMP/ck-$v.txt" 2>&1
	rc=$?
	while IFS= read -r line; do
		# FILE:LINE:P|F|E:TCASE:TEST:ITERATION: MESSAGE
		IFS=: read -r _ _ res _ name _ msg <<<"$line"
		case $res in
		P) t_ok "pgacme ($v): $name" ;;
		F | E) t_fail "pgacme ($v): $name" "$msg" ;;
		esac
	done < <(grep -E '^[^:]+:[0-9]+:[PFE]:' "$T_TMP/ck-$v.txt")
	if [ "$rc" -ne 0 ] && ! grep -q ':[FE]:' "$T_TMP/ck-$v.txt"; then
		t_fail "pgacme ($v): runs" "exit $rc: $(tail -3 "$T_TMP/ck-$v.txt")"
	elif grep -q "Sanitizer\|runtime error" "$T_TMP/ck-$v.txt"; then
		t_fail "pgacme ($v): sanitizers" "$(grep -m1 "Sanitizer\|runtime error" "$T_TMP/ck-$v.txt")"
	fi
	if grep -q "SECRET-KEY-MATERIAL" "$T_TMP/ck-$v.txt"; then
		t_fail "pgacme ($v): no key in the log" "$(grep -m1 SECRET-KEY-MATERIAL "$T_TMP/ck-$v.txt")"
	elif grep -q "certificate of s.example.com not saved" "$T_TMP/ck-$v.txt"; then
		t_ok "pgacme ($v): a failed save logged with its name, not its key"
	else
		t_fail "pgacme ($v): a failed save logged" "no line names s.example.com"
	fi
	# the server is up again for the next build
	pg_val "SELECT 1" >/dev/null 2>&1 || pg_start
done
t_exit
