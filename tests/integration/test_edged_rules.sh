#!/bin/bash
# test_edged_rules.sh - header rules, redirects and unmatched paths
# (issue 33; docs/configuration.md, "headers" and "redirects"): an
# environment's `headers` group (request_set with every variable,
# request_remove of a client's field and of one edge adds, response_set
# over the upstream's field and a security header, response_add twice,
# response_remove of the upstream's and of edge's own nosniff) and a
# route's own group overriding it by name; `redirects` (a prefix with
# $path and $query, an exact path winning over it, a path that only
# begins like the prefix not redirected) answered without the upstream,
# outcome `redirect` in analytics; `unmatched = "not_found"` (404
# route_not_found, the routed prefix served). Each over HTTP/1.1 and over
# HTTP/2 (curl --http2-prior-knowledge). Then `edged --check` refusing
# each kind of bad rule with FILE:LINE, and a reload that changes a rule.
# tests/tools/echo_backend.py says what the upstream received and sends
# the response fields the test asks for (X-Echo-Response-Header). Runs
# against build/edged and build/asan/edged. Needs no root.
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
SOCK="$T_TMP/edged.sock"

# many_fields PREFIX N: "PREFIX-1: v1", ... "PREFIX-N: vN", a list's
# entries
many_fields() {
	local i out=""
	for ((i = 1; i <= $2; i++)); do
		out+="${out:+, }\"$1-$i: v$i\""
	done
	echo "$out"
}

# write_conf [API_VALUE]: the configuration, the /api route's X-Env value
# API_VALUE ("api").
write_conf() {
	{
		edged_conf_head "$P_ADMIN" "$SOCK"
		cat <<CONF
analytics = { file = "$T_TMP/requests.jsonl"; };
projects = (
  { id = "p-rules";
    environments = (
      { id = "e-rules";
        domains = [ "rules.test" ];
        deployment = { id = "d-rules"; upstreams = [ "127.0.0.1:$P_BACK" ]; };
        headers = {
          request_set = [ "X-Env: prod", "X-Who: \$client_ip \$host \$project_id \$environment_id \$\$5",
                          "X-Forwarded-Proto: edge-set", "X-Rid: \$request_id" ];
          request_remove = [ "X-Debug", "X-Deployment-ID" ];
          response_set = [ "Cache-Control: no-store", "X-Frame-Options: DENY" ];
          response_add = [ "Link: </a.css>; rel=preload", "Link: </b.js>; rel=preload" ];
          response_remove = [ "X-Backend-Secret", "X-Content-Type-Options" ];
        };
        security_headers = { frame_options = "SAMEORIGIN"; };
        redirects = (
          { from = "/old/*"; to = "https://new.test/n\$path\$query"; },
          { from = "/old/keep"; to = "/kept"; status = 307; },
          { from = "/moved"; to = "/here\$query"; status = 302; },
          { from = "/"; to = "/home"; }
        );
        routes = (
          { prefix = "/api";
            headers = { request_set = [ "X-Env: ${1:-api}" ];
                        response_set = [ "Cache-Control: private" ]; }; }
        );
      },
      { id = "e-many";
        domains = [ "many.test" ];
        deployment = { id = "d-many"; upstreams = [ "127.0.0.1:$P_BACK" ]; };
        headers = { response_set = [ $(many_fields E-Set 32) ];
                    response_add = [ $(many_fields E-Add 32) ]; };
        routes = ( { prefix = "/r";
          headers = { response_set = [ $(many_fields R-Set 32) ];
                      response_add = [ $(many_fields R-Add 32) ]; }; } );
      },
      { id = "e-strict";
        domains = [ "strict.test" ];
        deployment = { id = "d-strict"; upstreams = [ "127.0.0.1:$P_BACK" ]; };
        unmatched = "not_found";
        routes = ( { prefix = "/app"; } );
      }
    );
  }
);
CONF
	} >"$T_TMP/edge.conf"
}

# req PROTO HOST PATH [CURL ARG...]: curl to edged, the response's head
# in $T_TMP/h, its body in $T_TMP/b; prints the status.
req() {
	local proto=$1 host=$2 path=$3
	shift 3
	curl -sS --max-time 10 "$proto" -D "$T_TMP/h" -o "$T_TMP/b" \
		-w '%{http_code}' -H "Host: $host" "$@" \
		"http://127.0.0.1:$P_EDGE$path" 2>"$T_TMP/curl.err"
}

# fields NAME: the values of response field NAME in $T_TMP/h, one a line
fields() {
	tr -d '\r' <"$T_TMP/h" | awk -v n="$(echo "$1" | tr '[:upper:]' '[:lower:]')" \
		'{ i = index($0, ":"); if (i && tolower(substr($0, 1, i - 1)) == n) print substr($0, i + 2) }'
}

# sent NAME: the values of field NAME the backend received (the JSON body)
sent() {
	python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
for n, v in d["headers"]:
    if n.lower() == sys.argv[2].lower():
        print(v)' "$T_TMP/b" "$1" 2>/dev/null
}

backend_count() { wc -l <"$T_TMP/backend.log"; }

run_build() { # LABEL BIN
	local v=$1 bin=$2 proto p code n
	write_conf
	rm -f "$T_TMP/requests.jsonl" # this build's records alone
	if ! edged_start "$bin" "$T_TMP/edge.conf"; then
		t_fail "$v: edged starts" "$(tail -5 "$EDGED_LOG")"
		return
	fi
	for proto in --http1.1 --http2-prior-knowledge; do
		p="$v ${proto#--}"
		code=$(req "$proto" rules.test /x -H "X-Debug: 1" -H "X_Debug: 2" \
			-H "X-Deployment-ID: spoofed" -H "X-Echo-Response-Header: Cache-Control: max-age=60" \
			-H "X-Echo-Response-Header: X-Backend-Secret: s3cret" \
			-H "X-Echo-Response-Header: Link: </up.css>; rel=preload")
		rid=$(fields X-Request-ID)
		if [ "$code" = 200 ] && [ "$(sent X-Env)" = prod ] &&
			[ "$(sent X-Who)" = "127.0.0.1 rules.test p-rules e-rules \$5" ] &&
			[ "$(sent X-Forwarded-Proto)" = edge-set ] &&
			[ -n "$rid" ] && [ "$(sent X-Rid)" = "$rid" ] && [ "$(sent X-Request-ID)" = "$rid" ] &&
			[ -z "$(sent X-Debug)" ] && [ -z "$(sent X_Debug)" ] && [ -z "$(sent X-Deployment-ID)" ] &&
			[ "$(sent X-Project-ID)" = p-rules ] && [ "$(sent X-Client-IP)" = 127.0.0.1 ]; then
			t_ok "$p: request_set (every variable, over edge's X-Forwarded-Proto), request_remove (a client's field, edge's X-Deployment-ID); X-Request-ID kept"
		else
			t_fail "$p: request rules" "code $code; $(head -c 600 "$T_TMP/b")"
		fi
		if [ "$(fields Cache-Control)" = no-store ] && [ "$(fields X-Frame-Options)" = DENY ] &&
			[ "$(fields Link | tr '\n' '|')" = "</up.css>; rel=preload|</a.css>; rel=preload|</b.js>; rel=preload|" ] &&
			[ -z "$(fields X-Backend-Secret)" ] && [ -z "$(fields X-Content-Type-Options)" ] &&
			[ "$(fields Content-Type)" = application/json ]; then
			t_ok "$p: response_set (over the upstream's and a security header), response_add twice after the upstream's, response_remove (the upstream's, edge's nosniff)"
		else
			t_fail "$p: response rules" "$(tr '\r\n' '  ' <"$T_TMP/h")"
		fi
		code=$(req "$proto" rules.test /api/v1 -H "X-Echo-Response-Header: Cache-Control: max-age=60")
		if [ "$code" = 200 ] && [ "$(sent X-Env)" = api ] &&
			[ "$(sent X-Who)" = "127.0.0.1 rules.test p-rules e-rules \$5" ] &&
			[ "$(fields Cache-Control)" = private ] && [ "$(fields X-Frame-Options)" = DENY ]; then
			t_ok "$p: a route's headers group wins by name (X-Env, Cache-Control), the environment's others apply"
		else
			t_fail "$p: route rules" "code $code; $(sent X-Env) / $(fields Cache-Control)"
		fi
		n=$(backend_count)
		code=$(req "$proto" rules.test "/old/a/b?q=1&r=2")
		if [ "$code" = 301 ] && [ "$(fields Location)" = "https://new.test/n/a/b?q=1&r=2" ] &&
			grep -q '"error":"redirect"' "$T_TMP/b" && [ -z "$(fields Cache-Control)" ]; then
			t_ok "$p: redirect by prefix: 301, \$path and \$query, cacheable (no no-store)"
		else
			t_fail "$p: prefix redirect" "code $code; $(fields Location)"
		fi
		code=$(req "$proto" rules.test "/old")
		if [ "$code" = 301 ] && [ "$(fields Location)" = "https://new.test/n" ]; then
			t_ok "$p: the prefix itself: \$path empty, no \$query"
		else
			t_fail "$p: prefix itself" "code $code; $(fields Location)"
		fi
		code=$(req "$proto" rules.test "/old/keep")
		if [ "$code" = 307 ] && [ "$(fields Location)" = "/kept" ]; then
			t_ok "$p: an exact from wins over a prefix: 307"
		else
			t_fail "$p: exact redirect" "code $code; $(fields Location)"
		fi
		code=$(req "$proto" rules.test "/moved?x=y")
		if [ "$code" = 302 ] && [ "$(fields Location)" = "/here?x=y" ]; then
			t_ok "$p: exact path, 302 with the query"
		else
			t_fail "$p: exact 302" "code $code; $(fields Location)"
		fi
		if [ "$(backend_count)" = "$n" ]; then
			t_ok "$p: no redirect reached the upstream"
		else
			t_fail "$p: redirects upstream" "$n -> $(backend_count)"
		fi
		code=$(req "$proto" many.test /r/x)
		if [ "$code" = 200 ] && [ "$(grep -c '^[ERer]-[ASas][de][dt]-' "$T_TMP/h")" = 128 ]; then
			t_ok "$p: 128 fields from rules (32 set and 32 added by the environment and by the route) on one response"
		else
			t_fail "$p: many fields" "code $code; $(grep -c '^[ERer]-[ASas][de][dt]-' "$T_TMP/h") fields"
		fi
		code=$(req "$proto" rules.test "/oldx")
		if [ "$code" = 200 ]; then
			t_ok "$p: /oldx is not under /old: proxied"
		else
			t_fail "$p: /oldx" "code $code"
		fi
		code=$(req "$proto" strict.test "/other")
		if [ "$code" = 404 ] && grep -q '"error":"route_not_found"' "$T_TMP/b"; then
			t_ok "$p: unmatched = not_found: a path no route matches is 404 route_not_found"
		else
			t_fail "$p: unmatched" "code $code; $(head -c 200 "$T_TMP/b")"
		fi
		code=$(req "$proto" strict.test "/app/x")
		if [ "$code" = 200 ]; then
			t_ok "$p: ... and its route serves"
		else
			t_fail "$p: strict route" "code $code"
		fi
	done
	# an absolute-form target without a path is the root
	code=$(req --http1.1 rules.test "" --request-target "http://rules.test")
	if [ "$code" = 301 ] && [ "$(fields Location)" = /home ]; then
		t_ok "$v: GET http://rules.test (no path) redirected as / is"
	else
		t_fail "$v: absolute form" "code $code; $(fields Location)"
	fi
	# the analytics lane writes a batch at a time: wait for all 21
	for ((n = 0; n < 100; n++)); do
		[ "$(grep -c . "$T_TMP/requests.jsonl" 2>/dev/null)" -ge 21 ] && break
		sleep 0.1
	done
	if python3 - "$T_TMP/requests.jsonl" >"$T_TMP/out" <<'PY'; then
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
red = [r for r in recs if r.get("outcome") == "redirect"]
nf = [r for r in recs if r.get("outcome") == "route_not_found"]
ok = (len(red) == 9 and sorted({r["status"] for r in red}) == [301, 302, 307]
      and len(nf) == 2 and all(r["status"] == 404 for r in nf))
if not ok:
    print(" ".join("%s/%s" % (r.get("outcome"), r.get("status")) for r in recs))
sys.exit(0 if ok else 1)
PY
		t_ok "$v: analytics: 9 records of outcome redirect (301, 307, 302), 2 route_not_found (404)"
	else
		t_fail "$v: analytics" "$(tail -c 600 "$T_TMP/out")"
	fi
	"$B/edgectl" --socket "$SOCK" routes --json >"$T_TMP/routes.json"
	if python3 - "$T_TMP/routes.json" <<'PY'; then
import json, sys
rows = {(r["domain"], r.get("prefix")): r for r in json.load(open(sys.argv[1]))["routes"]}
api, dflt, strict = rows[("rules.test", "/api")], rows[("rules.test", None)], rows[("strict.test", None)]
ok = (api["headers"]["request_set"][0] == "X-Env: api"
      and "X-Env: prod" not in api["headers"]["request_set"]
      and "X-Env: prod" in dflt["headers"]["request_set"]
      and api["headers"]["response_set"][0] == "Cache-Control: private"
      and api["headers"]["response_add"] == ["Link: </a.css>; rel=preload", "Link: </b.js>; rel=preload"]
      and dflt["redirects"][0] == {"from": "/old/*", "to": "https://new.test/n$path$query", "status": 301}
      and len(api["redirects"]) == 4 and dflt["unmatched"] == "deployment"
      and strict["unmatched"] == "not_found" and strict["headers"] == {} and strict["redirects"] == [])
sys.exit(0 if ok else 1)
PY
		t_ok "$v: edgectl routes --json: each route's headers (the route's over the environment's), redirects, unmatched"
	else
		t_fail "$v: edgectl routes --json" "$(head -c 600 "$T_TMP/routes.json")"
	fi
	"$B/edgectl" --socket "$SOCK" routes >"$T_TMP/routes.txt"
	if grep -q "^rules.test .*/api .*(headers: 12 rules, 4 redirects)" "$T_TMP/routes.txt" &&
		grep -q "^strict.test .*(unmatched paths 404)" "$T_TMP/routes.txt"; then
		t_ok "$v: edgectl routes counts them"
	else
		t_fail "$v: edgectl routes" "$(cat "$T_TMP/routes.txt")"
	fi
	write_conf reloaded
	kill -HUP "$EPID"
	for ((n = 0; n < 50; n++)); do
		code=$(req --http1.1 rules.test /api/x)
		[ "$(sent X-Env)" = reloaded ] && break
		sleep 0.1
	done
	if [ "$(sent X-Env)" = reloaded ]; then
		t_ok "$v: a reload changes a rule"
	else
		t_fail "$v: reload" "X-Env $(sent X-Env)"
	fi
	edged_stop 10
	edged_sanitizers_clean "$v: no sanitizer report" && t_ok "$v: no sanitizer report"
}

edged_backend "$P_BACK" python3 "$TOOLS/echo_backend.py" "$P_BACK" "$T_TMP/backend.log"
run_build normal "$EDGED"
if edged_asan; then
	run_build asan "$EDGED_ASAN"
fi

# --check: each bad rule refused with its file, line and key
check_bad() { # NAME FRAGMENT ENV_LINES
	{
		edged_conf_head "$P_ADMIN" "$SOCK"
		cat <<CONF
projects = ( { id = "p"; environments = ( { id = "e"; domains = [ "c.test" ];
  deployment = { id = "d"; upstreams = [ "127.0.0.1:$P_BACK" ]; };
$3
} ); } );
CONF
	} >"$T_TMP/bad.conf"
	expect "--check: $1" 1 "$2" "$EDGED" --check -c "$T_TMP/bad.conf"
}
check_bad "a hop-by-hop name" 'bad.conf:8: projects[0].environments[0].headers.request_set[0]: Connection is hop-by-hop' \
	'headers = { request_set = [ "Connection: close" ]; };'
check_bad "X-Request-ID" "X-Request-ID is edge's own" \
	'headers = { response_remove = [ "X-Request-ID" ]; };'
check_bad "removing Host" "it can be set, not removed" \
	'headers = { request_remove = [ "Host" ]; };'
# shellcheck disable=SC2016 # a literal $ in the configuration
check_bad "an unknown variable" 'unknown variable "$nope"' \
	'headers = { request_set = [ "X-A: $nope" ]; };'
check_bad "a name that is no token" 'is not a header name' \
	'headers = { response_set = [ "X A: 1" ]; };'
check_bad "a control byte in a value" 'byte 0x01' \
	'headers = { response_set = [ "X-A: a\x01b" ]; };'
check_bad "set and removed" 'x-a is in response_set already' \
	'headers = { response_set = [ "X-A: 1" ]; response_remove = [ "x-a" ]; };'
check_bad "an unknown list" 'headers.request_add: unknown key' \
	'headers = { request_add = [ "X-A: 1" ]; };'
check_bad "redirect status 303" 'status: 301, 302, 307 or 308, not 303' \
	'redirects = ( { from = "/a"; to = "/b"; status = 303; } );'
check_bad "redirect from without a slash" 'from: a path starting with /' \
	'redirects = ( { from = "a"; to = "/b"; } );'
check_bad "redirect to a javascript: URL" 'to: an http:// or https:// URL' \
	'redirects = ( { from = "/a"; to = "javascript:alert(1)"; } );'
check_bad "redirect to a protocol-relative URL" 'to: an http:// or https:// URL' \
	'redirects = ( { from = "/a"; to = "//evil.test/"; } );'
# shellcheck disable=SC2016 # a literal $ in the configuration
check_bad "a redirect variable of headers" 'unknown variable "$host"' \
	'redirects = ( { from = "/a"; to = "https://x.test/$host"; } );'
check_bad "the same from twice" 'from: "/a/*" is redirected already' \
	'redirects = ( { from = "/a/*"; to = "/b"; }, { from = "/a/*"; to = "/c"; } );'
# shellcheck disable=SC2016 # a literal $ in the configuration
check_bad "a redirect whose host the request would choose" "to: the host must be the rule's" \
	'redirects = ( { from = "/o/*"; to = "/$path"; } );'
check_bad "an underscore spelling of a hop-by-hop name" 'Transfer_Encoding is hop-by-hop' \
	'headers = { response_set = [ "Transfer_Encoding: x" ]; };'
check_bad "unmatched" '"deployment" or "not_found", not "404"' \
	'unmatched = "404";'
t_exit
