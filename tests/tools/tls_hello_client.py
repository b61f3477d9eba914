#!/usr/bin/python3
"""tls_hello_client.py - TLS clients that shape their ClientHello's
arrival, for tests of TLS passthrough routes (tests/integration/
test_edged_passthrough.sh).

    tls_hello_client.py slow PORT NAME CAFILE CHUNKS GAP
        A TLS client (Python's ssl over a MemoryBIO, so the test decides
        when each byte goes) whose ClientHello for server name NAME goes
        out in CHUNKS pieces GAP seconds apart; then the handshake
        completes, the peer's certificate is verified against CAFILE and
        NAME, and "GET / HTTP/1.0" is sent. Prints JSON: cn (the peer's
        subject CN), version, hello_bytes, response (its first line).
    tls_hello_client.py partial PORT BYTES [eof]
        Sends the first BYTES bytes of a ClientHello (for a.example), then
        nothing (with "eof": shuts its write side down), and waits up to
        30 s for the connection to end. Prints JSON: closed_after
        (seconds), got (bytes received).
    tls_hello_client.py garbage PORT
        Sends an HTTP request where a ClientHello belongs; as partial.

Exit 0 when the client did its part (whatever edge answered), 1 on an
error, printed to stderr. Stdlib only; run with Debian's /usr/bin/python3.
"""
import json
import socket
import ssl
import sys
import time


def hello_bytes(name):
    """The ClientHello a TLS client sends for name (nothing else)."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(inc, out, server_hostname=name)
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return out.read()


def wait_end(s, start):
    """Read until EOF or reset (at most 30 s); (seconds, bytes got)."""
    s.settimeout(30)
    got = 0
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            got += len(b)
    except (ConnectionResetError, socket.timeout):
        pass
    return time.monotonic() - start, got


def slow(port, name, cafile, chunks, gap):
    ctx = ssl.create_default_context(cafile=cafile)
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(inc, out, server_hostname=name)
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    first = True
    sent = 0
    while True:
        try:
            obj.do_handshake()
            done = True
        except ssl.SSLWantReadError:
            done = False
        data = out.read()
        if data and first:
            step = max(1, -(-len(data) // chunks))
            for i in range(0, len(data), step):
                s.sendall(data[i:i + step])
                time.sleep(gap)
            sent = len(data)
            first = False
        elif data:
            s.sendall(data)
        if done:
            break
        b = s.recv(65536)
        if not b:
            raise RuntimeError("closed during the handshake")
        inc.write(b)
    obj.write(b"GET / HTTP/1.0\r\n\r\n")
    s.sendall(out.read())
    resp = b""
    while b"\n" not in resp:
        b = s.recv(65536)
        if not b:
            break
        inc.write(b)
        try:
            resp += obj.read(65536)
        except ssl.SSLWantReadError:
            pass
    cert = obj.getpeercert()
    cn = [v for rdn in cert["subject"] for k, v in rdn if k == "commonName"]
    print(json.dumps({"cn": cn[0] if cn else None, "version": obj.version(),
                      "hello_bytes": sent,
                      "response": resp.split(b"\n")[0].decode(
                          "latin-1").strip()}))


def partial(port, n, eof):
    data = hello_bytes("a.example")[:n]
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    start = time.monotonic()
    s.sendall(data)
    if eof:
        s.shutdown(socket.SHUT_WR)
    after, got = wait_end(s, start)
    print(json.dumps({"closed_after": round(after, 3), "got": got}))


def garbage(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    start = time.monotonic()
    s.sendall(b"GET / HTTP/1.1\r\nHost: a.example\r\n\r\n")
    after, got = wait_end(s, start)
    print(json.dumps({"closed_after": round(after, 3), "got": got}))


def main():
    a = sys.argv[1:]
    try:
        if a[:1] == ["slow"] and len(a) == 6:
            slow(int(a[1]), a[2], a[3], int(a[4]), float(a[5]))
        elif a[:1] == ["partial"] and len(a) in (3, 4):
            partial(int(a[1]), int(a[2]), a[3:] == ["eof"])
        elif a[:1] == ["garbage"] and len(a) == 2:
            garbage(int(a[1]))
        else:
            sys.stderr.write(__doc__)
            return 2
    except (OSError, ssl.SSLError, RuntimeError, ValueError) as e:
        sys.stderr.write("tls_hello_client: %s\n" % e)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
