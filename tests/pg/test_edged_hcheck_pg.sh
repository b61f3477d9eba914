#!/bin/bash
# test_edged_hcheck_pg.sh - active health checks of the database's
# deployments (deployments.health_check, migration 0012) against a real
# PostgreSQL 15 this test starts (tests/lib_pg.sh) and edged in database
# mode, in front of tests/tools/health_backend.py endpoints whose /healthz
# answers what the test writes in their status file:
#   - a deployment with two endpoints, its health_check set by an UPDATE
#     while one answers 500: that one ejected (logged, `edgectl upstream
#     list` down, every request to the other); answering 200 again: back;
#   - ejected again, then its check changed (another interval): it stays
#     out; the check removed (NULL): back in at once;
#   - bad values (an array, an unknown key, a bad duration, a string for
#     an integer, out of range, timeout over interval, an integer jansson
#     cannot hold; tests/unit/test_config_check.c has every shape) each
#     logged with the deployment's id and the reason and
#     counted (edge_db_rows_skipped_total{table="deployments.health_check"}),
#     the deployment served all the while and without a check, while
#     another project's good check in the same transaction ejects its
#     endpoint; a change of the same project that leaves the bad value as
#     it was neither logs nor counts it again;
#   - a deployment switched (the active one with a check deactivated for
#     one without): its endpoint back;
#   - an address the configuration file's deployment checks (tcp) and a
#     database deployment checks (http, answering 500): the file's check
#     used (logged once), the endpoint never ejected;
#   - edged restarted with the database stopped, from its local snapshot:
#     the database's check applies again; the snapshot's check edited out
#     of range (interval 1ms): the snapshot refused, edged runs on.
# Runs against build/edged and build/asan/edged. Needs root (the postgres
# user).
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
P_H1=$((BASE + 2))
P_H2=$((BASE + 3))
P_H3=$((BASE + 4))   # the file's endpoint, checked by both sources
P_NONE=$((BASE + 5)) # nothing listens there
P_PG=$((BASE + 6))
SOCK="$T_TMP/edged.sock"
H1="127.0.0.1:$P_H1"
H2="127.0.0.1:$P_H2"
H3="127.0.0.1:$P_H3"
HNONE="127.0.0.1:$P_NONE"
pg_begin "$P_PG"
chmod 755 "$T_TMP"

# a good check: 200 ms apart, two in a row either way
GOOD='{"type": "http", "path": "/healthz", "interval": "200ms", "timeout": "150ms", "rise": 2, "fall": 2}'

write_conf() { # FILE SNAPSHOT
	{
		edged_conf_head "$P_ADMIN" "$SOCK"
		cat <<CONF
pin_dir = "/sys/fs/bpf/edge-test-$T_ID-none";
pg = "$PG_CONNINFO";
pg_snapshot = "$2";
projects = (
  { id = "filep";
    environments = ( { id = "file-env"; domains = [ "file.test" ];
      deployment = { id = "file-d"; upstreams = [ "$H3" ];
        health_check = { type = "tcp"; interval = "200ms";
          timeout = "150ms"; fall = 2; }; }; } );
  }
);
CONF
	} >"$1"
}

ctl() { "$EDGECTL" --socket "$SOCK" "$@"; }

# get HOST: the name of the backend that answered (empty on an error)
get() {
	curl -s -m 5 -H "Host: $1" "http://127.0.0.1:$P_EDGE/x" |
		grep -o '"backend": "[^"]*"' | cut -d'"' -f4
}

# names N: who answered N requests to hc.test, sorted and unique
names() {
	local i
	for ((i = 0; i < $1; i++)); do get hc.test; done | sort -u | tr '\n' ' '
}

metric() {
	curl -s -m 5 "http://127.0.0.1:$P_ADMIN/metrics" | awk -v k="$1" '$1 == k { v = $2 } END { print v + 0 }'
}

# health ENDPOINT: its health in edgectl upstream list
health() {
	ctl upstream list | awk -v e="$1" '$1 == e { print $3 }'
}

# set_hc DEPLOYMENT VALUE: deployments.health_check = VALUE (SQL: NULL,
# or JSON dollar-quoted here)
set_hc() {
	if [ "$2" = NULL ]; then
		pg_sql "UPDATE deployments SET health_check = NULL WHERE id = '$1'" >/dev/null
	else
		pg_sql "UPDATE deployments SET health_check = \$j\$$2\$j\$ WHERE id = '$1'" >/dev/null
	fi
}

# wait_names WANT N: 0 once N requests are answered by WANT (names' form)
wait_names() {
	local i
	for ((i = 0; i < 100; i++)); do
		[ "$(names "$2")" = "$1" ] && return 0
		sleep 0.05
	done
	return 1
}

# snap_hc FILE DEPLOYMENT: 0 when the local snapshot FILE holds a
# health_check for the environment whose deployment is DEPLOYMENT
snap_hc() {
	python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
sys.exit(0 if any(e.get("deployment") == sys.argv[2] and e.get("health_check")
                  for p in d["projects"] for e in p["envs"]) else 1)' "$1" "$2" 2>/dev/null
}

# count PATTERN: lines of the log matching the fixed string PATTERN
count() { grep -cF -- "$1" "$EDGED_LOG"; }

# wait_count PATTERN N: 0 once N lines of the log match the fixed string
# PATTERN (5 s at most)
wait_count() {
	local i
	for ((i = 0; i < 100; i++)); do
		[ "$(count "$1")" -ge "$2" ] && return 0
		sleep 0.05
	done
	return 1
}

# wait_metric NAME WANT: 0 once /metrics says WANT for NAME (the
# database's counters are copied there every second; 5 s at most)
wait_metric() {
	local i
	for ((i = 0; i < 50; i++)); do
		[ "$(metric "$1")" = "$2" ] && return 0
		sleep 0.1
	done
	return 1
}

run_suite() { # BIN LABEL
	local bin=$1 v=$2 n0 n1 bad ok snap="$T_TMP/snap-$2/db.json"

	if [ "$(pg_val "SELECT to_regclass('projects') IS NOT NULL")" = t ]; then
		pg_sql "TRUNCATE projects CASCADE; TRUNCATE ip_rules, edge_hosts, edge_change_log" >/dev/null
	fi
	echo 200 >"$T_TMP/h1.status"
	echo 500 >"$T_TMP/h3.status"
	write_conf "$T_TMP/edge.conf" "$snap"
	EDGED_LOG="$T_TMP/edged-$v.log"
	if ! edged_start "$bin" "$T_TMP/edge.conf" -v; then
		t_fail "$v: edged starts" "$(tail -5 "$EDGED_LOG")"
		return
	fi

	# 1. a deployment of two endpoints, no check: both serve
	pg_sql "BEGIN;
		INSERT INTO projects (id, name) VALUES ('hc', 'hc');
		INSERT INTO environments (id, project_id, name) VALUES ('hc-prod', 'hc', 'production');
		INSERT INTO deployments (id, environment_id, active) VALUES ('d1', 'hc-prod', true);
		INSERT INTO endpoints VALUES ('d1', '$H1'), ('d1', '$H2');
		INSERT INTO domains (domain, environment_id) VALUES ('hc.test', 'hc-prod');
		COMMIT;" >/dev/null
	if wait_names "h1 h2 " 8; then
		t_ok "$v: a database deployment of two endpoints serves from both"
	else
		t_fail "$v: database deployment routed" "$(names 8) $(tail -3 "$EDGED_LOG")"
	fi

	# 2. its check set by an UPDATE while h1 answers 500: h1 ejected
	echo 500 >"$T_TMP/h1.status"
	set_hc d1 "$GOOD"
	if edged_wait_log "upstream $H1 ejected: health check failed 2 times in a row \(last: health check: status 5xx\)" &&
		[ "$(names 8)" = "h2 " ] && [ "$(health "$H1")" = down ] && [ "$(health "$H2")" = healthy ]; then
		t_ok "$v: health_check set by UPDATE: the endpoint answering 500 ejected (logged, upstream list down), traffic to the other"
	else
		t_fail "$v: ejected by the database's check" "$(names 8) $(health "$H1") $(grep upstream "$EDGED_LOG" | tail -3)"
	fi

	# 3. 200 again: back
	echo 200 >"$T_TMP/h1.status"
	if edged_wait_log "upstream $H1 is back: health check passed 2 times in a row" &&
		wait_names "h1 h2 " 8 && [ "$(health "$H1")" = healthy ]; then
		t_ok "$v: answering 200 again: back after rise = 2, traffic to both"
	else
		t_fail "$v: back" "$(names 8) $(health "$H1") $(grep upstream "$EDGED_LOG" | tail -3)"
	fi

	# 4. ejected again; the check changed: still out (until the new check
	# passes); removed: back in at once
	echo 500 >"$T_TMP/h1.status"
	wait_count "upstream $H1 ejected" 2 ||
		t_fail "$v: ejected again" "$(grep upstream "$EDGED_LOG" | tail -3)"
	set_hc d1 "${GOOD/200ms\"/300ms\"}"
	if pg_wait_applied && [ "$(names 8)" = "h2 " ] && [ "$(health "$H1")" = down ] &&
		[ "$(count "upstream $H1: no longer health-checked")" = 0 ] &&
		[ "$(count "upstream $H1 is back")" = 1 ]; then
		t_ok "$v: the check changed (interval 300ms) while the endpoint is out: it stays out"
	else
		t_fail "$v: changed check keeps it out" "$(names 8) $(health "$H1") $(grep upstream "$EDGED_LOG" | tail -3)"
	fi
	set_hc d1 NULL
	if edged_wait_log "upstream $H1: no longer health-checked, back in" &&
		wait_names "h1 h2 " 8 && [ "$(health "$H1")" = healthy ]; then
		t_ok "$v: health_check set to NULL: the endpoint back in at once, traffic to both"
	else
		t_fail "$v: check removed" "$(names 8) $(health "$H1") $(grep upstream "$EDGED_LOG" | tail -3)"
	fi

	# 5. bad values: each logged with the deployment and why, counted; the
	# deployment served without a check (h1 still answers 500 on
	# /healthz, never ejected); another project's good check in the same
	# transaction applies
	n0=$(metric 'edge_db_rows_skipped_total{table="deployments.health_check"}')
	pg_sql "BEGIN;
		UPDATE deployments SET health_check = '[1, 2]' WHERE id = 'd1';
		INSERT INTO projects (id, name) VALUES ('other', 'other');
		INSERT INTO environments (id, project_id, name) VALUES ('other-prod', 'other', 'production');
		INSERT INTO deployments (id, environment_id, active, health_check) VALUES ('d9', 'other-prod', true,
			'{\"type\": \"tcp\", \"interval\": \"200ms\", \"timeout\": \"100ms\", \"fall\": 2}');
		INSERT INTO endpoints VALUES ('d9', '$HNONE');
		INSERT INTO domains (domain, environment_id) VALUES ('other.test', 'other-prod');
		COMMIT;" >/dev/null
	if edged_wait_log "database: deployment 'd1': health_check: expected a JSON object, found an array; served without a health check" &&
		edged_wait_log "upstream $HNONE ejected: health check failed 2 times in a row \(last: health check: connect failed: Connection refused\)"; then
		t_ok "$v: an array refused (logged with deployment 'd1'), another project's good check in the same transaction ejects its endpoint"
	else
		t_fail "$v: bad value beside a good one" "$(grep -E "database|upstream" "$EDGED_LOG" | tail -4)"
	fi
	ok=1
	while IFS='|' read -r val why; do
		set_hc d1 "$val"
		if ! edged_wait_log "database: deployment 'd1': health_check: $why; served without a health check"; then
			ok=0
			t_fail "$v: bad value $val" "$(grep "deployment 'd1'" "$EDGED_LOG" | tail -2)"
		fi
	done <<'BAD'
{"type": "http", "bogus": 1}|bogus: unknown key
{"type": "http", "interval": "5x"}|interval: .*
{"type": "http", "rise": "2"}|rise: expected an integer, found a string
{"type": "http", "fall": 0}|fall: 0 is out of range 1\.\.100
{"type": "http", "interval": "1s", "timeout": "2s"}|timeout \(2000 ms\) is longer than interval \(1000 ms\)
{"type": "http", "rise": 1e400}|cannot read the JSON: .*
BAD
	n1=$((n0 + 7))
	if [ "$ok" = 1 ] && wait_metric 'edge_db_rows_skipped_total{table="deployments.health_check"}' "$n1" &&
		wait_names "h1 h2 " 8 &&
		[ "$(health "$H1")" = healthy ] && [ "$(count "upstream $H1 ejected")" = 2 ]; then
		t_ok "$v: 7 bad values each logged with the reason and counted; the deployment served by both endpoints, none ejected"
	else
		t_fail "$v: bad values" "ok $ok, counted $(($(metric 'edge_db_rows_skipped_total{table="deployments.health_check"}') - n0)) not 7, $(names 8) $(health "$H1")"
	fi
	# the same bad value read again (another change of its project): not
	# said or counted twice
	bad=$(count "database: deployment 'd1': health_check:")
	pg_sql "UPDATE environments SET name = 'prod' WHERE id = 'hc-prod'" >/dev/null
	# past the next copy of the counters to /metrics (every second)
	if pg_wait_applied && sleep 1.2 && [ "$(count "database: deployment 'd1': health_check:")" = "$bad" ] &&
		[ "$(metric 'edge_db_rows_skipped_total{table="deployments.health_check"}')" = "$n1" ]; then
		t_ok "$v: the project read again with the same bad value: not logged or counted again"
	else
		t_fail "$v: said once" "$(count "database: deployment 'd1': health_check:") lines, not $bad; counted $(metric 'edge_db_rows_skipped_total{table="deployments.health_check"}'), not $n1"
	fi

	# 6. a deployment with a check switched for one without: back
	set_hc d1 "$GOOD"
	wait_count "upstream $H1 ejected" 3 ||
		t_fail "$v: ejected a third time" "$(grep upstream "$EDGED_LOG" | tail -3)"
	n0=$(count "upstream $H1: no longer health-checked, back in")
	pg_sql "BEGIN;
		INSERT INTO deployments (id, environment_id) VALUES ('d2', 'hc-prod');
		INSERT INTO endpoints VALUES ('d2', '$H1'), ('d2', '$H2');
		UPDATE deployments SET active = (id = 'd2') WHERE environment_id = 'hc-prod';
		COMMIT;" >/dev/null
	if pg_wait_applied && wait_names "h1 h2 " 8 && [ "$(count "upstream $H1: no longer health-checked, back in")" = $((n0 + 1)) ]; then
		t_ok "$v: the deployment with the check deactivated for one without: the endpoint back"
	else
		t_fail "$v: deactivated" "$(names 8) $(grep upstream "$EDGED_LOG" | tail -3)"
	fi

	# 7. the file's endpoint checked by a database deployment too: the
	# file's (tcp) check is used, said once; never ejected by the
	# database's (http, /healthz answers 500)
	pg_sql "BEGIN;
		INSERT INTO projects (id, name) VALUES ('both', 'both');
		INSERT INTO environments (id, project_id, name) VALUES ('both-prod', 'both', 'production');
		INSERT INTO deployments (id, environment_id, active, health_check) VALUES ('d3', 'both-prod', true, \$j\$$GOOD\$j\$);
		INSERT INTO endpoints VALUES ('d3', '$H3');
		INSERT INTO domains (domain, environment_id) VALUES ('both.test', 'both-prod');
		COMMIT;" >/dev/null
	if edged_wait_log "upstream $H3: the configuration file's health check is used, the database's deployments.health_check for it is not"; then
		# five of the database check's intervals would have ejected it
		sleep 1
		pg_sql "UPDATE environments SET name = 'p' WHERE id = 'both-prod'" >/dev/null
		if pg_wait_applied && [ "$(count "upstream $H3 ejected")" = 0 ] && [ "$(health "$H3")" = healthy ] &&
			[ "$(count "upstream $H3: the configuration file's health check is used")" = 1 ]; then
			t_ok "$v: an address both the file and the database check: the file's check used (said once), never ejected by the database's"
		else
			t_fail "$v: the file's check wins" "health $(health "$H3"), $(grep "$H3" "$EDGED_LOG" | tail -3) $(ctl upstream list)"
		fi
	else
		t_fail "$v: the file's check wins" "$(grep -E "$H3|database" "$EDGED_LOG" | tail -3)"
	fi

	# 8. the local snapshot keeps a check: d2 given one (h1 still answers
	# 500), edged restarted with the database stopped
	set_hc d2 "$GOOD"
	for ((n1 = 0; n1 < 100; n1++)); do
		snap_hc "$snap" d2 && break
		sleep 0.05
	done
	snap_hc "$snap" d2 || t_fail "$v: the local snapshot holds d2's health_check" "$(head -c 300 "$snap")"
	edged_stop 10
	edged_sanitizers_clean "$v: sanitizers silent" && t_ok "$v: no sanitizer report"
	pg_stop
	EDGED_LOG="$T_TMP/edged-$v-snap.log"
	if edged_start "$bin" "$T_TMP/edge.conf" -v &&
		edged_wait_log "upstream $H1 ejected: health check failed 2 times in a row" &&
		[ "$(names 8)" = "h2 " ]; then
		t_ok "$v: restarted with the database stopped: the local snapshot's check applies (the endpoint answering 500 ejected)"
	else
		t_fail "$v: the snapshot's check" "$(grep -E "upstream|snapshot" "$EDGED_LOG" | tail -4)"
	fi
	edged_stop 10
	edged_sanitizers_clean "$v: sanitizers silent (from the snapshot)"
	# 8b. a snapshot whose check this edge refuses (interval 1ms, an
	# edited file): the snapshot refused with the reason, edged runs on
	python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
for p in d["projects"]:
    for e in p["envs"]:
        if e.get("health_check"):
            e["health_check"]["interval"] = "1ms"
json.dump(d, open(sys.argv[1], "w"))' "$snap"
	EDGED_LOG="$T_TMP/edged-$v-badsnap.log"
	if edged_start "$bin" "$T_TMP/edge.conf" -v &&
		edged_wait_log "not a snapshot of this edge's \\(refused\\)" &&
		kill -0 "$EPID" 2>/dev/null; then
		t_ok "$v: a snapshot with a health_check out of range: refused with the reason, edged runs on"
	else
		t_fail "$v: a bad snapshot check" "$(grep -E "snapshot|database|ERROR|Segm" "$EDGED_LOG" | tail -4)"
	fi
	edged_stop 10
	edged_sanitizers_clean "$v: sanitizers silent (a bad snapshot)"
	pg_start || t_fail "PostgreSQL starts again"
}

for n in 1 2 3; do
	p=$((BASE + 1 + n))
	if ! edged_backend "$p" python3 "$TOOLS/health_backend.py" "$p" "h$n" "$T_TMP/h$n.status"; then
		t_fail "health backend $n starts"
		t_exit
		exit
	fi
done
run_suite "$EDGED" edged
edged_asan && run_suite "$EDGED_ASAN" asan
t_exit
