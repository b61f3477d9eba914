#!/usr/bin/env python3
"""reqid_client.py - many keep-alive GETs from a few concurrent clients,
recording the X-Request-ID each response carried.

    reqid_client.py PORT HOST N THREADS OUT [RATE] [PROGRESS]

Sends N requests in all (GET /an/THREAD/I, Host: HOST, a User-Agent
with a tab and a backslash in it) to 127.0.0.1:PORT
from THREADS threads, each on one keep-alive connection (reconnecting if
edged closes it; a request that fails is not sent again, since that
would make two events), at most RATE requests per second in all (0: as fast as
it can). Every request is answered or counted: OUT gets one line per
response, "STATUS X-REQUEST-ID"; PROGRESS (if given) holds the number of
responses so far, rewritten every 100. Exits 0 when every response was a
200 with an X-Request-ID, 1 otherwise (the first failures on stderr).
"""
import http.client
import os
import sys
import threading
import time

PORT = int(sys.argv[1])
HOST = sys.argv[2]
N = int(sys.argv[3])
THREADS = int(sys.argv[4])
OUT = sys.argv[5]
RATE = float(sys.argv[6]) if len(sys.argv) > 6 else 0.0
PROGRESS = sys.argv[7] if len(sys.argv) > 7 else None

# a tab and a backslash, which COPY's text format must escape
UA = "reqid-client\t\\1"
LOCK = threading.Lock()
RESULTS = []
ERRORS = []
DONE = [0]
START = time.monotonic()


def progress():
    if not PROGRESS:
        return
    tmp = PROGRESS + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % DONE[0])
    os.replace(tmp, PROGRESS)


def run(t, count):
    conn = None
    for i in range(count):
        if RATE > 0:
            # paced over all threads: request k of the run at k / RATE
            with LOCK:
                k = DONE[0] + len(ERRORS)
            delay = START + k / RATE - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        status, rid = 0, ""
        # no retry: a request sent twice would be two events
        try:
            if conn is None:
                conn = http.client.HTTPConnection("127.0.0.1", PORT,
                                                  timeout=30)
            conn.request("GET", "/an/%d/%d" % (t, i),
                         headers={"Host": HOST, "User-Agent": UA})
            r = conn.getresponse()
            r.read()
            status = r.status
            rid = r.getheader("X-Request-ID") or ""
            if r.getheader("Connection", "").lower() == "close":
                conn.close()
                conn = None
        except (OSError, http.client.HTTPException) as e:
            if conn is not None:
                conn.close()
            conn = None
            with LOCK:
                ERRORS.append("request %d/%d: %s" % (t, i, e))
        with LOCK:
            if status:
                RESULTS.append("%d %s" % (status, rid))
                DONE[0] += 1
                if DONE[0] % 100 == 0:
                    progress()
    if conn is not None:
        conn.close()


threads = []
for t in range(THREADS):
    count = N // THREADS + (1 if t < N % THREADS else 0)
    th = threading.Thread(target=run, args=(t, count))
    th.start()
    threads.append(th)
for th in threads:
    th.join()
progress()
with open(OUT, "w") as f:
    for line in RESULTS:
        f.write(line + "\n")
bad = [r for r in RESULTS if not r.startswith("200 ") or r == "200 "]
for e in ERRORS[:5]:
    print(e, file=sys.stderr)
for r in bad[:5]:
    print("bad response: %s" % r, file=sys.stderr)
sys.exit(1 if ERRORS or bad or len(RESULTS) != N else 0)
