#!/usr/bin/env python3
"""ok_backend.py - a fast HTTP/1.1 backend for edged's tests: answers every
request "200 ok" with keep-alive, in one write, on asyncio.

    ok_backend.py PORT

Request bodies are not expected (GET); a request head is read up to its
blank line. For load (many requests in a few seconds) where
echo_backend.py's thread per connection and its separate writes are too
slow.
"""
import asyncio
import sys

RESP = (b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
        b"Content-Length: 3\r\n\r\nok\n")


async def serve(reader, writer):
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            if not head:
                break
            writer.write(RESP)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError,
            asyncio.LimitOverrunError):
        pass
    finally:
        writer.close()


async def main():
    server = await asyncio.start_server(serve, "127.0.0.1", int(sys.argv[1]),
                                        reuse_address=True)
    async with server:
        await server.serve_forever()


asyncio.run(main())
