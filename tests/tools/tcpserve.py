"""tcpserve.py - the accept loop of the raw-socket test backends
(bad_backend.py, cut_backend.py, once_backend.py, rec_backend.py,
tunnel_backend.py).

    import tcpserve
    tcpserve.run(PORT, handle)    # handle(sock, cid) per connection

Stdlib only; imported from the tools' own directory, which Python puts
on sys.path when it runs one of them.
"""
import itertools
import socket
import threading


def run(port, handle):
    """Listen on 127.0.0.1:port (SO_REUSEADDR, backlog 128) and call
    handle(sock, cid) in a daemon thread for every connection accepted;
    cid numbers the connections from 1 in the order they were accepted.
    Never returns."""
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", port))
    srv.listen(128)
    for cid in itertools.count(1):
        conn, _ = srv.accept()
        threading.Thread(target=handle, args=(conn, cid), daemon=True).start()
