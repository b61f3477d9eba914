#!/bin/bash
# test_edged_wake_shared_pg.sh - the database's shared wake protocol
# (docs/wake.md, "Database mode"): ONE PostgreSQL 15 (tests/lib_pg.sh),
# TWO edged on it (host-1 and host-2, their own ports), an on-demand
# environment of the database, sleeping, and a fake orchestrator here
# (pg_listen on environment_wake, wake_request_change and
# environment_sleep, psql for its answers):
#   1. concurrent first requests to both edged: exactly one wake_requests
#      row (requested_by one of the hosts), exactly one NOTIFY
#      environment_wake; the orchestrator starts the backend on a NEW
#      port and moves the endpoint there, sets the state running: every
#      request 200 from the new port (the route re-resolved) with
#      X-Edge-Cold-Start;
#   1b. requests to host-2 only until host-1's sleep has lost twice
#      (host-2's environment_activity row is recent; the retry after
#      3 s): the state stays running, no environment_sleep, the loss
#      logged once (not at every retry);
#   2. idle past the row's idle_timeout (2 s) on both: one NOTIFY
#      environment_sleep (one host's conditional update), state sleeping;
#   3. the orchestrator fails the wake (wake_requests.state 'failed'):
#      both hosts' waiting requests 503 wake_failed well before
#      wake.timeout, through NOTIFY wake_request_change; the state
#      back to sleeping with a back-off of 1 s (wake_retry_at, migration
#      0013's trigger), both hosts backing off;
#   3b. the fleet's back-off made longer in the database: once the
#      hosts' own back-off is over, a burst on both hosts asks the
#      database, which refuses: all 503 wake_failed with Retry-After,
#      no wake_requests row, no NOTIFY environment_wake;
#   3c. the orchestrator starts a backend that accepts and resets: the
#      woken endpoint fails its first requests, the wake failed in the
#      database once (wake_failures 2: the back-off doubles), one NOTIFY
#      environment_sleep (the orchestrator stops it), no second wake;
#   4. nobody answers: 503 wake_pending after wake.timeout on both, the
#      row's state 'timeout', and a back-off (4 s);
#   4b. the host that won a wake killed (-9) before the orchestrator
#      answers: the environment stays 'waking' with an open row; host-1
#      restarted; once the row is older than wake.timeout plus the
#      margin, concurrent requests to both hosts take the wake over:
#      exactly one new row and NOTIFY environment_wake, the old row
#      'stale', all served (migration 0011), and the served wake sets
#      wake_failures back to 0;
#   5. the database stopped: a request to the sleeping environment gets
#      503 wake_failed at once, edged still serving.
# Runs against build/edged and build/asan/edged. Needs root (postgres).
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/lib_edged.sh
. "$(dirname "$0")/../lib_edged.sh"
# shellcheck source=tests/lib_pg.sh
. "$(dirname "$0")/../lib_pg.sh"
# shellcheck source=tests/pg/lib_pgtest.sh
. "$(dirname "$0")/lib_pgtest.sh"
t_require_root
edged_begin curl python3 psql
edged_need_build

BASE=$(edged_ports 8)
P_E1=$BASE
P_E2=$((BASE + 1))
P_ADM1=$((BASE + 2))
P_ADM2=$((BASE + 3))
P_OLD=$((BASE + 4)) # the sleeping environment's endpoint (nothing there)
P_OD=$((BASE + 5))  # where the orchestrator starts it
P_PG=$((BASE + 6))
EDGECTL="$B/edgectl"
pg_begin "$P_PG"
chmod 755 "$T_TMP"
N=8 # requests per edged in a burst

write_conf() { # N PORT ADMIN [TIMEOUT]
	P_EDGE=$2 edged_conf_head "$3" "$T_TMP/e$1.sock" 2 >"$T_TMP/e$1.conf"
	cat >>"$T_TMP/e$1.conf" <<CONF
pin_dir = "/sys/fs/bpf/edge-test-$T_ID-none";
pg = "$PG_CONNINFO";
pg_snapshot = "";
host_name = "host-$1";
wake = { timeout = "${4:-10s}"; };
projects = ( );
CONF
}

# orch_start: pg_listen (its lines in $PGT_NOTES, pgt_listen_stop ends
# it) and the orchestrator reading them as they come; what it does with
# a wake is in $T_TMP/mode (start, fast: start build/tools/wakeback,
# fail, none)
orch_start() {
	local i
	PGT_NOTES="$T_TMP/notes.$RANDOM"
	"$PGT_LISTEN" "$PG_CONNINFO" 300 environment_wake wake_request_change \
		environment_sleep > >(tee "$PGT_NOTES" | orchestrate) 2>&1 &
	PGT_LPID=$!
	edged_track "$PGT_LPID"
	for ((i = 0; i < 200; i++)); do
		grep -qx ready "$PGT_NOTES" 2>/dev/null && return 0
		sleep 0.05
	done
	return 1
}
orchestrate() {
	local ch a b i
	while read -r ch a b _; do
		echo "$(date +%T.%N) $ch $a $b" >>"$T_TMP/orch.log"
		case "$ch:$(cat "$T_TMP/mode")" in
		environment_wake:start | environment_wake:fast)
			if [ "$(cat "$T_TMP/mode")" = fast ]; then
				"$B/tools/wakeback" "$P_OD" /dev/null &
			else
				python3 "$TOOLS/wake_backend.py" "$P_OD" &
			fi
			echo $! >>"$T_TMP/backend.pid"
			echo $! >>"$T_TMP/pids"
			for ((i = 0; i < 500; i++)); do
				(: <"/dev/tcp/127.0.0.1/$P_OD") 2>/dev/null && break
				sleep 0.01
			done
			orch_running "$a" "$b"
			;;
		environment_wake:reset)
			python3 "$TOOLS/reset_backend.py" "$P_OD" &
			echo $! >>"$T_TMP/backend.pid"
			echo $! >>"$T_TMP/pids"
			for ((i = 0; i < 500; i++)); do
				(: <"/dev/tcp/127.0.0.1/$P_OD") 2>/dev/null && break
				sleep 0.01
			done
			orch_running "$a" "$b"
			;;
		environment_wake:fail)
			sleep 0.3
			pg_sql "UPDATE wake_requests SET state = 'failed', error = 'no capacity', finished_at = now() WHERE id = $b" >/dev/null
			;;
		environment_sleep:*)
			kill_backends
			;;
		esac
	done
}
# orch_running ENV ROW: the environment runs on its new endpoint, and
# its row is done (only while the row is open: an edge host may have
# failed it meanwhile, its endpoint failing its first requests)
orch_running() {
	pg_sql "BEGIN; UPDATE endpoints SET address = '127.0.0.1:$P_OD' WHERE deployment_id = '$1-d';
		UPDATE environments SET state = 'running' WHERE id = '$1' AND state = 'waking'
		    AND EXISTS (SELECT 1 FROM wake_requests WHERE id = $2 AND state IN ('pending', 'started'));
		UPDATE wake_requests SET state = 'done', finished_at = now()
		    WHERE id = $2 AND state IN ('pending', 'started'); COMMIT" >/dev/null
}
# the backends the orchestrator started (one, unless edge woke twice)
kill_backends() {
	[ -s "$T_TMP/backend.pid" ] && xargs -r kill <"$T_TMP/backend.pid" 2>/dev/null
	: >"$T_TMP/backend.pid"
}
notes() { grep -c "^$1 " "$PGT_NOTES" 2>/dev/null || true; }

env_field() { # SOCK KEY
	"$EDGECTL" --socket "$1" envs --json 2>/dev/null |
		python3 -c 'import json,sys
v = [e for e in json.load(sys.stdin)["environments"] if e["id"] == "od"]
print(v[0][sys.argv[1]] if v else "absent")' "$2"
}
wait_both() { # KEY WANT
	local i
	for ((i = 0; i < 300; i++)); do
		[ "$(env_field "$T_TMP/e1.sock" "$1")" = "$2" ] &&
			[ "$(env_field "$T_TMP/e2.sock" "$1")" = "$2" ] && return 0
		sleep 0.02
	done
	return 1
}
# burst TAG: N requests to each edged at once; each one's head in
# $T_TMP/TAG.h.E.I, body in .b, curl's time in .t
burst() {
	local e i port pids=()
	for e in 1 2; do
		port=$P_E1
		[ $e = 2 ] && port=$P_E2
		for ((i = 0; i < N; i++)); do
			curl -s -m 10 -D "$T_TMP/$1.h.$e.$i" -o "$T_TMP/$1.b.$e.$i" \
				-w '%{time_total}' -H "Host: od.test" \
				"http://127.0.0.1:$port/" >"$T_TMP/$1.t.$e.$i" 2>/dev/null &
			pids+=($!)
		done
	done
	wait "${pids[@]}"
}
# backoff_over: 0 once both hosts say od is sleeping (their back-off
# over) and the database's wake_retry_at has passed
backoff_over() {
	local i
	for ((i = 0; i < 500; i++)); do
		wait_both state sleeping &&
			[ "$(pg_val "SELECT coalesce(wake_retry_at <= now(), true) FROM environments WHERE id = 'od'")" = t ] &&
			return 0
		sleep 0.05
	done
	return 1
}
# count TAG REGEX: how many of TAG's heads match
count() { cat "$T_TMP/$1".h.* 2>/dev/null | grep -c -E "$2" || true; }
slowest() { for f in "$T_TMP/$1".t.*; do cat "$f"; echo; done | sort -n | tail -1; }

run_suite() { # BIN LABEL
	local bin=$1 v=$2 e1 e2 n rows
	rm -f "$T_TMP"/b?.* "$T_TMP"/e?.log
	echo start >"$T_TMP/mode"
	if [ "$(pg_val "SELECT to_regclass('projects') IS NOT NULL")" = t ]; then
		pg_sql "TRUNCATE projects CASCADE; TRUNCATE edge_hosts, edge_change_log, wake_requests" >/dev/null 2>&1
	fi
	write_conf 1 "$P_E1" "$P_ADM1"
	write_conf 2 "$P_E2" "$P_ADM2"
	P_EDGE=$P_E1 EDGED_LOG="$T_TMP/e1.log"
	edged_start "$bin" "$T_TMP/e1.conf" -v || {
		t_fail "$v: edged host-1 starts" "$(tail -5 "$T_TMP/e1.log")"
		return
	}
	e1=$EPID
	P_EDGE=$P_E2 EDGED_LOG="$T_TMP/e2.log"
	edged_start "$bin" "$T_TMP/e2.conf" -v || {
		t_fail "$v: edged host-2 starts" "$(tail -5 "$T_TMP/e2.log")"
		kill "$e1"
		return
	}
	e2=$EPID
	if [ "$(pg_val "SELECT count(*) FROM edge_schema WHERE version = 9")" = 1 ]; then
		t_ok "$v: migration 0009 applied"
	else
		t_fail "$v: migration 0009" "$(pg_val 'SELECT version FROM edge_schema')"
	fi
	orch_start || t_fail "$v: the orchestrator listens" "$(cat "$PGT_NOTES")"
	pg_sql "BEGIN; INSERT INTO projects (id, name) VALUES ('dbp', 'dbp');
		INSERT INTO environments (id, project_id, name, on_demand, state, idle_timeout)
		    VALUES ('od', 'dbp', 'od', true, 'sleeping', '2 seconds');
		INSERT INTO deployments (id, environment_id, active) VALUES ('od-d', 'od', true);
		INSERT INTO endpoints VALUES ('od-d', '127.0.0.1:$P_OLD');
		INSERT INTO domains (domain, environment_id) VALUES ('od.test', 'od');
		COMMIT" >/dev/null
	if wait_both state sleeping; then
		t_ok "$v: both hosts hold od, sleeping"
	else
		t_fail "$v: od on both hosts" "$(env_field "$T_TMP/e1.sock" state) $(env_field "$T_TMP/e2.sock" state)"
	fi

	# 1. one wake for the fleet
	echo "$(date +%T.%N) burst b1" >>"$T_TMP/orch.log"
	burst b1
	rows=$(pg_val "SELECT count(*) || ' ' || min(requested_by) FROM wake_requests")
	n=$(count b1 '^X-Edge-Cold-Start: [0-9]+')
	if [ "$(count b1 '^HTTP/1.1 200')" = $((2 * N)) ] && [ "$n" = $((2 * N)) ] &&
		[ "$(cat "$T_TMP"/b1.b.* | grep -c "hello from $P_OD")" = $((2 * N)) ] &&
		[[ "$rows" =~ ^1\ host-[12]$ ]] && [ "$(notes environment_wake)" = 1 ]; then
		t_ok "$v: $((2 * N)) concurrent first requests on two hosts: one wake_requests row ($rows), one NOTIFY environment_wake, all 200 from the new endpoint with X-Edge-Cold-Start"
	else
		t_fail "$v: one wake for the fleet" "200s $(count b1 '^HTTP/1.1 200') cold $n rows '$rows' notes $(notes environment_wake) $(cat "$T_TMP"/b1.h.* | grep -m3 '^HTTP') $(grep -h 'environment od' "$T_TMP"/e?.log | tail -6)"
	fi
	if grep -q 'environment od: wake request [0-9]* sent' "$T_TMP/e1.log" "$T_TMP/e2.log" &&
		grep -q 'environment od: another host is waking it' "$T_TMP/e1.log" "$T_TMP/e2.log"; then
		t_ok "$v: one host sent the wake, the other waited for the route"
	else
		t_fail "$v: winner and loser in the logs" "$(grep -h 'environment od' "$T_TMP"/e?.log | tail -6)"
	fi

	# 1b. busy on host-2 only: host-1 idles, but the environment stays
	# running in the database (host-2's environment_activity row)
	# for as long as host-1 has lost its sleep twice (its retry after
	# WAKE_SLEEP_RETRY_MS): the loss logged once, not every retry
	local i codes="" lost=0 notes1
	for ((i = 0; i < 60; i++)); do
		codes+=$(curl -s -m 5 -o /dev/null -w '%{http_code} ' -H "Host: od.test" "http://127.0.0.1:$P_E2/")
		lost=$(grep -c 'environment od: left running in the database' "$T_TMP/e1.log")
		[ "$i" -ge 15 ] && [ "$lost" -ge 2 ] && break
		sleep 0.2
	done
	notes1=$(grep -c 'note: environment od: left running in the database' "$T_TMP/e1.log")
	if [ "$lost" -ge 2 ] &&
		[ "$(pg_val "SELECT state FROM environments WHERE id = 'od'")" = running ] &&
		[ "$(notes environment_sleep)" = 0 ] &&
		[ "$(pg_val "SELECT count(*) FROM environment_activity WHERE environment_id = 'od'")" = 2 ] &&
		[ "$codes" = "$(printf '200 %.0s' $(seq 0 "$i"))" ]; then
		t_ok "$v: idle on host-1 while host-2 serves: not asleep in the database (environment_activity of both hosts), host-2's $((i + 1)) requests all 200"
	else
		t_fail "$v: activity across hosts" "lost $lost $(pg_val "SELECT state FROM environments WHERE id = 'od'") sleeps $(notes environment_sleep) rows $(pg_val "SELECT string_agg(edge_host || ' ' || last_activity, '; ') FROM environment_activity") codes $codes $(grep -H 'environment od' "$T_TMP"/e?.log | grep -v debug | tail -6)"
	fi
	if [ "$notes1" = 1 ]; then
		t_ok "$v: host-1's sleep lost $lost times in a row, logged once (the retries at debug level)"
	else
		t_fail "$v: a lost sleep's retries flood the log" "$notes1 notes: $(grep 'left running' "$T_TMP/e1.log" | tail -4)"
	fi

	# 2. a last request on both hosts at once, then idle on both: each
	# host's first sleep loses to the other's activity (within the idle
	# timeout and the batching's slack), and a host tries again while it
	# stays idle: one sleep (without the retry, none ever: the database
	# kept od running)
	curl -s -m 5 -o /dev/null -H "Host: od.test" "http://127.0.0.1:$P_E1/" &
	local c1=$!
	curl -s -m 5 -o /dev/null -H "Host: od.test" "http://127.0.0.1:$P_E2/"
	wait "$c1"
	for ((i = 0; i < 300; i++)); do
		[ "$(pg_val "SELECT state FROM environments WHERE id = 'od'")" = sleeping ] && break
		sleep 0.05
	done
	if wait_both state sleeping && [ "$(pg_val "SELECT state FROM environments WHERE id = 'od'")" = sleeping ] &&
		sleep 0.3 && [ "$(notes environment_sleep)" = 1 ]; then
		t_ok "$v: idle past idle_timeout on both hosts at once: state sleeping, one NOTIFY environment_sleep$(grep -q 'trying again' "$T_TMP"/e?.log && echo ' (a lost sleep sent again)')"
	else
		t_fail "$v: sleep" "$(pg_val "SELECT state FROM environments WHERE id = 'od'") sleeps $(notes environment_sleep) $(grep -h 'environment od' "$T_TMP"/e?.log | grep -v debug | tail -6)"
	fi

	# 3. the orchestrator fails it: both hosts answer wake_failed at once
	echo fail >"$T_TMP/mode"
	burst b3
	local st
	# (the trigger's now() is the orchestrator's, as its finished_at)
	st=$(pg_val "SELECT e.state || ' ' || e.wake_failures || ' ' || extract(epoch FROM e.wake_retry_at - r.finished_at) FROM environments e, wake_requests r WHERE e.id = 'od' AND r.state = 'failed'")
	if [ "$(count b3 '^HTTP/1.1 503')" = $((2 * N)) ] &&
		[ "$(cat "$T_TMP"/b3.b.* | grep -o '"wake_failed"' | wc -l)" = $((2 * N)) ] &&
		awk -v t="$(slowest b3)" 'BEGIN { exit !(t < 5.0) }' &&
		[ "$(pg_val "SELECT count(*) FROM wake_requests WHERE state = 'failed'")" = 1 ] &&
		[ "$st" = "sleeping 1 1.000000" ] &&
		[ "$(env_field "$T_TMP/e1.sock" backoff_ms) $(env_field "$T_TMP/e2.sock" backoff_ms)" = "1000 1000" ]; then
		t_ok "$v: the orchestrator's 'failed': all $((2 * N)) requests on both hosts 503 wake_failed within $(slowest b3) s (timeout 10 s), state sleeping with a back-off of 1 s, both hosts backing off"
	else
		t_fail "$v: wake failed" "503s $(count b3 '^HTTP/1.1 503') slowest $(slowest b3) $(head -c 200 "$T_TMP/b3.b.1.0") $(pg_val "SELECT state FROM wake_requests ORDER BY id") od: $st; backoff_ms $(env_field "$T_TMP/e1.sock" backoff_ms) $(env_field "$T_TMP/e2.sock" backoff_ms); $(grep -h 'environment od' "$T_TMP"/e?.log | tail -4)"
	fi

	# 3b. the fleet's back-off, longer than the hosts' own (as another
	# host's longer wake.retry_max would make it): each host asks once
	# its own is over and is refused by the database
	pg_sql "UPDATE environments SET wake_retry_at = now() + interval '6 seconds' WHERE id = 'od'" >/dev/null
	wait_both state sleeping
	burst b3b
	n=$(cat "$T_TMP"/b3b.h.* | grep -c -E '^Retry-After: [2-6]')
	if [ "$(count b3b '^HTTP/1.1 503')" = $((2 * N)) ] &&
		[ "$(cat "$T_TMP"/b3b.b.* | grep -o '"wake_failed"' | wc -l)" = $((2 * N)) ] &&
		[ "$n" = $((2 * N)) ] &&
		[ "$(pg_val "SELECT count(*) FROM wake_requests")" = 2 ] &&
		[ "$(notes environment_wake)" = 2 ] &&
		grep -q 'environment od: its last wake failed (the database says): no wake for' "$T_TMP/e1.log" "$T_TMP/e2.log"; then
		t_ok "$v: the fleet's back-off in the database: both hosts' requests 503 wake_failed with the Retry-After it leaves, no row, no NOTIFY"
	else
		t_fail "$v: the fleet's back-off" "503s $(count b3b '^HTTP/1.1 503') retry-after $n rows $(pg_val "SELECT count(*) FROM wake_requests") notes $(notes environment_wake) $(grep -h '^Retry-After' "$T_TMP"/b3b.h.* | sort | uniq -c | tr '\n' ' ') $(grep -h 'environment od' "$T_TMP"/e?.log | tail -4)"
	fi

	# 3c. the woken endpoint accepts and resets: the wake failed, once
	backoff_over
	echo reset >"$T_TMP/mode"
	burst b3c
	for ((i = 0; i < 100; i++)); do
		[ "$(notes environment_sleep)" = 2 ] && break
		sleep 0.05
	done
	st=$(pg_val "SELECT state || ' ' || wake_failures FROM environments WHERE id = 'od'")
	n=$(($(curl -s "http://127.0.0.1:$P_ADM1/metrics" | awk '$1 == "edge_wakes_total{outcome=\"endpoint_failed\"}" { print $2 }') +
		$(curl -s "http://127.0.0.1:$P_ADM2/metrics" | awk '$1 == "edge_wakes_total{outcome=\"endpoint_failed\"}" { print $2 }')))
	if [ "$st" = "sleeping 2" ] && [ "$(notes environment_sleep)" = 2 ] &&
		[ "$(pg_val "SELECT count(*) FROM wake_requests")" = 3 ] && [ "$n" -ge 1 ] &&
		[ "$(count b3c '^HTTP/1.1 (502|503) ')" = $((2 * N)) ] &&
		! cat "$T_TMP"/b3c.b.* | grep -q environment_restarting &&
		awk -v t="$(slowest b3c)" 'BEGIN { exit !(t < 5.0) }' &&
		grep -q 'environment od: its wake failed in the database: asleep there, backing off (NOTIFY environment_sleep)' "$T_TMP/e1.log" "$T_TMP/e2.log"; then
		t_ok "$v: a woken endpoint that resets: its wake failed in the database once (wake_failures 2), one NOTIFY environment_sleep, no second wake, all answered within $(slowest b3c) s ($(cat "$T_TMP"/b3c.b.* | grep -o '"[a-z_]*"' | grep -v '"error"\|"message"\|"request_id"' | sort | uniq -c | tr -s ' \n' ' '))"
	else
		t_fail "$v: the woken endpoint fails" "od: $st sleeps $(notes environment_sleep) rows $(pg_val "SELECT count(*) FROM wake_requests") endpoint_failed $n slowest $(slowest b3c) $(cat "$T_TMP"/b3c.h.* | grep -h '^HTTP' | sort | uniq -c | tr -s ' \n' ' ') $(grep -h 'environment od' "$T_TMP"/e?.log | tail -4)"
	fi
	backoff_over

	# 4. nobody answers: wake_pending after the timeout (2 s now), the
	# row timeout
	echo none >"$T_TMP/mode"
	write_conf 1 "$P_E1" "$P_ADM1" 2s
	write_conf 2 "$P_E2" "$P_ADM2" 2s
	kill -HUP "$e1" "$e2"
	EDGED_LOG="$T_TMP/e1.log" edged_wait_log '^edged: note: reloaded'
	EDGED_LOG="$T_TMP/e2.log" edged_wait_log '^edged: note: reloaded'
	wait_both state sleeping
	burst b4
	for ((i = 0; i < 100; i++)); do
		[ "$(pg_val "SELECT state FROM wake_requests ORDER BY id DESC LIMIT 1")" = timeout ] && break
		sleep 0.05
	done
	if [ "$(count b4 '^HTTP/1.1 503')" = $((2 * N)) ] &&
		[ "$(cat "$T_TMP"/b4.b.* | grep -o '"wake_pending"' | wc -l)" = $((2 * N)) ] &&
		[ "$(pg_val "SELECT state FROM wake_requests ORDER BY id DESC LIMIT 1")" = timeout ] &&
		[ "$(pg_val "SELECT count(*) FROM wake_requests")" = 4 ] &&
		[ "$(notes environment_wake)" = 4 ] &&
		[ "$(pg_val "SELECT state || ' ' || wake_failures FROM environments WHERE id = 'od'")" = "sleeping 3" ]; then
		t_ok "$v: nobody answers: all $((2 * N)) requests 503 wake_pending (slowest $(slowest b4) s), one more row, its state 'timeout', a failed wake again (3 in a row)"
	else
		t_fail "$v: wake timeout" "503s $(count b4 '^HTTP/1.1 503') $(head -c 200 "$T_TMP/b4.b.1.0") rows $(pg_val "SELECT string_agg(state, ',' ORDER BY id) FROM wake_requests") notes $(notes environment_wake) od: $(pg_val "SELECT state || ' ' || wake_failures FROM environments WHERE id = 'od'")"
	fi
	backoff_over

	# 4b. a stale 'waking': the winning host dies before the orchestrator
	# answers (mode none), then it answers again (mode start)
	curl -s -m 10 -o /dev/null -H "Host: od.test" "http://127.0.0.1:$P_E1/" &
	local cpid=$! t0
	for ((i = 0; i < 200; i++)); do
		[ "$(pg_val "SELECT count(*) FROM wake_requests WHERE state = 'pending'")" = 1 ] && break
		sleep 0.05
	done
	kill -9 "$e1"
	t0=$(date +%s.%N)
	wait "$cpid" 2>/dev/null
	if [ "$(pg_val "SELECT state FROM environments WHERE id = 'od'")" = waking ] &&
		[ "$(pg_val "SELECT requested_by || ' ' || state FROM wake_requests ORDER BY id DESC LIMIT 1")" = "host-1 pending" ]; then
		t_ok "$v: host-1 killed (-9) after winning a wake: od 'waking' with host-1's open row"
	else
		t_fail "$v: a dead host's wake" "$(pg_val "SELECT state FROM environments WHERE id = 'od'") $(pg_val "SELECT string_agg(requested_by || ' ' || state, ',' ORDER BY id) FROM wake_requests")"
	fi
	P_EDGE=$P_E1 EDGED_LOG="$T_TMP/e1.log"
	edged_start "$bin" "$T_TMP/e1.conf" -v || t_fail "$v: edged host-1 restarts" "$(tail -5 "$T_TMP/e1.log")"
	e1=$EPID
	wait_both state sleeping
	# the row stale only after wake.timeout (2 s) plus the margin (2 s)
	awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { d = 4.3 - (b - a); if (d > 0) system("sleep " d) }'
	# the orchestrator starts build/tools/wakeback (a python start may
	# take longer than the 2 s wake.timeout on a loaded machine)
	echo fast >"$T_TMP/mode"
	burst b6
	# the orchestrator's answer may commit just after the probe saw
	# the port open
	for ((i = 0; i < 100; i++)); do
		[ "$(pg_val "SELECT count(*) FROM wake_requests WHERE state = 'pending'")" = 0 ] && break
		sleep 0.05
	done
	rows=$(pg_val "SELECT string_agg(requested_by || ' ' || state, ',' ORDER BY id) FROM wake_requests WHERE id > (SELECT max(id) - 2 FROM wake_requests)")
	# (wakeback listens within milliseconds: a request of the burst may
	# come after the wake and pay nothing)
	if [ "$(count b6 '^HTTP/1.1 200')" = $((2 * N)) ] &&
		[ "$(count b6 '^X-Edge-Cold-Start: [0-9]+')" -ge 1 ] &&
		[[ "$rows" =~ ^host-1\ stale,host-[12]\ done$ ]] &&
		[ "$(notes environment_wake)" = 6 ] &&
		[ "$(pg_val "SELECT wake_failures FROM environments WHERE id = 'od'")" = 0 ] &&
		[ "$(cat "$T_TMP"/e?.log | grep -c 'environment od: wake request [0-9]* of a host that stopped answering closed as stale')" = 1 ]; then
		t_ok "$v: past wake.timeout + 2 s, $((2 * N)) requests on both hosts take the dead host's wake over: one new row and NOTIFY ($rows), all 200 ($(count b6 '^X-Edge-Cold-Start: [0-9]+') with X-Edge-Cold-Start), wake_failures back to 0"
	else
		t_fail "$v: a stale wake taken over" "failures $(pg_val "SELECT wake_failures FROM environments WHERE id = 'od'") 200s $(count b6 '^HTTP/1.1 200') cold $(count b6 '^X-Edge-Cold-Start: [0-9]+') takeovers logged $(cat "$T_TMP"/e?.log | grep -c 'closed as stale') rows '$rows' notes $(notes environment_wake) $(cat "$T_TMP"/b6.b.* | grep -o '"wake_[a-z]*"' | sort | uniq -c | tr '\n' ' ') $(grep -h 'environment od' "$T_TMP"/e?.log | tail -6)"
	fi
	wait_both state sleeping

	# 5. the database away: wake_failed at once
	pgt_listen_stop
	wait_both state sleeping
	pg_stop
	edged_wait_log 'wake connection lost' || true
	EDGED_LOG="$T_TMP/e1.log" edged_wait_log 'wake connection lost'
	local t
	t=$(curl -s -m 10 -o "$T_TMP/b5" -w '%{http_code} %{time_total}' -H "Host: od.test" "http://127.0.0.1:$P_E1/")
	if [[ "$t" =~ ^503\  ]] && grep -q '"wake_failed"' "$T_TMP/b5" &&
		awk -v t="${t#* }" 'BEGIN { exit !(t < 1.0) }' &&
		grep -q 'environment od: the database is unreachable' "$T_TMP/e1.log" &&
		kill -0 "$e1" && kill -0 "$e2"; then
		t_ok "$v: the database stopped: 503 wake_failed in ${t#* } s, edged runs on"
	else
		t_fail "$v: database unreachable" "$t $(head -c 200 "$T_TMP/b5") $(tail -3 "$T_TMP/e1.log")"
	fi
	pg_start

	EPID=$e1 edged_stop 10
	EPID=$e2 edged_stop 10
	edged_sanitizers_clean "$v: sanitizers host-1" "$T_TMP/e1.log"
	edged_sanitizers_clean "$v: sanitizers host-2" "$T_TMP/e2.log"
	kill_backends
}

run_suite "$EDGED" edged
edged_asan && run_suite "$EDGED_ASAN" asan
t_exit
