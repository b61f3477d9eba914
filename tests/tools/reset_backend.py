#!/usr/bin/env python3
"""reset_backend.py - a backend that accepts every connection and resets
it at once (SO_LINGER 0, then close): a woken environment whose port
opens but whose process fails every request (tests/integration/
test_edged_wake.sh).

    reset_backend.py PORT

Listens on 127.0.0.1:PORT with a backlog of 1024 and SO_REUSEADDR, and
never reads or answers. Runs until killed. Stdlib only.
"""
import socket
import struct
import sys

PORT = int(sys.argv[1])

srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", PORT))
srv.listen(1024)
while True:
    conn, _ = srv.accept()
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    conn.close()
