"""html_page.py - the pages html_backend.py serves, for it and for the
test that checks what arrived (test_edged_inject.sh)."""


def page(kind):
    """The page of kind (html_backend.py's ?kind=)."""
    if kind == "std":
        return (b"<!doctype html>\n<html><head><title>t</title></head>\n"
                b"<body><p>hello</p></body>\n</html>\n")
    if kind == "notag":
        return b"<!doctype html>\n<p>a fragment, no head, no body end</p>\n"
    if kind == "twobody":
        # the first </body> in a comment: the snippet goes before the last
        return (b"<html><HEAD></HEAD><body><!-- </body> --><p>x</p>"
                b"</BODY  >\n</html>\n")
    if kind == "upper":
        return b"<HTML><HEAD><TITLE>T</TITLE></HEAD><BODY>X</BODY></HTML>"
    if kind.startswith("big:"):
        n = int(kind[4:])
        core = b"<html><head></head><body>"
        tail = b"</body></html>"
        return core + b"x" * max(0, n - len(core) - len(tail)) + tail
    if kind.startswith("bomb:"):
        return b"<html>" + b" " * int(kind[5:])
    if kind == "json":
        return b'{"head": "</head>", "body": "</body>"}\n'
    raise ValueError(kind)


def injected(body, head_end, body_end):
    """What edged should make of body (inject.h's rule)."""
    low = body.lower()
    import re
    h = re.search(rb"</head[ \t\r\n\f]*>", low)
    bs = list(re.finditer(rb"</body[ \t\r\n\f]*>", low))
    ins = []
    if h and head_end:
        ins.append((h.start(), head_end))
    if bs and body_end:
        ins.append((bs[-1].start(), body_end))
    if not ins:
        return None
    ins.sort()
    out, done = b"", 0
    for at, s in ins:
        out += body[done:at] + s
        done = at
    return out + body[done:]
