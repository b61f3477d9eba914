#!/usr/bin/python3
"""capture_clienthello.py - capture the ClientHellos real TLS clients send,
as fixtures for tests/unit/test_sni.c and seeds for tests/fuzz/fuzz_sni.c.

    tests/tools/capture_clienthello.py [--header FILE] [--corpus DIR]

Defaults: tests/unit/sni_fixtures.h and tests/fuzz/corpus/sni. Run it from
the repository's root with Debian's /usr/bin/python3 (its ssl module is
Debian's OpenSSL, one of the clients). It needs openssl and curl.

For each case it listens on 127.0.0.1 (a port of the kernel's choosing),
runs the client against it, reads the records up to the end of the first
handshake message (the ClientHello: nothing after it, nothing answered)
and closes the connection, which makes the client give up. The header is
regenerated whole, every hello as a byte array beside what the client was
told to send (the expected result and name come from this table, not from
the parser under test), and then run through clang-format. The corpus gets
each hello in two of the fuzzer's framings (tests/fuzz/fuzz_sni.c): raw
bytes, and the hello's body to be framed by the fuzzer (in one record and
in 13-byte records); and a few seeds of its own (SEEDS). Stdlib only.

Hellos carry fresh randoms and key shares, so every run changes the bytes
but not what the tests assert.
"""
import argparse
import os
import shutil
import socket
import ssl
import subprocess
import sys
import threading

# 12 ALPN protocols of 45 bytes: a hello of about 900 bytes, which
# -max_send_frag 512 splits over two records
ALPN_SPLIT = ",".join("p%02d-%s" % (i, "x" * 41) for i in range(12))
# 253 bytes: four labels of 63 and the dots between them
LONG_NAME = ".".join([c * 63 for c in "abcd"])[:253]


def openssl(*opts):
    """openssl s_client against the port, with opts."""
    return lambda port: ["openssl", "s_client", "-connect",
                         "127.0.0.1:%d" % port] + list(opts)


def curl(host, *opts):
    """curl https://host:port/, host resolved to 127.0.0.1 unless an
    address."""
    def argv(port):
        a = ["curl", "-sk", "--max-time", "5"] + list(opts)
        if not host[0].isdigit():
            a += ["--resolve", "%s:%d:127.0.0.1" % (host, port)]
        return a + ["https://%s:%d/" % (host, port)]
    return argv


# (id, what the client was asked, client, expected result, expected name)
CASES = [
    ("openssl", "openssl s_client -servername www.example.com",
     openssl("-servername", "www.example.com"),
     "SNI_FOUND", "www.example.com"),
    ("openssl_tls13", "openssl s_client -tls1_3 -servername tls13.example.com",
     openssl("-tls1_3", "-servername", "tls13.example.com"),
     "SNI_FOUND", "tls13.example.com"),
    ("openssl_tls12", "openssl s_client -tls1_2 -servername tls12.example.com",
     openssl("-tls1_2", "-servername", "tls12.example.com"),
     "SNI_FOUND", "tls12.example.com"),
    ("openssl_tls10",
     "openssl s_client -tls1 -cipher DEFAULT@SECLEVEL=0 "
     "-servername tls10.example.com",
     openssl("-tls1", "-cipher", "DEFAULT@SECLEVEL=0",
             "-servername", "tls10.example.com"),
     "SNI_FOUND", "tls10.example.com"),
    ("openssl_nosni", "openssl s_client -noservername",
     openssl("-noservername"), "SNI_NONE", None),
    ("openssl_tls12_nosni", "openssl s_client -tls1_2 -noservername",
     openssl("-tls1_2", "-noservername"), "SNI_NONE", None),
    ("openssl_split",
     "openssl s_client -max_send_frag 512 -alpn (12 x 45 bytes) "
     "-servername split.example.com (two records)",
     openssl("-max_send_frag", "512", "-alpn", ALPN_SPLIT,
             "-servername", "split.example.com"),
     "SNI_FOUND", "split.example.com"),
    ("openssl_upper", "openssl s_client -servername WWW.Example.COM",
     openssl("-servername", "WWW.Example.COM"),
     "SNI_FOUND", "www.example.com"),
    ("openssl_dot", "openssl s_client -servername www.example.com.",
     openssl("-servername", "www.example.com."),
     "SNI_FOUND", "www.example.com"),
    ("openssl_underscore", "openssl s_client -servername a_b.example.com",
     openssl("-servername", "a_b.example.com"),
     "SNI_FOUND", "a_b.example.com"),
    ("openssl_long", "openssl s_client -servername (253 bytes)",
     openssl("-servername", LONG_NAME), "SNI_FOUND", LONG_NAME),
    ("openssl_ipv4", "openssl s_client -servername 127.0.0.1",
     openssl("-servername", "127.0.0.1"), "SNI_NONE", None),
    ("openssl_ipv6", "openssl s_client -servername ::1",
     openssl("-servername", "::1"), "SNI_NONE", None),
    ("curl", "curl https://www.example.com:PORT/",
     curl("www.example.com"), "SNI_FOUND", "www.example.com"),
    ("curl_tls12", "curl --tlsv1.2 --tls-max 1.2 https://tls12.example.com:PORT/",
     curl("tls12.example.com", "--tlsv1.2", "--tls-max", "1.2"),
     "SNI_FOUND", "tls12.example.com"),
    ("curl_dot", "curl https://www.example.com.:PORT/",
     curl("www.example.com."), "SNI_FOUND", "www.example.com"),
    ("curl_ip", "curl https://127.0.0.1:PORT/ (no server_name for an address)",
     curl("127.0.0.1"), "SNI_NONE", None),
    ("python", "python3 ssl wrap_socket(server_hostname=py.example.com)",
     "python", "SNI_FOUND", "py.example.com"),
]


def python_client(port):
    """Debian's python3 ssl module as a client, in a thread."""
    def run():
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        try:
            with socket.create_connection(("127.0.0.1", port), 5) as s:
                with ctx.wrap_socket(s, server_hostname="py.example.com"):
                    pass
        except (OSError, ssl.SSLError):
            pass
    t = threading.Thread(target=run)
    t.start()
    return t


def read_hello(c):
    """The records from c up to the end of the first handshake message:
    (the bytes, the number of records)."""
    data, hs, nrec, pos = b"", b"", 0, 0
    while True:
        while len(data) < pos + 5 or \
                len(data) < pos + 5 + int.from_bytes(data[pos + 3:pos + 5],
                                                     "big"):
            d = c.recv(65536)
            if not d:
                raise RuntimeError("EOF after %d bytes" % len(data))
            data += d
        n = int.from_bytes(data[pos + 3:pos + 5], "big")
        if data[pos] != 22:
            raise RuntimeError("record type %d" % data[pos])
        hs += data[pos + 5:pos + 5 + n]
        pos += 5 + n
        nrec += 1
        if len(hs) >= 4 and len(hs) >= 4 + int.from_bytes(hs[1:4], "big"):
            if len(hs) != 4 + int.from_bytes(hs[1:4], "big"):
                raise RuntimeError("more than the hello in its record")
            return data[:pos], nrec


def capture(client):
    """Run client against a fresh listener; (hello bytes, records)."""
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.bind(("127.0.0.1", 0))
    ls.listen(1)
    ls.settimeout(10)
    port = ls.getsockname()[1]
    if client == "python":
        proc, thread = None, python_client(port)
    else:
        proc = subprocess.Popen(client(port), stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        thread = None
    try:
        c, _ = ls.accept()
        c.settimeout(10)
        with c:
            return read_hello(c)
    finally:
        ls.close()
        if proc:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if thread:
            thread.join(10)


def hello_body(raw):
    """The ClientHello's body: the records' payloads without the
    handshake header."""
    hs, pos = b"", 0
    while pos < len(raw):
        n = int.from_bytes(raw[pos + 3:pos + 5], "big")
        hs += raw[pos + 5:pos + 5 + n]
        pos += 5 + n
    return hs[4:]


def c_string(s):
    return '"%s"' % s.replace("\\", "\\\\").replace('"', '\\"')


def versions():
    out = []
    for argv in (["openssl", "version"], ["curl", "--version"]):
        r = subprocess.run(argv, capture_output=True, text=True, check=True)
        out.append(" ".join(r.stdout.split()[:2]))
    out.append("Python %s (%s)" % (sys.version.split()[0],
                                   ssl.OPENSSL_VERSION))
    return ", ".join(out)


def write_header(path, caps):
    lines = [
        "/* SPDX-License-Identifier: BSD-2-Clause */",
        "/*",
        " * tests/unit/sni_fixtures.h - ClientHellos captured from real "
        "clients",
        " * by tests/tools/capture_clienthello.py; generated, do not edit "
        "(run",
        " * the script again). Clients: %s." % versions(),
        " */",
        "#ifndef EDGE_TEST_SNI_FIXTURES_H",
        "#define EDGE_TEST_SNI_FIXTURES_H",
        "",
        "#include <stddef.h>",
        "#include <stdint.h>",
        "",
        '#include "sni.h"',
        "",
        "struct sni_fixture {",
        "\tconst char *id;",
        "\tconst char *what; /* the client and how it was run */",
        "\tconst uint8_t *hello;",
        "\tsize_t len;",
        "\tunsigned records;",
        "\tenum sni_result res;",
        "\tconst char *name; /* on SNI_FOUND */",
        "};",
        "",
    ]
    for cid, _, _, _, _, raw, _ in caps:
        lines.append("static const uint8_t sni_fx_%s[] = {" % cid)
        for i in range(0, len(raw), 12):
            lines.append("\t" + " ".join("0x%02x," % b for b in raw[i:i + 12]))
        lines += ["};", ""]
    lines.append("static const struct sni_fixture sni_fixtures[] = {")
    for cid, what, _, res, name, raw, nrec in caps:
        lines.append("\t{%s, %s, sni_fx_%s, sizeof(sni_fx_%s), %d, %s, %s}," %
                     (c_string(cid), c_string(what), cid, cid, nrec, res,
                      c_string(name) if name else "NULL"))
    lines += ["};", "", "#endif /* EDGE_TEST_SNI_FIXTURES_H */", ""]
    with open(path, "w") as f:
        f.write("\n".join(lines))
    if shutil.which("clang-format"):
        subprocess.run(["clang-format", "-i", path], check=True)
    else:
        print("clang-format not found: format %s before committing" % path)


# seeds that no client capture gives (fuzz_sni.c: byte 0 the framing, byte
# 1 where to split): plain HTTP; an SSLv2-compatible CLIENT-HELLO (TLS 1.0
# in SSL 2.0's format: 7 cipher specs, 16-byte challenge); host names for
# the fuzzer to put in hellos itself, in one record and in 7-byte records
SEEDS = {
    "raw-http": b"\x00\x80GET / HTTP/1.1\r\nHost: example.com\r\n\r\n",
    "raw-sslv2": b"\x00\x80" + bytes.fromhex(
        "802e0103010015000000100000390000380000350000160000130000"
        "0a0700c0") + b"0123456789abcdef",
}
for i, n in enumerate(["www.example.com", "WWW.Example.COM.", "a_b.example.com",
                       "-a-.x--y", "localhost", "127.0.0.1", "0x7f000001",
                       "::1", "[2001:db8::1]", LONG_NAME, LONG_NAME + "."]):
    SEEDS["name-%d" % i] = b"\x40\x80" + n.encode()
    SEEDS["name-%d-frag" % i] = b"\x47\x80" + n.encode()


def write_corpus(d, caps):
    os.makedirs(d, exist_ok=True)
    for name, seed in SEEDS.items():
        with open(os.path.join(d, name), "wb") as f:
            f.write(seed)
    for cid, _, _, _, _, raw, _ in caps:
        # fuzz_sni.c: byte 0 the framing, byte 1 where to split
        with open(os.path.join(d, "raw-" + cid), "wb") as f:
            f.write(b"\x00\x80" + raw)
        with open(os.path.join(d, "body-" + cid), "wb") as f:
            f.write(b"\x80\x80" + hello_body(raw))
        with open(os.path.join(d, "frag-" + cid), "wb") as f:
            f.write(b"\x8d\x80" + hello_body(raw))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--header", default="tests/unit/sni_fixtures.h")
    ap.add_argument("--corpus", default="tests/fuzz/corpus/sni")
    args = ap.parse_args()
    caps = []
    for cid, what, client, res, name in CASES:
        raw, nrec = capture(client)
        print("%-20s %5d bytes, %d record(s)" % (cid, len(raw), nrec))
        caps.append((cid, what, client, res, name, raw, nrec))
    write_header(args.header, caps)
    write_corpus(args.corpus, caps)
    print("wrote %s and %s" % (args.header, args.corpus))


if __name__ == "__main__":
    main()
