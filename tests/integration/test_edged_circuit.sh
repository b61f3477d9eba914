#!/bin/bash
# test_edged_circuit.sh - a deployment's circuit (docs/upstream.md,
# "Circuit breaking"). Behind edged (one worker: circuits are per worker),
# tests/tools/fail_backend.py told what to answer by the path's mode=WORD
# or a mode file (hang), and a port nobody listens on.
#
#   open       circ.test (min_requests 4, 50 %): 3 ok then 503s relayed
#              until 3 of 6 failed; then 503 circuit_open at once, with a
#              Retry-After, the backend receiving nothing more
#   half-open  once open_for is over, one trial request (hanging) goes
#              through, the others get circuit_open meanwhile; its
#              timeout (504) opens the circuit again; then a trial that
#              succeeds closes it: 200s again
#   failures   a refused connect (502 upstream_unavailable) and a reset
#              (502 upstream_bad_response) count as failures
#   none       a deployment without a circuit relays 30 503s, each one
#              received
#   metrics    opens, refusals, the open gauge; analytics records
#              circuit_open; --check refusals
#   view       edgectl upstream circuits: open (requests, failures,
#              seconds to half-open), then closed
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
P_NONE=$((BASE + 3)) # nothing listens there
SOCK="$T_TMP/ctl/edged.sock"
LOG="$T_TMP/backends.jsonl"

conf() { # [CIRCUIT]: the configuration; with CIRCUIT, one more deployment
	# with that circuit group
	local extra=""
	[ -n "$1" ] && extra=",
  { id = \"e-x\"; domains = [ \"x.test\" ];
    deployment = { id = \"d-x\"; upstreams = [ \"127.0.0.1:1\" ]; $1 }; }"
	{
		edged_conf_head "$P_ADMIN" "$SOCK" 1
		cat <<CONF
pin_dir = "$T_TMP/pins";
analytics = { file = "$T_TMP/requests.jsonl"; };
timeouts = { upstream_connect = "2s"; upstream_response = "3s"; };
upstream = { eject_after = 1000; };
projects = ( { id = "p"; environments = (
  { id = "e-circ"; domains = [ "circ.test" ];
    deployment = { id = "d-circ"; upstreams = [ "127.0.0.1:$P_B1" ];
      circuit = { errors = "50%"; window = "60s"; min_requests = 4;
                  open_for = "4s"; }; }; },
  { id = "e-conn"; domains = [ "conn.test" ];
    deployment = { id = "d-conn"; upstreams = [ "127.0.0.1:$P_NONE" ];
      circuit = { errors = "100%"; min_requests = 3; open_for = "1h"; }; }; },
  { id = "e-reset"; domains = [ "reset.test" ];
    deployment = { id = "d-reset"; upstreams = [ "127.0.0.1:$P_B1" ];
      circuit = { errors = "100%"; min_requests = 2; open_for = "1h"; }; }; },
  { id = "e-plain"; domains = [ "plain.test" ];
    deployment = { id = "d-plain"; upstreams = [ "127.0.0.1:$P_B1" ]; }; }$extra
); } );
CONF
	} >"$T_TMP/edge.conf"
}

count() { # requests the backend received
	wc -l <"$LOG" | tr -d ' '
}

req() { RF=$T_TMP/r edged_req "$@"; }

# until_not_open HOST PATH: send until the answer is not circuit_open
# (every 0.2 s, 60 s at most); prints the last answer
until_not_open() {
	local i out
	for ((i = 0; i < 300; i++)); do
		out=$(req "$1" "$2")
		[ "$out" != "503 circuit_open" ] && break
		sleep 0.2
	done
	echo "$out"
}

# wait_log N: until the backend received N requests (30 s)
wait_log() {
	local i
	for ((i = 0; i < 300; i++)); do
		[ "$(count)" -ge "$1" ] && return 0
		sleep 0.1
	done
	return 1
}

# metric_until NAME WANT: the series' value once it is WANT (workers
# publish every second; 10 s at most), else what it was
metric_until() {
	local i n=0
	for ((i = 0; i < 100; i++)); do
		n=$(edged_metric "$1")
		[ "$n" = "$2" ] && break
		sleep 0.1
	done
	echo "$n"
}

# circ DEPLOYMENT: "STATE REQUESTS FAILURES [HALF_OPEN_IN_S]" of worker 0
# in edgectl upstream circuits --json ("absent": not listed)
circ() {
	"$EDGECTL" --socket "$SOCK" upstream circuits --json 2>/dev/null | python3 -c 'import json, sys
d = [x for x in json.load(sys.stdin)["deployments"] if x["deployment"] == sys.argv[1]]
w = d[0]["workers"][0] if d else None
print(" ".join(str(w[k]) for k in ("state", "requests", "failures", "half_open_in_s") if k in w)
      if w else "absent")' "$1"
}

# circ_until DEPLOYMENT PATTERN: circ's answer once it matches the ERE
# PATTERN (workers publish every second; 5 s at most), else what it was
circ_until() {
	local i out=""
	for ((i = 0; i < 50; i++)); do
		out=$(circ "$1")
		[[ "$out" =~ ^$2$ ]] && break
		sleep 0.1
	done
	echo "$out"
}

run_suite() {
	local bin=$1 v=$2 out i n before tpid
	: >"$LOG"
	rm -f "$T_TMP/requests.jsonl" "$T_TMP/mode"
	if ! edged_start "$bin" "$T_TMP/edge.conf"; then
		t_fail "$v: edged starts" "$(tail -5 "$EDGED_LOG")"
		return
	fi

	# ---- open: 3 ok, 3 failures of 6 open it
	out=""
	for i in 1 2 3; do
		out+="$(req circ.test "/ok$i"), "
	done
	for i in 1 2 3 4 5 6 7 8; do
		out+="$(req circ.test "/f$i?mode=503"), "
	done
	n=$(count)
	want="200 -, 200 -, 200 -, 503 -, 503 -, 503 -, $(printf '503 circuit_open, %.0s' 1 2 3 4 5)"
	if [ "$out" = "$want" ] && [ "$n" = 6 ] &&
		grep -qi '^Retry-After: [1-4]' "$T_TMP/r.head"; then
		t_ok "$v: 3 of 6 requests failed (5xx): the circuit opens; then 503 circuit_open at once, with a Retry-After, the upstream not reached (6 received)"
	else
		t_fail "$v: the circuit opens" "$out received $n; $(cat "$T_TMP/r.head")"
	fi
	n=$(metric_until edge_upstream_circuits_open 1)
	if [ "$n" = 1 ] && [ "$(metric_until edge_upstream_circuit_opens_total 1)" = 1 ] &&
		[ "$(metric_until edge_upstream_circuit_refused_total 5)" = 5 ]; then
		t_ok "$v: metrics: one circuit open, opened once, 5 refusals"
	else
		t_fail "$v: metrics while open" "open $n $(curl -s "http://127.0.0.1:$P_ADMIN/metrics" | grep circuit)"
	fi

	# (open_for, 4 s, may run out before a worker's tick publishes it on a
	# busy machine: half_open then)
	out=$(circ_until d-circ "(open 6 3 [1-4]|half_open 6 3)")
	if [[ "$out" =~ ^(open\ 6\ 3\ [1-4]|half_open\ 6\ 3)$ ]] && [ "$(circ d-plain)" = absent ] &&
		"$EDGECTL" --socket "$SOCK" upstream circuits >"$T_TMP/circ.txt" 2>&1 &&
		grep -Eq '^d-circ +0 (open +6 +3 [1-4]s|half_open +6 +3 -)$' "$T_TMP/circ.txt"; then
		t_ok "$v: edgectl upstream circuits: d-circ open in worker 0 (6 requests, 3 failed, half-open within 4 s); d-plain (no circuit) not listed"
	else
		t_fail "$v: the circuit view while open" "$out; $(circ d-plain); $(cat "$T_TMP/circ.txt")"
	fi

	# ---- half-open: one trial, hanging; others refused meanwhile
	echo hang >"$T_TMP/mode"
	before=$(count)
	until_not_open circ.test /trial1 >"$T_TMP/trial" &
	tpid=$!
	if wait_log $((before + 1)); then
		out=""
		for i in 1 2 3; do
			out+="$(req circ.test "/during$i"), "
		done
		n=$(count)
		wait "$tpid"
		# the trial's own answer: its upstream_response timeout
		if [ "$out" = "$(printf '503 circuit_open, %.0s' 1 2 3)" ] && [ "$n" = $((before + 1)) ] &&
			[ "$(cat "$T_TMP/trial")" = "504 upstream_timeout" ]; then
			t_ok "$v: half-open: one trial request goes through (answered 504 upstream_timeout); while it runs the others get circuit_open"
		else
			t_fail "$v: half-open lets one trial through" "$out received $((n - before)), the trial $(cat "$T_TMP/trial")"
		fi
	else
		wait "$tpid"
		t_fail "$v: half-open trial" "no trial reached the backend"
	fi
	rm -f "$T_TMP/mode"
	out=$(req circ.test /after-timeout)
	n=$(metric_until edge_upstream_circuit_opens_total 2)
	if [ "$out" = "503 circuit_open" ] && [ "$n" = 2 ]; then
		t_ok "$v: the trial's timeout opens the circuit again (opened twice)"
	else
		t_fail "$v: a failed trial reopens" "$out opens $n"
	fi
	before=$(count)
	out=$(until_not_open circ.test /trial2)
	for i in 1 2 3; do
		out+=", $(req circ.test "/closed$i")"
	done
	n=$(($(count) - before))
	if [ "$out" = "200 -, 200 -, 200 -, 200 -" ] && [ "$n" = 4 ] &&
		[ "$(metric_until edge_upstream_circuits_open 0)" = 0 ]; then
		t_ok "$v: a trial that succeeds closes the circuit: 200s again, the gauge back to 0"
	else
		t_fail "$v: a successful trial closes" "$out received $n"
	fi
	out=$(circ_until d-circ "closed 3 0")
	if [ "$out" = "closed 3 0" ]; then
		t_ok "$v: edgectl upstream circuits: d-circ closed again, its window holding the 3 requests since"
	else
		t_fail "$v: the circuit view once closed" "$out"
	fi

	# ---- failures: a refused connect, a reset
	out=""
	for i in 1 2 3 4; do
		out+="$(req conn.test "/c$i"), "
	done
	for i in 1 2 3; do
		out+="$(req reset.test "/r$i?mode=reset"), "
	done
	want="$(printf '502 upstream_unavailable, %.0s' 1 2 3)503 circuit_open, "
	want+="502 upstream_bad_response, 502 upstream_bad_response, 503 circuit_open, "
	if [ "$out" = "$want" ]; then
		t_ok "$v: refused connects and resets count as failures: the circuit opens"
	else
		t_fail "$v: connect and reset failures" "$out"
	fi

	# ---- none: no circuit, nothing changes
	before=$(count)
	out=""
	for i in $(seq 30); do
		out+="$(req plain.test "/p$i?mode=503"), "
	done
	n=$(($(count) - before))
	if [ "$out" = "$(printf '503 -, %.0s' $(seq 30))" ] && [ "$n" = 30 ]; then
		t_ok "$v: a deployment without a circuit: 30 503s relayed, 30 received"
	else
		t_fail "$v: no circuit group" "$out received $n"
	fi

	edged_stop 10
	edged_sanitizers_clean "$v: sanitizers silent"

	# ---- records: each refusal recorded circuit_open, 503, no attempt
	out=$(python3 - "$T_TMP/requests.jsonl" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
c = [r for r in recs if r.get("outcome") == "circuit_open"]
ok = len(c) >= 14 and all(r["status"] == 503 and not r.get("attempts") for r in c)
print("ok %d" % len(c) if ok else "bad %d: %s" % (len(c), c[:1]))
PY
	)
	if [ "${out%% *}" = ok ]; then
		t_ok "$v: analytics: refusals recorded circuit_open, 503, no attempt (${out#ok })"
	else
		t_fail "$v: analytics circuit_open" "$out"
	fi
}

if ! edged_backend "$P_B1" python3 "$TOOLS/fail_backend.py" "$P_B1" b1 "$T_TMP/mode" "$LOG"; then
	t_fail "backend starts"
	t_exit
	exit
fi

# ---- --check refusals: file, line, key
while IFS='|' read -r group want; do
	conf "$group"
	rc=0
	out=$("$B/edged" -c "$T_TMP/edge.conf" --check 2>&1) || rc=$?
	if [ "$rc" -ne 0 ] && grep -qE "edge.conf:[0-9]+: .*$want" <<<"$out"; then
		t_ok "--check refuses $group"
	else
		t_fail "--check: $group" "$out"
	fi
done <<'CASES'
circuit = { errors = "0%"; };|circuit.errors: "0%"
circuit = { errors = "150%"; };|circuit.errors: "150%": expected a percentage
circuit = { errors = 50; };|circuit.errors
circuit = { window = "100ms"; };|circuit.window
circuit = { min_requests = 0; };|circuit.min_requests
circuit = { open_for = "2h"; };|circuit.open_for
circuit = { threshold = "50%"; };|circuit.threshold: unknown key
CASES
conf ""

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
