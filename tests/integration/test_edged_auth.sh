#!/bin/bash
# test_edged_auth.sh - the API key and JWT gates (issue 34; docs/gates.md):
#   - tests/tools/auth_check.py through edged: API keys from a file
#     (X-Api-Key and Bearer; unknown, duplicated, Basic, empty, oversized
#     refused 401 with WWW-Authenticate; the key's name told upstream, a
#     client's own X-Api-Key-Name dropped); JWTs signed with keys openssl
#     made (RS256, PS256, ES256, EdDSA admitted, claims copied into
#     X-Jwt-Claim-*; expired, early, wrong issuer or audience, alg none,
#     the RSA public key as an HS256 secret, tampered, an unknown key, an
#     alg not allowed, malformed: refused); a JWKS (kid, an oct key for
#     HS256); both methods on one environment; a route's own gate; the
#     gate before the rate limit;
#   - edge_auth_total, the analytics records' auth field, edgectl routes;
#   - the same over HTTP/2 (curl);
#   - --check refusals and warnings (no audience, a TCP route to a gated
#     environment).
# Runs against build/edged and build/asan/edged. Needs no root.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/lib_edged.sh
. "$(dirname "$0")/../lib_edged.sh"
edged_begin curl python3 openssl
edged_need_build
if ! /usr/bin/python3 -c 'import jwt, cryptography' 2>/dev/null; then
	t_skip "auth" "python3-jwt and python3-cryptography are not installed (scripts/install-deps installs them)"
	t_exit
fi

BASE=$(edged_ports 4)
P_EDGE=$BASE
P_BACK=$((BASE + 1))
P_ADMIN=$((BASE + 2))
P_TCP=$((BASE + 3))
SOCK="$T_TMP/edged.sock"
CHECK="$TOOLS/auth_check.py"
K="$T_TMP/keys"
mkdir -p "$K"
chmod 0755 "$T_TMP" "$K"
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$K/rsa.pem" 2>/dev/null
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$K/other.pem" 2>/dev/null
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$K/ec.pem" 2>/dev/null
openssl genpkey -algorithm ED25519 -out "$K/ed.pem" 2>/dev/null
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:1024 -out "$K/small.pem" 2>/dev/null
for k in rsa ec ed small; do
	openssl pkey -in "$K/$k.pem" -pubout -out "$K/$k.pub" 2>/dev/null
done
cat "$K/rsa.pub" "$K/ec.pub" "$K/ed.pub" >"$K/jwt.pub"
openssl rand -hex 32 >"$K/oct.hex"
openssl rand -hex 24 >"$K/key_ci"
openssl rand -base64 24 | tr '+/' '-_' >"$K/key_deploy"
{
	echo "# name  sha256(key)"
	printf 'ci %s\n' "$(tr -d '\n' <"$K/key_ci" | sha256sum | cut -d' ' -f1)"
	printf '\n  deploy\t%s  \n' "$(tr -d '\n' <"$K/key_deploy" | sha256sum | cut -d' ' -f1)"
} >"$K/keys.txt"
/usr/bin/python3 "$CHECK" jwks "$K/jwks.json" "$K/rsa.pub" "$(cat "$K/oct.hex")"
/usr/bin/python3 "$CHECK" weak "$K" "$K/rsa.pub"
chmod 0644 "$K"/*

JWT="jwt = { keys = \"$K/jwt.pub\"; issuer = \"https://idp.test\"; audience = \"edge-api\";
                algorithms = [ \"RS256\", \"PS256\", \"ES256\", \"EdDSA\" ]; leeway = \"5s\";
                copy_claims = [ \"sub\", \"email\", \"roles\" ]; };"
KEYS="api_keys = { file = \"$K/keys.txt\"; };"

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
		edged_conf_head "$P_ADMIN" "$SOCK"
		cat <<CONF
trusted_proxies = [ "127.0.0.1" ];
analytics = { file = "$T_TMP/requests.jsonl"; };
ratelimit = { rate = "2/s"; burst = 5; };
projects = (
  { id = "p";
    environments = (
$(env_conf e-key key.test "$KEYS")
$(env_conf e-jwt jwt.test "$JWT")
$(env_conf e-jwks jwks.test "jwt = { keys = \"$K/jwks.json\"; algorithms = [ \"RS256\", \"HS256\" ]; };")
$(env_conf e-both both.test "$KEYS" "$JWT")
      { id = "e-route"; domains = [ "route.test" ];
        routes = ( { prefix = "/private"; $KEYS },
                   { prefix = "/token"; $JWT } );
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
fi

http2_checks() { # LABEL
	local v=$1 code tok
	code=$(curl -sS --max-time 10 --http2-prior-knowledge -D "$T_TMP/h2.hdr" -o "$T_TMP/h2.json" \
		-w '%{http_code} %{http_version}' -H "Host: jwt.test" "http://127.0.0.1:$P_EDGE/h2")
	if [ "$code" = "401 2" ] && grep -qi '^www-authenticate: Bearer realm="edge"' "$T_TMP/h2.hdr" &&
		grep -q '"error":"unauthorized"' "$T_TMP/h2.json"; then
		t_ok "$v: HTTP/2: no token: 401 unauthorized with WWW-Authenticate"
	else
		t_fail "$v: HTTP/2 401" "$code $(cat "$T_TMP/h2.hdr" "$T_TMP/h2.json")"
	fi
	tok=$(/usr/bin/python3 -c '
import jwt, sys, time
print(jwt.encode({"iss": "https://idp.test", "aud": "edge-api", "sub": "h2-user",
                  "exp": int(time.time()) + 60}, open(sys.argv[1], "rb").read(), algorithm="ES256"))
' "$K/ec.pem")
	code=$(curl -sS --max-time 10 --http2-prior-knowledge -o "$T_TMP/h2.json" -w '%{http_code} %{http_version}' \
		-H "Host: jwt.test" -H "Authorization: Bearer $tok" -H "X-Jwt-Claim-sub: forged" \
		"http://127.0.0.1:$P_EDGE/h2")
	if [ "$code" = "200 2" ] && /usr/bin/python3 -c '
import json, sys
h = [v for k, v in json.load(open(sys.argv[1]))["headers"] if k.lower() == "x-jwt-claim-sub"]
assert h == ["h2-user"], h' "$T_TMP/h2.json"; then
		t_ok "$v: HTTP/2: an ES256 token admits, its sub copied, the client's own dropped"
	else
		t_fail "$v: HTTP/2 200" "$code $(head -c 300 "$T_TMP/h2.json")"
	fi
	code=$(curl -sS --max-time 10 --http2-prior-knowledge -o /dev/null -w '%{http_code}' \
		-H "Host: key.test" -H "X-Api-Key: $(cat "$K/key_ci")" "http://127.0.0.1:$P_EDGE/h2")
	if [ "$code" = 200 ]; then
		t_ok "$v: HTTP/2: an API key admits"
	else
		t_fail "$v: HTTP/2 api key" "$code"
	fi
}

run_build() { # LABEL BIN
	local v=$1 bin=$2 st name why n out
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
	done < <(/usr/bin/python3 "$CHECK" "$P_EDGE" "$K" 2>&1)
	http2_checks "$v"
	out=$("$EDGECTL" --socket "$SOCK" routes 2>&1)
	if grep -q 'key.test .*(api keys (2))' <<<"$out" && grep -q 'jwt.test .*(jwt)' <<<"$out" &&
		grep -q 'both.test .*(api keys (2) or jwt)' <<<"$out" && grep -q 'route.test  */private .*(api keys (2))' <<<"$out" &&
		"$EDGECTL" --socket "$SOCK" routes --json | /usr/bin/python3 -c '
import json, sys
r = {x["domain"] + (x.get("prefix") or ""): x for x in json.load(sys.stdin)["routes"]}
j = r["jwt.test"]["auth"]["jwt"]
assert j == {"keys": 3, "algorithms": ["RS256", "PS256", "ES256", "EdDSA"], "issuer": "https://idp.test",
             "audience": "edge-api", "leeway_s": 5, "copy_claims": ["sub", "email", "roles"]}, j
assert r["route.test"]["auth"] is None, r["route.test"]
'; then
		t_ok "$v: edgectl routes: each route's gate (and --json its settings)"
	else
		t_fail "$v: edgectl routes" "$out"
	fi
	for m in 'method="none",result="missing"' 'method="api_key",result="ok"' \
		'method="api_key",result="unknown_key"' 'method="jwt",result="ok"' 'method="jwt",result="expired"' \
		'method="jwt",result="alg_refused"' 'method="jwt",result="bad_signature"' \
		'method="jwt",result="wrong_audience"' 'method="jwt",result="wrong_issuer"' \
		'method="jwt",result="not_yet_valid"' 'method="jwt",result="unknown_key"' 'method="jwt",result="malformed"'; do
		n=$(edged_metric "edge_auth_total{$m}")
		if [ "${n:-0}" -gt 0 ]; then
			t_ok "$v: edge_auth_total{$m} counted ($n)"
		else
			t_fail "$v: edge_auth_total{$m}" "$n"
		fi
	done
	sleep 1.5 # the file sink's batch
	if /usr/bin/python3 -c '
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
seen = {(r["outcome"], r.get("status"), r.get("auth")) for r in recs}
for want in [("unauthorized", 401, "api_key"), ("unauthorized", 401, "jwt"), ("unauthorized", 401, None),
             ("ok", 200, "api_key"), ("ok", 200, "jwt")]:
    assert want in seen, (want, sorted(seen, key=str))
' "$T_TMP/requests.jsonl" 2>"$T_TMP/py.err"; then
		t_ok "$v: analytics: each record has its auth method and outcome"
	else
		t_fail "$v: analytics" "$(tail -2 "$T_TMP/py.err")"
	fi
	edged_stop 10
	edged_sanitizers_clean "$v: no sanitizer report" && t_ok "$v: no sanitizer report"
}

# edged --check: each bad gate refused with the file and line
check_refusals() {
	edged_check_refusals write_conf <<EOF
api_keys = { file = "$K/missing.txt"; };|api_keys.file: .*No such file
api_keys = { file = "$K/jwt.pub"; };|jwt.pub: line 1: NAME and the key
api_keys = "x";|a group
api_keys = { path = "x"; };|unknown key
jwt = { keys = "$K/rsa.pem"; };|a private key: give the public key
jwt = { keys = "$K/small.pub"; };|fewer than 2048 or more than 8192 bits
jwt = { keys = "$K/keys.txt"; };|no PUBLIC KEY or CERTIFICATE
jwt = { keys = "$K/rsa.pub"; };|algorithm ES256: none of the 1 keys is for it
jwt = { keys = "$K/rsa.pub"; algorithms = [ "HS256" ]; };|HMAC needs a JWKS "oct" key
jwt = { keys = "$K/rsa.pub"; algorithms = [ "none" ]; };|"none": RS256
jwt = { keys = "$K/rsa.pub"; algorithms = [ ]; };|at least one algorithm
jwt = { keys = "$K/rsa.pub"; algorithms = [ "RS256" ]; leeway = "1h"; };|at most 10m
jwt = { keys = "$K/rsa.pub"; algorithms = [ "RS256" ]; copy_claims = [ "a b" ]; };|claim "a b"
jwt = { keys = "$K/jwks.json"; algorithms = [ "ES256" ]; };|algorithm ES256
jwt = { keys = "$K/rsa.pub"; algorithms = [ "RS256" ]; issuer = ""; };|jwt.issuer: empty: leave it out
jwt = { keys = "$K/rsa.pub"; algorithms = [ "RS256" ]; audience = ""; };|jwt.audience: empty: leave it out
jwt = { keys = "$K/weak-rsa-e1.json"; algorithms = [ "RS256" ]; };|exponent is not odd, from 3
jwt = { keys = "$K/weak-rsa-e2.json"; algorithms = [ "RS256" ]; };|exponent is not odd, from 3
jwt = { keys = "$K/weak-ed-zero.json"; algorithms = [ "EdDSA" ]; };|small order lets anyone sign
jwt = { keys = "$K/weak-ed-one.json"; algorithms = [ "EdDSA" ]; };|small order lets anyone sign
jwt = { keys = "$K/weak-ed-minus1.json"; algorithms = [ "EdDSA" ]; };|small order lets anyone sign
jwt = { keys = "$K/weak-ed-noncanon.json"; algorithms = [ "EdDSA" ]; };|small order lets anyone sign
EOF
}

run_build normal "$EDGED"
check_refusals
# a jwt group without an audience: a warning (tokens for other apps pass)
write_conf
out=$("$EDGED" -c "$T_TMP/edge.conf" --check 2>&1)
if grep -qE "edge.conf:[0-9]+: projects\[0\]\.environments\[2\]\.jwt: no audience: a token the keys signed for any other application" <<<"$out" &&
	[ "$(grep -c "no audience" <<<"$out")" = 1 ]; then
	t_ok "--check warns of a jwt group without an audience (once: the others have one)"
else
	t_fail "--check: no audience warning" "$out"
fi
# a TCP route to a gated environment: warned of (its connections are not
# checked)
write_conf
echo "tcp_routes = ( { listen = \"127.0.0.1:$P_TCP\"; environment = \"e-key\"; } );" >>"$T_TMP/edge.conf"
out=$("$EDGED" -c "$T_TMP/edge.conf" --check 2>&1)
if grep -qE "edge.conf:[0-9]+: tcp_routes\[0\]: environment e-key has a gate \(api_keys, jwt or auth_request\), which a TCP route's connections do not meet" <<<"$out"; then
	t_ok "--check warns of a TCP route to a gated environment"
else
	t_fail "--check: tcp route warning" "$out"
fi
# ... and a TCP route refused part way (no environment) beside it: its
# error, no crash
write_conf
echo "tcp_routes = ( { listen = \"127.0.0.1:$P_TCP\"; } );" >>"$T_TMP/edge.conf"
rc=0
bin=$EDGED
[ -x "$EDGED_ASAN" ] && bin=$EDGED_ASAN
out=$("$bin" -c "$T_TMP/edge.conf" --check 2>&1) || rc=$?
if [ "$rc" = 1 ] && grep -q "tcp_routes\[0\].environment: missing (required)" <<<"$out" &&
	! grep -q "runtime error\|Sanitizer" <<<"$out"; then
	t_ok "--check: a TCP route without an environment beside gated ones: its error, no crash"
else
	t_fail "--check: tcp route without environment" "$rc: $out"
fi
if edged_asan; then
	run_build asan "$EDGED_ASAN"
fi
t_exit
