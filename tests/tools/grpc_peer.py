#!/usr/bin/python3
"""grpc_peer.py - a real gRPC server and client (Debian's python3-grpcio,
run with /usr/bin/python3), raw bytes as messages (no generated code), for
edged's HTTP/2 upstream tests.

    grpc_peer.py serve PORT       the service echo.Echo on 127.0.0.1:PORT:
                                  Unary (answers "echo:" + the message),
                                  Stream (bidirectional: each message
                                  echoed as it comes), Fail (NOT_FOUND)
    grpc_peer.py call PORT AUTHORITY
                                  calls the three through 127.0.0.1:PORT
                                  (edged) as AUTHORITY; prints one JSON
                                  object: unary, stream (the echoes),
                                  in_turn (each echo came before the next
                                  message went), fail (the status code's
                                  name and details); exits 0
"""
import json
import sys
import threading
from concurrent import futures

import grpc


def serve(port):
    def unary(req, ctx):
        return b"echo:" + req

    def stream(reqs, ctx):
        for m in reqs:
            yield b"echo:" + m

    def fail(req, ctx):
        ctx.abort(grpc.StatusCode.NOT_FOUND, "no such thing")

    handler = grpc.method_handlers_generic_handler("echo.Echo", {
        "Unary": grpc.unary_unary_rpc_method_handler(unary),
        "Stream": grpc.stream_stream_rpc_method_handler(stream),
        "Fail": grpc.unary_unary_rpc_method_handler(fail),
    })
    srv = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    srv.add_generic_rpc_handlers((handler,))
    srv.add_insecure_port("127.0.0.1:%d" % port)
    srv.start()
    srv.wait_for_termination()


def call(port, authority):
    out = {}
    ch = grpc.insecure_channel("127.0.0.1:%d" % port,
                               options=[("grpc.default_authority",
                                         authority)])
    out["unary"] = ch.unary_unary("/echo.Echo/Unary")(
        b"hello", timeout=10).decode()
    got = threading.Event()
    in_turn = [True]

    def msgs():
        for m in (b"one", b"two", b"three"):
            got.clear()
            yield m
            if not got.wait(5):
                in_turn[0] = False

    echoes = []
    for r in ch.stream_stream("/echo.Echo/Stream")(msgs(), timeout=30):
        echoes.append(r.decode())
        got.set()
    out["stream"] = echoes
    out["in_turn"] = in_turn[0]
    try:
        ch.unary_unary("/echo.Echo/Fail")(b"x", timeout=10)
        out["fail"] = "OK"
    except grpc.RpcError as e:
        out["fail"] = [e.code().name, e.details()]
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(int(sys.argv[2]))
    else:
        sys.exit(call(int(sys.argv[2]), sys.argv[3]))
