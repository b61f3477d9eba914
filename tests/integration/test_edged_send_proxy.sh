#!/bin/bash
# test_edged_send_proxy.sh - send_proxy: the PROXY protocol header edged
# writes first on its connections to upstreams, and proxy_protocol on a
# TCP route's address. Backends are tests/tools/pp_backend.py, which
# refuses a connection without a header and logs each header it reads;
# trusted_proxies = [ "127.0.0.2/32" ], splice = "sockmap" as root:
#   - a deployment with send_proxy = "v2": the backend reads a v2 header
#     naming the client's address and port and edged's listen address;
#     two requests on one client connection go over one upstream
#     connection, another client's never over that one (a pooled
#     connection is its client's); the health checks send LOCAL and the
#     endpoint stays healthy;
#   - send_proxy = "v1" over https:// (the header before the TLS
#     handshake): served, the checks' v1 line (naming their own socket)
#     before theirs;
#   - a TCP route with send_proxy = "v2" over a deployment without it:
#     the backend's header names the client; 4 MiB each way, SHA-256
#     equal, the tunnel moved by the kernel (edgectl splice: spliced,
#     kernel bytes);
#   - a TCP route with proxy_protocol = true and send_proxy = "v1": from
#     the trusted peer, a v1 header naming 203.0.113.7 makes that the
#     client edged's v1 header to the backend names; from another peer the connection is closed without a
#     byte, counted (edge_proxy_protocol_total{result="untrusted"});
#   - edgectl routes --json shows send_proxy and proxy_protocol;
#   - a reload from v2 to v1: the next client's connection gets a v1
#     header.
# Runs against build/edged and build/asan/edged.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/lib_edged.sh
. "$(dirname "$0")/../lib_edged.sh"
edged_begin curl python3 openssl
t_require_root
edged_need_build

BASE=$(edged_ports 8)
P_EDGE=$BASE
P_ADMIN=$((BASE + 1))
P_TR=$((BASE + 2))  # TCP route, send_proxy v2
P_TRP=$((BASE + 3)) # TCP route, proxy_protocol
P_B1=$((BASE + 4))  # http, PROXY wanted
P_B2=$((BASE + 5))  # https, PROXY wanted
P_B3=$((BASE + 6))  # echo, PROXY wanted
SOCK="$T_TMP/edged.sock"
C="$T_TMP/certs"
PPB="$TOOLS/pp_backend.py"
mkdir -p "$C"
chmod 755 "$T_TMP" "$C"
if ! bash "$TOOLS/mkchain.sh" "$C" srv 0 "DNS:tls.test" >/dev/null; then
	t_fail "test certificate made"
	t_exit
	exit
fi
chmod 644 "$C"/*
if ! edged_backend "$P_B1" python3 "$PPB" --log "$T_TMP/b$P_B1.log" "$P_B1" http ||
	! edged_backend "$P_B3" python3 "$PPB" --log "$T_TMP/b$P_B3.log" "$P_B3" echo ||
	! edged_backend "$P_B2" python3 "$PPB" --tls "$C/srv-0.pem" "$C/srv.key" \
	--log "$T_TMP/b$P_B2.log" "$P_B2" http; then
	t_fail "backends start"
	t_exit
	exit
fi

# conf SEND: the configuration, the web deployment's send_proxy SEND
conf() {
	{
		edged_conf_head "$P_ADMIN" "$SOCK" 1 # one pool: a wrong reuse would show
		cat <<CONF
trusted_proxies = [ "127.0.0.2/32" ];
splice = "sockmap";
pin_dir = "$T_TMP/pins";
tcp_routes = (
  { listen = "127.0.0.1:$P_TR"; environment = "tun"; send_proxy = "v2"; },
  { listen = "127.0.0.1:$P_TRP"; environment = "tun"; proxy_protocol = true;
    send_proxy = "v1"; } );
projects = ( { id = "p"; environments = (
  { id = "web"; domains = [ "web.test" ];
    deployment = { id = "web-1"; upstreams = [ "127.0.0.1:$P_B1" ];
      send_proxy = "$1";
      health_check = { type = "http"; path = "/hc"; interval = "500ms"; timeout = "400ms"; }; }; },
  { id = "tls"; domains = [ "tls.test" ];
    deployment = { id = "tls-1"; upstreams = [ "https://127.0.0.1:$P_B2" ];
      send_proxy = "v1"; tls = { ca = "$C/srv-root.crt"; };
      health_check = { type = "http"; path = "/hc"; interval = "500ms"; timeout = "400ms"; }; }; },
  { id = "tun"; domains = [ "tun.test" ];
    deployment = { id = "tun-1"; upstreams = [ "127.0.0.1:$P_B3" ]; }; } ); } );
CONF
	} >"$T_TMP/edge.conf"
	chmod 644 "$T_TMP/edge.conf"
}

# get HOST PATH...: one client connection from 127.0.0.1, GET each PATH
# of HOST in turn; prints the client's port, then each answer's JSON
get() {
	python3 - "$P_EDGE" "$@" <<'PY'
import http.client, sys
port, host, paths = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
c = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
c.connect()
print(c.sock.getsockname()[1])
for p in paths:
    c.request("GET", p, headers={"Host": host})
    r = c.getresponse()
    print(r.status, r.read().decode())
PY
}

# logged FILE VERSION COMMAND: how many headers of that version and
# command the backend log FILE has (CHECK: a PROXY header to the
# backend's own port, as a v1 health check names itself)
logged() {
	python3 - "$@" <<'PY'
import json, sys
n = 0
for line in open(sys.argv[1]):
    d = json.loads(line)
    if d.get("version") != int(sys.argv[2]):
        continue
    if sys.argv[3] == "CHECK":
        n += d.get("command") == "PROXY" and d.get("dst") == "127.0.0.1" and \
            str(d.get("dport")) == sys.argv[1].split("/b")[-1].split(".")[0]
    else:
        n += d.get("command") == sys.argv[3]
print(n)
PY
}

# tunnel PORT BIND HEADER SPLICED: a connection from BIND to PORT
# (HEADER, if not empty, sent first); once the backend's PP line is in
# (and, SPLICED not empty, once edgectl splice counts more than SPLICED
# tunnels in the kernel: the idle tunnel handed over before the bulk),
# 4 MiB sent and echoed back; prints the PP line's JSON and "sha-ok" when
# what came back is what went, else why not
tunnel() {
	python3 - "$@" "$EDGECTL" "$SOCK" <<'PY'
import hashlib, json, os, socket, subprocess, sys, threading, time
port, bind, hdr, spliced, ctl, sock = sys.argv[1:7]
hdr = hdr.encode().decode("unicode_escape").encode("latin-1")
data = os.urandom(4 << 20)
s = socket.socket()
s.bind((bind, 0))
s.settimeout(30)
s.connect(("127.0.0.1", int(port)))
got = b""
try:
    s.sendall(hdr)
    while b"\n" not in got:
        b = s.recv(4096)
        if not b:
            break
        got += b
except OSError as e:
    print("error", e)
if b"\n" not in got:
    print("CLOSED", len(got))
    sys.exit()
line, got = got.split(b"\n", 1)
print(line.decode()[3:])
end = time.monotonic() + 15
while spliced and time.monotonic() < end:
    out = subprocess.run([ctl, "--socket", sock, "splice", "--json"],
                         capture_output=True, text=True).stdout
    if json.loads(out or "{}").get("spliced", 0) > int(spliced):
        break
    time.sleep(0.05)
def send():
    try:
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
    except OSError:
        pass
t = threading.Thread(target=send)
t.start()
while True:
    b = s.recv(1 << 20)
    if not b:
        break
    got += b
t.join()
print("sha-ok" if hashlib.sha256(got).digest() == hashlib.sha256(data).digest()
      else f"sha-bad {len(got)} of {len(data)}")
PY
}

# ans N FIELD [CUT]: FIELD of the JSON on line N of $out, after its
# first word (a status) unless CUT is "" (the whole line)
ans() {
	if [ "${3-x}" = "" ]; then
		sed -n "$1p" <<<"$out" | json_field - "$2"
	else
		sed -n "$1p" <<<"$out" | cut -d' ' -f2- | json_field - "$2"
	fi
}

metric() {
	curl -s -m 5 "http://127.0.0.1:$P_ADMIN/metrics" | awk -v k="$1" '$1 == k { v = $2 } END { print v + 0 }'
}

run_suite() {
	local bin=$1 v=$2 out port c1 c2 n s0 s1 k0 k1 i
	for f in "$T_TMP"/b*.log; do : >"$f"; done
	conf v2
	if ! edged_start "$bin" "$T_TMP/edge.conf"; then
		t_fail "$v: edged starts" "$(tail -5 "$EDGED_LOG")"
		return
	fi

	# v2 to an HTTP deployment, pooled per client
	out=$(get web.test /a /b)
	port=$(head -1 <<<"$out")
	c1=$(ans 2 conn)
	if [ "$(sed -n 2p <<<"$out" | cut -c1-3)" = 200 ] &&
		[ "$(ans 2 src)" = 127.0.0.1 ] &&
		[ "$(ans 2 sport)" = "$port" ] &&
		[ "$(ans 2 version)" = 2 ] &&
		[ "$(ans 3 conn)" = "$c1" ] &&
		grep -q "\"dport\": $P_EDGE" "$T_TMP/b$P_B1.log"; then
		t_ok "$v: send_proxy v2: the backend's header names the client (port $port) and edged's address; its two requests on one upstream connection"
	else
		t_fail "$v: send_proxy v2" "$out; $(tail -3 "$T_TMP/b$P_B1.log")"
	fi
	c2=$(out=$(get web.test /c) && ans 2 conn)
	if [ -n "$c2" ] && [ "$c2" != "$c1" ]; then
		t_ok "$v: another client's request never on the first client's pooled connection"
	else
		t_fail "$v: pooled per client" "first $c1, second $c2"
	fi
	for ((i = 0; i < 100; i++)); do
		[ "$(logged "$T_TMP/b$P_B1.log" 2 LOCAL)" -ge 2 ] &&
			[ "$(logged "$T_TMP/b$P_B2.log" 1 CHECK)" -ge 2 ] && break
		sleep 0.1
	done
	"$EDGECTL" --socket "$SOCK" upstream list --json >"$T_TMP/up.json" 2>&1
	n=$(python3 -c 'import json, sys
print(sum(e["health"] == "healthy" for e in json.load(open(sys.argv[1]))["endpoints"]))' "$T_TMP/up.json" 2>&1)
	if [ "$(logged "$T_TMP/b$P_B1.log" 2 LOCAL)" -ge 2 ] &&
		[ "$(logged "$T_TMP/b$P_B2.log" 1 CHECK)" -ge 2 ] && [ "$n" = 3 ]; then
		t_ok "$v: health checks begin with LOCAL (v2) and a v1 line naming their own socket (before TLS); endpoints healthy"
	else
		t_fail "$v: health checks" "healthy $n; $(head -c 600 "$T_TMP/up.json"); $(tail -2 "$T_TMP/b$P_B2.log")"
	fi

	# v1 before TLS
	out=$(get tls.test /t /u)
	if [ "$(sed -n 2p <<<"$out" | cut -c1-3)" = 200 ] &&
		[ "$(ans 2 version)" = 1 ] &&
		[ "$(ans 2 sport)" = "$(head -1 <<<"$out")" ] &&
		[ "$(ans 3 conn)" = "$(ans 2 conn)" ]; then
		t_ok "$v: send_proxy v1 to an https:// endpoint: the header, then TLS; pooled for the client"
	else
		t_fail "$v: send_proxy v1 over TLS" "$out; $(grep -i tls "$EDGED_LOG" | tail -2)"
	fi

	# a TCP route's own send_proxy, spliced
	"$EDGECTL" --socket "$SOCK" splice --json >"$T_TMP/splice.json" 2>/dev/null
	s0=$(json_field "$T_TMP/splice.json" spliced)
	k0=$(json_field "$T_TMP/splice.json" kernel_bytes_down)
	out=$(tunnel "$P_TR" 127.0.0.1 "" "$s0")
	"$EDGECTL" --socket "$SOCK" splice --json >"$T_TMP/splice.json" 2>/dev/null
	s1=$(json_field "$T_TMP/splice.json" spliced)
	k1=$(json_field "$T_TMP/splice.json" kernel_bytes_down)
	if [ "$(ans 1 src "")" = 127.0.0.1 ] &&
		[ "$(ans 1 version "")" = 2 ] &&
		[ "$(sed -n 2p <<<"$out")" = sha-ok ] &&
		[ "$((s1 - s0))" -ge 1 ] && [ "$k1" -gt "$k0" ]; then
		t_ok "$v: TCP route send_proxy v2: the header, then 4 MiB each way, SHA-256 equal, spliced by the kernel ($((k1 - k0)) bytes down)"
	else
		t_fail "$v: TCP route send_proxy" "$out; spliced $s0 -> $s1, kernel down $k0 -> $k1; $(json_field "$T_TMP/splice.json" kernel_why); $(grep -i splice "$EDGED_LOG" | tail -3)"
	fi

	# a TCP route that takes the header, and gives the client on
	out=$(tunnel "$P_TRP" 127.0.0.2 'PROXY TCP4 203.0.113.7 198.51.100.1 40000 5432\r\n' "")
	if [ "$(ans 1 src "")" = 203.0.113.7 ] &&
		[ "$(ans 1 sport "")" = 40000 ] && [ "$(ans 1 version "")" = 1 ] &&
		[ "$(sed -n 2p <<<"$out")" = sha-ok ]; then
		t_ok "$v: TCP route proxy_protocol: the trusted peer's header's client is the one edged's header names"
	else
		t_fail "$v: TCP route proxy_protocol" "$out"
	fi
	n=$(metric 'edge_proxy_protocol_total{result="untrusted"}')
	out=$(tunnel "$P_TRP" 127.0.0.1 'PROXY TCP4 203.0.113.7 198.51.100.1 40000 5432\r\n' "")
	for ((i = 0; i < 30; i++)); do
		[ "$(metric 'edge_proxy_protocol_total{result="untrusted"}')" -gt "$n" ] && break
		sleep 0.1
	done
	if grep -q "^CLOSED 0\|^error" <<<"$out" &&
		[ "$(metric 'edge_proxy_protocol_total{result="untrusted"}')" = $((n + 1)) ]; then
		t_ok "$v: TCP route proxy_protocol: a peer outside trusted_proxies closed without a byte, counted"
	else
		t_fail "$v: untrusted on a TCP route" "$out; untrusted $n -> $(metric 'edge_proxy_protocol_total{result="untrusted"}')"
	fi

	"$EDGECTL" --socket "$SOCK" routes --json >"$T_TMP/routes.json" 2>&1
	if python3 - "$T_TMP/routes.json" "$P_TR" "$P_TRP" <<'PY'; then
import json, sys
d = json.load(open(sys.argv[1]))
tcp = {r["listen"]: r for r in d["tcp_routes"]}
a, b = tcp["127.0.0.1:" + sys.argv[2]], tcp["127.0.0.1:" + sys.argv[3]]
web = [r for r in d["routes"] if r["domain"] == "web.test"][0]
assert a["send_proxy"] == "v2" and not a["proxy_protocol"], a
assert b["send_proxy"] == "v1" and b["proxy_protocol"], b
assert web["send_proxy"] == "v2", web
PY
		t_ok "$v: edgectl routes --json: send_proxy and proxy_protocol"
	else
		t_fail "$v: edgectl routes" "$(head -c 600 "$T_TMP/routes.json")"
	fi

	# a reload to v1: the next client's connection
	conf v1
	reload_conf
	out=$(get web.test /r)
	if [ "$(ans 2 version)" = 1 ]; then
		t_ok "$v: a reload to send_proxy v1: the next client's connection begins with v1"
	else
		t_fail "$v: reload" "$out; $(tail -3 "$EDGED_LOG")"
	fi
	edged_stop 10
	edged_sanitizers_clean "$v: sanitizers"
}

run_suite "$EDGED" edged
edged_asan && run_suite "$EDGED_ASAN" asan
t_exit
