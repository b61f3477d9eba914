#!/bin/bash
# test_edged_acme.sh - edged's certificates from an ACME CA (docs/acme.md)
# against Debian's pebble, with the normal and the ASan build:
#   - environments marked tls = "auto": each of their names ordered at
#     start over http-01 (edged answers the CA's validation on its plain
#     listener, before routing: analytics outcome acme_challenge), the
#     certificate written to acme.dir (key 0600) and served by SNI, its
#     chain verifying against pebble's root; the account key made 0600;
#   - a name whose validation fails (pebble-challtestsrv points it at an
#     address nothing listens on): the CA's problem document in the log
#     and in edgectl certs, tried again after a growing back-off (retry_min
#     1 s doubling to retry_max 3 s) while the other names serve; once the
#     name points at edged, issued;
#   - renewal at two thirds of the lifetime (pebble issues for 30 s here):
#     a new certificate for new connections, while a keep-alive TLS
#     connection opened on the old one goes on serving requests;
#   - edgectl certs renew NAME: a new order at once; an unknown name
#     refused; edgectl certs revoke NAME keyCompromise: revoked at the CA
#     (pebble's management interface says so), then replaced;
#   - a token edged does not hold, or a token for another name, goes to
#     the upstream as any request;
#   - tls-alpn-01 (acme.challenge): the validation answered on the TLS
#     listener by the certificate with the acmeIdentifier, the handshake
#     closed, the certificate issued;
#   - edged --check refusing tls = "auto" without an acme group, an acme
#     group without tls.listen, a directory that is not https://,
#     storage = "database" without pg, another challenge, an acme.dir
#     holding tls.certificates' files.
# pebble and its DNS: tests/lib_acme.sh. Ports: 10 free ones in
# 44000-44999. About 60 s a build.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/lib_edged.sh
. "$(dirname "$0")/../lib_edged.sh"
# shellcheck source=tests/lib_acme.sh
. "$(dirname "$0")/../lib_acme.sh"
edged_begin python3 openssl curl
acme_need

BASE=$(edged_ports 10 44000 45000)
P_EDGE=$BASE         # edged's plain listener: pebble's http-01 port
P_ADMIN=$((BASE + 1))
P_TLS=$((BASE + 2))  # edged's TLS listener: pebble's tls-alpn-01 port
P_ACME=$((BASE + 3)) # pebble's ACME server
P_MGMT=$((BASE + 4)) # pebble's management interface
P_DNS=$((BASE + 5))  # pebble-challtestsrv's DNS
P_CTS=$((BASE + 6))  # pebble-challtestsrv's management
P_BACK=$((BASE + 7)) # echo_backend.py
SOCK="$T_TMP/ctl.sock"

if ! bash "$TOOLS/mkchain.sh" "$T_TMP" dflt 0 "DNS:default.test" >"$T_TMP/mk.log" 2>&1 ||
	! acme_pebble_start "$P_EDGE" "$P_TLS" 30; then
	t_fail "the test's certificates are made, pebble and pebble-challtestsrv start" \
		"$(cat "$T_TMP/mk.log") $(tail -5 "$T_TMP/pebble.log") $(tail -3 "$T_TMP/challtestsrv.log")"
	t_exit
	exit 1
fi
if ! edged_backend "$P_BACK" /usr/bin/python3 "$TOOLS/echo_backend.py" "$P_BACK" "$T_TMP/echo.log"; then
	t_fail "the backend starts"
	t_exit
	exit 1
fi

# conf V CHALLENGE NAMES...: the configuration of build V, its names in
# one environment with tls = "auto", "bad-V.acme.test" in another
conf() {
	local v=$1 chal=$2 n doms=""
	shift 2
	for n in "$@"; do doms="$doms\"$n\", "; done
	mkdir -p "$T_TMP/$v/certs"
	edged_conf_head "$P_ADMIN" "$SOCK" 1
	cat <<CONF
tls = { listen = [ "127.0.0.1:$P_TLS" ];
  certificates = ( { cert = "$T_TMP/dflt-0.pem"; key = "$T_TMP/dflt.key"; } ); };
acme = { directory = "$ACME_DIR"; ca = "$T_TMP/wfe-root.crt";
  account_key = "$T_TMP/$v/account.key"; dir = "$T_TMP/$v/certs";
  contact = "mailto:ops@acme.test"; challenge = "$chal";
  retry_min = "1s"; retry_max = "3s"; };
analytics = { file = "$T_TMP/$v/requests.jsonl"; };
projects = ( { id = "p"; environments = (
  { id = "e1"; domains = [ ${doms%, } ]; tls = "auto";
    deployment = { id = "d1"; upstreams = [ "127.0.0.1:$P_BACK" ]; }; },
  { id = "e2"; domains = [ "bad-$v.acme.test" ]; tls = "auto";
    deployment = { id = "d2"; upstreams = [ "127.0.0.1:$P_BACK" ]; }; }
  ); } );
CONF
}

# certs_json: edgectl certs --json into $T_TMP/certs.json
certs_json() {
	"$EDGECTL" --socket "$SOCK" certs --json >"$T_TMP/certs.json" 2>"$T_TMP/certs.err"
}
# cj NAME EXPR: EXPR (python, over the name's object n) of edgectl certs
cj() {
	certs_json
	python3 -c 'import json, sys
a = json.load(open(sys.argv[1]))["acme"]
n = [x for x in a["names"] if x["name"] == sys.argv[2]]
print(eval(sys.argv[3], {"n": n[0] if n else None, "a": a}))' "$T_TMP/certs.json" "$1" "$2" 2>/dev/null
}
# wait_issued NAME N [SECONDS]: until NAME's "issued" reaches N
wait_issued() {
	local i
	for ((i = 0; i < ${3:-30} * 4; i++)); do
		[ "$(cj "$1" 'n["issued"] if n else 0')" -ge "$2" ] 2>/dev/null && return 0
		sleep 0.25
	done
	return 1
}
# served NAME: the serial of the certificate edged's TLS listener serves
# for NAME, verified against pebble's root ("" when it does not verify)
served() {
	openssl s_client -connect "127.0.0.1:$P_TLS" -servername "$1" \
		-CAfile "$T_TMP/pebble-chain.pem" -verify_return_error -verify_hostname "$1" \
		</dev/null 2>/dev/null | openssl x509 -noout -serial 2>/dev/null | cut -d= -f2
}

run_suite() {
	local bin=$1 v=$2 a b rc s1 s2 backoffs
	local A="a-$v.acme.test" Bn="b-$v.acme.test" BAD="bad-$v.acme.test"

	acme_dns "$BAD" 127.0.0.2 # nothing listens there: its validation fails
	conf "$v" http-01 "$A" "$Bn" >"$T_TMP/$v.conf"
	if ! edged_start "$bin" "$T_TMP/$v.conf"; then
		t_fail "$v: edged starts" "$(tail -5 "$EDGED_LOG")"
		return
	fi
	if wait_issued "$A" 1 && wait_issued "$Bn" 1; then
		s1=$(served "$A")
		a=$(stat -c %a "$T_TMP/$v/certs/$A.key" 2>/dev/null)
		b=$(stat -c %a "$T_TMP/$v/account.key" 2>/dev/null)
		if [ -n "$s1" ] && [ -n "$(served "$Bn")" ] && [ "$a" = 600 ] && [ "$b" = 600 ] &&
			grep -q "BEGIN CERTIFICATE" "$T_TMP/$v/certs/$A.crt"; then
			t_ok "$v: two names of a tls = \"auto\" environment issued over http-01 at start, stored in acme.dir (keys 0600), served by SNI and verified to pebble's root"
		else
			t_fail "$v: issued and served" "serial '$s1' key $a account $b $(grep acme: "$EDGED_LOG" | tail -3)"
		fi
	else
		t_fail "$v: issued at start" "$(grep -E 'acme' "$EDGED_LOG" | tail -5)"
	fi
	c=$(curl -s -m 10 -o "$T_TMP/body" -w '%{http_code}' --cacert "$T_TMP/pebble-chain.pem" \
		--resolve "$A:$P_TLS:127.0.0.1" "https://$A:$P_TLS/hello")
	if [ "$c" = 200 ] && grep -q '"path": "/hello"' "$T_TMP/body"; then
		t_ok "$v: curl over HTTPS with the issued certificate reaches the upstream"
	else
		t_fail "$v: curl https" "$c $(head -c 200 "$T_TMP/body")"
	fi
	if python3 - "$T_TMP/$v/requests.jsonl" "$A" <<'PY'; then
import json, sys
r = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
a = [x for x in r if x.get("outcome") == "acme_challenge" and x.get("host", "").split(":")[0] == sys.argv[2]]
sys.exit(0 if a and all(x["status"] == 200 and x["path"].startswith("/.well-known/acme-challenge/") for x in a) else 1)
PY
		t_ok "$v: the CA's http-01 requests answered by edged itself: analytics outcome acme_challenge, 200"
	else
		t_fail "$v: acme_challenge records" "$(grep -m2 acme_challenge "$T_TMP/$v/requests.jsonl")"
	fi
	# a token edged does not hold goes upstream as any request
	: >"$T_TMP/echo.log"
	c=$(curl -s -m 10 -o /dev/null -w '%{http_code}' -H "Host: $A" \
		"http://127.0.0.1:$P_EDGE/.well-known/acme-challenge/NotAToken_123")
	if [ "$c" = 200 ] && grep -q 'acme-challenge/NotAToken_123' "$T_TMP/echo.log"; then
		t_ok "$v: a token edged does not hold goes to the upstream"
	else
		t_fail "$v: unknown token" "$c $(head -c 200 "$T_TMP/echo.log")"
	fi

	# ---- the failing name: the CA's problem, a growing back-off
	for ((i = 0; i < 80; i++)); do
		[ "$(cj "$BAD" 'n["failures"]')" -ge 3 ] 2>/dev/null && break
		sleep 0.25
	done
	a=$(cj "$BAD" 'n["failures"], n["state"], (n["last_error"] or {}).get("type"), n["issued"]')
	backoffs=$(grep -o "acme: $BAD: the order failed ([0-9]* in a row), .*next try in [0-9]* s" "$EDGED_LOG" |
		sed 's/.*next try in \([0-9]*\) s/\1/' | tr '\n' ' ')
	if [[ "$a" == "("[3-9]*", 'idle', 'urn:ietf:params:acme:error:connection', 0)" ]] &&
		grep -q "acme: $BAD: the order failed .*urn:ietf:params:acme:error:connection" "$EDGED_LOG" &&
		python3 -c 'import sys; b = [int(x) for x in sys.argv[1].split()]; sys.exit(0 if len(b) >= 3 and b[0] <= 1 and b[1] == 2 and all(x <= 3 for x in b) and b == sorted(b) else 1)' "$backoffs" &&
		[ -n "$(served "$A")" ]; then
		t_ok "$v: a validation that fails: pebble's problem document in the log and edgectl certs, tried again after 1, 2, 3 s (retry_max), the other names serving ($backoffs)"
	else
		t_fail "$v: failing name" "$a; backoffs '$backoffs'; $(grep "$BAD" "$EDGED_LOG" | tail -2)"
	fi
	"$EDGECTL" --socket "$SOCK" certs >"$T_TMP/certs.txt" 2>&1
	if grep -q "^$BAD .*urn:\|^$BAD .*connection" "$T_TMP/certs.txt" &&
		grep -q "^$A  *idle " "$T_TMP/certs.txt"; then
		t_ok "$v: edgectl certs: each name's state, expiry and the last error"
	else
		t_fail "$v: edgectl certs" "$(cat "$T_TMP/certs.txt")"
	fi
	acme_dns "$BAD" 127.0.0.1
	if wait_issued "$BAD" 1 20 && [ -n "$(served "$BAD")" ] &&
		[ "$(cj "$BAD" 'n["failures"], n["last_error"]')" = "(0, None)" ]; then
		t_ok "$v: once the name leads to edged, issued at the next try and served"
	else
		t_fail "$v: failing name issued" "$(cj "$BAD" 'n')"
	fi

	# ---- renewal at two thirds of 30 s, a keep-alive connection kept
	python3 - "$P_TLS" "$A" "$T_TMP/pebble-chain.pem" "$T_TMP/$v.ka" <<'PY' &
import socket, ssl, sys, time
port, name, ca, out = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
ctx = ssl.create_default_context(cafile=ca)
ctx.set_alpn_protocols(["http/1.1"])
s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port)), server_hostname=name)
first = s.getpeercert()["serialNumber"]
res = []
for i in range(2):
    s.sendall(b"GET /ka HTTP/1.1\r\nHost: %s\r\n\r\n" % name.encode())
    buf = b""
    while b"\r\n\r\n" not in buf:
        buf += s.recv(65536)
    head, body = buf.split(b"\r\n\r\n", 1)
    n = int([l.split(b":")[1] for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")][0])
    while len(body) < n:
        body += s.recv(65536)
    res.append(head.split(b" ")[1].decode())
    if i == 0:
        # until a new certificate serves new connections (at most 40 s)
        for _ in range(160):
            time.sleep(0.25)
            try:
                t = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port)), server_hostname=name)
                new = t.getpeercert()["serialNumber"]
                t.close()
            except Exception:
                continue
            if new != first:
                break
        res.append(new)
open(out, "w").write("%s %s %s %s\n" % (first, res[0], res[1], res[2]))
PY
	wait $!
	read -r s1 a s2 b <"$T_TMP/$v.ka" 2>/dev/null
	if [ "$a" = 200 ] && [ "$b" = 200 ] && [ -n "$s2" ] && [ "$s1" != "$s2" ] &&
		[ "$(cj "$A" 'n["issued"]')" -ge 2 ]; then
		t_ok "$v: renewed at two thirds of its lifetime: new connections get the new certificate, a keep-alive connection on the old one goes on (200 before and after)"
	else
		t_fail "$v: renewal" "$(cat "$T_TMP/$v.ka" 2>/dev/null) issued $(cj "$A" 'n["issued"]')"
	fi

	# ---- edgectl certs renew
	a=$(cj "$Bn" 'n["issued"]')
	"$EDGECTL" --socket "$SOCK" certs renew "$Bn" >"$T_TMP/renew.out" 2>&1
	rc=$?
	"$EDGECTL" --socket "$SOCK" certs renew "nosuch-$v.acme.test" >"$T_TMP/renew2.out" 2>&1
	b=$?
	if [ $rc = 0 ] && wait_issued "$Bn" $((a + 1)) 20 && [ $b != 0 ] &&
		grep -q "no name of an environment with tls" "$T_TMP/renew2.out"; then
		t_ok "$v: edgectl certs renew NAME: ordered at once; an unknown name refused"
	else
		t_fail "$v: certs renew" "$rc $b $(cat "$T_TMP/renew.out" "$T_TMP/renew2.out")"
	fi
	# ---- edgectl certs revoke: revoked at the CA, replaced
	c=""
	s2=""
	# refused (busy) while its renewal's order runs: asked again
	for ((i = 0; i < 40; i++)); do
		s1=$(served "$Bn")
		a=$(cj "$Bn" 'n["issued"]')
		"$EDGECTL" --socket "$SOCK" certs revoke "$Bn" keyCompromise >"$T_TMP/revoke.out" 2>&1
		rc=$?
		grep -q "try again when it is idle" "$T_TMP/revoke.out" || break
		sleep 0.5
	done
	"$EDGECTL" --socket "$SOCK" certs revoke "$Bn" lostIt >"$T_TMP/revoke2.out" 2>&1
	b=$?
	if [ $rc = 0 ] && wait_issued "$Bn" $((a + 1)) 20; then
		s2=$(served "$Bn")
		# pebble's serials: lowercase hex without leading zeros
		c=$(curl -s -m 5 --cacert "$T_TMP/wfe-root.crt" \
			"https://127.0.0.1:$P_MGMT/cert-status-by-serial/$(echo "$s1" | tr 'A-F' 'a-f' | sed 's/^0*//')")
	fi
	if [ $rc = 0 ] && [ -n "$s2" ] && [ "$s1" != "$s2" ] && [[ "$c" == *'"Status": "Revoked"'* ]] &&
		[ $b = 2 ] && grep -q "acme: $Bn: its certificate revoked at the CA" "$EDGED_LOG"; then
		t_ok "$v: edgectl certs revoke NAME keyCompromise: revoked at the CA (pebble says so), a new certificate issued and served; an unknown reason a usage error"
	else
		t_fail "$v: certs revoke" "rc $rc/$b serials $s1 $s2 pebble '$c' $(cat "$T_TMP/revoke.out") $(grep "acme: $Bn" "$EDGED_LOG" | tail -2)"
	fi
	edged_stop 10

	# ---- tls-alpn-01, edged as nobody making its ACME directories
	mkdir -p "$T_TMP/$v/alpn"
	chmod 755 "$T_TMP" "$T_TMP/$v" "$T_TMP/$v/alpn"
	chmod 644 "$T_TMP/dflt.key"
	conf "$v" tls-alpn-01 "c-$v.acme.test" |
		sed "s|^user = .*|user = \"nobody\";|; s|$T_TMP/$v/account.key|$T_TMP/$v/alpn/acct/account.key|; s|dir = \"$T_TMP/$v/certs\"|dir = \"$T_TMP/$v/alpn/certs\"|" \
			>"$T_TMP/$v-alpn.conf"
	chmod 644 "$T_TMP/$v-alpn.conf"
	: >"$T_TMP/$v/requests.jsonl"
	if edged_start "$bin" "$T_TMP/$v-alpn.conf" && wait_issued "c-$v.acme.test" 1 &&
		[ -n "$(served "c-$v.acme.test")" ] &&
		! grep -q acme_challenge "$T_TMP/$v/requests.jsonl"; then
		t_ok "$v: tls-alpn-01: the validation answered on the TLS listener (no HTTP request), issued and served"
	else
		t_fail "$v: tls-alpn-01" "$(grep acme "$EDGED_LOG" | tail -4)"
	fi
	a=$(stat -c '%U %a' "$T_TMP/$v/alpn/acct" "$T_TMP/$v/alpn/certs" "$T_TMP/$v/alpn/acct/account.key" 2>&1 | tr '\n' ' ')
	if [ "$a" = "nobody 700 nobody 700 nobody 600 " ]; then
		t_ok "$v: edged as nobody: the account key's and acme.dir's directories made for it (0700) before the privileges drop"
	else
		t_fail "$v: acme directories" "$a"
	fi
	# a certificate issued that cannot be stored (acme.dir read-only for
	# nobody): kept and stored again after the back-off, never ordered
	# again
	C="c-$v.acme.test"
	a=$(cj "$C" 'n["orders"], n["issued"]')
	chmod 500 "$T_TMP/$v/alpn/certs"
	"$EDGECTL" --socket "$SOCK" certs renew "$C" >/dev/null 2>&1
	for ((i = 0; i < 80; i++)); do
		[ "$(cj "$C" 'n["failures"]')" -ge 2 ] 2>/dev/null && break
		sleep 0.25
	done
	b=$(cj "$C" 'n["orders"], n["issued"], n["failures"], (n["last_error"] or {}).get("message", "")')
	chmod 700 "$T_TMP/$v/alpn/certs"
	for ((i = 0; i < 40; i++)); do
		[ "$(cj "$C" 'n["failures"]')" = 0 ] && break
		sleep 0.25
	done
	c=$(cj "$C" 'n["orders"], n["issued"], n["failures"]')
	if python3 -c 'import sys
a, b, c = (eval(x) for x in sys.argv[1:4])
sys.exit(0 if b[0] == a[0] + 1 and b[1] == a[1] and b[2] >= 2 and "could not be kept" in b[3]
         and c == (a[0] + 1, a[1] + 1, 0) else 1)' "$a" "$b" "$c" &&
		grep -q "acme: $C: storing the certificate issued earlier again" "$EDGED_LOG"; then
		t_ok "$v: a certificate that cannot be stored is kept and stored again after the back-off: one order, no second one (orders, issued: $a -> $c)"
	else
		t_fail "$v: unsaved certificate" "before $a, failing $b, after $c"
	fi
	edged_stop 10
	edged_sanitizers_clean "$v: no sanitizer report"
}

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

# ---- edged --check
check() { # NAME WANT: the configuration $T_TMP/chk.conf refused, saying WANT
	if ! "$B/edged" --check-file -c "$T_TMP/chk.conf" >"$T_TMP/chk.out" 2>&1 &&
		grep -q -- "$2" "$T_TMP/chk.out"; then
		t_ok "--check: $1"
	else
		t_fail "--check: $1" "$(cat "$T_TMP/chk.out")"
	fi
}
conf chk http-01 x.acme.test | sed '/^acme = /,/retry_max/d' >"$T_TMP/chk.conf"
check 'tls = "auto" without an acme group' 'tls: "auto" needs the acme group'
conf chk http-01 x.acme.test | sed 's|^tls = { listen = \[ [^]]* \];|tls = {|' >"$T_TMP/chk.conf"
check 'an acme group without tls.listen' 'needs tls.listen'
conf chk http-01 x.acme.test | sed "s|directory = \"https://|directory = \"http://|" >"$T_TMP/chk.conf"
check 'a directory that is not https://' 'an https:// URL'
conf chk http-01 x.acme.test | sed 's|retry_min = "1s";|retry_min = "1s"; storage = "database";|' >"$T_TMP/chk.conf"
check 'storage = "database" without pg' '"database" needs pg'
conf chk dns-01 x.acme.test >"$T_TMP/chk.conf"
check 'a challenge edged does not answer' '"http-01" or "tls-alpn-01", not "dns-01"'
conf chk http-01 x.acme.test | sed "s|dir = \"$T_TMP/chk/certs\"|dir = \"$T_TMP/\"|" >"$T_TMP/chk.conf"
check 'acme.dir where tls.certificates keeps its files' "holds $T_TMP/dflt-0.pem of tls.certificates"
t_exit
