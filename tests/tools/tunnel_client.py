#!/usr/bin/env python3
"""tunnel_client.py - the client side of edged's tunnel tests.

    tunnel_client.py MODE PORT HOST [ARG]

Connects to 127.0.0.1:PORT, asks tunnel_backend.py (behind edged, routed
by HOST) for an upgrade, checks what comes back and prints one JSON
object with what it saw. Exits 0 when the checks of MODE passed, 1 with
the reason on stderr otherwise.

  pump N PID [RATE [WAIT [SEND_RATE [STALL]]]]
                 send N bytes of the pattern while receiving N bytes
                 (/pump/N); samples VmRSS of PID meanwhile; with RATE
                 (not 0), reads at most RATE bytes per second (a slow
                 reader); with WAIT, both ends start sending WAIT ms
                 after the 101 (/pump/N/WAIT); with SEND_RATE (not 0),
                 both send at most SEND_RATE bytes per second; with
                 STALL, reads nothing for STALL ms after the 101 (a
                 reader that stops); STALL as MS:PATH reads nothing
                 until PATH exists, for at most MS ms
  upload N [READY [RATE]]
                 send N bytes of the pattern (/sink), shut down the write
                 side, and check the backend's "BYTES SHA256" answer; with
                 READY, create that file after the first MiB went out;
                 with RATE, send at most RATE bytes per second
  early          request head and "CLIENT-FIRST\\n" in one write (/banner):
                 the backend's "BACKEND-FIRST\\n" (sent with its 101) and
                 then the echo of CLIENT-FIRST must arrive, in that order
  halfclose N [WAIT [STALL]]
                 send 100000 bytes, shut down the write side, then still
                 receive the N bytes the backend sends after our EOF,
                 each checked; with WAIT, the bytes go out WAIT ms after
                 the 101; with STALL (MS:PATH), reads nothing after our
                 EOF until PATH exists, for at most MS ms
  earlyeof N     request head, 1000 bytes and our EOF (SHUT_WR) all
                 before the 101 arrives (/latehalfclose): the bytes and the
                 EOF both reach the backend, and its N bytes after it reach us
  idle MAX       open an echo tunnel, move one byte, then wait (up to MAX
                 seconds) for edge to close it; prints the seconds waited
  ok200          an upgrade request answered 200, then a second request
                 on the same connection: both answered 200
  unsolicited    a plain request answered 101 by the backend: 502
  wrongproto     a 101 switching to a protocol not asked for: 502
"""
import hashlib
import json
import os
import socket
import sys
import threading
import time

import tunnel_pattern

MODE, PORT, HOST = sys.argv[1], int(sys.argv[2]), sys.argv[3]
ARGS = sys.argv[4:]


def fail(why):
    sys.stderr.write("tunnel_client %s: %s\n" % (MODE, why))
    sys.exit(1)


def connect():
    s = socket.create_connection(("127.0.0.1", PORT), 5)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.settimeout(60)
    return s


def upgrade_req(path, proto="raw-test"):
    return ("GET %s HTTP/1.1\r\nHost: %s\r\nConnection: Upgrade\r\n"
            "Upgrade: %s\r\n\r\n" % (path, HOST, proto)).encode()


def read_head(s, buf=b""):
    while b"\r\n\r\n" not in buf:
        d = s.recv(65536)
        if not d:
            fail("connection closed before a response head: %r" % buf[:200])
        buf += d
    i = buf.index(b"\r\n\r\n") + 4
    return buf[:i].decode("latin-1"), buf[i:]


def status(head):
    return int(head.split(" ")[1])


def read_all(s, buf=b""):
    got = bytearray(buf)
    try:
        while True:
            d = s.recv(262144)
            if not d:
                return bytes(got)
            got += d
    except OSError as e:
        fail("%d bytes received, then %r" % (len(got), e))


def stall_arg(arg):
    """STALL as MS or MS:PATH: (ms, path or None)"""
    ms, _, path = arg.partition(":")
    return int(ms), path or None


def stall(ms, path, t0):
    """Wait until ms after t0, or with path, until it exists (ms at most)."""
    if not path:
        time.sleep(max(0, t0 + ms / 1000 - time.time()))
        return
    while not os.path.exists(path) and time.time() - t0 < ms / 1000:
        time.sleep(0.05)


def expect_101(s):
    head, rest = read_head(s)
    if status(head) != 101:
        fail("wanted 101, got: %s" % head[:300])
    low = head.lower()
    if "upgrade: raw-test" not in low or "connection: upgrade" not in low:
        fail("101 without Upgrade/Connection: %s" % head)
    if "x-request-id:" not in low:
        fail("101 without X-Request-ID: %s" % head)
    return head, rest


def rss_kb(pid):
    try:
        with open("/proc/%s/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def mode_pump():
    n, pid = int(ARGS[0]), ARGS[1]
    rate = int(ARGS[2]) if len(ARGS) > 2 else 0
    wait = int(ARGS[3]) if len(ARGS) > 3 else 0
    srate = int(ARGS[4]) if len(ARGS) > 4 else 0
    stall_ms, stall_path = stall_arg(ARGS[5]) if len(ARGS) > 5 else (0, None)
    base = rss_kb(pid)
    peak = [base]
    done = threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], rss_kb(pid))
            time.sleep(0.1)

    # daemon threads: a pump that fails exits with its reason rather
    # than waiting for them (the sampler looped forever once the main
    # thread had raised, and the test hung until its 900 s timeout)
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    s = connect()
    if srate:
        path = "/pump/%d/%d/%d" % (n, wait, srate)
    elif wait:
        path = "/pump/%d/%d" % (n, wait)
    else:
        path = "/pump/%d" % n
    s.sendall(upgrade_req(path))
    _, rest = expect_101(s)
    sent = {}

    def send():
        time.sleep(wait / 1000)
        sent["sha"] = tunnel_pattern.send(s, n, b"C", rate=srate)
        s.shutdown(socket.SHUT_WR)

    t0 = time.time()
    t = threading.Thread(target=send, daemon=True)
    t.start()
    stall(stall_ms, stall_path, t0)
    h = hashlib.sha256(rest)
    got = len(rest)
    try:
        while True:
            d = s.recv(min(262144, rate // 20) if rate else 262144)
            if not d:
                break
            h.update(d)
            got += len(d)
            if rate:
                # at most RATE bytes per second since the start
                ahead = got / rate - (time.time() - t0)
                if ahead > 0:
                    time.sleep(ahead)
    except OSError as e:
        fail("after %d bytes received: %r" % (got, e))
    t.join()
    if "sha" not in sent:
        fail("the send did not finish (%d bytes received)" % got)
    secs = time.time() - t0
    done.set()
    sampler.join()
    s.close()
    out = {"sent_sha": sent["sha"], "recv_bytes": got,
           "recv_sha": h.hexdigest(), "rss_base_kb": base,
           "rss_peak_kb": peak[0], "seconds": round(secs, 2)}
    print(json.dumps(out))
    if got != n:
        fail("received %d bytes, wanted %d" % (got, n))


def mode_upload():
    n = int(ARGS[0])
    ready = ARGS[1] if len(ARGS) > 1 else None
    rate = int(ARGS[2]) if len(ARGS) > 2 else 0
    s = connect()
    s.sendall(upgrade_req("/sink"))
    _, rest = expect_101(s)
    t0 = time.time()
    sha = tunnel_pattern.send(s, n, b"U", ready=ready, rate=rate)
    s.shutdown(socket.SHUT_WR)
    line = rest
    while not line.endswith(b"\n"):
        d = s.recv(4096)
        if not d:
            break
        line += d
    s.close()
    out = {"sent_sha": sha, "answer": line.decode("latin-1").strip(),
           "seconds": round(time.time() - t0, 2)}
    print(json.dumps(out))
    if out["answer"] != "%d %s" % (n, sha):
        fail("the backend got %r, wanted %d %s" % (out["answer"], n, sha))


def mode_early():
    s = connect()
    s.sendall(upgrade_req("/banner") + b"CLIENT-FIRST\n")
    _, rest = expect_101(s)
    want = b"BACKEND-FIRST\nCLIENT-FIRST\n"
    while len(rest) < len(want):
        d = s.recv(65536)
        if not d:
            break
        rest += d
    s.shutdown(socket.SHUT_WR)
    rest = read_all(s, rest)
    print(json.dumps({"after_head": rest.decode("latin-1")}))
    if rest != want:
        fail("after the 101: %r, wanted %r" % (rest, want))


def mode_halfclose():
    n = int(ARGS[0])
    wait = int(ARGS[1]) if len(ARGS) > 1 else 0
    stall_ms, stall_path = stall_arg(ARGS[2]) if len(ARGS) > 2 else (0, None)
    s = connect()
    s.sendall(upgrade_req("/halfclose/%d" % n))
    _, rest = expect_101(s)
    time.sleep(wait / 1000)
    s.sendall(b"q" * 100000)
    s.shutdown(socket.SHUT_WR)
    stall(stall_ms, stall_path, time.time())
    rest = read_all(s, rest)
    want = (b"after-eof:" + b"h" * n)[:n]
    print(json.dumps({"recv_bytes": len(rest),
                      "prefix": rest[:16].decode("latin-1"),
                      "whole": rest == want}))
    if rest != want:
        bad = next((i for i, (a, b) in enumerate(zip(rest, want)) if a != b),
                   min(len(rest), n))
        fail("after our EOF got %d bytes (%r...), wanted %d; the first "
             "that differs at %d" % (len(rest), rest[:20], n, bad))


def mode_earlyeof():
    n = int(ARGS[0])
    s = connect()
    s.sendall(upgrade_req("/latehalfclose/%d" % n) + b"q" * 1000)
    s.shutdown(socket.SHUT_WR)
    _, rest = expect_101(s)
    rest = read_all(s, rest)
    print(json.dumps({"recv_bytes": len(rest),
                      "prefix": rest[:16].decode("latin-1")}))
    if len(rest) != n or not rest.startswith(b"after-eof:"):
        fail("after our early EOF got %d bytes (%r...), wanted %d" %
             (len(rest), rest[:20], n))


def mode_idle():
    limit = float(ARGS[0])
    s = connect()
    s.sendall(upgrade_req("/echo"))
    _, rest = expect_101(s)
    s.sendall(b"x")
    while not rest:
        rest = s.recv(10)
    t0 = time.time()
    s.settimeout(limit)
    try:
        d = s.recv(10)
    except socket.timeout:
        fail("still open after %.1f s" % limit)
    except OSError:
        d = b""
    secs = time.time() - t0
    print(json.dumps({"closed_after": round(secs, 2), "data": d.decode()}))
    if d:
        fail("unexpected data %r" % d)


def mode_ok200():
    s = connect()
    s.sendall(upgrade_req("/ok200"))
    head, rest = read_head(s)
    if status(head) != 200 or "upgrade" in head.lower():
        fail("first answer: %s" % head)
    s.sendall(("GET /ok200 HTTP/1.1\r\nHost: %s\r\n\r\n" % HOST).encode())
    # the first body (11 bytes) may still be in rest
    buf = rest
    while buf.count(b"plain http\n") < 1 or b"HTTP/1.1" not in buf:
        d = s.recv(65536)
        if not d:
            fail("closed before the second answer: %r" % buf)
        buf += d
    head2, _ = read_head(s, buf[buf.index(b"HTTP/1.1"):])
    print(json.dumps({"first": status(head), "second": status(head2)}))
    if status(head2) != 200:
        fail("second answer: %s" % head2)


def mode_bad(path, req):
    s = connect()
    s.sendall(req)
    head, _ = read_head(s)
    print(json.dumps({"status": status(head)}))
    if status(head) != 502:
        fail("%s: wanted 502, got %s" % (path, head[:200]))


if MODE == "pump":
    mode_pump()
elif MODE == "upload":
    mode_upload()
elif MODE == "early":
    mode_early()
elif MODE == "halfclose":
    mode_halfclose()
elif MODE == "earlyeof":
    mode_earlyeof()
elif MODE == "idle":
    mode_idle()
elif MODE == "ok200":
    mode_ok200()
elif MODE == "unsolicited":
    mode_bad("/unsolicited", ("GET /unsolicited HTTP/1.1\r\nHost: %s\r\n\r\n"
                              % HOST).encode())
elif MODE == "wrongproto":
    mode_bad("/wrongproto", upgrade_req("/wrongproto"))
else:
    fail("unknown mode")
