#!/bin/bash
# test_edged_upstream_log.sh - upstream failures in edged's log at the
# default level (edged without -v), one line a second per endpoint and
# reason whichever of the two workers saw them, the count of the ones held
# back said by the next line or, with no further failure, by the control
# loop's timer; and `edgectl upstream list` showing the last failure's
# reason and age. Behind edged: a port nobody listens on (connect
# refused, two of them) and tests/tools/bad_backend.py (a garbage status
# line: "bad response head"; a close without a byte: "closed without a
# response head"), and a TCP route to a refused port.
#
#   default    one request to a refused endpoint: a warning line naming
#              the endpoint, "connect failed: Connection refused", the
#              route and the environment; no debug line
#   burst      50 failures from two clients at once: the first a line of
#              its own, the rest held back and counted by the line after
#              them (the timer's, since no failure follows): every failure
#              accounted for exactly once, a handful of lines at most
#   separate   at the same time, another refused endpoint and one endpoint
#              failing for two reasons: each endpoint and reason its own
#              first line, its own count
#   list       edgectl upstream list: the reason with the errno's text and
#              its age; --json: last_error, last_error_at, last_error_age
#   tcp        a TCP route's refused connect: its line names the tcp route
#
# Runs against build/edged and build/asan/edged.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/lib_edged.sh
. "$(dirname "$0")/../lib_edged.sh"
edged_begin curl python3

BASE=$(edged_ports 6)
P_EDGE=$BASE
P_ADMIN=$((BASE + 1))
P_NONE=$((BASE + 2))  # nothing listens there
P_NONE2=$((BASE + 3)) # nor there
P_BAD=$((BASE + 4))
P_TCP=$((BASE + 5)) # a TCP route to P_NONE2
SOCK="$T_TMP/ctl/edged.sock"
EN="127.0.0.1:$P_NONE"
EN2="127.0.0.1:$P_NONE2"
EB="127.0.0.1:$P_BAD"

{
	edged_conf_head "$P_ADMIN" "$SOCK" 2
	cat <<CONF
pin_dir = "$T_TMP/pins";
timeouts = { drain = "5s"; upstream_connect = "2s"; };
projects = (
  { id = "f";
    environments = (
      { id = "f-refused"; domains = [ "refused.test" ];
        deployment = { id = "d1"; upstreams = [ "$EN" ]; }; },
      { id = "f-refused2"; domains = [ "refused2.test" ];
        deployment = { id = "d2"; upstreams = [ "$EN2" ]; }; },
      { id = "f-bad"; domains = [ "bad.test" ];
        deployment = { id = "d3"; upstreams = [ "$EB" ]; }; },
      { id = "f-tcp"; domains = [ "tcp.test" ];
        deployment = { id = "d4"; upstreams = [ "$EN2" ]; }; } );
  }
);
tcp_routes = ( { listen = "127.0.0.1:$P_TCP"; environment = "f-tcp"; } );
CONF
} >"$T_TMP/edge.conf"

ctl() { "$EDGECTL" --socket "$SOCK" "$@"; }

# tally EP WHY: "LINES FLUSHES TOTAL LAST_IS_FLUSH FIRST_PLAIN" for
# endpoint EP and reason WHY (a regex) in the log: the failure lines
# ("upstream EP: WHY... (route ...)"), the timer's lines ("upstream EP:
# WHY, and more held back"), the failures they account for (1 a failure
# line, plus every "(N suppressed)"), whether the last is the timer's and
# whether the first failure line came without a count
tally() {
	python3 - "$EDGED_LOG" "$1" "$2" <<'PY'
import re, sys
log, ep, why = sys.argv[1], re.escape(sys.argv[2]), sys.argv[3]
fail = re.compile(r"upstream %s: (?:%s)(?::[^()]*)? \((?:tcp )?route .*\)(?: \((\d+) suppressed\))?$" % (ep, why))
flush = re.compile(r"^edged: upstream %s: (?:%s), and more held back \((\d+) suppressed\)$" % (ep, why))
lines = flushes = total = 0
last_flush = False
first_plain = None
for l in open(log, errors="replace"):
    l = l.rstrip("\n")
    m = flush.search(l)
    if m:
        flushes += 1
        total += int(m.group(1))
        last_flush = True
        continue
    m = fail.search(l)
    if m:
        lines += 1
        total += 1 + int(m.group(1) or 0)
        last_flush = False
        if first_plain is None:
            first_plain = m.group(1) is None
print(lines, flushes, total, int(last_flush), int(bool(first_plain)))
PY
}

# wait_total EP WHY N: 0 once the log accounts for N failures (8 s)
wait_total() {
	local end=$((SECONDS + 8)) t
	while :; do
		t=$(tally "$1" "$2" | cut -d' ' -f3)
		[ "$t" = "$3" ] && return 0
		[ "$SECONDS" -ge "$end" ] && return 1
		sleep 0.1
	done
}

# burst HOST N: N requests to HOST on one connection (URL globbing)
burst() {
	curl -s -m 60 -H "Host: $1" "http://127.0.0.1:$P_EDGE/b[1-$2]" >/dev/null
}

run_suite() {
	local bin=$1 v=$2 t0 t1 ms out lines flushes total lastf first why code
	local pids i
	if ! edged_start "$bin" "$T_TMP/edge.conf"; then
		t_fail "$v: edged starts" "$(tail -5 "$EDGED_LOG")"
		return
	fi

	# ---- default level
	code=$(curl -s -m 10 -o /dev/null -w '%{http_code}' -H "Host: refused.test" "http://127.0.0.1:$P_EDGE/one")
	if [ "$code" = 502 ] &&
		edged_wait_log "^edged: client=127\.0\.0\.1 request_id=[^ ]+: upstream $EN: connect failed: Connection refused \(route refused\.test/, environment f-refused\)$" &&
		! grep -q 'debug:' "$EDGED_LOG"; then
		t_ok "$v: a refused endpoint logged at the default level: endpoint, 'Connection refused', route, environment"
	else
		t_fail "$v: a refused endpoint logged at the default level" "$code: $(grep -E "upstream|debug" "$EDGED_LOG" | head -3)"
	fi

	# ---- burst, and separately limited endpoints and reasons, at once
	sleep 1.1 # the first request's second is over
	t0=$(date +%s%N)
	pids=()
	burst refused.test 25 &
	pids+=($!)
	burst refused.test 25 &
	pids+=($!)
	burst refused2.test 10 &
	pids+=($!)
	# shellcheck disable=SC2046 # 20 URLs, alternating
	curl -s -m 60 -H "Host: bad.test" $(for ((i = 0; i < 10; i++)); do
		echo "http://127.0.0.1:$P_EDGE/bad/status http://127.0.0.1:$P_EDGE/bad/nothing"
	done) >/dev/null &
	pids+=($!)
	wait "${pids[@]}" # not edged's
	t1=$(date +%s%N)
	ms=$(((t1 - t0) / 1000000))
	why=""
	wait_total "$EN" "connect failed" 51 || why="not all 51 refused connects accounted for"
	read -r lines flushes total lastf first <<<"$(tally "$EN" "connect failed")"
	# the first request's line, the burst's first, and one a second after
	# it at most (+1: a second may start during the burst)
	if [ -z "$why" ] && [ "$lastf" = 1 ] && [ "$first" = 1 ] &&
		[ "$((lines + flushes))" -le $((2 + ms / 1000 + 1)) ] &&
		{ [ "$ms" -ge 900 ] || { [ "$lines" = 2 ] && [ "$flushes" = 1 ]; }; }; then
		t_ok "$v: 50 failures in ${ms} ms (two clients, two workers): $lines line(s) of their own and $flushes with the held-back count from the timer; all 51 accounted for"
	else
		t_fail "$v: the burst held back and counted" "${why:-$lines lines, $flushes flushes, $total accounted, last flush $lastf, ${ms} ms}: $(grep "upstream $EN:" "$EDGED_LOG" | tail -4 | tr '\n' '|')"
	fi
	if grep -Eq "^edged: upstream $EN: connect failed, and more held back \([0-9]+ suppressed\)$" "$EDGED_LOG"; then
		t_ok "$v: the held-back count said with no further failure: 'upstream $EN: connect failed, and more held back (N suppressed)'"
	else
		t_fail "$v: the held-back count said by the timer" "$(grep "upstream $EN" "$EDGED_LOG" | tail -3 | tr '\n' '|')"
	fi
	why=""
	wait_total "$EN2" "connect failed" 10 || why="$EN2: $(tally "$EN2" "connect failed")"
	wait_total "$EB" "bad response head" 10 || why="$why $EB bad head: $(tally "$EB" "bad response head")"
	wait_total "$EB" "closed without a response head" 10 || why="$why $EB closed: $(tally "$EB" "closed without a response head")"
	if [ -z "$why" ] &&
		grep -Eq "upstream $EN2: connect failed: Connection refused \(route refused2\.test/, environment f-refused2\)$" "$EDGED_LOG" &&
		grep -Eq "upstream $EB: bad response head: [^ ]+ \(route bad\.test/, environment f-bad\)" "$EDGED_LOG" &&
		grep -Eq "upstream $EB: closed without a response head: after 0 bytes of response head \(route bad\.test/, environment f-bad\)" "$EDGED_LOG" &&
		[ "$(tally "$EN2" "connect failed" | cut -d' ' -f5)" = 1 ] &&
		[ "$(tally "$EB" "bad response head" | cut -d' ' -f5)" = 1 ] &&
		[ "$(tally "$EB" "closed without a response head" | cut -d' ' -f5)" = 1 ]; then
		t_ok "$v: another endpoint, and one endpoint's two reasons, each a first line and a count of its own (10 + 10 + 10)"
	else
		t_fail "$v: endpoints and reasons limited separately" "${why:-lines}: $(grep -E "upstream ($EN2|$EB):" "$EDGED_LOG" | head -6 | tr '\n' '|')"
	fi

	# ---- edgectl upstream list
	out=$(ctl upstream list)
	ctl upstream list --json >"$T_TMP/list.json"
	if grep -Eq "^$EN +enabled +[a-z]+ +0 +51 +51  h1 +- +connect failed: Connection refused \([0-9]+[smhd] ago\) +refused\.test/$" <<<"$out" &&
		grep -Eq "^$EB .*  (bad response head|closed without a response head)(: [^(]*)? \([0-9]+[smhd] ago\) +bad\.test/$" <<<"$out" &&
		python3 - "$T_TMP/list.json" "$EN" <<'PY'; then
import json, sys, time
eps = {e["address"]: e for e in json.load(open(sys.argv[1]))["endpoints"]}
e = eps[sys.argv[2]]
assert e["last_error"] == "connect failed: Connection refused", e
assert 0 <= e["last_error_age"] <= 60, e
assert abs(time.time() - e["last_error_at"] - e["last_error_age"]) <= 2, e
assert e["connect_errors"] == 51 and e["failures"] == 51, e
PY
		t_ok "$v: edgectl upstream list: the last failure's reason and age; --json last_error, last_error_at, last_error_age"
	else
		t_fail "$v: edgectl upstream list" "$(echo "$out" | tr '\n' '|') $(head -c 600 "$T_TMP/list.json")"
	fi

	# ---- a TCP route (a second after the burst's last line of $EN2)
	sleep 1.1
	python3 -c "import socket,sys; s = socket.create_connection(('127.0.0.1', int(sys.argv[1])), 5); s.settimeout(10); s.recv(1)" "$P_TCP" 2>/dev/null
	if edged_wait_log "client=127\.0\.0\.1 request_id=[^ ]+: upstream $EN2: connect failed: Connection refused \(tcp route 127\.0\.0\.1:$P_TCP, environment f-tcp\)"; then
		t_ok "$v: a TCP route's refused connect logged, naming the tcp route"
	else
		t_fail "$v: a TCP route's refused connect" "$(grep "$EN2" "$EDGED_LOG" | tail -3 | tr '\n' '|')"
	fi

	edged_stop 10
	edged_sanitizers_clean "$v: sanitizers silent"
}

if ! edged_backend "$P_BAD" python3 "$TOOLS/bad_backend.py" "$P_BAD" "$T_TMP/bad.jsonl"; then
	t_fail "bad_backend starts"
	t_exit
	exit
fi

for bin in "$B/edged" "$EDGED_ASAN"; do
	label=normal
	[ "$bin" = "$EDGED_ASAN" ] && label=asan
	if [ ! -x "$bin" ]; then
		t_skip "$label" "$bin not built"
		continue
	fi
	[ "$label" = asan ] && { edged_asan || continue; }
	run_suite "$bin" "$label"
done
t_exit
