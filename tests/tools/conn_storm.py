#!/usr/bin/env python3
"""conn_storm.py - many client connections at once, for edged's tests.

    conn_storm.py PORT N [PATH [SECONDS]]

Opens N TCP connections to 127.0.0.1:PORT as fast as it can (non-blocking
connects, an epoll selector, so N may exceed FD_SETSIZE), sends on each
"GET PATH HTTP/1.1" for Host shop.test with Connection: close (PATH
defaults to /slow/100), and reads each until the peer closes, for at most
SECONDS (default 40). Prints one JSON line: {"took": seconds, "results":
{what: count}}, where what is the status ("200"), the status and the
JSON error's name ("503 connection_limit"), "reset", "closed without an
answer", "send failed: ..." or "no answer in N s". Stdlib only; needs a
descriptor limit above N.
"""
import collections
import json
import selectors
import socket
import sys
import time

PORT = int(sys.argv[1])
N = int(sys.argv[2])
PATH = sys.argv[3] if len(sys.argv) > 3 else "/slow/100"
SECONDS = float(sys.argv[4]) if len(sys.argv) > 4 else 40.0
REQ = ("GET %s HTTP/1.1\r\nHost: shop.test\r\nConnection: close\r\n\r\n"
       % PATH).encode()


def verdict(buf):
    """What a connection's whole answer says."""
    head, _, body = buf.partition(b"\r\n\r\n")
    if not head:
        return "closed without an answer"
    code = head.split(b" ")[1].decode("latin-1")
    if code == "200":
        return code
    try:
        return code + " " + json.loads(body)["error"]
    except (ValueError, KeyError, TypeError):
        return code


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
        conns[s] = {"buf": b"", "sent": False, "res": None}
        sel.register(s, selectors.EVENT_WRITE | selectors.EVENT_READ)
    left = N
    deadline = t0 + SECONDS
    while left and time.monotonic() < deadline:
        for key, ev in sel.select(0.5):
            s = key.fileobj
            c = conns[s]
            if ev & selectors.EVENT_WRITE and not c["sent"]:
                try:
                    s.send(REQ)
                    c["sent"] = True
                    sel.modify(s, selectors.EVENT_READ)
                except BlockingIOError:
                    pass
                except OSError as e:
                    c["res"] = "send failed: " + type(e).__name__
                if c["res"] is None:
                    continue
            if c["res"] is None and ev & selectors.EVENT_READ:
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
                    c["res"] = verdict(c["buf"])
            sel.unregister(s)
            s.close()
            left -= 1
    res = collections.Counter(c["res"] or "no answer in %g s" % SECONDS
                              for c in conns.values())
    print(json.dumps({"took": round(time.monotonic() - t0, 1),
                      "results": res}))


main()
