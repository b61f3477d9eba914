#!/usr/bin/env python3
"""fail_backend.py - an HTTP/1.1 backend that fails on command, for
edged's retry tests (tests/integration/test_edged_retry.sh).

    fail_backend.py PORT NAME MODEFILE LOG

Serves 127.0.0.1:PORT. Before each request it reads MODEFILE (absent or
empty: ok), whose first word says what this request gets:

    ok      200, body "NAME METHOD PATH BODYLEN\\n" (keep-alive)
    502, 503, 504 (any 3-digit status)   that status, a short body
    reset   the request read whole, then the connection reset (RST)
    mid     a 200 head for 100000 bytes, 10 of them, then a reset
    hang    the request read whole, then nothing until the peer closes
    slow    200 as ok, after 1 s (a slow answer)
    waitN   200 as ok, after N ms (a slow answer)
    tailN   as ok, but every Nth request under a tail mode (counted per
            backend) is slow: a slow tail of 1/N of the requests
    tailN_K the same, shifted: the request whose count plus K is a
            multiple of N
A slow answer watches its connection while it waits: when the peer
closes it first (a hedge won, docs/upstream.md), it logs a line
{"name", "conn", "cancelled": true} and answers nothing.

A request path holding "mode=WORD" uses WORD instead of MODEFILE's.
Every request received whole is a JSON line in LOG before it is answered:
name, conn (the connection's number), method, path, body_len,
body_sha256, mode, slow, and active: the requests this backend was
answering then, this one included (a request stops counting before its
answer's last bytes are sent). Runs until killed. Stdlib only.
"""
import hashlib
import json
import re
import select
import socket
import struct
import sys
import threading

PORT, NAME, MODEFILE, LOG = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
lock = threading.Lock()
TAIL = [0]  # requests under a tail mode so far
ACTIVE = [0]  # requests being answered now
SLOW_S = 1.0


def mode_for(path):
    m = re.search(r"mode=(\w+)", path)
    if m:
        return m.group(1)
    try:
        with open(MODEFILE) as f:
            w = f.read().split()
            return w[0] if w else "ok"
    except OSError:
        return "ok"


def reset(conn):
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    conn.close()


def slow_wait(conn, n, secs):
    """Wait secs; False when the peer closed the connection meanwhile
    (logged)."""
    r, _, _ = select.select([conn], [], [], secs)
    if r:
        try:
            d = conn.recv(65536, socket.MSG_PEEK)
        except OSError:
            d = b""
        if not d:
            with lock, open(LOG, "a") as f:
                f.write(json.dumps({"name": NAME, "conn": n,
                                    "cancelled": True}) + "\n")
            conn.close()
            return False
    return True


def serve(conn, n):
    buf = b""
    try:
        while True:
            while b"\r\n\r\n" not in buf:
                d = conn.recv(65536)
                if not d:
                    conn.close()
                    return
                buf += d
            head, buf = buf.split(b"\r\n\r\n", 1)
            lines = head.decode("latin-1").split("\r\n")
            method, path = lines[0].split(" ")[:2]
            clen = 0
            chunked = False
            for l in lines[1:]:
                k, _, v = l.partition(":")
                if k.strip().lower() == "content-length":
                    clen = int(v.strip())
                if k.strip().lower() == "transfer-encoding" and "chunked" in v.lower():
                    chunked = True
            body = b""
            if chunked:
                while True:
                    while b"\r\n" not in buf:
                        buf += conn.recv(65536)
                    size_line, buf = buf.split(b"\r\n", 1)
                    size = int(size_line.split(b";")[0], 16)
                    while len(buf) < size + 2:
                        buf += conn.recv(65536)
                    body += buf[:size]
                    buf = buf[size + 2:]
                    if size == 0:
                        break
            else:
                while len(buf) < clen:
                    d = conn.recv(65536)
                    if not d:
                        conn.close()
                        return
                    buf += d
                body, buf = buf[:clen], buf[clen:]
            mode = mode_for(path)
            slow = mode == "slow"
            secs = SLOW_S
            m = re.fullmatch(r"wait(\d+)", mode)
            if m:
                slow, secs = True, int(m.group(1)) / 1000
            m = re.fullmatch(r"tail(\d+)(?:_(\d+))?", mode)
            if m:
                with lock:
                    TAIL[0] += 1
                    slow = (TAIL[0] + int(m.group(2) or 0)) % int(m.group(1)) == 0
            with lock, open(LOG, "a") as f:
                ACTIVE[0] += 1
                f.write(json.dumps({"name": NAME, "conn": n,
                                    "method": method, "path": path,
                                    "body_len": len(body),
                                    "body_sha256": hashlib.sha256(body).hexdigest(),
                                    "mode": mode, "slow": slow,
                                    "active": ACTIVE[0]}) + "\n")
            ended = [False]

            def done():
                # no longer answering: before the answer's last bytes go
                # out (once the peer has them it may send the next request,
                # which must not count this one)
                with lock:
                    if not ended[0]:
                        ended[0] = True
                        ACTIVE[0] -= 1
            try:
                if not answer(conn, n, mode, slow, secs, method, path, body, done):
                    return
            finally:
                done()
    except OSError:
        conn.close()


def answer(conn, n, mode, slow, secs, method, path, body, done):
    """Answer one request as mode says: whether the connection goes on.
    done() is called before the answer's last bytes (or the reset) go out."""
    if slow and not slow_wait(conn, n, secs):
        return False
    if mode == "reset":
        done()
        reset(conn)
        return False
    if mode == "hang":
        while conn.recv(65536):
            pass
        conn.close()
        return False
    if mode == "mid":
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n0123456789")
        reset(conn)
        return False
    if re.fullmatch(r"\d\d\d", mode):
        out = ("%s %s\n" % (NAME, mode)).encode()
        done()
        conn.sendall(b"HTTP/1.1 %s Failing\r\nContent-Length: %d\r\n\r\n%s"
                     % (mode.encode(), len(out), out))
        return True
    out = ("%s %s %s %d\n" % (NAME, method, path, len(body))).encode()
    done()
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                 b"Content-Length: %d\r\n\r\n%s" % (len(out), out))
    return True


srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", PORT))
srv.listen(1024)
nconn = 0
while True:
    c, _ = srv.accept()
    nconn += 1
    threading.Thread(target=serve, args=(c, nconn), daemon=True).start()
