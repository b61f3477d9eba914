#!/usr/bin/python3
"""h2req.py - one HTTP/2 request by prior knowledge, for the cases where
curl 7.88 cannot be the client (Debian's python3-h2; run with
/usr/bin/python3).

    h2req.py PORT METHOD AUTHORITY PATH BODYFILE HDRS BODY [NAME: VALUE]...

Connects to 127.0.0.1:PORT, sends METHOD PATH to AUTHORITY with the
fields given (lowercased) and, unless BODYFILE is "-", the file's bytes
as the body with their content-length; then writes the response's head to
HDRS as curl -D does ("HTTP/2 413" and "name: value" lines) and its body
to BODY. The request is sent whole before anything is read. A response
followed by RST_STREAM NO_ERROR (a server that answered before reading the
whole body: RFC 9113 section 8.1) is a response like any other; curl
7.88 reports error 92 for it and drops what it got. Exits 0 when a
response came, 1 otherwise.
"""
import socket
import sys

import h2.config
import h2.connection
import h2.events
import h2.exceptions


def main():
    port, method, authority, path, bodyfile, hdrs, body = sys.argv[1:8]
    extra = []
    for f in sys.argv[8:]:
        n, _, v = f.partition(":")
        extra.append((n.strip().lower(), v.strip()))
    data = b""
    if bodyfile != "-":
        with open(bodyfile, "rb") as f:
            data = f.read()
    sock = socket.create_connection(("127.0.0.1", int(port)), 5)
    sock.settimeout(10)
    c = h2.connection.H2Connection(
        config=h2.config.H2Configuration(client_side=True,
                                         header_encoding="utf-8"))
    c.initiate_connection()
    fields = [(":method", method), (":scheme", "http"),
              (":authority", authority), (":path", path)] + extra
    if bodyfile != "-":
        fields.append(("content-length", str(len(data))))
    c.send_headers(1, fields, end_stream=bodyfile == "-")
    if bodyfile != "-":
        # within the default windows (64 KiB): the cases here are small
        c.send_data(1, data, end_stream=True)
    sock.sendall(c.data_to_send())
    head, out, done = None, b"", False
    while not done:
        try:
            chunk = sock.recv(65536)
        except OSError:
            break
        if not chunk:
            break
        try:
            events = c.receive_data(chunk)
        except h2.exceptions.ProtocolError:
            break
        for ev in events:
            if isinstance(ev, h2.events.ResponseReceived):
                head = ev.headers
            elif isinstance(ev, h2.events.DataReceived):
                out += ev.data
                c.acknowledge_received_data(ev.flow_controlled_length, 1)
            elif isinstance(ev, (h2.events.StreamEnded,
                                 h2.events.StreamReset,
                                 h2.events.ConnectionTerminated)):
                done = True
        pending = c.data_to_send()
        if pending:
            sock.sendall(pending)
    sock.close()
    if head is None:
        return 1
    with open(hdrs, "w", encoding="utf-8") as f:
        status = dict(head).get(":status", "0")
        f.write("HTTP/2 %s\r\n" % status)
        for n, v in head:
            if not n.startswith(":"):
                f.write("%s: %s\r\n" % (n, v))
        f.write("\r\n")
    with open(body, "wb") as f:
        f.write(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
