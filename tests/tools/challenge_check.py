#!/usr/bin/env python3
"""challenge_check.py - the proof-of-work challenge (challenge.h) through edged.

    challenge_check.py EDGE_PORT KEY_HEX [KEY2_HEX]
    challenge_check.py solve TOKEN          (prints the smallest solution)
    challenge_check.py pass KEY_HEX ENV CLIENT EXPIRY   (prints a pass)
    challenge_check.py issued EDGE_PORT HOST   (solves HOST's page as
                            127.0.0.1 and prints the pass edge gives)
    challenge_check.py signer PASS ENV CLIENT KEY_HEX...   (prints which
                            key signed PASS, 1 for the first; 0: none)

edged listens on 127.0.0.1:EDGE_PORT, trusts 127.0.0.1's X-Forwarded-For
(each check is its own client address), signs with KEY_HEX (its
challenge.key_file; KEY2_HEX the file's second line, verifying only), has
the global rate limit "2/s" (burst 10), and serves, each to
echo_backend.py, environments with difficulty 8:
  e-always  always.test  mode always
  e-other   other.test   mode always
  e-newip   newip.test   mode new_ip
  e-rl      rl.test      mode on_rate_limit
  e-off     off.test     no challenge
Prints one line per check: "ok<TAB>name" or "fail<TAB>name<TAB>why".
Tokens and passes made here with the keys are edge's own format, so the
checks also show that another host with the key verifies them.
"""
import hashlib
import hmac
import http.client
import ipaddress
import json
import os
import re
import sys
import time

PORT = 0
KEY = KEY2 = None
HTML = "text/html,application/xhtml+xml,*/*;q=0.8"
TOKEN_RE = re.compile(r'"(1\.\d+\.\d+\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{22})"')


def out(ok, name, why=""):
    if ok:
        print("ok\t%s" % name, flush=True)
    else:
        print("fail\t%s\t%s" % (name, str(why).replace("\n", " ")[:400]), flush=True)


SEQ = [0]


def fresh(client):
    """Another address of client's /24: the rate limit (per address) is
    not what a check is about, the pass (per /24) stays good."""
    SEQ[0] = SEQ[0] % 250 + 1
    return client.rsplit(".", 1)[0] + ".%d" % SEQ[0]


def req(method, host, path, client, accept=None, cookie=None, extra=None, same=False):
    c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=10)
    h = {"Host": host, "X-Forwarded-For": client if same else fresh(client)}
    if accept:
        h["Accept"] = accept
    if cookie is not None:
        h["Cookie"] = cookie
    if extra:
        h.update(extra)
    c.request(method, path, headers=h)
    r = c.getresponse()
    body = r.read()
    hdrs = r.getheaders()
    c.close()
    return r.status, hdrs, body


def hget(hdrs, name):
    for k, v in hdrs:
        if k.lower() == name.lower():
            return v
    return None


def b64u(b):
    import base64
    return base64.urlsafe_b64encode(b).decode().rstrip("=")


def prefix_bytes(client):
    a = ipaddress.ip_address(client)
    if a.version == 4:
        net = ipaddress.ip_network(client + "/24", strict=False)
        return bytes([2, 24]) + net.network_address.packed + bytes(12)
    net = ipaddress.ip_network(client + "/64", strict=False)
    return bytes([10, 64]) + net.network_address.packed


def mac(key, what, env, client, text):
    m = what.encode() + b"\0" + env.encode() + b"\0" + prefix_bytes(client) + text.encode()
    return b64u(hmac.new(key, m, hashlib.sha256).digest()[:16])


def make_pass(key, env, client, exp):
    t = "1.%d." % exp
    return t + mac(key, "p", env, client, t)


def make_token(key, env, client, exp, diff=8):
    t = "1.%d.%d.%s." % (exp, diff, b64u(os.urandom(16)))
    return t + mac(key, "t", env, client, t)


def zero_bits(d):
    z = 0
    for b in d:
        if b == 0:
            z += 8
            continue
        return z + 8 - b.bit_length()
    return z


def solve(token):
    diff = int(token.split(".")[2])
    n = 0
    while zero_bits(hashlib.sha256(("%s.%d" % (token, n)).encode()).digest()) < diff:
        n += 1
    return n


def unsolved(token):
    diff = int(token.split(".")[2])
    n = 0
    while zero_bits(hashlib.sha256(("%s.%d" % (token, n)).encode()).digest()) >= diff:
        n += 1
    return n


def page_token(host, client, path="/"):
    st, h, b = req("GET", host, path, client, accept=HTML)
    m = TOKEN_RE.search(b.decode("utf-8", "replace"))
    return st, h, b, (m.group(1) if m else None)


def exchange(host, client, token, n, ret="%2F", accept=HTML):
    path = "/_edge/challenge?t=%s&n=%s&r=%s" % (token, n, ret)
    return req("POST", host, path, client, accept=accept, extra={"Content-Length": "0"})


def cookie_of(h):
    sc = hget(h, "Set-Cookie") or ""
    m = re.match(r"edge_pass=([^;]+)", sc)
    return m.group(1) if m else None


def get_pass(host, client, ret="%2F"):
    st, h, b, tok = page_token(host, client)
    if not tok:
        return None, None
    st, h, b = exchange(host, client, tok, solve(tok), ret)
    return cookie_of(h), h


def backend_saw(b):
    try:
        return json.loads(b)
    except ValueError:
        return None


def is_challenge_json(st, h, b):
    try:
        j = json.loads(b)
    except ValueError:
        return False
    return st == 403 and j.get("error") == "challenge_required" and \
        (hget(h, "Content-Type") or "").startswith("application/json")


def main():
    now = int(time.time())
    c1 = "198.51.100.7"

    # no challenge: straight through
    st, h, b = req("GET", "off.test", "/", c1, accept=HTML)
    out(st == 200 and backend_saw(b), "an environment without a challenge: 200 from the backend", st)

    # the page
    st, h, b, tok = page_token("always.test", c1, "/app?x=1&y='q'")
    csp = hget(h, "Content-Security-Policy") or ""
    out(st == 403 and (hget(h, "Content-Type") or "").startswith("text/html") and tok and
        "default-src 'none'" in csp and hget(h, "Cache-Control") == "no-store" and
        b"\\u0027q\\u0027" in b and b"'q'" not in b and int(tok.split(".")[2]) == 8,
        "a browser's GET: 403, the HTML page with a token of difficulty 8, its CSP, no-store, the return path escaped",
        "%s %s %s" % (st, h, b[:200]))
    out(len(b) < 16384 and b"http://" not in b and b"https://" not in b and b" src=" not in b,
        "the page is self-contained (%d bytes, no external resource)" % len(b), b[:300])

    # other challenged requests: JSON
    st, h, b = req("GET", "always.test", "/api", c1, accept="application/json")
    out(is_challenge_json(st, h, b), "a GET that is not a browser's: 403 challenge_required, JSON", "%s %s" % (st, b[:200]))
    st, h, b = req("POST", "always.test", "/form", c1, accept=HTML, extra={"Content-Length": "0"})
    out(is_challenge_json(st, h, b), "a POST (even accepting text/html): 403 challenge_required, JSON", "%s %s" % (st, b[:200]))
    st, h, b = req("GET", "always.test", "/_edge/challenge", c1, accept=HTML)
    out(st == 405 and hget(h, "Allow") == "POST", "GET of the exchange: 405, Allow: POST", "%s %s" % (st, h))
    st, h, b = req("GET", "off.test", "/_edge/challenge", c1, accept=HTML)
    j = backend_saw(b)
    out(st == 200 and j and j.get("path") == "/_edge/challenge",
        "the exchange's path of an environment without a challenge: the backend's", st)

    # an environment that answers unmatched paths 404: the exchange still edge's
    st, h, b, t = page_token("nf.test", c1, "/app/x")
    st, h, b = exchange("nf.test", c1, t, solve(t), "%2Fapp%2Fx") if t else (0, [], b"")
    p = cookie_of(h)
    st2, h2, b2 = req("GET", "nf.test", "/app/x", c1, accept=HTML, cookie="edge_pass=%s" % p)
    st3, h3, b3 = req("GET", "nf.test", "/else", c1, accept=HTML, cookie="edge_pass=%s" % p)
    out(st == 303 and p and st2 == 200 and st3 == 404,
        "unmatched = not_found: the exchange answered (303), then /app/x admitted, /else 404", (st, st2, st3))

    # a wrong solution, then the right one
    st, h, b = exchange("always.test", c1, tok, unsolved(tok))
    out(st == 403 and TOKEN_RE.search(b.decode()) and not hget(h, "Set-Cookie"),
        "a wrong solution: challenged again (a new page), no cookie", "%s %s" % (st, h))
    st, h, b = exchange("always.test", c1, tok, solve(tok), "%2Fapp%3Fx%3D1%26y%3D%253Cb%253E")
    sc = hget(h, "Set-Cookie") or ""
    good = cookie_of(h)
    out(st == 303 and hget(h, "Location") == "/app?x=1&y=%3Cb%3E" and good and
        "Path=/" in sc and "Max-Age=86400" in sc and "HttpOnly" in sc and "SameSite=Lax" in sc and
        "Secure" not in sc and hget(h, "Cache-Control") == "no-store",
        "the right solution: 303 back to the page, the pass cookie (Path=/, Max-Age=86400, HttpOnly, SameSite=Lax), "
        "no-store",
        "%s %s" % (st, h))
    st, h, b = req("GET", "always.test", "/app?x=1", c1, accept=HTML, cookie="edge_pass=" + (good or ""))
    j = backend_saw(b)
    out(st == 200 and j and j.get("path") == "/app?x=1", "with the pass: the backend's answer", "%s %s" % (st, b[:200]))
    st, h, b = exchange("always.test", c1, tok, solve(tok))
    out(st == 403 and not hget(h, "Set-Cookie"), "the same solution again (replayed): challenged, no cookie", "%s %s" % (st, h))

    # the pass is the client prefix's, the environment's, and signed
    st, h, b = req("GET", "always.test", "/", "198.51.100.99", accept=HTML, cookie="edge_pass=" + good)
    out(st == 200, "the pass from another address of the same /24: admitted", st)
    st, h, b = req("GET", "always.test", "/", "203.0.113.9", accept="*/*", cookie="edge_pass=" + good)
    out(is_challenge_json(st, h, b), "another client's pass (another /24): challenged", st)
    st, h, b = req("GET", "other.test", "/", c1, accept="*/*", cookie="edge_pass=" + good)
    out(is_challenge_json(st, h, b), "another environment's pass: challenged", st)
    tampered = good[:-1] + ("A" if good[-1] != "A" else "B")
    st, h, b = req("GET", "always.test", "/", c1, accept="*/*", cookie="edge_pass=" + tampered)
    out(is_challenge_json(st, h, b), "a tampered pass (its MAC): challenged", st)
    parts = good.split(".")
    longer = "1.%d.%s" % (int(parts[1]) + 86400, parts[2])
    st, h, b = req("GET", "always.test", "/", c1, accept="*/*", cookie="edge_pass=" + longer)
    out(is_challenge_json(st, h, b), "a pass with its expiry pushed on: challenged", st)
    for junk in ["", "x", "1.", "1.99999999999999999999.AAAA", "2.%d.%s" % (now + 99, parts[2]), "1.%d" % now,
                 "1.-5.%s" % parts[2], "1.%d.%s" % (now + 99, "A" * 200)]:
        st, h, b = req("GET", "always.test", "/", c1, accept="*/*", cookie="edge_pass=" + junk)
        out(is_challenge_json(st, h, b), "a malformed pass %r: challenged" % junk[:30], st)
    st, h, b = req("GET", "always.test", "/", c1, accept="*/*",
                   cookie='a=1; edge_pass=bad; theme=dark;edge_pass="%s"' % good)
    out(st == 200, "the pass among other cookies, after a bad one, quoted: admitted", st)
    st, h, b = req("GET", "always.test", "/", c1, accept="*/*", cookie="a=1",
                   extra={"cookie": "edge_pass=" + good})
    out(st == 200, "the pass in a second Cookie field: admitted", st)
    bad = "; ".join(["edge_pass=" + tampered] * 3)
    st, h, b = req("GET", "always.test", "/", c1, accept="*/*", cookie=bad + "; edge_pass=" + good)
    out(st == 200, "the pass after 3 bad ones: admitted", st)
    bad = "; ".join(["edge_pass=" + tampered] * 600)
    st, h, b = req("GET", "always.test", "/", c1, accept="*/*", cookie=bad + "; edge_pass=" + good)
    out(is_challenge_json(st, h, b), "the pass after 600 forged ones: only the first 4 checked (no HMAC flood), challenged", st)
    st, h, b = req("GET", "always.test", "/.well-known/acme-challenge/tok1", c1, accept=HTML)
    j = backend_saw(b)
    out(st == 200 and j and j.get("path") == "/.well-known/acme-challenge/tok1",
        "an ACME HTTP-01 validation: never challenged", "%s %s" % (st, b[:100]))
    for path, method in [("/.well-known/acme-challenge/../../admin", "GET"),
                         ("/.well-known/acme-challenge/a/b", "GET"),
                         ("/.well-known/acme-challenge/tok1?x=1", "GET"),
                         ("/.well-known/acme-challenge/", "GET"),
                         ("/.well-known/acme-challenge/%2e%2e", "GET"),
                         ("/.well-known/acme-challenge/tok1", "POST")]:
        st, h, b = req(method, "always.test", path, c1, accept="*/*", extra={"Content-Length": "0"})
        out(is_challenge_json(st, h, b), "%s %s (not a token): challenged" % (method, path), st)

    # passes and tokens made with the key elsewhere (another host)
    p = make_pass(KEY, "e-always", c1, now + 3600)
    st, h, b = req("GET", "always.test", "/", c1, accept="*/*", cookie="edge_pass=" + p)
    out(st == 200, "a pass another host signed with the key: admitted", st)
    if KEY2:
        p = make_pass(KEY2, "e-always", c1, now + 3600)
        st, h, b = req("GET", "always.test", "/", c1, accept="*/*", cookie="edge_pass=" + p)
        out(st == 200, "a pass signed with the second (older) key: admitted", st)
        t = make_token(KEY2, "e-always", c1, now + 300)
        st, h, b = exchange("always.test", c1, t, solve(t))
        c = cookie_of(h) or ""
        out(st == 303 and c and c.split(".")[2] == mac(KEY, "p", "e-always", c1, "1.%s." % c.split(".")[1]),
            "a token of the second key exchanged: the new pass signed with the first", "%s %s" % (st, h))
    p = make_pass(KEY, "e-always", c1, now - 1)
    st, h, b = req("GET", "always.test", "/", c1, accept="*/*", cookie="edge_pass=" + p)
    out(is_challenge_json(st, h, b), "an expired pass: challenged", st)
    p = make_pass(b"\x01" * 32, "e-always", c1, now + 3600)
    st, h, b = req("GET", "always.test", "/", c1, accept="*/*", cookie="edge_pass=" + p)
    out(is_challenge_json(st, h, b), "a pass signed with an unknown key: challenged", st)
    t = make_token(KEY, "e-always", c1, now - 1)
    st, h, b = exchange("always.test", c1, t, solve(t), accept="*/*")
    out(is_challenge_json(st, h, b) and not hget(h, "Set-Cookie"), "an expired token solved: challenged, no cookie", st)
    t = make_token(KEY, "e-other", c1, now + 300)
    st, h, b = exchange("always.test", c1, t, solve(t), accept="*/*")
    out(is_challenge_json(st, h, b), "another environment's token solved: challenged", st)
    t = make_token(KEY, "e-always", "203.0.113.9", now + 300)
    st, h, b = exchange("always.test", c1, t, solve(t), accept="*/*")
    out(is_challenge_json(st, h, b), "another client's token solved: challenged", st)
    t = make_token(KEY, "e-always", c1, now + 300, diff=1)
    t = t[:-22] + mac(KEY, "t", "e-always", c1, t[:-22])
    forged = t.replace(".1.", ".8.", 1)  # difficulty changed after signing
    st, h, b = exchange("always.test", c1, forged, solve(t), accept="*/*")
    out(is_challenge_json(st, h, b), "a token with its difficulty changed: challenged", st)
    for junk in ["", "1.2.3", tok[:-1], "x" * 500, tok + ".1"]:
        st, h, b = exchange("always.test", c1, junk, "0", accept="*/*")
        out(is_challenge_json(st, h, b), "a malformed token %r: challenged" % junk[:20], st)
    t = make_token(KEY, "e-always", c1, now + 300)
    for n in ["-1", "01", "1e3", "99999999999999999999", "", "%30"]:
        st, h, b = exchange("always.test", c1, t, n, accept="*/*")
        out(is_challenge_json(st, h, b), "a solution %r that is no decimal: challenged" % n, st)

    # where the exchange sends the browser: a local path only
    for r, want in [("%2F%2Fevil.example%2Fx", "/"), ("https%3A%2F%2Fevil.example", "/"),
                    ("%2F%5Cevil.example", "/"), ("%2Fok%0d%0aSet-Cookie:%20x=1", "/"),
                    ("%2Fa%20b", "/"), ("%2Fdeep%2Fpath%3Fq%3D1", "/deep/path?q=1"), ("%2F%C3%A9", "/")]:
        t = make_token(KEY, "e-always", c1, now + 300)
        st, h, b = exchange("always.test", c1, t, solve(t), r)
        out(st == 303 and hget(h, "Location") == want, "return %s: Location %s" % (r, want), "%s %s" % (st, h))

    # new_ip: a prefix that showed a pass is admitted without one
    c2 = "192.0.2.10"
    st, h, b = req("GET", "newip.test", "/", c2, accept="*/*")
    out(is_challenge_json(st, h, b), "new_ip: a new address: challenged", st)
    p, h = get_pass("newip.test", c2)
    out(p is not None, "new_ip: the page solved", h)
    st, h, b = req("GET", "newip.test", "/", "192.0.2.11", accept="*/*")
    out(st == 200, "new_ip: then the prefix without a cookie: admitted", st)
    st, h, b = req("GET", "newip.test", "/", "192.0.3.10", accept="*/*")
    out(is_challenge_json(st, h, b), "new_ip: another prefix: challenged", st)
    st, h, b = req("GET", "always.test", "/", "192.0.2.10", accept="*/*")
    out(is_challenge_json(st, h, b), "new_ip's prefix known is that environment's only (always.test challenges it)", st)

    # on_rate_limit: over the limit (10/s, burst 10) challenged, not 429;
    # then challenged until it solves, limited as ever after
    c3 = "192.0.2.50"
    # (until the bucket runs dry: a loaded machine sends slower, and the
    # bucket refills at 2/s meanwhile)
    codes = []
    for _ in range(60):
        x = req("GET", "rl.test", "/", c3, accept="*/*", same=True)
        codes.append(x[0])
        if x[0] != 200:
            break
    out(codes[:10] == [200] * 10, "on_rate_limit: under the limit: admitted", codes)
    out(codes[-1] == 403 and is_challenge_json(*x), "on_rate_limit: over the limit: 403 challenge_required, not 429",
        codes)
    time.sleep(1.2)  # 2 tokens back
    st, h, b = req("GET", "rl.test", "/", "192.0.2.51", accept="*/*", same=True)
    out(is_challenge_json(st, h, b), "on_rate_limit: under the limit again, but the /24 flagged: challenged", st)
    st, h, b, tok = page_token("rl.test", "192.0.2.52")
    st, h, b = exchange("rl.test", "192.0.2.52", tok, solve(tok)) if tok else (0, [], b"")
    p = cookie_of(h)
    st, h, b = req("GET", "rl.test", "/", "192.0.2.53", accept="*/*", cookie="edge_pass=%s" % p, same=True)
    out(p and st == 200, "on_rate_limit: with a pass: admitted", st)
    codes = []
    for _ in range(60):
        codes.append(req("GET", "rl.test", "/", "192.0.2.53", accept="*/*", cookie="edge_pass=%s" % p,
                         same=True)[0])
        if codes[-1] != 200:
            break
    out(codes[-1] == 429 and 403 not in codes, "on_rate_limit: with a pass over the limit: 429", codes)
    st, h, b = req("GET", "rl.test", "/", "192.0.5.77", accept="*/*")
    out(st == 200, "on_rate_limit: another prefix: admitted", st)

    # mode always over the limit: the 429, not a page
    codes = []
    for _ in range(60):
        codes.append(req("GET", "always.test", "/", "192.0.6.1", accept=HTML, same=True)[0])
        if codes[-1] != 403:
            break
    out(len(codes) > 10 and codes[-1] == 429,
        "always, over the limit: 429 (the rate limit first), not another page", codes)


if __name__ == "__main__":
    if sys.argv[1] == "solve":
        print(solve(sys.argv[2]))
    elif sys.argv[1] == "pass":
        print(make_pass(bytes.fromhex(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5])))
    elif sys.argv[1] == "issued":
        # issued PORT HOST: a pass edge gives for a solved page (client 127.0.0.1)
        PORT = int(sys.argv[2])
        print(get_pass(sys.argv[3], "127.0.0.1")[0] or "")
    elif sys.argv[1] == "signer":
        # signer PASS ENV CLIENT KEYHEX...: which key (1, 2, ...) signed PASS, 0: none
        t, _, m = sys.argv[2].rpartition(".")
        keys = [bytes.fromhex(k) for k in sys.argv[5:]]
        print(next((i + 1 for i, k in enumerate(keys)
                    if mac(k, "p", sys.argv[3], sys.argv[4], t + ".") == m), 0))
    else:
        PORT = int(sys.argv[1])
        KEY = bytes.fromhex(sys.argv[2])
        KEY2 = bytes.fromhex(sys.argv[3]) if len(sys.argv) > 3 else None
        main()
