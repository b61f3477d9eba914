#!/usr/bin/env python3
"""smuggle.py - run the smuggling corpus against a live edged.

    smuggle.py CORPUS EDGE_PORT RECLOG LABEL [NAME...]

CORPUS is tests/corpus/smuggling.txt (its format is described at its top
and in docs/http.md); RECLOG is the log of tests/tools/rec_backend.py,
the only upstream of the domain the cases use. Each case (or only the
NAMEs given) runs three times on a new connection each:

  whole  the bytes in one write
  split  one byte per write (a short pause between the first ones)
  pipe   the bytes followed, in the same write, by a valid
         "GET /ok" with Connection: close

and prints one "ok - / not ok - / skip - " line per run. A run checks the
client's side (the first final status, nothing answered that was not
asked, the connection closed or kept as the case says) and the backend's
side from RECLOG (what the case says reached upstream, for "pipe" plus the
/ok exactly when the connection stays open; every forwarded request
rebuilt with one framing and no hop-by-hop fields). A case marked "bug"
that fails prints "skip - ... KNOWN BUG: ...". Stdlib only.
"""
import base64
import json
import os
import socket
import sys
import time

OK_REQ = b"GET /ok HTTP/1.1\r\nHost: shop.test\r\nConnection: close\r\n\r\n"
READ_TIMEOUT = 3.0   # longest wait for an answer or an EOF
OPEN_GRACE = 0.1     # a kept connection must stay open this long
QUIET = 0.03         # settle time before checking that nothing went upstream
SETTLE_OPEN = 10.0   # longest wait for a partial upstream connection to close
SPLIT_PAUSED = 300   # bytes sent with a pause in split mode


def unescape(s, where):
    out = bytearray()
    i = 0
    while i < len(s):
        ch = s[i]
        if ch != "\\":
            out += ch.encode("latin-1")
            i += 1
            continue
        if i + 1 >= len(s):
            raise ValueError("%s: trailing backslash" % where)
        e = s[i + 1]
        if e in "rnt0\\":
            out += {"r": b"\r", "n": b"\n", "t": b"\t", "0": b"\0",
                    "\\": b"\\"}[e]
            i += 2
        elif e == "x":
            out.append(int(s[i + 2:i + 4], 16))
            i += 4
        else:
            raise ValueError("%s: unknown escape \\%s" % (where, e))
    return bytes(out)


def load(path):
    cases, c = [], None
    with open(path, encoding="latin-1") as f:
        for no, raw in enumerate(f, 1):
            ln = raw.rstrip("\n")
            where = "%s:%d" % (path, no)
            if not ln.strip() or ln.startswith("#"):
                continue
            if ln.startswith("== "):
                c = {"name": ln[3:].strip(), "data": b"", "status": None,
                     "close": None, "upstream": None, "bug": None,
                     "fwd": [], "interim": [], "line": no}
                cases.append(c)
                continue
            if c is None:
                raise ValueError("%s: text before the first case" % where)
            if ln.startswith(">*"):
                n, _, text = ln[2:].partition(" ")
                c["data"] += unescape(text, where) * int(n)
                continue
            if ln.startswith("> "):
                c["data"] += unescape(ln[2:], where)
                continue
            key, _, val = ln.partition(" ")
            if key == "status":
                c["status"] = int(val)
            elif key == "close":
                if val not in ("yes", "no"):
                    raise ValueError("%s: close yes|no" % where)
                c["close"] = val == "yes"
            elif key == "upstream":
                if val not in ("none", "one", "partial"):
                    raise ValueError("%s: upstream none|one|partial" % where)
                c["upstream"] = val
            elif key == "interim":
                c["interim"] = [int(x) for x in val.split()]
            elif key == "bug":
                c["bug"] = val
            elif key in ("fwd-target", "fwd-body", "fwd-header"):
                c["fwd"].append((key, unescape(val, where)))
            else:
                raise ValueError("%s: unknown key %r" % (where, key))
    names = set()
    for c in cases:
        for k in ("status", "close", "upstream"):
            if c[k] is None:
                raise ValueError("%s:%d: case %s has no %s"
                                 % (path, c["line"], c["name"], k))
        if not c["data"]:
            raise ValueError("case %s has no bytes" % c["name"])
        if c["name"] in names:
            raise ValueError("case %s given twice" % c["name"])
        names.add(c["name"])
    return cases


def parse_responses(b, eof):
    """Split b into responses: ([(status, headers, body)], [interim], rest
    complete?)."""
    out, interim = [], []
    while b:
        i = b.find(b"\r\n\r\n")
        if i < 0:
            return out, interim, False
        head, rest = b[:i].split(b"\r\n"), b[i + 4:]
        try:
            status = int(head[0].split(b" ")[1])
        except (IndexError, ValueError):
            return out, interim, False
        hdrs = {}
        for ln in head[1:]:
            n, _, v = ln.partition(b":")
            hdrs.setdefault(n.strip().lower().decode("latin-1"),
                            v.strip().decode("latin-1"))
        if status < 200:
            interim.append(status)
            b = rest
            continue
        if "content-length" in hdrs:
            n = int(hdrs["content-length"])
            if len(rest) < n:
                return out, interim, False
            body, b = rest[:n], rest[n:]
        elif hdrs.get("transfer-encoding", "").lower() == "chunked":
            body, pos = b"", 0
            while True:
                j = rest.find(b"\r\n", pos)
                if j < 0:
                    return out, interim, False
                size = int(rest[pos:j].split(b";")[0], 16)
                if size == 0:
                    k = rest.find(b"\r\n\r\n", j)
                    if k < 0:
                        return out, interim, False
                    b = rest[k + 4:]
                    break
                if len(rest) < j + 2 + size + 2:
                    return out, interim, False
                body += rest[j + 2:j + 2 + size]
                pos = j + 2 + size + 2
        elif status in (204, 304):
            body, b = b"", rest
        else:
            if not eof:
                return out, interim, False
            body, b = rest, b""
        out.append((status, hdrs, body))
    return out, interim, True


def talk(port, data, mode, close_expected):
    """Send data as mode says; return (bytes received, closed?)."""
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        if mode == "split":
            for i in range(len(data)):
                s.sendall(data[i:i + 1])
                if i < SPLIT_PAUSED:
                    time.sleep(0.001)
        else:
            s.sendall(data)
    except OSError:
        pass  # edged answered and closed before the end: read the answer
    got, closed = b"", False
    deadline = time.monotonic() + READ_TIMEOUT
    want_eof = mode == "pipe" or close_expected
    while True:
        left = deadline - time.monotonic()
        if not want_eof:
            resp, _, _ = parse_responses(got, False)
            if resp:  # one final answer: it must stay open a moment
                left = min(left, OPEN_GRACE)
        if left <= 0:
            break
        s.settimeout(left)
        try:
            d = s.recv(65536)
        except socket.timeout:
            if not want_eof and parse_responses(got, False)[0]:
                break
            continue
        except OSError:
            closed = True
            break
        if not d:
            closed = True
            break
        got += d
    s.close()
    return got, closed


class Rec:
    """Reads the recording backend's log incrementally."""

    def __init__(self, path):
        self.path = path
        self.off = 0
        self.evil = []

    def mark(self):
        """Start a run: what came in since the last one is only scanned
        for smuggled requests."""
        self.events()
        self.off = os.path.getsize(self.path) if os.path.exists(self.path) else 0

    def events(self):
        if not os.path.exists(self.path):
            return []
        with open(self.path, "rb") as f:
            f.seek(self.off)
            data = f.read()
        cut = data.rfind(b"\n") + 1
        evs = [json.loads(x) for x in data[:cut].splitlines() if x]
        for e in evs:
            if e["ev"] == "req" and "evil" in e["target"]:
                self.evil.append(e["target"])
        return evs


def check_backend(c, mode, evs, n_ok):
    """What reached upstream; returns a list of complaints."""
    bad = []
    reqs = [e for e in evs if e["ev"] == "req"]
    accepts = [e for e in evs if e["ev"] == "accept"]
    data = [e for e in evs if e["ev"] == "data"]
    broken = [e for e in evs if e["ev"] == "bad"]
    closes = {e["c"] for e in evs if e["ev"] == "close"}
    want = {"none": 0, "one": 1, "partial": 0}[c["upstream"]]
    if len(reqs) != want + n_ok:
        bad.append("backend got %d requests (%s), wanted %d"
                   % (len(reqs), [r["target"] for r in reqs], want + n_ok))
    if n_ok and (not reqs or reqs[-1]["target"] != "/ok"):
        bad.append("the pipelined /ok did not reach the backend last")
    if not n_ok and any(r["target"] == "/ok" for r in reqs):
        bad.append("the pipelined /ok reached the backend on a closed connection")
    if c["upstream"] == "none" and not n_ok and (accepts or data):
        bad.append("upstream connection or bytes for a rejected request "
                   "(%d accepts, %d data)" % (len(accepts), len(data)))
    if c["upstream"] == "partial":
        for e in broken:
            if "EOF" not in e["why"]:
                bad.append("backend could not frame: " + e["why"])
        ok_conns = {r["c"] for r in reqs if r["target"] == "/ok"}
        for cid in {e["c"] for e in data} - closes - ok_conns:
            bad.append("upstream connection %d not closed" % cid)
    elif broken:
        bad.append("backend could not frame: %s" % broken[0]["why"])
    for r in reqs:
        if r["problems"]:
            bad.append("forwarded %s with %s" % (r["target"], r["problems"]))
    if want and reqs:
        r = reqs[0]
        body = base64.b64decode(r["body_b64"])
        for key, val in c["fwd"]:
            if key == "fwd-target" and r["target"].encode("latin-1") != val:
                bad.append("forwarded target %r, wanted %r" % (r["target"], val))
            if key == "fwd-body" and body != val:
                bad.append("forwarded body %r, wanted %r" % (body[:80], val))
            if key == "fwd-header":
                n, _, v = val.decode("latin-1").partition(":")
                if [n.strip().lower(), v.strip()] not in \
                        [[h[0].lower(), h[1]] for h in r["headers"]]:
                    bad.append("forwarded head lacks %r: %s" % (val, r["headers"]))
    return bad


def settle(c, rec, n_ok):
    """Wait until the backend's log holds what it should (bounded): 1 s
    for the requests, and up to SETTLE_OPEN for a partial upstream
    connection to close, so that its last bytes and close are this
    case's and not counted against the next one (ASan beside other
    suites once took over 1 s)."""
    want = {"none": 0, "one": 1, "partial": 0}[c["upstream"]] + n_ok
    start = time.monotonic()
    time.sleep(QUIET)
    while True:
        evs = rec.events()
        reqs = sum(1 for e in evs if e["ev"] == "req")
        open_ = {e["c"] for e in evs if e["ev"] == "data"} - \
            {e["c"] for e in evs if e["ev"] == "close"}
        done = reqs >= want and (c["upstream"] != "partial" or not open_)
        waited = time.monotonic() - start
        if done or waited > SETTLE_OPEN or (waited > 1.0 and not open_):
            return evs
        time.sleep(0.02)


def run(c, mode, port, rec):
    data = c["data"] + (OK_REQ if mode == "pipe" else b"")
    rec.mark()
    got, closed = talk(port, data, mode, c["close"])
    resp, interim, complete = parse_responses(got, closed)
    bad = []
    first = got.split(b"\r\n", 1)[0].decode("latin-1", "replace")
    if not resp:
        bad.append("no complete answer (got %r)" % got[:120])
    elif resp[0][0] != c["status"]:
        bad.append("status %d (%s), wanted %d" % (resp[0][0], first, c["status"]))
    if interim != c["interim"]:
        bad.append("interim answers %s, wanted %s" % (interim, c["interim"]))
    n_ok = 1 if mode == "pipe" and not c["close"] else 0
    if mode == "pipe":
        if not closed:
            bad.append("connection not closed after the pipelined /ok")
        if c["close"] and len(resp) > 1:
            bad.append("%d answers after a closing one" % (len(resp) - 1))
        if not c["close"] and (len(resp) != 2 or resp[1][0] != 200):
            bad.append("the pipelined /ok was not answered 200 (%s)"
                       % [r[0] for r in resp])
    else:
        if closed != c["close"]:
            bad.append("connection %s" % ("closed" if closed else "left open"))
        if len(resp) > 1:
            bad.append("%d answers to one request" % len(resp))
    if not complete and resp:
        bad.append("trailing bytes after the answers: %r" % got[-60:])
    bad += check_backend(c, mode, settle(c, rec, n_ok), n_ok)
    return bad


def main():
    corpus, port, log, label = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    only = set(sys.argv[5:])
    rec = Rec(log)
    failed = 0
    for c in load(corpus):
        if only and c["name"] not in only:
            continue
        for mode in ("whole", "split", "pipe"):
            name = "%s: %s (%s)" % (label, c["name"], mode)
            bad = run(c, mode, port, rec)
            if not bad and c["bug"]:
                print("ok - %s (marked as a known bug, but passed: drop the "
                      "marker)" % name)
            elif not bad:
                print("ok - %s" % name)
            elif c["bug"]:
                print("skip - %s: KNOWN BUG: %s (got: %s)"
                      % (name, c["bug"], "; ".join(bad)))
            else:
                failed += 1
                print("not ok - %s: %s" % (name, "; ".join(bad)))
            sys.stdout.flush()
    if rec.evil:
        failed += 1
        print("not ok - %s: a smuggled request reached the backend: %s"
              % (label, rec.evil))
    else:
        print("ok - %s: no smuggled /evil request ever reached the backend"
              % label)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
