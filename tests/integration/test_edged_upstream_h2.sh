#!/bin/bash
# test_edged_upstream_h2.sh - HTTP/2 to upstreams: python3-h2 backends
# (tests/tools/h2_backend.py) behind h2c:// and https:// endpoints.
# GET and a 1 MiB POST from an HTTP/1.1 client and from an HTTP/2 one
# (curl), translated both ways (Host as :authority, the body unframed,
# a response without content-length chunked to the HTTP/1.1 client);
# 100 concurrent requests over connections that never carry more than
# the backend's SETTINGS_MAX_CONCURRENT_STREAMS (10) at once, not even
# a new one before the backend's SETTINGS came (it sends them late); a
# backend that sends GOAWAY mid-load: every request answered, no POST
# processed twice; a stream reset before its answer, and a connection
# that dies under a POST: 502, the POST not repeated; https:// whose ALPN
# chooses h2 (over TLS, verified), and one whose ALPN chooses http/1.1
# (HTTP/1.1 then); an Upgrade to an h2c:// endpoint goes over HTTP/1.1;
# edgectl upstream list says h2. gRPC (tests/tools/grpc_client.py, an
# HTTP/2 client): a unary call, a streaming one whose every message is
# echoed before the next goes (never buffered), a trailers-only error,
# each with its grpc-status; trailers both ways between HTTP/2 client and
# HTTP/2 upstream, to an HTTP/1.1 client that sent TE: trailers (and
# not to one that did not), from an HTTP/1.1 upstream's chunked body to
# an HTTP/2 client (a request's never to an HTTP/1.1 upstream). Runs against build/edged and build/asan/edged.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/lib_edged.sh
. "$(dirname "$0")/../lib_edged.sh"
edged_begin curl python3 openssl
DPY=/usr/bin/python3
if ! "$DPY" -c 'import h2' 2>/dev/null; then
	t_skip "HTTP/2 upstreams" "python3-h2 is not installed"
	t_exit
	exit
fi

BASE=$(edged_ports 12)
P_EDGE=$BASE
P_ADMIN=$((BASE + 1))
P_H2C=$((BASE + 2))  # h2c, max 10 streams, its SETTINGS 1 s late
P_GA=$((BASE + 3))   # h2c, GOAWAY after 20 requests a connection
P_TLS=$((BASE + 4))  # TLS, ALPN h2
P_TLS1=$((BASE + 5)) # TLS, ALPN http/1.1 only
P_UPG=$((BASE + 6))  # echo_backend.py: HTTP/1.1 with Upgrade
P_MUTE=$((BASE + 7)) # accepts connections and never says a word
P_HC=$((BASE + 8))   # h2c, health-checked over HTTP/2
P_GRPC=$((BASE + 9)) # python3-grpcio's server (tests/tools/grpc_peer.py)
P_NGD=$((BASE + 10)) # nghttpd, h2c
P_NGDT=$((BASE + 11)) # nghttpd, TLS
SOCK="$T_TMP/ctl/edged.sock"
C="$T_TMP/certs"
mkdir -p "$C"
chmod 755 "$T_TMP" "$C"
if ! bash "$TOOLS/mkchain.sh" "$C" up 0 "DNS:up.test,IP:127.0.0.1" >/dev/null 2>&1; then
	t_fail "test certificates made"
	t_exit
	exit
fi
chmod 644 "$C"/*

backend() { # PORT NAME ARGS...
	local p=$1 n=$2
	shift 2
	edged_backend "$p" "$DPY" "$TOOLS/h2_backend.py" "$p" "$T_TMP/$n.jsonl" "$@"
}
if ! backend "$P_H2C" h2c --max-streams 10 --settings-delay 1000 ||
	! backend "$P_GA" ga --goaway-after 20 ||
	! backend "$P_TLS" tls --tls "$C/up-0.pem" "$C/up.key" ||
	! backend "$P_TLS1" tls1 --tls "$C/up-0.pem" "$C/up.key" --alpn-h1 ||
	! backend "$P_HC" hc ||
	! edged_backend "$P_UPG" python3 "$TOOLS/echo_backend.py" "$P_UPG" "$T_TMP/upg.jsonl" upg; then
	t_fail "backends start"
	t_exit
	exit
fi
# real peers where they install: Debian's python3-grpcio and nghttpd
HAVE_GRPC=0
if "$DPY" -c 'import grpc' 2>/dev/null; then
	if edged_backend "$P_GRPC" "$DPY" "$TOOLS/grpc_peer.py" serve "$P_GRPC"; then
		HAVE_GRPC=1
	else
		t_fail "the gRPC server starts"
	fi
fi
HAVE_NGD=0
mkdir -p "$T_TMP/www"
head -c 1048576 /dev/urandom >"$T_TMP/www/file.bin"
echo ok >"$T_TMP/www/hc"
if command -v nghttpd >/dev/null; then
	nghttpd --address=127.0.0.1 --no-tls -d "$T_TMP/www" "$P_NGD" >/dev/null 2>&1 &
	edged_track $!
	nghttpd --address=127.0.0.1 -d "$T_TMP/www" "$P_NGDT" "$C/up.key" "$C/up-0.pem" >/dev/null 2>&1 &
	edged_track $!
	if edged_wait_port "$P_NGD" && edged_wait_port "$P_NGDT"; then
		HAVE_NGD=1
	else
		t_fail "nghttpd starts"
	fi
fi
# the silent one counts the connections it accepted
"$DPY" - "$P_MUTE" "$T_TMP/mute.count" <<'PY' &
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(16)
held = []
while True:
    c, _ = s.accept()
    held.append(c)
    open(sys.argv[2], "w").write("%d\n" % len(held))
PY
edged_track $!
edged_wait_port "$P_MUTE" || t_fail "the silent backend starts"

# one worker: the sessions are per worker. The endpoints that must stay
# in (hcok, ngdt) fall after six failed checks a second apart, each given
# the whole second: on a loaded machine three in a row have timed out
# (the checks reached the backend 4 s apart), and one that fails every
# check is still out 6 s after the start, long before they are looked at
{
	edged_conf_head "$P_ADMIN" "$SOCK" 1
	cat <<CONF
pin_dir = "$T_TMP/pins";
timeouts = { drain = "5s"; upstream_connect = "1s"; upstream_response = "5s";
  body = "2s"; };
limits = { max_inflight = 1000; };
analytics = { file = "$T_TMP/requests.jsonl"; };
projects = ( { id = "p"; environments = (
  { id = "h2c"; domains = [ "h2c.test" ];
    deployment = { id = "d1"; upstreams = [ "h2c://127.0.0.1:$P_H2C" ]; }; },
  { id = "ga"; domains = [ "ga.test" ];
    deployment = { id = "d2"; upstreams = [ "h2c://127.0.0.1:$P_GA" ]; }; },
  { id = "tls"; domains = [ "up.test" ];
    deployment = { id = "d3"; upstreams = [ "https://127.0.0.1:$P_TLS" ];
      tls = { ca = "$C/up-root.crt"; }; }; },
  { id = "tls1"; domains = [ "h1.test" ];
    deployment = { id = "d4"; upstreams = [ "https://127.0.0.1:$P_TLS1" ];
      tls = { ca = "$C/up-root.crt"; server_name = "up.test"; }; }; },
  { id = "upg"; domains = [ "upg.test" ];
    deployment = { id = "d5"; upstreams = [ "h2c://127.0.0.1:$P_UPG" ]; }; },
  { id = "h1tr"; domains = [ "h1tr.test" ];
    deployment = { id = "d6"; upstreams = [ "127.0.0.1:$P_UPG" ]; }; },
  { id = "hcok"; domains = [ "hcok.test" ];
    deployment = { id = "d8"; upstreams = [ "h2c://127.0.0.1:$P_HC" ];
      health_check = { type = "http"; path = "/status/204"; expect_status = 204;
        interval = "1s"; timeout = "1s"; rise = 1; fall = 6; }; }; },
  { id = "hcbad"; domains = [ "hcbad.test" ];
    deployment = { id = "d9"; upstreams = [ "h2c://127.0.0.1:$P_TLS1" ];
      health_check = { type = "http"; path = "/healthz";
        interval = "300ms"; timeout = "250ms"; rise = 1; fall = 2; }; }; },
  { id = "grpcr"; domains = [ "grpc.test" ];
    deployment = { id = "d10"; upstreams = [ "h2c://127.0.0.1:$P_GRPC" ]; }; },
  { id = "ngd"; domains = [ "ngd.test" ];
    deployment = { id = "d11"; upstreams = [ "h2c://127.0.0.1:$P_NGD" ]; }; },
  { id = "ngdt"; domains = [ "ngdt.test" ];
    deployment = { id = "d12"; upstreams = [ "https://127.0.0.1:$P_NGDT" ];
      tls = { ca = "$C/up-root.crt"; server_name = "up.test"; };
      health_check = { type = "http"; path = "/hc"; interval = "1s";
        timeout = "1s"; rise = 1; fall = 6; }; }; },
  { id = "mute"; domains = [ "mute.test" ];
    deployment = { id = "d7"; upstreams = [ "https://127.0.0.1:$P_MUTE" ];
      tls = { ca = "$C/up-root.crt"; server_name = "up.test"; }; }; }
  ); } );
CONF
} >"$T_TMP/edge.conf"
chmod 644 "$T_TMP/edge.conf"

# get HOST PATH [CURL ARGS...]: the status; the body in $T_TMP/body, the
# head in $T_TMP/head
get() {
	local h=$1 p=$2
	shift 2
	curl -s -m 20 -o "$T_TMP/body" -D "$T_TMP/head" -w '%{http_code}' \
		-H "Host: $h" "$@" "http://127.0.0.1:$P_EDGE$p"
}
jf() { # KEY: KEY of the JSON in $T_TMP/body
	python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get(sys.argv[2]))' "$T_TMP/body" "$1"
}
lines() { # FILE PATTERN: lines of FILE matching PATTERN
	grep -c -- "$2" "$1" 2>/dev/null || true
}

run_suite() {
	local bin=$1 v=$2 c a i n pids
	for n in h2c ga tls tls1 upg hc; do : >"$T_TMP/$n.jsonl"; done
	: >"$T_TMP/requests.jsonl"
	if ! edged_start "$bin" "$T_TMP/edge.conf"; then
		t_fail "$v: edged starts" "$(tail -5 "$EDGED_LOG")"
		return
	fi

	# ---- h2c: GET from HTTP/1.1 and from HTTP/2 clients, one connection
	c=$(get h2c.test "/a?x=1")
	a=$(get h2c.test "/b" --http2-prior-knowledge)
	if [ "$c" = 200 ] && [ "$a" = 200 ] &&
		[ "$(jf authority)" = h2c.test ] && [ "$(jf scheme)" = http ] &&
		[ "$(jf path)" = /b ] && [ "$(jf host)" = None ] &&
		[[ "$(jf via)" == "2 "*" (edge)" ]] &&
		[ "$(sed -n 1p "$T_TMP/h2c.jsonl" | python3 -c 'import json,sys; print(json.load(sys.stdin)["path"])')" = "/a?x=1" ] &&
		[ "$(python3 -c 'import json,sys; print(len({json.loads(l)["conn"] for l in open(sys.argv[1])}))' "$T_TMP/h2c.jsonl")" = 1 ]; then
		t_ok "$v: h2c://: GET from HTTP/1.1 and HTTP/2 clients, Host as :authority, one shared connection"
	else
		t_fail "$v: h2c GET" "$c $a $(cat "$T_TMP/body") $(cat "$T_TMP/h2c.jsonl")"
	fi

	# ---- a 1 MiB POST, and a response without content-length (chunked
	# to the HTTP/1.1 client)
	head -c 1048576 /dev/urandom >"$T_TMP/up.bin"
	c=$(get h2c.test /post --data-binary @"$T_TMP/up.bin" -H 'Content-Type: application/octet-stream')
	if [ "$c" = 200 ] && [ "$(jf body_len)" = 1048576 ] &&
		[ "$(jf body_sha256)" = "$(sha256sum "$T_TMP/up.bin" | cut -d' ' -f1)" ]; then
		t_ok "$v: h2c://: a 1 MiB POST arrives whole"
	else
		t_fail "$v: h2c POST" "$c $(head -c 300 "$T_TMP/body")"
	fi
	c=$(get h2c.test "/big?n=300000")
	if [ "$c" = 200 ] && [ "$(stat -c %s "$T_TMP/body")" = 300000 ] &&
		grep -qi '^transfer-encoding: chunked' "$T_TMP/head"; then
		t_ok "$v: h2c://: a 300 kB response without content-length, chunked to the HTTP/1.1 client"
	else
		t_fail "$v: h2c big" "$c $(stat -c %s "$T_TMP/body") $(cat "$T_TMP/head")"
	fi

	# ---- 100 concurrent requests: never above the backend's 10 streams.
	# Each takes a second, so that the first connection fills and new
	# ones are made while they come; a new connection's SETTINGS come a
	# second late, and the streams edged sends before it reads them must
	# keep to the limit the first one was told (the backend takes up to
	# 100 until then)
	: >"$T_TMP/h2c.jsonl"
	: >"$T_TMP/par.txt"
	pids=()
	for ((i = 0; i < 100; i++)); do
		curl -s -m 30 -o /dev/null -w '%{http_code}\n' -H "Host: h2c.test" \
			"http://127.0.0.1:$P_EDGE/slow?ms=1000&i=$i" >>"$T_TMP/par.txt" &
		pids+=($!)
	done
	wait "${pids[@]}"
	a=$(python3 -c 'import json,sys
r = [json.loads(l) for l in open(sys.argv[1])]
print(len(r), max(x["concurrent"] for x in r), len({x["conn"] for x in r}))' "$T_TMP/h2c.jsonl")
	if [ "$(lines "$T_TMP/par.txt" '^200$')" = 100 ] && [ "${a%% *}" = 100 ] &&
		[ "$(echo "$a" | cut -d' ' -f2)" -le 10 ] && [ "$(echo "$a" | cut -d' ' -f2)" -ge 2 ]; then
		t_ok "$v: 100 concurrent requests answered, multiplexed at most 10 at a time on a connection (requests, most at once, connections: $a)"
	else
		t_fail "$v: multiplexing" "$(sort "$T_TMP/par.txt" | uniq -c | tr '\n' ' ') $a"
	fi

	# ---- GOAWAY mid-load: 30 POSTs and 30 GETs at once
	: >"$T_TMP/par.txt"
	pids=()
	for ((i = 0; i < 30; i++)); do
		curl -s -m 30 -o /dev/null -w '%{http_code}\n' -H "Host: ga.test" -H "X-Req-Id: post-$i" \
			-d "body $i" "http://127.0.0.1:$P_EDGE/slow?ms=50" >>"$T_TMP/par.txt" &
		pids+=($!)
		curl -s -m 30 -o /dev/null -w '%{http_code}\n' -H "Host: ga.test" -H "X-Req-Id: get-$i" \
			"http://127.0.0.1:$P_EDGE/slow?ms=50" >>"$T_TMP/par.txt" &
		pids+=($!)
	done
	wait "${pids[@]}"
	a=$(python3 -c 'import json,sys,collections
r = [json.loads(l) for l in open(sys.argv[1])]
c = collections.Counter(x["id"] for x in r)
print(len(c), max(c.values()), len({x["conn"] for x in r}))' "$T_TMP/ga.jsonl")
	if [ "$(lines "$T_TMP/par.txt" '^200$')" = 60 ] && [ "$a" != "${a#60 1 }" ] &&
		[ "${a##* }" -ge 3 ]; then
		t_ok "$v: GOAWAY every 20 requests: all 60 answered, none processed twice, over ${a##* } connections"
	else
		t_fail "$v: GOAWAY" "$(sort "$T_TMP/par.txt" | uniq -c | tr '\n' ' ') ids, most, conns: $a"
	fi

	# ---- a stream reset, a connection that dies: 502, a POST not repeated
	c=$(get h2c.test /reset)
	a=$(get h2c.test /die -d x -H "X-Req-Id: die-post")
	if [ "$c" = 502 ] && grep -q '"error":"upstream_bad_response"' "$T_TMP/body" &&
		[ "$a" = 502 ] && [ "$(lines "$T_TMP/h2c.jsonl" '"die-post"')" = 1 ] &&
		edged_wait_log "upstream h2c://127.0.0.1:$P_H2C: .*stream reset: INTERNAL_ERROR"; then
		t_ok "$v: a stream reset and a connection that dies before the answer: 502, logged, the POST sent once"
	else
		t_fail "$v: reset, die" "$c $a $(lines "$T_TMP/h2c.jsonl" '"die-post"') $(grep -c 'stream reset' "$EDGED_LOG")"
	fi
	c=$(get h2c.test /a)
	if [ "$c" = 200 ]; then
		t_ok "$v: the endpoint serves on after them"
	else
		t_fail "$v: after die" "$c"
	fi
	# an idempotent request whose shared connection ends goes again once,
	# on a new connection, never on another shared one (it may be what
	# ended the first); that one ending too is the answer (502). 12 at
	# once first, so that two sessions (10 streams each) are open.
	pids=()
	for i in $(seq 12); do
		curl -s -m 20 -o /dev/null -H "Host: h2c.test" \
			"http://127.0.0.1:$P_EDGE/slow?ms=300&i=$i" &
		pids+=($!)
	done
	wait "${pids[@]}"
	c=$(get h2c.test /die -H "X-Req-Id: die-get")
	# the connections it was sent on, and whether the last was new
	a=$("$DPY" -c 'import json,sys
r=[json.loads(l) for l in open(sys.argv[1]) if l.strip()]
d=[k for k, x in enumerate(r) if x["id"] == "die-get"]
c=[r[k]["conn"] for k in d]
new=bool(d) and all(x["conn"] != c[-1] for x in r[:d[-1]])
print(len(c), "new" if new else "old", *c)' "$T_TMP/h2c.jsonl")
	if [ "$c" = 502 ] && [ "${a%% *}" = 2 ] && [ "$(echo "$a" | cut -d' ' -f2)" = new ]; then
		t_ok "$v: a GET whose shared connection dies is sent again once, on a new connection: 502"
	else
		t_fail "$v: GET die" "$c, sent on connections: $a"
	fi

	# ---- a response held back by a slow client is not the upstream's
	# timeout (timeouts.upstream_response 5 s; 160 kB at 20 kB/s)
	c=$(curl -s -m 30 --limit-rate 20k -o "$T_TMP/slow.bin" -w '%{http_code}' -H "Host: h2c.test" \
		"http://127.0.0.1:$P_EDGE/big?n=160000")
	if [ "$c" = 200 ] && [ "$(stat -c %s "$T_TMP/slow.bin")" = 160000 ] &&
		! grep -q "response body timed out" "$EDGED_LOG"; then
		t_ok "$v: a client reading slowly for 8 s gets the whole response: the body timeout waits while it holds the stream back"
	else
		t_fail "$v: slow client" "$c $(stat -c %s "$T_TMP/slow.bin") $(grep -m1 'timed out' "$EDGED_LOG")"
	fi

	# ---- an https:// endpoint whose handshake never comes: each request
	# gives up after timeouts.upstream_connect on a connection of its own
	# (a session stuck connecting is never shared on)
	rm -f "$T_TMP/mute.count"
	c=$(get mute.test /1)
	a=$(get mute.test /2)
	if [ "$c" = 502 ] && [ "$a" = 502 ] && [ "$(cat "$T_TMP/mute.count" 2>/dev/null)" -ge 2 ]; then
		t_ok "$v: a handshake that never comes: 502 after the connect timeout, the next request on a new connection"
	else
		t_fail "$v: stuck handshake" "$c $a $(cat "$T_TMP/mute.count" 2>/dev/null)"
	fi

	# ---- https:// with ALPN h2, verified
	c=$(get up.test /tls)
	a=$(get up.test /tls2 --http2-prior-knowledge)
	if [ "$c" = 200 ] && [ "$a" = 200 ] && [ "$(jf scheme)" = https ] &&
		[ "$(jf authority)" = up.test ] &&
		[ "$(python3 -c 'import json,sys; print(len({json.loads(l)["conn"] for l in open(sys.argv[1])}))' "$T_TMP/tls.jsonl")" = 1 ]; then
		t_ok "$v: https:// whose ALPN chose h2: HTTP/2 over verified TLS, one connection"
	else
		t_fail "$v: https h2" "$c $a $(cat "$T_TMP/body")"
	fi
	# ---- https:// whose ALPN chose http/1.1: HTTP/1.1 then
	c=$(get h1.test /one)
	a=$(get h1.test /two)
	if [ "$c" = 200 ] && [ "$a" = 200 ] && [ "$(jf proto)" = h1 ] &&
		[ "$(lines "$T_TMP/tls1.jsonl" '"proto": "h1"')" = 2 ]; then
		t_ok "$v: https:// whose ALPN chose http/1.1: HTTP/1.1 over it"
	else
		t_fail "$v: https h1" "$c $a $(cat "$T_TMP/body") $(cat "$T_TMP/tls1.jsonl")"
	fi

	# ---- an Upgrade to an h2c:// endpoint goes over an HTTP/1.1 connection
	c=$(printf 'GET /ws HTTP/1.1\r\nHost: upg.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\nping' |
		timeout 5 python3 "$TOOLS/rawhttp.py" "$P_EDGE" --wait 1 2>/dev/null | head -c 200)
	if [[ "$c" == "HTTP/1.1 101"* ]]; then
		t_ok "$v: an Upgrade to an h2c:// endpoint: 101 over an HTTP/1.1 connection of it"
	else
		t_fail "$v: upgrade" "$c"
	fi

	# ---- gRPC and trailers
	grpc() { # PATH MODE [HOST]: grpc_client.py's JSON in $T_TMP/g.json
		"$DPY" "$TOOLS/grpc_client.py" "$P_EDGE" "${3:-h2c.test}" "$1" "$2" >"$T_TMP/g.json"
	}
	gj() { # PYTHON-EXPR over the JSON as g
		python3 -c 'import json,sys; g = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$T_TMP/g.json" "$1"
	}
	if grpc /echo.Echo/Unary unary && [ "$(gj 'g["status"]')" = 200 ] &&
		[ "$(gj 'g["messages"]')" = "['hello']" ] &&
		[ "$(gj 'g["trailers"]["grpc-status"], g["trailers"]["grpc-message"]')" = "('0', 'ok')" ]; then
		t_ok "$v: gRPC unary: the message and its trailers (grpc-status 0)"
	else
		t_fail "$v: gRPC unary" "$(cat "$T_TMP/g.json")"
	fi
	if grpc /echo.Echo/Stream stream && [ "$(gj 'g["echoed_in_turn"]')" = True ] &&
		[ "$(gj 'g["messages"]')" = "['one', 'two', 'three']" ] &&
		[ "$(gj 'g["trailers"]["grpc-status"], g["trailers"]["x-count"]')" = "('0', '3')" ]; then
		t_ok "$v: gRPC streaming: each message echoed before the next is sent (never buffered), then the trailers"
	else
		t_fail "$v: gRPC streaming" "$(cat "$T_TMP/g.json")"
	fi
	if grpc /echo.Echo/Stream pause && [ "$(gj 'g["messages"], g.get("reset")')" = "(['one', 'two'], None)" ] &&
		[ "$(gj 'g["trailers"]["grpc-status"]')" = 0 ]; then
		t_ok "$v: a gRPC stream quiet for longer than timeouts.body (2 s) goes on: its body is not timed"
	else
		t_fail "$v: gRPC pause" "$(cat "$T_TMP/g.json")"
	fi
	if grpc /trailers bigtrailers && [ "$(gj 'g.get("reset"), g["status"]')" = "(1, None)" ] &&
		! grep -q '"path": "/trailers"' "$T_TMP/h2c.jsonl"; then
		t_ok "$v: an HTTP/2 client's trailers over limits.trailer_max: the stream reset, nothing upstream"
	else
		t_fail "$v: big trailers" "$(cat "$T_TMP/g.json")"
	fi
	if grpc /echo.Echo/Fail unary && [ "$(gj 'g["headers"]["grpc-status"]')" = 5 ] &&
		[ "$(gj 'g["trailers"], g["data_frames"]')" = "(None, 0)" ]; then
		t_ok "$v: gRPC trailers-only answer: grpc-status 5 reaches the client in one HEADERS frame that ends the stream"
	else
		t_fail "$v: gRPC Fail" "$(cat "$T_TMP/g.json")"
	fi
	: >"$T_TMP/h2c.jsonl"
	if grpc /trailers trailers && [ "$(gj 'g["status"]')" = 200 ] &&
		[ "$(gj 'g["trailers"]["x-sum"]')" = "$(printf abc | sha256sum | cut -d' ' -f1)" ] &&
		grep -q '"trailers": {"x-checksum": "123"}' "$T_TMP/h2c.jsonl"; then
		t_ok "$v: trailers both ways between an HTTP/2 client and an HTTP/2 upstream"
	else
		t_fail "$v: h2 trailers" "$(cat "$T_TMP/g.json") $(cat "$T_TMP/h2c.jsonl")"
	fi
	c=$(curl -s -m 10 --raw -o "$T_TMP/raw" -w '%{http_code}' -H "Host: h2c.test" -H "TE: trailers" \
		"http://127.0.0.1:$P_EDGE/trailers")
	a=$(curl -s -m 10 --raw -o "$T_TMP/raw2" -w '%{http_code}' -H "Host: h2c.test" \
		"http://127.0.0.1:$P_EDGE/trailers")
	if [ "$c" = 200 ] && grep -qa '^grpc-status: 0' "$T_TMP/raw" && grep -qa '^x-sum: ' "$T_TMP/raw" &&
		[ "$a" = 200 ] && ! grep -qa 'grpc-status' "$T_TMP/raw2"; then
		t_ok "$v: an HTTP/2 upstream's trailers in the chunked body of an HTTP/1.1 client that sent TE: trailers, and not of one that did not"
	else
		t_fail "$v: h1 client trailers" "$c $a $(tr '\r\n' '|~' <"$T_TMP/raw") / $(tr '\r\n' '|~' <"$T_TMP/raw2")"
	fi
	: >"$T_TMP/upg.jsonl"
	if grpc /chunked/100/trailers trailers h1tr.test && [ "$(gj 'g["status"]')" = 200 ] &&
		[ "$(gj 'g["trailers"]["x-sum"], g["trailers"]["grpc-status"]')" = "('abc', '0')" ] &&
		grep -q '"path": "/chunked/100/trailers"' "$T_TMP/upg.jsonl" &&
		! grep -q 'x-checksum' "$T_TMP/upg.jsonl"; then
		t_ok "$v: an HTTP/1.1 upstream's chunked trailers reach an HTTP/2 client; a request's trailers never go to an HTTP/1.1 upstream"
	else
		t_fail "$v: h2-h1 trailers" "$(cat "$T_TMP/g.json") $(cat "$T_TMP/upg.jsonl")"
	fi

	# ---- real peers: python3-grpcio through edged, nghttpd behind it
	if [ "$HAVE_GRPC" = 1 ]; then
		a=$("$DPY" "$TOOLS/grpc_peer.py" call "$P_EDGE" grpc.test 2>&1)
		if [ "$a" = '{"unary": "echo:hello", "stream": ["echo:one", "echo:two", "echo:three"], "in_turn": true, "fail": ["NOT_FOUND", "no such thing"]}' ]; then
			t_ok "$v: python3-grpcio client and server through edged (h2c://): unary, bidirectional streaming each echo in turn, NOT_FOUND with its details"
		else
			t_fail "$v: grpcio" "$a"
		fi
	else
		t_skip "$v: python3-grpcio" "not installed"
	fi
	if [ "$HAVE_NGD" = 1 ]; then
		want=$(sha256sum "$T_TMP/www/file.bin" | cut -d' ' -f1)
		c=$(get ngd.test /file.bin)
		s1=$(sha256sum "$T_TMP/body" | cut -d' ' -f1)
		a=$(get ngdt.test /file.bin --http2-prior-knowledge)
		s2=$(sha256sum "$T_TMP/body" | cut -d' ' -f1)
		if [ "$c" = 200 ] && [ "$s1" = "$want" ] && [ "$a" = 200 ] && [ "$s2" = "$want" ]; then
			t_ok "$v: nghttpd behind h2c:// and https:// (ALPN h2): 1 MiB whole to an HTTP/1.1 and an HTTP/2 client"
		else
			t_fail "$v: nghttpd" "$c $a $s1 $s2 $want"
		fi
		# its http health check (every second since the start, six
		# failures take it out) asks over TLS in HTTP/2, ALPN h2
		# offered first: nghttpd speaks nothing else
		"$EDGECTL" --socket "$SOCK" upstream list >"$T_TMP/list"
		if grep -q "^https://127.0.0.1:$P_NGDT .* healthy .* h2 *verified " "$T_TMP/list" &&
			! grep -q "upstream https://127.0.0.1:$P_NGDT ejected" "$EDGED_LOG"; then
			t_ok "$v: an http health check of an https:// endpoint that speaks only HTTP/2 (nghttpd) asks in HTTP/2 by ALPN: healthy"
		else
			t_fail "$v: https h2 health check" "$(tr '\n' '|' <"$T_TMP/list") $(grep -m3 "$P_NGDT" "$EDGED_LOG")"
		fi
	else
		t_skip "$v: nghttpd" "nghttp2-server is not installed"
	fi

	# ---- http health checks over HTTP/2 (h2c://): a backend answering
	# the expected status stays in; one that is no HTTP/2 server (the
	# TLS backend's port, as h2c) is taken out
	if edged_wait_log "upstream h2c://127.0.0.1:$P_TLS1 ejected: health check failed"; then
		"$EDGECTL" --socket "$SOCK" upstream list >"$T_TMP/list"
		if grep -q "^h2c://127.0.0.1:$P_HC .* healthy " "$T_TMP/list" &&
			! grep -q "upstream h2c://127.0.0.1:$P_HC ejected" "$EDGED_LOG" &&
			grep -q '"path": "/status/204"' "$T_TMP/hc.jsonl"; then
			t_ok "$v: http health checks of h2c:// endpoints over HTTP/2: 204 as expected keeps one in, a port that is no HTTP/2 server is ejected"
		else
			t_fail "$v: h2c health" "$(tr '\n' '|' <"$T_TMP/list")"
		fi
	else
		t_fail "$v: h2c health: not ejected" "$(grep -m3 'health\|TLS1' "$EDGED_LOG")"
	fi

	"$EDGECTL" --socket "$SOCK" upstream list >"$T_TMP/list"
	if grep -q "^h2c://127.0.0.1:$P_H2C .* h2 " "$T_TMP/list" &&
		grep -q "^https://127.0.0.1:$P_TLS .* h2 *verified " "$T_TMP/list" &&
		grep -q "^https://127.0.0.1:$P_TLS1 .* h1 *verified " "$T_TMP/list"; then
		t_ok "$v: edgectl upstream list: h2 for the HTTP/2 endpoints, h1 for the one that chose http/1.1"
	else
		t_fail "$v: upstream list" "$(tr '\n' '|' <"$T_TMP/list")"
	fi

	edged_stop 10
	if grep -q '"host":"h2c.test".*"upstream_addr":"h2c://127.0.0.1:'"$P_H2C"'"' "$T_TMP/requests.jsonl"; then
		t_ok "$v: analytics: the h2c:// endpoint as upstream_addr"
	else
		t_fail "$v: analytics" "$(grep -m1 h2c.test "$T_TMP/requests.jsonl" | head -c 300)"
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
