#!/bin/bash
# test_edged_analytics_pg.sh - analytics into a real PostgreSQL 15
# (tests/lib_pg.sh): edged with pg set, in front of
# tests/tools/ok_backend.py, its events in request_events by COPY.
#
#   outage   10,000 requests from 4 concurrent clients while the database
#            is stopped for part of the run and started again: every
#            request's row is there exactly once (the X-Request-IDs the
#            clients got are the table's request_ids, no more, no fewer),
#            with its columns; the events went through the disk spool
#            (spilled, replayed) and /metrics says so
#   full     a small analytics.spool_max with the database down: edged
#            keeps answering 200, the events over the cap are dropped and
#            counted (dropped_spool_full), the rest land once it returns:
#            rows + dropped = requests
#   diskfull the spool directory on a full disk (a 256 KiB tmpfs; root
#            only) with the database down: the log says "No space left on
#            device" and the file, never "spool_max"; nothing is left
#            half-written; the events the disk could not take are dropped
#            and counted, the rest land once it returns: rows + dropped =
#            requests
#   restart  the database down, edged stopped with events spooled: the
#            files stay in analytics.spool, and the next edged replays
#            them at start (a torn and a corrupt file beside them are
#            skipped and counted)
#   hang     the database session edged writes through stops answering
#            (its backend SIGSTOPped): the batch's deadline drops it, a
#            new session carries on, every event lands once
#   rejects  rows PostgreSQL refuses (a CHECK constraint on user_agent, a
#            path longer than a narrowed column), among normal requests,
#            with the database up and then in one batch replayed after an
#            outage: every normal row lands, each refused event is dropped
#            alone, counted (result "rejected") and logged, no spool left
#   refused  an unusable spool directory is a start-up error saying why
#
# Runs against build/edged and build/asan/edged. As root, edged runs as
# "nobody" (the spool directory is made before the switch and given to
# it). Needs PostgreSQL 15 (skipped without it).
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/lib_edged.sh
. "$(dirname "$0")/../lib_edged.sh"
# shellcheck source=tests/lib_pg.sh
. "$(dirname "$0")/../lib_pg.sh"
edged_begin curl python3 psql
edged_need_build

# below 32768: a port of the ephemeral range may be any outgoing
# connection's (an admin port there was once taken: "Address already in use")
BASE=$(edged_ports 4)
P_EDGE=$BASE
P_BACK=$((BASE + 1))
P_ADMIN=$((BASE + 2))
P_PG=$((BASE + 3))
SOCK="$T_TMP/ctl/edged.sock"
RUSER=$(id -un)
if [ "$(id -u)" = 0 ] && id nobody >/dev/null 2>&1; then
	RUSER=nobody
fi

pg_begin "$P_PG"

# The schema: edgectl's migration runner when it has one, else the
# migration files as it would apply them.
an_migrate() {
	local f v
	if "$EDGECTL" --pg "$PG_CONNINFO" db migrate >/dev/null 2>&1; then
		return 0
	fi
	for f in "$T_ROOT"/userspace/pg/migrations/*.sql; do
		v=$(basename "$f")
		v=$((10#${v%%_*}))
		psql -X -q -v ON_ERROR_STOP=1 -d "$PG_CONNINFO" -f "$f" >/dev/null &&
			pg_sql "INSERT INTO edge_schema (version, applied_by) VALUES ($v, 'test_edged_analytics_pg')" >/dev/null ||
			return 1
	done
}
if ! an_migrate; then
	t_fail "schema applied"
	t_exit
	exit 1
fi
if ! edged_backend "$P_BACK" python3 "$TOOLS/ok_backend.py" "$P_BACK"; then
	t_fail "backend starts"
	t_exit
	exit 1
fi

# write_conf FILE HOST_NAME SPOOL_DIR [ANALYTICS_EXTRA]
write_conf() {
	{
		edged_conf_head "$P_ADMIN" "$SOCK" 2 "$RUSER"
		cat <<CONF
pin_dir = "$EDGE_PIN_DIR";
pg = "$PG_CONNINFO";
host_name = "$2";
analytics = { spool = "$3"; spool_memory = 512; ${4:-} };
projects = (
  { id = "shop";
    environments = ( { id = "shop-prod"; domains = [ "shop.test" ];
      deployment = { id = "shop-1"; upstreams = [ "127.0.0.1:$P_BACK" ]; }; } );
  }
);
CONF
	} >"$1"
}

# metric NAME_AND_LABELS: its value on /metrics (empty when absent)
metric() {
	curl -s -m 5 "http://127.0.0.1:$P_ADMIN/metrics" |
		awk -v k="$1" '$1 == k { print $2 }'
}
# pgm NAME [RESULT]: the pg sink's edge_analytics_NAME (0 when absent)
pgm() {
	local x
	x=$(metric "edge_analytics_${1}{sink=\"pg\"${2:+,result=\"$2\"}}")
	echo "${x:-0}"
}

# rows HOST_NAME: request_events rows edged HOST_NAME wrote
rows() { pg_val "SELECT count(*) FROM request_events WHERE edge_host = '$1'" 2>/dev/null; }

# wait_rows HOST_NAME N [SECONDS]: 0 once there are N rows (60 s)
wait_rows() {
	local i
	for ((i = 0; i < ${3:-60} * 4; i++)); do
		[ "$(rows "$1")" = "$2" ] && return 0
		sleep 0.25
	done
	return 1
}

# wait_progress FILE N: 0 once the client has had N responses (60 s)
wait_progress() {
	local i n
	for ((i = 0; i < 1200; i++)); do
		n=$(cat "$1" 2>/dev/null)
		[ "${n:-0}" -ge "$2" ] && return 0
		sleep 0.05
	done
	return 1
}

# client N OUT [RATE] [PROGRESS]: 4 concurrent keep-alive clients
client() {
	python3 "$TOOLS/reqid_client.py" "$P_EDGE" shop.test "$1" 4 "$2" \
		"${3:-0}" "${4:-}"
}

# same_ids HOST_NAME OUT: the table's request_ids for HOST_NAME are
# exactly the X-Request-IDs in the client's OUT, each once
same_ids() {
	pg_val "SELECT request_id FROM request_events WHERE edge_host = '$1'" >"$T_TMP/db_ids" || return 1
	python3 - "$T_TMP/db_ids" "$2" <<'PY'
import collections, sys
db = [l.strip() for l in open(sys.argv[1]) if l.strip()]
got = [l.split()[1] for l in open(sys.argv[2]) if len(l.split()) == 2]
dup = [k for k, c in collections.Counter(db).items() if c > 1]
missing = set(got) - set(db)
extra = set(db) - set(got)
if dup or missing or extra or len(set(got)) != len(got):
    print("db %d rows (%d duplicated), client %d ids (%d distinct); "
          "%d missing, %d extra" % (len(db), len(dup), len(got),
                                    len(set(got)), len(missing), len(extra)))
    sys.exit(1)
PY
}

# outage BIN V: 10,000 requests, the database stopped for part of them
outage() {
	local bin=$1 v=$2 host="out-$2" spool="$T_TMP/spool-out-$2" cpid why=""
	local at_stop at_start
	write_conf "$T_TMP/out.conf" "$host" "$spool"
	if ! edged_start "$bin" "$T_TMP/out.conf"; then
		t_fail "$v: outage: edged starts" "$(tail -5 "$EDGED_LOG")"
		return
	fi
	rm -f "$T_TMP/prog"
	client 10000 "$T_TMP/ids" 2000 "$T_TMP/prog" 2>"$T_TMP/client.err" &
	cpid=$!
	wait_progress "$T_TMP/prog" 2000 || why="client stalled before the stop"
	pg_stop || why="pg_stop failed"
	at_stop=$(cat "$T_TMP/prog")
	wait_progress "$T_TMP/prog" 7000 || why="client stalled while the database was down"
	at_start=$(cat "$T_TMP/prog")
	pg_start || why="pg_start failed"
	if ! wait "$cpid"; then
		why="client: $(head -3 "$T_TMP/client.err" | tr '\n' ' ')"
	fi
	if [ -n "$why" ]; then
		t_fail "$v: outage: 10000 requests answered 200 while the database went away" "$why"
	else
		t_ok "$v: outage: 10000 requests answered 200 ($((at_start - at_stop)) while the database was down)"
	fi
	if wait_rows "$host" 10000 && same_ids "$host" "$T_TMP/ids" >"$T_TMP/cmp"; then
		t_ok "$v: outage: every request's row in request_events exactly once"
	else
		t_fail "$v: outage: every request's row exactly once" \
			"$(rows "$host") rows; $(cat "$T_TMP/cmp" 2>/dev/null)"
	fi
	# the columns of one row, and of all
	pg_val "SELECT count(*) FROM request_events WHERE edge_host = '$host' AND kind = 'request' AND project_id = 'shop' AND environment_id = 'shop-prod' AND deployment_id = 'shop-1' AND host = 'shop.test' AND method = 'GET' AND path LIKE '/an/%' AND status = 200 AND outcome = 'ok' AND client_ip = '127.0.0.1' AND bytes_in > 0 AND bytes_out > 0 AND duration_us > 0 AND upstream_us >= 0 AND duration_us >= upstream_us AND time > now() - interval '10 minutes' AND time <= now() AND user_agent = E'reqid-client\\t\\\\1' AND tls_version IS NULL AND tls_cipher IS NULL AND tls_resumed IS NULL AND referrer IS NULL AND mover IS NULL AND upstream_addr = '127.0.0.1:$P_BACK' AND upstream_status = 200 AND http_version = 'HTTP/1.1' AND trace_id ~ '^[0-9a-f]{32}$' AND span_id ~ '^[0-9a-f]{16}$' AND attempts = 1" >"$T_TMP/cols" 2>&1
	if [ "$(cat "$T_TMP/cols")" = 10000 ]; then
		t_ok "$v: outage: each row's columns (route, request, status, bytes, durations, time, upstream_addr and upstream_status, http_version, trace_id and span_id, attempts)"
	else
		t_fail "$v: outage: each row's columns" "$(head -c 300 "$T_TMP/cols"); $(pg_val "SELECT * FROM request_events WHERE edge_host = '$host' LIMIT 1")"
	fi
	local spilled replayed written errs dropped up disk
	spilled=$(pgm disk_spool_events_total spilled)
	replayed=$(pgm disk_spool_events_total replayed)
	written=$(pgm events_total written)
	errs=$(pgm write_errors_total)
	dropped=$(($(pgm events_total dropped_spool_full) + $(pgm events_total dropped_shutdown) + $(metric 'edge_analytics_events_total{result="dropped_queue_full"}' | sed 's/^$/0/')))
	up=$(pgm sink_up)
	disk=$(pgm disk_spooled)
	if [ "${spilled:-0}" -gt 0 ] && [ "$replayed" = "$spilled" ] &&
		[ "$written" = 10000 ] && [ "${errs:-0}" -gt 0 ] &&
		[ "$dropped" = 0 ] && [ "$up" = 1 ] && [ "$disk" = 0 ]; then
		t_ok "$v: outage: /metrics: $spilled events spilled to disk and replayed, $errs failed writes, none dropped"
	else
		t_fail "$v: outage: /metrics" "spilled $spilled replayed $replayed written $written errors $errs dropped $dropped up $up disk $disk"
	fi
	edged_stop 30
	edged_sanitizers_clean "$v: outage: sanitizers" || true
}

# full BIN V: the database down and a small spool_max
full() {
	local bin=$1 v=$2 host="full-$2" spool="$T_TMP/spool-full-$2"
	local dropped written bytes why="" i
	write_conf "$T_TMP/full.conf" "$host" "$spool" 'spool_max = "256K";'
	pg_stop
	if ! edged_start "$bin" "$T_TMP/full.conf"; then
		t_fail "$v: full: edged starts" "$(tail -5 "$EDGED_LOG")"
		pg_start
		return
	fi
	client 6000 "$T_TMP/ids" 2>"$T_TMP/client.err" || why="client: $(head -3 "$T_TMP/client.err" | tr '\n' ' ')"
	sleep 1
	kill -0 "$EPID" 2>/dev/null || why="edged died: $(tail -3 "$EDGED_LOG")"
	[ "$(curl -s -m 5 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$P_ADMIN/healthz")" = 200 ] ||
		why="$why /healthz not 200"
	dropped=$(pgm events_total dropped_spool_full)
	bytes=$(pgm disk_spool_bytes)
	if [ -z "$why" ] && [ "${dropped:-0}" -gt 0 ] && [ "${bytes:-0}" -le $((256 * 1024)) ] &&
		grep -q 'disk spool is full' "$EDGED_LOG"; then
		t_ok "$v: full: 6000 requests served, $dropped events over spool_max dropped and counted, the spool at $bytes bytes"
	else
		t_fail "$v: full: served, dropped and counted" "${why:-dropped $dropped bytes $bytes}"
	fi
	pg_start
	# everything enqueued is written or was dropped
	for ((i = 0; i < 240; i++)); do
		[ $(($(pgm events_total written) + $(pgm events_total dropped_spool_full))) = 6000 ] && break
		sleep 0.25
	done
	written=$(pgm events_total written)
	dropped=$(pgm events_total dropped_spool_full)
	if [ "$written" -gt 0 ] && wait_rows "$host" "$written" &&
		[ $((written + dropped)) = 6000 ] &&
		[ "$(pg_val "SELECT count(DISTINCT request_id) FROM request_events WHERE edge_host = '$host'")" = "$written" ]; then
		t_ok "$v: full: the $written events kept landed once the database returned ($written + $dropped dropped = 6000)"
	else
		t_fail "$v: full: the events kept landed" "rows $(rows "$host"), written $written, dropped $dropped"
	fi
	edged_stop 30
	edged_sanitizers_clean "$v: full: sanitizers" || true
}

# diskfull BIN V: the spool on a 256 KiB tmpfs (spool_max far above it),
# the database down: the disk fills before the cap
diskfull() {
	local bin=$1 v=$2 host="df-$2" spool="$T_TMP/spool-df-$2"
	local dropped written errs bytes left why="" i
	if [ "$(id -u)" != 0 ]; then
		t_skip "$v: diskfull" "mounting a tmpfs needs root"
		return
	fi
	mkdir -p "$spool"
	if ! mount -t tmpfs -o "size=256k,mode=0700,uid=$(id -u "$RUSER")" \
		"edge-test-$T_ID" "$spool"; then
		t_fail "$v: diskfull: mount a 256 KiB tmpfs on $spool"
		return
	fi
	t_cleanup_add "umount -l '$spool'"
	write_conf "$T_TMP/df.conf" "$host" "$spool"
	pg_stop
	if ! edged_start "$bin" "$T_TMP/df.conf"; then
		t_fail "$v: diskfull: edged starts" "$(tail -5 "$EDGED_LOG")"
		pg_start
		umount -l "$spool"
		return
	fi
	client 6000 "$T_TMP/ids" 2>"$T_TMP/client.err" || why="client: $(head -3 "$T_TMP/client.err" | tr '\n' ' ')"
	edged_wait_log "analytics: pg sink: the disk spool cannot be written: $spool/\.tmp-[0-9]+-[0-9]{20}\.spool: (create|write|fsync|close|rename to its name): No space left on device; dropping events" ||
		why="$why; no 'No space left on device' line naming the file: $(grep 'disk spool' "$EDGED_LOG" | head -3 | tr '\n' ' ')"
	grep -q 'spool_max' "$EDGED_LOG" && why="$why; the cap blamed: $(grep spool_max "$EDGED_LOG" | head -1)"
	[ "$(grep -c 'disk spool cannot be written' "$EDGED_LOG")" = 1 ] ||
		why="$why; said $(grep -c 'disk spool cannot be written' "$EDGED_LOG") times, not once"
	dropped=$(pgm events_total dropped_spool_full)
	errs=$(pgm disk_spool_write_errors_total)
	bytes=$(pgm disk_spool_bytes)
	left=$(find "$spool" -name '.tmp-*' | wc -l)
	if [ -z "$why" ] && [ "${dropped:-0}" -gt 0 ] && [ "${errs:-0}" -gt 0 ] &&
		[ "${bytes:-0}" -gt 0 ] && [ "$bytes" -le $((256 * 1024)) ] && [ "$left" = 0 ]; then
		t_ok "$v: diskfull: 'No space left on device' and the file said once; $dropped events dropped and counted, $errs failed writes, nothing half-written, $bytes bytes spooled"
	else
		t_fail "$v: diskfull: the full disk said and counted" "${why:-dropped $dropped errors $errs bytes $bytes .tmp files $left}"
	fi
	pg_start
	for ((i = 0; i < 240; i++)); do
		[ $(($(pgm events_total written) + $(pgm events_total dropped_spool_full))) = 6000 ] && break
		sleep 0.25
	done
	written=$(pgm events_total written)
	dropped=$(pgm events_total dropped_spool_full)
	if [ "$written" -gt 0 ] && wait_rows "$host" "$written" &&
		[ $((written + dropped)) = 6000 ] &&
		[ "$(pgm events_total dropped_shutdown)" = 0 ] &&
		[ "$(pgm disk_spool_events_total replayed)" = "$(pgm disk_spool_events_total spilled)" ] &&
		[ "$(pg_val "SELECT count(DISTINCT request_id) FROM request_events WHERE edge_host = '$host'")" = "$written" ]; then
		t_ok "$v: diskfull: the $written events kept landed once the database returned ($written + $dropped dropped = 6000)"
	else
		t_fail "$v: diskfull: the events kept landed" "rows $(rows "$host"), written $written, dropped $dropped, spilled $(pgm disk_spool_events_total spilled) replayed $(pgm disk_spool_events_total replayed)"
	fi
	edged_stop 30
	edged_sanitizers_clean "$v: diskfull: sanitizers" || true
	umount -l "$spool"
}

# restart BIN V: events spooled when edged stops are replayed by the next
restart() {
	local bin=$1 v=$2 host="rs-$2" spool="$T_TMP/spool-rs-$2" files
	write_conf "$T_TMP/rs.conf" "$host" "$spool"
	pg_stop
	if ! edged_start "$bin" "$T_TMP/rs.conf"; then
		t_fail "$v: restart: edged starts" "$(tail -5 "$EDGED_LOG")"
		pg_start
		return
	fi
	if ! client 3000 "$T_TMP/ids" 2>"$T_TMP/client.err"; then
		t_fail "$v: restart: 3000 requests with the database down" "$(head -3 "$T_TMP/client.err")"
	fi
	edged_stop 30
	edged_sanitizers_clean "$v: restart: sanitizers (first run)" || true
	files=$(find "$spool" -name '*.spool' | wc -l)
	# beside them: a write cut short and a file that is not one
	printf 'EDGEASPL' >"$spool/.tmp-99999999999999999998.spool"
	head -c 100 /dev/urandom >"$spool/99999999999999999999.spool"
	pg_start
	if [ "$files" -gt 0 ] && [ "$(rows "$host")" = 0 ] &&
		grep -q 'events in memory, then in the disk spool' "$EDGED_LOG"; then
		t_ok "$v: restart: stopped with $files spool files, nothing in the database yet"
	else
		t_fail "$v: restart: spool files left at stop" "$files files, $(rows "$host") rows"
	fi
	if ! edged_start "$bin" "$T_TMP/rs.conf"; then
		t_fail "$v: restart: edged starts again" "$(tail -5 "$EDGED_LOG")"
		return
	fi
	if wait_rows "$host" 3000 && same_ids "$host" "$T_TMP/ids" >"$T_TMP/cmp" &&
		grep -q 'events from a previous run, replayed first' "$EDGED_LOG" &&
		[ "$(pgm disk_spool_corrupt_total)" = 2 ] &&
		[ "$(pgm disk_spool_events_total replayed)" = 3000 ]; then
		t_ok "$v: restart: the 3000 spooled events replayed at start, exactly once; a torn and a corrupt file counted"
	else
		t_fail "$v: restart: replayed at start" "rows $(rows "$host"), $(cat "$T_TMP/cmp" 2>/dev/null) corrupt $(pgm disk_spool_corrupt_total) replayed $(pgm disk_spool_events_total replayed)"
	fi
	if [ "$(find "$spool" -type f | wc -l)" = 0 ]; then
		t_ok "$v: restart: the spool is empty once replayed"
	else
		t_fail "$v: restart: the spool is empty once replayed" "$(find "$spool" -type f | tr '\n' ' ')"
	fi
	edged_stop 30
	edged_sanitizers_clean "$v: restart: sanitizers" || true
}

# hang BIN V: the database session edged writes through stops answering
# (its backend SIGSTOPped): the batch's deadline drops that connection
# and a new one carries on, so the events still land, once each
hang() {
	local bin=$1 v=$2 host="hang-$2" spool="$T_TMP/spool-hang-$2" pid
	write_conf "$T_TMP/hang.conf" "$host" "$spool"
	if ! edged_start "$bin" "$T_TMP/hang.conf"; then
		t_fail "$v: hang: edged starts" "$(tail -5 "$EDGED_LOG")"
		return
	fi
	client 10 "$T_TMP/ids0" >/dev/null 2>&1
	wait_rows "$host" 10 >/dev/null
	pid=$(pg_val "SELECT pid FROM pg_stat_activity WHERE application_name = 'edged analytics' LIMIT 1")
	if [ -z "$pid" ]; then
		t_fail "$v: hang: edged's analytics session in pg_stat_activity"
		edged_stop 30
		return
	fi
	kill -STOP "$pid"
	t_cleanup_add "kill -CONT $pid"
	client 500 "$T_TMP/ids" 2>"$T_TMP/client.err"
	# the deadline (15 s), a reconnect, then the batch
	if wait_rows "$host" 510 40 && grep -q 'no answer in 15000 ms' "$EDGED_LOG" &&
		[ "$(pg_val "SELECT count(DISTINCT request_id) FROM request_events WHERE edge_host = '$host'")" = 510 ] &&
		[ "$(pgm sink_connects_total)" -ge 2 ]; then
		t_ok "$v: hang: a session that stopped answering was dropped after its deadline; the events landed through a new one"
	else
		t_fail "$v: hang: the writer gets past a hung session" "rows $(rows "$host"), connects $(pgm sink_connects_total); $(grep -c 'no answer' "$EDGED_LOG") timeouts logged"
	fi
	kill -CONT "$pid"
	edged_stop 30
	edged_sanitizers_clean "$v: hang: sanitizers" || true
}

# rj_requests OUT: 12 requests, every 4th from 2 on with the user agent
# the CHECK refuses, every 4th from 3 on with a path too long for the
# narrowed column; OUT gets "good ID" or "bad ID" per request
rj_requests() {
	local i ua path id
	for ((i = 0; i < 12; i++)); do
		ua=rj-client path="/rj/$i"
		[ $((i % 4)) = 2 ] && ua=rj-refused
		[ $((i % 4)) = 3 ] && path="/rj/$i/$(printf 'x%.0s' {1..150})"
		id=$(curl -s -m 10 -o /dev/null -A "$ua" -H "Host: shop.test" \
			-w '%{http_code} %header{x-request-id}' "http://127.0.0.1:$P_EDGE$path")
		case "$id" in
		"200 "?*) ;;
		*) echo "request $i: $id" >&2; return 1 ;;
		esac
		if [ "$ua" = rj-client ] && [ "$path" = "/rj/$i" ]; then
			echo "good ${id#200 }"
		else
			echo "bad ${id#200 }"
		fi
	done >>"$1"
}

# rejects BIN V: events PostgreSQL refuses are dropped one by one, the
# rest of their batch and every event after them written
rejects() {
	local bin=$1 v=$2 host="rj-$2" spool="$T_TMP/spool-rj-$2" why="" i
	local first left
	if ! pg_sql "ALTER TABLE request_events
		ADD CONSTRAINT edge_test_refused CHECK (user_agent IS DISTINCT FROM 'rj-refused'),
		ALTER COLUMN path TYPE varchar(100)" >/dev/null; then
		t_fail "$v: rejects: the constraint and the narrowed column added"
		return
	fi
	write_conf "$T_TMP/rj.conf" "$host" "$spool"
	if ! edged_start "$bin" "$T_TMP/rj.conf"; then
		t_fail "$v: rejects: edged starts" "$(tail -5 "$EDGED_LOG")"
	else
		: >"$T_TMP/rj.ids"
		# the database up: each event in a batch of its own, or a few
		rj_requests "$T_TMP/rj.ids" 2>"$T_TMP/rj.err" || why="requests with the database up: $(cat "$T_TMP/rj.err")"
		for ((i = 0; i < 120; i++)); do
			[ "$(pgm sink_events_total rejected)" = 6 ] && [ "$(rows "$host")" = 6 ] && break
			sleep 0.25
		done
		[ "$(rows "$host")" = 6 ] ||
			why="$why with the database up: $(rows "$host") rows of 6, $(pgm sink_events_total rejected) of 6 rejected;"
		# down, then up: the 12 in one batch, replayed
		pg_stop || why="$why pg_stop failed"
		rj_requests "$T_TMP/rj.ids" 2>"$T_TMP/rj.err" || why="$why requests with the database down: $(cat "$T_TMP/rj.err")"
		pg_start || why="$why pg_start failed"
		awk '$1 == "good" { print "200", $2 }' "$T_TMP/rj.ids" >"$T_TMP/rj.good"
		for ((i = 0; i < 240; i++)); do
			[ "$(pgm sink_events_total rejected)" = 12 ] && [ "$(rows "$host")" = 12 ] && break
			sleep 0.25
		done
		first=$(awk '$1 == "bad" { print $2; exit }' "$T_TMP/rj.ids")
		left=$(find "$spool" -name '*.spool' 2>/dev/null | wc -l)
		if [ -z "$why" ] && [ "$(wc -l <"$T_TMP/rj.good")" = 12 ] &&
			same_ids "$host" "$T_TMP/rj.good" >"$T_TMP/cmp" &&
			[ "$(pgm sink_events_total rejected)" = 12 ] &&
			[ "$(pgm disk_spooled)" = 0 ] && [ "$left" = 0 ] &&
			grep -q "analytics: PostgreSQL refused the event of request $first: dropped" "$EDGED_LOG"; then
			t_ok "$v: rejects: 12 events PostgreSQL refused (a CHECK, a narrowed column) dropped one by one, counted and logged; the 12 normal rows around them written, with the database up and replayed in one batch"
		else
			t_fail "$v: rejects: refused events dropped alone" "${why:-rows $(rows "$host") of 12, $(cat "$T_TMP/cmp" 2>/dev/null) rejected $(pgm sink_events_total rejected) of 12, spooled $(pgm disk_spooled), $left spool files; $(grep 'analytics' "$EDGED_LOG" | tail -3)}"
		fi
		edged_stop 30
		edged_sanitizers_clean "$v: rejects: sanitizers" || true
	fi
	pg_sql "ALTER TABLE request_events DROP CONSTRAINT edge_test_refused,
		ALTER COLUMN path TYPE text" >/dev/null ||
		t_fail "$v: rejects: the table put back"
}

# refused BIN V: an unusable spool directory stops edged at start
refused() {
	local bin=$1 v=$2
	: >"$T_TMP/notadir"
	write_conf "$T_TMP/bad.conf" "bad-$v" "$T_TMP/notadir"
	expect "$v: refused: a spool path that is a file is a start-up error" 1 \
		"analytics.spool: cannot open $T_TMP/notadir: not a directory" \
		timeout 20 "$bin" -c "$T_TMP/bad.conf" -f
	write_conf "$T_TMP/bad.conf" "bad-$v" "$T_TMP/no/such/dir"
	expect "$v: refused: a spool directory whose parent is missing" 1 \
		"analytics.spool: cannot create $T_TMP/no/such/dir: No such file or directory (its parent must exist)" \
		timeout 20 "$bin" -c "$T_TMP/bad.conf" -f
	if [ "$RUSER" = nobody ]; then
		mkdir -p "$T_TMP/rootsdir"
		chmod 0700 "$T_TMP/rootsdir"
		write_conf "$T_TMP/bad.conf" "bad-$v" "$T_TMP/rootsdir"
		expect "$v: refused: a spool directory the user cannot write" 1 \
			"analytics.spool: $T_TMP/rootsdir is not writable by user \"nobody\"" \
			timeout 20 "$bin" -c "$T_TMP/bad.conf" -f
	fi
}

run_all() {
	outage "$1" "$2"
	pg_sql "TRUNCATE request_events" >/dev/null
	full "$1" "$2"
	diskfull "$1" "$2"
	restart "$1" "$2"
	hang "$1" "$2"
	rejects "$1" "$2"
	refused "$1" "$2"
	pg_sql "TRUNCATE request_events" >/dev/null
}

run_all "$EDGED" edged
if edged_asan; then
	run_all "$EDGED_ASAN" asan
fi
t_exit
