#!/usr/bin/env python3
"""wakedrive.py - the client side of bench/wake.

    wakedrive.py latency --cycles N --edgectl PATH TARGET...
        TARGET = NAME,PORT,HOST,STAMPFILE,SOCKET,ENV (an edged, its
        listener, the on-demand environment's domain and id, the file its
        backend stamps, edged's control socket)
    wakedrive.py storm --port N --host H --conns C --requests R

latency: N cycles; in each, for each target in turn: wait until edged
says the environment is sleeping (edgectl envs --json, every 20 ms) and
its backend's port refuses, remove STAMPFILE, send one request
(Connection: close) and take CLOCK_REALTIME when its first byte arrives.
One line per wake on stdout:

    wake NAME CYCLE STATUS first_byte_ns listen_ns first_request_ns cold_start_ms

storm: C connections opened at once, each sending R/C requests in turn
(keep-alive), all to the same (sleeping) environment. One line:

    storm: requests=N ok=N failed=N seconds=F first_ms=F last_ms=F statuses=CODE:N,...

(first_ms and last_ms: the first and the last response, from the start).
Exit 0 when every request got a 200, 1 otherwise, 2 on a usage error.
"""
import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import time


def env_state(edgectl, sock, env):
    try:
        out = subprocess.run([edgectl, "--socket", sock, "envs", "--json"],
                             capture_output=True, timeout=5, check=True).stdout
        for e in json.loads(out)["environments"]:
            if e["id"] == env:
                return e["state"]
    except (subprocess.SubprocessError, ValueError, KeyError):
        return None
    return None


def port_refuses(port):
    try:
        socket.create_connection(("127.0.0.1", port), 0.2).close()
        return False
    except OSError:
        return True


def read_stamp(path):
    got = {}
    try:
        with open(path) as f:
            for line in f:
                k, _, v = line.partition(" ")
                got.setdefault(k, int(v))
    except (OSError, ValueError):
        pass
    return got


def one_request(port, host):
    """(status, first byte CLOCK_REALTIME ns, X-Edge-Cold-Start or '')"""
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.sendall(("GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % host).encode())
    d = s.recv(65536)
    first = time.time_ns()
    data = d
    while d:
        d = s.recv(65536)
        data += d
    s.close()
    head = data.split(b"\r\n\r\n")[0].decode("latin-1").split("\r\n")
    status = int(head[0].split()[1]) if head and head[0].startswith("HTTP/") else 0
    cold = ""
    for line in head[1:]:
        k, _, v = line.partition(":")
        if k.strip().lower() == "x-edge-cold-start":
            cold = v.strip()
    return status, first, cold


def latency(a):
    targets = []
    for t in a.target:
        name, port, host, stamp, sock, env = t.split(",")
        # the backend's port: from the stamp's sibling file NAME.port
        targets.append((name, int(port), host, stamp, sock, env))
    bports = {}
    for name, _, _, stamp, _, _ in targets:
        with open(stamp + ".port") as f:
            bports[name] = int(f.read())
    for cycle in range(1, a.cycles + 1):
        for name, port, host, stamp, sock, env in targets:
            deadline = time.monotonic() + 30
            while True:
                if env_state(a.edgectl, sock, env) == "sleeping" and port_refuses(bports[name]):
                    break
                if time.monotonic() > deadline:
                    print("wakedrive: %s did not go to sleep within 30 s" % name, file=sys.stderr)
                    return 1
                time.sleep(0.02)
            try:
                os.unlink(stamp)
            except FileNotFoundError:
                pass
            try:
                status, first, cold = one_request(port, host)
            except OSError as e:
                print("wakedrive: %s cycle %d: %s" % (name, cycle, e), file=sys.stderr)
                status, first, cold = 0, 0, ""
            st = read_stamp(stamp)
            print("wake %s %d %d %d %d %d %s" % (name, cycle, status, first,
                  st.get("listen", 0), st.get("first_request", 0), cold or "-"), flush=True)
    return 0


async def storm_conn(port, host, n, res, t0):
    try:
        r, w = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        res["codes"][0] = res["codes"].get(0, 0) + n
        return
    req = ("GET / HTTP/1.1\r\nHost: %s\r\n\r\n" % host).encode()
    try:
        for _ in range(n):
            w.write(req)
            head = await r.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            code = int(lines[0].split()[1])
            clen = 0
            close = False
            for line in lines[1:]:
                k, _, v = line.partition(":")
                k = k.strip().lower()
                if k == "content-length":
                    clen = int(v)
                elif k == "connection" and v.strip().lower() == "close":
                    close = True
            if clen:
                await r.readexactly(clen)
            now = time.monotonic() - t0
            res["first"] = min(res["first"], now)
            res["last"] = max(res["last"], now)
            res["codes"][code] = res["codes"].get(code, 0) + 1
            n -= 1
            if close:
                break
    except (OSError, asyncio.IncompleteReadError, ValueError, IndexError):
        pass
    if n:
        res["codes"][0] = res["codes"].get(0, 0) + n
    w.close()


async def storm_main(a):
    res = {"first": float("inf"), "last": 0.0, "codes": {}}
    per = a.requests // a.conns
    extra = a.requests - per * a.conns
    t0 = time.monotonic()
    await asyncio.gather(*[storm_conn(a.port, a.host, per + (1 if i < extra else 0), res, t0)
                           for i in range(a.conns)])
    secs = time.monotonic() - t0
    ok = res["codes"].get(200, 0)
    codes = ",".join("%d:%d" % kv for kv in sorted(res["codes"].items()))
    print("storm: requests=%d ok=%d failed=%d seconds=%.3f first_ms=%.1f last_ms=%.1f statuses=%s"
          % (a.requests, ok, a.requests - ok, secs,
             res["first"] * 1000 if ok else -1, res["last"] * 1000, codes))
    return 0 if ok == a.requests else 1


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    lp = sub.add_parser("latency")
    lp.add_argument("--cycles", type=int, required=True)
    lp.add_argument("--edgectl", required=True)
    lp.add_argument("target", nargs="+")
    sp = sub.add_parser("storm")
    sp.add_argument("--port", type=int, required=True)
    sp.add_argument("--host", required=True)
    sp.add_argument("--conns", type=int, default=1000)
    sp.add_argument("--requests", type=int, default=10000)
    a = p.parse_args()
    if a.cmd == "latency":
        return latency(a)
    if a.conns < 1 or a.requests < a.conns:
        print("wakedrive: --requests must be at least --conns >= 1", file=sys.stderr)
        return 2
    return asyncio.run(storm_main(a))


sys.exit(main())
