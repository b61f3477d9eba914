#!/usr/bin/env python3
"""splice_handback.py - a tunnel handed back to the copy mover while its
peers read only after their own writes complete.

    splice_handback.py PORT HOST PATH RUNS [BYTES [STALL_MS]]

Each of RUNS tunnels (an HTTP/1.1 Upgrade to PATH on HOST through edged
on 127.0.0.1:PORT; tunnel_backend.py's /echo, a blocking read-then-write
echo) first exchanges twelve 300-byte messages 30 ms apart, so that
splice = "auto" or "sockmap" gives it to the kernel; then a thread sends
BYTES (default 32 MiB) and shuts its write side down while the main
thread reads nothing for STALL_MS (default 300) and then reads to EOF.
The kernel holds more than a tunnel may for the stalled reader, so edged
hands the tunnel back while the echo's write waits on the other
direction: the case that closed tunnels before edged left the kernel
one direction at a time. Each run must bring every byte back (SHA-256)
and an EOF; prints one JSON line with the runs and their seconds, exits
1 at the first run that fails, with why.
"""
import hashlib
import json
import os
import socket
import sys
import threading
import time

PORT, HOST, PATH, RUNS = (int(sys.argv[1]), sys.argv[2], sys.argv[3],
                          int(sys.argv[4]))
BYTES = int(sys.argv[5]) if len(sys.argv) > 5 else 32 << 20
STALL = (int(sys.argv[6]) if len(sys.argv) > 6 else 300) / 1000


def fail(run, why):
    sys.exit("run %d: %s" % (run, why))


def upgrade(run):
    s = socket.create_connection(("127.0.0.1", PORT), timeout=30)
    s.sendall(b"GET " + PATH.encode() + b" HTTP/1.1\r\nHost: " +
              HOST.encode() + b"\r\nConnection: Upgrade\r\n"
              b"Upgrade: raw-test\r\n\r\n")
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = s.recv(4096)
        if not d:
            fail(run, "no answer to the upgrade")
        buf += d
    if not buf.startswith(b"HTTP/1.1 101"):
        fail(run, "not a 101: %r" % buf[:40])
    return s, buf.split(b"\r\n\r\n", 1)[1]


def recv_exact(run, s, n, got=b""):
    got = bytearray(got)
    while len(got) < n:
        d = s.recv(min(262144, n - len(got)))
        if not d:
            fail(run, "closed after %d of %d bytes" % (len(got), n))
        got += d
    return bytes(got)


def one(run):
    s, rest = upgrade(run)
    for i in range(12):
        msg = os.urandom(300)
        s.sendall(msg)
        if recv_exact(run, s, len(msg), rest) != msg:
            fail(run, "message %d came back different" % i)
        rest = b""
        time.sleep(0.03)
    data = os.urandom(BYTES)
    err = []

    def send():
        try:
            s.sendall(data)
            s.shutdown(socket.SHUT_WR)
        except OSError as e:
            err.append("send: %s" % e)

    t = threading.Thread(target=send, daemon=True)
    t.start()
    time.sleep(STALL)
    h, n = hashlib.sha256(), 0
    while True:
        try:
            d = s.recv(262144)
        except OSError as e:
            fail(run, "receive after %d of %d bytes: %s" % (n, BYTES, e))
        if not d:
            break
        h.update(d)
        n += len(d)
    t.join(30)
    s.close()
    if err:
        fail(run, err[0])
    if t.is_alive():
        fail(run, "the send never finished")
    if n != BYTES:
        fail(run, "closed after %d of %d bytes" % (n, BYTES))
    if h.digest() != hashlib.sha256(data).digest():
        fail(run, "the %d bytes came back different" % n)


def main():
    t0 = time.time()
    for run in range(1, RUNS + 1):
        one(run)
    print(json.dumps({"runs": RUNS, "bytes": BYTES,
                      "seconds": round(time.time() - t0, 2)}))


main()
