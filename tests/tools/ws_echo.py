#!/usr/bin/python3
"""ws_echo.py - a WebSocket echo server and client for edged's tunnel
tests, on Debian's python3-websockets (run with /usr/bin/python3).

    ws_echo.py serve PORT
    ws_echo.py client EDGE_PORT HOST N

The client connects to 127.0.0.1:EDGE_PORT with "Host: HOST", sends N
messages (text and binary, from empty to 1 MiB), checks each echo, and
prints one JSON line; exit 0 when every echo matched.
"""
import asyncio
import json
import os
import socket
import sys

import websockets

MAX = 4 * 1024 * 1024


async def echo(ws, *_):
    async for msg in ws:
        await ws.send(msg)


async def serve(port):
    async with websockets.serve(echo, "127.0.0.1", port, max_size=MAX):
        await asyncio.Future()


def message(i):
    sizes = [0, 1, 125, 126, 65535, 65536, 100000, 1024 * 1024]
    n = sizes[i % len(sizes)] if i % 3 else (i * 37) % 5000
    if i % 2:
        return os.urandom(n)
    return "m%d:" % i + "x" * n


async def client(port, host, count):
    sock = socket.create_connection(("127.0.0.1", port))
    ok = 0
    async with websockets.connect("ws://%s/ws" % host, sock=sock,
                                  max_size=MAX) as ws:
        for i in range(count):
            m = message(i)
            await ws.send(m)
            back = await ws.recv()
            if back == m:
                ok += 1
    print(json.dumps({"sent": count, "echoed": ok}))
    return ok == count


if sys.argv[1] == "serve":
    asyncio.run(serve(int(sys.argv[2])))
else:
    good = asyncio.run(client(int(sys.argv[2]), sys.argv[3],
                              int(sys.argv[4])))
    sys.exit(0 if good else 1)
