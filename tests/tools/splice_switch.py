#!/usr/bin/env python3
"""splice_switch.py - an echo tunnel taken by the kernel while it lives.

    splice_switch.py PORT EDGECTL SOCKET

Opens an upgraded echo tunnel (tunnel_backend.py's /echo, host raw.test)
through edged on 127.0.0.1:PORT while edged copies tunnels (splice off),
echoes 20 messages, runs `edgectl splice on`, echoes 40 more with pauses
between them (the kernel takes the tunnel), runs `edgectl splice off`
(the tunnel is handed back to the copy mover), echoes 40 more, and checks
every echo, the kernel's counters and the hand-back.
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
    st = splice()
    k0, h0 = st["kernel_bytes_up"], st["handed_back"]
    splice("on")
    echo(s, 40)
    st = splice()
    if st["open_spliced"] < 1:
        sys.exit("after the switch on, no tunnel in the kernel: %r" % st)
    # off: the live tunnel is handed back to the copy mover, and the
    # echoes go on intact
    splice("off")
    echo(s, 40)
    st = splice()
    if st["open_spliced"] != 0 or st["handed_back"] != h0 + 1:
        sys.exit("after the switch off: %d in the kernel, %d handed back "
                 "(was %d)" % (st["open_spliced"], st["handed_back"], h0))
    s.close()
    # the kernel's counts are added up when a tunnel ends
    for _ in range(50):
        time.sleep(0.1)
        k1 = splice()["kernel_bytes_up"]
        if k1 > k0:
            break
    if k1 <= k0:
        sys.exit("the kernel moved nothing after the switch (%d)" % k0)
    print("the kernel moved %d bytes up between the switch on and off"
          % (k1 - k0))


main()
