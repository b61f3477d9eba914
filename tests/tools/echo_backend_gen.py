"""echo_backend_gen.py - the body echo_backend.py's /gen/N sends, for the
tests that check what arrived (tests/tools/zcheck.py)."""


def gen_body(size):
    """N bytes of JSON-ish lines that compress."""
    out = bytearray()
    i = 0
    while len(out) < size:
        out += b'{"i": %d, "name": "edge", "pad": "%s"}\n' % (i, b"ab" * (i % 17))
        i += 1
    return bytes(out[:size])
