#!/bin/bash
# test_edged_ep_cap.sh - a deployment's max_inflight, each endpoint's cap
# on requests in flight (docs/upstream.md, "Endpoint caps"). Behind edged
# (two workers: the cap is on both together), two
# tests/tools/fail_backend.py backends that log how many requests each
# was answering at once ("active").
#
#   skip     ip_hash sends every request of 127.0.0.1 to one endpoint;
#            with the cap (2) full, the balancer skips it: 8 slow requests
#            at once, each backend never more than 2 at a time, both used,
#            all 8 answered 200 (the ones over both caps waited)
#   both     16 slow requests at once from 16 connections (both workers):
#            neither backend ever answers more than 2 at once
#   wait     a deployment with one endpoint (cap 1) held by a hanging
#            request: the next waits timeouts.queue, then 503 overloaded
#            with Retry-After; one whose deadline (request_total) comes
#            first gets 504 deadline_exceeded; a client that gives up while
#            waiting takes its request away (never sent)
#   no room  limits.max_queued = 0 (a reload): over the cap is 503 at once
#   metrics  waits and refusals counted; analytics records overloaded
#
# Runs against build/edged and build/asan/edged.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/lib_edged.sh
. "$(dirname "$0")/../lib_edged.sh"
edged_begin curl python3

BASE=$(edged_ports 4)
P_EDGE=$BASE
P_ADMIN=$((BASE + 1))
P_B1=$((BASE + 2))
P_B2=$((BASE + 3))
SOCK="$T_TMP/ctl/edged.sock"
LOG="$T_TMP/backends.jsonl"

conf() { # MAX_QUEUED [EXTRA]: the configuration; with EXTRA, one more
	# deployment with it
	local extra=""
	[ -n "${2:-}" ] && extra=",
  { id = \"e-x\"; domains = [ \"x.test\" ];
    deployment = { id = \"d-x\"; upstreams = [ \"127.0.0.1:1\" ]; $2 }; }"
	{
		edged_conf_head "$P_ADMIN" "$SOCK" 2
		cat <<CONF
pin_dir = "$T_TMP/pins";
analytics = { file = "$T_TMP/requests.jsonl"; };
limits = { max_queued = $1; };
timeouts = { upstream_connect = "2s"; upstream_response = "8s"; queue = "1s"; };
projects = ( { id = "p"; environments = (
  { id = "e-hash"; domains = [ "hash.test" ];
    deployment = { id = "d-hash"; balance = "ip_hash"; max_inflight = 2;
      upstreams = [ "127.0.0.1:$P_B1", "127.0.0.1:$P_B2" ]; }; },
  { id = "e-rr"; domains = [ "rr.test" ];
    deployment = { id = "d-rr"; max_inflight = 2;
      upstreams = [ "127.0.0.1:$P_B1", "127.0.0.1:$P_B2" ]; }; },
  { id = "e-one"; domains = [ "one.test" ];
    deployment = { id = "d-one"; max_inflight = 1;
      upstreams = [ "127.0.0.1:$P_B1" ]; };
    routes = ( { prefix = "/dl"; timeouts = { request_total = "400ms"; }; } ); }$extra
); } );
CONF
	} >"$T_TMP/edge.conf"
}

count() { # requests the backends received
	wc -l <"$LOG" | tr -d ' '
}

req() { RF=$T_TMP/r edged_req "$@"; }

burst() { edged_burst "$@"; }

# peak PATHPART: per backend, the most requests it answered at once among
# the logged requests whose path holds PATHPART ("b1=2 b2=2")
peak() {
	python3 - "$LOG" "$1" <<'PY'
import json, sys
m = {}
for l in open(sys.argv[1]):
    r = json.loads(l)
    if sys.argv[2] in r["path"]:
        m[r["name"]] = max(m.get(r["name"], 0), r["active"])
print(" ".join("%s=%d" % (k, m[k]) for k in sorted(m)))
PY
}

# wait_log N: until the backends received N requests (30 s)
wait_log() {
	local i
	for ((i = 0; i < 300; i++)); do
		[ "$(count)" -ge "$1" ] && return 0
		sleep 0.1
	done
	return 1
}

metric_at_least() { # NAME MIN: the value once >= MIN (10 s), else what it was
	local i n=0
	for ((i = 0; i < 100; i++)); do
		n=$(edged_metric "$1")
		[ "${n:-0}" -ge "$2" ] 2>/dev/null && break
		sleep 0.1
	done
	echo "$n"
}

run_suite() {
	local bin=$1 v=$2 out n i before hpid cc gone
	: >"$LOG"
	rm -f "$T_TMP/requests.jsonl"
	conf 100
	if ! edged_start "$bin" "$T_TMP/edge.conf"; then
		t_fail "$v: edged starts" "$(tail -5 "$EDGED_LOG")"
		return
	fi

	# ---- skip: ip_hash would send all 8 to one endpoint
	out=$(burst hash.test 8 "/skip?mode=wait600")
	n=$(peak /skip)
	if [ "$out" = "8x200" ] && [ "$n" = "b1=2 b2=2" ]; then
		t_ok "$v: ip_hash with its endpoint full: the balancer skips it (both used, each at most 2 at once), the requests over both caps wait: 8 200s"
	else
		t_fail "$v: a full endpoint skipped" "$out; peaks $n"
	fi

	# ---- both workers together keep the cap
	out=$(burst rr.test 16 "/both?mode=wait300")
	n=$(peak /both)
	if [ "$out" = "16x200" ] && [ "$n" = "b1=2 b2=2" ]; then
		t_ok "$v: 16 requests at once over two workers: no endpoint ever answers more than 2 (the cap is every worker's), all 200"
	else
		t_fail "$v: the cap across workers" "$out; peaks $n"
	fi

	# ---- wait: d-one's only slot held by a hanging request
	before=$(count)
	req one.test "/hold?mode=hang" -m 6 >"$T_TMP/hold" &
	hpid=$!
	if wait_log $((before + 1)); then
		out=$(req one.test "/queued")
		if [ "$out" = "503 overloaded" ] && grep -qi '^Retry-After: 1' "$T_TMP/r.head" &&
			[ "$(count)" = $((before + 1)) ]; then
			t_ok "$v: the only endpoint at its cap: the next request waits timeouts.queue, then 503 overloaded with Retry-After (never sent)"
		else
			t_fail "$v: a full endpoint's waiter times out" "$out; received $(($(count) - before)); $(cat "$T_TMP/r.head")"
		fi
		out=$(req one.test "/dl/x")
		if [ "$out" = "504 deadline_exceeded" ]; then
			t_ok "$v: a waiter whose deadline comes first: 504 deadline_exceeded"
		else
			t_fail "$v: the deadline while waiting" "$out"
		fi

	else
		t_fail "$v: the hanging request" "never reached the backend"
	fi
	kill "$hpid" 2>/dev/null
	wait "$hpid" 2>/dev/null
	# its slot is free again (the client closed, edged closes upstream)
	out=""
	for ((n = 0; n < 50; n++)); do
		out=$(req one.test "/after")
		[ "$out" = "200 -" ] && break
		sleep 0.2
	done
	if [ "$out" = "200 -" ]; then
		t_ok "$v: the slot freed: served again"
	else
		t_fail "$v: served after the hold" "$out"
	fi

	# ---- a waiter whose client leaves (at 0.3 s; timeouts.queue is 1 s)
	# while the slot is held: ended client_closed at once; then the
	# holder resets its connection and the slot frees: the waiter, gone,
	# is never sent
	before=$(count)
	cc='edge_requests_total{outcome="client_closed"}'
	n=$(edged_metric "$cc")
	rm -f "$T_TMP/release"
	python3 - "$P_EDGE" "$T_TMP/release" <<'PY' &
import socket, struct, sys, os, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=20)
s.sendall(b"GET /hold3?mode=hang HTTP/1.1\r\nHost: one.test\r\n\r\n")
for _ in range(1000):
    if os.path.exists(sys.argv[2]):
        break
    time.sleep(0.02)
s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
s.close()
PY
	hpid=$!
	if wait_log $((before + 1)); then
		out=$(req one.test "/gone" -m 0.3)
		edged_wait_metric "$cc" $((n + 1)) && gone=ended || gone="not ended"
		touch "$T_TMP/release"
		wait "$hpid"
		sleep 1
		if [[ "$out" == *":28 "* ]] && [ "$gone" = ended ] &&
			! grep -q '"/gone"' "$LOG" && kill -0 "$EPID"; then
			t_ok "$v: a client that leaves while its request waits for a slot takes it away: never sent once the slot frees"
		else
			t_fail "$v: a waiter's client leaves" "$out; $gone client_closed; $(grep -c '"/gone"' "$LOG") /gone received"
		fi
	else
		touch "$T_TMP/release"
		wait "$hpid"
		t_fail "$v: the third hold" "never reached the backend"
	fi

	n=$(metric_at_least edge_upstream_endpoints_full_waits_total 4)
	if [ "${n:-0}" -ge 4 ] &&
		[ "$(metric_at_least edge_upstream_endpoints_full_refused_total 1)" -ge 1 ]; then
		t_ok "$v: metrics: waits ($n) and refusals counted"
	else
		t_fail "$v: metrics" "$(curl -s "http://127.0.0.1:$P_ADMIN/metrics" | grep endpoints_full)"
	fi

	# ---- no room to wait: max_queued 0, by a reload
	conf 0
	n=$(grep -c "reloaded" "$EDGED_LOG")
	kill -HUP "$EPID"
	for ((i = 0; i < 100; i++)); do
		[ "$(grep -c "reloaded" "$EDGED_LOG")" -gt "$n" ] && break
		sleep 0.1
	done
	before=$(count)
	req one.test "/hold2?mode=hang" -m 4 >/dev/null &
	hpid=$!
	if wait_log $((before + 1)); then
		out=$(req one.test "/refused")
		if [ "$out" = "503 overloaded" ] && edged_wait_log "no room to wait"; then
			t_ok "$v: limits.max_queued = 0: over the cap is 503 overloaded at once"
		else
			t_fail "$v: no room to wait" "$out"
		fi
	else
		t_fail "$v: the second hold" "never reached the backend"
	fi
	kill "$hpid" 2>/dev/null
	wait "$hpid" 2>/dev/null

	edged_stop 10
	edged_sanitizers_clean "$v: sanitizers silent"

	out=$(python3 - "$T_TMP/requests.jsonl" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
o = [r for r in recs if r.get("outcome") == "overloaded"]
ok = len(o) >= 2 and all(r["status"] == 503 and not r.get("attempts") for r in o)
print("ok %d" % len(o) if ok else "bad %d: %s" % (len(o), o[:1]))
PY
	)
	if [ "${out%% *}" = ok ]; then
		t_ok "$v: analytics: the refusals recorded overloaded, 503, no attempt (${out#ok })"
	else
		t_fail "$v: analytics overloaded" "$out"
	fi
}

if ! edged_backend "$P_B1" python3 "$TOOLS/fail_backend.py" "$P_B1" b1 "$T_TMP/mode" "$LOG" ||
	! edged_backend "$P_B2" python3 "$TOOLS/fail_backend.py" "$P_B2" b2 "$T_TMP/mode" "$LOG"; then
	t_fail "backends start"
	t_exit
	exit
fi

# ---- --check refusals: file, line, key
while IFS='|' read -r extra want; do
	conf 0 "$extra"
	rc=0
	out=$("$B/edged" -c "$T_TMP/edge.conf" --check 2>&1) || rc=$?
	if [ "$rc" -ne 0 ] && grep -qE "edge.conf:[0-9]+: .*$want" <<<"$out"; then
		t_ok "--check refuses $extra"
	else
		t_fail "--check: $extra" "$out"
	fi
done <<'CASES'
max_inflight = -1;|max_inflight
max_inflight = 2000000;|max_inflight
max_inflight = "ten";|max_inflight
CASES
# a duplicate key is libconfig's own error; max_inflight = 0 is no cap
conf 0
sed -i 's/max_inflight = 2;/max_inflight = 0;/' "$T_TMP/edge.conf"
if "$B/edged" -c "$T_TMP/edge.conf" --check >/dev/null 2>&1; then
	t_ok "--check takes max_inflight = 0 (no cap)"
else
	t_fail "--check: max_inflight = 0" "$("$B/edged" -c "$T_TMP/edge.conf" --check 2>&1)"
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
