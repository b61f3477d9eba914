#!/bin/bash
# test_edged_http2.sh - edged serving HTTP/2 clients, end to end: curl
# (--http2 over TLS by ALPN, --http2-prior-knowledge in cleartext),
# nghttp and h2load (nghttp2-client), and raw frames from Debian's
# python3-h2 (tests/tools/h2raw.py) for what a well-behaved client never
# sends: each smuggling shape and each known attack gets a stream reset or
# a GOAWAY, and the recording backend (tests/tools/echo_backend.py)
# receives nothing of it. The same requests over HTTP/1.1 and HTTP/2 get
# the same status, outcome and upstream headers. Runs against build/edged
# and build/asan/edged. Needs no root.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/lib_edged.sh
. "$(dirname "$0")/../lib_edged.sh"
edged_begin curl python3 openssl nghttp h2load
if ! /usr/bin/python3 -c 'import h2' 2>/dev/null; then
	t_skip "$(basename "$0")" "needs python3-h2"
	exit 77
fi
edged_need_build

BASE=$(edged_ports 6)
P_EDGE=$BASE
P_BACK=$((BASE + 1))
P_ADMIN=$((BASE + 2))
P_TLS=$((BASE + 3))
P_DOWN=$((BASE + 4)) # nothing listens here
P_SLOW=$((BASE + 5)) # a backend with small socket buffers
C="$T_TMP/certs"
mkdir -p "$C"
H2RAW=(/usr/bin/python3 "$TOOLS/h2raw.py" "$P_EDGE")

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
	-subj "/CN=shop.test" -addext "subjectAltName=DNS:shop.test,DNS:down.test,DNS:none.test" \
	-keyout "$C/shop.key" -out "$C/shop.pem" >/dev/null 2>&1

write_conf() { # [EXTRA_SETTINGS]
	{
		edged_conf_head "$P_ADMIN" "$T_TMP/edged.sock"
		cat <<CONF
${1:-}
analytics = { file = "$T_TMP/requests.jsonl"; };
limits = { max_body_bytes = "20M"; };
timeouts = {
  header = "2s";
  upstream_connect = "1s";
  upstream_response = "3s";
  drain = "5s";
};
tls = {
  listen = [ "127.0.0.1:$P_TLS" ];
  certificates = ( { cert = "$C/shop.pem"; key = "$C/shop.key"; } );
};
projects = (
  { id = "shop";
    environments = (
      { id = "shop-prod";
        domains = [ "shop.test" ];
        deployment = { id = "shop-1"; upstreams = [ "127.0.0.1:$P_BACK" ]; };
        routes = ( { prefix = "/small"; max_body_bytes = "1K"; } );
      },
      { id = "shop-down";
        domains = [ "down.test" ];
        deployment = { id = "down-1"; upstreams = [ "127.0.0.1:$P_DOWN" ]; };
      },
      { id = "shop-slow";
        domains = [ "slow.test" ];
        deployment = { id = "slow-1"; upstreams = [ "127.0.0.1:$P_SLOW" ]; };
      }
    );
  }
);
CONF
	} >"$T_TMP/edge.conf"
}

backend_count() { [ -f "$T_TMP/backend.jsonl" ] && wc -l <"$T_TMP/backend.jsonl" || echo 0; }

# h2get NAME URL [curl args]: curl over HTTP/2; sets CODE and VER, body in
# $T_TMP/body
h2get() {
	local name=$1 url=$2 out
	shift 2
	out=$(curl -s -m 10 -k -o "$T_TMP/body" -D "$T_TMP/hdrs" \
		-w '%{http_code} %{http_version}' --resolve "shop.test:$P_TLS:127.0.0.1" \
		--resolve "down.test:$P_TLS:127.0.0.1" --resolve "none.test:$P_TLS:127.0.0.1" "$@" "$url")
	CODE=${out% *}
	VER=${out#* }
	: "$name"
}

# raw CASE: play h2raw.py's CASE, its JSON in $T_TMP/raw.json
raw() {
	"${H2RAW[@]}" "$@" >"$T_TMP/raw.json" 2>"$T_TMP/raw.err"
}
rawf() { json_field "$T_TMP/raw.json" "$1"; }

# metric NAME: one value from /metrics
metric() {
	curl -s -m 5 "http://127.0.0.1:$P_ADMIN/metrics" | awk -v n="$1" '$1 == n { print $2 }'
}

# bytes_in TEXT: the bytes_in of the analytics record whose path holds
# TEXT (waiting up to 5 s for it), or nothing
bytes_in() {
	local i
	for ((i = 0; i < 100; i++)); do
		python3 -c 'import json, sys
for ln in open(sys.argv[1]):
    r = json.loads(ln)
    if sys.argv[2] in (r.get("path") or ""):
        print(r["bytes_in"])
        sys.exit(0)
sys.exit(1)' "$T_TMP/requests.jsonl" "$1" 2>/dev/null && return 0
		sleep 0.05
	done
}

# h2_open_zero MS: whether edge_http2_connections reads 0 within MS
# milliseconds (polled every 50 ms); H2_OPEN is its last value
h2_open_zero() {
	local i
	for ((i = 0; i <= $1 / 50; i++)); do
		H2_OPEN=$(metric edge_http2_connections)
		[ "$H2_OPEN" = 0 ] && return 0
		sleep 0.05
	done
	return 1
}

# refused NAME CASE [CODE]: CASE's stream 1 is reset (with CODE, default
# 1 = PROTOCOL_ERROR), nothing reached the backend, and the connection
# still serves a request after it
refused() {
	local name=$1 c=$2 code=${3:-1} n0
	n0=$(backend_count)
	raw "$c"
	if [ "$(rawf resets.1)" = "$code" ] && [ -z "$(rawf streams.1)" ] &&
		[ "$(backend_count)" = "$n0" ]; then
		t_ok "$name"
	else
		t_fail "$name" "$(cat "$T_TMP/raw.json" "$T_TMP/raw.err" | head -c 400); backend got $(($(backend_count) - n0))"
	fi
}

run_suite() { # BIN LABEL
	local bin=$1 v=$2 n0 rc i c code name g0 g1 p0 p1 f0 f1 bcl bch tr port
	: >"$T_TMP/requests.jsonl"
	write_conf ""
	if ! edged_start "$bin" "$T_TMP/edge.conf" -v; then
		t_fail "$v: edged starts" "$(tail -5 "$EDGED_LOG")"
		return
	fi
	t_ok "$v: edged starts"

	# ---- well-behaved clients ----------------------------------------
	h2get tls "https://shop.test:$P_TLS/h2tls?x=1" --http2
	if [ "$CODE" = 200 ] && [ "$VER" = 2 ] && grep -q '"path": "/h2tls?x=1"' "$T_TMP/body" &&
		grep -q '"X-Forwarded-Proto", "https"' "$T_TMP/body" &&
		grep -q '"Via", "2 [^"]* (edge)"' "$T_TMP/body" &&
		grep -qi '^x-request-id: ' "$T_TMP/hdrs"; then
		t_ok "$v: curl --http2 over TLS: ALPN h2, proxied, X-Forwarded-Proto https, Via 2, x-request-id"
	else
		t_fail "$v: curl --http2 over TLS" "$CODE $VER $(head -c 300 "$T_TMP/body")"
	fi
	h2get clear "http://shop.test:$P_EDGE/h2clear" --http2-prior-knowledge \
		--resolve "shop.test:$P_EDGE:127.0.0.1"
	if [ "$CODE" = 200 ] && [ "$VER" = 2 ] && grep -q '"X-Forwarded-Proto", "http"' "$T_TMP/body"; then
		t_ok "$v: curl --http2-prior-knowledge in cleartext"
	else
		t_fail "$v: curl --http2-prior-knowledge" "$CODE $VER $(head -c 300 "$T_TMP/body")"
	fi
	h2get h1 "https://shop.test:$P_TLS/h1tls" --http1.1
	if [ "$CODE" = 200 ] && [ "$VER" = 1.1 ] && grep -q '"Via", "1.1 [^"]* (edge)"' "$T_TMP/body"; then
		t_ok "$v: a client that offers only http/1.1 by ALPN is served HTTP/1.1 (Via 1.1)"
	else
		t_fail "$v: ALPN http/1.1" "$CODE $VER"
	fi
	# a body with a length, one without (stdin: DATA until END_STREAM,
	# chunked upstream), and a download
	head -c 300000 /dev/urandom >"$T_TMP/up.bin"
	sha=$(sha256sum <"$T_TMP/up.bin" | cut -d' ' -f1)
	h2get post "https://shop.test:$P_TLS/h2post" --http2 --data-binary "@$T_TMP/up.bin"
	if [ "$CODE" = 200 ] && grep -q "\"body_sha256\": \"$sha\"" "$T_TMP/body" &&
		grep -q '"Content-Length", "300000"' "$T_TMP/body"; then
		t_ok "$v: a 300 kB POST body over HTTP/2 arrives whole, with its Content-Length"
	else
		t_fail "$v: POST over HTTP/2" "$CODE $(head -c 300 "$T_TMP/body")"
	fi
	h2get stream "https://shop.test:$P_TLS/h2stream" --http2 -T - <"$T_TMP/up.bin"
	if [ "$CODE" = 200 ] && grep -q "\"body_sha256\": \"$sha\"" "$T_TMP/body" &&
		grep -q '"Transfer-Encoding", "chunked"' "$T_TMP/body"; then
		t_ok "$v: a body without content-length streams upstream chunked, whole"
	else
		t_fail "$v: body without length" "$CODE $(head -c 300 "$T_TMP/body")"
	fi
	h2get big "https://shop.test:$P_TLS/big/3000000" --http2
	if [ "$CODE" = 200 ] && [ "$(stat -c %s "$T_TMP/body")" = 3000000 ] &&
		grep -qi '^content-length: 3000000' "$T_TMP/hdrs"; then
		t_ok "$v: a 3 MB response over HTTP/2, its content-length kept"
	else
		t_fail "$v: download" "$CODE $(stat -c %s "$T_TMP/body")"
	fi
	h2get chunked "https://shop.test:$P_TLS/chunked/100000" --http2
	if [ "$CODE" = 200 ] && [ "$(stat -c %s "$T_TMP/body")" = 100000 ] &&
		! grep -qi '^transfer-encoding' "$T_TMP/hdrs"; then
		t_ok "$v: a chunked upstream body re-framed as DATA (no transfer-encoding)"
	else
		t_fail "$v: chunked response" "$CODE $(stat -c %s "$T_TMP/body") $(cat "$T_TMP/hdrs")"
	fi
	raw head
	if [ "$(rawf streams.1)" = 200 ] && [ -z "$(rawf bodies.1)" ] &&
		[ "$(rawf lengths.1)" = 5000 ]; then
		t_ok "$v: HEAD over HTTP/2: content-length 5000, no body"
	else
		t_fail "$v: HEAD" "$(cat "$T_TMP/raw.json")"
	fi
	h2get unknown "https://none.test:$P_TLS/" --http2
	if [ "$CODE" = 503 ] && grep -q '"error":"domain_not_found"' "$T_TMP/body"; then
		t_ok "$v: edge's own answer over HTTP/2: 503 domain_not_found with its JSON body"
	else
		t_fail "$v: unknown host" "$CODE $(head -c 200 "$T_TMP/body")"
	fi
	h2get down "https://down.test:$P_TLS/" --http2
	if [ "$CODE" = 502 ]; then
		t_ok "$v: an upstream failure is that stream's 502"
	else
		t_fail "$v: upstream down" "$CODE"
	fi
	# (nghttp: curl 7.88 reports an error for a response that comes
	# before it has sent its whole body)
	n0=$(backend_count)
	nghttp -v -H ':authority: shop.test' -d "$T_TMP/up.bin" \
		"https://127.0.0.1:$P_TLS/small" >"$T_TMP/nghttp.out" 2>&1
	if grep -q ':status: 413' "$T_TMP/nghttp.out" && grep -q '"error":"body_too_large"' "$T_TMP/nghttp.out" &&
		[ "$(backend_count)" = "$n0" ]; then
		t_ok "$v: 413 body_too_large over HTTP/2 before any upstream (RST_STREAM NO_ERROR after it)"
	else
		t_fail "$v: 413" "$(grep -E 'status|error' "$T_TMP/nghttp.out" | head -3)"
	fi
	# many streams on few connections
	if h2load -n 400 -c 2 -m 20 "https://127.0.0.1:$P_TLS/h2load" -H ':authority: shop.test' \
		>"$T_TMP/h2load.out" 2>&1 &&
		grep -q 'requests: 400 total, 400 started, 400 done, 400 succeeded' "$T_TMP/h2load.out" &&
		grep -q '^status codes: 400 2xx' "$T_TMP/h2load.out"; then
		t_ok "$v: h2load: 400 requests, 20 streams at once on each of 2 connections, all 2xx"
	else
		t_fail "$v: h2load" "$(grep -E 'requests:|status codes|error' "$T_TMP/h2load.out" | head -3)"
	fi
	if nghttp -n -m 10 "https://127.0.0.1:$P_TLS/nghttp" -H ':authority: shop.test' -s \
		>"$T_TMP/nghttp.out" 2>&1; then
		t_ok "$v: nghttp: 10 concurrent streams"
	else
		t_fail "$v: nghttp" "$(tail -3 "$T_TMP/nghttp.out")"
	fi
	# a TLS connection parked between its requests (its session and its
	# TLS state kept): tests/tools/h2raw.py's park case over TLS
	H2RAW_TLS=1 H2RAW_ADMIN=$P_ADMIN /usr/bin/python3 "$TOOLS/h2raw.py" "$P_TLS" park \
		shop.test "$v-tls" >"$T_TMP/raw.json" 2>"$T_TMP/raw.err"
	if h2_park_ok "$T_TMP/raw.json" "$v-tls" open; then
		t_ok "$v: over TLS, a connection parked between its requests (edge_connections_parked $(rawf parked)): HPACK table, windows and TLS state kept"
	else
		t_fail "$v: parked TLS connection" "$(head -c 600 "$T_TMP/raw.json") $(head -c 300 "$T_TMP/raw.err")"
	fi

	# an idle connection's nghttp2 session released and made again
	# between its requests (the client asked to empty its HPACK table
	# first), over TLS and in cleartext: h2raw.py's release case
	for tr in tls clear; do
		port=$P_EDGE
		[ "$tr" = tls ] && port=$P_TLS
		H2RAW_TLS=$([ "$tr" = tls ] && echo 1) H2RAW_ADMIN=$P_ADMIN \
			/usr/bin/python3 "$TOOLS/h2raw.py" "$port" release shop.test "$v-rel$tr" \
			>"$T_TMP/raw.json" 2>"$T_TMP/raw.err"
		if h2_release_ok "$T_TMP/raw.json" "$v-rel$tr"; then
			t_ok "$v: $tr: a connection whose session is released in each pause (after $(rawf released) s): x-park indexed, literal, indexed again (the client's HPACK table sizes $(rawf table_sizes)), a 300000-byte POST and a 200000-byte download through the windows, frames of closed streams ignored"
		else
			t_fail "$v: $tr: released session" "$(head -c 900 "$T_TMP/raw.json") $(head -c 300 "$T_TMP/raw.err")"
		fi
	done

	# what a released session made again still owes the client: the
	# table size update after its lowered SETTINGS_HEADER_TABLE_SIZE, and
	# the connection window its POSTs took (h2raw.py's release_state)
	H2RAW_ADMIN=$P_ADMIN "${H2RAW[@]}" release_state shop.test "$v-relstate" \
		>"$T_TMP/raw.json" 2>"$T_TMP/raw.err"
	if python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
sys.exit(0 if d["streams"] == {"3": 200, "5": 200, "7": 200} and
         len(d["released"]) == 3 and None not in d["released"] and
         "client_error" not in d and d["goaway"] is None and not d["resets"]
         else 1)' "$T_TMP/raw.json" 2>/dev/null; then
		t_ok "$v: released sessions made again: the HPACK table size update owed after a lowered HEADER_TABLE_SIZE sent, three 120000-byte POSTs through the connection window (released after $(rawf released) s)"
	else
		t_fail "$v: released session's debts" "$(head -c 600 "$T_TMP/raw.json") $(head -c 300 "$T_TMP/raw.err")"
	fi
	# a header block without the table size update the client owes after
	# acknowledging HEADER_TABLE_SIZE 0, sent to the released session
	H2RAW_ADMIN=$P_ADMIN "${H2RAW[@]}" release_no_update shop.test "$v" \
		>"$T_TMP/raw.json" 2>"$T_TMP/raw.err"
	if [ "$(rawf goaway)" = 9 ] && [ "$(rawf released)" != None ]; then
		t_ok "$v: a released session's client without the table size update it owes: COMPRESSION_ERROR, as before the release"
	else
		t_fail "$v: released session, no table size update" "$(head -c 600 "$T_TMP/raw.json") $(head -c 300 "$T_TMP/raw.err")"
	fi

	# the same client having paid that update in a header block on a
	# closed stream before the release: its request without one served
	H2RAW_ADMIN=$P_ADMIN "${H2RAW[@]}" release_update_paid shop.test "$v" \
		>"$T_TMP/raw.json" 2>"$T_TMP/raw.err"
	for ((i = 0; i < 40; i++)); do
		grep -q "/$v-relpaid-3" "$T_TMP/backend.jsonl" && break
		sleep 0.05
	done
	if [ "$(rawf goaway)" = None ] && [ "$(rawf released)" != None ] &&
		grep -q "/$v-relpaid-3" "$T_TMP/backend.jsonl"; then
		t_ok "$v: a released session's client that paid its table size update before the release: its next request, without one, served"
	else
		t_fail "$v: released session, update paid" "$(head -c 600 "$T_TMP/raw.json") $(head -c 300 "$T_TMP/raw.err")"
	fi

	# a client that pings every 150 ms after its session's release: made
	# again once, then kept (not made again at every PING)
	H2RAW_ADMIN=$P_ADMIN "${H2RAW[@]}" release_churn shop.test "$v" \
		>"$T_TMP/raw.json" 2>"$T_TMP/raw.err"
	if [ "$(rawf released)" = "[1, 0]" ] && [ "$(rawf renewed)" = 1 ] &&
		[ "$(rawf goaway)" = None ]; then
		t_ok "$v: a client that pings every 150 ms after its session's release: the session made again once and kept"
	else
		t_fail "$v: released session, PING churn" "$(head -c 600 "$T_TMP/raw.json") $(head -c 300 "$T_TMP/raw.err")"
	fi

	# ---- analytics ----------------------------------------------------
	if grep -q '"path":"/h2tls?x=1"' "$T_TMP/requests.jsonl" &&
		grep '"path":"/h2tls?x=1"' "$T_TMP/requests.jsonl" | grep -q '"http_version":"HTTP/2"'; then
		t_ok "$v: analytics: one record per stream, http_version HTTP/2"
	else
		t_fail "$v: analytics" "$(grep h2tls "$T_TMP/requests.jsonl" | head -c 300)"
	fi

	# bytes_in counts the client's DATA bytes, not edge's chunk framing:
	# the same body with a content-length and without one (200 frames,
	# chunked for the proxy) differs by the head's framing field alone
	# (Transfer-Encoding: chunked, 28 bytes, for content-length: 2000, 22)
	raw body_frames shop.test "$v-bytes"
	bcl=$(bytes_in "/$v-bytes-cl")
	bch=$(bytes_in "/$v-bytes-ch")
	if [ "$(rawf streams.1)" = 200 ] && [ "$(rawf streams.3)" = 200 ] &&
		[ "${bcl:-0}" -gt 2000 ] && [ "$((bch - bcl))" = 6 ]; then
		t_ok "$v: analytics bytes_in: the client's DATA bytes, not edge's chunk framing ($bcl with a content-length, $bch without)"
	else
		t_fail "$v: bytes_in" "with a content-length '$bcl', without '$bch' (6 more wanted); $(head -c 200 "$T_TMP/raw.json")"
	fi

	# window given back for the body bytes the proxy took, not for edge's
	# chunk framing of them: a client sending a body without a length in
	# small DATA frames to a backend reading slowly cannot make edged hold
	# ever more (a stream window over the proxy's high water, 128K, so
	# that each take is partial); then all of it arrives
	write_conf 'http2 = { initial_window_size = "128K"; };'
	if ! reload_conf; then
		t_fail "$v: reload for http2.initial_window_size 128K" "$(tail -3 "$EDGED_LOG")"
	fi
	raw overcredit slow.test "$v"
	if [ "$(rawf streams.1)" = 200 ] && grep -q "$(rawf sha256)" "$T_TMP/raw.json" &&
		grep -q 'body_len\\": 2000000' "$T_TMP/raw.json" &&
		[ "$(rawf init_window)" = 131072 ] && [ "$(rawf max_window)" -le 131072 ] 2>/dev/null &&
		[ "$(rawf held_growth)" -le 98304 ] 2>/dev/null &&
		[ "$(rawf held_max)" -le $((131072 + 524288)) ] 2>/dev/null; then
		t_ok "$v: a 2 MB body in 4-byte DATA frames to a backend reading 300 KB/s: edged holds no more as it goes (held at most $(rawf held_max) bytes, $(rawf held_growth) more in the drip's last second than in its first), the stream window never past 128K; all of it arrives"
	else
		t_fail "$v: window credit" "held $(rawf held) (growth $(rawf held_growth), max $(rawf held_max)), window max $(rawf max_window) of $(rawf init_window), status $(rawf streams.1); $(head -c 300 "$T_TMP/raw.err")"
	fi
	write_conf ""
	reload_conf

	# ---- what HTTP/2 forbids: a stream error, nothing upstream ------------
	refused "$v: a field value with CR LF: PROTOCOL_ERROR, nothing upstream" crlf_value
	refused "$v: a field value with NUL" nul_value
	refused "$v: an uppercase field name" uppercase_name
	refused "$v: connection" connection_header
	refused "$v: keep-alive" keep_alive
	refused "$v: proxy-connection" proxy_connection
	refused "$v: transfer-encoding" transfer_encoding
	refused "$v: upgrade" upgrade_header
	refused "$v: te other than trailers" te_gzip
	refused "$v: content-length longer than the DATA" cl_short
	refused "$v: content-length shorter than the DATA" cl_long
	refused "$v: :path missing" missing_path
	refused "$v: :method missing" missing_method
	refused "$v: a pseudo-header after a regular field" pseudo_after_regular
	refused "$v: an unknown pseudo-header" unknown_pseudo
	refused "$v: a repeated pseudo-header" repeated_pseudo
	raw trailers
	if [ "$(rawf streams.1)" = 200 ] && ! grep -qi 'x-smuggled\|6\.6\.6\.6' "$T_TMP/raw.json" &&
		grep -q 'body_len\\": 5' "$T_TMP/raw.json"; then
		t_ok "$v: trailers after a body: the body goes on, the trailer's fields never join the head (nor go to an HTTP/1.1 upstream)"
	else
		t_fail "$v: trailers" "$(head -c 400 "$T_TMP/raw.json")"
	fi
	raw te_trailers
	if [ "$(rawf streams.1)" = 200 ]; then
		t_ok "$v: te: trailers is allowed"
	else
		t_fail "$v: te: trailers" "$(cat "$T_TMP/raw.json")"
	fi
	n0=$(backend_count)
	raw host_mismatch
	if [ "$(rawf streams.1)" = 400 ] && [ "$(backend_count)" = "$n0" ]; then
		t_ok "$v: :authority and host that differ: 400, nothing upstream"
	else
		t_fail "$v: host mismatch" "$(cat "$T_TMP/raw.json")"
	fi
	raw host_only
	if [ "$(rawf streams.1)" = 200 ]; then
		t_ok "$v: host without :authority routes by host"
	else
		t_fail "$v: host only" "$(cat "$T_TMP/raw.json")"
	fi
	n0=$(backend_count)
	raw connect
	if [ "$(rawf streams.1)" = 405 ] && [ "$(backend_count)" = "$n0" ]; then
		t_ok "$v: CONNECT: 405"
	else
		t_fail "$v: CONNECT" "$(cat "$T_TMP/raw.json")"
	fi

	# ---- attacks --------------------------------------------------------
	n0=$(backend_count)
	raw hpack_bomb
	if [ -n "$(rawf resets.1)" ] && [ "$(backend_count)" = "$n0" ]; then
		t_ok "$v: a header list over max_header_list_size: stream reset, nothing upstream"
	else
		t_fail "$v: HPACK bomb" "$(cat "$T_TMP/raw.json")"
	fi
	raw many_streams
	if python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
ok = sum(1 for v in d["streams"].values() if v == 200)
refused = sum(1 for v in d["resets"].values() if v == 7)
sys.exit(0 if ok >= 128 and refused >= 1 and ok + refused == 200 else 1)' "$T_TMP/raw.json"; then
		t_ok "$v: 200 streams at once: 128 served, the rest REFUSED_STREAM"
	else
		t_fail "$v: too many streams" "$(head -c 300 "$T_TMP/raw.json")"
	fi
	raw reset_one
	if [ "$(rawf streams.3)" = 200 ]; then
		t_ok "$v: a stream the client resets leaves the connection's other streams alone"
	else
		t_fail "$v: reset one" "$(cat "$T_TMP/raw.json")"
	fi
	f0=$(metric 'edge_http2_refusals_total{reason="flood"}')
	raw rapid_reset
	f1=$(metric 'edge_http2_refusals_total{reason="flood"}')
	if { [ -n "$(rawf goaway)" ] || [ "$(rawf closed)" = True ]; } &&
		[ "$f1" -ge $((f0 + 1)) ] 2>/dev/null; then
		t_ok "$v: rapid reset (CVE-2023-44487): GOAWAY ($(rawf goaway)), refusals flood $f0 -> $f1"
	else
		t_fail "$v: rapid reset" "refusals flood $f0 -> $f1; $(head -c 300 "$T_TMP/raw.json")"
	fi
	# connection errors nghttp2 answers itself (its own GOAWAY, mem_recv
	# does not fail): counted as every other GOAWAY and connection end
	# DATA on a stream edged closed: ignored (no closed stream is kept),
	# the connection goes on
	raw data_closed_stream
	if [ "$(rawf goaway)" = None ] && [ "$(rawf streams.3)" = 200 ] && [ "$(rawf closed)" = False ]; then
		t_ok "$v: data_closed_stream: DATA on a closed stream ignored, stream 3 answered $(rawf streams.3) on the same connection"
	else
		t_fail "$v: data_closed_stream" "$(head -c 300 "$T_TMP/raw.json")"
	fi
	# DATA on a stream never opened: nghttp2's own GOAWAY, counted
	g0=$(metric 'edge_http2_goaways_total{direction="sent",reason="protocol_error"}')
	p0=$(metric 'edge_http2_refusals_total{reason="protocol_error"}')
	raw data_unknown_stream
	g1=$(metric 'edge_http2_goaways_total{direction="sent",reason="protocol_error"}')
	p1=$(metric 'edge_http2_refusals_total{reason="protocol_error"}')
	if [ "$(rawf goaway)" = 1 ] && [ "$g1" = $((g0 + 1)) ] && [ "$p1" = $((p0 + 1)) ]; then
		t_ok "$v: data_unknown_stream: GOAWAY protocol_error from nghttp2, counted (goaways sent protocol_error $g0 -> $g1, refusals protocol_error $p0 -> $p1)"
	else
		t_fail "$v: data_unknown_stream" "goaways sent protocol_error $g0 -> $g1, refusals protocol_error $p0 -> $p1; $(head -c 300 "$T_TMP/raw.json")"
	fi
	raw continuation_flood
	if [ -n "$(rawf goaway)" ] || [ "$(rawf closed)" = True ]; then
		t_ok "$v: CONTINUATION flood: GOAWAY ($(rawf goaway))"
	else
		t_fail "$v: CONTINUATION flood" "$(head -c 300 "$T_TMP/raw.json")"
	fi
	raw settings_flood
	if [ -n "$(rawf goaway)" ] || [ "$(rawf closed)" = True ]; then
		t_ok "$v: SETTINGS flood: GOAWAY or closed"
	else
		t_fail "$v: SETTINGS flood" "$(head -c 300 "$T_TMP/raw.json")"
	fi
	raw ping_flood
	if [ -n "$(rawf goaway)" ] || [ "$(rawf closed)" = True ]; then
		t_ok "$v: PING flood: GOAWAY or closed"
	else
		t_fail "$v: PING flood" "$(head -c 300 "$T_TMP/raw.json")"
	fi
	# ---- a client's end is seen at once ---------------------------------
	# a reset that comes with the client's last bytes (edge-triggered
	# reads: the short read of those bytes must not be taken for a
	# drained socket, no edge follows the reset); then h2load's streams
	# each answered at once (no route for its Host) and its close
	h2_open_zero 3000
	for i in 1 2 3 4; do
		raw reset_close
	done
	h2load -c 4 -m 64 -n 4000 -d /etc/services -H ':authority: none.test' \
		"http://127.0.0.1:$P_EDGE/" >"$T_TMP/h2load.out" 2>&1
	if grep -q '4000 done' "$T_TMP/h2load.out" && h2_open_zero 1000; then
		t_ok "$v: clients that reset or close: edge_http2_connections back to 0 within a second"
	else
		t_fail "$v: client's end seen" "edge_http2_connections $H2_OPEN a second after (timeouts.idle_keepalive not yet run out); $(grep -E 'requests:' "$T_TMP/h2load.out")"
	fi

	if [ "$(metric 'edge_http2_resets_total{direction="sent",reason="protocol_error"}')" -ge 16 ] 2>/dev/null &&
		[ -n "$(metric 'edge_http2_streams_total')" ]; then
		t_ok "$v: /metrics counts HTTP/2 streams and resets by reason"
	else
		t_fail "$v: metrics" "$(curl -s "http://127.0.0.1:$P_ADMIN/metrics" | grep http2 | head -5)"
	fi

	# edgectl status: the http2 line and object
	local st
	st=$("$EDGECTL" --socket "$T_TMP/edged.sock" status 2>&1)
	"$EDGECTL" --socket "$T_TMP/edged.sock" status --json >"$T_TMP/st.json" 2>&1
	if grep -Eq '^http2: +on \(TLS and cleartext\), [1-9][0-9]* connections \([0-9]+ open, [0-9]+ idle released\), [1-9][0-9]* streams, [1-9][0-9]* resets sent' <<<"$st" &&
		python3 -c 'import json, sys
h = json.load(open(sys.argv[1]))["daemon"]["status"]["http2"]
assert h["enabled"] and h["max_concurrent_streams"] == 128, h
assert h["counts"]["released"] >= 0, h
assert h["counts"]["resets"]["sent"]["refused_stream"] >= 1, h
assert h["counts"]["refusals"]["header_list_too_large"] >= 1, h' "$T_TMP/st.json"; then
		t_ok "$v: edgectl status: $(grep '^http2' <<<"$st" | tr -s ' '); --json too"
	else
		t_fail "$v: edgectl status: http2" "$(grep '^http2' <<<"$st"); $(head -c 300 "$T_TMP/st.json")"
	fi

	# still serving after all of it
	h2get after "https://shop.test:$P_TLS/after" --http2
	if [ "$CODE" = 200 ] && [ "$VER" = 2 ]; then
		t_ok "$v: still serving HTTP/2 after the attacks"
	else
		t_fail "$v: after" "$CODE $VER"
	fi
	edged_stop 10
	rc=$?
	if [ "$rc" = 0 ]; then
		t_ok "$v: edged exits cleanly"
	else
		t_fail "$v: edged exit" "status $rc: $(tail -3 "$EDGED_LOG")"
	fi
	edged_sanitizers_clean "$v: sanitizers"
}

edged_backend "$P_BACK" python3 "$TOOLS/echo_backend.py" "$P_BACK" "$T_TMP/backend.jsonl" ||
	t_fail "backend starts"
edged_backend "$P_SLOW" env ECHO_RCVBUF=4096 ECHO_MSS=1000 python3 "$TOOLS/echo_backend.py" \
	"$P_SLOW" "$T_TMP/slow.jsonl" slow || t_fail "slow backend starts"
run_suite "$EDGED" edged
if edged_asan; then
	run_suite "$EDGED_ASAN" asan
fi
t_exit
