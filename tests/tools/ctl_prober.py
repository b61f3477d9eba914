#!/usr/bin/env python3
"""ctl_prober.py - how long edged's control loop takes to answer while
something big happens: GET /healthz on the admin listener and `edgectl
status` on the control socket, each about every 100 ms on a thread of its
own, until STOP_FILE exists.

  ctl_prober.py ADMIN_PORT EDGECTL SOCKET OUT_JSON STOP_FILE [EDGED_PID]

Writes OUT_JSON at the end: for "healthz" and "status" the number of
probes, the worst latency in ms, when it was (seconds since the start),
the failures (a status other than 200, a non-zero exit, a timeout; the
first few kept), the probes over 1 s and the slowest few. With
EDGED_PID, each probe also notes how long edged's control loop thread
(the process's main thread) waited for a CPU meanwhile
(/proc/PID/task/PID/schedstat): on a machine others load, that is the
part of a slow answer the machine, not edged, is to blame for. The file
OUT_JSON.started appears once each thread has had one answer."""
import http.client
import json
import os
import subprocess
import sys
import threading
import time

INTERVAL = 0.1
TIMEOUT = 60.0


def main():
    port, edgectl, sock, out, stop = sys.argv[1:6]
    pid = sys.argv[6] if len(sys.argv) > 6 else None
    port = int(port)
    t0 = time.monotonic()
    res = {}
    ready = {"healthz": threading.Event(), "status": threading.Event()}

    def waited_ms():
        """edged's control loop thread's time on a run queue so far."""
        if not pid:
            return 0.0
        try:
            with open("/proc/%s/task/%s/schedstat" % (pid, pid)) as f:
                return int(f.read().split()[1]) / 1e6
        except (OSError, ValueError, IndexError):
            return 0.0

    def healthz():
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT)
        c.request("GET", "/healthz")
        r = c.getresponse()
        r.read()
        c.close()
        return None if r.status == 200 else "status %d" % r.status

    def status():
        p = subprocess.run([edgectl, "--socket", sock, "status", "--json"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=TIMEOUT)
        if p.returncode != 0:
            return "exit %d: %s" % (p.returncode, p.stderr[:200])
        json.loads(p.stdout)
        return None

    def loop(name, fn):
        r = {"n": 0, "max_ms": 0.0, "max_at_s": 0.0, "max_waited_ms": 0.0,
             "failures": [], "nfail": 0, "over_1s": 0, "slowest": []}
        res[name] = r
        while not os.path.exists(stop):
            a = time.monotonic()
            w = waited_ms()
            try:
                err = fn()
            except Exception as e:  # a timeout, a refused connection
                err = repr(e)
            ms = (time.monotonic() - a) * 1000.0
            w = waited_ms() - w
            r["n"] += 1
            if ms > r["max_ms"]:
                r["max_ms"] = round(ms, 1)
                r["max_at_s"] = round(a - t0, 1)
                r["max_waited_ms"] = round(w, 1)
            if ms > 1000.0:
                r["over_1s"] += 1
            r["slowest"].append([round(ms), round(w), round(a - t0, 1), round(a, 3)])
            r["slowest"] = sorted(r["slowest"], reverse=True)[:5]
            if err:
                r["nfail"] += 1
                if len(r["failures"]) < 5:
                    r["failures"].append(err)
            else:
                ready[name].set()
            time.sleep(INTERVAL)

    th = [threading.Thread(target=loop, args=(k, f), daemon=True)
          for k, f in (("healthz", healthz), ("status", status))]
    for t in th:
        t.start()
    for e in ready.values():
        e.wait(TIMEOUT)
    open(out + ".started", "w").close()
    for t in th:
        t.join()
    with open(out + ".tmp", "w") as f:
        json.dump(res, f)
    os.rename(out + ".tmp", out)


if __name__ == "__main__":
    main()
