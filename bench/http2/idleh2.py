#!/usr/bin/python3
"""bench/http2/idleh2.py PORT COUNT HOST STEPS MODE - open COUNT HTTP/2
connections over TLS to 127.0.0.1:PORT (SNI HOST, ALPN h2 alone), keep
them all open and idle, print "ready OPEN FAILED" on stdout, then wait
until killed, answering what the servers send on them as a client's event
loop does (SETTINGS acknowledged, PINGs answered; a connection the server
closes is dropped).

Each connection completes the TLS handshake (checking that ALPN chose h2)
and the SETTINGS exchange both ways (the server's SETTINGS received and
acknowledged, the client's acknowledged by the server). MODE "settings"
stops there; MODE "request" also makes one GET / (:authority HOST) and
reads its whole response (a 2xx) first. Connections are opened one at a
time.

The connections are opened in STEPS equal steps: after each but the last
it prints "step OPEN FAILED" (the totals so far) and waits for a line on
stdin before the next, so that the caller can read the server's memory
at each step. The first failure's reason goes to stderr.

Debian's python3-h2: run with /usr/bin/python3."""
import resource
import select
import socket
import ssl
import sys

import h2.config
import h2.connection
import h2.events
import h2.exceptions


def open_one(ctx, port, host, mode):
    raw = socket.create_connection(("127.0.0.1", port), 5)
    try:
        s = ctx.wrap_socket(raw, server_hostname=host)
    except (OSError, ssl.SSLError):
        raw.close()
        raise
    try:
        if s.selected_alpn_protocol() != "h2":
            raise OSError("ALPN chose %r, not h2" % s.selected_alpn_protocol())
        c = h2.connection.H2Connection(
            config=h2.config.H2Configuration(client_side=True,
                                             header_encoding="utf-8"))
        c.initiate_connection()
        if mode == "request":
            c.send_headers(1, [(":method", "GET"), (":scheme", "https"),
                               (":authority", host), (":path", "/")],
                           end_stream=True)
        s.sendall(c.data_to_send())
        settings = acked = False
        ended = mode != "request"
        status = None
        while not (settings and acked and ended):
            data = s.recv(65536)
            if not data:
                raise OSError("closed by the server")
            for ev in c.receive_data(data):
                if isinstance(ev, h2.events.RemoteSettingsChanged):
                    settings = True
                elif isinstance(ev, h2.events.SettingsAcknowledged):
                    acked = True
                elif isinstance(ev, h2.events.ResponseReceived):
                    status = dict(ev.headers).get(":status")
                elif isinstance(ev, h2.events.DataReceived):
                    c.acknowledge_received_data(ev.flow_controlled_length,
                                                ev.stream_id)
                elif isinstance(ev, h2.events.StreamEnded):
                    if not (status or "").startswith("2"):
                        raise OSError("response status %r" % status)
                    ended = True
                elif isinstance(ev, (h2.events.StreamReset,
                                     h2.events.ConnectionTerminated)):
                    raise OSError("server ended it: %r" % ev)
            out = c.data_to_send()
            if out:
                s.sendall(out)
        s.setblocking(False)
        return (s, c)
    except BaseException:
        s.close()
        raise


SEL = select.epoll()
CONNS = {}


def keep(kept, conn):
    """Add conn (a socket and its H2Connection) to kept, watched."""
    kept.append(conn)
    CONNS[conn[0].fileno()] = conn
    SEL.register(conn[0].fileno(), select.EPOLLIN)


def service(kept, timeout, stdin=False):
    """Answer what the servers sent on the kept connections, waiting up to
    timeout seconds for the first; with stdin, until a line comes there
    (returned True)."""
    if stdin and sys.stdin.fileno() not in CONNS:
        CONNS[sys.stdin.fileno()] = None
        SEL.register(sys.stdin.fileno(), select.EPOLLIN)
    got = False
    for fd, _ in SEL.poll(timeout):
        if CONNS.get(fd) is None:
            sys.stdin.readline()
            got = True
            continue
        s, c = CONNS[fd]
        try:
            while True:
                data = s.recv(65536)
                if not data:
                    raise OSError("closed")
                c.receive_data(data)
                out = c.data_to_send()
                if out:
                    s.setblocking(True)
                    s.sendall(out)
                    s.setblocking(False)
        except (ssl.SSLWantReadError, BlockingIOError):
            pass
        except (OSError, ssl.SSLError, h2.exceptions.ProtocolError):
            SEL.unregister(fd)
            del CONNS[fd]
            kept.remove((s, c))
            s.close()
    return got


def main():
    port, count, host = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    steps, mode = int(sys.argv[4]), sys.argv[5]
    if mode not in ("settings", "request"):
        sys.exit("idleh2: MODE is settings or request")
    marks = [count * (k + 1) // steps for k in range(steps)]
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, 65536)
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.set_alpn_protocols(["h2"])
    kept, failed, said = [], 0, False
    for k, mark in enumerate(marks):
        while len(kept) + failed < mark:
            try:
                keep(kept, open_one(ctx, port, host, mode))
            except (OSError, ssl.SSLError, h2.exceptions.ProtocolError) as e:
                failed += 1
                if not said:
                    print("idleh2: %s" % e, file=sys.stderr, flush=True)
                    said = True
            service(kept, 0)
        if k < len(marks) - 1:
            print("step %d %d" % (len(kept), failed), flush=True)
            while not service(kept, 1, stdin=True):
                pass
    print("ready %d %d" % (len(kept), failed), flush=True)
    while True:
        service(kept, 1)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        pass
