#!/bin/bash
# test_edged_send_proxy_pg.sh - the database's PROXY protocol columns
# (migration 0015: deployments.send_proxy, tcp_routes.send_proxy and
# tcp_routes.proxy_protocol) against a real PostgreSQL 15 this test starts
# (tests/lib_pg.sh), edged in database mode as the user nobody with
# trusted_proxies = [ "127.0.0.2/32" ], and tests/tools/pp_backend.py
# backends (they refuse a connection without a header):
#   - a deployment with send_proxy 'v2': the backend's header names the
#     client; an UPDATE to 'v1': the next client's connection gets v1;
#   - a TCP route row with send_proxy 'v2' over a deployment without it:
#     the tunnel's header names the client;
#   - an UPDATE of the row's proxy_protocol to true: a connection from
#     the trusted peer with a v1 header naming 203.0.113.7 is that
#     client's (the backend's header says so), said in the log; back to
#     false: a connection without a header is served again;
#   - two TLS passthrough rows on one address that disagree on
#     proxy_protocol: the later one refused, logged, counted
#     (edge_db_rows_skipped_total{table="tcp_routes"}), the first serving;
#   - 'v3' refused by the column's CHECK (nothing changes); with the
#     CHECK dropped, edged refuses the row itself: logged, counted
#     (table="deployments.send_proxy"), another project in the same
#     transaction applied, the project read again not said again;
#   - edged restarted with the database stopped: the local snapshot keeps
#     every column (the HTTP header v1, the route's v2 and its
#     proxy_protocol).
# Runs against build/edged and build/asan/edged. Needs root (the postgres
# user, edged as nobody).
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/lib_edged.sh
. "$(dirname "$0")/../lib_edged.sh"
# shellcheck source=tests/lib_pg.sh
. "$(dirname "$0")/../lib_pg.sh"
t_require_root
edged_begin curl python3 psql
edged_need_build
id nobody >/dev/null 2>&1 || {
	t_skip "send_proxy from the database" "no user nobody"
	t_exit
	exit
}

BASE=$(edged_ports 7)
P_EDGE=$BASE
P_ADMIN=$((BASE + 1))
P_B1=$((BASE + 2)) # http, PROXY wanted
P_B2=$((BASE + 3)) # echo, PROXY wanted
P_TR=$((BASE + 4)) # the TCP route row
P_PT=$((BASE + 5)) # TLS passthrough rows
P_PG=$((BASE + 6))
SOCK="$T_TMP/ctl/edged.sock"
PPB="$TOOLS/pp_backend.py"
mkdir -p "$T_TMP/ctl"
chmod 755 "$T_TMP" "$T_TMP/ctl"
chown nobody "$T_TMP/ctl"
pg_begin "$P_PG"
if ! edged_backend "$P_B1" python3 "$PPB" --log "$T_TMP/b1.log" "$P_B1" http ||
	! edged_backend "$P_B2" python3 "$PPB" --log "$T_TMP/b2.log" "$P_B2" echo; then
	t_fail "backends start"
	t_exit
	exit
fi

write_conf() { # FILE SNAPSHOT
	{
		edged_conf_head "$P_ADMIN" "$SOCK" 1 nobody
		cat <<CONF
pin_dir = "/sys/fs/bpf/edge-test-$T_ID-none";
pg = "$PG_CONNINFO";
pg_snapshot = "$2";
trusted_proxies = [ "127.0.0.2/32" ];
CONF
	} >"$1"
	chmod 644 "$1"
}

ctl() { "$EDGECTL" --socket "$SOCK" "$@"; }

metric() {
	curl -s -m 5 "http://127.0.0.1:$P_ADMIN/metrics" | awk -v k="$1" '$1 == k { v = $2 } END { print v + 0 }'
}

# wait_metric NAME WANT: 0 once the metric NAME is WANT (5 s)
wait_metric() {
	local i
	for ((i = 0; i < 50; i++)); do
		[ "$(metric "$1")" = "$2" ] && return 0
		sleep 0.1
	done
	return 1
}

# hdr HOST FIELD: FIELD of the backend's answer to a request to HOST
# (the header it read: version, src, sport), "" when not answered
hdr() {
	curl -s -m 10 -H "Host: $1" "http://127.0.0.1:$P_EDGE/x" | json_field - "$2"
}

# pp PORT BIND HEADER FIELD: a connection from BIND to PORT, HEADER (may
# be empty) sent first: FIELD of the backend's PP line (or "CLOSED")
pp() {
	python3 - "$@" <<'PY'
import json, socket, sys
port, bind, hdr, field = sys.argv[1:5]
s = socket.socket()
s.bind((bind, 0))
s.settimeout(10)
try:
    s.connect(("127.0.0.1", int(port)))
    s.sendall(hdr.encode().decode("unicode_escape").encode("latin-1") + b"x")
    got = b""
    while b"\n" not in got:
        b = s.recv(4096)
        if not b:
            break
        got += b
except OSError:
    got = b""
print(json.loads(got.split(b"\n")[0][3:]).get(field, "") if b"\n" in got
      else "CLOSED")
PY
}

# wait_pp PORT BIND HEADER FIELD WANT: 0 once pp says WANT (5 s)
wait_pp() {
	local i
	for ((i = 0; i < 50; i++)); do
		[ "$(pp "$1" "$2" "$3" "$4")" = "$5" ] && return 0
		sleep 0.1
	done
	return 1
}

# project_sql ID DOMAIN SEND ENDPOINT_PORT: a project whose environment
# ID-e has the active deployment ID-d (send_proxy SEND) at the endpoint
project_sql() {
	echo "INSERT INTO projects (id, name) VALUES ('$1', '$1');
	INSERT INTO environments (id, project_id, name) VALUES ('$1-e', '$1', 'production');
	INSERT INTO deployments (id, environment_id, active, send_proxy) VALUES ('$1-d', '$1-e', true, '$3');
	INSERT INTO endpoints VALUES ('$1-d', '127.0.0.1:$4');
	INSERT INTO domains (domain, environment_id) VALUES ('$2', '$1-e');"
}

PROXY1='PROXY TCP4 203.0.113.7 198.51.100.1 40000 5432\r\n'
SKIP_TCP='edge_db_rows_skipped_total{table="tcp_routes"}'
SKIP_SP='edge_db_rows_skipped_total{table="deployments.send_proxy"}'

run_suite() { # BIN LABEL
	local bin=$1 v=$2 n0 snap="$T_TMP/snap-$2/db.json" i

	if [ "$(pg_val "SELECT to_regclass('projects') IS NOT NULL")" = t ]; then
		pg_sql "TRUNCATE projects CASCADE; TRUNCATE ip_rules, edge_hosts, edge_change_log" >/dev/null
		pg_sql "ALTER TABLE deployments ADD CONSTRAINT deployments_send_proxy_check
			CHECK (send_proxy IN ('off', 'v1', 'v2'))" >/dev/null 2>&1
	fi
	mkdir -p "$T_TMP/snap-$v"
	chown nobody "$T_TMP/snap-$v"
	write_conf "$T_TMP/edge.conf" "$snap"
	EDGED_LOG="$T_TMP/edged-$v.log"
	if ! edged_start "$bin" "$T_TMP/edge.conf" -v; then
		t_fail "$v: edged starts" "$(tail -5 "$EDGED_LOG")"
		return
	fi

	# 1. deployments.send_proxy
	pg_sql "BEGIN; $(project_sql w w.test v2 "$P_B1") COMMIT;" >/dev/null
	if pg_wait_applied && [ "$(hdr w.test version)" = 2 ] && [ "$(hdr w.test src)" = 127.0.0.1 ]; then
		t_ok "$v: deployments.send_proxy 'v2': the backend's header (v2) names the client"
	else
		t_fail "$v: send_proxy v2" "$(curl -s -H 'Host: w.test' "http://127.0.0.1:$P_EDGE/") $(grep database "$EDGED_LOG" | tail -2)"
	fi
	pg_sql "UPDATE deployments SET send_proxy = 'v1' WHERE id = 'w-d'" >/dev/null
	if pg_wait_applied && [ "$(hdr w.test version)" = 1 ]; then
		t_ok "$v: an UPDATE to 'v1': the next client's connection begins with v1"
	else
		t_fail "$v: send_proxy v1" "$(hdr w.test version)"
	fi

	# 2. tcp_routes.send_proxy over a deployment without it
	pg_sql "BEGIN; $(project_sql t t.test off "$P_B2")
		INSERT INTO tcp_routes (listen, environment_id, send_proxy)
		VALUES ('127.0.0.1:$P_TR', 't-e', 'v2'); COMMIT;" >/dev/null
	if pg_wait_applied && wait_pp "$P_TR" 127.0.0.1 "" version 2 &&
		[ "$(pp "$P_TR" 127.0.0.1 "" src)" = 127.0.0.1 ]; then
		t_ok "$v: tcp_routes.send_proxy 'v2': the tunnel's header names the client"
	else
		t_fail "$v: tcp route send_proxy" "$(pp "$P_TR" 127.0.0.1 "" version) $(grep -E "database|tcp routes" "$EDGED_LOG" | tail -3)"
	fi

	# 3. proxy_protocol on, then off
	pg_sql "UPDATE tcp_routes SET proxy_protocol = true WHERE listen = '127.0.0.1:$P_TR'" >/dev/null
	if pg_wait_applied && wait_pp "$P_TR" 127.0.0.2 "$PROXY1" src 203.0.113.7 &&
		edged_wait_log "tcp routes: 127.0.0.1:$P_TR: proxy_protocol true from now on" &&
		[ "$(pp "$P_TR" 127.0.0.2 "" src)" = CLOSED ]; then
		t_ok "$v: tcp_routes.proxy_protocol set: the trusted peer's header names the client (203.0.113.7), a connection without one closed; said"
	else
		t_fail "$v: proxy_protocol on" "$(pp "$P_TR" 127.0.0.2 "$PROXY1" src) $(grep -E "tcp routes|PROXY" "$EDGED_LOG" | tail -3)"
	fi
	pg_sql "UPDATE tcp_routes SET proxy_protocol = false WHERE listen = '127.0.0.1:$P_TR'" >/dev/null
	if pg_wait_applied && wait_pp "$P_TR" 127.0.0.1 "" src 127.0.0.1; then
		t_ok "$v: proxy_protocol back to false: a connection without a header served again"
	else
		t_fail "$v: proxy_protocol off" "$(pp "$P_TR" 127.0.0.1 "" src)"
	fi

	# 4. passthrough rows of one address that disagree
	n0=$(metric "$SKIP_TCP")
	pg_sql "INSERT INTO tcp_routes (listen, sni, environment_id, proxy_protocol)
		VALUES ('127.0.0.1:$P_PT', 'a.test', 't-e', true);
		INSERT INTO tcp_routes (listen, sni, environment_id, proxy_protocol)
		VALUES ('127.0.0.1:$P_PT', 'b.test', 't-e', false);" >/dev/null
	if pg_wait_applied &&
		edged_wait_log "tcp_routes row [0-9]* \\(127.0.0.1:$P_PT sni b.test\\): 127.0.0.1:$P_PT is also tcp_routes row [0-9]*, whose proxy_protocol is true .*; refused" &&
		wait_metric "$SKIP_TCP" $((n0 + 1)) &&
		ctl routes --json | python3 -c 'import json, sys
d = json.load(sys.stdin)
sys.exit(0 if [r["sni"] for r in d["tcp_routes"] if r["listen"].endswith(":" + sys.argv[1])] == ["a.test"] else 1)' "$P_PT"; then
		t_ok "$v: two passthrough rows of one address disagreeing on proxy_protocol: the later refused, logged, counted; the first serves"
	else
		t_fail "$v: disagreeing rows" "skipped $n0 -> $(metric "$SKIP_TCP") $(grep "$P_PT" "$EDGED_LOG" | tail -2)"
	fi

	# 5. a bad value: the CHECK refuses it; without the CHECK, edged does
	if ! pg_sql "UPDATE deployments SET send_proxy = 'v3' WHERE id = 'w-d'" >/dev/null 2>&1 &&
		[ "$(pg_val "SELECT send_proxy FROM deployments WHERE id = 'w-d'")" = v1 ]; then
		t_ok "$v: 'v3' refused by the column's CHECK"
	else
		t_fail "$v: CHECK" "$(pg_val "SELECT send_proxy FROM deployments WHERE id = 'w-d'")"
	fi
	pg_sql "ALTER TABLE deployments DROP CONSTRAINT deployments_send_proxy_check" >/dev/null
	n0=$(metric "$SKIP_SP")
	pg_sql "BEGIN; UPDATE deployments SET send_proxy = 'v3' WHERE id = 'w-d';
		$(project_sql g g.test v2 "$P_B1") COMMIT;" >/dev/null
	if pg_wait_applied &&
		edged_wait_log "database: deployments row w-d: send_proxy \"v3\": expected off, v1 or v2; skipped" &&
		wait_metric "$SKIP_SP" $((n0 + 1)) && [ "$(hdr g.test version)" = 2 ] &&
		[ "$(hdr w.test version)" = "" ]; then
		t_ok "$v: without the CHECK, edged refuses 'v3' itself: the deployment skipped, logged, counted; another project in the same transaction applied"
	else
		t_fail "$v: edged refuses v3" "skipped $n0 -> $(metric "$SKIP_SP"), g $(hdr g.test version), w '$(hdr w.test version)' $(grep "w-d" "$EDGED_LOG" | tail -2)"
	fi
	# the project read again with the same bad value: not said again
	n0=$(metric "$SKIP_SP")
	pg_sql "UPDATE environments SET name = 'prod2' WHERE id = 'w-e'" >/dev/null
	if pg_wait_applied && sleep 1.2 && [ "$(metric "$SKIP_SP")" = "$n0" ] &&
		[ "$(grep -c 'deployments row w-d: send_proxy' "$EDGED_LOG")" = 1 ]; then
		t_ok "$v: the project read again with the same refused value: not logged or counted again"
	else
		t_fail "$v: said once" "counted $n0 -> $(metric "$SKIP_SP"), $(grep -c 'deployments row w-d: send_proxy' "$EDGED_LOG") lines"
	fi
	pg_sql "UPDATE deployments SET send_proxy = 'v1' WHERE id = 'w-d'" >/dev/null
	pg_sql "ALTER TABLE deployments ADD CONSTRAINT deployments_send_proxy_check
		CHECK (send_proxy IN ('off', 'v1', 'v2'))" >/dev/null
	pg_sql "UPDATE tcp_routes SET proxy_protocol = true WHERE listen = '127.0.0.1:$P_TR'" >/dev/null
	pg_wait_applied

	# 6. the local snapshot keeps them
	for ((i = 0; i < 100; i++)); do
		grep -q '"send_proxy": "v1"' "$snap" 2>/dev/null &&
			grep -q "\"127.0.0.1:$P_TR\", null, true, \"v2\"" "$snap" && break
		sleep 0.05
	done
	edged_stop 10
	edged_sanitizers_clean "$v: sanitizers silent" && t_ok "$v: no sanitizer report"
	pg_stop
	EDGED_LOG="$T_TMP/edged-$v-snap.log"
	if edged_start "$bin" "$T_TMP/edge.conf" -v && [ "$(hdr w.test version)" = 1 ] &&
		wait_pp "$P_TR" 127.0.0.2 "$PROXY1" src 203.0.113.7 &&
		[ "$(pp "$P_TR" 127.0.0.2 "$PROXY1" version)" = 2 ]; then
		t_ok "$v: restarted with the database stopped: the snapshot's send_proxy and proxy_protocol apply"
	else
		t_fail "$v: from the snapshot" "w '$(hdr w.test version)', route '$(pp "$P_TR" 127.0.0.2 "$PROXY1" src)' $(grep -E "snapshot" "$EDGED_LOG" | tail -2); $(grep -o "\"127.0.0.1:$P_TR\"[^]]*" "$snap")"
	fi
	edged_stop 10
	edged_sanitizers_clean "$v: sanitizers silent (from the snapshot)"
	pg_start || t_fail "PostgreSQL starts again"
}

run_suite "$EDGED" edged
edged_asan && run_suite "$EDGED_ASAN" asan
t_exit
