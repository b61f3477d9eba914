#!/bin/bash
# test_edged_hedge.sh - a deployment's hedge group (docs/upstream.md,
# "Hedging"). Behind edged (one worker: response times and the budget are
# per worker): tests/tools/fail_backend.py endpoints whose mode file says
# tail20 (every 20th request answered after 1 s; the second endpoint's
# tail shifted by 10, so that a hedge does not meet its own slow answer),
# slow or ok, and two
# tests/tools/h2_backend.py endpoints behind h2c://, one answering every
# request after 1 s.
#
#   p99        the same two endpoints with a 5 % slow tail behind two
#              deployments, one with hedge.after "50ms", one without:
#              100 sequential GETs each, in this run; the client's p99
#              with hedging under half of the p99 without; the
#              endpoints received hedges, and each slow answer that lost
#              saw its connection closed
#   POST       a slow POST is not hedged (received once); a slow GET is
#              (received twice, the loser's connection closed)
#   loser      one endpoint answers after 300 ms, the other after 1 s:
#              whichever the request went to first, the 1 s one's
#              connection is closed when the other answers (a hedge
#              that loses as well as a first attempt that loses)
#   deadline   timeouts.request_total covers the hedge: 504
#              deadline_exceeded before either slow answer, both
#              attempts' connections closed
#   p95        after = "p95": no hedge before 20 answers (a slow endpoint
#              answers slowly); after 50 fast ones, a slow endpoint's
#              requests are hedged and answered fast
#   h2         an HTTP/2 endpoint's slow stream loses: it is reset
#              (RST_STREAM CANCEL, code 8) and its connection serves the
#              next one
#   counts     edge_upstream_hedges_total, edge_upstream_hedge_wins_total;
#              analytics attempts 2 for a hedged request; --check
#              refusals
#
# Runs against build/edged and build/asan/edged.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/lib_edged.sh
. "$(dirname "$0")/../lib_edged.sh"
edged_begin curl python3

DPY=/usr/bin/python3
BASE=$(edged_ports 8)
P_EDGE=$BASE
P_ADMIN=$((BASE + 1))
P_A=$((BASE + 2))
P_B=$((BASE + 3))
P_C=$((BASE + 4))
P_D=$((BASE + 5))
P_E=$((BASE + 6))
P_F=$((BASE + 7))
SOCK="$T_TMP/ctl/edged.sock"
LOG="$T_TMP/backends.jsonl"
HAVE_H2=1
"$DPY" -c 'import h2' 2>/dev/null || HAVE_H2=0

conf() { # [HEDGE]: the configuration; with HEDGE, one more deployment
	# with that hedge group
	local extra="" h2=""
	[ -n "$1" ] && extra=",
  { id = \"e-x\"; domains = [ \"x.test\" ];
    deployment = { id = \"d-x\"; upstreams = [ \"127.0.0.1:1\" ]; $1 }; }"
	[ "$HAVE_H2" = 1 ] && h2=",
  { id = \"e-h2\"; domains = [ \"h2.test\" ];
    deployment = { id = \"d-h2\";
      upstreams = [ \"h2c://127.0.0.1:$P_E\", \"h2c://127.0.0.1:$P_F\" ];
      hedge = { after = \"50ms\"; }; }; }"
	{
		edged_conf_head "$P_ADMIN" "$SOCK" 1
		cat <<CONF
pin_dir = "$T_TMP/pins";
analytics = { file = "$T_TMP/requests.jsonl"; };
timeouts = { upstream_connect = "2s"; upstream_response = "5s"; };
upstream = { eject_after = 1000; };
projects = ( { id = "p"; environments = (
  { id = "e-hd"; domains = [ "hd.test" ];
    deployment = { id = "d-hd";
      upstreams = [ "127.0.0.1:$P_A", "127.0.0.1:$P_B" ];
      hedge = { after = "50ms"; max = 1; }; }; },
  { id = "e-nh"; domains = [ "nh.test" ];
    deployment = { id = "d-nh";
      upstreams = [ "127.0.0.1:$P_A", "127.0.0.1:$P_B" ]; }; },
  { id = "e-dl"; domains = [ "dl.test" ];
    deployment = { id = "d-dl";
      upstreams = [ "127.0.0.1:$P_A", "127.0.0.1:$P_B" ];
      hedge = { after = "50ms"; };
      timeouts = { request_total = "400ms"; }; }; },
  { id = "e-pc"; domains = [ "pc.test" ];
    deployment = { id = "d-pc";
      upstreams = [ "127.0.0.1:$P_C", "127.0.0.1:$P_D" ];
      hedge = { after = "p95"; }; }; }$h2$extra
); } );
CONF
	} >"$T_TMP/edge.conf"
}

mode() { # NAME WORD: what backend NAME's mode file says
	echo "$2" >"$T_TMP/mode.$1"
}

# times HOST PREFIX N: N sequential GETs of PREFIX1..PREFIXN on one curl
# (one connection), each one's status and total time, a line each
times() {
	local i urls=()
	for ((i = 1; i <= $3; i++)); do
		urls+=(-o /dev/null "http://127.0.0.1:$P_EDGE$2$i")
	done
	curl -sS -m 120 -H "Host: $1" -w '%{http_code} %{time_total}\n' "${urls[@]}"
}

# p99 FILE: the 99th percentile (nearest rank) of the times in FILE, and
# how many lines were not 200, "0.012 0"
p99() {
	python3 - "$1" <<'PY'
import math, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
t = sorted(float(r[1]) for r in rows)
bad = sum(1 for r in rows if r[0] != "200")
print("%.3f %d" % (t[math.ceil(0.99 * len(t)) - 1] if t else 99, bad))
PY
}

# recs PATHRE [FIELD=VALUE]: backend log lines whose path matches PATHRE
recs() {
	python3 - "$LOG" "$1" <<'PY'
import json, re, sys
n = 0
for l in open(sys.argv[1]):
    r = json.loads(l)
    if re.fullmatch(sys.argv[2], r.get("path", "")):
        n += 1
print(n)
PY
}

cancelled() { # lines of connections closed under a slow answer
	grep -c '"cancelled": true' "$LOG"
}

# req HOST PATH [CURL ARGS]: "STATUS TIME ERROR"
req() {
	local host=$1 path=$2 out
	shift 2
	out=$(curl -sS -m 20 -o "$T_TMP/body" -w '%{http_code} %{time_total}' \
		-H "Host: $host" "$@" "http://127.0.0.1:$P_EDGE$path" 2>/dev/null)
	echo "$out $(python3 -c 'import json,sys
try: print(json.load(open(sys.argv[1]))["error"])
except Exception: print("-")' "$T_TMP/body")"
}

# faster T LIMIT: whether T (seconds) < LIMIT
faster() {
	python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) < float(sys.argv[2]) else 1)' "$1" "$2"
}

# metric_until NAME WANT: the value once it is at least WANT (10 s)
metric_until() {
	local i n=0
	for ((i = 0; i < 100; i++)); do
		n=$(edged_metric "$1")
		[ "$n" -ge "$2" ] 2>/dev/null && break
		sleep 0.1
	done
	echo "$n"
}

run_suite() {
	local bin=$1 v=$2 out n c0 h0 pn ph bad i ok slow
	: >"$LOG"
	rm -f "$T_TMP/requests.jsonl" "$T_TMP"/e.jsonl "$T_TMP"/f.jsonl
	mode a tail20
	mode b tail20_10
	mode c ok
	mode d ok
	if ! edged_start "$bin" "$T_TMP/edge.conf"; then
		t_fail "$v: edged starts" "$(tail -5 "$EDGED_LOG")"
		return
	fi

	# ---- p99: the same endpoints, with and without hedging
	times nh.test /n 100 >"$T_TMP/nh.times"
	c0=$(cancelled)
	times hd.test /h 100 >"$T_TMP/hd.times"
	read -r pn bad <<<"$(p99 "$T_TMP/nh.times")"
	read -r ph n <<<"$(p99 "$T_TMP/hd.times")"
	bad=$((bad + n))
	n=$(python3 - "$LOG" <<'PY'
import json, sys, collections
c = collections.Counter(json.loads(l).get("path") for l in open(sys.argv[1]))
print(sum(1 for p, k in c.items() if p and p.startswith("/h") and k == 2))
PY
	)
	c=$(($(cancelled) - c0))
	slow=$(grep -c '"path": "/h[0-9]*".*"slow": true' "$LOG")
	if [ "$bad" = 0 ] && faster 0.9 "$pn" && faster "$ph" "$(python3 -c "print($pn / 2)")" &&
		[ "$n" -ge 2 ] && [ "$c" -ge 2 ] && [ "$c" -le "$slow" ]; then
		t_ok "$v: a 5 % slow tail: the client's p99 ${pn}s without hedging, ${ph}s with (after 50ms); $n requests hedged, $c slow answers' connections closed by edge"
	else
		t_fail "$v: p99 with hedging" "p99 $pn vs $ph, $bad not 200, $n hedged, $c cancelled of $slow slow; $(sort -k2 -n "$T_TMP/hd.times" | tail -3 | tr '\n' ' ')"
	fi

	# ---- POST: never hedged; a GET is, its loser closed. The first
	# endpoint answers slowly, the other at once; two of each, so that
	# at least one of each goes to the slow one first (round robin)
	mode a slow
	mode b ok
	sleep 1.2 # the workers publish every second
	h0=$(edged_metric edge_upstream_hedges_total)
	c0=$(cancelled)
	out=$(req hd.test /post1 -d 'x=1')
	out="$out, $(req hd.test /post2 -d 'x=1')"
	n=$(recs '/post[12]')
	ok=$(grep -c '"path": "/post[12]".*"slow": true' "$LOG")
	out2=$(req hd.test /get1)
	out2="$out2, $(req hd.test /get2)"
	n2=$(recs '/get[12]')
	slow=$(awk -F'[ ,]+' '$2 > 0.5 || $5 > 0.5 { print "slow" }' <<<"$out2")
	sleep 0.5
	c=$(($(cancelled) - c0))
	h=$(metric_until edge_upstream_hedges_total $((h0 + n2 - 2)))
	if [[ "$out" == "200 "*", 200 "* ]] && [ "$n" = 2 ] && [ "$ok" = 1 ] &&
		[[ "$out2" == "200 "*", 200 "* ]] && [ -z "$slow" ] &&
		[ "$n2" -ge 3 ] && [ "$c" = $((n2 - 2)) ] && [ "$h" = $((h0 + n2 - 2)) ]; then
		t_ok "$v: POSTs not hedged (each received once, one answered slowly); GETs sent to the slow endpoint hedged ($n2 received for 2, as many hedges counted and slow connections closed), both answered fast"
	else
		t_fail "$v: POST and GET" "POSTs $out received $n ($ok slow); GETs $out2 received $n2; cancelled $c; hedges $h0 -> $h; $(tail -4 "$LOG")"
	fi
	mode a ok

	# ---- loser: the attempt that answers later is closed, whichever
	# it was
	mode a wait300
	mode b slow
	c0=$(grep -c '"name": "b", "conn": [0-9]*, "cancelled": true' "$LOG")
	out=$(req hd.test /l1)
	out="$out, $(req hd.test /l2)"
	n=$(recs '/l[12]')
	slow=$(awk -F'[ ,]+' '$2 > 0.8 || $5 > 0.8 { print "slow" }' <<<"$out")
	sleep 0.5
	c=$(($(grep -c '"name": "b", "conn": [0-9]*, "cancelled": true' "$LOG") - c0))
	if [[ "$out" == "200 "*", 200 "* ]] && [ -z "$slow" ] && [ "$n" = 4 ] && [ "$c" = 2 ]; then
		t_ok "$v: answers after 300 ms and 1 s: both requests hedged and answered by the faster one; the slower one's connection closed each time (a losing hedge or a losing first attempt, whichever it was)"
	else
		t_fail "$v: the loser closed" "$out received $n, the slow one's closed $c; $(tail -4 "$LOG")"
	fi
	mode a ok
	mode b ok

	# ---- deadline: request_total covers the hedge
	c0=$(cancelled)
	out=$(req dl.test "/dl?mode=slow")
	sleep 0.4
	n=$(recs '/dl\?mode=slow')
	c=$(($(cancelled) - c0))
	read -r code t err <<<"$out"
	if [ "$code" = 504 ] && [ "$err" = deadline_exceeded ] && faster "$t" 0.95 && [ "$n" = 2 ] && [ "$c" = 2 ]; then
		t_ok "$v: timeouts.request_total covers the hedge: 504 deadline_exceeded after ${t}s, both endpoints asked, both connections closed"
	else
		t_fail "$v: deadline" "$out received $n, cancelled $c"
	fi

	# ---- p95: no hedge before 20 answers, then hedges
	mode c slow
	times pc.test /c 4 >"$T_TMP/pc1.times"
	n=$(recs '/c[0-9]+')
	ok=$(awk '$2 > 0.9 { n++ } END { print n + 0 }' "$T_TMP/pc1.times")
	if [ "$n" = 4 ] && [ "$ok" = 2 ]; then
		t_ok "$v: after = p95 with too few answers: no hedge (4 requests received, 2 answered slowly)"
	else
		t_fail "$v: p95 before samples" "received $n, slow $ok: $(tr '\n' ' ' <"$T_TMP/pc1.times")"
	fi
	mode c ok
	times pc.test /w 50 >/dev/null
	mode c slow
	times pc.test /s 6 >"$T_TMP/pc2.times"
	n=$(recs '/s[0-9]+')
	read -r ph bad <<<"$(p99 "$T_TMP/pc2.times")"
	if [ "$bad" = 0 ] && [ "$n" -ge 9 ] && faster "$ph" 0.6; then
		t_ok "$v: after = p95 once 54 answers are known: a slow endpoint's requests hedged ($n received for 6), the slowest answered in ${ph}s"
	else
		t_fail "$v: p95 hedges" "received $n, slowest $ph, $bad not 200: $(tr '\n' ' ' <"$T_TMP/pc2.times")"
	fi
	mode c ok

	# ---- h2: the loser's stream reset, its connection kept
	if [ "$HAVE_H2" = 1 ]; then
		times h2.test /e 4 >"$T_TMP/h2.times"
		read -r ph bad <<<"$(p99 "$T_TMP/h2.times")"
		sleep 0.3
		out=$(python3 - "$T_TMP/e.jsonl" "$T_TMP/f.jsonl" <<'PY'
import json, sys
e = [json.loads(l) for l in open(sys.argv[1])]
f = [json.loads(l) for l in open(sys.argv[2])]
resets = [r for r in e if r.get("reset") == 8]
conns = {r["conn"] for r in e}
print(len(resets), len(conns), sum(1 for r in f if r.get("path", "").startswith("/e")))
PY
		)
		read -r rs cs fs <<<"$out"
		if [ "$bad" = 0 ] && faster "$ph" 0.6 && [ "$rs" -ge 2 ] && [ "$cs" = 1 ] && [ "$fs" = 4 ]; then
			t_ok "$v: HTTP/2: the slow endpoint's streams reset CANCEL ($rs), its one connection kept; all 4 answered by the other within ${ph}s"
		else
			t_fail "$v: h2 hedges" "slowest $ph, $bad not 200; resets $rs, connections $cs, fast endpoint $fs: $(cat "$T_TMP/e.jsonl")"
		fi
	else
		t_skip "$v: HTTP/2 hedges" "python3-h2 missing"
	fi

	# ---- counts (published every second)
	sleep 1.5
	n=$(metric_until edge_upstream_hedges_total 8)
	w=$(metric_until edge_upstream_hedge_wins_total 6)
	if [ "$n" -ge 8 ] && [ "$w" -ge 6 ] && [ "$w" -le "$n" ]; then
		t_ok "$v: metrics: $n hedges sent, $w won"
	else
		t_fail "$v: metrics" "hedges $n wins $w"
	fi

	edged_stop 10
	edged_sanitizers_clean "$v: sanitizers silent"

	out=$(python3 - "$T_TMP/requests.jsonl" "$LOG" <<'PY'
import json, sys, collections
recs = [json.loads(l) for l in open(sys.argv[1])]
c = collections.Counter(json.loads(l).get("path") for l in open(sys.argv[2]))
hd = [r for r in recs if r.get("host", "").startswith("hd.test") and r["path"].startswith("/h")]
bad = [r["path"] for r in hd if r.get("attempts") != c.get(r["path"])]
nh = [r for r in recs if r.get("host", "").startswith("nh.test")]
print("ok %d" % sum(1 for r in hd if r["attempts"] == 2) if hd and not bad and all(r.get("attempts") == 1 for r in nh) else "bad %s" % bad[:5])
PY
	)
	if [ "${out%% *}" = ok ] && [ "${out#ok }" -ge 2 ]; then
		t_ok "$v: analytics: each hedged request's attempts 2 (${out#ok }), as the endpoints received; unhedged ones 1"
	else
		t_fail "$v: analytics attempts" "$out"
	fi
}

mode a tail20
mode b tail20_10
mode c ok
mode d ok
if ! edged_backend "$P_A" python3 "$TOOLS/fail_backend.py" "$P_A" a "$T_TMP/mode.a" "$LOG" ||
	! edged_backend "$P_B" python3 "$TOOLS/fail_backend.py" "$P_B" b "$T_TMP/mode.b" "$LOG" ||
	! edged_backend "$P_C" python3 "$TOOLS/fail_backend.py" "$P_C" c "$T_TMP/mode.c" "$LOG" ||
	! edged_backend "$P_D" python3 "$TOOLS/fail_backend.py" "$P_D" d "$T_TMP/mode.d" "$LOG"; then
	t_fail "backends start"
	t_exit
	exit
fi
if [ "$HAVE_H2" = 1 ] &&
	{ ! edged_backend "$P_E" "$DPY" "$TOOLS/h2_backend.py" "$P_E" "$T_TMP/e.jsonl" --delay 1000 ||
		! edged_backend "$P_F" "$DPY" "$TOOLS/h2_backend.py" "$P_F" "$T_TMP/f.jsonl"; }; then
	t_fail "h2 backends start"
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
hedge = { after = "p10"; };|hedge.after: "p10": expected a percentile p50..p99
hedge = { after = "p100"; };|hedge.after: "p100": expected a percentile
hedge = { after = "0ms"; };|hedge.after
hedge = { after = "2m"; };|hedge.after: "2m" is out of range 1ms..60000ms
hedge = { after = 50; };|hedge.after
hedge = { max = 0; };|hedge.max
hedge = { max = 4; };|hedge.max
hedge = { delay = "50ms"; };|hedge.delay: unknown key
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
