#!/bin/bash
# test_edged_challenge.sh - the proof-of-work challenge (issue 34;
# docs/gates.md):
#   - tests/tools/challenge_check.py through edged, each check a client of
#     its own by X-Forwarded-For: the page (a browser's GET) and the 403
#     challenge_required JSON (anything else); a solution exchanged for
#     the pass cookie and a 303 back; wrong, replayed, expired, forged
#     (another environment's, another client prefix's, tampered, an
#     unknown key) and malformed tokens and passes challenged again; the
#     return path local only; passes and tokens made with the key file's
#     keys elsewhere (another host) accepted, the second key verifying
#     only; modes new_ip and on_rate_limit;
#   - edge_challenge_total and edge_challenge_failures_total;
#   - the same exchange over HTTP/2 (curl);
#   - edgectl challenge ENV on|off (kept across a reload), edgectl routes;
#   - no key file: a key made at start, said in the log, a pass made with
#     another key refused;
#   - --check refusals;
#   - in Debian's headless Chromium: a challenged URL solved (the
#     JavaScript SHA-256 on a page that is not a secure context, WebCrypto
#     on one that is) lands on the backend's page with the cookie; the
#     same profile again passes without the page; another profile is
#     challenged.
# Runs against build/edged and build/asan/edged (Chromium: build/edged
# only). Needs no root; as root Chromium runs in a network namespace of
# its own and reaches edged over a veth pair.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/lib_edged.sh
. "$(dirname "$0")/../lib_edged.sh"
edged_begin curl python3 openssl
edged_need_build

BASE=$(edged_ports 4)
P_EDGE=$BASE
P_BACK=$((BASE + 1))
P_ADMIN=$((BASE + 2))
P_TLS=$((BASE + 3))
SOCK="$T_TMP/edged.sock"
CHECK="$TOOLS/challenge_check.py"
K1=$(openssl rand -hex 32)
K2=$(openssl rand -hex 32)
printf '%s\n%s\n' "$K1" "$K2" >"$T_TMP/challenge.key"
chmod 0755 "$T_TMP"
chmod 0640 "$T_TMP/challenge.key"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
	-subj /CN=always.test -addext subjectAltName=DNS:always.test \
	-keyout "$T_TMP/tls.key" -out "$T_TMP/tls.pem" 2>/dev/null
chmod 0644 "$T_TMP/tls.key" "$T_TMP/tls.pem"

env_conf() { # ID DOMAIN MODE [DIFFICULTY]
	printf '      { id = "%s"; domains = [ "%s" ];
        deployment = { id = "d-%s"; upstreams = [ "127.0.0.1:%s" ]; };
        challenge = { mode = "%s"; difficulty = %s; }; },\n' \
		"$1" "$2" "$1" "$P_BACK" "$3" "${4:-8}"
}

write_conf() { # [KEYFILE-GROUP] [EXTRA ENVIRONMENT]
	local kf="challenge = { key_file = \"$T_TMP/challenge.key\"; };"
	[ $# -gt 0 ] && kf=$1
	{
		edged_conf_head "$P_ADMIN" "$SOCK"
		cat <<CONF
trusted_proxies = [ "127.0.0.1" ];
tls = { listen = [ "127.0.0.1:$P_TLS" ];
        certificates = ( { cert = "$T_TMP/tls.pem"; key = "$T_TMP/tls.key"; } ); };
analytics = { file = "$T_TMP/requests.jsonl"; };
ratelimit = { rate = "2/s"; burst = 10; };
$kf
projects = (
  { id = "p";
    environments = (
$(env_conf e-always always.test always)
$(env_conf e-other other.test always)
$(env_conf e-newip newip.test new_ip)
$(env_conf e-rl rl.test on_rate_limit)
$(env_conf e-web web.test always 12)
$(env_conf e-secure chal.localhost always 12)
      { id = "e-nf"; domains = [ "nf.test" ]; unmatched = "not_found";
        routes = ( { prefix = "/app"; } );
        deployment = { id = "d-nf"; upstreams = [ "127.0.0.1:$P_BACK" ]; };
        challenge = { mode = "always"; difficulty = 8; }; },
      { id = "e-off"; domains = [ "off.test" ];
        deployment = { id = "d-off"; upstreams = [ "127.0.0.1:$P_BACK" ]; }; }${2:-}
    );
  }
);
CONF
	} >"$T_TMP/edge.conf"
	# as root, Chromium runs in a namespace of its own (edged_browser_net)
	if [ -n "$BR_ADDR" ] && [ "$BR_ADDR" != 127.0.0.1 ]; then
		sed -i "s|^listen = \[ \"127.0.0.1:$P_EDGE\" \];|listen = [ \"127.0.0.1:$P_EDGE\", \"$BR_ADDR:$P_EDGE\" ];|" \
			"$T_TMP/edge.conf"
	fi
}

if ! edged_browser_net edge-chal 233 ech; then
	t_fail "Chromium's namespace" "could not be made"
	t_exit
	exit 1
fi

if ! edged_backend "$P_BACK" /usr/bin/python3 "$TOOLS/echo_backend.py" "$P_BACK" "$T_TMP/echo.log"; then
	t_fail "the echo backend starts" ""
	t_exit
	exit 1
fi

metric() { # NAME{LABELS}
	curl -s "http://127.0.0.1:$P_ADMIN/metrics" | awk -v k="$1" '$1 == k { print $2 }'
}

# curl through edged as client $1 (X-Forwarded-For), then curl's arguments
ccurl() {
	local ip=$1
	shift
	curl -sS --max-time 10 -H "X-Forwarded-For: $ip" "$@"
}

http2_exchange() { # LABEL
	local v=$1 code tok n loc cookie
	code=$(ccurl 198.51.100.1 --http2-prior-knowledge -o "$T_TMP/h2.json" -w '%{http_code} %{http_version}' \
		-H "Host: always.test" "http://127.0.0.1:$P_EDGE/h2")
	if [ "$code" = "403 2" ] && grep -q '"error":"challenge_required"' "$T_TMP/h2.json"; then
		t_ok "$v: HTTP/2: a GET that is not a browser's: 403 challenge_required"
	else
		t_fail "$v: HTTP/2 403" "$code $(cat "$T_TMP/h2.json")"
	fi
	ccurl 198.51.100.2 --http2-prior-knowledge -o "$T_TMP/h2.html" -H "Accept: text/html" \
		-H "Host: always.test" "http://127.0.0.1:$P_EDGE/h2?x=1"
	tok=$(grep -oE '"1\.[0-9]+\.[0-9]+\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{22}"' "$T_TMP/h2.html" | tr -d '"' | head -1)
	n=$(/usr/bin/python3 "$CHECK" solve "$tok" 2>/dev/null)
	ccurl 198.51.100.3 --http2-prior-knowledge -X POST -D "$T_TMP/h2.hdr" -o /dev/null -H "Accept: text/html" \
		-H "Host: always.test" "http://127.0.0.1:$P_EDGE/_edge/challenge?t=$tok&n=$n&r=%2Fh2%3Fx%3D1"
	loc=$(tr -d '\r' <"$T_TMP/h2.hdr" | awk -F': ' 'tolower($1) == "location" { print $2 }')
	cookie=$(tr -d '\r' <"$T_TMP/h2.hdr" | sed -n 's/^set-cookie: edge_pass=\([^;]*\);.*/\1/Ip')
	code=$(ccurl 198.51.100.4 --http2-prior-knowledge -o "$T_TMP/h2.json" -w '%{http_code}' \
		-H "Cookie: edge_pass=$cookie" -H "Host: always.test" "http://127.0.0.1:$P_EDGE$loc")
	if [ -n "$tok" ] && grep -q "^HTTP/2 303" "$T_TMP/h2.hdr" && [ "$loc" = "/h2?x=1" ] && [ "$code" = 200 ] &&
		grep -q '"path": "/h2?x=1"' "$T_TMP/h2.json"; then
		t_ok "$v: HTTP/2: the page, the exchange (303, the cookie), then the backend's answer"
	else
		t_fail "$v: HTTP/2 exchange" "token $tok n $n loc $loc cookie $cookie code $code $(head -3 "$T_TMP/h2.hdr")"
	fi
}

tls_exchange() { # LABEL: over HTTPS the pass is a __Host- cookie
	local v=$1 tok n cookie code
	local -a c=(--resolve "always.test:$P_TLS:127.0.0.1" --cacert "$T_TMP/tls.pem")
	ccurl 198.51.100.20 "${c[@]}" -o "$T_TMP/tls.html" -H "Accept: text/html" "https://always.test:$P_TLS/t"
	tok=$(grep -oE '"1\.[0-9]+\.[0-9]+\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{22}"' "$T_TMP/tls.html" | tr -d '"' | head -1)
	n=$(/usr/bin/python3 "$CHECK" solve "$tok" 2>/dev/null)
	ccurl 198.51.100.21 "${c[@]}" -X POST -D "$T_TMP/tls.hdr" -o /dev/null -H "Accept: text/html" \
		"https://always.test:$P_TLS/_edge/challenge?t=$tok&n=$n&r=%2Ft"
	cookie=$(tr -d '\r' <"$T_TMP/tls.hdr" | sed -n 's/^set-cookie: __Host-edge_pass=\([^;]*\);.*/\1/Ip')
	code=$(ccurl 198.51.100.22 "${c[@]}" -o /dev/null -w '%{http_code}' -H "Cookie: __Host-edge_pass=$cookie" \
		"https://always.test:$P_TLS/t")
	if [ -n "$tok" ] && [ -n "$cookie" ] && tr -d '\r' <"$T_TMP/tls.hdr" | grep -qi '^set-cookie: __Host-edge_pass=.*; Secure$' &&
		[ "$code" = 200 ]; then
		t_ok "$v: over HTTPS: the pass is __Host-edge_pass, Secure; admitted with it"
	else
		t_fail "$v: HTTPS exchange" "token $tok n $n cookie $cookie code $code $(tr -d '\r' <"$T_TMP/tls.hdr" | grep -i set-cookie)"
	fi
}

edgectl_checks() { # LABEL
	local v=$1 out rc code
	out=$("$EDGECTL" --socket "$SOCK" routes 2>&1)
	if grep -q 'newip.test.*challenge new_ip' <<<"$out" && grep -q 'always.test.*challenge always' <<<"$out" &&
		! grep -q 'off.test.*challenge' <<<"$out"; then
		t_ok "$v: edgectl routes: each environment's challenge mode"
	else
		t_fail "$v: edgectl routes" "$out"
	fi
	out=$("$EDGECTL" --socket "$SOCK" challenge e-off on 2>&1)
	code=$(ccurl 192.0.2.200 -o /dev/null -w '%{http_code}' -H "Host: off.test" "http://127.0.0.1:$P_EDGE/")
	if [ "$out" = "e-off: attack mode on" ] && [ "$code" = 403 ] &&
		[ "$("$EDGECTL" --socket "$SOCK" challenge 2>&1)" = e-off ] &&
		"$EDGECTL" --socket "$SOCK" routes 2>&1 | grep -q 'off.test.*challenge always (edgectl)'; then
		t_ok "$v: edgectl challenge e-off on: its requests challenged, listed, edgectl routes says so"
	else
		t_fail "$v: edgectl challenge on" "$out, $code"
	fi
	kill -HUP "$EPID"
	edged_wait_log "reloaded .*edge.conf" || sleep 1
	code=$(ccurl 192.0.2.201 -o /dev/null -w '%{http_code}' -H "Host: off.test" "http://127.0.0.1:$P_EDGE/")
	if [ "$code" = 403 ]; then
		t_ok "$v: attack mode kept across a reload"
	else
		t_fail "$v: attack mode after reload" "$code"
	fi
	out=$("$EDGECTL" --socket "$SOCK" challenge e-off off 2>&1)
	code=$(ccurl 192.0.2.202 -o /dev/null -w '%{http_code}' -H "Host: off.test" "http://127.0.0.1:$P_EDGE/")
	if [ "$out" = "e-off: attack mode off" ] && [ "$code" = 200 ] && [ -z "$("$EDGECTL" --socket "$SOCK" challenge 2>&1)" ]; then
		t_ok "$v: edgectl challenge e-off off: admitted again"
	else
		t_fail "$v: edgectl challenge off" "$out, $code"
	fi
	rc=0
	out=$("$EDGECTL" --socket "$SOCK" challenge e-nosuch on 2>&1) || rc=$?
	if [ "$rc" -ne 0 ] && grep -q "no environment 'e-nosuch'" <<<"$out"; then
		t_ok "$v: edgectl challenge of an unknown environment: refused"
	else
		t_fail "$v: unknown environment" "$rc: $out"
	fi
	rc=0
	out=$("$EDGECTL" --socket "$SOCK" challenge e-off maybe 2>&1) || rc=$?
	if [ "$rc" = 2 ] && grep -q "'maybe': on or off" <<<"$out"; then
		t_ok "$v: edgectl challenge ENV maybe: a usage error"
	else
		t_fail "$v: maybe" "$rc: $out"
	fi
}

run_build() { # LABEL BIN
	local v=$1 bin=$2 st name why r before after
	local -A b
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
	done < <(/usr/bin/python3 "$CHECK" "$P_EDGE" "$K1" "$K2" 2>&1)
	for r in issued solved passed failed; do
		after=$(metric "edge_challenge_total{result=\"$r\"}")
		if [ "${after:-0}" -gt 0 ]; then
			t_ok "$v: edge_challenge_total{result=\"$r\"} counted ($after)"
		else
			t_fail "$v: $r counted" "$after"
		fi
	done
	for r in malformed forged expired unsolved replayed; do
		after=$(metric "edge_challenge_failures_total{reason=\"$r\"}")
		if [ "${after:-0}" -gt 0 ]; then
			t_ok "$v: edge_challenge_failures_total{reason=\"$r\"} counted ($after)"
		else
			t_fail "$v: $r counted" "$after"
		fi
	done
	# the analytics records: the challenge's part in each
	sleep 1.5 # the file sink's batch
	if /usr/bin/python3 -c '
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
seen = {(r["outcome"], r["challenge"]) for r in recs}
for want in [("challenge_required", "issued"), ("challenge_passed", "solved"), ("ok", "passed"),
             ("challenge_required", "failed")]:
    assert want in seen, (want, sorted(seen, key=str))
off = [r for r in recs if r["host"] == "off.test"]
assert off and all(r["challenge"] is None for r in off), off[:1]
' "$T_TMP/requests.jsonl" 2>"$T_TMP/py.err"; then
		t_ok "$v: analytics: challenge issued, solved, passed and failed beside their outcomes; none for an environment without one"
	else
		t_fail "$v: analytics challenge" "$(tail -c 400 "$T_TMP/py.err")"
	fi
	http2_exchange "$v"
	tls_exchange "$v"
	edgectl_checks "$v"
	if [ "$v" = normal ]; then
		browser_checks
	fi
	if grep -q "no challenge.key_file" "$EDGED_LOG"; then
		t_fail "$v: with a key file, no word of a key made at start" "$(grep challenge "$EDGED_LOG")"
	else
		t_ok "$v: with a key file, no word of a key made at start"
	fi
	edged_stop 10
	edged_sanitizers_clean "$v: no sanitizer report" && t_ok "$v: no sanitizer report"

	# no key file: a key of its own, said once; a pass of K1 refused
	write_conf ""
	if ! edged_start "$bin" "$T_TMP/edge.conf"; then
		t_fail "$v: edged starts without a key file" "$(tail -5 "$EDGED_LOG")"
		return
	fi
	before=$(/usr/bin/python3 "$CHECK" pass "$K1" e-always 198.51.100.9 $(($(date +%s) + 3600)))
	b[a]=$(ccurl 198.51.100.9 -o /dev/null -w '%{http_code}' -H "Cookie: edge_pass=$before" -H "Host: always.test" "http://127.0.0.1:$P_EDGE/")
	b[b]=$(ccurl 198.51.100.9 -o /dev/null -w '%{http_code}' -H "Host: always.test" "http://127.0.0.1:$P_EDGE/")
	if [ "${b[a]}" = 403 ] && [ "${b[b]}" = 403 ] &&
		grep -Eq "edge.conf:[0-9]+: .*challenge: no challenge.key_file: passes are signed with a key made at start" "$EDGED_LOG" &&
		[ "$(grep -c "note: challenge: no challenge.key_file" "$EDGED_LOG")" = 1 ]; then
		t_ok "$v: no key file: a pass of another key refused; the key made at start said at start and once at the first challenge"
	else
		t_fail "$v: no key file" "${b[a]} ${b[b]} $(grep challenge "$EDGED_LOG")"
	fi
	edged_stop 10
	edged_sanitizers_clean "$v: no sanitizer report (no key file)" && t_ok "$v: no sanitizer report (no key file)"
}

# Chromium: the page solved, the cookie kept by the profile
browser_checks() {
	local out i0 i1
	if ! command -v chromium >/dev/null 2>&1; then
		t_skip "Chromium" "chromium is not installed (scripts/install-deps installs it)"
		return
	fi
	i0=$(metric 'edge_challenge_total{result="issued"}')
	out=$("${BR_IN[@]}" /usr/bin/python3 "$TOOLS/browser.py" --url "http://web.test:$P_EDGE/landing?x=1" --profile "$T_TMP/profA" \
		--host-resolver-rules "MAP web.test $BR_ADDR" --timeout 120 2>&1)
	if /usr/bin/python3 -c '
import json, sys
d = json.loads(sys.argv[1])
assert d["status"] == 200 and d["url"].endswith("/landing?x=1"), d
b = json.loads(d["body"])
assert b["path"] == "/landing?x=1", d["body"]
ip = [v for k, v in b["headers"] if k.lower() == "x-client-ip"]
assert ip == [sys.argv[2]], ip
c = [x for x in d["cookies"] if x["name"] == "edge_pass"][0]
assert c["httpOnly"] and c["sameSite"] == "Lax" and c["path"] == "/", c
assert d["solved"]["method"] == "js", d["solved"]
' "$out" "$BR_CLIENT" 2>"$T_TMP/py.err"; then
		t_ok "Chromium (not a secure context), from $BR_CLIENT: the page solved by its JavaScript SHA-256, back on /landing?x=1 with the cookie"
	else
		t_fail "Chromium solves" "$(cat "$T_TMP/py.err") $out"
	fi
	i1=$(metric 'edge_challenge_total{result="issued"}')
	out=$("${BR_IN[@]}" /usr/bin/python3 "$TOOLS/browser.py" --url "http://web.test:$P_EDGE/second" --profile "$T_TMP/profA" \
		--host-resolver-rules "MAP web.test $BR_ADDR" --timeout 60 2>&1)
	if /usr/bin/python3 -c '
import json, sys
d = json.loads(sys.argv[1])
assert d["status"] == 200 and json.loads(d["body"])["path"] == "/second", d
assert d["solved"] is None, d
' "$out" 2>"$T_TMP/py.err" && [ "$(metric 'edge_challenge_total{result="issued"}')" = "$i1" ]; then
		t_ok "Chromium, the same profile again: the backend's page, no challenge"
	else
		t_fail "Chromium second visit" "$(cat "$T_TMP/py.err") $i1 $out"
	fi
	out=$("${BR_IN[@]}" /usr/bin/python3 "$TOOLS/browser.py" --url "http://web.test:$P_EDGE/second" --profile "$T_TMP/profB" \
		--host-resolver-rules "MAP web.test $BR_ADDR" --timeout 120 2>&1)
	if /usr/bin/python3 -c '
import json, sys
d = json.loads(sys.argv[1])
assert d["status"] == 200 and d["solved"] is not None, d
' "$out" 2>"$T_TMP/py.err" && [ "$(metric 'edge_challenge_total{result="issued"}')" -gt "$i1" ] && [ "$i1" -gt "$i0" ]; then
		t_ok "Chromium, another profile: challenged, solved"
	else
		t_fail "Chromium other profile" "$(cat "$T_TMP/py.err") $out"
	fi
	# *.localhost is a secure context: WebCrypto's SHA-256 in the worker
	out=$("${BR_IN[@]}" /usr/bin/python3 "$TOOLS/browser.py" --url "http://chal.localhost:$P_EDGE/s" --profile "$T_TMP/profC" \
		--host-resolver-rules "MAP chal.localhost $BR_ADDR" --timeout 120 2>&1)
	if /usr/bin/python3 -c '
import json, sys
d = json.loads(sys.argv[1])
assert d["status"] == 200 and json.loads(d["body"])["path"] == "/s", d
assert d["solved"]["method"] == "webcrypto", d["solved"]
' "$out" 2>"$T_TMP/py.err"; then
		t_ok "Chromium (a secure context): solved with WebCrypto"
	else
		t_fail "Chromium webcrypto" "$(cat "$T_TMP/py.err") $out"
	fi
}

run_build normal "$EDGED"
if edged_asan; then
	run_build asan "$EDGED_ASAN"
fi

# --check: refusals with FILE:LINE
check() { # KEYFILE-GROUP CONF-ENV -> output of edged --check
	write_conf "$1" ",
      { id = \"e-x\"; domains = [ \"x.test\" ];
        deployment = { id = \"d9\"; upstreams = [ \"127.0.0.1:$P_BACK\" ]; };
        $2 }"
	"$EDGED" --check -c "$T_TMP/edge.conf" 2>&1
}
refused() { # NAME PATTERN KEYFILE-GROUP CONF-ENV
	local out rc=0
	out=$(check "$3" "$4") || rc=$?
	if [ "$rc" -ne 0 ] && grep -Eq "edge.conf:[0-9]+: .*$2" <<<"$out"; then
		t_ok "--check refuses $1"
	else
		t_fail "--check $1" "$out"
	fi
}
KF="challenge = { key_file = \"$T_TMP/challenge.key\"; };"
refused "an unknown mode" 'challenge.mode.*"off", "new_ip", "on_rate_limit" or "always", not "sometimes"' \
	"$KF" 'challenge = { mode = "sometimes"; };'
refused "difficulty 0" "challenge.difficulty" "$KF" 'challenge = { mode = "always"; difficulty = 0; };'
refused "difficulty 29" "challenge.difficulty" "$KF" 'challenge = { mode = "always"; difficulty = 29; };'
refused "a ttl under a minute" "challenge.ttl" "$KF" 'challenge = { mode = "always"; ttl = "30s"; };'
refused "a ttl over 30 days" "challenge.ttl.*at most 30d" "$KF" 'challenge = { mode = "always"; ttl = "31d"; };'
rc=0
out=$(check "$KF" 'challenge = { mode = "always"; ttl = "30d"; };') || rc=$?
if [ "$rc" -eq 0 ]; then
	t_ok "--check: a ttl of 30 days"
else
	t_fail "--check ttl 30d" "$out"
fi
refused "an unknown key" "challenge.*level" "$KF" 'challenge = { mode = "always"; level = 3; };'
refused "a challenge that is no group" "challenge: a group" "$KF" 'challenge = "always";'
refused "a missing key file" "challenge.key_file.*no-such.key: No such file" \
	"challenge = { key_file = \"$T_TMP/no-such.key\"; };" ""
refused "a relative key file" "challenge.key_file.*must be an absolute path" \
	'challenge = { key_file = "challenge.key"; };' ""
printf 'abcd\n' >"$T_TMP/short.key"
refused "a short key" "short.key: line 1: a key is 64 hex digits" \
	"challenge = { key_file = \"$T_TMP/short.key\"; };" ""
printf '%s\n%s\n%s\n' "$K1" "$K2" "$K1" >"$T_TMP/three.key"
refused "three keys" "three.key: line 3: at most two keys" \
	"challenge = { key_file = \"$T_TMP/three.key\"; };" ""
mkfifo "$T_TMP/fifo.key"
refused "a FIFO for a key file" "fifo.key: not a regular file" \
	"challenge = { key_file = \"$T_TMP/fifo.key\"; };" ""
refused "an unknown key in the top-level group" "challenge.*secret" \
	'challenge = { secret = "x"; };' ""
printf '%064d\n' 0 >"$T_TMP/zero.key"
refused "a key of zeros" "zero.key: line 1: a key of zeros is no secret" \
	"challenge = { key_file = \"$T_TMP/zero.key\"; };" ""
# warnings: a key file every user reads, a challenge without a key file
cp "$T_TMP/challenge.key" "$T_TMP/open.key"
chmod 0644 "$T_TMP/open.key"
rc=0
out=$(check "challenge = { key_file = \"$T_TMP/open.key\"; };" "") || rc=$?
if [ "$rc" -eq 0 ] && grep -Eq "edge.conf:[0-9]+: .*challenge.key_file: .*open.key is readable by every user" <<<"$out"; then
	t_ok "--check: a key file every user can read: a warning"
else
	t_fail "--check open key" "$out"
fi
rc=0
out=$(check "" "") || rc=$?
if [ "$rc" -eq 0 ] && [ "$(grep -c "no challenge.key_file: passes are signed with a key made at start" <<<"$out")" = 1 ]; then
	t_ok "--check: environments challenged without a key file: one warning"
else
	t_fail "--check keyless" "$out"
fi
# a key file only root reads: refused at start (edged reads it as its
# user on a reload), by --check as by edged
if [ "$(id -u)" = 0 ] && id nobody >/dev/null 2>&1; then
	chmod 0600 "$T_TMP/challenge.key"
	write_conf
	sed -i 's/^user = .*/user = "nobody";/' "$T_TMP/edge.conf"
	rc=0
	out=$("$EDGED" --check -c "$T_TMP/edge.conf" 2>&1) || rc=$?
	rc2=0
	out2=$(timeout 20 "$EDGED" -c "$T_TMP/edge.conf" -f 2>&1) || rc2=$?
	if [ "$rc" -ne 0 ] && grep -q 'challenge.key: Permission denied \[read as user "nobody"' <<<"$out" &&
		[ "$rc2" -ne 0 ] && [ "$rc2" -ne 124 ] && grep -q 'challenge.key: Permission denied \[read as user "nobody"' <<<"$out2"; then
		t_ok "a key file only root reads: refused by --check and at start, naming the user"
	else
		t_fail "root-only key file" "check $rc: $out; start $rc2: $(tail -3 <<<"$out2")"
	fi
	chmod 0640 "$T_TMP/challenge.key"
fi
t_exit
