#!/usr/bin/env python3
"""uring_load.py - many keep-alive clients at once through edged, every
body checked, for the io_uring send batching test.

    uring_load.py PORT HOST CLIENTS REQUESTS

CLIENTS threads, each on one keep-alive connection, send REQUESTS
requests in turn, of four kinds: GET /source/N (N of 0 bytes to 300 KiB:
the answer's length and SHA-256 against the pattern's), the same chunked,
POST /sink with a body of N pattern bytes (the backend's digest against
the one sent), and two GETs pipelined in one write (both answers, in
order). Prints one JSON object: requests answered, failures (the first
few described), and exits 1 when any request failed. stdlib only.
"""
import hashlib
import json
import os
import random
import socket
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stream_backend import pattern_blocks, read_body, read_head  # noqa: E402

DIGESTS = {}
LOCK = threading.Lock()


def digest(n):
    with LOCK:
        d = DIGESTS.get(n)
    if d is None:
        h = hashlib.sha256()
        for blk in pattern_blocks(n):
            h.update(blk)
        d = h.hexdigest()
        with LOCK:
            DIGESTS[n] = d
    return d


def answer(rfile):
    """Read one response: (status, body digest, body length)."""
    line, hdrs = read_head(rfile)
    if line is None:
        raise EOFError("connection closed")
    status = int(line.split()[1])
    h = hashlib.sha256()
    n = read_body(rfile, hdrs, h.update) if hdrs is not None else 0
    return status, h.hexdigest(), n


def client(port, host, requests, seed, out):
    rnd = random.Random(seed)
    done, fails = 0, []
    s = socket.create_connection(("127.0.0.1", port), 10)
    s.settimeout(20)
    rfile = s.makefile("rb")
    try:
        for i in range(requests):
            kind = rnd.randrange(4)
            n = rnd.choice([0, 1, 100, 4096, 16384, 65537, 300 * 1024])
            if kind == 0 or kind == 1:
                q = "?te=chunked" if kind == 1 else ""
                s.sendall(b"GET /source/%d%s HTTP/1.1\r\nHost: %s\r\n\r\n"
                          % (n, q.encode(), host.encode()))
                st, d, got = answer(rfile)
                if st != 200 or got != n or d != digest(n):
                    fails.append("GET /source/%d%s: %d, %d bytes" % (n, q, st, got))
            elif kind == 2:
                body = b"".join(pattern_blocks(n))
                s.sendall(b"POST /sink HTTP/1.1\r\nHost: %s\r\n"
                          b"Content-Length: %d\r\n\r\n" % (host.encode(), n) + body)
                line, hdrs = read_head(rfile)
                parts = []
                read_body(rfile, hdrs, lambda b: parts.append(bytes(b)))
                st = int(line.split()[1])
                # the backend's JSON: {"bytes": N, "sha256": HEX}
                r = json.loads(b"".join(parts) or b"{}")
                if st != 200 or r.get("bytes") != n or \
                        r.get("sha256") != digest(n):
                    fails.append("POST /sink %d: %d %r" % (n, st, r))
            else:
                s.sendall(b"GET /source/%d HTTP/1.1\r\nHost: %s\r\n\r\n"
                          b"GET /source/7 HTTP/1.1\r\nHost: %s\r\n\r\n"
                          % (n, host.encode(), host.encode()))
                st1, d1, g1 = answer(rfile)
                st2, d2, g2 = answer(rfile)
                if (st1, g1, d1) != (200, n, digest(n)) or \
                        (st2, g2, d2) != (200, 7, digest(7)):
                    fails.append("pipelined /source/%d then /source/7: %d %d"
                                 % (n, st1, st2))
            done += 1
    except Exception as e:  # noqa: BLE001 - reported, not raised
        fails.append("after %d requests: %r" % (done, e))
    finally:
        s.close()
    out.append((done, fails))


def main():
    port, host = int(sys.argv[1]), sys.argv[2]
    clients, requests = int(sys.argv[3]), int(sys.argv[4])
    out = []
    ts = [threading.Thread(target=client, args=(port, host, requests, i, out))
          for i in range(clients)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    done = sum(d for d, _ in out)
    fails = [f for _, fs in out for f in fs]
    print(json.dumps({"answered": done, "failures": len(fails),
                      "first": fails[:5]}))
    return 0 if not fails and done == clients * requests else 1


if __name__ == "__main__":
    sys.exit(main())
