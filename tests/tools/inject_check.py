#!/usr/bin/python3
"""inject_check.py PORT HOST HEAD_END BODY_END BACKEND_PORT - asks edged
(HTTP/1.1 on 127.0.0.1:PORT, Host HOST) for tests/tools/html_backend.py's
pages (the backend itself on BACKEND_PORT, to release a held one) and
checks what arrives against html_page.py's rule; prints one line a check:
"ok<TAB>name" or "fail<TAB>name<TAB>why"."""
import gzip
import hashlib
import http.client
import sys
import os

import brotli
import zstandard

sys.path.insert(0, os.path.dirname(__file__))
from html_page import injected, page  # noqa: E402

PORT, HOST = int(sys.argv[1]), sys.argv[2]
HEAD_END, BODY_END = sys.argv[3].encode(), sys.argv[4].encode()
BACKEND = int(sys.argv[5])
conn = None


def get(path, ae="identity", method="GET", extra=None):
    """status, headers (lowercase dict), raw body; one connection kept."""
    global conn
    for attempt in range(2):
        if conn is None:
            conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=20)
        h = {"Host": HOST, "Accept-Encoding": ae}
        h.update(extra or {})
        try:
            conn.request(method, path, headers=h)
            r = conn.getresponse()
            body = r.read()
            hd = {k.lower(): v for k, v in r.getheaders()}
            if r.will_close:
                conn.close()
                conn = None
            return r.status, hd, body
        except (http.client.HTTPException, OSError):
            conn.close()
            conn = None
            if attempt:
                raise
    raise RuntimeError("unreachable")


def decode(hd, body):
    ce = hd.get("content-encoding", "identity")
    if ce == "gzip":
        return gzip.decompress(body)
    if ce == "br":
        return brotli.decompress(body)
    if ce == "zstd":
        return zstandard.ZstdDecompressor().decompressobj().decompress(body)
    return body


def report(name, ok, why=""):
    print("ok\t%s" % name if ok else "fail\t%s\t%s" % (name, why),
          flush=True)


def expect_injected(name, path, ae="identity", want_ce=None, kind="std",
                    streamed=False):
    try:
        st, hd, body = get(path, ae)
    except Exception as e:  # noqa: BLE001
        report(name, False, "request failed: %r" % e)
        return
    want = injected(page(kind), HEAD_END, BODY_END)
    got = decode(hd, body)
    ce = hd.get("content-encoding")
    problems = []
    if st not in (200, 404):
        problems.append("status %d" % st)
    if got != want:
        problems.append("body %r" % got[:200])
    if want_ce != ce:
        problems.append("Content-Encoding %r, not %r" % (ce, want_ce))
    if streamed and "content-length" in hd:
        problems.append("a Content-Length on a streamed page")
    if not streamed and not ce and hd.get("content-length") != str(len(body)):
        problems.append("Content-Length %r for %d bytes" %
                        (hd.get("content-length"), len(body)))
    if "accept-ranges" in hd:
        problems.append("Accept-Ranges kept")
    report(name, not problems, "; ".join(problems))


def expect_unmodified(name, path, ae="identity", extra=None, method="GET"):
    try:
        st, hd, body = get(path, ae, method, extra)
    except Exception as e:  # noqa: BLE001
        report(name, False, "request failed: %r" % e)
        return
    problems = []
    if method == "GET" and hashlib.sha256(body).hexdigest() != \
            hd.get("x-raw-sha256"):
        problems.append("bytes changed (%d bytes: %r)" % (len(body),
                                                          body[:120]))
    if HEAD_END in body or BODY_END in body:
        problems.append("a snippet went in")
    report(name, not problems, "; ".join(problems))


def streams_first(split):
    """A chunked page held by the backend after split bytes."""
    import socket
    import time
    name = "a streamed page: its head, snippet in, before the rest"
    hid = "h%d" % time.monotonic_ns()
    s = socket.create_connection(("127.0.0.1", PORT), timeout=10)
    s.sendall(("GET /page?framing=chunked&split=%d&hold=%s HTTP/1.1\r\n"
               "Host: %s\r\nConnection: close\r\n\r\n" %
               (split, hid, HOST)).encode())
    got = b""
    try:
        while HEAD_END not in got:
            d = s.recv(65536)
            if not d:
                break
            got += d
    except OSError as e:
        report(name, False, "nothing before the rest: %r (%r)" % (e, got))
        s.close()
        return
    ok = HEAD_END in got and b"</body>" not in got
    # let the backend send the rest, read it all
    back = http.client.HTTPConnection("127.0.0.1", BACKEND, timeout=10)
    back.request("GET", "/release?id=" + hid)
    back.getresponse().read()
    back.close()
    try:
        while True:
            d = s.recv(65536)
            if not d:
                break
            got += d
    except OSError:
        pass
    s.close()
    ok = ok and BODY_END + b"</body>" in got
    report(name, ok, repr(got[-300:]))


def main():
    std = page("std")
    h = std.lower().index(b"</head>")
    b = std.lower().rindex(b"</body>")
    # every split of each tag over two pieces, in each coding, chunked
    # (a page not coded streams; a coded one is read whole)
    for ce in ("identity", "gzip", "br", "zstd"):
        for tag, at in (("</head>", h), ("</body>", b)):
            for k in range(at, at + len(tag) + 1):
                expect_injected(
                    "%s upstream, chunked, %s split at %d of it" %
                    (ce, tag, k - at),
                    "/page?ce=%s&framing=chunked&split=%d" % (ce, k),
                    streamed=ce == "identity")
    for fr in ("length", "close"):
        for ce in ("identity", "gzip"):
            expect_injected("%s upstream, framing %s, split in </body>" %
                            (ce, fr),
                            "/page?ce=%s&framing=%s&split=%d" %
                            (ce, fr, b + 3),
                            streamed=ce == "identity" and fr == "close")
    # a streamed page's first piece, snippet in, reaches the client
    # before the upstream sends the rest (it waits for our word)
    streams_first(h + 20)
    # recoded for the client
    for up in ("identity", "gzip", "br", "zstd"):
        for c in ("gzip", "br", "zstd"):
            expect_injected("%s upstream, the client takes %s: coded so" %
                            (up, c),
                            "/page?ce=%s&kind=big:5000" % up, ae=c,
                            want_ce=c, kind="big:5000")
    # read whole, coded again for the client: longer than what one pump
    # of the relay takes (64 KiB)
    for up in ("identity", "gzip"):
        for c in ("gzip", "br", "zstd"):
            expect_injected("a 300 KB %s page read whole, %s to the client" %
                            (up, c), "/page?ce=%s&kind=big:300000" % up,
                            ae=c, want_ce=c, kind="big:300000")
    expect_injected("the last </BODY  > (the first in a comment), "
                    "upper-case tags", "/page?kind=twobody", kind="twobody")
    for k in range(0, len(page("twobody")) + 1, 3):
        expect_injected("streamed: the last </BODY  > at split %d" % k,
                        "/page?kind=twobody&framing=chunked&split=%d" % k,
                        kind="twobody", streamed=True)
    expect_injected("upper-case tags", "/page?kind=upper", kind="upper")
    expect_injected("a 404 page too", "/page?status=404")
    st, hd, body = get("/page?etag=%22v1%22")
    report("a strong ETag made weak", hd.get("etag") == 'W/"v1"',
           repr(hd.get("etag")))
    st, hd, body = get("/page?etag=W/%22v1%22")
    report("a weak ETag kept", hd.get("etag") == 'W/"v1"',
           repr(hd.get("etag")))
    # passed on as they came
    expect_unmodified("no tag: as it came", "/page?kind=notag")
    expect_unmodified("no tag, gzip: as it came (coded)",
                      "/page?kind=notag&ce=gzip", ae="gzip")
    expect_unmodified("a gzip bomb (20 MB of spaces): as it came",
                      "/page?kind=bomb:20000000&ce=gzip", ae="gzip")
    expect_unmodified("a zstd bomb, chunked: as it came",
                      "/page?kind=bomb:20000000&ce=zstd&framing=chunked",
                      ae="zstd")
    expect_injected("a page over max_inject_bytes with a length: streamed",
                    "/page?kind=big:2000000", kind="big:2000000",
                    streamed=True)
    expect_injected("a chunked page over max_inject_bytes: streamed",
                    "/page?kind=big:2000000&framing=chunked",
                    kind="big:2000000", streamed=True)
    expect_unmodified("a gzip page over max_inject_bytes (read whole)",
                      "/page?kind=big:2000000&ce=gzip", ae="gzip")
    expect_unmodified("a gzip stream that does not decode",
                      "/page?ce=corrupt", ae="gzip")
    expect_unmodified("deflate (not read)", "/page?ce=deflate", ae="deflate")
    expect_unmodified("application/json", "/page?kind=json")
    expect_unmodified("text/plain", "/page?ctype=text/plain")
    expect_unmodified("two Content-Type fields (text/html, then JSON)",
                      "/page?ctype2=application/json")
    expect_unmodified("Cache-Control no-transform",
                      "/page?cc=no-transform")
    expect_unmodified("a Range request", "/page",
                      extra={"Range": "bytes=0-"})
    st, hd, body = get("/page", method="HEAD")
    report("HEAD: no body, nothing read", st == 200 and body == b"",
           "%d %r" % (st, body))
    # cut short: the client sees it cut short, edged goes on
    try:
        st, hd, body = get("/page?cut=1")
        report("a body cut short reaches the client cut short",
               False, "read whole: %d %r" % (st, body[:80]))
    except Exception:  # noqa: BLE001
        report("a body cut short reaches the client cut short", True)
    expect_injected("... and the next request is served", "/page")


main()
