#!/usr/bin/env python3
"""tcp_backend.py - a raw TCP backend for edged's TCP route tests.

    tcp_backend.py PORT LOGFILE

Speaks first, as SMTP or SSH servers do: every connection gets the
banner "edge-test-backend PORT\\n" at once (so a client learns which
endpoint it reached), then the backend reads one command line and acts:
  echo           echoes every byte; at EOF shuts down its write side
  pump N         sends N bytes of the stream pattern (tunnel_pattern.py)
                 while reading until EOF, both at once; logs the SHA-256
                 of what it sent and of what it received
  halfclose N    reads until EOF, then sends N bytes (b"after-eof:" then
                 'h' repeated) and closes: the client's half-close
  serverfirst N  sends N bytes and shuts down its write side at once,
                 then reads until EOF: its own half-close
  reset N        reads N bytes, then closes with a reset (SO_LINGER 0)
  who            closes (the banner said it all)
Bytes after the command line (in the same read) belong to the stream.
Each connection appends one JSON line to LOGFILE: port, cmd, bytes
received (and their SHA-256), bytes sent, how it ended.
"""
import hashlib
import socket
import struct
import sys
import threading

import tcpserve
import tunnel_pattern

PORT = int(sys.argv[1])
log = tcpserve.jsonl_log(sys.argv[2])


def read_line(s):
    buf = b""
    while b"\n" not in buf:
        d = s.recv(65536)
        if not d:
            return None, buf
        buf += d
    i = buf.index(b"\n")
    return buf[:i].decode("latin-1"), buf[i + 1:]


def drain(s, rest, h=None, upto=None):
    """Read until EOF (or upto bytes): bytes received, first error."""
    n = len(rest)
    if h:
        h.update(rest)
    while upto is None or n < upto:
        try:
            d = s.recv(262144)
        except OSError as e:
            return n, str(e)
        if not d:
            return n, None
        n += len(d)
        if h:
            h.update(d)
    return n, None


def serve(s, rec):
    s.sendall(b"edge-test-backend %d\n" % PORT)
    line, rest = read_line(s)
    if line is None:
        rec["cmd"] = None
        return
    words = line.split()
    cmd = words[0] if words else ""
    n = int(words[1]) if len(words) > 1 else 0
    rec["cmd"] = cmd
    if cmd == "echo":
        got = len(rest)
        if rest:
            s.sendall(rest)
        while True:
            d = s.recv(262144)
            if not d:
                break
            got += len(d)
            s.sendall(d)
        s.shutdown(socket.SHUT_WR)
        rec["recv_bytes"] = got
    elif cmd == "pump":
        sent = {}

        def send():
            sent["sha"] = tunnel_pattern.send(s, n, b"B")
            s.shutdown(socket.SHUT_WR)

        t = threading.Thread(target=send)
        t.start()
        h = hashlib.sha256()
        rec["recv_bytes"], rec["error"] = drain(s, rest, h)
        t.join()
        rec["recv_sha"] = h.hexdigest()
        rec["sent_bytes"] = n
        rec["sent_sha"] = sent["sha"]
    elif cmd == "halfclose":
        rec["recv_bytes"], rec["error"] = drain(s, rest)
        s.sendall((b"after-eof:" + b"h" * n)[:n])
        rec["sent_bytes"] = n
    elif cmd == "serverfirst":
        s.sendall(b"s" * n)
        s.shutdown(socket.SHUT_WR)
        rec["sent_bytes"] = n
        rec["recv_bytes"], rec["error"] = drain(s, rest)
    elif cmd == "reset":
        rec["recv_bytes"], rec["error"] = drain(s, rest, upto=n)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                     struct.pack("ii", 1, 0))
        rec["reset"] = True


def handle(s, _cid):
    rec = {"port": PORT}
    try:
        serve(s, rec)
    except OSError as e:
        rec["error"] = str(e)
    finally:
        s.close()
        log(rec)


tcpserve.run(PORT, handle)
