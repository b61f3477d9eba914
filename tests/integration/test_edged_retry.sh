#!/bin/bash
# test_edged_retry.sh - a deployment's retry group (docs/upstream.md,
# "Retries"): which failures go again, to another endpoint, for which
# requests, and the budget that bounds the extra load. Behind edged (one
# worker: the budget is per worker): tests/tools/fail_backend.py
# endpoints told what to do by a mode file (503, reset, mid-response
# reset, ok), a port nobody listens on, and tests/tools/h2_backend.py
# behind h2c:// (/status/503, /reset).
#
#   status     GET, HEAD, DELETE and a PUT with a small body whose first
#              endpoint answers 503 served 200 by the other (the PUT's
#              body intact); a POST's 503 relayed (the upstream got it);
#              a PUT with a body over limits.body_buffer not retried
#   reset      a GET whose endpoint resets the connection before a byte
#              of the response served by the other; a POST answered 502
#   mid        a reset after the response began: never retried
#   connect    a refused endpoint: the request (a POST too) goes to the
#              other with "connect" in retry.on; without it 502
#   h2         an h2c:// endpoint's 503 and its RST_STREAM before the
#              response go to the other endpoint; a POST's reset does not
#   budget     three endpoints all answering 503, 150 GETs: the requests
#              the backends received minus the client's at most 20 % of
#              them plus the allowance (3) + 2; the refusals counted
#   records    each analytics record's attempts equal to what the
#              backends received for it; metrics; --check refusals
#
# Runs against build/edged and build/asan/edged.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/lib_edged.sh
. "$(dirname "$0")/../lib_edged.sh"
edged_begin curl python3

DPY=/usr/bin/python3
BASE=$(edged_ports 9)
P_EDGE=$BASE
P_ADMIN=$((BASE + 1))
P_B1=$((BASE + 2))
P_B2=$((BASE + 3))
P_F1=$((BASE + 4))
P_F2=$((BASE + 5))
P_F3=$((BASE + 6))
P_H2=$((BASE + 7))
P_NONE=$((BASE + 8)) # nothing listens there
SOCK="$T_TMP/ctl/edged.sock"
LOG="$T_TMP/backends.jsonl"

conf() { # [RETRY]: the configuration; with RETRY, one more deployment
	# with that retry group
	local extra=""
	[ -n "$1" ] && extra=",
  { id = \"e-x\"; domains = [ \"x.test\" ];
    deployment = { id = \"d-x\"; upstreams = [ \"127.0.0.1:1\" ]; $1 }; }"
	{
		edged_conf_head "$P_ADMIN" "$SOCK" 1
		cat <<CONF
pin_dir = "$T_TMP/pins";
analytics = { file = "$T_TMP/requests.jsonl"; };
limits = { body_buffer = "4K"; };
timeouts = { upstream_connect = "2s"; upstream_response = "3s"; };
upstream = { eject_after = 1000; };
projects = ( { id = "p"; environments = (
  { id = "e-retry"; domains = [ "retry.test" ];
    deployment = { id = "d-retry";
      upstreams = [ "127.0.0.1:$P_B1", "127.0.0.1:$P_B2" ];
      retry = { on = [ "connect", "reset", "502", "503", "504" ]; max = 2;
                budget = "100%"; backoff = "1ms"; }; }; },
  { id = "e-conn"; domains = [ "conn.test" ];
    deployment = { id = "d-conn";
      upstreams = [ "127.0.0.1:$P_NONE", "127.0.0.1:$P_B2" ];
      retry = { on = [ "connect" ]; backoff = "1ms"; }; }; },
  { id = "e-noconn"; domains = [ "noconn.test" ];
    deployment = { id = "d-noconn";
      upstreams = [ "127.0.0.1:$P_NONE", "127.0.0.1:$P_B2" ];
      retry = { on = [ "503" ]; }; }; },
  { id = "e-h2"; domains = [ "h2.test" ];
    deployment = { id = "d-h2";
      upstreams = [ "h2c://127.0.0.1:$P_H2", "127.0.0.1:$P_B2" ];
      retry = { budget = "100%"; backoff = "1ms"; }; }; },
  { id = "e-dl"; domains = [ "dl.test" ];
    deployment = { id = "d-dl";
      upstreams = [ "127.0.0.1:$P_B1", "127.0.0.1:$P_B2" ];
      timeouts = { request_total = "1s"; };
      retry = { budget = "100%"; backoff = "2s"; }; }; },
  { id = "e-dlr"; domains = [ "dlr.test" ];
    deployment = { id = "d-dlr"; upstreams = [ "127.0.0.1:$P_B2" ]; };
    routes = ( { prefix = "/dl"; timeouts = { request_total = "1s"; }; } ); },
  { id = "e-budget"; domains = [ "budget.test" ];
    deployment = { id = "d-budget";
      upstreams = [ "127.0.0.1:$P_F1", "127.0.0.1:$P_F2", "127.0.0.1:$P_F3" ];
      retry = { max = 2; budget = "20%"; backoff = "1ms"; }; }; }$extra
); } );
CONF
	} >"$T_TMP/edge.conf"
}
conf ""

mode() { echo "$2" >"$T_TMP/mode.$1"; } # BACKEND MODE

# metric_positive NAME: the series' value once above 0 (workers publish
# every second; 3 s at most), else 0
metric_positive() {
	local i n=0
	for ((i = 0; i < 30; i++)); do
		n=$(edged_metric "$1")
		[ "$n" -gt 0 ] && break
		sleep 0.1
	done
	echo "$n"
}

# count [HOST-FILTER...]: requests the fail backends received (python
# expression over r, the log line)
count() {
	python3 - "$LOG" "$1" <<'PY'
import json, sys
n = 0
for l in open(sys.argv[1]):
    r = json.loads(l)
    if eval(sys.argv[2]):
        n += 1
print(n)
PY
}

# req HOST METHOD PATH [CURL ARG...]: the status, curl's exit code after
# a colon when it failed
req() {
	local host=$1 m=$2 p=$3 code rc=0
	shift 3
	code=$(curl -sS -m 20 -o "$T_TMP/body" -w '%{http_code}' -X "$m" \
		-H "Host: $host" "$@" "http://127.0.0.1:$P_EDGE$p" 2>/dev/null) || rc=$?
	[ "$rc" = 0 ] && echo "$code" || echo "$code:$rc"
}

# jq_err: the error name of the last response's JSON body, "-" if none
jq_err() {
	python3 -c 'import json,sys
try: print(json.load(open(sys.argv[1]))["error"])
except Exception: print("-")' "$T_TMP/body"
}

run_suite() {
	local bin=$1 v=$2 out i n got want r before
	: >"$LOG"
	rm -f "$T_TMP/requests.jsonl"
	mode b1 ok
	mode b2 ok
	if ! edged_start "$bin" "$T_TMP/edge.conf"; then
		t_fail "$v: edged starts" "$(tail -5 "$EDGED_LOG")"
		return
	fi

	# ---- status: B1 answers 503, B2 200
	mode b1 503
	out=""
	for i in 1 2 3 4; do
		out+="$(req retry.test GET "/get$i") "
		out+="$(req retry.test HEAD "/head$i" -I) "
		out+="$(req retry.test DELETE "/del$i") "
	done
	head -c 1000 /dev/urandom >"$T_TMP/small"
	for i in 1 2 3 4; do
		out+="$(req retry.test PUT "/put$i" --data-binary "@$T_TMP/small") "
	done
	want=$(sha256sum <"$T_TMP/small" | cut -d' ' -f1)
	if [ "$out" = "$(printf '200 %.0s' $(seq 16))" ] &&
		[ "$(count "r['name'] == 'b1' and r['method'] in ('GET', 'HEAD', 'DELETE', 'PUT')")" -ge 4 ] &&
		[ "$(count "r['name'] == 'b2' and r['method'] == 'PUT' and r['body_sha256'] == '$want'")" = 4 ]; then
		t_ok "$v: GET, HEAD, DELETE and a buffered PUT answered 503 by one endpoint served 200 by the other, the PUT's body intact ($(count "r['name'] == 'b1'") went to the failing one first)"
	else
		t_fail "$v: idempotent requests retried on a 503" "$out $(tail -3 "$LOG")"
	fi
	before=$(count True)
	out=""
	for i in 1 2 3 4; do
		out+="$(req retry.test POST "/post$i" --data-binary "@$T_TMP/small") "
	done
	n=$(($(count True) - before))
	if [ "$n" = 4 ] && grep -q 503 <<<"$out" && grep -q 200 <<<"$out"; then
		t_ok "$v: a POST's 503 relayed, never sent again (4 POSTs, 4 received: $out)"
	else
		t_fail "$v: a POST's 503 relayed" "received $n: $out"
	fi
	head -c 10000 /dev/urandom >"$T_TMP/big"
	before=$(count True)
	out=""
	for i in 1 2 3 4; do
		out+="$(req retry.test PUT "/bigput$i" --data-binary "@$T_TMP/big") "
	done
	n=$(($(count True) - before))
	if [ "$n" = 4 ] && grep -q 503 <<<"$out"; then
		t_ok "$v: a PUT whose body is over limits.body_buffer (streamed) not retried (4 received: $out)"
	else
		t_fail "$v: a streamed PUT not retried" "received $n: $out"
	fi

	# ---- reset before the response
	mode b1 reset
	out=""
	for i in 1 2 3 4; do
		out+="$(req retry.test GET "/rget$i") "
	done
	before=$(count True)
	got=""
	for i in 1 2 3 4; do
		got+="$(req retry.test POST "/rpost$i" -d x) "
	done
	n=$(($(count True) - before))
	if [ "$out" = "200 200 200 200 " ] && [ "$n" = 4 ] && grep -q 502 <<<"$got"; then
		t_ok "$v: a reset before the response: GETs served by the other endpoint; POSTs 502, never sent again ($got)"
	else
		t_fail "$v: reset" "GET: $out POST: $got received $n"
	fi

	# ---- reset after the response began
	mode b1 mid
	before=$(count True)
	out=""
	for i in 1 2 3 4; do
		out+="$(req retry.test GET "/mid$i") "
	done
	n=$(($(count True) - before))
	if [ "$n" = 4 ] && grep -q '200:18' <<<"$out"; then
		t_ok "$v: a reset after response bytes went to the client: cut short, never sent again ($out)"
	else
		t_fail "$v: mid-response reset" "received $n: $out"
	fi
	mode b1 ok

	# ---- connect
	before=$(count True)
	out=$(req noconn.test POST /nc -d x)
	got=""
	for i in 1 2 3 4; do
		got+="$(req conn.test POST "/c$i" -d x) "
	done
	n=$(($(count True) - before))
	if [ "$out" = 502 ] && [ "$got" = "200 200 200 200 " ] && [ "$n" = 4 ]; then
		t_ok "$v: a refused connect: a POST goes to the other endpoint with \"connect\" in retry.on, 502 without"
	else
		t_fail "$v: connect" "noconn $out conn $got received $n"
	fi

	# ---- h2c
	: >"$T_TMP/h2.jsonl"
	out=""
	for i in 1 2 3 4; do
		out+="$(req h2.test GET /status/503) $(req h2.test GET /reset) "
	done
	before=$(count True)
	got=""
	for i in 1 2 3 4; do
		got+="$(req h2.test POST /reset -d x) "
	done
	n=$(($(count True) - before + $(grep -c '"POST"' "$T_TMP/h2.jsonl")))
	if [ "$out" = "$(printf '200 %.0s' $(seq 8))" ] &&
		[ "$(grep -c '"/status/503"' "$T_TMP/h2.jsonl")" -ge 1 ] &&
		[ "$(grep -c '"/reset"' "$T_TMP/h2.jsonl")" -ge 1 ] &&
		grep -q 502 <<<"$got" && [ "$n" = 4 ]; then
		t_ok "$v: h2c:// endpoint: its 503 and its stream reset go to the other endpoint; a POST's reset 502, never sent again ($got)"
	else
		t_fail "$v: h2c" "GET $out POST $got received $n; $(tail -2 "$T_TMP/h2.jsonl")"
	fi

	# ---- deadlines (fail_backend.py's mode=WORD in the path)
	out="$(req dl.test GET '/h?mode=hang') $(jq_err) "
	before=$(count True)
	out+="$(req dl.test GET '/s?mode=503') $(jq_err) "
	n=$(($(count True) - before))
	out+="$(req dlr.test GET '/dl/x?mode=hang') $(jq_err) "
	out+="$(req dlr.test GET '/other?mode=hang') $(jq_err)"
	if [ "$out" = "504 deadline_exceeded 504 deadline_exceeded 504 deadline_exceeded 504 upstream_timeout" ] && [ "$n" = 1 ]; then
		t_ok "$v: timeouts.request_total: a hung upstream 504 deadline_exceeded; a retry's backoff past the deadline too (one attempt received); a route's own deadline, and outside it upstream_response's 504 upstream_timeout"
	else
		t_fail "$v: deadlines" "$out (received $n)"
	fi

	# ---- budget: every endpoint fails
	mode f 503
	before=$(count "r['name'].startswith('f')")
	curl -s -m 120 -o /dev/null -w '%{http_code}\n' -H "Host: budget.test" \
		"http://127.0.0.1:$P_EDGE/b[1-150]" >"$T_TMP/budget.codes"
	got=$(($(count "r['name'].startswith('f')") - before))
	n=$(grep -c '^503$' "$T_TMP/budget.codes")
	r=$(metric_positive edge_upstream_retry_budget_refused_total)
	# 150 requests: at most 30 + 3 retries, and 2 more for slack
	if [ "$n" = 150 ] && [ "$got" -gt 150 ] && [ "$got" -le 185 ] && [ "$r" -gt 0 ]; then
		t_ok "$v: a deployment failing 100 %: 150 client requests, $got received by its endpoints (budget 20 % + 3), $r retries refused"
	else
		t_fail "$v: the budget holds" "codes $n received $got refused $r"
	fi
	n=$(metric_positive edge_upstream_retries_total)
	if [ "$n" -gt 0 ]; then
		t_ok "$v: edge_upstream_retries_total $n"
	else
		t_fail "$v: edge_upstream_retries_total" "$n"
	fi

	edged_stop 10
	edged_sanitizers_clean "$v: sanitizers silent"

	# ---- records: the sum of attempts is what the backends received
	# (the h2 backend's included), each record's no more than max + 1
	out=$(python3 - "$T_TMP/requests.jsonl" "$LOG" "$T_TMP/h2.jsonl" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
recv = sum(1 for _ in open(sys.argv[2])) + sum(1 for _ in open(sys.argv[3]))
att = [r["attempts"] for r in recs if r.get("attempts") is not None]
# the refused connects are attempts the backends never saw
refused = sum(1 for r in recs if r["host"] in ("conn.test", "noconn.test") and r["attempts"] == 2) + \
    sum(1 for r in recs if r["host"] == "noconn.test")
ok = all(1 <= a <= 3 for a in att) and sum(att) == recv + refused and any(a > 1 for a in att)
print("ok" if ok else "bad %d attempts vs %d received + %d refused" % (sum(att), recv, refused))
PY
	)
	if [ "$out" = ok ]; then
		t_ok "$v: analytics: each record's attempts; their sum is what the endpoints received (plus refused connects)"
	else
		t_fail "$v: analytics attempts" "$out"
	fi
}

mode b1 ok
mode b2 ok
mode f 503
if ! edged_backend "$P_B1" python3 "$TOOLS/fail_backend.py" "$P_B1" b1 "$T_TMP/mode.b1" "$LOG" ||
	! edged_backend "$P_B2" python3 "$TOOLS/fail_backend.py" "$P_B2" b2 "$T_TMP/mode.b2" "$LOG" ||
	! edged_backend "$P_F1" python3 "$TOOLS/fail_backend.py" "$P_F1" f1 "$T_TMP/mode.f" "$LOG" ||
	! edged_backend "$P_F2" python3 "$TOOLS/fail_backend.py" "$P_F2" f2 "$T_TMP/mode.f" "$LOG" ||
	! edged_backend "$P_F3" python3 "$TOOLS/fail_backend.py" "$P_F3" f3 "$T_TMP/mode.f" "$LOG" ||
	! edged_backend "$P_H2" "$DPY" "$TOOLS/h2_backend.py" "$P_H2" "$T_TMP/h2.jsonl"; then
	t_fail "backends start"
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
retry = { on = [ "500" ]; };|retry.on\[0\]: "500": expected connect, reset, 502, 503 or 504
retry = { budget = "120%"; };|retry.budget: "120%": expected a percentage
retry = { budget = "20"; };|retry.budget: "20": expected a percentage
retry = { max = 4; };|retry.max
retry = { backoff = "1h"; };|retry.backoff
retry = { tries = 2; };|retry.tries: unknown key
timeouts = { request_total = "0ms"; };|timeouts.request_total
timeouts = { request_total = "2d"; };|timeouts.request_total
timeouts = { total = "2s"; };|timeouts.total: unknown key
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
