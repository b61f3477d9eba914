#!/bin/bash
# test_edged_tcp_routes_pg.sh - TCP and TLS passthrough routes from the
# database's tcp_routes (migration 0005), against a real PostgreSQL 15
# this test starts (tests/lib_pg.sh), edged running as "nobody" beside a
# route of its configuration file:
#   - a row inserted in a transaction: its port refused before the
#     COMMIT, tunnelled to its environment's endpoint a few milliseconds
#     after it (NOTIFY: within 1.5 s, less than the version check's 2 s
#     period; the time printed), 8 MiB each way with SHA-256 equal at both
#     ends;
#   - TLS passthrough rows picked by openssl s_client -servername (the
#     certificate verified says which backend), the "*" row the default;
#   - a row deleted: its listener closes (new connections refused) while a
#     tunnel opened before goes on moving bytes;
#   - rows whose notification never reached edged: one with the triggers
#     off and its edge_change_log row written by hand (the version check
#     finds it), one not noted at all, which only a snapshot can find
#     (edged's session killed: the snapshot after the reconnect has it);
#   - bad rows beside a good one in one transaction (a host name, a bad
#     sni, a name twice, sni beside a plain route, the HTTP listen
#     address, admin_listen, a wildcard over another route's address):
#     refused one by one, logged and counted, the good one routed; a row
#     on the file's route's address gives way to it (counted);
#   - a port below 1024 while edged runs as nobody: not listening, the
#     reason in edgectl routes --json and in the plain table, counted,
#     edged fine;
#   - edged restarted while the database is stopped: the routes of its
#     local snapshot served, the port below 1024 bound at start (root);
#   - analytics: tunnel events for the database's routes.
# Runs against build/edged and build/asan/edged (no sanitizer report).
# Needs root (the postgres and nobody users).
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/lib_edged.sh
. "$(dirname "$0")/../lib_edged.sh"
# shellcheck source=tests/lib_pg.sh
. "$(dirname "$0")/../lib_pg.sh"
t_require_root
edged_begin curl python3 psql openssl
edged_need_build
if ! id nobody >/dev/null 2>&1; then
	t_skip "$(basename "$0")" "needs the user nobody"
	exit 77
fi

BASE=$(edged_ports 14)
P_EDGE=$BASE
P_ADMIN=$((BASE + 1))
T_FILE=$((BASE + 2)) # the file's TCP route -> fenv (B_F)
T_NEW=$((BASE + 3))  # a row inserted in a transaction -> denv (B_D)
T_PT=$((BASE + 4))   # passthrough rows: a.dbpt.test -> ta, "*" -> td
T_GOOD=$((BASE + 5)) # the good row among bad ones -> denv
T_DEL=$((BASE + 6))  # a row deleted under an open tunnel -> denv
B_F=$((BASE + 7))
B_D=$((BASE + 8))
B_TA=$((BASE + 9))
B_TD=$((BASE + 10))
P_PG=$((BASE + 11))
T_QUIET=$((BASE + 12)) # a row with no NOTIFY -> denv
T_KILL=$((BASE + 13))  # a row inserted while edged's session is killed
SOCK="$T_TMP/edged.sock"
SNAP="$T_TMP/snap/db-snapshot.json"
BIG=$((8 << 20))
# a port below 1024 that nothing uses
LOW=""
used=" $(ss -Htan 2>/dev/null | awk '{ n = split($4, a, ":"); print a[n] }' | sort -u | tr '\n' ' ') "
for ((p = 1023; p >= 900; p--)); do
	[[ "$used" == *" $p "* ]] && continue
	LOW=$p
	break
done
pg_begin "$P_PG"
# edged runs as nobody: its control socket, snapshot and analytics file
# live here
chmod 755 "$T_TMP"

write_conf() { # FILE
	{
		edged_conf_head "$P_ADMIN" "$SOCK" 2 nobody
		cat <<CONF
pin_dir = "/sys/fs/bpf/edge-test-$T_ID-none";
pg = "$PG_CONNINFO";
pg_snapshot = "$SNAP";
analytics = { file = "$T_TMP/events.jsonl"; database = false; };
timeouts = { client_hello = "2s"; tunnel_idle = "30s"; drain = "2s"; };
tcp_routes = ( { listen = "127.0.0.1:$T_FILE"; environment = "fenv"; } );
projects = (
  { id = "fp";
    environments = (
      { id = "fenv"; domains = [ "f.tcp.test" ];
        deployment = { id = "f-1"; upstreams = [ "127.0.0.1:$B_F" ]; }; }
    );
  }
);
CONF
	} >"$1"
}

metric() {
	curl -s -m 5 "http://127.0.0.1:$P_ADMIN/metrics" | awk -v k="$1" '$1 == k { v = $2 } END { print v + 0 }'
}

# wait_metric_above NAME N: NAME goes above N within 5 s
wait_metric_above() {
	local i
	for ((i = 0; i < 50; i++)); do
		[ "$(metric "$1")" -gt "$2" ] && return 0
		sleep 0.1
	done
	return 1
}

# reached PORT: the backend a connection to PORT reaches ("None": closed
# before the banner, "refused")
reached() {
	python3 - "$1" <<'PY' 2>/dev/null
import socket, sys
try:
    s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), 2)
except ConnectionRefusedError:
    print("refused")
    sys.exit(0)
s.settimeout(3)
b = b""
try:
    while b"\n" not in b:
        d = s.recv(100)
        if not d:
            break
        b += d
except OSError:
    pass
print(b.split()[1].decode() if b"\n" in b else "None")
PY
}

# wait_reached PORT WANT: 0 once a connection to PORT reaches WANT (10 s)
wait_reached() {
	local i
	for ((i = 0; i < 200; i++)); do
		[ "$(reached "$1")" = "$2" ] && return 0
		sleep 0.05
	done
	return 1
}

# backend_last CMD: the backends' record of the last connection given CMD
backend_last() {
	python3 - "$T_TMP/backend.jsonl" "$1" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
recs = [r for r in recs if r.get("cmd") == sys.argv[2]]
print(json.dumps(recs[-1] if recs else {}))
PY
}

# peer PORT NAME: the CN of the certificate the backend reached through
# PORT with server name NAME shows, verified against CA ("" when closed)
peer() {
	timeout 10 openssl s_client -connect "127.0.0.1:$1" -servername "$2" \
		-CAfile "$3" -verify_return_error -brief </dev/null 2>&1 |
		sed -n 's/^Peer certificate: .*CN = \([^,]*\).*/\1/p'
}

# route_json LISTEN KEY: KEY of the TCP route on LISTEN in edgectl routes
# --json (Python's text; "absent" when no route has it)
route_json() {
	"$EDGECTL" --socket "$SOCK" routes --json 2>/dev/null | python3 -c '
import json, sys
try:
    r = json.load(sys.stdin)["tcp_routes"]
except ValueError:
    print("no answer")
    sys.exit(0)
r = [x for x in r if x["listen"] == sys.argv[1]]
print(r[0].get(sys.argv[2], "") if r else "absent")' "$1" "$2"
}

db_state() {
	"$EDGECTL" --socket "$SOCK" status --json 2>/dev/null |
		json_field - daemon.status.database.state
}

run_suite() { # BIN LABEL
	local bin=$1 v=$2 out ms i rec hold n0 n1 c0 c1 f0 f1 t0 r0

	if [ "$(pg_val "SELECT to_regclass('projects') IS NOT NULL")" = t ]; then
		pg_sql "SET client_min_messages = warning; TRUNCATE projects CASCADE; TRUNCATE ip_rules, edge_hosts, edge_change_log" >/dev/null
	fi
	rm -rf "$T_TMP/snap"
	: >"$T_TMP/events.jsonl"
	write_conf "$T_TMP/edge.conf"
	EDGED_LOG="$T_TMP/edged-$v.log"
	if ! edged_start "$bin" "$T_TMP/edge.conf" -v || ! edged_wait_port "$T_FILE"; then
		t_fail "$v: edged starts" "$(tail -5 "$EDGED_LOG")"
		return
	fi
	for ((i = 0; i < 100; i++)); do
		[ "$(db_state)" = up ] && break
		sleep 0.1
	done
	if [ "$(db_state)" != up ]; then
		t_fail "$v: edged's database session is up" "state '$(db_state)'; $(tail -3 "$EDGED_LOG")"
		edged_stop
		return
	fi
	pg_sql "INSERT INTO projects (id, name) VALUES ('dp', 'dp');
		INSERT INTO environments (id, project_id) VALUES ('denv', 'dp'), ('ta', 'dp'), ('td', 'dp');
		INSERT INTO deployments (id, environment_id, active) VALUES
			('d-1', 'denv', true), ('ta-1', 'ta', true), ('td-1', 'td', true);
		INSERT INTO endpoints VALUES ('d-1', '127.0.0.1:$B_D'), ('ta-1', '127.0.0.1:$B_TA'),
			('td-1', '127.0.0.1:$B_TD')" >/dev/null

	# 1. a row in a transaction: refused before the COMMIT, routed a few
	# milliseconds after it, bytes intact each way
	rm -f "$T_TMP/tx"
	mkfifo "$T_TMP/tx"
	psql -X -q -v ON_ERROR_STOP=1 -d "$PG_CONNINFO" <"$T_TMP/tx" >"$T_TMP/tx.out" 2>&1 &
	exec 3>"$T_TMP/tx"
	echo "BEGIN; INSERT INTO tcp_routes (listen, environment_id) VALUES ('127.0.0.1:$T_NEW', 'denv');" >&3
	printf '%s\n' '\echo inserted' >&3
	for ((i = 0; i < 100; i++)); do
		grep -q inserted "$T_TMP/tx.out" && break
		sleep 0.05
	done
	if grep -q inserted "$T_TMP/tx.out" &&
		python3 "$TOOLS/tcp_route_wait.py" commit "$T_NEW" "$T_TMP/tx" 1.5 >"$T_TMP/commit.json" 2>&1 &&
		[ "$(json_field "$T_TMP/commit.json" port)" = "$B_D" ]; then
		ms=$(json_field "$T_TMP/commit.json" ms)
		t_ok "$v: a tcp_routes row inserted in a transaction: refused before the COMMIT, tunnelled to its endpoint $ms ms after it"
	else
		t_fail "$v: a row in a transaction" "$(cat "$T_TMP/tx.out" "$T_TMP/commit.json") $(tail -3 "$EDGED_LOG")"
	fi
	exec 3>&-
	wait $!
	if [ "$(reached "$T_NEW")" = "$B_D" ] &&
		timeout 120 python3 "$TOOLS/tcp_client.py" pump "$T_NEW" "$BIG" "$EPID" >"$T_TMP/client.json" 2>"$T_TMP/client.err"; then
		rec=$(backend_last pump)
		if [ "$(echo "$rec" | json_field - recv_sha)" = "$(json_field "$T_TMP/client.json" sent_sha)" ] &&
			[ "$(echo "$rec" | json_field - sent_sha)" = "$(json_field "$T_TMP/client.json" recv_sha)" ] &&
			[ "$(echo "$rec" | json_field - recv_bytes)" = "$BIG" ] &&
			[ "$(json_field "$T_TMP/client.json" port)" = "$B_D" ]; then
			t_ok "$v: $((BIG >> 20)) MiB each way through the database's route, SHA-256 equal at both ends"
		else
			t_fail "$v: bytes through the database's route" "client $(cat "$T_TMP/client.json") backend $rec"
		fi
	else
		t_fail "$v: bytes through the database's route" "$(cat "$T_TMP/client.err")"
	fi

	# 2. TLS passthrough rows: the server name picks the backend
	pg_sql "INSERT INTO tcp_routes (listen, sni, environment_id) VALUES
		('127.0.0.1:$T_PT', 'a.dbpt.test', 'ta'), ('127.0.0.1:$T_PT', '*', 'td')" >/dev/null
	edged_wait_port "$T_PT"
	out="$(peer "$T_PT" a.dbpt.test "$T_TMP/a.crt") / $(peer "$T_PT" other.test "$T_TMP/d.crt")"
	if [ "$out" = "a.dbpt.test / default.dbpt.test" ]; then
		t_ok "$v: TLS passthrough rows: openssl s_client -servername a.dbpt.test reaches its backend (verified), another name the \"*\" row's"
	else
		t_fail "$v: passthrough from the database" "$out $(route_json "127.0.0.1:$T_PT" listening)"
	fi

	# 3. a row deleted: its listener closes, an open tunnel goes on
	pg_sql "INSERT INTO tcp_routes (listen, environment_id) VALUES ('127.0.0.1:$T_DEL', 'denv')" >/dev/null
	rm -f "$T_TMP/go"
	if wait_reached "$T_DEL" "$B_D"; then
		python3 "$TOOLS/tcp_route_wait.py" hold "$T_DEL" "$T_TMP/go" 30 >"$T_TMP/hold.out" 2>&1 &
		hold=$!
		edged_track "$hold"
		for ((i = 0; i < 100; i++)); do
			grep -q '"open"' "$T_TMP/hold.out" && break
			sleep 0.05
		done
		pg_sql "DELETE FROM tcp_routes WHERE listen = '127.0.0.1:$T_DEL'" >/dev/null
		if python3 "$TOOLS/tcp_route_wait.py" gone "$T_DEL" 5 >"$T_TMP/gone.json" 2>&1; then
			touch "$T_TMP/go"
			if wait "$hold" && [ "$(tail -1 "$T_TMP/hold.out" | json_field - recv_sha)" = "$(tail -1 "$T_TMP/hold.out" | json_field - sent_sha)" ]; then
				t_ok "$v: a row deleted: new connections refused $(json_field "$T_TMP/gone.json" ms) ms after, a tunnel opened before moved 1 MiB more, intact"
			else
				t_fail "$v: the open tunnel after the delete" "$(cat "$T_TMP/hold.out")"
			fi
		else
			touch "$T_TMP/go"
			t_fail "$v: a row deleted" "$(cat "$T_TMP/gone.json")"
		fi
	else
		t_fail "$v: a row to delete" "$(reached "$T_DEL")"
	fi

	# 3b. rows whose notification never came: the version check (every
	# 2 s) finds the one noted by hand with the triggers off; the
	# snapshot after a reconnect, the one made while edged's session
	# was gone
	pg_sql "BEGIN; SET LOCAL session_replication_role = replica;
		INSERT INTO tcp_routes (listen, environment_id) VALUES ('127.0.0.1:$T_QUIET', 'denv');
		INSERT INTO edge_change_log (version, kind, key) VALUES (nextval('edge_change_seq'), 'project', 'dp');
		COMMIT;" >/dev/null
	t0=$(date +%s%N)
	if wait_reached "$T_QUIET" "$B_D"; then
		t_ok "$v: a row with no NOTIFY found by the version check ($((($(date +%s%N) - t0) / 1000000)) ms)"
	else
		t_fail "$v: a row with no NOTIFY" "$(reached "$T_QUIET")"
	fi
	# not noted at all (nothing in edge_change_log): neither a
	# notification nor the version check (2.5 s) can find it, only a
	# snapshot; killing edged's session makes one
	pg_sql "BEGIN; SET LOCAL session_replication_role = replica;
		INSERT INTO tcp_routes (listen, environment_id) VALUES ('127.0.0.1:$T_KILL', 'denv');
		COMMIT;" >/dev/null
	sleep 2.5
	out=$(reached "$T_KILL")
	r0=$(metric edge_db_reconnects_total)
	pg_sql "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'edged'" >/dev/null
	# the metrics follow the database's state once a second: the route
	# can be served before the reconnect is counted
	if [ "$out" = refused ] && wait_reached "$T_KILL" "$B_D" &&
		wait_metric_above edge_db_reconnects_total "$r0"; then
		t_ok "$v: a row the database never noted: routed by the snapshot after edged's session was killed and came back"
	else
		t_fail "$v: the snapshot after a reconnect" "before $out, after $(reached "$T_KILL"); reconnects $r0 -> $(metric edge_db_reconnects_total)"
	fi

	# 4. bad rows beside a good one, and one on the file's address
	n0=$(metric 'edge_db_rows_skipped_total{table="tcp_routes"}')
	c0=$(metric edge_db_conflicts_total)
	pg_sql "INSERT INTO tcp_routes (listen, sni, environment_id) VALUES
		('127.0.0.1:$T_GOOD', NULL, 'denv'),
		('localhost:$T_GOOD', NULL, 'denv'),
		('127.0.0.1:$T_PT', 'bad_name', 'ta'),
		('127.0.0.1:$T_PT', 'A.DBPT.TEST', 'td'),
		('127.0.0.1:$T_GOOD', 'x.dbpt.test', 'ta'),
		('127.0.0.1:$P_EDGE', NULL, 'denv'),
		('127.0.0.1:$P_ADMIN', NULL, 'denv'),
		('0.0.0.0:$T_NEW', NULL, 'denv'),
		('127.0.0.1:$T_FILE', NULL, 'denv')" >/dev/null
	if wait_reached "$T_GOOD" "$B_D"; then
		t_ok "$v: the good row among bad ones is routed"
	else
		t_fail "$v: the good row" "$(reached "$T_GOOD")"
	fi
	# counted by the next metrics tick (once a second)
	wait_metric_above 'edge_db_rows_skipped_total{table="tcp_routes"}' $((n0 + 6))
	wait_metric_above edge_db_conflicts_total "$c0"
	n1=$(metric 'edge_db_rows_skipped_total{table="tcp_routes"}')
	c1=$(metric edge_db_conflicts_total)
	out=""
	for f in "localhost:$T_GOOD): \"localhost:$T_GOOD\": not a numeric" \
		"sni bad_name): \"bad_name\": invalid character" \
		"sni a.dbpt.test): 127.0.0.1:$T_PT has sni \"a.dbpt.test\" twice" \
		"sni x.dbpt.test): 127.0.0.1:$T_GOOD is also tcp_routes row" \
		"$P_EDGE): 127.0.0.1:$P_EDGE is also listen\[0\]" \
		"$P_ADMIN): 127.0.0.1:$P_ADMIN is also admin_listen" \
		"0.0.0.0:$T_NEW): 0.0.0.0:$T_NEW takes the port of tcp_routes row"; do
		grep -q "tcp_routes.*$f.*refused\|tcp_routes.*$f.*skipped" "$EDGED_LOG" || out="$out [$f]"
	done
	if [ $((n1 - n0)) -ge 7 ] && [ -z "$out" ] &&
		[ "$(reached "$T_NEW")" = "$B_D" ] &&
		[ "$(peer "$T_PT" a.dbpt.test "$T_TMP/a.crt")" = a.dbpt.test ]; then
		t_ok "$v: bad rows refused one by one, logged and counted ($((n1 - n0)) in edge_db_rows_skipped_total{table=\"tcp_routes\"}), the routes they collide with unchanged"
	else
		t_fail "$v: bad rows" "skipped $n0 -> $n1; not logged:$out; $(grep 'tcp_routes row' "$EDGED_LOG" | tail -9)"
	fi
	if [ "$(reached "$T_FILE")" = "$B_F" ] && [ $((c1 - c0)) -ge 1 ] &&
		grep -q "tcp_routes row .*127.0.0.1:$T_FILE).*the file's tcp_routes\[0\].*left out of the database's routes" "$EDGED_LOG" &&
		[ "$(route_json "127.0.0.1:$T_FILE" route_source)" = file ]; then
		t_ok "$v: a row on the file's route's address: the file's wins (edge_db_conflicts_total +$((c1 - c0)))"
	else
		t_fail "$v: the file's route wins" "$(reached "$T_FILE") conflicts $c0 -> $c1 $(route_json "127.0.0.1:$T_FILE" route_source)"
	fi

	# 5. a port below 1024 while edged runs as nobody
	if [ -n "$LOW" ]; then
		f0=$(metric edge_tcp_listen_failures_total)
		pg_sql "INSERT INTO tcp_routes (listen, environment_id) VALUES ('127.0.0.1:$LOW', 'denv')" >/dev/null
		for ((i = 0; i < 100; i++)); do
			[ "$(route_json "127.0.0.1:$LOW" listen_error)" = "Permission denied" ] && break
			sleep 0.05
		done
		wait_metric_above edge_tcp_listen_failures_total "$f0"
		f1=$(metric edge_tcp_listen_failures_total)
		out=$("$EDGECTL" --socket "$SOCK" routes 2>&1)
		if [ "$(route_json "127.0.0.1:$LOW" listening)" = False ] &&
			[ "$(route_json "127.0.0.1:$LOW" listen_error)" = "Permission denied" ] &&
			grep -q "^127.0.0.1:$LOW  *database .*(not listening: Permission denied)" <<<"$out" &&
			[ "$f1" -gt "$f0" ] && [ "$(reached "$LOW")" = refused ] &&
			grep -q "127.0.0.1:$LOW: Permission denied: not listening" "$EDGED_LOG" &&
			kill -0 "$EPID" && [ "$(reached "$T_NEW")" = "$B_D" ]; then
			t_ok "$v: port $LOW from the database as nobody: not listening (Permission denied) in edgectl routes and its --json, counted, edged fine"
		else
			t_fail "$v: a port below 1024" "$(route_json "127.0.0.1:$LOW" listening) $(route_json "127.0.0.1:$LOW" listen_error) failures $f0 -> $f1; $(grep "127.0.0.1:$LOW" <<<"$out")"
		fi
	else
		t_skip "$v: a port below 1024" "every port from 900 to 1023 is in use"
	fi

	# 6. restarted while the database is stopped: the local snapshot's
	# routes served (the port below 1024 bound at start, as root)
	for ((i = 0; i < 100; i++)); do
		grep -q "127.0.0.1:$T_GOOD" "$SNAP" 2>/dev/null && grep -q "127.0.0.1:${LOW:-$T_GOOD}" "$SNAP" && break
		sleep 0.05
	done
	edged_stop 5
	edged_sanitizers_clean "$v: sanitizers clean" && t_ok "$v: no sanitizer report"
	pg_stop
	EDGED_LOG="$T_TMP/edged-$v-snapshot.log"
	if edged_start "$bin" "$T_TMP/edge.conf" -v && wait_reached "$T_NEW" "$B_D" &&
		grep -q "serving the local snapshot" "$EDGED_LOG" &&
		[ "$(peer "$T_PT" a.dbpt.test "$T_TMP/a.crt")" = a.dbpt.test ] &&
		[ "$(reached "$T_DEL")" = refused ]; then
		t_ok "$v: restarted while the database is stopped: the database's routes from the local snapshot served"
	else
		t_fail "$v: restart from the snapshot" "$(reached "$T_NEW") $(grep -m3 'snapshot\|tcp routes' "$EDGED_LOG")"
	fi
	if [ -n "$LOW" ]; then
		if [ "$(reached "$LOW")" = "$B_D" ] && [ "$(route_json "127.0.0.1:$LOW" listening)" = True ]; then
			t_ok "$v: and port $LOW, bound at start while edged was root, listens"
		else
			t_fail "$v: port $LOW bound at start" "$(reached "$LOW") $(route_json "127.0.0.1:$LOW" listen_error)"
		fi
	fi
	edged_stop 5
	edged_sanitizers_clean "$v: sanitizers clean (restart)" && t_ok "$v: no sanitizer report (restart)"
	pg_start

	# 7. analytics: the database's routes record tunnel events as the
	# file's do
	if python3 - "$T_TMP/events.jsonl" "$BIG" <<'PY'; then
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
big = int(sys.argv[2])
pump = [e for e in ev if e["environment_id"] == "denv" and e["bytes_in"] > big]
assert len(pump) == 1 and pump[0]["kind"] == "tunnel" and pump[0]["outcome"] == "tunnel", pump
pt = [e for e in ev if e["environment_id"] == "ta" and e["outcome"] == "tunnel"]
assert pt and all(e["host"] == "a.dbpt.test" for e in pt), pt
PY
		t_ok "$v: analytics: one tunnel event per connection on the database's routes, the server name on passthrough ones"
	else
		t_fail "$v: analytics" "$(tail -c 600 "$T_TMP/events.jsonl")"
	fi
}

# backends: two raw TCP ones, two TLS ones (openssl s_server)
for p in "$B_F" "$B_D"; do
	edged_backend "$p" python3 "$TOOLS/tcp_backend.py" "$p" "$T_TMP/backend.jsonl" ||
		t_fail "backend $p starts"
done
for b in "a:a.dbpt.test:$B_TA" "d:default.dbpt.test:$B_TD"; do
	IFS=: read -r id cn port <<<"$b"
	if ! openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj "/CN=$cn" \
		-addext "subjectAltName=DNS:$cn" \
		-keyout "$T_TMP/$id.key" -out "$T_TMP/$id.crt" >/dev/null 2>&1; then
		t_fail "certificate for $cn"
		continue
	fi
	openssl s_server -quiet -www -accept "127.0.0.1:$port" \
		-cert "$T_TMP/$id.crt" -key "$T_TMP/$id.key" >/dev/null 2>&1 &
	edged_track $!
	edged_wait_port "$port" || t_fail "openssl s_server for $cn starts"
done

run_suite "$EDGED" edged
edged_asan && run_suite "$EDGED_ASAN" asan
t_exit
