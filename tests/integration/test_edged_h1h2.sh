#!/bin/bash
# test_edged_h1h2.sh - the same requests over HTTP/1.1 and HTTP/2 get the
# same route, status, outcome and upstream request (issue 30; seed 003's
# invariant). One table of requests, each sent once with curl --http1.1
# and once with curl --http2-prior-knowledge to edged's plain listener;
# tests/tools/h1h2_compare.py compares, side by side, the response
# (status, Location, Retry-After, the JSON error), the analytics records
# (route, status, outcome; http_version "HTTP/1.1" and "HTTP/2") and what
# the echo backend (tests/tools/echo_backend.py) received (method, path,
# body, header fields but for the hop-by-hop ones). Then two HTTP/2 ends
# played with raw frames (tests/tools/h2raw.py): a client holding its
# window at zero is closed after timeouts.idle_keepalive (window_stalled);
# a connection idle between its requests is parked (its session kept)
# and serves the next one as before (the client's HPACK table, the
# windows), then gets GOAWAY after timeouts.idle_keepalive (idle); a
# drain (SIGTERM) sends GOAWAY while a slow stream is in flight,
# finishes that stream and serves no stream opened after it, and sends
# GOAWAY to a parked connection too. Runs against build/edged and
# build/asan/edged. Needs no root.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/lib_edged.sh
. "$(dirname "$0")/../lib_edged.sh"
edged_begin curl python3
if ! /usr/bin/python3 -c 'import h2' 2>/dev/null; then
	t_skip "$(basename "$0")" "needs python3-h2"
	exit 77
fi
edged_need_build

BASE=$(edged_ports 4)
P_EDGE=$BASE
P_BACK=$((BASE + 1))
P_ADMIN=$((BASE + 2))
P_DOWN=$((BASE + 3)) # nothing listens here
SOCK="$T_TMP/edged.sock"
H2RAW=(/usr/bin/python3 "$TOOLS/h2raw.py" "$P_EDGE")
# the rate-limited row's clients: one address per protocol, so that each
# starts with a full bucket; a third one to see the limit in force
RL_H1=127.0.0.21
RL_H2=127.0.0.22
RL_PROBE=127.0.0.23

CURL_UA="curl/$(curl --version | awk 'NR == 1 { print $2 }')"
head -c 5000 /dev/urandom >"$T_TMP/post.bin"
head -c 2048 /dev/urandom >"$T_TMP/2k.bin"

write_conf() { # [EXTRA_SETTINGS]
	{
		edged_conf_head "$P_ADMIN" "$SOCK"
		cat <<CONF
${1:-}
analytics = { file = "$T_TMP/requests.jsonl"; };
limits = { max_body_bytes = "20M"; };
timeouts = {
  header = "2s";
  idle_keepalive = "2s";
  upstream_connect = "1s";
  upstream_response = "5s";
  drain = "5s";
};
projects = (
  { id = "shop";
    environments = (
      { id = "shop-prod";
        domains = [ "shop.test" ];
        deployment = { id = "shop-1"; upstreams = [ "127.0.0.1:$P_BACK" ]; };
        routes = (
          { prefix = "/fn"; strip_prefix = true; },
          { prefix = "/small"; max_body_bytes = "1K"; }
        );
      },
      { id = "shop-secure";
        domains = [ "secure.test" ];
        deployment = { id = "secure-1"; upstreams = [ "127.0.0.1:$P_BACK" ]; };
        security_headers = { https_redirect = true; };
      },
      { id = "shop-down";
        domains = [ "down.test" ];
        deployment = { id = "down-1"; upstreams = [ "127.0.0.1:$P_DOWN" ]; };
      },
      { id = "shop-loop";
        domains = [ "loop.test" ];
        deployment = { id = "loop-1"; upstreams = [ "127.0.0.1:$P_EDGE" ]; };
      }
    );
  },
  { id = "off"; enabled = false;
    environments = ( { id = "off-prod"; domains = [ "off.test" ];
      deployment = { id = "o1"; upstreams = [ "127.0.0.1:$P_BACK" ]; }; } );
  },
  { id = "blocked";
    ip_block = [ "127.0.0.1" ];
    environments = ( { id = "blocked-prod"; domains = [ "blocked.test" ];
      deployment = { id = "b1"; upstreams = [ "127.0.0.1:$P_BACK" ]; }; } );
  }
);
CONF
	} >"$T_TMP/edge.conf"
}

# The table: NAME|HOST|PATH|CURL ARGS (";" between them)|WANT|FLAGS.
# Each request goes to PATH with "k=TOKEN" added to its query (TOKEN
# unique per row, protocol and build), which is how its analytics
# records and backend requests are found. WANT is what h1h2_compare.py
# prints when both sides agree: the status, the outcomes of the request's
# records (a request that came back through edged has one per visit, the
# client's last) and the path the backend received ("-": none reached
# it), the token written TOKEN. FLAGS:
#   reqid   the client sends X-Request-ID: its value is compared too
#   spoof   the client's copies of edge's fields must not reach the backend
#   loop    two records per request (edged is its own upstream)
#   h2req   the HTTP/2 side is sent by tests/tools/h2req.py (the body with
#           the headers), not curl: edged answers 413 with RST_STREAM
#           NO_ERROR after it (RFC 9113 section 8.1), and curl 7.88, still
#           waiting to send the body, drops that response (exit 92)
#   rl      rate limited: sent with ratelimit rate 1/m, burst 2 (reloaded
#           for this row), each protocol from an address of its own, the
#           third request compared (the first two must pass; a
#           Retry-After of at least 1 s, which the comparison wants on both)
ROWS=(
	"GET routed host|shop.test|/hello||200 ok /hello?k=TOKEN|"
	"GET prefix route, strip_prefix|shop.test|/fn/resize/x.png?s=2||200 ok /resize/x.png?s=2&k=TOKEN|"
	"GET prefix on a segment boundary only|shop.test|/fnx||200 ok /fnx?k=TOKEN|"
	"GET unknown host|none.test|/||503 domain_not_found -|"
	"GET disabled project|off.test|/||403 project_disabled -|"
	"GET project blocking 127.0.0.1|blocked.test|/||403 ip_denied -|"
	"GET https_redirect over plain HTTP|secure.test|/login?next=%2Fa||308 https_redirect -|"
	"POST 2 KB to a 1K route|shop.test|/small/up|--data-binary;@$T_TMP/2k.bin|413 body_too_large -|h2req"
	"POST 5000 bytes with Content-Length|shop.test|/upload|--data-binary;@$T_TMP/post.bin;-H;Content-Type: application/octet-stream|200 ok /upload?k=TOKEN|"
	"POST a form|shop.test|/form|-d;a=1&b=%C3%A9|200 ok /form?k=TOKEN|"
	"GET over the rate limit|shop.test|/rl||429 rate_limited -|rl"
	"GET with the client's X-Request-ID|shop.test|/rid|-H;X-Request-ID: client-chosen.1|200 ok /rid?k=TOKEN|reqid"
	"GET with spoofed X-Forwarded-For, X-Client-IP, X-Project-ID|shop.test|/spoof|-H;X-Forwarded-For: 1.2.3.4;-H;X-Client-IP: 6.6.6.6;-H;X-Project-ID: spoofed;-H;X-Environment-ID: spoofed;-H;X-Real-IP: 1.2.3.4;-H;Forwarded: for=1.2.3.4;-H;X-Forwarded-Proto: https|200 ok /spoof?k=TOKEN|spoof"
	"GET upstream down|down.test|/||502 upstream_unavailable -|"
	"GET query string|shop.test|/search?q=a%20b&empty=&multi=1&multi=2||200 ok /search?q=a%20b&empty=&multi=1&multi=2&k=TOKEN|"
	"HEAD|shop.test|/h|-I|200 ok /h?k=TOKEN|"
	"GET Host with a port|shop.test:8080|/hp||200 ok /hp?k=TOKEN|"
	"GET upstream is edged itself|loop.test|/l||508 loop_detected,ok -|loop"
	"GET with a cookie and Accept-Language|shop.test|/c|-H;Cookie: a=1; b=2;-H;Accept-Language: en, fr;q=0.5|200 ok /c?k=TOKEN|"
	"GET one field name twice|shop.test|/m|-H;X-Multi: 1;-H;X-Multi: 2|200 ok /m?k=TOKEN|"
	"DELETE|shop.test|/item/7|-X;DELETE|200 ok /item/7?k=TOKEN|"
)

# send SIDE HOST PATH [curl args...]: one request, the response's head in
# $T_TMP/SIDE.hdrs and its body in $T_TMP/SIDE.body (SIDE h1: --http1.1,
# h2: --http2-prior-knowledge); prints the status curl saw; when curl
# fails, what it said goes to $T_TMP/curl.err
send() {
	local side=$1 host=$2 path=$3 proto=--http1.1 rc
	shift 3
	[ "$side" = h2 ] && proto=--http2-prior-knowledge
	rm -f "$T_TMP/$side.body" "$T_TMP/$side.hdrs"
	curl -sS -m 10 -o "$T_TMP/$side.body" -D "$T_TMP/$side.hdrs" -w '%{http_code}' \
		"$proto" -H "Host: $host" "$@" "http://127.0.0.1:$P_EDGE$path" 2>"$T_TMP/$side.err"
	rc=$?
	[ "$rc" = 0 ] || echo "curl $proto: exit $rc: $(head -c 200 "$T_TMP/$side.err")" >>"$T_TMP/curl.err"
}

# send_h2req HOST PATH --data-binary @FILE: send's HTTP/2 side as a POST of
# FILE by tests/tools/h2req.py, with the fields curl would send
send_h2req() {
	local host=$1 path=$2
	rm -f "$T_TMP/h2.body" "$T_TMP/h2.hdrs"
	/usr/bin/python3 "$TOOLS/h2req.py" "$P_EDGE" POST "$host" "$path" "${4#@}" \
		"$T_TMP/h2.hdrs" "$T_TMP/h2.body" "user-agent: $CURL_UA" "accept: */*" \
		"content-type: application/x-www-form-urlencoded" 2>"$T_TMP/h2.err" ||
		echo "h2req.py: no response: $(head -c 200 "$T_TMP/h2.err")" >>"$T_TMP/curl.err"
}

# rl_on: reload with ratelimit 1/m, burst 2, and wait until a client
# ($RL_PROBE) is refused; 1 when it never is
rl_on() {
	local i
	write_conf 'ratelimit = { rate = "1/m"; burst = 2; };'
	reload_conf || return 1
	for ((i = 0; i < 40; i++)); do
		[ "$(curl -s -m 5 -o /dev/null -w '%{http_code}' --interface "$RL_PROBE" \
			-H 'Host: shop.test' "http://127.0.0.1:$P_EDGE/probe")" = 429 ] && return 0
		sleep 0.05
	done
	return 1
}

# row V ROW: send ROW over both protocols and compare
row() {
	local v=$1 name host path argstr want flags tok sep side code what out rc
	local args=() opts=() ifs=() warm=""
	IFS='|' read -r name host path argstr want flags <<<"$2"
	[ -n "$argstr" ] && IFS=';' read -r -a args <<<"$argstr"
	tok="r$((++ROWNO))-$v"
	: >"$T_TMP/curl.err"
	sep='?'
	[[ "$path" == *'?'* ]] && sep='&'
	case " $flags " in
	*" reqid "*) opts+=(--client-reqid) ;;
	*" spoof "*) opts+=(--absent 1.2.3.4 --absent 6.6.6.6 --absent spoofed) ;;
	*" loop "*) opts+=(--records 2) ;;
	*" rl "*)
		opts+=(--ignore client_ip)
		if ! rl_on; then
			t_fail "$v: $name" "ratelimit 1/m not in force after a reload: $(tail -3 "$EDGED_LOG")"
			write_conf ""
			reload_conf
			return
		fi
		;;
	esac
	for side in h1 h2; do
		if [ "$flags" = rl ]; then
			ifs=(--interface "$RL_H1")
			[ "$side" = h2 ] && ifs=(--interface "$RL_H2")
			# the bucket's two
			for code in 1 2; do
				code=$(send "$side" "$host" "$path${sep}k=w$code-$side-$tok" "${ifs[@]}" "${args[@]}")
				warm="$warm $code"
			done
		fi
		if [ "$side" = h2 ] && [ "$flags" = h2req ]; then
			send_h2req "$host" "$path${sep}k=$side-$tok" "${args[@]}"
		else
			send "$side" "$host" "$path${sep}k=$side-$tok" "${ifs[@]}" "${args[@]}" >/dev/null
		fi
	done
	if [ "$flags" = rl ]; then
		write_conf ""
		reload_conf
	fi
	if [ -n "$warm" ] && [ "$warm" != " 200 200 200 200" ]; then
		t_fail "$v: $name" "the bucket's first two requests (HTTP/1.1, HTTP/2):$warm"
		return
	fi
	if [ "$flags" = rl ] && ! grep -qi '^retry-after: [1-9]' "$T_TMP/h1.hdrs"; then
		t_fail "$v: $name" "no Retry-After: $(tr '\r\n' '  ' <"$T_TMP/h1.hdrs")"
		return
	fi
	out=$(/usr/bin/python3 "$TOOLS/h1h2_compare.py" "$T_TMP/requests.jsonl" "$T_TMP/backend.jsonl" \
		"h1-$tok" "$T_TMP/h1.hdrs" "$T_TMP/h1.body" "h2-$tok" "$T_TMP/h2.hdrs" "$T_TMP/h2.body" \
		"${opts[@]}")
	rc=$?
	if [ "$rc" = 0 ] && [ "$out" = "$want" ]; then
		what="same answer and records, nothing upstream"
		[ "${want##* }" != - ] && what="same route and upstream request (${want##* })"
		t_ok "$v: $name: ${want% *}, $what over HTTP/1.1 and HTTP/2"
	elif [ "$rc" = 0 ]; then
		t_fail "$v: $name" "both sides agree on '$out', wanted '$want'"
	else
		t_fail "$v: $name" "$out$(tr '\n' ' ' <"$T_TMP/curl.err" | sed 's/^./; &/')"
	fi
}

# metric NAME: one value from /metrics
metric() {
	curl -s -m 5 "http://127.0.0.1:$P_ADMIN/metrics" | awk -v n="$1" '$1 == n { print $2 }'
}
rawf() { json_field "$T_TMP/raw.json" "$1"; }

# record TEXT [TRIES]: "STATUS OUTCOME HTTP_VERSION" of the analytics
# record whose path holds TEXT, looked for TRIES times 50 ms apart (100),
# or nothing
record() {
	local i
	for ((i = 0; i < ${2:-100}; i++)); do
		python3 -c 'import json, sys
for ln in open(sys.argv[1]):
    r = json.loads(ln)
    if sys.argv[2] in (r.get("path") or ""):
        print(r["status"], r["outcome"], r["http_version"])
        sys.exit(0)
sys.exit(1)' "$T_TMP/requests.jsonl" "$1" 2>/dev/null && return 0
		sleep 0.05
	done
}

run_suite() { # BIN LABEL
	local bin=$1 v=$2 r w0 w1 st zrec r1 r3 cpid ipid rc i
	: >"$T_TMP/requests.jsonl"
	write_conf ""
	if ! edged_start "$bin" "$T_TMP/edge.conf" -v; then
		t_fail "$v: edged starts" "$(tail -5 "$EDGED_LOG")"
		return
	fi
	t_ok "$v: edged starts"

	ROWNO=0
	for r in "${ROWS[@]}"; do
		if [[ "$r" == *"|rl" ]] &&
			! curl -s -m 5 -o /dev/null --interface "$RL_H1" "http://127.0.0.1:$P_EDGE/" 2>/dev/null; then
			t_skip "$v: ${r%%|*}" "could not bind $RL_H1"
			continue
		fi
		row "$v" "$r"
	done

	# ---- a client that holds its window at zero ------------------------
	w0=$(metric 'edge_http2_refusals_total{reason="window_stalled"}')
	"${H2RAW[@]}" zero_window shop.test "$v" >"$T_TMP/raw.json" 2>"$T_TMP/raw.err"
	w1=$(metric 'edge_http2_refusals_total{reason="window_stalled"}')
	"$EDGECTL" --socket "$SOCK" status --json >"$T_TMP/status.json" 2>&1
	st=$(json_field "$T_TMP/status.json" daemon.status.http2.counts.refusals.window_stalled)
	zrec=$(record "/$v-zero-window")
	if [ "$(rawf closed)" = True ] && [ "$(rawf data)" = 0 ] && [ -z "$(rawf client_error)" ] &&
		python3 -c 'import sys; sys.exit(0 if 1.5 <= float(sys.argv[1]) <= 6 else 1)' "$(rawf seconds)" 2>/dev/null &&
		[ "${w1:-0}" -ge $((${w0:-0} + 1)) ] 2>/dev/null && [ "${st:-0}" -ge 1 ] 2>/dev/null &&
		[ "$zrec" = "200 client_closed HTTP/2" ]; then
		t_ok "$v: SETTINGS_INITIAL_WINDOW_SIZE 0 and no WINDOW_UPDATE: head $(rawf streams.1), no DATA, connection closed after $(rawf seconds) s (idle_keepalive 2s); window_stalled $w0 -> $w1 in /metrics, $st in edgectl status --json; recorded as $zrec"
	else
		t_fail "$v: zero window held" "client $(head -c 400 "$T_TMP/raw.json") $(head -c 200 "$T_TMP/raw.err"); /metrics window_stalled $w0 -> $w1; edgectl status $st"
	fi

	# the same with a response the upstream completes at once (1000
	# bytes): it waits in edged for the window, its request with it; not
	# recorded as delivered (200 ok, the connection's end counted idle)
	# but as the client's leaving mid-response, as over HTTP/1.1
	w0=$(metric 'edge_http2_refusals_total{reason="window_stalled"}')
	"${H2RAW[@]}" zero_window_small shop.test "$v" >"$T_TMP/raw.json" 2>"$T_TMP/raw.err"
	w1=$(metric 'edge_http2_refusals_total{reason="window_stalled"}')
	zrec=$(record "/$v-zero-small")
	if [ "$(rawf closed)" = True ] && [ "$(rawf streams.1)" = 200 ] && [ "$(rawf data)" = 0 ] &&
		python3 -c 'import sys; sys.exit(0 if 1.5 <= float(sys.argv[1]) <= 6 else 1)' "$(rawf seconds)" 2>/dev/null &&
		[ "${w1:-0}" -ge $((${w0:-0} + 1)) ] 2>/dev/null && [ "$zrec" = "200 client_closed HTTP/2" ]; then
		t_ok "$v: a complete 1000-byte response held at a zero window: closed after $(rawf seconds) s as window_stalled ($w0 -> $w1), recorded as $zrec, not 200 ok"
	else
		t_fail "$v: zero window, small response" "recorded as '$zrec'; window_stalled $w0 -> $w1; client $(head -c 400 "$T_TMP/raw.json")"
	fi

	# a connection error while a stream waits for its upstream: that
	# stream is the client's leaving (499 client_closed), the one answered
	# before stays 200 ok
	"${H2RAW[@]}" error_inflight shop.test "$v" >"$T_TMP/raw.json" 2>"$T_TMP/raw.err"
	r1=$(record "/$v-answered")
	r3=$(record "/$v-inflight")
	if [ "$(rawf goaway)" = 1 ] && [ "$r1" = "200 ok HTTP/2" ] && [ "$r3" = "499 client_closed HTTP/2" ]; then
		t_ok "$v: a connection error (GOAWAY PROTOCOL_ERROR) with a stream in flight: that stream $r3, the one answered before $r1"
	else
		t_fail "$v: connection error with a stream in flight" "answered '$r1', in flight '$r3'; client $(head -c 300 "$T_TMP/raw.json")"
	fi

	# ---- requests on a connection parked between them, then idle --------
	w0=$(metric 'edge_http2_refusals_total{reason="idle"}')
	H2RAW_ADMIN=$P_ADMIN H2RAW_WAIT_GOAWAY=8 "${H2RAW[@]}" park shop.test "$v" \
		>"$T_TMP/raw.json" 2>"$T_TMP/raw.err"
	w1=$(metric 'edge_http2_refusals_total{reason="idle"}')
	if h2_park_ok "$T_TMP/raw.json" "$v" idle &&
		[ "${w1:-0}" -ge $((${w0:-0} + 1)) ] 2>/dev/null; then
		t_ok "$v: a connection parked between its requests (edge_connections_parked $(rawf parked)): a field indexed in the client's HPACK table before the park decoded after it, a 300000-byte POST and a 200000-byte download through the windows, then GOAWAY NO_ERROR $(rawf goaway_after) s after the last response (idle_keepalive 2s; idle $w0 -> $w1)"
	else
		t_fail "$v: parked connection" "client $(head -c 600 "$T_TMP/raw.json") $(head -c 300 "$T_TMP/raw.err"); /metrics idle $w0 -> $w1"
	fi

	# ---- an idle connection whose session is released, then GOAWAY ----
	H2RAW_ADMIN=$P_ADMIN "${H2RAW[@]}" release_goaway shop.test "$v" \
		>"$T_TMP/raw.json" 2>"$T_TMP/raw.err"
	if [ "$(rawf streams.1)" = 200 ] && [ "$(rawf streams.3)" = 200 ] &&
		[ "$(rawf released_seen)" = 1 ] && [ "$(rawf goaway)" = 0 ] &&
		[ "$(rawf goaway_last)" = 3 ] && [ "$(rawf closed)" = True ]; then
		t_ok "$v: an idle connection's session released (edge_http2_connections_released 1), then its idle GOAWAY NO_ERROR names stream 3, the last the client opened"
	else
		t_fail "$v: released session's GOAWAY" "$(head -c 600 "$T_TMP/raw.json") $(head -c 300 "$T_TMP/raw.err")"
	fi

	# ---- a drain with a stream in flight, and a parked connection ------
	"${H2RAW[@]}" idle shop.test "$v" >"$T_TMP/idle.json" 2>"$T_TMP/idle.err" &
	ipid=$!
	sleep 0.5 # parked after 100 ms
	"${H2RAW[@]}" drain shop.test "$v" >"$T_TMP/raw.json" 2>"$T_TMP/raw.err" &
	cpid=$!
	for ((i = 0; i < 100; i++)); do
		grep -q "/$v-drain" "$T_TMP/backend.jsonl" 2>/dev/null && break
		sleep 0.05
	done
	kill -TERM "$EPID"
	wait "$cpid"
	wait "$ipid"
	for ((i = 0; i < 200; i++)); do
		kill -0 "$EPID" 2>/dev/null || break
		sleep 0.05
	done
	kill -9 "$EPID" 2>/dev/null
	wait "$EPID" 2>/dev/null
	rc=$?
	if python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
g = d["goaways"][0]
ok = (g["last_stream_id"] >= 1 and g["error"] == 0 and
      d["streams"].get("1") == 200 and 1 in d["ended"] and
      d["received"].get("1") == d["lengths"].get("1") and
      "/%s-drain" % sys.argv[2] in d["bodies"].get("1", "") and
      g["at"] < d["headers_at"]["1"] and "3" not in d["streams"])
sys.exit(0 if ok else 1)' "$T_TMP/raw.json" "$v" 2>/dev/null &&
		grep -q "/$v-drain" "$T_TMP/backend.jsonl" &&
		! grep -q "/$v-after-goaway" "$T_TMP/backend.jsonl" &&
		[ "$(record "/$v-drain")" = "200 ok HTTP/2" ] && [ -z "$(record "/$v-after-goaway" 1)" ]; then
		t_ok "$v: SIGTERM with an HTTP/2 stream in flight: GOAWAY (NO_ERROR, last stream $(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["goaways"][0]["last_stream_id"])' "$T_TMP/raw.json")) before its response, the stream's 200 whole after it (recorded 200 ok HTTP/2); a stream opened after the GOAWAY neither sent upstream nor recorded (its resets: $(rawf resets))"
	else
		t_fail "$v: drain" "client $(head -c 600 "$T_TMP/raw.json") $(head -c 300 "$T_TMP/raw.err"); backend: $(grep -c "/$v-drain\|/$v-after-goaway" "$T_TMP/backend.jsonl") of drain/after-goaway; record: $(record "/$v-drain" 1); log: $(grep -i 'drain\|signal' "$EDGED_LOG" | tail -3)"
	fi
	# the parked one's GOAWAY is the drain's (within 0.5 s of the other
	# connection's), not its idle timeout's (2 s)
	if python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
i = json.load(open(sys.argv[2]))
sys.exit(0 if i["goaway"] == 0 and i["closed"] and
         abs(i["goaway_wall"] - d["goaways"][0]["wall"]) < 0.5 else 1)' \
		"$T_TMP/raw.json" "$T_TMP/idle.json" 2>/dev/null; then
		t_ok "$v: SIGTERM with a parked HTTP/2 connection: GOAWAY NO_ERROR on it with the other's, then closed"
	else
		t_fail "$v: drain of a parked connection" "client $(head -c 300 "$T_TMP/idle.json") $(head -c 300 "$T_TMP/idle.err")"
	fi
	if [ "$rc" = 0 ]; then
		t_ok "$v: edged drains and exits cleanly"
	else
		t_fail "$v: edged exit" "status $rc: $(tail -3 "$EDGED_LOG")"
	fi
	edged_sanitizers_clean "$v: sanitizers"
}

edged_backend "$P_BACK" python3 "$TOOLS/echo_backend.py" "$P_BACK" "$T_TMP/backend.jsonl" ||
	t_fail "backend starts"
run_suite "$EDGED" edged
if edged_asan; then
	run_suite "$EDGED_ASAN" asan
fi
t_exit
