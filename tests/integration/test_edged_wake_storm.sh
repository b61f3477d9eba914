#!/bin/bash
# test_edged_wake_storm.sh - a wake storm costs one wake (docs/wake.md,
# "The back-off"): 2,000 concurrent requests (tests/tools/wake_storm.py:
# every connection made first, then every request at once) to a
# sleeping environment whose wake command fails run it exactly once (the
# command appends a line per run), all answered 503 wake_failed with
# Retry-After; the environment is wake_failed in edgectl envs (and
# --json: its back-off, what is left of it) and /metrics; after the
# back-off the next request runs it again and the back-off doubles
# (2 s), a storm during it runs nothing, wake.retry_max (3 s) caps it;
# a wake that serves starts the count over (1 s after the next failure).
# A woken backend that accepts and resets every connection
# (tests/tools/reset_backend.py) fails its wake too: one run for 2,000
# requests (none answered environment_restarting, which started a wake
# each before), the backend (the wake command's process) killed, the
# sleep command run, edge_wakes_total{outcome="endpoint_failed"}. Runs
# against build/edged and build/asan/edged.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/lib_edged.sh
. "$(dirname "$0")/../lib_edged.sh"
edged_begin curl python3
edged_need_build

N=2000
if [ "$(ulimit -Hn)" != unlimited ] && [ "$(ulimit -Hn)" -lt $((N * 3 + 1000)) ]; then
	t_skip "$(basename "$0")" "the open-files hard limit $(ulimit -Hn) is too low for $N connections"
	t_exit
fi
ulimit -n $((N * 3 + 1000))

BASE=$(edged_ports 4)
P_EDGE=$BASE
P_ADMIN=$((BASE + 1))
P_FAIL=$((BASE + 2))
P_RESET=$((BASE + 3))
EDGECTL="$B/edgectl"
SOCK="$T_TMP/edged.sock"

# the wake command: T_TMP/ID.mode says what it does (fail: exit 3 after
# 2 s, so that a storm's requests, however slowly a loaded machine reads
# them, have all joined the wake before it fails;
# serve: the HTTP backend; reset: the backend that resets); each run
# appends a line to T_TMP/runs.ID
cat >"$T_TMP/wake.sh" <<SH
#!/bin/bash
echo run >>"$T_TMP/runs.\$1"
echo "\$\$" >>"$T_TMP/pids"
echo "\$\$" >"$T_TMP/\$1.pid"
case \$1 in fail) port=$P_FAIL ;; *) port=$P_RESET ;; esac
case \$(cat "$T_TMP/\$1.mode") in
fail) sleep 2; echo "cannot wake \$1" >&2; exit 3 ;;
reset) exec python3 "$TOOLS/reset_backend.py" "\$port" ;;
esac
exec python3 "$TOOLS/wake_backend.py" "\$port"
SH
cat >"$T_TMP/sleep.sh" <<SH
#!/bin/bash
echo "sleep \$1" >>"$T_TMP/sleeps.log"
kill "\$(cat "$T_TMP/\$1.pid")" 2>/dev/null
exit 0
SH
chmod +x "$T_TMP/wake.sh" "$T_TMP/sleep.sh"

{
	edged_conf_head "$P_ADMIN" "$SOCK" 2
	cat <<CONF
limits = { max_connections = 30000; };
wake = { command = "$T_TMP/wake.sh %s"; sleep_command = "$T_TMP/sleep.sh %s";
         timeout = "5s"; retry_max = "3s"; };
projects = ( { id = "p"; environments = (
  { id = "fail"; domains = [ "fail.test" ]; on_demand = true; idle_timeout = "1s";
    deployment = { id = "f1"; upstreams = [ "127.0.0.1:$P_FAIL" ]; }; },
  { id = "reset"; domains = [ "reset.test" ]; on_demand = true; idle_timeout = "60s";
    deployment = { id = "r1"; upstreams = [ "127.0.0.1:$P_RESET" ]; }; }
); } );
CONF
} >"$T_TMP/edge.conf"

runs() { wc -l <"$T_TMP/runs.$1" 2>/dev/null || echo 0; }
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
		[ "$(env_fields "$1" state)" = "$2" ] && return 0
		sleep 0.05
	done
	return 1
}
metric() {
	curl -s -m 5 "http://127.0.0.1:$P_ADMIN/metrics" | awk -v n="$1" '$1 == n { print $2 }'
}
# get HOST: "STATUS ERROR RETRY-AFTER COLD-START" of one request
get() {
	python3 - "$P_EDGE" "$1" <<'PY'
import json, socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=15)
s.sendall(("GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % sys.argv[2]).encode())
data = b""
while True:
    d = s.recv(65536)
    if not d:
        break
    data += d
head, _, body = data.partition(b"\r\n\r\n")
lines = head.decode("latin-1").split("\r\n")
f = {k.strip().lower(): v.strip() for k, _, v in (l.partition(":") for l in lines[1:])}
err = json.loads(body).get("error", "-") if body.startswith(b"{") else "-"
print(lines[0].split()[1], err, f.get("retry-after", "-"), f.get("x-edge-cold-start", "-"))
PY
}
# storm HOST: the storm's JSON line (tests/tools/wake_storm.py)
storm() { python3 "$TOOLS/wake_storm.py" "$P_EDGE" "$1" "$N" 60 "${@:2}"; }
field() { python3 -c 'import json,sys; d = json.loads(sys.argv[1]); print(d.get(sys.argv[2]))' "$1" "$2"; }
# only_results JSON WHAT...: 0 when every answer of the storm is one of WHAT
only_results() {
	python3 -c 'import json,sys
r = json.loads(sys.argv[1])["results"]
sys.exit(0 if sum(r.values()) == int(sys.argv[2]) and set(r) <= set(sys.argv[3:]) else 1)' "$1" "$N" "${@:2}"
}

run_suite() { # BIN LABEL
	local bin=$1 v=$2 out st r pid i
	rm -f "$T_TMP"/runs.* "$T_TMP/sleeps.log"
	echo fail >"$T_TMP/fail.mode"
	echo reset >"$T_TMP/reset.mode"
	if ! edged_start "$bin" "$T_TMP/edge.conf"; then
		t_fail "$v: edged starts" "$(tail -5 "$EDGED_LOG")"
		edged_stop 5
		return
	fi

	# a storm on a failing command: one run
	out=$(storm fail.test)
	if [ "$(runs fail)" = 1 ] && only_results "$out" "503 wake_failed" &&
		[ "$(python3 -c 'import json,sys; print(sum(json.loads(sys.argv[1])["retry_after"].values()))' "$out")" = "$N" ]; then
		t_ok "$v: $N concurrent requests, a failing wake command: run once, all 503 wake_failed with Retry-After ($out)"
	else
		t_fail "$v: a storm on a failing command" "$(runs fail) runs; $out"
	fi
	read -r st r < <(env_fields fail backoff_ms consecutive_failures)
	if [ "$st $r" = "1000 1" ]; then
		t_ok "$v: a back-off of 1 s after the first failure"
	else
		t_fail "$v: the first back-off" "backoff_ms and failures: $st $r"
	fi

	# its back-off over: the next request runs it again, the back-off
	# doubles; a storm meanwhile runs nothing (its connections made
	# before, its requests sent the moment that request is answered:
	# the 2 s of back-off are not spent making 2,000 connections)
	wait_state fail sleeping 5
	rm -f "$T_TMP/go" "$T_TMP/go.ready"
	storm fail.test "$T_TMP/go" >"$T_TMP/storm2.json" &
	pid=$!
	for ((i = 0; i < 600; i++)); do
		[ -e "$T_TMP/go.ready" ] && break
		sleep 0.05
	done
	r=$(get fail.test)
	touch "$T_TMP/go"
	read -r st out < <(env_fields fail backoff_ms consecutive_failures)
	if [ "$(runs fail)" = 2 ] && [ "$r" = "503 wake_failed 2 -" ] && [ "$st $out" = "2000 2" ]; then
		t_ok "$v: after the back-off a request runs it again: failed, the back-off doubled to 2 s (Retry-After 2)"
	else
		t_fail "$v: the second failure" "$(runs fail) runs; $r; backoff_ms and failures: $st $out"
	fi
	wait "$pid"
	out=$(cat "$T_TMP/storm2.json")
	read -r st r < <(env_fields fail backoff_refused wakes)
	if [ "$(runs fail)" = 2 ] && only_results "$out" "503 wake_failed" && [ "$st" -ge "$N" ] && [ "$r" = 2 ]; then
		t_ok "$v: a storm during the back-off: no run, all 503 wake_failed at once ($out)"
	else
		t_fail "$v: a storm during the back-off" "$(runs fail) runs, backoff_refused $st, wakes $r; $out"
	fi
	# wake.retry_max = 3 s caps it; edgectl envs shows it (read at
	# once, well within the 3 s)
	wait_state fail sleeping 5
	r=$(get fail.test)
	out=$("$EDGECTL" --socket "$SOCK" envs)
	st=$(env_fields fail state backoff_ms consecutive_failures retry_in_ms)
	if [ "$(runs fail)" = 3 ] && [ "$r" = "503 wake_failed 3 -" ] &&
		python3 -c 'import sys; s, b, f, left = sys.argv[1].split(); sys.exit(0 if (s, b, f) == ("wake_failed", "3000", "3") and 0 < int(left) <= 3000 else 1)' "$st"; then
		t_ok "$v: a third failure: the back-off capped at wake.retry_max (3 s, Retry-After 3)"
	else
		t_fail "$v: the cap" "$(runs fail) runs; $r; state, backoff_ms, failures, retry_in_ms: $st"
	fi
	if grep -Eq "^fail +wake_failed +[1-3]s " <<<"$out" &&
		[ "$(metric 'edge_environments{state="wake_failed"}')" = 1 ]; then
		t_ok "$v: edgectl envs: wake_failed and the back-off left; /metrics edge_environments{state=\"wake_failed\"}"
	else
		t_fail "$v: the back-off shown" "$out; $(metric 'edge_environments{state="wake_failed"}')"
	fi
	# fixed: a wake that serves starts the count over
	echo serve >"$T_TMP/fail.mode"
	wait_state fail sleeping 5
	r=$(get fail.test)
	out=$(env_fields fail consecutive_failures state)
	if [ "${r% *}" = "200 - -" ] && [ "${r##* }" != - ] && [ "$out" = "0 running" ]; then
		t_ok "$v: fixed: the next wake serves (X-Edge-Cold-Start ${r##* }), the failures in a row back to 0"
	else
		t_fail "$v: a wake that serves" "$r; $out"
	fi
	# asleep (idle 1 s), broken again: 1 s of back-off again
	wait_state fail sleeping 10
	echo fail >"$T_TMP/fail.mode"
	r=$(get fail.test)
	out=$(env_fields fail backoff_ms consecutive_failures)
	if [ "$(runs fail)" = 5 ] && [ "$r" = "503 wake_failed 1 -" ] && [ "$out" = "1000 1" ]; then
		t_ok "$v: broken again after a wake that served: the back-off starts over at 1 s"
	else
		t_fail "$v: the back-off starts over" "$(runs fail) runs; $r; $out"
	fi

	# a woken backend that accepts and resets: one run, its wake failed
	out=$(storm reset.test)
	pid=$(cat "$T_TMP/reset.pid")
	if [ "$(runs reset)" = 1 ] &&
		only_results "$out" "503 wake_failed" "502 upstream_bad_response"; then
		t_ok "$v: $N concurrent requests, a backend that accepts then resets: run once, no environment_restarting ($out)"
	else
		t_fail "$v: a storm on a resetting backend" "$(runs reset) runs; $out"
	fi
	for ((r = 0; r < 100; r++)); do
		! kill -0 "$pid" 2>/dev/null && grep -qx "sleep reset" "$T_TMP/sleeps.log" 2>/dev/null && break
		sleep 0.05
	done
	read -r st r < <(env_fields reset backoff_ms wakes_endpoint_failed)
	if [ "$st $r" = "1000 1" ] && ! kill -0 "$pid" 2>/dev/null &&
		grep -qx "sleep reset" "$T_TMP/sleeps.log" &&
		[ "$(metric 'edge_wakes_total{outcome="endpoint_failed"}')" = 1 ] &&
		grep -q "environment reset: its endpoint failed its first request after the wake: wake_failed" "$EDGED_LOG"; then
		t_ok "$v: its endpoint failed its first requests: wake_failed, the backend killed, the sleep command run, counted"
	else
		t_fail "$v: the failed endpoint" "$st $r; pid $pid $(kill -0 "$pid" 2>/dev/null && echo alive); $(cat "$T_TMP/sleeps.log" 2>/dev/null); $(grep -a 'environment reset' "$EDGED_LOG" | tail -3)"
	fi
	echo serve >"$T_TMP/reset.mode"
	wait_state reset sleeping 5
	r=$(get reset.test)
	if [ "${r% *}" = "200 - -" ] && [ "$(runs reset)" = 2 ]; then
		t_ok "$v: after the back-off the fixed backend is woken and serves"
	else
		t_fail "$v: woken after the back-off" "$r; $(runs reset) runs"
	fi

	edged_stop 5
	for e in fail reset; do
		[ -f "$T_TMP/$e.pid" ] && kill "$(cat "$T_TMP/$e.pid")" 2>/dev/null
	done
	edged_sanitizers_clean "$v: sanitizers clean"
}

run_suite "$EDGED" edged
edged_asan && run_suite "$EDGED_ASAN" asan
t_exit
