#!/bin/bash
# test_edged_wake_tcp.sh - on-demand environments behind plain TCP routes
# (docs/wake.md, "TCP routes"): a connection to a sleeping environment's
# TCP route waits (its bytes unread, in the kernel) while the wake command
# starts the backend (tests/tools/tcp_backend.py) after a delay, then its
# bytes round-trip; the environment stays awake while the connection is
# open and quiet past idle_timeout, copied (splice = "off") and, as root,
# spliced by the kernel (the analytics event's mover says which), and
# sleeps once it closed and idle_timeout passed; a backend that never
# listens: the connection closed after wake.timeout (wake_pending, in the
# log, the metric and the analytics event); a failing command:
# wake_failed at once, and during its back-off 50 more connections
# closed at once as wake_failed with no second run; more than
# wake.max_waiting_connections waiting: wake_throttled at once. Runs
# against build/edged and build/asan/edged.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/lib_edged.sh
. "$(dirname "$0")/../lib_edged.sh"
edged_begin curl python3
edged_need_build

BASE=$(edged_ports 12)
P_EDGE=$BASE
P_ADMIN=$((BASE + 1))
T_COPY=$((BASE + 2)) # TCP routes: copied, spliced, never, fail
T_SPLICE=$((BASE + 3))
T_NEVER=$((BASE + 4))
T_FAIL=$((BASE + 5))
B_COPY=$((BASE + 6)) # their backends (the wake command starts them)
B_SPLICE=$((BASE + 7))
B_NEVER=$((BASE + 8))
B_FAIL=$((BASE + 9))
EDGECTL="$B/edgectl"
SOCK="$T_TMP/edged.sock"
CL="$T_TMP/client.py"

# the wake command: T_TMP/ID.conf says "PORT DELAY MODE"
cat >"$T_TMP/wake.sh" <<SH
#!/bin/bash
read -r port delay mode <"$T_TMP/\$1.conf"
echo "wake \$1" >>"$T_TMP/wakes.log"
echo "\$\$" >>"$T_TMP/pids"
echo "\$\$" >"$T_TMP/\$1.pid"
case \$mode in
fail) echo "cannot wake \$1" >&2; exit 3 ;;
never) exec sleep 60 ;;
esac
sleep "\$delay"
exec python3 "$TOOLS/tcp_backend.py" "\$port" "$T_TMP/backend.jsonl"
SH
cat >"$T_TMP/sleep.sh" <<SH
#!/bin/bash
echo "sleep \$1" >>"$T_TMP/sleeps.log"
kill "\$(cat "$T_TMP/\$1.pid")" 2>/dev/null
exit 0
SH
chmod +x "$T_TMP/wake.sh" "$T_TMP/sleep.sh"
echo "$B_COPY 0.2 serve" >"$T_TMP/copy.conf"
echo "$B_SPLICE 0.2 serve" >"$T_TMP/splice.conf"
echo "$B_NEVER 0 never" >"$T_TMP/never.conf"
echo "$B_FAIL 0 fail" >"$T_TMP/fail.conf"

write_conf() {
	{
		edged_conf_head "$P_ADMIN" "$SOCK"
		cat <<CONF
analytics = { file = "$T_TMP/events.jsonl"; };
splice = "off";
timeouts = { upstream_connect = "1s"; tunnel_idle = "60s"; drain = "2s"; };
wake = { command = "$T_TMP/wake.sh %s"; sleep_command = "$T_TMP/sleep.sh %s";
         timeout = "5s"; max_waiting_connections = 2; };
tcp_routes = (
  { listen = "127.0.0.1:$T_COPY"; environment = "copy"; },
  { listen = "127.0.0.1:$T_SPLICE"; environment = "splice"; },
  { listen = "127.0.0.1:$T_NEVER"; environment = "never"; },
  { listen = "127.0.0.1:$T_FAIL"; environment = "fail"; }
);
projects = ( { id = "p"; environments = (
CONF
		local e sep="" port
		for e in copy splice never fail; do
			read -r port _ <"$T_TMP/$e.conf"
			cat <<CONF
  $sep{ id = "$e"; domains = [ "$e.test" ]; on_demand = true; idle_timeout = "2s";
    deployment = { id = "$e-1"; upstreams = [ "127.0.0.1:$port" ]; }; }
CONF
			sep=","
		done
		echo "); } );"
	} >"$T_TMP/edge.conf"
}

cat >"$CL" <<'PY'
import json
import socket
import sys
import time

PORT, MODE = int(sys.argv[1]), sys.argv[2]


def recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        d = s.recv(n - len(buf))
        if not d:
            raise SystemExit("closed after %d of %d bytes" % (len(buf), n))
        buf += d
    return buf


if MODE == "hold":
    # the command and 1000 bytes at once, while the environment sleeps;
    # the banner and the echo once it is up; then quiet for HOLD seconds
    # (with a mark file while it is open), one more echo, and close
    hold, mark = float(sys.argv[3]), sys.argv[4]
    t0 = time.monotonic()
    s = socket.create_connection(("127.0.0.1", PORT), timeout=15)
    payload = bytes(range(256)) * 3 + b"x" * 232
    s.sendall(b"echo\n" + payload)
    banner = b""
    while not banner.endswith(b"\n"):
        d = s.recv(1)
        if not d:
            raise SystemExit("closed before the banner")
        banner += d
    if recv_exact(s, len(payload)) != payload:
        raise SystemExit("the echo differs")
    woken = time.monotonic() - t0
    open(mark, "w").close()
    time.sleep(hold)
    s.sendall(b"ping")
    if recv_exact(s, 4) != b"ping":
        raise SystemExit("bad echo after the hold")
    s.close()
    print(json.dumps({"banner": banner.decode().strip(), "woken_s": round(woken, 3)}))
else:
    # MODE closed [N]: edged must close without a byte: print the
    # seconds it took; then, with N, N connections at once, and the
    # seconds the slowest of them took
    def closed(socks):
        t0 = time.monotonic()
        for s in socks:
            s.sendall(b"echo\nhello")
        for s in socks:
            try:
                d = s.recv(100)
            except ConnectionResetError:
                d = b""
            if d:
                raise SystemExit("got %r" % d)
        return round(time.monotonic() - t0, 3)

    def conns(n):
        return [socket.create_connection(("127.0.0.1", PORT), timeout=15)
                for _ in range(n)]
    out = [closed(conns(1))]
    if len(sys.argv) > 3:
        out.append(closed(conns(int(sys.argv[3]))))
    print(*out)
PY

metric() {
	curl -s -m 5 "http://127.0.0.1:$P_ADMIN/metrics" | awk -v n="$1" '$1 == n { print $2 }'
}
env_field() { # ENV KEY: edgectl envs --json
	"$EDGECTL" --socket "$SOCK" envs --json |
		python3 -c 'import json,sys
d = json.load(sys.stdin)
print([e for e in d["environments"] if e["id"] == sys.argv[1]][0][sys.argv[2]])' "$1" "$2"
}
env_fields() { # ENV KEY...: the KEYs of ENV from one edgectl envs --json
	"$EDGECTL" --socket "$SOCK" envs --json |
		python3 -c 'import json,sys
d = json.load(sys.stdin)
e = [e for e in d["environments"] if e["id"] == sys.argv[1]][0]
print(" ".join(str(e[k]) for k in sys.argv[2:]))' "$@"
}
# wait_state ENV STATE SECONDS: 0 once edgectl envs says ENV is STATE
wait_state() {
	local i
	for ((i = 0; i < $3 * 20; i++)); do
		[ "$(env_field "$1" state)" = "$2" ] && return 0
		sleep 0.05
	done
	return 1
}
# event ENV KEY: KEY of the last analytics event of environment ENV
event() {
	python3 - "$T_TMP/events.jsonl" "$1" "$2" <<'PY'
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
ev = [e for e in ev if e.get("environment_id") == sys.argv[2]]
print(ev[-1].get(sys.argv[3], "") if ev else "none")
PY
}
event_is() { # ENV KEY VALUE: waits up to 4 s (the writer flushes every flush_ms, 200 ms)
	local n
	for ((n = 0; n < 40; n++)); do
		[ "$(event "$1" "$2")" = "$3" ] && return 0
		sleep 0.1
	done
	return 1
}

# held ENV PORT LABEL: a connection that wakes ENV through TCP route PORT,
# held open and quiet past idle_timeout, then closed; the environment
# sleeps after it
held() {
	local env=$1 port=$2 v=$3 out pid now i sleeping=0
	rm -f "$T_TMP/$env.mark"
	if ! wait_state "$env" sleeping 5; then
		t_fail "$v: $env sleeping at start" "$(env_field "$env" state)"
		return
	fi
	python3 "$CL" "$port" hold 5 "$T_TMP/$env.mark" >"$T_TMP/$env.out" 2>&1 &
	pid=$!
	for ((i = 0; i < 200; i++)); do
		[ -f "$T_TMP/$env.mark" ] && break
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
	# open and quiet for 5 s, idle_timeout 2 s: running, its tunnel
	# counted, no sleep
	sleep 2.8
	# one snapshot, read while the connection is certainly open (the
	# client holds it 5 s)
	now=$(env_fields "$env" state tunnels)
	if [ -f "$T_TMP/$env.mark" ] && [ "$now" = "running 1" ] &&
		! grep -qx "sleep $env" "$T_TMP/sleeps.log" 2>/dev/null; then
		t_ok "$v: $env: woken by a TCP connection, awake while it is open and quiet past idle_timeout"
	else
		t_fail "$v: $env awake under an open connection" "state and tunnels: $now; $(cat "$T_TMP/$env.out")"
	fi
	if wait "$pid"; then
		t_ok "$v: $env: the bytes sent while it slept round-trip after the wake: $(cat "$T_TMP/$env.out")"
	else
		t_fail "$v: $env: bytes through the woken route" "$(cat "$T_TMP/$env.out")"
	fi
	if [ "$(grep -cx "wake $env" "$T_TMP/wakes.log")" = 1 ]; then
		t_ok "$v: $env: one wake"
	else
		t_fail "$v: $env: one wake" "$(cat "$T_TMP/wakes.log")"
	fi
	# closed: asleep once idle_timeout has passed
	wait_state "$env" sleeping 5 && grep -qx "sleep $env" "$T_TMP/sleeps.log" && sleeping=1
	if [ $sleeping = 1 ] && [ "$(env_field "$env" tunnels)" = 0 ]; then
		t_ok "$v: $env: asleep (sleep command run) once the connection closed and idle_timeout passed"
	else
		t_fail "$v: $env: sleeps after the close" "state $(env_field "$env" state); $(cat "$T_TMP/sleeps.log" 2>/dev/null)"
	fi
}

run_suite() { # BIN LABEL
	local bin=$1 v=$2 out i k n mover
	rm -f "$T_TMP/wakes.log" "$T_TMP/sleeps.log" "$T_TMP/events.jsonl"
	write_conf
	if ! edged_start "$bin" "$T_TMP/edge.conf"; then
		t_fail "$v: edged starts" "$(tail -5 "$EDGED_LOG")"
		edged_stop 5
		return
	fi

	# copied: the tunnel is edged's; its analytics event says so
	held copy "$T_COPY" "$v"
	edged_wait_log "environment copy: sleep command exited 0" >/dev/null
	mover=$(event copy mover)
	if [ "$mover" = copy ] && [ "$(event copy outcome)" = tunnel ] &&
		[ -n "$(event copy cold_start_ms)" ]; then
		t_ok "$v: copy: one tunnel event, copied, with its cold_start_ms ($(event copy cold_start_ms) ms)"
	else
		t_fail "$v: copy: analytics event" "$(tail -2 "$T_TMP/events.jsonl")"
	fi

	# spliced by the kernel, as root: the kernel's counters move its
	# bytes and the connection still holds the environment awake
	if [ "$(id -u)" = 0 ] && grep -q "sockmap self-test passed" "$EDGED_LOG"; then
		"$EDGECTL" --socket "$SOCK" splice sockmap >/dev/null
		held splice "$T_SPLICE" "$v"
		for ((i = 0; i < 50; i++)); do
			[ "$(event splice mover)" != none ] && break
			sleep 0.1
		done
		mover=$(event splice mover)
		if [ "$mover" = sockmap ] || [ "$mover" = copy+sockmap ]; then
			t_ok "$v: splice: its bytes moved by the kernel (mover $mover)"
		else
			t_fail "$v: splice: spliced" "mover '$mover'"
		fi
		"$EDGECTL" --socket "$SOCK" splice off >/dev/null
	else
		t_skip "$v: a spliced connection holds its environment awake" "not root, or no sockmap"
	fi

	# a backend that never listens: closed after wake.timeout (5 s);
	# wake.max_waiting_connections = 2: a third waiting connection is
	# closed at once
	python3 "$CL" "$T_NEVER" closed >"$T_TMP/n1.out" 2>&1 &
	i=$!
	python3 "$CL" "$T_NEVER" closed >"$T_TMP/n2.out" 2>&1 &
	k=$!
	for ((n = 0; n < 100; n++)); do
		[ "$("$EDGECTL" --socket "$SOCK" envs --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["waiting_connections"])')" = 2 ] && break
		sleep 0.02
	done
	out=$(python3 "$CL" "$T_NEVER" closed 2>&1)
	if python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) < 1.0 else 1)' "$out" 2>/dev/null &&
		[ "$(metric 'edge_requests_total{outcome="wake_throttled"}')" = 1 ]; then
		t_ok "$v: a third connection waiting with max_waiting_connections = 2: closed at once ($out s), wake_throttled"
	else
		t_fail "$v: max_waiting_connections" "$out; $(metric 'edge_requests_total{outcome="wake_throttled"}')"
	fi
	wait "$i" "$k"
	out=$(cat "$T_TMP/n1.out" "$T_TMP/n2.out" | tr '\n' ' ')
	if python3 -c 'import sys; v = sys.argv[1].split(); sys.exit(0 if len(v) == 2 and all(4.5 < float(x) < 8 for x in v) else 1)' "$out" 2>/dev/null &&
		[ "$(metric 'edge_requests_total{outcome="wake_pending"}')" = 2 ] &&
		event_is never outcome wake_pending &&
		grep -Eq "tcp route 127.0.0.1:$T_NEVER: environment never not awake \(wake_pending\): closed" "$EDGED_LOG"; then
		t_ok "$v: a backend that never listens: closed after wake.timeout ($out s), wake_pending in the log, metric and event"
	else
		t_fail "$v: wake_pending" "$out; $(metric 'edge_requests_total{outcome="wake_pending"}'); $(event never outcome)"
	fi
	# a failing command: closed at once, wake_failed; during its
	# back-off (1 s: wake.retry_max is 60 s, and 1 s the first) the
	# next connections are closed at once, with no second run
	out=$(python3 "$CL" "$T_FAIL" closed 50 2>&1)
	if python3 -c 'import sys; v = sys.argv[1].split(); sys.exit(0 if len(v) == 2 and float(v[0]) < 1.5 and float(v[1]) < 1.0 else 1)' "$out" 2>/dev/null &&
		[ "$(metric 'edge_requests_total{outcome="wake_failed"}')" = 51 ] &&
		[ "$(grep -cx 'wake fail' "$T_TMP/wakes.log")" = 1 ] &&
		[ "$(env_field fail backoff_refused)" = 50 ] &&
		event_is fail outcome wake_failed; then
		t_ok "$v: a wake command that exits 3: closed at once, wake_failed; 50 connections during its back-off closed at once as wake_failed, no second run ($out s)"
	else
		t_fail "$v: wake_failed" "$out; $(metric 'edge_requests_total{outcome="wake_failed"}'); $(grep -cx 'wake fail' "$T_TMP/wakes.log") runs; backoff_refused $(env_field fail backoff_refused); $(event fail outcome)"
	fi
	edged_stop 5
	for e in copy splice never fail; do
		[ -f "$T_TMP/$e.pid" ] && kill "$(cat "$T_TMP/$e.pid")" 2>/dev/null
	done
	edged_sanitizers_clean "$v: sanitizers clean"
}

run_suite "$EDGED" edged
edged_asan && run_suite "$EDGED_ASAN" asan
t_exit
