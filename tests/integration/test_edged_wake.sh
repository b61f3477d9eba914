#!/bin/bash
# test_edged_wake.sh - on-demand environments (docs/wake.md), end to end
# through the live daemon with real backends that the wake command starts
# after a delay (tests/tools/wake_backend.py): 300 concurrent first
# requests cause exactly one wake and are all served with
# X-Edge-Cold-Start; with wake.max_concurrent = 1 a second environment's
# wake gets 503 wake_throttled; a backend that never listens gets 503
# wake_pending with Retry-After after wake.timeout; a failing command gets
# 503 wake_failed; idle_timeout runs the sleep command and a later request
# wakes the environment again; an open Upgrade tunnel holds its
# environment awake and its close lets it sleep; a refusal just after a
# wake is 503 environment_restarting (and wakes it), past
# wake.restart_window it is 502. edgectl envs and /metrics follow. Runs
# against build/edged and build/asan/edged.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/lib_edged.sh
. "$(dirname "$0")/../lib_edged.sh"
edged_begin curl python3
edged_need_build

BASE=$(edged_ports 13)
P_EDGE=$BASE
P_ADMIN=$((BASE + 1))
EDGECTL="$B/edgectl"
CL="$T_TMP/client.py"
ENVS="storm t1 t2 never fail idle ws rs loud hang lazy"

# the wake command: per environment, T_TMP/ID.conf says "PORT DELAY MODE"
cat >"$T_TMP/wake.sh" <<SH
#!/bin/bash
read -r port delay mode <"$T_TMP/\$1.conf"
echo "wake \$1" >>"$T_TMP/wakes.log"
echo "\$\$" >>"$T_TMP/pids"
echo "\$\$" >"$T_TMP/\$1.pid"
echo "waking \$1 on \$port"
case \$mode in
fail) echo "cannot wake \$1" >&2; exit 3 ;;
loud) head -c 1048576 /dev/zero | tr '\\0' x; exit 3 ;;
never) exec sleep 60 ;;
esac
sleep "\$delay"
exec python3 "$TOOLS/wake_backend.py" "\$port"
SH
cat >"$T_TMP/sleep.sh" <<SH
#!/bin/bash
echo "sleep \$1" >>"$T_TMP/sleeps.log"
[ "\$1" = hang ] && exec sleep 617
kill "\$(cat "$T_TMP/\$1.pid")" 2>/dev/null
exit 0
SH
chmod +x "$T_TMP/wake.sh" "$T_TMP/sleep.sh"

write_conf() {
	local i=2 e idle
	{
		edged_conf_head "$P_ADMIN" "$T_TMP/edged.sock" 2
		cat <<CONF
wake = { command = "$T_TMP/wake.sh %s"; sleep_command = "$T_TMP/sleep.sh %s";
         max_concurrent = 1; timeout = "5s"; restart_window = "6s"; };
projects = ( { id = "p"; environments = (
CONF
		for e in $ENVS; do
			echo "$((BASE + i)) 0.3 serve" >"$T_TMP/$e.conf"
			# only idle and ws sleep during the test
			idle=60s
			case $e in idle | ws | hang) idle=2s ;; lazy) idle=5s ;; esac
			[ $i -gt 2 ] && echo ","
			routes=""
			# lazy: a health probe path that never wakes it
			[ "$e" = lazy ] && routes="routes = ( { prefix = \"/healthz\"; wake = false; ${LAZY_EXTRA:-} } );"
			cat <<CONF
  { id = "$e"; domains = [ "$e.test" ]; on_demand = true; idle_timeout = "$idle";
    $routes
    deployment = { id = "$e-1"; upstreams = [ "127.0.0.1:$((BASE + i))" ]; }; }
CONF
			i=$((i + 1))
		done
		echo "); } );"
	} >"$T_TMP/edge.conf"
	echo "$((BASE + 3)) 1 serve" >"$T_TMP/t1.conf"
	echo "$((BASE + 5)) 0 never" >"$T_TMP/never.conf"
	echo "$((BASE + 6)) 0 fail" >"$T_TMP/fail.conf"
	echo "$((BASE + 10)) 0 loud" >"$T_TMP/loud.conf"
}

cat >"$CL" <<'PY'
import asyncio
import json
import socket
import sys
import time

PORT = int(sys.argv[1])


def get(host, path="/"):
    s = socket.create_connection(("127.0.0.1", PORT), timeout=15)
    s.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n"
               % (path, host)).encode())
    data = b""
    while True:
        d = s.recv(65536)
        if not d:
            break
        data += d
    s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    f = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        f[k.strip().lower()] = v.strip()
    err = ""
    if body.startswith(b"{"):
        err = json.loads(body).get("error", "")
    return {"status": int(lines[0].split()[1]), "cold": f.get("x-edge-cold-start", ""),
            "retry": f.get("retry-after", ""), "error": err}


async def one(host):
    r, w = await asyncio.open_connection("127.0.0.1", PORT)
    w.write(("GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % host).encode())
    data = await r.read()
    w.close()
    head = data.split(b"\r\n\r\n")[0].decode("latin-1")
    status = int(head.split()[1])
    cold = "x-edge-cold-start:" in head.lower()
    return status, cold


async def storm(host, n):
    return await asyncio.gather(*[one(host) for _ in range(n)])


cmd = sys.argv[2]
if cmd == "get":
    print(json.dumps(get(sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else "/")))
elif cmd == "storm":
    n = int(sys.argv[4])
    res = asyncio.run(storm(sys.argv[3], n))
    ok = sum(1 for s, c in res if s == 200)
    cold = sum(1 for s, c in res if c)
    print("%d/%d 200, %d with X-Edge-Cold-Start" % (ok, n, cold))
    sys.exit(0 if ok == n and cold == n else 1)
elif cmd == "tunnel":
    # an Upgrade tunnel held open for SECONDS, echoing once a second
    s = socket.create_connection(("127.0.0.1", PORT), timeout=15)
    s.sendall(("GET /ws HTTP/1.1\r\nHost: %s\r\nConnection: upgrade\r\n"
               "Upgrade: raw-test\r\n\r\n" % sys.argv[3]).encode())
    head = b""
    while b"\r\n\r\n" not in head:
        d = s.recv(4096)
        if not d:
            print("closed before 101")
            sys.exit(1)
        head += d
    if b" 101 " not in head.split(b"\r\n")[0]:
        print("no 101: %r" % head[:100])
        sys.exit(1)
    end = time.monotonic() + float(sys.argv[4])
    while time.monotonic() < end:
        s.sendall(b"ping")
        if s.recv(16) != b"ping":
            print("bad echo")
            sys.exit(1)
        time.sleep(float(sys.argv[5]) if len(sys.argv) > 5 else 1.0)
    s.close()
    print("tunnel held %s s" % sys.argv[4])
PY

field() { python3 -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }
wakes() { grep -c "^wake $1\$" "$T_TMP/wakes.log" 2>/dev/null || true; }
env_field() { # ENV KEY: edgectl envs --json
	"$EDGECTL" --socket "$T_TMP/edged.sock" envs --json |
		python3 -c 'import json,sys
d = json.load(sys.stdin)
print([e for e in d["environments"] if e["id"] == sys.argv[1]][0][sys.argv[2]])' "$1" "$2"
}
# expect LABEL RESULT STATUS ERROR [retry]
expect() {
	local got st er
	got=$2
	st=$(field "$got" status)
	er=$(field "$got" error)
	if [ "$st" != "$3" ] || [ "$er" != "$4" ]; then
		t_fail "$1" "got $got"
		return 1
	fi
	if [ "${5:-}" = retry ] && [ -z "$(field "$got" retry)" ]; then
		t_fail "$1" "no Retry-After: $got"
		return 1
	fi
	t_ok "$1"
}

run_suite() { # BIN LABEL
	local bin=$1 v=$2 out r i
	rm -f "$T_TMP/wakes.log" "$T_TMP/sleeps.log"
	write_conf
	if ! "$bin" --check -c "$T_TMP/edge.conf" >"$T_TMP/check.out" 2>&1; then
		t_fail "$v: edged --check" "$(cat "$T_TMP/check.out")"
		return
	fi
	if ! edged_start "$bin" "$T_TMP/edge.conf"; then
		t_fail "$v: edged starts" "$(tail -5 "$EDGED_LOG")"
		edged_stop 5
		return
	fi
	st=$(env_field storm state)
	if [ "$st" = sleeping ]; then
		t_ok "$v: an on-demand environment nobody serves starts sleeping"
	else
		t_fail "$v: sleeping at start" "state '$st'"
	fi

	# wake = false (lazy's /healthz): asleep, 503 environment_sleeping
	# and nothing woken; awake, served; probed every 0.3 s it still goes
	# to sleep after its idle_timeout (5 s: under load an ASan edged and
	# python3 take seconds), and is not woken again
	expect "$v: wake = false, asleep: 503 environment_sleeping" \
		"$(python3 "$CL" "$P_EDGE" get lazy.test /healthz)" 503 environment_sleeping
	r=$(wakes lazy)
	if [ "${r:-0}" = 0 ] && [ "$(env_field lazy state)" = sleeping ] &&
		[ "$(env_field lazy asleep_refused)" = 1 ]; then
		t_ok "$v: wake = false woke nothing (asleep_refused 1)"
	else
		t_fail "$v: wake = false woke nothing" "$(wakes lazy) wakes, state $(env_field lazy state)"
	fi
	expect "$v: lazy env wakes on an app path" "$(python3 "$CL" "$P_EDGE" get lazy.test /)" 200 ""
	expect "$v: wake = false, awake: served" "$(python3 "$CL" "$P_EDGE" get lazy.test /healthz)" 200 ""
	for ((i = 0; i < 80; i++)); do
		grep -q "^sleep lazy$" "$T_TMP/sleeps.log" 2>/dev/null && break
		python3 "$CL" "$P_EDGE" get lazy.test /healthz >/dev/null
		sleep 0.3
	done
	if grep -q "^sleep lazy$" "$T_TMP/sleeps.log" 2>/dev/null && [ "$(env_field lazy state)" = sleeping ]; then
		t_ok "$v: probed every 0.3 s by a wake = false path, it slept after idle_timeout ($i probes)"
	else
		t_fail "$v: wake = false is no activity" "state $(env_field lazy state), sleeps: $(cat "$T_TMP/sleeps.log" 2>/dev/null)"
	fi
	expect "$v: then 503 environment_sleeping again" \
		"$(python3 "$CL" "$P_EDGE" get lazy.test /healthz)" 503 environment_sleeping
	eq_wakes=$(wakes lazy)
	if [ "$eq_wakes" = 1 ]; then
		t_ok "$v: one wake in all (the app path's)"
	else
		t_fail "$v: one wake" "$eq_wakes"
	fi

	# a storm of first requests: one wake, all served
	if out=$(python3 "$CL" "$P_EDGE" storm storm.test 300 2>&1); then
		t_ok "$v: 300 concurrent first requests: $out"
	else
		t_fail "$v: storm" "$out"
	fi
	n=$(wakes storm)
	if [ "$n" = 1 ]; then
		t_ok "$v: the storm cost exactly one wake"
	else
		t_fail "$v: one wake" "$n wakes"
	fi
	r=$(python3 "$CL" "$P_EDGE" get storm.test)
	if [ "$(field "$r" status)" = 200 ] && [ -z "$(field "$r" cold)" ]; then
		t_ok "$v: a later request pays nothing (no X-Edge-Cold-Start)"
	else
		t_fail "$v: later request" "$r"
	fi

	# max_concurrent = 1: t1 wakes (1.5 s), t2 is throttled
	python3 "$CL" "$P_EDGE" get t1.test >"$T_TMP/t1.out" &
	sleep 0.3
	expect "$v: a second wake with max_concurrent = 1: 503 wake_throttled" \
		"$(python3 "$CL" "$P_EDGE" get t2.test)" 503 wake_throttled retry
	wait $!
	expect "$v: the first wake is served" "$(cat "$T_TMP/t1.out")" 200 ""

	# a backend that never listens: wake_pending after wake.timeout
	r=$(python3 "$CL" "$P_EDGE" get never.test)
	expect "$v: a backend that never listens: 503 wake_pending after the timeout" "$r" 503 wake_pending retry
	# a failing command: wake_failed
	expect "$v: a wake command that exits 3: 503 wake_failed" \
		"$(python3 "$CL" "$P_EDGE" get fail.test)" 503 wake_failed retry
	if grep -q "environment fail: wake command: cannot wake fail" "$EDGED_LOG"; then
		t_ok "$v: the command's output is in the log"
	else
		t_fail "$v: command output logged" "$(grep 'environment fail' "$EDGED_LOG")"
	fi

	# a command that writes 1 MiB and fails: wake_failed at once, its
	# first wake.output_max bytes (4 KiB) logged, the rest counted
	expect "$v: a wake command that writes 1 MiB and exits 3: 503 wake_failed" \
		"$(python3 "$CL" "$P_EDGE" get loud.test)" 503 wake_failed retry
	local xs
	xs=$(grep -a "environment loud" "$EDGED_LOG" | tr -cd x | wc -c)
	if grep -Eq "environment loud: wake command: [0-9]+ more byte\(s\) of output not logged \(wake.output_max\)" "$EDGED_LOG" &&
		[ "$xs" -ge 1000 ] && [ "$xs" -le 4096 ]; then
		t_ok "$v: 1 MiB of output: $xs bytes logged, the rest counted and dropped"
	else
		t_fail "$v: a loud command" "$xs x's logged; $(grep -a 'environment loud' "$EDGED_LOG" | cut -c1-200 | tail -3)"
	fi

	# a sleep command that hangs (hang's, after its 2 s idle_timeout):
	# killed with its process group after wake.timeout (5 s), checked at
	# the end while the rest goes on
	expect "$v: hang env wakes" "$(python3 "$CL" "$P_EDGE" get hang.test)" 200 ""

	# idle sleep, and a second wake
	expect "$v: idle env wakes" "$(python3 "$CL" "$P_EDGE" get idle.test)" 200 ""
	for ((i = 0; i < 50; i++)); do
		grep -q "^sleep idle$" "$T_TMP/sleeps.log" 2>/dev/null && break
		sleep 0.1
	done
	st=$(env_field idle state)
	if grep -q "^sleep idle$" "$T_TMP/sleeps.log" 2>/dev/null && [ "$st" = sleeping ]; then
		t_ok "$v: idle past idle_timeout: sleep_command ran, state sleeping"
	else
		t_fail "$v: idle sleep" "state '$st', sleeps: $(cat "$T_TMP/sleeps.log" 2>/dev/null)"
	fi
	r=$(python3 "$CL" "$P_EDGE" get idle.test)
	if [ "$(field "$r" status)" = 200 ] && [ -n "$(field "$r" cold)" ] && [ "$(wakes idle)" = 2 ]; then
		t_ok "$v: a request after the sleep wakes it again (second wake, X-Edge-Cold-Start $(field "$r" cold))"
	else
		t_fail "$v: second wake" "$r, $(wakes idle) wakes"
	fi

	# an open tunnel holds the environment awake; its close lets it sleep
	# (the tunnel's own request wakes the environment)
	# (the wake's own time varies with the machine's load: wait for it,
	# then past idle_timeout (2 s) with the tunnel still open)
	python3 "$CL" "$P_EDGE" tunnel ws.test 4.5 >"$T_TMP/tun.out" 2>&1 &
	for ((i = 0; i < 150; i++)); do
		[ "$(env_field ws state)" = running ] && break
		sleep 0.1
	done
	sleep 2.6
	# one snapshot (two edgectl and python3 runs may take seconds on a
	# loaded machine, past the tunnel's end)
	read -r st tn < <("$EDGECTL" --socket "$T_TMP/edged.sock" envs --json |
		python3 -c 'import json,sys
e = [e for e in json.load(sys.stdin)["environments"] if e["id"] == "ws"][0]
print(e["state"], e["tunnels"])')
	if [ "$st" = running ] && [ "$tn" = 1 ] && ! grep -q "^sleep ws$" "$T_TMP/sleeps.log" 2>/dev/null; then
		t_ok "$v: an open tunnel holds its environment awake past idle_timeout"
	else
		t_fail "$v: tunnel holds awake" "state '$st' tunnels '$tn'"
	fi
	wait $!
	for ((i = 0; i < 50; i++)); do
		grep -q "^sleep ws$" "$T_TMP/sleeps.log" 2>/dev/null && break
		sleep 0.1
	done
	if grep -q "^sleep ws$" "$T_TMP/sleeps.log" 2>/dev/null; then
		t_ok "$v: the tunnel's close lets it sleep ($(cat "$T_TMP/tun.out"))"
	else
		t_fail "$v: sleep after the tunnel" "$(cat "$T_TMP/tun.out")"
	fi

	# environment_restarting vs 502
	# (the backend killed at once: python3's start-up is slow on a
	# loaded machine, and restart_window runs from the wake)
	r=$(python3 "$CL" "$P_EDGE" get rs.test)
	kill "$(cat "$T_TMP/rs.pid")"
	sleep 0.1
	expect "$v: rs env wakes" "$r" 200 ""
	expect "$v: refused just after its wake: 503 environment_restarting" \
		"$(python3 "$CL" "$P_EDGE" get rs.test)" 503 environment_restarting retry
	r=$(python3 "$CL" "$P_EDGE" get rs.test)
	if [ "$(field "$r" status)" = 200 ] && [ "$(wakes rs)" = 2 ]; then
		t_ok "$v: the restart started a wake: the next request is served"
	else
		t_fail "$v: wake after restarting" "$r, $(wakes rs) wakes"
	fi
	# past restart_window, kept busy so that idle_timeout never comes
	for ((i = 0; i < 13; i++)); do
		curl -s -o /dev/null -m 5 -H "Host: rs.test" "http://127.0.0.1:$P_EDGE/"
		sleep 0.5
	done
	kill "$(cat "$T_TMP/rs.pid")"
	sleep 0.1
	expect "$v: refused while running past restart_window: 502 upstream_unavailable" \
		"$(python3 "$CL" "$P_EDGE" get rs.test)" 502 upstream_unavailable

	out=$(curl -s -m 5 "http://127.0.0.1:$P_ADMIN/metrics")
	if grep -q '^edge_wakes_total{outcome="ready"} ' <<<"$out" &&
		grep -q '^edge_wakes_total{outcome="failed"} 2$' <<<"$out" &&
		grep -q '^edge_wakes_total{outcome="timeout"} 1$' <<<"$out" &&
		grep -q '^edge_wakes_total{outcome="throttled"} 1$' <<<"$out" &&
		grep -q '^edge_wake_cold_start_seconds_count ' <<<"$out" &&
		grep -q '^edge_environments{state="running"} ' <<<"$out"; then
		t_ok "$v: /metrics: wakes by outcome, cold-start histogram, environments by state"
	else
		t_fail "$v: metrics" "$(grep -E 'wake|environments' <<<"$out")"
	fi
	for ((i = 0; i < 100; i++)); do
		grep -q "environment hang: sleep command still running after 5000 ms: killed" "$EDGED_LOG" && break
		sleep 0.1
	done
	if grep -q "environment hang: sleep command still running after 5000 ms: killed" "$EDGED_LOG" &&
		! pgrep -fx "sleep 617" >/dev/null; then
		t_ok "$v: a sleep command still running after wake.timeout: killed with its group"
	else
		t_fail "$v: hanging sleep command" "$(grep -a 'environment hang' "$EDGED_LOG" | tail -3) $(pgrep -fa 'sleep 617')"
	fi
	out=$("$EDGECTL" --socket "$T_TMP/edged.sock" envs 2>&1)
	if grep -q "^rs .* running " <<<"$out"; then
		t_ok "$v: edgectl envs lists the environments"
	else
		t_fail "$v: edgectl envs" "$out"
	fi
	edged_stop 5
	for e in $ENVS; do
		[ -f "$T_TMP/$e.pid" ] && kill "$(cat "$T_TMP/$e.pid")" 2>/dev/null
	done
	edged_sanitizers_clean "$v: sanitizers clean"
}

# --check: a route's activity and wake, idle_timeout_background
check_bad() { # EXTRA WANT
	local out rc=0
	LAZY_EXTRA=$1 write_conf
	out=$("$EDGED" --check -c "$T_TMP/edge.conf" 2>&1) || rc=$?
	if [ "$rc" -ne 0 ] && grep -qE "edge.conf:[0-9]+: .*$2" <<<"$out"; then
		t_ok "--check refuses $1"
	else
		t_fail "--check refuses $1" "$out"
	fi
}
check_bad 'activity = "bogus";' 'activity.*"app" or "background"'
check_bad 'activity = [ "app" ];' 'activity'
check_bad 'activity = 1;' 'activity'
LAZY_EXTRA='activity = "background";' write_conf
if "$EDGED" --check -c "$T_TMP/edge.conf" >/dev/null 2>&1; then
	t_ok "--check takes activity = \"background\""
else
	t_fail "--check takes activity = \"background\"" "$("$EDGED" --check -c "$T_TMP/edge.conf" 2>&1)"
fi
sed -i 's/{ id = "lazy"; domains = \[ "lazy.test" \]; on_demand = true; idle_timeout = "5s";/{ id = "lazy"; domains = [ "lazy.test" ]; idle_timeout_background = "5s";/' "$T_TMP/edge.conf"
out=$("$EDGED" --check -c "$T_TMP/edge.conf" 2>&1)
if grep -qE 'edge.conf:[0-9]+: .*idle_timeout_background.*on_demand' <<<"$out"; then
	t_ok "--check refuses idle_timeout_background without on_demand"
else
	t_fail "--check refuses idle_timeout_background without on_demand" "$out"
fi

run_suite "$EDGED" edged
edged_asan && run_suite "$EDGED_ASAN" asan
t_exit
