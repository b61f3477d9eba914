#!/bin/bash
# test_edged_upgrade.sh - edgectl upgrade (issue 36; docs/operations.md,
# "Upgrades"): while tests/tools/upgrade_load.py keeps HTTP/1.1 keep-alive
# and new connections (some sending their request 0.3 s after the
# connect), HTTP/2 connections, an open WebSocket and a TCP route's
# tunnel busy (random bytes echoed, SHA-256 checked), edged is replaced
# three times (the first by --if-changed after its binary file was
# replaced; with the file in place --if-changed only reloads): every
# request answered 200 (a keep-alive
# connection's request that met its close is sent again, as clients do,
# and counted), every tunnel whole, each old edged gone once its tunnels
# end. Then a binary that exits at once, and an edged that takes the
# sockets and fails its start-up (a listen address another process
# holds), each leave the running edged serving. HTTP/3 beside it all
# (bench/http3/h3load): no request failed, no connection lost, and none
# left by a draining edged to the client's idle timeout (goaway_idle=0).
# Copied tunnels, and as root spliced ones (splice = "sockmap");
# build/edged and build/asan/edged. Needs no root (splice: root).
# Before the rounds: idle HTTP/3 connections on both workers of an edged
# that a slow request keeps draining are each closed within seconds of
# the upgrade (quic_idle), and as root a successor's pid given to another
# process fools neither guard (pid_reuse). UPGRADE_QUICK=1: those alone.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/lib_edged.sh
. "$(dirname "$0")/../lib_edged.sh"
edged_begin curl python3
edged_need_build
DPY=/usr/bin/python3
if ! "$DPY" -c 'import h2' 2>/dev/null; then
	t_skip "upgrade" "python3-h2 is not installed"
	t_exit
	exit
fi

BASE=$(edged_ports 7)
P_EDGE=$BASE
P_BACK=$((BASE + 1))
P_TCPB=$((BASE + 2))
P_ADMIN=$((BASE + 3))
P_TCP=$((BASE + 4))
P_HELD=$((BASE + 5))
P_TLS=$((BASE + 6)) # HTTPS on TCP, HTTP/3 on UDP
C="$T_TMP/certs"
mkdir -p "$C"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
	-subj "/CN=up.test" -addext "subjectAltName=DNS:up.test" \
	-keyout "$C/up.key" -out "$C/up.pem" >/dev/null 2>&1
chmod 755 "$C"
chmod 644 "$C/up.key"
SOCK="$T_TMP/ctl/edged.sock"
chmod 755 "$T_TMP"
# every edged this test starts, the successors edgectl upgrade starts
# included (a failing one may outlive its round): killed at the end
t_cleanup_add "pkill -KILL -f -- '$T_TMP/(edged-bin|bad-edged)'"
EUSER=$(id -un)
if [ "$(id -u)" = 0 ]; then
	EUSER=nobody
	mkdir -m 755 "$T_TMP/ctl"
fi

# write_conf FILE SPLICE [EXTRA_LISTEN]
write_conf() {
	{
		cat <<CONF
listen = [ "127.0.0.1:$P_EDGE"${3:+, \"$3\"} ];
workers = 2;
user = "$EUSER";
control_socket = "$SOCK";
admin_listen = "127.0.0.1:$P_ADMIN";
splice = "$2";
timeouts = { drain = "60s"; };
tls = {
  listen = [ "127.0.0.1:$P_TLS" ];
  quic_listen = [ "127.0.0.1:$P_TLS" ];
  certificates = ( { cert = "$C/up.pem"; key = "$C/up.key"; } );
};
projects = ( { id = "p"; environments = (
  { id = "e"; domains = [ "up.test" ];
    deployment = { id = "d"; upstreams = [ "127.0.0.1:$P_BACK" ]; }; },
  { id = "t"; domains = [ "t.test" ];
    deployment = { id = "dt"; upstreams = [ "127.0.0.1:$P_TCPB" ]; }; } ); } );
tcp_routes = ( { listen = "127.0.0.1:$P_TCP"; environment = "t"; } );
CONF
	} >"$1"
	chmod 644 "$1"
}

ctl() { "$EDGECTL" --socket "$SOCK" "$@"; }
serving_pid() {
	ctl status --json 2>/dev/null |
		python3 -c 'import json,sys; print(json.load(sys.stdin)["daemon"]["status"]["pid"])' 2>/dev/null
}

# round LABEL BIN SPLICE
round() {
	local v=$1 bin=$2 splice=$3 i pid old pids="" code
	write_conf "$T_TMP/edge.conf" "$splice"
	write_conf "$T_TMP/bad.conf" "$splice" "127.0.0.1:$P_HELD"
	rm -f "$T_TMP/stop" "$T_TMP/out.json"
	: >"$T_TMP/upgrades.log"
	# a copy a package upgrade would replace: edgectl upgrade's default
	cp "$bin" "$T_TMP/edged-bin"
	if ! edged_start "$T_TMP/edged-bin" "$T_TMP/edge.conf"; then
		t_fail "$v: edged starts" "$(tail -5 "$EDGED_LOG")"
		return
	fi
	pids=$EPID
	"$DPY" "$TOOLS/upgrade_load.py" "$P_EDGE" up.test "$P_TCP" "$T_TMP/stop" \
		"$T_TMP/out.json" >"$T_TMP/load.log" 2>&1 &
	local load=$!
	edged_track "$load"
	# HTTP/3: 4 connections, 2 requests of 300 ms each in flight on each
	# at every upgrade, until SIGTERM; a connection that stops being
	# answered is lost after 5 s
	"$B/tools/h3load" -c 4 -m 2 -D 600 --idle 5 --authority up.test \
		"https://127.0.0.1:$P_TLS/slow/300" >"$T_TMP/h3load.out" 2>&1 &
	local h3=$!
	edged_track "$h3"
	# both tunnels open, each with the mover the round is about
	local key=open_copy n
	[ "$splice" = off ] || key=open_spliced
	for i in $(seq 60); do
		n=$(ctl splice --json 2>/dev/null |
			python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$key" 2>/dev/null)
		[ "$n" = 2 ] && break
		sleep 0.1
	done
	if [ "$n" = 2 ]; then
		t_ok "$v: the WebSocket and the TCP route's tunnel open ($key 2)"
	else
		t_fail "$v: tunnels open" "$key: $n"
	fi
	sleep 0.5
	# the binary in place: --if-changed only reloads
	old=$(serving_pid)
	if ctl upgrade --if-changed >"$T_TMP/same.out" 2>&1 &&
		grep -q "edged $old runs the binary in place: reloaded its configuration" "$T_TMP/same.out" &&
		[ "$(serving_pid)" = "$old" ]; then
		t_ok "$v: upgrade --if-changed with the binary in place: a reload"
	else
		t_fail "$v: --if-changed, same binary" "$(cat "$T_TMP/same.out")"
	fi
	for i in 1 2 3; do
		old=$(serving_pid)
		# the first replaces the file as a package does (--if-changed
		# then upgrades), the others take the running one's path again
		local how=()
		if [ "$i" = 1 ]; then
			cp "$bin" "$T_TMP/edged-bin.new"
			mv "$T_TMP/edged-bin.new" "$T_TMP/edged-bin"
			how=(--if-changed)
		fi
		if ctl upgrade "${how[@]}" >>"$T_TMP/upgrades.log" 2>&1; then
			pid=$(serving_pid)
			edged_track "$pid"
			pids="$pids $pid"
			if [ -n "$pid" ] && [ "$pid" != "$old" ]; then
				t_ok "$v: upgrade $i: edged $old replaced by $pid"
			else
				t_fail "$v: upgrade $i" "serving pid $old, then $pid"
			fi
		else
			t_fail "$v: upgrade $i" "$(tail -5 "$T_TMP/upgrades.log")"
		fi
		sleep 1.5
	done

	# retire from anyone but the process handed the sockets: refused; a
	# second handover while that process runs: refused
	old=$(serving_pid)
	python3 - "$SOCK" 6 >"$T_TMP/guard.out" 2>&1 <<'PY'
import array, json, os, socket, sys, time
def call(cmd):
    s = socket.socket(socket.AF_UNIX)
    s.connect(sys.argv[1])
    s.sendall(json.dumps({"cmd": cmd}).encode() + b"\n")
    data, fds = b"", []
    while not data.endswith(b"\n"):
        msg, anc, _, _ = s.recvmsg(65536, socket.CMSG_SPACE(250 * 4))
        if not msg:
            break
        data += msg
        for lvl, typ, d in anc:
            fds += array.array("i", d[:len(d) - len(d) % 4]).tolist()
    s.close()
    return json.loads(data), fds
print("retire", call("retire")[0].get("error"))
if os.fork() == 0:  # a successor that took the sockets and runs on
    r, fds = call("handover")
    print("handover", r.get("ok"), len(fds), flush=True)
    time.sleep(float(sys.argv[2]))
    os._exit(0)
time.sleep(1)
PY
	# (the stand-in successor outlives the slowest start of a new edged:
	# its refusal comes once that one asks for the sockets)
	ctl upgrade >"$T_TMP/busy.out" 2>&1
	code=$?
	for i in $(seq 150); do
		pgrep -f -- "- $SOCK 6\$" >/dev/null || break
		sleep 0.1
	done
	if grep -q "^retire retire: only the edged that took the sockets" "$T_TMP/guard.out" &&
		grep -q "^handover True [1-9]" "$T_TMP/guard.out" && [ "$code" = 1 ] &&
		grep -q "another upgrade is under way" "$T_TMP/busy.out" &&
		[ "$(serving_pid)" = "$old" ]; then
		t_ok "$v: retire from another process refused; an upgrade while another successor holds the sockets refused; edged $old serves on"
	else
		t_fail "$v: guards" "$(cat "$T_TMP/guard.out") / exit $code: $(tail -2 "$T_TMP/busy.out")"
	fi

	# a binary that exits at once, an edged that takes the sockets and
	# fails to start: the running one serves on
	old=$(serving_pid)
	printf '#!/bin/sh\necho "not edged" >&2\nexit 3\n' >"$T_TMP/broken"
	chmod 755 "$T_TMP/broken"
	ctl upgrade --binary "$T_TMP/broken" >"$T_TMP/broken.out" 2>&1
	code=$?
	if [ "$code" = 1 ] && grep -q "exited with status 3 before serving.*edged $old serves on" "$T_TMP/broken.out" &&
		[ "$(serving_pid)" = "$old" ]; then
		t_ok "$v: a binary that exits 3: edgectl upgrade fails (exit 1) and says so; edged $old serves on"
	else
		t_fail "$v: broken binary" "exit $code: $(cat "$T_TMP/broken.out"); serving $(serving_pid)"
	fi
	"$DPY" -c 'import socket,sys,time
s = socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(1); time.sleep(60)' "$P_HELD" &
	local held=$!
	edged_track "$held"
	edged_wait_port "$P_HELD"
	printf '#!/bin/sh\nexec "%s" "$@" -c "%s"\n' "$bin" "$T_TMP/bad.conf" >"$T_TMP/bad-edged"
	chmod 755 "$T_TMP/bad-edged"
	ctl upgrade --binary "$T_TMP/bad-edged" >"$T_TMP/bad.out" 2>&1
	code=$?
	kill "$held" 2>/dev/null
	if [ "$code" = 1 ] && grep -q "127.0.0.1:$P_HELD: address already in use" "$T_TMP/bad.out" &&
		grep -q "upgrade: taking over" "$T_TMP/bad.out" &&
		[ "$(serving_pid)" = "$old" ] && [ -S "$SOCK" ] &&
		[ "$(curl -s -m 5 -o /dev/null -w '%{http_code}' -H 'Host: up.test' "http://127.0.0.1:$P_EDGE/")" = 200 ]; then
		t_ok "$v: an edged that took the sockets and failed its start-up (a listen address in use): edged $old serves on"
	else
		t_fail "$v: failing successor" "exit $code: $(tail -3 "$T_TMP/bad.out"); serving $(serving_pid)"
	fi
	sleep 1

	touch "$T_TMP/stop"
	wait "$load"
	kill -TERM "$h3" 2>/dev/null
	wait "$h3"
	# goaway_idle: a connection told GOAWAY, then never closed by the
	# old edged (the client's idle timeout ended it): there must be none
	if grep -Eq '^h3load: requests=[1-9][0-9]* failed=0 non2xx=0 .*conn_errors=0 .* goaway_idle=0$' "$T_TMP/h3load.out"; then
		t_ok "$v: HTTP/3 through the upgrades: no failed request, no connection lost, every drained one closed by its edged ($(grep -o 'requests=[0-9]* .*handshakes=[0-9]*' "$T_TMP/h3load.out") goaway_idle=0)"
	else
		t_fail "$v: HTTP/3 through the upgrades" "$(tail -3 "$T_TMP/h3load.out") | $(grep -hi "quic\|retire\|took over\|drain" "$EDGED_LOG" "$T_TMP/upgrades.log" | tail -12 | tr '\n' ' ')"
	fi
	if python3 - "$T_TMP/out.json" >"$T_TMP/verdict" <<'PY'; then
import json, sys
s = json.load(open(sys.argv[1]))
bad = []
for k in ("h1-ka", "h1-new", "h1-late", "h2", "ws", "tcp"):
    x = s.get(k, {})
    if x.get("failures") or not x.get("requests"):
        bad.append((k, x))
for k in ("ws", "tcp"):
    if not s.get(k, {}).get("whole") or s[k].get("bytes", 0) < 1000000:
        bad.append((k, "not whole", s.get(k)))
# each keep-alive connection (3) meets at most one close an upgrade
if s.get("h1-ka", {}).get("retried", 0) > 3 * 3:
    bad.append(("h1-ka retried", s["h1-ka"]["retried"]))
print(" ".join("%s %d (%d again)" % (k, s[k]["requests"], s[k].get("retried", 0))
               for k in ("h1-ka", "h1-new", "h1-late", "h2")), "| tunnels",
      s.get("ws", {}).get("bytes"), s.get("tcp", {}).get("bytes"), bad)
sys.exit(1 if bad else 0)
PY
		t_ok "$v: through three upgrades no request failed and the tunnels are whole: $(cat "$T_TMP/verdict")"
	else
		t_fail "$v: traffic" "$(cat "$T_TMP/verdict") $(tail -3 "$T_TMP/load.log")"
	fi

	# the old ones are gone once their tunnels ended
	for i in $(seq 100); do
		local alive=""
		for pid in $pids; do
			[ "$pid" = "$(serving_pid)" ] && continue
			kill -0 "$pid" 2>/dev/null && alive="$alive $pid"
		done
		[ -z "$alive" ] && break
		sleep 0.1
	done
	if [ -z "$alive" ]; then
		t_ok "$v: every replaced edged exited once its tunnels ended"
	else
		t_fail "$v: replaced edged still running" "$alive"
	fi

	# fewer workers: the new edged's last worker takes the sockets the
	# others did not (each address keeps its two, a TCP route's too),
	# none left to reset
	old=$(serving_pid)
	sed -i 's/^workers = 2;/workers = 1;/' "$T_TMP/edge.conf"
	if ctl upgrade >>"$T_TMP/upgrades.log" 2>&1; then
		pid=$(serving_pid)
		edged_track "$pid"
		for i in $(seq 100); do
			kill -0 "$old" 2>/dev/null || break
			sleep 0.1
		done
	fi
	local socks codes
	socks=$(ss -Htln "sport = :$P_EDGE" | wc -l)/$(ss -Htln "sport = :$P_TLS" | wc -l)/$(ss -Htln "sport = :$P_TCP" | wc -l)
	codes=$(for i in $(seq 20); do curl -s -m 5 -o /dev/null -w '%{http_code} ' -H 'Host: up.test' "http://127.0.0.1:$P_EDGE/"; done)
	if [ "$pid" != "$old" ] && ! kill -0 "$old" 2>/dev/null && [ "$socks" = 2/2/2 ] &&
		[ "$codes" = "$(printf '200 %.0s' $(seq 20))" ]; then
		t_ok "$v: an upgrade to 1 worker from 2: both listening sockets of each address (HTTP, HTTPS, the TCP route) kept by the new edged, 20 requests answered"
	else
		t_fail "$v: fewer workers" "edged $old -> $pid, $socks sockets listening, $codes"
	fi
	pid=$(serving_pid)
	kill -TERM "$pid" 2>/dev/null
	for i in $(seq 100); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -0 "$EPID" 2>/dev/null && kill -TERM "$EPID"
	wait "$EPID" 2>/dev/null
	if edged_sanitizers_clean "$v: no sanitizer report" "$EDGED_LOG" &&
		edged_sanitizers_clean "$v: no sanitizer report (successors)" "$T_TMP/upgrades.log"; then
		t_ok "$v: no sanitizer report"
	fi
}

# quic_idle LABEL BIN: HTTP/3 connections left idle after a response
# (gtlsclient stays until its server closes the connection or 30 s
# pass), spread over the old edged's two workers, one of which a slow
# HTTP/1.1 request keeps draining: after the upgrade every one is closed
# by the old edged (CONNECTION_CLOSE: the client exits) within a few
# seconds, while that request still holds it, the idle worker's
# included (not left open until the old edged exits)
quic_idle() {
	local v=$1 bin=$2 i old slow pid left="" t0 t1
	if ! command -v gtlsclient >/dev/null; then
		t_skip "$v" "gtlsclient (ngtcp2-client) is not installed"
		return
	fi
	write_conf "$T_TMP/edge.conf" off
	cp "$bin" "$T_TMP/edged-bin"
	if ! edged_start "$T_TMP/edged-bin" "$T_TMP/edge.conf"; then
		t_fail "$v: edged starts" "$(tail -5 "$EDGED_LOG")"
		return
	fi
	old=$EPID
	local idle=()
	for i in $(seq 8); do
		timeout 60 gtlsclient --no-quic-dump --timeout=30s --sni=up.test \
			127.0.0.1 "$P_TLS" "https://up.test:$P_TLS/" >"$T_TMP/idle.$i" 2>&1 &
		idle+=($!)
		edged_track "$!"
	done
	curl -s -m 40 -o /dev/null -H 'Host: up.test' "http://127.0.0.1:$P_EDGE/slow/15000" &
	slow=$!
	edged_track "$slow"
	for i in $(seq 100); do
		[ "$(grep -l ':status: 200' "$T_TMP"/idle.* 2>/dev/null | wc -l)" = 8 ] && break
		sleep 0.1
	done
	sleep 0.5
	t0=$(date +%s.%N)
	if ! ctl upgrade >>"$T_TMP/upgrades.log" 2>&1; then
		t_fail "$v: upgrade with idle HTTP/3 connections" "$(tail -5 "$T_TMP/upgrades.log")"
	fi
	edged_track "$(serving_pid)"
	for i in $(seq 60); do
		left=""
		for pid in "${idle[@]}"; do
			kill -0 "$pid" 2>/dev/null && left="$left $pid"
		done
		[ -z "$left" ] && break
		sleep 0.1
	done
	t1=$(date +%s.%N)
	if [ -z "$left" ] && kill -0 "$old" 2>/dev/null &&
		[ "$(grep -l ':status: 200' "$T_TMP"/idle.* | wc -l)" = 8 ]; then
		t_ok "$v: 8 idle HTTP/3 connections closed by the draining edged $old in $(awk "BEGIN { print $t1 - $t0 }")s (it still serves a slow request)"
	else
		t_fail "$v: idle HTTP/3 connections after an upgrade" \
			"still open after $(awk "BEGIN { print $t1 - $t0 }")s:$left; edged $old $(kill -0 "$old" 2>/dev/null && echo alive || echo gone); $(grep -l ':status: 200' "$T_TMP"/idle.* | wc -l) answered"
	fi
	kill "${idle[@]}" 2>/dev/null
	wait "$slow" 2>/dev/null
	for i in $(seq 100); do
		kill -0 "$old" 2>/dev/null || break
		sleep 0.1
	done
	pid=$(serving_pid)
	kill -TERM "$pid" 2>/dev/null
	for i in $(seq 100); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	wait "$old" 2>/dev/null
}

# pid_reuse LABEL BIN (root: ns_last_pid): a successor takes the
# sockets and exits, and another process is given its pid: its retire is
# refused, and a handover while it runs is not taken for another upgrade
# under way (the guard knows the process by a pidfd: a process given the
# pid within the same clock tick even has the same start time)
pid_reuse() {
	local v=$1 bin=$2 old
	if [ "$(id -u)" != 0 ] || [ ! -w /proc/sys/kernel/ns_last_pid ]; then
		t_skip "$v" "a pid given on purpose needs root (ns_last_pid)"
		return
	fi
	write_conf "$T_TMP/edge.conf" off
	cp "$bin" "$T_TMP/edged-bin"
	if ! edged_start "$T_TMP/edged-bin" "$T_TMP/edge.conf"; then
		t_fail "$v: edged starts" "$(tail -5 "$EDGED_LOG")"
		return
	fi
	old=$EPID
	python3 - "$SOCK" >"$T_TMP/reuse.out" 2>&1 <<'PY'
import array, json, os, socket, sys, time
def call(cmd):
    s = socket.socket(socket.AF_UNIX)
    s.connect(sys.argv[1])
    s.sendall(json.dumps({"cmd": cmd}).encode() + b"\n")
    data, fds = b"", []
    while not data.endswith(b"\n"):
        msg, anc, _, _ = s.recvmsg(65536, socket.CMSG_SPACE(250 * 4))
        if not msg:
            break
        data += msg
        for lvl, typ, d in anc:
            fds += array.array("i", d[:len(d) - len(d) % 4]).tolist()
    s.close()
    for fd in fds:
        os.close(fd)
    return json.loads(data)
pid = os.fork()
if pid == 0:  # a successor that takes the sockets and is gone
    os._exit(0 if call("handover").get("ok") else 1)
_, st = os.waitpid(pid, 0)
print("handover", os.WEXITSTATUS(st) == 0, flush=True)
for attempt in range(500):  # others fork too: until this one gets it
    with open("/proc/sys/kernel/ns_last_pid", "w") as f:
        f.write(str(pid - 1))
    rd, wr = os.pipe()
    q = os.fork()
    if q == 0:
        os.close(rd)
        if os.getpid() == pid:
            os.write(wr, (json.dumps(call("retire")) + "\n").encode())
            time.sleep(30)
        os._exit(0)
    os.close(wr)
    if q != pid:
        os.close(rd)
        os.waitpid(q, 0)
        continue
    print("retire", json.loads(os.read(rd, 65536)).get("error"), flush=True)
    r = call("handover")  # while the pid's new owner runs
    print("handover again", r.get("ok"), r.get("error"), flush=True)
    os.kill(q, 9)
    os.waitpid(q, 0)
    break
else:
    print("pid", pid, "not given again")
PY
	if grep -q "^handover True" "$T_TMP/reuse.out" &&
		grep -q "^retire retire: only the edged that took the sockets" "$T_TMP/reuse.out" &&
		grep -q "^handover again True None" "$T_TMP/reuse.out" &&
		[ "$(serving_pid)" = "$old" ]; then
		t_ok "$v: a successor gone and its pid another process's: that one's retire refused, a new handover not refused as an upgrade under way; edged $old serves on"
	else
		t_fail "$v: a successor's pid reused" "$(tr '\n' ' ' <"$T_TMP/reuse.out") serving $(serving_pid)"
	fi
	kill -TERM "$old" 2>/dev/null
	wait "$old" 2>/dev/null
}

edged_backend "$P_BACK" python3 "$TOOLS/echo_backend.py" "$P_BACK" "$T_TMP/backend.log"
edged_backend "$P_TCPB" python3 "$TOOLS/tcp_backend.py" "$P_TCPB" "$T_TMP/tcpb.log"
quic_idle "idle HTTP/3" "$EDGED"
pid_reuse "pid reuse" "$EDGED"
[ -n "${UPGRADE_QUICK:-}" ] && { t_exit; exit; }
round "normal copy" "$EDGED" off
if [ "$(id -u)" = 0 ]; then
	round "normal spliced" "$EDGED" sockmap
fi
if edged_asan; then
	round "asan copy" "$EDGED_ASAN" off
fi
t_exit
