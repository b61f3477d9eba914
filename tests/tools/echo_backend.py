#!/usr/bin/env python3
"""echo_backend.py - a recording HTTP/1.1 backend for edged's tests.

    echo_backend.py PORT|unix:PATH LOGFILE [NAME]

Answers every request with a JSON object: the backend's NAME, the method,
the path, the headers received (a list of [name, value]), and the body's
length and SHA-256, on TLS also "tls_resumed" (and, for Upgrade: websocket, a 101 and an echo of
the bytes that follow). Each request is also appended to LOGFILE as one JSON
line, so a test can count what reached the backend. With ECHO_RCVBUF=N in
the environment its sockets' receive buffers are N bytes (SO_RCVBUF), and
with ECHO_MSS=N its connections' segments N bytes at most (TCP_MAXSEG,
which also keeps the sender's buffer small): the kernels on both sides
then hold little of a body not read yet. With ECHO_TLS_CERT and
ECHO_TLS_KEY it serves TLS (ECHO_TLS_CLIENT_CA: a client certificate
signed by that CA is required). Paths:
  /slow/MS    answer after MS milliseconds
  /drip/BPS/MS  read the request body at BPS bytes a second (as sent:
              chunk framing too) for its first MS milliseconds, then at
              once
  /hang       never answer (until the connection closes)
  /arm-drop   answer, then close the connection on its next request,
              once read, without an answer (nor a TLS close_notify)
  /big/N      answer with N bytes (Content-Length)
  /chunked/N  answer with N bytes in chunks (/chunked/N/trailers: then
              trailers X-Sum: abc, Grpc-Status: 0)
  /gen/N      N bytes of gen_body(N) (JSON lines) with ?type=, ?chunked=1,
              ?ce= (Content-Encoding), ?cc= (Cache-Control), ?etag=,
              ?status=
  /sse/N/MS   N text/event-stream events, MS milliseconds apart
  /genstream/N  N bytes of text/plain (gen_body(65536) over and over),
              chunked, made as they are sent
  /html       (any path ending in /html, so behind a route's prefix too)
              the page HTML_PAGE as text/html, with its length
A request field "X-Echo-Response-Header: Name: value" (any number) puts
"Name: value" in the JSON answer's head.
"""
import hashlib
import json
import os
import socket
import socketserver
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from echo_backend_gen import gen_body

UNIX = sys.argv[1][5:] if sys.argv[1].startswith("unix:") else None
PORT = 0 if UNIX else int(sys.argv[1])
LOG = sys.argv[2]
NAME = sys.argv[3] if len(sys.argv) > 3 else "backend"
LOCK = threading.Lock()
CONNS = [0]  # connections accepted: a Unix socket's peer has no port
HTML_PAGE = b"<html><head><title>t</title></head><body>hi</body></html>"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def setup(self):
        if TLS:
            self.request.do_handshake()  # in the handler's thread
        super().setup()
        with LOCK:
            CONNS[0] += 1
            self.conn_no = CONNS[0]

    def peer_id(self):
        """The peer's port, or on a Unix socket the connection's number."""
        if isinstance(self.client_address, tuple) and self.client_address:
            return self.client_address[1]
        return self.conn_no

    def echo_upgrade(self):
        """Upgrade: websocket: 101, then echo bytes until the peer ends."""
        self.send_response(101)
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.end_headers()
        self.wfile.flush()
        while True:
            d = self.connection.recv(65536)
            if not d:
                break
            self.connection.sendall(d)
        self.close_connection = True

    def drip(self, nbytes):
        """With /drip/BPS/MS, wait until nbytes more may have been read."""
        if not self.path.startswith("/drip/"):
            return
        bps, ms = (int(x) for x in self.path.split("/")[2:4])
        now = time.time()
        if self.drip_t0 is None:
            self.drip_t0, self.drip_n = now, 0
        if now - self.drip_t0 > ms / 1000:
            return
        if not self.drip_log or now - self.drip_log[-1][0] >= 0.25:
            self.drip_log.append([now, self.body_n])
        self.drip_n += nbytes
        wait = self.drip_t0 + self.drip_n / bps - now
        if wait > 0:
            time.sleep(wait)

    def read_body(self):
        h = hashlib.sha256()
        n = 0
        self.body_n = 0
        self.drip_t0, self.drip_log = None, []  # one request's
        te = self.headers.get("Transfer-Encoding", "")
        self.req_trailers = []
        if te.lower() == "chunked":
            while True:
                line = self.rfile.readline()
                self.drip(len(line))
                line = line.strip()
                size = int(line.split(b";")[0], 16)
                if size == 0:
                    while True:
                        t = self.rfile.readline()
                        if t in (b"\r\n", b"\n", b""):
                            break
                        self.req_trailers.append(t.decode().strip())
                    break
                left = size
                while left:
                    d = self.rfile.read(min(left, 65536))
                    h.update(d)
                    n += len(d)
                    left -= len(d)
                self.body_n = n
                self.drip(size + len(self.rfile.readline()))
        else:
            left = int(self.headers.get("Content-Length", "0") or 0)
            while left:
                d = self.rfile.read(min(left, 65536))
                if not d:
                    break
                h.update(d)
                n += len(d)
                left -= len(d)
        return n, h.hexdigest()

    def handle_any(self):
        n, digest = self.read_body()
        rec = {
            "backend": NAME,
            "method": self.command,
            "path": self.path,
            "headers": [[k, v] for k, v in self.headers.items()],
            "body_len": n,
            "body_sha256": digest,
            "peer_port": self.peer_id(),
            "tls_resumed": (self.request.session_reused
                            if TLS else None),
        }
        if self.req_trailers:
            rec["trailers"] = self.req_trailers
        if self.drip_log:
            # [time, body bytes read by then], every 0.25 s of the drip
            rec["drip_log"] = self.drip_log
        with LOCK, open(LOG, "a") as f:
            f.write(json.dumps(rec) + "\n")
        if getattr(self, "drop_armed", False):
            self.close_connection = True
            self.connection.close()  # a FIN, no close_notify
            return
        if self.path.startswith("/arm-drop"):
            self.drop_armed = True
        if self.headers.get("Upgrade", "").lower() == "websocket":
            self.echo_upgrade()
            return
        if self.path.startswith("/slow/"):
            time.sleep(int(self.path.split("/")[2]) / 1000)
        if self.path.startswith("/hang"):
            time.sleep(3600)
        if self.path.startswith("/gen/"):
            self.gen()
            return
        if self.path.startswith("/genstream/"):
            # N bytes of text/plain, chunked, made as they go
            size = int(self.path.split("/")[2])
            block = gen_body(65536)
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            while size:
                k = min(size, len(block))
                self.wfile.write(b"%x\r\n" % k + block[:k] + b"\r\n")
                size -= k
            self.wfile.write(b"0\r\n\r\n")
            return
        if self.path.startswith("/sse/"):
            self.sse()
            return
        if self.path.partition("?")[0].endswith("/html"):
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(HTML_PAGE)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(HTML_PAGE)
            return
        if self.path.startswith("/big/") or self.path.startswith("/chunked/"):
            size = int(self.path.split("/")[2])
            block = b"x" * 65536
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            if self.path.startswith("/big/"):
                self.send_header("Content-Length", str(size))
                self.end_headers()
                while size:
                    k = min(size, len(block))
                    self.wfile.write(block[:k])
                    size -= k
            else:
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                while size:
                    k = min(size, 10000)
                    self.wfile.write(b"%x\r\n" % k + block[:k] + b"\r\n")
                    size -= k
                if self.path.endswith("/trailers"):
                    self.wfile.write(b"0\r\nX-Sum: abc\r\nGrpc-Status: 0\r\n\r\n")
                else:
                    self.wfile.write(b"0\r\n\r\n")
            return
        body = json.dumps(rec).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        for v in self.headers.get_all("X-Echo-Response-Header") or []:
            name, _, value = v.partition(":")
            self.send_header(name.strip(), value.strip())
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def gen(self):
        # /gen/N?type=T&chunked=1&ce=E&cc=C&etag=X&status=S: N bytes of
        # gen_body(N) with those fields (type application/json by
        # default; a length unless chunked)
        path, _, query = self.path.partition("?")
        q = dict(urllib.parse.parse_qsl(query, keep_blank_values=True))
        size = int(path.split("/")[2])
        body = gen_body(size)
        self.send_response(int(q.get("status", "200")))
        self.send_header("Content-Type", q.get("type", "application/json"))
        for k, h in (("ce", "Content-Encoding"), ("cc", "Cache-Control"),
                     ("etag", "ETag")):
            if k in q:
                self.send_header(h, q[k])
        if q.get("chunked") == "1":
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            if self.command == "HEAD":
                return
            for i in range(0, len(body), 7000):
                piece = body[i:i + 7000]
                self.wfile.write(b"%x\r\n" % len(piece) + piece + b"\r\n")
            self.wfile.write(b"0\r\n\r\n")
            return
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def sse(self):
        # /sse/N/MS: N events of text/event-stream, MS apart, chunked
        n, ms = (int(x) for x in self.path.split("/")[2:4])
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for i in range(n):
            ev = b"data: event %d %s\n\n" % (i, b"x" * 40)
            self.wfile.write(b"%x\r\n" % len(ev) + ev + b"\r\n")
            self.wfile.flush()
            time.sleep(ms / 1000)
        self.wfile.write(b"0\r\n\r\n")

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = do_PATCH = handle_any
    do_OPTIONS = handle_any


ThreadingHTTPServer.daemon_threads = True
ThreadingHTTPServer.allow_reuse_address = True
# a listen backlog for bursts of connections (socketserver's default is 5:
# the kernel then drops handshakes, and a retried one waits seconds)
ThreadingHTTPServer.request_queue_size = 1024
RCVBUF = int(os.environ.get("ECHO_RCVBUF", "0"))
MSS = int(os.environ.get("ECHO_MSS", "0"))


class Server(ThreadingHTTPServer):
    def server_bind(self):
        # before listen: the accepted sockets inherit them
        if RCVBUF:
            self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF,
                                   RCVBUF)
        if MSS:
            self.socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG,
                                   MSS)
        super().server_bind()


class UnixServer(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True
    request_queue_size = 1024

    def server_bind(self):
        if os.path.exists(UNIX):
            os.unlink(UNIX)
        super().server_bind()
        os.chmod(UNIX, 0o777)  # edged runs as another user


TLS = None
if os.environ.get("ECHO_TLS_CERT"):
    import ssl
    TLS = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    TLS.load_cert_chain(os.environ["ECHO_TLS_CERT"],
                        os.environ["ECHO_TLS_KEY"])
    if os.environ.get("ECHO_TLS_CLIENT_CA"):
        TLS.load_verify_locations(os.environ["ECHO_TLS_CLIENT_CA"])
        TLS.verify_mode = ssl.CERT_REQUIRED
    _get_request = Server.get_request

    def get_request(self):
        sock, addr = _get_request(self)
        return TLS.wrap_socket(sock, server_side=True,
                               do_handshake_on_connect=False), addr
    Server.get_request = get_request

srv = UnixServer(UNIX, Handler) if UNIX else Server(("127.0.0.1", PORT),
                                                    Handler)
# a request edged cut short (a rejected chunked body) is expected: no noise
srv.handle_error = lambda request, client_address: None
srv.serve_forever()
