#!/usr/bin/python3
"""zcheck.py - decode a response body saved by curl and compare it.

    zcheck.py HEADERS BODY WANT_CODING SIZE
        HEADERS: curl -D's file; BODY: curl -o's (not decoded);
        WANT_CODING: gzip, br, zstd, identity, or another (the
        upstream's own, the body as it sent it); SIZE: the /gen/SIZE body
        echo_backend.py sent. Prints "ok" when the response's
        Content-Encoding is WANT_CODING (none for identity), it has no
        Content-Length when coded, Vary names Accept-Encoding when coded,
        and the body decodes to gen_body(SIZE); else what differs.

    zcheck.py --sse PORT HOST PATH CODING
        GET PATH with Accept-Encoding: CODING over HTTP/1.1 and read the
        chunked, coded body as it comes: prints "ok" when the first
        event ("data: event 0") decodes before the stream's end (the
        encoder flushed when the upstream paused), else why not.

Needs Debian's python3-brotli and python3-zstandard (/usr/bin/python3).
"""
import http.client
import os
import sys
import time
import zlib

import brotli
import zstandard

sys.path.insert(0, os.path.dirname(__file__))
from echo_backend_gen import gen_body  # noqa: E402


def decoder(coding):
    if coding == "gzip":
        z = zlib.decompressobj(31)
        return z.decompress
    if coding == "br":
        d = brotli.Decompressor()
        return d.process
    if coding == "zstd":
        d = zstandard.ZstdDecompressor().decompressobj()
        return d.decompress
    return lambda b: b


def check(headers, body, want, size):
    fields = {}
    for line in open(headers, "rb").read().decode("latin-1").split("\r\n"):
        name, sep, value = line.partition(":")
        if sep:
            fields.setdefault(name.strip().lower(), []).append(value.strip())
    ce = fields.get("content-encoding", [None])[0]
    raw = open(body, "rb").read()
    if want == "identity":
        if ce is not None:
            return "coded as %s" % ce
    elif want not in ("gzip", "br", "zstd"):
        # the upstream's own coding, passed on as it is
        if ce != want:
            return "Content-Encoding %s, want %s" % (ce, want)
        return "ok" if raw == gen_body(size) else "the body was changed"
    else:
        if ce != want:
            return "Content-Encoding %s, want %s" % (ce, want)
        if "content-length" in fields:
            return "a Content-Length with a coded body"
        if not any("accept-encoding" in v.lower()
                   for v in fields.get("vary", [])):
            return "no Vary: Accept-Encoding"
    try:
        got = decoder(want)(raw)
    except Exception as e:  # noqa: BLE001
        return "does not decode: %s" % e
    if got != gen_body(size):
        return "decoded %d bytes, not gen_body(%d)" % (len(got), size)
    return "ok"


def sse(port, host, path, coding):
    c = http.client.HTTPConnection("127.0.0.1", int(port), timeout=20)
    c.request("GET", path, headers={"Host": host, "Accept-Encoding": coding})
    r = c.getresponse()
    if r.getheader("Content-Encoding") != coding:
        return "Content-Encoding %s" % r.getheader("Content-Encoding")
    dec = decoder(coding)
    got = b""
    while True:
        piece = r.read1(65536)
        if not piece:
            return "the stream ended before its first event decoded"
        got += dec(piece)
        if b"data: event 0" in got:
            break
    first = time.monotonic()
    rest = r.read()
    end = time.monotonic()
    got += dec(rest)
    if not rest or b"data: event 4" not in got:
        return "no more events after the first"
    return "ok" if end > first else "ended with the first"


if __name__ == "__main__":
    if sys.argv[1] == "--sse":
        print(sse(*sys.argv[2:6]))
    else:
        print(check(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])))
