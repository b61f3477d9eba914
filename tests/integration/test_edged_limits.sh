#!/bin/bash
# test_edged_limits.sh - edged's admission limits and failure handling,
# end to end through the live daemon: the per-client rate limit (429 with
# Retry-After; one bucket per client across 2 and 4 workers, IPv4 and
# IPv6; a reload changing the rate), the in-flight cap (503 overloaded), the connection cap
# (503 connection_limit and close), an upstream dying or stalling
# mid-response (closed, and after timeouts.upstream_response), uploads
# longer than timeouts.upstream_response (200, nobody ejected), slow
# request bodies (timeouts.body and body_min_rate: 408 body_timeout, read
# whole under limits.body_buffer and streamed above it), a pooled upstream
# connection found closed (retried for idempotent requests, a body read
# whole included), limits set by SIGHUP, and SIGHUP reloads under
# keep-alive load. Each case
# starts edged with its own generated configuration on 127.0.0.1 high
# ports; backends are tests/tools/echo_backend.py, cut_backend.py and
# once_backend.py; clients are
# python3 (stdlib) and curl. Runs against build/edged and again against
# build/asan/edged (sanitizers must stay silent). Needs no root.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/lib_edged.sh
. "$(dirname "$0")/../lib_edged.sh"
edged_begin curl python3
edged_need_build

BASE=$(edged_ports 5)
P_EDGE=$BASE
P_ADMIN=$((BASE + 1))
P_BACK=$((BASE + 2))
P_CUT=$((BASE + 3))
P_ONCE=$((BASE + 4))
CL="$T_TMP/client.py"

write_conf() { # FILE WORKERS LIMITS RATELIMIT EXTRA_DOMAIN
	{
		edged_conf_head "$P_ADMIN" "$T_TMP/edged.sock" "$2"
		cat <<CONF
analytics = { file = "$T_TMP/requests.jsonl"; };
limits = { $3 };
ratelimit = { $4 };
timeouts = {
  header = "5s";
  body = "1s";
  body_min_rate = 2000;
  upstream_connect = "1s";
  upstream_response = "5s";
  drain = "2s";
};
projects = (
  { id = "shop";
    environments = (
      { id = "shop-prod";
        domains = [ "shop.test" $5 ];
        deployment = { id = "shop-1"; upstreams = [ "127.0.0.1:$P_BACK" ]; };
      },
      { id = "cut-prod";
        domains = [ "cut.test" ];
        deployment = { id = "cut-1"; upstreams = [ "127.0.0.1:$P_CUT" ]; };
      },
      { id = "once-prod";
        domains = [ "once.test" ];
        deployment = { id = "once-1"; upstreams = [ "127.0.0.1:$P_ONCE" ]; };
      }
    );
  }
);
CONF
	} >"$1"
}

start_edged() { # BIN WORKERS LIMITS RATELIMIT
	: >"$T_TMP/requests.jsonl"
	write_conf "$T_TMP/edge.conf" "$2" "$3" "$4" ""
	edged_start "$1" "$T_TMP/edge.conf" -v
}

# stop_edged LABEL: SIGTERM, wait 5 s for the exit; fail on a sanitizer report
stop_edged() {
	edged_stop 5
	edged_sanitizers_clean "$1: sanitizers clean"
}

# The python client: one subcommand per case, prints why on failure, exits
# 0 on success, 1 on failure.
cat >"$CL" <<'PY'
import http.client
import json
import select
import socket
import sys
import threading
import time

PORT = int(sys.argv[1])
CMD = sys.argv[2]


def fail(msg):
    print(msg)
    sys.exit(1)


def conn():
    return http.client.HTTPConnection("127.0.0.1", PORT, timeout=10)


def get(c, path, host="shop.test"):
    c.request("GET", path, headers={"Host": host})
    r = c.getresponse()
    return r, r.read()


def raw_read(s, timeout):
    """Read until the peer closes (True) or timeout passes (False)."""
    s.settimeout(timeout)
    out = b""
    try:
        while True:
            d = s.recv(65536)
            if not d:
                return out, True
            out += d
    except socket.timeout:
        return out, False
    except ConnectionResetError:
        return out, True


def error_json(body, name, rid):
    j = json.loads(body)
    if j.get("error") != name:
        fail("error %r, wanted %r: %r" % (j.get("error"), name, body))
    if not j.get("request_id") or (rid and j["request_id"] != rid):
        fail("request_id %r, header %r" % (j.get("request_id"), rid))


if CMD == "ratelimit":
    c = conn()
    for i in (1, 2):
        r, b = get(c, "/r%d" % i)
        if r.status != 200:
            fail("request %d: status %d %r" % (i, r.status, b))
    r, b = get(c, "/r3")
    if r.status != 429:
        fail("request 3: status %d, wanted 429: %r" % (r.status, b))
    ra = r.getheader("Retry-After")
    if ra is None or not ra.isdigit() or int(ra) < 1:
        fail("Retry-After %r" % ra)
    error_json(b, "rate_limited", r.getheader("X-Request-ID"))
    print("retry-after", ra)

elif CMD == "inflight":
    res = {}

    def slow():
        c = conn()
        r, b = get(c, "/slow/1500")
        res["slow"] = (r.status, time.monotonic())
    t = threading.Thread(target=slow)
    t.start()
    time.sleep(0.5)
    c = conn()
    r, b = get(c, "/second")
    if r.status != 503:
        fail("second request while one is in flight: %d, wanted 503: %r"
             % (r.status, b))
    error_json(b, "overloaded", r.getheader("X-Request-ID"))
    if "slow" in res:
        fail("the slow request finished too early")
    t.join()
    if res.get("slow", (0,))[0] != 200:
        fail("slow request: %r" % (res.get("slow"),))
    c = conn()
    for i in range(3):
        r, b = get(c, "/after%d" % i)
        if r.status != 200:
            fail("after the slow one completed: %d %r" % (r.status, b))

elif CMD == "connlimit":
    held = [socket.create_connection(("127.0.0.1", PORT), 5)
            for _ in range(2)]
    time.sleep(0.3)
    s = socket.create_connection(("127.0.0.1", PORT), 5)
    out, closed = raw_read(s, 3)
    s.close()
    head = out.split(b"\r\n\r\n", 1)
    if not out.startswith(b"HTTP/1.1 503 ") or not closed or len(head) < 2:
        fail("third connection: closed=%s %r" % (closed, out[:300]))
    rid = None
    for line in head[0].split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"x-request-id":
            rid = v.strip().decode()
    error_json(head[1], "connection_limit", rid)
    # the held ones still work
    held[0].sendall(b"GET /held HTTP/1.1\r\nHost: shop.test\r\n\r\n")
    held[0].settimeout(5)
    d = held[0].recv(65536)
    if not d.startswith(b"HTTP/1.1 200 "):
        fail("held connection: %r" % d[:200])
    held[1].close()
    ok = False
    for _ in range(20):
        time.sleep(0.1)
        c = conn()
        try:
            r, b = get(c, "/new")
        except (OSError, http.client.HTTPException):
            continue
        if r.status == 200:
            ok = True
            break
    if not ok:
        fail("no new connection served after closing a held one")
    held[0].close()

elif CMD == "cut":
    s = socket.create_connection(("127.0.0.1", PORT), 5)
    s.sendall(b"GET /cut HTTP/1.1\r\nHost: cut.test\r\n\r\n")
    out, closed = raw_read(s, 5)
    s.close()
    if b"\r\n\r\n" not in out:
        fail("no response head: closed=%s %r" % (closed, out[:300]))
    head, body = out.split(b"\r\n\r\n", 1)
    if not closed:
        fail("connection left open after the upstream died "
             "(%d body bytes)" % len(body))
    if head.startswith(b"HTTP/1.1 200 ") and len(body) >= 100000:
        fail("a complete-looking response: %d body bytes" % len(body))
    print("status line %r, %d body bytes, closed" %
          (head.split(b"\r\n")[0], len(body)))
    c = conn()
    r, b = get(c, "/after-cut")
    if r.status != 200:
        fail("request after the cut: %d %r" % (r.status, b))

elif CMD == "stall":
    # the upstream sends its head and 1000 of 100000 body bytes, then
    # nothing: timeouts.upstream_response (5 s) after its last byte edge
    # closes the client connection, the response cut short
    s = socket.create_connection(("127.0.0.1", PORT), 5)
    s.sendall(b"GET /stall HTTP/1.1\r\nHost: cut.test\r\n\r\n")
    s.settimeout(5)
    out = b""
    while b"\r\n\r\n" not in out or len(out.split(b"\r\n\r\n", 1)[1]) < 1000:
        d = s.recv(65536)
        if not d:
            fail("closed before the first 1000 body bytes: %r" % out[:300])
        out += d
    t0 = time.monotonic()
    more, closed = raw_read(s, 10)
    took = time.monotonic() - t0
    s.close()
    if not closed or more:
        fail("after the stall: closed=%s, %d more bytes" % (closed, len(more)))
    if not 4.5 < took < 7.5:
        fail("closed %.2f s after the last byte, wanted ~5 s" % took)
    print("closed %.1f s after the upstream's last byte" % took)

elif CMD == "body":
    # body KIND PATH TOTAL: POST a Content-Length body of TOTAL bytes
    #   trickle  100 bytes every 0.3 s (333 B/s): never a 1 s gap, but
    #            below body_min_rate (2000 B/s): 408 at about 1.2 s
    #   stop     500 bytes, then nothing: 408 at the 1 s gap
    #   fast     1500 bytes every 0.25 s (6000 B/s): completes
    kind, path, total = sys.argv[3], sys.argv[4].encode(), int(sys.argv[5])
    piece, every = {"trickle": (100, 0.3), "stop": (500, None),
                    "fast": (1500, 0.25)}[kind]
    s = socket.create_connection(("127.0.0.1", PORT), 5)
    t0 = time.monotonic()
    s.sendall(b"POST %s HTTP/1.1\r\nHost: shop.test\r\n"
              b"Content-Length: %d\r\n\r\n" % (path, total))
    sent = 0
    while sent < total:
        n = min(piece, total - sent)
        try:
            s.sendall(b"x" * n)
        except OSError:
            break
        sent += n
        if every is None or select.select([s], [], [], every)[0]:
            break  # stopped, or edged answered
    if kind == "fast":
        out, closed = raw_read(s, 0.5) if sent < total else (b"", False)
        s.settimeout(10)
        while b"\r\n\r\n" not in out or not out.endswith(b"}"):
            d = s.recv(65536)
            if not d:
                break
            out += d
    else:
        out, closed = raw_read(s, 8)
    took = time.monotonic() - t0
    s.close()
    head, _, body = out.partition(b"\r\n\r\n")
    what = "%d of %d bytes sent in %.2f s" % (sent, total, took)
    if kind == "fast":
        if not head.startswith(b"HTTP/1.1 200 "):
            fail("%s: %r" % (what, out[:300]))
        j = json.loads(body)
        if j.get("body_len") != total:
            fail("%s: the backend got %r bytes" % (what, j.get("body_len")))
        if took < 1.5:
            fail("%s: too fast to test the rate rule" % what)
        print("%s, 200" % what)
        sys.exit(0)
    if not head.startswith(b"HTTP/1.1 408 ") or not closed:
        fail("%s: closed=%s %r" % (what, closed, out[:300]))
    rid = None
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"x-request-id":
            rid = v.strip().decode()
    error_json(body, "body_timeout", rid)
    lo, hi = (0.9, 3.0) if kind == "stop" else (1.0, 3.0)
    if sent >= total or not lo <= took <= hi:
        fail("%s: 408 outside %.1f..%.1f s, or after the whole body"
             % (what, lo, hi))
    print("%s, then 408 body_timeout and close" % what)

elif CMD == "upload":
    # 4 uploads at once of 200000 bytes each at 20 KB/s (10 s, twice
    # timeouts.upstream_response, well above body_min_rate): all 200, the
    # backend got every byte
    res = {}

    def up(k):
        s = socket.create_connection(("127.0.0.1", PORT), 5)
        total = 200000
        s.sendall(b"POST /upload-%d HTTP/1.1\r\nHost: shop.test\r\n"
                  b"Content-Length: %d\r\nConnection: close\r\n\r\n"
                  % (k, total))
        sent = 0
        t0 = time.monotonic()
        while sent < total:
            if select.select([s], [], [], 0)[0]:
                break  # edged answered early
            s.sendall(b"u" * 2000)
            sent += 2000
            time.sleep(0.1)
        out, _ = raw_read(s, 10)
        s.close()
        res[k] = (sent, time.monotonic() - t0, out)
    ts = [threading.Thread(target=up, args=(k,)) for k in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for k in range(4):
        sent, took, out = res[k]
        head, _, body = out.partition(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 200 "):
            fail("upload %d: %d bytes sent in %.1f s: %r"
                 % (k, sent, took, out[:300]))
        if json.loads(body).get("body_len") != 200000:
            fail("upload %d: the backend got %r" % (k, body[:200]))
    print("4 uploads of 200000 bytes at 20 KB/s (%.1f s each) -> 200"
          % res[0][1])

elif CMD == "deaf":
    # an upstream that reads the head and then takes no byte of the body:
    # once edge's buffers towards it are full, timeouts.upstream_response
    # (5 s) later the client gets 504 upstream_timeout
    s = socket.create_connection(("127.0.0.1", PORT), 5)
    total = 9 << 20  # under the default max_body_bytes (10M)
    s.sendall(b"POST /deaf HTTP/1.1\r\nHost: cut.test\r\n"
              b"Content-Length: %d\r\n\r\n" % total)
    s.setblocking(False)
    piece = b"d" * 65536
    sent, last = 0, time.monotonic()
    t0 = last
    while time.monotonic() - last < 1.0 and sent < total:
        try:
            sent += s.send(piece)
            last = time.monotonic()
        except BlockingIOError:
            select.select([s], [s], [], 0.1)
        except OSError:
            break
    stalled = time.monotonic()
    s.setblocking(True)
    out, closed = raw_read(s, 15)
    took = time.monotonic() - stalled
    s.close()
    head, _, body = out.partition(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 504 "):
        fail("%d bytes sent, then %.1f s: closed=%s %r"
             % (sent, took, closed, out[:300]))
    error_json(body, "upstream_timeout", None)
    print("%d MB taken, then 504 upstream_timeout %.1f s after the "
          "upload stalled" % (sent >> 20, took))

elif CMD == "stale":
    # once_backend.py drops each connection at its second request: every
    # request after the first goes over a pooled connection that fails
    c = conn()
    res = []
    for method, path, body in (("GET", "/a", None), ("PUT", "/b", "hello"),
                               ("POST", "/c", "world"), ("GET", "/d", None)):
        c.request(method, path, body=body, headers={"Host": "once.test"})
        r = c.getresponse()
        b = r.read()
        res.append((method, r.status))
        if r.getheader("Connection", "").lower() == "close":
            c.close()
            c = conn()
        if method != "POST" and r.status != 200:
            fail("%s %s: %d %r (so far %r)" % (method, path, r.status, b, res))
        if r.status == 200 and json.loads(b)["body"] != (body or ""):
            fail("%s %s: the backend got %r" % (method, path, b))
        if method == "POST":
            if r.status != 502:
                fail("POST on a dropped pooled connection: %d, wanted 502 "
                     "(%r)" % (r.status, res))
            error_json(b, "upstream_closed", r.getheader("X-Request-ID"))
    print(" ".join("%s %d" % x for x in res) + " (upstream_closed)")

elif CMD == "shared":
    # the per-client rate limit across workers: connections opened one
    # at a time until /metrics shows each worker accepted some, then K
    # requests on each as fast as they go, all at once; with rate 1/m the
    # 200s must be exactly the burst (+1 per minute the run took)
    host, workers, burst, admin = (sys.argv[3], int(sys.argv[4]),
                                   int(sys.argv[5]), int(sys.argv[6]))
    K = burst + 5

    def accepted():
        s = socket.create_connection(("127.0.0.1", admin), 5)
        s.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
        txt, _ = raw_read(s, 5)
        s.close()
        n = [0] * workers
        for line in txt.decode().splitlines():
            if line.startswith('edge_worker_accepted_total{worker="'):
                w = int(line.split('"')[1])
                n[w] = int(line.split()[-1])
        return n

    base = accepted()
    conns = []
    t0 = time.monotonic()
    while True:
        c = http.client.HTTPConnection(host, PORT, timeout=30)
        c.connect()
        conns.append(c)
        # wait for edged to have accepted it (a state, not a time)
        for _ in range(500):
            now = accepted()
            if sum(now) - sum(base) >= len(conns):
                break
            time.sleep(0.02)
        else:
            fail("edged accepted %d of %d connections"
                 % (sum(now) - sum(base), len(conns)))
        per = [a - b for a, b in zip(now, base)]
        if min(per) > 0:
            break
        if len(conns) >= 200:
            fail("200 connections and a worker accepted none: %r" % per)
    res = []
    lock = threading.Lock()
    go = threading.Event()

    def run(c):
        mine = []
        go.wait()
        for i in range(K):
            try:
                r, b = get(c, "/s%d" % i)
                mine.append((r.status, r.getheader("Retry-After"), b,
                             r.getheader("X-Request-ID")))
            except (OSError, http.client.HTTPException) as e:
                mine.append((repr(e), None, b"", None))
                c.close()
                c = http.client.HTTPConnection(host, PORT, timeout=30)
        with lock:
            res.extend(mine)
    ts = [threading.Thread(target=run, args=(c,)) for c in conns]
    for t in ts:
        t.start()
    go.set()
    for t in ts:
        t.join()
    elapsed = time.monotonic() - t0
    ok = [x for x in res if x[0] == 200]
    limited = [x for x in res if x[0] == 429]
    other = [x for x in res if x[0] not in (200, 429)]
    if other:
        fail("not 200 or 429: %r" % other[:3])
    # 1/m: one more token per whole minute since the first request
    most = burst + int(elapsed // 60)
    if not burst <= len(ok) <= most:
        fail("%d requests got 200, wanted %d..%d (burst %d at 1/m, %d "
             "workers each accepted some of %d connections: %r)"
             % (len(ok), burst, most, burst, workers, len(conns), per))
    for st, ra, b, rid in limited:
        if ra is None or not ra.isdigit() or not 1 <= int(ra) <= 60:
            fail("429 with Retry-After %r" % ra)
        error_json(b, "rate_limited", rid)
    print("%d connections over %d workers (accepted %s), %d requests: %d "
          "x 200, %d x 429 rate_limited with Retry-After 1..60"
          % (len(conns), workers, "/".join(map(str, per)), len(res),
             len(ok), len(limited)))

elif CMD == "takes":
    # N requests on one connection: print the statuses and the last
    # Retry-After
    n = int(sys.argv[3])
    c = conn()
    st, ra = [], None
    for i in range(n):
        r, b = get(c, "/t%d" % i)
        st.append(r.status)
        if r.status == 429:
            ra = r.getheader("Retry-After")
            error_json(b, "rate_limited", r.getheader("X-Request-ID"))
        elif r.status != 200:
            fail("request %d: %d %r" % (i, r.status, b))
    print("%d %d %s" % (st.count(200), st.count(429), ra))

elif CMD == "load":
    # 4 threads x 75 keep-alive requests; report every non-200 / error
    errs = []
    done = [0]
    lock = threading.Lock()

    def run(k):
        c = conn()
        for i in range(75):
            try:
                r, b = get(c, "/slow/10")
                st = r.status
            except (OSError, http.client.HTTPException) as e:
                st = repr(e)
                c.close()
                c = conn()
            with lock:
                if st != 200:
                    errs.append((k, i, st))
                done[0] += 1
    ts = [threading.Thread(target=run, args=(k,)) for k in range(4)]
    open(sys.argv[3], "w").close()  # tells the shell the load started
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errs or done[0] != 300:
        fail("%d of %d requests failed: %r" % (len(errs), done[0], errs[:5]))
    print("300 requests, all 200")
PY

# limit_case BIN NAME LIMITS RATELIMIT CMD OK [sighup]: edged with one
# worker and these limits (sighup: started without any, then given them
# by SIGHUP), then the client's CMD; the case passes as OK (followed by
# what CMD printed, if anything) when CMD exits 0, else fails as NAME.
limit_case() {
	local bin=$1 name=$2 out started
	if [ "${7:-}" = sighup ]; then
		start_edged "$bin" 1 "" "" && started=1 &&
			write_conf "$T_TMP/edge.conf" 1 "$3" "$4" "" &&
			kill -HUP "$EPID" && sleep 0.5
	else
		start_edged "$bin" 1 "$3" "$4" && started=1
	fi
	if [ -n "${started:-}" ]; then
		if out=$(python3 "$CL" "$P_EDGE" "$5" 2>&1); then
			t_ok "$6${out:+, $out}"
		else
			t_fail "$name" "$out"
		fi
	else
		t_fail "$name: edged starts" "$(tail -5 "$EDGED_LOG")"
	fi
	stop_edged "$name"
}

# have_ipv6: 0 when ::1 can be bound here
have_ipv6() {
	python3 -c 'import socket; s = socket.socket(socket.AF_INET6); s.bind(("::1", 0))' 2>/dev/null
}

# shared_case BIN LABEL WORKERS: one client's requests spread over WORKERS
# workers get one burst between them (rate 1/m, burst 10), over IPv4 and
# (when the host has it) IPv6, each address its own bucket.
shared_case() {
	local bin=$1 v=$2 w=$3 fam host out
	write_conf "$T_TMP/edge.conf" "$w" "" 'rate = "1/m"; burst = 10;' ""
	if have_ipv6; then
		sed -i "s|^listen = .*|listen = [ \"127.0.0.1:$P_EDGE\", \"[::1]:$P_EDGE\" ];|" \
			"$T_TMP/edge.conf"
	fi
	: >"$T_TMP/requests.jsonl"
	if ! edged_start "$bin" "$T_TMP/edge.conf" -v; then
		t_fail "$v: shared rate limit, $w workers: edged starts" "$(tail -5 "$EDGED_LOG")"
		stop_edged "$v: shared rate limit"
		return
	fi
	for fam in IPv4 IPv6; do
		host=127.0.0.1
		if [ $fam = IPv6 ]; then
			if ! have_ipv6; then
				t_skip "$v: shared rate limit, $w workers, IPv6" "no ::1 here"
				continue
			fi
			host=::1
		fi
		if out=$(python3 "$CL" "$P_EDGE" shared "$host" "$w" 10 "$P_ADMIN" 2>&1); then
			t_ok "$v: rate 1/m burst 10 with $w workers, $fam: $out"
		else
			t_fail "$v: shared rate limit, $w workers, $fam" "$out"
		fi
	done
	stop_edged "$v: shared rate limit, $w workers"
}

# reload_to RATELIMIT: rewrite the configuration (2 workers) with it,
# SIGHUP, and wait for edged to say it reloaded.
reload_to() {
	local n i
	n=$(grep -c 'reloaded' "$EDGED_LOG")
	write_conf "$T_TMP/edge.conf" 2 "" "$1" ""
	kill -HUP "$EPID"
	for ((i = 0; i < 200; i++)); do
		[ "$(grep -c 'reloaded' "$EDGED_LOG")" -gt "$n" ] && return 0
		sleep 0.05
	done
	return 1
}

# takes N LO HI: N requests on one connection; 0 when the numbers of 200s
# and 429s are the next two words of $want and the last Retry-After lies
# in LO..HI (none: LO is None); $out says what came.
takes() {
	local n200 n429 ra
	out=$(python3 "$CL" "$P_EDGE" takes "$1" 2>&1) || return 1
	read -r n200 n429 ra <<<"$out"
	[ "$n200 $n429" = "${want% *}" ] || return 1
	if [ "$2" = None ]; then
		[ "$ra" = None ]
	else
		[ "$ra" != None ] && [ "$ra" -ge "$2" ] && [ "$ra" -le "$3" ]
	fi
}

# rate_change_case BIN LABEL: a reload that changes the rate keeps what a
# client owes (no fresh burst), in the new bucket's terms: a deeper
# bucket lets it have the difference, a shallower one caps what it owes
# (the Retry-After of 1/m is then at most 60 s, where 7 minutes were
# owed).
rate_change_case() {
	local bin=$1 v=$2 out want
	start_edged "$bin" 2 "" 'rate = "1/m"; burst = 5;' || {
		t_fail "$v: rate change by SIGHUP: edged starts" "$(tail -5 "$EDGED_LOG")"
		stop_edged "$v: rate change"
		return
	}
	if want="5 3 -" && takes 8 1 60 &&
		reload_to 'rate = "1/m"; burst = 8;' && want="3 2 -" && takes 5 1 60 &&
		reload_to 'rate = "1/m"; burst = 2;' && want="0 1 -" && takes 1 1 60 &&
		reload_to 'rate = "off";' && want="20 0 -" && takes 20 None; then
		t_ok "$v: rate change by SIGHUP: 5 of burst 5; burst 8: 3 more, not 8; burst 2: 429 with Retry-After <= 60 s, not 7 minutes; off: 20 of 20"
	else
		t_fail "$v: rate change by SIGHUP" "got '$out', wanted '$want' ($(grep -c reloaded "$EDGED_LOG") reloads)"
	fi
	stop_edged "$v: rate change"
}

run_suite() { # BIN LABEL
	local bin=$1 v=$2 out lpid i rc n running

	# 1. per-client rate limit
	limit_case "$bin" "$v: rate limit" "" 'rate = "2/s"; burst = 2;' ratelimit \
		"$v: rate limit: 2 pass, the 3rd -> 429 rate_limited"
	# one bucket per client whichever worker its connections land on
	shared_case "$bin" "$v" 2
	shared_case "$bin" "$v" 4
	rate_change_case "$bin" "$v"
	# 2. global in-flight cap
	limit_case "$bin" "$v: max_inflight" "max_inflight = 1;" "" inflight \
		"$v: max_inflight = 1: a second request -> 503 overloaded, then requests pass again"
	# the same two, switched on by a reload
	limit_case "$bin" "$v: rate limit by SIGHUP" "" 'rate = "2/s"; burst = 2;' ratelimit \
		"$v: a rate limit set by SIGHUP: 2 pass, the 3rd -> 429 rate_limited" sighup
	limit_case "$bin" "$v: max_inflight by SIGHUP" "max_inflight = 1;" "" inflight \
		"$v: max_inflight = 1 set by SIGHUP: a second request -> 503 overloaded" sighup
	limit_case "$bin" "$v: upstream stalls mid-body" "" "" stall \
		"$v: upstream stalls mid-body: the client connection closes after timeouts.upstream_response"
	# a streamed upload that outlasts timeouts.upstream_response: that
	# clock starts once the whole request is sent; the endpoint stays in
	if start_edged "$bin" 1 "" ""; then
		if out=$(python3 "$CL" "$P_EDGE" upload 2>&1); then
			curl -s -m 5 "http://127.0.0.1:$P_ADMIN/metrics" >"$T_TMP/metrics"
			n=$(awk '$1 == "edge_upstream_ejections_total" { print $2 }' "$T_TMP/metrics")
			to=$(awk '$1 == "edge_requests_total{outcome=\"upstream_timeout\"}" { print $2 }' "$T_TMP/metrics")
			if [ "$n" = 0 ] && [ "${to:-0}" = 0 ]; then
				t_ok "$v: $out; no upstream_timeout, no ejection"
			else
				t_fail "$v: long uploads" "ejections '$n', upstream_timeout '$to'"
			fi
		else
			t_fail "$v: long uploads" "$out"
		fi
	else
		t_fail "$v: long uploads: edged starts" "$(tail -5 "$EDGED_LOG")"
	fi
	stop_edged "$v: long uploads"
	limit_case "$bin" "$v: upstream takes no body" "" "" deaf \
		"$v: an upstream that stops reading the request body -> 504"
	# 3. connection cap
	limit_case "$bin" "$v: max_connections" "max_connections = 2;" "" connlimit \
		"$v: max_connections = 2: a 3rd connection -> 503 connection_limit and close; after closing one a new one is served"

	# 4. upstream dies mid-response
	if start_edged "$bin" 1 "" ""; then
		if out=$(python3 "$CL" "$P_EDGE" cut 2>&1); then
			sleep 0.3
			if python3 - "$T_TMP/requests.jsonl" >"$T_TMP/an" 2>&1 <<'PY'; then
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1]).read().splitlines()]
cut = [e for e in ev if e.get("path") == "/cut"]
assert len(cut) == 1, "records for /cut: %r" % cut
e = cut[0]
assert not (e["outcome"] == "ok" and e.get("bytes_out", 0) >= 100000), e
print("analytics: outcome %s status %s bytes_out %s" %
      (e["outcome"], e.get("status"), e.get("bytes_out")))
PY
				t_ok "$v: upstream dies mid-response: client sees the connection closed early ($out); $(cat "$T_TMP/an")"
			else
				t_fail "$v: upstream dies mid-response: analytics" "$(cat "$T_TMP/an")"
			fi
		else
			t_fail "$v: upstream dies mid-response" "$out"
		fi
	else
		t_fail "$v: upstream cut: edged starts" "$(tail -5 "$EDGED_LOG")"
	fi
	stop_edged "$v: upstream cut"

	# 5. slow bodies: read whole (under body_buffer, the default 64K), then
	# streamed (body_buffer = 1K: the head is upstream already)
	for buf in whole stream; do
		if [ $buf = whole ]; then
			start_edged "$bin" 1 "" ""
		else
			start_edged "$bin" 1 'body_buffer = "1K";' ""
		fi || {
			t_fail "$v: slow bodies: edged starts" "$(tail -5 "$T_TMP/edged.log")"
			stop_edged "$v: slow bodies"
			continue
		}
		: >"$T_TMP/backend.jsonl"
		for kind in trickle stop fast; do
			if out=$(python3 "$CL" "$P_EDGE" body $kind "/$buf-$kind" 12000 2>&1); then
				t_ok "$v: $buf body, $kind: $out"
			else
				t_fail "$v: $buf body, $kind" "$out"
			fi
		done
		sleep 0.3
		if python3 - "$T_TMP/requests.jsonl" "$T_TMP/backend.jsonl" $buf \
			>"$T_TMP/an" 2>&1 <<'PY'; then
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1]).read().splitlines()]
up = [json.loads(l) for l in open(sys.argv[2]).read().splitlines()]
buf = sys.argv[3]
out = []
for kind, want, status in (("trickle", "body_timeout", 408),
                           ("stop", "body_timeout", 408), ("fast", "ok", 200)):
    path = "/%s-%s" % (buf, kind)
    e = [x for x in ev if x.get("path") == path]
    assert len(e) == 1, "records for %s: %r" % (path, e)
    assert (e[0]["outcome"], e[0]["status"]) == (want, status), e[0]
    got = [u["body_len"] for u in up if u["path"] == path]
    if kind == "fast":
        assert got == [12000], "%s upstream: %r" % (path, got)
    elif buf == "whole":
        # read whole first: nothing reached the upstream
        assert got == [], "%s upstream: %r" % (path, got)
    else:
        # streamed: the upstream saw part of it, then its connection closed
        assert len(got) == 1 and got[0] < 12000, "%s upstream: %r" % (path, got)
    out.append("%s %s %d (upstream %s)" % (path, want, status, got))
print("; ".join(out))
PY
			t_ok "$v: $buf bodies: analytics and upstream: $(cat "$T_TMP/an")"
		else
			t_fail "$v: $buf bodies: analytics and upstream" "$(cat "$T_TMP/an")"
		fi
		n=$(curl -s -m 5 "http://127.0.0.1:$P_ADMIN/metrics" |
			awk '$1 == "edge_requests_total{outcome=\"body_timeout\"}" { print $2 }')
		if [ "$n" = 2 ]; then
			t_ok "$v: $buf bodies: /metrics counts 2 body_timeout"
		else
			t_fail "$v: $buf bodies: /metrics body_timeout" "got '$n', wanted 2"
		fi
		stop_edged "$v: slow bodies ($buf)"
	done

	# 6. a pooled connection the upstream had closed: a GET and a PUT with
	# a body read whole are retried on a new connection, a POST is not
	if start_edged "$bin" 1 "" ""; then
		: >"$T_TMP/once.jsonl"
		if out=$(python3 "$CL" "$P_EDGE" stale 2>&1) &&
			python3 - "$T_TMP/once.jsonl" >"$T_TMP/an" 2>&1 <<'PY'; then
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1]).read().splitlines()]
seen = [(e["ev"], e["method"], e["path"], e["body"]) for e in ev]
want = [("answered", "GET", "/a", ""), ("dropped", "PUT", "/b", "hello"),
        ("answered", "PUT", "/b", "hello"), ("dropped", "POST", "/c", "world")]
assert seen[:4] == want, seen
put = [e for e in ev if e["path"] == "/b"]
for e in put:
    h = {k.lower(): v for k, v in e["headers"]}
    assert h.get("content-length") == "5", e["headers"]
print("upstream saw: " + ", ".join("%s %s %s" % s[:3] for s in seen))
PY
			t_ok "$v: pooled connection found closed: $out; $(cat "$T_TMP/an")"
		else
			t_fail "$v: pooled connection found closed" "$out $(cat "$T_TMP/an" 2>/dev/null)"
		fi
	else
		t_fail "$v: stale pool: edged starts" "$(tail -5 "$T_TMP/edged.log")"
	fi
	stop_edged "$v: stale pool"

	# 7. SIGHUP under keep-alive load
	if start_edged "$bin" 2 "" ""; then
		rm -f "$T_TMP/load.started"
		python3 "$CL" "$P_EDGE" load "$T_TMP/load.started" >"$T_TMP/load.out" 2>&1 &
		lpid=$!
		edged_track "$lpid"
		for ((i = 0; i < 50; i++)); do
			[ -e "$T_TMP/load.started" ] && break
			sleep 0.05
		done
		for i in 1 2 3; do
			sleep 0.3
			write_conf "$T_TMP/edge.conf" 2 "" "" ", \"new$i.test\""
			kill -HUP "$EPID"
		done
		# the reloads must have landed while the load was running
		kill -0 "$lpid" 2>/dev/null
		running=$?
		wait "$lpid"
		rc=$?
		n=$(grep -c 'reloaded\|reload' "$EDGED_LOG")
		if [ $running -ne 0 ]; then
			t_fail "$v: SIGHUP under load" "the load finished before the 3rd SIGHUP: $(cat "$T_TMP/load.out")"
		elif [ $rc -eq 0 ] && kill -0 "$EPID" &&
			[ "$(curl -s -m 5 -o /dev/null -w '%{http_code}' -H 'Host: new3.test' \
				"http://127.0.0.1:$P_EDGE/")" = 200 ]; then
			t_ok "$v: 3 SIGHUPs during 4x75 keep-alive requests: every response 200, new domain routed ($n reload log lines)"
		else
			t_fail "$v: SIGHUP under load" "rc $rc: $(cat "$T_TMP/load.out") $(tail -3 "$EDGED_LOG")"
		fi
	else
		t_fail "$v: SIGHUP under load: edged starts" "$(tail -5 "$EDGED_LOG")"
	fi
	stop_edged "$v: SIGHUP under load"
}

if ! edged_backend "$P_BACK" python3 "$TOOLS/echo_backend.py" "$P_BACK" "$T_TMP/backend.jsonl" ||
	! edged_backend "$P_CUT" python3 "$TOOLS/cut_backend.py" "$P_CUT" 100000 1000 ||
	! edged_backend "$P_ONCE" python3 "$TOOLS/once_backend.py" "$P_ONCE" "$T_TMP/once.jsonl"; then
	t_fail "backends start"
	t_exit
	exit
fi

run_suite "$EDGED" edged
edged_asan && run_suite "$EDGED_ASAN" asan
t_exit
