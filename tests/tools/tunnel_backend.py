#!/usr/bin/env python3
"""tunnel_backend.py - an HTTP/1.1 backend that switches protocols, for
edged's tunnel tests.

    tunnel_backend.py PORT LOGFILE

Reads one request head per connection and answers by path:
  /ok200         200 with a small body, keep-alive (the connection stays
                 HTTP: further requests are answered the same way)
  /wrongproto    101 with "Upgrade: other-proto" (not what was asked)
  /echo          101 "Upgrade: raw-test", then echoes every byte; at EOF
                 shuts down its write side and closes
  /banner        as /echo, but "BACKEND-FIRST\\n" goes out in the same
                 write as the 101 head
  /halfclose/N   101, reads until EOF, then sends N bytes
                 (b"after-eof:" then 'h' repeated) and closes
  /latehalfclose/N  as /halfclose/N, but the 101 goes out 300 ms after
                 the request head (so that a client's EOF can come first)
  /reset         101, echoes until "RESET-NOW" arrives, then resets the
                 connection (SO_LINGER 0)
  /sink          101, then reads to the client's EOF and answers one line:
                 "BYTES SHA256\n"
  /pump/N[/MS[/RATE]]
                 101, then sends N bytes of the stream pattern while
                 reading until EOF, both at once; logs the SHA-256 of
                 what it sent and of what it received
  anything else  101 "Upgrade: raw-test" then echo (so an unsolicited
                 101 can be provoked with a request without Upgrade)
Bytes that arrived after the request head (in the same read) are part of
the tunnel and are handled first. Each tunnel appends one JSON line to
LOGFILE: path, bytes received, SHA-256 of them, bytes sent, SHA-256 of
them, and the first bytes received.
"""
import hashlib
import socket
import struct
import sys
import threading
import time

import tcpserve
import tunnel_pattern

PORT = int(sys.argv[1])
log = tcpserve.jsonl_log(sys.argv[2])


def switch(s, proto=b"raw-test", extra=b""):
    s.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: " + proto +
              b"\r\nConnection: Upgrade\r\nX-Backend: tunnel\r\n\r\n" + extra)


def drain(s, rest, h):
    n = len(rest)
    h.update(rest)
    first = rest[:64]
    while True:
        d = s.recv(262144)
        if not d:
            return n, first
        if len(first) < 64:
            first += d[:64 - len(first)]
        n += len(d)
        h.update(d)


def serve(s):
    buf = b""
    while True:
        head, buf = tcpserve.read_head(s, buf)
        if head is None:
            return
        path = head.split(b" ")[1].decode()
        if path == "/ok200":
            body = b"plain http\n"
            s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" %
                      (len(body), body))
            continue
        break
    rec = {"path": path}
    if path == "/wrongproto":
        switch(s, b"other-proto")
        s.close()
        return
    if path.startswith("/pump/"):
        n = int(path.split("/")[2])
        wait = int(path.split("/")[3]) if path.count("/") > 2 else 0
        rate = int(path.split("/")[4]) if path.count("/") > 3 else 0
        switch(s)
        sent = {}

        def send():
            time.sleep(wait / 1000)
            sent["sha"] = tunnel_pattern.send(s, n, b"B", rate=rate)
            s.shutdown(socket.SHUT_WR)

        t = threading.Thread(target=send)
        t.start()
        h = hashlib.sha256()
        rec["recv_bytes"], rec["first"] = drain(s, buf, h)
        t.join()
        rec["recv_sha"] = h.hexdigest()
        rec["sent_bytes"] = n
        rec["sent_sha"] = sent["sha"]
    elif path == "/reset":
        # echo until "RESET-NOW" arrives, then reset the connection
        switch(s)
        seen = buf
        while b"RESET-NOW" not in seen:
            d = s.recv(65536)
            if not d:
                break
            if b"RESET-NOW" not in d:
                s.sendall(d)
            seen = (seen + d)[-64:]
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                     struct.pack("ii", 1, 0))
        rec["reset"] = True
        log(rec)
        s.close()
        return
    elif path == "/sink":
        # read to the client's EOF, then say what came: one line
        switch(s)
        h = hashlib.sha256()
        rec["recv_bytes"], rec["first"] = drain(s, buf, h)
        rec["recv_sha"] = h.hexdigest()
        s.sendall(("%d %s\n" % (rec["recv_bytes"], rec["recv_sha"])).encode())
    elif path.startswith(("/halfclose/", "/latehalfclose/")):
        n = int(path.split("/")[2])
        if path.startswith("/late"):
            time.sleep(0.3)
        switch(s)
        h = hashlib.sha256()
        rec["recv_bytes"], rec["first"] = drain(s, buf, h)
        rec["recv_sha"] = h.hexdigest()
        out = (b"after-eof:" + b"h" * n)[:n]
        s.sendall(out)
        rec["sent_bytes"] = n
    else:
        extra = b"BACKEND-FIRST\n" if path == "/banner" else b""
        switch(s, extra=extra)
        first = buf[:64]
        n = len(buf)
        if buf:
            s.sendall(buf)
        while True:
            d = s.recv(262144)
            if not d:
                break
            if len(first) < 64:
                first += d[:64 - len(first)]
            n += len(d)
            s.sendall(d)
        s.shutdown(socket.SHUT_WR)
        rec["recv_bytes"] = n
        rec["first"] = first
    if isinstance(rec.get("first"), bytes):
        rec["first"] = rec["first"].decode("latin-1")
    log(rec)
    s.close()


def handle(s, _cid):
    try:
        serve(s)
    except OSError as e:
        log({"error": str(e)})
    finally:
        s.close()


tcpserve.run(PORT, handle)
