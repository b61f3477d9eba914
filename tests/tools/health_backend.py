#!/usr/bin/env python3
"""health_backend.py - a backend whose health edged's active checks probe.

    health_backend.py PORT NAME STATUSFILE

GET /healthz answers with the status written in STATUSFILE (200 when the
file is missing or empty), so a test switches the backend's health by
writing "500" or "200" there. Every other path answers 200 with
{"backend": NAME}. HTTP/1.1, keep-alive.
"""
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT = int(sys.argv[1])
NAME = sys.argv[2]
STATUS = sys.argv[3]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        code = 200
        if self.path == "/healthz":
            try:
                with open(STATUS) as f:
                    code = int(f.read().strip() or "200")
            except (OSError, ValueError):
                code = 200
        body = json.dumps({"backend": NAME, "path": self.path}).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


ThreadingHTTPServer.daemon_threads = True
ThreadingHTTPServer.allow_reuse_address = True
# a listen backlog for bursts of connections (socketserver's default is 5)
ThreadingHTTPServer.request_queue_size = 1024
srv = ThreadingHTTPServer(("127.0.0.1", PORT), Handler)
srv.handle_error = lambda request, client_address: None
srv.serve_forever()
