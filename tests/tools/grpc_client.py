#!/usr/bin/python3
"""grpc_client.py - a gRPC-shaped HTTP/2 client on Debian's python3-h2 (run
with /usr/bin/python3), by prior knowledge, for edged's tests.

    grpc_client.py PORT AUTHORITY PATH MODE

MODE unary: one length-prefixed message "hello" and the end of the
stream; stream: a message, then waits (5 s at most) for its echo before
the next, three times, then ends the stream (what a proxy that buffers
the request would never pass); pause: the same with 2.5 s of silence
after each echo; trailers: a plain POST of "abc" followed by trailers
x-checksum: 123 and if-match: "x" (a field that may not be a trailer);
bigtrailers: the same with a 5000-byte trailer.

Prints one JSON object: status, headers, messages (as text), trailers
(null: none), echoed_in_turn (stream: every echo came before the next
message went), data_frames (DATA frames received: 0 for an answer in one
HEADERS frame). Exits 0 when the response ended, 1 otherwise.
"""
import json
import socket
import sys
import time

import h2.config
import h2.connection
import h2.events


def frame(msg):
    return b"\x00" + len(msg).to_bytes(4, "big") + msg


def main():
    port, authority, path, mode = sys.argv[1:5]
    sock = socket.create_connection(("127.0.0.1", int(port)), 5)
    sock.settimeout(10)
    c = h2.connection.H2Connection(
        config=h2.config.H2Configuration(client_side=True,
                                         header_encoding="utf-8"))
    c.initiate_connection()
    grpc = mode not in ("trailers", "bigtrailers")
    hdrs = [(":method", "POST"), (":scheme", "http"),
            (":authority", authority), (":path", path)]
    if grpc:
        hdrs += [("content-type", "application/grpc"), ("te", "trailers")]
    sid = c.get_next_available_stream_id()
    c.send_headers(sid, hdrs)
    out = {"status": None, "headers": {}, "messages": [], "trailers": None,
           "echoed_in_turn": True, "data_frames": 0}
    buf = b""
    ended = False
    plan = {"unary": [b"hello"], "stream": [b"one", b"two", b"three"],
            "pause": [b"one", b"two"], "trailers": [],
            "bigtrailers": []}[mode]
    if mode == "trailers":
        c.send_data(sid, b"abc")
        c.send_headers(sid, [("x-checksum", "123"), ("if-match", '"x"')],
                       end_stream=True)
    if mode == "bigtrailers":
        c.send_data(sid, b"abc")
        c.send_headers(sid, [("x-big", "b" * 5000)], end_stream=True)
    sent = 0

    def pump():
        nonlocal buf, ended
        data = sock.recv(65536)
        if not data:
            ended = True
            return
        for ev in c.receive_data(data):
            if isinstance(ev, h2.events.ResponseReceived):
                h = dict(ev.headers)
                out["status"] = h.pop(":status")
                out["headers"] = h
            elif isinstance(ev, h2.events.DataReceived):
                out["data_frames"] += 1
                c.acknowledge_received_data(ev.flow_controlled_length,
                                            ev.stream_id)
                buf += ev.data
                while len(buf) >= 5 and grpc:
                    n = int.from_bytes(buf[1:5], "big")
                    if len(buf) < 5 + n:
                        break
                    out["messages"].append(buf[5:5 + n].decode())
                    buf = buf[5 + n:]
            elif isinstance(ev, h2.events.TrailersReceived):
                out["trailers"] = dict(ev.headers)
            elif isinstance(ev, h2.events.StreamEnded):
                ended = True
            elif isinstance(ev, h2.events.StreamReset):
                out["reset"] = int(ev.error_code)
                ended = True
        sock.sendall(c.data_to_send())

    try:
        while sent < len(plan):
            last = sent == len(plan) - 1
            c.send_data(sid, frame(plan[sent]),
                        end_stream=mode == "unary" and last)
            sock.sendall(c.data_to_send())
            sent += 1
            if mode in ("stream", "pause"):
                t = time.time() + 5
                while len(out["messages"]) < sent and not ended and \
                        time.time() < t:
                    pump()
                if len(out["messages"]) < sent:
                    out["echoed_in_turn"] = False
                if mode == "pause":
                    time.sleep(2.5)
        if mode in ("stream", "pause"):
            c.end_stream(sid)
        sock.sendall(c.data_to_send())
        while not ended:
            pump()
    except (socket.timeout, OSError) as e:
        out["error"] = str(e)
    out["body"] = buf.decode(errors="replace") if not grpc else None
    print(json.dumps(out))
    return 0 if ended else 1


if __name__ == "__main__":
    sys.exit(main())
