#!/bin/bash
# test_edged_fds.sh - edged short of file descriptors: started under
# `ulimit -n 256` (soft and hard) without CAP_SYS_RESOURCE (setpriv), so
# that it cannot raise the limit, with 1,000 clients connecting at once
# (tests/tools/conn_storm.py), and then with its limit lowered further
# while it runs (prlimit). edged must say at start how many connections
# the limit allows, pause its listeners rather than spin on a failing
# accept (the clients wait in the kernel's backlog), answer every
# connection it accepted (200, or a 503 naming why — never a 500), write
# a bounded number of log lines, use a bounded share of a CPU, and serve
# normally once descriptors are back; with none left at all, a client of
# the admin listener makes it neither spin nor flood the log. With
# CAP_SYS_RESOURCE (root), the same `ulimit -n 256` is raised to what
# limits.max_connections needs.
# Runs against build/edged and again against build/asan/edged. Needs
# root (for the capability cases); setpriv and prlimit are util-linux's.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/lib_edged.sh
. "$(dirname "$0")/../lib_edged.sh"
t_require_root
edged_begin curl python3 prlimit setpriv
edged_need_build

BASE=$(edged_ports 3)
P_EDGE=$BASE
P_ADMIN=$((BASE + 1))
P_BACK=$((BASE + 2))
CONF="$T_TMP/edge.conf"
{
	edged_conf_head "$P_ADMIN" "$T_TMP/edged.sock" 1
	cat <<CONF
timeouts = { header = "5s"; idle_keepalive = "2s"; };
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
} >"$CONF"

# cpu_ticks PID: user + system time of the whole process, in clock ticks
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

# storm LABEL: 1,000 connections at once; checks every answer, the log
# lines written meanwhile and edged's CPU time over the storm
storm() {
	local name=$1 lines0 lines t0 t1 c0 c1 out bad
	lines0=$(wc -l <"$EDGED_LOG")
	c0=$(cpu_ticks "$EPID")
	t0=$(date +%s%N)
	out=$(python3 "$TOOLS/conn_storm.py" "$P_EDGE" 1000 /slow/100 40)
	t1=$(date +%s%N)
	c1=$(cpu_ticks "$EPID")
	lines=$(($(wc -l <"$EDGED_LOG") - lines0))
	# every connection answered 200 or 503 with a reason of its own
	bad=$(python3 -c 'import json, sys
r = json.loads(sys.argv[1])["results"]
ok = ("200", "503 connection_limit", "503 fd_exhausted")
print(" ".join("%s: %d" % (k, v) for k, v in r.items() if k not in ok))
if r.get("200", 0) < 500:
    print("only %d answered 200" % r.get("200", 0))' "$out")
	# CPU: ticks of 1/100 s against the wall time in ms
	cpu=$(((c1 - c0) * 1000 / ((t1 - t0) / 1000000 + 1)))
	if [ -n "$bad" ]; then
		t_fail "$name" "$bad ($out)"
	elif [ "$lines" -gt 10 ]; then
		t_fail "$name" "$lines log lines: $(tail -3 "$EDGED_LOG")"
	elif [ "$cpu" -gt 50 ]; then
		t_fail "$name" "edged used ${cpu}% of a CPU"
	else
		t_ok "$name: $out, $lines log lines, edged at ${cpu}% of a CPU"
	fi
}

# metric NAME: its value on /metrics
metric() {
	curl -s -m 5 "http://127.0.0.1:$P_ADMIN/metrics" | awk -v n="$1" '$1 == n { print $2 }'
}

# has_sys_resource: 0 when this shell may raise a hard limit
# (CAP_SYS_RESOURCE, bit 24, in its effective capabilities)
has_sys_resource() {
	local eff
	eff=$(awk '/^CapEff/ { print $2 }' /proc/self/status)
	(((0x$eff >> 24) & 1))
}

# raise_case LABEL: edged ($EPID, started as root under ulimit -n 256)
# raised its limit to what max_connections needs and says nothing
raise_case() {
	local v=$1 lim
	if edged_wait_port "$P_EDGE"; then
		lim=$(awk '/^Max open files/ { print $4 }' "/proc/$EPID/limits")
	fi
	if [ "${lim:-0}" -ge 20000 ] && [ "$(metric edge_connections_max)" = 10000 ] &&
		! grep -q "descriptor limit" "$EDGED_LOG"; then
		t_ok "$v: as root under ulimit -n 256 edged raises its limit to $lim for 10000 connections"
	else
		t_fail "$v: raising the limit" "limit ${lim:-?}, max $(metric edge_connections_max): $(head -3 "$EDGED_LOG")"
	fi
	edged_stop 5
}

run_suite() { # BIN LABEL
	local bin=$1 v=$2 code pauses lowest lines0 lines c0 c1
	# with CAP_SYS_RESOURCE edged raises its own limit to what
	# max_connections needs (this machine's sandbox may lack it)
	if ! has_sys_resource; then
		t_skip "$v: raising the limit" "no CAP_SYS_RESOURCE here"
	else
		: >"$EDGED_LOG" # now: the last run's "serving on" is not this one's
		bash -c 'ulimit -n 256 && exec "$0" "$@"' "$bin" -c "$CONF" -f >"$EDGED_LOG" 2>&1 &
		EPID=$!
		edged_track "$EPID"
		raise_case "$v"
	fi

	# without CAP_SYS_RESOURCE it cannot
	: >"$EDGED_LOG" # now: the last run's "serving on" is not this one's
	bash -c 'ulimit -n 256 && exec setpriv --bounding-set=-sys_resource --inh-caps=-sys_resource "$0" "$@"' \
		"$bin" -c "$CONF" -f >"$EDGED_LOG" 2>&1 &
	EPID=$!
	edged_track "$EPID"
	if ! edged_wait_port "$P_EDGE"; then
		t_fail "$v: edged starts under ulimit -n 256" "$(tail -5 "$EDGED_LOG")"
		return
	fi
	if grep -q "descriptor limit (RLIMIT_NOFILE) is 256: at most [0-9]* connections" "$EDGED_LOG"; then
		t_ok "$v: the start-up log says how many connections 256 descriptors allow ($(metric edge_connections_max))"
	else
		t_fail "$v: start-up warning" "$(head -3 "$EDGED_LOG")"
	fi
	# reloads that change nothing about it do not repeat it
	local r
	for r in 1 2; do
		kill -HUP "$EPID"
		for _ in $(seq 50); do
			[ "$(grep -c '^edged: note: reloaded' "$EDGED_LOG")" -ge "$r" ] && break
			sleep 0.1
		done
	done
	if [ "$(grep -c '^edged: note: reloaded' "$EDGED_LOG")" = 2 ] &&
		[ "$(grep -c 'descriptor limit (RLIMIT_NOFILE)' "$EDGED_LOG")" = 1 ]; then
		t_ok "$v: two reloads, the descriptor warning still said once"
	else
		t_fail "$v: the descriptor warning at reloads" "$(grep -c 'descriptor limit' "$EDGED_LOG") times, $(grep -c 'reloaded' "$EDGED_LOG") reloads"
	fi
	storm "$v: ulimit -n 256, 1000 connections at once"
	pauses=$(metric edge_accept_pauses_total)
	if [ "${pauses:-0}" -gt 0 ]; then
		t_ok "$v: listeners paused $pauses times (edge_accept_pauses_total)"
	else
		t_fail "$v: listener pauses" "edge_accept_pauses_total '$pauses'"
	fi

	# idle keep-alive connections hold one descriptor each: more of them
	# fit than busy ones (93 here), and requests still get through
	if out=$(python3 - "$P_EDGE" 2>&1 <<'PY'
import socket, sys, time
port = int(sys.argv[1])
held = []
req = b"GET /keep HTTP/1.1\r\nHost: shop.test\r\n\r\n"
for i in range(150):
    s = socket.create_connection(("127.0.0.1", port), 5)
    s.settimeout(3)
    s.sendall(req)
    got = b""
    try:
        while b"\r\n\r\n" not in got or not got.endswith(b"}"):
            d = s.recv(65536)
            if not d:
                break
            got += d
    except socket.timeout:
        print("keep-alive connection %d: no answer in 3 s" % (i + 1))
        sys.exit(1)
    if not got.startswith(b"HTTP/1.1 200 "):
        print("keep-alive connection %d: %r" % (i + 1, got[:100]))
        sys.exit(1)
    held.append(s)
    if i % 40 == 39:
        time.sleep(0.3)  # let the idle ones park
time.sleep(0.5)
s = socket.create_connection(("127.0.0.1", port), 5)
s.settimeout(3)
s.sendall(b"GET /more HTTP/1.1\r\nHost: shop.test\r\nConnection: close\r\n\r\n")
d = s.recv(65536)
if not d.startswith(b"HTTP/1.1 200 "):
    print("a request with 150 idle connections open: %r" % d[:100])
    sys.exit(1)
print("150 idle keep-alive connections held open, then a new request served")
PY
	); then
		t_ok "$v: $out"
	else
		t_fail "$v: idle keep-alive connections past the busy cap" "$out"
	fi

	# fewer descriptors than edged planned for, while it runs
	prlimit --pid "$EPID" --nofile=100:256
	storm "$v: the limit lowered to 100 while running, 1000 connections"
	# no descriptor at all (the limit at the lowest free one): a client
	# of the admin listener must not make the control loop spin or log
	# on every failed accept
	lowest=$(python3 -c 'import os, sys
used = {int(f) for f in os.listdir("/proc/%s/fd" % sys.argv[1])}
print(min(set(range(len(used) + 1)) - used))' "$EPID")
	prlimit --pid "$EPID" --nofile="$lowest":256
	lines0=$(wc -l <"$EDGED_LOG")
	c0=$(cpu_ticks "$EPID")
	curl -s -m 2 -o /dev/null "http://127.0.0.1:$P_ADMIN/healthz"
	c1=$(cpu_ticks "$EPID")
	lines=$(($(wc -l <"$EDGED_LOG") - lines0))
	prlimit --pid "$EPID" --nofile=256:256
	# 2 s are about 200 clock ticks
	if [ $((c1 - c0)) -le 40 ] && [ "$lines" -le 40 ] &&
		[ "$(curl -s -m 5 "http://127.0.0.1:$P_ADMIN/healthz")" = ok ]; then
		t_ok "$v: admin listener out of descriptors: $((c1 - c0)) clock ticks and $lines log lines in 2 s, then it answers"
	else
		t_fail "$v: admin listener out of descriptors" "$((c1 - c0)) clock ticks, $lines log lines: $(tail -2 "$EDGED_LOG")"
	fi
	sleep 1.2 # a worker tick reads the limit again
	code=$(curl -s -m 5 -o /dev/null -w '%{http_code}' -H 'Host: shop.test' "http://127.0.0.1:$P_EDGE/after")
	if [ "$code" = 200 ] && [ "$(metric edge_connections)" -le 1 ]; then
		t_ok "$v: descriptors back: a request is served (200) and no connection is left over"
	else
		t_fail "$v: recovery" "status $code, edge_connections $(metric edge_connections)"
	fi
	edged_stop 5
	edged_sanitizers_clean "$v: sanitizers clean"
}

if ! edged_backend "$P_BACK" python3 "$TOOLS/echo_backend.py" "$P_BACK" "$T_TMP/backend.jsonl"; then
	t_fail "backend starts"
	t_exit
	exit
fi
run_suite "$EDGED" edged
edged_asan && run_suite "$EDGED_ASAN" asan
t_exit
