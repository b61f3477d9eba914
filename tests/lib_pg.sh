# shellcheck shell=bash
# tests/lib_pg.sh - a private PostgreSQL 15 for a test, sourced after
# tests/lib.sh (and tests/lib_edged.sh when the test runs edged):
#
#   pg_begin PORT        # skip the file (exit 77) without PostgreSQL;
#                        # initdb and start a server on 127.0.0.1:PORT
#                        # with database "edge"; stopped and removed at
#                        # exit, pass or fail
#   pg_sql 'SQL'         # run SQL in "edge" (psql, stops at an error)
#   pg_val 'SQL'         # print one value
#   pg_stop / pg_start   # stop (fast) and start the same server again
#
# PostgreSQL refuses to run as root: initdb and the server run as the
# "postgres" user in a directory of their own under /tmp (the test's
# T_TMP is root's). The server listens on TCP 127.0.0.1 only (no unix
# socket edged's user would need rights to), with fsync off: a test
# database need not survive a power cut. PG_CONNINFO is the libpq
# connection string for it.

PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}
PG_DIR=""
PG_PORT=""
PG_CONNINFO=""

# pg_as CMD...: run CMD as the postgres user
pg_as() { runuser -u postgres -- "$@"; }

pg_begin() {
	PG_PORT=$1
	if [ ! -x "$PG_BIN/initdb" ] || ! id postgres >/dev/null 2>&1; then
		t_skip "$(basename "$0")" "needs PostgreSQL 15 ($PG_BIN/initdb) and its postgres user"
		exit 77
	fi
	PG_DIR=$(mktemp -d /tmp/edge-pg.XXXXXX)
	chown postgres: "$PG_DIR"
	t_cleanup_add "pg_as '$PG_BIN/pg_ctl' -D '$PG_DIR/data' -m immediate stop; rm -rf '$PG_DIR'"
	if ! pg_as "$PG_BIN/initdb" -D "$PG_DIR/data" -A trust -U postgres \
		--no-sync -E UTF8 --locale=C >"$PG_DIR/initdb.log" 2>&1; then
		t_fail "PostgreSQL initdb" "$(tail -3 "$PG_DIR/initdb.log")"
		t_exit
		exit 1
	fi
	PG_CONNINFO="host=127.0.0.1 port=$PG_PORT dbname=edge user=postgres connect_timeout=5"
	pg_start || {
		t_fail "PostgreSQL starts" "$(tail -5 "$PG_DIR/server.log")"
		t_exit
		exit 1
	}
	if ! pg_as "$PG_BIN/psql" -X -q -h 127.0.0.1 -p "$PG_PORT" -U postgres \
		-d postgres -c 'CREATE DATABASE edge' >/dev/null 2>&1; then
		t_fail "PostgreSQL: CREATE DATABASE edge"
		t_exit
		exit 1
	fi
}

pg_start() {
	pg_as "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -w -t 30 -l "$PG_DIR/server.log" \
		-o "-p $PG_PORT -k '' -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=100" \
		start >/dev/null 2>&1
}

pg_stop() {
	pg_as "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -w -t 30 -m fast stop >/dev/null 2>&1
}

pg_sql() {
	psql -X -q -v ON_ERROR_STOP=1 -d "$PG_CONNINFO" -c "$1"
}

pg_val() {
	psql -X -q -t -A -v ON_ERROR_STOP=1 -d "$PG_CONNINFO" -c "$1"
}

# pg_edged_conf FILE SNAPSHOT: write FILE, edged's configuration in
# database mode (lib_edged.sh's head: $P_ADMIN, $SOCK, one worker, the
# user nobody; pins under a name of this test's own; the local snapshot
# at SNAPSHOT), readable by nobody
pg_edged_conf() {
	{
		edged_conf_head "$P_ADMIN" "$SOCK" 1 nobody
		cat <<CONF
pin_dir = "/sys/fs/bpf/edge-test-$T_ID-none";
pg = "$PG_CONNINFO";
pg_snapshot = "$2";
CONF
	} >"$1"
	chmod 644 "$1"
}

# pg_wait_applied: 0 once the edged answering on $SOCK (its control
# socket; $EDGECTL from lib_edged.sh) has applied the database's latest
# change, 5 s at most
pg_wait_applied() {
	local want i got
	want=$(pg_val "SELECT COALESCE(max(version), 0) FROM edge_change_log")
	for ((i = 0; i < 250; i++)); do
		"$EDGECTL" --socket "$SOCK" status --json >"$T_TMP/status.json" 2>/dev/null
		got=$(json_field "$T_TMP/status.json" daemon.status.database.applied_version 2>/dev/null)
		[ -n "$got" ] && [ "$got" -ge "$want" ] && return 0
		sleep 0.02
	done
	return 1
}
