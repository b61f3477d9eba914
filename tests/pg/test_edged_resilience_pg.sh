#!/bin/bash
# test_edged_resilience_pg.sh - the database's retry, circuit, deadline
# and activity-class columns (migration 0028: deployments.retry, circuit
# and request_total; domains.wake, activity and request_total;
# environments.idle_timeout_background) against a real PostgreSQL 15
# this test starts (tests/lib_pg.sh) and edged in database mode (one
# worker: circuits are per worker), in front of tests/tools/fail_backend.py
# endpoints told what to answer by a mode file or the path's mode=WORD:
#   - retry: f1 answers 502, f2 200: with the row's retry group every GET
#     is a 200 (the 502 went again to f2); retry set NULL by an UPDATE:
#     502s come through;
#   - circuit: after 4 relayed 503s of min_requests 4, 503 circuit_open at
#     once (the backend receives no more); circuit set NULL: relayed again;
#   - request_total: a deployment's '1 second' (set by an UPDATE): a
#     hanging request answers 504 deadline_exceeded in about a second; a
#     path-prefix domains row's own (the deployment's NULL) does the same
#     for its paths;
#   - wake = false: an on-demand environment asleep (nothing listens at
#     its endpoint): its wake = false route answers 503
#     environment_sleeping and asks the database for no wake; activity
#     and idle_timeout_background shown by edgectl routes / envs --json;
#   - bad values (a retry with an unknown key, a circuit of 0%, a negative
#     request_total, an idle_timeout_background of 10 days, a domains
#     row's request_total of 2 days): each logged with its row and
#     reason, counted, the deployment served without it, the other rows
#     (and another project in the same transaction) applied; read again
#     unchanged: not said again;
#   - edged restarted with the database stopped: the local snapshot keeps
#     every column (retry: 200s; the route's deadline: 504; wake = false:
#     503 environment_sleeping).
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

BASE=$(edged_ports 6)
P_EDGE=$BASE
P_ADMIN=$((BASE + 1))
P_F1=$((BASE + 2))
P_F2=$((BASE + 3))
P_NONE=$((BASE + 4)) # nothing listens there: an environment asleep
P_PG=$((BASE + 5))
SOCK="$T_TMP/edged.sock"
F1="127.0.0.1:$P_F1"
F2="127.0.0.1:$P_F2"
LOG="$T_TMP/backends.jsonl"
pg_begin "$P_PG"
chmod 755 "$T_TMP"

write_conf() { # FILE SNAPSHOT
	{
		edged_conf_head "$P_ADMIN" "$SOCK" 1
		cat <<CONF
pin_dir = "/sys/fs/bpf/edge-test-$T_ID-none";
pg = "$PG_CONNINFO";
pg_snapshot = "$2";
timeouts = { upstream_response = "20s"; };
upstream = { eject_after = 1000; };
CONF
	} >"$1"
}

ctl() { "$EDGECTL" --socket "$SOCK" "$@"; }

metric() {
	curl -s -m 5 "http://127.0.0.1:$P_ADMIN/metrics" | awk -v k="$1" '$1 == k { v = $2 } END { print v + 0 }'
}

wait_metric() { # NAME WANT
	local i
	for ((i = 0; i < 50; i++)); do
		[ "$(metric "$1")" = "$2" ] && return 0
		sleep 0.1
	done
	return 1
}

# req HOST PATH: "STATUS ERROR" (ERROR the JSON body's error, "-" for
# none)
req() {
	local code
	code=$(curl -s -m 15 -o "$T_TMP/body" -w '%{http_code}' \
		-H "Host: $1" "http://127.0.0.1:$P_EDGE$2" 2>/dev/null)
	echo "$code $(python3 -c 'import json,sys
try: print(json.load(open(sys.argv[1]))["error"])
except Exception: print("-")' "$T_TMP/body")"
}

# reqs N HOST PATH: N requests' answers, sorted and unique, ", "-joined
reqs() {
	local i
	for ((i = 0; i < $1; i++)); do req "$2" "$3"; done | sort -u | paste -sd, - | sed 's/,/, /g'
}

wait_reqs() { # WANT N HOST PATH
	local i
	for ((i = 0; i < 50; i++)); do
		[ "$(reqs "$2" "$3" "$4")" = "$1" ] && return 0
		sleep 0.1
	done
	return 1
}

count() { grep -cF -- "$1" "$EDGED_LOG"; }

received() { wc -l <"$LOG" | tr -d ' '; }

# route_field DOMAIN PREFIX KEY: KEY of that route in edgectl routes --json
route_field() {
	ctl routes --json 2>/dev/null | python3 -c 'import json,sys
d = json.load(sys.stdin)
v = [r for r in d["routes"] if r["domain"] == sys.argv[1] and (r.get("prefix") or "") == sys.argv[2]]
print(v[0].get(sys.argv[3], "none") if v else "absent")' "$1" "$2" "$3"
}

env_field() { # ENV KEY
	ctl envs --json 2>/dev/null | python3 -c 'import json,sys
d = json.load(sys.stdin)
v = [e for e in d["environments"] if e["id"] == sys.argv[1]]
print(v[0][sys.argv[2]] if v else "absent")' "$1" "$2"
}

# timed HOST PATH SECS: "STATUS ERROR on-time" when the answer came
# between SECS - 0.1 and SECS + 1.5 s after the request (curl's own
# clock: a busy machine's python3 start-up not counted), else "STATUS
# ERROR after T s"
timed() {
	local out t
	out=$(curl -s -m 15 -o "$T_TMP/body" -w '%{http_code} %{time_total}' \
		-H "Host: $1" "http://127.0.0.1:$P_EDGE$2" 2>/dev/null)
	t=${out#* }
	echo "${out%% *} $(python3 -c 'import json,sys
try: print(json.load(open(sys.argv[1]))["error"])
except Exception: print("-")' "$T_TMP/body") $(python3 -c 'import sys
t, want = float(sys.argv[1]), float(sys.argv[2])
print("on-time" if want - 0.1 <= t <= want + 1.5 else "after %s s" % t)' "$t" "$3")"
}

project_sql() { # ID DOMAIN ENDPOINTS... : a project, environment, deployment
	local id=$1 dom=$2 ep
	shift 2
	echo "INSERT INTO projects (id, name) VALUES ('$id', '$id');
	INSERT INTO environments (id, project_id, name) VALUES ('$id-e', '$id', 'production');
	INSERT INTO deployments (id, environment_id, active) VALUES ('$id-d', '$id-e', true);
	INSERT INTO domains (domain, environment_id) VALUES ('$dom', '$id-e');"
	for ep in "$@"; do
		echo "INSERT INTO endpoints VALUES ('$id-d', '$ep');"
	done
}

# snap_has FILE: 0 when the local snapshot FILE holds rt-d's retry,
# the /probe route's wake = false and od-e's idle_timeout_background
snap_has() {
	python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
envs = [e for p in d["projects"] for e in p["envs"]]
ok = any(e.get("deployment") == "rt-d" and e.get("retry", {}).get("on") == ["502"] for e in envs)
ok = ok and any(len(x) == 4 and x[1] == "/probe" and x[3]["wake"] is False for e in envs for x in e["domains"])
ok = ok and any(e.get("idle_timeout_background_ms") == 30000 for e in envs)
sys.exit(0 if ok else 1)' "$1" 2>/dev/null
}

SKIP_UP='edge_db_rows_skipped_total{table="deployments.upstream"}'
SKIP_DOM='edge_db_rows_skipped_total{table="domains"}'
SKIP_IDS='edge_db_rows_skipped_total{table="ids"}'

run_suite() { # BIN LABEL
	local bin=$1 v=$2 n0 n1 d0 i0 said snap="$T_TMP/snap-$2/db.json" out

	if [ "$(pg_val "SELECT to_regclass('projects') IS NOT NULL")" = t ]; then
		pg_sql "TRUNCATE projects CASCADE; TRUNCATE ip_rules, edge_hosts, edge_change_log" >/dev/null
	fi
	echo 502 >"$T_TMP/f1.mode"
	echo ok >"$T_TMP/f2.mode"
	: >"$LOG"
	write_conf "$T_TMP/edge.conf" "$snap"
	EDGED_LOG="$T_TMP/edged-$v.log"
	if ! edged_start "$bin" "$T_TMP/edge.conf" -v; then
		t_fail "$v: edged starts" "$(tail -5 "$EDGED_LOG")"
		return
	fi
	pg_sql "BEGIN;
		$(project_sql rt retry.test "$F1" "$F2")
		UPDATE deployments SET retry = '{\"on\": [\"502\"], \"max\": 1, \"budget\": \"100%\", \"backoff\": \"1ms\"}' WHERE id = 'rt-d';
		$(project_sql cc circ.test "$F2")
		UPDATE deployments SET circuit = '{\"errors\": \"50%\", \"window\": \"60s\", \"min_requests\": 4, \"open_for\": \"1h\"}' WHERE id = 'cc-d';
		$(project_sql dl deadline.test "$F2")
		INSERT INTO domains (domain, path_prefix, environment_id, request_total) VALUES ('deadline.test', '/slow', 'dl-e', '1 second');
		$(project_sql od od.test "127.0.0.1:$P_NONE")
		UPDATE environments SET on_demand = true, state = 'sleeping', idle_timeout = '10 seconds', idle_timeout_background = '30 seconds' WHERE id = 'od-e';
		INSERT INTO domains (domain, path_prefix, environment_id, wake) VALUES ('od.test', '/probe', 'od-e', false);
		INSERT INTO domains (domain, path_prefix, environment_id, activity) VALUES ('od.test', '/sync', 'od-e', 'background');
		COMMIT;" >/dev/null
	pg_wait_applied || t_fail "$v: rows applied" "$(tail -3 "$EDGED_LOG")"

	# 1. retry from the row: f1's 502s go again to f2
	if wait_reqs "200 -" 8 retry.test /r; then
		t_ok "$v: deployments.retry: f1 answers 502, every GET a 200 (went again to f2)"
	else
		t_fail "$v: retry from the row" "$(reqs 8 retry.test /r)"
	fi
	pg_sql "UPDATE deployments SET retry = NULL WHERE id = 'rt-d'" >/dev/null
	if pg_wait_applied && wait_reqs "200 -, 502 -" 8 retry.test /r; then
		t_ok "$v: retry set NULL by an UPDATE: f1's 502s come through"
	else
		t_fail "$v: retry NULL" "$(reqs 8 retry.test /r)"
	fi

	# 2. circuit from the row: 4 relayed 503s open it
	: >"$LOG"
	out=$(for i in 1 2 3 4 5 6; do req circ.test "/c$i?mode=503"; done | paste -sd, -)
	n0=$(received)
	if [ "$out" = "503 -,503 -,503 -,503 -,503 circuit_open,503 circuit_open" ] && [ "$n0" = 4 ]; then
		t_ok "$v: deployments.circuit: 4 relayed 503s open it, then 503 circuit_open (4 received)"
	else
		t_fail "$v: circuit from the row" "$out; received $n0"
	fi
	pg_sql "UPDATE deployments SET circuit = NULL WHERE id = 'cc-d'" >/dev/null
	if pg_wait_applied && wait_reqs "200 -" 2 circ.test "/c?mode=ok"; then
		t_ok "$v: circuit set NULL by an UPDATE: served again"
	else
		t_fail "$v: circuit NULL" "$(reqs 2 circ.test "/c?mode=ok")"
	fi

	# 3. request_total: the route row's, then the deployment's
	out=$(timed deadline.test "/slow/x?mode=hang" 1)
	if [ "$out" = "504 deadline_exceeded on-time" ]; then
		t_ok "$v: a path-prefix domains row's request_total '1 second': 504 deadline_exceeded after a second"
	else
		t_fail "$v: route deadline" "$out"
	fi
	pg_sql "UPDATE deployments SET request_total = '2 seconds' WHERE id = 'dl-d'" >/dev/null
	pg_wait_applied
	out=$(timed deadline.test "/x?mode=hang" 2)
	if [ "$out" = "504 deadline_exceeded on-time" ]; then
		t_ok "$v: deployments.request_total '2 seconds' set by an UPDATE: 504 deadline_exceeded after 2 s"
	else
		t_fail "$v: deployment deadline" "$out"
	fi

	# 4. wake = false, activity, idle_timeout_background
	out=$(req od.test /probe/x)
	if [ "$out" = "503 environment_sleeping" ] &&
		[ "$(pg_val "SELECT count(*) FROM wake_requests")" = 0 ] &&
		[ "$(route_field od.test /probe wake)" = False ] &&
		[ "$(route_field od.test /sync activity)" = background ] &&
		[ "$(route_field od.test "" activity)" = app ] &&
		[ "$(env_field od-e idle_timeout_background_ms)" = 30000 ]; then
		t_ok "$v: domains.wake false: 503 environment_sleeping, no wake asked; activity and idle_timeout_background in effect"
	else
		t_fail "$v: wake = false" "$out; wakes $(pg_val "SELECT count(*) FROM wake_requests"); $(route_field od.test /probe wake) $(route_field od.test /sync activity) $(env_field od-e idle_timeout_background_ms)"
	fi
	if ! pg_sql "UPDATE domains SET wake = false WHERE domain = 'od.test' AND path_prefix = ''" >/dev/null 2>&1 &&
		! pg_sql "UPDATE domains SET activity = 'bg' WHERE domain = 'od.test' AND path_prefix = '/sync'" >/dev/null 2>&1; then
		t_ok "$v: the schema refuses wake on a row without a path_prefix and an activity but app or background"
	else
		t_fail "$v: domains CHECKs" "an UPDATE went in"
	fi

	# 5. bad values: logged, counted, the rest applied
	n0=$(metric "$SKIP_UP")
	d0=$(metric "$SKIP_DOM")
	i0=$(metric "$SKIP_IDS")
	pg_sql "BEGIN;
		UPDATE deployments SET retry = '{\"on\": [\"502\"], \"tries\": 2}' WHERE id = 'rt-d';
		UPDATE deployments SET circuit = '{\"errors\": \"0%\"}' WHERE id = 'cc-d';
		UPDATE deployments SET request_total = '-5 seconds' WHERE id = 'dl-d';
		INSERT INTO domains (domain, path_prefix, environment_id, request_total) VALUES ('deadline.test', '/long', 'dl-e', '2 days');
		$(project_sql ok ok.test "$F2")
		INSERT INTO projects (id, name) VALUES ('bg', 'bg');
		INSERT INTO environments (id, project_id, name, on_demand, idle_timeout_background) VALUES ('bg-e', 'bg', 'p', true, '10 days');
		COMMIT;" >/dev/null
	if edged_wait_log "database: deployment 'rt-d': retry: tries: unknown key; served without a retry group" &&
		edged_wait_log "database: deployment 'cc-d': circuit: errors: \"0%\": 0% would open the circuit on any request" &&
		edged_wait_log "database: deployment 'dl-d': timeouts: request_total -5[.0-9]* s: not between 0.001 and 86400 s; served without a deadline" &&
		edged_wait_log "database: domains row \(domain deadline.test, path_prefix /long\): request_total 172800[.0-9]* s: not between 0.001 and 86400 s; skipped" &&
		edged_wait_log "database: environments row bg-e: idle_timeout_background 864000[.0-9]* s: not between 1 and 604800 s; skipped" &&
		wait_metric "$SKIP_UP" $((n0 + 3)) && wait_metric "$SKIP_DOM" $((d0 + 1)) &&
		wait_metric "$SKIP_IDS" $((i0 + 1)); then
		t_ok "$v: bad retry, circuit, request_total, a route's request_total, idle_timeout_background: each logged with its row and reason, counted"
	else
		t_fail "$v: bad values logged and counted" "up $(metric "$SKIP_UP") (from $n0), domains $(metric "$SKIP_DOM") (from $d0), ids $(metric "$SKIP_IDS") (from $i0); $(grep database: "$EDGED_LOG" | tail -5)"
	fi
	if [ "$(reqs 8 retry.test /r)" = "200 -, 502 -" ] &&
		[ "$(reqs 4 circ.test "/c?mode=503")" = "503 -" ] &&
		[ "$(req circ.test "/c?mode=ok")" = "200 -" ] &&
		[ "$(req ok.test /x)" = "200 -" ] &&
		[ "$(timed deadline.test "/slow/y?mode=hang" 1)" = "504 deadline_exceeded on-time" ] &&
		[ "$(req deadline.test /z)" = "200 -" ]; then
		t_ok "$v: the deployments served without the refused settings (no retry, no circuit), the good rows and another project applied"
	else
		t_fail "$v: served beside bad values" "$(reqs 8 retry.test /r); $(reqs 4 circ.test "/c?mode=503"); $(req ok.test /x); $(timed deadline.test "/slow/y?mode=hang" 1)"
	fi
	said=$(count "database: deployment 'rt-d': retry:")
	n1=$(metric "$SKIP_UP")
	pg_sql "UPDATE environments SET name = 'again' WHERE id = 'rt-e'" >/dev/null
	if pg_wait_applied && sleep 1.2 && [ "$(count "database: deployment 'rt-d': retry:")" = "$said" ] &&
		[ "$(metric "$SKIP_UP")" = "$n1" ]; then
		t_ok "$v: the project read again with the same bad retry: not logged or counted again"
	else
		t_fail "$v: said once" "$(count "database: deployment 'rt-d': retry:") lines, not $said; counted $(metric "$SKIP_UP"), not $n1"
	fi

	# 6. the local snapshot: good values back, edged restarted with the
	# database stopped
	pg_sql "BEGIN;
		UPDATE deployments SET retry = '{\"on\": [\"502\"], \"max\": 1, \"budget\": \"100%\"}' WHERE id = 'rt-d';
		UPDATE deployments SET request_total = NULL WHERE id = 'dl-d';
		COMMIT;" >/dev/null
	pg_wait_applied
	wait_reqs "200 -" 8 retry.test /r || t_fail "$v: retry back" "$(reqs 8 retry.test /r)"
	for ((i = 0; i < 100; i++)); do
		snap_has "$snap" && break
		sleep 0.05
	done
	snap_has "$snap" || t_fail "$v: the local snapshot holds the columns" "$(head -c 300 "$snap")"
	edged_stop 10
	edged_sanitizers_clean "$v: sanitizers silent" && t_ok "$v: no sanitizer report"
	pg_stop
	EDGED_LOG="$T_TMP/edged-$v-snap.log"
	if edged_start "$bin" "$T_TMP/edge.conf" -v && wait_reqs "200 -" 8 retry.test /r &&
		[ "$(timed deadline.test "/slow/s?mode=hang" 1)" = "504 deadline_exceeded on-time" ] &&
		[ "$(req od.test /probe/y)" = "503 environment_sleeping" ] &&
		[ "$(route_field od.test /sync activity)" = background ] &&
		[ "$(env_field od-e idle_timeout_background_ms)" = 30000 ]; then
		t_ok "$v: restarted with the database stopped: the local snapshot keeps retry, the route's deadline, wake = false, activity, idle_timeout_background"
	else
		t_fail "$v: from the snapshot" "$(reqs 8 retry.test /r); $(timed deadline.test "/slow/s?mode=hang" 1); $(req od.test /probe/y); $(grep -E "snapshot|database" "$EDGED_LOG" | tail -3)"
	fi
	edged_stop 10
	edged_sanitizers_clean "$v: sanitizers silent (from the snapshot)"
	pg_start || t_fail "PostgreSQL starts again"
}

if ! edged_backend "$P_F1" python3 "$TOOLS/fail_backend.py" "$P_F1" f1 "$T_TMP/f1.mode" "$LOG" ||
	! edged_backend "$P_F2" python3 "$TOOLS/fail_backend.py" "$P_F2" f2 "$T_TMP/f2.mode" "$LOG"; then
	t_fail "backends start"
	t_exit
	exit
fi
run_suite "$EDGED" edged
edged_asan && run_suite "$EDGED_ASAN" asan
t_exit
