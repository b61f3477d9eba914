"""tcpserve.py - what the raw-socket test backends share (bad_backend.py,
cut_backend.py, once_backend.py, rec_backend.py, tunnel_backend.py): the
accept loop, reading a head, and a JSON-lines log.

    import tcpserve
    log = tcpserve.jsonl_log(PATH)  # log(dict): one line, flushed at once
    head, rest = tcpserve.read_head(sock, buf)
    tcpserve.run(PORT, handle)      # handle(sock, cid) per connection

Stdlib only; imported from the tools' own directory, which Python puts
on sys.path when it runs one of them.
"""
import itertools
import json
import socket
import threading


def run(port, handle):
    """Listen on 127.0.0.1:port (SO_REUSEADDR, backlog 1024: see
    docs/testing.md, "Churn") and call
    handle(sock, cid) in a daemon thread for every connection accepted;
    cid numbers the connections from 1 in the order they were accepted.
    Never returns."""
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", port))
    srv.listen(1024)
    for cid in itertools.count(1):
        conn, _ = srv.accept()
        threading.Thread(target=handle, args=(conn, cid), daemon=True).start()


def jsonl_log(path):
    """A thread-safe function that appends one dict to path as a JSON line
    and flushes it at once (a test reads the file while the backend
    runs)."""
    f = open(path, "a", buffering=1)
    lock = threading.Lock()

    def log(rec):
        with lock:
            f.write(json.dumps(rec) + "\n")
            f.flush()
    return log


def read_head(s, buf=b""):
    """Read from s until buf holds a blank line: (head including its final
    CRLFCRLF, the bytes after it), or (None, buf) when s closes first."""
    while b"\r\n\r\n" not in buf:
        d = s.recv(65536)
        if not d:
            return None, buf
        buf += d
    i = buf.index(b"\r\n\r\n") + 4
    return buf[:i], buf[i:]
