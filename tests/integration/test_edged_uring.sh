#!/bin/bash
# test_edged_uring.sh - the workers' reads and sends batched through io_uring
# (io_uring = true, the default; docs/architecture.md): `edgectl status`
# and /metrics say the workers send that way, and 40 keep-alive clients at
# once (tests/tools/uring_load.py: downloads of 0 to 300 KiB plain and
# chunked, uploads, pipelined pairs) get every byte right, with fewer
# io_uring_enter calls than sends; with io_uring = false the same load
# passes with no send batched; where the kernel refuses io_uring
# (sysctl kernel.io_uring_disabled = 2, put back at exit) edged starts,
# says why in its log and its status, and serves the same load one
# system call per send. Runs against build/edged and build/asan/edged.
# Needs root for the sysctl case (skipped where the kernel has no such
# sysctl).
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/lib_edged.sh
. "$(dirname "$0")/../lib_edged.sh"
edged_begin curl python3
edged_need_build
EDGECTL=${EDGECTL:-$B/edgectl}

BASE=$(edged_ports 3)
P_EDGE=$BASE
P_ADMIN=$((BASE + 1))
P_BACK=$((BASE + 2))
SOCK="$T_TMP/edged.sock"

conf() { # IO_URING(true|false)
	edged_conf_head "$P_ADMIN" "$SOCK" 2
	cat <<CONF
io_uring = $1;
projects = (
  { id = "bulk";
    environments = (
      { id = "bulk-prod";
        domains = [ "bulk.test" ];
        deployment = { id = "bulk-1"; upstreams = [ "127.0.0.1:$P_BACK" ]; };
      }
    );
  }
);
CONF
}
conf true >"$T_TMP/on.conf"
conf false >"$T_TMP/off.conf"

edged_backend "$P_BACK" python3 "$TOOLS/stream_backend.py" "$P_BACK" "$T_TMP/backend.jsonl" ||
	t_fail "backend" "did not start"

# same NAME WANT GOT: ok when GOT is WANT
same() {
	if [ "$3" = "$2" ]; then
		t_ok "$1"
	else
		t_fail "$1" "got '$3', want '$2'"
	fi
}

metric() { # NAME: its value on /metrics
	curl -s -m 5 "http://127.0.0.1:$P_ADMIN/metrics" | awk -v n="$1" '$1 == n { print $2 }'
}

status_line() { "$EDGECTL" --socket "$SOCK" status 2>/dev/null | grep '^io_uring:'; }

# load LABEL: the clients' run; 0 when every request was answered right
load() {
	local out
	if out=$(python3 "$TOOLS/uring_load.py" "$P_EDGE" bulk.test 40 60); then
		t_ok "$1: 2400 requests from 40 keep-alive clients, every body right ($out)"
	else
		t_fail "$1" "$out"
		return 1
	fi
}

# sysctl_set VALUE: kernel.io_uring_disabled, or 1 when it has none
SYSCTL=/proc/sys/kernel/io_uring_disabled
URING_WAS=$(cat "$SYSCTL" 2>/dev/null || true)
if [ -n "$URING_WAS" ]; then
	t_cleanup_add "echo '$URING_WAS' >'$SYSCTL'"
fi

run_suite() { # BIN LABEL
	local bin=$1 v=$2 st sends reads enters
	# on: the workers batch their sends
	if ! edged_start "$bin" "$T_TMP/on.conf"; then
		t_fail "$v: edged starts" "$(tail -5 "$EDGED_LOG")"
		return
	fi
	st=$(status_line)
	same "$v: status says both workers send through io_uring" \
		"io_uring:   2 of 2 workers (on: a loop turn's reads and sends in one io_uring_enter)" "$st"
	load "$v: io_uring on"
	sends=$(metric edge_io_uring_sends_total)
	reads=$(metric edge_io_uring_reads_total)
	enters=$(metric edge_io_uring_enters_total)
	# every answer and every request upstream is a send, and each
	# request and answer begins with a read: at least 2 x 2400 of each,
	# carried by fewer io_uring_enter calls
	if [ "${sends:-0}" -ge 4800 ] && [ "${reads:-0}" -ge 4800 ] &&
		[ "${enters:-0}" -ge 1 ] && [ "$enters" -lt $((sends + reads)) ]; then
		t_ok "$v: /metrics: $sends sends and $reads reads batched in $enters io_uring_enter calls"
	else
		t_fail "$v: io_uring counters" "sends ${sends:-none}, reads ${reads:-none}, enters ${enters:-none}"
	fi
	edged_stop 10
	edged_sanitizers_clean "$v: sanitizers (on)" || true

	# off: the same load, no send batched
	if ! edged_start "$bin" "$T_TMP/off.conf"; then
		t_fail "$v: edged starts with io_uring = false" "$(tail -5 "$EDGED_LOG")"
		return
	fi
	st=$(status_line)
	same "$v: status says io_uring is off" \
		"io_uring:   0 of 2 workers (off (io_uring = false))" "$st"
	load "$v: io_uring off"
	same "$v: io_uring off: no send or read batched" "0 0" \
		"$(metric edge_io_uring_sends_total) $(metric edge_io_uring_reads_total)"
	edged_stop 10
	edged_sanitizers_clean "$v: sanitizers (off)" || true

	# refused by the kernel: edged says so and serves all the same
	if [ -z "$URING_WAS" ] || [ "$(id -u)" != 0 ]; then
		t_skip "$v: io_uring refused by the kernel" "no kernel.io_uring_disabled here, or not root"
		return
	fi
	echo 2 >"$SYSCTL"
	if ! edged_start "$bin" "$T_TMP/on.conf"; then
		echo "$URING_WAS" >"$SYSCTL"
		t_fail "$v: edged starts with io_uring refused" "$(tail -5 "$EDGED_LOG")"
		return
	fi
	echo "$URING_WAS" >"$SYSCTL"
	st=$(status_line)
	if [[ "$st" == "io_uring:   0 of 2 workers (Operation not permitted)" ]] &&
		grep -q "io_uring: Operation not permitted: reads and sends go one system call each" "$EDGED_LOG"; then
		t_ok "$v: io_uring refused by the kernel: logged, and in the status ($st)"
	else
		t_fail "$v: io_uring refused" "status '$st'; log: $(grep io_uring "$EDGED_LOG" | head -2)"
	fi
	load "$v: io_uring refused"
	same "$v: io_uring refused: no send or read batched" "0 0" \
		"$(metric edge_io_uring_sends_total) $(metric edge_io_uring_reads_total)"
	edged_stop 10
	edged_sanitizers_clean "$v: sanitizers (refused)" || true
}

run_suite "$EDGED" "edged"
if edged_asan; then
	run_suite "$EDGED_ASAN" "asan"
fi
t_exit
