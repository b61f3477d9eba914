#!/bin/bash
# test_edged_fauth.sh - forward auth (auth_request; issue 34;
# docs/gates.md):
#   - tests/tools/fauth_check.py through edged against its own
#     authorization service (python3): 2xx admits, copy_headers go
#     upstream and the client's own are dropped; the subrequest's method,
#     URL, fields and X-Forwarded-*; a POST's body kept for the upstream;
#     401 and 403 relayed with body and fields, a 302 login redirect; a
#     chunked refusal, one ended by the close; a body over the bound, a
#     malformed answer, a 500, a slow service, a hung one, a refused
#     connection: 503 auth_unavailable; the cache (max-age, s-maxage,
#     keyed by Cookie and Authorization; no-store, Vary, refusals not
#     cached); API keys checked first; a route's own auth_request; a
#     client leaving mid-check; pipelined requests;
#   - HTTP/2 (curl): admitted with the copied field, a refusal relayed;
#   - edge_auth_total{method="forward"}, the cache hits, the analytics
#     records' auth and outcome, edgectl routes;
#   - --check refusals.
# Runs against build/edged and build/asan/edged. Needs no root.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/lib_edged.sh
. "$(dirname "$0")/../lib_edged.sh"
edged_begin curl python3
edged_need_build

BASE=$(edged_ports 5)
P_EDGE=$BASE
P_BACK=$((BASE + 1))
P_ADMIN=$((BASE + 2))
P_AUTH=$((BASE + 3))
P_DOWN=$((BASE + 4)) # nothing listens there
export P_AUTH
SOCK="$T_TMP/edged.sock"
CHECK="$TOOLS/fauth_check.py"
chmod 0755 "$T_TMP"
printf 'ci %s\n' "$(printf 'k' | sha256sum | cut -d' ' -f1)" >"$T_TMP/keys.txt"
chmod 0644 "$T_TMP/keys.txt"

FA="auth_request = { url = \"http://127.0.0.1:$P_AUTH/check?from=edge\"; timeout = \"500ms\";
                     copy_headers = [ \"X-Auth-User\", \"x_auth_role\" ]; cache_ttl = \"30s\"; };"

env_conf() { # ID DOMAIN GATE...
	local id=$1 dom=$2
	shift 2
	printf '      { id = "%s"; domains = [ "%s" ];
        deployment = { id = "d-%s"; upstreams = [ "127.0.0.1:%s" ]; };
        %s },\n' "$id" "$dom" "$id" "$P_BACK" "$*"
}

# shellcheck disable=SC2120 # EXTRA: edged_check_refusals passes one
write_conf() { # [EXTRA ENVIRONMENT]
	{
		edged_conf_head "$P_ADMIN" "$SOCK" 1
		cat <<CONF
analytics = { file = "$T_TMP/requests.jsonl"; };
limits = { max_inflight_per_route = 4; };
projects = (
  { id = "p";
    environments = (
$(env_conf e-fa fa.test "$FA")
$(env_conf e-down down.test "auth_request = { url = \"http://127.0.0.1:$P_DOWN/\"; };")
$(env_conf e-both both.test "api_keys = { file = \"$T_TMP/keys.txt\"; };" "$FA")
      { id = "e-loop"; domains = [ "loop.test", "127.0.0.1" ];
        deployment = { id = "d-loop"; upstreams = [ "127.0.0.1:$P_BACK" ]; };
        auth_request = { url = "http://127.0.0.1:$P_EDGE/"; }; },
      { id = "e-route"; domains = [ "route.test" ];
        routes = ( { prefix = "/admin"; $FA } );
        deployment = { id = "d-route"; upstreams = [ "127.0.0.1:$P_BACK" ]; }; }${1:-}
    );
  }
);
CONF
	} >"$T_TMP/edge.conf"
}

if ! edged_backend "$P_BACK" /usr/bin/python3 "$TOOLS/echo_backend.py" "$P_BACK" "$T_TMP/echo.log"; then
	t_fail "the echo backend starts" ""
	t_exit
	exit 1
fi
if ! edged_backend "$P_AUTH" /usr/bin/python3 "$CHECK" serve "$P_AUTH" "$T_TMP/auth.log"; then
	t_fail "the authorization service starts" ""
	t_exit
	exit 1
fi

http2_checks() { # LABEL
	local v=$1 code
	code=$(curl -sS --max-time 10 --http2-prior-knowledge -o "$T_TMP/h2.json" -w '%{http_code} %{http_version}' \
		-H "Host: fa.test" -H "X-Auth-User: forged" "http://127.0.0.1:$P_EDGE/ok/h2")
	if [ "$code" = "200 2" ] && /usr/bin/python3 -c '
import json, sys
h = [v for k, v in json.load(open(sys.argv[1]))["headers"] if k.lower() == "x-auth-user"]
assert h == ["alice"], h' "$T_TMP/h2.json"; then
		t_ok "$v: HTTP/2: admitted, the service's X-Auth-User upstream, the client's dropped"
	else
		t_fail "$v: HTTP/2 200" "$code $(head -c 300 "$T_TMP/h2.json")"
	fi
	code=$(curl -sS --max-time 10 --http2-prior-knowledge -D "$T_TMP/h2.hdr" -o "$T_TMP/h2.body" \
		-w '%{http_code} %{http_version}' -H "Host: fa.test" "http://127.0.0.1:$P_EDGE/deny")
	if [ "$code" = "401 2" ] && [ "$(cat "$T_TMP/h2.body")" = "please sign in" ] &&
		grep -qi '^www-authenticate: Basic realm="corp"' "$T_TMP/h2.hdr"; then
		t_ok "$v: HTTP/2: a 401 relayed with its body and WWW-Authenticate"
	else
		t_fail "$v: HTTP/2 401" "$code $(cat "$T_TMP/h2.hdr" "$T_TMP/h2.body")"
	fi
}

run_build() { # LABEL BIN
	local v=$1 bin=$2 st name why n out m
	write_conf
	rm -f "$T_TMP/requests.jsonl"
	if ! edged_start "$bin" "$T_TMP/edge.conf"; then
		t_fail "$v: edged starts" "$(tail -5 "$EDGED_LOG")"
		return
	fi
	while IFS=$'\t' read -r st name why; do
		if [ "$st" = ok ]; then
			t_ok "$v: $name"
		else
			t_fail "$v: $name" "$why"
		fi
	done < <(/usr/bin/python3 "$CHECK" "$P_EDGE" "$T_TMP/auth.log" "$T_TMP/echo.log" 2>&1)
	http2_checks "$v"
	if grep -q 'auth_request http://127.0.0.1:[0-9]*/: .*503 auth_unavailable' "$EDGED_LOG" &&
		grep -q 'auth_request .*no answer within its timeout' "$EDGED_LOG"; then
		t_ok "$v: an unavailable service is logged with the reason"
	else
		t_fail "$v: unavailable logged" "$(grep auth_request "$EDGED_LOG" | head -5)"
	fi
	out=$("$EDGECTL" --socket "$SOCK" routes 2>&1)
	if grep -q "fa.test .*(auth_request http://127.0.0.1:$P_AUTH/check?from=edge)" <<<"$out" &&
		grep -q 'both.test .*(api keys (1), auth_request http' <<<"$out" &&
		"$EDGECTL" --socket "$SOCK" routes --json | /usr/bin/python3 -c '
import json, sys
r = {x["domain"] + (x.get("prefix") or ""): x for x in json.load(sys.stdin)["routes"]}
f = r["fa.test"]["auth"]["auth_request"]
assert f == {"url": "http://127.0.0.1:%s/check?from=edge" % sys.argv[1], "timeout_ms": 500,
             "cache_ttl_s": 30, "copy_headers": ["X-Auth-User", "x_auth_role"]}, f
assert r["route.test"]["auth"] is None and r["route.test/admin"]["auth"]["auth_request"], r
' "$P_AUTH"; then
		t_ok "$v: edgectl routes: auth_request shown (and --json its settings)"
	else
		t_fail "$v: edgectl routes" "$out"
	fi
	for m in ok denied redirected unavailable; do
		n=$(edged_metric "edge_auth_total{method=\"forward\",result=\"$m\"}")
		if [ "${n:-0}" -gt 0 ]; then
			t_ok "$v: edge_auth_total{method=\"forward\",result=\"$m\"} counted ($n)"
		else
			t_fail "$v: edge_auth_total forward $m" "$n"
		fi
	done
	n=$(edged_metric edge_auth_forward_cache_hits_total)
	if [ "${n:-0}" -ge 2 ]; then
		t_ok "$v: edge_auth_forward_cache_hits_total counted ($n)"
	else
		t_fail "$v: cache hits" "$n"
	fi
	sleep 1.5 # the file sink's batch
	if /usr/bin/python3 -c '
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
seen = {(r["outcome"], r.get("status"), r.get("auth")) for r in recs}
for want in [("ok", 200, "forward"), ("auth_denied", 401, "forward"), ("auth_denied", 403, "forward"),
             ("auth_redirect", 302, "forward"), ("auth_unavailable", 503, "forward"),
             ("unauthorized", 401, None)]:
    assert want in seen, (want, sorted(seen, key=str))
' "$T_TMP/requests.jsonl" 2>"$T_TMP/py.err"; then
		t_ok "$v: analytics: auth forward with each outcome"
	else
		t_fail "$v: analytics" "$(tail -2 "$T_TMP/py.err")"
	fi
	edged_stop 10
	edged_sanitizers_clean "$v: no sanitizer report" && t_ok "$v: no sanitizer report"
}

check_refusals() {
	edged_check_refusals write_conf <<EOF
auth_request = { url = "https://127.0.0.1/check"; };|auth_request.url: https:// is not supported
auth_request = { url = "http://auth.example/check"; };|auth_request.url: .*auth.example
auth_request = { url = "ftp://127.0.0.1/"; };|auth_request.url: "ftp://127.0.0.1/": an http:// URL
auth_request = { url = "http://127.0.0.1:9/a b"; };|auth_request.url: .*a space
auth_request = { url = "http://127.0.0.1:99999/"; };|auth_request.url: 
auth_request = { };|auth_request.url: missing
auth_request = { url = "http://127.0.0.1/"; timeout = "2m"; };|auth_request.timeout: .*at most 1m
auth_request = { url = "http://127.0.0.1/"; cache_ttl = "2h"; };|auth_request.cache_ttl: .*at most 1h
auth_request = { url = "http://127.0.0.1/"; copy_headers = [ "Host" ]; };|copy_headers\[0\]: "Host": a field of the connection
auth_request = { url = "http://127.0.0.1/"; copy_headers = [ "a b" ]; };|copy_headers\[0\]: "a b": a field name
auth_request = { url = "http://127.0.0.1/"; copy_headers = [ "X-Forwarded-For" ]; };|copy_headers\[0\]: "X-Forwarded-For": .*one edge sets
auth_request = { url = "http://127.0.0.1/"; copy_headers = [ "X_Client_IP" ]; };|copy_headers\[0\]: "X_Client_IP": .*one edge sets
auth_request = { url = "http://127.0.0.1/"; copy_headers = [ "X-Jwt-Claim-sub" ]; };|copy_headers\[0\]: .*one edge sets
auth_request = { url = "http://127.0.0.1/"; copy_headers = [ "X-User", "x_user" ]; };|copy_headers\[1\]: "x_user": named twice
auth_request = { url = "http://127.0.0.1/"; method = "GET"; };|unknown key
auth_request = "http://127.0.0.1/";|auth_request: a group
EOF
}

run_build normal "$EDGED"
check_refusals
if edged_asan; then
	run_build asan "$EDGED_ASAN"
fi
t_exit
