#!/usr/bin/python3
"""h2_backend.py - an HTTP/2 backend on Debian's python3-h2 (asyncio), for
edged's HTTP/2 upstream tests. Run with /usr/bin/python3.

    h2_backend.py PORT LOG [--tls CERT KEY] [--alpn-h1] [--max-streams N]
                  [--goaway-after N] [--settings-delay MS]

Serves 127.0.0.1:PORT: h2c by prior knowledge, or with --tls TLS whose
ALPN offers h2 (--alpn-h1: http/1.1 only, and then answers HTTP/1.1 GETs
with a one-line JSON body, "proto": "h1"). Each request is a JSON line in
LOG when its response begins: conn (the connection's number), stream,
method, path, authority, scheme, te, body_len, body_sha256, concurrent
(the streams of its connection in progress when it came, itself too),
id (its x-req-id field).

    /slow?ms=N   answers after N ms (--delay MS: every request after MS)
    /big?n=N     N bytes of body ('x'), no content-length
    /die         closes the connection without answering
    /reset       RST_STREAM INTERNAL_ERROR instead of an answer
    /trailers    200, a body, then trailers x-sum: the body's SHA-256
                 and grpc-status: 0
    /echo.Echo/Unary, /echo.Echo/Stream   gRPC (application/grpc): each
                 length-prefixed message echoed as it arrives, then
                 trailers grpc-status: 0, grpc-message: ok, x-count
    /echo.Echo/Fail   gRPC trailers-only: grpc-status: 5
    /status/N    answers N, without a body
    anything else: 200 with the JSON line as its body
The request's trailers, when it has some, are the line's "trailers".
A stream the client resets is a line {"conn", "stream", "reset": CODE}.

--max-streams N announces SETTINGS_MAX_CONCURRENT_STREAMS N.
--settings-delay MS: each connection's server preface (its SETTINGS) goes
MS ms after it came, and nothing is read before: what a client sends
before it has the SETTINGS is all there when they go. Such streams are
taken up to the library's own default (100), not refused: the
connection's count of them ("concurrent") shows a client that sent more
than the limit its earlier connections were told.
--goaway-after N: once N requests came on a connection, GOAWAY with the
Nth's stream as the last; later streams are left unanswered (the client
retries them elsewhere) and the connection closes when the others are
done.
"""
import asyncio
import hashlib
import json
import ssl
import sys
import urllib.parse

import h2.config
import h2.connection
import h2.errors
import h2.events
import hyperframe.frame

ARGS = {"tls": None, "alpn_h1": False, "max_streams": None,
        "goaway_after": 0, "settings_delay": 0}
LOG = None
CONNS = [0]


def log(rec):
    with open(LOG, "a") as f:
        f.write(json.dumps(rec) + "\n")


class Conn:
    def __init__(self, reader, writer):
        CONNS[0] += 1
        self.n = CONNS[0]
        self.r, self.w = reader, writer
        self.c = h2.connection.H2Connection(
            config=h2.config.H2Configuration(client_side=False,
                                             header_encoding="utf-8"))
        self.streams = {}  # id -> {"headers", "body"}
        self.busy = set()  # ids being answered
        self.count = 0
        self.last = None  # GOAWAY's last stream
        self.windows = {}

    def flush(self):
        data = self.c.data_to_send()
        if data:
            self.w.write(data)

    async def run(self):
        if ARGS["settings_delay"]:
            await asyncio.sleep(ARGS["settings_delay"] / 1000)
        settings = {}
        if ARGS["max_streams"] is not None:
            settings[h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS] = \
                ARGS["max_streams"]
        self.c.initiate_connection()
        if settings:
            self.c.update_settings(settings)
        self.flush()
        try:
            while True:
                data = await self.r.read(65536)
                if not data:
                    break
                try:
                    events = self.c.receive_data(data)
                except Exception:
                    break
                for ev in events:
                    self.event(ev)
                self.flush()
                await self.w.drain()
        finally:
            self.w.close()

    def grpc_data(self, sid, s):
        """Echo each whole length-prefixed message as it arrives."""
        b = s["body"][s["echoed"]:]
        while len(b) >= 5:
            n = int.from_bytes(b[1:5], "big")
            if len(b) < 5 + n:
                break
            if not s["replied"]:
                self.c.send_headers(sid, [(":status", "200"),
                                          ("content-type",
                                           "application/grpc")])
                s["replied"] = True
            self.c.send_data(sid, b[:5 + n])
            s["count"] += 1
            s["echoed"] += 5 + n
            b = b[5 + n:]

    def event(self, ev):
        if isinstance(ev, h2.events.RequestReceived):
            h = dict(ev.headers)
            self.streams[ev.stream_id] = {
                "headers": h, "body": b"", "echoed": 0, "count": 0,
                "replied": False,
                "grpc": h.get(":path", "").startswith("/echo.Echo/") and
                h.get(":path") != "/echo.Echo/Fail"}
            if ev.stream_ended:
                self.request(ev.stream_id)
        elif isinstance(ev, h2.events.TrailersReceived):
            s = self.streams.get(ev.stream_id)
            if s is not None:
                s["trailers"] = dict(ev.headers)
        elif isinstance(ev, h2.events.DataReceived):
            s = self.streams.get(ev.stream_id)
            if s is not None:
                s["body"] += ev.data
                if s.get("grpc"):
                    self.grpc_data(ev.stream_id, s)
            self.c.acknowledge_received_data(ev.flow_controlled_length,
                                              ev.stream_id)
        elif isinstance(ev, h2.events.StreamEnded):
            self.request(ev.stream_id)
        elif isinstance(ev, h2.events.StreamReset):
            if ev.remote_reset:
                log({"conn": self.n, "stream": ev.stream_id,
                     "reset": int(ev.error_code)})
            self.busy.discard(ev.stream_id)
            self.streams.pop(ev.stream_id, None)
        elif isinstance(ev, h2.events.WindowUpdated):
            for sid, ev_ in list(self.windows.items()):
                ev_.set()

    def request(self, sid):
        if self.last is not None and sid > self.last:
            return  # after our GOAWAY: never processed
        s = self.streams.get(sid)
        if s is None or s.get("started"):
            return  # (RequestReceived with its end, then StreamEnded)
        s["started"] = True
        self.count += 1
        self.busy.add(sid)
        asyncio.ensure_future(self.answer(sid, s, len(self.busy)))
        self.top = max(getattr(self, "top", 0), sid)
        if ARGS["goaway_after"] and self.count == ARGS["goaway_after"]:
            # the highest stream processed (they end out of order)
            self.last = self.top
            g = hyperframe.frame.GoAwayFrame(0)
            g.last_stream_id = self.last
            g.error_code = 0
            self.flush()
            self.w.write(g.serialize())

    async def answer(self, sid, s, concurrent):
        h = s["headers"]
        url = urllib.parse.urlsplit(h.get(":path", "/"))
        q = urllib.parse.parse_qs(url.query)
        rec = {"conn": self.n, "stream": sid, "method": h.get(":method"),
               "path": h.get(":path"), "authority": h.get(":authority"),
               "scheme": h.get(":scheme"), "te": h.get("te"),
               "id": h.get("x-req-id"), "concurrent": concurrent,
               "via": h.get("via"), "host": h.get("host"),
               "body_len": len(s["body"]),
               "body_sha256": hashlib.sha256(s["body"]).hexdigest(),
               "trailers": s.get("trailers"),
               "content_type": h.get("content-type")}
        if url.path == "/slow":
            await asyncio.sleep(int(q.get("ms", ["100"])[0]) / 1000)
        elif ARGS.get("delay"):
            await asyncio.sleep(ARGS["delay"] / 1000)
        if url.path == "/die":
            log(rec)
            self.w.transport.abort()
            return
        if url.path == "/reset":
            log(rec)
            self.c.reset_stream(sid, h2.errors.ErrorCodes.INTERNAL_ERROR)
            self.done(sid)
            return
        log(rec)
        if sid not in self.streams:
            return  # reset by the client meanwhile
        if s.get("grpc"):
            if not s["replied"]:
                self.c.send_headers(sid, [(":status", "200"),
                                          ("content-type",
                                           "application/grpc")])
            self.c.send_headers(sid, [("grpc-status", "0"),
                                      ("grpc-message", "ok"),
                                      ("x-count", str(s["count"]))],
                                end_stream=True)
            self.done(sid)
            return
        if url.path.startswith("/status/"):
            self.c.send_headers(sid, [(":status", url.path[8:11]),
                                      ("content-length", "0")],
                                end_stream=True)
            self.done(sid)
            return
        if url.path == "/echo.Echo/Fail":
            self.c.send_headers(sid, [(":status", "200"),
                                      ("content-type", "application/grpc"),
                                      ("grpc-status", "5"),
                                      ("grpc-message", "no such thing")],
                                end_stream=True)
            self.done(sid)
            return
        if url.path == "/trailers":
            self.c.send_headers(sid, [(":status", "200"),
                                      ("content-type", "text/plain")])
            await self.send(sid, b"body with trailers\n", end=False)
            self.c.send_headers(sid, [
                ("x-sum", hashlib.sha256(s["body"]).hexdigest()),
                ("grpc-status", "0")], end_stream=True)
            self.done(sid)
            return
        if url.path == "/big":
            n = int(q.get("n", ["0"])[0])
            self.c.send_headers(sid, [(":status", "200"),
                                      ("content-type", "text/plain")])
            await self.send(sid, b"x" * n)
        else:
            body = (json.dumps(rec) + "\n").encode()
            self.c.send_headers(sid, [(":status", "200"),
                                      ("content-type", "application/json"),
                                      ("content-length", str(len(body))),
                                      ("x-backend", "h2")])
            await self.send(sid, body)
        self.done(sid)

    async def send(self, sid, data, end=True):
        while data:
            try:
                n = min(len(data), self.c.local_flow_control_window(sid),
                        self.c.max_outbound_frame_size)
            except Exception:
                return
            if n <= 0:
                ev = asyncio.Event()
                self.windows[sid] = ev
                self.flush()
                await ev.wait()
                self.windows.pop(sid, None)
                continue
            self.c.send_data(sid, data[:n])
            data = data[n:]
            self.flush()
            await self.w.drain()
        if end:
            self.c.end_stream(sid)
        self.flush()

    def done(self, sid):
        self.busy.discard(sid)
        self.streams.pop(sid, None)
        self.flush()
        if self.last is not None and not any(
                i <= self.last for i in self.busy):
            self.w.close()


async def h1(reader, writer):
    """--alpn-h1: HTTP/1.1 GETs answered, keep-alive."""
    CONNS[0] += 1
    n = CONNS[0]
    while True:
        head = await reader.readuntil(b"\r\n\r\n")
        line = head.split(b"\r\n")[0].decode()
        rec = {"conn": n, "proto": "h1", "path": line.split(" ")[1]}
        log(rec)
        body = (json.dumps(rec) + "\n").encode()
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n"
                     % len(body) + body)
        await writer.drain()


async def serve(reader, writer):
    try:
        sslobj = writer.get_extra_info("ssl_object")
        if sslobj is not None and sslobj.selected_alpn_protocol() != "h2":
            await h1(reader, writer)
            return
        await Conn(reader, writer).run()
    except Exception:
        writer.close()


def main():
    global LOG
    port = int(sys.argv[1])
    LOG = sys.argv[2]
    a = sys.argv[3:]
    while a:
        o = a.pop(0)
        if o == "--tls":
            ARGS["tls"] = (a.pop(0), a.pop(0))
        elif o == "--alpn-h1":
            ARGS["alpn_h1"] = True
        elif o == "--max-streams":
            ARGS["max_streams"] = int(a.pop(0))
        elif o == "--goaway-after":
            ARGS["goaway_after"] = int(a.pop(0))
        elif o == "--settings-delay":
            ARGS["settings_delay"] = int(a.pop(0))
        elif o == "--delay":
            ARGS["delay"] = int(a.pop(0))
    ctx = None
    if ARGS["tls"]:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(*ARGS["tls"])
        ctx.set_alpn_protocols(["http/1.1"] if ARGS["alpn_h1"] else ["h2"])
    loop = asyncio.new_event_loop()
    srv = loop.run_until_complete(
        asyncio.start_server(serve, "127.0.0.1", port, ssl=ctx))
    loop.run_until_complete(srv.serve_forever())


if __name__ == "__main__":
    import h2.settings  # noqa: F401 (SettingCodes)
    main()
