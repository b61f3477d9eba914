#!/usr/bin/env python3
"""once_backend.py - a backend that answers one request per connection and
then drops the connection without a word, as a keep-alive server does
whose idle timeout has just run out.

    once_backend.py PORT LOGFILE

The first request on a connection is answered 200, keep-alive, with a JSON
body (method, path, body, connection id). When a second request arrives on
the same connection, it is read whole and the connection is closed without
an answer: a proxy that pooled the connection sees EOF where a response
should be. Every request is logged to LOGFILE as one JSON line:

  {"ev": "answered"|"dropped", "c": ID, "method": M, "path": P,
   "body": BODY (latin-1), "headers": [[N, V]...]}

Bodies must be framed by Content-Length (what edged sends for a body it
read whole). Stdlib only.
"""
import json
import sys

import tcpserve

PORT = int(sys.argv[1])
log = tcpserve.jsonl_log(sys.argv[2])


def read_request(s, buf):
    """One request from s: (method, path, headers, body, rest) or None."""
    head, buf = tcpserve.read_head(s, buf)
    if head is None:
        return None
    lines = head[:-4].decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    hdrs = [[n.strip(), v.strip()] for n, _, v in
            (ln.partition(":") for ln in lines[1:])]
    n = 0
    for k, v in hdrs:
        if k.lower() == "content-length":
            n = int(v)
    while len(buf) < n:
        d = s.recv(65536)
        if not d:
            return None
        buf += d
    return method, path, hdrs, buf[:n], buf[n:]


def serve(s, cid):
    buf = b""
    try:
        for i in range(2):
            req = read_request(s, buf)
            if req is None:
                return
            method, path, hdrs, body, buf = req
            ev = "answered" if i == 0 else "dropped"
            log({"ev": ev, "c": cid, "method": method, "path": path,
                 "body": body.decode("latin-1"), "headers": hdrs})
            if i == 0:
                out = json.dumps({"c": cid, "method": method, "path": path,
                                  "body": body.decode("latin-1")}).encode()
                s.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json"
                          b"\r\nContent-Length: %d\r\n\r\n" % len(out) + out)
    except OSError:
        pass
    finally:
        s.close()


tcpserve.run(PORT, serve)
