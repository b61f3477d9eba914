#!/usr/bin/env python3
"""splice_switch.py - an echo tunnel taken by the kernel while it lives.

    splice_switch.py PORT EDGECTL SOCKET

Opens an upgraded echo tunnel (tunnel_backend.py's /echo, host raw.test)
through edged on 127.0.0.1:PORT while edged copies tunnels (splice off),
echoes 20 messages, runs `edgectl splice on`, echoes 40 more with pauses
between them, and checks every echo and that the kernel's counters grew.
Prints what the kernel moved; exits 1 with the reason otherwise.
"""
import json
import socket
import subprocess
import sys
import time

PORT, EDGECTL, SOCK = int(sys.argv[1]), sys.argv[2], sys.argv[3]


def splice(*args):
    r = subprocess.run([EDGECTL, "--socket", SOCK, "splice", *args, "--json"],
                       check=True, capture_output=True, text=True)
    return json.loads(r.stdout)


def echo(s, n):
    for i in range(n):
        msg = (b"%06d" % i) * 1000
        s.sendall(msg)
        got = b""
        while len(got) < len(msg):
            d = s.recv(65536)
            if not d:
                sys.exit("the tunnel closed after %d echoes" % i)
            got += d
        if got != msg:
            sys.exit("echo %d differs" % i)
        time.sleep(0.01)


def main():
    s = socket.create_connection(("127.0.0.1", PORT))
    s.settimeout(10)
    s.sendall(b"GET /echo HTTP/1.1\r\nHost: raw.test\r\nConnection: Upgrade\r\n"
              b"Upgrade: raw-test\r\n\r\n")
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = s.recv(4096)
        if not d:
            sys.exit("no answer to the upgrade")
        buf += d
    if not buf.startswith(b"HTTP/1.1 101"):
        sys.exit("not a 101: %r" % buf[:40])
    echo(s, 20)
    k0 = splice()["kernel_bytes_up"]
    splice("on")
    echo(s, 40)
    s.close()
    # the kernel's counts are added up when a tunnel ends
    for _ in range(50):
        time.sleep(0.1)
        k1 = splice()["kernel_bytes_up"]
        if k1 > k0:
            break
    if k1 <= k0:
        sys.exit("the kernel moved nothing after the switch (%d)" % k0)
    print("the kernel moved %d bytes up after the switch" % (k1 - k0))


main()
