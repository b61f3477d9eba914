#!/usr/bin/env python3
"""tcp_client.py - the client side of edged's TCP route tests, against
tcp_backend.py behind a TCP route.

    tcp_client.py MODE PORT [ARG...]

Connects to 127.0.0.1:PORT, reads the backend's banner (which names the
endpoint reached), gives it a command, checks what comes back and prints
one JSON object with what it saw. Exits 0 when the checks of MODE passed,
1 with the reason on stderr otherwise.

  pump N PID     send N bytes of the pattern while receiving N bytes;
                 samples VmRSS of PID meanwhile
  halfclose N    send 100000 bytes, shut down our write side, then still
                 receive the N bytes the backend sends after our EOF
  serverfirst N  the backend sends N bytes and shuts down its side: we
                 read them to its EOF, then send 200000 bytes and ours
  earlyeof       the command, 1000 bytes and our EOF in the first write,
                 before edged has connected upstream: echoed back, EOF
  reset N        send N bytes and more until the backend resets: our side
                 must end (EOF or reset) at once, not wait
  idle MAX       an echo tunnel, one byte each way, then wait (up to MAX
                 seconds) for edge to close it; prints the seconds waited
  who N          N connections one after the other: the endpoint each
                 reached (null: closed before the banner)
  refused        a connection edged must close without a byte
  cap N          hold N echo connections open, then one more, which must
                 be closed without a byte; then a byte echoed on each
"""
import hashlib
import json
import socket
import sys
import threading
import time

import tunnel_pattern

MODE, PORT = sys.argv[1], int(sys.argv[2])
ARGS = sys.argv[3:]


def fail(why):
    sys.stderr.write("tcp_client %s: %s\n" % (MODE, why))
    sys.exit(1)


def connect():
    s = socket.create_connection(("127.0.0.1", PORT), 5)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.settimeout(60)
    return s


def banner(s, buf=b""):
    """The backend's port from its banner and the bytes after it; None
    when the connection ends before the banner."""
    while b"\n" not in buf:
        try:
            d = s.recv(65536)
        except OSError:
            d = b""
        if not d:
            return None, buf
        buf += d
    i = buf.index(b"\n")
    words = buf[:i].split()
    if len(words) != 2 or words[0] != b"edge-test-backend":
        fail("not a banner: %r" % buf[:100])
    return int(words[1]), buf[i + 1:]


def must_banner(s):
    port, rest = banner(s)
    if port is None:
        fail("closed before the banner")
    return port, rest


def read_all(s, buf=b""):
    while True:
        d = s.recv(262144)
        if not d:
            return buf
        buf += d


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
    port, rest = must_banner(s)
    s.sendall(b"pump %d\n" % n)
    sent = {}

    def send():
        sent["sha"] = tunnel_pattern.send(s, n, b"C")
        s.shutdown(socket.SHUT_WR)

    t0 = time.time()
    t = threading.Thread(target=send, daemon=True)
    t.start()
    h = hashlib.sha256(rest)
    got = len(rest)
    try:
        while True:
            d = s.recv(262144)
            if not d:
                break
            h.update(d)
            got += len(d)
    except OSError as e:
        fail("after %d bytes received: %r" % (got, e))
    t.join()
    if "sha" not in sent:
        fail("the send did not finish (%d bytes received)" % got)
    secs = time.time() - t0
    done.set()
    sampler.join()
    s.close()
    print(json.dumps({"port": port, "sent_sha": sent["sha"],
                      "recv_bytes": got, "recv_sha": h.hexdigest(),
                      "rss_base_kb": base, "rss_peak_kb": peak[0],
                      "seconds": round(secs, 2)}))
    if got != n:
        fail("received %d bytes, wanted %d" % (got, n))


def mode_halfclose():
    n = int(ARGS[0])
    s = connect()
    _, rest = must_banner(s)
    s.sendall(b"halfclose %d\n" % n + b"q" * 100000)
    s.shutdown(socket.SHUT_WR)
    rest = read_all(s, rest)
    print(json.dumps({"recv_bytes": len(rest),
                      "prefix": rest[:16].decode("latin-1")}))
    if len(rest) != n or not rest.startswith(b"after-eof:"):
        fail("after our EOF got %d bytes (%r...), wanted %d" %
             (len(rest), rest[:20], n))


def mode_serverfirst():
    n = int(ARGS[0])
    s = connect()
    _, rest = must_banner(s)
    s.sendall(b"serverfirst %d\n" % n)
    rest = read_all(s, rest)  # to the backend's EOF
    # our direction still flows after the backend's half-close
    s.sendall(b"c" * 200000)
    s.shutdown(socket.SHUT_WR)
    s.settimeout(5)
    try:
        tail = s.recv(10)
    except OSError as e:
        tail = str(e).encode()
    print(json.dumps({"recv_bytes": len(rest), "tail": tail.decode()}))
    if len(rest) != n or rest.strip(b"s"):
        fail("before the backend's EOF got %d bytes, wanted %d" %
             (len(rest), n))


def mode_earlyeof():
    s = connect()
    s.sendall(b"echo\n" + b"e" * 1000)
    s.shutdown(socket.SHUT_WR)
    _, rest = must_banner(s)
    rest = read_all(s, rest)
    print(json.dumps({"recv_bytes": len(rest)}))
    if rest != b"e" * 1000:
        fail("echoed %d bytes, wanted 1000" % len(rest))


def mode_reset():
    n = int(ARGS[0])
    s = connect()
    must_banner(s)
    s.sendall(b"reset %d\n" % n + b"r" * n)
    # go on sending for a moment, as a stream in full flow does, then
    # wait: the backend's reset must reach us as the end of our side
    t0 = time.time()
    how = None
    try:
        for _ in range(64):
            s.sendall(b"r" * 16384)
        s.settimeout(10)
        while True:
            d = s.recv(65536)
            if not d:
                how = "eof"
                break
    except socket.timeout:
        how = "timeout"
    except (ConnectionResetError, BrokenPipeError):
        how = "reset"  # read, or found by a send
    except OSError as e:
        how = str(e)
    secs = time.time() - t0
    print(json.dumps({"ended": how, "after": round(secs, 2)}))
    if how not in ("eof", "reset"):
        fail("the client side did not end: %s after %.1f s" % (how, secs))


def mode_idle():
    limit = float(ARGS[0])
    s = connect()
    must_banner(s)
    s.sendall(b"echo\nx")
    d = s.recv(10)
    if d != b"x":
        fail("echo: %r" % d)
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


def mode_who():
    ports = []
    for _ in range(int(ARGS[0])):
        s = connect()
        port, _ = banner(s)
        if port is not None:
            s.sendall(b"who\n")
        ports.append(port)
        s.close()
    print(json.dumps({"ports": ports}))


def closed_without_a_byte(s):
    s.settimeout(5)
    t0 = time.time()
    try:
        d = s.recv(100)
    except socket.timeout:
        return False, "still open after 5 s"
    except OSError as e:
        d = b""
        if not isinstance(e, ConnectionResetError):
            return False, str(e)
    if d:
        return False, "got %r" % d[:60]
    return True, "closed after %.2f s" % (time.time() - t0)


def mode_refused():
    ok, why = closed_without_a_byte(connect())
    print(json.dumps({"closed": ok, "how": why}))
    if not ok:
        fail(why)


def mode_cap():
    n = int(ARGS[0])
    held = []
    for _ in range(n):
        s = connect()
        must_banner(s)
        s.sendall(b"echo\n")
        held.append(s)
    ok, why = closed_without_a_byte(connect())
    for s in held:
        s.sendall(b"z")
        if s.recv(1) != b"z":
            fail("a held connection stopped echoing")
        s.close()
    print(json.dumps({"held": n, "refused": ok, "how": why}))
    if not ok:
        fail("connection %d: %s" % (n + 1, why))


MODES = {"pump": mode_pump, "halfclose": mode_halfclose,
         "serverfirst": mode_serverfirst, "earlyeof": mode_earlyeof,
         "reset": mode_reset, "idle": mode_idle, "who": mode_who,
         "refused": mode_refused, "cap": mode_cap}
if MODE not in MODES:
    fail("unknown mode")
MODES[MODE]()
