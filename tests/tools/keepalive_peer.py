#!/usr/bin/env python3
"""keepalive_peer.py - the two ends of a tunnel whose client vanishes
(tests/integration/test_edged_keepalive.sh).

  keepalive_peer.py backend PORT LOG
      On 127.0.0.1:PORT: each connection either a raw stream or, when it
      begins with an HTTP Upgrade request, answered 101 first; then every
      line is echoed, except "push", after which 1 KiB goes out every
      100 ms until the connection fails. LOG gets one JSON line per event:
      {"conn": N, "event": "open"} and {"conn": N, "event": "closed",
      "how": "eof" | "error: ...", "t": unix time}.

  keepalive_peer.py client ADDR PORT raw|upgrade HOST [push]
      Connects, upgrades (upgrade: a GET with Upgrade: websocket to HOST),
      sends "ping" and waits for its echo, sends "push" if asked, prints
      "ready", then reads whatever comes until killed or the connection
      ends ("ended ..." printed).
"""
import json
import socket
import sys
import threading
import time

lock = threading.Lock()


def note(log, rec):
    rec["t"] = time.time()
    with lock:
        with open(log, "a") as f:
            f.write(json.dumps(rec) + "\n")


def serve_conn(c, n, log):
    note(log, {"conn": n, "event": "open"})
    how = "eof"
    try:
        buf = b""
        first = True
        while True:
            d = c.recv(65536)
            if not d:
                break
            buf += d
            if first:
                if buf.startswith(b"GET "):
                    if b"\r\n\r\n" not in buf:
                        continue
                    head, buf = buf.split(b"\r\n\r\n", 1)
                    c.sendall(b"HTTP/1.1 101 Switching Protocols\r\n"
                              b"Upgrade: websocket\r\n"
                              b"Connection: Upgrade\r\n\r\n")
                first = False
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                if line == b"push":
                    note(log, {"conn": n, "event": "push"})
                    while True:
                        c.sendall(b"x" * 1023 + b"\n")
                        time.sleep(0.1)
                else:
                    c.sendall(line + b"\n")
    except OSError as e:
        how = "error: " + (e.strerror or str(e))
    note(log, {"conn": n, "event": "closed", "how": how})
    c.close()


def backend(port, log):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen(64)
    n = 0
    while True:
        c, _ = s.accept()
        n += 1
        threading.Thread(target=serve_conn, args=(c, n, log),
                         daemon=True).start()


def client(addr, port, mode, host, push):
    s = socket.create_connection((addr, port), timeout=10)
    buf = b""
    if mode == "upgrade":
        s.sendall(("GET /ws HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\n"
                   "Connection: Upgrade\r\n\r\n" % host).encode())
        while b"\r\n\r\n" not in buf:
            d = s.recv(4096)
            if not d:
                sys.exit("no 101: " + repr(buf))
            buf += d
        head, buf = buf.split(b"\r\n\r\n", 1)
        if not head.startswith(b"HTTP/1.1 101"):
            sys.exit("not a 101: " + repr(head))
    s.sendall(b"ping\n")
    while b"ping\n" not in buf:
        d = s.recv(4096)
        if not d:
            sys.exit("no echo")
        buf += d
    if push:
        s.sendall(b"push\n")
        got = 0
        while got < 2048:  # the pushes flow
            d = s.recv(65536)
            if not d:
                sys.exit("no push")
            got += len(d)
    print("ready", flush=True)
    s.settimeout(None)
    try:
        while s.recv(65536):
            pass
        print("ended eof", flush=True)
    except OSError as e:
        print("ended " + str(e), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "backend":
        backend(int(sys.argv[2]), sys.argv[3])
    else:
        client(sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5],
               len(sys.argv) > 6 and sys.argv[6] == "push")
