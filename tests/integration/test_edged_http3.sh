#!/bin/bash
# test_edged_http3.sh - edged serving HTTP/3 on tls.quic_listen, end to
# end with Debian's ngtcp2 client (gtlsclient) in front of the recording
# backend (tests/tools/echo_backend.py): a GET and its upstream headers
# and analytics record, the same request over HTTP/1.1 and HTTP/3 seen
# alike upstream, a 300 KB POST whose SHA-256 the backend checks, 50
# streams on one connection, edge's own answers, a client changing its
# address mid-connection with two workers (the steering program keeps it
# on its worker), hostile datagrams (garbage, a truncated Initial, an
# unknown version, a short packet for an unknown connection) dropped with
# edged still serving, a drain, and `--check` naming a QUIC address in
# use. Runs against build/edged and build/asan/edged. Needs no root.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/lib_edged.sh
. "$(dirname "$0")/../lib_edged.sh"
edged_begin curl python3 openssl gtlsclient
edged_need_build
EDGECTL=${EDGECTL:-$B/edgectl}

BASE=$(edged_ports 5)
P_EDGE=$BASE
P_BACK=$((BASE + 1))
P_ADMIN=$((BASE + 2))
P_TLS=$((BASE + 3))   # TCP for HTTPS, UDP for QUIC
P_RELAY=$((BASE + 4)) # a UDP relay that records a client's first flight
C="$T_TMP/certs"
mkdir -p "$C"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
	-subj "/CN=shop.test" -addext "subjectAltName=DNS:shop.test,DNS:none.test" \
	-keyout "$C/shop.key" -out "$C/shop.pem" >/dev/null 2>&1
# big.test: a leaf and 9 intermediates, more than three Initials' worth
bash "$TOOLS/mkchain.sh" "$C" big 9 "DNS:big.test" || t_fail "big.test's chain made"
chmod 644 "$C/big.key"

{
	edged_conf_head "$P_ADMIN" "$T_TMP/edged.sock"
	cat <<CONF
analytics = { file = "$T_TMP/requests.jsonl"; };
limits = { max_body_bytes = "20M"; };
timeouts = { upstream_response = "5s"; drain = "10s"; };
tls = {
  listen = [ "127.0.0.1:$P_TLS" ];
  quic_listen = [ "127.0.0.1:$P_TLS" ];
  certificates = ( { cert = "$C/shop.pem"; key = "$C/shop.key"; },
                   { cert = "$C/big-9.pem"; key = "$C/big.key"; } );
};
projects = (
  { id = "shop";
    environments = (
      { id = "shop-prod";
        domains = [ "shop.test" ];
        deployment = { id = "shop-1"; upstreams = [ "127.0.0.1:$P_BACK" ]; };
      }
    );
  }
);
CONF
} >"$T_TMP/edge.conf"

eq() { # NAME GOT WANT
	if [ "$2" = "$3" ]; then t_ok "$1"; else t_fail "$1" "got '$2', want '$3'"; fi
}
has() { # NAME TEXT ERE
	if grep -Eq -- "$3" <<<"$2"; then t_ok "$1"; else t_fail "$1" "'$(head -c 300 <<<"$2")' lacks /$3/"; fi
}

# wait_nonzero NAME: wait (5 s) for NAME above 0
wait_nonzero() {
	local i
	for ((i = 0; i < 50; i++)); do
		[ "$(edged_metric "$1")" != 0 ] && return 0
		sleep 0.1
	done
	return 1
}

# open_at_most N: 0 once edged has at most N QUIC connections open (5 s)
open_at_most() {
	local i
	for ((i = 0; i < 50; i++)); do
		[ "$(edged_metric edge_quic_connections)" -le "$1" ] && return 0
		sleep 0.1
	done
	return 1
}

# cert_reloaded N: 0 once edged's log has more than N certificate
# reloads (10 s)
cert_reloaded() {
	local i
	for ((i = 0; i < 200; i++)); do
		[ "$(grep -c "a certificate file changed: reloaded" "$EDGED_LOG")" -gt "$1" ] && return 0
		sleep 0.05
	done
	return 1
}

backend_count() { [ -f "$T_TMP/backend.jsonl" ] && wc -l <"$T_TMP/backend.jsonl" || echo 0; }

# h3 NAME PATH [gtlsclient args]: requests over HTTP/3 to shop.test; the
# client's output in $T_TMP/h3.out, the statuses it got in STATUSES
h3() {
	local path=$2
	shift 2
	timeout 30 gtlsclient --exit-on-all-streams-close --no-quic-dump \
		--timeout=10s "$@" 127.0.0.1 "$P_TLS" "https://shop.test:$P_TLS$path" \
		>"$T_TMP/h3.out" 2>&1
	STATUSES=$(grep -ao '\[:status: [0-9]*\]' "$T_TMP/h3.out" | grep -o '[0-9]*' | sort | uniq -c | awk '{ print $2 "x" $1 }' | tr '\n' ' ')
	STATUSES=${STATUSES% }
}

run_suite() { # LABEL
	local L=$1 n0 rec code
	: >"$T_TMP/backend.jsonl"

	h3 "$L: GET" /hello
	eq "$L: a GET over HTTP/3 is answered 200" "$STATUSES" "200x1"
	rec=$(tail -1 "$T_TMP/backend.jsonl")
	has "$L: the backend sees Via 3" "$rec" '"Via", "3 [^"]* \(edge\)"'
	has "$L: and X-Forwarded-Proto https" "$rec" '"X-Forwarded-Proto", "https"'
	has "$L: and the client's address" "$rec" '"X-Client-IP", "127.0.0.1"'
	has "$L: and its path" "$rec" '"path": "/hello"'
	sleep 0.3
	has "$L: its analytics record says HTTP/3" \
		"$(grep '"path":"/hello"' "$T_TMP/requests.jsonl" | tail -1)" '"http_version":"HTTP/3"'

	# the same request over HTTP/1.1 (TLS) and HTTP/3: the same upstream
	# headers but the user agent, Via's protocol, the request id and
	# the trace (each request's own traceparent, of edge's form)
	curl -sk -o /dev/null -H 'user-agent: x' --resolve "shop.test:$P_TLS:127.0.0.1" \
		"https://shop.test:$P_TLS/same?a=1"
	h3 "$L: same" "/same?a=1"
	n0=$(grep -c '"path": "/same?a=1"' "$T_TMP/backend.jsonl")
	eq "$L: both reached the backend" "$n0" 2
	eq "$L: with the same fields upstream" \
		"$(grep '"path": "/same?a=1"' "$T_TMP/backend.jsonl" | /usr/bin/python3 -c '
import json, re, sys
seen = []
for line in sys.stdin:
    d = json.loads(line)
    h = [(k.lower(), v) for k, v in d["headers"]
         if k.lower() not in ("user-agent", "accept", "x-request-id", "via")]
    h = [(k, "00-TRACE-SPAN-01" if k == "traceparent" and
          re.fullmatch("00-[0-9a-f]{32}-[0-9a-f]{16}-01", v) else v)
         for k, v in h]
    seen.append(sorted(h))
print("same" if len(seen) == 2 and seen[0] == seen[1] else seen)')" "same"

	head -c 300000 /dev/urandom >"$T_TMP/body.bin"
	h3 "$L: POST" /upload -m POST -d "$T_TMP/body.bin"
	eq "$L: a 300 KB POST is answered" "$STATUSES" "200x1"
	rec=$(grep '"path": "/upload"' "$T_TMP/backend.jsonl" | tail -1)
	has "$L: the backend got all of it" "$rec" '"body_len": 300000'
	has "$L: byte for byte" "$rec" "\"body_sha256\": \"$(sha256sum "$T_TMP/body.bin" | cut -d' ' -f1)\""

	# 3 MB down and 300 KB up with 5 % of the datagrams lost each way
	# (gtlsclient drops them), compared with what HTTPS over TCP gets
	rm -rf "$T_TMP/dl" && mkdir -p "$T_TMP/dl"
	h3 "$L: lossy download" /big/3000000 -t 0.05 -r 0.05 --download="$T_TMP/dl"
	eq "$L: a 3 MB download through 5 % loss each way" "$STATUSES" "200x1"
	eq "$L: every byte, as over HTTP/1.1" \
		"$(sha256sum <"$T_TMP/dl/3000000" | cut -c1-64)" \
		"$(curl -sk --resolve "shop.test:$P_TLS:127.0.0.1" "https://shop.test:$P_TLS/big/3000000" | sha256sum | cut -c1-64)"
	wait_nonzero edge_quic_packets_lost_total
	has "$L: edged counts the packets it lost" "$(edged_metric edge_quic_packets_lost_total)" '^[1-9][0-9]*$'
	h3 "$L: lossy POST" /upload2 -m POST -d "$T_TMP/body.bin" -t 0.05 -r 0.05
	has "$L: a 300 KB POST through loss, byte for byte" \
		"$(grep '"path": "/upload2"' "$T_TMP/backend.jsonl" | tail -1)" \
		"\"body_sha256\": \"$(sha256sum "$T_TMP/body.bin" | cut -d' ' -f1)\""
	h3 "$L: trailers" /chunked/200000/trailers
	has "$L: a chunked upstream body with trailers: HEADERS, DATA, trailers" \
		"$(grep -a 'x-sum\|grpc-status' "$T_TMP/h3.out" | tr '\n' ' ')" 'x-sum: abc.*grpc-status: 0'

	h3 "$L: streams" /many -n 50
	eq "$L: 50 streams on one connection, all 200" "$STATUSES" "200x50"
	eq "$L: 50 requests at the backend" "$(grep -c '"path": "/many"' "$T_TMP/backend.jsonl")" 50

	n0=$(backend_count)
	timeout 30 gtlsclient --exit-on-all-streams-close --no-quic-dump --timeout=10s \
		127.0.0.1 "$P_TLS" "https://none.test:$P_TLS/x" >"$T_TMP/h3.out" 2>&1
	code=$(curl -sk -o /dev/null -w '%{http_code}' --resolve "none.test:$P_TLS:127.0.0.1" \
		"https://none.test:$P_TLS/x")
	has "$L: a name no route serves gets edge's own answer, as over HTTP/1.1 ($code)" \
		"$(grep -ao '\[:status: [0-9]*\]' "$T_TMP/h3.out")" ":status: $code\]"
	eq "$L: which the backend never sees" "$(backend_count)" "$n0"

	# a client that changes its address mid-connection (NAT rebinding)
	# stays with its connection: two workers, the steering program
	h3 "$L: rebinding" /moved --change-local-addr=1s --nat-rebinding --delay-stream=2s
	eq "$L: a request after the client's address changed is answered" "$STATUSES" "200x1"

	# hostile datagrams: counted nowhere yet, dropped, nothing breaks
	/usr/bin/python3 - "$P_TLS" <<'PY' >"$T_TMP/garbage.out" 2>&1
import os, socket, sys
port = int(sys.argv[1])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(1)
pkts = [os.urandom(n) for n in (1, 20, 200, 1200)]
pkts.append(bytes([0xc0, 0, 0, 0, 1, 8]) + os.urandom(8))       # truncated Initial
pkts.append(bytes([0xc0, 0x1a, 0x2a, 0x3a, 0x4b, 8]) + os.urandom(8) + bytes([8]) + os.urandom(8) + os.urandom(1200))  # unknown version
pkts.append(bytes([0x40]) + os.urandom(16) + os.urandom(60))     # short, unknown connection
pkts.append(b"")
for p in pkts * 20:
    s.sendto(p, ("127.0.0.1", port))
vn = 0
try:
    while True:
        d, _ = s.recvfrom(2048)
        if len(d) > 5 and d[0] & 0x80 and d[1:5] == b"\0\0\0\0":
            vn += 1
except socket.timeout:
    pass
print("version negotiation", vn)
PY
	has "$L: an unknown version gets version negotiation" "$(cat "$T_TMP/garbage.out")" 'version negotiation [1-9]'
	h3 "$L: after garbage" /after
	eq "$L: and edged serves on" "$STATUSES" "200x1"
	if kill -0 "$EPID" 2>/dev/null; then t_ok "$L: edged is alive"; else t_fail "$L: edged is alive"; fi

	# resumption: a second connection with the first's ticket resumes
	# (its record says so; the first's does not)
	rm -f "$T_TMP/sess" "$T_TMP/tp"
	h3 "$L: ticket" /res1 --session-file="$T_TMP/sess" --tp-file="$T_TMP/tp" --disable-early-data
	h3 "$L: resume" /res2 --session-file="$T_TMP/sess" --tp-file="$T_TMP/tp" --disable-early-data
	eq "$L: a second connection with the first's session ticket is served" "$STATUSES" "200x1"
	sleep 0.3
	has "$L: the first connection's request is not resumed" \
		"$(grep '"path":"/res1"' "$T_TMP/requests.jsonl" | tail -1)" '"tls_resumed":false'
	has "$L: the second's is" \
		"$(grep '"path":"/res2"' "$T_TMP/requests.jsonl" | tail -1)" '"tls_resumed":true'

	# 0-RTT: off by default (the resumed request waits for the
	# handshake); on with tls.quic_early_data, a GET from early data goes
	# upstream with Early-Data: 1, a POST is 425, a replay of the first
	# flight is refused its early data
	rm -f "$T_TMP/sess" "$T_TMP/tp"
	h3 "$L: ticket, 0-RTT off" /e0 --session-file="$T_TMP/sess" --tp-file="$T_TMP/tp"
	h3 "$L: early, 0-RTT off" /e1 --session-file="$T_TMP/sess" --tp-file="$T_TMP/tp"
	eq "$L: 0-RTT off: the resumed GET is served" "$STATUSES" "200x1"
	has "$L: after the handshake (no Early-Data upstream)" \
		"$(grep '"path": "/e1"' "$T_TMP/backend.jsonl" | tail -1 | grep -ci '"early-data"')" '^0$'
	sed -i 's/^  quic_listen = \(.*\)$/  quic_listen = \1\n  quic_early_data = true;/' "$T_TMP/edge.conf"
	reload_conf || t_fail "$L: reload" "no reload line"
	rm -f "$T_TMP/sess" "$T_TMP/tp"
	h3 "$L: ticket, 0-RTT on" /e2 --session-file="$T_TMP/sess" --tp-file="$T_TMP/tp"
	h3 "$L: early GET" /e3 --session-file="$T_TMP/sess" --tp-file="$T_TMP/tp"
	eq "$L: 0-RTT on: a GET in early data is served" "$STATUSES" "200x1"
	has "$L: with Early-Data: 1 upstream" \
		"$(grep '"path": "/e3"' "$T_TMP/backend.jsonl" | tail -1)" '"Early-Data", "1"'
	has "$L: counted as an early request" "$(edged_metric edge_quic_early_requests_total)" '^[1-9][0-9]*$'
	has "$L: and a handshake that took early data" \
		"$(edged_metric 'edge_quic_early_data_total{result="accepted"}')" '^[1-9][0-9]*$'
	h3 "$L: early POST" /e4 -m POST -d "$T_TMP/body.bin" --session-file="$T_TMP/sess" --tp-file="$T_TMP/tp"
	eq "$L: a POST in early data is 425" "$STATUSES" "425x1"
	eq "$L: and never reaches the backend" "$(grep -c '"path": "/e4"' "$T_TMP/backend.jsonl")" 0
	sleep 0.3
	has "$L: its record says too_early" \
		"$(grep '"path":"/e4"' "$T_TMP/requests.jsonl" | tail -1)" '"outcome":"too_early"'
	h3 "$L: POST after the handshake" /e4b -m POST -d "$T_TMP/body.bin" \
		--session-file="$T_TMP/sess" --tp-file="$T_TMP/tp" --disable-early-data
	eq "$L: the same POST resumed without early data is served" "$STATUSES" "200x1"
	has "$L: an earlier hop's Early-Data goes upstream as it came (RFC 8470)" \
		"$(curl -sk --http1.1 -H 'Early-Data: 1' --resolve "shop.test:$P_TLS:127.0.0.1" \
			"https://shop.test:$P_TLS/e6" >/dev/null; grep '"path": "/e6"' "$T_TMP/backend.jsonl" | tail -1 | grep -o '"Early-Data", "1"' | wc -l)" '^1$'
	# the replay: a relay records the first flight (Initial and 0-RTT) of
	# a resumed GET, which is served once; the same datagrams sent again
	# from another port, once that connection is gone, within GnuTLS's
	# 10 s window, reach nothing upstream
	local o0 rl
	o0=$(edged_metric edge_quic_connections)
	/usr/bin/python3 "$TOOLS/udp_replay.py" relay "$P_RELAY" "$P_TLS" "$T_TMP/flight" 4 >"$T_TMP/relay.out" 2>&1 &
	rl=$!
	sleep 0.3
	timeout 30 gtlsclient --exit-on-all-streams-close --no-quic-dump --timeout=10s \
		--session-file="$T_TMP/sess" --tp-file="$T_TMP/tp" \
		127.0.0.1 "$P_RELAY" "https://shop.test:$P_TLS/e5" >"$T_TMP/h3.out" 2>&1
	wait "$rl"
	eq "$L: the relayed early GET is served once" "$(grep -c '"path": "/e5"' "$T_TMP/backend.jsonl")" 1
	open_at_most "$o0" || t_fail "$L: the relayed connection closes"
	has "$L: the relay recorded the first flight" "$(cat "$T_TMP/relay.out")" '^recorded [1-9]'
	/usr/bin/python3 "$TOOLS/udp_replay.py" replay "$P_TLS" "$T_TMP/flight" >"$T_TMP/replay.out" 2>&1
	has "$L: the replay was answered (a handshake)" "$(cat "$T_TMP/replay.out")" 'answers [1-9]'
	eq "$L: but its early GET never reaches the backend" "$(grep -c '"path": "/e5"' "$T_TMP/backend.jsonl")" 1
	has "$L: the replay is counted" \
		"$(edged_metric 'edge_quic_early_data_total{result="replayed"}')" '^[1-9][0-9]*$'
	has "$L: edgectl status shows 0-RTT" \
		"$("$EDGECTL" --socket "$T_TMP/edged.sock" status 2>&1)" '0-RTT on: [1-9][0-9]* handshakes? took early data, [1-9][0-9]* requests? served from it, [1-9][0-9]* replays? refused'
	sed -i '/^  quic_early_data = true;$/d' "$T_TMP/edge.conf"
	reload_conf || t_fail "$L: reload" "no reload line"

	# the anti-amplification limit (RFC 9000, 8.1): a client that never
	# answers (a first flight recorded, replayed from another port) gets
	# at most three times the bytes it sent, though big.test's chain
	# alone is more than that
	o0=$(edged_metric edge_quic_connections)
	/usr/bin/python3 "$TOOLS/udp_replay.py" relay "$P_RELAY" "$P_TLS" "$T_TMP/bigflight" 3 >"$T_TMP/relay.out" 2>&1 &
	rl=$!
	sleep 0.3
	timeout 30 gtlsclient --exit-on-all-streams-close --no-quic-dump --timeout=10s --sni=big.test \
		127.0.0.1 "$P_RELAY" "https://big.test:$P_TLS/amp" >"$T_TMP/h3.out" 2>&1
	wait "$rl"
	open_at_most "$o0" || t_fail "$L: the relayed connection closes"
	local sent chain got
	sent=$(sed -n 's/^recorded [0-9]* bytes \([0-9]*\)$/\1/p' "$T_TMP/relay.out")
	chain=$(($(grep -v -- ----- "$C/big-9.pem" | tr -d '\n' | wc -c) * 3 / 4))
	has "$L: big.test's chain ($chain bytes) is more than 3 times the client's first flight ($sent)" \
		"$((chain > 3 * ${sent:-100000}))" '^1$'
	/usr/bin/python3 "$TOOLS/udp_replay.py" replay "$P_TLS" "$T_TMP/bigflight" >"$T_TMP/replay.out" 2>&1
	got=$(sed -n 's/.* answered_bytes \([0-9]*\)$/\1/p' "$T_TMP/replay.out")
	has "$L: a client that never answers gets an answer ($got bytes)" "${got:-0}" '^[1-9][0-9]*$'
	has "$L: of at most 3 times what it sent" "$((${got:-0} <= 3 * ${sent:-0}))" '^1$'

	# Alt-Svc: on responses over TLS on TCP (HTTP/1.1 and HTTP/2), not
	# over HTTP/3 nor plain HTTP; off after a reload with
	# quic_advertise = false, back after one without
	has "$L: HTTPS over HTTP/1.1 advertises HTTP/3" \
		"$(curl -sk --http1.1 -o /dev/null -D - --resolve "shop.test:$P_TLS:127.0.0.1" "https://shop.test:$P_TLS/alt" | tr -d '\r' | tr '[:upper:]' '[:lower:]')" \
		"^alt-svc: h3=\":$P_TLS\"; ma=86400$"
	has "$L: and over HTTP/2" \
		"$(curl -sk --http2 -o /dev/null -D - --resolve "shop.test:$P_TLS:127.0.0.1" "https://shop.test:$P_TLS/alt" | tr -d '\r' | tr '[:upper:]' '[:lower:]')" \
		"^alt-svc: h3=\":$P_TLS\"; ma=86400$"
	h3 "$L: alt" /alt
	if grep -aqi 'alt-svc' "$T_TMP/h3.out"; then
		t_fail "$L: not over HTTP/3" "$(grep -ai alt-svc "$T_TMP/h3.out")"
	else
		t_ok "$L: not over HTTP/3"
	fi
	if curl -s -o /dev/null -D - -H 'Host: shop.test' "http://127.0.0.1:$P_EDGE/alt" | grep -qi '^alt-svc'; then
		t_fail "$L: nor over plain HTTP"
	else
		t_ok "$L: nor over plain HTTP"
	fi
	sed -i 's/^  quic_listen = \(.*\)$/  quic_listen = \1\n  quic_advertise = false;/' "$T_TMP/edge.conf"
	reload_conf || t_fail "$L: reload" "no reload line"
	if curl -sk -o /dev/null -D - --resolve "shop.test:$P_TLS:127.0.0.1" "https://shop.test:$P_TLS/alt" | grep -qi '^alt-svc'; then
		t_fail "$L: quic_advertise = false: no Alt-Svc"
	else
		t_ok "$L: quic_advertise = false: no Alt-Svc"
	fi
	sed -i '/^  quic_advertise = false;$/d' "$T_TMP/edge.conf"
	reload_conf || t_fail "$L: reload" "no reload line"
	has "$L: and back after a reload" \
		"$(curl -sk -o /dev/null -D - --resolve "shop.test:$P_TLS:127.0.0.1" "https://shop.test:$P_TLS/alt" | tr -d '\r' | tr '[:upper:]' '[:lower:]')" \
		"^alt-svc: h3="

	# a reload whose file drops quic_listen: the sockets stay until a
	# restart (said in the log), and their handshakes still find the
	# certificates
	cp "$T_TMP/edge.conf" "$T_TMP/edge.conf.keep"
	sed -i '/^  quic_listen = /d' "$T_TMP/edge.conf"
	reload_conf || t_fail "$L: reload without quic_listen" "no reload line"
	has "$L: the reload says tls.quic_listen needs a restart" "$(cat "$EDGED_LOG")" 'tls.quic_listen'
	h3 "$L: after the reload" /still
	eq "$L: HTTP/3 still served until the restart" "$STATUSES" "200x1"
	cp "$T_TMP/edge.conf.keep" "$T_TMP/edge.conf"
	reload_conf || t_fail "$L: reload back" "no reload line"

	# a certificate file replaced: edged reloads it (its log says so) and
	# the next QUIC handshake serves the new one (h3evil prints the
	# certificate's SHA-256)
	"$B/tools/h3evil" --port "$P_TLS" --sni shop.test --path /cert1 >"$T_TMP/evil.out" 2>&1
	eq "$L: QUIC serves the certificate of the file" \
		"$(sed -n 's/^cert_sha256=//p' "$T_TMP/evil.out")" "$(openssl x509 -in "$C/shop.pem" -outform der | sha256sum | cut -c1-64)"
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
		-subj "/CN=shop.test" -addext "subjectAltName=DNS:shop.test,DNS:none.test" \
		-keyout "$C/new.key" -out "$C/new.pem" >/dev/null 2>&1
	chmod 644 "$C/new.key"
	cp "$C/shop.pem" "$C/old.pem" && cp "$C/shop.key" "$C/old.key"
	n0=$(grep -c "a certificate file changed: reloaded" "$EDGED_LOG")
	mv "$C/new.key" "$C/shop.key" && mv "$C/new.pem" "$C/shop.pem"
	cert_reloaded "$n0" || t_fail "$L: the new certificate is read" "no log line"
	"$B/tools/h3evil" --port "$P_TLS" --sni shop.test --path /cert2 >"$T_TMP/evil.out" 2>&1
	eq "$L: after the file changed, QUIC serves the new certificate" \
		"$(sed -n 's/^cert_sha256=//p' "$T_TMP/evil.out")" "$(openssl x509 -in "$C/shop.pem" -outform der | sha256sum | cut -c1-64)"
	has "$L: and answers" "$(cat "$T_TMP/evil.out")" '^status=200 '
	n0=$(grep -c "a certificate file changed: reloaded" "$EDGED_LOG")
	mv "$C/old.key" "$C/shop.key" && mv "$C/old.pem" "$C/shop.pem"
	cert_reloaded "$n0" || t_fail "$L: the old certificate is read again" "no log line"

	# Retry under handshake load: 200 clients handshaking at once
	# (bench/http3's h3load, one GET each, then another connection) put
	# more than 64 handshakes under way on each worker: new clients are
	# asked to prove their address first, and every one is served
	n0=$(edged_metric edge_quic_retries_total)
	"$B/tools/h3load" --handshakes -c 200 -D 1 --authority shop.test "127.0.0.1:$P_TLS" >"$T_TMP/h3load.out" 2>&1
	has "$L: 200 clients at once: every handshake and request served" \
		"$(cat "$T_TMP/h3load.out")" '^h3load: requests=[1-9][0-9]* failed=0 non2xx=0 .* conn_errors=0 '
	has "$L: some after a Retry" "$(($(edged_metric edge_quic_retries_total) - n0))" '^[1-9][0-9]*$'

	# counted: in /metrics and edgectl status
	has "$L: connections in /metrics" "$(edged_metric edge_quic_connections_total)" '^[1-9][0-9]*$'
	has "$L: handshakes" "$(edged_metric 'edge_quic_handshakes_total{result="ok"}')" '^[1-9][0-9]*$'
	has "$L: streams" "$(edged_metric edge_quic_streams_total)" '^[1-9][0-9]+$'
	has "$L: garbage dropped, counted" "$(edged_metric 'edge_quic_datagrams_dropped_total{reason="undecodable"}')" '^[1-9][0-9]*$'
	has "$L: version negotiations counted" "$(edged_metric edge_quic_version_negotiations_total)" '^[1-9][0-9]*$'
	has "$L: stateless resets counted" "$(edged_metric edge_quic_stateless_resets_total)" '^[1-9][0-9]*$'
	has "$L: packets for no connection counted" "$(edged_metric 'edge_quic_datagrams_dropped_total{reason="unknown_connection"}')" '^[1-9][0-9]*$'
	has "$L: edgectl status says http3" \
		"$("$EDGECTL" --socket "$T_TMP/edged.sock" status 2>&1)" '^http3: +on 1 address, [1-9][0-9]* connections.*, [1-9][0-9]* packets? lost$'
	"$EDGECTL" --socket "$T_TMP/edged.sock" status --json >"$T_TMP/st.json" 2>&1
	has "$L: and --json its counts" \
		"$(/usr/bin/python3 -c 'import json,sys; q=json.load(open(sys.argv[1]))["daemon"]["status"]["quic"]; print(q["listen"], q["counts"]["streams"])' "$T_TMP/st.json" 2>&1)" "^\['127.0.0.1:$P_TLS'\] [1-9][0-9]+$"
	# by worker: the two workers' connections and streams add up to the
	# totals, in /metrics and --json alike
	eq "$L: connections by worker add up" \
		"$(($(edged_metric 'edge_quic_worker_connections_total{worker="0"}') + $(edged_metric 'edge_quic_worker_connections_total{worker="1"}')))" \
		"$(edged_metric edge_quic_connections_total)"
	eq "$L: streams by worker add up" \
		"$(($(edged_metric 'edge_quic_worker_streams_total{worker="0"}') + $(edged_metric 'edge_quic_worker_streams_total{worker="1"}')))" \
		"$(edged_metric edge_quic_streams_total)"
	has "$L: --json has both workers' counts" \
		"$(/usr/bin/python3 -c 'import json,sys; c=json.load(open(sys.argv[1]))["daemon"]["status"]["quic"]["counts"]; w=c["workers"]; print(len(w), sum(x["connections"] for x in w) == c["connections"], sum(x["packets_lost"] for x in w) == c["packets_lost"], sorted(w[0]))' "$T_TMP/st.json" 2>&1)" \
		"^2 True True \['connections', 'handshakes', 'open', 'packets_lost', 'retries', 'streams'\]$"
}

edged_backend "$P_BACK" /usr/bin/python3 "$TOOLS/echo_backend.py" "$P_BACK" "$T_TMP/backend.jsonl" ||
	t_fail "backend" "did not start"

if edged_start "$EDGED" "$T_TMP/edge.conf"; then
	run_suite "normal"
	# a drain while a stream is in flight (5 events 400 ms apart): the
	# stream finishes, then edged exits
	timeout 30 gtlsclient --exit-on-all-streams-close --no-quic-dump --timeout=10s \
		127.0.0.1 "$P_TLS" "https://shop.test:$P_TLS/sse/5/400" >"$T_TMP/drain.out" 2>&1 &
	CL=$!
	sleep 0.8
	edged_stop 20
	eq "normal: a drain ends edged cleanly" "$?" 0
	wait "$CL"
	eq "normal: the stream in flight at the drain got all its events" \
		"$(grep -ao 'data: event [0-9]' "$T_TMP/drain.out" | sort -u | wc -l)" 5
else
	t_fail "normal: edged starts" "$(tail -5 "$EDGED_LOG")"
fi

# without the steering program (edged not root: the kernel refuses it):
# a clear line at start, and HTTP/3 served by the kernel's hash
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
	NB=$(mktemp -d /tmp/edge-h3nobody.XXXXXX)
	t_cleanup_add "rm -rf '$NB'"
	chmod 777 "$NB"
	cp "$C/shop.pem" "$C/shop.key" "$C/big-9.pem" "$C/big.key" "$NB/"
	chmod 644 "$NB/shop.pem" "$NB/shop.key" "$NB/big-9.pem" "$NB/big.key"
	sed -e "s#$C/#$NB/#g" -e "s#$T_TMP/edged.sock#$NB/edged.sock#" \
		-e "s#$T_TMP/requests.jsonl#$NB/requests.jsonl#" \
		-e "s/^user = .*/user = \"nobody\";/" "$T_TMP/edge.conf" >"$NB/edge.conf"
	chmod 644 "$NB/edge.conf"
	printf '#!/bin/sh\nexec setpriv --reuid=nobody --regid=nogroup --clear-groups %s "$@"\n' \
		"$EDGED" >"$NB/run"
	chmod 755 "$NB/run"
	if edged_start "$NB/run" "$NB/edge.conf"; then
		has "nobody: the kernel refused the steering program: said at start" \
			"$(cat "$EDGED_LOG")" "tls.quic_listen 127.0.0.1:$P_TLS: no connection-ID steering \(loading edge_quic_steer: Operation not permitted\)"
		h3 "nobody: GET" /nobody
		eq "nobody: HTTP/3 served all the same" "$STATUSES" "200x1"
		edged_stop 10
	else
		t_fail "nobody: edged starts" "$(tail -5 "$EDGED_LOG")"
	fi
fi

# --check: a QUIC address another socket holds is named
/usr/bin/python3 -c '
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.1", int(sys.argv[1])))
time.sleep(30)' "$P_TLS" &
HOLD=$!
edged_track "$HOLD"
sleep 0.3
out=$("$EDGED" --check -c "$T_TMP/edge.conf" 2>&1)
has "--check names a QUIC address in use" "$out" "tls.quic_listen\[0\].*127.0.0.1:$P_TLS is in use"
kill "$HOLD" 2>/dev/null
wait "$HOLD" 2>/dev/null

if edged_asan; then
	if edged_start "$EDGED_ASAN" "$T_TMP/edge.conf"; then
		run_suite "asan"
		edged_stop 10
		edged_sanitizers_clean "asan: no sanitizer report" && t_ok "asan: no sanitizer report"
	else
		t_fail "asan: edged starts" "$(tail -5 "$EDGED_LOG")"
	fi
fi
t_exit
