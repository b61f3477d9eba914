#!/usr/bin/env python3
"""auth_check.py - the API key and JWT gates (auth.h) through edged.

    auth_check.py EDGE_PORT DIR
    auth_check.py jwks OUT RSA_PUB.pem OCT_SECRET_HEX   (writes a JWKS)
    auth_check.py weak DIR RSA_PUB.pem   (writes weak-*.json: JWKS of keys
                                          edged must refuse)

DIR holds the keys the test made with openssl: rsa.pem, ec.pem, ed.pem
(private, the token issuer's), rsa.pub (the public key edged has),
other.pem (an RSA key edged does not know), and keys.txt's secrets in
key_ci / key_deploy. edged listens on 127.0.0.1:EDGE_PORT, trusts
127.0.0.1's X-Forwarded-For, has the global rate limit "2/s" (burst 5),
and serves, each to echo_backend.py:
  e-key    key.test    api_keys (ci, deploy)
  e-jwt    jwt.test    jwt: rsa/ec/ed public keys (PEM), issuer
                       https://idp.test, audience edge-api, algorithms
                       RS256 PS256 ES256 EdDSA, leeway 5s, copy_claims
                       sub email roles
  e-jwks   jwks.test   jwt: the JWKS (RSA kid "r1", oct kid "h1"),
                       algorithms RS256 HS256
  e-both   both.test   api_keys and jwt (as e-jwt's)
  e-route  route.test  no gate but route /private (api_keys) and route
                       /token (jwt of e-jwt's keys)
Prints one line per check: "ok<TAB>name" or "fail<TAB>name<TAB>why".
"""
import base64
import hashlib
import hmac
import http.client
import json
import os
import sys
import time

import jwt  # python3-jwt (PyJWT)

PORT = 0
DIR = ""
SEQ = [0]


def out(ok, name, why=""):
    if ok:
        print("ok\t%s" % name, flush=True)
    else:
        print("fail\t%s\t%s" % (name, str(why).replace("\n", " ")[:400]), flush=True)


def b64u(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def req(host, path="/", hdrs=None, client=None, method="GET"):
    SEQ[0] += 1
    c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=10)
    h = {"Host": host, "X-Forwarded-For": client or "198.18.%d.%d" % (SEQ[0] // 250, SEQ[0] % 250 + 1)}
    c.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
    for k, v in h.items():
        c.putheader(k, v)
    for k, v in (hdrs or []):
        c.putheader(k, v)
    c.endheaders()
    r = c.getresponse()
    body = r.read()
    rh = r.getheaders()
    c.close()
    return r.status, rh, body


def hget(hdrs, name):
    for k, v in hdrs:
        if k.lower() == name.lower():
            return v
    return None


def seen(body, name):
    """The values of field name the backend received."""
    try:
        return [v for k, v in json.loads(body)["headers"] if k.lower() == name.lower()]
    except (ValueError, KeyError):
        return None


def pem(name):
    with open(os.path.join(DIR, name), "rb") as f:
        return f.read()


def token(alg="RS256", key="rsa.pem", claims=None, headers=None, **kw):
    now = int(time.time())
    c = {"iss": "https://idp.test", "aud": "edge-api", "sub": "user-1",
         "exp": now + 300, "iat": now}
    c.update(kw)
    if claims is not None:
        c = claims
    k = pem(key) if not isinstance(key, bytes) else key
    return jwt.encode(c, k, algorithm=alg, headers=headers)


def bearer(t):
    return [("Authorization", "Bearer " + t)]


def refused(name, host, hdrs, error=None, path="/"):
    st, rh, body = req(host, path, hdrs)
    wa = hget(rh, "WWW-Authenticate") or ""
    try:
        j = json.loads(body)
    except ValueError:
        j = {}
    good = st == 401 and wa.startswith('Bearer realm="edge"') and j.get("error") == "unauthorized"
    if error is not None:
        good = good and ('error="%s"' % error in wa if error else "error=" not in wa)
    out(good, name, "%s %s %s" % (st, wa, body[:200]))


def admitted(name, host, hdrs, want=None, path="/"):
    st, rh, body = req(host, path, hdrs)
    good = st == 200
    why = "%s %s" % (st, body[:300])
    for k, v in (want or {}).items():
        got = seen(body, k)
        if got != v:
            good = False
            why = "%s: %r, not %r; %s" % (k, got, v, why)
    out(good, name, why)
    return body


def api_keys():
    ci, dep = pem("key_ci").decode().strip(), pem("key_deploy").decode().strip()
    refused("api key: none presented: 401, WWW-Authenticate without an error", "key.test", [], "")
    admitted("api key: X-Api-Key admits, the upstream told its name", "key.test",
             [("X-Api-Key", ci)], {"X-Api-Key-Name": ["ci"]})
    admitted("api key: Authorization: Bearer admits", "key.test", bearer(dep),
             {"X-Api-Key-Name": ["deploy"]})
    refused("api key: an unknown key: invalid_token", "key.test", [("X-Api-Key", ci + "x")], "invalid_token")
    refused("api key: a key's hash presented as the key", "key.test",
            [("X-Api-Key", hashlib.sha256(ci.encode()).hexdigest())], "invalid_token")
    admitted("api key: a client's own X-Api-Key-Name is dropped", "key.test",
             [("X-Api-Key", ci), ("X-Api-Key-Name", "admin"), ("x-api-key-name", "root")],
             {"X-Api-Key-Name": ["ci"]})
    refused("api key: two Authorization fields: invalid_request", "key.test",
            bearer(ci) + bearer(dep), "invalid_request")
    refused("api key: two X-Api-Key fields", "key.test", [("X-Api-Key", ci), ("X-Api-Key", dep)])
    refused("api key: Authorization: Basic", "key.test",
            [("Authorization", "Basic " + base64.b64encode(b"u:" + ci.encode()).decode())])
    refused("api key: an empty X-Api-Key", "key.test", [("X-Api-Key", "")])
    refused("api key: a key of 600 characters", "key.test", [("X-Api-Key", "a" * 600)])
    refused("api key: a JWT where only keys are taken", "key.test", bearer(token()))


def jwts():
    now = int(time.time())
    body = admitted("jwt: RS256 admits; sub, email and roles copied", "jwt.test",
                    bearer(token(email="u@example.test", roles=["a", "b"])),
                    {"X-Jwt-Claim-sub": ["user-1"], "X-Jwt-Claim-email": ["u@example.test"],
                     "X-Jwt-Claim-roles": ['["a","b"]']})
    for alg, key in (("ES256", "ec.pem"), ("EdDSA", "ed.pem"), ("PS256", "rsa.pem")):
        admitted("jwt: %s admits" % alg, "jwt.test", bearer(token(alg, key)),
                 {"X-Jwt-Claim-sub": ["user-1"]})
    admitted("jwt: a claim absent is no field; a client's own claim fields dropped", "jwt.test",
             bearer(token()) + [("X-Jwt-Claim-email", "evil@x"), ("X-JWT-CLAIM-admin", "1"),
                                ("X_Jwt_Claim_sub", "bob"), ("X_Api_Key_Name", "ci")],
             {"X-Jwt-Claim-email": [], "X-Jwt-Claim-admin": [], "X-Jwt-Claim-sub": ["user-1"],
              "X_Jwt_Claim_sub": [], "X_Api_Key_Name": []})
    admitted("jwt: a claim with CR LF in it is left out, not sent", "jwt.test",
             bearer(token(email="a\r\nX-Injected: 1")),
             {"X-Jwt-Claim-email": [], "X-Injected": []})
    refused("jwt: none presented", "jwt.test", [], "")
    refused("jwt: expired", "jwt.test", bearer(token(exp=now - 60)), "invalid_token")
    admitted("jwt: expired 2 s ago, within the 5 s leeway", "jwt.test", bearer(token(exp=now - 2)))
    refused("jwt: not valid before a minute from now", "jwt.test", bearer(token(nbf=now + 60)), "invalid_token")
    refused("jwt: another audience", "jwt.test", bearer(token(aud="other")), "invalid_token")
    admitted("jwt: an audience list holding ours", "jwt.test", bearer(token(aud=["x", "edge-api"])))
    refused("jwt: another issuer", "jwt.test", bearer(token(iss="https://evil.test")), "invalid_token")
    refused("jwt: no issuer", "jwt.test",
            bearer(token(claims={"aud": "edge-api", "sub": "u", "exp": now + 60})), "invalid_token")
    refused("jwt: exp that is not a number", "jwt.test", bearer(token(exp="tomorrow")))
    t = token().split(".")
    none = b64u(b'{"alg":"none","typ":"JWT"}') + "." + t[1] + "."
    refused("jwt: alg none, no signature", "jwt.test", bearer(none))
    refused("jwt: alg none with the RS256 signature", "jwt.test",
            bearer(b64u(b'{"alg":"none"}') + "." + t[1] + "." + t[2]))
    hs = b64u(b'{"alg":"HS256","typ":"JWT"}') + "." + t[1]
    for name, secret in (("PEM", pem("rsa.pub")), ("DER", base64.b64decode(b"".join(pem("rsa.pub").splitlines()[1:-1])))):
        sig = hmac.new(secret, hs.encode(), hashlib.sha256).digest()
        refused("jwt: HS256 with the RSA public key (%s) as its secret" % name, "jwt.test",
                bearer(hs + "." + b64u(sig)), "invalid_token")
    forged = json.loads(base64.urlsafe_b64decode(t[1] + "=="))
    forged["sub"] = "admin"
    refused("jwt: the payload changed, the signature kept", "jwt.test",
            bearer(t[0] + "." + b64u(json.dumps(forged).encode()) + "." + t[2]), "invalid_token")
    refused("jwt: signed by a key edged does not have", "jwt.test", bearer(token(key="other.pem")),
            "invalid_token")
    refused("jwt: RS384, not among the algorithms", "jwt.test", bearer(token("RS384")), "invalid_token")
    refused("jwt: ES256 header on an RS256 signature", "jwt.test",
            bearer(b64u(b'{"alg":"ES256"}') + "." + t[1] + "." + t[2]), "invalid_token")
    refused("jwt: two parts only", "jwt.test", bearer(t[0] + "." + t[1]))
    refused("jwt: garbage", "jwt.test", bearer("a.b.c"))
    refused("jwt: a header that is not JSON", "jwt.test", bearer(b64u(b"[1") + "." + t[1] + "." + t[2]))
    refused("jwt: a token over 8 KiB", "jwt.test", bearer(token(pad="x" * 9000)))
    refused("jwt: a crit header", "jwt.test",
            bearer(token(headers={"crit": ["exp"]})), None)
    # the JWKS: kid-selected RSA, and an oct key for HS256
    admitted("jwks: RS256 with kid r1 admits", "jwks.test", bearer(token(headers={"kid": "r1"})))
    admitted("jwks: RS256 without a kid admits (each key of its type tried)", "jwks.test",
             bearer(token()))
    refused("jwks: a kid it does not have", "jwks.test", bearer(token(headers={"kid": "zz"})), "invalid_token")
    secret = bytes.fromhex(pem("oct.hex").decode().strip())
    admitted("jwks: HS256 with the oct key admits", "jwks.test",
             bearer(token("HS256", secret, headers={"kid": "h1"})))
    refused("jwks: HS256 with another secret", "jwks.test",
            bearer(token("HS256", b"k" * 32, headers={"kid": "h1"})), "invalid_token")


def both_and_routes():
    ci = pem("key_ci").decode().strip()
    admitted("both: an API key admits", "both.test", [("X-Api-Key", ci)], {"X-Api-Key-Name": ["ci"]})
    admitted("both: a JWT admits", "both.test", bearer(token()), {"X-Jwt-Claim-sub": ["user-1"]})
    refused("both: neither", "both.test", [])
    admitted("route: a path of no gated route is open", "route.test", [], path="/open")
    refused("route: /private asks for a key", "route.test", [], path="/private/x")
    admitted("route: /private with a key", "route.test", [("X-Api-Key", ci)], path="/private/x")
    refused("route: /token asks for a JWT, not a key", "route.test", [("X-Api-Key", ci)], path="/token")
    admitted("route: /token with a JWT", "route.test", bearer(token()), path="/token")
    # another spelling of a gated route's path must not reach the
    # ungated default route (the upstream would read it as /private)
    for p in ("/%70rivate/x", "//private/x", "/./private/x", "/open/../private/x", "/private%2Fx",
              "/open/%2e%2e/private"):
        st, _, body = req("route.test", p)
        out(st == 400 and b'"error":"bad_request"' in body,
            "route: %s on a host of several gates: 400, not the ungated route" % p, "%s %s" % (st, body[:200]))
    admitted("route: a path with an escaped reserved character is normal", "route.test", [], path="/open/a%20b?x=//")
    st, _, _ = req("key.test", "//x/./y")
    out(st == 401, "a host of one gate: another spelling meets the same gate (401, not 400)", st)


def before_rate_limit():
    """The gate runs before the rate limit: a client refused 401 many
    times over its burst still gets 401 (not 429), then is admitted."""
    client = "198.19.7.7"
    codes = [req("key.test", "/", [], client)[0] for _ in range(12)]
    st = req("key.test", "/", [("X-Api-Key", pem("key_ci").decode().strip())], client)[0]
    out(set(codes) == {401} and st in (200, 429),
        "the gate comes before the rate limit: 12 refusals over a burst of 5 all 401", "%s then %s" % (codes, st))
    codes = [req("key.test", "/", [("X-Api-Key", pem("key_ci").decode().strip())], "198.19.8.8")[0]
             for _ in range(12)]
    out(200 in codes and 429 in codes, "admitted requests still meet the rate limit", codes)


def make_jwks(dst, rsa_pub, oct_hex):
    from cryptography.hazmat.primitives.serialization import load_pem_public_key
    with open(rsa_pub, "rb") as f:
        pub = load_pem_public_key(f.read()).public_numbers()

    def be(n):
        return b64u(n.to_bytes((n.bit_length() + 7) // 8, "big"))
    doc = {"keys": [
        {"kty": "RSA", "kid": "r1", "use": "sig", "alg": "RS256", "n": be(pub.n), "e": be(pub.e)},
        {"kty": "oct", "kid": "h1", "alg": "HS256", "k": b64u(bytes.fromhex(oct_hex))},
        {"kty": "RSA", "use": "enc", "n": "AQAB", "e": "AQAB"},
        {"kty": "XYZ", "kid": "future"},
    ]}
    with open(dst, "w") as f:
        json.dump(doc, f)


def make_weak(dst, rsa_pub):
    """Keys anyone could forge tokens for: RSA with e = 1 (the signature is
    the padded hash), Ed25519 points of small order (all zeros, the
    neutral element, y = -1)."""
    from cryptography.hazmat.primitives.serialization import load_pem_public_key
    with open(rsa_pub, "rb") as f:
        n = load_pem_public_key(f.read()).public_numbers().n
    nb = b64u(n.to_bytes((n.bit_length() + 7) // 8, "big"))
    p = 2 ** 255 - 19
    for name, key in (
            ("rsa-e1", {"kty": "RSA", "n": nb, "e": "AQ"}),
            ("rsa-e2", {"kty": "RSA", "n": nb, "e": "Ag"}),
            ("ed-zero", {"kty": "OKP", "crv": "Ed25519", "x": b64u(bytes(32))}),
            ("ed-one", {"kty": "OKP", "crv": "Ed25519", "x": b64u(b"\x01" + bytes(31))}),
            ("ed-minus1", {"kty": "OKP", "crv": "Ed25519", "x": b64u((p - 1).to_bytes(32, "little"))}),
            ("ed-noncanon", {"kty": "OKP", "crv": "Ed25519", "x": b64u((p + 1).to_bytes(32, "little"))})):
        with open(os.path.join(dst, "weak-%s.json" % name), "w") as f:
            json.dump({"keys": [key]}, f)


def main():
    global PORT, DIR
    if sys.argv[1] == "jwks":
        make_jwks(sys.argv[2], sys.argv[3], sys.argv[4])
        return
    if sys.argv[1] == "weak":
        make_weak(sys.argv[2], sys.argv[3])
        return
    PORT = int(sys.argv[1])
    DIR = sys.argv[2]
    for part in (api_keys, jwts, both_and_routes, before_rate_limit):
        try:
            part()
        except Exception as e:  # a check that could not run fails
            out(False, part.__name__, repr(e))


if __name__ == "__main__":
    main()
