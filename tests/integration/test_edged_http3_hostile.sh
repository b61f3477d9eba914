#!/bin/bash
# test_edged_http3_hostile.sh - edged's HTTP/3 defences against a client
# that holds a connection's resources, with build/tools/h3evil (a client
# that misbehaves on purpose; Debian's gtlsclient cannot) in front of the
# recording backend (tests/tools/echo_backend.py), timeouts.idle_keepalive
# 2 s: a client that stops acknowledging a download gets at most about
# 1 MiB more of it (the unacknowledged-bytes cap, H3_UNACKED_MAX) and,
# although its PINGs keep QUIC's idle timeout away, its connection is
# closed by the stall check, the request recorded client_closed; a
# client's reset of one request stream ends that request as
# client_closed while the connection's other streams are answered 200;
# a HEADERS frame cut short, a field section blocked on a QPACK entry
# never sent, and a POST body stopped half way are each ended, not held;
# after each, edged serves a normal gtlsclient GET; an upstream slower
# than idle_keepalive still answers a patient client. Generous bounds: the
# machine may be busy. Runs against build/edged and build/asan/edged.
# Needs no root.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/lib_edged.sh
. "$(dirname "$0")/../lib_edged.sh"
edged_begin curl python3 openssl gtlsclient
edged_need_build
EVIL=${EVIL:-$B/tools/h3evil}
if [ ! -x "$EVIL" ]; then
	t_skip "$(basename "$0")" "$EVIL not built"
	exit 77
fi

BASE=$(edged_ports 4)
P_EDGE=$BASE
P_BACK=$((BASE + 1))
P_ADMIN=$((BASE + 2))
P_TLS=$((BASE + 3)) # UDP for QUIC
C="$T_TMP/certs"
mkdir -p "$C"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
	-subj "/CN=shop.test" -addext "subjectAltName=DNS:shop.test" \
	-keyout "$C/shop.key" -out "$C/shop.pem" >/dev/null 2>&1

# idle_keepalive 2 s: the stall check closes after it; body 3 s: a body
# stopped half way times out after it
{
	edged_conf_head "$P_ADMIN" "$T_TMP/edged.sock"
	cat <<CONF
analytics = { file = "$T_TMP/requests.jsonl"; };
timeouts = { upstream_response = "10s"; idle_keepalive = "2s"; body = "3s"; drain = "5s"; };
tls = {
  listen = [ "127.0.0.1:$P_TLS" ];
  quic_listen = [ "127.0.0.1:$P_TLS" ];
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

eq() { # NAME GOT WANT
	if [ "$2" = "$3" ]; then t_ok "$1"; else t_fail "$1" "got '$2', want '$3'"; fi
}
has() { # NAME TEXT ERE
	if grep -Eq -- "$3" <<<"$2"; then t_ok "$1"; else t_fail "$1" "'$(head -c 400 <<<"$2")' lacks /$3/"; fi
}
# within NAME VALUE LO HI: LO <= VALUE <= HI (decimals)
within() {
	if [ -n "$2" ] && awk -v v="$2" -v lo="$3" -v hi="$4" 'BEGIN { exit !(v >= lo && v <= hi) }'; then
		t_ok "$1 ($2)"
	else
		t_fail "$1" "'$2' not within $3..$4"
	fi
}
# field FILE KEY: KEY=VALUE's value on FILE's last line that has it
field() { grep -ao "\b$2=[^ ]*" "$1" | tail -1 | cut -d= -f2 | sed 's/s$//'; }

# evil NAME ARGS...: h3evil against shop.test, its output in $T_TMP/NAME.out
evil() {
	local name=$1
	shift
	timeout 60 "$EVIL" --port "$P_TLS" --sni shop.test "$@" >"$T_TMP/$name.out" 2>&1
}

# rec PATH: the analytics record of the last request for PATH (waits for
# it: a request ends when its connection does)
rec() {
	local i
	for ((i = 0; i < 50; i++)); do
		grep -q "\"path\":\"$1\"" "$T_TMP/requests.jsonl" 2>/dev/null && break
		sleep 0.1
	done
	grep "\"path\":\"$1\"" "$T_TMP/requests.jsonl" | tail -1
}

# count_ok PATH N: how many records of PATH say ok (waits up to 5 s for N)
count_ok() {
	local i n=0
	for ((i = 0; i < 50; i++)); do
		n=$(grep -c "\"path\":\"$1\".*\"outcome\":\"ok\"" "$T_TMP/requests.jsonl")
		[ "$n" -ge "$2" ] && break
		sleep 0.1
	done
	echo "$n"
}

# still_serves LABEL: a normal GET over HTTP/3 is answered 200
still_serves() {
	timeout 30 gtlsclient --exit-on-all-streams-close --no-quic-dump --timeout=10s \
		127.0.0.1 "$P_TLS" "https://shop.test:$P_TLS/after-$2" >"$T_TMP/h3.out" 2>&1
	has "$1: then a normal GET is answered" "$(grep -ao '\[:status: [0-9]*\]' "$T_TMP/h3.out")" ':status: 200\]'
}

run_suite() { # LABEL SIZE
	local L=$1 big=$2 r got out

	# (a) a client 100 ms away (it reads each datagram 100 ms late: the
	# server's congestion window grows to megabytes) that stops
	# acknowledging a download once 4 MB are in, its flow control
	# window wide open: edged takes from the upstream at most about
	# 1 MiB (the unacknowledged cap) + its 64 KiB buffer more than the
	# client got (without the cap: the congestion window's worth,
	# 3-4 MB); the client's PINGs keep QUIC's idle timeout away and the
	# stall check closes the connection after idle_keepalive (2 s)
	evil "$L-noack" --path "/big/$big" --no-ack-after 4000000 --delay 100 --hold 15
	has "$L: withholding ACKs: the client got 4 MB first" "$(cat "$T_TMP/$L-noack.out")" '^withholding body_bytes=[0-9]{7}'
	has "$L: the connection is closed by edged" "$(cat "$T_TMP/$L-noack.out")" '^closed_by_peer .*how=close'
	within "$L: after idle_keepalive (2 s) and slack" "$(field "$T_TMP/$L-noack.out" after)" 1.5 10
	r=$(rec "/big/$big")
	has "$L: the download's record says client_closed" "$r" '"outcome":"client_closed"'
	got=$(field "$T_TMP/$L-noack.out" body_bytes)
	out=$(grep -o '"bytes_out":[0-9]*' <<<"$r" | cut -d: -f2)
	within "$L: edged took at most 1 MiB + 300 KB more than the client got" \
		"$((${out:-0} - ${got:-0}))" 0 1350000

	# (b) 5 GETs on one connection, the third (a 3 s answer) reset by
	# the client 300 ms after it was sent: it ends as client_closed at
	# once, the other four (1 s answers, in flight at the reset) are
	# answered
	evil "$L-reset" -n 5 --path /slow/1000 --reset-stream 2 --reset-path /slow/3000 --reset-after 300
	has "$L: one stream reset by the client" "$(cat "$T_TMP/$L-reset.out")" '^reset stream=8$'
	eq "$L: the other four answered 200" "$(field "$T_TMP/$L-reset.out" ok)" 4
	r=$(rec /slow/3000)
	has "$L: the reset request's record says client_closed" "$r" '"outcome":"client_closed"'
	within "$L: ended at the reset, not at the upstream's answer 3 s later (s)" \
		"$(grep -o '"duration_ns":[0-9]*' <<<"$r" | cut -d: -f2 | awk '{ printf "%.2f", $1 / 1e9 }')" 0 2.5
	eq "$L: the others' records say ok" "$(count_ok /slow/1000 4)" 4

	# (c) a HEADERS frame cut short, held open with ACKs and PINGs
	evil "$L-partial" --partial-headers --hold 15
	has "$L: a cut HEADERS frame: the connection is closed" "$(cat "$T_TMP/$L-partial.out")" '^closed_by_peer '
	within "$L: after idle_keepalive and slack" "$(field "$T_TMP/$L-partial.out" after)" 1.5 10
	still_serves "$L: partial" partial

	# a field section blocked on a dynamic table entry never sent
	evil "$L-qpack" --qpack-blocked --hold 15
	has "$L: a QPACK-blocked field section: the connection is closed" "$(cat "$T_TMP/$L-qpack.out")" '^closed_by_peer '
	within "$L: after idle_keepalive and slack" "$(field "$T_TMP/$L-qpack.out" after)" 1.5 10
	still_serves "$L: qpack" qpack

	# a POST of 100000 bytes of which 1000 come: 408 at the body
	# timeout (3 s); then the connection, idle but for the client's
	# PINGs, is closed after idle_keepalive
	evil "$L-slow" --slow-body 100000 --body-sent 1000 --path /slowbody --hold 20
	has "$L: a body stopped half way is answered 408" "$(cat "$T_TMP/$L-slow.out")" '^status=408 '
	has "$L: its record says body_timeout" "$(rec /slowbody)" '"outcome":"body_timeout"'
	has "$L: then the idle connection is closed, PINGs or not" "$(cat "$T_TMP/$L-slow.out")" '^closed_by_peer '
	within "$L: after the body timeout, idle_keepalive and slack" "$(field "$T_TMP/$L-slow.out" after)" 4 16
	still_serves "$L: slow body" slow

	# the other side: a patient client and an upstream taking 6 s, three
	# times idle_keepalive (the idle timeout both ends agreed on): edged's
	# PINGs, at half of it, keep the connection until the answer
	timeout 30 gtlsclient --exit-on-all-streams-close --no-quic-dump --timeout=20s \
		127.0.0.1 "$P_TLS" "https://shop.test:$P_TLS/slow/6000" >"$T_TMP/h3.out" 2>&1
	has "$L: a slow upstream's answer arrives past idle_keepalive" \
		"$(grep -ao '\[:status: [0-9]*\]' "$T_TMP/h3.out")" ':status: 200\]'

	if kill -0 "$EPID" 2>/dev/null; then t_ok "$L: edged is alive"; else t_fail "$L: edged is alive"; fi
}

edged_backend "$P_BACK" /usr/bin/python3 "$TOOLS/echo_backend.py" "$P_BACK" "$T_TMP/backend.jsonl" ||
	t_fail "backend" "did not start"

if edged_start "$EDGED" "$T_TMP/edge.conf"; then
	run_suite "normal" 40000000
	edged_stop 10
else
	t_fail "normal: edged starts" "$(tail -5 "$EDGED_LOG")"
fi

if edged_asan; then
	: >"$T_TMP/requests.jsonl"
	if edged_start "$EDGED_ASAN" "$T_TMP/edge.conf"; then
		run_suite "asan" 40000001
		edged_stop 10
		edged_sanitizers_clean "asan: no sanitizer report" && t_ok "asan: no sanitizer report"
	else
		t_fail "asan: edged starts" "$(tail -5 "$EDGED_LOG")"
	fi
fi
t_exit
