#!/usr/bin/env python3
"""splice_auto.py - what splice = "auto" does with a tunnel's traffic.

    splice_auto.py PORT EDGECTL SOCKET

Run against an edged whose splice mode is auto (edgectl splice auto),
tunnel_backend.py's /echo behind host raw.test on 127.0.0.1:PORT:
  1. an upgraded echo tunnel carrying 64-byte messages is taken by the
     kernel (a tunnel spliced, none copied), and stays there while it
     echoes 64 KiB messages for 2 s;
  2. it turns to bulk: 32 MiB (more where tcp_rmem lets a socket's
     receive buffer grow past 16 MiB) sent while the client (its receive
     buffer 256 KiB) reads nothing for a second, so the kernel holds more
     than the upstream socket's buffer for what the client does not
     take: it is handed back to the copy mover, and every byte comes
     back intact;
  3. messages again, after the back-off: taken by the kernel again;
  4. quiet for 4 s: handed back (a quiet tunnel costs nothing copied),
     and its echoes still intact after;
  5. a second tunnel that streams from its start (a 16 MiB upload to
     /sink) is never taken by the kernel;
  6. nor is an upload whose writer is slow (twelve 1 KiB pieces 40 ms
     apart, then 1 MiB, to /sink): small moves far apart, all one way.
Prints what happened; exits 1 with the reason otherwise.
"""
import hashlib
import json
import socket
import subprocess
import sys
import threading
import time

PORT, EDGECTL, SOCK = int(sys.argv[1]), sys.argv[2], sys.argv[3]


def splice(*args):
    r = subprocess.run([EDGECTL, "--socket", SOCK, "splice", *args, "--json"],
                       check=True, capture_output=True, text=True)
    return json.loads(r.stdout)


def fail(why):
    sys.exit(why + "; splice: " + json.dumps(splice()))


def upgrade(path="/echo", rcvbuf=0):
    s = socket.socket()
    if rcvbuf:
        # a reader whose socket takes little while it does not read, as
        # a slow client's does (a fast one's grows to tcp_rmem's
        # maximum: 32 MiB would wait there rather than in the kernel)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.connect(("127.0.0.1", PORT))
    s.settimeout(20)
    s.sendall(b"GET " + path.encode() + b" HTTP/1.1\r\nHost: raw.test\r\n"
              b"Connection: Upgrade\r\nUpgrade: raw-test\r\n\r\n")
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = s.recv(4096)
        if not d:
            fail("no answer to the upgrade")
        buf += d
    if not buf.startswith(b"HTTP/1.1 101"):
        fail("not a 101: %r" % buf[:40])
    return s


def recv_exact(s, n):
    got = bytearray()
    while len(got) < n:
        d = s.recv(min(262144, n - len(got)))
        if not d:
            fail("the tunnel closed after %d of %d bytes" % (len(got), n))
        got += d
    return bytes(got)


def echo(s, n, size=64, pause=0.002):
    for i in range(n):
        msg = (b"%08d" % i) * (size // 8)
        s.sendall(msg)
        if recv_exact(s, len(msg)) != msg:
            fail("echo %d differs" % i)
        time.sleep(pause)


def until(what, cond, secs, s=None):
    """Wait for cond(splice()) up to secs, echoing on s meanwhile."""
    end = time.time() + secs
    while time.time() < end:
        st = splice()
        if cond(st):
            return st
        if s is not None:
            echo(s, 5)
        else:
            time.sleep(0.05)
    fail("timed out waiting for " + what)


def bulk_bytes():
    """Enough for the kernel to hold more than edged lets it for a reader
    that does not read: more than the upstream socket's receive buffer
    may grow to (tcp_rmem's maximum; edged's limit), 32 MiB at least."""
    try:
        rmem = int(open("/proc/sys/net/ipv4/tcp_rmem").read().split()[2])
    except (OSError, ValueError, IndexError):
        rmem = 6 << 20
    return max(32 << 20, rmem + (16 << 20))


def pattern(n):
    h = hashlib.sha256()
    chunk = hashlib.sha256(b"splice-auto").digest() * 2048  # 64 KiB
    out = bytearray()
    while len(out) < n:
        out += chunk
    out = bytes(out[:n])
    h.update(out)
    return out, h.hexdigest()


def main():
    st0 = splice()
    if st0["mode"] != "auto":
        fail("the mode is %s, not auto" % st0["mode"])
    # step 2's bytes, made first: on a loaded machine making them took
    # longer than the 3 s after which a quiet tunnel leaves the kernel
    data, sha = pattern(bulk_bytes())
    s = upgrade(rcvbuf=256 << 10)
    # 1. messages: taken by the kernel at a pause
    echo(s, 20)
    st = until("the kernel to take the tunnel",
               lambda st: st["spliced"] > st0["spliced"] and
               st["open_spliced"] >= 1, 5, s)
    taken1 = st["spliced"]
    echo(s, 50)
    # 1b. larger messages, 64 KiB echoed for 2 s, still messages: the
    # tunnel stays in the kernel (no hand-back taken for a turn to bulk)
    back0 = splice()["handed_back"]
    end = time.time() + 2
    n = 0
    while time.time() < end:
        echo(s, 20, size=65536, pause=0)
        n += 20
    st = splice()
    if st["handed_back"] != back0 or st["open_spliced"] < 1:
        fail("64 KiB messages taken for bulk (%d echoes)" % n)
    # 2. a turn to bulk: the client reads nothing for a second while
    # 32 MiB go up and come back, so the kernel holds what the client
    # does not take; then it reads them all
    sender = threading.Thread(target=s.sendall, args=(data,))
    sender.start()
    time.sleep(1)
    got = recv_exact(s, len(data))
    sender.join()
    st = until("the tunnel to be handed back (bulk)",
               lambda st: st["handed_back"] > st0["handed_back"], 10)
    back1 = st["handed_back"]
    if hashlib.sha256(got).hexdigest() != sha:
        fail("the %d-byte echo differs" % len(data))
    if splice()["open_spliced"] != 0:
        fail("still in the kernel after the turn to bulk")
    # 3. messages again, after the back-off (1 s): taken again
    time.sleep(1.2)
    st = until("the kernel to take the tunnel again",
               lambda st: st["spliced"] > taken1, 5, s)
    echo(s, 50)
    # 4. quiet: handed back after 3 s without a byte
    time.sleep(4)
    st = splice()
    if st["handed_back"] <= back1 or st["open_spliced"] != 0:
        fail("a quiet tunnel stayed in the kernel")
    echo(s, 20)
    s.close()
    # 5. a stream from the start (an upload to /sink, which answers with
    # what it got once the client is done): never the kernel's
    before = splice()["spliced"]
    t = upgrade("/sink")
    data, sha = pattern(16 << 20)
    t.sendall(data)
    t.shutdown(socket.SHUT_WR)
    answer = b""
    while not answer.endswith(b"\n"):
        d = t.recv(4096)
        if not d:
            break
        answer += d
    t.close()
    if answer.decode().split() != [str(len(data)), sha]:
        fail("the 16 MiB upload arrived as %r" % answer[:100])
    after = splice()
    if after["spliced"] != before:
        fail("a stream was taken by the kernel")
    # 6. an upload whose writer is slow
    before = after["spliced"]
    t = upgrade("/sink")
    data, sha = pattern((1 << 20) + 12 * 1024)
    for k in range(12):
        t.sendall(data[k * 1024:(k + 1) * 1024])
        time.sleep(0.04)
    t.sendall(data[12 * 1024:])
    t.shutdown(socket.SHUT_WR)
    answer = b""
    while not answer.endswith(b"\n"):
        d = t.recv(4096)
        if not d:
            break
        answer += d
    t.close()
    if answer.decode().split() != [str(len(data)), sha]:
        fail("the slow upload arrived as %r" % answer[:100])
    after = splice()
    if after["spliced"] != before:
        fail("an upload from a slow writer was taken by the kernel")
    print("messages taken by the kernel twice, handed back on a turn to "
          "bulk (%d MiB intact) and when quiet; a 16 MiB stream and a "
          "slow writer's upload copied" % (bulk_bytes() >> 20))


main()
