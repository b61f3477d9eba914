#!/bin/bash
# test_edged_logs.sh - edged's log lines: with log_format = "json" every
# line it writes (start-up, debug, a request's) is one JSON object with
# time, level, prog and msg; a request's lines carry its client address
# and the request id the client was answered with; a reload back to
# "text" applies at once. Detached (no -f), edged writes to syslog
# (facility daemon, warnings at LOG_WARNING): a refused reload is there,
# nothing goes to /dev/null; started with a relative -c, a SIGHUP reloads
# the same file (edged runs in / once detached); with no /dev/log it
# refuses to detach. Runs
# against build/edged and build/asan/edged. The detached cases need root
# (a receiver at /dev/log: created there when there is none, else
# bind-mounted over it in a private mount namespace).
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

write_conf() { # FORMAT [DOMAIN]
	local more=""
	[ -n "${2:-}" ] && more=", \"$2\""
	{
		edged_conf_head "$P_ADMIN" "$T_TMP/edged.sock" 1
		cat <<CONF
log_format = "$1";
projects = (
  { id = "shop";
    environments = (
      { id = "shop-prod";
        domains = [ "dead.test"$more ];
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
	# a request whose upstream refuses: 502, and a line about it
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

# syslog_receiver PATH OUT: a datagram socket at PATH whose messages go
# to OUT, one per line; its PID in SYSLOG_PID
syslog_receiver() {
	/usr/bin/python3 - "$1" "$2" <<'PY' &
import os, socket, sys
path, out = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(path)
os.chmod(path, 0o666)
with open(out, "a", buffering=1, encoding="utf-8", errors="replace") as f:
    f.write("ready\n")
    while True:
        f.write(s.recv(65536).decode("utf-8", "replace").rstrip("\n") + "\n")
PY
	SYSLOG_PID=$!
	edged_track "$SYSLOG_PID"
	for _ in $(seq 50); do
		grep -q '^ready$' "$2" 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}

# wait_syslog PATTERN: 0 once a line of $T_TMP/syslog matches (5 s)
wait_syslog() {
	for _ in $(seq 50); do
		grep -q -- "$1" "$T_TMP/syslog" && return 0
		sleep 0.1
	done
	return 1
}

run_detached() { # BIN LABEL
	local bin=$1 v=$2 pid rc run=()
	write_conf text
	: >"$T_TMP/syslog"
	if [ "$DEVLOG" = bind ]; then
		# shellcheck disable=SC2016 # expanded by that sh
		run=(unshare -m --propagation private sh -c 'mount --bind "$0" /dev/log && exec "$@"' "$T_TMP/log.sock")
	fi
	# the configuration named relative to the directory edged starts in
	(cd "$T_TMP" && "${run[@]}" "$bin" -c edge.conf) >"$T_TMP/detached.out" 2>&1
	rc=$?
	# (what it said before it detached went to the terminal's stderr)
	pid=$(pgrep -f -n "^$bin -c edge.conf\$")
	[ -n "$pid" ] && edged_track "$pid"
	if [ "$rc" = 0 ] && [ -n "$pid" ] && wait_syslog "^<29>.* edged\[$pid\]: note: serving on "; then
		t_ok "$v: detached: the start-up notes reach syslog (daemon.notice, edged[PID])"
	else
		t_fail "$v: detached start" "exit $rc, pid ${pid:-none}: $(head -3 "$T_TMP/detached.out") | $(tail -3 "$T_TMP/syslog")"
		[ -n "$pid" ] && kill -9 "$pid"
		return
	fi
	# detached, edged runs in /: it reloads the file it was started with
	write_conf text new.test
	kill -HUP "$pid"
	if wait_syslog "edged\[$pid\]: note: reloaded $T_TMP/edge.conf: route table generation 2" &&
		[ "$(curl -s -m 5 -o /dev/null -w '%{http_code}' -H 'Host: new.test' "http://127.0.0.1:$P_EDGE/")" = 502 ]; then
		t_ok "$v: detached, started with -c edge.conf (a relative path): SIGHUP reloads it"
	else
		t_fail "$v: detached reload of a relative path" "$(tail -3 "$T_TMP/syslog")"
	fi
	echo 'bogus_key = 1;' >>"$T_TMP/edge.conf"
	kill -HUP "$pid"
	if wait_syslog "^<28>.* edged\[$pid\]: reload refused, keeping the running configuration: .*bogus_key"; then
		t_ok "$v: detached: a refused reload is logged to syslog at daemon.warning"
	else
		t_fail "$v: refused reload in syslog" "$(tail -3 "$T_TMP/syslog")"
	fi
	kill -TERM "$pid"
	for _ in $(seq 100); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if ! kill -0 "$pid" 2>/dev/null && wait_syslog "edged\[$pid\]: note: .*stopp\|edged\[$pid\]: note: .*exit"; then
		t_ok "$v: detached: SIGTERM stops it, and says so in syslog"
	else
		t_fail "$v: detached stop" "$(tail -3 "$T_TMP/syslog")"
		kill -9 "$pid" 2>/dev/null
	fi
}

run_suite "$EDGED" edged
edged_asan && run_suite "$EDGED_ASAN" asan

if [ "$(id -u)" != 0 ]; then
	t_skip "detached" "needs root (a syslog receiver at /dev/log)"
elif ! command -v unshare >/dev/null; then
	t_skip "detached" "no unshare"
else
	if [ -e /dev/log ]; then
		DEVLOG=bind
		SOCK_PATH="$T_TMP/log.sock"
	else
		# no syslog here: a detached edged refuses to start
		write_conf text
		"$EDGED" -c "$T_TMP/edge.conf" >"$T_TMP/nolog.out" 2>&1
		rc=$?
		if [ "$rc" = 1 ] && grep -q "no syslog at /dev/log: a detached edged would have nowhere" "$T_TMP/nolog.out" &&
			! pgrep -f "^$EDGED -c $T_TMP/edge.conf\$" >/dev/null; then
			t_ok "with no /dev/log a detached edged refuses to start, saying why"
		else
			t_fail "no /dev/log" "exit $rc: $(cat "$T_TMP/nolog.out")"
			pkill -9 -f "^$EDGED -c $T_TMP/edge.conf\$"
		fi
		DEVLOG=create
		SOCK_PATH=/dev/log
		t_cleanup_add "rm -f /dev/log"
	fi
	if syslog_receiver "$SOCK_PATH" "$T_TMP/syslog"; then
		run_detached "$EDGED" edged
		edged_asan && run_detached "$EDGED_ASAN" asan
	else
		t_fail "a syslog receiver at $SOCK_PATH"
	fi
fi
t_exit
