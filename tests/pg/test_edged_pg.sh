#!/bin/bash
# test_edged_pg.sh - edged with the PostgreSQL control plane (pg = ...)
# against a real PostgreSQL 15 this test starts (tests/lib_pg.sh): a site
# inserted in one transaction routes (and how long it took); a deployment
# switched under steady traffic without a failed request; a disabled
# project answers 403, a deleted domain 503; a domain + path prefix routed
# to another project; a unix: endpoint; bad rows skipped and counted while their neighbours
# apply; a domain the configuration file serves left to it; every change
# applied while edged's sessions are killed (pg_terminate_backend) over
# and over; a database restart with edged serving throughout; a boot with
# the database down, from the local snapshot; two edged on one database
# converging (edge_hosts). Runs against build/edged and build/asan/edged.
# Needs root (the postgres user).
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/lib_edged.sh
. "$(dirname "$0")/../lib_edged.sh"
# shellcheck source=tests/lib_pg.sh
. "$(dirname "$0")/../lib_pg.sh"
t_require_root
edged_begin curl python3 psql
edged_need_build

BASE=$(edged_ports 8)
P_EDGE=$BASE
P_ADMIN=$((BASE + 1))
P_A=$((BASE + 2)) # backend "A"
P_B=$((BASE + 3)) # backend "B"
P_PG=$((BASE + 4))
P_EDGE2=$((BASE + 5))
P_ADMIN2=$((BASE + 6))
pg_begin "$P_PG"
# edge's schema comes from edged itself: its migrations run at start
# the schema version this build migrates to: its last migration's number
# (numbers may skip one another change reserved)
SCHEMA_VERSION=$(find "$T_ROOT/userspace/pg/migrations" -name '[0-9]*.sql' -printf '%f\n' | sed 's/_.*//' | sort | tail -1 | sed 's/^0*//')
chmod 755 "$T_TMP"

# write_conf FILE EDGE_PORT ADMIN_PORT SNAPSHOT HOST_NAME
write_conf() {
	cat >"$1" <<CONF
listen = [ "127.0.0.1:$2" ];
workers = 2;
user = "$(id -un)";
control_socket = "$T_TMP/edged-$2.sock";
admin_listen = "127.0.0.1:$3";
pin_dir = "/sys/fs/bpf/edge-test-$T_ID-none";
pg = "$PG_CONNINFO";
pg_snapshot = "$4";
host_name = "$5";
projects = (
  { id = "filep";
    environments = (
      { id = "file-env";
        domains = [ "file.test" ];
        deployment = { id = "file-d"; upstreams = [ "127.0.0.1:$P_A" ]; };
      }
    );
  }
);
CONF
}

# code HOST PATH [PORT]: the status edged answers
code() {
	curl -s -m 5 -o /dev/null -w '%{http_code}' -H "Host: $1" "http://127.0.0.1:${3:-$P_EDGE}$2"
}
# body HOST PATH: the backend's name in its answer
backend_of() {
	curl -s -m 5 -H "Host: $1" "http://127.0.0.1:$P_EDGE$2" | json_field - backend
}
# wait_code WANT HOST PATH [PORT]: 0 once edged answers WANT (5 s at most)
wait_code() {
	local i
	for ((i = 0; i < 500; i++)); do
		[ "$(code "$2" "$3" "${4:-$P_EDGE}")" = "$1" ] && return 0
		sleep 0.01
	done
	return 1
}
metric() {
	curl -s -m 5 "http://127.0.0.1:${2:-$P_ADMIN}/metrics" | awk -v n="$1" '$1 == n { print $2 }'
}

# site ID DOMAIN PORT: a project, environment, deployment and endpoint
site_sql() {
	cat <<SQL
INSERT INTO projects (id, name) VALUES ('$1', '$1');
INSERT INTO environments (id, project_id, name) VALUES ('$1-prod', '$1', 'production');
INSERT INTO deployments (id, environment_id, active) VALUES ('$1-d1', '$1-prod', true);
INSERT INTO endpoints VALUES ('$1-d1', '127.0.0.1:$3');
INSERT INTO domains (domain, environment_id) VALUES ('$2', '$1-prod');
SQL
}

run_suite() { # BIN LABEL
	local bin=$1 v=$2 t0 t1 out snap="$T_TMP/snap-$2/db.json"

	if [ "$(pg_val "SELECT to_regclass('projects') IS NOT NULL")" = t ]; then
		pg_sql "TRUNCATE projects CASCADE; TRUNCATE ip_rules, edge_hosts, edge_change_log" >/dev/null
	fi
	write_conf "$T_TMP/edge.conf" "$P_EDGE" "$P_ADMIN" "$snap" "host-one"
	if ! edged_start "$bin" "$T_TMP/edge.conf" -v; then
		t_fail "$v: edged starts" "$(tail -5 "$EDGED_LOG")"
		return
	fi

	# 0. the schema: migrated by the first edged to start, found up to
	# date by the next
	local sv
	sv=$(pg_val "SELECT max(version) FROM edge_schema")
	if [ "$sv" = "$SCHEMA_VERSION" ] && { [ "$v" != edged ] ||
		{ grep -q "schema migration 0001_control_plane applied" "$EDGED_LOG" &&
			[ "$(pg_val "SELECT applied_by FROM edge_schema WHERE version = 1")" = "host-one edged $("$bin" --version | awk 'NR == 1 {print $2}')" ]; }; } &&
		! grep -q "not migrated" "$EDGED_LOG"; then
		t_ok "$v: edged migrated the schema at start (version $sv)"
	else
		t_fail "$v: migrations at start" "version $sv, not $SCHEMA_VERSION: $(grep -m3 'database' "$EDGED_LOG")"
	fi

	# 1. a site inserted in one transaction routes
	pg_sql "BEGIN; $(site_sql shop shop.test "$P_A") COMMIT;" >/dev/null
	t0=$(date +%s%N) # psql has returned: committed
	if wait_code 200 shop.test / && t1=$(date +%s%N) &&
		[ $(((t1 - t0) / 1000000)) -lt 500 ]; then
		t_ok "$v: a site inserted in one transaction routes $(((t1 - t0) / 1000000)) ms after its COMMIT (by NOTIFY: the version check would take up to 2 s)"
	else
		t_fail "$v: a site inserted routes" "$(code shop.test /) $(tail -3 "$EDGED_LOG")"
	fi

	# 1b. edgectl status and routes say what the table holds
	local st rt
	st=$("$EDGECTL" --socket "$T_TMP/edged-$P_EDGE.sock" status 2>&1)
	rt=$("$EDGECTL" --socket "$T_TMP/edged-$P_EDGE.sock" routes 2>&1)
	if grep -Eq '^db sync: +up, change version [1-9][0-9]* \(database [1-9][0-9]*\), 1 project' <<<"$st" &&
		grep -Eq '^route generation [0-9]+, database change version [1-9]' <<<"$rt" &&
		grep -Eq '^shop.test .*\(from the database\)$' <<<"$rt" &&
		grep -Eq '^file.test ' <<<"$rt" && ! grep -Eq '^file.test .*from the database' <<<"$rt"; then
		t_ok "$v: edgectl status: $(grep '^db sync' <<<"$st"); routes: the change version and each route's source"
	else
		t_fail "$v: edgectl status and routes" "$st $rt"
	fi

	# 2. a deployment switched under steady traffic
	pg_sql "INSERT INTO deployments (id, environment_id) VALUES ('shop-d2', 'shop-prod');
		INSERT INTO endpoints VALUES ('shop-d2', '127.0.0.1:$P_B')" >/dev/null
	rm -f "$T_TMP/traffic.out.started"
	python3 - "$P_EDGE" "$T_TMP/traffic.out" <<'PY' &
import http.client, json, sys, time
port, out = int(sys.argv[1]), sys.argv[2]
seen, bad, n = [], [], 0
# until a second after the switch shows (the test switches once the
# first answer is in), 20 s at most
t_end = time.monotonic() + 20
c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
while time.monotonic() < t_end:
    if n == 1:
        open(out + ".started", "w").close()
    if len(seen) > 1:
        t_end = min(t_end, switched + 1)
    try:
        c.request("GET", "/t", headers={"Host": "shop.test"})
        r = c.getresponse()
        b = r.read()
        n += 1
        if r.status != 200:
            bad.append(r.status)
        else:
            name = json.loads(b)["backend"]
            if not seen or seen[-1] != name:
                seen.append(name)
                switched = time.monotonic()
    except Exception as e:
        bad.append(repr(e))
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
open(out, "w").write(json.dumps({"n": n, "bad": bad[:5], "nbad": len(bad), "seen": seen}))
PY
	local tp=$! i
	for ((i = 0; i < 100; i++)); do
		[ -e "$T_TMP/traffic.out.started" ] && break
		sleep 0.1
	done
	sleep 0.5
	pg_sql "UPDATE deployments SET active = (id = 'shop-d2') WHERE environment_id = 'shop-prod'" >/dev/null
	wait "$tp"
	out=$(cat "$T_TMP/traffic.out")
	if [ "$(json_field "$T_TMP/traffic.out" nbad)" = 0 ] &&
		[ "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["seen"])' "$T_TMP/traffic.out")" = "['A', 'B']" ]; then
		t_ok "$v: deployment switched under steady traffic, no request failed ($out)"
	else
		t_fail "$v: deployment switch" "$out"
	fi

	# 3. a disabled project, a deleted domain
	pg_sql "UPDATE projects SET enabled = false WHERE id = 'shop'" >/dev/null
	if wait_code 403 shop.test /; then
		t_ok "$v: a disabled project answers 403"
	else
		t_fail "$v: disabled project" "$(code shop.test /)"
	fi
	pg_sql "UPDATE projects SET enabled = true WHERE id = 'shop';
		DELETE FROM domains WHERE domain = 'shop.test'" >/dev/null
	if wait_code 503 shop.test /; then
		t_ok "$v: a deleted domain answers 503"
	else
		t_fail "$v: deleted domain" "$(code shop.test /)"
	fi

	# 4. a path prefix of one project's domain routed to another project
	pg_sql "INSERT INTO domains (domain, environment_id) VALUES ('shop.test', 'shop-prod');
		$(site_sql fns fn.test "$P_A")
		INSERT INTO domains (domain, path_prefix, strip_prefix, environment_id)
			VALUES ('shop.test', '/fn', true, 'fns-prod')" >/dev/null
	if wait_code 200 shop.test /fn/x && [ "$(backend_of shop.test /fn/x)" = A ] &&
		[ "$(backend_of shop.test /x)" = B ]; then
		t_ok "$v: shop.test/fn goes to project fns (A), the rest to shop (B)"
	else
		t_fail "$v: prefix claim" "$(backend_of shop.test /fn/x) $(backend_of shop.test /x)"
	fi

	# 5. bad rows skipped, their neighbours applied (the endpoints come
	# sorted by address: one bad row sorts before the good one, one
	# after, so that a bad row ending the deployment's rows shows)
	pg_sql "BEGIN; $(site_sql good good.test "$P_A")
		INSERT INTO endpoints VALUES ('good-d1', '0 not an address');
		INSERT INTO endpoints VALUES ('good-d1', 'not an address');
		INSERT INTO domains (domain, environment_id) VALUES ('bad..domain', 'good-prod');
		INSERT INTO domains (domain, environment_id) VALUES ('also-good.test', 'good-prod');
		INSERT INTO ip_rules (cidr, action, project_id) VALUES ('10.0.0.0/8', 'block', 'good');
		COMMIT;" >/dev/null
	wait_code 200 also-good.test /
	sleep 1.1 # the edge_db_* series are refreshed every second
	if wait_code 200 good.test / &&
		[ "$(metric 'edge_db_rows_skipped_total{table="endpoints"}')" -ge 2 ] &&
		[ "$(metric 'edge_db_rows_skipped_total{table="domains"}')" -ge 1 ] &&
		grep -q "database: endpoints row (deployment good-d1, address 0 not an address)" "$EDGED_LOG" &&
		grep -q "database: endpoints row (deployment good-d1, address not an address)" "$EDGED_LOG"; then
		t_ok "$v: bad addresses (sorted before and after the good one) and a bad domain skipped and counted, the rest of the project routes"
	else
		t_fail "$v: bad rows" "$(code good.test /) $(code also-good.test /) $(grep -m2 'database:.*skipped' "$EDGED_LOG")"
	fi

	# 5b. a Unix socket endpoint from the database routes; a relative
	# path beside it is skipped with its reason
	pg_sql "BEGIN; $(site_sql sock sock.test "$P_A")
		DELETE FROM endpoints WHERE deployment_id = 'sock-d1';
		INSERT INTO endpoints VALUES ('sock-d1', 'unix:$USOCK');
		INSERT INTO endpoints VALUES ('sock-d1', 'unix:relative.sock');
		COMMIT;" >/dev/null
	if wait_code 200 sock.test / && [ "$(backend_of sock.test /)" = U ] &&
		grep -q "database: endpoints row (deployment sock-d1, address unix:relative.sock): \"unix:relative.sock\": a Unix socket needs an absolute path: unix:/PATH; skipped" "$EDGED_LOG"; then
		t_ok "$v: a unix: endpoint row routes to the backend on that socket; a relative path beside it skipped with its reason"
	else
		t_fail "$v: unix: endpoint row" "$(code sock.test /) $(backend_of sock.test /) $(grep -m2 'sock-d1' "$EDGED_LOG")"
	fi

	# 6. a domain the configuration file serves stays the file's
	pg_sql "INSERT INTO domains (domain, environment_id) VALUES ('file.test', 'good-prod');
		INSERT INTO domains (domain, environment_id) VALUES ('after.test', 'good-prod')" >/dev/null
	wait_code 200 after.test /
	sleep 1.1
	if wait_code 200 after.test / && [ "$(code file.test /)" = 200 ] &&
		[ "$(metric edge_db_conflicts_total)" -ge 1 ]; then
		t_ok "$v: a domain the file serves is left to it (counted), the database's next row applies"
	else
		t_fail "$v: file conflict" "$(code after.test /) $(metric edge_db_conflicts_total)"
	fi

	# 6b. the file gives the name up (a reload): the database's project
	# that gave way to it gets it
	sed -i 's/"file.test"/"file-only.test"/; s/"host-one"/"host-renamed"/' "$T_TMP/edge.conf"
	kill -HUP "$EPID"
	if wait_code 200 file-only.test / && wait_code 200 file.test / &&
		[ "$(pg_val "SELECT count(*) FROM domains WHERE domain = 'file.test'")" = 1 ] &&
		grep -q "reloaded" "$EDGED_LOG" &&
		grep -q "changed host_name: these apply at the next start" "$EDGED_LOG"; then
		t_ok "$v: a name the file no longer claims (reload) goes to the database's project that gave way"
	else
		t_fail "$v: a name the file gave up" "$(code file-only.test /) $(code file.test /) $(grep -m1 reload "$EDGED_LOG")"
	fi
	write_conf "$T_TMP/edge.conf" "$P_EDGE" "$P_ADMIN" "$snap" "host-one"

	# 6c. a change whose notification never came (triggers off, the log
	# row written by hand): the version check finds it within 2 s
	pg_sql "BEGIN; SET LOCAL session_replication_role = replica;
		INSERT INTO domains (domain, environment_id) VALUES ('quiet.test', 'good-prod');
		INSERT INTO edge_change_log (version, kind, key) VALUES (nextval('edge_change_seq'), 'project', 'good');
		COMMIT;" >/dev/null
	t0=$(date +%s%N)
	if wait_code 200 quiet.test /; then
		t_ok "$v: a change with no NOTIFY found by the version check ($((($(date +%s%N) - t0) / 1000000)) ms)"
	else
		t_fail "$v: a change with no NOTIFY" "$(code quiet.test /)"
	fi

	# 6d. a change that commits after one with a higher version and whose
	# notification was lost too: the check looks below the applied
	# version for versions it never heard of
	local vlate
	vlate=$(pg_val "SELECT nextval('edge_change_seq')")
	pg_sql "INSERT INTO domains (domain, environment_id) VALUES ('higher.test', 'good-prod')" >/dev/null
	wait_code 200 higher.test /
	pg_sql "BEGIN; SET LOCAL session_replication_role = replica;
		INSERT INTO domains (domain, environment_id) VALUES ('late.test', 'good-prod');
		INSERT INTO edge_change_log (version, kind, key) VALUES ($vlate, 'project', 'good');
		COMMIT;" >/dev/null
	t0=$(date +%s%N)
	if wait_code 200 late.test / && grep -q "committed after a higher version and never notified (version $vlate first)" "$EDGED_LOG"; then
		t_ok "$v: a change committed late (version $vlate below the one applied) and never notified, found by the check ($((($(date +%s%N) - t0) / 1000000)) ms)"
	else
		t_fail "$v: a late change never notified" "$(code late.test /) $(grep -m1 'never notified' "$EDGED_LOG")"
	fi

	# 7. edged's sessions killed while changes are made: every one applies.
	# A kill finds no session while edged is between two (its backoff),
	# and /metrics takes the reconnects from the database's tick (1 s):
	# the kills that hit are counted, and the reconnects waited for
	local i okc=0 kills=0 r0 r1
	r0=$(metric edge_db_reconnects_total)
	for ((i = 0; i < 10; i++)); do
		kills=$((kills + $(pg_val "WITH k AS MATERIALIZED (
			SELECT pg_terminate_backend(pid) AS t FROM pg_stat_activity
			WHERE application_name = 'edged') SELECT count(*) FILTER (WHERE t) FROM k")))
		pg_sql "INSERT INTO domains (domain, environment_id) VALUES ('k$i.test', 'good-prod')" >/dev/null
	done
	for ((i = 0; i < 10; i++)); do
		wait_code 200 "k$i.test" / && okc=$((okc + 1))
	done
	for ((i = 0; i < 50; i++)); do
		r1=$(metric edge_db_reconnects_total)
		[ "$((${r1:-0} - ${r0:-0}))" -ge 1 ] && break
		sleep 0.1
	done
	if [ "$okc" = 10 ] && [ "$kills" -ge 1 ] && [ "$((${r1:-0} - ${r0:-0}))" -ge 1 ]; then
		t_ok "$v: edged's session killed $kills times while 10 changes were made: all 10 routed ($((r1 - r0)) reconnects)"
	else
		t_fail "$v: terminate_backend" "$okc of 10 routed; $kills sessions killed; reconnects ${r0:-?} -> ${r1:-?}"
	fi

	# 8. a database restart: edged serves throughout, and catches up
	python3 - "$P_EDGE" "$T_TMP/restart.out" <<'PY' &
import http.client, json, sys, time
port, out = int(sys.argv[1]), sys.argv[2]
n, bad = 0, []
t_end = time.monotonic() + 4
c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
while time.monotonic() < t_end:
    try:
        c.request("GET", "/", headers={"Host": "good.test"})
        r = c.getresponse(); r.read(); n += 1
        if r.status != 200:
            bad.append(r.status)
    except Exception as e:
        bad.append(repr(e))
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    time.sleep(0.005)
open(out, "w").write(json.dumps({"n": n, "nbad": len(bad), "bad": bad[:5]}))
PY
	tp=$!
	sleep 0.5
	pg_stop
	sleep 1
	local down
	down=$(metric edge_db_up)
	st=$("$EDGECTL" --socket "$T_TMP/edged-$P_EDGE.sock" status 2>&1)
	pg_start
	pg_sql "INSERT INTO domains (domain, environment_id) VALUES ('back.test', 'good-prod')" >/dev/null
	wait "$tp"
	if [ "$(json_field "$T_TMP/restart.out" nbad)" = 0 ] && [ "$down" = 0 ] &&
		wait_code 200 back.test /; then
		t_ok "$v: a database restart: $(json_field "$T_TMP/restart.out" n) requests all 200, edge_db_up 0 meanwhile, the change made after it routed"
	else
		t_fail "$v: database restart" "$(cat "$T_TMP/restart.out") up while down: $down, back.test $(code back.test /)"
	fi
	if grep -Eq '^db sync: +(down|connecting) for .*; serving the last table; last error: .+' <<<"$st"; then
		t_ok "$v: edgectl status while the database is away: $(grep '^db sync' <<<"$st")"
	else
		t_fail "$v: edgectl status while the database is away" "$st"
	fi
	sleep 1.2 # the snapshot is saved at most once a second
	edged_stop 5
	edged_sanitizers_clean "$v: sanitizers clean"

	# 9. a boot with the database down: from the local snapshot
	pg_stop
	edged_start "$bin" "$T_TMP/edge.conf" -v
	if wait_code 200 back.test / && wait_code 200 good.test / &&
		grep -q "serving the local snapshot" "$EDGED_LOG" &&
		[ "$(metric edge_db_up)" = 0 ]; then
		t_ok "$v: booted with the database down, serving from the local snapshot"
	else
		t_fail "$v: boot from the snapshot" "$(code back.test /) $(grep -m1 'snapshot' "$EDGED_LOG")"
	fi
	pg_start
	pg_sql "INSERT INTO domains (domain, environment_id) VALUES ('later.test', 'good-prod')" >/dev/null
	if wait_code 200 later.test /; then
		t_ok "$v: the database back: changes route again"
	else
		t_fail "$v: after the boot from the snapshot" "$(code later.test /)"
	fi

	# 10. two edged on one database converge
	write_conf "$T_TMP/edge2.conf" "$P_EDGE2" "$P_ADMIN2" "$T_TMP/snap2-$v/db.json" "host-two"
	"$bin" -c "$T_TMP/edge2.conf" -f >"$T_TMP/edged2.log" 2>&1 &
	local e2=$!
	edged_track "$e2"
	edged_wait_port "$P_EDGE2"
	pg_sql "INSERT INTO domains (domain, environment_id) VALUES ('both.test', 'good-prod')" >/dev/null
	local conv=""
	if wait_code 200 both.test / "$P_EDGE" && wait_code 200 both.test / "$P_EDGE2"; then
		for ((i = 0; i < 100; i++)); do
			conv=$(pg_val "SELECT string_agg(name || '=' || applied_version, ' ' ORDER BY name)
				FROM edge_hosts WHERE applied_version = (SELECT max(version) FROM edge_change_log)")
			[ "$(pg_val "SELECT count(*) FROM edge_hosts WHERE applied_version = (SELECT max(version) FROM edge_change_log)")" = 2 ] && break
			sleep 0.1
		done
	fi
	if [ "$(pg_val "SELECT count(*) FROM edge_hosts WHERE applied_version = (SELECT max(version) FROM edge_change_log)")" = 2 ]; then
		t_ok "$v: two edged on one database route the change and report the same version ($conv)"
	else
		t_fail "$v: two hosts converge" "$(pg_val 'SELECT name, applied_version FROM edge_hosts') max $(pg_val 'SELECT max(version) FROM edge_change_log')"
	fi
	kill -TERM "$e2"
	wait "$e2" 2>/dev/null
	edged_sanitizers_clean "$v: second edged: sanitizers clean" "$T_TMP/edged2.log"
	edged_stop 5
	edged_sanitizers_clean "$v: sanitizers clean after the boot from the snapshot"
}

USOCK="$T_TMP/u.sock"
python3 "$TOOLS/echo_backend.py" "unix:$USOCK" "$T_TMP/u.jsonl" U &
edged_track $!
if ! edged_backend "$P_A" python3 "$TOOLS/echo_backend.py" "$P_A" "$T_TMP/a.jsonl" A ||
	! edged_backend "$P_B" python3 "$TOOLS/echo_backend.py" "$P_B" "$T_TMP/b.jsonl" B; then
	t_fail "backends start"
	t_exit
	exit
fi
run_suite "$EDGED" edged
edged_asan && run_suite "$EDGED_ASAN" asan

# a schema newer than this edge: refused at start, with the reason
pg_sql "INSERT INTO edge_schema (version, applied_by) VALUES (9999, 'a newer edge')" >/dev/null
write_conf "$T_TMP/edge.conf" "$P_EDGE" "$P_ADMIN" "$T_TMP/snap-newer/db.json" "host-one"
timeout 30 "$EDGED" -c "$T_TMP/edge.conf" -f >"$T_TMP/newer.log" 2>&1
rc=$?
if [ "$rc" != 0 ] && [ "$rc" != 124 ] && grep -q "newer than this edge" "$T_TMP/newer.log"; then
	t_ok "a database schema newer than this edge: edged refuses to start (exit $rc): $(grep -m1 newer "$T_TMP/newer.log")"
else
	t_fail "a newer schema refused" "exit $rc: $(tail -3 "$T_TMP/newer.log")"
fi
pg_sql "DELETE FROM edge_schema WHERE version = 9999" >/dev/null
t_exit
