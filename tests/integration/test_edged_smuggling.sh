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
# shellcheck source=tests/lib_edged.sh
. "$(dirname "$0")/../lib_edged.sh"
edged_begin python3

CORPUS="$T_ROOT/tests/corpus/smuggling.txt"
BASE=$(edged_ports 8) # 4 for each build's suite
P_EDGE=0
P_REC=0
P_BAD=0

write_conf() { # FILE LABEL
	{
		edged_conf_head $((P_EDGE + 3)) "$T_TMP/edged-$2.sock"
		cat <<CONF
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
	} >"$1"
}

# run_suite BIN LABEL PORT: with backends and ports of its own (PORT to
# PORT+3), so the normal and the ASan suites run side by side.
run_suite() {
	local bin=$1 v=$2 rc
	P_EDGE=$3
	P_REC=$(($3 + 1))
	P_BAD=$(($3 + 2))
	EDGED_LOG="$T_TMP/edged-$v.log"
	write_conf "$T_TMP/edge-$v.conf" "$v"
	if ! edged_backend "$P_REC" python3 "$TOOLS/rec_backend.py" "$P_REC" "$T_TMP/rec-$v.jsonl" ||
		! edged_backend "$P_BAD" python3 "$TOOLS/bad_backend.py" "$P_BAD" "$T_TMP/bad-$v.jsonl"; then
		t_fail "$v: backends start"
		return
	fi
	if ! edged_start "$bin" "$T_TMP/edge-$v.conf"; then
		t_fail "$v: edged starts" "$(tail -5 "$EDGED_LOG")"
		return
	fi
	python3 "$TOOLS/smuggle.py" "$CORPUS" "$P_EDGE" "$T_TMP/rec-$v.jsonl" "$v"
	rc=$?
	[ $rc -le 1 ] || t_fail "$v: smuggle.py" "exited $rc"
	python3 "$TOOLS/bad_check.py" "$P_EDGE" "$T_TMP/bad-$v.jsonl" bad.test "$v"
	rc=$?
	[ $rc -le 1 ] || t_fail "$v: bad_check.py" "exited $rc"
	edged_stop
	rc=$?
	if ! edged_sanitizers_clean "$v: sanitizers clean"; then
		:
	elif [ $rc -ne 0 ]; then
		t_fail "$v: edged exits 0 on SIGTERM" "exit $rc: $(tail -3 "$EDGED_LOG")"
	else
		t_ok "$v: edged exits 0 on SIGTERM, no sanitizer report"
	fi
}

edged_need_build
# the normal suite in a background subshell (edged_track's list of PIDs
# is a file, so what it starts is killed at exit too), the ASan one here
run_suite "$EDGED" edged "$BASE" >"$T_TMP/out-edged" 2>&1 &
spid=$!
if edged_asan >"$T_TMP/out-asan"; then
	run_suite "$EDGED_ASAN" asan $((BASE + 4)) >"$T_TMP/out-asan" 2>&1
fi
wait "$spid"
cat "$T_TMP/out-edged" "$T_TMP/out-asan"
# the suites ran in subshells: their "not ok" lines are what failed
if grep -q '^not ok - ' "$T_TMP/out-edged" "$T_TMP/out-asan"; then
	T_FAILED=1
fi
t_exit
