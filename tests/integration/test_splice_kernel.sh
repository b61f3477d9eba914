#!/bin/bash
# test_splice_kernel.sh - the kernel's part of the sockmap splice, on
# whatever kernel runs the test (the host's, and the 6.1 and 6.12 VMs
# through `tests/run --vm`): edged's start-up self-test passes (and
# sockets leave the verdict under their socket locks), an
# upgraded tunnel is taken by the kernel (its counters say so) and moves
# 16 MiB each way with SHA-256 equal at both ends, a half-close each way
# is forwarded while spliced, a reset from the backend closes the
# client's side, and the hand-back to the copy mover keeps every byte: a
# live echo tunnel switched on and off (tests/tools/splice_switch.py),
# and a reader that stops (handed back to the copy mover); splice auto
# (tests/tools/splice_auto.py). The normal build only, small
# transfers: a VM under TCG is slow. Needs root (loading the sk_skb program needs CAP_BPF).
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/lib_edged.sh
. "$(dirname "$0")/../lib_edged.sh"
edged_begin python3
if [ "$(id -u)" != 0 ]; then
	t_skip "the kernel splice" "not root: loading the sk_skb program needs CAP_BPF"
	t_exit
	exit
fi

BASE=$(edged_ports 3)
P_EDGE=$BASE
P_BACK=$((BASE + 1))
P_ADMIN=$((BASE + 2))
{
	edged_conf_head "$P_ADMIN" "$T_TMP/edged.sock" 1
	cat <<CONF
splice = "sockmap";
timeouts = { tunnel_idle = "30s"; upstream_response = "10s"; };
projects = (
  { id = "rt";
    environments = (
      { id = "rt-prod";
        domains = [ "raw.test" ];
        deployment = { id = "rt-1"; upstreams = [ "127.0.0.1:$P_BACK" ]; };
      }
    );
  }
);
CONF
} >"$T_TMP/edge.conf"

client() { # MODE [ARGS...]
	timeout 120 python3 "$TOOLS/tunnel_client.py" "$1" "$P_EDGE" raw.test "${@:2}" \
		>"$T_TMP/client.json" 2>"$T_TMP/client.err"
}
backend_last() { # PATH
	python3 - "$T_TMP/backend.jsonl" "$1" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
recs = [r for r in recs if r.get("path") == sys.argv[2]]
print(json.dumps(recs[-1] if recs else {}))
PY
}
splice_json() { # edgectl splice --json into $T_TMP/splice.json
	"$EDGECTL" --socket "$T_TMP/edged.sock" splice --json >"$T_TMP/splice.json" 2>/dev/null
}
kernel_up() {
	splice_json
	json_field "$T_TMP/splice.json" kernel_bytes_up
}

edged_need_build
edged_backend "$P_BACK" python3 "$TOOLS/tunnel_backend.py" "$P_BACK" "$T_TMP/backend.jsonl" ||
	t_fail "tunnel backend starts"
if ! edged_start "$EDGED" "$T_TMP/edge.conf" -v; then
	t_fail "edged starts" "$(tail -5 "$EDGED_LOG")"
	t_exit
	exit
fi
# the listeners are up before the self-test (and the kTLS probe, which
# loads the tls module: seconds in a VM under TCG) has said anything:
# wait for edged's "serving on", up to 60 s
for _ in $(seq 600); do
	grep -q "serving on [0-9]" "$EDGED_LOG" && break
	sleep 0.1
done
if grep -q "sockmap self-test passed" "$EDGED_LOG"; then
	t_ok "edged's sockmap self-test passes on kernel $(uname -r)"
else
	t_fail "sockmap self-test on $(uname -r)" "$(grep splice "$EDGED_LOG")"
	t_exit
	exit
fi
# sockets leave the verdict under their locks (edge_splice_unarm, a TCP
# socket iterator): a plain delete races the verdict, which then drops
# bytes (tests/unit/test_splice.c)
if grep -q "plain deletes" "$EDGED_LOG"; then
	t_fail "sockets leave the verdict under their locks on $(uname -r)" "$(grep "plain deletes" "$EDGED_LOG")"
else
	t_ok "sockets leave the verdict under their socket locks (the TCP iterator) on kernel $(uname -r)"
fi

n=$((16 << 20))
k0=$(kernel_up)
if client pump "$n" "$EPID" 0 200 $((8 << 20)); then
	rec=$(backend_last "/pump/$n/200/$((8 << 20))")
	k1=$(kernel_up)
	if [ "$(echo "$rec" | json_field - recv_sha)" = "$(json_field "$T_TMP/client.json" sent_sha)" ] &&
		[ "$(echo "$rec" | json_field - sent_sha)" = "$(json_field "$T_TMP/client.json" recv_sha)" ] &&
		[ "$((k1 - k0))" -ge $((n * 9 / 10)) ]; then
		t_ok "16 MiB each way through a spliced tunnel, SHA-256 equal, $(((k1 - k0) >> 20)) MiB up moved by the kernel"
	else
		t_fail "spliced bulk" "kernel up $k0 -> $k1; client $(cat "$T_TMP/client.json") backend $rec"
	fi
else
	t_fail "spliced bulk" "$(tail -2 "$T_TMP/client.err"); edged: $(grep -i tunnel "$EDGED_LOG" | tail -4)"
fi

if client halfclose 300000 && sleep 0.3 &&
	[ "$(backend_last /halfclose/300000 | json_field - recv_bytes)" = 100000 ]; then
	t_ok "half-close while spliced: the client's EOF forwarded after its 100000 bytes, 300000 bytes back after it"
else
	t_fail "half-close while spliced" "$(cat "$T_TMP/client.err") $(backend_last /halfclose/300000)"
fi

# a reset from the upstream mid-stream closes the client's side
if timeout 20 python3 - "$P_EDGE" "$P_BACK" <<'PY' >"$T_TMP/reset.out" 2>&1; then
import socket, struct, sys, time
edge = int(sys.argv[1])
s = socket.create_connection(("127.0.0.1", edge))
s.settimeout(15)
s.sendall(b"GET /reset HTTP/1.1\r\nHost: raw.test\r\nConnection: Upgrade\r\n"
          b"Upgrade: raw-test\r\n\r\n")
buf = b""
while b"\r\n\r\n" not in buf:
    buf += s.recv(4096)
assert buf.startswith(b"HTTP/1.1 101"), buf
s.sendall(b"x" * 1000)
got = b""
while len(got) < 1000:
    got += s.recv(4096)
time.sleep(0.3)  # the kernel has the pair now
s.sendall(b"RESET-NOW")  # the backend resets its connection
t0 = time.time()
try:
    while s.recv(4096):
        pass
except ConnectionResetError:
    pass
print("closed after %.2f s" % (time.time() - t0))
PY
	t_ok "a reset from the upstream while spliced closes the client's side ($(cat "$T_TMP/reset.out"))"
else
	t_fail "reset while spliced" "$(cat "$T_TMP/reset.out")"
fi

# the hand-back: a live echo tunnel taken by the kernel (splice on),
# then handed back (off), every echo intact
"$EDGECTL" --socket "$T_TMP/edged.sock" splice off >/dev/null 2>&1
if out=$(timeout 60 python3 "$TOOLS/splice_switch.py" "$P_EDGE" "$EDGECTL" "$T_TMP/edged.sock" 2>&1); then
	t_ok "splice on, then off: a live tunnel taken by the kernel, then handed back, echoes intact"
else
	t_fail "the switch both ways" "$out; edged: $(grep -i tunnel "$EDGED_LOG" | tail -4)"
fi
"$EDGECTL" --socket "$T_TMP/edged.sock" splice on >/dev/null 2>&1

# a reader that stops while the backend sends 40 MiB (more where the
# receive buffers may grow larger): the kernel comes to hold more for it
# than the upstream socket's receive buffer, its send queue full, and
# the tunnel is handed back to the copy mover; every byte each way
# intact. The reader reads again once edged has decided to hand it back
# (at most 60 s: a slow guest under load may take more than a few
# seconds to fill the hold); the hand-back ends once the kernel's queue
# has drained into the reader
n=$(splice_slow_bytes $((40 << 20)))
splice_json
h0=$(json_field "$T_TMP/splice.json" handed_back)
HB="handed back to the copy mover \(it holds too much for a slow reader\), no byte lost"
rm -f "$T_TMP/read-again"
(
	for ((i = 0; i < 1200; i++)); do
		grep -Eq -- "leaving the kernel \(it holds too much for a slow reader\)" "$EDGED_LOG" && break
		sleep 0.05
	done
	touch "$T_TMP/read-again"
) &
edged_track $!
if client pump "$n" "$EPID" 0 100 0 "60000:$T_TMP/read-again" &&
	rec=$(backend_last "/pump/$n/100") &&
	[ "$(echo "$rec" | json_field - recv_sha)" = "$(json_field "$T_TMP/client.json" sent_sha)" ] &&
	[ "$(echo "$rec" | json_field - sent_sha)" = "$(json_field "$T_TMP/client.json" recv_sha)" ]; then
	splice_json
	if edged_wait_log "$HB" &&
		[ "$(json_field "$T_TMP/splice.json" handed_back)" -gt "${h0:-0}" ]; then
		t_ok "a reader that stops: handed back to the copy mover, $((n >> 20)) MiB each way intact"
	else
		t_fail "a reader that stops is handed back" "handed back ${h0:-?} -> $(json_field "$T_TMP/splice.json" handed_back); edged: $(grep -i tunnel "$EDGED_LOG" | tail -4)"
	fi
else
	t_fail "slow reader hand-back" "$(tail -2 "$T_TMP/client.err"); $(cat "$T_TMP/client.json"); edged: $(tail -12 "$EDGED_LOG")"
fi

# splice auto: a tunnel carrying messages is taken by the kernel, handed
# back when it turns to bulk and when it goes quiet; a stream is copied.
# The turn to bulk is handed back for it, or, where the client's FIN
# comes first (auto's watch then stops), as a slow reader
"$EDGECTL" --socket "$T_TMP/edged.sock" splice auto >/dev/null 2>&1
if out=$(timeout 120 python3 "$TOOLS/splice_auto.py" "$P_EDGE" "$EDGECTL" "$T_TMP/edged.sock" 2>&1) &&
	edged_wait_log "handed back to the copy mover \((auto: it turned to bulk|it holds too much for a slow reader)\)"; then
	t_ok "splice auto: $out"
else
	t_fail "splice auto moves a tunnel by its traffic" "$out; edged: $(grep -E 'leaving the kernel|handed back|spliced by|closing it' "$EDGED_LOG" | tail -12)"
fi

edged_stop
t_exit
