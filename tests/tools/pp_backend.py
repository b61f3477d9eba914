#!/usr/bin/env python3
"""pp_backend.py - a backend that requires a PROXY protocol header (v1 or
v2) first on every connection, for edged's send_proxy tests.

    pp_backend.py [--host ADDR] [--tls CERT KEY] --log FILE PORT MODE

Each connection's header is parsed strictly (the signature, v1's
"PROXY TCP4|TCP6|UNKNOWN ..." line, v2's version, command, family and
length) and logged to FILE as a JSON line {"conn": N, "version": 1|2,
"command": "PROXY"|"LOCAL"|"UNKNOWN", "src": ADDR, "sport": P, "dst":
ADDR, "dport": P} ({"conn": N, "error": WHY} and the connection closed
when there is none or it is bad). With --tls, TLS begins after the
header. Then, by MODE:

  http  HTTP/1.1 keep-alive: each request answered 200 with a JSON body
        {"conn": N, "src": ..., "path": ...} (N counts connections);
  echo  a line "PP <json of the header>\\n", then every byte echoed
        back until the client's EOF.
"""
import argparse
import ipaddress
import json
import socket
import ssl
import struct
import sys
import threading
import time

SIG = b"\r\n\r\n\x00\r\nQUIT\n"
lock = threading.Lock()
count = [0]


def peek(s, n):
    """At least n bytes of s's stream, peeked (not taken), within 5 s."""
    end = time.monotonic() + 5
    while True:
        b = s.recv(8192, socket.MSG_PEEK)
        if len(b) >= n:
            return b
        if not b or time.monotonic() > end:
            raise ValueError(f"closed or stalled before the header was "
                             f"whole ({len(b)} bytes)")
        time.sleep(0.005)


def header_len(b):
    """The header's length in b (the stream's first bytes), None: more."""
    if b.startswith(SIG):
        if len(b) < 16:
            return None
        n = 16 + struct.unpack("!H", b[14:16])[0]
        return n if len(b) >= n else None
    if len(SIG) > len(b) and SIG.startswith(b):
        return None
    if b"\r\n" in b:
        return b.index(b"\r\n") + 2
    if len(b) > 107:
        raise ValueError("v1 line too long")
    return None


def parse(s):
    """The header taken off s (nothing after it): its info dict."""
    b, n = b"", None
    while n is None:
        b = peek(s, len(b) + 1)
        n = header_len(b)
    buf = b""
    while len(buf) < n:
        got = s.recv(n - len(buf))
        if not got:
            raise ValueError("closed in the header")
        buf += got
    if buf.startswith(SIG):
        ver_cmd, fam, ln = buf[12], buf[13], struct.unpack("!H", buf[14:16])[0]
        if ver_cmd >> 4 != 2 or ver_cmd & 0xF not in (0, 1):
            raise ValueError("bad v2 version or command")
        body = buf[16:16 + ln]
        if ver_cmd & 0xF == 0:
            return {"version": 2, "command": "LOCAL"}
        if fam == 0x11 and ln >= 12:
            src, dst = socket.inet_ntop(socket.AF_INET, body[0:4]), \
                socket.inet_ntop(socket.AF_INET, body[4:8])
            sp, dp = struct.unpack("!HH", body[8:12])
        elif fam == 0x21 and ln >= 36:
            src, dst = socket.inet_ntop(socket.AF_INET6, body[0:16]), \
                socket.inet_ntop(socket.AF_INET6, body[16:32])
            sp, dp = struct.unpack("!HH", body[32:36])
        elif fam == 0:
            return {"version": 2, "command": "UNKNOWN"}
        else:
            raise ValueError(f"bad v2 family {fam:#x} or length {ln}")
        return {"version": 2, "command": "PROXY", "src": src, "sport": sp,
                "dst": dst, "dport": dp}
    if not buf.startswith(b"PROXY "):
        raise ValueError("no PROXY header: " + repr(buf[:16]))
    f = buf[:-2].decode("ascii").split(" ")
    if f[1] == "UNKNOWN":
        return {"version": 1, "command": "UNKNOWN"}
    if len(f) != 6 or f[1] not in ("TCP4", "TCP6"):
        raise ValueError("bad v1 line " + repr(buf))
    fam = ipaddress.IPv4Address if f[1] == "TCP4" else ipaddress.IPv6Address
    fam(f[2])
    fam(f[3])
    return {"version": 1, "command": "PROXY", "src": f[2], "sport": int(f[4]),
            "dst": f[3], "dport": int(f[5])}


def log(path, o):
    with lock:
        with open(path, "a") as f:
            f.write(json.dumps(o) + "\n")


def http(s, info, n):
    buf = b""
    while True:
        while b"\r\n\r\n" not in buf:
            b = s.recv(65536)
            if not b:
                return
            buf += b
        head, buf = buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        path = lines[0].split(" ")[1]
        hdrs = {l.split(":", 1)[0].lower(): l.split(":", 1)[1].strip()
                for l in lines[1:] if ":" in l}
        ln = int(hdrs.get("content-length", "0"))
        while len(buf) < ln:
            b = s.recv(65536)
            if not b:
                return
            buf += b
        buf = buf[ln:]
        body = json.dumps({"conn": n, "src": info.get("src"),
                           "sport": info.get("sport"),
                           "version": info["version"], "path": path,
                           "xff": hdrs.get("x-forwarded-for"),
                           "client_ip": hdrs.get("x-client-ip")}).encode()
        s.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                  b"Content-Length: " + str(len(body)).encode() +
                  b"\r\n\r\n" + body)


def echo(s, info):
    s.sendall(b"PP " + json.dumps(info).encode() + b"\n")
    while True:
        b = s.recv(262144)
        if not b:
            break
        s.sendall(b)
    s.shutdown(socket.SHUT_WR)


def serve(s, args, ctx):
    with lock:
        count[0] += 1
        n = count[0]
    try:
        info = parse(s)
    except (ValueError, OSError, UnicodeDecodeError, IndexError) as e:
        log(args.log, {"conn": n, "error": str(e)})
        s.close()
        return
    log(args.log, dict(info, conn=n))
    try:
        if ctx:
            s = ctx.wrap_socket(s, server_side=True)
        if args.mode == "http":
            http(s, info, n)
        else:
            echo(s, info)
    except (OSError, ValueError, ssl.SSLError):
        pass
    finally:
        s.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--tls", nargs=2, metavar=("CERT", "KEY"))
    ap.add_argument("--log", required=True)
    ap.add_argument("port", type=int)
    ap.add_argument("mode", choices=["http", "echo"])
    args = ap.parse_args()
    ctx = None
    if args.tls:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(*args.tls)
    fam = socket.AF_INET6 if ":" in args.host else socket.AF_INET
    ls = socket.socket(fam, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((args.host, args.port))
    ls.listen(128)
    print("listening", flush=True)
    while True:
        c, _ = ls.accept()
        threading.Thread(target=serve, args=(c, args, ctx), daemon=True).start()


if __name__ == "__main__":
    sys.exit(main())
