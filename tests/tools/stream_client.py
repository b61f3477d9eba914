#!/usr/bin/env python3
"""stream_client.py - streaming client and RSS sampler for edged's tests.

    stream_client.py put PORT HOST N cl|chunked [nohash]
        POST N bytes of the pattern (tests/tools/stream_backend.py) to
        127.0.0.1:PORT /sink, generated on the fly in 1 MiB blocks, framed
        by Content-Length or chunked; hashes what it sends (unless nohash:
        sha256 is then ""). Prints one JSON
        object: status, bytes and sha256 sent, and the response body.
    stream_client.py get PORT HOST PATH
        GET PATH and hash the response body as it arrives (Content-Length,
        chunked or close-delimited). Prints status, bytes, sha256.
    stream_client.py rss PID OUTFILE
        Sample VmRSS of PID every 0.2 s until PID exits or this is killed;
        OUTFILE always holds "FIRST_KB PEAK_KB SAMPLES".

Exit status 0 when the transfer completed, 1 otherwise. stdlib only.
"""
import hashlib
import json
import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stream_backend import read_body, read_head, send_pattern  # noqa: E402


def connect(port):
    s = socket.create_connection(("127.0.0.1", port), 10)
    s.settimeout(120)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
    return s


def response(s):
    rfile = s.makefile("rb", buffering=1 << 20)
    first, hdrs = read_head(rfile)
    if first is None:
        raise EOFError("no response")
    return int(first.split(" ")[1]), hdrs, rfile


def put(port, host, n, mode, hashing=True):
    s = connect(port)
    head = "POST /sink HTTP/1.1\r\nHost: %s\r\nContent-Type: application/octet-stream\r\n" % host
    if mode == "chunked":
        head += "Transfer-Encoding: chunked\r\n"
    else:
        head += "Content-Length: %d\r\n" % n
    s.sendall((head + "Connection: close\r\n\r\n").encode())
    h = hashlib.sha256() if hashing else None
    sent = send_pattern(s, n, mode == "chunked", h)
    status, hdrs, rfile = response(s)
    body = bytearray()
    read_body(rfile, hdrs, body.extend)
    try:
        reply = json.loads(body)
    except ValueError:
        reply = body.decode("latin-1")[:300]
    print(json.dumps({"status": status, "bytes": sent, "sha256": h.hexdigest() if h else "",
                      "reply": reply}))
    return status == 200


def get(port, host, path):
    s = connect(port)
    s.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n"
               % (path, host)).encode())
    status, hdrs, rfile = response(s)
    h = hashlib.sha256()
    try:
        n = read_body(rfile, hdrs, h.update)
        ok = True
    except EOFError:
        n, ok = -1, False
    print(json.dumps({"status": status, "bytes": n, "sha256": h.hexdigest(),
                      "te": hdrs.get("transfer-encoding", ""),
                      "cl": hdrs.get("content-length", "")}))
    return ok and status == 200


def vmrss(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise OSError("no VmRSS")


def rss(pid, out):
    first = peak = vmrss(pid)
    samples = 0
    while True:
        try:
            kb = vmrss(pid)
        except OSError:
            return True
        samples += 1
        peak = max(peak, kb)
        with open(out + ".tmp", "w") as f:
            f.write("%d %d %d\n" % (first, peak, samples))
        os.replace(out + ".tmp", out)
        time.sleep(0.2)


def main():
    cmd = sys.argv[1]
    try:
        if cmd == "put":
            ok = put(int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5],
                     sys.argv[6:7] != ["nohash"])
        elif cmd == "get":
            ok = get(int(sys.argv[2]), sys.argv[3], sys.argv[4])
        elif cmd == "rss":
            ok = rss(int(sys.argv[2]), sys.argv[3])
        else:
            raise SystemExit(__doc__)
    except (OSError, EOFError, ValueError) as e:
        print(json.dumps({"error": repr(e)}))
        ok = False
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
