#!/usr/bin/env python3
"""stream_backend.py - a fast streaming HTTP/1.1 backend for edged's tests.

    stream_backend.py PORT LOGFILE

Paths (any other: 404):
  POST /sink                  read the body (Content-Length or chunked),
                              hashing it as it arrives; answer a JSON object
                              {"bytes": N, "sha256": HEX}
  GET /source/N               send N bytes of the pattern (Content-Length)
  GET /source/N?te=chunked    the same with Transfer-Encoding: chunked
Each completed request is appended to LOGFILE as one JSON line (method,
path, bytes, sha256 of the body read or sent), so a test can compare both
ends of a transfer (a source's digest is computed on its first request
for that N and remembered, to spare the CPU). Nothing is held in memory beyond one 1 MiB block.

The pattern (pattern_blocks, sent by send_pattern) is shared with
tests/tools/stream_client.py:
1 MiB blocks of a fixed pseudo-random base block whose first 8 bytes are
the block's index, so a dropped, repeated or reordered block changes the
digest. stdlib only.
"""
import hashlib
import json
import random
import socket
import socketserver
import struct
import sys
import threading

BLOCK = 1 << 20
_BASE = bytearray(random.Random(20240611).getrandbits(8 * BLOCK).to_bytes(BLOCK, "little"))


def pattern_blocks(n):
    """Yield memoryviews covering exactly N bytes of the pattern."""
    buf = bytearray(_BASE)
    mv = memoryview(buf)
    i = 0
    while n > 0:
        struct.pack_into("<Q", buf, 0, i)
        take = min(n, BLOCK)
        yield mv[:take]
        n -= take
        i += 1


def send_pattern(sock, n, chunked, h=None):
    """Send N bytes of the pattern on sock as a message body: in chunks
    (Transfer-Encoding: chunked, with the last chunk) when chunked, else
    as they are. Feeds them to h (a hashlib object) when given; returns
    the number of body bytes sent."""
    sent = 0
    for blk in pattern_blocks(n):
        if h:
            h.update(blk)
        if chunked:
            sock.sendall(b"%x\r\n" % len(blk))
            sock.sendall(blk)
            sock.sendall(b"\r\n")
        else:
            sock.sendall(blk)
        sent += len(blk)
    if chunked:
        sock.sendall(b"0\r\n\r\n")
    return sent


def read_head(rfile):
    """Read a request or response head; return (first line, {lower name: value})."""
    line = rfile.readline(65536)
    if not line:
        return None, None
    first = line.decode("latin-1").rstrip("\r\n")
    hdrs = {}
    while True:
        line = rfile.readline(65536)
        if line in (b"\r\n", b"\n", b""):
            break
        k, _, v = line.decode("latin-1").partition(":")
        hdrs[k.strip().lower()] = v.strip()
    return first, hdrs


def read_body(rfile, hdrs, sink):
    """Read a body framed by HDRS from RFILE, passing memoryviews to SINK.
    Returns the byte count; raises EOFError on a short body."""
    buf = bytearray(BLOCK)
    mv = memoryview(buf)
    n = 0

    def take(left):
        nonlocal n
        while left:
            got = rfile.readinto(mv[: min(left, BLOCK)])
            if not got:
                raise EOFError("short body")
            sink(mv[:got])
            n += got
            left -= got

    if hdrs.get("transfer-encoding", "").lower() == "chunked":
        while True:
            line = rfile.readline(4096)
            if not line:
                raise EOFError("short chunked body")
            size = int(line.split(b";")[0].strip(), 16)
            if size == 0:
                while rfile.readline(65536) not in (b"\r\n", b"\n", b""):
                    pass
                return n
            take(size)
            rfile.readline(16)
    elif "content-length" in hdrs:
        take(int(hdrs["content-length"]))
        return n
    else:  # response delimited by close
        while True:
            got = rfile.readinto(mv)
            if not got:
                return n
            sink(mv[:got])
            n += got


LOCK = threading.Lock()
DIGESTS = {}


class Handler(socketserver.StreamRequestHandler):
    rbufsize = BLOCK

    def log(self, rec):
        with LOCK, open(self.server.logfile, "a") as f:
            f.write(json.dumps(rec) + "\n")

    def answer(self, status, body, ctype="application/json"):
        self.wfile.write(
            b"HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n"
            % (status.encode(), ctype.encode(), len(body)) + body)
        self.wfile.flush()

    def handle(self):
        self.request.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
        while True:
            try:
                first, hdrs = read_head(self.rfile)
            except (OSError, ValueError):
                return
            if first is None:
                return
            method, path = first.split(" ")[:2]
            try:
                if method == "POST" and path == "/sink":
                    h = hashlib.sha256()
                    n = read_body(self.rfile, hdrs, h.update)
                    rec = {"method": method, "path": path, "bytes": n,
                           "sha256": h.hexdigest()}
                    self.log(rec)
                    self.answer("200 OK", json.dumps(rec).encode())
                elif method == "GET" and path.startswith("/source/"):
                    self.source(path)
                else:
                    read_body(self.rfile, hdrs, lambda _: None)
                    self.answer("404 Not Found", b"{}")
            except (OSError, EOFError, ValueError):
                return
            if hdrs.get("connection", "").lower() == "close":
                return

    def source(self, path):
        p, _, q = path.partition("?")
        n = int(p.split("/")[2])
        chunked = q == "te=chunked"
        sock = self.request
        self.wfile.flush()
        if chunked:
            sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
                         b"Transfer-Encoding: chunked\r\n\r\n")
        else:
            sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
                         b"Content-Length: %d\r\n\r\n" % n)
        # the pattern's digest for N is computed once, then remembered
        h = None if n in DIGESTS else hashlib.sha256()
        sent = send_pattern(sock, n, chunked, h)
        if h:
            DIGESTS[n] = h.hexdigest()
        self.log({"method": "GET", "path": path, "bytes": sent,
                  "sha256": DIGESTS[n]})


class Server(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True
    # a listen backlog for bursts of connections: socketserver's default
    # of 5 overflows when 40 clients' first requests open 40 upstream
    # connections at once on a loaded machine, and the kernel then resets
    # a connection whose handshake it had answered (a POST's 502 in CI)
    request_queue_size = 1024


def main():
    srv = Server(("127.0.0.1", int(sys.argv[1])), Handler)
    srv.logfile = sys.argv[2]
    srv.serve_forever()


if __name__ == "__main__":
    main()
