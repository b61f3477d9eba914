#!/usr/bin/env python3
"""rawhttp.py - send raw bytes to a server and print what comes back.

    rawhttp.py PORT [--split] [--wait S] < request

Reads the request from stdin ("\\n" in the input is sent as-is, so write
CRLFs explicitly, e.g. with printf), connects to 127.0.0.1:PORT, sends it
(one byte per write with --split), then prints everything received until
the server closes or S seconds (default 3) pass without data. The exit
status is 0 when the server closed the connection, 3 when it was still
open at the end.
"""
import socket
import sys
import time

port = int(sys.argv[1])
split = "--split" in sys.argv
wait = 3.0
if "--wait" in sys.argv:
    wait = float(sys.argv[sys.argv.index("--wait") + 1])
data = sys.stdin.buffer.read()
s = socket.create_connection(("127.0.0.1", port))
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
try:
    if split:
        for i in range(len(data)):
            s.sendall(data[i:i + 1])
            time.sleep(0.001)
    else:
        s.sendall(data)
except OSError:
    pass
s.settimeout(wait)
out = b""
closed = False
while True:
    try:
        d = s.recv(65536)
    except socket.timeout:
        break
    except OSError:
        closed = True
        break
    if not d:
        closed = True
        break
    out += d
sys.stdout.buffer.write(out)
sys.exit(0 if closed else 3)
