"""tunnel_pattern.py - the byte stream both ends of a tunnel test send.

A stream of N bytes made of 64 KiB pieces, each a random block (the same
for the whole stream) headed by a tag byte and the piece's number, so
that loss, duplication or reordering of pieces changes the SHA-256.
"""
import hashlib
import os
import struct

PIECE = 65536
_BLOCK = os.urandom(PIECE)


def send(s, n, tag):
    """Send n bytes of the pattern on socket s; return their SHA-256."""
    h = hashlib.sha256()
    i = 0
    while n > 0:
        piece = (tag + struct.pack("<Q", i) + _BLOCK[9:])[:n]
        s.sendall(piece)
        h.update(piece)
        n -= len(piece)
        i += 1
    return h.hexdigest()
