#!/usr/bin/env python3
"""rec_backend.py - a byte-recording HTTP/1.1 backend for edged's tests.

    rec_backend.py PORT LOGFILE

Logs every connection, every byte received and every request parsed to
LOGFILE as JSON lines, flushed at once, so a test can tell exactly what
edged sent upstream:

  {"ev": "accept", "c": ID}
  {"ev": "data", "c": ID, "b64": BYTES}
  {"ev": "req", "c": ID, "method": M, "target": T, "headers": [[N, V]...],
   "body_b64": BODY, "problems": [...]}
  {"ev": "bad", "c": ID, "why": TEXT}        (bytes it could not frame)
  {"ev": "close", "c": ID}                   (the peer closed or reset)

"problems" lists framing edge must never pass upstream: more than one
Content-Length, Content-Length with Transfer-Encoding, a Transfer-Encoding
other than a lone "chunked", chunk extensions, trailers, hop-by-hop fields.
Each complete request is answered 200 with a small JSON body (the path and
the connection id), keep-alive; a request it cannot frame is logged "bad"
and the connection closed. Stdlib only.
"""
import base64
import json
import sys

import tcpserve

PORT = int(sys.argv[1])
log = tcpserve.jsonl_log(sys.argv[2])
HOP = {"connection", "keep-alive", "proxy-connection", "te", "trailer",
       "upgrade"}




class Conn:
    def __init__(self, sock, cid):
        self.s = sock
        self.c = cid
        self.buf = b""
        self.eof = False
        self.broken = False

    def fill(self):
        """Read more bytes; False at EOF."""
        if self.eof:
            return False
        try:
            d = self.s.recv(65536)
        except OSError:
            d = b""
        if not d:
            self.eof = True
            return False
        log({"ev": "data", "c": self.c, "b64": base64.b64encode(d).decode()})
        self.buf += d
        return True

    def line(self):
        while b"\r\n" not in self.buf:
            if not self.fill():
                return None
        i = self.buf.index(b"\r\n")
        ln, self.buf = self.buf[:i], self.buf[i + 2:]
        return ln

    def take(self, n):
        while len(self.buf) < n:
            if not self.fill():
                return None
        d, self.buf = self.buf[:n], self.buf[n:]
        return d

    def bad(self, why):
        log({"ev": "bad", "c": self.c, "why": why})
        self.broken = True
        return False

    def one(self):
        """Read, log and answer one request; False to close."""
        while b"\r\n\r\n" not in self.buf:
            if not self.fill():
                if self.buf:
                    return self.bad("EOF inside a head")
                return False
        i = self.buf.index(b"\r\n\r\n")
        head, self.buf = self.buf[:i], self.buf[i + 4:]
        lines = head.split(b"\r\n")
        parts = lines[0].split(b" ")
        if len(parts) != 3 or parts[2] != b"HTTP/1.1":
            return self.bad("request line %r" % lines[0])
        hdrs, problems = [], []
        for ln in lines[1:]:
            if b":" not in ln or ln[:1] in (b" ", b"\t") or b"\n" in ln:
                return self.bad("field line %r" % ln)
            n, v = ln.split(b":", 1)
            hdrs.append([n.decode("latin-1"), v.strip(b" \t").decode("latin-1")])
        low = [(n.lower(), v) for n, v in hdrs]
        cls = [v for n, v in low if n == "content-length"]
        tes = [v for n, v in low if n == "transfer-encoding"]
        for n, _ in low:
            if n in HOP and n != "upgrade":
                problems.append("hop-by-hop field " + n)
        if len(cls) > 1:
            problems.append("%d Content-Length fields" % len(cls))
        if cls and tes:
            problems.append("Content-Length and Transfer-Encoding")
        if len(tes) > 1 or (tes and tes[0] != "chunked"):
            problems.append("Transfer-Encoding %r" % tes)
        body = b""
        if tes:
            while True:
                ln = self.line()
                if ln is None:
                    return self.bad("EOF inside a chunked body")
                if b";" in ln:
                    problems.append("chunk extension %r" % ln)
                try:
                    size = int(ln.split(b";")[0], 16)
                except ValueError:
                    return self.bad("chunk size %r" % ln)
                if size == 0:
                    break
                d = self.take(size)
                if d is None or self.take(2) != b"\r\n":
                    return self.bad("EOF inside a chunk")
                body += d
            while True:
                ln = self.line()
                if ln is None:
                    return self.bad("EOF inside trailers")
                if ln == b"":
                    break
                problems.append("trailer %r" % ln)
        elif cls:
            if not cls[0].isdigit():
                return self.bad("Content-Length %r" % cls[0])
            body = self.take(int(cls[0]))
            if body is None:
                return self.bad("EOF inside a body")
        target = parts[1].decode("latin-1")
        log({"ev": "req", "c": self.c, "method": parts[0].decode("latin-1"),
             "target": target, "headers": hdrs,
             "body_b64": base64.b64encode(body).decode(),
             "problems": problems})
        out = json.dumps({"path": target, "c": self.c}).encode()
        self.s.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                       b"Content-Length: %d\r\n\r\n" % len(out) + out)
        return True


def serve(sock, cid):
    c = Conn(sock, cid)
    log({"ev": "accept", "c": cid})
    try:
        while c.one():
            pass
        while not c.eof and not c.broken:
            c.fill()  # record whatever else arrives until the peer closes
    except OSError:
        pass
    log({"ev": "close", "c": cid})
    sock.close()


tcpserve.run(PORT, serve)
