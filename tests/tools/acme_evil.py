#!/usr/bin/env python3
"""acme_evil.py - a broken or hostile ACME server over TLS, for what
pebble never does (tests/integration/test_acme_client.sh):

    acme_evil.py PORT CERT KEY

The first path segment, up to a '-', picks the behaviour; the directory
is https://HOST:PORT/CASE[-TAG]/dir (HOST as the client sent it). JWS
bodies are read and not checked.

    badjson     the directory is not JSON
    array       the directory is a JSON array
    ctype       the directory is text/html
    missing     the directory has no newAccount
    httpurls    the directory's URLs are http://
    huge        a 2 MiB directory (Content-Length)
    hugeclose   a 2 MiB directory, read until the close
    hugehdr     100 KiB of header fields
    slow        no answer for 30 s
    trickle     a byte of the body every 200 ms, forever
    redirect    301 to a real directory
    problem     500 with a problem document (serverInternal)
    badproblem  400 "problem" that is not JSON
    badnonce    every POST refused with badNonce (a fresh nonce each time)
    nolocation  newAccount answers without a Location
    nohttp01    the authorization offers dns-01 only
    badtoken    the http-01 token is not base64url
    otherident  the authorization is for a name the order did not ask for
    pending     the authorization stays pending (Retry-After: 1)
    badpem      the certificate is not PEM
    badb64      the certificate's PEM holds bad base64
    otherkey    (or any other) the certificate is CERT, valid PEM but
                not for the order's key

GET /stats/CASE[-TAG] answers {"posts": N, "authz": N} for it.
"""
import base64
import json
import socket
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT = int(sys.argv[1])
CERT, KEY = sys.argv[2], sys.argv[3]
STATS = {}
NAMES = {}  # tag: the name its order asked for
LOCK = threading.Lock()


def count(case, what):
    with LOCK:
        STATS.setdefault(case, {"posts": 0, "authz": 0})
        STATS[case][what] += 1


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def base(self, case):
        return "https://%s/%s" % (self.headers.get("Host", "localhost"), case)

    def send(self, status, ctype, body, extra=()):
        if isinstance(body, str):
            body = body.encode()
        self.send_response(status)
        if ctype:
            self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Replay-Nonce", "bm9uY2U%d" % int(time.time() * 1e6))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def js(self, obj, status=200, extra=()):
        self.send(status, "application/json", json.dumps(obj), extra)

    def directory(self, case):
        b = self.base(self.tag)
        d = {"newNonce": b + "/nonce", "newAccount": b + "/acct",
             "newOrder": b + "/order"}
        if case == "badjson":
            return self.send(200, "application/json", '{"newNonce": ')
        if case == "array":
            return self.send(200, "application/json", "[1, 2]")
        if case == "ctype":
            return self.send(200, "text/html", "<html>hello</html>")
        if case == "missing":
            del d["newAccount"]
        if case == "httpurls":
            d = {k: v.replace("https:", "http:") for k, v in d.items()}
        if case == "huge":
            return self.send(200, "application/json",
                             json.dumps({"x": "a" * (2 << 20)}))
        if case == "hugeclose":
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(b'{"x": "' + b"a" * (2 << 20) + b'"}')
            self.close_connection = True
            return None
        if case == "hugehdr":
            self.send_response(200)
            for i in range(1000):
                self.send_header("X-Filler-%d" % i, "f" * 100)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")
            return None
        if case == "slow":
            time.sleep(30)
        if case == "trickle":
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "1000000")
            self.end_headers()
            for _ in range(300):
                self.wfile.write(b" ")
                self.wfile.flush()
                time.sleep(0.2)
            return None
        if case == "redirect":
            return self.send(301, "text/plain", "moved",
                             [("Location", self.base("otherkey") + "/dir")])
        if case == "problem":
            return self.send(500, "application/problem+json", json.dumps(
                {"type": "urn:ietf:params:acme:error:serverInternal",
                 "detail": "the evil CA is down", "status": 500}))
        if case == "badproblem":
            return self.send(400, "application/problem+json", "oops")
        return self.js(d)

    def do_HEAD(self):
        self.send(200, None, b"")

    def do_GET(self):
        parts = self.path.split("/")
        if len(parts) >= 3 and parts[1] == "stats":
            with LOCK:
                return self.js(STATS.get(parts[2], {"posts": 0, "authz": 0}))
        if len(parts) >= 3 and parts[2] == "dir":
            self.tag = parts[1]
            return self.directory(parts[1].split("-")[0])
        return self.send(404, "text/plain", "no")

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(n) if n else b""
        parts = self.path.split("/")
        tag, what = parts[1], parts[2] if len(parts) > 2 else ""
        case = tag.split("-")[0]
        b = self.base(tag)
        count(tag, "posts")
        if case == "badnonce":
            return self.send(400, "application/problem+json", json.dumps(
                {"type": "urn:ietf:params:acme:error:badNonce",
                 "detail": "JWS has an invalid anti-replay nonce"}))
        if what == "acct":
            loc = [] if case == "nolocation" else [("Location", b + "/acct/1")]
            return self.js({"status": "valid"}, 201, loc)
        if what == "order":
            # the order's first name, for its authorization's identifier
            try:
                p = json.loads(body)["payload"]
                p = json.loads(base64.urlsafe_b64decode(p + "=" * (-len(p) % 4)))
                with LOCK:
                    NAMES[tag] = p["identifiers"][0]["value"]
            except Exception:
                pass
            return self.js({"status": "pending",
                            "authorizations": [b + "/authz/1"],
                            "finalize": b + "/finalize"}, 201,
                           [("Location", b + "/order/1")])
        if what == "authz":
            count(tag, "authz")
            chal = {"type": "http-01", "url": b + "/chal/1",
                    "token": "dG9rZW4tdG9rZW4tdG9rZW4", "status": "pending"}
            if case == "nohttp01":
                chal["type"] = "dns-01"
            if case == "badtoken":
                chal["token"] = "bad token/../x"
            with LOCK:
                ident = {"type": "dns", "value": NAMES.get(tag, "")}
            if case == "otherident":
                ident["value"] = "evil.example"
            if case == "pending":
                return self.js({"status": "pending", "identifier": ident,
                                "challenges": [chal]},
                               200, [("Retry-After", "1")])
            return self.js({"status": "pending" if case in (
                "nohttp01", "badtoken", "otherident") else "valid",
                "identifier": ident,
                "challenges": [chal]})
        if what == "chal":
            return self.js({"status": "processing"})
        if what == "finalize":
            return self.js({"status": "valid",
                            "certificate": b + "/cert"})
        if what == "cert":
            if case == "badpem":
                body = "this is not a certificate\n"
            elif case == "badb64":
                body = ("-----BEGIN CERTIFICATE-----\n!!!!not*base64!!!!\n"
                        "-----END CERTIFICATE-----\n")
            else:
                body = open(CERT).read()
            return self.send(200, "application/pem-certificate-chain", body)
        return self.send(404, "text/plain", "no")


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024

    def server_bind(self):
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        super().server_bind()


def main():
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(CERT, KEY)
    srv = Server(("127.0.0.1", PORT), Handler)
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
