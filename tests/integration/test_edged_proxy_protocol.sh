#!/bin/bash
# test_edged_proxy_protocol.sh - listen addresses with proxy_protocol =
# true (a plain and a TLS one) beside a plain one, trusted_proxies =
# [ "127.0.0.2/32" ], in front of tests/tools/echo_backend.py; clients are
# tests/tools/pp_client.py (from 127.0.0.2, the trusted peer, or from
# 127.0.0.1, not trusted):
#   - v1 TCP4 and TCP6, v2 TCP4 (with a TLV edged does not know) and TCP6,
#     and a header sent in two halves: the backend's X-Client-IP and
#     X-Forwarded-For and the analytics record's client_ip are the
#     header's client; over TLS, the header read before the handshake;
#   - v2 LOCAL (the balancer's own request): the peer's own address;
#   - an IP rule blocking the header's client: 403 for it, others served;
#   - refused, each closed without a byte and counted in
#     edge_proxy_protocol_total{result}: a peer outside trusted_proxies
#     (untrusted), no header at all, a malformed v1, a v2 of version 3, a
#     v2 longer than 4096 bytes (malformed), half a header and then
#     nothing until timeouts.client_header (timeout), v1 UNKNOWN and v2 UNSPEC
#     (unknown: a client without an address);
#   - the plain address beside them is not affected (no header wanted);
#   - X-Forwarded-For on it: from the trusted peer, the rightmost address
#     outside trusted_proxies is the client (X-Client-IP, the project's
#     ip_block, analytics), the peer appended; a list ending in garbage
#     not believed; from another peer replaced; the next request on the
#     connection without it is the peer's again.
# Runs against build/edged and build/asan/edged.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/lib_edged.sh
. "$(dirname "$0")/../lib_edged.sh"
edged_begin curl python3 openssl
edged_need_build

BASE=$(edged_ports 5)
P_EDGE=$BASE
P_ADMIN=$((BASE + 1))
P_PP=$((BASE + 2))
P_PPTLS=$((BASE + 3))
P_BACK=$((BASE + 4))
SOCK="$T_TMP/edged.sock"
C="$T_TMP/certs"
PPC="$TOOLS/pp_client.py"
mkdir -p "$C"
chmod 755 "$T_TMP" "$C"
if ! bash "$TOOLS/mkchain.sh" "$C" srv 0 "DNS:pp.test" >/dev/null; then
	t_fail "test certificate made"
	t_exit
	exit
fi
chmod 644 "$C"/*
if ! edged_backend "$P_BACK" python3 "$TOOLS/echo_backend.py" "$P_BACK" "$T_TMP/back.jsonl" back; then
	t_fail "backend starts"
	t_exit
	exit
fi

{
	edged_conf_head "$P_ADMIN" "$SOCK" 1 | sed '/^listen = /d'
	cat <<CONF
listen = ( "127.0.0.1:$P_EDGE", { address = "127.0.0.1:$P_PP"; proxy_protocol = true; } );
trusted_proxies = [ "127.0.0.2/32" ];
pin_dir = "$T_TMP/pins";
timeouts = { header = "60s"; client_header = "1s"; };
analytics = { file = "$T_TMP/requests.jsonl"; };
tls = {
  listen = ( { address = "127.0.0.1:$P_PPTLS"; proxy_protocol = true; } );
  certificates = ( { cert = "$C/srv-0.pem"; key = "$C/srv.key"; } );
};
projects = ( { id = "p"; ip_block = [ "203.0.113.66/32" ];
  environments = ( { id = "e"; domains = [ "pp.test" ];
    deployment = { id = "d"; upstreams = [ "127.0.0.1:$P_BACK" ]; }; } ); } );
CONF
} >"$T_TMP/edge.conf"
chmod 644 "$T_TMP/edge.conf"

# header NAME FILE: the value of request header NAME in the backend's JSON
# answer FILE (its second line on)
header() {
	tail -n +2 "$2" | python3 -c 'import json, sys
d = json.load(sys.stdin)
print(next((v for k, v in d["headers"] if k.lower() == sys.argv[1].lower()), ""))' "$1" 2>/dev/null
}

metric() {
	curl -s -m 5 "http://127.0.0.1:$P_ADMIN/metrics" | awk -v k="$1" '$1 == k { v = $2 } END { print v + 0 }'
}
pm() { metric "edge_proxy_protocol_total{result=\"$1\"}"; }

# served V KIND WANT [ARGS...]: a request after header KIND from the
# trusted peer is answered 200 with X-Client-IP WANT
served() {
	local v=$1 kind=$2 want=$3 got
	shift 3
	python3 "$PPC" --bind 127.0.0.2 "$@" "$P_PP" "$kind" pp.test >"$T_TMP/out" 2>&1
	got=$(header X-Client-IP "$T_TMP/out")
	if head -1 "$T_TMP/out" | grep -q "200" && [ "$got" = "$want" ] &&
		[ "$(header X-Forwarded-For "$T_TMP/out")" = "$want" ]; then
		t_ok "$v: $kind $*: 200, X-Client-IP and X-Forwarded-For $want"
	else
		t_fail "$v: $kind $*" "X-Client-IP '$got', $(head -c 300 "$T_TMP/out")"
	fi
}

# refused V WHAT RESULT PORT KIND [ARGS...]: closed without a byte, counted
refused() {
	local v=$1 what=$2 res=$3 port=$4 kind=$5 n0 i
	shift 5
	n0=$(pm "$res")
	python3 "$PPC" "$@" "$port" "$kind" pp.test >"$T_TMP/out" 2>&1
	for ((i = 0; i < 30; i++)); do
		[ "$(pm "$res")" -gt "$n0" ] && break
		sleep 0.1
	done
	if [ "$(cat "$T_TMP/out")" = "CLOSED 0" ] && [ "$(pm "$res")" = $((n0 + 1)) ]; then
		t_ok "$v: $what: closed without a byte, counted ($res)"
	else
		t_fail "$v: $what" "$(head -c 200 "$T_TMP/out"); $res $(pm "$res") (was $n0)"
	fi
}

# xff_case V FROM XFF CLIENT SENT: a request from address FROM with
# X-Forwarded-For XFF reaches the backend with X-Client-IP CLIENT and
# X-Forwarded-For SENT
xff_case() {
	local v=$1 from=$2 xff=$3 client=$4 sent=$5
	{
		echo status
		curl -s -m 5 --interface "$from" -H 'Host: pp.test' -H "X-Forwarded-For: $xff" \
			"http://127.0.0.1:$P_EDGE/"
	} >"$T_TMP/out" 2>&1
	if [ "$(header X-Client-IP "$T_TMP/out")" = "$client" ] &&
		[ "$(header X-Forwarded-For "$T_TMP/out")" = "$sent" ]; then
		t_ok "$v: from $from, X-Forwarded-For '$xff': X-Client-IP $client, X-Forwarded-For '$sent'"
	else
		t_fail "$v: from $from, X-Forwarded-For '$xff'" "X-Client-IP '$(header X-Client-IP "$T_TMP/out")', X-Forwarded-For '$(header X-Forwarded-For "$T_TMP/out")'"
	fi
}

# xff_status FROM XFF: the status of a request from FROM with that header
xff_status() {
	curl -s -m 5 -o /dev/null -w '%{http_code}' --interface "$1" -H 'Host: pp.test' \
		-H "X-Forwarded-For: $2" "http://127.0.0.1:$P_EDGE/"
}

run_suite() {
	local bin=$1 v=$2 n
	: >"$T_TMP/requests.jsonl"
	if ! edged_start "$bin" "$T_TMP/edge.conf"; then
		t_fail "$v: edged starts" "$(tail -5 "$EDGED_LOG")"
		return
	fi
	served "$v" v1 203.0.113.7
	served "$v" v1-6 2001:db8::7
	served "$v" v2 203.0.113.9
	served "$v" v2-6 2001:db8::9
	served "$v" v2 203.0.113.9 --split 200
	served "$v" v1 203.0.113.7 --split 200
	served "$v" v2-local 127.0.0.2
	# over TLS: the header, then the handshake
	python3 "$PPC" --bind 127.0.0.2 --tls pp.test "$P_PPTLS" v2 pp.test >"$T_TMP/out" 2>&1
	if head -1 "$T_TMP/out" | grep -q 200 && [ "$(header X-Client-IP "$T_TMP/out")" = 203.0.113.9 ] &&
		[ "$(header X-Forwarded-Proto "$T_TMP/out")" = https ]; then
		t_ok "$v: a TLS address: the header read before the handshake, X-Client-IP the header's client"
	else
		t_fail "$v: TLS" "$(head -c 300 "$T_TMP/out")"
	fi
	# the analytics record's client_ip
	sleep 1.2
	if grep -q '"client_ip":"203.0.113.7"' "$T_TMP/requests.jsonl" &&
		grep -q '"client_ip":"2001:db8::9"' "$T_TMP/requests.jsonl"; then
		t_ok "$v: analytics' client_ip is the header's client"
	else
		t_fail "$v: analytics client_ip" "$(grep -o '"client_ip":"[^"]*"' "$T_TMP/requests.jsonl" | sort | uniq -c | tr '\n' ' ')"
	fi
	# an IP rule of the project applies to the header's client
	python3 - "$P_PP" <<'PY' >"$T_TMP/out" 2>&1
import socket, sys
s = socket.socket(); s.bind(("127.0.0.2", 0)); s.settimeout(10)
s.connect(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"PROXY TCP4 203.0.113.66 198.51.100.1 40000 80\r\nGET / HTTP/1.1\r\nHost: pp.test\r\nConnection: close\r\n\r\n")
d = b""
while True:
    x = s.recv(4096)
    if not x: break
    d += x
print(d.split(b"\r\n")[0].decode())
PY
	if grep -q " 403" "$T_TMP/out"; then
		t_ok "$v: the project's ip_block of the header's client: 403"
	else
		t_fail "$v: ip_block" "$(cat "$T_TMP/out")"
	fi
	refused "$v" "a peer outside trusted_proxies" untrusted "$P_PP" v1
	refused "$v" "a peer outside trusted_proxies (TLS address)" untrusted "$P_PPTLS" v2
	refused "$v" "no header (an HTTP request)" malformed "$P_PP" none --bind 127.0.0.2
	refused "$v" "a malformed v1 (two spaces)" malformed "$P_PP" bad-v1 --bind 127.0.0.2
	refused "$v" "a v2 of version 3" malformed "$P_PP" bad-v2 --bind 127.0.0.2
	refused "$v" "a v2 of 4097 bytes" malformed "$P_PP" big-v2 --bind 127.0.0.2
	refused "$v" "half a header, then nothing past timeouts.client_header" timeout "$P_PP" partial --bind 127.0.0.2
	refused "$v" "v1 UNKNOWN (a client with no address)" unknown "$P_PP" v1-unknown --bind 127.0.0.2
	refused "$v" "v2 PROXY with family UNSPEC" unknown "$P_PP" v2-unspec --bind 127.0.0.2
	if edged_wait_log "listen 127.0.0.1:$P_PP: a connection from 127.0.0.1 closed: not in trusted_proxies" &&
		edged_wait_log "PROXY protocol header malformed v1 header"; then
		t_ok "$v: refusals logged with the address, the peer and why"
	else
		t_fail "$v: refusals logged" "$(grep -i proxy "$EDGED_LOG" | tail -3)"
	fi
	n=$(pm ok)
	if [ "$n" -ge 7 ] && [ "$(pm local)" -ge 1 ]; then
		t_ok "$v: edge_proxy_protocol_total counts ok ($n) and local"
	else
		t_fail "$v: ok counted" "ok $n local $(pm local)"
	fi
	# X-Forwarded-For from a trusted peer names the client (the rightmost
	# address outside trusted_proxies); any other peer's is replaced
	xff_case "$v" 127.0.0.2 "203.0.113.50" 203.0.113.50 "203.0.113.50, 127.0.0.2"
	xff_case "$v" 127.0.0.2 "203.0.113.51, 127.0.0.2" 203.0.113.51 "203.0.113.51, 127.0.0.2, 127.0.0.2"
	xff_case "$v" 127.0.0.2 "10.9.9.9, 203.0.113.53:4711" 203.0.113.53 "10.9.9.9, 203.0.113.53, 127.0.0.2"
	xff_case "$v" 127.0.0.2 "203.0.113.54, unknown" 127.0.0.2 "127.0.0.2"
	xff_case "$v" 127.0.0.1 "203.0.113.52" 127.0.0.1 "127.0.0.1"
	if [ "$(xff_status 127.0.0.2 203.0.113.66)" = 403 ] && [ "$(xff_status 127.0.0.1 203.0.113.66)" = 200 ]; then
		t_ok "$v: ip_block of a client a trusted peer's X-Forwarded-For names: 403; the same header from another peer: ignored, 200"
	else
		t_fail "$v: ip_block by X-Forwarded-For" "$(xff_status 127.0.0.2 203.0.113.66) $(xff_status 127.0.0.1 203.0.113.66)"
	fi
	sleep 1.2
	if grep -q '"client_ip":"203.0.113.50"' "$T_TMP/requests.jsonl"; then
		t_ok "$v: analytics' client_ip is the X-Forwarded-For client"
	else
		t_fail "$v: analytics X-Forwarded-For client" "$(grep -o '"client_ip":"[^"]*"' "$T_TMP/requests.jsonl" | sort | uniq -c | tr '\n' ' ')"
	fi
	# keep-alive: the next request without the header is the peer's again
	curl -s -m 5 --interface 127.0.0.2 -H 'Host: pp.test' -H 'X-Forwarded-For: 203.0.113.57' \
		-o /dev/null "http://127.0.0.1:$P_EDGE/" --next -s -m 5 -H 'Host: pp.test' \
		-o "$T_TMP/ka" "http://127.0.0.1:$P_EDGE/" 2>/dev/null
	if grep -q '\["X-Client-IP", "127.0.0.2"\]' "$T_TMP/ka"; then
		t_ok "$v: the next request on the connection, without X-Forwarded-For: the peer's address again"
	else
		t_fail "$v: keep-alive after an X-Forwarded-For client" "$(head -c 300 "$T_TMP/ka")"
	fi

	# the plain address wants no header
	if [ "$(curl -s -o /dev/null -w '%{http_code}' -H 'Host: pp.test' "http://127.0.0.1:$P_EDGE/")" = 200 ]; then
		t_ok "$v: the plain address beside them serves without a header"
	else
		t_fail "$v: plain address"
	fi
	edged_stop 10
	edged_sanitizers_clean "$v: sanitizers silent" && t_ok "$v: no sanitizer report"
}

run_suite "$EDGED" edged
edged_asan && run_suite "$EDGED_ASAN" asan
t_exit
