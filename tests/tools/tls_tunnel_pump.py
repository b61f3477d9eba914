#!/usr/bin/env python3
"""tls_tunnel_pump.py - a tunnel over TLS, both ways at once.

    tls_tunnel_pump.py PORT HOST VERSION N

Connects to 127.0.0.1:PORT with TLS VERSION ("1.2" or "1.3", SNI HOST,
the certificate not checked), asks tunnel_backend.py (behind edged,
routed by HOST) for /pump/N/200, and 200 ms after the 101 (a pause, where
the kernel could take a plain tunnel), sends N random bytes
while receiving the backend's N bytes, in one thread (an ssl.SSLObject
over memory BIOs: an SSLSocket may not be read and written from two
threads). Its EOF is a close_notify (edged forwards it as a FIN), sent
once the backend's bytes and EOF are in: an OpenSSL peer takes no
application data after its own close_notify, so a TLS stream cannot be
half-closed with bytes still to come. Prints one JSON object: the TLS version and cipher, bytes
sent and their SHA-256, bytes received and theirs, seconds. Exits 1 with
the reason on stderr when the 101 does not come or the byte counts are
wrong.
"""
import hashlib
import json
import os
import select
import socket
import ssl
import sys
import time

PORT, HOST, VERSION, N = (int(sys.argv[1]), sys.argv[2], sys.argv[3],
                          int(sys.argv[4]))


WAIT_MS = 200  # both ends start sending this long after the 101


def fail(why):
    sys.stderr.write("tls_tunnel_pump: %s\n" % why)
    sys.exit(1)


ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
v = ssl.TLSVersion.TLSv1_3 if VERSION == "1.3" else ssl.TLSVersion.TLSv1_2
ctx.minimum_version = ctx.maximum_version = v
inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
tls = ctx.wrap_bio(inc, out, server_hostname=HOST)
sock = socket.create_connection(("127.0.0.1", PORT), 5)
sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
sock.setblocking(False)
deadline = time.time() + 120
wbuf = b""  # TLS bytes to write to the socket
peer_eof = False


def io(want_read):
    """Move TLS bytes between the BIOs and the socket; wait for the
    socket when nothing moved and want_read."""
    global wbuf, peer_eof
    wbuf += out.read()
    r = [sock] if want_read and not peer_eof else []
    w = [sock] if wbuf else []
    if not r and not w:
        return
    if time.time() > deadline:
        fail("timed out")
    rr, ww, _ = select.select(r, w, [], 1)
    if ww:
        try:
            wbuf = wbuf[sock.send(wbuf):]
        except BlockingIOError:
            pass
    if rr:
        try:
            d = sock.recv(262144)
        except BlockingIOError:
            return
        except ConnectionResetError:
            d = b""
        if d:
            inc.write(d)
        else:
            peer_eof = True
            inc.write_eof()


while True:
    try:
        tls.do_handshake()
        break
    except ssl.SSLWantReadError:
        io(True)
    except ssl.SSLWantWriteError:
        io(False)
tls.write(("GET /pump/%d/%d HTTP/1.1\r\nHost: %s\r\nConnection: Upgrade\r\n"
           "Upgrade: raw-test\r\n\r\n" % (N, WAIT_MS, HOST)).encode())
buf = b""
while b"\r\n\r\n" not in buf:
    try:
        buf += tls.read(65536)
    except ssl.SSLWantReadError:
        io(True)
    except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
        fail("closed before the 101: %r" % buf[:200])
version, cipher = tls.version(), tls.cipher()[0]
head, _, rest = buf.partition(b"\r\n\r\n")
if not head.startswith(b"HTTP/1.1 101"):
    fail("wanted 101, got %r" % head[:200])

# a pause after the 101, as a tunnel's first message often has: where
# the kernel could take the pair (a plain tunnel with splice = "sockmap"
# is taken then), a TLS one must stay with the copy mover
t0 = time.time()
while time.time() - t0 < WAIT_MS / 1000:
    io(False)
    time.sleep(0.01)
hs, hr = hashlib.sha256(), hashlib.sha256(rest)
sent, got, eof = 0, len(rest), False
block = os.urandom(1 << 20)
while not eof or sent < N or wbuf:
    # send while the socket takes it: no more than 256 KiB waits in
    # front of the socket
    while sent < N and len(wbuf) < (256 << 10):
        off = sent % len(block)
        piece = block[off:off + min(16384, N - sent)]
        tls.write(piece)
        hs.update(piece)
        sent += len(piece)
        wbuf += out.read()
    while True:
        try:
            d = tls.read(262144)
        except ssl.SSLWantReadError:
            break
        except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
            eof = True
            break
        if not d:
            eof = True
            break
        hr.update(d)
        got += len(d)
    if peer_eof and not inc.pending and not eof:
        eof = True
    if not eof or sent < N or wbuf:
        io(not eof)
# our close_notify (the FIN edged forwards to the backend) only now: an
# OpenSSL client takes no application data after its own close_notify
try:
    tls.unwrap()
except (ssl.SSLError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
    pass
wbuf += out.read()
while wbuf:
    io(False)
sock.close()
print(json.dumps({"version": version, "cipher": cipher,
                  "sent_bytes": sent, "sent_sha": hs.hexdigest(),
                  "recv_bytes": got, "recv_sha": hr.hexdigest(),
                  "seconds": round(time.time() - t0, 2)}))
if got != N or sent != N:
    fail("received %d bytes and sent %d, wanted %d" % (got, sent, N))
