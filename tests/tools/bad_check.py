#!/usr/bin/env python3
"""bad_check.py - edged in front of tests/tools/bad_backend.py.

    bad_check.py EDGE_PORT BADLOG HOST LABEL

For each misbehaving answer of bad_backend.py, on one client connection
(so one edged worker and one upstream pool): GET /ok (a clean answer that
leaves its upstream connection in the pool), GET /bad/NAME (which takes
that pooled connection) and GET /ok again. The client must get 200, 502
upstream_bad_response, 200; the bad answer's upstream connection must be
closed by edged and the last /ok must arrive on a new upstream
connection. A broken first chunk line (in the head's write, or after it)
must be refused before any 200 head: the first status line the client
reads is the 502's. A control run (/ok three times) shows the pool is
otherwise reused, so the check is not vacuous; /chunk-late-ok (its first
chunk line 0.3 s after the head) is relayed whole on the pooled
connection; /bad/chunk-never (a chunked head and nothing after it) gets
504 upstream_timeout (timeouts.upstream_response) and a new upstream
connection for the next request. /bad/nothing (the pooled
connection closed with no answer: maybe the keep-alive race) is retried
once on a new connection, which closes too: 502 upstream_bad_response
after the backend saw it twice. Prints "ok - / not ok - " lines. Stdlib
only.
"""
import json
import socket
import sys
import time

PORT, LOG, HOST, LABEL = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
BAD = ["cl-te", "dup-cl", "204-body", "204-te", "304-te", "101", "status",
       "bare-lf", "fold", "1000", "truncated", "chunk", "chunk-long",
       "chunk-late", "chunk-split"]
# other answers: path, what the client gets, whether the upstream
# connection is pooled ("same") or closed ("new"), what is shown
OTHER = [
    ("/304-cl", 304, "new", "-> 304 relayed, upstream not reused"),
    ("/chunk-late-ok", 200, "same",
     "(first chunk line 0.3 s after the head) -> 200 relayed whole, "
     "upstream reused"),
    ("/bad/chunk-never", "504 upstream_timeout", "new",
     "(a chunked head, no chunk line) -> 504 upstream_timeout, upstream "
     "closed, never reused"),
]


def chunked_body(f):
    """Read a chunked body from f; returns its data."""
    data = b""
    while True:
        size = int(f.readline().split(b";")[0], 16)
        if size == 0:
            while f.readline() not in (b"\r\n", b""):
                pass
            return data
        data += f.read(size)
        f.readline()


def request(s, f, path):
    """One GET: its status (an int), "STATUS ERROR" for an error with
    edged's JSON body, or "200 with body ..." for a 200 whose body is not
    "ok"."""
    s.sendall(b"GET %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (path.encode(),
                                                        HOST.encode()))
    line = f.readline()
    if not line:
        return None
    status = int(line.split(b" ")[1])
    n = 0
    chunked = False
    while True:
        h = f.readline()
        if h in (b"\r\n", b""):
            break
        k, _, v = h.partition(b":")
        if k.strip().lower() == b"content-length":
            n = int(v.strip())
        if k.strip().lower() == b"transfer-encoding":
            chunked = v.strip().lower() == b"chunked"
    if status in (204, 304):
        body = b""
    elif chunked:
        body = chunked_body(f)
    else:
        body = f.read(n)
    if status >= 400:
        try:
            return "%d %s" % (status, json.loads(body)["error"])
        except (ValueError, KeyError):
            return "%d without a JSON error: %r" % (status, body[:100])
    if status == 200 and body != b"ok":
        return "200 with body %r" % body[:100]
    return status


def events():
    with open(LOG) as fh:
        return [json.loads(x) for x in fh if x.strip()]


def run(paths, want):
    """Three requests on one connection; returns (statuses, reqs, closes)."""
    before = len(events())
    s = socket.create_connection(("127.0.0.1", PORT), timeout=5)
    f = s.makefile("rb")
    got = []
    try:
        for p in paths:
            got.append(request(s, f, p))
    except (OSError, ValueError, IndexError):
        got.append("error")
    s.close()
    deadline = time.monotonic() + 1.0
    while True:
        ev = events()[before:]
        reqs = [e for e in ev if e["ev"] == "req"]
        closes = {e["c"] for e in ev if e["ev"] == "close"}
        done = len(reqs) >= len(paths) and \
            (want != "new" or reqs[1]["c"] in closes)
        if done or time.monotonic() > deadline:
            return got, reqs, closes
        time.sleep(0.02)


def main():
    failed = 0

    def report(name, bad):
        nonlocal failed
        if bad:
            failed += 1
            print("not ok - %s: %s: %s" % (LABEL, name, "; ".join(bad)))
        else:
            print("ok - %s: %s" % (LABEL, name))
        sys.stdout.flush()

    got, reqs, _ = run(["/ok", "/ok", "/ok"], "same")
    bad = []
    if got != [200, 200, 200]:
        bad.append("statuses %s" % got)
    if len({r["c"] for r in reqs}) != 1:
        bad.append("upstream connections %s" % [r["c"] for r in reqs])
    report("control: clean answers reuse one pooled upstream connection", bad)

    cases = [("/bad/" + name, "502 upstream_bad_response", "new",
              "-> 502 upstream_bad_response, upstream closed, never reused")
             for name in BAD] + OTHER
    for path, want, pool, what in cases:
        got, reqs, closes = run(["/ok", path, "/ok"], pool)
        bad = []
        if got != [200, want, 200]:
            bad.append("statuses %s, wanted [200, %r, 200]" % (got, want))
        if len(reqs) != 3 or [r["target"] for r in reqs] != ["/ok", path, "/ok"]:
            bad.append("backend saw %s" % [(r["target"], r["c"]) for r in reqs])
        elif pool == "new":
            if reqs[1]["c"] not in closes:
                bad.append("upstream connection %d not closed" % reqs[1]["c"])
            if reqs[2]["c"] == reqs[1]["c"]:
                bad.append("upstream connection %d reused" % reqs[1]["c"])
        elif len({r["c"] for r in reqs}) != 1:
            bad.append("upstream connections %s" % [r["c"] for r in reqs])
        report("backend answer %s %s" % (path.rsplit("/", 1)[1], what), bad)

    path = "/bad/nothing"
    got, reqs, closes = run(["/ok", path, "/ok"], "new")
    bad = []
    want = [200, "502 upstream_bad_response", 200]
    if got != want:
        bad.append("statuses %s, wanted %s" % (got, want))
    targets = [r["target"] for r in reqs]
    if targets[:4] != ["/ok", path, path, "/ok"]:
        bad.append("backend saw %s" % [(r["target"], r["c"]) for r in reqs])
    elif len({reqs[1]["c"], reqs[2]["c"], reqs[3]["c"]}) != 3 or \
            reqs[0]["c"] != reqs[1]["c"]:
        bad.append("upstream connections %s" % [r["c"] for r in reqs])
    report("backend closes without answering: retried once on a new "
           "connection, then 502 upstream_bad_response", bad)
    return 1 if failed else 0


sys.exit(main())
