#!/usr/bin/env python3
"""bad_backend.py - a misbehaving HTTP/1.1 backend for edged's tests.

    bad_backend.py PORT LOGFILE

Reads requests (heads only; requests to it carry no body) and answers by
path. /ok is a clean keep-alive 200; every /bad/NAME answer is something
a backend must not send, and edged must answer 502 and close that
upstream connection:

  /bad/cl-te        Content-Length and Transfer-Encoding
  /bad/dup-cl       two differing Content-Length fields
  /bad/204-body     204 with Content-Length: 5 and a body
  /bad/204-te       204 with Transfer-Encoding: chunked
  /bad/304-te       304 with Transfer-Encoding: chunked
  /bad/101          a 101 nobody asked for
  /bad/status       a garbage status line
  /bad/bare-lf      a head with bare LF line ends
  /bad/fold         an obs-folded field
  /bad/1000         status code 1000
  /bad/chunk        a malformed first chunk size ("zz") with the head
  /bad/chunk-long   a first chunk size of 17 hex digits with the head
  /bad/chunk-late   the head, then 0.3 s later the "zz" chunk line
  /bad/chunk-split  the head and 4 zeros, 0.3 s later 13 more digits
  /bad/truncated    half a head, then the connection closed
  /bad/nothing      the connection closed without a byte of answer
And /304-cl: a 304 with Content-Length (allowed, but edged must not
reuse the connection); /chunk-late-ok: a clean chunked "ok" whose first
chunk line comes 0.3 s after the head; /bad/chunk-never: a chunked head
and then nothing (edged must time it out). Every connection and request
is logged as a JSON line {"ev": "accept"|"req"|"close", "c": ID[,
"target": T]}, so a test can tell which upstream connection carried
which request. Stdlib only.
"""
import sys
import time

import tcpserve

PORT = int(sys.argv[1])
log = tcpserve.jsonl_log(sys.argv[2])

OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
CHUNKED = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
BAD = {
    "/bad/cl-te": b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n"
                  b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    "/bad/dup-cl": b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n"
                   b"Content-Length: 5\r\n\r\nok",
    "/bad/204-body": b"HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n"
                     b"hello",
    "/bad/204-te": b"HTTP/1.1 204 No Content\r\nTransfer-Encoding: chunked"
                   b"\r\n\r\n0\r\n\r\n",
    "/bad/304-te": b"HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked"
                   b"\r\n\r\n0\r\n\r\n",
    "/bad/101": b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                b"Connection: upgrade\r\n\r\n",
    "/bad/status": b"HTTP/1.1 2OO OK\r\nContent-Length: 2\r\n\r\nok",
    "/bad/bare-lf": b"HTTP/1.1 200 OK\nContent-Length: 2\n\nok",
    "/bad/fold": b"HTTP/1.1 200 OK\r\nX-A: a\r\n b\r\nContent-Length: 2"
                 b"\r\n\r\nok",
    "/bad/1000": b"HTTP/1.1 1000 Odd\r\nContent-Length: 2\r\n\r\nok",
    "/bad/chunk": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                  b"zz\r\nok\r\n0\r\n\r\n",
    "/bad/chunk-long": CHUNKED + b"10000000000000000\r\nok\r\n0\r\n\r\n",
    "/bad/chunk-late": [CHUNKED, 0.3, b"zz\r\nok\r\n0\r\n\r\n"],
    "/bad/chunk-split": [CHUNKED + b"0000", 0.3,
                         b"0000000000002\r\nok\r\n0\r\n\r\n"],
    "/bad/chunk-never": CHUNKED,
    "/chunk-late-ok": [CHUNKED, 0.3, b"2\r\nok\r\n0\r\n\r\n"],
    "/304-cl": b"HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\r\n",
    "/bad/truncated": b"HTTP/1.1 200 OK\r\nContent-Len",
    "/bad/nothing": b"",
}
# answers after which the backend closes the connection
CLOSE = {"/bad/truncated", "/bad/nothing"}




def serve(s, cid):
    log({"ev": "accept", "c": cid})
    buf = b""
    try:
        while True:
            head, buf = tcpserve.read_head(s, buf)
            if head is None:
                raise EOFError
            target = head.split(b"\r\n")[0].split(b" ")[1].decode("latin-1")
            log({"ev": "req", "c": cid, "target": target})
            answer = BAD.get(target, OK)
            # a list: its bytes in separate writes, a number a pause
            for part in answer if isinstance(answer, list) else [answer]:
                if isinstance(part, float):
                    time.sleep(part)
                else:
                    s.sendall(part)
            if target in CLOSE:
                break
    except (EOFError, OSError, IndexError):
        pass
    log({"ev": "close", "c": cid})
    s.close()


tcpserve.run(PORT, serve)
