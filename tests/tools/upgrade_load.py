#!/usr/bin/python3
"""upgrade_load.py - traffic through edged while it is upgraded
(test_edged_upgrade.sh), until the file STOP exists. Run with Debian's
/usr/bin/python3 (python3-h2).

    upgrade_load.py EDGE_PORT HOST TCP_PORT STOP OUT [KINDS]

Threads, each in a loop:
  h1-ka    HTTP/1.1 GETs on one keep-alive connection at a time
  h1-new   HTTP/1.1 GETs, a new connection each (Connection: close)
  h1-late  the same, each request sent 0.3 s after its connect
  h2       HTTP/2 GETs (prior knowledge) on one connection at a time
  ws       one Upgrade: websocket tunnel (echo_backend.py's echo), open
           from the start to the end, random bytes each way
  tcp      one TCP route tunnel (tcp_backend.py's echo), the same
KINDS, a comma-separated list of the names above, runs only those (all
by default; without tcp, TCP_PORT is not used).
A request that fails on a connection that has served before, before any
byte of its answer, goes again on a new connection, as every HTTP client
does (RFC 9112 section 9.3.1; HTTP/2: a stream a GOAWAY did not cover); it
is counted as retried, not failed. Every other failure (refused,
reset, a status other than 200, a short body, a tunnel whose echo is not
what was sent) is one. OUT gets one JSON object: per thread kind the
requests, retried and failures (the first few, with their reason); for
the tunnels the bytes each way and whether the SHA-256 of what came back
equals what was sent.
"""
import hashlib
import http.client
import json
import os
import socket
import sys
import threading
import time

import h2.config
import h2.connection
import h2.events


PORT, HOST, TCP_PORT, STOP, OUT = (int(sys.argv[1]), sys.argv[2],
                                   int(sys.argv[3]), sys.argv[4], sys.argv[5])
lock = threading.Lock()
stats = {}


def note(kind, key, n=1, why=None):
    with lock:
        s = stats.setdefault(kind, {"requests": 0, "retried": 0,
                                    "failures": 0, "why": []})
        s[key] = s.get(key, 0) + n
        if why and len(s["why"]) < 5:
            s["why"].append(why)


def stopped():
    return os.path.exists(STOP)


class Stale(Exception):
    """The connection had served before and failed before an answer."""


def h1_get(conn, reused):
    try:
        conn.request("GET", "/ok", headers={"Host": HOST})
        r = conn.getresponse()
    except (ConnectionError, http.client.RemoteDisconnected,
            http.client.BadStatusLine, BrokenPipeError) as e:
        if reused:
            raise Stale(str(e))
        raise
    body = r.read()
    if r.status != 200 or json.loads(body).get("path") != "/ok":
        raise RuntimeError("status %d" % r.status)
    return r.getheader("Connection", "").lower() == "close"


def h1_late():
    """A new connection whose request comes 0.3 s after the connect (a
    slow client, a TLS one): one is under way at every upgrade."""
    h1_new("h1-late", 0.3)


def h1_keepalive():
    conn, used = None, 0
    while not stopped():
        if conn is None:
            conn, used = http.client.HTTPConnection("127.0.0.1", PORT,
                                                    timeout=10), 0
        try:
            closing = h1_get(conn, used > 0)
            used += 1
            note("h1-ka", "requests")
            if closing:
                conn.close()
                conn = None
        except Stale:
            note("h1-ka", "retried")
            conn.close()
            conn = None
        except Exception as e:  # noqa: BLE001 - every failure counts
            note("h1-ka", "failures", why="%s: %s" % (type(e).__name__, e))
            conn.close()
            conn = None
            time.sleep(0.05)


def h1_new(kind="h1-new", wait=0):
    while not stopped():
        conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=10)
        try:
            conn.connect()
            time.sleep(wait)
            conn.request("GET", "/ok", headers={"Host": HOST,
                                                "Connection": "close"})
            r = conn.getresponse()
            body = r.read()
            if r.status != 200 or json.loads(body).get("path") != "/ok":
                raise RuntimeError("status %d" % r.status)
            note(kind, "requests")
        except Exception as e:  # noqa: BLE001
            note(kind, "failures", why="%s: %s" % (type(e).__name__, e))
            time.sleep(0.05)
        finally:
            conn.close()


class GoawayReader(h2.connection.H2Connection):
    """python3-h2 takes a GOAWAY for the connection's end, but the streams
    it covers still come (RFC 9113 section 6.8): its state is put back at
    once to read them (before the frames after it in the same read); no
    stream is opened after it."""

    def _receive_goaway_frame(self, frame):
        frames, events = super()._receive_goaway_frame(frame)
        self.state_machine.state = h2.connection.ConnectionState.CLIENT_OPEN
        return frames, events


class H2:
    """One HTTP/2 connection (prior knowledge): GET /ok streams one at a
    time."""

    def __init__(self):
        self.s = socket.create_connection(("127.0.0.1", PORT), timeout=10)
        self.c = GoawayReader(h2.config.H2Configuration(client_side=True))
        self.c.initiate_connection()
        self.s.sendall(self.c.data_to_send())
        self.goaway = None  # the last stream it covers
        self.served = 0

    def get(self):
        sid = self.c.get_next_available_stream_id()
        self.c.send_headers(sid, [(":method", "GET"), (":path", "/ok"),
                                  (":scheme", "http"), (":authority", HOST)],
                            end_stream=True)
        self.s.sendall(self.c.data_to_send())
        status, body = None, b""
        while True:
            try:
                data = self.s.recv(65536)
            except ConnectionError as e:
                if status is None and self.served:
                    raise Stale(str(e)) from e
                raise
            if not data:
                if status is None and (self.served or self.goaway is not None):
                    raise Stale("closed")
                raise RuntimeError("closed mid-stream")
            for ev in self.c.receive_data(data):
                if isinstance(ev, h2.events.ResponseReceived) and \
                        ev.stream_id == sid:
                    status = dict(ev.headers).get(b":status")
                elif isinstance(ev, h2.events.DataReceived):
                    self.c.acknowledge_received_data(
                        ev.flow_controlled_length, ev.stream_id)
                    if ev.stream_id == sid:
                        body += ev.data
                elif isinstance(ev, h2.events.ConnectionTerminated):
                    self.goaway = ev.last_stream_id
                    if sid > ev.last_stream_id:
                        raise Stale("GOAWAY before stream %d" % sid)
                elif isinstance(ev, h2.events.StreamReset) and \
                        ev.stream_id == sid:
                    if ev.error_code == 7:  # REFUSED_STREAM
                        raise Stale("refused")
                    raise RuntimeError("reset %d" % ev.error_code)
                elif isinstance(ev, h2.events.StreamEnded) and \
                        ev.stream_id == sid:
                    self.s.sendall(self.c.data_to_send())
                    if status != b"200" or \
                            json.loads(body).get("path") != "/ok":
                        raise RuntimeError("status %r" % status)
                    self.served += 1
                    return
            self.s.sendall(self.c.data_to_send())

    def close(self):
        try:
            self.s.close()
        except OSError:
            pass


def h2_loop():
    conn = None
    while not stopped():
        try:
            if conn is None:
                conn = H2()
            conn.get()
            note("h2", "requests")
            if conn.goaway is not None:
                conn.close()
                conn = None
        except Stale:
            note("h2", "retried")
            conn.close()
            conn = None
        except Exception as e:  # noqa: BLE001
            note("h2", "failures", why="%s: %s" % (type(e).__name__, e))
            if conn:
                conn.close()
            conn = None
            time.sleep(0.05)


def echo_tunnel(kind, s):
    """Random bytes through s until STOP, each echo checked."""
    sent = hashlib.sha256()
    got = hashlib.sha256()
    n_sent = n_got = 0
    s.settimeout(10)
    try:
        while not stopped():
            chunk = os.urandom(4096 + n_sent % 60000)
            s.sendall(chunk)
            sent.update(chunk)
            n_sent += len(chunk)
            want = n_sent
            while n_got < want:
                data = s.recv(min(65536, want - n_got))
                if not data:
                    raise RuntimeError("closed after %d bytes" % n_got)
                got.update(data)
                n_got += len(data)
            time.sleep(0.02)
        ok = sent.digest() == got.digest()
        note(kind, "requests")
        with lock:
            stats[kind].update({"bytes": n_sent, "whole": ok})
        if not ok:
            note(kind, "failures", why="echo differs")
    except Exception as e:  # noqa: BLE001
        note(kind, "failures", why="%s: %s after %d bytes" %
             (type(e).__name__, e, n_got))
    finally:
        s.close()


def ws():
    s = socket.create_connection(("127.0.0.1", PORT), timeout=10)
    s.sendall(("GET /ws HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\n"
               "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZQ==\r\n"
               "Sec-WebSocket-Version: 13\r\n\r\n" % HOST).encode())
    head = b""
    while b"\r\n\r\n" not in head:
        data = s.recv(1)
        if not data:
            note("ws", "failures", why="no 101")
            return
        head += data
    if b" 101 " not in head.split(b"\r\n")[0]:
        note("ws", "failures", why=head.split(b"\r\n")[0].decode())
        return
    echo_tunnel("ws", s)


def tcp():
    s = socket.create_connection(("127.0.0.1", TCP_PORT), timeout=10)
    banner = b""
    while not banner.endswith(b"\n"):
        data = s.recv(1)
        if not data:
            note("tcp", "failures", why="no banner")
            return
        banner += data
    s.sendall(b"echo\n")
    echo_tunnel("tcp", s)


KINDS = {"h1-ka": [h1_keepalive] * 3, "h1-new": [h1_new] * 2,
         "h1-late": [h1_late] * 2, "h2": [h2_loop] * 2, "ws": [ws], "tcp": [tcp]}
want = sys.argv[6].split(",") if len(sys.argv) > 6 else list(KINDS)
if any(k not in KINDS for k in want):
    sys.exit("upgrade_load.py: KINDS: one of %s" % ",".join(KINDS))
threads = [threading.Thread(target=f) for k in want for f in KINDS[k]]
for t in threads:
    t.start()
for t in threads:
    t.join()
with open(OUT, "w") as f:
    json.dump(stats, f)
