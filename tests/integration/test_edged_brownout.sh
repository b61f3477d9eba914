#!/bin/bash
# test_edged_brownout.sh - brownout (docs/configuration.md, limits.
# brownout_lag and shed). One worker, stalled for real: edged is stopped
# (SIGSTOP) for 0.8 s while clients connect and send, then continued; the
# requests wait in the kernel and are read in the loop's first turns after
# the stall, which its lag probe finds 0.8 s late.
#
#   idle       no connection: the lag probe pauses, the worker sleeps
#   calm       brownout_lag 250ms, no stall: the shed routes and the
#              others served 200 (a busy machine's own lag may shed one:
#              a few tries allowed)
#   stall      during a stall: requests of shed routes (a route's
#              shed = true; an environment's shed = true outside its
#              route with shed = false) get 503 overloaded with
#              Retry-After: 1, HTTP/1.1 and HTTP/2 alike, on new and
#              keep-alive connections; the others
#              (shed = false) 200; a request of a shed route admitted
#              before the stall (a slow upstream) finishes 200; the shed
#              requests never reach the upstream
#   recovery   a second later the shed routes are served again
#   metrics    edge_worker_loop_lag_seconds showed the stall;
#              edge_requests_shed_total counted each 503; analytics
#              recorded them overloaded
#   off        after a reload to brownout_lag = "0", a stall sheds nothing
#   check      --check refuses bad brownout_lag and shed values
#
# Runs against build/edged and build/asan/edged.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/lib_edged.sh
. "$(dirname "$0")/../lib_edged.sh"
edged_begin curl python3

BASE=$(edged_ports 3)
P_EDGE=$BASE
P_ADMIN=$((BASE + 1))
P_B1=$((BASE + 2))
SOCK="$T_TMP/ctl/edged.sock"
LOG="$T_TMP/backend.jsonl"
STALL=0.8

conf() { # LIMITS [EXTRA_ENV]: the configuration, limits = { LIMITS }
	{
		edged_conf_head "$P_ADMIN" "$SOCK" 1
		cat <<CONF
pin_dir = "$T_TMP/pins";
analytics = { file = "$T_TMP/requests.jsonl"; };
limits = { $1 };
timeouts = { upstream_response = "20s"; };
projects = ( { id = "p"; environments = (
  { id = "e-app"; domains = [ "app.test" ];
    deployment = { id = "d-app"; upstreams = [ "127.0.0.1:$P_B1" ]; };
    routes = ( { prefix = "/bulk"; shed = true; },
               { prefix = "/keep"; shed = false; } ); ${2:-} },
  { id = "e-bg"; domains = [ "bg.test" ]; shed = true;
    deployment = { id = "d-bg"; upstreams = [ "127.0.0.1:$P_B1" ]; };
    routes = ( { prefix = "/api"; shed = false; },
               { prefix = "/more"; } ); }
); } );
CONF
	} >"$T_TMP/edge.conf"
}

count() { # requests the backend received
	wc -l <"$LOG" | tr -d ' '
}

req() { edged_req "$@"; }

# served HOST PATH: "200 -" once it is served (10 tries, 0.5 s apart: a
# busy machine's own lag may shed one), else the last answer
served() {
	local i out
	for ((i = 0; i < 10; i++)); do
		out=$(req "$1" "$2")
		[ "$out" = "200 -" ] && break
		sleep 0.5
	done
	echo "$out"
}

# wait_log N: until the backend received N requests (30 s)
wait_log() {
	local i
	for ((i = 0; i < 300; i++)); do
		[ "$(count)" -ge "$1" ] && return 0
		sleep 0.1
	done
	return 1
}

# stall NAME HOST:PATH[:h2|:ka]...: stop edged, send one request each (in
# the background, one file $T_TMP/NAME.N each: its answer, then whether
# Retry-After: 1 came), continue edged after $STALL s, and wait for all.
# h2: over HTTP/2; ka: on a keep-alive connection that had a request
# served before the stall (the new one is in its socket when the loop
# comes back, read before the lag probe runs)
stall() {
	local name=$1 i=0 x h p v2 pids=()
	shift
	rm -f "$T_TMP/go" "$T_TMP"/ready.*
	for x in "$@"; do
		IFS=: read -r h p v2 <<<"$x"
		if [ "$v2" = ka ]; then
			python3 "$T_TMP/ka.py" "$P_EDGE" "$h" "$p" "$T_TMP/ready.$i" \
				"$T_TMP/go" >"$T_TMP/$name.$i" &
			pids+=($!)
			while [ ! -e "$T_TMP/ready.$i" ]; do sleep 0.05; done
		fi
		i=$((i + 1))
	done
	kill -STOP "$EPID"
	touch "$T_TMP/go"
	i=0
	for x in "$@"; do
		IFS=: read -r h p v2 <<<"$x"
		if [ "$v2" = ka ]; then
			i=$((i + 1))
			continue
		fi
		(
			RF="$T_TMP/r.$BASHPID"
			if [ "$v2" = h2 ]; then
				out=$(req "$h" "$p" --http2-prior-knowledge)
			else
				out=$(req "$h" "$p")
			fi
			ra=-
			grep -qi '^Retry-After: 1' "$RF.head" && ra=retry
			echo "$out $ra" >"$T_TMP/$name.$i"
		) &
		pids+=($!)
		i=$((i + 1))
	done
	sleep "$STALL"
	kill -CONT "$EPID"
	wait "${pids[@]}"
}

# answers NAME N: the N answers of stall NAME, comma-separated
answers() {
	local i out=""
	for ((i = 0; i < $2; i++)); do
		out+="$(cat "$T_TMP/$1.$i"), "
	done
	echo "$out"
}

# thread_wakeups: how often edged's threads but the main one have slept
# so far (voluntary context switches)
thread_wakeups() {
	local t n=0
	for t in /proc/"$EPID"/task/*; do
		[ "${t##*/}" = "$EPID" ] && continue
		n=$((n + $(awk '/^voluntary_ctxt_switches/ { print $2 }' "$t/status" 2>/dev/null || echo 0)))
	done
	echo "$n"
}

run_suite() {
	local bin=$1 v=$2 out n before want lag shed spid i
	: >"$LOG"
	rm -f "$T_TMP/requests.jsonl"
	# 250ms: a stall of 0.8 s is well over it, a busy machine's own lag
	# rarely is
	conf 'brownout_lag = "250ms";'
	if ! edged_start "$bin" "$T_TMP/edge.conf"; then
		t_fail "$v: edged starts" "$(tail -5 "$EDGED_LOG")"
		return
	fi

	# ---- idle: no connection, no lag probe (paused at the worker's
	# first tick): edged's threads but the main one sleep (a probe every
	# 20 ms woke the worker 50 times a second, 100 in the 2 s; its tick
	# wakes it once a second; 6 were seen beside CI's other suites)
	sleep 1.5
	n=$(thread_wakeups)
	sleep 2
	n=$(($(thread_wakeups) - n))
	if [ "$n" -le 20 ]; then
		t_ok "$v: idle: the worker sleeps ($n wake-ups of its threads in 2 s)"
	else
		t_fail "$v: an idle worker sleeps" "$n wake-ups of its threads in 2 s"
	fi

	# ---- calm: everything served
	out="$(served app.test /bulk/a), $(served app.test /keep/a), "
	out+="$(served bg.test /x), $(served bg.test /api/a), $(served bg.test /more/a)"
	if [ "$out" = "200 -, 200 -, 200 -, 200 -, 200 -" ]; then
		t_ok "$v: no stall: routes with and without shed served 200"
	else
		t_fail "$v: calm" "$out"
	fi

	# ---- stall: shed routes refused, the others and the admitted served
	# (admitted: it reached the backend; a busy machine's own lag may
	# shed it first: then again)
	for ((i = 0; i < 5; i++)); do
		before=$(count)
		req app.test "/bulk/slow$i" >"$T_TMP/inflight" &
		spid=$!
		while [ "$(count)" = "$before" ] && kill -0 "$spid" 2>/dev/null; do
			sleep 0.05
		done
		[ "$(count)" != "$before" ] && break
		wait "$spid"
		sleep 0.5
	done
	before=$(count)
	shed=$(edged_metric edge_requests_shed_total)
	stall s1 app.test:/bulk/1 app.test:/keep/1 bg.test:/x1 bg.test:/api/1 \
		bg.test:/more/1 app.test:/bulk/2:h2 app.test:/keep/2:h2 app.test:/3 \
		app.test:/bulk/4:ka app.test:/keep/4:ka
	wait "$spid"
	out=$(answers s1 10)
	want="503 overloaded retry, 200 - -, 503 overloaded retry, 200 - -, "
	want+="503 overloaded retry, 503 overloaded retry, 200 - -, 200 - -, "
	want+="503 overloaded retry, 200 - -, "
	n=$(($(count) - before))
	# received: the 5 others, and the 2 keep-alive connections' first
	if [ "$out" = "$want" ] && [ "$n" = 7 ]; then
		t_ok "$v: a 0.8 s stall: the shed routes' requests sent during it get 503 overloaded with Retry-After: 1 (HTTP/1.1 and HTTP/2, new and keep-alive connections; a shed route, an environment's shed outside its route with shed = false), never reaching the upstream; the others 200"
	else
		t_fail "$v: shedding during a stall" "got $out; want $want; the backend received $n"
	fi
	if [ "$(cat "$T_TMP/inflight")" = "200 -" ]; then
		t_ok "$v: a shed route's request admitted before the stall (slow upstream) finishes 200"
	else
		t_fail "$v: the admitted request" "$(cat "$T_TMP/inflight")"
	fi

	# ---- metrics
	lag=$(edged_metric 'edge_worker_loop_lag_seconds{worker="0"}')
	n=$(edged_metric edge_requests_shed_total)
	if python3 -c 'import sys; sys.exit(not float(sys.argv[1]) >= 0.4)' "$lag" &&
		[ "$n" = $((shed + 5)) ]; then
		t_ok "$v: metrics: the worker's loop lag showed the stall (${lag}s); edge_requests_shed_total counted the 5"
	else
		t_fail "$v: metrics" "lag $lag shed $n (was $shed)"
	fi

	# ---- recovery
	sleep 1.2
	out="$(served app.test /bulk/after), $(served bg.test /after)"
	if [ "$out" = "200 -, 200 -" ]; then
		t_ok "$v: after the stall the shed routes are served again"
	else
		t_fail "$v: recovery" "$out"
	fi

	# ---- off: brownout_lag = "0" never sheds
	conf 'brownout_lag = "0";'
	if reload_conf; then
		shed=$(edged_metric edge_requests_shed_total)
		stall s2 app.test:/bulk/off bg.test:/off app.test:/keep/off \
			app.test:/bulk/off2:ka
		out=$(answers s2 4)
		if [ "$out" = "200 - -, 200 - -, 200 - -, 200 - -, " ]; then
			t_ok "$v: reloaded to brownout_lag = \"0\": a stall sheds nothing"
		else
			t_fail "$v: brownout off" "$out"
		fi
	else
		t_fail "$v: reload to brownout_lag 0" "$(tail -3 "$EDGED_LOG")"
	fi
	n=$(edged_metric edge_requests_shed_total)
	[ "$n" = "$shed" ] || t_fail "$v: brownout off: nothing shed" "$shed then $n"
	shed=$n

	edged_stop 10
	edged_sanitizers_clean "$v: sanitizers silent"

	# ---- records: the shed ones overloaded, 503
	# (as many as edge_requests_shed_total: a busy machine's own lag may
	# have shed some of the calm ones)
	out=$(python3 - "$T_TMP/requests.jsonl" "$shed" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
o = [r for r in recs if r.get("outcome") == "overloaded"]
ok = len(o) == int(sys.argv[2]) >= 5 and all(r["status"] == 503 for r in o)
print("ok" if ok else "bad %d: %s" % (len(o), [(r["time"], r["path"]) for r in o]))
PY
	)
	if [ "$out" = ok ]; then
		t_ok "$v: analytics: the shed requests recorded overloaded, 503, as many as edge_requests_shed_total"
	else
		t_fail "$v: analytics overloaded" "$out"
	fi
}

# the backend: 200 "b1 PATH", each request a line in $LOG as it comes; a
# path holding "slow" answered after 2 s
cat >"$T_TMP/backend.py" <<'PY'
import sys, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT, LOG = int(sys.argv[1]), sys.argv[2]


class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        with open(LOG, "a") as f:
            f.write(self.path + "\n")
        if "slow" in self.path:
            time.sleep(2)
        out = ("b1 %s\n" % self.path).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *a):
        pass


ThreadingHTTPServer.daemon_threads = True
ThreadingHTTPServer(("127.0.0.1", PORT), H).serve_forever()
PY
# ka.py PORT HOST PATH READY GO: GET PATH (served: "200") on a keep-alive
# connection, create READY, wait for GO, GET PATH again on it; prints the
# second answer as req and stall do ("503 overloaded retry")
cat >"$T_TMP/ka.py" <<'PY'
import json, os, socket, sys, time

port, host, path, ready, go = sys.argv[1:6]


def get(p):
    s.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (p, host)).encode())
    status = int(f.readline().split()[1])
    n, retry = 0, "-"
    while True:
        line = f.readline().strip()
        if not line:
            break
        k, _, v = line.decode().partition(":")
        if k.lower() == "content-length":
            n = int(v)
        if k.lower() == "retry-after" and v.strip() == "1":
            retry = "retry"
    body = f.read(n)
    try:
        err = json.loads(body)["error"]
    except Exception:
        err = "-"
    return "%d %s %s" % (status, err, retry)


# (a busy machine's own lag may shed the first: a few tries)
for i in range(5):
    s = socket.create_connection(("127.0.0.1", int(port)), timeout=30)
    f = s.makefile("rb")
    first = get(path + "-first")
    if first.startswith("200 "):
        break
    s.close()
    time.sleep(0.5)
open(ready, "w").close()
while not os.path.exists(go):
    time.sleep(0.01)
print(get(path) if first.startswith("200 ") else "first: " + first)
PY
if ! edged_backend "$P_B1" python3 "$T_TMP/backend.py" "$P_B1" "$LOG"; then
	t_fail "backend starts"
	t_exit
	exit
fi

# ---- --check refusals: file, line, key
while IFS='|' read -r lim env want; do
	conf "$lim" "$env"
	rc=0
	out=$("$B/edged" -c "$T_TMP/edge.conf" --check 2>&1) || rc=$?
	if [ "$rc" -ne 0 ] && grep -qE "edge.conf:[0-9]+: .*$want" <<<"$out"; then
		t_ok "--check refuses ${lim}${env}"
	else
		t_fail "--check: ${lim}${env}" "$out"
	fi
done <<'CASES'
brownout_lag = "-1s";||limits.brownout_lag
brownout_lag = "soon";||limits.brownout_lag
brownout_lag = "5ms";||limits.brownout_lag: 5ms: "0" \(off\) or at least 10ms
brownout_lag = "1h";||limits.brownout_lag
brownout_lag = 100;||limits.brownout_lag
|shed = "yes";|shed
|shed = 1;|shed
CASES
conf ""
rc=0
out=$("$B/edged" -c "$T_TMP/edge.conf" --check 2>&1) || rc=$?
[ "$rc" = 0 ] || t_fail "--check takes the test's configuration" "$out"

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
