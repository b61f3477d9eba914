#!/bin/bash
# test_acme_client.sh - the ACME client (userspace/acme.c; docs/acme.md)
# through tests/tools/acme_get against Debian's pebble, the ACME test CA,
# with the normal and the ASan build of the driver:
#   - a certificate issued for two names over http-01 (the driver serves
#     the tokens on its own port, as edged will): the chain verifies with
#     openssl against pebble's root (its management interface's
#     /roots/0), holds both names, and matches the key delivered; every
#     token published was unpublished;
#   - the account key file created 0600 and reused by a second run (the
#     same account URL, the file unchanged);
#   - a wrong key authorization: pebble's problem document (type
#     ...:unauthorized, status 403) reported, the token unpublished;
#   - a refused port, a plain HTTP port, an HTTPS server that is no CA
#     (pebble's management interface), the wrong CA file, a host name
#     the certificate does not hold: a clear message, at once;
#   - a broken or hostile CA (tests/tools/acme_evil.py): bad JSON, huge
#     bodies and heads, wrong content types, slow and trickling answers,
#     redirects, problem documents, badNonce without end, missing fields,
#     bad tokens, an authorization pending for ever (Retry-After
#     honoured, the order's deadline), bad PEM and base64, a certificate
#     for another key;
#   - orders cancelled at several points: no callback after, every token
#     unpublished;
#   - pebble rejecting half the nonces (PEBBLE_WFE_NONCEREJECT=50): the
#     order still succeeds through badNonce retries.
# pebble resolves the test's names (*.acme.test, and ca.acme.test for
# its own address) with pebble-challtestsrv's DNS server, which answers
# every A query with 127.0.0.1 (and no AAAA); the driver uses the same
# server through libevent's evdns (--dns). Ports: 8 free ones in
# 42000-42999 (edged_ports). Needs no root; skipped without pebble
# (scripts/install-deps installs it). About 30 s.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/lib_edged.sh
. "$(dirname "$0")/../lib_edged.sh"
edged_begin python3 openssl curl
for c in pebble pebble-challtestsrv; do
	if ! command -v "$c" >/dev/null; then
		t_skip "$(basename "$0")" "needs $c (apt-get install pebble)"
		exit 77
	fi
done
if [ ! -x "$B/tools/acme_get" ]; then
	t_skip "$(basename "$0")" "$B/tools/acme_get not built"
	exit 77
fi

BASE=$(edged_ports 8 42000 43000)
P_ACME=$BASE         # pebble's ACME server (HTTPS)
P_MGMT=$((BASE + 1)) # pebble's management interface (HTTPS, not ACME)
P_HTTP=$((BASE + 2)) # http-01: the driver serves the tokens there
P_TLS=$((BASE + 3))  # tls-alpn-01: pebble's setting, unused
P_DNS=$((BASE + 4))  # pebble-challtestsrv's DNS (TCP and UDP)
P_CTS=$((BASE + 5))  # pebble-challtestsrv's management (plain HTTP)
P_DOWN=$((BASE + 6)) # nothing listens there
P_EVIL=$((BASE + 7)) # tests/tools/acme_evil.py
CA_HOST=ca.acme.test
DIR="https://$CA_HOST:$P_ACME/dir"
export ASAN_OPTIONS=${ASAN_OPTIONS:-$EDGED_ASAN_OPTIONS}

# the certificate of pebble's HTTPS servers (and acme_evil.py's), from a
# CA of the test's: what the driver's --ca trusts
if ! bash "$TOOLS/mkchain.sh" "$T_TMP" wfe 0 "DNS:$CA_HOST" >"$T_TMP/mkchain.log" 2>&1; then
	t_fail "the CA's certificate is made" "$(cat "$T_TMP/mkchain.log")"
	t_exit
	exit 1
fi
WFE_CA="$T_TMP/wfe-root.crt"
cat >"$T_TMP/pebble.json" <<JSON
{
  "pebble": {
    "listenAddress": "127.0.0.1:$P_ACME",
    "managementListenAddress": "127.0.0.1:$P_MGMT",
    "certificate": "$T_TMP/wfe.crt",
    "privateKey": "$T_TMP/wfe.key",
    "httpPort": $P_HTTP,
    "tlsPort": $P_TLS,
    "ocspResponderURL": "",
    "externalAccountBindingRequired": false
  }
}
JSON

pebble-challtestsrv -dns01 "127.0.0.1:$P_DNS" -management "127.0.0.1:$P_CTS" \
	-http01 "" -https01 "" -tlsalpn01 "" -defaultIPv4 127.0.0.1 -defaultIPv6 "" \
	>"$T_TMP/challtestsrv.log" 2>&1 &
edged_track $!
PEBBLE_PID=
# start_pebble REJECT: pebble rejecting REJECT % of good nonces, its
# validations without sleeps and never reusing an authorization (every
# order answers its challenges); 0 once it serves its directory and its
# root is in $T_TMP/pebble-root.pem
start_pebble() {
	local i
	if [ -n "$PEBBLE_PID" ]; then
		kill "$PEBBLE_PID" 2>/dev/null
		wait "$PEBBLE_PID" 2>/dev/null
	fi
	PEBBLE_VA_NOSLEEP=1 PEBBLE_WFE_NONCEREJECT=$1 PEBBLE_AUTHZREUSE=0 \
		pebble -config "$T_TMP/pebble.json" -dnsserver "127.0.0.1:$P_DNS" \
		>"$T_TMP/pebble-$1.log" 2>&1 &
	PEBBLE_PID=$!
	edged_track "$PEBBLE_PID"
	for ((i = 0; i < 200; i++)); do
		if curl -sf -m 2 --cacert "$WFE_CA" --resolve "$CA_HOST:$P_ACME:127.0.0.1" \
			-o /dev/null "$DIR" &&
			curl -sf -m 2 --cacert "$WFE_CA" --resolve "$CA_HOST:$P_MGMT:127.0.0.1" \
				-o "$T_TMP/pebble-root.pem" "https://$CA_HOST:$P_MGMT/roots/0"; then
			return 0
		fi
		kill -0 "$PEBBLE_PID" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}

if ! start_pebble 0; then
	t_fail "pebble starts" "$(tail -5 "$T_TMP/pebble-0.log")"
	t_exit
	exit 1
fi
python3 "$TOOLS/acme_evil.py" "$P_EVIL" "$T_TMP/wfe-0.pem" "$T_TMP/wfe.key" \
	>"$T_TMP/evil.log" 2>&1 &
edged_track $!
if ! edged_wait_port "$P_EVIL"; then
	t_fail "acme_evil.py starts" "$(tail -5 "$T_TMP/evil.log")"
	t_exit
	exit 1
fi

# acme [ARG...] NAME...: run the driver ($BIN) against $DIR with the test's
# CA file and DNS server; its line in $T_TMP/res.json and its fields in R
# (res KEY prints one; booleans True/False), stderr in $T_TMP/err, its
# exit status returned
declare -A R
acme() {
	local rc k v
	timeout 60 "$BIN" --dir "$DIR" --ca "$WFE_CA" --dns "127.0.0.1:$P_DNS" \
		--http "$P_HTTP" "$@" >"$T_TMP/res.json" 2>"$T_TMP/err"
	rc=$?
	R=()
	while IFS=$'\t' read -r k v; do
		R[$k]=$v
	done < <(python3 -c 'import json, sys
try:
    d = json.loads(open(sys.argv[1]).readline())
except Exception:
    d = {}
for k, v in d.items():
    print("%s\t%s" % (k, str(v).replace("\t", " ").replace("\n", " ")))' "$T_TMP/res.json" 2>/dev/null)
	return $rc
}
res() { echo "${R[$1]:-}"; }
why() { echo "$(head -c 600 "$T_TMP/res.json") $(head -c 300 "$T_TMP/err")" | tr '\n' ' '; }
clean() { ! grep -q 'AddressSanitizer\|LeakSanitizer\|runtime error' "$T_TMP/err"; }

# issue V: a certificate for two names, checked, and the account reused
issue() {
	local v=$1 d="$T_TMP/$1" rc leaf url1
	mkdir -p "$d/out"
	acme --key "$d/account.key" --out "$d/out" --contact "mailto:ops@acme.test" \
		"a-$v.acme.test" "b-$v.acme.test"
	rc=$?
	if [ $rc -eq 0 ] && [ "$(res ok)" = True ] && [ "$(res published)" = 2 ] &&
		[ "$(res unpublished)" = 2 ] && [ "$(res served)" -ge 2 ] && clean; then
		t_ok "$v: a certificate issued for two names over http-01, both tokens unpublished"
	else
		t_fail "$v: issue" "rc $rc $(why)"
		return
	fi
	url1=$(res account_url)
	if [ "$(stat -c %a "$d/account.key")" = 600 ] &&
		openssl pkey -in "$d/account.key" -noout -text 2>/dev/null | grep -q 'NIST CURVE: P-256'; then
		t_ok "$v: the account key file is created, P-256, mode 0600"
	else
		t_fail "$v: account key file" "$(stat -c %a "$d/account.key") $(openssl pkey -in "$d/account.key" -noout -text 2>&1 | head -3)"
	fi
	# the chain: the leaf, then what leads to pebble's root
	awk -v d="$d" '/BEGIN CERT/ { n++ } { print > (d "/c" n ".pem") }' "$d/out/cert.pem"
	leaf="$d/c1.pem"
	cat "$d"/c[2-9].pem >"$d/rest.pem" 2>/dev/null
	if openssl verify -CAfile "$T_TMP/pebble-root.pem" -untrusted "$d/rest.pem" \
		"$leaf" >"$d/verify" 2>&1 && grep -q ': OK$' "$d/verify"; then
		t_ok "$v: the chain verifies against pebble's root (/roots/0)"
	else
		t_fail "$v: openssl verify" "$(cat "$d/verify")"
	fi
	if openssl x509 -in "$leaf" -noout -ext subjectAltName >"$d/san" 2>&1 &&
		grep -q "DNS:a-$v.acme.test" "$d/san" && grep -q "DNS:b-$v.acme.test" "$d/san" &&
		openssl x509 -in "$leaf" -noout -subject | grep -q "CN *= *a-$v.acme.test"; then
		t_ok "$v: the certificate names both (CN the first)"
	else
		t_fail "$v: SANs" "$(cat "$d/san")"
	fi
	if [ "$(openssl x509 -in "$leaf" -noout -pubkey | openssl sha256)" = \
		"$(openssl pkey -in "$d/out/key.pem" -pubout | openssl sha256)" ] &&
		openssl pkey -in "$d/out/key.pem" -noout -text 2>/dev/null | grep -q 'NIST CURVE: P-256' &&
		! cmp -s "$d/out/key.pem" "$d/account.key"; then
		t_ok "$v: the key delivered is the certificate's (a new P-256 key, not the account's)"
	else
		t_fail "$v: key match" "$(openssl pkey -in "$d/out/key.pem" -noout -text 2>&1 | head -3)"
	fi
	sha256sum "$d/account.key" >"$d/key.sum"
	acme --key "$d/account.key" "c-$v.acme.test"
	rc=$?
	if [ $rc -eq 0 ] && [ "$(res ok)" = True ] && [ -n "$url1" ] &&
		[ "$(res account_url)" = "$url1" ] && sha256sum -c --quiet "$d/key.sum" && clean; then
		t_ok "$v: a second run reuses the account key: the same account URL"
	else
		t_fail "$v: account reuse" "rc $rc first $url1 $(why)"
	fi
}

# wrong V: the driver serves a wrong key authorization
wrong() {
	local v=$1 rc
	acme --key "$T_TMP/$v/account.key" --wrong "d-$v.acme.test"
	rc=$?
	if [ $rc -eq 1 ] && [ "$(res ok)" = False ] && [ "$(res error)" = -121 ] &&
		[ "$(res problem_type)" = urn:ietf:params:acme:error:unauthorized ] &&
		[ "$(res problem_status)" = 403 ] && [ -n "$(res problem_detail)" ] &&
		grep -q 'd-'"$v"'.acme.test is invalid: urn:ietf:params:acme:error:unauthorized' "$T_TMP/res.json" &&
		[ "$(res published)" = 1 ] && [ "$(res unpublished)" = 1 ] && clean; then
		t_ok "$v: a wrong key authorization: pebble's problem (unauthorized, 403) reported, the token unpublished"
	else
		t_fail "$v: wrong key authorization" "rc $rc $(why)"
	fi
}

# refusals V: servers that are not the CA, each answered at once
refusals() {
	local v=$1 name dir ca err frag rc t0
	while IFS='|' read -r name dir ca err frag; do
		t0=$SECONDS
		DIR=$dir acme --key "$T_TMP/$v/account.key" --ca "$ca" "e-$v.acme.test"
		rc=$?
		if [ $rc -eq 1 ] && [ "$(res error)" = "$err" ] &&
			grep -qF -- "$frag" "$T_TMP/res.json" && [ $((SECONDS - t0)) -lt 10 ] && clean; then
			t_ok "$v: $name: $(res message | cut -c1-110)"
		else
			t_fail "$v: $name" "rc $rc in $((SECONDS - t0)) s: $(why)"
		fi
	done <<EOF
a refused port|https://$CA_HOST:$P_DOWN/dir|$WFE_CA|-111|Connection refused
a plain HTTP port|https://$CA_HOST:$P_CTS/dir|$WFE_CA|-71|TLS: error:0A00010B:SSL routines::wrong version number
an HTTPS server that is no CA|https://$CA_HOST:$P_MGMT/roots/0|$WFE_CA|-71|not application/json
the wrong CA file|$DIR|$T_TMP/pebble-root.pem|-71|the server's certificate: unable to get local issuer certificate
a name the certificate lacks|https://127.0.0.1:$P_ACME/dir|$WFE_CA|-71|the server's certificate: IP address mismatch
EOF
}

# hostile V: tests/tools/acme_evil.py's cases
hostile() {
	local v=$1 c err frag rc t0 n
	while IFS='|' read -r c err frag; do
		t0=$SECONDS
		DIR="https://$CA_HOST:$P_EVIL/$c-$v/dir" acme --key "$T_TMP/$v/account.key" \
			--timeout-ms 1000 --order-timeout-ms 2000 "f-$v.acme.test"
		rc=$?
		if [ $rc -eq 1 ] && [ "$(res error)" = "$err" ] &&
			grep -qF -- "$frag" "$T_TMP/res.json" && [ $((SECONDS - t0)) -lt 10 ] &&
			[ "$(res published)" = "$(res unpublished)" ] && clean; then
			t_ok "$v: evil CA, $c: $(res message | sed 's|https://[^ ]*/||' | cut -c1-100)"
		else
			t_fail "$v: evil CA, $c" "rc $rc in $((SECONDS - t0)) s: $(why)"
		fi
		case $c in
		problem)
			if [ "$(res problem_type)" = urn:ietf:params:acme:error:serverInternal ] &&
				[ "$(res problem_detail)" = "the evil CA is down" ] &&
				[ "$(res problem_status)" = 500 ]; then
				t_ok "$v: evil CA, problem: its type, detail and status kept verbatim"
			else
				t_fail "$v: evil CA, problem document kept" "$(why)"
			fi
			;;
		badnonce)
			if [ "$(res nonce_retries)" = 10 ]; then
				t_ok "$v: evil CA, badnonce: sent again 10 times, then the problem reported"
			else
				t_fail "$v: evil CA, badnonce retries" "$(why)"
			fi
			;;
		pending)
			# Retry-After: 1 within 2 s: the first fetch, the one
			# 200 ms after the challenge, one more (the back-off
			# alone, 200, 400, 800 ms, would fetch 4 times)
			n=$(curl -s -m 5 --cacert "$WFE_CA" --resolve "$CA_HOST:$P_EVIL:127.0.0.1" \
				"https://$CA_HOST:$P_EVIL/stats/pending-$v" | json_field - authz)
			if [ "$(res published)" = 1 ] && [ -n "$n" ] && [ "$n" -le 3 ]; then
				t_ok "$v: evil CA, pending: Retry-After honoured ($n fetches in 2 s), the token unpublished"
			else
				t_fail "$v: evil CA, Retry-After" "$n fetches $(why)"
			fi
			;;
		esac
	done <<EOF
badjson|-71|not a JSON object
array|-71|not a JSON object: another JSON value
ctype|-71|of type text/html, not application/json
missing|-71|the directory has no https:// newAccount URL
httpurls|-71|the directory has no https:// newNonce URL
huge|-71|the answer is too large
hugeclose|-71|the answer is too large
hugehdr|-71|a malformed HTTP head, or one over 65536 bytes
slow|-110|no answer within 1000 ms
trickle|-110|no answer within 1000 ms
redirect|-71|HTTP 301, a redirect (not followed)
problem|-121|urn:ietf:params:acme:error:serverInternal: the evil CA is down (status 500)
badproblem|-71|a problem document that is not a JSON object
badnonce|-121|urn:ietf:params:acme:error:badNonce
nolocation|-71|no https:// Location
nohttp01|-121|no http-01 challenge offered
badtoken|-71|the http-01 challenge has no usable token
otherident|-71|its identifier is none of the order's names
pending|-110|the order did not end within 2000 ms
badpem|-71|no PEM certificate
badb64|-71|no PEM certificate
otherkey|-71|the certificate is not for the order's key
EOF
}

# cancels V: orders cancelled at several points
cancels() {
	local v=$1 ms rc
	for ms in 0 40 300 700; do
		acme --key "$T_TMP/$v/account.key" --cancel-ms "$ms" "g$ms-$v.acme.test" "h$ms-$v.acme.test"
		rc=$?
		if [ $rc -eq 0 ] && [ "$(res cancelled)" = True ] &&
			[ "$(res published)" = "$(res unpublished)" ] && clean; then
			t_ok "$v: cancelled after $ms ms: no callback after, $(res published) token(s) published and unpublished"
		elif [ $rc -eq 0 ] && [ "$(res ok)" = True ] && clean; then
			# the order was done before the cancel came
			t_ok "$v: cancelled after $ms ms: the order had ended"
		else
			t_fail "$v: cancel after $ms ms" "rc $rc $(why)"
		fi
	done
}

# nonces V: with pebble rejecting half the nonces. An order makes some
# 12 POSTs, each sent at most 11 times: it fails once in some 170 runs,
# so a badNonce failure gets one more run
nonces() {
	local v=$1 rc try
	for try in 1 2; do
		acme --key "$T_TMP/$v/account.key" "n$try-$v.acme.test" "m$try-$v.acme.test"
		rc=$?
		[ $rc -eq 0 ] && break
		grep -q badNonce "$T_TMP/res.json" || break
	done
	if [ $rc -eq 0 ] && [ "$(res ok)" = True ] && [ "$(res nonce_retries)" -gt 0 ] && clean; then
		t_ok "$v: pebble rejecting half the nonces: issued after $(res nonce_retries) badNonce retries"
	else
		t_fail "$v: badNonce retries" "rc $rc $(why)"
	fi
}

BUILDS=("normal|$B/tools/acme_get")
if [ -x "$B/asan/tools/acme_get" ]; then
	BUILDS+=("asan|$B/asan/tools/acme_get")
else
	t_skip "asan: acme_get" "$B/asan/tools/acme_get not built"
fi
for b in "${BUILDS[@]}"; do
	v=${b%%|*}
	BIN=${b#*|}
	issue "$v"
	wrong "$v"
	refusals "$v"
	hostile "$v"
	cancels "$v"
done
if start_pebble 50; then
	for b in "${BUILDS[@]}"; do
		v=${b%%|*}
		BIN=${b#*|}
		nonces "$v"
	done
else
	t_fail "pebble starts with PEBBLE_WFE_NONCEREJECT=50" "$(tail -5 "$T_TMP/pebble-50.log")"
fi
t_exit
