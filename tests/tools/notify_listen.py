#!/usr/bin/python3
"""notify_listen.py SOCKET PORT OUT - the service manager's end of
sd_notify(3) for tests: bind a unix datagram socket at SOCKET, and for
every datagram received append one line to OUT: the message's
assignments joined by spaces, then "accept=yes" or "accept=no" - whether
127.0.0.1:PORT accepted a connection right after the message arrived (so
a READY=1 sent before the listeners were up shows accept=no). Runs until
killed; prints "listening" on stdout once bound."""
import socket
import sys

path, port, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(path)
print("listening", flush=True)
while True:
    msg = s.recv(4096).decode("utf-8", "replace")
    try:
        socket.create_connection(("127.0.0.1", port), 0.5).close()
        acc = "yes"
    except OSError:
        acc = "no"
    with open(out, "a") as f:
        f.write(" ".join(msg.split("\n")) + " accept=" + acc + "\n")
