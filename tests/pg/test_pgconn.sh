#!/bin/bash
# test_pgconn.sh - the Check suite tests/pg/test_pgconn.c (pgconn: libpq's
# asynchronous API on a libevent loop) against a real PostgreSQL 15 this
# test starts (tests/lib_pg.sh), normal and ASan/UBSan builds: one line
# per case.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/lib_pg.sh
. "$(dirname "$0")/../lib_pg.sh"
t_require_root
t_begin

P_PG=$((20000 + $$ % 20000))
pg_begin "$P_PG"
export EDGE_PG_CONNINFO="$PG_CONNINFO"

for bin in "$B/tests/test_pgconn" "$B/asan/tests/test_pgconn"; do
	v=normal
	[[ $bin == */asan/* ]] && v=asan
	if [ ! -x "$bin" ]; then
		t_fail "pgconn ($v): built" "$bin missing (make)"
		continue
	fi
	# a line per case (CK_VERBOSE): "...:P:..." passed, ":F:"/":E:" not
	"$bin" >"$T_TMP/ck-$v.txt" 2>&1
	rc=$?
	while IFS= read -r line; do
		# FILE:LINE:P|F|E:TCASE:TEST:ITERATION: MESSAGE
		IFS=: read -r _ _ res _ name _ msg <<<"$line"
		case $res in
		P) t_ok "pgconn ($v): $name" ;;
		F | E) t_fail "pgconn ($v): $name" "$msg" ;;
		esac
	done <"$T_TMP/ck-$v.txt"
	if [ "$rc" -ne 0 ] && ! grep -q ':[FE]:' "$T_TMP/ck-$v.txt"; then
		t_fail "pgconn ($v): runs" "exit $rc: $(tail -3 "$T_TMP/ck-$v.txt")"
	elif grep -q "Sanitizer\|runtime error" "$T_TMP/ck-$v.txt"; then
		t_fail "pgconn ($v): sanitizers" "$(grep -m1 "Sanitizer\|runtime error" "$T_TMP/ck-$v.txt")"
	fi
done
t_exit
