#!/usr/bin/env bash
# tests/pg/test_pg_migrate.sh - edgectl db migrate and db status against a
# real PostgreSQL 15: a fresh database migrated (each migration once, in
# edge_schema with who applied it), again (nothing to do), two edgectl
# migrating at once (both succeed, each migration applied once: both wait
# on the advisory lock while a third session holds it), a database part
# way (only the missing migration applied), a migration that fails
# (rolled back whole, the file's line and the server's message), a schema
# newer than this edge refused by every command, db status and its JSON,
# and a database that is down: exit 1 with libpq's reason, and no
# password printed anywhere, whatever form the connection string has.
#
#   B=build bash tests/pg/test_pg_migrate.sh
#
# Needs root and PostgreSQL 15; skips otherwise.

# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/lib_pg.sh
. "$(dirname "$0")/../lib_pg.sh"
# shellcheck source=tests/pg/lib_pgtest.sh
. "$(dirname "$0")/lib_pgtest.sh"

pgt_begin
E=$EDGECTL
# what this build knows: the migrations' files (a number may be missing:
# one another change reserved, scripts/sql2c)
MIGS=$(find "$T_ROOT/userspace/pg/migrations" -name '[0-9][0-9][0-9][0-9]_*.sql' -printf '%f\n' | sed 's/\.sql$//' | sort)
VERSIONS=$(echo "$MIGS" | sed 's/_.*//; s/^0*//' | paste -sd ,)
NMIG=$(echo "$MIGS" | wc -l)
LATEST=${VERSIONS##*,}
# "0001_a, 0002_b ..." from the Nth migration on
pending_from() { echo "$MIGS" | tail -n +"$1" | paste -sd , | sed 's/,/, /g'; }
LOCK_KEY=7306078178991144961
HOST=$(hostname)

# ---- usage -------------------------------------------------------------
expect "db without --pg: usage error" 2 "db status: needs a database: --pg CONNINFO or EDGE_PG" "$E" db status
expect "db without subcommand" 2 "db: missing subcommand" "$E" --pg "$PGT_PG" db
expect "db unknown subcommand" 2 "db: unknown subcommand 'drop'" "$E" --pg "$PGT_PG" db drop
expect "db migrate extra argument" 2 "unexpected argument 'now'" "$E" --pg "$PGT_PG" db migrate now
expect "db status unknown option" 2 "db status: unknown option '--yaml'" "$E" --pg "$PGT_PG" db status --yaml
expect "--pg empty" 2 "--pg: empty connection string" "$E" --pg "" db status
expect "help shows --pg" 0 "--pg CONNINFO" "$E" help

# ---- an empty database --------------------------------------------------
pexpect "db status: no schema" 0 "schema:         none" db status
pexpect "db status: all pending" 0 "pending:        $(pending_from 1) (edgectl db migrate)" db status
pgt_run db status --json >"$T_TMP/st.json"
if [ "$(pgt_json "$T_TMP/st.json" schema_version)" = 0 ] &&
	[ "$(pgt_json "$T_TMP/st.json" state)" = none ] &&
	[ "$(pgt_json "$T_TMP/st.json" edge_schema_version)" = "$LATEST" ] &&
	python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); assert [p["version"] for p in d["pending"]] == [int(v) for v in sys.argv[2].split(",")]; assert d["hosts"] is None and d["change_version"] is None' "$T_TMP/st.json" "$VERSIONS"; then
	t_ok "db status --json: no schema, everything pending"
else
	t_fail "db status --json: no schema, everything pending" "$(tr '\n' ' ' <"$T_TMP/st.json")"
fi
pexpect "ip list before migrating" 1 "the database has no edge schema: run edgectl db migrate" ip list

# ---- migrate --------------------------------------------------------------
pexpect "db migrate" 0 "schema: version $LATEST, up to date" db migrate
if grep -q "^applied: 0001_control_plane$" "$T_TMP/out" && grep -q "^applied: 0002_ip_rules_unique$" "$T_TMP/out"; then
	t_ok "db migrate says what it applied"
else
	t_fail "db migrate says what it applied" "$(tr '\n' ' ' <"$T_TMP/out")"
fi
got=$(pg_val "SELECT string_agg(version || '=' || applied_by, ',' ORDER BY version) FROM edge_schema")
want=$(for v in ${VERSIONS//,/ }; do echo "$v=$HOST edgectl 0.1.0"; done | paste -sd ,)
if [ "$got" = "$want" ]; then
	t_ok "edge_schema: every version once, applied by host and edge version"
else
	t_fail "edge_schema: every version once, applied by host and edge version" "got '$got', want '$want'"
fi
if [ "$(pg_val "SELECT count(*) FROM pg_indexes WHERE indexname IN ('ip_rules_global_cidr', 'ip_rules_project_cidr')")" = 2 ]; then
	t_ok "migration 0002's indexes are there"
else
	t_fail "migration 0002's indexes are there"
fi
pexpect "db migrate again: nothing to do" 0 "nothing to apply" db migrate
if grep -q "^applied:" "$T_TMP/out"; then
	t_fail "db migrate again applies nothing" "$(tr '\n' ' ' <"$T_TMP/out")"
else
	t_ok "db migrate again applies nothing"
fi

# ---- db status after ----------------------------------------------------
# two transactions, two change versions
pg_sql "INSERT INTO projects (id) VALUES ('p1')" >/dev/null
pg_sql "INSERT INTO projects (id) VALUES ('p2')" >/dev/null
pg_sql "INSERT INTO edge_hosts (name, last_seen, applied_version) VALUES ('web-1', now(), 2), ('web-2', now() - interval '1 hour', 1)" >/dev/null
pexpect "db status: up to date" 0 "schema:         version $LATEST (this edge knows $LATEST: up to date)" db status
pexpect "db status: hosts" 0 "hosts:          2 (1 not seen for 30 s, 1 behind the change version)" db status
pexpect "db status: change version" 0 "change version: 2" db status
pgt_run db status --json >"$T_TMP/st.json"
if python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
assert d["schema_version"] == d["edge_schema_version"] == int(sys.argv[2]), d
assert d["state"] == "current" and d["pending"] == []
assert [a["version"] for a in d["applied"]] == [int(v) for v in sys.argv[3].split(",")]
assert d["applied"][0]["name"] == "control_plane" and d["applied"][0]["applied_by"].endswith("edgectl 0.1.0")
assert d["hosts"] == 2 and d["hosts_stale"] == 1 and d["hosts_behind"] == 1
assert d["change_version"] == 2 and d["change_seq"] == 2
assert "password" not in d["database"] and "127.0.0.1" in d["database"]' "$T_TMP/st.json" "$LATEST" "$VERSIONS" 2>"$T_TMP/py"; then
	t_ok "db status --json: schema, applied, hosts, change version"
else
	t_fail "db status --json: schema, applied, hosts, change version" "$(tail -1 "$T_TMP/py")"
fi
# a version taken by a transaction that rolled back
pg_sql "BEGIN; INSERT INTO projects (id) VALUES ('p3'); ROLLBACK" >/dev/null
pexpect "db status: the sequence beyond the change version" 0 "change version: 2 (sequence at 3" db status

# ---- two at once ------------------------------------------------------------
pg_sql "CREATE DATABASE edge_two" >/dev/null
PG2="$PGT_PG dbname=edge_two"
# a third session holds the lock, so both edgectl are certainly waiting
# on it together; it lets go after 3 s
psql -X -q -d "$PG_CONNINFO dbname=edge_two" -c "SELECT pg_advisory_lock($LOCK_KEY)" -c "SELECT pg_sleep(3)" \
	-c "SELECT pg_advisory_unlock($LOCK_KEY)" >/dev/null 2>&1 &
holder=$!
for ((i = 0; i < 100; i++)); do
	[ "$(pg_val "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted")" = 1 ] && break
	sleep 0.05
done
"$E" --pg "$PG2" db migrate >"$T_TMP/m1" 2>&1 &
m1=$!
"$E" --pg "$PG2" db migrate >"$T_TMP/m2" 2>&1 &
m2=$!
waiting=0
for ((i = 0; i < 100; i++)); do
	waiting=$(pg_val "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")
	[ "$waiting" = 2 ] && break
	sleep 0.05
done
wait "$m1"
rc1=$?
wait "$m2"
rc2=$?
wait "$holder"
pgt_keep "$T_TMP/m1"
pgt_keep "$T_TMP/m2"
if [ "$waiting" = 2 ]; then
	t_ok "two migrations waited on the advisory lock together"
else
	t_fail "two migrations waited on the advisory lock together" "$waiting waiting"
fi
if [ "$rc1" = 0 ] && [ "$rc2" = 0 ]; then
	t_ok "two migrations at once: both succeed"
else
	t_fail "two migrations at once: both succeed" "exit $rc1 and $rc2: $(cat "$T_TMP/m1" "$T_TMP/m2" | tr '\n' ' ')"
fi
applied=$(cat "$T_TMP/m1" "$T_TMP/m2" | grep -c '^applied:')
nothing=$(cat "$T_TMP/m1" "$T_TMP/m2" | grep -c 'nothing to apply')
versions=$(psql -X -q -t -A -d "$PG_CONNINFO dbname=edge_two" -c "SELECT string_agg(version::text, ',' ORDER BY version) FROM edge_schema")
if [ "$applied" = "$NMIG" ] && [ "$nothing" = 1 ] && [ "$versions" = "$VERSIONS" ]; then
	t_ok "two migrations at once: each migration applied once ($versions)"
else
	t_fail "two migrations at once: each migration applied once" "$applied applied lines, $nothing 'nothing', versions '$versions'"
fi

# ---- one connection kept open, as edged keeps its own -----------------------
# (edgectl's session ends when it exits, which frees any lock by itself)
PROBE=$B/tools/pgdb_probe
if [ -x "$PROBE" ]; then
	pg_sql "CREATE DATABASE edge_probe" >/dev/null
	"$PROBE" "$PGT_PG dbname=edge_probe" >"$T_TMP/probe" 2>&1
	pgt_keep "$T_TMP/probe"
	if [ "$(grep '^migrate' "$T_TMP/probe" | paste -sd ' ')" = "migrate 0 $NMIG migrate 0 0" ] &&
		grep -qx "locks 0" "$T_TMP/probe"; then
		t_ok "pgdb_migrate twice on one connection: applied, then nothing; no lock kept"
	else
		t_fail "pgdb_migrate twice on one connection: applied, then nothing; no lock kept" "$(tr '\n' '|' <"$T_TMP/probe")"
	fi
	if grep -qx "socket 1 10 5 3 30000" "$T_TMP/probe" && grep -qx "app pgdb-probe" "$T_TMP/probe"; then
		t_ok "pgdb_connect: keepalives (10 s idle, 5 s interval, 3 probes), TCP_USER_TIMEOUT 30 s, the application name"
	else
		t_fail "pgdb_connect: keepalives, TCP_USER_TIMEOUT, the application name" "$(tr '\n' '|' <"$T_TMP/probe")"
	fi
	"$PROBE" "$PGT_PG dbname=edge_probe keepalives_idle=33 tcp_user_timeout=0 application_name=mine" >"$T_TMP/probe" 2>&1
	if grep -qx "socket 1 33 5 3 0" "$T_TMP/probe" && grep -qx "app mine" "$T_TMP/probe"; then
		t_ok "pgdb_connect: what the connection string sets is kept"
	else
		t_fail "pgdb_connect: what the connection string sets is kept" "$(tr '\n' '|' <"$T_TMP/probe")"
	fi
	psql -X -q -d "$PG_CONNINFO dbname=edge_probe" -c "INSERT INTO edge_schema (version) VALUES (1000)" >/dev/null
	"$PROBE" "$PGT_PG dbname=edge_probe" >"$T_TMP/probe" 2>&1
	pgt_keep "$T_TMP/probe"
	if [ "$(grep -c '^migrate -71 0$' "$T_TMP/probe")" = 2 ] && grep -qx "locks 0" "$T_TMP/probe" &&
		grep -q "^error the database's schema is version 1000, newer than this edge ($LATEST): upgrade edge$" "$T_TMP/probe"; then
		t_ok "pgdb_migrate refusing a newer schema (-EPROTO) keeps no lock"
	else
		t_fail "pgdb_migrate refusing a newer schema (-EPROTO) keeps no lock" "$(tr '\n' '|' <"$T_TMP/probe")"
	fi
else
	t_skip "pgdb_migrate on one connection" "$PROBE not built"
fi

# ---- a database part way --------------------------------------------------
pg_sql "CREATE DATABASE edge_old" >/dev/null
OLD_CI="$PG_CONNINFO dbname=edge_old"
psql -X -q -v ON_ERROR_STOP=1 -d "$OLD_CI" -f "$T_ROOT/userspace/pg/migrations/0001_control_plane.sql" >/dev/null &&
	psql -X -q -d "$OLD_CI" -c "INSERT INTO edge_schema (version, applied_by) VALUES (1, 'by hand')" >/dev/null
PGOLD="$PGT_PG dbname=edge_old"
expect "db status: the rest pending" 0 "pending:        $(pending_from 2) (edgectl db migrate)" "$E" --pg "$PGOLD" db status
pgt_keep "$T_TMP/out"
expect "ip block on an old schema refused" 1 "the database's schema is version 1, older than this edge needs ($LATEST): run edgectl db migrate" \
	"$E" --pg "$PGOLD" ip block 10.0.0.0/8
expect "ip list reads an old schema" 0 "no rules in the database" "$E" --pg "$PGOLD" ip list
# recording a migration fails: the migration goes with it (one
# transaction)
psql -X -q -d "$OLD_CI" -c "CREATE FUNCTION no_record() RETURNS trigger LANGUAGE plpgsql AS \$\$ BEGIN RAISE EXCEPTION 'not today'; END \$\$" \
	-c "CREATE TRIGGER no_record BEFORE INSERT ON edge_schema FOR EACH ROW EXECUTE FUNCTION no_record()" >/dev/null
expect "recording fails: exit 1, the server's message" 1 "cannot record the migration in edge_schema: not today (SQLSTATE P0001)" "$E" --pg "$PGOLD" db migrate
pgt_keep "$T_TMP/out"
if [ "$(psql -X -q -t -A -d "$OLD_CI" -c "SELECT count(*) FROM pg_indexes WHERE indexname LIKE 'ip_rules_%_cidr'")" = 0 ]; then
	t_ok "recording fails: the migration rolled back with it"
else
	t_fail "recording fails: the migration rolled back with it"
fi
psql -X -q -d "$OLD_CI" -c "DROP TRIGGER no_record ON edge_schema" >/dev/null
expect "db migrate applies only what is missing" 0 "applied: 0002_ip_rules_unique" "$E" --pg "$PGOLD" db migrate
pgt_keep "$T_TMP/out"
if ! grep -q "0001" "$T_TMP/out" &&
	[ "$(psql -X -q -t -A -d "$OLD_CI" -c "SELECT string_agg(version || '=' || applied_by, ',' ORDER BY version) FROM edge_schema")" = "1=by hand,$(for v in $(echo "${VERSIONS#1,}" | tr , ' '); do echo "$v=$HOST edgectl 0.1.0"; done | paste -sd ,)" ]; then
	t_ok "the migration done by hand is kept, the others added"
else
	t_fail "the migration done by hand is kept, the others added" "$(tr '\n' ' ' <"$T_TMP/out")"
fi

# ---- a migration that fails --------------------------------------------------
pg_sql "CREATE DATABASE edge_bad" >/dev/null
BAD_CI="$PG_CONNINFO dbname=edge_bad"
psql -X -q -d "$BAD_CI" -c "CREATE TABLE projects (x integer)" >/dev/null
expect "a failing migration: exit 1, its name and the server's message" 1 \
	"migration 0001_control_plane failed: relation \"projects\" already exists (SQLSTATE 42P07)" \
	"$E" --pg "$PGT_PG dbname=edge_bad" db migrate
pgt_keep "$T_TMP/out"
# where the server says where (a position in the text), the file's line:
# the first statement creates edge_schema, and no schema is there for it
line=$(grep -n "^CREATE TABLE edge_schema" "$T_ROOT/userspace/pg/migrations/0001_control_plane.sql" | cut -d: -f1)
expect "a failing migration: the line of its file" 1 \
	"migration 0001_control_plane failed at line $line of its file: no schema has been selected to create in (SQLSTATE 3F000)" \
	"$E" --pg "$PGT_PG dbname=edge_bad options='-c search_path=nowhere'" db migrate
pgt_keep "$T_TMP/out"
if [ "$(psql -X -q -t -A -d "$BAD_CI" -c "SELECT to_regclass('edge_schema') IS NULL AND to_regclass('environments') IS NULL")" = t ]; then
	t_ok "a failing migration is rolled back whole"
else
	t_fail "a failing migration is rolled back whole"
fi

# ---- newer than this edge ---------------------------------------------------
NEWER=$((LATEST + 97))
pg_sql "INSERT INTO edge_schema (version, applied_by) VALUES ($NEWER, 'edge from the future')" >/dev/null
MSG="the database's schema is version $NEWER, newer than this edge ($LATEST): upgrade edge"
pexpect "db migrate refuses a newer schema" 1 "$MSG" db migrate
if [ "$(pg_val "SELECT count(*) FROM edge_schema")" = $((NMIG + 1)) ]; then
	t_ok "a newer schema is left as it is"
else
	t_fail "a newer schema is left as it is"
fi
pexpect "ip block refuses a newer schema" 1 "$MSG" ip block 10.0.0.0/8
pexpect "ip list refuses a newer schema" 1 "$MSG" ip list
pexpect "hosts refuses a newer schema" 1 "$MSG" hosts
pexpect "db status shows a newer schema" 0 "version $NEWER, newer than this edge ($LATEST): upgrade edge" db status
pg_sql "DELETE FROM edge_schema WHERE version = $NEWER" >/dev/null

# ---- edgectl status's line ---------------------------------------------------
pexpect "status: the database's line" 0 "database:   schema $LATEST (up to date), change version 2, 2 hosts (1 stale, 1 behind)" status
pgt_run status --json >"$T_TMP/st.json"
if [ "$(pgt_json "$T_TMP/st.json" database.reachable)" = True ] && [ "$(pgt_json "$T_TMP/st.json" database.hosts)" = 2 ]; then
	t_ok "status --json: database"
else
	t_fail "status --json: database" "$(pgt_json "$T_TMP/st.json" database)"
fi
expect "status without --pg: no database line" 0 "" "$E" status
if grep -q "^database:" "$T_TMP/out"; then
	t_fail "status without --pg has no database line"
else
	t_ok "status without --pg has no database line"
fi

# ---- the database down ----------------------------------------------------
pg_stop
pexpect "db status, database down: exit 1" 1 "cannot connect to PostgreSQL: connection to server at \"127.0.0.1\", port $PG_PORT failed: Connection refused" db status
pexpect "db migrate, database down" 1 "cannot connect to PostgreSQL" db migrate
pexpect "ip list, database down" 1 "cannot connect to PostgreSQL" ip list
pexpect "ip block, database down" 1 "cannot connect to PostgreSQL" ip block 10.0.0.0/8
pexpect "hosts, database down" 1 "cannot connect to PostgreSQL" hosts
pexpect "-v, database down" 1 "cannot connect to PostgreSQL" -v db status
pexpect "status, database down: still exit 0, says so" 0 "database:   unreachable (cannot connect to PostgreSQL" status
if [ "$(grep -c . "$T_TMP/out")" -gt 0 ] && ! grep -q $'\t' "$T_TMP/out"; then
	t_ok "libpq's message on one line"
else
	t_fail "libpq's message on one line"
fi
for ci in "postgresql://postgres:$PGT_SECRET@127.0.0.1:$PG_PORT/edge" \
	"host=127.0.0.1 port=$PG_PORT password='$PGT_SECRET x' dbname=edge" \
	"host=127.0.0.1 port=$PG_PORT sslpassword=$PGT_SECRET password=$PGT_SECRET"; do
	expect "database down, password in '${ci%%[:=]*}...': exit 1" 1 "cannot connect to PostgreSQL" "$E" --pg "$ci" db status
	pgt_keep "$T_TMP/out"
	expect "database down, the same from EDGE_PG" 1 "cannot connect to PostgreSQL" env EDGE_PG="$ci" "$E" ip list
	pgt_keep "$T_TMP/out"
done
# a string libpq cannot parse, the password's second half taken for a key
expect "a bad connection string: exit 1, libpq's reason" 1 "bad connection string: missing \"=\" after \"***\"" \
	"$E" --pg "host=127.0.0.1 password=${PGT_SECRET:0:6} ${PGT_SECRET:6}" db status
pgt_keep "$T_TMP/out"
if grep -qF -- "${PGT_SECRET:6}" "$T_TMP/out"; then
	t_fail "a bad connection string hides what it quotes" "$(cat "$T_TMP/out")"
else
	t_ok "a bad connection string hides what it quotes"
fi
pg_start
pexpect "the database back" 0 "up to date" db status

pgt_no_secret
t_exit
