#!/usr/bin/env bash
# tests/integration/test_edged_access_log.sh - the fields of an access
# record (docs/analytics.md) with real requests through edged, and the
# nginx "combined" format (analytics.format):
#
#   json      a proxied request carries upstream_addr (the endpoint),
#             upstream_status (its status), http_version and edge_host; an
#             answer edge gives itself (a 503 for an unknown domain, over HTTP/1.0)
#             has a duration_ns above 0 and no upstream fields
#   combined  with analytics.format = "combined" each request is one line
#             of nginx's combined format (checked with a regex), escaped;
#             an unknown format is a configuration error
#
# Runs build/edged and, when built, build/asan/edged. Needs curl, python3.

# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/lib_edged.sh
. "$(dirname "$0")/../lib_edged.sh"

edged_begin curl python3
edged_need_build

BASE=$(edged_ports 3)
P_EDGE=$BASE
P_BACK=$((BASE + 1))
P_ADMIN=$((BASE + 2))

if ! edged_backend "$P_BACK" python3 "$TOOLS/ok_backend.py" "$P_BACK"; then
	t_fail "backend starts"
	t_exit
	exit 1
fi

# write_conf FILE LOG FORMAT
write_conf() {
	{
		edged_conf_head "$P_ADMIN" "$T_TMP/edged.sock" 1
		cat <<CONF
host_name = "edge-t15";
analytics = { file = "$2"; format = "$3"; };
projects = (
  { id = "shop";
    environments = ( { id = "shop-prod"; domains = [ "shop.test" ];
      deployment = { id = "shop-1"; upstreams = [ "127.0.0.1:$P_BACK" ]; }; } );
  }
);
CONF
	} >"$1"
}

# wait_lines FILE N: 0 once FILE has N lines (5 s at most)
wait_lines() {
	local i
	for ((i = 0; i < 100; i++)); do
		[ -f "$1" ] && [ "$(wc -l <"$1")" -ge "$2" ] && return 0
		sleep 0.05
	done
	return 1
}

run_json() {
	local bin=$1 v=$2 log=$T_TMP/access-$2.jsonl
	write_conf "$T_TMP/j.conf" "$log" json
	if ! edged_start "$bin" "$T_TMP/j.conf"; then
		t_fail "$v: edged starts" "$(tail -c 400 "$EDGED_LOG")"
		return
	fi
	curl -s -o /dev/null -H 'Host: shop.test' "http://127.0.0.1:$P_EDGE/up?a=1"
	curl -s -o /dev/null --http1.0 -H 'Host: nowhere.test' "http://127.0.0.1:$P_EDGE/miss"
	if ! wait_lines "$log" 2; then
		t_fail "$v: two records" "$(head -c 400 "$log" 2>/dev/null)"
		edged_stop 5
		return
	fi
	if python3 - "$log" "$P_BACK" >"$T_TMP/out" 2>&1 <<'PY'; then
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
up = [e for e in ev if e["path"] == "/up?a=1"][0]
own = [e for e in ev if e["path"] == "/miss"][0]
assert up["upstream_addr"] == "127.0.0.1:" + sys.argv[2], up
assert up["upstream_status"] == 200 and up["status"] == 200, up
assert up["http_version"] == "HTTP/1.1", up
assert up["edge_host"] == "edge-t15", up
assert own["status"] == 503 and own["outcome"] == "domain_not_found", own
assert own["duration_ns"] > 0, own
assert own["upstream_addr"] is None and own["upstream_status"] is None, own
assert own["http_version"] == "HTTP/1.0", own
assert own["edge_host"] == "edge-t15", own
PY
		t_ok "$v: json: upstream_addr, upstream_status, http_version, edge_host; an own answer's duration_ns > 0"
	else
		t_fail "$v: json fields" "$(grep -m1 "^ *assert" "$T_TMP/out") $(tail -c 300 "$T_TMP/out")"
	fi
	edged_stop 5
	edged_sanitizers_clean "$v: json: sanitizers"
}

run_combined() {
	local bin=$1 v=$2 log=$T_TMP/access-$2.log
	write_conf "$T_TMP/c.conf" "$log" combined
	if ! edged_start "$bin" "$T_TMP/c.conf"; then
		t_fail "$v: edged starts" "$(tail -c 400 "$EDGED_LOG")"
		return
	fi
	curl -s -o /dev/null -H 'Host: shop.test' -A 'ua "quoted"' -e 'http://ref.test/' \
		"http://127.0.0.1:$P_EDGE/c?x=1"
	curl -s -o /dev/null -H 'Host: nowhere.test' "http://127.0.0.1:$P_EDGE/miss"
	if ! wait_lines "$log" 2; then
		t_fail "$v: two combined lines" "$(head -c 400 "$log" 2>/dev/null)"
		edged_stop 5
		return
	fi
	re1='^127\.0\.0\.1 - - \[[0-9]{2}/[A-Z][a-z]{2}/[0-9]{4}:[0-9]{2}:[0-9]{2}:[0-9]{2} \+0000\] "GET /c\?x=1 HTTP/1\.1" 200 [0-9]+ "http://ref\.test/" "ua \\x22quoted\\x22"$'
	re2='^127\.0\.0\.1 - - \[[^]]+\] "GET /miss HTTP/1\.1" 503 [0-9]+ "-" "curl/[^"]+"$'
	if grep -Eq "$re1" "$log" && grep -Eq "$re2" "$log" && [ "$(wc -l <"$log")" -eq 2 ]; then
		t_ok "$v: combined: nginx's combined lines, quotes escaped, empty fields '-'"
	else
		t_fail "$v: combined lines" "$(head -c 600 "$log")"
	fi
	edged_stop 5
	edged_sanitizers_clean "$v: combined: sanitizers"
}

run_json "$EDGED" edged
run_combined "$EDGED" edged
if edged_asan; then
	run_json "$EDGED_ASAN" asan
	run_combined "$EDGED_ASAN" asan
fi

write_conf "$T_TMP/bad.conf" "$T_TMP/x.log" xml
expect "analytics.format: an unknown format is refused" 1 \
	"analytics.format: \"xml\" is not an access log format (json or combined)" \
	"$EDGED" --check -c "$T_TMP/bad.conf"

t_exit
