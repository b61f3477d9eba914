#!/bin/bash
# test_edged_tls.sh - TLS termination (tls group, docs/tls.md): a test CA
# and certificates made here with openssl (three names, a wildcard, an
# ECDSA and an RSA certificate for one name); openssl s_client, curl and
# Python's ssl as clients; tests/tools/echo_backend.py behind edged.
#   - edged --check: broken certificates named with their file (missing,
#     not PEM, a key that does not match, expired, a chain that does not
#     lead to its issuer, no DNS name, an OCSP file that is not one), an
#     HTTPS address that collides; as root, a key only root can read
#     refused at start by edged running as nobody
#   - SNI among three certificates, the wildcard, the default for an
#     unknown name and for no SNI; ECDSA or RSA for one name as the client
#     offers; TLS 1.1 refused, 1.2 and 1.3 served; ALPN h2 before
#     http/1.1, http/1.1 alone after a reload with http2.enabled false;
#     resumption by ticket (s_client -sess_out / -sess_in); OCSP stapling
#     of a response made with openssl ocsp
#   - curl over HTTPS to a plain backend: X-Forwarded-Proto https (http
#     over plain HTTP); keep-alive over TLS across a park; 3 MB down and
#     2 MB up; an Upgrade over HTTPS carried by the copy mover even with
#     splice = "sockmap"
#   - https_redirect (308 to https://, path and query kept) and HSTS on
#     TLS only
#   - a handshake that never completes (timeouts.tls_handshake) and
#     garbage instead of a ClientHello: closed and counted
#   - a reload (SIGHUP) with a broken certificate refused, the old one
#     serving; a certificate file replaced: the next handshake gets the
#     new one while an established keep-alive connection goes on
#   - /metrics (handshakes, failures by reason, resumptions, reloads) and
#     the analytics fields tls_version, tls_cipher, tls_resumed
# Runs against build/edged and build/asan/edged. Needs no root.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/lib_edged.sh
. "$(dirname "$0")/../lib_edged.sh"
edged_begin python3 openssl curl

BASE=$(edged_ports 6)
P_EDGE=$BASE
P_ADMIN=$((BASE + 1))
P_TLS=$((BASE + 2))
B1=$((BASE + 3))
B_TUN=$((BASE + 4)) # tests/tools/tunnel_backend.py: 101, then echo
SOCK="$T_TMP/edged.sock"
C="$T_TMP/certs"
mkdir -p "$C"

# ---- certificates ---------------------------------------------------------

# ca NAME: a CA certificate and key, C/NAME.crt and C/NAME.key
ca() {
	openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=$1" \
		-addext basicConstraints=critical,CA:TRUE \
		-addext keyUsage=critical,keyCertSign,cRLSign,digitalSignature \
		-keyout "$C/$1.key" -out "$C/$1.crt" >/dev/null 2>&1
}

# leaf NAME rsa|ec SANS [CA]: C/NAME.key, C/NAME.crt (the leaf) and
# C/NAME.pem (the leaf, then CA's certificate: the chain), CN NAME
leaf() {
	local name=$1 kind=$2 sans=$3 ca=${4:-ca}
	if [ "$kind" = ec ]; then
		openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 \
			-out "$C/$name.key" 2>/dev/null
	else
		openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 \
			-out "$C/$name.key" 2>/dev/null
	fi
	openssl req -new -key "$C/$name.key" -subj "/CN=$name" \
		-addext "subjectAltName=$sans" -out "$C/$name.csr" 2>/dev/null &&
		openssl x509 -req -in "$C/$name.csr" -CA "$C/$ca.crt" \
			-CAkey "$C/$ca.key" -CAcreateserial -days 2 -copy_extensions copy \
			-out "$C/$name.crt" 2>/dev/null &&
		cat "$C/$name.crt" "$C/$ca.crt" >"$C/$name.pem"
}

# expired NAME: C/NAME.pem valid in 2020 only (openssl ca sets the dates)
expired() {
	cat >"$C/ca.cnf" <<CNF
[ca]
default_ca = d
[d]
database = $C/index.txt
new_certs_dir = $C
serial = $C/serial
default_md = sha256
policy = p
copy_extensions = copy
[p]
commonName = supplied
CNF
	: >"$C/index.txt"
	echo 1000 >"$C/serial"
	openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$C/$1.key" 2>/dev/null
	openssl req -new -key "$C/$1.key" -subj "/CN=$1" -addext "subjectAltName=DNS:$1" \
		-out "$C/$1.csr" 2>/dev/null &&
		openssl ca -batch -config "$C/ca.cnf" -cert "$C/ca.crt" -keyfile "$C/ca.key" \
			-in "$C/$1.csr" -out "$C/$1.pem" -notext \
			-startdate 20200101000000Z -enddate 20200102000000Z >/dev/null 2>&1
}

# ocsp NAME: C/NAME.ocsp, the test CA's OCSP response ("good") for
# C/NAME.crt, made by openssl ocsp from an index of its own
ocsp() {
	local serial exp
	serial=$(openssl x509 -in "$C/$1.crt" -noout -serial | cut -d= -f2)
	exp=$(date -u -d '+2 days' +%y%m%d%H%M%SZ)
	printf 'V\t%s\t\t%s\tunknown\t/CN=%s\n' "$exp" "$serial" "$1" >"$C/ocsp-index.txt"
	openssl ocsp -issuer "$C/ca.crt" -cert "$C/$1.crt" -no_nonce -reqout "$C/$1.req" >/dev/null 2>&1 &&
		openssl ocsp -index "$C/ocsp-index.txt" -rsigner "$C/ca.crt" -rkey "$C/ca.key" \
			-CA "$C/ca.crt" -reqin "$C/$1.req" -respout "$C/$1.ocsp" -ndays 1 >/dev/null 2>&1
}

# ocsp_revoked NAME: C/NAME.revoked.ocsp, a response saying "revoked"
ocsp_revoked() {
	local serial exp
	serial=$(openssl x509 -in "$C/$1.crt" -noout -serial | cut -d= -f2)
	exp=$(date -u -d '+2 days' +%y%m%d%H%M%SZ)
	printf 'R\t%s\t%s\t%s\tunknown\t/CN=%s\n' "$exp" "$(date -u -d '-1 day' +%y%m%d%H%M%SZ)" "$serial" "$1" >"$C/ocsp-index.txt"
	openssl ocsp -issuer "$C/ca.crt" -cert "$C/$1.crt" -no_nonce -reqout "$C/$1.req" >/dev/null 2>&1 &&
		openssl ocsp -index "$C/ocsp-index.txt" -rsigner "$C/ca.crt" -rkey "$C/ca.key" \
			-CA "$C/ca.crt" -reqin "$C/$1.req" -respout "$C/$1.revoked.ocsp" -ndays 1 >/dev/null 2>&1
}

# ocsp_stale NAME: C/NAME.stale.ocsp, a "good" response whose nextUpdate
# was yesterday (openssl ocsp cannot date one in the past: Debian's
# python3-cryptography signs it with the test CA's key)
ocsp_stale() {
	/usr/bin/python3 - "$C/ca.crt" "$C/ca.key" "$C/$1.crt" "$C/$1.stale.ocsp" <<'PY'
import datetime, sys
from cryptography import x509
from cryptography.x509 import ocsp
from cryptography.hazmat.primitives import hashes, serialization
ca = x509.load_pem_x509_certificate(open(sys.argv[1], "rb").read())
key = serialization.load_pem_private_key(open(sys.argv[2], "rb").read(), None)
leaf = x509.load_pem_x509_certificate(open(sys.argv[3], "rb").read())
now = datetime.datetime.utcnow()
b = ocsp.OCSPResponseBuilder().add_response(
    cert=leaf, issuer=ca, algorithm=hashes.SHA1(),
    cert_status=ocsp.OCSPCertStatus.GOOD,
    this_update=now - datetime.timedelta(days=2),
    next_update=now - datetime.timedelta(days=1),
    revocation_time=None, revocation_reason=None,
).responder_id(ocsp.OCSPResponderEncoding.HASH, ca)
open(sys.argv[4], "wb").write(
    b.sign(key, hashes.SHA256()).public_bytes(serialization.Encoding.DER))
PY
}

make_certs() {
	ca ca && ca other-ca &&
		leaf a-rsa2 rsa "DNS:a.tls.test" &&
		leaf a.tls.test rsa "DNS:a.tls.test" &&
		leaf b-rsa rsa "DNS:b.tls.test" &&
		leaf b-ec ec "DNS:b.tls.test" &&
		leaf c.tls.test ec "DNS:c.tls.test,DNS:r.tls.test" &&
		leaf wild rsa "DNS:*.w.tls.test" &&
		leaf a-v2 ec "DNS:a.tls.test" &&
		leaf nosan rsa "IP:127.0.0.1" &&
		leaf stray rsa "DNS:stray.tls.test" other-ca &&
		expired old.tls.test && ocsp a.tls.test && ocsp_revoked c.tls.test &&
		ocsp c.tls.test && ocsp_stale c.tls.test || return 1
	# a 1024-bit RSA key: below OpenSSL's default security level
	openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:1024 -out "$C/weak.key" 2>/dev/null &&
		openssl req -new -key "$C/weak.key" -subj "/CN=weak" -addext "subjectAltName=DNS:a.tls.test" \
			-out "$C/weak.csr" 2>/dev/null &&
		openssl x509 -req -in "$C/weak.csr" -CA "$C/ca.crt" -CAkey "$C/ca.key" -CAcreateserial \
			-days 2 -copy_extensions copy -out "$C/weak.pem" 2>/dev/null || return 1
	# a chain whose second certificate did not sign the first
	cat "$C/stray.crt" "$C/ca.crt" >"$C/badchain.pem"
	# a valid chain eleven intermediates deep: C/deep-N.pem holds the
	# leaf and N of them (tests/tools/mkchain.sh)
	"$TOOLS/mkchain.sh" "$C" deep 11 "DNS:deep.tls.test" || return 1
	echo "not a certificate" >"$C/garbage.pem"
	# a certificate, then a PEM block that is not one
	{ cat "$C/a.tls.test.pem"; printf -- '-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n'; } >"$C/trailing.pem"
}

# ---- configuration --------------------------------------------------------

# certs_conf A_CERT A_KEY: the certificates list, a.tls.test's first (the
# default)
certs_conf() {
	cat <<CONF
  certificates = (
    { cert = "$1"; key = "$2"; },
    { cert = "$C/b-rsa.pem"; key = "$C/b-rsa.key"; },
    { cert = "$C/b-ec.pem"; key = "$C/b-ec.key"; },
    { cert = "$C/c.tls.test.pem"; key = "$C/c.tls.test.key"; ocsp = "${OCSP:-$C/c.tls.test.ocsp}"; },
    { cert = "$C/wild.pem"; key = "$C/wild.key"; }
  );
CONF
}

# write_conf FILE [A_CERT A_KEY]
write_conf() {
	{
		edged_conf_head "$P_ADMIN" "$SOCK"
		cat <<CONF
analytics = { file = "$T_TMP/events.jsonl"; };
${HTTP2:-}
timeouts = { tls_handshake = "1s"; drain = "2s"; };
limits = { max_connections = 6; };
splice = "sockmap";
tls = {
  listen = [ "127.0.0.1:$P_TLS" ];
  session_ticket_rotation = "1h";
$(certs_conf "${2:-$T_TMP/live/a.pem}" "${3:-$T_TMP/live/a.key}")
};
projects = (
  { id = "site";
    environments = (
      { id = "main"; domains = [ "a.tls.test", "b.tls.test", "c.tls.test", "*.w.tls.test" ];
        deployment = { id = "main-1"; upstreams = [ "127.0.0.1:$B1" ]; }; },
      { id = "secure"; domains = [ "r.tls.test" ];
        deployment = { id = "secure-1"; upstreams = [ "127.0.0.1:$B1" ]; };
        security_headers = { https_redirect = true; hsts = true;
                             hsts_max_age = "1d"; hsts_subdomains = true; }; },
      { id = "tun"; domains = [ "t.tls.test" ];
        deployment = { id = "tun-1"; upstreams = [ "127.0.0.1:$B_TUN" ]; }; }
    );
  }
);
CONF
	} >"$1"
}

# ---- clients --------------------------------------------------------------

# sclient ARGS...: openssl s_client to the HTTPS port, stdin empty; its
# output in $T_TMP/sc.out
sclient() {
	timeout 10 openssl s_client -connect "127.0.0.1:$P_TLS" "$@" </dev/null >"$T_TMP/sc.out" 2>&1
}

# served_cn ARGS...: the CN of the certificate edged serves (s_client ARGS)
served_cn() {
	sclient "$@"
	sed -n 's/^subject=.*CN *= *\([^,/]*\).*/\1/p' "$T_TMP/sc.out" | head -1
}

# served_keytype ARGS...: the served certificate's key type (s_client's
# "Server public key is N bit" and "Peer signature type")
served_sigtype() {
	sclient "$@"
	sed -n 's/^Peer signature type: *//p' "$T_TMP/sc.out" | head -1
}

# metric NAME_AND_LABELS: its value on /metrics (0 when absent)
metric() {
	curl -s "http://127.0.0.1:$P_ADMIN/metrics" | awk -v k="$1" '$1 == k { v = $2 } END { print v + 0 }'
}

# https PATH [CURL ARGS...]: curl GET https://HOST:P_TLS/PATH with the
# test CA (HOST a.tls.test unless H is set), HTTP/1.1 (ALPN would pick
# h2); body in $T_TMP/body, head in $T_TMP/head
https() {
	local h=${H:-a.tls.test} path=$1
	shift
	curl -s --http1.1 --max-time 10 --cacert "$C/ca.crt" --resolve "$h:$P_TLS:127.0.0.1" \
		-D "$T_TMP/head" -o "$T_TMP/body" "$@" "https://$h:$P_TLS$path"
}

# backend_header NAME: header NAME of the request the backend answered
# last ($T_TMP/body holds its JSON echo)
backend_header() {
	python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
print(next((v for k, v in d["headers"] if k.lower() == sys.argv[2].lower()), ""))' "$T_TMP/body" "$1" 2>/dev/null
}

# keepalive_client HOST STEPS...: one TLS connection (Python's ssl, the
# test CA, SNI HOST); each STEP is "get" (a GET, its status printed) or
# "sleep:S" or "wait:FILE" (until FILE exists)
keepalive_client() {
	python3 - "$P_TLS" "$C/ca.crt" "$@" <<'PY'
import os, socket, ssl, sys, time
port, ca, host = int(sys.argv[1]), sys.argv[2], sys.argv[3]
ctx = ssl.create_default_context(cafile=ca)
s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), 5), server_hostname=host)
f = s.makefile("rb")
for step in sys.argv[4:]:
    if step == "get":
        s.sendall(b"GET /ka HTTP/1.1\r\nHost: %s\r\n\r\n" % host.encode())
        status = f.readline().split()[1].decode()
        n = 0
        while True:
            line = f.readline()
            if line.lower().startswith(b"content-length:"):
                n = int(line.split(b":")[1])
            if line in (b"\r\n", b""):
                break
        f.read(n)
        print(status, flush=True)
    elif step.startswith("sleep:"):
        time.sleep(float(step[6:]))
    elif step.startswith("wait:"):
        for _ in range(200):
            if os.path.exists(step[5:]):
                break
            time.sleep(0.05)
s.close()
PY
}

# ticket_with_response: a TLS 1.3 connection (Python's ssl over memory
# BIOs, so that the test sees when bytes arrive): whether anything came
# in the 50 ms between the handshake and the request, the response's
# status and whether a ticket came with it, and whether that ticket
# resumes; then a connection that sends nothing: whether a ticket comes
# alone (within 3 s), and whether it resumes
ticket_with_response() {
	/usr/bin/python3 - "$P_TLS" "$C/ca.crt" <<'PY'
import select, socket, ssl, sys
port, ca = int(sys.argv[1]), sys.argv[2]
ctx = ssl.create_default_context(cafile=ca)
ctx.minimum_version = ssl.TLSVersion.TLSv1_3

def hello(session=None):
    s = socket.create_connection(("127.0.0.1", port), 5)
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    o = ctx.wrap_bio(inc, out, server_hostname="a.tls.test", session=session)
    while True:
        try:
            o.do_handshake()
            break
        except ssl.SSLWantReadError:
            s.sendall(out.read())
            d = s.recv(65536)
            if not d:
                sys.exit("closed during the handshake")
            inc.write(d)
    s.sendall(out.read())  # the client's Finished
    return s, inc, out, o

def get(s, inc, out, o):
    o.write(b"GET /ticket HTTP/1.1\r\nHost: a.tls.test\r\nConnection: close\r\n\r\n")
    s.sendall(out.read())
    body = b""
    while True:
        try:
            d = o.read(65536)
            if not d:
                break
            body += d
            continue
        except ssl.SSLWantReadError:
            pass
        except ssl.SSLZeroReturnError:
            break
        d = s.recv(65536)
        if not d:
            break
        inc.write(d)
    s.close()
    return body.split(b" ")[1].decode() if body.startswith(b"HTTP/1.1 ") else repr(body[:40])

s, inc, out, o = hello()
early = select.select([s], [], [], 0.05)[0]
status = get(s, inc, out, o)
sess = o.session
ticket = sess is not None and sess.has_ticket
s2, inc2, out2, o2 = hello(sess)
reused = o2.session_reused
get(s2, inc2, out2, o2)

# idle after the handshake: the ticket alone
s3, inc3, out3, o3 = hello()
alone = False
while not alone and select.select([s3], [], [], 3)[0]:
    d = s3.recv(65536)
    if not d:
        break
    inc3.write(d)
    try:
        o3.read(1)
    except ssl.SSLWantReadError:
        pass
    alone = o3.session is not None and o3.session.has_ticket
s3.close()
reused3 = False
if alone:
    s4, inc4, out4, o4 = hello(o3.session)
    reused3 = o4.session_reused
    get(s4, inc4, out4, o4)
print("%s; %s %s; %s; idle: %s; %s" % (
    "bytes came before the request" if early else "quiet after the handshake",
    status, "with a ticket" if ticket else "without a ticket",
    "resumed" if reused else "not resumed",
    "a ticket alone" if alone else "no ticket", "resumed" if reused3 else "not resumed"))
PY
}

# tls_tunnel BYTES: over TLS, an Upgrade to tunnel_backend.py's /echo,
# then BYTES random bytes sent and read back: prints "STATUS SAME" (SAME
# 1 when the echo is equal)
tls_tunnel() {
	python3 - "$P_TLS" "$C/ca.crt" "$1" <<'PY'
import os, select, socket, ssl, sys
port, ca, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
ctx = ssl.create_default_context(cafile=ca)
s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), 5), server_hostname="a.tls.test")
s.settimeout(10)
s.sendall(b"GET /echo HTTP/1.1\r\nHost: t.tls.test\r\nConnection: Upgrade\r\nUpgrade: raw-test\r\n\r\n")
head = b""
while b"\r\n\r\n" not in head:
    head += s.recv(1)
status = head.split()[1].decode()
data = os.urandom(n)
# one thread (an SSL object is not to be used from two at once):
# write while the socket takes it, read what comes back meanwhile
s.setblocking(False)
sent, got = 0, bytearray()
while len(got) < n:
    r, w, _ = select.select([s], [s] if sent < n else [], [], 10)
    if not r and not w and not s.pending():
        break
    if w:
        try:
            sent += s.send(data[sent:sent + 16384])
        except ssl.SSLWantWriteError:
            pass
    if r or s.pending():
        try:
            b = s.recv(65536)
        except ssl.SSLWantReadError:
            continue
        if not b:
            break
        got += b
print(status, int(bytes(got) == data))
s.close()
PY
}

# raw_close SECONDS [BYTES]: connect to the HTTPS port, send BYTES (none),
# print how many seconds until edged closed the connection (or "open"
# after SECONDS)
raw_close() {
	python3 - "$P_TLS" "$1" "${2:-}" <<'PY'
import socket, sys, time
port, limit, data = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3].encode()
s = socket.create_connection(("127.0.0.1", port), 5)
t0 = time.monotonic()
if data:
    s.sendall(data.replace(b"\\r\\n", b"\r\n"))
s.settimeout(limit)
try:
    while s.recv(4096):
        pass
    print("%.1f" % (time.monotonic() - t0))
except socket.timeout:
    print("open")
except ConnectionResetError:
    print("%.1f" % (time.monotonic() - t0))
PY
}

# ---- the checks of --check (normal build only: no traffic) -----------------

check_cases() {
	local conf="$T_TMP/check.conf" bad
	# expect_check NAME FRAGMENT A_CERT A_KEY: --check refuses, naming it
	expect_check() {
		write_conf "$conf" "$3" "$4"
		expect "--check: $1" 1 "$2" "$EDGED" -c "$conf" --check
	}
	write_conf "$conf" "$C/a.tls.test.pem" "$C/a.tls.test.key"
	expect "--check: good certificates" 0 "ok" "$EDGED" -c "$conf" --check
	expect_check "a missing certificate file" "$C/none.pem: tls.certificates[0]: cannot read: No such file" \
		"$C/none.pem" "$C/a.tls.test.key"
	expect_check "a file that is not PEM" "$C/garbage.pem: tls.certificates[0]: no PEM certificate" \
		"$C/garbage.pem" "$C/a.tls.test.key"
	expect_check "a broken PEM block after the certificates" "$C/trailing.pem: tls.certificates[0]: what follows certificate 1 is not a valid PEM certificate" \
		"$C/trailing.pem" "$C/a.tls.test.key"
	expect_check "a key that does not match" "$C/b-rsa.key: tls.certificates[0]: the key does not match the certificate $C/a.tls.test.pem" \
		"$C/a.tls.test.pem" "$C/b-rsa.key"
	expect_check "a key file that holds a certificate" "$C/a.tls.test.pem: tls.certificates[0]: not a PEM private key" \
		"$C/a.tls.test.pem" "$C/a.tls.test.pem"
	expect_check "an expired certificate" "$C/old.tls.test.pem: tls.certificates[0]: certificate 0 (/CN=old.tls.test) expired at 2020-01-02T00:00:00Z" \
		"$C/old.tls.test.pem" "$C/old.tls.test.key"
	expect_check "a chain that does not lead to its issuer" "$C/badchain.pem: tls.certificates[0]: the chain does not lead to its issuer" \
		"$C/badchain.pem" "$C/stray.key"
	expect_check "no DNS name in subjectAltName" "$C/nosan.pem: tls.certificates[0]: no DNS name" \
		"$C/nosan.pem" "$C/nosan.key"
	expect_check "a chain of 11 certificates after the leaf (at most 10)" \
		"$C/deep-11.pem: tls.certificates[0]: 12 certificates in it: a certificate and at most 10 of its chain are served" \
		"$C/deep-11.pem" "$C/deep.key"
	write_conf "$conf" "$C/deep-10.pem" "$C/deep.key"
	expect "--check: a chain of 10 certificates after the leaf" 0 "ok" "$EDGED" -c "$conf" --check
	expect_check "a directory" "$C: tls.certificates[0]: not a regular file" "$C" "$C/a.tls.test.key"
	expect_check "a 1024-bit RSA key" "$C/weak.pem: tls.certificates[0]: the certificate or its key refused by OpenSSL (its default security level" \
		"$C/weak.pem" "$C/weak.key"
	OCSP="$C/garbage.pem" write_conf "$conf" "$C/a.tls.test.pem" "$C/a.tls.test.key"
	expect "--check: an OCSP file that is not a response" 1 "$C/garbage.pem: tls.certificates[3]: not a DER OCSP response" \
		"$EDGED" -c "$conf" --check
	# an OCSP response for another certificate, one saying revoked
	OCSP="$C/a.tls.test.ocsp" write_conf "$conf" "$C/a.tls.test.pem" "$C/a.tls.test.key"
	expect "--check: an OCSP response for another certificate" 1 "$C/a.tls.test.ocsp: tls.certificates[3]: the OCSP response is not for the certificate (/CN=c.tls.test" \
		"$EDGED" -c "$conf" --check
	OCSP="$C/c.tls.test.revoked.ocsp" write_conf "$conf" "$C/a.tls.test.pem" "$C/a.tls.test.key"
	expect "--check: an OCSP response saying revoked" 1 "$C/c.tls.test.revoked.ocsp: tls.certificates[3]: the OCSP response says the certificate is revoked" \
		"$EDGED" -c "$conf" --check
	# a response past its nextUpdate: served without stapling, warned
	OCSP="$C/c.tls.test.stale.ocsp" write_conf "$conf" "$C/a.tls.test.pem" "$C/a.tls.test.key"
	expect "--check: an OCSP response past its nextUpdate is a warning, not an error" 0 \
		"$C/c.tls.test.stale.ocsp: the OCSP response is out of date (next update " \
		"$EDGED" -c "$conf" --check
	# two RSA certificates for a.tls.test: the first listed serves, warned
	write_conf "$conf" "$C/a.tls.test.pem" "$C/a.tls.test.key"
	sed -i "s|{ cert = \"$C/wild.pem\"|{ cert = \"$C/a-rsa2.pem\"; key = \"$C/a-rsa2.key\"; },\n    &|" "$conf"
	expect "--check: two RSA certificates for one name: the first serves, warned" 0 \
		"tls: a.tls.test has two RSA certificates: $C/a.tls.test.pem serves it, not $C/a-rsa2.pem" \
		"$EDGED" -c "$conf" --check
	# an HTTPS address that is also the HTTP one, and one not absolute path
	write_conf "$conf" "$C/a.tls.test.pem" "$C/a.tls.test.key"
	sed -i "s/listen = \[ \"127.0.0.1:$P_TLS\" \];/listen = [ \"127.0.0.1:$P_EDGE\" ];/" "$conf"
	expect "--check: tls.listen collides with listen" 1 "tls.listen[0]: 127.0.0.1:$P_EDGE is also listen[0]" \
		"$EDGED" -c "$conf" --check
	write_conf "$conf" "$C/a.tls.test.pem" "$C/a.tls.test.key"
	sed -i "s/listen = \[ \"127.0.0.1:$P_TLS\" \];/listen = [ \"127.0.0.1:$P_ADMIN\" ];/" "$conf"
	expect "--check: tls.listen collides with admin_listen" 1 "is also admin_listen" \
		"$EDGED" -c "$conf" --check
	write_conf "$conf" "a.pem" "$C/a.tls.test.key"
	expect "--check: a relative path" 1 "tls.certificates[0].cert: \"a.pem\": must be an absolute path" \
		"$EDGED" -c "$conf" --check
	bad="$T_TMP/nocert.conf"
	write_conf "$bad"
	python3 - "$bad" <<'PY'
import re, sys
t = open(sys.argv[1]).read()
t = re.sub(r"certificates = \(.*?\n  \);", "certificates = ( );", t, flags=re.S)
open(sys.argv[1], "w").write(t)
PY
	expect "--check: no certificates" 1 "needs at least one certificate" "$EDGED" -c "$bad" --check
}

# key_root_only: as root, edged running as nobody refuses at start a key
# only root can read, naming it (the certificates are read as `user`)
key_root_only() {
	local conf="$T_TMP/nobody.conf" d="$T_TMP/keys"
	if [ "$(id -u)" != 0 ] || ! id nobody >/dev/null 2>&1; then
		t_skip "a key only root can read" "needs root and the user nobody"
		return
	fi
	mkdir -p "$d"
	chmod 711 "$T_TMP" "$d"
	chmod 755 "$C"
	chmod a+r "$C"/*
	cp "$C/a.tls.test.pem" "$C/a.tls.test.key" "$d/"
	chmod 644 "$d/a.tls.test.pem"
	chmod 600 "$d/a.tls.test.key"
	write_conf "$conf" "$d/a.tls.test.pem" "$d/a.tls.test.key"
	sed -i "s/^user = .*/user = \"nobody\";/; s|^control_socket = .*|control_socket = \"$d/ctl.sock\";|; s|^analytics = .*||" "$conf"
	expect "a key only root can read: edged as nobody refuses to start, naming it" 1 \
		"$d/a.tls.test.key: tls.certificates[0]: cannot read: Permission denied (key and certificate files must be readable by edged's user)" \
		timeout 10 "$EDGED" -c "$conf" -f
	chmod 644 "$d/a.tls.test.key"
	"$EDGED" -c "$conf" -f >"$T_TMP/nobody.log" 2>&1 &
	local pid=$!
	edged_track "$pid"
	if edged_wait_port "$P_TLS" && [ "$(served_cn -servername a.tls.test)" = a.tls.test ]; then
		t_ok "the same key readable by nobody: served"
	else
		t_fail "a key readable by nobody" "$(tail -3 "$T_TMP/nobody.log")"
	fi
	kill "$pid"
	wait "$pid" 2>/dev/null
}

# ---- the suite, once per build ---------------------------------------------

run_suite() {
	local bin=$1 v=$2 conf="$T_TMP/edged.conf" n hs0 out cn
	rm -rf "$T_TMP/live" "$T_TMP/events.jsonl" "$T_TMP/ka."*
	mkdir -p "$T_TMP/live"
	cp "$C/a.tls.test.pem" "$T_TMP/live/a.pem"
	cp "$C/a.tls.test.key" "$T_TMP/live/a.key"
	write_conf "$conf"
	if ! edged_start "$bin" "$conf" || ! edged_wait_port "$P_TLS"; then
		t_fail "$v: edged starts with TLS" "$(tail -5 "$EDGED_LOG")"
		return
	fi
	t_ok "$v: edged listens for HTTPS on 127.0.0.1:$P_TLS"

	# SNI among three, the wildcard, the default
	for n in a b c; do
		cn=$(served_cn -servername "$n.tls.test")
		case "$n:$cn" in
		a:a.tls.test | b:b-rsa | b:b-ec | c:c.tls.test) t_ok "$v: SNI $n.tls.test gets its certificate ($cn)" ;;
		*) t_fail "$v: SNI $n.tls.test" "got CN '$cn': $(tail -3 "$T_TMP/sc.out")" ;;
		esac
	done
	expect_cn() { # NAME WANT ARGS...
		local name=$1 want=$2 got
		shift 2
		got=$(served_cn "$@")
		if [ "$got" = "$want" ]; then t_ok "$v: $name ($got)"; else t_fail "$v: $name" "got CN '$got', want $want"; fi
	}
	expect_cn "a wildcard name gets the wildcard's certificate" wild -servername x.w.tls.test
	expect_cn "two labels under a wildcard get the default" a.tls.test -servername a.x.w.tls.test
	expect_cn "an unknown name gets the default (the first certificate)" a.tls.test -servername nope.example
	expect_cn "no SNI gets the default" a.tls.test -noservername
	expect_cn "SNI in upper case and with a trailing dot" c.tls.test -servername C.TLS.Test.

	# ECDSA and RSA for one name, chosen by what the client offers
	expect_cn "b.tls.test with ECDSA signature algorithms: the ECDSA certificate" b-ec \
		-servername b.tls.test -sigalgs ECDSA+SHA256
	expect_cn "b.tls.test with RSA signature algorithms: the RSA certificate" b-rsa \
		-servername b.tls.test -sigalgs RSA-PSS+SHA256:RSA+SHA256
	expect_cn "b.tls.test, TLS 1.2 with an ECDHE-RSA cipher: the RSA certificate" b-rsa \
		-servername b.tls.test -tls1_2 -cipher ECDHE-RSA-AES128-GCM-SHA256
	expect_cn "b.tls.test, TLS 1.2 with an ECDHE-ECDSA cipher: the ECDSA certificate" b-ec \
		-servername b.tls.test -tls1_2 -cipher ECDHE-ECDSA-CHACHA20-POLY1305

	# OCSP stapling: the configured response for c.tls.test, none for a
	sclient -servername c.tls.test -status
	if grep -q "OCSP Response Status: successful" "$T_TMP/sc.out" && grep -q "Cert Status: good" "$T_TMP/sc.out"; then
		t_ok "$v: OCSP: c.tls.test's response stapled (successful, good)"
	else
		t_fail "$v: OCSP stapling" "$(grep -i ocsp "$T_TMP/sc.out" | head -2)"
	fi
	sclient -servername a.tls.test -status
	if grep -q "OCSP response: no response sent" "$T_TMP/sc.out"; then
		t_ok "$v: OCSP: none stapled for a certificate without one"
	else
		t_fail "$v: no OCSP for a" "$(grep -i ocsp "$T_TMP/sc.out" | head -2)"
	fi

	# versions and ALPN (http2.enabled by default: h2 first)
	sclient -servername a.tls.test -tls1_3 -alpn h2,http/1.1
	if grep -q "^New, TLSv1.3" "$T_TMP/sc.out" && grep -q "ALPN protocol: h2$" "$T_TMP/sc.out"; then
		t_ok "$v: TLS 1.3 served, ALPN selects h2 from h2,http/1.1"
	else
		t_fail "$v: TLS 1.3 and ALPN h2" "$(grep -E 'Protocol|ALPN|error' "$T_TMP/sc.out" | head -3)"
	fi
	sclient -servername a.tls.test -tls1_2 -alpn http/1.1,h2
	if grep -q "ALPN protocol: h2$" "$T_TMP/sc.out"; then
		t_ok "$v: ALPN: h2 preferred over http/1.1 whatever the client's order (TLS 1.2)"
	else
		t_fail "$v: ALPN server preference" "$(grep -E 'Protocol|ALPN|error' "$T_TMP/sc.out" | head -3)"
	fi
	sclient -servername a.tls.test -alpn http/1.1
	if grep -q "ALPN protocol: http/1.1$" "$T_TMP/sc.out"; then
		t_ok "$v: ALPN selects http/1.1 for a client that offers only it"
	else
		t_fail "$v: ALPN http/1.1 alone" "$(grep -E 'Protocol|ALPN|error' "$T_TMP/sc.out" | head -3)"
	fi
	sclient -servername a.tls.test
	if grep -q "^New, TLSv1.3" "$T_TMP/sc.out" && grep -q "No ALPN negotiated" "$T_TMP/sc.out"; then
		t_ok "$v: no ALPN offered: none selected, the handshake served"
	else
		t_fail "$v: no ALPN" "$(grep -E '^New|ALPN|error' "$T_TMP/sc.out" | head -3)"
	fi
	sclient -servername a.tls.test -tls1_2
	if grep -q "^New, TLSv1.2, Cipher is ECDHE-RSA-AES" "$T_TMP/sc.out"; then
		t_ok "$v: TLS 1.2 served with an ECDHE AEAD suite"
	else
		t_fail "$v: TLS 1.2" "$(grep -E 'Protocol|Cipher|error' "$T_TMP/sc.out" | head -3)"
	fi
	n=$(metric 'edge_tls_handshake_failures_total{reason="protocol"}')
	sclient -servername a.tls.test -tls1_1 -cipher 'DEFAULT:@SECLEVEL=0'
	if grep -q "^New, (NONE), Cipher is (NONE)" "$T_TMP/sc.out" &&
		grep -q "alert protocol version" "$T_TMP/sc.out"; then
		t_ok "$v: TLS 1.1 refused"
	else
		t_fail "$v: TLS 1.1 refused" "$(grep -E '^New|alert' "$T_TMP/sc.out" | head -2)"
	fi
	sclient -servername a.tls.test -tls1_2 -cipher AES128-SHA256
	if grep -q "^New, (NONE), Cipher is (NONE)" "$T_TMP/sc.out" &&
		[ "$(metric 'edge_tls_handshake_failures_total{reason="protocol"}')" -ge $((n + 2)) ]; then
		t_ok "$v: a suite without forward secrecy refused; both counted as protocol failures"
	else
		t_fail "$v: RSA key exchange refused" "$(grep -E 'Cipher' "$T_TMP/sc.out" | head -1), protocol failures $(metric 'edge_tls_handshake_failures_total{reason="protocol"}')"
	fi

	# resumption by ticket, TLS 1.3 and 1.2
	for ver in tls1_3 tls1_2; do
		printf 'GET /first HTTP/1.1\r\nHost: a.tls.test\r\nConnection: close\r\n\r\n' |
			timeout 10 openssl s_client -connect "127.0.0.1:$P_TLS" -servername a.tls.test -"$ver" \
				-ign_eof -sess_out "$T_TMP/sess.$ver" >"$T_TMP/sc1.out" 2>&1
		printf 'GET /resumed HTTP/1.1\r\nHost: a.tls.test\r\nUser-Agent: resumed-%s\r\nConnection: close\r\n\r\n' "$ver" |
			timeout 10 openssl s_client -connect "127.0.0.1:$P_TLS" -servername a.tls.test -"$ver" \
				-ign_eof -sess_in "$T_TMP/sess.$ver" -sess_out "$T_TMP/sess2.$ver" >"$T_TMP/sc2.out" 2>&1
		if grep -q "^Reused, TLSv1" "$T_TMP/sc2.out" && grep -q "HTTP/1.1 200" "$T_TMP/sc2.out"; then
			t_ok "$v: $ver session resumed by ticket ($(grep -m1 '^Reused' "$T_TMP/sc2.out"))"
		else
			t_fail "$v: $ver resumption" "$(grep -E '^(New|Reused)|HTTP/1.1' "$T_TMP/sc2.out" | head -3)"
		fi
	done
	# TLS 1.3 clients use a ticket once: a resumed handshake must bring a
	# new ticket, and that one resumes too
	if [ -s "$T_TMP/sess2.tls1_3" ]; then
		printf 'GET /resumed-again HTTP/1.1\r\nHost: a.tls.test\r\nConnection: close\r\n\r\n' |
			timeout 10 openssl s_client -connect "127.0.0.1:$P_TLS" -servername a.tls.test -tls1_3 \
				-ign_eof -sess_in "$T_TMP/sess2.tls1_3" >"$T_TMP/sc3.out" 2>&1
	fi
	if [ -s "$T_TMP/sess2.tls1_3" ] && grep -q "^Reused, TLSv1.3" "$T_TMP/sc3.out" &&
		grep -q "HTTP/1.1 200" "$T_TMP/sc3.out"; then
		t_ok "$v: tls1_3 a resumed handshake brings a new ticket, which resumes the next one"
	else
		t_fail "$v: tls1_3 ticket renewed on resumption" \
			"$([ -s "$T_TMP/sess2.tls1_3" ] || echo 'no ticket after the resumed handshake'; grep -E '^(New|Reused)|HTTP/1.1' "$T_TMP/sc3.out" 2>/dev/null | head -3)"
	fi

	# the TLS 1.3 ticket is held and goes out with the first response (one
	# send, one segment): nothing arrives between the handshake and the
	# request; the response brings the ticket, and it resumes; a client
	# that sends nothing (a preconnected socket) gets it alone after the
	# hold (100 ms), and it resumes
	out=$(ticket_with_response 2>&1)
	if [ "$out" = "quiet after the handshake; 200 with a ticket; resumed; idle: a ticket alone; resumed" ]; then
		t_ok "$v: tls1_3 the ticket goes out with the first response, or alone to an idle client, and resumes"
	else
		t_fail "$v: tls1_3 ticket with the first response" "$out"
	fi

	# HTTPS to a plain backend
	if https /via-tls && [ "$(backend_header X-Forwarded-Proto)" = https ] &&
		grep -q '"path": "/via-tls"' "$T_TMP/body"; then
		t_ok "$v: curl over HTTPS: 200 from the plain backend, X-Forwarded-Proto https"
	else
		t_fail "$v: curl over HTTPS" "$(head -1 "$T_TMP/head") $(head -c 200 "$T_TMP/body")"
	fi
	curl -s --max-time 5 -H "Host: a.tls.test" -o "$T_TMP/body" "http://127.0.0.1:$P_EDGE/via-http"
	if [ "$(backend_header X-Forwarded-Proto)" = http ]; then
		t_ok "$v: plain HTTP: X-Forwarded-Proto http"
	else
		t_fail "$v: plain HTTP X-Forwarded-Proto" "$(backend_header X-Forwarded-Proto)"
	fi
	hs0=$(metric edge_tls_handshakes_total)
	out=$(keepalive_client a.tls.test get sleep:0.4 get sleep:0.3 get | tr '\n' ' ')
	if [ "$out" = "200 200 200 " ] && [ "$(metric edge_tls_handshakes_total)" -eq $((hs0 + 1)) ]; then
		t_ok "$v: keep-alive over TLS: three requests on one handshake, parked between them"
	else
		t_fail "$v: keep-alive over TLS" "statuses '$out', handshakes $hs0 -> $(metric edge_tls_handshakes_total)"
	fi
	https /big/3000000
	if [ "$(stat -c %s "$T_TMP/body")" -eq 3000000 ]; then
		t_ok "$v: a 3 MB response over TLS arrives whole"
	else
		t_fail "$v: a 3 MB response" "$(stat -c %s "$T_TMP/body") bytes"
	fi
	head -c 2000000 /dev/urandom >"$T_TMP/upload"
	if https /upload -X POST --data-binary "@$T_TMP/upload" &&
		grep -q "\"body_sha256\": \"$(sha256sum "$T_TMP/upload" | cut -d' ' -f1)\"" "$T_TMP/body"; then
		t_ok "$v: a 2 MB request body over TLS arrives whole (SHA-256)"
	else
		t_fail "$v: a 2 MB upload" "$(head -c 200 "$T_TMP/body")"
	fi

	# an Upgrade over HTTPS: a tunnel the copy mover carries (splice =
	# "sockmap" never takes a TLS stream)
	out=$(tls_tunnel 1000000)
	if [ "$out" = "101 1" ]; then
		t_ok "$v: an Upgrade over HTTPS: 101, 1 MB echoed through the tunnel intact"
	else
		t_fail "$v: tunnel over TLS" "'$out'"
	fi

	# redirect and HSTS
	curl -s --max-time 5 -H "Host: r.tls.test:$P_EDGE" -D "$T_TMP/head" -o /dev/null \
		"http://127.0.0.1:$P_EDGE/some/path?x=1&y=2"
	if grep -q "^HTTP/1.1 308" "$T_TMP/head" &&
		grep -qi "^Location: https://r.tls.test:$P_TLS/some/path?x=1&y=2" "$T_TMP/head"; then
		t_ok "$v: https_redirect: 308 to https://, port, path and query kept"
	else
		t_fail "$v: https_redirect" "$(tr '\r\n' '  ' <"$T_TMP/head" | head -c 300)"
	fi
	# no path to keep (OPTIONS *): the site's root
	out=$(printf 'OPTIONS * HTTP/1.1\r\nHost: r.tls.test\r\nConnection: close\r\n\r\n' |
		timeout 5 python3 -c '
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(sys.stdin.buffer.read())
b = b""
while True:
    d = s.recv(4096)
    if not d:
        break
    b += d
print(b.decode("latin-1"))' "$P_EDGE" | tr -d '\r' | grep -i '^Location:')
	if [ "$out" = "Location: https://r.tls.test:$P_TLS/" ]; then
		t_ok "$v: https_redirect of OPTIONS *: to the site's root"
	else
		t_fail "$v: https_redirect of OPTIONS *" "'$out'"
	fi
	if H=r.tls.test https /secure && grep -q "^HTTP/1.1 200" "$T_TMP/head" &&
		grep -qi "^Strict-Transport-Security: max-age=86400; includeSubDomains" "$T_TMP/head"; then
		t_ok "$v: over HTTPS the redirecting route is served, with HSTS"
	else
		t_fail "$v: HSTS over HTTPS" "$(tr '\r\n' '  ' <"$T_TMP/head" | head -c 300)"
	fi
	if https /nohsts && ! grep -qi "^Strict-Transport-Security" "$T_TMP/head"; then
		t_ok "$v: no HSTS where the route does not ask for it"
	else
		t_fail "$v: no HSTS" "$(grep -i strict "$T_TMP/head")"
	fi

	# handshakes that never complete, and garbage
	n=$(metric 'edge_tls_handshake_failures_total{reason="timeout"}')
	out=$(raw_close 4)
	if [ "$out" != open ] && awk -v t="$out" 'BEGIN { exit !(t >= 0.8 && t < 3) }' &&
		[ "$(metric 'edge_tls_handshake_failures_total{reason="timeout"}')" -eq $((n + 1)) ]; then
		t_ok "$v: a client that sends nothing is closed after tls_handshake (${out}s), counted as timeout"
	else
		t_fail "$v: handshake timeout" "closed after '$out', timeouts $n -> $(metric 'edge_tls_handshake_failures_total{reason="timeout"}')"
	fi
	n=$(metric 'edge_tls_handshake_failures_total{reason="not_tls"}')
	out=$(raw_close 4 'GET / HTTP/1.1\r\nHost: a.tls.test\r\n\r\n')
	if [ "$out" != open ] && awk -v t="$out" 'BEGIN { exit !(t < 0.8) }' &&
		[ "$(metric 'edge_tls_handshake_failures_total{reason="not_tls"}')" -eq $((n + 1)) ]; then
		t_ok "$v: plain HTTP instead of a ClientHello: closed at once (${out}s), counted as not_tls"
	else
		t_fail "$v: garbage" "closed after '$out', not_tls $n -> $(metric 'edge_tls_handshake_failures_total{reason="not_tls"}')"
	fi
	out=$(raw_close 4 "$(head -c 3000 /dev/urandom | tr -d '\0' | head -c 2000 | base64 -w0)")
	if [ "$out" != open ]; then
		t_ok "$v: random bytes: closed (${out}s)"
	else
		t_fail "$v: random bytes" "still open"
	fi

	# a reload with a broken certificate: refused, the old one serves
	write_conf "$T_TMP/broken.conf" "$C/badchain.pem" "$C/stray.key"
	cp "$T_TMP/broken.conf" "$conf"
	kill -HUP "$EPID"
	if edged_wait_log "reload refused.*$C/badchain.pem: tls.certificates\[0\]: the chain does not lead" &&
		[ "$(served_cn -servername a.tls.test)" = a.tls.test ] &&
		[ "$(metric 'edge_tls_reloads_total{result="refused"}')" -ge 1 ]; then
		t_ok "$v: SIGHUP with a broken certificate: refused naming the file, the old one serves"
	else
		t_fail "$v: broken reload" "$(grep -i 'reload\|tls' "$EDGED_LOG" | tail -2)"
	fi
	# a chain longer than the limit: refused the same way, counted
	local refused
	refused=$(metric 'edge_tls_reloads_total{result="refused"}')
	write_conf "$conf" "$C/deep-11.pem" "$C/deep.key"
	kill -HUP "$EPID"
	if edged_wait_log "reload refused.*$C/deep-11.pem: tls.certificates\[0\]: 12 certificates in it: a certificate and at most 10 of its chain are served" &&
		[ "$(served_cn -servername a.tls.test)" = a.tls.test ] &&
		[ "$(metric 'edge_tls_reloads_total{result="refused"}')" -gt "$refused" ]; then
		t_ok "$v: SIGHUP with a chain of 11 certificates after the leaf: refused naming the file, counted, the old one serves"
	else
		t_fail "$v: too long a chain reloaded" "$(grep -i 'reload\|tls' "$EDGED_LOG" | tail -2)"
	fi
	write_conf "$conf"
	kill -HUP "$EPID"
	edged_wait_log "reloaded $conf" || t_fail "$v: reload back to the good certificates"

	# http2.enabled follows a reload: off, ALPN has http/1.1 alone for
	# the next handshakes; on again, h2 first
	HTTP2='http2 = { enabled = false; };' write_conf "$conf"
	out=$(timeout 10 "$EDGECTL" --socket "$SOCK" reload 2>&1) || t_fail "$v: reload with http2 off" "$out"
	sclient -servername a.tls.test -alpn h2,http/1.1
	if grep -q "ALPN protocol: http/1.1$" "$T_TMP/sc.out"; then
		sclient -servername a.tls.test -alpn h2
		if grep -q "No ALPN negotiated" "$T_TMP/sc.out"; then
			t_ok "$v: reload with http2.enabled false: ALPN selects http/1.1 from h2,http/1.1, nothing from h2 alone"
		else
			t_fail "$v: http2 off, h2 alone" "$(grep -E 'ALPN|error' "$T_TMP/sc.out" | head -2)"
		fi
	else
		t_fail "$v: http2 off by reload" "$(grep -E 'ALPN|error' "$T_TMP/sc.out" | head -2)"
	fi
	write_conf "$conf"
	out=$(timeout 10 "$EDGECTL" --socket "$SOCK" reload 2>&1) || t_fail "$v: reload with http2 on" "$out"
	sclient -servername a.tls.test -alpn h2,http/1.1
	if grep -q "ALPN protocol: h2$" "$T_TMP/sc.out"; then
		t_ok "$v: reload with http2 on again: ALPN selects h2"
	else
		t_fail "$v: http2 on by reload" "$(grep -E 'ALPN|error' "$T_TMP/sc.out" | head -2)"
	fi

	# a certificate file replaced while a keep-alive connection is open
	keepalive_client a.tls.test get "wait:$T_TMP/ka.go" get >"$T_TMP/ka.out" 2>&1 &
	local kpid=$!
	edged_track "$kpid"
	for n in $(seq 50); do
		[ -s "$T_TMP/ka.out" ] && break
		sleep 0.1
	done
	cp "$C/a-v2.key" "$T_TMP/live/a.key.new" && mv "$T_TMP/live/a.key.new" "$T_TMP/live/a.key"
	cp "$C/a-v2.pem" "$T_TMP/live/a.pem.new" && mv "$T_TMP/live/a.pem.new" "$T_TMP/live/a.pem"
	if edged_wait_log "a certificate file changed: reloaded" &&
		[ "$(served_cn -servername a.tls.test)" = a-v2 ]; then
		t_ok "$v: a certificate file replaced: the next handshake gets the new one"
	else
		t_fail "$v: certificate file watch" "CN $(served_cn -servername a.tls.test); $(grep tls "$EDGED_LOG" | tail -2)"
	fi
	touch "$T_TMP/ka.go"
	wait "$kpid"
	if [ "$(tr '\n' ' ' <"$T_TMP/ka.out")" = "200 200 " ]; then
		t_ok "$v: the keep-alive connection opened before the change goes on"
	else
		t_fail "$v: keep-alive across the change" "$(head -c 300 "$T_TMP/ka.out")"
	fi

	# over limits.max_connections: closed at once, counted
	for n in $(seq 50); do
		[ "$(metric edge_connections)" -eq 0 ] && break
		sleep 0.1
	done
	n=$(metric 'edge_requests_total{outcome="connection_limit"}')
	out=$(python3 - "$P_TLS" <<'PY'
import socket, sys, time
port = int(sys.argv[1])
held = [socket.create_connection(("127.0.0.1", port), 5) for _ in range(6)]
time.sleep(0.2)
s = socket.create_connection(("127.0.0.1", port), 5)
s.settimeout(0.8)
try:
    print("closed" if s.recv(1) == b"" else "data")
except socket.timeout:
    print("open")
except ConnectionResetError:
    print("closed")
PY
)
	if [ "$out" = closed ] && [ "$(metric 'edge_requests_total{outcome="connection_limit"}')" -eq $((n + 1)) ]; then
		t_ok "$v: over max_connections a TLS connection is closed before any handshake, counted as connection_limit"
	else
		t_fail "$v: TLS over the connection cap" "'$out', connection_limit $n -> $(metric 'edge_requests_total{outcome="connection_limit"}'), open $(metric edge_connections)"
	fi

	# metrics
	if [ "$(metric edge_tls_handshakes_total)" -ge 20 ] &&
		[ "$(metric edge_tls_resumptions_total)" -ge 2 ] &&
		[ "$(metric 'edge_tls_reloads_total{result="applied"}')" -ge 2 ]; then
		t_ok "$v: /metrics: $(metric edge_tls_handshakes_total) handshakes, $(metric edge_tls_resumptions_total) resumed, reloads counted"
	else
		t_fail "$v: metrics" "$(curl -s "http://127.0.0.1:$P_ADMIN/metrics" | grep edge_tls_ | tr '\n' ' ')"
	fi
	# edgectl status: the listeners, certificates, next expiry, ticket
	# key, handshakes
	local st
	st=$("$EDGECTL" --socket "$SOCK" status 2>&1)
	"$EDGECTL" --socket "$SOCK" status --json >"$T_TMP/st.json" 2>&1
	if grep -Eq "^tls: +127.0.0.1:$P_TLS; 5 certificate files, 0 from the database, [0-9]+ names; next expiry 20[0-9-]+T[0-9:]+Z \([a-z.*]+\)$" <<<"$st" &&
		grep -Eq "^tls: +ticket key [0-9]+s old \(rotated every 3600s\); [0-9]+ handshakes, [1-9][0-9]* resumed.*failed \(timeout\)" <<<"$st" &&
		python3 -c 'import json, sys
t = json.load(open(sys.argv[1]))["daemon"]["status"]["tls"]
assert t["certificates_files"] == 5 and t["certificates_db"] == 0, t
assert t["counts"]["handshakes"] >= 20 and t["counts"]["failures"]["not_tls"] >= 1, t
assert t["ticket_rotation_s"] == 3600 and t["next_expiry"], t' "$T_TMP/st.json"; then
		t_ok "$v: edgectl status: $(grep -m1 '^tls' <<<"$st" | tr -s ' ') / $(grep '^tls' <<<"$st" | sed -n 2p | tr -s ' '); --json too"
	else
		t_fail "$v: edgectl status: TLS" "$(grep '^tls' <<<"$st"); $(head -c 300 "$T_TMP/st.json")"
	fi

	edged_stop
	edged_sanitizers_clean "$v: sanitizers clean" && t_ok "$v: no sanitizer report"

	# analytics: TLS requests carry version, cipher and resumed; plain
	# ones null
	if python3 - "$T_TMP/events.jsonl" <<'PY' 2>"$T_TMP/an.err"; then
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
by = {e["path"]: e for e in ev}
t = by["/via-tls"]
assert t["tls_version"] in ("TLSv1.3", "TLSv1.2") and t["tls_cipher"] and t["tls_resumed"] is False, t
p = by["/via-http"]
assert p["tls_version"] is None and p["tls_cipher"] is None and p["tls_resumed"] is None, p
r = [e for e in ev if e["path"] == "/resumed"]
assert len(r) == 2 and all(e["tls_resumed"] is True for e in r), r
assert {e["tls_version"] for e in r} == {"TLSv1.3", "TLSv1.2"}, r
tun = [e for e in ev if e["kind"] == "tunnel"]
assert len(tun) == 1 and tun[0]["mover"] == "copy" and tun[0]["tls_version"], tun
assert tun[0]["bytes_in"] > 1000000 and tun[0]["bytes_out"] > 1000000, tun
red = [e for e in ev if e["path"] == "/some/path?x=1&y=2"]
assert len(red) == 1 and red[0]["status"] == 308 and red[0]["outcome"] == "https_redirect", red
PY
		t_ok "$v: analytics: tls_version, tls_cipher and tls_resumed on TLS requests, null on plain ones"
	else
		t_fail "$v: analytics" "$(tail -2 "$T_TMP/an.err")"
	fi
}

edged_need_build
if ! make_certs; then
	t_fail "the test's certificates are made"
	t_exit
	exit
fi
edged_backend "$B1" python3 "$TOOLS/echo_backend.py" "$B1" "$T_TMP/backend.jsonl" ||
	t_fail "backend starts"
edged_backend "$B_TUN" python3 "$TOOLS/tunnel_backend.py" "$B_TUN" "$T_TMP/tunnel.jsonl" ||
	t_fail "tunnel backend starts"
check_cases
key_root_only
run_suite "$EDGED" edged
edged_asan && run_suite "$EDGED_ASAN" asan
t_exit
