#!/usr/bin/env python3
"""netprobe - tiny TCP/UDP servers and clients for edge's namespace tests.

  netprobe.py serve PORT [PORT...]      answer "ok <client-ip>\n" on TCP and
                                        UDP, IPv4 and IPv6, every PORT
  netprobe.py tcp SRC DST PORT          connect from SRC, print the answer;
                                        exit 1 when nothing comes back
  netprobe.py udp SRC DST PORT          same over UDP
  netprobe.py hold SRC DST PORT FLAG    TCP: one exchange, wait until file
                                        FLAG exists, exchange again; prints
                                        "first ok" and "second ok|blocked"
Timeouts are short (1 s) and bounded; every mode ends by itself.
"""
import os
import select
import socket
import sys
import time

TIMEOUT = float(os.environ.get("NETPROBE_TIMEOUT", "1.0"))


def family(addr):
    return socket.AF_INET6 if ":" in addr else socket.AF_INET


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


def tcp(src, dst, port):
    s = socket.socket(family(dst), socket.SOCK_STREAM)
    s.settimeout(TIMEOUT)
    s.bind((src, 0))
    try:
        s.connect((dst, int(port)))
        s.sendall(b"hi\n")
        data = s.recv(100)
    except OSError as e:
        print("fail: %s" % e)
        return 1
    finally:
        s.close()
    if not data:
        print("fail: closed")
        return 1
    print(data.decode().strip())
    return 0


def udp(src, dst, port):
    s = socket.socket(family(dst), socket.SOCK_DGRAM)
    s.settimeout(TIMEOUT)
    s.bind((src, 0))
    try:
        s.sendto(b"hi\n", (dst, int(port)))
        data, _ = s.recvfrom(100)
    except OSError as e:
        print("fail: %s" % e)
        return 1
    finally:
        s.close()
    print(data.decode().strip())
    return 0


def hold(src, dst, port, flag):
    s = socket.socket(family(dst), socket.SOCK_STREAM)
    s.settimeout(TIMEOUT)
    s.bind((src, 0))
    try:
        s.connect((dst, int(port)))
        s.sendall(b"one\n")
        s.recv(100)
    except OSError as e:
        print("first fail: %s" % e)
        return 1
    print("first ok", flush=True)
    deadline = time.time() + 30
    while not os.path.exists(flag):
        if time.time() > deadline:
            print("flag never came")
            return 1
        time.sleep(0.05)
    try:
        s.sendall(b"two\n")
        data = s.recv(100)
        print("second ok" if data else "second closed")
    except OSError:
        print("second blocked")
    s.close()
    return 0


def main(argv):
    if len(argv) >= 2 and argv[1] == "serve":
        serve([int(p) for p in argv[2:]])
        return 0
    if len(argv) == 5 and argv[1] in ("tcp", "udp"):
        return (tcp if argv[1] == "tcp" else udp)(argv[2], argv[3], argv[4])
    if len(argv) == 6 and argv[1] == "hold":
        return hold(argv[2], argv[3], argv[4], argv[5])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
