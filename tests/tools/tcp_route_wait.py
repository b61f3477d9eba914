#!/usr/bin/env python3
"""tcp_route_wait.py - a TCP route coming and going, timed, for the tests
of TCP routes from the database (tests/pg/test_edged_tcp_routes_pg.sh),
against tcp_backend.py behind the route.

    tcp_route_wait.py MODE PORT [ARG...]

  refused            exit 0 when a connection to 127.0.0.1:PORT is refused
                     (nothing listens), 1 otherwise
  commit FIFO MAX    the route is not there yet (refused); write "COMMIT;"
                     to FIFO (an open transaction's psql reads it), then
                     connect every 2 ms until the backend's banner comes,
                     at most MAX seconds; prints {"ms": N, "port": P}
  gone MAX           connect every 2 ms until one is refused (the listener
                     closed), at most MAX seconds; prints {"ms": N}
  hold GOFILE MAX    an echo tunnel: the banner, "echo", 1000 bytes echoed;
                     prints {"open": true} at once (flushed), then waits
                     (at most MAX seconds) for GOFILE to exist and moves
                     1 MiB more through it, checked; prints what it saw
Exit 0 when the mode's checks passed, 1 with the reason on stderr.
"""
import errno
import hashlib
import json
import os
import socket
import sys
import time

MODE, PORT = sys.argv[1], int(sys.argv[2])
ARGS = sys.argv[3:]


def fail(why):
    sys.stderr.write("tcp_route_wait %s: %s\n" % (MODE, why))
    sys.exit(1)


def try_connect():
    """'refused', or the banner's port (None: closed before it)."""
    s = socket.socket()
    s.settimeout(2)
    try:
        s.connect(("127.0.0.1", PORT))
    except OSError as e:
        s.close()
        if e.errno == errno.ECONNREFUSED:
            return "refused"
        raise
    buf = b""
    try:
        while b"\n" not in buf:
            d = s.recv(100)
            if not d:
                return None
            buf += d
    except OSError:
        return None
    finally:
        s.close()
    return int(buf.split()[1])


def recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        d = s.recv(n - len(buf))
        if not d:
            fail("EOF after %d of %d bytes" % (len(buf), n))
        buf += d
    return buf


if MODE == "refused":
    got = try_connect()
    if got != "refused":
        fail("not refused: %r" % (got,))
elif MODE == "commit":
    fifo, most = ARGS[0], float(ARGS[1])
    got = try_connect()
    if got != "refused":
        fail("before the COMMIT: %r, not refused" % (got,))
    with open(fifo, "w") as f:
        f.write("COMMIT;\n")
    t0 = time.monotonic()
    while time.monotonic() - t0 < most:
        got = try_connect()
        if isinstance(got, int):
            print(json.dumps({"ms": round((time.monotonic() - t0) * 1000,
                                          1), "port": got}))
            sys.exit(0)
        time.sleep(0.002)
    fail("not routed %s s after the COMMIT (last: %r)" % (most, got))
elif MODE == "gone":
    most = float(ARGS[0])
    t0 = time.monotonic()
    while time.monotonic() - t0 < most:
        if try_connect() == "refused":
            print(json.dumps({"ms": round((time.monotonic() - t0) * 1000,
                                          1)}))
            sys.exit(0)
        time.sleep(0.002)
    fail("still accepting after %s s" % most)
elif MODE == "hold":
    gofile, most = ARGS[0], float(ARGS[1])
    s = socket.create_connection(("127.0.0.1", PORT), 5)
    s.settimeout(30)
    buf = b""
    while b"\n" not in buf:
        d = s.recv(100)
        if not d:
            fail("closed before the banner")
        buf += d
    port = int(buf.split()[1])
    s.sendall(b"echo\n" + b"x" * 1000)
    if recv_exact(s, 1000) != b"x" * 1000:
        fail("the first 1000 bytes did not come back")
    print(json.dumps({"open": True, "port": port}), flush=True)
    t0 = time.monotonic()
    while not os.path.exists(gofile):
        if time.monotonic() - t0 > most:
            fail("never told to go on")
        time.sleep(0.01)
    data = os.urandom(1 << 20)
    back = b""
    for i in range(0, len(data), 65536):  # in steps: no buffer fills up
        s.sendall(data[i:i + 65536])
        back += recv_exact(s, len(data[i:i + 65536]))
    s.close()
    out = {"port": port, "sent_sha": hashlib.sha256(data).hexdigest(),
           "recv_sha": hashlib.sha256(back).hexdigest()}
    print(json.dumps(out))
    if out["sent_sha"] != out["recv_sha"]:
        fail("the bytes came back changed")
else:
    fail("unknown mode")
