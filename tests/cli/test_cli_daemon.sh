#!/usr/bin/env bash
# tests/cli/test_cli_daemon.sh - edgectl's commands that talk to edged
# (routes, reload, the daemon's part of status and stats, stats --watch
# without XDP), against no
# daemon and against build/tools/ctlstub, which answers canned responses.
#
#   B=build bash tests/cli/test_cli_daemon.sh
#   EDGECTL=build/asan/edgectl bash tests/cli/test_cli_daemon.sh
#
# routes and reload need no root; the status and stats cases do (they are
# skipped otherwise).

# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"

t_begin
unset SSH_CONNECTION EDGE_CONTROL_SOCKET
STUB=$B/tools/ctlstub

if [ ! -x "$EDGECTL" ] || [ ! -x "$STUB" ]; then
	t_fail "binaries exist" "$EDGECTL or $STUB not built"
	t_exit
	exit
fi

E=$EDGECTL
SOCK=$T_TMP/edged.sock
ROOT=0
[ "$(id -u)" -eq 0 ] && ROOT=1

# ---- no daemon --------------------------------------------------------
expect "routes, no daemon" 1 "edged is not running (no control socket at $SOCK)" \
	env EDGE_CONTROL_SOCKET="$SOCK" "$E" routes
expect "routes --json, no daemon" 1 "edged is not running (no control socket at $SOCK)" \
	"$E" --socket "$SOCK" routes --json
expect "reload, no daemon" 1 "edged is not running (no control socket at $SOCK)" \
	"$E" --socket "$SOCK" reload
expect "--socket beats the environment" 1 "no control socket at $T_TMP/flag.sock" \
	env EDGE_CONTROL_SOCKET="$SOCK" "$E" --socket "$T_TMP/flag.sock" routes
expect "socket path too long" 2 "control socket path" \
	"$E" --socket "/$(printf 'x%.0s' $(seq 1 120))" routes
expect "routes extra argument" 2 "unexpected argument 'now'" "$E" --socket "$SOCK" routes now
expect "reload --json is not an option" 2 "unknown option '--json'" "$E" --socket "$SOCK" reload --json
expect "routes --help" 0 "usage: edgectl routes [--json]" "$E" routes --help
expect "help lists --socket" 0 "--socket PATH" "$E" help
touch "$T_TMP/plain"
expect "not a socket" 1 "edged is not running (no control socket at $T_TMP/plain)" "$E" --socket "$T_TMP/plain" routes

# ---- the stub ---------------------------------------------------------
CANNED=$T_TMP/canned
mkdir -p "$CANNED"
cat >"$CANNED/routes.json" <<'JSON'
{"ok":true,"result":{"generation":7,"routes":[{"domain":"app.example.com","prefix":null,"strip_prefix":false,"project":"shop","environment":"prod","deployment":"d-41","enabled":true,"balance":"round_robin","upstreams":["10.0.0.1:8080","10.0.0.2:8080"],"max_body_bytes":0,"inflight":0},{"domain":"app.example.com","prefix":"/api","strip_prefix":true,"project":"shop","environment":"prod","deployment":"d-41","enabled":true,"balance":"least_inflight","upstreams":["10.0.0.3:9000"],"max_body_bytes":1048576,"inflight":2},{"domain":"old.example.com","prefix":null,"strip_prefix":false,"project":"legacy","environment":"staging","deployment":"d-7","enabled":false,"balance":"round_robin","upstreams":[],"max_body_bytes":0,"inflight":0}]}}
JSON
cat >"$CANNED/reload.json" <<'JSON'
{"ok":false,"error":"/etc/edge/edge.conf:12: listen: bad address 'x:80'"}
JSON
cat >"$CANNED/status.json" <<'JSON'
{"ok":true,"result":{"pid":4242,"version":"0.1.0","uptime_s":3660,"route_generation":7,"workers":2,"draining":false}}
JSON
cat >"$CANNED/stats.json" <<'JSON'
{"ok":true,"result":{"counters":{"requests_total":1234,"requests_domain_not_found":5,"connections_open":3}}}
JSON

"$STUB" "$SOCK" "$CANNED" 2>"$T_TMP/stub.err" &
STUB_PID=$!
t_cleanup_add "kill $STUB_PID"
for _ in $(seq 1 50); do
	[ -S "$SOCK" ] && break
	sleep 0.1
done
export EDGE_CONTROL_SOCKET=$SOCK

expect "routes table header" 0 "DOMAIN           PREFIX  PROJECT  ENVIRONMENT  DEPLOYMENT  UPSTREAMS" "$E" routes
expect "routes table generation" 0 "route generation 7" "$E" routes
expect "routes table default route" 0 "app.example.com  -       shop     prod         d-41        10.0.0.1:8080,10.0.0.2:8080" "$E" routes
expect "routes table prefix route" 0 "app.example.com  /api    shop     prod         d-41        10.0.0.3:9000" "$E" routes
expect "routes table disabled project" 0 "d-7         -  (project disabled)" "$E" routes
expect "stub saw the request" 0 '{"cmd":"routes"}' cat "$CANNED/requests.log"
if "$E" routes --json >"$T_TMP/routes.json" 2>"$T_TMP/err" && python3 - "$T_TMP/routes.json" "$CANNED/routes.json" <<'PY' 2>>"$T_TMP/err"; then
import json, sys
got = json.load(open(sys.argv[1]))
want = json.load(open(sys.argv[2]))["result"]
assert got == want, (got, want)
PY
	t_ok "routes --json is the daemon's JSON"
else
	t_fail "routes --json is the daemon's JSON" "$(tr '\n' ' ' <"$T_TMP/err")"
fi
expect "reload error passed through" 1 "edgectl: /etc/edge/edge.conf:12: listen: bad address 'x:80'" "$E" reload
echo '{"ok":true,"result":{"route_generation":8}}' >"$CANNED/reload.json"
expect "reload ok" 0 "reloaded: route generation 8" "$E" reload
echo '{"ok":true,"result":{"message":"reloaded /etc/edge/edge.conf: 3 routes, generation 9"}}' >"$CANNED/reload.json"
expect "reload prints the daemon's message" 0 "reloaded /etc/edge/edge.conf: 3 routes, generation 9" "$E" reload
echo 'this is not json' >"$CANNED/routes.json"
expect "bad answer" 1 "bad answer from edged" "$E" routes
echo '{"result":1}' >"$CANNED/routes.json"
expect "answer without ok" 1 "bad answer from edged: no \"ok\"" "$E" routes

# ---- status and stats (need root) -----------------------------------------
if [ "$ROOT" = 1 ]; then
	expect "status: daemon line" 0 "daemon:     running, pid 4242, edged 0.1.0, up 1h1m, route generation 7, 2 workers ($SOCK)" "$E" status
	if "$E" status --json | python3 -c '
import json, sys
d = json.load(sys.stdin)["daemon"]
assert d["running"] is True and d["status"]["pid"] == 4242 and d["error"] is None, d
assert d["socket"].endswith("edged.sock"), d
' 2>"$T_TMP/err"; then
		t_ok "status --json: daemon"
	else
		t_fail "status --json: daemon" "$(tr '\n' ' ' <"$T_TMP/err")"
	fi
	rm "$CANNED/status.json"
	expect "status: daemon without status" 0 "daemon:     running, but its status failed (ctlstub: no canned answer)" "$E" status
	expect "status: no daemon" 0 "daemon:     not running (no control socket at $T_TMP/none.sock)" \
		"$E" --socket "$T_TMP/none.sock" status
	if "$E" --socket "$T_TMP/none.sock" status --json | python3 -c '
import json, sys
d = json.load(sys.stdin)["daemon"]
assert d["running"] is False and d["status"] is None and "not running" in d["error"], d
' 2>"$T_TMP/err"; then
		t_ok "status --json: no daemon"
	else
		t_fail "status --json: no daemon" "$(tr '\n' ' ' <"$T_TMP/err")"
	fi
	# edge is not attached here (private pin dir): the daemon's part alone
	expect "stats: daemon counters" 0 "requests_total                             1234" "$E" stats
	expect "stats: not attached note" 0 "edged's counters only" "$E" stats
	if "$E" stats --json 2>/dev/null | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert d["daemon"]["counters"]["requests_total"] == 1234, d
assert d["counters"] is None, d
' 2>"$T_TMP/err"; then
		t_ok "stats --json: daemon"
	else
		t_fail "stats --json: daemon" "$(tr '\n' ' ' <"$T_TMP/err")"
	fi
	expect "stats: no daemon, not attached" 1 "edge is not attached" \
		"$E" --socket "$T_TMP/none.sock" stats
	# --watch without XDP: edged's counters, with their rates
	expect "stats --watch, not attached: the daemon's counters and rates" 0 \
		"requests_total                             1234          0.0" \
		"$E" stats --watch --interval 0.2 --count 2
	if "$E" stats --watch --json --interval 0.2 --count 2 2>/dev/null | python3 -c '
import json, sys
lines = [json.loads(l) for l in sys.stdin]
assert len(lines) == 2, lines
for d in lines:
    assert d["counters"] is None and d["rules"] == [], d
    assert d["daemon"]["counters"]["requests_total"] == 1234, d
    assert d["daemon"]["rates"]["requests_total"] == 0, d
' 2>"$T_TMP/err"; then
		t_ok "stats --watch --json, not attached: a line per refresh with the daemon's rates"
	else
		t_fail "stats --watch --json, not attached" "$(tr '\n' ' ' <"$T_TMP/err")"
	fi
	expect "stats --watch: no daemon, not attached" 1 "edge is not attached" \
		"$E" --socket "$T_TMP/none.sock" stats --watch --count 1
else
	t_skip "status and stats" "need root"
fi

t_exit
