#!/bin/bash
# test_edged_http.sh - edged as a plain HTTP/1.1 reverse proxy, end to end:
# a recording python backend (tests/tools/echo_backend.py), edged on
# 127.0.0.1 high ports with a generated configuration, curl and raw
# sockets (tests/tools/rawhttp.py) as clients. Runs every case against
# build/edged and again against build/asan/edged (sanitizers must stay
# silent). Needs no root.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/lib_edged.sh
. "$(dirname "$0")/../lib_edged.sh"
edged_begin curl python3

BASE=$(edged_ports 4)
P_EDGE=$BASE
P_BACK=$((BASE + 1))
P_DOWN=$((BASE + 2)) # nothing listens here
P_ADMIN=$((BASE + 3))

write_conf() { # FILE EXTRA_DOMAIN [EXTRA_SETTINGS]
	{
		edged_conf_head "$P_ADMIN" "$T_TMP/edged.sock"
		cat <<CONF
${3:-}
analytics = { file = "$T_TMP/requests.jsonl"; };
limits = { max_body_bytes = "20M"; };
timeouts = {
  header = "2s";
  upstream_connect = "1s";
  upstream_response = "1500ms";
  drain = "10s";
};
projects = (
  { id = "shop";
    ip_block = [ "127.0.0.2" ];
    environments = (
      { id = "shop-prod";
        domains = [ "shop.test", "*.preview.test" $2 ];
        deployment = { id = "shop-1"; upstreams = [ "127.0.0.1:$P_BACK" ]; };
        routes = (
          { prefix = "/fn"; strip_prefix = true; },
          { prefix = "/small"; max_body_bytes = "1K"; }
        );
      },
      { id = "shop-down";
        domains = [ "down.test" ];
        deployment = { id = "down-1"; upstreams = [ "127.0.0.1:$P_DOWN" ]; };
      },
      { id = "shop-loop";
        domains = [ "loop.test" ];
        deployment = { id = "loop-1"; upstreams = [ "127.0.0.1:$P_EDGE" ]; };
      }
    );
  },
  { id = "closed";
    ip_allow = [ "10.9.9.0/24" ];
    environments = ( { id = "closed-prod"; domains = [ "closed.test" ];
      deployment = { id = "c1"; upstreams = [ "127.0.0.1:$P_BACK" ]; }; } );
  },
  { id = "off"; enabled = false;
    environments = ( { id = "off-prod"; domains = [ "off.test" ];
      deployment = { id = "o1"; upstreams = [ "127.0.0.1:$P_BACK" ]; }; } );
  }
);
CONF
	} >"$1"
}

backend_count() { [ -f "$T_TMP/backend.jsonl" ] && wc -l <"$T_TMP/backend.jsonl" || echo 0; }

# get NAME EXPECTED_STATUS HOST PATH [curl args...]: one request, body in $T_TMP/body
get() {
	local name=$1 want=$2 host=$3 path=$4 code
	shift 4
	code=$(curl -s -m 10 -o "$T_TMP/body" -D "$T_TMP/hdrs" -w '%{http_code}' \
		-H "Host: $host" "$@" "http://127.0.0.1:$P_EDGE$path")
	if [ "$code" = "$want" ]; then
		return 0
	fi
	t_fail "$name" "status $code, wanted $want: $(head -c 200 "$T_TMP/body")"
	return 1
}

body_has() { grep -q -- "$1" "$T_TMP/body"; }
# body_lacks TEXT: the body has no TEXT, as written (an address's dots are
# not "any character": a random request id may hold 6a6b6c6)
body_lacks() { ! grep -qF -- "$1" "$T_TMP/body"; }

# xff_is WANT [curl args...]: 0 once a GET to shop.test reaches the
# backend with the X-Forwarded-For value WANT ("" for none; up to 5 s,
# so that a reload has reached every worker), else 1 with what it saw
# in $T_TMP/xff.
xff_is() {
	local want=$1 i
	shift
	for ((i = 0; i < 50; i++)); do
		curl -s -m 5 -H 'Host: shop.test' "$@" "http://127.0.0.1:$P_EDGE/xff" |
			python3 -c 'import json, sys
h = json.load(sys.stdin)["headers"]
print(", ".join(v for k, v in h if k.lower() == "x-forwarded-for"))' >"$T_TMP/xff" 2>&1
		[ "$(cat "$T_TMP/xff")" = "$want" ] && return 0
		sleep 0.1
	done
	return 1
}

# hup_wait PATTERN: SIGHUP edged, then wait (10 s at most) until its log
# has one more line matching the extended regular expression PATTERN
# than before (a fixed sleep lost the race on a busy machine)
hup_wait() {
	local n i
	n=$(grep -Ec -- "$1" "$EDGED_LOG")
	kill -HUP "$EPID"
	for ((i = 0; i < 200; i++)); do
		[ "$(grep -Ec -- "$1" "$EDGED_LOG")" -gt "$n" ] && return 0
		sleep 0.05
	done
	return 1
}

run_suite() { # BIN LABEL
	local bin=$1 v=$2 n0 n1 id sha rc
	: >"$T_TMP/requests.jsonl"
	write_conf "$T_TMP/edge.conf" ""
	if ! edged_start "$bin" "$T_TMP/edge.conf" -v; then
		t_fail "$v: edged starts" "$(tail -5 "$EDGED_LOG")"
		return
	fi
	t_ok "$v: edged starts"
	# an upstream that is edged itself: the request comes back with
	# edged's Via and is refused there, instead of taking a connection
	# per round until none is left
	if get "$v: routing loop" 508 loop.test /l &&
		grep -q '"error":"loop_detected"' "$T_TMP/body" &&
		[ "$(curl -s -m 5 "http://127.0.0.1:$P_ADMIN/metrics" |
			awk '$1 == "edge_requests_total{outcome=\"loop_detected\"}" { print $2 }')" = 1 ]; then
		t_ok "$v: an upstream that leads back to edged: 508 loop_detected at the second visit"
	else
		t_fail "$v: routing loop" "$(head -c 200 "$T_TMP/body")"
	fi

	if get "$v: proxied GET" 200 shop.test "/hello?x=1" \
		-H 'X-Project-ID: spoofed' -H 'X-Client-IP: 6.6.6.6' \
		-H 'X-Forwarded-For: 1.2.3.4' -H 'X-Request-ID: my-id.1' \
		-H 'X-Real-IP: 1.2.3.4' -H 'Forwarded: for=1.2.3.4' \
		-H 'True-Client-IP: 1.2.3.4' -H 'Client-IP: 1.2.3.4' \
		-H 'X-Cluster-Client-IP: 1.2.3.4' -H 'X_Forwarded_For: 1.2.3.4' \
		-H 'x_client_ip: 1.2.3.4' -H 'X_Real_IP: 1.2.3.4' &&
		body_has '"path": "/hello?x=1"' &&
		body_has '\["X-Project-ID", "shop"\]' &&
		body_has '\["X-Environment-ID", "shop-prod"\]' &&
		body_has '\["X-Deployment-ID", "shop-1"\]' &&
		body_has '\["X-Client-IP", "127.0.0.1"\]' &&
		body_has '\["X-Forwarded-For", "127.0.0.1"\]' &&
		body_has '\["X-Forwarded-Proto", "http"\]' &&
		body_has '\["X-Forwarded-Host", "shop.test"\]' &&
		body_has '\["X-Request-ID", "my-id.1"\]' &&
		! body_has spoofed && body_lacks 6.6.6.6 && body_lacks 1.2.3.4 &&
		grep -qi '^X-Request-ID: my-id.1' "$T_TMP/hdrs"; then
		t_ok "$v: proxied GET, edge headers added, spoofed copies removed (X-Forwarded-For replaced, X-Real-IP, Forwarded, True-Client-IP, Client-IP, X-Cluster-Client-IP and underscore spellings dropped: no trusted_proxies)"
	else
		t_fail "$v: proxied GET, edge headers" "$(head -c 600 "$T_TMP/body")"
	fi

	# trusted_proxies: a peer inside it has its X-Forwarded-For kept and
	# appended to (from the right up to the first element that is not
	# an address); any other peer's is replaced by its address
	write_conf "$T_TMP/edge.conf" "" 'trusted_proxies = [ "192.0.2.0/24", "127.0.0.1" ];'
	if reload_conf && xff_is "1.2.3.4, 127.0.0.1" -H 'X-Forwarded-For: 1.2.3.4'; then
		t_ok "$v: a peer in trusted_proxies (reloaded): X-Forwarded-For kept and appended to"
	else
		t_fail "$v: trusted peer's X-Forwarded-For" "saw '$(cat "$T_TMP/xff")'"
	fi
	if xff_is "1.2.3.4, 2001:db8::5, 127.0.0.1" -H 'X-Forwarded-For: 6.6.6.6, <evil>, 1.2.3.4:80' \
		-H 'X-Forwarded-For: [2001:DB8::5]'; then
		t_ok "$v: a trusted peer's X-Forwarded-For is cut at its last element that is not an address"
	else
		t_fail "$v: trusted peer's malformed X-Forwarded-For" "saw '$(cat "$T_TMP/xff")'"
	fi
	# its other address fields go on too; underscore spellings never do
	if get "$v: trusted peer's address fields" 200 shop.test /addr \
		-H 'X-Real-IP: 1.2.3.4' -H 'Forwarded: for=1.2.3.5' \
		-H 'X_Real_IP: 6.6.6.6' -H 'X_Forwarded_For: 6.6.6.6' &&
		body_has '\["X-Real-IP", "1.2.3.4"\]' &&
		body_has '\["Forwarded", "for=1.2.3.5"\]' && body_lacks 6.6.6.6; then
		t_ok "$v: a trusted peer's X-Real-IP and Forwarded go on, underscore spellings do not"
	else
		t_fail "$v: trusted peer's address fields" "$(head -c 600 "$T_TMP/body")"
	fi
	if xff_is "127.0.0.1" -H 'X-Forwarded-For: 1.2.3.4, unknown'; then
		t_ok "$v: a trusted peer's X-Forwarded-For ending in garbage is not believed at all"
	else
		t_fail "$v: trusted peer's X-Forwarded-For ending in garbage" "saw '$(cat "$T_TMP/xff")'"
	fi
	if curl -s -m 5 -o /dev/null --interface 127.0.0.3 "http://127.0.0.1:$P_EDGE/" 2>/dev/null; then
		if xff_is "127.0.0.3" --interface 127.0.0.3 -H 'X-Forwarded-For: 1.2.3.4' \
			-H 'X-Real-IP: 1.2.3.4' -H 'Forwarded: for=1.2.3.4' &&
			get "$v: untrusted peer's address fields" 200 shop.test /addr \
				--interface 127.0.0.3 -H 'X-Real-IP: 1.2.3.4' \
				-H 'Forwarded: for=1.2.3.4' && body_lacks 1.2.3.4; then
			t_ok "$v: a peer outside trusted_proxies: X-Forwarded-For replaced by its address, X-Real-IP and Forwarded dropped"
		else
			t_fail "$v: untrusted peer's X-Forwarded-For" "saw '$(cat "$T_TMP/xff")'"
		fi
	else
		t_skip "$v: untrusted peer beside a trusted one" "could not bind 127.0.0.3"
	fi
	write_conf "$T_TMP/edge.conf" ""
	if reload_conf && xff_is "127.0.0.1" -H 'X-Forwarded-For: 1.2.3.4'; then
		t_ok "$v: trusted_proxies removed by a reload: X-Forwarded-For replaced again"
	else
		t_fail "$v: trusted_proxies removed" "saw '$(cat "$T_TMP/xff")'"
	fi

	if get "$v: unknown host" 503 nowhere.test / &&
		id=$(grep -i '^X-Request-ID:' "$T_TMP/hdrs" | tr -d '\r' | cut -d' ' -f2) &&
		body_has '"error":"domain_not_found"' && body_has "\"request_id\":\"$id\""; then
		t_ok "$v: unknown host -> 503 domain_not_found with the request id"
	else
		t_fail "$v: unknown host JSON" "$(cat "$T_TMP/body")"
	fi
	get "$v: disabled project" 403 off.test / && body_has project_disabled &&
		t_ok "$v: disabled project -> 403 project_disabled"
	get "$v: ip allow list" 403 closed.test / && body_has ip_denied &&
		t_ok "$v: address outside the allow list -> 403 ip_denied"
	code=$(curl -s -m 5 -o /dev/null -w '%{http_code}' --interface 127.0.0.2 \
		-H 'Host: shop.test' "http://127.0.0.1:$P_EDGE/" 2>/dev/null)
	if [ "$code" = 403 ]; then
		t_ok "$v: blocked address -> 403 ip_denied"
	else
		t_skip "$v: blocked address" "could not bind 127.0.0.2 (status $code)"
	fi
	get "$v: wildcard" 200 pr-7.preview.test /w && body_has '"path": "/w"' &&
		t_ok "$v: wildcard domain routed"
	get "$v: wildcard depth" 503 a.b.preview.test / &&
		t_ok "$v: wildcard matches one label only"
	get "$v: prefix strip" 200 shop.test "/fn/resize/x.png?s=2" &&
		body_has '"path": "/resize/x.png?s=2"' &&
		t_ok "$v: path prefix stripped"
	get "$v: prefix boundary" 200 shop.test "/fnx" && body_has '"path": "/fnx"' &&
		t_ok "$v: prefix matches on a segment boundary only"

	head -c $((10 * 1024 * 1024)) /dev/urandom >"$T_TMP/big.bin"
	sha=$(sha256sum "$T_TMP/big.bin" | cut -d' ' -f1)
	get "$v: POST CL" 200 shop.test /upload --data-binary "@$T_TMP/big.bin" &&
		body_has "\"body_len\": 10485760" && body_has "$sha" &&
		t_ok "$v: 10 MiB POST with Content-Length arrives intact"
	get "$v: POST chunked" 200 shop.test /upload -H 'Transfer-Encoding: chunked' \
		--data-binary "@$T_TMP/big.bin" &&
		body_has "\"body_len\": 10485760" && body_has "$sha" &&
		t_ok "$v: 10 MiB chunked POST arrives intact (re-chunked)"
	sha=$(curl -s -m 20 -H 'Host: shop.test' "http://127.0.0.1:$P_EDGE/chunked/5000000" | sha256sum | cut -d' ' -f1)
	if [ "$sha" = "$(head -c 5000000 /dev/zero | tr '\0' x | sha256sum | cut -d' ' -f1)" ]; then
		t_ok "$v: chunked response relayed"
	else
		t_fail "$v: chunked response relayed"
	fi
	get "$v: body limit" 413 shop.test /small/x --data-binary "@$T_TMP/big.bin" &&
		body_has body_too_large && t_ok "$v: Content-Length over the route limit -> 413"
	get "$v: HEAD" 200 shop.test /h -I && [ ! -s "$T_TMP/body" ] &&
		grep -qi '^Content-Length: [1-9]' "$T_TMP/hdrs" &&
		t_ok "$v: HEAD answered without a body"

	# keep-alive: two requests on one client connection
	out=$(curl -s -m 10 -o /dev/null -o /dev/null -w '%{num_connects} ' \
		-H 'Host: shop.test' \
		"http://127.0.0.1:$P_EDGE/k1" "http://127.0.0.1:$P_EDGE/k2")
	if [ "$out" = "1 0 " ]; then
		t_ok "$v: keep-alive: two requests on one connection"
	else
		t_fail "$v: keep-alive" "connects: $out"
	fi
	printf 'GET /p1 HTTP/1.1\r\nHost: shop.test\r\n\r\nGET /p2 HTTP/1.1\r\nHost: shop.test\r\nConnection: close\r\n\r\n' |
		python3 "$TOOLS/rawhttp.py" "$P_EDGE" >"$T_TMP/body"
	if [ "$(grep -ac 'HTTP/1.1 200' "$T_TMP/body")" = 2 ] &&
		body_has '"path": "/p1"' && body_has '"path": "/p2"'; then
		t_ok "$v: pipelined requests answered in order"
	else
		t_fail "$v: pipelining" "$(head -c 300 "$T_TMP/body")"
	fi
	# upstream keep-alive: six sequential requests over two workers need
	# at most two upstream connections when pooled ones are reused
	for i in 1 2 3 4 5 6; do
		curl -s -m 5 -H 'Host: shop.test' "http://127.0.0.1:$P_EDGE/r$i" |
			grep -o '"peer_port": [0-9]*'
	done >"$T_TMP/ports"
	if [ "$(wc -l <"$T_TMP/ports")" = 6 ] &&
		[ "$(sort -u "$T_TMP/ports" | wc -l)" -le 2 ]; then
		t_ok "$v: upstream connections reused from the pool"
	else
		t_fail "$v: upstream reuse" "$(sort -u "$T_TMP/ports" | tr '\n' ' ')"
	fi

	get "$v: backend down" 502 down.test / && body_has upstream_unavailable &&
		t_ok "$v: backend down -> 502 upstream_unavailable"
	get "$v: backend hangs" 504 shop.test /hang && body_has upstream_timeout &&
		t_ok "$v: backend never answers -> 504 upstream_timeout"

	# malformed and smuggling requests: 400, closed, nothing upstream
	local cases=(
		'POST /s HTTP/1.1\r\nHost: shop.test\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n'
		'POST /s HTTP/1.1\r\nHost: shop.test\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello'
		'POST /s HTTP/1.1\r\nHost: shop.test\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n'
		'GET /s HTTP/1.1\r\nHost: shop.test\r\nX: a\r\n b\r\n\r\n'
		'GET /s HTTP/1.1\r\nHost: shop.test\r\nHost: other.test\r\n\r\n'
		'GET /s HTTP/1.1\nHost: shop.test\n\n'
		'GET /s HTTP/1.1\r\nHost : shop.test\r\n\r\n'
	)
	local c i=0 bad=""
	for c in "${cases[@]}"; do
		i=$((i + 1))
		n0=$(backend_count)
		# shellcheck disable=SC2059
		printf "$c" | python3 "$TOOLS/rawhttp.py" "$P_EDGE" >"$T_TMP/body"
		rc=$?
		n1=$(backend_count)
		if ! head -1 "$T_TMP/body" | grep -q '^HTTP/1.1 400' || [ $rc -ne 0 ] ||
			[ "$n0" != "$n1" ]; then
			bad="$bad #$i($(head -1 "$T_TMP/body" | tr -d '\r'), rc $rc, upstream $n0->$n1)"
		fi
	done
	if [ -z "$bad" ]; then
		t_ok "$v: ${#cases[@]} malformed/smuggling requests -> 400, closed, not forwarded"
	else
		t_fail "$v: malformed requests" "$bad"
	fi
	n0=$(backend_count)
	printf 'POST /s HTTP/1.1\r\nHost: shop.test\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n' |
		python3 "$TOOLS/rawhttp.py" "$P_EDGE" >"$T_TMP/body"
	rc=$?
	sleep 0.2
	if head -1 "$T_TMP/body" | grep -q '^HTTP/1.1 400' && [ $rc -eq 0 ] &&
		[ "$n0" = "$(backend_count)" ]; then
		t_ok "$v: invalid chunk size -> 400, closed, no request completed upstream"
	else
		t_fail "$v: invalid chunk size" "$(head -1 "$T_TMP/body") rc $rc"
	fi
	printf 'GET /slow HTTP/1.1\r\nHost: shop' | python3 "$TOOLS/rawhttp.py" "$P_EDGE" --wait 5 >"$T_TMP/body"
	if head -1 "$T_TMP/body" | grep -q '^HTTP/1.1 408'; then
		t_ok "$v: incomplete head -> 408 after timeouts.header"
	else
		t_fail "$v: header timeout" "$(head -1 "$T_TMP/body")"
	fi

	# parking: a keep-alive connection idle past CONN_PARK_MS (100 ms)
	# loses its buffers and gets them back with its next request; a
	# connection that never sends a byte is closed after timeouts.header
	local said
	said=$(grep -c "conn: closed at its timeout: no first request in the 2000 ms parked" "$EDGED_LOG")
	if python3 - "$P_EDGE" "$P_ADMIN" <<'PY'; then
import socket, sys, time, urllib.request
def parked():
    m = urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[2], timeout=5).read().decode()
    return int([l for l in m.splitlines() if l.startswith("edge_connections_parked ")][0].split()[1])
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), 5)
s.settimeout(5)
codes, seen = [], []
for i in range(3):
    s.sendall(b"GET /park%d HTTP/1.1\r\nHost: shop.test\r\n\r\n" % i)
    buf = b""
    while b"\r\n\r\n" not in buf:
        buf += s.recv(65536)
    head, _, body = buf.partition(b"\r\n\r\n")
    n = int([l for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")][0].split(b":")[1])
    while len(body) < n:
        body += s.recv(65536)
    codes.append(head.split(b" ")[1])
    time.sleep(0.4)
    seen.append(parked())
quiet = socket.create_connection(("127.0.0.1", int(sys.argv[1])), 5)
quiet.settimeout(6)
t0 = time.monotonic()
closed = quiet.recv(1) == b""
took = time.monotonic() - t0
print(codes, seen, closed, round(took, 2), file=sys.stderr)
sys.exit(0 if codes == [b"200"] * 3 and min(seen) >= 1 and closed and
         1.5 < took < 4 else 1)
PY
		for ((rc = 0; rc < 40; rc++)); do
			[ "$(grep -c "conn: closed at its timeout: no first request in the 2000 ms parked" "$EDGED_LOG")" -gt "$said" ] && break
			sleep 0.05
		done
		if [ "$rc" -lt 40 ]; then
			t_ok "$v: parked keep-alive connection serves again; a silent one closes after timeouts.header, said at debug level"
		else
			t_fail "$v: parking" "no 'conn: closed at its timeout: no first request in the 2000 ms parked' in the log"
		fi
	else
		t_fail "$v: parking" "see above"
	fi

	# SIGHUP: a new domain becomes routable; a bad config is refused
	get "$v: before reload" 503 new.test / >/dev/null
	write_conf "$T_TMP/edge.conf" ', "new.test"'
	hup_wait 'reloaded .*generation'
	get "$v: SIGHUP reload" 200 new.test /n && t_ok "$v: SIGHUP routes the new domain"
	if grep -q 'changed' "$EDGED_LOG"; then
		t_fail "$v: a routes-only reload names no start-only setting" "$(grep changed "$EDGED_LOG")"
	else
		t_ok "$v: a routes-only reload names no start-only setting"
	fi
	# limits and timeouts apply to what comes after the reload: a 3 KB
	# head passes, then gets 431 under max_header_bytes = 2K; a silent
	# connection closes after the new timeouts.header (1 s, was 2 s)
	get "$v: 3 KB head before reload" 200 new.test /n -H "X-Big: $(head -c 3000 /dev/zero | tr '\0' a)"
	write_conf "$T_TMP/edge.conf" ', "new.test"'
	sed -i 's/header = "2s";/header = "1s";/; s/max_body_bytes = "20M";/max_body_bytes = "20M"; max_header_bytes = "2K";/' "$T_TMP/edge.conf"
	hup_wait 'reloaded .*generation'
	if get "$v: 3 KB head after reload" 431 new.test /n -H "X-Big: $(head -c 3000 /dev/zero | tr '\0' a)" &&
		get "$v: small head after reload" 200 new.test /n; then
		t_ok "$v: SIGHUP applies a new limits.max_header_bytes"
	fi
	if python3 - "$P_EDGE" <<'PY'; then
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), 5)
s.settimeout(5)
t0 = time.monotonic()
closed = s.recv(1) == b""
took = time.monotonic() - t0
print("silent connection closed", closed, "after", round(took, 2), file=sys.stderr)
sys.exit(0 if closed and 0.7 < took < 1.7 else 1)
PY
		t_ok "$v: SIGHUP applies a new timeouts.header"
	else
		t_fail "$v: timeouts.header after SIGHUP" "see above"
	fi
	if grep -q 'changed' "$EDGED_LOG"; then
		t_fail "$v: limits and timeouts are not start-only" "$(grep changed "$EDGED_LOG")"
	else
		t_ok "$v: a reload of limits and timeouts names no start-only setting"
	fi
	# start-only settings changed: reloaded, and the log says they wait
	# (the control plane too: pg is connected once, at start)
	sed -i 's/^workers = .*/workers = 3;/' "$T_TMP/edge.conf"
	printf 'pg = "host=127.0.0.1 port=1 dbname=edge";\nhost_name = "elsewhere";\n' >>"$T_TMP/edge.conf"
	kill -HUP "$EPID"
	if edged_wait_log 'changed workers, pg, host_name: these apply at the next start' &&
		get "$v: reload with new workers" 200 new.test /n; then
		t_ok "$v: SIGHUP says a changed workers, pg and host_name apply at the next start"
	else
		t_fail "$v: start-only change on SIGHUP" "$(tail -3 "$EDGED_LOG")"
	fi
	echo 'projects = ( { id = 1; } );' >"$T_TMP/edge.conf"
	hup_wait 'reload refused'
	if get "$v: bad reload" 200 new.test /n && kill -0 "$EPID" &&
		grep -q 'reload refused' "$EDGED_LOG"; then
		t_ok "$v: a bad config on SIGHUP is refused, the old one keeps serving"
	fi

	# SIGTERM drains: an in-flight slow request completes, then exit 0
	curl -s -m 10 -o "$T_TMP/slow" -w '%{http_code}' -H 'Host: shop.test' \
		"http://127.0.0.1:$P_EDGE/slow/1000" >"$T_TMP/slowcode" &
	local cpid=$!
	sleep 0.3
	kill -TERM "$EPID"
	wait "$cpid"
	wait "$EPID"
	rc=$?
	if [ "$(cat "$T_TMP/slowcode")" = 200 ] && [ $rc -eq 0 ]; then
		t_ok "$v: SIGTERM lets the in-flight request finish, exits 0"
	else
		t_fail "$v: SIGTERM drain" "client $(cat "$T_TMP/slowcode"), exit $rc: $(tail -3 "$EDGED_LOG")"
	fi
	edged_sanitizers_clean "$v: sanitizers clean" && t_ok "$v: no sanitizer report"

	# analytics: one JSON line per request, all valid
	if python3 - "$T_TMP/requests.jsonl" <<'PY'; then
import json, sys
lines = open(sys.argv[1]).read().splitlines()
ev = [json.loads(l) for l in lines]
# the routing loop's two visits share the id edged sent itself
ids = [e["request_id"] for e in ev if e["host"] != "loop.test"]
assert len(ids) == len(set(ids)), "duplicate request ids"
need = {"domain_not_found", "project_disabled", "ip_denied", "ok",
        "upstream_unavailable", "upstream_timeout", "bad_request",
        "body_too_large", "header_timeout"}
seen = {e["outcome"] for e in ev}
assert need <= seen, "missing outcomes: %s" % (need - seen)
ok = [e for e in ev if e["outcome"] == "ok"]
assert all(e["project_id"] == "shop" or e["host"] == "new.test" for e in ok)
assert any(e["path"] == "/hello?x=1" and e["method"] == "GET"
           and e["host"] == "shop.test" and e["status"] == 200 for e in ev)
assert len(ev) >= 30, len(ev)
PY
		t_ok "$v: one valid analytics line per request"
	else
		t_fail "$v: analytics" "$(tail -c 300 "$T_TMP/requests.jsonl")"
	fi
}

edged_need_build
edged_backend "$P_BACK" python3 "$TOOLS/echo_backend.py" "$P_BACK" "$T_TMP/backend.jsonl" ||
	t_fail "backend starts"

write_conf "$T_TMP/check.conf" ""
sed -i 's/^workers = 2;/workers = 0;/' "$T_TMP/check.conf"
out=$("$EDGED" --check -c "$T_TMP/check.conf" 2>&1)
rc=$?
if [ $rc -eq 1 ] && echo "$out" | grep -q "check.conf:[0-9]*: workers"; then
	t_ok "edged --check: a bad config prints FILE:LINE: KEY and exits 1"
else
	t_fail "edged --check bad config" "rc $rc: $out"
fi
write_conf "$T_TMP/check.conf" ""
t_check "edged --check: a good config exits 0" "$EDGED" --check -c "$T_TMP/check.conf"
# the version and the commit it was built from (git describe, or unknown),
# then the libraries' versions; -V the same
if out=$("$EDGED" --version 2>&1) && [[ "${out%%$'\n'*}" =~ ^edged\ [0-9]+\.[0-9]+\.[0-9]+\ \(commit\ [A-Za-z0-9._-]+\)$ ]] &&
	grep -Eq '^openssl +[0-9]' <<<"$out" && grep -Eq '^gnutls +[0-9]' <<<"$out" &&
	grep -Eq '^ngtcp2 +[0-9]' <<<"$out" && [ "$("$EDGED" -V 2>&1)" = "$out" ]; then
	t_ok "edged --version and -V name the commit and the libraries: ${out%%$'\n'*}"
else
	t_fail "edged --version" "$out"
fi

run_suite "$EDGED" edged
edged_asan && run_suite "$EDGED_ASAN" asan
t_exit
