#!/usr/bin/env python3
"""wake_backend.py - the backend an on-demand environment's wake command
starts in edged's wake tests (tests/integration/test_edged_wake.sh).

    wake_backend.py PORT

HTTP/1.1 with keep-alive on 127.0.0.1:PORT, a listen backlog of 1024 (a
wake storm connects all at once). Any request: 200 with the body
"hello from PORT\\n". A request with an Upgrade field: 101 "Upgrade:
raw-test", then every byte is echoed until the client's EOF (a tunnel
like a WebSocket's, as edged sees one).
"""
import socket
import sys
import threading

PORT = int(sys.argv[1])


def handle(conn):
    buf = b""
    try:
        while True:
            while b"\r\n\r\n" not in buf:
                d = conn.recv(65536)
                if not d:
                    return
                buf += d
            head, buf = buf.split(b"\r\n\r\n", 1)
            lines = head.decode("latin-1").split("\r\n")
            fields = {}
            for line in lines[1:]:
                k, _, v = line.partition(":")
                fields[k.strip().lower()] = v.strip()
            if "upgrade" in fields:
                conn.sendall(b"HTTP/1.1 101 Switching Protocols\r\n"
                             b"Upgrade: raw-test\r\nConnection: upgrade\r\n\r\n")
                if buf:
                    conn.sendall(buf)
                while True:
                    d = conn.recv(65536)
                    if not d:
                        conn.shutdown(socket.SHUT_WR)
                        return
                    conn.sendall(d)
            body = ("hello from %d\n" % PORT).encode()
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                         b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    except OSError:
        pass
    finally:
        conn.close()


def main():
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", PORT))
    s.listen(1024)
    while True:
        c, _ = s.accept()
        threading.Thread(target=handle, args=(c,), daemon=True).start()


main()
