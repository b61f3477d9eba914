#!/bin/bash
# test_edged_hedge_cap_shed_pg.sh - the database's hedge, endpoint cap and
# brownout columns (migration 0029: deployments.hedge and max_inflight,
# environments.shed, domains.shed) against a real PostgreSQL 15 this test
# starts (tests/lib_pg.sh) and edged in database mode (one worker), in
# front of tests/tools/fail_backend.py endpoints (a mode file each, or the
# path's mode=WORD; each request logged with "active", the requests the
# backend was answering then):
#   - hedge: a deployment of f1 (every answer after 3 s) and f2 (at
#     once) with the row's '{"after": "50ms"}' (and a retry budget of
#     100 %: hedges take from it, 20 % would stop them): 6 GETs each answered
#     within 1.5 s, edge_upstream_hedges_total up; hedge set NULL by an
#     UPDATE: f1's requests take their 3 s;
#   - max_inflight: 6 requests at once of 400 ms each to a deployment of
#     one endpoint with max_inflight 2 (limits.max_queued 16: the ones
#     over it wait): all 200, the backend never
#     answering more than 2 at once; set NULL by an UPDATE: more than 2;
#   - shed: an environment with shed = true, a path-prefix row of it with
#     shed = false and one with shed NULL; edged stopped (SIGSTOP) 0.8 s
#     while requests are sent (limits.brownout_lag 250ms): the
#     environment's own paths and the NULL row's 503 overloaded, the
#     shed = false row's 200; environments.shed set false by an UPDATE:
#     the same stall sheds nothing;
#   - bad values: a hedge after "p10" and a max_inflight of 2000000 (the
#     CHECK dropped for it): each logged with the deployment and reason,
#     counted in edge_db_rows_skipped_total{table="deployments.upstream"},
#     the deployment served without it; read again: not said again;
#   - edged restarted with the database stopped: the local snapshot keeps
#     hedge, max_inflight and both sheds; a snapshot without them (an
#     older edge's) loads and serves, without them.
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

BASE=$(edged_ports 5)
P_EDGE=$BASE
P_ADMIN=$((BASE + 1))
P_F1=$((BASE + 2))
P_F2=$((BASE + 3))
P_PG=$((BASE + 4))
SOCK="$T_TMP/edged.sock"
F1="127.0.0.1:$P_F1"
F2="127.0.0.1:$P_F2"
LOG="$T_TMP/backends.jsonl"
STALL=0.8
pg_begin "$P_PG"
chmod 755 "$T_TMP"

write_conf() { # FILE SNAPSHOT
	{
		edged_conf_head "$P_ADMIN" "$SOCK" 1
		cat <<CONF
pin_dir = "/sys/fs/bpf/edge-test-$T_ID-none";
pg = "$PG_CONNINFO";
pg_snapshot = "$2";
limits = { brownout_lag = "250ms"; max_queued = 16; };
timeouts = { upstream_response = "20s"; queue = "10s"; };
upstream = { eject_after = 1000; };
CONF
	} >"$1"
}

metric() { edged_metric "$1"; }

# settled NAME: the value of NAME once two readings 0.5 s apart agree (a
# worker publishes its counters at its tick: the last request's may come
# late), 5 s at most
settled() {
	local i a b
	a=$(metric "$1")
	for ((i = 0; i < 10; i++)); do
		sleep 0.5
		b=$(metric "$1")
		[ "$a" = "$b" ] && break
		a=$b
	done
	echo "$b"
}

wait_metric() { # NAME WANT
	local i
	for ((i = 0; i < 50; i++)); do
		[ "$(metric "$1")" = "$2" ] && return 0
		sleep 0.1
	done
	return 1
}

req() { edged_req "$@"; }

count() { grep -cF -- "$1" "$EDGED_LOG"; }

received() { wc -l <"$LOG" | tr -d ' '; }

# timings N HOST: N sequential GETs; prints "STATUSES SLOW MAX": their
# statuses sorted and unique, how many took 1.5 s or more (curl's own
# clock), the longest
timings() {
	local i out codes="" slow=0 max=0 t
	for ((i = 0; i < $1; i++)); do
		out=$(curl -s -m 30 -o /dev/null -w '%{http_code} %{time_total}' \
			-H "Host: $2" "http://127.0.0.1:$P_EDGE/h$i" 2>/dev/null)
		codes+="${out%% *}"$'\n'
		t=${out#* }
		python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) >= 1.5 else 1)' "$t" && slow=$((slow + 1))
		max=$(python3 -c 'import sys; print(max(float(sys.argv[1]), float(sys.argv[2])))' "$max" "$t")
	done
	echo "$(sort -u <<<"$codes" | grep . | paste -sd, -) $slow $max"
}

burst() { edged_burst "$@"; }

# peak PATHPART: the most requests f2 answered at once among the logged
# requests whose path holds PATHPART
peak() {
	python3 - "$LOG" "$1" <<'PY'
import json, sys
m = 0
for l in open(sys.argv[1]):
    r = json.loads(l)
    if sys.argv[2] in r.get("path", ""):
        m = max(m, r["active"])
print(m)
PY
}

# stall NAME PATH...: stop edged, send one request to shed.test for each
# PATH (in the background, its answer in $T_TMP/NAME.N), continue edged
# after $STALL s, wait for all; prints the answers, ", "-joined
stall() {
	local name=$1 i=0 p pids=() out=""
	shift
	kill -STOP "$EPID"
	for p in "$@"; do
		(RF="$T_TMP/r.$name.$i" req shed.test "$p" >"$T_TMP/$name.$i") &
		pids+=($!)
		i=$((i + 1))
	done
	sleep "$STALL"
	kill -CONT "$EPID"
	wait "${pids[@]}"
	for ((i = 0; i < $#; i++)); do
		out+="$(cat "$T_TMP/$name.$i"), "
	done
	echo "${out%, }"
}

# stall_until WANT PATH...: stall until its answers are WANT (3 tries: a
# stall that ends before the requests were read sheds nothing); prints
# the last answers
stall_until() {
	local want=$1 i out
	shift
	for ((i = 0; i < 3; i++)); do
		out=$(stall "s$i" "$@")
		[ "$out" = "$want" ] && break
		sleep 0.5
	done
	echo "$out"
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

# snap_has FILE: 0 when the local snapshot FILE holds hd-d's hedge,
# cp-d's max_inflight, sh-e's shed and its /api row's shed = false
snap_has() {
	python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
envs = [e for p in d["projects"] for e in p["envs"]]
ok = any(e.get("deployment") == "hd-d" and e.get("hedge", {}).get("after") == "50ms" for e in envs)
ok = ok and any(e.get("deployment") == "cp-d" and e.get("max_inflight") == 2 for e in envs)
ok = ok and any(e.get("shed") is True for e in envs)
ok = ok and any(len(x) == 4 and x[1] == "/api" and x[3].get("shed") is False for e in envs for x in e["domains"])
sys.exit(0 if ok else 1)' "$1" 2>/dev/null
}

SKIP_UP='edge_db_rows_skipped_total{table="deployments.upstream"}'
HEDGES=edge_upstream_hedges_total
SHED_WANT="503 overloaded, 200 -, 503 overloaded"

run_suite() { # BIN LABEL
	local bin=$1 v=$2 n0 n1 h0 said snap="$T_TMP/snap-$2/db.json" out i b p s

	if [ "$(pg_val "SELECT to_regclass('projects') IS NOT NULL")" = t ]; then
		pg_sql "TRUNCATE projects CASCADE; TRUNCATE ip_rules, edge_hosts, edge_change_log" >/dev/null
	fi
	echo wait3000 >"$T_TMP/f1.mode"
	echo ok >"$T_TMP/f2.mode"
	: >"$LOG"
	write_conf "$T_TMP/edge.conf" "$snap"
	EDGED_LOG="$T_TMP/edged-$v.log"
	if ! edged_start "$bin" "$T_TMP/edge.conf" -v; then
		t_fail "$v: edged starts" "$(tail -5 "$EDGED_LOG")"
		return
	fi
	pg_sql "BEGIN;
		$(project_sql hd hedge.test "$F1" "$F2")
		UPDATE deployments SET hedge = '{\"after\": \"50ms\", \"max\": 1}',
			retry = '{\"on\": [\"connect\"], \"budget\": \"100%\"}' WHERE id = 'hd-d';
		$(project_sql cp cap.test "$F2")
		UPDATE deployments SET max_inflight = 2 WHERE id = 'cp-d';
		$(project_sql sh shed.test "$F2")
		UPDATE environments SET shed = true WHERE id = 'sh-e';
		INSERT INTO domains (domain, path_prefix, environment_id, shed) VALUES ('shed.test', '/api', 'sh-e', false);
		INSERT INTO domains (domain, path_prefix, environment_id) VALUES ('shed.test', '/more', 'sh-e');
		COMMIT;" >/dev/null
	pg_wait_applied || t_fail "$v: rows applied" "$(tail -3 "$EDGED_LOG")"

	# 1. hedge from the row: f1's 3 s answers overtaken by f2's
	h0=$(settled "$HEDGES")
	read -r out n0 n1 <<<"$(timings 6 hedge.test)"
	if [ "$out" = 200 ] && [ "$n0" = 0 ] && [ "$(settled "$HEDGES")" -gt "$h0" ]; then
		t_ok "$v: deployments.hedge after 50ms: 6 GETs each answered within 1.5 s (longest ${n1}s) though f1 takes 3 s; hedges $h0 -> $(metric "$HEDGES")"
	else
		t_fail "$v: hedge from the row" "statuses $out, $n0 slow, longest $n1; hedges $h0 -> $(metric "$HEDGES")"
	fi
	pg_sql "UPDATE deployments SET hedge = NULL WHERE id = 'hd-d'" >/dev/null
	pg_wait_applied
	h0=$(settled "$HEDGES")
	read -r out n0 n1 <<<"$(timings 4 hedge.test)"
	if [ "$out" = 200 ] && [ "$n0" -ge 1 ] && [ "$(settled "$HEDGES")" = "$h0" ]; then
		t_ok "$v: hedge set NULL by an UPDATE: f1's requests take their 3 s ($n0 of 4), none hedged"
	else
		t_fail "$v: hedge NULL" "statuses $out, $n0 slow, longest $n1; hedges $h0 -> $(metric "$HEDGES")"
	fi

	# 2. max_inflight from the row
	out=$(burst cap.test 6 "/cap1?mode=wait400")
	n0=$(peak /cap1)
	if [ "$out" = "6x200" ] && [ "$n0" -le 2 ] && [ "$n0" -ge 1 ]; then
		t_ok "$v: deployments.max_inflight 2: 6 requests at once all 200, the endpoint never answering more than $n0 at once"
	else
		t_fail "$v: max_inflight from the row" "$out; peak $n0"
	fi
	pg_sql "UPDATE deployments SET max_inflight = NULL WHERE id = 'cp-d'" >/dev/null
	pg_wait_applied
	out=$(burst cap.test 6 "/cap2?mode=wait600")
	n0=$(peak /cap2)
	if [ "$out" = "6x200" ] && [ "$n0" -gt 2 ]; then
		t_ok "$v: max_inflight set NULL by an UPDATE: the endpoint answers $n0 at once"
	else
		t_fail "$v: max_inflight NULL" "$out; peak $n0"
	fi

	# 3. shed: the environment's, a prefix row's own false, NULL inherits
	out=$(stall_until "$SHED_WANT" /x /api/1 /more/1)
	if [ "$out" = "$SHED_WANT" ]; then
		t_ok "$v: environments.shed true: a 0.8 s stall answers its paths and a shed NULL row's 503 overloaded, a shed = false prefix row's 200"
	else
		t_fail "$v: shed from the rows" "$out"
	fi
	pg_sql "UPDATE environments SET shed = false WHERE id = 'sh-e'" >/dev/null
	pg_wait_applied
	out=$(stall s9 /x /api/2 /more/2)
	if [ "$out" = "200 -, 200 -, 200 -" ]; then
		t_ok "$v: environments.shed set false by an UPDATE: the same stall sheds nothing"
	else
		t_fail "$v: shed false" "$out"
	fi
	if ! pg_sql "UPDATE domains SET shed = true WHERE domain = 'shed.test' AND path_prefix = ''" >/dev/null 2>&1 &&
		! pg_sql "UPDATE deployments SET max_inflight = -1 WHERE id = 'cp-d'" >/dev/null 2>&1; then
		t_ok "$v: the schema refuses shed on a row without a path_prefix and a negative max_inflight"
	else
		t_fail "$v: CHECKs" "an UPDATE went in"
	fi

	# 4. bad values: logged, counted, the deployment served without them
	n0=$(metric "$SKIP_UP")
	pg_sql "BEGIN;
		ALTER TABLE deployments DROP CONSTRAINT deployments_max_inflight_check;
		UPDATE deployments SET hedge = '{\"after\": \"p10\"}' WHERE id = 'hd-d';
		UPDATE deployments SET max_inflight = 2000000 WHERE id = 'cp-d';
		COMMIT;" >/dev/null
	if edged_wait_log "database: deployment 'hd-d': hedge: after: \"p10\": expected a percentile p50..p99 or a duration; served without hedging" &&
		edged_wait_log "database: deployment 'cp-d': max_inflight: 2000000 is out of range 0..1000000; served without a cap" &&
		wait_metric "$SKIP_UP" $((n0 + 2)); then
		t_ok "$v: a bad hedge and max_inflight: each logged with its deployment and reason, counted"
	else
		t_fail "$v: bad values logged and counted" "up $(metric "$SKIP_UP") (from $n0); $(grep database: "$EDGED_LOG" | tail -3)"
	fi
	h0=$(settled "$HEDGES")
	read -r out n0 n1 <<<"$(timings 2 hedge.test)"
	if [ "$out" = 200 ] && [ "$n0" -ge 1 ] && [ "$(settled "$HEDGES")" = "$h0" ] &&
		[ "$(burst cap.test 6 "/cap3?mode=wait600")" = "6x200" ] && [ "$(peak /cap3)" -gt 2 ]; then
		t_ok "$v: the deployments served without the refused hedge (f1's 3 s answer, no hedge) and cap (more than 2 at once)"
	else
		t_fail "$v: served beside bad values" "statuses $out, $n0 slow; hedges $h0 -> $(metric "$HEDGES"); peak $(peak /cap3)"
	fi
	said=$(count "database: deployment 'hd-d': hedge:")
	n1=$(metric "$SKIP_UP")
	pg_sql "UPDATE environments SET name = 'again' WHERE id = 'hd-e'" >/dev/null
	if pg_wait_applied && sleep 1.2 && [ "$(count "database: deployment 'hd-d': hedge:")" = "$said" ] &&
		[ "$(metric "$SKIP_UP")" = "$n1" ]; then
		t_ok "$v: the project read again with the same bad hedge: not logged or counted again"
	else
		t_fail "$v: said once" "$(count "database: deployment 'hd-d': hedge:") lines, not $said; counted $(metric "$SKIP_UP"), not $n1"
	fi

	# 5. the local snapshot: good values back, edged restarted with the
	# database stopped
	pg_sql "BEGIN;
		UPDATE deployments SET hedge = '{\"after\": \"50ms\"}' WHERE id = 'hd-d';
		UPDATE deployments SET max_inflight = 2 WHERE id = 'cp-d';
		ALTER TABLE deployments ADD CONSTRAINT deployments_max_inflight_check CHECK (max_inflight BETWEEN 0 AND 1000000);
		UPDATE environments SET shed = true WHERE id = 'sh-e';
		COMMIT;" >/dev/null
	pg_wait_applied
	for ((i = 0; i < 100; i++)); do
		snap_has "$snap" && break
		sleep 0.05
	done
	snap_has "$snap" || t_fail "$v: the local snapshot holds the columns" "$(head -c 400 "$snap")"
	edged_stop 10
	edged_sanitizers_clean "$v: sanitizers silent" && t_ok "$v: no sanitizer report"
	pg_stop
	EDGED_LOG="$T_TMP/edged-$v-snap.log"
	if edged_start "$bin" "$T_TMP/edge.conf" -v; then
		read -r out n0 n1 <<<"$(timings 4 hedge.test)"
		b=$(burst cap.test 6 "/cap4?mode=wait400")
		p=$(peak /cap4)
		s=$(stall_until "$SHED_WANT" /x /api/3 /more/3)
		if [ "$out" = 200 ] && [ "$n0" = 0 ] && [ "$b" = "6x200" ] && [ "$p" -le 2 ] &&
			[ "$s" = "$SHED_WANT" ]; then
			t_ok "$v: restarted with the database stopped: the local snapshot keeps hedge (4 GETs within 1.5 s), max_inflight (peak $p) and both sheds"
		else
			t_fail "$v: from the snapshot" "hedge: $out, $n0 slow; cap: $b, peak $p; shed: $s; $(grep -E "snapshot|database" "$EDGED_LOG" | tail -3)"
		fi
	else
		t_fail "$v: edged starts from the snapshot" "$(tail -5 "$EDGED_LOG")"
	fi
	edged_stop 10
	edged_sanitizers_clean "$v: sanitizers silent (from the snapshot)"
	# a snapshot an edge before 0029 wrote: the four keys taken out
	python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
for p in d["projects"]:
    for e in p["envs"]:
        for k in ("hedge", "max_inflight", "shed"):
            e.pop(k, None)
        for x in e["domains"]:
            if len(x) == 4:
                x[3].pop("shed", None)
json.dump(d, open(sys.argv[1], "w"))' "$snap"
	EDGED_LOG="$T_TMP/edged-$v-old.log"
	if edged_start "$bin" "$T_TMP/edge.conf" -v && edged_wait_log "serving the local snapshot" &&
		[ "$(req shed.test /x)" = "200 -" ] && [ "$(req cap.test "/c?mode=ok")" = "200 -" ] &&
		[ "$(stall old /x /api/4)" = "200 -, 200 -" ]; then
		t_ok "$v: a snapshot without the 0029 keys (an older edge's) loads and serves, without hedge, cap or shed"
	else
		t_fail "$v: an older snapshot" "$(grep -E "snapshot|database" "$EDGED_LOG" | tail -3)"
	fi
	edged_stop 10
	edged_sanitizers_clean "$v: sanitizers silent (an older snapshot)"
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
