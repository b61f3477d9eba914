# shellcheck shell=bash
# tests/pg/lib_pgtest.sh - what the PostgreSQL tests (tests/pg/test_*.sh)
# share, sourced after tests/lib.sh and tests/lib_pg.sh:
#
#   pgt_begin            # root or skip; t_begin; a private PostgreSQL 15
#                        # on a free port in 32000-32700 (pg_begin)
#   $PGT_PG              # its connection string with a password in it
#                        # (the server trusts: the password is only there
#                        # to prove it is never printed)
#   pexpect NAME RC FRAG edgectl-args...   # expect, with --pg "$PGT_PG",
#                        # every output kept for pgt_no_secret
#   pgt_no_secret        # a case: no output of the file held the password
#   pgt_listen CHANNEL...  # pg_listen in the background, once ready
#   pgt_listen_stop      # NOTIFY edge_test_stop, wait; lines in $PGT_NOTES

PGT_LISTEN=${PGT_LISTEN:-$B/tools/pg_listen}
PGT_PG=""
PGT_SECRET=""
PGT_LPID=""
PGT_NOTES=""

# pgt_port: print a port in 32000..32700 that no socket on the machine
# uses, chosen from the test's PID (T_ID) as edged_ports does.
pgt_port() {
	local used p try
	used=" $(ss -Htan 2>/dev/null | awk '{ n = split($4, a, ":"); print a[n] }' | sort -u | tr '\n' ' ') "
	for ((try = 0; try < 100; try++)); do
		p=$((32000 + (T_ID + try * 7919) % 701))
		[[ "$used" == *" $p "* ]] && continue
		echo "$p"
		return 0
	done
	echo 32000
}

pgt_begin() {
	t_require_root
	t_begin
	unset SSH_CONNECTION EDGE_PG
	if [ ! -x "$EDGECTL" ]; then
		t_fail "edgectl exists" "$EDGECTL not built"
		t_exit
		exit 1
	fi
	pg_begin "$(pgt_port)"
	PGT_SECRET="Pw-$T_ID-s3cr3t"
	PGT_PG="$PG_CONNINFO password=$PGT_SECRET"
	: >"$T_TMP/all.out"
}

# pexpect NAME RC FRAGMENT ARGS...: expect NAME RC FRAGMENT edgectl --pg
# "$PGT_PG" ARGS..., the output kept for pgt_no_secret.
pexpect() {
	local name=$1 rc=$2 frag=$3
	shift 3
	expect "$name" "$rc" "$frag" "$EDGECTL" --pg "$PGT_PG" "$@"
	cat "$T_TMP/out" >>"$T_TMP/all.out"
}

# pgt_run ARGS...: edgectl --pg "$PGT_PG" ARGS..., its output (both
# streams) on stdout and kept for pgt_no_secret; its exit status.
pgt_run() {
	local rc
	"$EDGECTL" --pg "$PGT_PG" "$@" >"$T_TMP/run.out" 2>&1
	rc=$?
	cat "$T_TMP/run.out" >>"$T_TMP/all.out"
	cat "$T_TMP/run.out"
	return $rc
}

# pgt_keep FILE: add FILE (another command's output) to what
# pgt_no_secret checks.
pgt_keep() { cat "$1" >>"$T_TMP/all.out"; }

pgt_no_secret() {
	if grep -qF -- "$PGT_SECRET" "$T_TMP/all.out"; then
		t_fail "no output holds the password" "$(grep -m2 -F -- "$PGT_SECRET" "$T_TMP/all.out")"
	elif [ ! -s "$T_TMP/all.out" ]; then
		t_fail "no output holds the password" "no output was kept"
	else
		t_ok "no output holds the password ($(wc -l <"$T_TMP/all.out") lines checked)"
	fi
}

# pgt_listen CHANNEL...: start pg_listen on the channels; 0 once it has
# said "ready" (within 10 s). Its lines go to $PGT_NOTES; it listens for
# up to 300 s (pgt_listen_stop ends it: a slow machine must not end it first).
pgt_listen() {
	local i
	PGT_NOTES="$T_TMP/notes.$RANDOM"
	"$PGT_LISTEN" "$PG_CONNINFO" 300 "$@" >"$PGT_NOTES" 2>&1 &
	PGT_LPID=$!
	t_cleanup_add "kill $PGT_LPID"
	for ((i = 0; i < 200; i++)); do
		grep -qx ready "$PGT_NOTES" && return 0
		kill -0 "$PGT_LPID" 2>/dev/null || return 1
		sleep 0.05
	done
	return 1
}

# pgt_listen_stop: end the listener (NOTIFY edge_test_stop, delivered
# after every notification committed before it) and wait for it; its
# status (0: it saw the stop). The "ready" line is removed from
# $PGT_NOTES.
pgt_listen_stop() {
	local rc
	pg_sql "NOTIFY edge_test_stop" >/dev/null
	wait "$PGT_LPID"
	rc=$?
	sed -i '/^ready$/d' "$PGT_NOTES"
	return $rc
}

# pgt_json FILE KEY[.KEY...]: one field of the JSON object in FILE,
# following dotted keys (Python's text: True, None, ...); empty when
# absent or unreadable.
pgt_json() {
	python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
for k in sys.argv[2].split("."):
    d = d.get(k, "") if isinstance(d, dict) else ""
print(d)' "$1" "$2" 2>/dev/null
}
