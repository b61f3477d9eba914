"""tunnel_pattern.py - the byte stream both ends of a tunnel test send.

A stream of N bytes made of 64 KiB pieces, each a random block (the same
for the whole stream) headed by a tag byte and the piece's number, so
that loss, duplication or reordering of pieces changes the SHA-256.
"""
import hashlib
import os
import struct
import time

PIECE = 65536
_BLOCK = os.urandom(PIECE)


def send(s, n, tag, ready=None, rate=0):
    """Send n bytes of the pattern on socket s; return their SHA-256.
    With ready (a path), create that file once 1 MiB has gone; with rate,
    send at most rate bytes per second."""
    h = hashlib.sha256()
    i = 0
    t0 = time.time()
    while n > 0:
        if rate:
            ahead = i * PIECE / rate - (time.time() - t0)
            if ahead > 0:
                time.sleep(ahead)
        if ready and i == 16:
            open(ready, "w").close()
        piece = (tag + struct.pack("<Q", i) + _BLOCK[9:])[:n]
        s.sendall(piece)
        h.update(piece)
        n -= len(piece)
        i += 1
    return h.hexdigest()
