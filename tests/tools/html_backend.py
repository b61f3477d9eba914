#!/usr/bin/python3
"""html_backend.py PORT - an HTTP/1.1 upstream serving HTML pages for the
injection tests (test_edged_inject.sh), byte by byte as asked:

  GET /page?...   a page (tests/tools/html_page.py's page(kind)), with
      kind=K      std (default), notag, twobody, upper, big:N (N bytes, tags
                  at both ends), bomb:N (N spaces after <html>, no tags),
                  json (not HTML)
      ce=E        identity (default), gzip, br, zstd, deflate, corrupt
                  (gzip cut in the middle)
      framing=F   length (default), chunked, close
      split=K     the decoded page in two pieces at byte K (coded: the
                  encoder flushed there), sent 50 ms apart
      cut=1       a Content-Length one byte longer than what is sent,
                  then the close
      hold=ID     after the first piece, wait (30 s at most) for
                  GET /release?id=ID (to this server) before the second
      trickle=1   the body one byte a send(), 20 us apart
      ctype=T, ctype2=T, cc=C, etag=X, status=S  the head's fields
                  (ctype2: a second Content-Type)

Each answer's coded body is also kept by its sha256, so that a test can
ask GET /raw?... for the same bytes' sha256 (X-Raw-Sha256 is sent on every
answer)."""
import gzip
import hashlib
import socket
import sys
import threading
import time
import urllib.parse
import zlib

import brotli
import zstandard

sys.path.insert(0, __import__("os").path.dirname(__file__))
from html_page import page  # noqa: E402


def coded_parts(body, ce, split):
    """The body's bytes as sent, in one or two parts."""
    parts = [body] if split is None else [body[:split], body[split:]]
    if ce in ("identity", None):
        return parts
    if ce in ("gzip", "corrupt"):
        z = zlib.compressobj(6, zlib.DEFLATED, 31)
        out = [z.compress(p) + z.flush(zlib.Z_SYNC_FLUSH) for p in parts]
        out[-1] += z.flush(zlib.Z_FINISH)
        if ce == "corrupt":
            whole = b"".join(out)
            return [whole[: len(whole) // 2] + b"\xff\xff\xff" +
                    whole[len(whole) // 2:]]
        return out
    if ce == "deflate":
        return [zlib.compress(body)]
    if ce == "br":
        c = brotli.Compressor()
        out = [c.process(p) + c.flush() for p in parts]
        out[-1] += c.finish()
        return out
    if ce == "zstd":
        c = zstandard.ZstdCompressor().compressobj()
        out = [c.compress(p) + c.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK)
               for p in parts]
        out[-1] += c.flush()
        return out
    raise ValueError(ce)


HOLDS = {}
HOLDS_LOCK = threading.Lock()


def hold_event(name):
    with HOLDS_LOCK:
        return HOLDS.setdefault(name, threading.Event())


def answer(conn, target):
    u = urllib.parse.urlsplit(target)
    q = dict(urllib.parse.parse_qsl(u.query))
    if u.path == "/release":
        hold_event(q["id"]).set()
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
        return True
    kind = q.get("kind", "std")
    body = page(kind)
    ce = q.get("ce", "identity")
    split = int(q["split"]) if "split" in q else None
    framing = q.get("framing", "length")
    parts = coded_parts(body, ce, split)
    whole = b"".join(parts)
    status = q.get("status", "200")
    head = "HTTP/1.1 %s X\r\n" % status
    head += "Content-Type: %s\r\n" % q.get(
        "ctype", "application/json" if kind == "json" else
        "text/html; charset=utf-8")
    if ce not in ("identity",):
        head += "Content-Encoding: %s\r\n" % ("gzip" if ce == "corrupt"
                                              else ce)
    if "ctype2" in q:
        head += "Content-Type: %s\r\n" % q["ctype2"]
    if "cc" in q:
        head += "Cache-Control: %s\r\n" % q["cc"]
    if "etag" in q:
        head += "ETag: %s\r\n" % q["etag"]
    head += "Accept-Ranges: bytes\r\n"
    head += "X-Raw-Sha256: %s\r\n" % hashlib.sha256(whole).hexdigest()
    head += "X-Page-Sha256: %s\r\n" % hashlib.sha256(body).hexdigest()
    if framing == "length":
        head += "Content-Length: %d\r\n" % (len(whole) + (1 if q.get("cut")
                                                          else 0))
    elif framing == "chunked":
        head += "Transfer-Encoding: chunked\r\n"
    else:
        head += "Connection: close\r\n"
    head += "\r\n"
    conn.sendall(head.encode())
    for i, p in enumerate(parts):
        if i and "hold" in q:
            hold_event(q["hold"]).wait(30)
        elif i:
            time.sleep(0.05)
        if framing == "chunked":
            if p:
                conn.sendall(b"%x\r\n" % len(p) + p + b"\r\n")
        elif q.get("trickle"):
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            for k in range(len(p)):
                conn.sendall(p[k:k + 1])
                time.sleep(0.00002)
        else:
            conn.sendall(p)
    if framing == "chunked":
        conn.sendall(b"0\r\n\r\n")
    return framing == "length" and not q.get("cut")


def serve(conn):
    buf = b""
    try:
        while True:
            while b"\r\n\r\n" not in buf:
                d = conn.recv(65536)
                if not d:
                    return
                buf += d
            head, buf = buf.split(b"\r\n\r\n", 1)
            line = head.split(b"\r\n")[0].decode()
            method, target = line.split(" ")[:2]
            if method == "HEAD":
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/html"
                             b"\r\nContent-Length: 10\r\n\r\n")
                continue
            if not answer(conn, target):
                return
    except OSError:
        pass
    finally:
        conn.close()


def main():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", int(sys.argv[1])))
    s.listen(128)
    while True:
        c, _ = s.accept()
        threading.Thread(target=serve, args=(c,), daemon=True).start()


if __name__ == "__main__":
    main()
