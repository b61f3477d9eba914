#!/usr/bin/env python3
"""wake_storm.py - a storm of concurrent requests on one (sleeping)
environment, for edged's wake tests (tests/integration/test_edged_wake.sh).

    wake_storm.py PORT HOST N [SECONDS [GO]]

Opens N TCP connections to 127.0.0.1:PORT first (non-blocking connects,
an epoll selector, so N may exceed FD_SETSIZE) and waits until all are
connected, then sends "GET / HTTP/1.1" for HOST with Connection: close
on every one at once, and reads each until the peer closes, for at most
SECONDS (default 60). Prints one JSON line:

    {"results": {what: count}, "retry_after": {value: count},
     "connected_s": s, "first_ms": ms, "last_ms": ms}

what is the status ("200"), the status and the JSON error's name ("503
wake_failed"), "reset", "closed without an answer" or "no answer";
retry_after counts the Retry-After values of the answers that had one;
first_ms and last_ms are the first and the last answer, from the moment
the requests went out. Exit 0, or 2 when the connections could not all
be made. With GO (a path), the requests wait, once the connections are
made, until GO exists (GO.ready is created to say they are made), so
that a test can send them at a moment of its choosing. Stdlib only;
needs a descriptor limit above N.
"""
import collections
import json
import os
import selectors
import socket
import sys
import time

PORT = int(sys.argv[1])
HOST = sys.argv[2]
N = int(sys.argv[3])
SECONDS = float(sys.argv[4]) if len(sys.argv) > 4 else 60.0
GO = sys.argv[5] if len(sys.argv) > 5 else None
REQ = ("GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n"
       % HOST).encode()


def verdict(buf):
    """What a connection's whole answer says: (what, Retry-After or None)."""
    head, _, body = buf.partition(b"\r\n\r\n")
    if not head:
        return "closed without an answer", None
    lines = head.decode("latin-1").split("\r\n")
    code = lines[0].split(" ")[1]
    retry = None
    for line in lines[1:]:
        k, _, v = line.partition(":")
        if k.strip().lower() == "retry-after":
            retry = v.strip()
    if code == "200":
        return code, retry
    try:
        return code + " " + json.loads(body)["error"], retry
    except (ValueError, KeyError, TypeError):
        return code, retry


def main():
    sel = selectors.DefaultSelector()
    conns = {}
    t0 = time.monotonic()
    for _ in range(N):
        s = socket.socket()
        s.setblocking(False)
        try:
            s.connect(("127.0.0.1", PORT))
        except BlockingIOError:
            pass
        conns[s] = {"buf": b"", "res": None, "retry": None, "at": None}
        sel.register(s, selectors.EVENT_WRITE)
    # every connection made before any request goes
    pending = N
    deadline = t0 + SECONDS
    while pending and time.monotonic() < deadline:
        for key, _ in sel.select(0.5):
            s = key.fileobj
            err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if err:
                print(json.dumps({"error": "connect: errno %d" % err}))
                sys.exit(2)
            sel.unregister(s)
            pending -= 1
    if pending:
        print(json.dumps({"error": "%d connections not made" % pending}))
        sys.exit(2)
    connected = time.monotonic() - t0
    if GO:
        open(GO + ".ready", "w").close()
        while not os.path.exists(GO) and time.monotonic() < deadline:
            time.sleep(0.005)
    t1 = time.monotonic()
    for s in conns:
        s.setblocking(True)
        s.sendall(REQ)
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ)
    left = N
    deadline = t1 + SECONDS
    while left and time.monotonic() < deadline:
        for key, _ in sel.select(0.5):
            s = key.fileobj
            c = conns[s]
            try:
                d = s.recv(65536)
            except BlockingIOError:
                continue
            except OSError:
                d = b""
                c["res"] = "reset"
            if d:
                c["buf"] += d
                continue
            if c["res"] is None:
                c["res"], c["retry"] = verdict(c["buf"])
            c["at"] = time.monotonic() - t1
            sel.unregister(s)
            s.close()
            left -= 1
    res = collections.Counter(c["res"] or "no answer" for c in conns.values())
    retry = collections.Counter(c["retry"] for c in conns.values()
                                if c["retry"] is not None)
    at = [c["at"] for c in conns.values() if c["at"] is not None]
    print(json.dumps({"results": res, "retry_after": retry,
                      "connected_s": round(connected, 2),
                      "first_ms": round(min(at) * 1000) if at else None,
                      "last_ms": round(max(at) * 1000) if at else None}))


main()
