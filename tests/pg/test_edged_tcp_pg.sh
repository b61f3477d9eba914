#!/bin/bash
# test_edged_tcp_pg.sh - a TCP route (tcp_routes) to an environment that
# only the database has, against a real PostgreSQL 15 this test starts
# (tests/lib_pg.sh): closed while no source has the environment; routed
# once a transaction inserts it (by NOTIFY); a deployment switched to
# another endpoint applies to the next connection while a tunnel opened
# before goes on with the old one; a disabled project and a deleted one
# close connections again, counted. Runs against build/edged and
# build/asan/edged. Needs root (the postgres user).
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/lib_edged.sh
. "$(dirname "$0")/../lib_edged.sh"
# shellcheck source=tests/lib_pg.sh
. "$(dirname "$0")/../lib_pg.sh"
t_require_root
edged_begin curl python3 psql
edged_need_build

BASE=$(edged_ports 6)
P_EDGE=$BASE
P_ADMIN=$((BASE + 1))
T_DB=$((BASE + 2)) # the TCP route, to dbt-prod
P_A=$((BASE + 3))
P_B=$((BASE + 4))
P_PG=$((BASE + 5))
SOCK="$T_TMP/edged.sock"
pg_begin "$P_PG"
chmod 755 "$T_TMP"

write_conf() { # FILE
	{
		edged_conf_head "$P_ADMIN" "$SOCK"
		cat <<CONF
pin_dir = "/sys/fs/bpf/edge-test-$T_ID-none";
pg = "$PG_CONNINFO";
pg_snapshot = "";
tcp_routes = ( { listen = "127.0.0.1:$T_DB"; environment = "dbt-prod"; } );
CONF
	} >"$1"
}

metric() {
	curl -s -m 5 "http://127.0.0.1:$P_ADMIN/metrics" | awk -v k="$1" '$1 == k { v = $2 } END { print v + 0 }'
}

# reached: the endpoint a connection to the TCP route reaches ("None":
# closed before the backend's banner)
reached() {
	python3 "$TOOLS/tcp_client.py" who "$T_DB" 1 2>/dev/null |
		python3 -c 'import json,sys; print(json.load(sys.stdin)["ports"][0])'
}

# wait_reached WANT: 0 once a connection reaches WANT (5 s at most)
wait_reached() {
	local i
	for ((i = 0; i < 250; i++)); do
		[ "$(reached)" = "$1" ] && return 0
		sleep 0.02
	done
	return 1
}

run_suite() { # BIN LABEL
	local bin=$1 v=$2 t0 t1 out hold
	: >"$T_TMP/hold.out"

	if [ "$(pg_val "SELECT to_regclass('projects') IS NOT NULL")" = t ]; then
		pg_sql "TRUNCATE projects CASCADE; TRUNCATE ip_rules, edge_hosts, edge_change_log" >/dev/null
	fi
	write_conf "$T_TMP/edge.conf"
	EDGED_LOG="$T_TMP/edged-$v.log"
	if ! edged_start "$bin" "$T_TMP/edge.conf" -v || ! edged_wait_port "$T_DB"; then
		t_fail "$v: edged starts" "$(tail -5 "$EDGED_LOG")"
		return
	fi

	# 1. no source has the environment yet: closed, counted
	if [ "$(reached)" = None ] && [ "$(metric 'edge_requests_total{outcome="environment_not_found"}')" -ge 1 ]; then
		t_ok "$v: a TCP route to an environment in no source: closed, counted"
	else
		t_fail "$v: environment not found" "$(reached)"
	fi

	# 2. the database brings it
	pg_sql "BEGIN;
		INSERT INTO projects (id, name) VALUES ('dbt', 'dbt');
		INSERT INTO environments (id, project_id, name) VALUES ('dbt-prod', 'dbt', 'production');
		INSERT INTO deployments (id, environment_id, active) VALUES ('dbt-d1', 'dbt-prod', true);
		INSERT INTO endpoints VALUES ('dbt-d1', '127.0.0.1:$P_A');
		INSERT INTO domains (domain, environment_id) VALUES ('dbt.test', 'dbt-prod');
		COMMIT;" >/dev/null
	t0=$(date +%s%N)
	if wait_reached "$P_A" && t1=$(date +%s%N); then
		t_ok "$v: the environment inserted in the database: the TCP route reaches its endpoint $(((t1 - t0) / 1000000)) ms after the COMMIT"
	else
		t_fail "$v: environment from the database" "$(reached) $(tail -3 "$EDGED_LOG")"
	fi
	out=$("$EDGECTL" --socket "$SOCK" routes 2>&1)
	if grep -q "^127.0.0.1:$T_DB  *file  *dbt  *dbt-prod  *dbt-d1  *0  *127.0.0.1:$P_A  (environment from the database)$" <<<"$out"; then
		t_ok "$v: edgectl routes: the TCP route's environment from the database"
	else
		t_fail "$v: edgectl routes" "$out"
	fi

	# 3. a new deployment on another endpoint: the next connection goes
	# there, a tunnel opened before stays with the old one
	python3 - "$T_DB" >"$T_TMP/hold.out" 2>&1 <<'PY' &
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), 5)
b = b""
while not b.endswith(b"\n"):
    b += s.recv(100)
s.sendall(b"echo\n")
print(b.split()[1].decode(), flush=True)
time.sleep(1.5)
s.sendall(b"still")
print(s.recv(100).decode(), flush=True)
PY
	hold=$!
	edged_track "$hold"
	for ((t0 = 0; t0 < 100; t0++)); do
		[ -s "$T_TMP/hold.out" ] && break
		sleep 0.05
	done
	pg_sql "INSERT INTO deployments (id, environment_id) VALUES ('dbt-d2', 'dbt-prod');
		INSERT INTO endpoints VALUES ('dbt-d2', '127.0.0.1:$P_B');
		UPDATE deployments SET active = (id = 'dbt-d2') WHERE environment_id = 'dbt-prod'" >/dev/null
	if wait_reached "$P_B" && wait "$hold" &&
		[ "$(tr '\n' ' ' <"$T_TMP/hold.out")" = "$P_A still " ]; then
		t_ok "$v: a deployment switched in the database: new connections to the new endpoint, an open tunnel goes on"
	else
		t_fail "$v: deployment switch" "reached $(reached), the open tunnel: $(cat "$T_TMP/hold.out")"
	fi

	# 4. a disabled project, then a deleted one: closed again, counted
	pg_sql "UPDATE projects SET enabled = false WHERE id = 'dbt'" >/dev/null
	if wait_reached None && [ "$(metric 'edge_requests_total{outcome="project_disabled"}')" -ge 1 ]; then
		t_ok "$v: the project disabled in the database: connections closed, counted"
	else
		t_fail "$v: disabled project" "$(reached)"
	fi
	pg_sql "DELETE FROM projects WHERE id = 'dbt'" >/dev/null
	out=$(metric 'edge_requests_total{outcome="environment_not_found"}')
	sleep 0.5
	if [ "$(reached)" = None ] &&
		[ "$(metric 'edge_requests_total{outcome="environment_not_found"}')" -gt "$out" ]; then
		t_ok "$v: the project deleted from the database: environment_not_found again"
	else
		t_fail "$v: deleted project" "$(reached)"
	fi

	edged_stop 5
	edged_sanitizers_clean "$v: sanitizers clean" && t_ok "$v: no sanitizer report"
	# the rows of tunnels that ran say which mover moved their bytes (splice is
	# auto: these short connections are copied, or spliced when the
	# kernel took one)
	out=$(pg_val "SELECT count(*) FILTER (WHERE mover IN ('copy', 'sockmap', 'copy+sockmap')) || ' ' || count(*) FROM request_events WHERE kind = 'tunnel' AND outcome = 'tunnel'" 2>&1)
	if [ "${out% *}" = "${out#* }" ] && [ "${out% *}" -gt 0 ]; then
		t_ok "$v: every tunnel's row in request_events names its mover (${out% *} rows)"
	else
		t_fail "$v: the tunnels' rows name their mover" "$out: $(pg_val "SELECT mover, count(*) FROM request_events WHERE kind = 'tunnel' GROUP BY 1" 2>&1)"
	fi
	pg_sql "DELETE FROM request_events" >/dev/null
}

for p in "$P_A" "$P_B"; do
	edged_backend "$p" python3 "$TOOLS/tcp_backend.py" "$p" "$T_TMP/backend.jsonl" ||
		t_fail "backend $p starts"
done
run_suite "$EDGED" edged
edged_asan && run_suite "$EDGED_ASAN" asan
t_exit
