#!/usr/bin/python3
"""many_tunnels.py - N upgraded tunnels through edged open at once, each
moving its own random bytes both ways, for tests/integration/
test_edged_tunnel.sh.

    many_tunnels.py EDGE_PORT HOST BACKEND_PORT N BYTES PEAK_CMD

Runs the backend itself on 127.0.0.1:BACKEND_PORT (asyncio: it answers an
"Upgrade: edge-test" request with 101 and then echoes every byte) and N
clients to edged on 127.0.0.1:EDGE_PORT (Host: HOST). Each client upgrades
and then pings (8 bytes echoed every 0.3 s, so no tunnel goes idle) until
all N are open and have had an echo; then PEAK_CMD runs once (a shell
command: the test reads edged's status there, every tunnel open), and
then each client sends BYTES random bytes in 16 KiB writes while reading
the echo, compares SHA-256 and closes its write side, waiting for EOF.

Prints JSON: n, open_peak (tunnels open at once), ok (tunnels whose echo
was exact), failed, errors (the first few, each with its time since the
start and whether its 101 had come), seconds. Exit 0 when every tunnel was
exact, 1 otherwise. Stdlib only.
"""
import asyncio
import hashlib
import json
import os
import resource
import subprocess
import sys
import time

UPGRADE = (b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n"
           b"Upgrade: edge-test\r\n\r\n")


async def backend(reader, writer):
    try:
        head = await reader.readuntil(b"\r\n\r\n")
        if b"upgrade: edge-test" not in head.lower():
            writer.write(b"HTTP/1.1 400 Bad Request\r\n"
                         b"Content-Length: 0\r\n\r\n")
            return
        writer.write(UPGRADE)
        while True:
            b = await reader.read(65536)
            if not b:
                break
            writer.write(b)
            await writer.drain()
    except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
        pass
    finally:
        writer.close()


class Run:
    def __init__(self, n):
        self.n = n
        self.opened = 0
        self.open_now = 0
        self.open_peak = 0
        self.ok = 0
        self.errors = []
        self.failed = 0
        self.start = time.monotonic()
        self.all_open = asyncio.Event()
        self.go = asyncio.Event()


async def client(run, port, host, nbytes):
    data = os.urandom(nbytes)
    reader = writer = None
    counted = False
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /many HTTP/1.1\r\nHost: %s\r\n"
                     b"Connection: Upgrade\r\nUpgrade: edge-test\r\n\r\n"
                     % host.encode())
        head = await reader.readuntil(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 101"):
            raise RuntimeError("no 101: %r" % head[:60])
        run.open_now += 1
        counted = True
        run.open_peak = max(run.open_peak, run.open_now)
        first = True
        while not run.go.is_set():
            writer.write(b"ping1234")
            got = await reader.readexactly(8)
            if got != b"ping1234":
                raise RuntimeError("ping echoed as %r" % got)
            if first:
                first = False
                run.opened += 1
                if run.opened == run.n:
                    run.all_open.set()
            try:
                await asyncio.wait_for(run.go.wait(), 0.3)
            except asyncio.TimeoutError:
                pass

        async def send():
            for i in range(0, nbytes, 16384):
                writer.write(data[i:i + 16384])
                await writer.drain()
            writer.write_eof()

        sender = asyncio.ensure_future(send())
        h = hashlib.sha256()
        got = 0
        while got < nbytes:
            b = await reader.read(65536)
            if not b:
                break
            h.update(b)
            got += len(b)
        await sender
        rest = await reader.read()
        if got != nbytes or rest or h.digest() != hashlib.sha256(data).digest():
            raise RuntimeError("echo: %d of %d bytes, %d after, sha %s" %
                               (got, nbytes, len(rest),
                                "differs" if got == nbytes else "-"))
        run.ok += 1
    except Exception as e:  # any failure is this tunnel's, reported
        run.failed += 1
        if len(run.errors) < 5:
            run.errors.append("%s: %s (at %.1f s, %s)" % (
                type(e).__name__, e, time.monotonic() - run.start,
                "open" if counted else "before its 101"))
    finally:
        if counted:
            run.open_now -= 1
        if writer:
            writer.close()


async def main_async(port, host, bport, n, nbytes, peak_cmd):
    run = Run(n)
    srv = await asyncio.start_server(backend, "127.0.0.1", bport,
                                     backlog=4096)
    start = time.monotonic()
    tasks = [asyncio.ensure_future(client(run, port, host, nbytes))
             for _ in range(n)]
    done = asyncio.ensure_future(asyncio.gather(*tasks))
    waiter = asyncio.ensure_future(run.all_open.wait())
    await asyncio.wait([waiter, done], timeout=60,
                       return_when=asyncio.FIRST_COMPLETED)
    if run.all_open.is_set():
        await asyncio.get_running_loop().run_in_executor(
            None, lambda: subprocess.run(peak_cmd, shell=True))
    run.go.set()
    await asyncio.wait_for(done, 120)
    srv.close()
    return run, time.monotonic() - start


def main():
    if len(sys.argv) != 7:
        sys.stderr.write(__doc__)
        return 2
    port, host, bport = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    n, nbytes, peak_cmd = int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 2 * n + 64
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard), hard))
    run, secs = asyncio.run(main_async(port, host, bport, n, nbytes,
                                       peak_cmd))
    print(json.dumps({"n": n, "open_peak": run.open_peak, "ok": run.ok,
                      "failed": run.failed, "errors": run.errors,
                      "seconds": round(secs, 2)}))
    return 0 if run.ok == n else 1


if __name__ == "__main__":
    sys.exit(main())
