#!/bin/bash
# test_edged_tunnel.sh - HTTP/1.1 Upgrade through edged: a WebSocket echo
# session (Debian's python3-websockets), and raw upgraded tunnels against
# tests/tools/tunnel_backend.py: bulk both ways with equal SHA-256 and
# bounded RSS, half-close, bytes pipelined around the heads, a 200 to an
# upgrade request, a client EOF sent before the 101 arrived, an unsolicited
# or mismatched 101 (502), the idle
# timeout, and one analytics event per tunnel. Runs against build/edged
# and build/asan/edged (256 MiB each way both times).
# Needs no root: 127.0.0.1 high ports, a generated configuration.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/lib_edged.sh
. "$(dirname "$0")/../lib_edged.sh"
# Debian's interpreter: python3 on PATH may be another one without
# Debian's modules (python3-websockets)
DPY=/usr/bin/python3
edged_begin python3 "$DPY"

BASE=$(edged_ports 4)
P_EDGE=$BASE
P_BACK=$((BASE + 1))
P_WS=$((BASE + 2))
P_ADMIN=$((BASE + 3))

write_conf() { # FILE
	{
		edged_conf_head "$P_ADMIN" "$T_TMP/edged.sock"
		cat <<CONF
analytics = { file = "$T_TMP/requests.jsonl"; };
timeouts = {
  header = "2s";
  upstream_connect = "1s";
  upstream_response = "2s";
  tunnel_idle = "1s";
  drain = "2s";
};
projects = (
  { id = "rt";
    environments = (
      { id = "rt-prod";
        domains = [ "raw.test" ];
        deployment = { id = "rt-1"; upstreams = [ "127.0.0.1:$P_BACK" ]; };
      },
      { id = "ws-prod";
        domains = [ "ws.test" ];
        deployment = { id = "ws-1"; upstreams = [ "127.0.0.1:$P_WS" ]; };
      }
    );
  }
);
CONF
	} >"$1"
}

client() { # MODE [ARGS...]: output in $T_TMP/client.json, errors in .err
	python3 "$TOOLS/tunnel_client.py" "$1" "$P_EDGE" raw.test "${@:2}" \
		>"$T_TMP/client.json" 2>"$T_TMP/client.err"
}

# client_case MODE OK NAME: a case that passes as OK when the client's MODE
# passes its own checks, else fails as NAME with the client's reason
client_case() {
	if client "$1"; then
		t_ok "$2"
	else
		t_fail "$3" "$(cat "$T_TMP/client.err")"
	fi
}

# backend_last PATH: the backend's record of the last tunnel on PATH
backend_last() {
	python3 - "$T_TMP/backend.jsonl" "$1" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
recs = [r for r in recs if r.get("path") == sys.argv[2]]
print(json.dumps(recs[-1] if recs else {}))
PY
}

run_suite() { # BIN LABEL BYTES
	local bin=$1 v=$2 big=$3 out
	: >"$T_TMP/requests.jsonl"
	: >"$T_TMP/backend.jsonl"
	EDGED_LOG="$T_TMP/edged-$v.log"
	if ! edged_start "$bin" "$T_TMP/edge.conf" -v; then
		t_fail "$v: edged starts" "$(tail -5 "$EDGED_LOG")"
		return
	fi

	# (a) WebSocket
	if [ "$WS" = 1 ]; then
		if out=$("$DPY" "$TOOLS/ws_echo.py" client "$P_EDGE" ws.test 100 2>&1); then
			t_ok "$v: WebSocket session: 100 messages up to 1 MiB echoed ($out)"
		else
			t_fail "$v: WebSocket session" "$(echo "$out" | tail -3)"
		fi
	else
		t_skip "$v: WebSocket session" "python3-websockets not installed (scripts/install-deps)"
	fi

	# (b) bulk both ways at once, SHA-256 equal at both ends, RSS bounded
	if client pump "$big" "$EPID"; then
		local rec growth
		rec=$(backend_last "/pump/$big")
		growth=$(($(json_field "$T_TMP/client.json" rss_peak_kb) - $(json_field "$T_TMP/client.json" rss_base_kb)))
		if [ "$(echo "$rec" | json_field - recv_sha)" = "$(json_field "$T_TMP/client.json" sent_sha)" ] &&
			[ "$(echo "$rec" | json_field - sent_sha)" = "$(json_field "$T_TMP/client.json" recv_sha)" ] &&
			[ "$(echo "$rec" | json_field - recv_bytes)" = "$big" ]; then
			t_ok "$v: $((big >> 20)) MiB each way through a raw tunnel, SHA-256 equal at both ends ($(json_field "$T_TMP/client.json" seconds) s)"
		else
			t_fail "$v: raw tunnel bulk" "client $(cat "$T_TMP/client.json") backend $rec"
		fi
		if [ "$growth" -lt $((64 * 1024)) ]; then
			t_ok "$v: edged's RSS grew by $((growth / 1024)) MiB during it (< 64 MiB)"
		else
			t_fail "$v: RSS bounded" "grew by $growth kB"
		fi
	else
		t_fail "$v: raw tunnel bulk" "$(cat "$T_TMP/client.err")"
	fi

	# (c) half-close: our EOF reaches the backend, its answer still reaches us
	if client halfclose 300000 &&
		[ "$(backend_last /halfclose/300000 | json_field - recv_bytes)" = 100000 ]; then
		t_ok "$v: half-close: client EOF forwarded, 300000 bytes received after it"
	else
		t_fail "$v: half-close" "$(cat "$T_TMP/client.err") $(backend_last /halfclose/300000)"
	fi

	# (c2) a client EOF that comes before the 101 is not lost: it reaches
	# the backend once the tunnel starts (rather than the tunnel hanging
	# until tunnel_idle)
	if client earlyeof 200000 &&
		[ "$(backend_last /latehalfclose/200000 | json_field - recv_bytes)" = 1000 ]; then
		t_ok "$v: half-close before the 101: client EOF forwarded once the tunnel starts"
	else
		t_fail "$v: half-close before the 101" "$(cat "$T_TMP/client.err") $(backend_last /latehalfclose/200000)"
	fi

	# (d) bytes in the same write as either head go through first
	if client early && [ "$(backend_last /banner | json_field - first)" = "$(printf 'CLIENT-FIRST\n')" ]; then
		t_ok "$v: bytes right after the request head and after the 101 head are tunnelled in order"
	else
		t_fail "$v: bytes around the heads" "$(cat "$T_TMP/client.err") $(backend_last /banner)"
	fi

	# (e) 200 to an upgrade request keeps HTTP
	client_case ok200 "$v: a 200 to an upgrade request keeps the connection HTTP" \
		"$v: 200 to upgrade"

	# (f) unsolicited 101, and a 101 to another protocol: 502
	client_case unsolicited "$v: unsolicited 101 -> 502" "$v: unsolicited 101"
	client_case wrongproto "$v: 101 to a protocol not asked for -> 502" \
		"$v: mismatched 101"

	# (g) idle timeout (tunnel_idle = 1s) closes both sides
	if client idle 8 &&
		python3 -c 'import json,sys; d=json.load(sys.stdin)["closed_after"]; sys.exit(0 if 0.8 <= d <= 4 else 1)' \
			<"$T_TMP/client.json"; then
		sleep 0.3
		if [ -n "$(backend_last /echo)" ] && [ "$(backend_last /echo)" != "{}" ]; then
			t_ok "$v: an idle tunnel is closed after tunnel_idle, both sides ($(json_field "$T_TMP/client.json" closed_after) s)"
		else
			t_fail "$v: idle timeout" "the backend side stayed open"
		fi
	else
		t_fail "$v: idle timeout" "$(cat "$T_TMP/client.err") $(cat "$T_TMP/client.json")"
	fi

	edged_stop
	edged_sanitizers_clean "$v: sanitizers clean" && t_ok "$v: no sanitizer report"

	# (h) one tunnel event per tunnel, with the bytes each way
	if python3 - "$T_TMP/requests.jsonl" "$big" "$WS" <<'PY'; then
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
big, ws = int(sys.argv[2]), sys.argv[3] == "1"
tun = [e for e in ev if e["kind"] == "tunnel"]
assert all(e["outcome"] == "tunnel" and e["status"] == 101 for e in tun), tun
paths = sorted(e["path"] for e in tun)
want = sorted(["/pump/%d" % big, "/halfclose/300000", "/latehalfclose/200000",
               "/banner", "/echo"]
              + (["/ws"] if ws else []))
assert paths == want, (paths, want)
pump = [e for e in tun if e["path"] == "/pump/%d" % big][0]
assert big < pump["bytes_in"] < big + 4096, pump
assert big < pump["bytes_out"] < big + 4096, pump
hc = [e for e in tun if e["path"] == "/halfclose/300000"][0]
assert 100000 < hc["bytes_in"] < 104096 and 300000 < hc["bytes_out"] < 304096, hc
assert all(e["duration_ns"] > 0 and e["project_id"] == "rt" for e in tun), tun
other = {e["path"]: e for e in ev if e["kind"] == "request"}
assert other["/unsolicited"]["outcome"] == "upstream_bad_response", other
assert other["/wrongproto"]["outcome"] == "upstream_bad_response", other
assert other["/ok200"]["status"] == 200, other
PY
		t_ok "$v: analytics: one tunnel event per tunnel, with bytes each way"
	else
		t_fail "$v: analytics" "$(grep -c . "$T_TMP/requests.jsonl") events"
	fi
}

edged_need_build
edged_backend "$P_BACK" python3 "$TOOLS/tunnel_backend.py" "$P_BACK" "$T_TMP/backend.jsonl" ||
	t_fail "tunnel backend starts"
WS=0
if "$DPY" -c 'import websockets' 2>/dev/null; then
	WS=1
	edged_backend "$P_WS" "$DPY" "$TOOLS/ws_echo.py" serve "$P_WS" ||
		t_fail "WebSocket backend starts"
fi
write_conf "$T_TMP/edge.conf"

run_suite "$EDGED" edged $((256 << 20))
# a small quarantine, so that RSS shows edged's own buffers
edged_asan quarantine_size_mb=4 && run_suite "$EDGED_ASAN" asan $((256 << 20))
t_exit
