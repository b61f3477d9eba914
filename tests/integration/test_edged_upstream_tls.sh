#!/bin/bash
# test_edged_upstream_tls.sh - https:// upstream endpoints: TLS from edged
# to python3 ssl backends (tests/tools/echo_backend.py with ECHO_TLS_*)
# and `openssl s_server -www`, certificates made by tests/tools/mkchain.sh
# and /usr/bin/python3's cryptography (an expired one). Verified against
# the deployment's `tls.ca`: 200, one pooled connection for sequential
# requests, a second connection resuming the first's session; a
# server_name set for another host; a wrong name, an unknown CA (the
# system's store), an expired certificate, a backend that requires a
# client certificate: each a 502 upstream_tls_failed with the reason in
# the log and the analytics record; mTLS with `cert` and `key`: 200;
# `verify = false` serving an unknown CA, said at start. edged --check
# names a CA file that is missing and a cert without its key. Runs
# against build/edged and build/asan/edged.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/lib_edged.sh
. "$(dirname "$0")/../lib_edged.sh"
edged_begin curl python3 openssl
DPY=/usr/bin/python3

BASE=$(edged_ports 8)
P_EDGE=$BASE
P_ADMIN=$((BASE + 1))
P_OK=$((BASE + 2))   # up.test, signed by CA "up"
P_EXP=$((BASE + 3))  # an expired certificate, CA "up"
P_MTLS=$((BASE + 4)) # wants a client certificate of CA "cl"
P_OSSL=$((BASE + 5)) # openssl s_server -www
P_OTHER=$((BASE + 6)) # signed by CA "other" (unknown to the system)
P_HC=$((BASE + 7))    # up.test, health-checked over TLS
SOCK="$T_TMP/ctl/edged.sock"
C="$T_TMP/certs"
mkdir -p "$C"
chmod 755 "$T_TMP" "$C"

make_certs() {
	bash "$TOOLS/mkchain.sh" "$C" up 0 "DNS:up.test,IP:127.0.0.1" &&
		bash "$TOOLS/mkchain.sh" "$C" cl 0 "DNS:edge-client" &&
		bash "$TOOLS/mkchain.sh" "$C" other 0 "DNS:up.test" || return 1
	# a certificate for up.test by CA "up" that expired yesterday
	"$DPY" - "$C" <<'PY' || return 1
import datetime, sys
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
d = sys.argv[1]
ca_key = serialization.load_pem_private_key(open(d + "/up-root.key", "rb").read(), None)
ca = x509.load_pem_x509_certificate(open(d + "/up-root.crt", "rb").read())
key = ec.generate_private_key(ec.SECP256R1())
now = datetime.datetime.utcnow()
cert = (x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "up.test")]))
        .issuer_name(ca.subject).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=3))
        .not_valid_after(now - datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("up.test")]), False)
        .sign(ca_key, hashes.SHA256()))
open(d + "/expired.pem", "wb").write(cert.public_bytes(serialization.Encoding.PEM))
open(d + "/expired.key", "wb").write(key.private_bytes(
    serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
    serialization.NoEncryption()))
PY
	chmod 644 "$C"/*
}
if ! make_certs; then
	t_fail "test certificates made"
	t_exit
	exit
fi

# tls_backend PORT NAME CERT KEY [CLIENT_CA]
tls_backend() {
	ECHO_TLS_CERT=$3 ECHO_TLS_KEY=$4 ECHO_TLS_CLIENT_CA=${5:-} \
		edged_backend "$1" python3 "$TOOLS/echo_backend.py" "$1" "$T_TMP/$2.jsonl" "$2"
}
if ! tls_backend "$P_OK" ok "$C/up-0.pem" "$C/up.key" ||
	! tls_backend "$P_EXP" exp "$C/expired.pem" "$C/expired.key" ||
	! tls_backend "$P_MTLS" mtls "$C/up-0.pem" "$C/up.key" "$C/cl-root.crt" ||
	! tls_backend "$P_OTHER" other "$C/other-0.pem" "$C/other.key" ||
	! tls_backend "$P_HC" hc "$C/up-0.pem" "$C/up.key"; then
	t_fail "TLS backends start"
	t_exit
	exit
fi
openssl s_server -quiet -www -accept "127.0.0.1:$P_OSSL" -cert "$C/up-0.pem" \
	-key "$C/up.key" >/dev/null 2>&1 &
edged_track $!
edged_wait_port "$P_OSSL" || t_fail "openssl s_server starts"

# env ID DOMAIN PORT [TLS_GROUP [MORE]]: an environment whose deployment
# has one https:// endpoint (MORE: other keys of the deployment)
env() {
	local g=""
	[ -n "${4:-}" ] && g="tls = { $4 };"
	echo "{ id = \"$1\"; domains = [ \"$2\" ]; deployment = { id = \"$1-d\";
	  upstreams = [ \"https://127.0.0.1:$3\" ]; $g ${5:-} }; }"
}
HC="health_check = { type = \"http\"; path = \"/healthz\"; interval = \"200ms\"; timeout = \"150ms\"; rise = 1; fall = 2; };"
# one worker: pools and saved sessions are per worker
{
	edged_conf_head "$P_ADMIN" "$SOCK" 1
	cat <<CONF
pin_dir = "$T_TMP/pins";
timeouts = { drain = "5s"; upstream_connect = "1s"; };
analytics = { file = "$T_TMP/requests.jsonl"; };
projects = ( { id = "p"; environments = (
$(env ok up.test "$P_OK" "ca = \"$C/up-root.crt\";"),
$(env named named.test "$P_OK" "ca = \"$C/up-root.crt\"; server_name = \"up.test\";"),
$(env wrongname wrong.test "$P_OK" "ca = \"$C/up-root.crt\";"),
$(env sysca sys.test "$P_OTHER" "server_name = \"up.test\";"),
$(env expired exp.test "$P_EXP" "ca = \"$C/up-root.crt\"; server_name = \"up.test\";"),
$(env nocert nocert.test "$P_MTLS" "ca = \"$C/up-root.crt\"; server_name = \"up.test\";"),
$(env mtls mtls.test "$P_MTLS" "ca = \"$C/up-root.crt\"; server_name = \"up.test\"; cert = \"$C/cl-0.pem\"; key = \"$C/cl.key\";"),
$(env noverify nov.test "$P_OTHER" "verify = false;"),
$(env ossl ossl.test "$P_OSSL" "ca = \"$C/up-root.crt\"; server_name = \"up.test\";"),
$(env hcok hcok.test "$P_HC" "ca = \"$C/up-root.crt\"; server_name = \"up.test\";" "$HC"),
$(env hcbad hcbad.test "$P_OTHER" "server_name = \"up.test\";" "$HC")
  ); } );
CONF
} >"$T_TMP/edge.conf"
chmod 644 "$T_TMP/edge.conf"

# check_bad NAME TLS_GROUP WANT: --check refuses the group, saying WANT
check_bad() {
	local out rc=0
	{
		edged_conf_head "$P_ADMIN" "$SOCK" 1
		echo "projects = ( { id = \"p\"; environments = ( $(env x x.test 1 "$2") ); } );"
	} >"$T_TMP/bad.conf"
	out=$("$B/edged" --check -c "$T_TMP/bad.conf" 2>&1) || rc=$?
	if [ "$rc" != 0 ] && [[ "$out" == *"$3"* ]]; then
		t_ok "--check refuses $1"
	else
		t_fail "--check refuses $1" "$out"
	fi
}
check_bad "a CA file that is missing" "ca = \"$C/nothing.crt\";" \
	"deployment x-d: tls: ca $C/nothing.crt: "
check_bad "a cert without its key" "cert = \"$C/cl-0.pem\";" \
	"cert and key go together"
check_bad "a server_name with a port" "server_name = \"up.test:443\";" \
	"server_name: a host name or a numeric address"
check_bad "a key that is not the certificate's" \
	"cert = \"$C/cl-0.pem\"; key = \"$C/up.key\";" "key $C/up.key: "

# a client key only root can read: --check reads it as edged's user
if [ "$(id -u)" = 0 ] && id nobody >/dev/null 2>&1; then
	install -m 600 "$C/cl.key" "$C/root-only.key"
	{
		edged_conf_head "$P_ADMIN" "$SOCK" 1 nobody
		echo "projects = ( { id = \"p\"; environments = ( $(env x x.test 1 "cert = \"$C/cl-0.pem\"; key = \"$C/root-only.key\";") ); } );"
	} >"$T_TMP/rootkey.conf"
	chmod 644 "$T_TMP/rootkey.conf"
	out=$("$B/edged" --check-file -c "$T_TMP/rootkey.conf" 2>&1) && rc=0 || rc=$?
	if [ "$rc" != 0 ] && [[ "$out" == *"key $C/root-only.key: Permission denied [read as user \"nobody\""* ]]; then
		t_ok "--check reads the tls files as edged's user: a key only root can read refused, Permission denied, naming the user"
	else
		t_fail "--check as the user" "$out"
	fi
else
	t_skip "--check as the user" "needs root and the user nobody"
fi

# get HOST PATH: status, then the body, from edged
code() {
	curl -s -m 10 -o "$T_TMP/body" -w '%{http_code}' -H "Host: $1" "http://127.0.0.1:$P_EDGE${2:-/}"
}
field() { # FILE N KEY: KEY of the Nth JSON line of FILE
	sed -n "${2}p" "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$3"
}

# tls_fails V NAME HOST WHY: a 502 upstream_tls_failed with WHY in the log
tls_fails() {
	local c
	c=$(code "$3")
	if [ "$c" = 502 ] && grep -q '"error":"upstream_tls_failed"' "$T_TMP/body" &&
		edged_wait_log "upstream https://127.0.0.1:[0-9]+: TLS failed: $4 \(route $3/"; then
		t_ok "$1: $2: 502 upstream_tls_failed, logged: $4"
	else
		t_fail "$1: $2" "code $c $(head -c 200 "$T_TMP/body"); $(grep "TLS failed.*$3" "$EDGED_LOG")"
	fi
}

run_suite() {
	local bin=$1 v=$2 c a b i
	: >"$T_TMP/ok.jsonl"
	: >"$T_TMP/requests.jsonl"
	if ! edged_start "$bin" "$T_TMP/edge.conf"; then
		t_fail "$v: edged starts" "$(tail -5 "$EDGED_LOG")"
		return
	fi
	if grep -q "deployment noverify-d: the certificates of its https:// endpoints are not verified (tls.verify = false)" "$EDGED_LOG"; then
		t_ok "$v: verify = false is said at start"
	else
		t_fail "$v: verify = false said" "$(head -5 "$EDGED_LOG")"
	fi

	# ---- verified: two requests on one pooled connection
	c=$(code up.test /a)
	b=$(code up.test /b)
	a=$(field "$T_TMP/ok.jsonl" 1 peer_port)
	if [ "$c" = 200 ] && [ "$b" = 200 ] && [ "$a" = "$(field "$T_TMP/ok.jsonl" 2 peer_port)" ] &&
		grep -q '"X-Forwarded-Proto", "http"' "$T_TMP/ok.jsonl"; then
		t_ok "$v: https:// verified against tls.ca: 200, the second request on the same pooled TLS connection"
	else
		t_fail "$v: https:// verified" "$c $b; $(head -c 300 "$T_TMP/ok.jsonl")"
	fi

	# ---- a second connection (the first busy) resumes the session
	curl -s -m 10 -o /dev/null -H "Host: up.test" "http://127.0.0.1:$P_EDGE/slow/700" &
	a=$!
	# the first request at the backend: its connection's handshake done
	# and the session ticket sent before it
	for ((i = 0; i < 100; i++)); do
		grep -q '"/slow/700"' "$T_TMP/ok.jsonl" && break
		sleep 0.05
	done
	sleep 0.1
	c=$(code up.test /second)
	wait "$a"
	if [ "$c" = 200 ] && grep '"path": "/second"' "$T_TMP/ok.jsonl" | grep -q '"tls_resumed": true'; then
		t_ok "$v: a second connection to the endpoint resumes the first's TLS session"
	else
		t_fail "$v: resumption" "$c $(grep '/second' "$T_TMP/ok.jsonl" | head -c 300)"
	fi

	# ---- a pooled connection the upstream closes (a FIN, no
	# close_notify) under the next request: retried on a new one, not a
	# TLS failure
	c=$(code up.test /arm-drop)
	b=$(code up.test /after-drop)
	if [ "$c" = 200 ] && [ "$b" = 200 ] &&
		[ "$(grep -c '"path": "/after-drop"' "$T_TMP/ok.jsonl")" = 2 ] &&
		[ "$(grep '"/after-drop"' "$T_TMP/ok.jsonl" | grep -o '"peer_port": [0-9]*' | sort -u | wc -l)" = 2 ]; then
		t_ok "$v: a pooled TLS connection closed without close_notify under a request: retried on a new connection, 200"
	else
		t_fail "$v: pooled TLS close" "$c $b $(grep -c after-drop "$T_TMP/ok.jsonl") $(grep -m2 'TLS failed.*up.test' "$EDGED_LOG")"
	fi

	# ---- server_name for another host; openssl s_server
	# the name verified is the route's: case and a trailing dot aside
	a=$(curl -s -m 10 -o /dev/null -w '%{http_code}' -H "Host: UP.Test." "http://127.0.0.1:$P_EDGE/dot")
	if [ "$a" = 200 ] && grep -q '"path": "/dot"' "$T_TMP/ok.jsonl"; then
		t_ok "$v: Host UP.Test. is verified as up.test"
	else
		t_fail "$v: Host normalised for the name" "$a"
	fi
	c=$(code named.test /n)
	b=$(code ossl.test /)
	if [ "$c" = 200 ] && [ "$b" = 200 ] && grep -q "s_server" "$T_TMP/body"; then
		t_ok "$v: tls.server_name verifies up.test for host named.test; openssl s_server -www answers through it"
	else
		t_fail "$v: server_name, s_server" "$c $b $(head -c 200 "$T_TMP/body")"
	fi

	# ---- failures (one endpoint's reason is logged once a second)
	tls_fails "$v" "a certificate for another name" wrong.test "certificate verify failed: hostname mismatch"
	tls_fails "$v" "a CA the system does not know" sys.test "certificate verify failed: unable to get local issuer certificate"
	tls_fails "$v" "an expired certificate" exp.test "certificate verify failed: certificate has expired"
	tls_fails "$v" "a backend that requires a client certificate, none given" nocert.test \
		"(handshake: tlsv13 alert certificate required|the upstream asked for a client certificate; the deployment has none \(tls.cert, tls.key\))"

	# ---- mTLS; verify = false
	c=$(code mtls.test /m)
	b=$(code nov.test /v)
	if [ "$c" = 200 ] && [ "$b" = 200 ] && grep -q '"path": "/m"' "$T_TMP/mtls.jsonl"; then
		t_ok "$v: tls.cert and tls.key: the backend requiring a client certificate answers; verify = false serves an unknown CA"
	else
		t_fail "$v: mTLS, verify = false" "$c $b"
	fi

	# ---- health checks over TLS: the good endpoint asked for /healthz
	# and kept, the one whose CA is unknown taken out
	if edged_wait_log "upstream https://127.0.0.1:$P_OTHER ejected: health check failed 2 times in a row \(last: health check: TLS failed\)" &&
		grep -q '"path": "/healthz"' "$T_TMP/hc.jsonl" &&
		! grep -q "https://127.0.0.1:$P_HC ejected" "$EDGED_LOG" &&
		"$EDGECTL" --socket "$SOCK" upstream list | grep -q "^https://127.0.0.1:$P_HC .*enabled *healthy"; then
		t_ok "$v: an http health check of an https:// endpoint goes over TLS: the good one healthy, an unknown CA's taken out (health check: TLS failed)"
	else
		t_fail "$v: health checks over TLS" "$(grep -m3 'health check' "$EDGED_LOG") $("$EDGECTL" --socket "$SOCK" upstream list 2>&1 | tr '\n' ' ')"
	fi

	# ---- a reload that gives the checked deployment the right CA: its
	# check changed with it, the endpoint back
	cp "$T_TMP/edge.conf" "$T_TMP/edge.conf.orig"
	sed -i "/127.0.0.1:$P_OTHER.*health_check/s|tls = { server_name|tls = { ca = \"$C/other-root.crt\"; server_name|" "$T_TMP/edge.conf"
	if reload_conf && edged_wait_log "upstream https://127.0.0.1:$P_OTHER is back: health check passed"; then
		t_ok "$v: a reload that fixes the checked deployment's tls.ca brings its endpoint back"
	else
		t_fail "$v: health check after a tls reload" "$(grep -c other-root "$T_TMP/edge.conf") $(grep -m3 "$P_OTHER" "$EDGED_LOG" | tail -2)"
	fi
	cp "$T_TMP/edge.conf.orig" "$T_TMP/edge.conf"

	# ---- edgectl upstream list: scheme, protocol, TLS state (P_OK's
	# last connection verified again after wrong.test's failed)
	code up.test /again >/dev/null
	"$EDGECTL" --socket "$SOCK" upstream list >"$T_TMP/list"
	"$EDGECTL" --socket "$SOCK" upstream list --json >"$T_TMP/list.json"
	if grep -q "^https://127.0.0.1:$P_OK .* h1 *verified " "$T_TMP/list" &&
		grep -q "^https://127.0.0.1:$P_EXP .* h1 *failed " "$T_TMP/list" &&
		[ "$(python3 -c 'import json,sys
e = [x for x in json.load(open(sys.argv[1]))["endpoints"] if x["address"].endswith(sys.argv[2])][0]
print(e["scheme"], e["protocol"], e["tls"])' "$T_TMP/list.json" ":$P_OK")" = "https h1 verified" ]; then
		t_ok "$v: edgectl upstream list: each https:// endpoint's protocol and its last TLS connection (verified, failed); --json scheme, protocol, tls"
	else
		t_fail "$v: edgectl upstream list" "$(tr '\n' '|' <"$T_TMP/list")"
	fi

	edged_stop 10
	if grep -q '"host":"exp.test".*"outcome":"upstream_tls_failed"' "$T_TMP/requests.jsonl" &&
		grep -q '"host":"up.test".*"upstream_addr":"https://127.0.0.1:'"$P_OK"'"' "$T_TMP/requests.jsonl"; then
		t_ok "$v: analytics: upstream_tls_failed, and the https:// endpoint as upstream_addr"
	else
		t_fail "$v: analytics" "$(grep exp.test "$T_TMP/requests.jsonl" | head -c 300)"
	fi
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
t_exit
