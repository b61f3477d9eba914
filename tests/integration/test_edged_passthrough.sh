#!/bin/bash
# test_edged_passthrough.sh - TLS passthrough routes (tcp_routes with sni):
# four TLS backends (openssl s_server, a certificate each) behind two
# passthrough addresses, reached with openssl s_client, curl and
# tests/tools/tls_hello_client.py. The server name picks the backend (the
# certificate the client verifies says which): exact, a "*." wildcard
# (one label, not two), the address's default for unknown and missing
# names, and a close, counted, where an address has no default; a
# ClientHello that arrives in pieces, and one in 1-byte TCP segments, a
# 16 MiB download with SHA-256 equal, garbage instead of a ClientHello, a hello that never completes
# (timeouts.client_hello), a client that leaves mid-hello; analytics
# events carry the server name; edgectl routes lists the sni. Each with
# the copy mover and, as root, with the sockmap mover (whose kernel
# counters show it moved the download); normal build and ASan.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/lib_edged.sh
. "$(dirname "$0")/../lib_edged.sh"
edged_begin openssl curl sha256sum

DPY=/usr/bin/python3
BASE=$(edged_ports 9)
P_EDGE=$BASE
P_ADMIN=$((BASE + 1))
T_PT=$((BASE + 2))  # a.pt.test, *.w.pt.test, and a default
T_PT2=$((BASE + 3)) # b.pt.test only: no default
B_A=$((BASE + 4))
B_W=$((BASE + 5))
B_D=$((BASE + 6))
B_B=$((BASE + 7))
SOCK="$T_TMP/edged.sock"
EDGECTL=${EDGECTL:-$B/edgectl}

write_conf() { # FILE SPLICE
	{
		edged_conf_head "$P_ADMIN" "$SOCK"
		cat <<CONF
splice = "$2";
analytics = { file = "$T_TMP/events.jsonl"; };
timeouts = { client_hello = "2s"; tunnel_idle = "5s"; drain = "2s"; };
tcp_routes = (
  { listen = "127.0.0.1:$T_PT"; sni = "a.pt.test"; environment = "a"; },
  { listen = "127.0.0.1:$T_PT"; sni = "*.w.pt.test"; environment = "w"; },
  { listen = "127.0.0.1:$T_PT"; sni = "*"; environment = "d"; },
  { listen = "127.0.0.1:$T_PT2"; sni = "B.pt.test"; environment = "b"; }
);
projects = (
  { id = "pt";
    environments = (
      { id = "a"; domains = [ "a.pt.test" ];
        deployment = { id = "a-1"; upstreams = [ "127.0.0.1:$B_A" ]; }; },
      { id = "w"; domains = [ "w.pt.test" ];
        deployment = { id = "w-1"; upstreams = [ "127.0.0.1:$B_W" ]; }; },
      { id = "d"; domains = [ "d.pt.test" ];
        deployment = { id = "d-1"; upstreams = [ "127.0.0.1:$B_D" ]; }; },
      { id = "b"; domains = [ "b.pt.test" ];
        deployment = { id = "b-1"; upstreams = [ "127.0.0.1:$B_B" ]; }; }
    );
  }
);
CONF
	} >"$1"
}

# metric NAME_AND_LABELS: its value on /metrics (0 when absent)
metric() {
	curl -s "http://127.0.0.1:$P_ADMIN/metrics" | awk -v k="$1" '$1 == k { v = $2 } END { print v + 0 }'
}

# peer PORT [s_client ARGS...]: the subject CN of the certificate the
# backend reached through PORT presented ("" when the connection was
# closed before a handshake)
peer() {
	local port=$1
	shift
	timeout 10 openssl s_client -connect "127.0.0.1:$port" "$@" -brief </dev/null 2>&1 |
		sed -n 's/^Peer certificate: .*CN = \([^,]*\).*/\1/p'
}

# cn_of NAME: the CN the backend for NAME shows
run_suite() { # BIN LABEL SPLICE
	local bin=$1 v="$2, splice $3" mode=$3 out k0 k1
	: >"$T_TMP/events.jsonl"
	write_conf "$T_TMP/edge.conf" "$mode"
	EDGED_LOG="$T_TMP/edged-$2-$mode.log"
	if ! edged_start "$bin" "$T_TMP/edge.conf" -v || ! edged_wait_port "$T_PT"; then
		t_fail "$v: edged starts" "$(tail -5 "$EDGED_LOG")"
		return
	fi
	"$EDGECTL" --socket "$SOCK" splice --json >"$T_TMP/splice.json" 2>/dev/null
	k0=$(json_field "$T_TMP/splice.json" kernel_bytes_down)
	s0=$(json_field "$T_TMP/splice.json" spliced)

	# (a) the exact name: its backend's certificate, verified
	out=$(timeout 10 openssl s_client -connect "127.0.0.1:$T_PT" -servername a.pt.test \
		-CAfile "$T_TMP/a.crt" -verify_return_error -brief </dev/null 2>&1)
	if grep -q "Verification: OK" <<<"$out" && grep -q "CN = a.pt.test" <<<"$out"; then
		t_ok "$v: SNI a.pt.test: its backend's certificate, verified by openssl s_client"
	else
		t_fail "$v: exact name" "$(head -c 400 <<<"$out")"
	fi

	# (b) curl through it: 16 MiB from the backend, SHA-256 equal
	if curl -s --max-time 60 --cacert "$T_TMP/a.crt" -o "$T_TMP/got.bin" \
		--resolve "a.pt.test:$T_PT:127.0.0.1" "https://a.pt.test:$T_PT/big.bin" &&
		[ "$(sha256sum <"$T_TMP/got.bin")" = "$(sha256sum <"$T_TMP/www/big.bin")" ]; then
		t_ok "$v: curl https through passthrough: 16 MiB, SHA-256 equal"
	else
		t_fail "$v: curl download" "$(stat -c %s "$T_TMP/got.bin" 2>&1)"
	fi
	# curl's tunnel into the kernel (and s_client's, which ends right
	# after its handshake: on a loaded machine it can close before the
	# copy mover finds both sides flushed); how much of the 16 MiB the
	# kernel moves depends on when that was (a fast download can be
	# mostly copied before), so what is checked is that it took at least
	# one and moved bytes down
	"$EDGECTL" --socket "$SOCK" splice --json >"$T_TMP/splice.json" 2>/dev/null
	k1=$(json_field "$T_TMP/splice.json" kernel_bytes_down)
	s1=$(json_field "$T_TMP/splice.json" spliced)
	if [ "$mode" = sockmap ]; then
		if [ "$((s1 - s0))" -ge 1 ] && [ "$k1" -gt "$k0" ] &&
			[ "$(json_field "$T_TMP/splice.json" kinds.passthrough.mover)" = sockmap ]; then
			t_ok "$v: $((s1 - s0)) of the 2 tunnels went into the kernel, which moved $((k1 - k0)) bytes down (sockmap mover for passthrough)"
		else
			t_fail "$v: sockmap moved it" "spliced $s0 -> $s1, kernel down $k0 -> $k1: $(cat "$T_TMP/splice.json")"
		fi
	elif [ "$k1" = "$k0" ]; then
		t_ok "$v: the copy mover moved it (the kernel nothing)"
	else
		t_fail "$v: copy mover" "kernel down $k0 -> $k1"
	fi

	# (c) a wildcard matches one label more, not two (two: the default)
	out="$(peer "$T_PT" -servername x.w.pt.test) / $(peer "$T_PT" -servername y.x.w.pt.test)"
	if [ "$out" = "*.w.pt.test / default.pt.test" ]; then
		t_ok "$v: *.w.pt.test serves x.w.pt.test; y.x.w.pt.test goes to the default"
	else
		t_fail "$v: wildcard" "$out"
	fi

	# (d) unknown and missing names: the address's default
	out="$(peer "$T_PT" -servername other.test) / $(peer "$T_PT" -noservername)"
	if [ "$out" = "default.pt.test / default.pt.test" ]; then
		t_ok "$v: an unknown name and no name at all go to the default"
	else
		t_fail "$v: default" "$out"
	fi

	# (e) an address without a default: its one name (configured
	# B.pt.test: case does not matter), and closes, counted
	out="$(peer "$T_PT2" -servername b.pt.test) / $(peer "$T_PT2" -servername other.test) / $(peer "$T_PT2" -noservername)"
	if [ "$out" = "b.pt.test /  / " ] &&
		[ "$(metric 'edge_requests_total{outcome="sni_unknown"}')" = 1 ] &&
		[ "$(metric 'edge_requests_total{outcome="sni_missing"}')" = 1 ]; then
		t_ok "$v: no default: unknown and missing names closed, counted (sni_unknown, sni_missing)"
	else
		t_fail "$v: no default" "$out; $(metric 'edge_requests_total{outcome="sni_unknown"}') $(metric 'edge_requests_total{outcome="sni_missing"}')"
	fi

	# (f) a ClientHello in 4 pieces 0.2 s apart (SO_RCVLOWAT waits for
	# the rest): the handshake completes with the right backend
	if "$DPY" "$TOOLS/tls_hello_client.py" slow "$T_PT" a.pt.test "$T_TMP/a.crt" 4 0.2 >"$T_TMP/slow.json" 2>"$T_TMP/slow.err" &&
		[ "$(json_field "$T_TMP/slow.json" cn)" = a.pt.test ] &&
		grep -q "HTTP/1.0 200" "$T_TMP/slow.json"; then
		t_ok "$v: a ClientHello in 4 pieces: routed by its name once whole ($(json_field "$T_TMP/slow.json" version))"
	else
		t_fail "$v: slow hello" "$(cat "$T_TMP/slow.json" "$T_TMP/slow.err")"
	fi

	# (f2) a ClientHello in 1-byte TCP segments 2 ms apart: after a few
	# hundred of them the kernel reports the socket readable before
	# SO_RCVLOWAT's bytes are there (tcp_epollin_ready: its receive
	# window or memory runs short); no byte more is not the client's
	# EOF, and the hello is routed once whole
	if "$DPY" "$TOOLS/tls_hello_client.py" slow "$T_PT" a.pt.test "$T_TMP/a.crt" 100000 0.002 >"$T_TMP/bytes.json" 2>"$T_TMP/bytes.err" &&
		[ "$(json_field "$T_TMP/bytes.json" cn)" = a.pt.test ] &&
		grep -q "HTTP/1.0 200" "$T_TMP/bytes.json"; then
		t_ok "$v: a ClientHello in $(json_field "$T_TMP/bytes.json" hello_bytes) 1-byte segments: routed by its name once whole"
	else
		t_fail "$v: hello in 1-byte segments" "$(cat "$T_TMP/bytes.json" "$T_TMP/bytes.err")"
	fi

	# (g) garbage instead of a ClientHello: closed at once, nothing sent
	if "$DPY" "$TOOLS/tls_hello_client.py" garbage "$T_PT" >"$T_TMP/g.json" 2>&1 &&
		"$DPY" -c 'import json,sys; d=json.load(sys.stdin); sys.exit(0 if d["got"] == 0 and d["closed_after"] < 0.5 else 1)' <"$T_TMP/g.json" &&
		[ "$(metric 'edge_requests_total{outcome="client_hello_invalid"}')" = 1 ]; then
		t_ok "$v: an HTTP request instead of a ClientHello: closed at once, counted (client_hello_invalid)"
	else
		t_fail "$v: garbage" "$(cat "$T_TMP/g.json") $(metric 'edge_requests_total{outcome="client_hello_invalid"}')"
	fi

	# (h) a hello that never completes, and no byte at all: closed after
	# timeouts.client_hello (2 s), counted
	if "$DPY" "$TOOLS/tls_hello_client.py" partial "$T_PT" 40 >"$T_TMP/p.json" 2>&1 &&
		"$DPY" "$TOOLS/tls_hello_client.py" partial "$T_PT" 0 >"$T_TMP/p0.json" 2>&1 &&
		"$DPY" -c 'import json,sys
for f in sys.argv[1:]:
    d = json.load(open(f))
    assert d["got"] == 0 and 1.9 <= d["closed_after"] <= 4, d' "$T_TMP/p.json" "$T_TMP/p0.json" &&
		[ "$(metric 'edge_requests_total{outcome="client_hello_timeout"}')" = 2 ]; then
		t_ok "$v: a partial hello and a silent client: closed after client_hello ($(json_field "$T_TMP/p.json" closed_after) s), counted"
	else
		t_fail "$v: hello timeout" "$(cat "$T_TMP/p.json" "$T_TMP/p0.json") $(metric 'edge_requests_total{outcome="client_hello_timeout"}')"
	fi

	# (i) a client that leaves mid-hello is closed at once (edged does
	# not wait for the timeout, nor spin on the readable socket)
	c0=$(awk '{ print $14 + $15 }' "/proc/$EPID/stat")
	if "$DPY" "$TOOLS/tls_hello_client.py" partial "$T_PT" 40 eof >"$T_TMP/pe.json" 2>&1 &&
		"$DPY" -c 'import json,sys; d=json.load(sys.stdin); sys.exit(0 if d["closed_after"] < 0.5 else 1)' <"$T_TMP/pe.json"; then
		t_ok "$v: a client that shuts down mid-hello is closed at once ($(json_field "$T_TMP/pe.json" closed_after) s)"
	else
		t_fail "$v: EOF mid-hello" "$(cat "$T_TMP/pe.json")"
	fi
	sleep 0.5
	c1=$(awk '{ print $14 + $15 }' "/proc/$EPID/stat")
	if [ $((c1 - c0)) -le 20 ]; then
		t_ok "$v: and edged stayed idle meanwhile ($((c1 - c0)) CPU ticks)"
	else
		t_fail "$v: idle during EOF mid-hello" "$((c1 - c0)) ticks"
	fi

	# (j) edgectl routes lists each passthrough route with its sni
	if "$EDGECTL" --socket "$SOCK" routes --json >"$T_TMP/routes.json" 2>&1 &&
		"$DPY" - "$T_TMP/routes.json" "$T_PT" <<'PY'; then
import json, sys
r = json.load(open(sys.argv[1]))["tcp_routes"]
got = [(x["listen"].split(":")[1], x.get("sni"), x["environment"], x["found"]) for x in r]
p = sys.argv[2]
assert got[:3] == [(p, "a.pt.test", "a", True), (p, "*.w.pt.test", "w", True), (p, "*", "d", True)], got
assert got[3][1:] == ("b.pt.test", "b", True), got
PY
		t_ok "$v: edgectl routes: each passthrough route with its sni and environment"
	else
		t_fail "$v: edgectl routes" "$(head -c 600 "$T_TMP/routes.json")"
	fi

	edged_stop
	edged_sanitizers_clean "$v: sanitizers clean" && t_ok "$v: no sanitizer report"

	# (k) analytics: a tunnel event per connection with the server name
	# in host, refusals by outcome with theirs
	if "$DPY" - "$T_TMP/events.jsonl" <<'PY'; then
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
by = {}
for e in ev:
    by.setdefault(e["outcome"], []).append(e)
tun = by["tunnel"]
big = [e for e in tun if e["bytes_out"] > 16 << 20]
assert len(big) == 1 and big[0]["host"] == "a.pt.test" and big[0]["environment_id"] == "a", big
assert {e["host"] for e in tun if e["environment_id"] == "w"} == {"x.w.pt.test"}, tun
assert {e["host"] for e in tun if e["environment_id"] == "d"} == {"y.x.w.pt.test", "other.test", None}, tun
assert [e["host"] for e in by["sni_unknown"]] == ["other.test"], by["sni_unknown"]
assert [e["host"] for e in by["sni_missing"]] == [None], by["sni_missing"]
assert len(by["client_hello_timeout"]) == 2 and len(by["client_hello_invalid"]) == 1
assert all(e["kind"] == "tunnel" and e["status"] == 0 for e in ev)
PY
		t_ok "$v: analytics: the server name in each event's host, refusals by outcome"
	else
		t_fail "$v: analytics" "$(cut -c1-300 "$T_TMP/events.jsonl")"
	fi
}

edged_need_build
mkdir -p "$T_TMP/www"
head -c $((16 << 20)) /dev/urandom >"$T_TMP/www/big.bin"
for b in "a:a.pt.test:$B_A" "w:*.w.pt.test:$B_W" "d:default.pt.test:$B_D" "b:b.pt.test:$B_B"; do
	IFS=: read -r id cn port <<<"$b"
	if ! openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj "/CN=$cn" \
		-addext "subjectAltName=DNS:$cn" \
		-keyout "$T_TMP/$id.key" -out "$T_TMP/$id.crt" >/dev/null 2>&1; then
		t_fail "certificate for $cn"
		continue
	fi
	# -WWW serves the files of its directory ("GET /big.bin")
	(cd "$T_TMP/www" && exec openssl s_server -quiet -WWW -accept "127.0.0.1:$port" \
		-cert "$T_TMP/$id.crt" -key "$T_TMP/$id.key" >/dev/null 2>&1) &
	edged_track $!
	edged_wait_port "$port" || t_fail "openssl s_server for $cn starts"
done
: >"$T_TMP/www/index.html"

MODES="off"
if [ "$(id -u)" = 0 ]; then
	MODES="off sockmap"
else
	t_skip "the sockmap mover" "not root: loading the sk_skb program needs CAP_BPF"
fi
for m in $MODES; do
	run_suite "$EDGED" edged "$m"
done
if edged_asan quarantine_size_mb=4; then
	for m in $MODES; do
		run_suite "$EDGED_ASAN" asan "$m"
	done
fi
t_exit
