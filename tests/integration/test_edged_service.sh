#!/bin/bash
# test_edged_service.sh - edged under a service manager: the sd_notify
# protocol (dist/systemd/edged.service is Type=notify): with
# NOTIFY_SOCKET set edged sends READY=1 only once its listen address
# accepts, RELOADING=1 then READY=1 around a SIGHUP reload (a refused one
# too), STOPPING=1 when SIGTERM starts the drain; without NOTIFY_SOCKET it
# runs as before. SIGUSR1 reopens the analytics file (what
# dist/logrotate/edge's postrotate sends), even while the configuration
# file on disk is broken; logrotate with dist/logrotate/edge (its path
# and postrotate's signal made this test's) rotates the file and
# edged writes on in the new one. The units in dist/systemd pass
# `systemd-analyze verify`. Runs against build/edged and build/asan/edged.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/lib_edged.sh
. "$(dirname "$0")/../lib_edged.sh"
edged_begin curl python3
edged_need_build

BASE=$(edged_ports 2)
P_EDGE=$BASE
P_ADMIN=$((BASE + 1))
NOTES="$T_TMP/notify.out"

write_conf() {
	{
		edged_conf_head "$P_ADMIN" "$T_TMP/edged.sock" 1
		cat <<CONF
analytics = { file = "$T_TMP/requests.jsonl"; };
projects = (
  { id = "shop";
    environments = (
      { id = "shop-prod";
        domains = [ "shop.test" ];
        deployment = { id = "shop-1"; upstreams = [ "127.0.0.1:1" ]; };
      }
    );
  }
);
CONF
	} >"$T_TMP/edge.conf"
}

# wait_notes N [SECONDS]: 0 once $NOTES has N lines, 1 after SECONDS (10)
wait_notes() {
	local i
	for ((i = 0; i < ${2:-10} * 20; i++)); do
		[ -f "$NOTES" ] && [ "$(wc -l <"$NOTES")" -ge "$1" ] && return 0
		sleep 0.05
	done
	return 1
}

# wait_lines FILE N: 0 once FILE has N lines, 1 after 5 s
wait_lines() {
	local i
	for ((i = 0; i < 100; i++)); do
		[ -f "$1" ] && [ "$(wc -l <"$1")" -ge "$2" ] && return 0
		sleep 0.05
	done
	return 1
}

run_suite() { # BIN LABEL
	local bin=$1 v=$2 lpid sock="$T_TMP/notify.sock" n i
	write_conf
	rm -f "$sock" "$NOTES" "$T_TMP"/requests.jsonl*
	python3 "$TOOLS/notify_listen.py" "$sock" "$P_EDGE" "$NOTES" >"$T_TMP/nl.out" 2>&1 &
	lpid=$!
	edged_track "$lpid"
	for ((n = 0; n < 200; n++)); do
		grep -q listening "$T_TMP/nl.out" && break
		sleep 0.05
	done
	if ! grep -q listening "$T_TMP/nl.out"; then
		t_fail "$v: notify_listen.py listens" "$(head -c 300 "$T_TMP/nl.out")"
		return
	fi
	: >"$EDGED_LOG" # now: the last run's "serving on" is not this one's
	NOTIFY_SOCKET="$sock" "$bin" -c "$T_TMP/edge.conf" -f >"$EDGED_LOG" 2>&1 &
	EPID=$!
	edged_track "$EPID"
	# the first READY=1 as long as edged_start waits for "serving on":
	# the ASan build's start on a loaded machine
	if ! wait_notes 1 30; then
		t_fail "$v: READY=1 arrives" "$(grep -v 'note: splice' "$EDGED_LOG" | tail -3)"
		kill "$lpid"
		edged_stop 5
		return
	fi
	if [ "$(sed -n 1p "$NOTES")" = "READY=1 accept=yes" ]; then
		t_ok "$v: READY=1 first, once the listen address accepts"
	else
		t_fail "$v: READY=1 once the listen address accepts" "$(cat "$NOTES")"
	fi
	kill -HUP "$EPID"
	if wait_notes 3 && [ "$(sed -n 2,3p "$NOTES" | tr '\n' '|')" = "RELOADING=1 accept=yes|READY=1 accept=yes|" ] &&
		edged_wait_log 'reloaded '; then
		t_ok "$v: SIGHUP: RELOADING=1 then READY=1"
	else
		t_fail "$v: SIGHUP: RELOADING=1 then READY=1" "$(cat "$NOTES")"
	fi
	# a refused reload still ends with READY=1 (systemd would otherwise
	# wait for it until its timeout)
	echo 'workers = ;' >>"$T_TMP/edge.conf"
	kill -HUP "$EPID"
	if wait_notes 5 && [ "$(sed -n 4,5p "$NOTES" | tr '\n' '|')" = "RELOADING=1 accept=yes|READY=1 accept=yes|" ] &&
		edged_wait_log 'reload refused'; then
		t_ok "$v: refused reload: RELOADING=1 then READY=1"
	else
		t_fail "$v: refused reload: RELOADING=1 then READY=1" "$(cat "$NOTES")"
	fi

	# SIGUSR1: the analytics file reopened (the configuration on disk is
	# still broken: rotation does not depend on it)
	curl -s -o /dev/null -m 5 -H 'Host: nowhere.test' "http://127.0.0.1:$P_EDGE/a"
	if wait_lines "$T_TMP/requests.jsonl" 1; then
		mv "$T_TMP/requests.jsonl" "$T_TMP/requests.jsonl.1"
		kill -USR1 "$EPID"
		edged_wait_log 'reopening the analytics file'
		curl -s -o /dev/null -m 5 -H 'Host: nowhere.test' "http://127.0.0.1:$P_EDGE/b"
		if wait_lines "$T_TMP/requests.jsonl" 1 &&
			grep -q '"/b' "$T_TMP/requests.jsonl" &&
			grep -q '"/a' "$T_TMP/requests.jsonl.1" &&
			! grep -q '"/b' "$T_TMP/requests.jsonl.1"; then
			t_ok "$v: SIGUSR1 reopens the analytics file"
		else
			t_fail "$v: SIGUSR1 reopens the analytics file" \
				"$(ls "$T_TMP"; tail -3 "$EDGED_LOG")"
		fi
	else
		t_fail "$v: an analytics record is written" "$(tail -3 "$EDGED_LOG")"
	fi

	# dist/logrotate/edge itself, on this file: its path and its
	# postrotate's signal made this test's (the real postrotate signals
	# every edged on the host: test_logrotate.sh runs it in a PID
	# namespace)
	if command -v logrotate >/dev/null; then
		sed -e "s|^/var/lib/edge/requests.jsonl |$T_TMP/requests.jsonl |" \
			-e '/^\tpostrotate$/,/^\tendscript$/c\	postrotate\n\t\tkill -USR1 '"$EPID"'\n\tendscript' \
			"$T_ROOT/dist/logrotate/edge" >"$T_TMP/logrotate.conf"
		rm -f "$T_TMP"/requests.jsonl.*
		n=$(grep -c 'reopening the analytics file' "$EDGED_LOG")
		if logrotate -f -s "$T_TMP/lr.state" "$T_TMP/logrotate.conf" >"$T_TMP/lr.out" 2>&1; then
			for ((i = 0; i < 100; i++)); do
				[ "$(grep -c 'reopening the analytics file' "$EDGED_LOG")" -gt "$n" ] && break
				sleep 0.05
			done
			curl -s -o /dev/null -m 5 -H 'Host: nowhere.test' "http://127.0.0.1:$P_EDGE/c"
			if wait_lines "$T_TMP/requests.jsonl" 1 &&
				grep -q '"/c' "$T_TMP/requests.jsonl" &&
				grep -q '"/b' "$T_TMP/requests.jsonl.1" &&
				! grep -q '"/c' "$T_TMP/requests.jsonl.1"; then
				t_ok "$v: logrotate with dist/logrotate/edge: rotated, reopened"
			else
				t_fail "$v: logrotate with dist/logrotate/edge" "$(find "$T_TMP" -name 'requests*' | tr '\n' ' ')"
			fi
		else
			t_fail "$v: logrotate with dist/logrotate/edge" "$(grep -i error "$T_TMP/lr.out" | head -3)"
		fi
	else
		t_skip "$v: logrotate with dist/logrotate/edge" "no logrotate (scripts/install-deps --deb)"
	fi

	edged_stop 10
	n=$?
	if [ "$n" -eq 0 ] && grep -q '^STOPPING=1 ' "$NOTES"; then
		t_ok "$v: SIGTERM: STOPPING=1, exit 0"
	else
		t_fail "$v: SIGTERM: STOPPING=1, exit 0" "exit $n: $(cat "$NOTES")"
	fi
	kill "$lpid" 2>/dev/null
	edged_sanitizers_clean "$v: sanitizers" && t_ok "$v: sanitizers"

	# without NOTIFY_SOCKET: serves as before
	write_conf
	if edged_start "$bin" "$T_TMP/edge.conf"; then
		t_ok "$v: no NOTIFY_SOCKET: serves"
	else
		t_fail "$v: no NOTIFY_SOCKET: serves" "$(tail -3 "$EDGED_LOG")"
	fi
	edged_stop 10
}

run_suite "$EDGED" edged
if edged_asan; then
	run_suite "$EDGED_ASAN" "asan: edged"
fi

# the units: systemd-analyze verify (it needs the binaries the units name
# to exist: the installed ones, else a skip)
if command -v systemd-analyze >/dev/null; then
	for u in "$T_ROOT"/dist/systemd/*.service; do
		n=$(basename "$u")
		cp "$u" "$T_TMP/$n"
		# the installed paths (make install PREFIX=/usr) replaced by
		# this build's, so that verify finds the executables
		sed -i "s|/usr/sbin/edged|$(readlink -f "$EDGED")|g; s|/usr/sbin/edgectl|$(readlink -f "$EDGECTL")|g" "$T_TMP/$n"
		if [[ $n == *@.service ]]; then
			mv "$T_TMP/$n" "$T_TMP/${n/@./@lo.}"
			n=${n/@./@lo.}
		fi
		if out=$(SYSTEMD_LOG_LEVEL=warning systemd-analyze verify --man=no "$T_TMP/$n" 2>&1 |
			grep -v 'sys-subsystem-net-devices\|Failed to prepare filename\|sys-fs-bpf.mount'); [ -z "$out" ]; then
			t_ok "systemd-analyze verify $n"
		else
			t_fail "systemd-analyze verify $n" "$out"
		fi
	done
else
	t_skip "systemd-analyze verify" "no systemd-analyze"
fi
t_exit
