#!/usr/bin/env python3
"""pp_client.py - a client that begins its connection with a PROXY
protocol header, for edged's tests.

    pp_client.py [--bind ADDR] [--tls NAME] [--split MS] [--hold S]
                 PORT KIND HOST [PATH]

Connects to 127.0.0.1:PORT (from ADDR when --bind), sends the header KIND
and, unless KIND ends in "-only", a GET of PATH (default /) for HOST, over
TLS when --tls (server name NAME, the certificate not verified) after the
header, and prints the response's status line and body (a JSON object
from echo_backend.py) or "CLOSED N" when the connection was closed after
N response bytes. --split MS sends the header in two halves MS apart;
--hold S sends nothing for S seconds after connecting (a slow header).

KIND: v1 (PROXY TCP4 203.0.113.7 ... 40000 80), v1-6 (TCP6 2001:db8::7),
v1-unknown, v2 (TCP4 203.0.113.9 with an unknown TLV), v2-6, v2-local,
v2-unspec,
bad-v1 (two spaces), bad-v2 (version 3), big-v2 (4097 bytes), none (an
HTTP request with no header), partial (half a v2 header, then nothing:
"OPEN after 30 s" when edged has not closed it by then).
"""
import argparse
import socket
import ssl
import struct
import sys
import time

SIG = b"\r\n\r\n\x00\r\nQUIT\n"


def v2(cmd, fam, body):
    return SIG + bytes([0x20 | cmd, fam]) + struct.pack("!H", len(body)) + body


def header(kind):
    a4 = socket.inet_aton
    a6 = lambda s: socket.inet_pton(socket.AF_INET6, s)
    if kind == "v1":
        return b"PROXY TCP4 203.0.113.7 198.51.100.1 40000 80\r\n"
    if kind == "v1-6":
        return b"PROXY TCP6 2001:db8::7 2001:db8::1 40000 80\r\n"
    if kind == "v1-unknown":
        return b"PROXY UNKNOWN\r\n"
    if kind == "v2":
        tlv = b"\xe0\x00\x03abc"
        return v2(1, 0x11, a4("203.0.113.9") + a4("198.51.100.1") +
                  struct.pack("!HH", 40001, 80) + tlv)
    if kind == "v2-6":
        return v2(1, 0x21, a6("2001:db8::9") + a6("2001:db8::1") +
                  struct.pack("!HH", 40002, 443))
    if kind == "v2-local":
        return v2(0, 0x00, b"")
    if kind == "v2-unspec":
        return v2(1, 0x00, b"")
    if kind == "bad-v1":
        return b"PROXY TCP4  203.0.113.7 198.51.100.1 40000 80\r\n"
    if kind == "bad-v2":
        return SIG + b"\x31\x11\x00\x0c" + b"\x00" * 12
    if kind == "big-v2":
        body = a4("203.0.113.9") + a4("198.51.100.1") + struct.pack("!HH", 1, 2)
        pad = 4097 - 16 - len(body) - 3
        return v2(1, 0x11, body + b"\xe1" + struct.pack("!H", pad) + b"x" * pad)
    if kind in ("none", "none-only"):
        return b""
    if kind == "partial":
        return header("v2")[:10]
    raise SystemExit("unknown kind " + kind)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bind")
    ap.add_argument("--tls")
    ap.add_argument("--split", type=int, default=0)
    ap.add_argument("--hold", type=float, default=0)
    ap.add_argument("port", type=int)
    ap.add_argument("kind")
    ap.add_argument("host")
    ap.add_argument("path", nargs="?", default="/")
    a = ap.parse_args()
    s = socket.socket()
    s.settimeout(10)
    if a.bind:
        s.bind((a.bind, 0))
    s.connect(("127.0.0.1", a.port))
    if a.hold:
        time.sleep(a.hold)
    h = header(a.kind)
    try:
        if a.split and h:
            s.sendall(h[: len(h) // 2])
            time.sleep(a.split / 1000)
            s.sendall(h[len(h) // 2:])
        elif h:
            s.sendall(h)
        if a.kind == "partial":
            # the rest never comes: edged must close first (its
            # timeouts.client_header), well before this client gives up
            s.settimeout(30)
            try:
                d = s.recv(65536)
            except socket.timeout:
                print("OPEN after 30 s")
                return
            except OSError:
                d = b""
            print("CLOSED %d" % len(d))
            return
        conn = s
        if a.tls:
            ctx = ssl.create_default_context()
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
            conn = ctx.wrap_socket(s, server_hostname=a.tls)
        conn.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n"
                      % (a.path, a.host)).encode())
    except (OSError, ssl.SSLError):
        conn = s
    got = b""
    try:
        while True:
            d = conn.recv(65536)
            if not d:
                break
            got += d
    except (OSError, ssl.SSLError):
        pass
    if not got.startswith(b"HTTP/"):
        print("CLOSED %d" % len(got))
        return
    head, _, body = got.partition(b"\r\n\r\n")
    print(head.split(b"\r\n")[0].decode())
    print(body.decode(errors="replace"))


if __name__ == "__main__":
    main()
