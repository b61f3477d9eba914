#!/bin/bash
# test_logrotate.sh - dist/logrotate/edge: logrotate --debug (its own
# state file) accepts it; it rotates the path examples/edge.conf's
# analytics.file names; and a real rotation with its postrotate works
# against a running edged: edged (started as root, running as nobody)
# writes a record, logrotate -f rotates the file (the copy of the
# logrotate file differs only in the path), the new file has the old
# one's owner and mode 0640, the postrotate's pkill -USR1 -x edged makes
# edged log "reopening the analytics file", and the next record goes to
# the new file and not to the rotated one. edged and logrotate run in a
# PID namespace of their own, so that the postrotate's pkill can reach no
# other edged on this machine. Runs build/edged and build/asan/edged.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/lib_edged.sh
. "$(dirname "$0")/../lib_edged.sh"
edged_begin logrotate curl unshare
edged_need_build
LR=$T_ROOT/dist/logrotate/edge

# --debug: the file parses, nothing is done
if logrotate --debug -s "$T_TMP/lr.state" "$LR" >"$T_TMP/lr.out" 2>&1 &&
	! grep -qi '^error' "$T_TMP/lr.out" &&
	grep -q '^rotating pattern: /var/lib/edge/requests.jsonl ' "$T_TMP/lr.out"; then
	t_ok "logrotate --debug accepts dist/logrotate/edge"
else
	t_fail "logrotate --debug accepts dist/logrotate/edge" "$(grep -i 'error' "$T_TMP/lr.out" | head -3)"
fi
# the example configuration's analytics file, the package's too
path=$(sed -n '/^analytics = {/,/^};/s/^ *file = "\(.*\)";/\1/p' "$T_ROOT/examples/edge.conf")
pattern=$(sed -n 's/^\(\/[^ ]*\) {$/\1/p' "$LR")
if [ -n "$path" ] && [ "$path" = "$pattern" ]; then
	t_ok "it rotates examples/edge.conf's analytics.file ($path)"
else
	t_fail "it rotates examples/edge.conf's analytics.file" "example: '$path', logrotate: '$pattern'"
fi
if grep -q '^[[:space:]]*create 0640$' "$LR" &&
	grep -q 'pkill -USR1 -x edged' "$LR" &&
	grep -q 'systemctl kill -s USR1 --kill-whom=main edged.service' "$LR"; then
	t_ok "create 0640 (the rotated file's owner); postrotate: SIGUSR1 by systemctl or pkill"
else
	t_fail "create and postrotate" "$(grep -n 'create\|kill' "$LR")"
fi

if [ "$(id -u)" -ne 0 ] || ! getent passwd nobody >/dev/null; then
	t_skip "a rotation against a running edged" "needs root and user nobody"
	t_exit
	exit
fi

BASE=$(edged_ports 2)
P_EDGE=$BASE
# edged, as nobody, reopens the file: it must reach it
chmod 0711 "$T_TMP"

run_suite() { # BIN LABEL
	local bin=$1 v=$2 d="$T_TMP/a-$2" out
	mkdir -p "$d"
	chmod 0755 "$d"
	{
		edged_conf_head "$((BASE + 1))" "$d/edged.sock" 1 nobody
		printf 'analytics = { file = "%s"; };\n' "$d/requests.jsonl"
	} >"$d/edge.conf"
	sed "s|^$path {|$d/requests.jsonl {|" "$LR" >"$d/logrotate.conf"
	cat >"$d/inns.sh" <<'SH'
# in a PID namespace: edged, a record, the rotation, another record
bin=$1 d=$2 port=$3
log=$d/edged.log
"$bin" -c "$d/edge.conf" -f >"$log" 2>&1 &
pid=$!
ask() { curl -s -o /dev/null -m 5 -H "Host: $1" "http://127.0.0.1:$port/" ; }
waitfor() { # PATTERN FILE
	for _ in $(seq 100); do grep -q -- "$1" "$2" 2>/dev/null && return 0; sleep 0.05; done
	return 1
}
for _ in $(seq 200); do grep -q 'serving on' "$log" && break; sleep 0.05; done
ask before.test
waitfor before.test "$d/requests.jsonl" || echo "no record before"
echo "user: $(ps -o user= -p $pid)"
logrotate -f -s "$d/lr.state" "$d/logrotate.conf" 2>&1 | sed 's/^/logrotate: /'
waitfor 'reopening the analytics file' "$log" || echo "no reopen logged"
ask after.test
waitfor after.test "$d/requests.jsonl" || echo "no record after"
echo "new: $(stat -c '%U %a' "$d/requests.jsonl") $(grep -c before.test "$d/requests.jsonl") $(grep -c after.test "$d/requests.jsonl")"
echo "old: $(grep -c before.test "$d/requests.jsonl.1") $(grep -c after.test "$d/requests.jsonl.1")"
kill -TERM $pid
wait $pid
echo "exit: $?"
SH
	timeout 60 unshare -p -f --mount-proc bash "$d/inns.sh" "$bin" "$d" "$P_EDGE" >"$d/out" 2>&1
	out=$(cat "$d/out")
	sed 's/^/# /' "$d/out"
	if [[ $out == *"user: nobody"* ]] && [[ $out == *"new: nobody 640 0 1"* ]] &&
		[[ $out == *"old: 1 0"* ]] && [[ $out == *"exit: 0"* ]] &&
		! grep -q 'AddressSanitizer\|runtime error\|LeakSanitizer' "$d/edged.log"; then
		t_ok "$v: logrotate -f: new file nobody's 0640, SIGUSR1 from the postrotate, the next record in the new file only"
	else
		t_fail "$v: a rotation against a running edged" "$(tr '\n' ' ' <"$d/out") $(tail -3 "$d/edged.log")"
	fi
}

run_suite "$EDGED" edged
if edged_asan; then
	run_suite "$EDGED_ASAN" asan
fi
t_exit
