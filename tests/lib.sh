# shellcheck shell=bash
# tests/lib.sh - shared helpers for edge's shell tests.
#
# A test file sources this, calls t_begin, then runs cases. Each case ends
# in exactly one of t_ok / t_fail / t_skip, which print one line that
# tests/run counts:
#   ok - NAME
#   not ok - NAME: WHY
#   skip - NAME: WHY
# Everything a test creates (namespaces, veths, pin dirs, processes, temp
# dirs) is registered with t_cleanup_add and removed on exit, pass or fail.
# The file exits 0 when no case failed, 1 otherwise.

set -u
T_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
B=${B:-$T_ROOT/build}
EDGECTL=${EDGECTL:-$B/edgectl}
# python3 is Debian's (/usr/bin/python3): its modules (scapy,
# cryptography) are the ones the tests use, and a version manager's shim
# in front of it on PATH (pyenv's) costs a second or more per start on a
# loaded machine, which the tests pay thousands of times. A directory
# holding only that link goes first on PATH (made in the build directory;
# a VM guest, whose root is read-only, uses the host's).
if [ -x /usr/bin/python3 ] && [ "$(command -v python3)" != /usr/bin/python3 ]; then
	if [ -L "$B/pybin/python3" ] ||
		{ mkdir -p "$B/pybin" 2>/dev/null &&
			ln -sfn /usr/bin/python3 "$B/pybin/python3" 2>/dev/null; }; then
		PATH=$B/pybin:$PATH
		export PATH
	fi
fi
T_FAILED=0
T_CLEANUP=()
T_TMP=""
T_ID="$$"

t_cleanup_add() { T_CLEANUP+=("$*"); }

t_cleanup_run() {
	local i
	for ((i = ${#T_CLEANUP[@]} - 1; i >= 0; i--)); do
		eval "${T_CLEANUP[$i]}" >/dev/null 2>&1 || true
	done
	T_CLEANUP=()
}

t_exit() {
	t_cleanup_run
	[ "$T_FAILED" -eq 0 ]
}

# t_begin: set up the temp dir, a private pin and state dir, and traps.
t_begin() {
	T_TMP=$(mktemp -d /tmp/edge-test.XXXXXX)
	t_cleanup_add "rm -rf '$T_TMP'"
	trap 't_cleanup_run' EXIT
	trap 't_cleanup_run; exit 1' INT TERM
	if ! mountpoint -q /sys/fs/bpf 2>/dev/null; then
		mount -t bpf bpf /sys/fs/bpf 2>/dev/null || true
	fi
	export EDGE_PIN_DIR="/sys/fs/bpf/edge-test-$T_ID"
	export EDGE_STATE_DIR="$T_TMP/state"
	t_cleanup_add "rm -rf '$EDGE_PIN_DIR'"
}

t_ok() { echo "ok - $1"; }
t_fail() {
	echo "not ok - $1: ${2:-failed}"
	T_FAILED=1
}
t_skip() { echo "skip - $1: ${2:-skipped}"; }

# t_check NAME CMD...: ok when CMD succeeds.
t_check() {
	local name=$1
	shift
	if "$@" >"$T_TMP/out" 2>&1; then
		t_ok "$name"
	else
		t_fail "$name" "'$*' failed: $(tail -c 300 "$T_TMP/out" | tr '\n' ' ')"
	fi
}

# expect NAME RC FRAGMENT CMD...: run CMD, check its exit code and that its
# output (stdout and stderr) contains FRAGMENT (empty: anything) and no
# sanitizer report.
expect() {
	local name=$1 rc=$2 frag=$3 got
	shift 3
	"$@" >"$T_TMP/out" 2>&1
	got=$?
	if [ "$got" -ne "$rc" ]; then
		t_fail "$name" "exit $got, want $rc: $(head -c 300 "$T_TMP/out" | tr '\n' ' ')"
	elif [ -n "$frag" ] && ! grep -qF -- "$frag" "$T_TMP/out"; then
		t_fail "$name" "output lacks '$frag': $(head -c 300 "$T_TMP/out" | tr '\n' ' ')"
	elif grep -q "AddressSanitizer\|LeakSanitizer\|runtime error" "$T_TMP/out"; then
		t_fail "$name" "sanitizer: $(grep -m1 "Sanitizer\|runtime error" "$T_TMP/out")"
	else
		t_ok "$name"
	fi
}

# t_netns NAME: create a network namespace removed at exit.
t_netns() {
	ip netns add "$1" || return 1
	t_cleanup_add "ip netns pids '$1' 2>/dev/null | xargs -r kill -9; ip netns del '$1'"
}

# t_require_root: skip the whole file (exit 77) when not root.
t_require_root() {
	if [ "$(id -u)" -ne 0 ]; then
		t_skip "$(basename "$0")" "needs root"
		exit 77
	fi
}

# t_in NS CMD...: run CMD in namespace NS, seeing the host's bpffs.
t_in() {
	local ns=$1
	shift
	nsenter --net="/run/netns/$ns" "$@"
}
