#!/usr/bin/env python3
"""fauth_check.py - forward auth (fauth.h) through edged.

    fauth_check.py serve PORT LOG     the authorization service
    fauth_check.py EDGE_PORT AUTH_LOG ECHO_LOG   the checks

The service logs each subrequest to LOG (a JSON line: method, path,
headers) and answers by the original request's path (X-Original-URI):
  /ok...       200, X-Auth-User: alice, X-Auth-Role: admin, ?cc=VALUE as
               its Cache-Control, ?vary=VALUE as its Vary
  /cookie...   200 X-Auth-User: the Cookie's session=NAME when NAME
               starts with "good", Cache-Control max-age=60; else 401
  /deny        401 text/plain "please sign in", WWW-Authenticate: Basic
  /forbid      403 JSON, Set-Cookie: why=forbidden (and X-Conn, which
               its Connection names)
  /moved       301 with its own Cache-Control
  /interim     100, 103, then 200 X-Auth-User: early
  /login       302 Location: https://login.test/?rd=..., Set-Cookie
  /chunked     401, its body chunked
  /close       401, its body ended by the close (no Content-Length)
  /big         401 with a 100000-byte body (over edged's bound)
  /garbage     a status line that is not one
  /err         500
  /slow        200 after 3 s (over the timeout)
  /hang        never answers
edged listens on 127.0.0.1:EDGE_PORT, one worker, and serves, each to
echo_backend.py (ECHO_LOG):
  fa.test     auth_request to the service (copy_headers X-Auth-User,
              X-Auth-Role; timeout 500ms; cache_ttl 30s)
  down.test   auth_request to a port where nothing listens
  both.test   API keys (none presented here) and auth_request
  route.test  auth_request on route /admin only (the service reads
              /admin/P as P)
  loop.test   auth_request to edged's own listener (domain 127.0.0.1)
and limits.max_inflight_per_route 4.
Prints one line per check: "ok<TAB>name" or "fail<TAB>name<TAB>why".
"""
import hashlib
import http.client
import http.server
import json
import os
import socket
import sys
import threading
import time
import urllib.parse

PORT = 0
ALOG = ""
ELOG = ""


def out(ok, name, why=""):
    if ok:
        print("ok\t%s" % name, flush=True)
    else:
        print("fail\t%s\t%s" % (name, str(why).replace("\n", " ")[:400]), flush=True)


# ---- the service -----------------------------------------------------------

class Service(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def raw(self, data):
        self.wfile.write(data)
        self.wfile.flush()
        self.close_connection = True

    def answer(self, code, hdrs=(), body=b""):
        self.send_response(code)
        for k, v in hdrs:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def handle_one(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        with open(ALOG, "a") as f:
            f.write(json.dumps({"method": self.command, "path": self.path,
                                "headers": list(self.headers.items()),
                                "body": len(body)}) + "\n")
        uri = self.headers.get("X-Original-URI", "")
        u = urllib.parse.urlsplit(uri)
        q = dict(urllib.parse.parse_qsl(u.query))
        p = u.path[6:] if u.path.startswith("/admin/") else u.path
        if p.startswith("/ok"):
            h = [("X-Auth-User", "alice"), ("X-Auth-Role", "admin"), ("X-Other", "not-copied")]
            if "cc" in q:
                h.append(("Cache-Control", q["cc"]))
            if "vary" in q:
                h.append(("Vary", q["vary"]))
            self.answer(200, h)
        elif p.startswith("/cookie"):
            ck = self.headers.get("Cookie", "")
            name = ck.split("session=", 1)[1].split(";")[0] if "session=" in ck else ""
            if name.startswith("good"):
                self.answer(200, [("X-Auth-User", name), ("Cache-Control", "private, max-age=60")])
            else:
                self.answer(401, [("Content-Type", "text/plain")], b"no session")
        elif p == "/deny":
            self.answer(401, [("Content-Type", "text/plain"), ("WWW-Authenticate", 'Basic realm="corp"'),
                              ("Connection", "keep-alive"), ("Cache-Control", "max-age=99")],
                        b"please sign in")
        elif p == "/forbid":
            self.answer(403, [("Content-Type", "application/json"), ("Set-Cookie", "why=forbidden; Path=/"),
                              ("Connection", "X-Conn"), ("X-Conn", "hop")],
                        b'{"error":"forbidden by policy"}')
        elif p == "/moved":
            self.answer(301, [("Location", "https://login.test/"), ("Cache-Control", "public, max-age=3600")])
        elif p == "/interim":
            self.raw(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n"
                     b"HTTP/1.1 200 OK\r\nX-Auth-User: early\r\nContent-Length: 0\r\n\r\n")
        elif p == "/login":
            self.answer(302, [("Location", "https://login.test/?rd=" + urllib.parse.quote(uri, safe="")),
                              ("Set-Cookie", "state=xyz; HttpOnly")])
        elif p == "/chunked":
            self.raw(b"HTTP/1.1 401 Unauthorized\r\nContent-Type: text/plain\r\n"
                     b"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n")
        elif p == "/close":
            self.raw(b"HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n"
                     b"closed body")
        elif p == "/big":
            self.answer(401, [("Content-Type", "text/plain")], b"x" * 100000)
        elif p == "/garbage":
            self.raw(b"HTTP/1.1 2x0 Nope\r\n\r\n")
        elif p == "/err":
            self.answer(500, [], b"boom")
        elif p == "/slow":
            time.sleep(3)
            self.answer(200, [("X-Auth-User", "late")])
        elif p == "/hang":
            time.sleep(30)
        else:
            self.answer(200, [("X-Auth-User", "default")])

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = do_PATCH = handle_one


def serve(port, log):
    global ALOG
    ALOG = log
    open(ALOG, "w").close()
    s = http.server.ThreadingHTTPServer(("127.0.0.1", port), Service)
    s.daemon_threads = True
    s.serve_forever()


# ---- the checks ------------------------------------------------------------

def calls():
    try:
        return [json.loads(l) for l in open(ALOG)]
    except OSError:
        return []


def backend():
    try:
        return [json.loads(l) for l in open(ELOG)]
    except OSError:
        return []


def req(host, path, hdrs=(), method="GET", body=None):
    c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=10)
    c.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
    c.putheader("Host", host)
    for k, v in hdrs:
        c.putheader(k, v)
    if body is not None:
        c.putheader("Content-Length", str(len(body)))
    c.endheaders(body)
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, r.getheaders(), data


def hget(hdrs, name):
    return [v for k, v in hdrs if k.lower() == name.lower()]


def echo_of(data):
    try:
        return json.loads(data)
    except ValueError:
        return {}


def checks():
    # admitted: the named fields copied, the client's own dropped
    n0 = len(calls())
    st, h, d = req("fa.test", "/ok/1?a=b", [("X-Auth-User", "forged"), ("x-auth-role", "root"),
                                           ("X-Custom", "passed"), ("X-Forwarded-Uri", "/forged"),
                                           ("X-Original-URI", "/forged"), ("Connection", "X-Drop"),
                                           ("X-Drop", "hop"), ("Cookie", "a=1")])
    e = echo_of(d)
    users = [v for k, v in e.get("headers", []) if k.lower() == "x-auth-user"]
    roles = [v for k, v in e.get("headers", []) if k.lower() == "x-auth-role"]
    other = [v for k, v in e.get("headers", []) if k.lower() == "x-other"]
    out(st == 200 and users == ["alice"] and roles == ["admin"] and not other,
        "2xx admits: copy_headers go upstream, the client's own of those names do not",
        (st, users, roles, other))
    c = calls()[n0:]
    ok = len(c) == 1
    if ok:
        c = c[0]
        hh = {}
        for k, v in c["headers"]:
            hh.setdefault(k.lower(), []).append(v)
        want = {"host": ["127.0.0.1:%s" % os.environ["P_AUTH"]], "x-original-uri": ["/ok/1?a=b"],
                "x-forwarded-uri": ["/ok/1?a=b"], "x-forwarded-method": ["GET"],
                "x-original-method": ["GET"], "x-forwarded-host": ["fa.test"],
                "x-forwarded-proto": ["http"], "x-custom": ["passed"], "cookie": ["a=1"],
                "x-forwarded-for": ["127.0.0.1"], "connection": ["close"]}
        bad = {k: hh.get(k) for k, v in want.items() if hh.get(k) != v}
        ok = (c["method"] == "GET" and c["path"] == "/check?from=edge" and not bad and
              "x-drop" not in hh and "content-length" not in hh and
              len(hh.get("x-request-id", [])) == 1)
        out(ok, "the subrequest: the method, the URL's path, the client's fields, "
            "edge's X-Forwarded-*/X-Original-*, no hop-by-hop field", (c["method"], c["path"], bad, hh))
    else:
        out(False, "the subrequest", c)

    # a POST: its body goes upstream, not to the service
    n0 = len(calls())
    st, h, d = req("fa.test", "/ok/post", [("Content-Type", "text/plain")], "POST", b"hello body")
    e = echo_of(d)
    c = calls()[n0:]
    out(st == 200 and e.get("body_sha256") == hashlib.sha256(b"hello body").hexdigest() and
        len(c) == 1 and c[0]["method"] == "POST" and c[0]["body"] == 0 and
        ["0"] == [v for k, v in c[0]["headers"] if k.lower() == "content-length"],
        "a POST: the subrequest has its method and no body, the upstream gets the body",
        (st, e.get("body_sha256"), c))

    # refusals relayed
    nb = len(backend())
    st, h, d = req("fa.test", "/deny")
    out(st == 401 and d == b"please sign in" and hget(h, "Content-Type") == ["text/plain"] and
        hget(h, "WWW-Authenticate") == ['Basic realm="corp"'] and
        hget(h, "Cache-Control") == ["no-store"] and hget(h, "Connection") != ["keep-alive"] and
        len(hget(h, "X-Request-Id")) == 1,
        "401: the service's status, body, Content-Type and WWW-Authenticate relayed (no-store)",
        (st, h, d[:100]))
    st, h, d = req("fa.test", "/forbid")
    out(st == 403 and d == b'{"error":"forbidden by policy"}' and
        hget(h, "Set-Cookie") == ["why=forbidden; Path=/"],
        "403: relayed with its body and Set-Cookie", (st, h, d[:100]))
    st, h, d = req("fa.test", "/login?x=1")
    out(st == 302 and hget(h, "Location") == ["https://login.test/?rd=%2Flogin%3Fx%3D1"] and
        hget(h, "Set-Cookie") == ["state=xyz; HttpOnly"],
        "302: the login redirect relayed with its Location", (st, h))
    st, h, d = req("fa.test", "/chunked")
    out(st == 401 and d == b"hello world", "a chunked refusal: its body decoded and relayed", (st, d))
    st, h, d = req("fa.test", "/close")
    out(st == 403 and d == b"closed body", "a refusal ended by the close: relayed", (st, d))
    out(len(backend()) == nb, "no refused request reached the upstream", len(backend()) - nb)

    # forged spellings: the client's never reach the upstream nor the service
    n0 = len(calls())
    st, h, d = req("fa.test", "/ok/spell", [("X_Auth_User", "admin"), ("x_auth_role", "root"),
                                           ("X-Real-IP", "10.0.0.1"), ("X_Original_URI", "/forged"),
                                           ("True-Client-IP", "10.0.0.2"), ("X_Forwarded_Method", "DELETE")])
    e = echo_of(d)
    bad = [(k, v) for k, v in e.get("headers", [])
           if k.lower().replace("_", "-") in ("x-auth-user", "x-auth-role") and v not in ("alice", "admin")
           or (k.lower().replace("_", "-") == "x-auth-user" and v == "admin")]
    c = calls()[n0:]
    sub = [k.lower() for k, v in c[0]["headers"]] if c else []
    out(st == 200 and not bad and c and not any(k in sub for k in ("x-real-ip", "true-client-ip", "x_original_uri",
                                                                    "x_forwarded_method")),
        "a client's X_Auth_User (any '_' spelling) never reaches the upstream; its X-Real-IP, True-Client-IP "
        "and X_Original_URI never reach the service", (st, bad, sub))
    st, h, d = req("fa.test", "/interim")
    users = [v for k, v in echo_of(d).get("headers", []) if k.lower() == "x-auth-user"]
    out(st == 200 and users == ["early"], "100 and 103 before the answer: skipped", (st, users))
    st, h, d = req("fa.test", "/moved")
    out(st == 301 and hget(h, "Cache-Control") == ["no-store"] and hget(h, "Location") == ["https://login.test/"],
        "a 301 login redirect relayed with Cache-Control: no-store, not the service's", (st, h))
    st, h, d = req("fa.test", "/forbid")
    out(st == 403 and not hget(h, "X-Conn"), "a refusal's field named by its Connection is not relayed", h)

    # unavailable
    for path, why in (("/big", "a refusal over 64 KiB"), ("/garbage", "a malformed answer"),
                      ("/err", "a 500"), ("/slow", "no answer in the timeout"),
                      ("/hang", "a service that never answers")):
        t = time.monotonic()
        st, h, d = req("fa.test", path)
        el = time.monotonic() - t
        out(st == 503 and b'"error":"auth_unavailable"' in d and el < 2.5,
            "%s: 503 auth_unavailable (%.2fs)" % (why, el), (st, d[:200], el))
    st, h, d = req("down.test", "/x")
    out(st == 503 and b'"error":"auth_unavailable"' in d, "a service that refuses connections: 503",
        (st, d[:200]))

    # the cache
    n0 = len(calls())
    r1 = req("fa.test", "/cookie/1", [("Cookie", "session=good-a")])
    r2 = req("fa.test", "/cookie/2", [("Cookie", "session=good-a")])
    n1 = len(calls())
    r3 = req("fa.test", "/cookie/3", [("Cookie", "session=good-b")])
    r4 = req("fa.test", "/cookie/4", [("Cookie", "session=good-b"), ("Authorization", "Bearer x")])
    n2 = len(calls())
    u2 = [v for k, v in echo_of(r2[2]).get("headers", []) if k.lower() == "x-auth-user"]
    u3 = [v for k, v in echo_of(r3[2]).get("headers", []) if k.lower() == "x-auth-user"]
    n3 = len(calls())
    a = req("fa.test", "/ok/anon?cc=max-age%3D60")
    b = req("fa.test", "/ok/anon?cc=max-age%3D60")
    out(a[0] == b[0] == 200 and len(calls()) - n3 == 2,
        "a request without Cookie or Authorization is never taken from the cache", len(calls()) - n3)
    out(r1[0] == r2[0] == r3[0] == r4[0] == 200 and n1 - n0 == 1 and n2 - n1 == 2 and
        u2 == ["good-a"] and u3 == ["good-b"],
        "max-age: the same Cookie is admitted from the cache with the fields it got; "
        "another Cookie or Authorization asks again", (r1[0], r2[0], r3[0], r4[0], n1 - n0, n2 - n1, u2, u3))
    n0 = len(calls())
    a = req("fa.test", "/cookie/x", [("Cookie", "session=bad")])
    b = req("fa.test", "/cookie/x", [("Cookie", "session=bad")])
    out(a[0] == b[0] == 401 and len(calls()) - n0 == 2, "a refusal is never cached", (a[0], b[0]))
    for q, why in (("cc=no-store,max-age=60", "no-store"), ("cc=max-age=60&vary=X-Original-URI", "Vary: X-Original-URI"),
                   ("cc=max-age%3D0", "max-age=0"), ("x=1", "no Cache-Control")):
        n0 = len(calls())
        a = req("fa.test", "/ok/nc?" + q, [("Cookie", "session=" + why)])
        b = req("fa.test", "/ok/nc?" + q, [("Cookie", "session=" + why)])
        out(a[0] == b[0] == 200 and len(calls()) - n0 == 2, "%s: not cached" % why, (a[0], b[0], len(calls()) - n0))
    n0 = len(calls())
    a = req("fa.test", "/ok/sm?cc=s-maxage%3D60,max-age%3D0", [("Cookie", "session=sm")])
    b = req("fa.test", "/ok/sm?cc=s-maxage%3D60,max-age%3D0", [("Cookie", "session=sm")])
    out(a[0] == b[0] == 200 and len(calls()) - n0 == 1, "s-maxage wins over max-age", len(calls()) - n0)

    # gates together, and a route's own
    n0 = len(calls())
    st, h, d = req("both.test", "/x")
    out(st == 401 and b'"error":"unauthorized"' in d and len(calls()) == n0,
        "API keys and auth_request: no key is refused before the service is asked", (st, d[:100]))
    n0 = len(calls())
    s1 = req("route.test", "/public")[0]
    n1 = len(calls())
    s2 = req("route.test", "/admin/deny")[0]
    s3 = req("route.test", "/admin/x")[0]
    out(s1 == 200 and n1 == n0 and s2 == 401 and s3 == 200 and len(calls()) - n1 == 2,
        "a route's auth_request: its paths ask, the others do not", (s1, s2, s3, n1 - n0, len(calls()) - n1))

    # a client that leaves while the service is asked
    nb = len(backend())
    s = socket.create_connection(("127.0.0.1", PORT))
    s.sendall(b"GET /slow HTTP/1.1\r\nHost: fa.test\r\n\r\n")
    time.sleep(0.1)
    s.close()
    time.sleep(0.8)
    st, h, d = req("fa.test", "/ok/after")
    out(st == 200 and len(backend()) == nb + 1, "a client gone while the service is asked: nothing sent upstream, "
        "edged serves on", (st, len(backend()) - nb))

    # the in-flight cap bounds the subrequests (limits.max_inflight_per_route 4)
    n0 = len(calls())
    res = []

    def one():
        try:
            res.append(req("fa.test", "/hang")[0])
        except OSError as ex:
            res.append(repr(ex))
    th = [threading.Thread(target=one) for _ in range(8)]
    for t in th:
        t.start()
    for t in th:
        t.join()
    out(sorted(res) == [503] * 8 and len(calls()) - n0 <= 4,
        "8 requests at once on a route capped at 4: at most 4 subrequests, the rest 503 overloaded",
        (res, len(calls()) - n0))

    # a subrequest that comes back to edge: refused as a loop (508), 503 here
    n0 = len(calls())
    t = time.monotonic()
    st, h, d = req("loop.test", "/x")
    out(st == 503 and b"auth_unavailable" in d and time.monotonic() - t < 2,
        "auth_request pointing at edged itself: one loop refused, 503 auth_unavailable", (st, d[:100]))

    # pipelined: the second request waits for the first's answer
    s = socket.create_connection(("127.0.0.1", PORT))
    s.settimeout(10)
    s.sendall(b"GET /ok/p1 HTTP/1.1\r\nHost: fa.test\r\n\r\nGET /deny HTTP/1.1\r\nHost: fa.test\r\n\r\n")
    buf = b""
    t = time.monotonic()
    while buf.count(b"HTTP/1.1 ") < 2 or not buf.endswith(b"please sign in"):
        chunk = s.recv(65536)
        if not chunk or time.monotonic() - t > 8:
            break
        buf += chunk
    s.close()
    out(buf.startswith(b"HTTP/1.1 200") and b"HTTP/1.1 401" in buf and buf.endswith(b"please sign in"),
        "two pipelined requests: each answered in turn", buf[:200])


def main():
    global PORT, ALOG, ELOG
    if sys.argv[1] == "serve":
        serve(int(sys.argv[2]), sys.argv[3])
        return
    PORT = int(sys.argv[1])
    ALOG = sys.argv[2]
    ELOG = sys.argv[3]
    try:
        checks()
    except Exception as ex:  # one line, not a trace
        out(False, "the checks ran to the end", repr(ex))


if __name__ == "__main__":
    main()
