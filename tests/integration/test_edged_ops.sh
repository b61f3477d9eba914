#!/bin/bash
# test_edged_ops.sh - operating edged: the control socket (edgectl routes,
# reload, status, stats, stats --watch without XDP), the admin listener
# (/metrics, /healthz), what both say while SIGTERM drains, and a
# configuration path that is not a regular file or is empty (--check,
# SIGHUP and edgectl reload refuse it with one message; the daemon
# neither exits nor blocks). edged runs on
# 127.0.0.1 high ports
# with a generated configuration, its control socket in the temp dir, in
# front of tests/tools/echo_backend.py. Runs against build/edged and
# build/asan/edged. Needs no root; as root it also checks the privilege
# drop (user "nobody") keeps the socket usable and removable, and gives
# nobody the pg_snapshot directory only when edged made it.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/lib_edged.sh
. "$(dirname "$0")/../lib_edged.sh"
edged_begin curl python3

BASE=$(edged_ports 4)
P_EDGE=$BASE
P_BACK=$((BASE + 1))
P_ADMIN=$((BASE + 2))
P_ADMIN2=$((BASE + 3))
SOCK="$T_TMP/ctl/edged.sock"

write_conf() { # FILE USER EXTRA_DOMAIN [BROKEN]
	{
		edged_conf_head "$P_ADMIN" "$SOCK" 2 "$2"
		cat <<CONF
pin_dir = "$EDGE_PIN_DIR";
timeouts = { drain = "10s"; upstream_response = "10s"; };
projects = (
  { id = "shop";
    environments = ( { id = "shop-prod"; domains = [ "shop.test" $3 ];
      deployment = { id = "shop-1"; upstreams = [ "127.0.0.1:$P_BACK" ]; }; } );
  },
  { id = "off"; enabled = false;
    environments = ( { id = "off-prod"; domains = [ "off.test" ];
      deployment = { id = "o1"; upstreams = [ "127.0.0.1:$P_BACK" ]; }; } );
  }
);
${4:-}
CONF
	} >"$1"
}

code() { # HOST PATH: the status edged answers
	curl -s -m 10 -o /dev/null -w '%{http_code}' -H "Host: $1" \
		"http://127.0.0.1:$P_EDGE$2"
}
admin() { # PATH: the admin listener's status; body in $T_TMP/admin
	curl -s -m 5 -o "$T_TMP/admin" -w '%{http_code}' "http://127.0.0.1:$P_ADMIN$1"
}
ctl() { "$EDGECTL" --socket "$SOCK" "$@"; }

# metric NAME_AND_LABELS: its value on /metrics (empty when absent)
metric() {
	admin /metrics >/dev/null
	awk -v k="$1" '$1 == k { print $2 }' "$T_TMP/admin"
}

# daemon_counter NAME: from edgectl stats --json (0 when absent)
daemon_counter() {
	local n
	n=$(ctl stats --json 2>/dev/null | json_field - "daemon.counters.$1")
	echo "${n:-0}"
}

# conf_as KIND: make $T_TMP/edge.conf a directory, a FIFO or an empty
# file; and the message config_load gives for it
conf_as() {
	rm -rf "$T_TMP/edge.conf"
	case $1 in
	dir) mkdir "$T_TMP/edge.conf" ;;
	fifo) mkfifo "$T_TMP/edge.conf" ;;
	empty) : >"$T_TMP/edge.conf" ;;
	esac
}
conf_msg() {
	case $1 in
	dir) echo "$T_TMP/edge.conf: not a regular file (a directory)" ;;
	fifo) echo "$T_TMP/edge.conf: not a regular file (a FIFO)" ;;
	empty) echo "$T_TMP/edge.conf: no settings (empty file?)" ;;
	esac
}

# refused_count: the reloads edged has refused so far (its log)
refused_count() { grep -c 'reload refused' "$EDGED_LOG"; }

# wait_refused N: 0 once edged has logged more than N refused reloads,
# 1 when it has not after 5 s (a reload that blocks or kills edged)
wait_refused() {
	local i
	for ((i = 0; i < 100; i++)); do
		[ "$(refused_count)" -gt "$1" ] && return 0
		sleep 0.05
	done
	return 1
}

# still_serving: edged runs, /healthz answers 200 and the old routes 200
still_serving() {
	kill -0 "$EPID" 2>/dev/null && [ "$(admin /healthz)" = 200 ] &&
		[ "$(code shop.test /)" = 200 ] && [ "$(code new.test /)" = 200 ]
}

# run_check BIN LABEL: --check refuses a directory, a FIFO (without
# blocking) and an empty file, exit 1 as for any bad configuration
run_check() {
	local bin=$1 v=$2 kind
	for kind in dir fifo empty; do
		conf_as "$kind"
		expect "$v: edged --check refuses a configuration that is $kind" 1 \
			"edged: $(conf_msg "$kind")" \
			timeout 10 "$bin" --check -c "$T_TMP/edge.conf"
	done
	rm -rf "$T_TMP/edge.conf"
}

# not_regular_reloads V: with edged serving route generation 2, the
# configuration replaced by a directory, a FIFO, an empty file: SIGHUP
# and edgectl reload each refuse it with the same message, and edged
# keeps serving the old configuration; a valid file then reloads
not_regular_reloads() {
	local v=$1 kind msg n out rc
	for kind in dir fifo empty; do
		conf_as "$kind"
		msg=$(conf_msg "$kind")
		n=$(refused_count)
		kill -HUP "$EPID"
		if wait_refused "$n" &&
			grep -qF "reload refused, keeping the running configuration: $msg" "$EDGED_LOG" &&
			still_serving; then
			t_ok "$v: SIGHUP with a configuration that is $kind: refused, still serving"
		else
			t_fail "$v: SIGHUP with a configuration that is $kind" \
				"$(tail -2 "$EDGED_LOG" | tr '\n' ' ')"
		fi
		out=$(timeout 10 "$EDGECTL" --socket "$SOCK" reload 2>&1)
		rc=$?
		if [ $rc = 1 ] && [ "$out" = "edgectl: $msg" ] && still_serving &&
			ctl status | grep -q 'route generation 2,'; then
			t_ok "$v: edgectl reload with a configuration that is $kind: exit 1 with the message, still serving"
		else
			t_fail "$v: edgectl reload with a configuration that is $kind" "exit $rc: $out"
		fi
	done
	rm -rf "$T_TMP/edge.conf"
	write_conf "$T_TMP/edge.conf" "$(id -un)" ', "new.test"'
	out=$(ctl reload 2>&1)
	if [ "$out" = "reloaded $T_TMP/edge.conf: route generation 3" ] && still_serving; then
		t_ok "$v: then a regular file reloads"
	else
		t_fail "$v: reload after the refused ones" "$out"
	fi
}

start_edged() { # BIN USER
	write_conf "$T_TMP/edge.conf" "$2" ""
	edged_start "$1" "$T_TMP/edge.conf" -v &&
		edged_wait_port "$P_ADMIN" && [ -S "$SOCK" ]
}

run_suite() { # BIN LABEL
	local bin=$1 v=$2 out n rc slow
	if ! start_edged "$bin" "$(id -un)"; then
		t_fail "$v: edged starts" "$(tail -5 "$EDGED_LOG")"
		kill -9 "$EPID" 2>/dev/null
		return
	fi
	t_ok "$v: edged starts with its control socket and admin listener"

	if [ "$(stat -c %a "$SOCK")" = 600 ] && [ "$(stat -c %a "$(dirname "$SOCK")")" = 700 ]; then
		t_ok "$v: socket 0600 in a directory 0700"
	else
		t_fail "$v: socket mode" "$(stat -c '%a %n' "$SOCK" "$(dirname "$SOCK")")"
	fi

	out=$(ctl routes 2>&1)
	if grep -q '^shop.test .* shop .*shop-prod .*shop-1 .*127.0.0.1:'"$P_BACK" <<<"$out" &&
		grep -q '^off.test .*(project disabled)' <<<"$out" &&
		grep -q '^route generation 1$' <<<"$out"; then
		t_ok "$v: edgectl routes shows the configured domains"
	else
		t_fail "$v: edgectl routes" "$out"
	fi
	if ctl routes --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
doms = sorted(r["domain"] for r in d["routes"])
assert doms == ["off.test", "shop.test"], doms
assert d["generation"] == 1'; then
		t_ok "$v: edgectl routes --json parses and has the routes"
	else
		t_fail "$v: edgectl routes --json" "$(ctl routes --json 2>&1 | head -c 300)"
	fi

	out=$(ctl status 2>&1)
	if grep -q "^daemon: *running, pid $EPID, edged .*, route generation 1, 2 workers ($SOCK)" <<<"$out"; then
		t_ok "$v: edgectl status shows the daemon line"
	else
		t_fail "$v: edgectl status" "$(grep daemon <<<"$out")"
	fi

	if [ "$(admin /healthz)" = 200 ] && grep -qx ok "$T_TMP/admin"; then
		t_ok "$v: /healthz 200 while serving"
	else
		t_fail "$v: /healthz" "$(cat "$T_TMP/admin")"
	fi

	n=$(daemon_counter requests_total)
	if [ "$(code shop.test /)" = 200 ] && [ "$(code nowhere.test /)" = 503 ] &&
		[ "$(code off.test /)" = 403 ]; then
		t_ok "$v: three requests: 200, 503, 403"
	else
		t_fail "$v: requests" "unexpected statuses"
	fi
	if [ "$(daemon_counter requests_total)" = $((n + 3)) ] &&
		[ "$(daemon_counter requests_ok)" = 1 ] &&
		[ "$(daemon_counter requests_domain_not_found)" = 1 ] &&
		[ "$(daemon_counter requests_project_disabled)" = 1 ] &&
		[ "$(daemon_counter responses_2xx)" = 1 ]; then
		t_ok "$v: edgectl stats: the daemon's request counters moved"
	else
		t_fail "$v: edgectl stats" "$(ctl stats --json 2>&1 | head -c 400)"
	fi
	out=$(ctl stats 2>&1)
	if grep -q '^DAEMON COUNTER' <<<"$out" && grep -q '^requests_ok  *1$' <<<"$out"; then
		t_ok "$v: edgectl stats prints the daemon's table"
	else
		t_fail "$v: edgectl stats table" "$out"
	fi
	if [ "$(metric 'edge_requests_total{outcome="ok"}')" = 1 ] &&
		[ "$(metric 'edge_requests_total{outcome="domain_not_found"}')" = 1 ] &&
		[ "$(metric 'edge_requests_total{outcome="project_disabled"}')" = 1 ] &&
		[ "$(metric 'edge_requests_total{outcome="bad_request"}')" = 0 ] &&
		[ "$(metric 'edge_responses_total{class="5xx"}')" = 1 ] &&
		[ "$(metric 'edge_request_duration_seconds_count')" = 3 ] &&
		[ "$(metric 'edge_upstream_duration_seconds_count')" = 1 ] &&
		[ "$(metric 'edge_route_generation')" = 1 ] &&
		[ -n "$(metric 'edge_connections')" ]; then
		t_ok "$v: /metrics counts requests by outcome, class, and times them"
	else
		t_fail "$v: /metrics" "$(grep -E '^edge_(requests_total|responses|route|connections|request_duration_seconds_count)' "$T_TMP/admin" | tr '\n' ' ')"
	fi

	# the build and the process, under the names Prometheus clients use
	local commit now start fds rss
	commit=$(git -C "$T_ROOT" describe --always --abbrev=12 2>/dev/null || echo unknown)
	now=$(date +%s)
	start=$(metric process_start_time_seconds)
	fds=$(metric process_open_fds)
	rss=$(metric process_resident_memory_bytes)
	if grep -Eq "^edge_build_info\{version=\"[0-9.]+\",commit=\"$commit(-dirty)?\"\} 1\$" "$T_TMP/admin" &&
		grep -q '^# TYPE process_cpu_seconds_total counter$' "$T_TMP/admin" &&
		grep -Eq '^process_cpu_seconds_total [0-9]+(\.[0-9]+)?$' "$T_TMP/admin" &&
		[ -n "$start" ] && [ "${start%.*}" -le "$now" ] && [ "${start%.*}" -ge $((now - 600)) ] &&
		[ -n "$fds" ] && [ "$fds" -ge 5 ] &&
		[ "$fds" -le "$(metric process_max_fds)" ] &&
		[ -n "$rss" ] && [ "$rss" -gt 1000000 ] &&
		[ "$(metric process_threads)" -ge 3 ] &&
		[ "$(metric process_virtual_memory_bytes)" -gt "$rss" ]; then
		t_ok "$v: /metrics: edge_build_info names the commit; process_* (start $start, $fds fds, rss $rss)"
	else
		t_fail "$v: /metrics build and process" "$(grep -E '^(edge_build_info|process_)' "$T_TMP/admin" | tr '\n' ' ')"
	fi

	# the upstream pool, as the workers publish it at their 1 s tick: each
	# of the 2 workers has its own pool, so of these 3 requests to one
	# backend (the first above) at most 2 connect and at least 1 reuses
	code shop.test / >/dev/null
	code shop.test / >/dev/null
	sleep 1.3
	local hit miss
	hit=$(metric 'edge_upstream_pool_total{result="hit"}')
	miss=$(metric 'edge_upstream_pool_total{result="miss"}')
	if [ "$miss" -ge 1 ] && [ "$miss" -le 2 ] && [ "$hit" -ge 1 ] &&
		[ $((hit + miss)) = 3 ] &&
		[ "$(metric 'edge_upstream_pool_idle')" -ge 1 ] &&
		[ "$(metric 'edge_upstream_endpoints')" -ge 1 ] &&
		[ "$(metric 'edge_upstream_ejections_total')" = 0 ]; then
		t_ok "$v: /metrics shows the upstream pool: a miss, then hits, one idle"
	else
		t_fail "$v: /metrics upstream pool" "$(grep -E '^edge_upstream_(pool|endpoints|ejections)' "$T_TMP/admin" | tr '\n' ' ')"
	fi

	# --watch with no XDP (nothing attached at this test's pin dir):
	# edged's counters at each refresh, their rates moving with requests
	local wpid i
	ctl stats --watch --json --interval 0.5 --count 3 >"$T_TMP/watch" 2>"$T_TMP/watch.err" &
	wpid=$!
	for ((i = 0; i < 12; i++)); do
		code nowhere.test / >/dev/null
		sleep 0.1
	done
	wait "$wpid"
	rc=$?
	if [ "$rc" = 0 ] && python3 - "$T_TMP/watch" 2>>"$T_TMP/watch.err" <<'PY'; then
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
assert len(lines) == 3, lines
for d in lines:
    assert d["counters"] is None and d["rules"] == [], d
tot = [d["daemon"]["counters"]["requests_total"] for d in lines]
rates = [d["daemon"]["rates"]["requests_total"] for d in lines]
assert tot == sorted(tot) and tot[-1] > tot[0], tot
assert max(rates) > 0, rates
PY
		t_ok "$v: edgectl stats --watch without XDP: edged's counters and rates at each refresh"
	else
		t_fail "$v: edgectl stats --watch without XDP" "exit $rc: $(cat "$T_TMP/watch.err") $(head -c 300 "$T_TMP/watch")"
	fi


	# reload: a new domain becomes routable
	write_conf "$T_TMP/edge.conf" "$(id -un)" ', "new.test"'
	out=$(ctl reload 2>&1)
	if [ "$out" = "reloaded $T_TMP/edge.conf: route generation 2" ] &&
		[ "$(code new.test /)" = 200 ] && ctl routes | grep -q '^new.test '; then
		t_ok "$v: edgectl reload adds a route, then routable"
	else
		t_fail "$v: edgectl reload" "$out; new.test $(code new.test /)"
	fi

	# a broken configuration: refused with FILE:LINE, the old one serves
	write_conf "$T_TMP/edge.conf" "$(id -un)" ', "new.test"' 'bogus_key = 1;'
	out=$(ctl reload 2>&1)
	rc=$?
	if [ $rc = 1 ] && grep -q "^edgectl: $T_TMP/edge.conf:[0-9][0-9]*: bogus_key" <<<"$out" &&
		[ "$(code new.test /)" = 200 ] && [ "$(code shop.test /)" = 200 ] &&
		ctl status | grep -q 'route generation 2,'; then
		t_ok "$v: a broken config is refused with FILE:LINE, the old routes serve"
	else
		t_fail "$v: broken reload" "exit $rc: $out"
	fi
	write_conf "$T_TMP/edge.conf" "$(id -un)" ', "new.test"'
	not_regular_reloads "$v"

	# a second edged on the same listen address, with its own control
	# socket and admin port: refused at start (SO_REUSEPORT would have
	# let it take half of the first one's connections)
	{
		edged_conf_head "$P_ADMIN2" "$T_TMP/ctl2/edged.sock" 1
		echo 'projects = ( { id = "p2"; environments = ( { id = "p2-e"; domains = [ "two.test" ];
  deployment = { id = "d2"; upstreams = [ "127.0.0.1:'"$P_BACK"'" ]; }; } ); } );'
	} >"$T_TMP/second.conf"
	timeout 20 "$bin" -c "$T_TMP/second.conf" -f >"$T_TMP/second.log" 2>&1
	rc=$?
	if [ "$rc" = 1 ] && grep -q "listen 127.0.0.1:$P_EDGE: address already in use by another process" "$T_TMP/second.log" &&
		[ "$(code shop.test /)" = 200 ] && kill -0 "$EPID"; then
		t_ok "$v: a second edged on the same listen address refuses to start, the first serves on"
	else
		t_fail "$v: a second edged on the same address" "exit $rc: $(tail -3 "$T_TMP/second.log")"
	fi

	# SIGTERM with a slow request in flight: /healthz 503, status draining
	curl -s -m 10 -o /dev/null -w '%{http_code}' -H 'Host: shop.test' \
		"http://127.0.0.1:$P_EDGE/slow/1500" >"$T_TMP/slowcode" &
	slow=$!
	sleep 0.4
	kill -TERM "$EPID"
	sleep 0.2
	if [ "$(admin /healthz)" = 503 ] && grep -qx draining "$T_TMP/admin"; then
		t_ok "$v: /healthz 503 draining during the drain"
	else
		t_fail "$v: /healthz while draining" "$(cat "$T_TMP/admin")"
	fi
	if ctl status | grep -q '^daemon: .*, draining ('; then
		t_ok "$v: edgectl status says draining"
	else
		t_fail "$v: status while draining" "$(ctl status 2>&1 | grep daemon)"
	fi
	wait "$slow"
	wait "$EPID"
	rc=$?
	if [ "$(cat "$T_TMP/slowcode")" = 200 ] && [ $rc = 0 ] && [ ! -e "$SOCK" ]; then
		t_ok "$v: the in-flight request finishes, exit 0, socket removed"
	else
		t_fail "$v: drain end" "client $(cat "$T_TMP/slowcode"), exit $rc, socket $(ls "$SOCK" 2>&1)"
	fi
	edged_sanitizers_clean "$v: sanitizers silent"
}

# As root, with user "nobody": the socket directory edged creates is
# handed over, reload from root is accepted, the socket removed at exit.
run_drop() { # BIN LABEL
	local v=$2 rc i
	if [ "$(id -u)" -ne 0 ] || ! id nobody >/dev/null 2>&1; then
		t_skip "$v: privilege drop" "needs root and a nobody user"
		return
	fi
	chmod 0711 "$T_TMP"
	rm -rf "$(dirname "$SOCK")"
	if ! start_edged "$1" nobody; then
		t_fail "$v: edged starts as nobody" "$(tail -5 "$EDGED_LOG")"
		return
	fi
	if [ "$(stat -c %U "$(dirname "$SOCK")")" = nobody ] && [ "$(stat -c %U "$SOCK")" = nobody ] &&
		ctl reload >/dev/null && [ "$(code shop.test /)" = 200 ] &&
		[ "$(stat -c %u /proc/"$EPID")" = "$(id -u nobody)" ]; then
		t_ok "$v: after the drop to nobody: socket handed over, reload works"
	else
		t_fail "$v: privilege drop" "$(stat -c '%U %n' "$SOCK" "$(dirname "$SOCK")" 2>&1 | tr '\n' ' ')"
	fi
	kill -TERM "$EPID"
	wait "$EPID"
	rc=$?
	if [ $rc = 0 ] && [ ! -e "$SOCK" ]; then
		t_ok "$v: as nobody, exit 0 and the socket removed"
	else
		t_fail "$v: exit as nobody" "exit $rc: $(tail -3 "$EDGED_LOG")"
	fi
	# the directory is nobody's now: a lock that nobody made a symlink
	# must not hand root's file to nobody at the next start
	echo secret >"$T_TMP/victim"
	rm -f "$SOCK.lock"
	ln -s "$T_TMP/victim" "$SOCK.lock"
	write_conf "$T_TMP/edge.conf" nobody ""
	expect "$v: a control socket lock that is a symlink is refused" 1 \
		"edged: control socket: $SOCK.lock is a symbolic link: not following it" \
		timeout 10 "$1" -c "$T_TMP/edge.conf" -f
	if [ "$(stat -c %U "$T_TMP/victim")" = root ]; then
		t_ok "$v: what a symlinked lock names stays root's"
	else
		t_fail "$v: symlinked lock" "$(stat -c '%U %n' "$T_TMP/victim")"
	fi
	rm -f "$SOCK.lock"
	# nor may an analytics.file that nobody made a symlink (in a
	# directory nobody may write, for reopening) have root append to
	# what it names
	mkdir -p "$T_TMP/logs"
	chown nobody "$T_TMP/logs"
	ln -sf "$T_TMP/victim" "$T_TMP/logs/requests.jsonl"
	write_conf "$T_TMP/edge.conf" nobody "" "analytics = { file = \"$T_TMP/logs/requests.jsonl\"; };"
	: >"$EDGED_LOG" # now: the last run's "serving on" is not this one's
	"$1" -c "$T_TMP/edge.conf" -f >"$EDGED_LOG" 2>&1 &
	EPID=$!
	edged_track "$EPID"
	# until it exits (refused) or serves: then a request, for a record
	for ((i = 0; i < 100; i++)); do
		kill -0 "$EPID" 2>/dev/null || break
		if [ "$(code shop.test /)" = 200 ]; then
			sleep 1.5 # the file sink writes about once a second
			break
		fi
		sleep 0.05
	done
	edged_stop 10
	rc=$?
	if [ "$rc" = 1 ] && grep -qF "analytics.file: $T_TMP/logs/requests.jsonl is a symbolic link: not following it" "$EDGED_LOG" &&
		[ "$(stat -c %U "$T_TMP/victim")" = root ] && [ "$(cat "$T_TMP/victim")" = secret ]; then
		t_ok "$v: as root, an analytics.file that is a symlink is refused, what it names untouched"
	else
		t_fail "$v: symlinked analytics.file" "exit $rc, $(stat -c %U "$T_TMP/victim"): $(head -c 100 "$T_TMP/victim"): $(tail -4 "$EDGED_LOG"; ls -la "$T_TMP/logs")"
	fi
	rm -rf "$T_TMP/victim" "$T_TMP/logs"
}

# As root, with user "nobody" and pg set (no database listens: the
# directory is prepared before connecting): the pg_snapshot directory
# edged creates is handed over, and nothing it did not create is — not an
# existing directory (pg_snapshot = "/var/lib/x.json" gave /var/lib to
# nobody), nor a file the snapshot's name links to.
run_snapshot_dir() { # BIN LABEL
	local v=$2 d=$T_TMP/snap pg
	if [ "$(id -u)" -ne 0 ] || ! id nobody >/dev/null 2>&1; then
		t_skip "$v: pg_snapshot directory" "needs root and a nobody user"
		return
	fi
	chmod 0711 "$T_TMP"
	rm -rf "$d" "$T_TMP/victim"
	mkdir -m 0755 "$d"
	echo secret >"$T_TMP/victim"
	ln -s "$T_TMP/victim" "$d/db-snapshot.json"
	pg="pg = \"host=127.0.0.1 port=1 dbname=edge connect_timeout=1\";"
	write_conf "$T_TMP/edge.conf" nobody "" "$pg pg_snapshot = \"$d/db-snapshot.json\";"
	if edged_start "$1" "$T_TMP/edge.conf" && [ "$(stat -c %U "$d" "$T_TMP/victim" | sort -u)" = root ]; then
		t_ok "$v: as nobody, an existing pg_snapshot directory and what its file links to stay root's"
	else
		t_fail "$v: pg_snapshot in an existing directory" "$(stat -c '%U %n' "$d" "$T_TMP/victim" | tr '\n' ' ') $(tail -2 "$EDGED_LOG")"
	fi
	edged_stop 10
	write_conf "$T_TMP/edge.conf" nobody "" "$pg pg_snapshot = \"$d/new/db-snapshot.json\";"
	if edged_start "$1" "$T_TMP/edge.conf" && [ "$(stat -c '%U %a' "$d/new")" = "nobody 700" ] &&
		[ "$(stat -c %U "$d")" = root ]; then
		t_ok "$v: as nobody, the pg_snapshot directory edged creates is nobody's (0700)"
	else
		t_fail "$v: pg_snapshot in a new directory" "$(stat -c '%U %a %n' "$d/new" "$d" 2>&1 | tr '\n' ' ') $(tail -2 "$EDGED_LOG")"
	fi
	edged_stop 10
	edged_sanitizers_clean "$v: sanitizers silent with pg_snapshot"
}

if ! edged_backend "$P_BACK" python3 "$TOOLS/echo_backend.py" "$P_BACK" "$T_TMP/backend.jsonl"; then
	t_fail "backend starts"
	t_exit
	exit
fi

for bin in "$B/edged" "$EDGED_ASAN"; do
	label=$(basename "$(dirname "$bin")")
	[ "$label" = asan ] || label=normal
	if [ ! -x "$bin" ]; then
		t_skip "$label" "$bin not built"
		continue
	fi
	run_check "$bin" "$label"
	run_suite "$bin" "$label"
	run_drop "$bin" "$label"
	run_snapshot_dir "$bin" "$label"
done
t_exit
