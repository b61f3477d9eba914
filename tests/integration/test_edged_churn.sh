#!/bin/bash
# test_edged_churn.sh - tunnels opened and closed one after another as
# fast as they go: build/tools/churn_client against build/tools/
# churn_backend through edged (no python in the path), both kinds (an
# HTTP/1.1 Upgrade answered 101, a TCP route's connection), each tunnel
# moving 4 KiB both ways, every byte checked, then closed. Counting, not
# timing: every tunnel the client opened is either whole or one of
# edged's documented refusals, each counted by edged with the same count
# (edge_requests_total by outcome), and nothing is reset: edged's tunnel
# ends (edge_tunnels_ended_total) are all "closed", and the namespace's
# TCP counters show no socket closed with unread bytes (TCPAbortOnClose).
#   - splice = "off", then "auto" (edgectl splice): all whole;
#   - a backend that accepts 150 connections a second with a backlog of
#     8 (its SYNs dropped past that), timeouts.upstream_connect 1 s,
#     limits.max_connections 48 and max_inflight 16: the upgrade's
#     refusals are 502 upstream_unavailable, 503 connection_limit and
#     overloaded, each logged (rate-limited), the TCP route's are closed
#     without a byte (an EOF, not a reset: edged reads what the client
#     sent before it closes);
#   - a backend that resets each connection: every tunnel counted as
#     ended by the upstream's error (edge_tunnels_ended_total, edgectl
#     status);
#   - edged's own ports to the backend running out (the namespace's
#     ip_local_port_range cut to 200 ports, tcp_tw_reuse 0, the client
#     from 50 source addresses): 502 upstream_unavailable, counted.
# Runs against build/edged and build/asan/edged (fewer tunnels in
# flight). Needs root: each build runs in a network namespace of its own
# (the kernel's counters and sysctls are the namespace's), and splice
# auto loads the BPF program.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/lib_edged.sh
. "$(dirname "$0")/../lib_edged.sh"
edged_begin curl python3 nsenter ss sysctl
t_require_root
edged_need_build
CLIENT=$B/tools/churn_client
BACKEND=$B/tools/churn_backend
for t in "$CLIENT" "$BACKEND"; do
	if [ ! -x "$t" ]; then
		t_skip "$(basename "$0")" "$t not built (make)"
		exit 77
	fi
done

# fixed ports: the namespace is the test's own
P_EDGE=8080
P_ADMIN=8081
P_TCP=8082
B_UP=9001
B_ECHO=9002
SECS=${EDGE_CHURN_SECONDS:-2}

# nsx CMD...: CMD in the build's namespace (nsenter execs it: with &, $!
# is CMD's own PID)
nsx() { nsenter --net="/run/netns/$NS" "$@"; }

new_ns() { # NAME: a namespace with lo up and no SYN cookies
	NS=$1
	t_netns "$NS" || return 1
	ip -n "$NS" link set lo up
	# the backend's SYNs dropped past its backlog, never answered with
	# cookies: a cookie's connection the backend later resets is the
	# harness's artefact (edged counts it: upstream_bad_response, a
	# tunnel's upstream_error), not what these cases count
	nsx sysctl -qw net.ipv4.tcp_syncookies=0
}

write_conf() { # FILE SPLICE [EXTRA]
	{
		edged_conf_head "$P_ADMIN" "$T_TMP/edged.sock"
		cat <<CONF
splice = "$2";
${3:-}
tcp_routes = ( { listen = "127.0.0.1:$P_TCP"; environment = "echo"; } );
projects = (
  { id = "churn";
    environments = (
      { id = "up"; domains = [ "churn.test" ];
        deployment = { id = "up-1"; upstreams = [ "127.0.0.1:$B_UP" ]; }; },
      { id = "echo"; domains = [ "echo.test" ];
        deployment = { id = "echo-1"; upstreams = [ "127.0.0.1:$B_ECHO" ]; }; }
    );
  }
);
CONF
	} >"$1"
}

listening() { # PORT: 0 once something listens on it in the namespace
	local i
	for ((i = 0; i < 200; i++)); do
		nsx ss -Hltn "sport = :$1" | grep -q . && return 0
		sleep 0.05
	done
	return 1
}

start_backend() { # [ARGS...]
	nsenter --net="/run/netns/$NS" "$BACKEND" --upgrade "$B_UP" --echo "$B_ECHO" "$@" >"$T_TMP/backend.json" &
	BPID=$!
	edged_track "$BPID"
	listening "$B_ECHO"
}

stop_backend() {
	kill "$BPID" 2>/dev/null
	wait "$BPID" 2>/dev/null
}

start_edged() { # BIN SPLICE [EXTRA]
	local i
	write_conf "$T_TMP/edge.conf" "$2" "${3:-}"
	: >"$EDGED_LOG" # now: the last run's "serving on" is not this one's
	nsenter --net="/run/netns/$NS" "$1" -c "$T_TMP/edge.conf" -f >"$EDGED_LOG" 2>&1 &
	EPID=$!
	edged_track "$EPID"
	for ((i = 0; i < 600; i++)); do
		grep -q "serving on" "$EDGED_LOG" && return 0
		kill -0 "$EPID" 2>/dev/null || return 1
		sleep 0.05
	done
	return 1
}

# snap NAME: edged's metrics and the namespace's TCP counters now, in
# $T_TMP/NAME.metrics and NAME.net
snap() {
	nsx curl -s "http://127.0.0.1:$P_ADMIN/metrics" >"$T_TMP/$1.metrics"
	nsx cat /proc/net/netstat /proc/net/snmp >"$T_TMP/$1.net"
}

# churn NAME MODE [CLIENT ARGS...]: the client for $SECS s between two
# snapshots; its JSON in $T_TMP/NAME.json
churn() {
	local name=$1 mode=$2 port=$P_EDGE
	shift 2
	[ "$mode" = tcp ] && port=$P_TCP
	snap "$name.0"
	nsx "$CLIENT" --port "$port" --mode "$mode" --seconds "$SECS" \
		--timeout-ms 30000 --failures "$T_TMP/$name.failures" "$@" \
		>"$T_TMP/$name.json" 2>"$T_TMP/$name.err"
	snap "$name.1"
}

# verdict NAME REFUSALS [unread]: check run NAME (churn) and say ok or
# why not. REFUSALS: the outcomes edged may refuse with, comma-separated
# (empty: none; then every tunnel must be whole). Without "unread", no
# socket in the namespace may have been reset (closed with bytes unread,
# bytes meeting a closed socket: the kernel's counters); with it, the
# kernel may have reset some after the refusal was read: a connection
# over limits.max_connections is answered and closed at once (conn.c),
# and a request head that arrives after that meets a reset, behind the
# 503 the client reads.
verdict() {
	python3 - "$T_TMP" "$1" "$2" "${3:-}" <<'PY'
import json, re, sys

tmp, name, refusals, unread = sys.argv[1:5]
allowed = [r for r in refusals.split(",") if r]
c = json.load(open(f"{tmp}/{name}.json"))

def metrics(path):
    out = {}
    for line in open(path):
        m = re.match(r'^(edge_requests_total|edge_tunnels_ended_total)'
                     r'\{(?:outcome|end)="([a-z_]+)"\} (\d+)', line)
        if m:
            out[(m.group(1), m.group(2))] = int(m.group(3))
    return out

def net(path):
    vals, lines = {}, open(path).read().split("\n")
    for a, b in zip(lines, lines[1:]):
        ka, kb = a.split(), b.split()
        # a header line ("TcpExt: Name ...") and its values' line
        if len(ka) > 1 and len(ka) == len(kb) and ka[0] == kb[0] and \
                ka[1].isalpha() and kb[1].lstrip("-").isdigit():
            for k, v in zip(ka[1:], kb[1:]):
                vals[ka[0].rstrip(":") + k] = int(v)
    return vals

m0, m1 = metrics(f"{tmp}/{name}.0.metrics"), metrics(f"{tmp}/{name}.1.metrics")
n0, n1 = net(f"{tmp}/{name}.0.net"), net(f"{tmp}/{name}.1.net")
d = {k: m1.get(k, 0) - m0.get(k, 0) for k in m1}
req = {k[1]: v for k, v in d.items() if k[0] == "edge_requests_total" and v}
ended = {k[1]: v for k, v in d.items()
         if k[0] == "edge_tunnels_ended_total" and v}
dn = lambda k: n1.get(k, 0) - n0.get(k, 0)
bad = []
outc = c["outcomes"]
ok = outc.get("ok", 0)
if c["started"] == 0 or ok == 0:
    bad.append("no tunnel was whole")
for o, n in outc.items():
    if o == "ok":
        continue
    if c["mode"] == "upgrade" and o == "http":
        continue
    if c["mode"] == "tcp" and o == "eof_before_first_byte" and allowed:
        continue
    bad.append(f"{n} {o}")
for kind, n in c["http"].items():
    status, _, reason = kind.partition(" ")
    if reason not in allowed:
        bad.append(f"{n} answered {kind}")
    elif req.get(reason, 0) != n:
        bad.append(f"{n} answered {kind} but edged counted "
                   f"{req.get(reason, 0)}")
if c["mode"] == "tcp":
    closed = outc.get("eof_before_first_byte", 0)
    counted = sum(req.get(r, 0) for r in allowed)
    if closed != counted:
        bad.append(f"{closed} closed without a byte but edged counted "
                   f"{counted} refusals ({', '.join(allowed)})")
if req.get("tunnel", 0) != ok:
    bad.append(f"{ok} whole but edged counted {req.get('tunnel', 0)} "
               f"tunnels")
others = {k: v for k, v in req.items() if k != "tunnel" and k not in allowed}
if others:
    bad.append(f"edged counted other outcomes: {others}")
if sum(req.values()) != c["started"]:
    bad.append(f"{c['started']} started, edged counted {sum(req.values())}")
if ended.get("closed", 0) != ok or set(ended) - {"closed"}:
    bad.append(f"tunnel ends {ended}, {ok} whole")
# a socket closed with bytes unread (a reset instead of the FIN), bytes
# meeting a closed socket, established connections reset
for k in [] if unread else ["TcpExtTCPAbortOnClose", "TcpExtTCPAbortOnData",
                            "TcpEstabResets"]:
    if dn(k):
        bad.append(f"{k} {dn(k)}")
if bad:
    print("; ".join(bad) + f" (client: {json.dumps(outc)} "
          f"{json.dumps(c['http'])} {c['first'][:2]})")
    sys.exit(1)
refused = {k: v for k, v in req.items() if k != "tunnel"}
print(f"{c['started']} tunnels at {c['rate']:.0f}/s: {ok} whole, "
      f"refused {refused}; kernel: {dn('TcpOutRsts')} resets sent, "
      f"{dn('TcpExtListenDrops')} SYNs dropped at a listener "
      f"({dn('TcpExtListenOverflows')} overflows), "
      f"{dn('TcpExtTCPSynRetrans')} SYNs sent again")
PY
}

# ended_by_upstream RUN: every tunnel of RUN (churn, a TCP route to a
# backend that resets) failed at the client (the end of the stream or a
# reset, before any byte came back), and edged counted each as a tunnel
# that the upstream's error ended, in /metrics and in edgectl status
# (--json and the text); says what it saw
ended_by_upstream() {
	python3 - "$T_TMP" "$1" <<'PY'
import json, re, sys

tmp, name = sys.argv[1:3]
c = json.load(open(f"{tmp}/{name}.json"))

def ends(path):
    return {m.group(1): int(m.group(2)) for m in re.finditer(
        r'^edge_tunnels_ended_total\{end="([a-z_]+)"\} (\d+)$',
        open(path).read(), re.M)}

e0, e1 = ends(f"{tmp}/{name}.0.metrics"), ends(f"{tmp}/{name}.1.metrics")
d = {k: e1[k] - e0.get(k, 0) for k in e1 if e1[k] != e0.get(k, 0)}
st = json.load(open(f"{tmp}/{name}.status"))["daemon"]["status"]["splice"][
    "ended"]
text = open(f"{tmp}/{name}.text").read()
n, bad = c["started"], []
seen = {k: v for k, v in c["outcomes"].items()
        if k not in ("eof_before_first_byte", "reset_before_first_byte")}
if n == 0 or seen:
    bad.append(f"client: {c['outcomes']}")
if d != {"upstream_error": n}:
    bad.append(f"edge_tunnels_ended_total moved {d}, {n} tunnels")
if st.get("upstream_error") != n:
    bad.append(f"status: ended {st}")
if f"{n} by an upstream error" not in text:
    bad.append("status text: " + " ".join(
        l for l in text.splitlines() if l.startswith("ended:")))
if bad:
    print("; ".join(bad))
    sys.exit(1)
print(f"{n} tunnels, client {c['outcomes']}, edged: {d}")
PY
}

# refusal_lines RUN: "ok: ..." when edged's log has a line for its
# connection_limit and overloaded refusals, far fewer lines than
# refusals (log_warnx_rl: 10 at once, then one a second); else why not
refusal_lines() {
	local cl ov ncl nov
	cl=$(grep -c 'limits.max_connections (48) reached: a connection refused' "$EDGED_LOG")
	ov=$(grep -c 'max_inflight_per_route full, the admission queue too: 503 overloaded' "$EDGED_LOG")
	ncl=$(json_field "$T_TMP/$1.json" http."503 connection_limit")
	nov=$(json_field "$T_TMP/$1.json" http."503 overloaded")
	if [ "${ncl:-0}" -gt 100 ] && [ "$cl" -ge 1 ] && [ "$cl" -lt 60 ] &&
		{ [ "${nov:-0}" = 0 ] || [ "$ov" -ge 1 ]; } && [ "$ov" -lt 60 ]; then
		echo "ok: $cl lines for ${ncl} connection_limit, $ov for ${nov:-0} overloaded"
	else
		echo "$cl lines for ${ncl:-0} connection_limit, $ov for ${nov:-0} overloaded"
	fi
}

# case_verdict CASE RUN REFUSALS [unread]: verdict RUN as test case CASE,
# its summary line kept in $T_TMP/summary
case_verdict() {
	local out
	if out=$(verdict "$2" "$3" "${4:-}"); then
		t_ok "$1"
		echo "$1: $out" >>"$T_TMP/summary"
	else
		t_fail "$1" "$out"
	fi
}

run_suite() { # BIN LABEL INFLIGHT
	local bin=$1 v=$2 k=$3 m s out
	new_ns "edge-churn-$v-$T_ID" || {
		t_fail "$v: namespace" "ip netns add failed"
		return
	}
	start_backend || {
		t_fail "$v: backend" "churn_backend did not listen"
		return
	}
	if ! start_edged "$bin" off; then
		t_fail "$v: edged starts" "$(tail -5 "$EDGED_LOG")"
		return
	fi
	for s in off auto; do
		if [ "$s" = auto ] &&
			! nsx "$EDGECTL" --socket "$T_TMP/edged.sock" splice auto >/dev/null 2>&1; then
			t_fail "$v: splice auto" "edgectl splice auto failed"
			continue
		fi
		for m in upgrade tcp; do
			churn "$v-$s-$m" "$m" --inflight "$k"
			case_verdict "$v: splice $s: $m tunnels all whole" "$v-$s-$m" ""
		done
	done
	edged_stop 10
	edged_sanitizers_clean "$v: sanitizers (churn)"
	stop_backend

	# a backend slower than the churn, and a connection cap: refusals
	start_backend --accept-rate 150 --backlog 8 || {
		t_fail "$v: slow backend" "churn_backend did not listen"
		return
	}
	if ! start_edged "$bin" off 'limits = { max_connections = 48; max_inflight = 16; };
timeouts = { upstream_connect = "1s"; };'; then
		t_fail "$v: edged starts (refusals)" "$(tail -5 "$EDGED_LOG")"
		return
	fi
	# under the cap: a TCP route's refusals are only upstream_unavailable
	churn "$v-slow-tcp" tcp --inflight 32
	case_verdict "$v: slow backend: tcp refusals closed without a byte, counted" \
		"$v-slow-tcp" upstream_unavailable
	churn "$v-slow-upgrade" upgrade --inflight 96
	case_verdict "$v: slow backend, caps: upgrade refusals 502/503, counted" \
		"$v-slow-upgrade" upstream_unavailable,connection_limit,overloaded unread
	# each refusal logged, rate-limited: a few lines for thousands
	out=$(refusal_lines "$v-slow-upgrade")
	case $out in
	ok:*) t_ok "$v: refusals logged, rate-limited (${out#ok: })" ;;
	*) t_fail "$v: refusals logged, rate-limited" "$out" ;;
	esac
	edged_stop 10
	edged_sanitizers_clean "$v: sanitizers (refusals)"
	stop_backend

	# a backend that resets each connection at its first bytes: every
	# tunnel ends by the upstream's error, counted as such
	start_backend --reset || {
		t_fail "$v: resetting backend" "churn_backend did not listen"
		return
	}
	if ! start_edged "$bin" off; then
		t_fail "$v: edged starts (resets)" "$(tail -5 "$EDGED_LOG")"
		return
	fi
	churn "$v-reset" tcp --inflight "$k" --count 500
	nsx "$EDGECTL" --socket "$T_TMP/edged.sock" status --json >"$T_TMP/$v-reset.status" 2>&1
	nsx "$EDGECTL" --socket "$T_TMP/edged.sock" status >"$T_TMP/$v-reset.text" 2>&1
	if out=$(ended_by_upstream "$v-reset"); then
		t_ok "$v: backend resets: tunnel ends counted as upstream_error"
		echo "$v: backend resets: $out" >>"$T_TMP/summary"
	else
		t_fail "$v: backend resets: tunnel ends counted as upstream_error" "$out"
	fi
	edged_stop 10
	edged_sanitizers_clean "$v: sanitizers (resets)"
	stop_backend

	# edged's connects to the backend out of local ports: 200 of them,
	# each in TIME_WAIT for 60 s after its tunnel
	nsx sysctl -qw net.ipv4.ip_local_port_range="40000 40199"
	nsx sysctl -qw net.ipv4.tcp_tw_reuse=0
	start_backend || {
		t_fail "$v: backend (ports)" "churn_backend did not listen"
		return
	}
	if ! start_edged "$bin" off; then
		t_fail "$v: edged starts (ports)" "$(tail -5 "$EDGED_LOG")"
		return
	fi
	churn "$v-ports" upgrade --inflight "$k" --sources 50 --count 3000
	if grep -q '"502 upstream_unavailable"' "$T_TMP/$v-ports.json"; then
		case_verdict "$v: out of local ports: 502 upstream_unavailable, counted" \
			"$v-ports" upstream_unavailable
	else
		t_fail "$v: out of local ports: 502 upstream_unavailable, counted" \
			"no connect ran out of ports: $(cat "$T_TMP/$v-ports.json")"
	fi
	edged_stop 10
	edged_sanitizers_clean "$v: sanitizers (ports)"
	stop_backend
}

: >"$T_TMP/summary"
run_suite "$EDGED" edged 64
edged_asan && run_suite "$EDGED_ASAN" asan 16
echo "# load $(cut -d' ' -f1-3 /proc/loadavg)"
sed 's/^/# /' "$T_TMP/summary"
t_exit
