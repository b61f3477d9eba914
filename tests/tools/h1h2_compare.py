#!/usr/bin/python3
"""h1h2_compare.py - compare one request sent to edged over HTTP/1.1 and
over HTTP/2, for tests/integration/test_edged_h1h2.sh.

    h1h2_compare.py ANALYTICS BACKEND_LOG \\
        TOKEN1 HDRS1 BODY1 TOKEN2 HDRS2 BODY2 [OPTION...]

TOKEN1 and TOKEN2 are the unique query values the two requests carried
(the HTTP/1.1 one first); HDRS and BODY what curl wrote with -D and -o.
ANALYTICS is edged's analytics file (JSON lines), BACKEND_LOG the echo
backend's log (tests/tools/echo_backend.py). Waits (up to --wait seconds)
for each token's analytics records, then builds for each side:

  response  the status, Location, whether Retry-After is 1..60 s, the
            JSON error's "error", whether an X-Request-ID came back;
  route     the analytics records of the token, in file order (a
            request that came back through edged itself has one per
            visit, the client's last): route ids, host, method, path,
            status, outcome, upstream address and status, client
            address, user agent; X-Request-ID only with --client-reqid
            (else only that it is the one the response and the backend
            got), http_version only of the inner visits;
  upstream  what the backend received: method, path, body length and
            SHA-256, and the header fields, names lowercased, sorted by
            name (values of one name kept in their order), without
            Connection, Keep-Alive, Proxy-Connection, TE, Trailer,
            Transfer-Encoding, Upgrade, a Content-Length of a bodiless
            request, and X-Request-ID's value unless --client-reqid; the
            received-protocol of edge's Via member must be the client's
            version (1.1, 2) and is compared as PROTO.

Each token is replaced by TOKEN before comparing. The client's record
must say http_version "HTTP/1.1" on the first side and "HTTP/2" on the
second. Options:
  --client-reqid    the client sent X-Request-ID: compare its value
  --ignore FIELD    leave an analytics field out (client_ip for requests
                    sent from two source addresses)
  --absent TEXT     no upstream header value on either side contains TEXT
  --records N       analytics records to wait for per token (1)
  --wait SECONDS    (8)

Prints "STATUS OUTCOMES PATHS" (OUTCOMES: each record's outcome in file
order, joined by ","; PATHS: the paths the backend received, joined by
",", or "-" when nothing reached it) and
exits 0 when the sides agree; prints what differs, both sides, and exits 1
when they do not; exits 2 when a token's records never came.
"""
import json
import sys
import time

HOP = {"connection", "keep-alive", "proxy-connection", "te", "trailer",
       "transfer-encoding", "upgrade"}
FIELDS = ["project_id", "environment_id", "deployment_id", "host", "method",
          "path", "status", "outcome", "upstream_addr", "upstream_status",
          "client_ip", "user_agent"]


def args():
    a = sys.argv[1:]
    o = {"client_reqid": False, "ignore": [], "absent": [], "records": 1,
         "wait": 8.0}
    pos = []
    i = 0
    while i < len(a):
        if a[i] == "--client-reqid":
            o["client_reqid"] = True
        elif a[i] in ("--ignore", "--absent"):
            o[a[i][2:]].append(a[i + 1])
            i += 1
        elif a[i] == "--records":
            o["records"] = int(a[i + 1])
            i += 1
        elif a[i] == "--wait":
            o["wait"] = float(a[i + 1])
            i += 1
        else:
            pos.append(a[i])
        i += 1
    if len(pos) != 8:
        sys.exit(__doc__)
    o["analytics"], o["backend"] = pos[0], pos[1]
    o["sides"] = [pos[2:5], pos[5:8]]
    return o


def lines(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            out = []
            for ln in f:
                try:
                    out.append(json.loads(ln))
                except ValueError:
                    pass
            return out
    except OSError:
        return []


def has_token(rec, token):
    p = rec.get("path") or ""
    return ("k=" + token) in p


def norm(v, token):
    return v.replace(token, "TOKEN") if isinstance(v, str) else v


def response(hdrs, body, token):
    """The last response head curl wrote (after any 1xx), and the body's
    JSON error."""
    try:
        with open(hdrs, encoding="latin-1") as f:
            text = f.read()
    except OSError:
        text = ""
    blocks = [b for b in text.replace("\r\n", "\n").split("\n\n") if b.strip()]
    head = blocks[-1].split("\n") if blocks else [""]
    status = head[0].split(" ")[1] if len(head[0].split(" ")) > 1 else "none"
    fields = {}
    for ln in head[1:]:
        k, _, v = ln.partition(":")
        fields.setdefault(k.strip().lower(), v.strip())
    ra = fields.get("retry-after")
    if ra is not None:
        ra = "1..60" if ra.isdigit() and 1 <= int(ra) <= 60 else ra
    try:
        with open(body, "rb") as f:
            err = json.loads(f.read().decode("utf-8", "replace")).get("error")
    except (OSError, ValueError, AttributeError):
        err = None
    return ({"status": status, "location": norm(fields.get("location"), token),
             "retry_after": ra, "error": err,
             "x_request_id": "x-request-id" in fields},
            fields.get("x-request-id"))


def via_member(v, version, problems):
    """A Via value with its last member's received-protocol, edge's
    member, checked against the client's version ("1.1" for HTTP/1.1,
    "2" for HTTP/2) and written PROTO."""
    want = version.split("/", 1)[1]
    head, sep, last = v.rpartition(",")
    proto, _, rest = last.strip().partition(" ")
    if proto != want:
        problems.append("%s: edge's Via member says %r, not %s" %
                        (version, last.strip(), want))
    return head + sep + ("PROTO " + rest if sep == "" else " PROTO " + rest)


def side(o, token, hdrs, body, version, problems):
    resp, resp_id = response(hdrs, body, token)
    recs = [r for r in lines(o["analytics"]) if has_token(r, token)]
    route = []
    for i, r in enumerate(recs):
        d = {k: norm(r.get(k), token) for k in FIELDS if k not in o["ignore"]}
        if o["client_reqid"]:
            d["request_id"] = r.get("request_id")
        if i < len(recs) - 1:
            d["http_version"] = r.get("http_version")
        route.append(d)
    if recs and recs[-1].get("http_version") != version:
        problems.append("the client's record says http_version %r, not %r" %
                        (recs[-1].get("http_version"), version))
    ups = [b for b in lines(o["backend"]) if has_token(b, token)]
    upstream = []
    for b in ups:
        hs = []
        for k, v in b["headers"]:
            k = k.lower()
            if k in HOP or (k == "content-length" and b["body_len"] == 0):
                continue
            if k == "via":
                v = via_member(v, version, problems)
            if k == "traceparent":
                # edge's: the record's trace and span, each request its own
                p = v.split("-")
                if len(p) != 4 or (recs and (
                        p[1] != recs[-1].get("trace_id") or
                        p[2] != recs[-1].get("span_id"))):
                    problems.append("the backend got traceparent %s, the "
                                    "record says trace %s span %s" %
                                    (v, recs and recs[-1].get("trace_id"),
                                     recs and recs[-1].get("span_id")))
                v = "%s-TRACE-SPAN-%s" % (p[0], p[-1])
            if k == "x-request-id":
                if recs and v != recs[-1].get("request_id"):
                    problems.append("the backend got X-Request-ID %s, the "
                                    "record says %s" %
                                    (v, recs[-1].get("request_id")))
                if not o["client_reqid"]:
                    v = "*"
            hs.append([k, norm(v, token)])
        hs.sort(key=lambda kv: kv[0])  # stable: one name's values in order
        for t in o["absent"]:
            for k, v in hs:
                if t in v:
                    problems.append("%s: %s reached the backend (%s)" %
                                    (version, k, v))
        upstream.append({"method": b["method"], "path": norm(b["path"], token),
                         "body_len": b["body_len"],
                         "body_sha256": b["body_sha256"], "headers": hs})
    if recs and resp_id is not None and resp_id != recs[-1].get("request_id"):
        problems.append("%s: the response's X-Request-ID %s is not the "
                        "record's %s" % (version, resp_id,
                                         recs[-1].get("request_id")))
    return {"response": resp, "route": route, "upstream": upstream}, recs


def diff(where, a, b, problems):
    """What differs between a (HTTP/1.1) and b (HTTP/2), each difference
    with both sides: a header list as the fields only one side has."""
    if a == b:
        return
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            diff("%s.%s" % (where, k), a.get(k), b.get(k), problems)
    elif where.endswith(".headers") and isinstance(a, list) and \
            isinstance(b, list):
        only_a = [f for f in a if f not in b]
        only_b = [f for f in b if f not in a]
        problems.append("%s: only over HTTP/1.1 %s, only over HTTP/2 %s%s" %
                        (where, json.dumps(only_a), json.dumps(only_b),
                         "" if only_a or only_b else " (order differs)"))
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            diff("%s[%d]" % (where, i), x, y, problems)
    else:
        problems.append("%s: HTTP/1.1 %s / HTTP/2 %s" %
                        (where, json.dumps(a), json.dumps(b)))


def main():
    o = args()
    end = time.time() + o["wait"]
    while True:
        counts = [sum(1 for r in lines(o["analytics"]) if has_token(r, s[0]))
                  for s in o["sides"]]
        if min(counts) >= o["records"] or time.time() > end:
            break
        time.sleep(0.05)
    if min(counts) < o["records"]:
        print("analytics records: %d for HTTP/1.1, %d for HTTP/2, wanted %d "
              "each" % (counts[0], counts[1], o["records"]))
        return 2
    time.sleep(0.05)  # a nested visit's record may trail by a moment
    problems = []
    a, recs = side(o, *o["sides"][0], "HTTP/1.1", problems)
    b, _ = side(o, *o["sides"][1], "HTTP/2", problems)
    for part in ("response", "route", "upstream"):
        diff(part, a[part], b[part], problems)
    if problems:
        print("; ".join(problems))
        return 1
    print("%s %s %s" % (a["response"]["status"],
                        ",".join(r.get("outcome") or "-" for r in recs),
                        ",".join(u["path"] for u in a["upstream"]) or "-"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
