#!/bin/bash
# test_edged_smuggling.sh - the smuggling corpus (tests/corpus/smuggling.txt)
# against a live edged, and edged in front of a misbehaving backend.
#
# The oracle is the upstream side: tests/tools/rec_backend.py logs every
# connection, byte and request it receives, so a rejected request must
# leave no trace there and an accepted one exactly one rebuilt request.
# Each case runs whole, in one-byte writes and with a valid request
# pipelined behind it (tests/tools/smuggle.py). tests/tools/bad_backend.py
# sends what a backend must not (ambiguous framing, a body where none is
# allowed, an unsolicited 101, garbage): edged answers 502 and closes that
# upstream connection (tests/tools/bad_check.py). Runs against build/edged
# and build/asan/edged; needs python3, no root.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
t_begin

TOOLS="$T_ROOT/tests/tools"
CORPUS="$T_ROOT/tests/corpus/smuggling.txt"
if ! command -v python3 >/dev/null; then
	t_skip "$(basename "$0")" "needs python3"
	exit 77
fi

BASE=$((20000 + ((T_ID + 7919) % 20000)))
P_EDGE=0
P_REC=0
P_BAD=0

wait_port() { # PORT: wait until something accepts on 127.0.0.1:PORT
	local i
	for ((i = 0; i < 100; i++)); do
		if python3 -c "import socket,sys; socket.create_connection(('127.0.0.1', int(sys.argv[1])), 0.2)" "$1" 2>/dev/null; then
			return 0
		fi
		sleep 0.05
	done
	return 1
}

write_conf() { # FILE LABEL
	cat >"$1" <<CONF
listen = [ "127.0.0.1:$P_EDGE" ];
workers = 2;
user = "$(id -un)";
control_socket = "$T_TMP/edged-$2.sock";
admin_listen = "127.0.0.1:$((P_EDGE + 3))";
limits = { max_body_bytes = "1M"; };
timeouts = { header = "2s"; upstream_connect = "1s"; upstream_response = "2s"; drain = "2s"; };
projects = (
  { id = "shop";
    environments = ( { id = "shop-prod"; domains = [ "shop.test" ];
      deployment = { id = "s1"; upstreams = [ "127.0.0.1:$P_REC" ]; };
      routes = ( { prefix = "/small"; max_body_bytes = "1K"; } ); } );
  },
  { id = "bad";
    environments = ( { id = "bad-prod"; domains = [ "bad.test" ];
      deployment = { id = "b1"; upstreams = [ "127.0.0.1:$P_BAD" ]; }; } );
  },
  { id = "closed"; ip_allow = [ "10.9.9.0/24" ];
    environments = ( { id = "closed-prod"; domains = [ "closed.test" ];
      deployment = { id = "c1"; upstreams = [ "127.0.0.1:$P_REC" ]; }; } );
  },
  { id = "off"; enabled = false;
    environments = ( { id = "off-prod"; domains = [ "off.test" ];
      deployment = { id = "o1"; upstreams = [ "127.0.0.1:$P_REC" ]; }; } );
  }
);
CONF
}

# run_suite BIN LABEL PORT: with backends and ports of its own (PORT,
# PORT+1, PORT+2), so the normal and the ASan suites run side by side.
# Every process it starts is listed in $T_TMP/pids for the cleanup.
run_suite() {
	local bin=$1 v=$2 epid rc
	P_EDGE=$3
	P_REC=$(($3 + 1))
	P_BAD=$(($3 + 2))
	python3 "$TOOLS/rec_backend.py" "$P_REC" "$T_TMP/rec-$v.jsonl" &
	echo $! >>"$T_TMP/pids"
	python3 "$TOOLS/bad_backend.py" "$P_BAD" "$T_TMP/bad-$v.jsonl" &
	echo $! >>"$T_TMP/pids"
	write_conf "$T_TMP/edge-$v.conf" "$v"
	if ! wait_port "$P_REC" || ! wait_port "$P_BAD"; then
		t_fail "$v: backends start"
		return
	fi
	"$bin" -c "$T_TMP/edge-$v.conf" -f >"$T_TMP/edged-$v.log" 2>&1 &
	epid=$!
	echo "$epid" >>"$T_TMP/pids"
	if ! wait_port "$P_EDGE"; then
		t_fail "$v: edged starts" "$(tail -5 "$T_TMP/edged-$v.log")"
		return
	fi
	python3 "$TOOLS/smuggle.py" "$CORPUS" "$P_EDGE" "$T_TMP/rec-$v.jsonl" "$v"
	rc=$?
	[ $rc -le 1 ] || t_fail "$v: smuggle.py" "exited $rc"
	python3 "$TOOLS/bad_check.py" "$P_EDGE" "$T_TMP/bad-$v.jsonl" bad.test "$v"
	rc=$?
	[ $rc -le 1 ] || t_fail "$v: bad_check.py" "exited $rc"
	kill -TERM "$epid"
	wait "$epid"
	rc=$?
	if grep -q 'AddressSanitizer\|runtime error\|LeakSanitizer' "$T_TMP/edged-$v.log"; then
		t_fail "$v: sanitizers clean" "$(grep -m3 'Sanitizer\|runtime error' "$T_TMP/edged-$v.log")"
	elif [ $rc -ne 0 ]; then
		t_fail "$v: edged exits 0 on SIGTERM" "exit $rc: $(tail -3 "$T_TMP/edged-$v.log")"
	else
		t_ok "$v: edged exits 0 on SIGTERM, no sanitizer report"
	fi
}

EDGED=${EDGED:-$B/edged}
if [ ! -x "$EDGED" ]; then
	t_skip "$(basename "$0")" "$EDGED not built"
	exit 77
fi
: >"$T_TMP/pids"
t_cleanup_add "xargs -r kill -9 <'$T_TMP/pids'"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:exitcode=1}
run_suite "$EDGED" edged "$BASE" >"$T_TMP/out-edged" 2>&1 &
spid=$!
if [ -x "$B/asan/edged" ]; then
	run_suite "$B/asan/edged" asan $((BASE + 10)) >"$T_TMP/out-asan" 2>&1
else
	t_skip "asan: edged" "$B/asan/edged not built" >"$T_TMP/out-asan"
fi
wait "$spid"
cat "$T_TMP/out-edged" "$T_TMP/out-asan"
# the suites ran in subshells: their "not ok" lines are what failed
if grep -q '^not ok - ' "$T_TMP/out-edged" "$T_TMP/out-asan"; then
	T_FAILED=1
fi
t_exit
