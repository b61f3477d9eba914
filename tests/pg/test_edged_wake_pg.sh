#!/bin/bash
# test_edged_wake_pg.sh - on-demand environments from the PostgreSQL
# control plane (docs/wake.md, "Database mode") against a real PostgreSQL
# 15 (tests/lib_pg.sh): migration 0008's tables and column; the
# environments.on_demand, state and idle_timeout columns reach the wake
# registry (edgectl envs); a database environment that nothing serves
# sleeps, its first request asks the database for its wake (a
# wake_requests row, which an orchestrator here answers: it starts the
# backend and sets the state running; wake.command is the file's
# environments' only) and is served with X-Edge-Cold-Start and its cold
# start in the analytics record (file and request_events.cold_start_ms),
# it sleeps again after its idle_timeout (environments.state 'sleeping',
# no sleep_command); a row with
# a negative idle_timeout or a state that is none is logged and skipped
# while the others apply, and applies once fixed; on_demand switched off
# in the database takes it out of the registry; a reload refused for a
# route error (a domain the database holds) leaves the registry as it
# was, and a good one then adds the file's on-demand environment. Runs
# against build/edged and build/asan/edged. Needs root (the postgres
# user).
#
# Two edged on one database sending one wake, the orchestrator's failure
# and the timeout: test_edged_wake_shared_pg.sh.
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
P_OD=$((BASE + 2))   # the on-demand environment's backend (woken)
P_A=$((BASE + 3))    # an always-on backend
P_PG=$((BASE + 4))
P_FILE=$((BASE + 5)) # the file's on-demand environment's (never up)
EDGECTL="$B/edgectl"
SOCK="$T_TMP/edged.sock"
pg_begin "$P_PG"
chmod 755 "$T_TMP"

cat >"$T_TMP/wake.sh" <<SH
#!/bin/bash
echo "wake \$1" >>"$T_TMP/wakes.log"
echo "\$\$" >>"$T_TMP/pids"
echo "\$\$" >"$T_TMP/\$1.pid"
exec python3 "$TOOLS/wake_backend.py" "$P_OD"
SH
cat >"$T_TMP/sleep.sh" <<SH
#!/bin/bash
echo "sleep \$1" >>"$T_TMP/sleeps.log"
kill "\$(cat "$T_TMP/\$1.pid")" 2>/dev/null
exit 0
SH
chmod +x "$T_TMP/wake.sh" "$T_TMP/sleep.sh"

# write_conf [EXTRA_DOMAIN]: the file's project (an on-demand environment
# "file-od" when FILE_OD=1) and the wake group
write_conf() {
	{
		edged_conf_head "$P_ADMIN" "$SOCK" 2
		cat <<CONF
pin_dir = "/sys/fs/bpf/edge-test-$T_ID-none";
pg = "$PG_CONNINFO";
pg_snapshot = "";
host_name = "host-one";
analytics = { file = "$T_TMP/analytics.jsonl"; };
wake = { command = "$T_TMP/wake.sh %s"; sleep_command = "$T_TMP/sleep.sh %s";
         timeout = "8s"; };
projects = ( { id = "filep"; environments = (
  { id = "file-env"; domains = [ "file.test" ${1:+, \"$1\"} ];
    deployment = { id = "file-d"; upstreams = [ "127.0.0.1:$P_A" ]; }; }
CONF
		[ "${FILE_OD:-0}" = 1 ] && cat <<CONF
  , { id = "file-od"; domains = [ "file-od.test" ]; on_demand = true;
    deployment = { id = "file-od-d"; upstreams = [ "127.0.0.1:$P_FILE" ]; }; }
CONF
		echo "); } );"
	} >"$T_TMP/edge.conf"
}

env_sql() { # ID ON_DEMAND STATE IDLE PORT
	cat <<SQL
INSERT INTO environments (id, project_id, name, on_demand, state, idle_timeout)
    VALUES ('$1', 'dbp', '$1', $2, '$3', $4);
INSERT INTO deployments (id, environment_id, active) VALUES ('$1-d', '$1', true);
INSERT INTO endpoints VALUES ('$1-d', '127.0.0.1:$5');
INSERT INTO domains (domain, environment_id) VALUES ('$1.test', '$1');
SQL
}

code() { curl -s -m 8 -o /dev/null -w '%{http_code}' -H "Host: $1" "http://127.0.0.1:$P_EDGE/"; }
wait_code() { # WANT HOST
	local i
	for ((i = 0; i < 300; i++)); do
		[ "$(code "$2")" = "$1" ] && return 0
		sleep 0.02
	done
	return 1
}
# envs_ids: the ids edgectl envs --json lists, space-separated
envs_ids() {
	"$EDGECTL" --socket "$SOCK" envs --json 2>/dev/null |
		python3 -c 'import json,sys; print(" ".join(e["id"] for e in json.load(sys.stdin)["environments"]))'
}
env_field() { # ENV KEY
	"$EDGECTL" --socket "$SOCK" envs --json 2>/dev/null |
		python3 -c 'import json,sys
d = json.load(sys.stdin)
v = [e for e in d["environments"] if e["id"] == sys.argv[1]]
print(v[0][sys.argv[2]] if v else "absent")' "$1" "$2"
}
wait_envs() { # WANT_IDS
	local i
	for ((i = 0; i < 250; i++)); do
		[ "$(envs_ids)" = "$1" ] && return 0
		sleep 0.02
	done
	return 1
}
wait_field() { # ENV KEY WANT [TRIES]
	local i
	for ((i = 0; i < ${4:-250}; i++)); do
		[ "$(env_field "$1" "$2")" = "$3" ] && return 0
		sleep 0.02
	done
	return 1
}
wakes() { pg_val "SELECT count(*) FROM wake_requests WHERE environment_id = '$1'"; }
# orchestrate_once ENV: in the background, the first pending wake_requests
# row of ENV gets its backend started (wake.sh, as a wake command would)
# and the state running, within 8 s
orchestrate_once() {
	(
		local i id
		for ((i = 0; i < 160; i++)); do
			id=$(pg_val "SELECT id FROM wake_requests WHERE environment_id = '$1' AND state = 'pending' LIMIT 1")
			if [ -n "$id" ]; then
				"$T_TMP/wake.sh" "$1" &
				pg_sql "UPDATE environments SET state = 'running' WHERE id = '$1';
					UPDATE wake_requests SET state = 'done' WHERE id = $id" >/dev/null
				exit 0
			fi
			sleep 0.05
		done
	) &
	edged_track $!
}

edged_backend "$P_A" python3 "$TOOLS/wake_backend.py" "$P_A" || {
	t_fail "the always-on backend starts"
	t_exit
}

run_suite() { # BIN LABEL
	local bin=$1 v=$2 hdr
	: >"$T_TMP/wakes.log"
	: >"$T_TMP/sleeps.log"
	rm -f "$T_TMP/analytics.jsonl"
	if [ "$(pg_val "SELECT to_regclass('projects') IS NOT NULL")" = t ]; then
		pg_sql "TRUNCATE projects CASCADE; TRUNCATE edge_hosts, edge_change_log, request_events, wake_requests" >/dev/null 2>&1
	fi
	FILE_OD=0 write_conf
	if ! edged_start "$bin" "$T_TMP/edge.conf" -v; then
		t_fail "$v: edged starts" "$(tail -5 "$EDGED_LOG")"
		return
	fi
	# 0. migration 0008
	if [ "$(pg_val "SELECT to_regclass('wake_requests') IS NOT NULL AND to_regclass('environment_activity') IS NOT NULL")" = t ] &&
		[ "$(pg_val "SELECT count(*) FROM information_schema.columns WHERE table_name = 'request_events' AND column_name = 'cold_start_ms'")" = 1 ] &&
		[ "$(pg_val "SELECT count(*) FROM edge_schema WHERE version = 8")" = 1 ]; then
		t_ok "$v: migration 0008: wake_requests, environment_activity, request_events.cold_start_ms"
	else
		t_fail "$v: migration 0008" "$(pg_val 'SELECT version FROM edge_schema')"
	fi

	# 1. the rows: an on-demand environment nothing serves (sleeping),
	# an always-on one, and two bad rows
	pg_sql "BEGIN; INSERT INTO projects (id, name) VALUES ('dbp', 'dbp');
		$(env_sql od true sleeping "'1 second'" "$P_OD")
		$(env_sql plain false running NULL "$P_A")
		$(env_sql badidle true sleeping "'-5 seconds'" "$P_A")
		$(env_sql badstate false bogus NULL "$P_A")
		COMMIT;" >/dev/null
	if wait_code 200 plain.test && wait_envs "od" &&
		[ "$(env_field od state)" = sleeping ] &&
		[ "$(env_field od idle_timeout_ms)" = 1000 ]; then
		t_ok "$v: environments.on_demand and idle_timeout reach the registry: od sleeping, idle 1000 ms"
	else
		t_fail "$v: database on-demand environment" "$(code plain.test) [$(envs_ids)] $(tail -3 "$EDGED_LOG")"
	fi
	if edged_wait_log 'database: environments row badidle: idle_timeout -5(\.0+)? s: not between 0 and [0-9]+ s; skipped' &&
		edged_wait_log 'database: environments row badstate: state "bogus": not running, sleeping or waking; skipped' &&
		[ "$(code badidle.test)" != 200 ] && [ "$(code badstate.test)" != 200 ] &&
		[ "$(code plain.test)" = 200 ]; then
		t_ok "$v: bad rows (idle_timeout negative, state 'bogus') logged and skipped, the others apply"
	else
		t_fail "$v: bad rows" "$(code badidle.test) $(code badstate.test) $(grep -m2 'environments row' "$EDGED_LOG")"
	fi

	# 2. the first request wakes it
	orchestrate_once od
	hdr=$(curl -s -m 8 -D - -o /dev/null -H "Host: od.test" "http://127.0.0.1:$P_EDGE/")
	if grep -q '^HTTP/1.1 200' <<<"$hdr" && grep -qi '^X-Edge-Cold-Start: [0-9]' <<<"$hdr" &&
		[ "$(wakes od)" = 1 ] && [ "$(env_field od wakes_ok)" = 1 ]; then
		t_ok "$v: a database environment's first request asks the database once (a wake_requests row) and is served with $(grep -i '^X-Edge-Cold-Start' <<<"$hdr" | tr -d '\r')"
	else
		t_fail "$v: database wake" "$(head -1 <<<"$hdr") wakes $(wakes od) $(grep 'environment od' "$EDGED_LOG")"
	fi
	# 2b. the cold start in the analytics record: the file's line and
	# the request_events row (migration 0008's column); null for a
	# request that waited for no wake
	local i cold_db="" cold_file="" plain_db=""
	for ((i = 0; i < 100; i++)); do
		cold_db=$(pg_val "SELECT cold_start_ms FROM request_events WHERE host = 'od.test' AND status = 200")
		plain_db=$(pg_val "SELECT count(*) FROM request_events WHERE host = 'plain.test' AND cold_start_ms IS NULL")
		cold_file=$(python3 -c 'import json,sys
od = [json.loads(l) for l in open(sys.argv[1]) if "\"od.test\"" in l]
pl = [json.loads(l) for l in open(sys.argv[1]) if "\"plain.test\"" in l]
ok = od and all(type(x["cold_start_ms"]) is int for x in od if x["status"] == 200) and pl and all(x["cold_start_ms"] is None for x in pl)
print(od[0]["cold_start_ms"] if ok else "")' "$T_TMP/analytics.jsonl" 2>/dev/null)
		[ -n "$cold_db" ] && [ "$plain_db" -gt 0 ] && [ -n "$cold_file" ] && break
		sleep 0.05
	done
	if [ -n "$cold_db" ] && [ "$plain_db" -gt 0 ] && [ -n "$cold_file" ] &&
		grep -qi "^X-Edge-Cold-Start: $cold_db" <<<"$hdr"; then
		t_ok "$v: the woken request's cold start in analytics: request_events.cold_start_ms $cold_db, the file's cold_start_ms $cold_file (null for others)"
	else
		t_fail "$v: cold_start_ms" "db '$cold_db' plain $plain_db file '$cold_file' hdr $(grep -i cold <<<"$hdr")"
	fi
	# 3. idle_timeout from the row: asleep again
	if wait_field od state sleeping 250 &&
		[ "$(pg_val "SELECT state FROM environments WHERE id = 'od'")" = sleeping ] &&
		! grep -q '^sleep od$' "$T_TMP/sleeps.log"; then
		t_ok "$v: idle past the row's idle_timeout: environments.state sleeping (not the sleep command)"
	else
		t_fail "$v: database idle sleep" "$(env_field od state) $(pg_val "SELECT state FROM environments WHERE id = 'od'") $(cat "$T_TMP/sleeps.log")"
	fi
	pkill_od

	# 4. the bad rows fixed: they apply
	pg_sql "UPDATE environments SET idle_timeout = '30 seconds' WHERE id = 'badidle';
		UPDATE environments SET state = 'running' WHERE id = 'badstate'" >/dev/null
	if wait_code 200 badstate.test && wait_envs "badidle od" &&
		[ "$(env_field badidle idle_timeout_ms)" = 30000 ] &&
		[ "$(env_field badidle state)" = running ]; then
		t_ok "$v: the rows fixed apply (badstate routes, badidle on demand and running: its endpoint answers)"
	else
		t_fail "$v: fixed rows" "$(code badstate.test) [$(envs_ids)]"
	fi
	# 5. on_demand off in the database: out of the registry
	pg_sql "UPDATE environments SET on_demand = false WHERE id = 'badidle'" >/dev/null
	if wait_envs "od" && [ "$(code badidle.test)" = 200 ]; then
		t_ok "$v: on_demand switched off in the database: out of edgectl envs, served as any environment"
	else
		t_fail "$v: on_demand off" "[$(envs_ids)]"
	fi

	# 6. a reload refused for a route error (the file claims plain.test,
	# the database's) leaves the registry as it was, though the refused
	# file adds an on-demand environment
	FILE_OD=1 write_conf plain.test
	kill -HUP "$EPID"
	if edged_wait_log 'domain "plain.test" is claimed twice' &&
		sleep 0.3 && [ "$(envs_ids)" = "od" ] &&
		[ "$(code file-od.test)" != 200 ]; then
		t_ok "$v: a reload refused for a route error leaves edgectl envs as it was"
	else
		t_fail "$v: refused reload" "[$(envs_ids)] $(code file-od.test) $(grep -m1 'claimed twice' "$EDGED_LOG")"
	fi
	FILE_OD=1 write_conf
	kill -HUP "$EPID"
	if wait_envs "file-od od" && [ "$(env_field file-od state)" = sleeping ] &&
		[ "$(env_field od state)" = sleeping ]; then
		t_ok "$v: the next good reload adds the file's on-demand environment, the database's kept"
	else
		t_fail "$v: good reload" "[$(envs_ids)]"
	fi

	edged_stop 10
	edged_sanitizers_clean "$v: sanitizers"
	pkill_od
}
# the woken backend, whichever run started it
pkill_od() {
	[ -s "$T_TMP/od.pid" ] && kill "$(cat "$T_TMP/od.pid")" 2>/dev/null
	: >"$T_TMP/od.pid"
}

run_suite "$EDGED" edged
edged_asan && run_suite "$EDGED_ASAN" asan
t_exit
