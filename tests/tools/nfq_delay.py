#!/usr/bin/env python3
"""nfq_delay.py - the delay line behind tests/tools/netem.bpf.c.

    nfq_delay.py QUEUE

Binds netfilter queue QUEUE of the network namespace it runs in (raw
netlink: no library) and holds each packet queued there for the delay
netem.bpf.c put in its mark (0xed000000 | microseconds), then accepts
it: packets leave in the order of their departure times, not of their
arrival, as sch_fq would send them on a kernel that had it. A packet
without such a mark is accepted at once. The queue is set to fail open
(accept when full). Prints "ready" once bound; on SIGTERM or SIGINT
prints one JSON line: packets held, released, and released out of
arrival order (after one that arrived later), then exits.

The iptables rule that feeds it, in the namespace:
    iptables -t mangle -A PREROUTING -m mark --mark 0xed000000/0xff000000 \\
        -j NFQUEUE --queue-num QUEUE --queue-bypass
"""
import heapq
import json
import os
import select
import signal
import socket
import struct
import sys
import time

NETLINK_NETFILTER = 12
NETLINK_NO_ENOBUFS = 5
NLMSG_ERROR = 2
NLM_F_REQUEST = 1
NLM_F_ACK = 4
NFNL_SUBSYS_QUEUE = 3
NFQNL_MSG_PACKET = 0
NFQNL_MSG_VERDICT = 1
NFQNL_MSG_CONFIG = 2
NFQA_PACKET_HDR = 1
NFQA_VERDICT_HDR = 2
NFQA_MARK = 3
NFQA_CFG_CMD = 1
NFQA_CFG_PARAMS = 2
NFQA_CFG_QUEUE_MAXLEN = 3
NFQA_CFG_MASK = 4
NFQA_CFG_FLAGS = 5
NFQNL_CFG_CMD_BIND = 1
NFQNL_COPY_META = 1
NFQA_CFG_F_FAIL_OPEN = 1
NF_ACCEPT = 1
MARK_TAG, MARK_MASK, DELAY_MASK = 0xED000000, 0xFF000000, 0x00FFFFFF

queue = int(sys.argv[1])
seq = 0


def attr(kind, data):
    a = struct.pack("=HH", 4 + len(data), kind) + data
    return a + b"\0" * (-len(a) % 4)


def send(sock, msg, flags, payload):
    global seq
    seq += 1
    body = struct.pack("=BBH", socket.AF_UNSPEC, 0, socket.htons(queue)) + payload
    hdr = struct.pack("=IHHII", 16 + len(body), (NFNL_SUBSYS_QUEUE << 8) | msg,
                      NLM_F_REQUEST | flags, seq, 0)
    sock.send(hdr + body)


def messages(buf):
    """(type, payload after the nfgenmsg or the error code) for each message"""
    off = 0
    while off + 16 <= len(buf):
        ln, kind = struct.unpack_from("=IH", buf, off)
        if ln < 16:
            break
        yield kind, buf[off + 16:off + ln]
        off += (ln + 3) & ~3


def attrs(data):
    out, off = {}, 4  # past the nfgenmsg
    while off + 4 <= len(data):
        ln, kind = struct.unpack_from("=HH", data, off)
        if ln < 4:
            break
        out[kind & 0x7FFF] = data[off + 4:off + ln]
        off += (ln + 3) & ~3
    return out


sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
sock.setsockopt(270, NETLINK_NO_ENOBUFS, 1)  # SOL_NETLINK
sock.bind((0, 0))
for payload in (attr(NFQA_CFG_CMD, struct.pack("!BxH", NFQNL_CFG_CMD_BIND, 0)),
                attr(NFQA_CFG_PARAMS, struct.pack("!IB", 0xFFFF, NFQNL_COPY_META)),
                attr(NFQA_CFG_QUEUE_MAXLEN, struct.pack("!I", 8192)) +
                attr(NFQA_CFG_FLAGS, struct.pack("!I", NFQA_CFG_F_FAIL_OPEN)) +
                attr(NFQA_CFG_MASK, struct.pack("!I", NFQA_CFG_F_FAIL_OPEN))):
    send(sock, NFQNL_MSG_CONFIG, NLM_F_ACK, payload)
    for kind, data in messages(sock.recv(65536)):
        if kind == NLMSG_ERROR and struct.unpack_from("=i", data)[0]:
            sys.exit("nfq_delay: configuring queue %d: %s" % (
                queue, os.strerror(-struct.unpack_from("=i", data)[0])))

stats = {"held": 0, "released": 0, "out_of_order": 0}
stop = False


def on_signal(_sig, _frm):
    global stop
    stop = True


signal.signal(signal.SIGTERM, on_signal)
signal.signal(signal.SIGINT, on_signal)
print("ready", flush=True)

heap = []  # (due, arrival, packet id)
arrival = 0
latest_released = -1


def verdict(pid):
    send(sock, NFQNL_MSG_VERDICT, 0,
         attr(NFQA_VERDICT_HDR, struct.pack("!II", NF_ACCEPT, pid)))


while not stop:
    now = time.monotonic()
    while heap and heap[0][0] <= now:
        _, arr, pid = heapq.heappop(heap)
        verdict(pid)
        stats["released"] += 1
        if arr < latest_released:
            stats["out_of_order"] += 1
        latest_released = max(latest_released, arr)
    timeout = max(0.0, heap[0][0] - now) if heap else 0.2
    try:
        ready, _, _ = select.select([sock], [], [], timeout)
    except InterruptedError:
        continue
    if not ready:
        continue
    try:
        buf = sock.recv(1 << 20)
    except BlockingIOError:
        continue
    now = time.monotonic()
    for kind, data in messages(buf):
        if kind != (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET:
            continue
        a = attrs(data)
        if NFQA_PACKET_HDR not in a:
            continue
        pid = struct.unpack_from("!I", a[NFQA_PACKET_HDR])[0]
        mark = struct.unpack("!I", a[NFQA_MARK])[0] if NFQA_MARK in a else 0
        arrival += 1
        if mark & MARK_MASK != MARK_TAG:
            verdict(pid)
            latest_released = max(latest_released, arrival)
            continue
        stats["held"] += 1
        heapq.heappush(heap, (now + (mark & DELAY_MASK) / 1e6, arrival, pid))

for _, _, pid in heap:  # let what is held go
    verdict(pid)
print(json.dumps(stats), flush=True)
