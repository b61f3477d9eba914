#!/bin/bash
# test_edged_logs.sh - edged's log lines: with log_format = "json" every
# line it writes (start-up, debug, a request's) is one JSON object with
# time, level, prog and msg; a request's lines carry its client address
# and the request id the client was answered with; a reload back to
# "text" applies at once. Runs against build/edged and build/asan/edged.
# Needs no root.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/lib_edged.sh
. "$(dirname "$0")/../lib_edged.sh"
edged_begin curl python3
edged_need_build

BASE=$(edged_ports 3)
P_EDGE=$BASE
P_ADMIN=$((BASE + 1))
P_DEAD=$((BASE + 2)) # nothing listens here

write_conf() { # FORMAT
	{
		edged_conf_head "$P_ADMIN" "$T_TMP/edged.sock" 1
		cat <<CONF
log_format = "$1";
projects = (
  { id = "shop";
    environments = (
      { id = "shop-prod";
        domains = [ "dead.test" ];
        deployment = { id = "shop-1"; upstreams = [ "127.0.0.1:$P_DEAD" ]; };
      }
    );
  }
);
CONF
	} >"$T_TMP/edge.conf"
}

run_suite() { # BIN LABEL
	local bin=$1 v=$2 rid out n
	write_conf json
	if ! edged_start "$bin" "$T_TMP/edge.conf" -v; then
		t_fail "$v: edged starts" "$(tail -5 "$EDGED_LOG")"
		return
	fi
	# a request whose upstream refuses: 502, and a debug line about it
	rid=$(curl -s -m 5 -D - -o /dev/null -H 'Host: dead.test' \
		"http://127.0.0.1:$P_EDGE/x" | tr -d '\r' | awk -F': ' 'tolower($1) == "x-request-id" { print $2 }')
	# a malformed request: a debug line with the client only
	printf 'BAD\r\n\r\n' | timeout 5 python3 -c 'import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), 5)
s.sendall(sys.stdin.buffer.read()); s.recv(4096)' "$P_EDGE" 2>/dev/null
	sleep 0.3
	if out=$(python3 - "$EDGED_LOG" "$rid" 2>&1 <<'PY'
import json, sys
lines = open(sys.argv[1], encoding="utf-8", errors="strict").read().splitlines()
rid = sys.argv[2]
assert lines, "no log lines"
objs = []
for l in lines:
    o = json.loads(l)
    for k in ("time", "level", "prog", "msg"):
        assert k in o, "%s missing in %r" % (k, l)
    assert o["prog"] == "edged", l
    objs.append(o)
mine = [o for o in objs if o.get("request_id") == rid]
assert rid and mine, "no line with request_id %r in %r" % (rid, lines[-5:])
assert all(o.get("client") == "127.0.0.1" for o in mine), mine
bad = [o for o in objs if "bad request" in o["msg"]]
assert bad and bad[0].get("client") == "127.0.0.1", bad
print("%d lines, all JSON; %d about request %s with its client"
      % (len(objs), len(mine), rid))
PY
	); then
		t_ok "$v: log_format = json: $out"
	else
		t_fail "$v: JSON log lines" "$out"
	fi
	# back to text by a reload
	n=$(wc -l <"$EDGED_LOG")
	write_conf text
	kill -HUP "$EPID"
	sleep 0.5
	if tail -n +"$((n + 1))" "$EDGED_LOG" | grep -q '^edged: note: reloaded'; then
		t_ok "$v: a reload to log_format = text applies at once"
	else
		t_fail "$v: reload to text" "$(tail -n +"$((n + 1))" "$EDGED_LOG" | head -3)"
	fi
	edged_stop 5
	edged_sanitizers_clean "$v: sanitizers clean"
}

run_suite "$EDGED" edged
edged_asan && run_suite "$EDGED_ASAN" asan
t_exit
