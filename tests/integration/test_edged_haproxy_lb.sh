#!/bin/bash
# test_edged_haproxy_lb.sh - edged behind Debian's HAProxy (2.6), each in
# a network namespace of its own: clients in "cli" (10.77.1.10 and up),
# HAProxy in "lb" (10.77.1.1 towards them, 10.77.2.1 towards edged, and
# forwarding, so a client can also reach edged directly), edged in "edge"
# (10.77.2.2, its backends on 127.0.0.1) with trusted_proxies =
# [ "10.77.2.1/32" ]. HAProxy's frontends: mode http with option
# forwardfor to edged's plain address; mode tcp with send-proxy (v1) and
# with send-proxy-v2 to its proxy_protocol address; mode tcp with
# send-proxy-v2 to a TCP route (proxy_protocol = true, send_proxy = "v2")
# whose backend is tests/tools/pp_backend.py echo. HTTP goes to an
# ip_hash environment of two tests/tools/echo_backend.py, in a project
# with ip_block = [ "10.77.1.11/32" ], under ratelimit 1/m, burst 20:
#   - through each of the three HTTP paths, the backend's X-Client-IP and
#     the analytics record's client_ip (found by the request's
#     X-Request-ID) are the client's own address, not HAProxy's; its
#     X-Forwarded-For HAProxy's with 10.77.2.1 appended (forwardfor), the
#     client alone (PROXY header);
#   - the project's ip_block: 10.77.1.11 gets 403 on each path (analytics:
#     ip_denied, its own client_ip), 10.77.1.10 200;
#   - the rate limit is per real client: one driven past its burst gets
#     429 (on every path), another still 200, though HAProxy's one
#     address made far more requests than the burst;
#   - ip_hash: 24 clients, each through all three paths, each always on
#     the same backend, and not all of them on one (the hash is keyed per
#     process, so no fixed set of addresses is sure to split: 24 clients
#     all on one of two backends is a chance of 1 in 8 million);
#   - a client going around HAProxy (direct, through lb's forwarding):
#     to the proxy_protocol address with a forged PROXY header, closed
#     without a byte (a FIN or a reset) and counted
#     (edge_proxy_protocol_total{result="untrusted"}); to the plain address with a forged X-Forwarded-For,
#     X-Client-IP and X-Forwarded-For its own address;
#   - the TCP route through send-proxy-v2: the backend's PROXY v2 header
#     (its "PP" line, its log) names the client, and 4 MiB of random
#     bytes come back whole (SHA-256 both ways): under splice = "auto"
#     (the log's self-test line), then under edgectl splice on, the data
#     sent only once edgectl splice shows the tunnel in the kernel, and
#     the analytics record's mover says the kernel moved it;
#   - edged exits 0 on SIGTERM, no sanitizer report.
# Runs against build/edged and build/asan/edged. Needs root (namespaces,
# the sockmap program).
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/lib_edged.sh
. "$(dirname "$0")/../lib_edged.sh"
HAPROXY=${HAPROXY:-/usr/sbin/haproxy}
edged_begin curl python3 nsenter ip ss "$HAPROXY"
t_require_root
edged_need_build

NS_CLI="edge-lbc-$T_ID"
NS_LB="edge-lbl-$T_ID"
NS_EDGE="edge-lbe-$T_ID"
LB_CLI=10.77.1.1 # HAProxy's address towards the clients
LB_EDGE=10.77.2.1
EDGE=10.77.2.2
# fixed ports: the namespaces are the test's own
P_PLAIN=8080 # edged, no header
P_EDGE=$P_PLAIN
P_PP=8081    # edged, proxy_protocol = true
P_TUN=9000   # edged, the TCP route
P_ADMIN=9090
B_ONE=9101
B_TWO=9102
B_PP=9103
F_XFF=8001 # HAProxy: mode http, option forwardfor -> P_PLAIN
F_PP1=8002 # mode tcp, send-proxy -> P_PP
F_PP2=8003 # mode tcp, send-proxy-v2 -> P_PP
F_TUN=8004 # mode tcp, send-proxy-v2 -> P_TUN
C_OK=10.77.1.10
C_BLOCKED=10.77.1.11
C_DIRECT=10.77.1.12
C_RATE=10.77.1.13
C_RATE2=10.77.1.14
C_TUN=10.77.1.20
HASHED=() # the ip_hash clients
for ((i = 100; i < 124; i++)); do
	HASHED+=("10.77.1.$i")
done
SOCK="$T_TMP/edged.sock"
CLIENT="$T_TMP/lb_client.py"
chmod 755 "$T_TMP"

in_cli() { nsenter --net="/run/netns/$NS_CLI" "$@"; }
in_lb() { nsenter --net="/run/netns/$NS_LB" "$@"; }
in_edge() { nsenter --net="/run/netns/$NS_EDGE" "$@"; }

# listening NS PORT: 0 once something listens on PORT in namespace NS
# (up to 30 s)
listening() {
	local i
	for ((i = 0; i < 600; i++)); do
		nsenter --net="/run/netns/$1" ss -Hltn "sport = :$2" | grep -q . && return 0
		sleep 0.05
	done
	return 1
}

# setup_net: the three namespaces, two veth pairs, addresses and routes
setup_net() {
	local a
	t_netns "$NS_CLI" && t_netns "$NS_LB" && t_netns "$NS_EDGE" || return 1
	ip link add lbc0 netns "$NS_CLI" type veth peer name lbl0 netns "$NS_LB" &&
		ip link add lbl1 netns "$NS_LB" type veth peer name lbe0 netns "$NS_EDGE" || return 1
	for a in "$C_OK" "$C_BLOCKED" "$C_DIRECT" "$C_RATE" "$C_RATE2" "$C_TUN" "${HASHED[@]}"; do
		ip -n "$NS_CLI" addr add "$a/24" dev lbc0 || return 1
	done
	ip -n "$NS_LB" addr add "$LB_CLI/24" dev lbl0 &&
		ip -n "$NS_LB" addr add "$LB_EDGE/24" dev lbl1 &&
		ip -n "$NS_EDGE" addr add "$EDGE/24" dev lbe0 || return 1
	for a in "$NS_CLI lbc0" "$NS_LB lbl0" "$NS_LB lbl1" "$NS_EDGE lbe0"; do
		# shellcheck disable=SC2086 # "NS DEV"
		set -- $a
		ip -n "$1" link set lo up && ip -n "$1" link set "$2" up || return 1
	done
	ip -n "$NS_CLI" route add 10.77.2.0/24 via "$LB_CLI" &&
		ip -n "$NS_EDGE" route add 10.77.1.0/24 via "$LB_EDGE" &&
		in_lb sysctl -qw net.ipv4.ip_forward=1
}

write_client() {
	cat >"$CLIENT" <<'PY'
"""The clients, run in the cli namespace.

  http        lines "SRC DST PORT REQUEST_ID [XFF]" on stdin: a GET each
              (Connection: close) from SRC; a JSON line each out: status,
              backend, x-client-ip, x-forwarded-for
  forge SRC DST PORT
              a forged PROXY v1 header and a GET: "CLOSED N" (the peer
              closed after N bytes), "RESET N", or the status line
  tunnel SRC DST PORT NBYTES [GOFILE]
              reads the backend's "PP ..." line (printed at once), waits
              for GOFILE to exist when given, then sends NBYTES random
              bytes while reading the echo, then its EOF; prints a JSON
              line: pp, sent, got, sha_sent, sha_got
"""
import hashlib, json, os, socket, sys, threading, time


def conn(src, dst, port):
    s = socket.socket()
    s.settimeout(60)
    s.bind((src, 0))
    s.connect((dst, int(port)))
    return s


def read_all(s):
    got = b""
    while True:
        d = s.recv(65536)
        if not d:
            return got
        got += d


def http():
    for line in sys.stdin:
        f = line.split()
        if not f:
            continue
        src, dst, port, rid = f[:4]
        out = {"src": src, "port": int(port), "rid": rid, "status": 0}
        try:
            s = conn(src, dst, port)
            h = ("GET /lb HTTP/1.1\r\nHost: lb.test\r\nX-Request-ID: %s\r\n"
                 "Connection: close\r\n" % rid)
            if len(f) > 4:
                h += "X-Forwarded-For: %s\r\n" % f[4]
            s.sendall((h + "\r\n").encode())
            got = read_all(s)
            s.close()
            head, _, body = got.partition(b"\r\n\r\n")
            if head.startswith(b"HTTP/"):
                out["status"] = int(head.split(b" ")[1])
            d = json.loads(body)
            hd = {k.lower(): v for k, v in d.get("headers", [])}
            out.update(backend=d.get("backend"),
                       client_ip=hd.get("x-client-ip"),
                       xff=hd.get("x-forwarded-for"))
        except (OSError, ValueError) as e:
            out["error"] = str(e)
        print(json.dumps(out), flush=True)


def forge(src, dst, port):
    s = conn(src, dst, port)
    s.sendall(b"PROXY TCP4 203.0.113.9 %s 40000 %s\r\n" % (
        dst.encode(), port.encode()) +
        b"GET / HTTP/1.1\r\nHost: lb.test\r\nConnection: close\r\n\r\n")
    got = b""
    try:
        while True:
            d = s.recv(65536)
            if not d:
                break
            got += d
    except ConnectionResetError:
        print("RESET %d" % len(got))
        return
    if got.startswith(b"HTTP/"):
        print(got.split(b"\r\n")[0].decode())
    else:
        print("CLOSED %d" % len(got))


def tunnel(src, dst, port, n, go=None):
    s = conn(src, dst, port)
    line = b""
    while not line.endswith(b"\n"):
        d = s.recv(1)
        if not d:
            break
        line += d
    print(line.decode().strip(), flush=True)
    if go:
        end = time.monotonic() + 60
        while not os.path.exists(go) and time.monotonic() < end:
            time.sleep(0.02)
    data = os.urandom(int(n))
    res = {"pp": line.decode().strip(), "sent": len(data),
           "sha_sent": hashlib.sha256(data).hexdigest()}

    def send():
        for i in range(0, len(data), 65536):
            s.sendall(data[i:i + 65536])
        s.shutdown(socket.SHUT_WR)

    t = threading.Thread(target=send)
    t.start()
    h, got = hashlib.sha256(), 0
    try:
        while True:
            d = s.recv(262144)
            if not d:
                break
            h.update(d)
            got += len(d)
    except OSError as e:
        res["error"] = str(e)
    t.join()
    res.update(got=got, sha_got=h.hexdigest())
    print(json.dumps(res), flush=True)


if __name__ == "__main__":
    a = sys.argv[1:]
    {"http": http, "forge": forge, "tunnel": tunnel}[a[0]](*a[1:])
PY
}

write_haproxy() {
	cat >"$T_TMP/haproxy.cfg" <<CONF
global
  maxconn 1000

defaults
  timeout connect 10s
  timeout client 120s
  timeout server 120s

frontend xff
  mode http
  bind $LB_CLI:$F_XFF
  option forwardfor
  # a connection to edged per request: none left idle in a pool across
  # edged's restart
  option http-server-close
  default_backend edge_plain

backend edge_plain
  mode http
  server edged $EDGE:$P_PLAIN

frontend pp1
  mode tcp
  bind $LB_CLI:$F_PP1
  default_backend edge_pp1

backend edge_pp1
  mode tcp
  server edged $EDGE:$P_PP send-proxy

frontend pp2
  mode tcp
  bind $LB_CLI:$F_PP2
  default_backend edge_pp2

backend edge_pp2
  mode tcp
  server edged $EDGE:$P_PP send-proxy-v2

frontend tun
  mode tcp
  bind $LB_CLI:$F_TUN
  default_backend edge_tun

backend edge_tun
  mode tcp
  server edged $EDGE:$P_TUN send-proxy-v2
CONF
}

write_edged_conf() {
	{
		edged_conf_head "$P_ADMIN" "$SOCK" | sed '/^listen = /d'
		cat <<CONF
listen = ( "$EDGE:$P_PLAIN", { address = "$EDGE:$P_PP"; proxy_protocol = true; } );
trusted_proxies = [ "$LB_EDGE/32" ];
analytics = { file = "$T_TMP/requests.jsonl"; };
ratelimit = { rate = "1/m"; burst = 20; };
tcp_routes = ( { listen = "$EDGE:$P_TUN"; environment = "tun"; proxy_protocol = true; send_proxy = "v2"; } );
projects = ( { id = "lb"; ip_block = [ "$C_BLOCKED/32" ];
  environments = (
    { id = "web"; domains = [ "lb.test" ];
      deployment = { id = "web-1"; balance = "ip_hash";
        upstreams = [ "127.0.0.1:$B_ONE", "127.0.0.1:$B_TWO" ]; }; },
    { id = "tun"; domains = [ "tun.test" ];
      deployment = { id = "tun-1"; upstreams = [ "127.0.0.1:$B_PP" ]; }; } ); } );
CONF
	} >"$T_TMP/edge.conf"
}

# start_bg NS LOG CMD...: CMD in namespace NS in the background, killed at
# exit (nsenter execs it: $! is CMD's own PID)
start_bg() {
	local ns=$1 log=$2
	shift 2
	nsenter --net="/run/netns/$ns" "$@" >"$log" 2>&1 &
	edged_track $!
}

# start_edged BIN: edged in the edge namespace (nsenter execs it: EPID is
# edged's own PID); 0 once it said "serving on"
start_edged() {
	local i
	: >"$EDGED_LOG" # now: the last run's "serving on" is not this one's
	nsenter --net="/run/netns/$NS_EDGE" "$1" -c "$T_TMP/edge.conf" -f >"$EDGED_LOG" 2>&1 &
	EPID=$!
	edged_track "$EPID"
	for ((i = 0; i < 600; i++)); do
		grep -q "serving on" "$EDGED_LOG" && return 0
		kill -0 "$EPID" 2>/dev/null || return 1
		sleep 0.05
	done
	return 1
}

metric() {
	in_edge curl -s -m 10 "http://127.0.0.1:$P_ADMIN/metrics" |
		awk -v k="$1" '$1 == k { v = $2 } END { print v + 0 }'
}

# analytics_wait RID...: 0 once the analytics file has a record of each
# request id (up to 30 s: the writer thread is behind the workers)
analytics_wait() {
	local i
	for ((i = 0; i < 600; i++)); do
		python3 - "$T_TMP/requests.jsonl" "$@" <<'PY' && return 0
import json, sys
have = set()
for line in open(sys.argv[1]):
    try:
        have.add(json.loads(line).get("request_id"))
    except ValueError:
        pass
sys.exit(0 if set(sys.argv[2:]) <= have else 1)
PY
		sleep 0.05
	done
	return 1
}

# record RID KEY: field KEY of the analytics record of request id RID
record() {
	python3 - "$T_TMP/requests.jsonl" "$1" "$2" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    try:
        d = json.loads(line)
    except ValueError:  # a line the writer has not finished
        continue
    if d.get("request_id") == sys.argv[2]:
        print(d.get(sys.argv[3]))
        break
PY
}

# result FILE RID KEY: field KEY of the client's answer for request RID
result() {
	python3 - "$@" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    d = json.loads(line)
    if d["rid"] == sys.argv[2]:
        print(d.get(sys.argv[3]))
        break
PY
}

path_name() {
	case $1 in
	"$F_XFF") echo "forwardfor" ;;
	"$F_PP1") echo "send-proxy" ;;
	"$F_PP2") echo "send-proxy-v2" ;;
	esac
}

# run_tunnel V NAME [GO]: the client's 4 MiB through HAProxy's F_TUN from
# C_TUN, its output in $T_TMP/V-NAME.tun; with GO, the data waits for
# that file. Sets TPID.
run_tunnel() {
	nsenter --net="/run/netns/$NS_CLI" python3 "$CLIENT" tunnel "$C_TUN" "$LB_CLI" "$F_TUN" $((4 << 20)) ${3:+"$3"} \
		>"$T_TMP/$1-$2.tun" 2>&1 &
	TPID=$!
	edged_track "$TPID"
}

# tunnel_ok V NAME: "ok: ..." when the tunnel's output shows the backend's
# PP line naming C_TUN in a v2 header and the bytes whole both ways,
# else why not
tunnel_ok() {
	python3 - "$T_TMP/$1-$2.tun" "$C_TUN" <<'PY'
import json, sys
lines = open(sys.argv[1]).read().splitlines()
try:
    r = json.loads(lines[-1])
    pp = json.loads(r["pp"][3:]) if r["pp"].startswith("PP ") else {}
except (ValueError, IndexError, KeyError):
    print("client: " + " | ".join(lines)[-300:])
    sys.exit(0)
bad = []
if pp.get("version") != 2 or pp.get("command") != "PROXY" or pp.get("src") != sys.argv[2]:
    bad.append("PP line " + r["pp"][:200])
if r["got"] != r["sent"] or r["sha_got"] != r["sha_sent"] or "error" in r:
    bad.append("sent %d (%s...), got %d (%s...) %s" % (
        r["sent"], r["sha_sent"][:12], r["got"], r["sha_got"][:12],
        r.get("error", "")))
print("; ".join(bad) if bad else "ok: sha256 %s... both ways" % r["sha_sent"][:16])
PY
}

# tunnel_record KEY: field KEY of the analytics file's last tunnel record
tunnel_record() {
	python3 - "$T_TMP/requests.jsonl" "$1" <<'PY'
import json, sys
last = None
for line in open(sys.argv[1]):
    try:
        d = json.loads(line)
    except ValueError:  # a line the writer has not finished
        continue
    if d.get("kind") == "tunnel":
        last = d
print(last.get(sys.argv[2]) if last else "")
PY
}

# tunnels_recorded: the analytics file's tunnel records
tunnels_recorded() { grep -c '"kind":"tunnel"' "$T_TMP/requests.jsonl"; }

# wait_tunnels N: 0 once the analytics file has N tunnel records (30 s)
wait_tunnels() {
	local i
	for ((i = 0; i < 600; i++)); do
		[ "$(tunnels_recorded)" -ge "$1" ] && return 0
		sleep 0.05
	done
	return 1
}

splice_field() {
	in_edge "$EDGECTL" --socket "$SOCK" splice --json 2>/dev/null | json_field - "$1"
}

run_suite() {
	local bin=$1 v=$2 port rid c st ip want out n0 i s1 s2 ok200 n429
	: >"$T_TMP/requests.jsonl"
	: >"$T_TMP/pp.jsonl"
	if ! start_edged "$bin"; then
		t_fail "$v: edged starts" "$(tail -5 "$EDGED_LOG")"
		return
	fi
	if ! listening "$NS_EDGE" "$P_TUN"; then
		t_fail "$v: edged listens" "$(tail -5 "$EDGED_LOG")"
		return
	fi

	# the three HTTP paths: C_OK, C_BLOCKED, and the ip_hash clients each
	# through all three
	for port in "$F_XFF" "$F_PP1" "$F_PP2"; do
		for c in "$C_OK" "$C_BLOCKED" "${HASHED[@]}"; do
			echo "$c $LB_CLI $port $v-$port-$c"
		done
	done >"$T_TMP/$v-jobs"
	# around HAProxy, a forged X-Forwarded-For
	echo "$C_DIRECT $EDGE $P_PLAIN $v-direct 203.0.113.9" >>"$T_TMP/$v-jobs"
	in_cli python3 "$CLIENT" http <"$T_TMP/$v-jobs" >"$T_TMP/$v-http.jsonl" 2>&1
	analytics_wait "$v-direct" "$v-$F_XFF-$C_OK" "$v-$F_PP1-$C_OK" "$v-$F_PP2-$C_OK" \
		"$v-$F_XFF-$C_BLOCKED" "$v-$F_PP1-$C_BLOCKED" "$v-$F_PP2-$C_BLOCKED"

	for port in "$F_XFF" "$F_PP1" "$F_PP2"; do
		rid="$v-$port-$C_OK"
		# X-Forwarded-For: HAProxy's kept, its address appended; from a
		# PROXY header, the client alone
		want=$C_OK
		[ "$port" = "$F_XFF" ] && want="$C_OK, $LB_EDGE"
		st=$(result "$T_TMP/$v-http.jsonl" "$rid" status)
		ip=$(result "$T_TMP/$v-http.jsonl" "$rid" client_ip)
		c=$(result "$T_TMP/$v-http.jsonl" "$rid" xff)
		if [ "$st" = 200 ] && [ "$ip" = "$C_OK" ] && [ "$c" = "$want" ]; then
			t_ok "$v: HAProxy $(path_name "$port"): 200, the backend's X-Client-IP the client's ($C_OK), X-Forwarded-For '$want'"
		else
			t_fail "$v: HAProxy $(path_name "$port"): X-Client-IP" "status '$st', X-Client-IP '$ip', X-Forwarded-For '$c': $(grep -F "\"$rid\"" "$T_TMP/$v-http.jsonl" | head -c 300)"
		fi
		ip=$(record "$rid" client_ip)
		if [ "$ip" = "$C_OK" ]; then
			t_ok "$v: HAProxy $(path_name "$port"): analytics' client_ip $C_OK"
		else
			t_fail "$v: HAProxy $(path_name "$port"): analytics' client_ip" "'$ip', want $C_OK"
		fi
		rid="$v-$port-$C_BLOCKED"
		c="$(result "$T_TMP/$v-http.jsonl" "$rid" status) $(record "$rid" outcome) $(record "$rid" client_ip)"
		if [ "$st" = 200 ] && [ "$c" = "403 ip_denied $C_BLOCKED" ]; then
			t_ok "$v: HAProxy $(path_name "$port"): ip_block: $C_BLOCKED 403 ip_denied, $C_OK 200"
		else
			t_fail "$v: HAProxy $(path_name "$port"): ip_block" "$C_BLOCKED: status, outcome, client_ip '$c'; $C_OK: '$st'"
		fi
	done

	# ip_hash: each client on one backend whichever path, and not all on one
	if out=$(python3 - "$T_TMP/$v-http.jsonl" "${HASHED[@]}" <<'PY'
import json, sys
by = {}
for line in open(sys.argv[1]):
    d = json.loads(line)
    if d["src"] in sys.argv[2:]:
        by.setdefault(d["src"], []).append(d)
bad = []
for c in sys.argv[2:]:
    rs = by.get(c, [])
    if len(rs) != 3 or any(r["status"] != 200 or r.get("client_ip") != c for r in rs):
        bad.append("%s: %s" % (c, [(r["port"], r["status"], r.get("client_ip")) for r in rs]))
    elif len({r.get("backend") for r in rs}) != 1:
        bad.append("%s on %s" % (c, [(r["port"], r.get("backend")) for r in rs]))
if bad:
    print("; ".join(bad)[:400])
    sys.exit(1)
per = {}
for c in sys.argv[2:]:
    per.setdefault(by[c][0]["backend"], []).append(c)
if len(per) < 2:
    print("all %d clients on %s" % (len(sys.argv) - 2, list(per)))
    sys.exit(1)
print(", ".join("%d on %s" % (len(v), k) for k, v in sorted(per.items())))
PY
	); then
		t_ok "$v: ip_hash by the real client: each of ${#HASHED[@]} on one backend through all three paths ($out)"
	else
		t_fail "$v: ip_hash by the real client" "$out"
	fi

	# around HAProxy: a forged X-Forwarded-For is not believed
	ip=$(result "$T_TMP/$v-http.jsonl" "$v-direct" client_ip)
	want=$(result "$T_TMP/$v-http.jsonl" "$v-direct" xff)
	if [ "$ip" = "$C_DIRECT" ] && [ "$want" = "$C_DIRECT" ] &&
		[ "$(record "$v-direct" client_ip)" = "$C_DIRECT" ]; then
		t_ok "$v: direct, a forged X-Forwarded-For: X-Client-IP, X-Forwarded-For and client_ip its own ($C_DIRECT)"
	else
		t_fail "$v: direct, a forged X-Forwarded-For" "X-Client-IP '$ip', X-Forwarded-For '$want', client_ip '$(record "$v-direct" client_ip)'"
	fi

	# around HAProxy: a forged PROXY header
	n0=$(metric 'edge_proxy_protocol_total{result="untrusted"}')
	out=$(in_cli python3 "$CLIENT" forge "$C_DIRECT" "$EDGE" "$P_PP" 2>&1)
	for ((i = 0; i < 600; i++)); do
		[ "$(metric 'edge_proxy_protocol_total{result="untrusted"}')" -gt "$n0" ] && break
		sleep 0.05
	done
	n=$(metric 'edge_proxy_protocol_total{result="untrusted"}')
	# closed at once: a FIN, or a reset when the header was in edged's
	# receive queue by then (a close with bytes unread), as it is when
	# the accept comes late
	if { [ "$out" = "CLOSED 0" ] || [ "$out" = "RESET 0" ]; } && [ "$n" = $((n0 + 1)) ]; then
		t_ok "$v: direct, a forged PROXY header: closed without a byte ($out), counted untrusted"
	else
		t_fail "$v: direct, a forged PROXY header" "client: '$out'; untrusted $n (was $n0)"
	fi

	# the rate limit: C_RATE past its burst of 20, C_RATE2 still served
	for ((i = 0; i < 25; i++)); do
		echo "$C_RATE $LB_CLI $F_XFF $v-rate-$i"
	done >"$T_TMP/$v-rjobs"
	{
		echo "$C_RATE $LB_CLI $F_PP1 $v-rate-pp1"
		echo "$C_RATE $LB_CLI $F_PP2 $v-rate-pp2"
		echo "$C_RATE2 $LB_CLI $F_XFF $v-rate2-xff"
		echo "$C_RATE2 $LB_CLI $F_PP2 $v-rate2-pp2"
	} >>"$T_TMP/$v-rjobs"
	in_cli python3 "$CLIENT" http <"$T_TMP/$v-rjobs" >"$T_TMP/$v-rate.jsonl" 2>&1
	ok200=$(grep -F "\"src\": \"$C_RATE\"" "$T_TMP/$v-rate.jsonl" | grep -c '"status": 200')
	n429=$(grep -F "\"src\": \"$C_RATE\"" "$T_TMP/$v-rate.jsonl" | grep -c '"status": 429')
	s1=$(result "$T_TMP/$v-rate.jsonl" "$v-rate-pp2" status)
	s2="$(result "$T_TMP/$v-rate.jsonl" "$v-rate2-xff" status) $(result "$T_TMP/$v-rate.jsonl" "$v-rate2-pp2" status)"
	if [ "$ok200" -ge 20 ] && [ "$ok200" -le 22 ] && [ $((ok200 + n429)) = 27 ] &&
		[ "$s1" = 429 ] && [ "$s2" = "200 200" ]; then
		t_ok "$v: ratelimit per real client: $C_RATE $ok200 served then 429 (send-proxy-v2 too), $C_RATE2 200 through the same HAProxy"
	else
		t_fail "$v: ratelimit per real client" "$C_RATE: $ok200 200, $n429 429, last '$s1'; $C_RATE2: '$s2'"
	fi

	# the TCP route through send-proxy-v2, splice = "auto"
	if grep -q 'splice: sockmap self-test passed; splice = auto' "$EDGED_LOG"; then
		t_ok "$v: splice = auto, the kernel path usable (self-test passed)"
	else
		t_fail "$v: splice auto" "$(grep -m2 'splice' "$EDGED_LOG")"
	fi
	run_tunnel "$v" auto
	wait "$TPID"
	out=$(tunnel_ok "$v" auto)
	wait_tunnels 1
	case $out in
	ok:*) t_ok "$v: TCP route via send-proxy-v2, splice auto: the backend's v2 header names $C_TUN, 4 MiB echoed whole (${out#ok: }, mover $(tunnel_record mover))" ;;
	*) t_fail "$v: TCP route via send-proxy-v2, splice auto" "$out" ;;
	esac
	if [ "$(tunnel_record client_ip)" = "$C_TUN" ] &&
		grep -q "\"src\": \"$C_TUN\"" "$T_TMP/pp.jsonl"; then
		t_ok "$v: TCP route: analytics' client_ip and the backend's log name $C_TUN"
	else
		t_fail "$v: TCP route client" "client_ip '$(tunnel_record client_ip)'; backend log: $(head -c 200 "$T_TMP/pp.jsonl")"
	fi

	# again under edgectl splice on: the data sent once the tunnel is in
	# the kernel
	if ! in_edge "$EDGECTL" --socket "$SOCK" splice on >"$T_TMP/out" 2>&1; then
		t_fail "$v: edgectl splice on" "$(head -c 200 "$T_TMP/out")"
	else
		s1=$(splice_field spliced)
		rm -f "$T_TMP/go"
		run_tunnel "$v" sockmap "$T_TMP/go"
		for ((i = 0; i < 600; i++)); do
			[ "$(splice_field open_spliced)" = 1 ] && break
			sleep 0.05
		done
		s2=$(splice_field open_spliced)
		touch "$T_TMP/go"
		wait "$TPID"
		out=$(tunnel_ok "$v" sockmap)
		wait_tunnels 2
		st=$(tunnel_record mover)
		case $out in
		ok:*)
			if [ "$s2" = 1 ] && [[ "$st" == *sockmap* ]] &&
				[ "$(splice_field spliced)" -gt "${s1:-0}" ]; then
				t_ok "$v: TCP route via send-proxy-v2, splice on: in the kernel, 4 MiB echoed whole (${out#ok: }, mover $st)"
			else
				t_fail "$v: TCP route, splice on: moved by the kernel" "open_spliced '$s2' before the data, mover '$st', spliced $(splice_field spliced) (was $s1)"
			fi
			;;
		*) t_fail "$v: TCP route via send-proxy-v2, splice on" "$out" ;;
		esac
	fi

	edged_stop 20
	st=$?
	if edged_sanitizers_clean "$v: sanitizers silent"; then
		if [ "$st" = 0 ]; then
			t_ok "$v: no sanitizer report, exit 0 on SIGTERM"
		else
			t_fail "$v: edged's exit" "status $st: $(tail -3 "$EDGED_LOG")"
		fi
	fi
}

if ! setup_net; then
	t_fail "namespaces and veths set up"
	t_exit
	exit
fi
write_client
write_haproxy
write_edged_conf
start_bg "$NS_EDGE" "$T_TMP/b1.log" python3 "$TOOLS/echo_backend.py" "$B_ONE" "$T_TMP/b1.jsonl" one
start_bg "$NS_EDGE" "$T_TMP/b2.log" python3 "$TOOLS/echo_backend.py" "$B_TWO" "$T_TMP/b2.jsonl" two
start_bg "$NS_EDGE" "$T_TMP/bpp.log" python3 "$TOOLS/pp_backend.py" --log "$T_TMP/pp.jsonl" "$B_PP" echo
start_bg "$NS_LB" "$T_TMP/haproxy.log" "$HAPROXY" -f "$T_TMP/haproxy.cfg" -db
if ! listening "$NS_EDGE" "$B_ONE" || ! listening "$NS_EDGE" "$B_TWO" ||
	! listening "$NS_EDGE" "$B_PP"; then
	t_fail "backends start" "$(tail -3 "$T_TMP"/b*.log)"
	t_exit
	exit
fi
if ! listening "$NS_LB" "$F_TUN"; then
	t_fail "HAProxy starts" "$(tail -5 "$T_TMP/haproxy.log")"
	t_exit
	exit
fi

run_suite "$EDGED" edged
edged_asan && run_suite "$EDGED_ASAN" asan
t_exit
