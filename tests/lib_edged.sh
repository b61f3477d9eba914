# shellcheck shell=bash
# tests/lib_edged.sh - helpers shared by the edged integration tests
# (tests/integration/test_edged_*.sh), sourced after tests/lib.sh:
#
#   . "$(dirname "$0")/../lib.sh"
#   . "$(dirname "$0")/../lib_edged.sh"
#   edged_begin curl python3      # t_begin, and skip unless both exist
#   edged_need_build              # $EDGED, skip unless it is built
#   BASE=$(edged_ports 4)         # 4 free ports for this test
#
# Every process these helpers start is listed in $T_TMP/pids and killed
# (SIGKILL) when the test exits, pass or fail. A list in a file, not
# t_cleanup_add's array, so that processes started by a suite running in a
# background subshell are killed too. edged itself runs on 127.0.0.1:$P_EDGE
# (each test sets P_EDGE), in the foreground (-f), its output in $EDGED_LOG.

# shellcheck disable=SC2034 # for the tests that source this
TOOLS="$T_ROOT/tests/tools"
EDGED_ASAN="$B/asan/edged"
# the ASan/UBSan build's options unless the caller set its own (tests/run
# does): report leaks, and exit 1 on a report instead of aborting
EDGED_ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:exitcode=1"
EPID=""

# edged_begin [CMD...]: t_begin, then skip the whole file (exit 77) unless
# every CMD (a name on PATH or an executable's path) exists. Sets up the
# list of processes to kill at exit and EDGED_LOG ($T_TMP/edged.log).
edged_begin() {
	local c missing=()
	t_begin
	for c in "$@"; do
		command -v "$c" >/dev/null || missing+=("$c")
	done
	if [ ${#missing[@]} -gt 0 ]; then
		c="$*"
		t_skip "$(basename "$0")" "needs ${c// / and }"
		exit 77
	fi
	: >"$T_TMP/pids"
	t_cleanup_add "xargs -r kill -9 <'$T_TMP/pids'"
	EDGED_LOG="$T_TMP/edged.log"
}

# edged_need_build: EDGED is the daemon under test ($EDGED, by default
# $B/edged); skip the whole file (exit 77) when it is not built.
edged_need_build() {
	EDGED=${EDGED:-$B/edged}
	if [ ! -x "$EDGED" ]; then
		t_skip "$(basename "$0")" "$EDGED not built"
		exit 77
	fi
}

# edged_asan [OPTION...]: 0 when the ASan/UBSan build ($EDGED_ASAN) exists,
# with ASAN_OPTIONS exported (the caller's, else EDGED_ASAN_OPTIONS, then
# each OPTION appended, e.g. quarantine_size_mb=8); else a skip line for
# "asan: edged" and 1.
# shellcheck disable=SC2120 # the options are optional
edged_asan() {
	local o
	if [ ! -x "$EDGED_ASAN" ]; then
		t_skip "asan: edged" "$EDGED_ASAN not built"
		return 1
	fi
	ASAN_OPTIONS=${ASAN_OPTIONS:-$EDGED_ASAN_OPTIONS}
	for o in "$@"; do
		ASAN_OPTIONS="$ASAN_OPTIONS:$o"
	done
	export ASAN_OPTIONS
}

# edged_ports N [LO HI]: print the first of N consecutive TCP ports for this test
# on 127.0.0.1. They lie between 20000 and 32767, below Linux's ephemeral
# range (32768 up), so that no outgoing connection can be holding one; the
# block is chosen from T_ID, and the next one taken while a socket on the
# machine already uses a port of it (other tests, other users). LO and HI
# (20000, 32768) bound another range a test is given.
edged_ports() {
	local n=$1 lo=${2:-20000} hi=${3:-32768} slots base p try used
	slots=$(((hi - lo) / n))
	used=" $(ss -Htan 2>/dev/null | awk '{ n = split($4, a, ":"); print a[n] }' | sort -u | tr '\n' ' ') "
	for ((try = 0; try < 50; try++)); do
		base=$((lo + ((T_ID + try * 7919) % slots) * n))
		for ((p = base; p < base + n; p++)); do
			[[ "$used" == *" $p "* ]] && continue 2
		done
		break
	done
	echo "$base"
}

# edged_track PID: kill PID (SIGKILL) when the test exits.
edged_track() { echo "$1" >>"$T_TMP/pids"; }

# edged_wait_port PORT: 0 once something accepts connections on
# 127.0.0.1:PORT, 1 when nothing has after 100 tries 50 ms apart (5 s and
# a bit).
edged_wait_port() {
	local i
	for ((i = 0; i < 100; i++)); do
		if python3 -c "import socket,sys; socket.create_connection(('127.0.0.1', int(sys.argv[1])), 0.2).close()" "$1" 2>/dev/null; then
			return 0
		fi
		sleep 0.05
	done
	return 1
}

# edged_wait_log PATTERN: 0 once $EDGED_LOG has a line matching the
# extended regular expression PATTERN, 1 when none has after 5 s.
edged_wait_log() {
	local i
	for ((i = 0; i < 100; i++)); do
		grep -Eq -- "$1" "$EDGED_LOG" && return 0
		sleep 0.05
	done
	return 1
}

# edged_backend PORT CMD...: start CMD (a backend serving on PORT) in the
# background, killed at exit; 0 once PORT accepts, 1 when it does not.
edged_backend() {
	local port=$1
	shift
	"$@" &
	edged_track $!
	edged_wait_port "$port"
}

# edged_metric NAME: the value of the series NAME (labels and all, as
# /metrics writes it) on the admin listener 127.0.0.1:$P_ADMIN; 0 when
# absent
edged_metric() {
	curl -s -m 5 "http://127.0.0.1:$P_ADMIN/metrics" | awk -v k="$1" '$1 == k { v = $2 } END { print v + 0 }'
}

# edged_req HOST PATH [CURL_ARGS...]: one request to edged on
# 127.0.0.1:$P_EDGE for HOST and PATH (30 s at most); prints "CODE ERROR":
# the status (CODE:RC when curl failed with RC) and the JSON body's
# "error" (- when none). Its head and body stay in $RF.head and $RF.body
# (RF: default $T_TMP/r.$BASHPID, one per subshell).
edged_req() {
	local code rc=0 h=$1 p=$2 f=${RF:-$T_TMP/r.$BASHPID}
	shift 2
	code=$(curl -sS -m 30 -D "$f.head" -o "$f.body" -w '%{http_code}' "$@" \
		-H "Host: $h" "http://127.0.0.1:$P_EDGE$p" 2>/dev/null) || rc=$?
	[ "$rc" = 0 ] || code="$code:$rc"
	echo "$code $(python3 -c 'import json,sys
try: print(json.load(open(sys.argv[1]))["error"])
except Exception: print("-")' "$f.body")"
}

# edged_burst HOST N PATH: N GETs of PATH&i=K (K from 0) to edged on
# $P_EDGE for HOST at once, each on its own connection; prints the
# statuses counted, "NxCODE ..." (an exception's name for a failure)
edged_burst() {
	python3 - "$P_EDGE" "$1" "$2" "$3" <<'PY'
import http.client, sys, threading, collections
port, host, n, path = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
got = []
def one(i):
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        c.request("GET", "%s&i=%d" % (path, i), headers={"Host": host})
        r = c.getresponse(); r.read(); got.append(str(r.status)); c.close()
    except Exception as e:
        got.append(type(e).__name__)
t = [threading.Thread(target=one, args=(i,)) for i in range(n)]
for x in t: x.start()
for x in t: x.join()
print(" ".join("%dx%s" % (v, k) for k, v in sorted(collections.Counter(got).items())))
PY
}

# edged_wait_metric NAME WANT: 0 once edged_metric NAME is WANT (5 s)
edged_wait_metric() {
	local i
	for ((i = 0; i < 50; i++)); do
		[ "$(edged_metric "$1")" = "$2" ] && return 0
		sleep 0.1
	done
	return 1
}

# edged_conf_head ADMIN_PORT SOCKET [WORKERS [USER]]: print the settings
# every test's configuration begins with: listen on 127.0.0.1:$P_EDGE, the
# admin listener on 127.0.0.1:ADMIN_PORT, the control socket at SOCKET,
# WORKERS worker threads (2), and the user to run as (the current one).
edged_conf_head() {
	cat <<CONF
listen = [ "127.0.0.1:$P_EDGE" ];
workers = ${3:-2};
user = "${4:-$(id -un)}";
control_socket = "$2";
admin_listen = "127.0.0.1:$1";
CONF
}

# edged_start BIN CONF [ARG...]: run BIN -c CONF -f ARG... in the
# background, its output in $EDGED_LOG, its PID in EPID (killed at exit);
# then edged_wait_port $P_EDGE, and wait (up to 30 s) for edged's
# "serving on" line: the listeners accept before the splice self-test and
# the kTLS probe (which may load the tls module) are done, and a test
# reading what edged said at start must not race them. 1 when the port
# never opens, edged exits, or the line never comes.
edged_start() {
	local bin=$1 conf=$2 i
	shift 2
	: >"$EDGED_LOG" # now: the last run's "serving on" is not this one's
	"$bin" -c "$conf" -f "$@" >"$EDGED_LOG" 2>&1 &
	EPID=$!
	edged_track "$EPID"
	edged_wait_port "$P_EDGE" || return 1
	for ((i = 0; i < 600; i++)); do
		grep -q "serving on" "$EDGED_LOG" && return 0
		kill -0 "$EPID" 2>/dev/null || return 1
		sleep 0.05
	done
	return 1
}

# edged_stop [SECONDS]: SIGTERM edged ($EPID) and wait for it to exit;
# with SECONDS, SIGKILL it when it has not exited by then. Returns edged's
# exit status (137 when it had to be killed).
# shellcheck disable=SC2120 # SECONDS is optional
edged_stop() {
	local i
	kill -TERM "$EPID" 2>/dev/null
	if [ -n "${1:-}" ]; then
		for ((i = 0; i < $1 * 20; i++)); do
			kill -0 "$EPID" 2>/dev/null || break
			sleep 0.05
		done
		kill -9 "$EPID" 2>/dev/null
	fi
	wait "$EPID" 2>/dev/null
}

# edged_sanitizers_clean NAME [LOG]: 0 when LOG ($EDGED_LOG) holds no
# AddressSanitizer, LeakSanitizer or UBSan ("runtime error") report; else
# fail case NAME with the report's first lines and return 1.
edged_sanitizers_clean() {
	local log=${2:-$EDGED_LOG}
	if grep -q 'AddressSanitizer\|runtime error\|LeakSanitizer' "$log"; then
		t_fail "$1" "$(grep -m3 'Sanitizer\|runtime error' "$log")"
		return 1
	fi
}

# splice_slow_bytes MIN: bytes a writer must send to a reader that stops
# for edged to hand its spliced tunnel back: more than the source
# socket's receive buffer may grow to (tcp_rmem's maximum, which edged's
# limit follows) and the reader's send queue, MIN at least
splice_slow_bytes() {
	local rmem
	rmem=$(awk '{ print $3 }' /proc/sys/net/ipv4/tcp_rmem 2>/dev/null)
	rmem=$((${rmem:-6291456} + (16 << 20)))
	echo $((rmem > $1 ? rmem : $1))
}

# json_field FILE|- KEY[.KEY...]: print one field of the JSON object in
# FILE (-: stdin), following dotted keys into nested objects; an absent
# key prints an empty line, unreadable JSON nothing (and returns 1).
json_field() {
	local f=$1
	[ "$f" = - ] && f=/dev/stdin
	python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
for k in sys.argv[2].split("."):
    d = d.get(k, "") if isinstance(d, dict) else ""
print(d)' "$f" "$2" 2>/dev/null
}

# h2_park_ok FILE VALUE MODE: 0 when FILE (tests/tools/h2raw.py's park
# case's JSON, its x-park value VALUE-park-v...) shows streams 1, 3, 5 and
# 7 answered 200 on a connection parked between them: the header from the
# client's HPACK table echoed after the park, the 300000-byte POST and the
# 200000-byte download whole, no reset; MODE "idle": then a GOAWAY
# NO_ERROR 1.5 to 6 s after the last response and the close; "open": no
# GOAWAY.
h2_park_ok() {
	python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
e = d["echo"]
val = "%s-park-%s" % (sys.argv[2], "v" * 40)
ok = (all(d["streams"].get(s) == 200 for s in ("1", "3", "5", "7")) and
      e["1"]["x-park"] == val and e["3"]["x-park"] == val and
      e["5"]["body_len"] == 300000 and d["downloaded"] == 200000 and
      all(p is not None and p >= 1 for p in d["parked"]) and
      not d["resets"] and "client_error" not in d)
if sys.argv[3] == "idle":
    ok = ok and d["goaway"] == 0 and 1.5 <= d["goaway_after"] <= 6 and d["closed"]
else:
    ok = ok and d["goaway"] is None
sys.exit(0 if ok else 1)' "$1" "$2" "$3" 2>/dev/null
}

# reload_conf: SIGHUP the edged started last (EPID) and wait (up to 5 s) for one more "reloaded"
# line in its log.
reload_conf() {
	local n i
	n=$(grep -c 'reloaded .*route table generation' "$EDGED_LOG")
	kill -HUP "$EPID"
	for ((i = 0; i < 100; i++)); do
		[ "$(grep -c 'reloaded .*route table generation' "$EDGED_LOG")" -gt "$n" ] && return 0
		sleep 0.05
	done
	return 1
}

# edged_check_refusals WRITE_CONF: for each line "GROUPS|WANT" on stdin,
# WRITE_CONF ",ENVIRONMENT" (an extra environment e-bad, bad.test, to
# 127.0.0.1:$P_BACK, holding GROUPS), then edged --check: ok when it
# fails naming WANT (an extended regex) after the file and line
edged_check_refusals() {
	local gate want out rc
	while IFS='|' read -r gate want; do
		"$1" ",
      { id = \"e-bad\"; domains = [ \"bad.test\" ];
        deployment = { id = \"d-bad\"; upstreams = [ \"127.0.0.1:$P_BACK\" ]; };
        $gate }"
		rc=0
		out=$("$EDGED" -c "$T_TMP/edge.conf" --check 2>&1) || rc=$?
		if [ "$rc" -ne 0 ] && grep -qE "edge.conf:[0-9]+: .*$want" <<<"$out"; then
			t_ok "--check refuses $gate"
		else
			t_fail "--check: $gate" "$out"
		fi
	done
}

# edged_browser_net NS OCTET DEV: as root, a namespace NS-$T_ID for a
# browser with a veth pair (DEV... on this side) to this one, on
# 10.OCTET.x.0/24: edged listens on BR_ADDR (this side), the browser's
# requests come from BR_CLIENT, run in it with "${BR_IN[@]}" CMD. Without
# root, both are 127.0.0.1 and BR_IN is empty. 1 when it cannot be made.
BR_ADDR=127.0.0.1
BR_CLIENT=127.0.0.1
BR_IN=()
edged_browser_net() {
	local ns="$1-$T_ID" dev="$3$((T_ID % 100000))" net
	[ "$(id -u)" -eq 0 ] || return 0
	net="10.$2.$((T_ID % 200 + 20))"
	t_netns "$ns" || return 1
	ip link add "$dev" type veth peer name br0 netns "$ns" || return 1
	t_cleanup_add "ip link del '$dev' 2>/dev/null"
	ip addr add "$net.1/24" dev "$dev" && ip link set "$dev" up &&
		ip -n "$ns" addr add "$net.2/24" dev br0 && ip -n "$ns" link set br0 up &&
		ip -n "$ns" link set lo up || return 1
	BR_ADDR="$net.1"
	BR_CLIENT="$net.2"
	BR_IN=(t_in "$ns")
}

# h2_release_ok FILE TAG: h2raw.py's release case (in FILE, played with
# TAG) went as on a session never released: every stream 200, x-park as
# sent each time, the POST and the download whole, the session released
# in each pause, the client's HPACK table emptied (0) and given back
# (4096), the frames of closed streams ignored (stream 1 answered once),
# no reset, no GOAWAY
h2_release_ok() {
	python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
e = d["echo"]
val = "%s-release-%s" % (sys.argv[2], "v" * 40)
t = d.get("table_sizes", [])
ok = (all(d["streams"].get(s) == 200 for s in ("1", "3", "5", "7", "9", "11")) and
      all(e[s]["x-park"] == val for s in ("1", "3", "5", "7", "9")) and
      e["9"]["body_len"] == 300000 and d["downloaded"] == 200000 and
      len(d["released"]) == 4 and None not in d["released"] and
      0 in t and 4096 in t[t.index(0):] and d["responses"]["1"] == 1 and
      not d["resets"] and d["goaway"] is None and "client_error" not in d)
sys.exit(0 if ok else 1)' "$1" "$2" 2>/dev/null
}
