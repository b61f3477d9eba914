#!/usr/bin/python3
"""udp_replay.py - record a QUIC client's first flight and replay it.

  udp_replay.py relay LISTEN_PORT TARGET_PORT FILE SECONDS
      Relays datagrams between one client (on 127.0.0.1:LISTEN_PORT) and
      127.0.0.1:TARGET_PORT for SECONDS, writing every datagram the client
      sent before the server's first answer to FILE (hex, one a line):
      its Initial and any 0-RTT packets. Prints "recorded N bytes B", B
      the recorded datagrams' bytes.
  udp_replay.py replay TARGET_PORT FILE
      Sends FILE's datagrams, from a new socket, to 127.0.0.1:TARGET_PORT
      as an attacker who saw them on the wire would, then reads answers for
      2 s. Prints "sent N bytes B answers M answered_bytes A".
Exit 0, or 2 on a usage error.
"""
import select
import socket
import sys
import time


def relay(listen_port, target_port, path, seconds):
    front = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    front.bind(("127.0.0.1", listen_port))
    back = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    back.connect(("127.0.0.1", target_port))
    client = None
    first = []
    answered = False
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        r, _, _ = select.select([front, back], [], [], 0.1)
        if front in r:
            data, client = front.recvfrom(65535)
            if not answered:
                first.append(data)
            back.send(data)
        if back in r:
            data = back.recv(65535)
            answered = True
            if client:
                front.sendto(data, client)
    with open(path, "w") as f:
        for d in first:
            f.write(d.hex() + "\n")
    print("recorded", len(first), "bytes", sum(len(d) for d in first))


def replay(target_port, path):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.connect(("127.0.0.1", target_port))
    with open(path) as f:
        grams = [bytes.fromhex(line.strip()) for line in f if line.strip()]
    for d in grams:
        s.send(d)
    answers = answered = 0
    end = time.monotonic() + 2
    while time.monotonic() < end:
        r, _, _ = select.select([s], [], [], 0.1)
        if r:
            try:
                answered += len(s.recv(65535))
                answers += 1
            except OSError:
                pass
    print("sent", len(grams), "bytes", sum(len(d) for d in grams),
          "answers", answers, "answered_bytes", answered)


def main():
    a = sys.argv[1:]
    if len(a) == 5 and a[0] == "relay":
        relay(int(a[1]), int(a[2]), a[3], float(a[4]))
    elif len(a) == 3 and a[0] == "replay":
        replay(int(a[1]), a[2])
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
