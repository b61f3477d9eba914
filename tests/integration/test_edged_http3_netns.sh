#!/bin/bash
# test_edged_http3_netns.sh - HTTP/3 through real packet loss and
# reordering: Debian's ngtcp2 client (gtlsclient) in one network
# namespace, edged in another (tls.quic_listen on its veth's address, the
# recording backend tests/tools/echo_backend.py on its 127.0.0.1), the
# veth pair between them impaired both ways by tests/tools/netem.bpf.c:
# 3 % of the UDP packets dropped at random, the rest delayed by a random
# 0-10 ms each, which reorders them. This kernel has no sch_netem and no
# sch_fq, so the delay is not an EDT departure time on egress: the
# program runs on each veth end's ingress (tc clsact), marks each packet
# with its delay, and tests/tools/nfq_delay.py (behind an iptables NFQUEUE
# rule) lets it through when the delay is up. TCP is left alone.
#   - a 3 MB download, byte for byte what HTTPS over TCP gets;
#   - a 300 KB POST, whose SHA-256 the backend checks;
#   - 20 streams on one connection, all 200;
#   - and it happened: each direction's program dropped packets and
#     reordered some (its counters, read with bpftool), the delay line
#     released packets out of their arrival order, and edged counted
#     packets it lost (edge_quic_packets_lost_total).
# Runs against build/edged and build/asan/edged. Needs root.
# EDGE_NETEM_LOSS_PPM and EDGE_NETEM_DELAY_US change the impairment.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/lib_edged.sh
. "$(dirname "$0")/../lib_edged.sh"
edged_begin curl python3 openssl gtlsclient nsenter bpftool tc iptables
t_require_root
edged_need_build
NETEM_OBJ=$B/tools/netem.bpf.o
if [ ! -f "$NETEM_OBJ" ]; then
	t_skip "$(basename "$0")" "$NETEM_OBJ not built (make)"
	exit 77
fi
LOSS_PPM=${EDGE_NETEM_LOSS_PPM:-30000}
DELAY_US=${EDGE_NETEM_DELAY_US:-10000}

# fixed ports and addresses: the namespaces are the test's own
P_EDGE=8080
P_ADMIN=8081
P_TLS=8443
P_BACK=9001
A_CLIENT=10.203.0.1
A_EDGE=10.203.0.2
NS_C=edge-h3c-$T_ID
NS_E=edge-h3e-$T_ID
DEV_C=h3c$T_ID
DEV_E=h3e$T_ID
PIN=$EDGE_PIN_DIR/netem

# nsx NS CMD...: CMD in namespace NS (nsenter: the host's bpffs stays in
# view). Not for CMD &: $! would be a subshell's; those call nsenter
# themselves (it execs CMD)
nsx() {
	local ns=$1
	shift
	nsenter --net="/run/netns/$ns" "$@"
}

setup_net() {
	t_netns "$NS_C" && t_netns "$NS_E" || return 1
	ip link add "$DEV_C" netns "$NS_C" type veth peer name "$DEV_E" netns "$NS_E" || return 1
	ip -n "$NS_C" addr add "$A_CLIENT/24" dev "$DEV_C"
	ip -n "$NS_E" addr add "$A_EDGE/24" dev "$DEV_E"
	ip -n "$NS_C" link set lo up
	ip -n "$NS_E" link set lo up
	ip -n "$NS_C" link set "$DEV_C" up
	ip -n "$NS_E" link set "$DEV_E" up
}

# netem_attach NS DEV SIDE: netem.bpf.c on DEV's ingress in NS (its maps
# pinned in $PIN/SIDE), the NFQUEUE rule and the delay line
# (nfq_delay.py, its output in $T_TMP/nfq.SIDE)
netem_attach() {
	local ns=$1 dev=$2 side=$3 i
	mkdir -p "$PIN/$side"
	bpftool prog load "$NETEM_OBJ" "$PIN/$side/prog" type classifier \
		pinmaps "$PIN/$side" || return 1
	netem_set "$side" 0 0 || return 1
	nsx "$ns" tc qdisc add dev "$dev" clsact || return 1
	nsx "$ns" tc filter add dev "$dev" ingress bpf da object-pinned "$PIN/$side/prog" || return 1
	nsx "$ns" iptables -t mangle -A PREROUTING -m mark --mark 0xed000000/0xff000000 \
		-j NFQUEUE --queue-num 0 --queue-bypass || return 1
	nsenter --net="/run/netns/$ns" python3 "$TOOLS/nfq_delay.py" 0 >"$T_TMP/nfq.$side" 2>&1 &
	edged_track $!
	eval "NFQ_$side=$!"
	for ((i = 0; i < 100; i++)); do
		grep -q '^ready$' "$T_TMP/nfq.$side" && return 0
		sleep 0.05
	done
	return 1
}

# netem_set SIDE LOSS_PPM DELAY_US: the impairment of SIDE's program
le32() { printf '0x%02x 0x%02x 0x%02x 0x%02x' $(($1 & 255)) $((($1 >> 8) & 255)) $((($1 >> 16) & 255)) $((($1 >> 24) & 255)); }
netem_set() {
	# shellcheck disable=SC2046 # the bytes, one word each
	bpftool map update pinned "$PIN/$1/edge_netem_cfg" key 0 0 0 0 \
		value $(le32 "$2") $(le32 "$3")
}

# netem_stat SIDE FIELD: one of SIDE's program's counters
netem_stat() {
	bpftool -j map lookup pinned "$PIN/$1/edge_netem_stats" key 0 0 0 0 |
		python3 -c 'import json, sys; print(json.load(sys.stdin)["formatted"]["value"][sys.argv[1]])' "$2"
}

# nfq_stat SIDE FIELD: the delay line's count, once it is stopped
nfq_stat() {
	tail -1 "$T_TMP/nfq.$1" | python3 -c 'import json, sys; print(json.load(sys.stdin)[sys.argv[1]])' "$2" 2>/dev/null || echo none
}

metric() { # NAME: edged's series NAME (0 when absent)
	nsx "$NS_E" curl -s -m 5 "http://127.0.0.1:$P_ADMIN/metrics" |
		awk -v k="$1" '$1 == k { v = $2 } END { print v + 0 }'
}

eq() { # NAME GOT WANT
	if [ "$2" = "$3" ]; then t_ok "$1"; else t_fail "$1" "got '$2', want '$3'"; fi
}
has() { # NAME TEXT ERE
	if grep -Eq -- "$3" <<<"$2"; then t_ok "$1"; else t_fail "$1" "'$(head -c 300 <<<"$2")' lacks /$3/"; fi
}

# h3 PATH [gtlsclient args]: requests over HTTP/3 from the client's
# namespace; the output in $T_TMP/h3.out, the statuses in STATUSES
h3() {
	local path=$1
	shift
	timeout 120 nsenter --net="/run/netns/$NS_C" gtlsclient --exit-on-all-streams-close \
		--no-quic-dump --timeout=30s "$@" "$A_EDGE" "$P_TLS" "https://shop.test:$P_TLS$path" \
		>"$T_TMP/h3.out" 2>&1
	STATUSES=$(grep -ao '\[:status: [0-9]*\]' "$T_TMP/h3.out" | grep -o '[0-9]*' | sort | uniq -c | awk '{ print $2 "x" $1 }' | tr '\n' ' ')
	STATUSES=${STATUSES% }
}

start_edged() { # BIN
	local i
	: >"$EDGED_LOG"
	nsenter --net="/run/netns/$NS_E" "$1" -c "$T_TMP/edge.conf" -f >"$EDGED_LOG" 2>&1 &
	EPID=$!
	edged_track "$EPID"
	for ((i = 0; i < 600; i++)); do
		grep -q "serving on" "$EDGED_LOG" && return 0
		kill -0 "$EPID" 2>/dev/null || return 1
		sleep 0.05
	done
	return 1
}

C="$T_TMP/certs"
mkdir -p "$C"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
	-subj "/CN=shop.test" -addext "subjectAltName=DNS:shop.test" \
	-keyout "$C/shop.key" -out "$C/shop.pem" >/dev/null 2>&1
{
	edged_conf_head "$P_ADMIN" "$T_TMP/edged.sock"
	cat <<CONF
limits = { max_body_bytes = "20M"; };
timeouts = { upstream_response = "30s"; };
tls = {
  listen = [ "$A_EDGE:$P_TLS" ];
  quic_listen = [ "$A_EDGE:$P_TLS" ];
  certificates = ( { cert = "$C/shop.pem"; key = "$C/shop.key"; } );
};
projects = (
  { id = "shop";
    environments = (
      { id = "shop-prod";
        domains = [ "shop.test" ];
        deployment = { id = "shop-1"; upstreams = [ "127.0.0.1:$P_BACK" ]; };
      }
    );
  }
);
CONF
} >"$T_TMP/edge.conf"

if ! setup_net; then
	t_fail "namespaces and veth pair" "could not be set up"
	t_exit
	exit
fi
for side in c e; do
	ns=$NS_C dev=$DEV_C
	[ $side = e ] && ns=$NS_E dev=$DEV_E
	if ! netem_attach "$ns" "$dev" "$side"; then
		t_fail "netem on $dev" "$(cat "$T_TMP/nfq.$side" 2>/dev/null)"
		t_exit
		exit
	fi
done
nsenter --net="/run/netns/$NS_E" python3 "$TOOLS/echo_backend.py" "$P_BACK" "$T_TMP/backend.jsonl" &
edged_track $!
for ((i = 0; i < 100; i++)); do
	nsx "$NS_E" curl -s -o /dev/null "http://127.0.0.1:$P_BACK/" && break
	sleep 0.05
done

run_suite() { # LABEL
	local L=$1 side ref got rec
	: >"$T_TMP/backend.jsonl"
	netem_set c "$LOSS_PPM" "$DELAY_US"
	netem_set e "$LOSS_PPM" "$DELAY_US"

	rm -rf "$T_TMP/dl" && mkdir -p "$T_TMP/dl"
	h3 /big/3000000 --download="$T_TMP/dl"
	eq "$L: a 3 MB download through loss and reordering" "$STATUSES" "200x1"
	got=$(sha256sum <"$T_TMP/dl/3000000" 2>/dev/null | cut -c1-64)
	ref=$(nsx "$NS_C" curl -sk --resolve "shop.test:$P_TLS:$A_EDGE" \
		"https://shop.test:$P_TLS/big/3000000" | sha256sum | cut -c1-64)
	eq "$L: every byte, as over HTTPS on TCP" "$got" "$ref"

	head -c 300000 /dev/urandom >"$T_TMP/body.bin"
	h3 /upload -m POST -d "$T_TMP/body.bin"
	eq "$L: a 300 KB POST through loss and reordering is answered" "$STATUSES" "200x1"
	rec=$(grep '"path": "/upload"' "$T_TMP/backend.jsonl" | tail -1)
	has "$L: the backend got it byte for byte" "$rec" \
		"\"body_sha256\": \"$(sha256sum "$T_TMP/body.bin" | cut -d' ' -f1)\""

	h3 /many -n 20
	eq "$L: 20 streams on one connection, all 200" "$STATUSES" "200x20"

	for side in c e; do
		has "$L: packets were dropped on the way to $side" "$(netem_stat $side dropped)" '^[1-9][0-9]*$'
		has "$L: and reordered" "$(netem_stat $side reordered)" '^[1-9][0-9]*$'
	done
	has "$L: edged counted packets it lost" "$(metric edge_quic_packets_lost_total)" '^[1-9][0-9]*$'
	if kill -0 "$EPID" 2>/dev/null; then t_ok "$L: edged is alive"; else t_fail "$L: edged is alive"; fi
	echo "# $L: netem (counts since the start) c(to client) $(for f in seen dropped delayed reordered; do printf '%s=%s ' $f "$(netem_stat c $f)"; done)"
	echo "# $L: netem (counts since the start) e(to edged)  $(for f in seen dropped delayed reordered; do printf '%s=%s ' $f "$(netem_stat e $f)"; done)"
	echo "# $L: edged lost $(metric edge_quic_packets_lost_total)"
	netem_set c 0 0
	netem_set e 0 0
}

if start_edged "$EDGED"; then
	run_suite "normal"
	edged_stop 20
	eq "normal: edged ends cleanly" "$?" 0
else
	t_fail "normal: edged starts" "$(tail -5 "$EDGED_LOG")"
fi
if edged_asan; then
	if start_edged "$EDGED_ASAN"; then
		run_suite "asan"
		edged_stop 20
		edged_sanitizers_clean "asan: no sanitizer report" && t_ok "asan: no sanitizer report"
	else
		t_fail "asan: edged starts" "$(tail -5 "$EDGED_LOG")"
	fi
fi

# the delay lines released packets out of their arrival order
for side in c e; do
	eval "kill -TERM \"\$NFQ_$side\""
done
sleep 0.5
for side in c e; do
	echo "# delay line $side: $(tail -1 "$T_TMP/nfq.$side")"
	has "the delay line to $side released packets out of their arrival order" \
		"$(nfq_stat $side out_of_order)" '^[1-9][0-9]*$'
done
t_exit
