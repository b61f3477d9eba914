#!/bin/bash
# test_splice_ktls.sh - tunnels on a TLS listener (an Upgrade answered 101
# over HTTPS), on whatever kernel runs the test (the host's, and the 6.1
# and 6.12 VMs through `tests/run --vm`, docs/splice.md "TLS tunnels"):
#   - edged's kTLS probe agrees with the kernel (a loopback socket given
#     the tls ULP here: the module loads for root), and `edgectl splice
#     --json` / `edgectl status` say which mover TLS tunnels use and why
#     ("kernel has no kTLS ..." where it has none; where it has, that
#     edged does not move a TLS session into it yet);
#   - with splice = "sockmap" (a plain tunnel would be spliced), a TLS 1.2
#     and a TLS 1.3 tunnel each move N random bytes each way at once
#     through the copy mover (tests/tools/tls_tunnel_pump.py against
#     tunnel_backend.py's /pump/N), SHA-256 equal at both ends, EOF by
#     close_notify forwarded as a FIN (sent by the client once the
#     backend's bytes are in); the kernel took none of them
#     (edgectl splice --json: spliced and kernel bytes unchanged).
#   - where the kernel has kTLS, as root: what it allows between kTLS and
#     a sockhash on one socket (build/tools/ktls_sockmap_probe), reported;
#   - the kTLS splice itself (the kernel moving a TLS tunnel) is not built:
#     counted skipped, with the reason, where the kernel has kTLS.
# N is 64 MiB on the host, 4 MiB in a VM (TCG is slow). Normal build and
# the ASan build (host). Needs no root (the probe needs root to load the
# tls module; a test not run as root expects what edged finds).
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/lib_edged.sh
. "$(dirname "$0")/../lib_edged.sh"
edged_begin python3 openssl

BASE=$(edged_ports 3)
P_EDGE=$BASE
P_TLS=$((BASE + 1))
P_BACK=$((BASE + 2))
P_ADMIN=$((BASE + 3))
SOCK="$T_TMP/edged.sock"
N=$((64 << 20))
[ -n "${EDGE_VMTEST:-}" ] && N=$((4 << 20))

# the certificate: an ECDSA P-256 key, self-signed for t.tls.test
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
	-subj "/CN=t.tls.test" -addext "subjectAltName=DNS:t.tls.test" \
	-keyout "$T_TMP/t.key" -out "$T_TMP/t.pem" >/dev/null 2>&1 ||
	t_fail "openssl makes a certificate"
chmod 644 "$T_TMP/t.key"
{
	edged_conf_head "$P_ADMIN" "$SOCK" 1
	cat <<CONF
splice = "sockmap";
timeouts = { tunnel_idle = "30s"; upstream_response = "10s"; };
tls = {
  listen = [ "127.0.0.1:$P_TLS" ];
  certificates = ( { cert = "$T_TMP/t.pem"; key = "$T_TMP/t.key"; } );
};
projects = (
  { id = "tun";
    environments = (
      { id = "tun-prod"; domains = [ "t.tls.test" ];
        deployment = { id = "tun-1"; upstreams = [ "127.0.0.1:$P_BACK" ]; }; }
    );
  }
);
CONF
} >"$T_TMP/edge.conf"

# what this kernel has: the tls ULP on a connected loopback socket
KTLS=$(python3 - <<'PY'
import socket
l = socket.socket()
l.bind(("127.0.0.1", 0))
l.listen(1)
s = socket.create_connection(l.getsockname())
try:
    s.setsockopt(socket.IPPROTO_TCP, 31, b"tls")  # TCP_ULP
    print("yes")
except OSError as e:
    print("no (TCP_ULP \"tls\": %s)" % e.strerror)
PY
)

splice_json() { # edgectl splice --json into $T_TMP/splice.json (the
	# control socket may come up after the listeners: up to 5 s)
	local i
	for ((i = 0; i < 50; i++)); do
		"$EDGECTL" --socket "$SOCK" splice --json >"$T_TMP/splice.json" 2>/dev/null &&
			[ -s "$T_TMP/splice.json" ] && return 0
		sleep 0.1
	done
	return 1
}

# pump_check VERSION SPLICED0 KERNEL_UP0: the client's JSON against the
# backend's record (waited for: the backend logs once our close_notify
# reached it as a FIN) and splice.json's counts; one python3 (a loaded
# machine takes seconds to start each)
pump_check() {
	python3 - "$T_TMP/client.json" "$T_TMP/backend.jsonl" "$T_TMP/splice.json" \
		"/pump/$N/200" "$@" "$N" <<'PY'
import json, sys, time
cl = json.load(open(sys.argv[1]))
sp = json.load(open(sys.argv[3]))
path, ver, s0, k0 = sys.argv[4], sys.argv[5], int(sys.argv[6]), int(sys.argv[7])
rec = {}
for _ in range(50):
    recs = [json.loads(l) for l in open(sys.argv[2])]
    recs = [r for r in recs if r.get("path") == path]
    if recs and recs[-1].get("recv_sha") == cl["sent_sha"]:
        rec = recs[-1]
        break
    time.sleep(0.1)
ok = (rec.get("recv_sha") == cl["sent_sha"] and
      rec.get("sent_sha") == cl["recv_sha"] and
      cl["version"] == "TLSv" + ver and
      cl["sent_bytes"] == cl["recv_bytes"] == int(sys.argv[8]) and
      sp["spliced"] == s0 and sp["kernel_bytes_up"] == k0)
if not ok:
    print("spliced %d -> %d, kernel up %d -> %d; client %s; backend %s" %
          (s0, sp["spliced"], k0, sp["kernel_bytes_up"], json.dumps(cl),
           json.dumps(recs[-1] if recs else {})))
    sys.exit(1)
print("TLS %s tunnel (%s): %d MiB each way at once, SHA-256 equal both "
      "ways, copied, not spliced (%s s)" %
      (ver, cl["cipher"], cl["sent_bytes"] >> 20, cl["seconds"]))
PY
}

# run_edged NAME BIN: the checks against one build
run_edged() {
	local v=$1 bin=$2 why ver s0 k0 out
	if ! edged_start "$bin" "$T_TMP/edge.conf" -v || ! edged_wait_port "$P_TLS"; then
		t_fail "$v: edged starts" "$(tail -5 "$EDGED_LOG")"
		edged_stop 5
		return
	fi
	splice_json
	why=$(json_field "$T_TMP/splice.json" kinds.upgrade_tls.why)
	if [ "$(json_field "$T_TMP/splice.json" kinds.upgrade_tls.mover)" != copy ]; then
		t_fail "$v: TLS tunnels' mover" "$(cat "$T_TMP/splice.json")"
	elif [ "$KTLS" = yes ] && [ "$(json_field "$T_TMP/splice.json" ktls)" = True ] &&
		[[ "$why" == *"kernel has kTLS"*"does not move a TLS session into it yet"* ]]; then
		t_ok "$v: kernel $(uname -r) has kTLS; status says TLS tunnels are copied: $why"
	elif [ "$KTLS" != yes ] && [ "$(json_field "$T_TMP/splice.json" ktls)" = False ] &&
		[[ "$why" == *"kernel has no kTLS"* ]]; then
		t_ok "$v: kernel $(uname -r) has no kTLS ($KTLS); status says why TLS tunnels are copied: $why"
	else
		t_fail "$v: the kTLS probe and status" "here: $KTLS; edged: $(cat "$T_TMP/splice.json")"
	fi
	if "$EDGECTL" --socket "$SOCK" status >"$T_TMP/status.txt" 2>&1 &&
		grep -q "upgrade_tls: copy (" "$T_TMP/status.txt"; then
		t_ok "$v: edgectl status names the TLS tunnels' mover: $(grep -o 'upgrade_tls: copy (.\{0,40\}' "$T_TMP/status.txt")..."
	else
		t_fail "$v: edgectl status" "$(cat "$T_TMP/status.txt")"
	fi

	for ver in 1.2 1.3; do
		s0=$(json_field "$T_TMP/splice.json" spliced)
		k0=$(json_field "$T_TMP/splice.json" kernel_bytes_up)
		if timeout 150 python3 "$TOOLS/tls_tunnel_pump.py" "$P_TLS" t.tls.test "$ver" "$N" \
			>"$T_TMP/client.json" 2>"$T_TMP/client.err"; then
			splice_json
			if out=$(pump_check "$ver" "$s0" "$k0"); then
				t_ok "$v: $out"
			else
				t_fail "$v: TLS $ver tunnel" "$out"
			fi
		else
			t_fail "$v: TLS $ver tunnel" "$(tail -2 "$T_TMP/client.err"); edged: $(tail -4 "$EDGED_LOG")"
		fi
	done
	if [ "$KTLS" = yes ]; then
		t_skip "$v: TLS tunnels moved by kTLS and the sockmap" "not built yet (docs/splice.md, \"TLS tunnels\")"
	fi
	edged_stop 10
	edged_sanitizers_clean "$v: sanitizers"
}

edged_need_build
edged_backend "$P_BACK" python3 "$TOOLS/tunnel_backend.py" "$P_BACK" "$T_TMP/backend.jsonl" ||
	t_fail "tunnel backend starts"
# what this kernel allows between kTLS and a sockhash on one socket
# (reported, not judged: it decides how a kTLS splice can be built)
if [ "$KTLS" = yes ] && [ "$(id -u)" = 0 ] && [ -x "$B/tools/ktls_sockmap_probe" ]; then
	if out=$("$B/tools/ktls_sockmap_probe" 2>&1); then
		t_ok "kernel $(uname -r), kTLS and a sockhash on one socket: $(echo "$out" | tr '\n' ';')"
	else
		t_fail "build/tools/ktls_sockmap_probe" "$out"
	fi
fi
run_edged build "$EDGED"
if [ -z "${EDGE_VMTEST:-}" ] && edged_asan; then
	run_edged asan "$EDGED_ASAN"
fi
t_exit
