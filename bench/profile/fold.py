#!/usr/bin/python3
"""bench/profile/fold.py - fold `perf script` samples of edged, put them
into categories as CPU microseconds per request, and draw a flame graph.

Reads `perf script -F comm,tid,period,ip,sym,dso` on stdin; writes a
Markdown report on stdout, the folded stacks (one "frame;frame;... N"
line per distinct stack, root first, the thread's name as the root) to
--folded and an SVG flame graph to --svg. Ours: no third-party code.

A sample's category:
  - its leaf in the kernel: "syscall: NAME" by the __x64_sys_NAME frame
    under it (a write's loopback delivery counts to the write), else
    "kernel: other" (interrupts, page faults, scheduling);
  - its leaf in the allocator (malloc, free, ...): "allocator";
  - its leaf in libevent: "libevent (the loop)"; in libssl/libcrypto:
    "OpenSSL";
  - else the innermost frame in edged itself, by the source file that
    defines its function (FILE_RULES below, the files read from --src): a
    memcpy the head builder calls is the head builder's;
  - no edged frame at all: "other".
"""
import argparse
import html
import re
import sys
import zlib
from collections import Counter, defaultdict

# edged's source files by category (a function's file is found in
# --src, so static helpers count where they live); first match wins
FILE_RULES = [
    ("parser (h1)", r"^h1\.c$"),
    ("head builder (hdr)", r"^hdr\.c$"),
    ("route lookup", r"^(route|route_src|route_tcp|pmap|sni|tcproute)\.c$"),
    ("upstream select and pool", r"^upstream\.c$"),
    ("clock", r"^clk\.c$"),
    ("analytics writer (encode, write)", r"^analytics.*\.c$"),
    ("request id", r"^(reqid|siphash)\.c$"),
    ("metrics", r"^(metrics|stats)\.c$"),
    ("connection and request (conn, req, proxy)", r"^(conn|req|proxy|admit|outcome)\.c$"),
    ("socket I/O (sockio, transport)", r"^(sockio|transport|tls_io)\.c$"),
    ("worker and mailbox", r"^(worker|mailbox|listener)\.c$"),
    ("tunnels", r"^(tunnel|splice|l4)\.c$"),
    ("wake", r"^wake\.c$"),
    ("TLS", r"^tls.*\.c$"),
]
FILE_RULES = [(c, re.compile(r)) for c, r in FILE_RULES]
# functions of the worker's side of the analytics queue (the rest of
# analytics*.c runs in the writer's thread)
ENQUEUE = {"analytics_enqueue", "analytics_event_set", "analytics_utf8_seq"}
FUNC_FILE = {}


def load_sources(src):
    """Map each function defined at the start of a line in src/**.c to its
    file's name."""
    import os
    defn = re.compile(r"^(?:static\s+)?(?:inline\s+)?[A-Za-z_][\w\s\*]*?\b([A-Za-z_]\w*)\s*\(")
    for dirpath, _, files in os.walk(src):
        for fn in files:
            if not fn.endswith(".c"):
                continue
            with open(os.path.join(dirpath, fn), errors="replace") as f:
                for line in f:
                    if line[:1].isspace() or line.rstrip().endswith(";"):
                        continue
                    m = defn.match(line)
                    if m and m.group(1) not in ("if", "while", "for", "switch", "return"):
                        FUNC_FILE.setdefault(m.group(1), fn)


def edged_category(sym):
    if sym in ENQUEUE:
        return "analytics enqueue"
    fn = FUNC_FILE.get(sym)
    if fn:
        for c, r in FILE_RULES:
            if r.search(fn):
                return c
        return "edged: other (%s)" % fn
    return "edged: other (%s)" % sym


ALLOC = re.compile(
    r"^(malloc|free|calloc|realloc|cfree|_int_malloc|_int_free|"
    r"malloc_consolidate|tcache_|_int_realloc|__libc_(malloc|free|calloc|realloc)|"
    r"unlink_chunk|sysmalloc|__GI___libc_(malloc|free))")
SYSCALL = re.compile(r"^(__x64_sys_|__ia32_sys_|__se_sys_|__do_sys_)(\w+)")


def parse(f):
    """Yield (comm, period, frames leaf-first as (sym, dso))."""
    comm, period, frames = None, 0, []
    for line in f:
        line = line.rstrip("\n")
        if not line.strip():
            if comm is not None:
                yield comm, period, frames
            comm, frames = None, []
            continue
        if not line[0].isspace():
            if comm is not None:
                yield comm, period, frames
            parts = line.split()
            # "comm tid period": comm may hold spaces; the last two are
            # numbers
            try:
                period = int(parts[-1])
                comm = " ".join(parts[:-2]) or "?"
            except (ValueError, IndexError):
                comm, period = "?", 0
            frames = []
            continue
        m = re.match(r"\s*([0-9a-f]+)\s+(.*?)\s+\((.*)\)\s*$", line)
        if m:
            sym, dso = m.group(2), m.group(3)
            sym = re.sub(r"\+0x[0-9a-f]+$", "", sym)
            frames.append((sym, dso))
    if comm is not None:
        yield comm, period, frames


WRAPPERS = {"recv", "send", "sendmsg", "recvmsg", "sendto", "recvfrom",
            "read", "write", "writev", "readv", "epoll_wait", "epoll_ctl",
            "accept4", "accept", "close", "connect", "socket", "getsockopt",
            "setsockopt", "splice", "pipe2", "ioctl", "futex", "nanosleep",
            "clock_nanosleep", "poll", "eventfd_write", "eventfd_read"}


def is_kernel(dso):
    return dso.startswith("[kernel")


def wrapper(sym):
    """The system call a libc wrapper makes (__libc_recv: recv), or None."""
    n = re.sub(r"^(__GI_)?_*(libc_)?_*", "", sym)
    n = re.sub(r"(_nocancel|64)$", "", n)
    # the kernel's names: send(2) is sendto, recv(2) recvfrom
    return {"send": "sendto", "recv": "recvfrom"}.get(n, n) if n in WRAPPERS else None


def is_edged(dso):
    return dso.endswith("/edged") or dso == "edged"


def category(frames):
    if not frames:
        return "other"
    leaf_sym, leaf_dso = frames[0]
    if is_kernel(leaf_dso):
        for sym, _ in frames:
            m = SYSCALL.match(sym)
            if m:
                return "syscall: " + m.group(2)
        # sampled on the way in or out (the timer fires when interrupts
        # come back on): the libc wrapper that made the call says which
        for sym, dso in frames:
            if not is_kernel(dso):
                w = wrapper(sym)
                return "syscall: " + w if w else "kernel: other"
        return "kernel: other"
    w = wrapper(leaf_sym) if "libc" in leaf_dso else None
    if w:
        return "syscall: " + w
    if ALLOC.match(leaf_sym):
        return "allocator"
    if "libevent" in leaf_dso:
        return "libevent (the loop)"
    if "libssl" in leaf_dso or "libcrypto" in leaf_dso:
        return "OpenSSL"
    for sym, dso in frames:
        if is_edged(dso):
            return edged_category(sym)
    if "libc" in leaf_dso:
        return "libc: " + leaf_sym
    return "other"


def svg(stacks, total, title, out):
    """A flame graph: the root at the bottom, a frame's width its share."""
    tree = {"n": 0, "c": {}}
    for stack, n in stacks.items():
        node = tree
        node["n"] += n
        for fr in stack.split(";"):
            node = node["c"].setdefault(fr, {"n": 0, "c": {}})
            node["n"] += n
    width, fh, pad = 1200, 16, 10

    def depth(node):
        return 1 + max((depth(c) for c in node["c"].values()), default=0)

    levels = depth(tree)
    height = levels * fh + 3 * pad + 20
    rects = []

    def color(name):
        h = zlib.crc32(name.encode())
        if name.startswith(("__x64_sys", "tcp_", "ip_", "__sys", "do_", "sock_",
                            "skb_", "entry_", "syscall")):
            return "rgb(%d,%d,%d)" % (230, 140 + h % 60, 40)
        return "rgb(%d,%d,%d)" % (200 + h % 55, 80 + (h >> 8) % 120, 40 + (h >> 16) % 50)

    def walk(node, name, x, lvl):
        w = node["n"] / total * (width - 2 * pad)
        if name is not None and w >= 0.3:
            y = height - pad - (lvl + 1) * fh
            label = name if len(name) * 7 < w - 4 else (
                name[: max(int((w - 4) / 7) - 2, 0)] + ".." if w > 30 else "")
            pct = 100.0 * node["n"] / total
            rects.append(
                '<g><title>%s (%d samples, %.2f%%)</title>'
                '<rect x="%.2f" y="%d" width="%.2f" height="%d" fill="%s" rx="2"/>'
                '<text x="%.2f" y="%d">%s</text></g>' % (
                    html.escape(name), node["n"], pct, x, y, w, fh - 1,
                    color(name), x + 3, y + fh - 4, html.escape(label)))
        cx = x
        for cname in sorted(node["c"]):
            child = node["c"][cname]
            walk(child, cname, cx, lvl + (0 if name is None else 1))
            cx += child["n"] / total * (width - 2 * pad)

    walk(tree, None, pad, -1)
    with open(out, "w") as f:
        f.write('<?xml version="1.0" standalone="no"?>\n'
                '<svg version="1.1" width="%d" height="%d" '
                'xmlns="http://www.w3.org/2000/svg" '
                'style="font-family:monospace;font-size:11px">\n' % (width, height))
        f.write('<rect width="100%%" height="100%%" fill="#fdfdf6"/>\n'
                '<text x="%d" y="18" style="font-size:14px">%s</text>\n'
                % (pad, html.escape(title)))
        f.write("\n".join(rects))
        f.write("\n</svg>\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rps", type=float, required=True)
    ap.add_argument("--duration", type=float, required=True)
    ap.add_argument("--freq", type=int, required=True)
    ap.add_argument("--title", default="edged")
    ap.add_argument("--folded", required=True)
    ap.add_argument("--svg", required=True)
    ap.add_argument("--src", required=True, help="edged's sources (userspace/)")
    a = ap.parse_args()
    load_sources(a.src)

    stacks = Counter()
    cats = defaultdict(int)
    threads = defaultdict(int)
    selfs = defaultdict(int)
    total = 0
    nsamples = 0
    for comm, period, frames in parse(sys.stdin):
        if not frames:
            continue
        nsamples += 1
        total += period
        cats[category(frames)] += period
        threads[comm] += period
        selfs["%s (%s)" % (frames[0][0], frames[0][1].rsplit("/", 1)[-1])] += period
        stacks[";".join([comm] + [s for s, _ in reversed(frames)])] += 1
    if nsamples == 0:
        print("fold: no samples", file=sys.stderr)
        return 1
    with open(a.folded, "w") as f:
        for st, n in sorted(stacks.items()):
            f.write("%s %d\n" % (st, n))
    svg(stacks, sum(stacks.values()), a.title, a.svg)

    reqs = a.rps * a.duration
    us = lambda ns: ns / 1000.0 / reqs  # noqa: E731

    print("%d samples at %d Hz over %g s; %.0f req/s, so %.0f requests in the window;"
          % (nsamples, a.freq, a.duration, a.rps, reqs))
    print("edged's CPU: %.2f µs per request (%.0f%% of one CPU)." % (
        us(total), total / 1e9 / a.duration * 100))
    print()
    print("| where | share | µs/request |")
    print("|---|---|---|")
    for c, ns in sorted(cats.items(), key=lambda kv: -kv[1]):
        if ns / total < 0.002:
            continue
        print("| %s | %.1f%% | %.3f |" % (c, 100.0 * ns / total, us(ns)))
    print()
    print("| thread | share | µs/request |")
    print("|---|---|---|")
    for c, ns in sorted(threads.items(), key=lambda kv: -kv[1]):
        print("| %s | %.1f%% | %.3f |" % (c, 100.0 * ns / total, us(ns)))
    print()
    print("Hottest functions by their own samples:")
    print()
    print("| function (object) | share | µs/request |")
    print("|---|---|---|")
    for c, ns in sorted(selfs.items(), key=lambda kv: -kv[1])[:20]:
        print("| %s | %.1f%% | %.3f |" % (c.replace("|", "\\|"), 100.0 * ns / total, us(ns)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
