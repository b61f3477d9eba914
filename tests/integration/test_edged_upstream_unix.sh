#!/bin/bash
# test_edged_upstream_unix.sh - upstream endpoints with a scheme: a
# "unix:/PATH" endpoint (tests/tools/echo_backend.py on a Unix socket)
# serves GET, a 1 MiB POST (its SHA-256 as sent), a chunked response and
# an Upgrade tunnel (copied: the sockmap moves TCP only) through edged, on
# one pooled connection for sequential requests, with the usual upstream
# headers; a socket nobody listens on is a 502 upstream_connect_failed
# with the path in the log line; an HTTP health check over the socket
# ejects the endpoint once its backend is gone; edgectl upstream list and
# drain name it as written; "http://ADDR:PORT" is the bare address's
# endpoint. Malformed endpoints are refused by edged --check, each with
# its reason. Runs against build/edged and build/asan/edged.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/lib_edged.sh
. "$(dirname "$0")/../lib_edged.sh"
edged_begin curl python3

BASE=$(edged_ports 3)
P_EDGE=$BASE
P_ADMIN=$((BASE + 1))
P_TCP=$((BASE + 2))
SOCK="$T_TMP/ctl/edged.sock"
# the backends' sockets, in a directory edged (another user) may enter
mkdir -p "$T_TMP/run"
chmod 755 "$T_TMP" "$T_TMP/run"
U1="$T_TMP/run/app.sock"
UGONE="$T_TMP/run/nobody.sock"
UHC="$T_TMP/run/hc.sock"

{
	edged_conf_head "$P_ADMIN" "$SOCK" 2
	cat <<CONF
pin_dir = "$T_TMP/pins";
timeouts = { drain = "5s"; upstream_connect = "1s"; };
analytics = { file = "$T_TMP/requests.jsonl"; };
projects = (
  { id = "app";
    environments = (
      { id = "app-prod"; domains = [ "app.test" ];
        deployment = { id = "a1"; upstreams = [ "unix:$U1" ]; }; },
      { id = "gone"; domains = [ "gone.test" ];
        deployment = { id = "g1"; upstreams = [ "unix:$UGONE" ]; }; },
      { id = "tcp"; domains = [ "tcp.test" ];
        deployment = { id = "t1"; upstreams = [ "http://127.0.0.1:$P_TCP" ]; }; },
      { id = "hc"; domains = [ "hc.test" ];
        deployment = { id = "h1"; upstreams = [ "unix:$UHC" ];
          health_check = { type = "http"; path = "/healthz";
            interval = "200ms"; timeout = "150ms"; expect_status = 200;
            rise = 1; fall = 2; }; }; } );
  }
);
CONF
} >"$T_TMP/edge.conf"
chmod 644 "$T_TMP/edge.conf"

ctl() { "$EDGECTL" --socket "$SOCK" "$@"; }

# wait_sock PATH: 0 once PATH is a socket (5 s at most)
wait_sock() {
	local i
	for ((i = 0; i < 100; i++)); do
		[ -S "$1" ] && return 0
		sleep 0.05
	done
	return 1
}

# unix_backend PATH LOG NAME: echo_backend.py on the Unix socket PATH
unix_backend() {
	python3 "$TOOLS/echo_backend.py" "unix:$1" "$2" "$3" &
	edged_track $!
	echo $! >"$T_TMP/pid.$3"
	wait_sock "$1"
}

# bad_endpoint NAME ENDPOINT WANT: edged --check refuses a configuration
# whose deployment lists ENDPOINT, saying WANT
bad_endpoint() {
	local out rc=0
	{
		edged_conf_head "$P_ADMIN" "$SOCK" 1
		cat <<CONF
projects = ( { id = "p"; environments = ( { id = "e"; domains = [ "x.test" ];
  deployment = { id = "d"; upstreams = [ "$2" ]; }; } ); } );
CONF
	} >"$T_TMP/bad.conf"
	out=$("$B/edged" --check -c "$T_TMP/bad.conf" 2>&1) || rc=$?
	if [ "$rc" != 0 ] && [[ "$out" == *"$3"* ]]; then
		t_ok "--check refuses $1"
	else
		t_fail "--check refuses $1" "$out"
	fi
}

bad_endpoint "a relative Unix path" "unix:run/app.sock" "a Unix socket needs an absolute path"
bad_endpoint "an unknown scheme" "ftp://127.0.0.1:21" "unknown scheme (http://, https://, h2c:// or unix:)"
bad_endpoint "a path after the address" "http://127.0.0.1:80/x" "an endpoint is an address and a port, no path or user"
bad_endpoint "a Unix path with a space" "unix:/tmp/a b" "without spaces"
bad_endpoint "http:// and the bare address twice" '127.0.0.1:80", "http://127.0.0.1:80' "127.0.0.1:80 is listed twice"

run_suite() {
	local bin=$1 v=$2 out code i n a b up ok
	: >"$T_TMP/u1.jsonl"
	: >"$T_TMP/requests.jsonl"
	rm -f "$UHC"
	if ! unix_backend "$U1" "$T_TMP/u1.jsonl" u1 ||
		! unix_backend "$UHC" "$T_TMP/hc.jsonl" hc; then
		t_fail "$v: backends on Unix sockets start"
		return
	fi
	if ! edged_start "$bin" "$T_TMP/edge.conf"; then
		t_fail "$v: edged starts" "$(tail -5 "$EDGED_LOG")"
		return
	fi

	# ---- GET over the socket, upstream headers, two requests on one
	# pooled connection
	out=$(curl -s -m 10 -H "Host: app.test" "http://127.0.0.1:$P_EDGE/a" \
		--next -s -m 10 -H "Host: app.test" "http://127.0.0.1:$P_EDGE/b")
	n=$(wc -l <"$T_TMP/u1.jsonl")
	a=$(sed -n 1p "$T_TMP/u1.jsonl" | python3 -c 'import json,sys; print(json.load(sys.stdin)["peer_port"])')
	b=$(sed -n 2p "$T_TMP/u1.jsonl" | python3 -c 'import json,sys; print(json.load(sys.stdin)["peer_port"])')
	if [ "$n" = 2 ] && [ "$a" = "$b" ] &&
		[[ "$out" == *'"backend": "u1"'*'"path": "/a"'* ]] &&
		grep -q '"X-Forwarded-For", "127.0.0.1"' "$T_TMP/u1.jsonl" &&
		grep -q '"X-Request-ID", "[0-9a-f]\{32\}"' "$T_TMP/u1.jsonl" &&
		grep -q '"Host", "app.test"' "$T_TMP/u1.jsonl"; then
		t_ok "$v: unix: GET answered over the socket with the upstream headers; the second request on the same pooled connection"
	else
		t_fail "$v: unix: GET" "n=$n conns $a/$b; $(head -c 300 "$T_TMP/u1.jsonl")"
	fi

	# ---- a 1 MiB POST, a chunked response
	head -c 1048576 /dev/urandom >"$T_TMP/body"
	out=$(curl -s -m 20 -H "Host: app.test" --data-binary @"$T_TMP/body" \
		"http://127.0.0.1:$P_EDGE/post")
	code=$(curl -s -m 20 -o "$T_TMP/chunked.out" -w '%{http_code}' \
		-H "Host: app.test" "http://127.0.0.1:$P_EDGE/chunked/300000")
	if [[ "$out" == *"\"body_sha256\": \"$(sha256sum <"$T_TMP/body" | cut -d' ' -f1)\""* ]] &&
		[ "$code" = 200 ] && [ "$(wc -c <"$T_TMP/chunked.out")" = 300000 ]; then
		t_ok "$v: unix: a 1 MiB POST arrives whole, a 300000-byte chunked response comes back whole"
	else
		t_fail "$v: unix: bodies" "code $code $(wc -c <"$T_TMP/chunked.out"); $(echo "$out" | head -c 200)"
	fi

	# ---- an Upgrade: 101, then bytes both ways (copied)
	out=$(python3 - "$P_EDGE" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), 10)
s.settimeout(10)
s.sendall(b"GET /ws HTTP/1.1\r\nHost: app.test\r\nUpgrade: websocket\r\n"
          b"Connection: Upgrade\r\n\r\n")
head = b""
while b"\r\n\r\n" not in head:
    d = s.recv(4096)
    if not d:
        break
    head += d
rest = head.split(b"\r\n\r\n", 1)[1] if b"\r\n\r\n" in head else b""
msg = b"ping over a unix socket " * 4000
s.sendall(msg)
got = rest
while len(got) < len(msg):
    d = s.recv(65536)
    if not d:
        break
    got += d
print(head.split(b"\r\n")[0].decode(), got == msg)
s.close()
PY
)
	if [ "$out" = "HTTP/1.1 101 Switching Protocols True" ]; then
		t_ok "$v: unix: an Upgrade answered 101 tunnels 96 KB both ways"
	else
		t_fail "$v: unix: Upgrade" "$out"
	fi

	# ---- a socket nobody listens on: 502, the path in the log
	code=$(curl -s -m 10 -o /dev/null -w '%{http_code}' -H "Host: gone.test" \
		"http://127.0.0.1:$P_EDGE/")
	if [ "$code" = 502 ] &&
		edged_wait_log "upstream unix:$UGONE: connect failed: No such file or directory \(route gone.test/, environment gone\)"; then
		t_ok "$v: unix: a socket path with no listener is a 502, logged with its path and errno"
	else
		t_fail "$v: unix: no listener" "code $code; $(grep -m2 nobody.sock "$EDGED_LOG")"
	fi

	# ---- http:// is the plain endpoint: nothing listens there either
	code=$(curl -s -m 10 -o /dev/null -w '%{http_code}' -H "Host: tcp.test" \
		"http://127.0.0.1:$P_EDGE/")
	if [ "$code" = 502 ] &&
		edged_wait_log "upstream 127.0.0.1:$P_TCP: connect failed: Connection refused"; then
		t_ok "$v: http://ADDR:PORT is the bare address's endpoint (named without the scheme)"
	else
		t_fail "$v: http:// endpoint" "code $code; $(grep -m2 "$P_TCP" "$EDGED_LOG")"
	fi

	# ---- edgectl upstream list and drain name the socket as written
	up="unix:$U1"
	ok=1
	ctl upstream list | grep -q "^$up .*enabled.*healthy.* h1 *- .*app.test/" || ok=0
	# the ENDPOINT column as wide as the longest (a long socket path):
	# every row's ADMIN where the header's is
	ctl upstream list | python3 -c 'import sys
rows = sys.stdin.read().splitlines()
col = rows[0].index("ADMIN")
sys.exit(0 if len(rows) > 1 and all(r[col - 1] == " " and r[col] != " " and r[:col].strip() and "  " not in r[:col].strip() for r in rows[1:]) else 1)' || ok=0
	ctl upstream drain "$up" | grep -q "^$up: drain (was enabled)" || ok=0
	ctl upstream enable "$up" | grep -q "^$up: enabled (was drain)" || ok=0
	[ "$(ctl upstream list --json | python3 -c 'import json,sys
d = json.load(sys.stdin)["endpoints"]
print(sum(1 for e in d if e["address"].startswith("unix:/")))')" = 3 ] || ok=0
	if [ "$ok" = 1 ]; then
		t_ok "$v: edgectl upstream list shows unix: endpoints in a column as wide as the longest; drain and enable take one as written"
	else
		t_fail "$v: edgectl upstream" "$(ctl upstream list 2>&1 | tr '\n' ' ')"
	fi

	# ---- an HTTP health check over the socket: the backend gone, the
	# endpoint ejected
	code=$(curl -s -m 10 -o /dev/null -w '%{http_code}' -H "Host: hc.test" \
		"http://127.0.0.1:$P_EDGE/")
	kill "$(cat "$T_TMP/pid.hc")"
	rm -f "$UHC"
	if [ "$code" = 200 ] && grep -q '"path": "/healthz"' "$T_TMP/hc.jsonl" &&
		edged_wait_log "upstream unix:$UHC ejected: health check failed 2 times in a row \(last: health check: connect failed: No such file or directory\)"; then
		t_ok "$v: an HTTP health check asks the Unix socket for /healthz; the backend gone, it takes the endpoint out"
	else
		t_fail "$v: health check over a Unix socket" "code $code; $(grep -m3 "hc.sock" "$EDGED_LOG")"
	fi

	# ---- analytics name the endpoint
	if edged_stop 10 && grep -q "\"upstream_addr\":\"unix:$U1\"" "$T_TMP/requests.jsonl"; then
		t_ok "$v: analytics record the unix: endpoint"
	else
		t_fail "$v: analytics" "$(head -c 400 "$T_TMP/requests.jsonl")"
	fi
	edged_sanitizers_clean "$v: no sanitizer report"
	kill "$(cat "$T_TMP/pid.u1")" 2>/dev/null
	wait 2>/dev/null
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
