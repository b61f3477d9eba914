#!/usr/bin/env python3
"""netprobe - the servers of edge's namespace tests (the clients are
tests/tools/probe.c, which starts fast even in a VM under emulation).

  netprobe.py serve PORT [PORT...]      answer "ok <client-ip>\n" on TCP and
                                        UDP, IPv4 and IPv6, every PORT; ends
                                        by itself after 600 s
"""
import select
import socket
import sys
import time

def serve(ports, max_seconds=600):
    socks = []
    for port in ports:
        for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
            s = socket.socket(socket.AF_INET6, kind)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
            s.bind(("::", port))
            if kind == socket.SOCK_STREAM:
                s.listen(128)
            socks.append(s)
    conns = []
    deadline = time.time() + max_seconds
    print("ready", flush=True)
    while time.time() < deadline:
        r, _, _ = select.select(socks + conns, [], [], 1.0)
        for s in r:
            if s in conns:
                try:
                    data = s.recv(4096)
                except OSError:
                    data = b""
                if not data:
                    conns.remove(s)
                    s.close()
                    continue
                peer = s.getpeername()[0].replace("::ffff:", "")
                try:
                    s.sendall(b"ok %s\n" % peer.encode())
                except OSError:
                    conns.remove(s)
                    s.close()
            elif s.type == socket.SOCK_STREAM:
                try:
                    c, _ = s.accept()
                    conns.append(c)
                except OSError:
                    pass
            else:
                try:
                    data, peer = s.recvfrom(4096)
                    ip = peer[0].replace("::ffff:", "")
                    s.sendto(b"ok %s\n" % ip.encode(), peer)
                except OSError:
                    pass


def main(argv):
    if len(argv) >= 2 and argv[1] == "serve":
        serve([int(p) for p in argv[2:]])
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
