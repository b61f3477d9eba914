#!/usr/bin/python3
"""h2raw.py - an HTTP/2 client that sends what a well-behaved one never
does, for edged's tests (Debian's python3-h2, hpack and hyperframe; run
with /usr/bin/python3).

    h2raw.py PORT CASE [HOST [TAG]]

Opens a cleartext connection by prior knowledge to 127.0.0.1:PORT, plays
CASE and prints one JSON object: the status and body of each stream that
got a response, the streams reset (with their error codes), the GOAWAY's
error code if one came, and whether the connection closed. CASE is one of
the names in CASES below. TAG, when given, is added to the paths of the
cases that use it (drain, zero_window, zero_window_small, body_frames,
overcredit, error_inflight, park, release, release_state) as a last segment "/TAG-...", so that a
test finds their requests in the backend's log and in the analytics (a
segment, not a query: echo_backend.py reads /slow/MS and /big/N up to the
next "/").

Environment: H2RAW_TLS=1 makes the connections of the h2-library cases
TLS (ALPN h2, SNI HOST, the certificate not checked) rather than
cleartext; H2RAW_ADMIN=PORT lets the park case read edged's /metrics
there; H2RAW_WAIT_GOAWAY=S makes the park case wait up to S seconds, at
its end, for edged's GOAWAY on the idle connection.
"""
import hashlib
import json
import os
import socket
import ssl
import sys
import time
import urllib.request

import h2.config
import h2.connection
import h2.events
import h2.exceptions
import h2.settings
from hpack import Decoder, Encoder
from hpack.struct import NeverIndexedHeaderTuple
from hyperframe.frame import (ContinuationFrame, DataFrame, Frame,
                              GoAwayFrame, HeadersFrame, PingFrame,
                              RstStreamFrame, SettingsFrame,
                              WindowUpdateFrame)

PORT = int(sys.argv[1])
CASE = sys.argv[2]
HOST = sys.argv[3] if len(sys.argv) > 3 else "shop.test"
TAG = sys.argv[4] if len(sys.argv) > 4 else "h2raw"


def base(path="/h2", method="GET", host=HOST):
    return [(":method", method), (":scheme", "http"), (":authority", host),
            (":path", path)]


class Client:
    def __init__(self):
        self.sock = socket.create_connection(("127.0.0.1", PORT), 5)
        if os.environ.get("H2RAW_TLS") == "1":
            ctx = ssl.create_default_context()
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
            ctx.set_alpn_protocols(["h2"])
            self.sock = ctx.wrap_socket(self.sock, server_hostname=HOST)
        self.sock.settimeout(5)
        cfg = h2.config.H2Configuration(
            client_side=True, header_encoding="utf-8",
            validate_outbound_headers=False,
            normalize_outbound_headers=False,
            validate_inbound_headers=False)
        self.c = h2.connection.H2Connection(config=cfg)
        self.c.initiate_connection()
        self.enc = Encoder()
        self.out = {"streams": {}, "resets": {}, "goaway": None,
                    "closed": False, "bodies": {}}
        self.flush()

    def flush(self):
        data = self.c.data_to_send()
        if data:
            try:
                self.sock.sendall(data)
            except OSError:
                self.out["closed"] = True

    def raw(self, data):
        try:
            self.sock.sendall(data)
        except OSError:
            self.out["closed"] = True

    def headers(self, sid, hdrs, end=True):
        self.c.send_headers(sid, hdrs, end_stream=end)
        self.flush()

    def pump(self, until, timeout=5.0):
        """Read and handle events until until() or timeout."""
        end = time.time() + timeout
        while not until() and time.time() < end and not self.out["closed"]:
            self.sock.settimeout(max(0.05, end - time.time()))
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                break
            except OSError:
                self.out["closed"] = True
                break
            if not data:
                self.out["closed"] = True
                break
            try:
                events = self.c.receive_data(data)
            except h2.exceptions.ProtocolError as e:
                self.out["client_error"] = str(e)
                break
            for ev in events:
                self.event(ev)
            self.flush()

    def event(self, ev):
        o = self.out
        if isinstance(ev, h2.events.ResponseReceived):
            hd = dict(ev.headers)
            o["streams"][ev.stream_id] = int(hd.get(":status", "0"))
            n = o.setdefault("responses", {})
            n[ev.stream_id] = n.get(ev.stream_id, 0) + 1
            if "content-length" in hd:
                o.setdefault("lengths", {})[str(ev.stream_id)] = int(
                    hd["content-length"])
            o.setdefault("headers", {})[ev.stream_id] = hd
        elif isinstance(ev, h2.events.DataReceived):
            o["bodies"][ev.stream_id] = o["bodies"].get(
                ev.stream_id, "") + ev.data.decode("latin-1")
            self.c.acknowledge_received_data(ev.flow_controlled_length,
                                             ev.stream_id)
        elif isinstance(ev, h2.events.StreamReset):
            o["resets"][ev.stream_id] = int(ev.error_code)
        elif isinstance(ev, h2.events.ConnectionTerminated):
            o["goaway"] = int(ev.error_code)
            o["goaway_last"] = ev.last_stream_id
        elif isinstance(ev, h2.events.RemoteSettingsChanged):
            t = ev.changed_settings.get(
                h2.settings.SettingCodes.HEADER_TABLE_SIZE)
            if t is not None:
                o.setdefault("table_sizes", []).append(t.new_value)
        elif isinstance(ev, h2.events.StreamEnded):
            o.setdefault("ended", []).append(ev.stream_id)

    def done(self, sid):
        return lambda: (sid in self.out["resets"] or
                        sid in self.out.get("ended", []) or
                        self.out["goaway"] is not None)

    def hdr_block(self, hdrs):
        return self.enc.encode(hdrs)


def one(hdrs, body=None, end_body=True):
    """Send one request (HEADERS, then body DATA if any) on stream 1."""
    k = Client()
    k.headers(1, hdrs, end=body is None)
    if body is not None:
        k.c.send_data(1, body, end_stream=end_body)
        k.flush()
    k.pump(k.done(1))
    return k.out


def raw_headers(k, sid, block, flags):
    f = HeadersFrame(sid)
    f.data = block
    f.flags = set(flags)
    k.raw(f.serialize())


def case_get():
    return one(base())


def case_head():
    return one(base("/big/5000", "HEAD"))


def case_post():
    return one(base("/h2post", "POST") + [("content-length", "5")], b"hello")


def case_post_nolength():
    return one(base("/h2post", "POST"), b"hello world")


def case_trailers():
    # a body without a length, then trailers, all in one write: the
    # trailer's fields must not become the request's
    k = Client()
    k.c.send_headers(1, base("/h2post", "POST"), end_stream=False)
    k.c.send_data(1, b"hello", end_stream=False)
    k.c.send_headers(1, [("x-smuggled", "1"), ("x-forwarded-for", "6.6.6.6")],
                     end_stream=True)
    k.flush()
    k.pump(k.done(1))
    return k.out


def case_body_frames():
    # the same 2000-byte body twice on one connection: stream 1 with a
    # content-length in one DATA frame, stream 3 without one in 200 DATA
    # frames of 10 bytes (edged frames it chunked for the proxy); paths
    # /h2post/TAG-cl and /h2post/TAG-ch (the same length)
    k = Client()
    body = bytes(range(200)) * 10
    k.c.send_headers(1, base("/h2post/%s-cl" % TAG, "POST") +
                     [("content-length", str(len(body)))])
    k.c.send_data(1, body, end_stream=True)
    k.c.send_headers(3, base("/h2post/%s-ch" % TAG, "POST"))
    for i in range(0, len(body), 10):
        k.c.send_data(3, body[i:i + 10], end_stream=i + 10 >= len(body))
    k.flush()
    k.pump(lambda: all(k.done(sid)() for sid in (1, 3)))
    return k.out


def case_crlf_value():
    return one(base() + [("x-evil", "a\r\nx-injected: 1")])


def case_nul_value():
    return one(base() + [("x-evil", "a\x00b")])


def case_uppercase_name():
    return one(base() + [("X-Upper", "1")])


def case_connection_header():
    return one(base() + [("connection", "keep-alive")])


def case_keep_alive():
    return one(base() + [("keep-alive", "timeout=5")])


def case_proxy_connection():
    return one(base() + [("proxy-connection", "keep-alive")])


def case_transfer_encoding():
    return one(base("/h2post", "POST") + [("transfer-encoding", "chunked")],
               b"5\r\nhello\r\n0\r\n\r\n")


def case_upgrade_header():
    return one(base() + [("upgrade", "websocket")])


def case_te_gzip():
    return one(base() + [("te", "gzip")])


def case_te_trailers():
    return one(base() + [("te", "trailers")])


def case_cl_short():
    return one(base("/h2post", "POST") + [("content-length", "10")], b"hello")


def case_cl_long():
    return one(base("/h2post", "POST") + [("content-length", "3")], b"hello")


def case_missing_path():
    return one([(":method", "GET"), (":scheme", "http"),
                (":authority", HOST)])


def case_missing_method():
    return one([(":scheme", "http"), (":authority", HOST), (":path", "/")])


def case_pseudo_after_regular():
    return one([(":method", "GET"), (":scheme", "http"),
                ("x-a", "1"), (":authority", HOST), (":path", "/")])


def case_unknown_pseudo():
    return one(base() + [(":foo", "bar")])


def case_repeated_pseudo():
    return one(base() + [(":path", "/other")])


def case_host_mismatch():
    return one(base() + [("host", "other.test")])


def case_host_only():
    return one([(":method", "GET"), (":scheme", "http"), (":path", "/h2"),
                ("host", HOST)])


def case_connect():
    return one([(":method", "CONNECT"), (":authority", HOST + ":443")])


def case_hpack_bomb():
    # one header repeated: each field costs 32 + its bytes in the decoded
    # list; 80 KiB decoded from a few KiB of HPACK (indexed repeats)
    return one(base() + [("x-bomb", "b" * 1000)] * 80)


def case_many_streams():
    # 200 requests at once on one connection (the limit is 128 unless set)
    k = Client()
    for i in range(200):
        k.c.send_headers(1 + 2 * i, base("/slow/300"), end_stream=True)
    k.flush()
    k.pump(lambda: len(k.out["streams"]) + len(k.out["resets"]) >= 200,
           10)
    return k.out


def case_reset_one():
    # two streams: one reset by the client, the other answered
    k = Client()
    k.headers(1, base("/slow/300"))
    k.headers(3, base("/h2"))
    k.c.reset_stream(1)
    k.flush()
    k.pump(k.done(3))
    return k.out


def case_rapid_reset():
    # HEADERS then RST_STREAM, thousands of times (CVE-2023-44487)
    k = Client()
    block = k.hdr_block(base("/slow/1000"))
    buf = bytearray()
    for i in range(5000):
        sid = 1 + 2 * i
        f = HeadersFrame(sid)
        f.data = block if i == 0 else k.hdr_block(base("/slow/1000"))
        f.flags = {"END_HEADERS", "END_STREAM"}
        buf += f.serialize()
        r = RstStreamFrame(sid)
        r.error_code = 8
        buf += r.serialize()
    k.raw(bytes(buf))
    k.pump(lambda: k.out["goaway"] is not None, 5)
    return k.out


def case_continuation_flood():
    k = Client()
    block = k.hdr_block(base())
    raw_headers(k, 1, block, [])
    buf = bytearray()
    for _ in range(10000):
        f = ContinuationFrame(1)
        f.data = k.hdr_block([("x-c", "c" * 10)])
        buf += f.serialize()
    k.raw(bytes(buf))
    k.pump(lambda: k.out["goaway"] is not None, 5)
    return k.out


def flood(frame, seconds=10):
    """Send frame over and over without reading anything, until edged
    ends the connection (the send fails) or seconds pass; then read what
    came (a GOAWAY)."""
    k = Client()
    chunk = frame.serialize() * 2000
    end = time.time() + seconds
    k.sock.settimeout(1)
    sent = 0
    while time.time() < end:
        try:
            k.sock.sendall(chunk)
            sent += len(chunk)
        except socket.timeout:
            continue
        except OSError:
            k.out["closed"] = True
            break
    k.out["sent"] = sent
    k.out["closed"] = False
    k.pump(lambda: k.out["goaway"] is not None or k.out["closed"], 3)
    return k.out


def case_settings_flood():
    # SETTINGS frames, their acknowledgements never read
    f = SettingsFrame(0)
    f.settings = {h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 65535}
    return flood(f)


def case_ping_flood():
    # PING frames, their acknowledgements never read
    f = PingFrame(0)
    f.opaque_data = b"12345678"
    return flood(f)


def case_settings_entries():
    # one SETTINGS frame with 1000 entries
    f = SettingsFrame(0)
    f.settings = {0x100 + i: i for i in range(1000)}
    k = Client()
    k.raw(f.serialize())
    k.pump(lambda: k.out["goaway"] is not None or k.out["closed"], 3)
    return k.out


def case_data_unknown_stream():
    k = Client()
    f = DataFrame(7)
    f.data = b"x"
    k.raw(f.serialize())
    k.pump(lambda: k.out["goaway"] is not None, 3)
    return k.out


def case_data_closed_stream():
    # a request answered and its stream closed, then DATA on it: edged
    # keeps no closed stream (nghttp2's no_closed_streams, for memory),
    # so nghttp2 ignores the frame (RFC 9113 lets an endpoint ignore
    # frames on a stream it closed); the connection serves stream 3 on
    k = Client()
    k.headers(1, base())
    k.pump(k.done(1))
    f = DataFrame(1)
    f.data = b"x"
    f.flags = {"END_STREAM"}
    k.raw(f.serialize())
    k.headers(3, base())
    k.pump(k.done(3), 3)
    return k.out


def zero_window(size, name):
    """SETTINGS_INITIAL_WINDOW_SIZE = 0, then a download of size bytes,
    and never a WINDOW_UPDATE: the response's HEADERS may come, no DATA
    can. How long until the connection closed (or a GOAWAY came) is
    "seconds"."""
    k = Client()
    k.c.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 0})
    k.flush()
    t0 = time.time()
    k.headers(1, base("/big/%d/%s-%s" % (size, TAG, name)))
    k.pump(lambda: k.out["goaway"] is not None, 15)
    k.out["seconds"] = round(time.time() - t0, 2)
    k.out["data"] = len(k.out["bodies"].get(1, ""))
    return k.out


def parked():
    """edge_connections_parked from edged's /metrics (H2RAW_ADMIN), or
    None."""
    return metric("edge_connections_parked")


def metric(name):
    """The series name (no labels) from edged's /metrics (H2RAW_ADMIN), or
    None."""
    port = os.environ.get("H2RAW_ADMIN")
    if not port:
        return None
    try:
        with urllib.request.urlopen("http://127.0.0.1:%s/metrics" % port,
                                    timeout=5) as r:
            for ln in r.read().decode().splitlines():
                if ln.startswith(name + " "):
                    return int(float(ln.split()[1]))
    except OSError:
        return None
    return None


def echo_of(k, sid):
    """What the echo backend saw of stream sid's request (its JSON body):
    x-park and the body's length, into k.out["echo"]."""
    try:
        e = json.loads(k.out["bodies"].get(sid, ""))
    except ValueError:
        return
    h = {n.lower(): v for n, v in e["headers"]}
    k.out["echo"][sid] = {"x-park": h.get("x-park"),
                          "body_len": e["body_len"]}


def upload(k, sid, size):
    """Send size bytes of body on stream sid as its window allows (at most
    10 s), the last with END_STREAM."""
    left = size
    end = time.time() + 10
    while left and time.time() < end and not k.out["closed"]:
        n = min(left, k.c.local_flow_control_window(sid),
                k.c.max_outbound_frame_size)
        if n <= 0:
            k.pump(lambda: k.c.local_flow_control_window(sid) > 0, 2)
            continue
        left -= n
        k.c.send_data(sid, b"p" * n, end_stream=left == 0)
        k.flush()


def case_park():
    # Requests on one connection with pauses of 0.5 s between them, past
    # the 100 ms after which an idle HTTP/2 connection is parked (its
    # session kept, the rest freed): each must come through as on a
    # connection never parked. The x-park field goes with incremental
    # indexing the first time and as an index into the client's HPACK
    # dynamic table after (edged's decoder must have kept that table);
    # a 300000-byte POST needs the windows edged keeps giving back; a
    # 200000-byte download the client's. "parked" holds
    # edge_connections_parked read in each pause, "echo" what the echo
    # backend saw of each request. Then (H2RAW_WAIT_GOAWAY) the idle
    # connection waits for edged's GOAWAY: "goaway_after" seconds after
    # the last response.
    k = Client()
    val = "%s-park-%s" % (TAG, "v" * 40)
    k.out["parked"] = []
    k.out["echo"] = {}

    def pause():
        time.sleep(0.5)
        k.out["parked"].append(parked())

    def echo(sid):
        echo_of(k, sid)

    k.headers(1, base("/h2/%s-park-1" % TAG) + [("x-park", val)])
    k.pump(k.done(1))
    echo(1)
    pause()
    k.headers(3, base("/h2/%s-park-2" % TAG) + [("x-park", val)])
    k.pump(k.done(3))
    echo(3)
    pause()
    k.headers(5, base("/h2/%s-park-3" % TAG, "POST") + [
        ("content-length", "300000")], end=False)
    upload(k, 5, 300000)
    k.pump(k.done(5), 10)
    echo(5)
    pause()
    k.headers(7, base("/big/200000/%s-park-4" % TAG))
    k.pump(k.done(7), 10)
    k.out["downloaded"] = len(k.out["bodies"].get(7, ""))
    k.out["bodies"].pop(7, None)
    wait = float(os.environ.get("H2RAW_WAIT_GOAWAY", "0"))
    if wait > 0:
        t0 = time.time()
        k.pump(lambda: k.out["goaway"] is not None, wait)
        k.out["goaway_after"] = round(time.time() - t0, 2)
        k.pump(lambda: False, 3)  # until edged closes it
    return k.out


def case_release():
    # Requests on one connection with pauses after which edged has
    # released the idle connection's nghttp2 session (it asks the client
    # to empty its HPACK table, SETTINGS_HEADER_TABLE_SIZE 0, after 1 s
    # without a stream, and releases the session once that is
    # acknowledged): each pause pumps the connection until
    # edge_http2_connections_released is 1 (at most 8 s), "released" the
    # seconds each took (None: never). Each request must come through as
    # on a session never released: x-park indexed, then sent literally
    # (the table emptied), then indexed and referred to again once edged
    # gives the table back (SETTINGS_HEADER_TABLE_SIZE 4096 with its
    # next response, "table_sizes" the values seen); a 300000-byte POST
    # and a 200000-byte download (the windows both ways); frames of
    # closed streams (a WINDOW_UPDATE, a RST_STREAM, a HEADERS reusing a
    # closed stream's id) ignored as on the first session ("responses":
    # how many each stream got).
    k = Client()
    val = "%s-release-%s" % (TAG, "v" * 40)
    k.out["released"] = []
    k.out["echo"] = {}

    def pause():
        t0 = time.time()
        while time.time() - t0 < 8 and not k.out["closed"]:
            k.pump(lambda: False, 0.2)
            if metric("edge_http2_connections_released") == 1:
                k.out["released"].append(round(time.time() - t0, 2))
                return
        k.out["released"].append(None)

    def echo(sid):
        echo_of(k, sid)

    def get(sid, n):
        k.headers(sid, base("/h2/%s-release-%d" % (TAG, n)) +
                  [("x-park", val)])
        k.pump(k.done(sid))
        echo(sid)

    get(1, 1)
    pause()
    get(3, 2)  # literal: the client's table is empty now
    get(5, 3)  # indexed again: edged's table is back
    get(7, 4)  # an index into it
    pause()
    f = WindowUpdateFrame(1)
    f.window_increment = 1000
    k.raw(f.serialize())
    f = RstStreamFrame(3)
    f.error_code = 8
    k.raw(f.serialize())
    # led by the table size update the client owes once it acknowledged
    # SETTINGS_HEADER_TABLE_SIZE 0 (h2's encoder sends it again next)
    raw_headers(k, 1, b"\x20\x82\x84\x86", ["END_STREAM", "END_HEADERS"])
    k.pump(lambda: False, 0.5)
    k.headers(9, base("/h2/%s-release-5" % TAG, "POST") + [
        ("content-length", "300000"), ("x-park", val)], end=False)
    upload(k, 9, 300000)
    k.pump(k.done(9), 10)
    echo(9)
    pause()
    k.headers(11, base("/big/200000/%s-release-6" % TAG))
    k.pump(k.done(11), 10)
    k.out["downloaded"] = len(k.out["bodies"].get(11, ""))
    k.out["bodies"].pop(11, None)
    pause()
    return k.out


def case_release_goaway():
    # Two requests, then the connection idles until edged's GOAWAY (at
    # most 8 s) while it is pumped (the client acknowledges edged's
    # SETTINGS_HEADER_TABLE_SIZE 0): "released_seen", the highest
    # edge_http2_connections_released read meanwhile; "goaway_last", the
    # GOAWAY's last stream id, made by a session released and made again.
    k = Client()
    for sid in (1, 3):
        k.headers(sid, base("/h2/%s-relgo-%d" % (TAG, sid)))
        k.pump(k.done(sid))
    seen = 0
    t0 = time.time()
    while (time.time() - t0 < 8 and k.out["goaway"] is None and
           not k.out["closed"]):
        k.pump(lambda: k.out["goaway"] is not None, 0.2)
        seen = max(seen, metric("edge_http2_connections_released") or 0)
    k.out["released_seen"] = seen
    k.pump(lambda: False, 3)  # until edged closes it
    return k.out


def case_release_state():
    # What a released session made again must still owe the client: the
    # client lowers its HPACK table (SETTINGS_HEADER_TABLE_SIZE 100) and
    # cancels its first request before any response, so that edged's
    # first header block after the release must start with a table size
    # update (h2's decoder insists); then three 120000-byte POSTs, each
    # followed by a release: the connection window their DATA took below
    # half of it must be given back, not forgotten with the session (the
    # third POST would stall). Fields never indexed: edged's decoder
    # table stays empty, each release comes 100 ms after the last byte.
    # "released": the seconds each pause took (None: never).
    k = Client()
    k.c.update_settings({h2.settings.SettingCodes.HEADER_TABLE_SIZE: 100})
    k.flush()
    k.out["released"] = []

    def hdrs(path, method="GET", extra=()):
        return [NeverIndexedHeaderTuple(n, v) for n, v in
                base(path, method) + list(extra)]

    def pause():
        t0 = time.time()
        while time.time() - t0 < 3 and not k.out["closed"]:
            k.pump(lambda: False, 0.1)
            if metric("edge_http2_connections_released") == 1:
                k.out["released"].append(round(time.time() - t0, 2))
                return
        k.out["released"].append(None)

    k.pump(lambda: False, 0.2)
    k.c.send_headers(1, hdrs("/h2/%s-relstate-1" % TAG), end_stream=True)
    k.c.reset_stream(1, 8)  # CANCEL, in the same write
    k.flush()
    pause()
    for sid in (3, 5, 7):
        if "client_error" in k.out or k.out["closed"]:
            break
        k.headers(sid, hdrs("/h2/%s-relstate-%d" % (TAG, sid), "POST",
                            [("content-length", "120000")]), end=False)
        left = 120000
        end = time.time() + 3
        while left and time.time() < end and not k.out["closed"]:
            n = min(left, k.c.local_flow_control_window(sid),
                    k.c.max_outbound_frame_size)
            if n <= 0:
                k.pump(lambda: k.c.local_flow_control_window(sid) > 0, 1)
                continue
            left -= n
            k.c.send_data(sid, b"p" * n, end_stream=left == 0)
            k.flush()
        k.pump(k.done(sid), 3)
        if sid != 7:
            pause()
    return k.out


def case_release_no_update():
    # A client that acknowledges edged's SETTINGS_HEADER_TABLE_SIZE 0
    # (h2 does) and, once the session is released, sends a header block
    # without the table size update it owes (RFC 7541 section 4.2): a
    # COMPRESSION_ERROR GOAWAY, as from the session before the release.
    # "released": the seconds until it was (None: never).
    k = Client()
    k.headers(1, base("/h2/%s-relnoupd" % TAG))
    k.pump(k.done(1))
    k.out["released"] = None
    t0 = time.time()
    while time.time() - t0 < 4 and not k.out["closed"]:
        k.pump(lambda: False, 0.1)
        if (0 in k.out.get("table_sizes", []) and
                metric("edge_http2_connections_released") == 1):
            k.out["released"] = round(time.time() - t0, 2)
            break
    raw_headers(k, 3, b"\x82\x84\x86\x01\x09" + HOST.encode(),
                ["END_STREAM", "END_HEADERS"])
    k.pump(lambda: k.out["goaway"] is not None, 3)
    return k.out


def case_release_update_paid():
    # As release_no_update, but the client pays the table size update it
    # owes in a header block on a closed stream (ignored) before the
    # release; its next request, without an update, must be served as by
    # the session before the release ("goaway" None, the request at the
    # backend: h2 itself may refuse the answer to a stream it never
    # opened, "client_error").
    k = Client()
    k.headers(1, base("/h2/%s-relpaid-1" % TAG))
    k.pump(k.done(1))
    k.out["released"] = None
    paid = False
    t0 = time.time()
    while time.time() - t0 < 4 and not k.out["closed"]:
        k.pump(lambda: False, 0.1)
        if not paid and 0 in k.out.get("table_sizes", []):
            raw_headers(k, 1, b"\x20\x82\x84\x86\x01\x09" + HOST.encode(),
                        ["END_STREAM", "END_HEADERS"])
            paid = True
        elif paid and metric("edge_http2_connections_released") == 1:
            k.out["released"] = round(time.time() - t0, 2)
            break
    path = ("/h2/%s-relpaid-3" % TAG).encode()
    raw_headers(k, 3, b"\x82\x86\x04" + bytes([len(path)]) + path +
                b"\x01" + bytes([len(HOST)]) + HOST.encode(),
                ["END_STREAM", "END_HEADERS"])
    k.pump(lambda: k.out["goaway"] is not None, 1.5)
    return k.out


def case_release_churn():
    # A connection that only exchanged SETTINGS, released, then a PING
    # every 150 ms for 2 s: its session is made again once, then kept
    # while the client keeps sending ("renewed": how many times
    # edge_http2_sessions_renewed_total went up meanwhile; "released":
    # the gauge at the start and at the end).
    k = Client()
    k.out["released"] = []
    t0 = time.time()
    while time.time() - t0 < 4 and not k.out["closed"]:
        k.pump(lambda: False, 0.1)
        if metric("edge_http2_connections_released") == 1:
            break
    k.out["released"].append(metric("edge_http2_connections_released"))
    r0 = metric("edge_http2_sessions_renewed_total") or 0
    t0 = time.time()
    while time.time() - t0 < 2 and not k.out["closed"]:
        k.c.ping(b"churn..."[:8])
        k.flush()
        k.pump(lambda: False, 0.15)
    k.out["renewed"] = (metric("edge_http2_sessions_renewed_total") or 0) - r0
    k.out["released"].append(metric("edge_http2_connections_released"))
    return k.out


def case_idle():
    # a connection that only exchanges SETTINGS, then waits (up to 10 s)
    # for edged's GOAWAY: "goaway_wall", the time (epoch seconds) it came
    k = Client()
    k.pump(lambda: k.out["goaway"] is not None, 10)
    if k.out["goaway"] is not None:
        k.out["goaway_wall"] = time.time()
    k.pump(lambda: False, 3)  # until edged closes it
    return k.out


def case_zero_window():
    # a 1 MB download held at a zero window: edged must not hold the
    # stream and its upstream for ever
    return zero_window(1000000, "zero-window")


def case_zero_window_small():
    # a 1000-byte download held at a zero window: the upstream's response
    # is complete at once, and must not be recorded as delivered (200 ok)
    # while it waits in edged for a window that never comes
    return zero_window(1000, "zero-small")


def case_error_inflight():
    # stream 1 answered, stream 3 waiting for a slow upstream, then a
    # connection error (DATA on an idle stream): stream 1 is recorded as
    # answered, stream 3 as the client's leaving (the GOAWAY ends it)
    k = Client()
    k.headers(1, base("/h2/%s-answered" % TAG))
    k.pump(k.done(1))
    k.headers(3, base("/slow/1500/%s-inflight" % TAG))
    time.sleep(0.3)
    f = DataFrame(7)
    f.data = b"x"
    k.raw(f.serialize())
    k.pump(lambda: k.out["goaway"] is not None, 3)
    return k.out


class Frames:
    """A client on hyperframe and hpack alone, for what h2's state machine
    refuses to do: h2 takes a GOAWAY as the connection's end and raises on
    every frame after it, where a draining server still sends the open
    streams' responses. One HPACK encoder (literal fields only, never
    indexed) and one decoder for the whole connection."""

    def __init__(self):
        self.sock = socket.create_connection(("127.0.0.1", PORT), 5)
        self.enc = Encoder()
        self.dec = Decoder()
        self.buf = b""
        self.t0 = time.time()
        self.out = {"streams": {}, "resets": {}, "goaway": None,
                    "closed": False, "bodies": {}, "lengths": {},
                    "ended": [], "goaways": [], "received": {}}
        s = SettingsFrame(0)
        s.settings = {h2.settings.SettingCodes.ENABLE_PUSH: 0,
                      h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 1 << 20}
        self.send(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + s.serialize())

    def now(self):
        return round(time.time() - self.t0, 3)

    def send(self, data):
        try:
            self.sock.sendall(data)
        except OSError:
            self.out["closed"] = True

    def get(self, sid, path):
        f = HeadersFrame(sid)
        f.data = self.enc.encode(
            [NeverIndexedHeaderTuple(n, v) for n, v in base(path)])
        f.flags = {"END_HEADERS", "END_STREAM"}
        self.send(f.serialize())

    def frame(self, timeout):
        """The next frame, or None (timeout, or the connection closed)."""
        end = time.time() + timeout
        while True:
            if len(self.buf) >= 9:
                f, n = Frame.parse_frame_header(memoryview(self.buf[:9]))
                if len(self.buf) >= 9 + n:
                    f.parse_body(memoryview(self.buf[9:9 + n]))
                    self.buf = self.buf[9 + n:]
                    return f
            left = end - time.time()
            if left <= 0 or self.out["closed"]:
                return None
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                return None
            except OSError:
                data = b""
            if not data:
                self.out["closed"] = True
                self.out["closed_at"] = self.now()
                return None
            self.buf += data

    def handle(self, f):
        o = self.out
        sid = f.stream_id
        if isinstance(f, SettingsFrame) and "ACK" not in f.flags:
            a = SettingsFrame(0)
            a.flags = {"ACK"}
            self.send(a.serialize())
        elif isinstance(f, PingFrame) and "ACK" not in f.flags:
            a = PingFrame(0)
            a.flags = {"ACK"}
            a.opaque_data = f.opaque_data
            self.send(a.serialize())
        elif isinstance(f, HeadersFrame):
            hd = {k.decode() if isinstance(k, bytes) else k:
                  v.decode() if isinstance(v, bytes) else v
                  for k, v in self.dec.decode(f.data)}
            o["streams"][sid] = int(hd.get(":status", "0"))
            o.setdefault("headers_at", {})[sid] = self.now()
            if "content-length" in hd:
                o["lengths"][sid] = int(hd["content-length"])
            if "END_STREAM" in f.flags:
                o["ended"].append(sid)
        elif isinstance(f, DataFrame):
            o["bodies"][sid] = o["bodies"].get(sid, "") + \
                f.data.decode("latin-1")
            o["received"][sid] = o["received"].get(sid, 0) + len(f.data)
            if f.flow_controlled_length:
                for s in (0, sid):
                    w = WindowUpdateFrame(s)
                    w.window_increment = f.flow_controlled_length
                    self.send(w.serialize())
            if "END_STREAM" in f.flags:
                o["ended"].append(sid)
        elif isinstance(f, RstStreamFrame):
            o["resets"][sid] = f.error_code
        elif isinstance(f, GoAwayFrame):
            o["goaways"].append({"last_stream_id": f.last_stream_id,
                                 "error": f.error_code, "at": self.now(),
                                 "wall": time.time()})
            if o["goaway"] is None:
                o["goaway"] = f.error_code


def case_overcredit():
    # a body without a length in DATA frames of 4 bytes (edged frames
    # each as a 9-byte chunk for the proxy), sent as fast as the windows
    # edged gives allow, to a backend that reads 300 KB/s (as sent
    # upstream: chunk framing too) for 6 s, then at once (HOST routes to
    # one with small socket buffers: /drip). Give back window for the
    # body bytes the proxy took, not for its framing too: what edged and
    # the kernels hold (sent less read by the backend, "held", every
    # 0.25 s of the drip) stays flat at about the stream's window plus
    # the proxy's buffers; crediting the framing, it grows with every
    # take (when the stream's window is over the proxy's high water:
    # http2.initial_window_size 128K). "held_growth": the mean held of
    # the drip's last second less that of its first (past its first
    # sample: the window's first fill); "max_window" the largest stream
    # window seen. Then all of it must arrive (the
    # response says its length and SHA-256: "sha256" is what was sent).
    total, piece = 2000000, 4
    k = Frames()
    sid = 1
    f = HeadersFrame(sid)
    f.data = k.enc.encode([NeverIndexedHeaderTuple(n, v) for n, v in
                           base("/drip/300000/6000/%s-overcredit" % TAG,
                                "POST")])
    f.flags = {"END_HEADERS"}
    k.send(f.serialize())
    t0 = time.time()
    win = {0: 65535, sid: 65535}  # until edged's SETTINGS say otherwise
    init = 65535
    sent = 0
    k.out["max_window"] = 0
    hd = b"\x00\x00" + bytes([piece]) + b"\x00"
    one = hd + b"\x00" + sid.to_bytes(4, "big") + b"\x55" * piece
    last = hd + b"\x01" + sid.to_bytes(4, "big") + b"\x55" * piece
    log = []  # [time, body bytes sent by then], every 0.05 s
    while not k.out["closed"] and time.time() - t0 < 30:
        if not log or time.time() - log[-1][0] >= 0.05:
            log.append([time.time(), sent])
        fr = k.frame(0.01 if sent < total else 1)
        while fr is not None:
            if isinstance(fr, SettingsFrame) and "ACK" not in fr.flags:
                v = fr.settings.get(
                    h2.settings.SettingCodes.INITIAL_WINDOW_SIZE)
                if v is not None:
                    win[sid] += v - init
                    init = v
            if isinstance(fr, WindowUpdateFrame):
                win[fr.stream_id] = win.get(fr.stream_id, 0) + \
                    fr.window_increment
                if fr.stream_id == sid:
                    k.out["max_window"] = max(k.out["max_window"], win[sid])
            k.handle(fr)
            fr = k.frame(0) if len(k.buf) >= 9 else None
        if sid in k.out["ended"] or sid in k.out["resets"] or \
                k.out["goaway"] is not None:
            break
        n = min(win[0], win[sid], total - sent, 32768) // piece
        if n > 0:
            data = one * n if sent + n * piece < total else \
                one * (n - 1) + last
            k.sock.settimeout(5)
            k.send(data)
            sent += n * piece
            win[0] -= n * piece
            win[sid] -= n * piece
    k.out["sent"] = sent
    k.out["init_window"] = init
    k.out["sha256"] = hashlib.sha256(b"\x55" * total).hexdigest()
    # what edged (and the kernels) held at each of the backend's samples
    try:
        b = json.loads(k.out["bodies"].get(sid, "{}"))
    except ValueError:
        b = {}
    held = []
    for t, got in b.get("drip_log", []):
        before = [n for (ts, n) in log if ts <= t]
        held.append((before[-1] if before else 0) - got)
    k.out["held"] = held
    if len(held) >= 12:
        k.out["held_growth"] = (sum(held[-4:]) - sum(held[1:5])) // 4
        k.out["held_max"] = max(held)
    return k.out


def case_drain():
    # stream 1 asks for /slow/1500; the test sends edged SIGTERM meanwhile.
    # A GOAWAY must come (its last stream id taking stream 1) before stream
    # 1's response, which must still come whole. Stream 3, opened after
    # the GOAWAY, must not be served (nothing comes of it, or a reset).
    k = Frames()
    k.get(1, "/slow/1500/%s-drain" % TAG)
    while k.out["goaway"] is None and not k.out["closed"] and k.now() < 8:
        f = k.frame(8 - k.now())
        if f is not None:
            k.handle(f)
    if k.out["goaway"] is not None:
        k.out["stream3_sent_at"] = k.now()
        k.get(3, "/h2/%s-after-goaway" % TAG)
    # stream 1's end, then whatever else comes until the connection closes
    while not k.out["closed"] and k.now() < 12:
        f = k.frame(12 - k.now())
        if f is not None:
            k.handle(f)
    return k.out


CASES = {n[5:]: f for n, f in globals().items() if n.startswith("case_")}

if __name__ == "__main__":
    if CASE not in CASES:
        sys.exit("h2raw.py: unknown case %s (one of: %s)" %
                 (CASE, " ".join(sorted(CASES))))
    res = CASES[CASE]()
    res["streams"] = {str(k): v for k, v in res["streams"].items()}
    res["resets"] = {str(k): v for k, v in res["resets"].items()}
    res["bodies"] = {str(k): v[:3000] for k, v in res["bodies"].items()}
    res.pop("headers", None)
    for key in ("lengths", "headers_at", "received"):
        if key in res:
            res[key] = {str(k): v for k, v in res[key].items()}
    print(json.dumps(res, sort_keys=True))
