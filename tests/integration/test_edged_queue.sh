#!/bin/bash
# test_edged_queue.sh - the admission queue (limits.max_queued,
# timeouts.queue: HAProxy's maxconn + timeout queue), the request's
# waiting state, end to end through the live daemon: with limits.max_inflight
# = 1 a request behind a slow one waits and is served when the slot frees;
# one that waits longer than timeouts.queue gets 503 overloaded with
# Retry-After; a client that closes while queued leaves the queue (the
# upstream never sees its request, the queue empties); with two workers,
# requests queued on either worker are all served as the slot passes from
# one to the next (through the workers' mailboxes); a waiter for a full
# route does not hold up a request for another route; a reload that raises
# limits.max_inflight lets the waiters in at once. Backend:
# tests/tools/echo_backend.py (/slow/MS). Runs against build/edged and
# build/asan/edged. Needs no root.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/lib_edged.sh
. "$(dirname "$0")/../lib_edged.sh"
edged_begin curl python3
edged_need_build

BASE=$(edged_ports 3)
P_EDGE=$BASE
P_ADMIN=$((BASE + 1))
P_BACK=$((BASE + 2))
CL="$T_TMP/client.py"
CASE_OK=0

write_conf() { # WORKERS QUEUE_TIMEOUT MAX_INFLIGHT [PER_ROUTE]
	{
		edged_conf_head "$P_ADMIN" "$T_TMP/edged.sock" "$1"
		cat <<CONF
limits = { max_inflight = $3; max_queued = 16; max_inflight_per_route = ${4:-1}; };
timeouts = { queue = "$2"; };
projects = (
  { id = "shop";
    environments = (
      { id = "shop-prod";
        domains = [ "shop.test" ];
        deployment = { id = "shop-1"; upstreams = [ "127.0.0.1:$P_BACK" ]; };
      },
      { id = "other-prod";
        domains = [ "other.test" ];
        deployment = { id = "other-1"; upstreams = [ "127.0.0.1:$P_BACK" ]; };
      }
    );
  }
);
CONF
	} >"$T_TMP/edge.conf"
}

# Cases of the python client; each prints what it saw, exits 1 on failure.
cat >"$CL" <<'PY'
import http.client
import json
import socket
import sys
import threading
import time

PORT = int(sys.argv[1])
CMD = sys.argv[2]


def fail(msg):
    print(msg)
    sys.exit(1)


def get(path, host="shop.test", out=None, key=None):
    t0 = time.monotonic()
    c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=15)
    c.request("GET", path, headers={"Host": host})
    r = c.getresponse()
    b = r.read()
    res = (r.status, time.monotonic() - t0, b, r.getheader("Retry-After"))
    c.close()
    if out is not None:
        out[key] = res
    return res


def bg(path, out, key, host="shop.test"):
    t = threading.Thread(target=get, args=(path, host, out, key))
    t.start()
    return t


if CMD == "served":
    # the slot frees after ~1.5 s: the queued request is served then
    res = {}
    t = bg("/slow/1500", res, "slow")
    time.sleep(0.3)
    st, took, b, _ = get("/second")
    t.join()
    if res["slow"][0] != 200 or st != 200:
        fail("slow %r, second %d %r" % (res["slow"][:2], st, b[:200]))
    if took < 0.8:
        fail("the second answered in %.2f s: it did not wait" % took)
    print("queued %.2f s behind the slow one, then 200" % took)

elif CMD == "timeout":
    res = {}
    t = bg("/slow/3000", res, "slow")
    time.sleep(0.3)
    st, took, b, ra = get("/second")
    t.join()
    if st != 503 or json.loads(b).get("error") != "overloaded":
        fail("second: %d %r" % (st, b[:200]))
    if not 0.4 <= took <= 1.5 or ra != "1":
        fail("503 after %.2f s, Retry-After %r" % (took, ra))
    if res["slow"][0] != 200:
        fail("slow: %r" % (res["slow"][:2],))
    print("503 overloaded after %.2f s in the queue, Retry-After %s"
          % (took, ra))

elif CMD == "leave":
    # a client that closes while queued: gone from the queue
    res = {}
    t = bg("/slow/1500", res, "slow")
    time.sleep(0.3)
    s = socket.create_connection(("127.0.0.1", PORT), 5)
    s.sendall(b"GET /left HTTP/1.1\r\nHost: shop.test\r\n\r\n")
    time.sleep(0.3)
    s.close()
    time.sleep(0.1)
    st, took, b, _ = get("/third")
    t.join()
    if st != 200:
        fail("third: %d %r" % (st, b[:200]))
    print("third served %.2f s later" % took)

elif CMD == "workers":
    # 8 requests at once behind a slow one, over two workers: every one
    # is served in turn as the single slot passes on
    res = {}
    t = bg("/slow/500", res, "slow")
    time.sleep(0.2)
    ts = [bg("/slow/100/n%d" % i, res, i) for i in range(8)]
    for x in ts + [t]:
        x.join()
    bad = {k: v[:2] for k, v in res.items() if v[0] != 200}
    if bad:
        fail("not served: %r" % bad)
    print("9 requests through one slot: all 200 (last after %.2f s)"
          % max(v[1] for v in res.values()))

elif CMD == "raise":
    # a reload that raises max_inflight lets the waiters in at once,
    # not when the slow request that holds the one slot ends
    import os
    import signal
    res = {}
    t = bg("/slow/4000", res, "slow")
    time.sleep(0.3)
    ts = [bg("/slow/100/r%d" % i, res, i) for i in range(3)]
    time.sleep(0.5)
    conf = open(sys.argv[3]).read()
    open(sys.argv[3], "w").write(conf.replace("max_inflight = 1;",
                                              "max_inflight = 100;"))
    os.kill(int(sys.argv[4]), signal.SIGHUP)
    for x in ts:
        x.join()
    waited = max(res[i][1] for i in range(3))
    bad = {i: res[i][:2] for i in range(3) if res[i][0] != 200}
    t.join()
    if bad:
        fail("waiters: %r" % bad)
    if waited > 2.5:
        fail("the waiters were served after %.2f s: the raised cap did not "
             "let them in" % waited)
    print("waiters served %.2f s after they queued" % waited)

elif CMD == "routes":
    # route cap 1: a waiter for shop.test does not hold up other.test
    res = {}
    t = bg("/slow/1500", res, "slow")
    time.sleep(0.2)
    t2 = bg("/slow/100", res, "waiter")
    time.sleep(0.2)
    st, took, b, _ = get("/other", host="other.test")
    t.join()
    t2.join()
    if st != 200 or took > 0.5:
        fail("other.test: %d after %.2f s" % (st, took))
    if res["waiter"][0] != 200 or res["waiter"][1] < 0.8:
        fail("the shop.test waiter: %r" % (res["waiter"][:2],))
    print("other.test served at once (%.2f s) while a shop.test request "
          "waits for its route" % took)
PY

# case_run BIN NAME CMD OK WORKERS QUEUE_TIMEOUT [MAX_INFLIGHT [PER_ROUTE]]
case_run() {
	local bin=$1 name=$2 out queued
	write_conf "$5" "$6" "${7:-1}" "${8:-1}"
	if ! edged_start "$bin" "$T_TMP/edge.conf"; then
		t_fail "$name: edged starts" "$(tail -5 "$EDGED_LOG")"
		edged_stop 5
		return
	fi
	if out=$(python3 "$CL" "$P_EDGE" "$3" "$T_TMP/edge.conf" "$EPID" 2>&1); then
		t_ok "$4, $out"
		CASE_OK=1
	else
		t_fail "$name" "$out"
		CASE_OK=0
	fi
	queued=$(curl -s -m 5 "http://127.0.0.1:$P_ADMIN/metrics" |
		awk '$1 == "edge_admission_queued" { print $2 }')
	[ "$queued" = 0 ] || t_fail "$name: queue empty afterwards" "edge_admission_queued '$queued'"
	edged_stop 5
	edged_sanitizers_clean "$name: sanitizers clean"
}

run_suite() { # BIN LABEL
	local bin=$1 v=$2
	case_run "$bin" "$v: served" served \
		"$v: max_inflight = 1, a request behind a slow one waits" 1 3s
	case_run "$bin" "$v: queue timeout" timeout \
		"$v: timeouts.queue = 500ms" 1 500ms
	: >"$T_TMP/backend.jsonl"
	case_run "$bin" "$v: leave" leave \
		"$v: a client that closes while queued leaves the queue" 1 5s
	if [ "$CASE_OK" = 1 ]; then
		if grep -q '"/left"' "$T_TMP/backend.jsonl"; then
			t_fail "$v: leave: the upstream saw the request of a client that had gone"
		elif ! grep -q '"/third"' "$T_TMP/backend.jsonl"; then
			t_fail "$v: leave: the backend log holds no /third" "$(tail -3 "$T_TMP/backend.jsonl")"
		else
			t_ok "$v: the upstream never saw the request of the client that left"
		fi
	fi
	case_run "$bin" "$v: two workers" workers \
		"$v: two workers, one slot" 2 5s
	case_run "$bin" "$v: raise" raise \
		"$v: a reload raising max_inflight serves the waiters" 2 8s 1 100
	case_run "$bin" "$v: routes" routes \
		"$v: max_inflight_per_route = 1" 1 5s 10
}

if ! edged_backend "$P_BACK" python3 "$TOOLS/echo_backend.py" "$P_BACK" "$T_TMP/backend.jsonl"; then
	t_fail "backend starts"
	t_exit
	exit
fi
run_suite "$EDGED" edged
edged_asan && run_suite "$EDGED_ASAN" asan
t_exit
