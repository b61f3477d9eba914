#!/usr/bin/env python3
"""bench/http/idleconns.py PORT COUNT HOST [STEPS] - open COUNT keep-alive
connections to 127.0.0.1:PORT, make one GET on each (Host: HOST, at most
BATCH requests in flight), keep them all open and idle, print
"ready OPEN FAILED" on stdout, then sleep until killed.

With STEPS > 1 the connections are opened in STEPS equal steps: after
each but the last it prints "step OPEN FAILED" (the totals so far) and
waits for a line on stdin before the next, so that the caller can read
the proxy's memory at each step."""
import resource
import selectors
import socket
import sys
import time

BATCH = 200


def main():
    port, count, host = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    steps = int(sys.argv[4]) if len(sys.argv) > 4 else 1
    marks = [count * (k + 1) // steps for k in range(steps)]
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, 65536)
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    req = ("GET / HTTP/1.1\r\nHost: %s\r\n\r\n" % host).encode()
    kept, failed = [], 0
    sel = selectors.DefaultSelector()
    while len(kept) + failed < count:
        if len(kept) + failed >= marks[0]:
            marks.pop(0)
            print("step %d %d" % (len(kept), failed), flush=True)
            sys.stdin.readline()
        n = min(BATCH, marks[0] - len(kept) - failed)
        pending = {}
        for _ in range(n):
            try:
                s = socket.create_connection(("127.0.0.1", port), 5)
                s.sendall(req)
                s.setblocking(False)
                sel.register(s, selectors.EVENT_READ)
                pending[s] = b""
            except OSError:
                failed += 1
        deadline = time.monotonic() + 10
        while pending and time.monotonic() < deadline:
            for key, _ in sel.select(1):
                s = key.fileobj
                try:
                    data = s.recv(65536)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                if not data:
                    sel.unregister(s)
                    del pending[s]
                    s.close()
                    failed += 1
                    continue
                buf = pending[s] + data
                pending[s] = buf
                head, sep, body = buf.partition(b"\r\n\r\n")
                if not sep:
                    continue
                clen = 0
                for line in head.split(b"\r\n")[1:]:
                    k, _, v = line.partition(b":")
                    if k.strip().lower() == b"content-length":
                        clen = int(v.strip())
                if len(body) >= clen and head.startswith(b"HTTP/1.1 2"):
                    sel.unregister(s)
                    del pending[s]
                    kept.append(s)
                elif len(body) >= clen:
                    sel.unregister(s)
                    del pending[s]
                    s.close()
                    failed += 1
        for s in list(pending):
            sel.unregister(s)
            s.close()
            failed += 1
    print("ready %d %d" % (len(kept), failed), flush=True)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
