#!/usr/bin/env python3
"""cut_backend.py - an HTTP/1.1 backend that dies mid-response.

    cut_backend.py PORT [DECLARED [SENT]]

For every connection: reads one request head, answers with a response
head declaring Content-Length: DECLARED (default 100000), sends SENT
(default 1000) bytes of body, then closes the connection - or, when the
request's path begins with /stall, keeps it open and silent until the
peer closes it (at most 30 s). A path beginning with /deaf gets no
answer and none of its body is read (a small receive buffer), for at
most 30 s: an upstream that stops taking the request. Stdlib only.
"""
import socket
import sys
import time

import tcpserve

PORT = int(sys.argv[1])
DECLARED = int(sys.argv[2]) if len(sys.argv) > 2 else 100000
SENT = int(sys.argv[3]) if len(sys.argv) > 3 else 1000


def serve(s, _cid):
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        head = tcpserve.read_head(s)[0]
        if head is None:
            return
        if head.split(b" ", 2)[1].startswith(b"/deaf"):
            time.sleep(30)
            return
        s.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                  b"Content-Length: %d\r\n\r\n" % DECLARED + b"y" * SENT)
        if head.split(b" ", 2)[1].startswith(b"/stall"):
            s.settimeout(30)
            while s.recv(65536):
                pass
    except OSError:
        pass
    finally:
        s.close()


tcpserve.run(PORT, serve)
