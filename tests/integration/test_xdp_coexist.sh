#!/bin/bash
# test_xdp_coexist.sh - edge shares an interface with another XDP program
# through libxdp's dispatcher, and says clearly why when it cannot.
#
# Another program (xdp-tools' "allow all" filter) is loaded first with
# xdp-loader. Where the kernel accepts libxdp's dispatcher, edge joins it:
# both programs run, edge's rules apply, and detaching edge leaves the
# other program in place. Where the kernel refuses the dispatcher (libxdp
# then attaches programs alone), attach must fail with a message naming
# the program in the way, and the sharing cases are skipped.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
t_require_root
t_begin

PROBE="$T_ROOT/tests/tools/netprobe.py"
OTHER=""
for f in /usr/lib/*/bpf/xdpfilt_alw_all.o /usr/lib/bpf/xdpfilt_alw_all.o; do
	[ -e "$f" ] && OTHER=$f && break
done
SRV="edge-cs-$T_ID"
CLI="edge-cc-$T_ID"
IF="vx$T_ID"

if [ -z "$OTHER" ] || ! command -v xdp-loader >/dev/null; then
	t_skip "coexistence" "xdp-tools (xdp-loader, xdpfilt_alw_all.o) not installed"
	t_exit
	exit $?
fi

setup_net() {
	t_netns "$SRV" && t_netns "$CLI" &&
		ip link add "$IF" netns "$SRV" type veth peer name "vy$T_ID" netns "$CLI" &&
		ip -n "$SRV" addr add 198.18.1.1/24 dev "$IF" &&
		ip -n "$CLI" addr add 198.18.1.2/24 dev "vy$T_ID" &&
		ip -n "$CLI" addr add 198.18.1.3/24 dev "vy$T_ID" &&
		ip -n "$SRV" link set "$IF" up && ip -n "$CLI" link set "vy$T_ID" up
}
if ! setup_net; then
	t_fail "namespace setup"
	t_exit
	exit 1
fi
ip netns exec "$SRV" python3 "$PROBE" serve 7070 >"$T_TMP/server.log" 2>&1 &
t_cleanup_add "kill $!"
for _ in $(seq 50); do grep -q ready "$T_TMP/server.log" && break; sleep 0.1; done

ctl() { t_in "$SRV" "$EDGECTL" "$@"; }
reach() { ip netns exec "$CLI" "$B/tools/probe" udp "$1" 198.18.1.1 7070 >/dev/null 2>&1; }

t_check "another program loaded with xdp-loader" \
	t_in "$SRV" xdp-loader load -m native "$IF" "$OTHER"
t_cleanup_add "nsenter --net=/run/netns/$SRV xdp-loader unload --all $IF"

if t_in "$SRV" xdp-loader status "$IF" 2>&1 | grep -q xdp_dispatcher; then
	t_check "edge joins the dispatcher" ctl attach "$IF" --mode native
	status=$(t_in "$SRV" xdp-loader status "$IF" 2>&1)
	if grep -q edge_xdp <<<"$status" && grep -q xdpfilt_alw_all <<<"$status"; then
		t_ok "both programs run on the interface"
	else
		t_fail "both programs run on the interface" "$status"
	fi
	t_check "block a source" ctl ip block 198.18.1.2
	if reach 198.18.1.2; then
		t_fail "edge's rule applies beside the other program"
	else
		t_ok "edge's rule applies beside the other program"
	fi
	if reach 198.18.1.3; then
		t_ok "edge passes the rest to the next program"
	else
		t_fail "edge passes the rest to the next program"
	fi
	t_check "detach edge" ctl detach "$IF"
	status=$(t_in "$SRV" xdp-loader status "$IF" 2>&1)
	if grep -q xdpfilt_alw_all <<<"$status" && ! grep -q edge_xdp <<<"$status"; then
		t_ok "detach leaves the other program in place"
	else
		t_fail "detach leaves the other program in place" "$status"
	fi
	if reach 198.18.1.2; then t_ok "traffic flows after detach"; else
		t_fail "traffic flows after detach"
	fi
else
	if ctl attach "$IF" >"$T_TMP/out" 2>&1; then
		t_fail "attach beside a program without dispatcher is refused" "$(cat "$T_TMP/out")"
		ctl detach "$IF" >/dev/null 2>&1
	elif grep -q "xdpfilt_alw_all" "$T_TMP/out" && grep -q "dispatcher" "$T_TMP/out"; then
		t_ok "attach beside a program without dispatcher is refused, naming it"
	else
		t_fail "attach beside a program without dispatcher is refused, naming it" "$(cat "$T_TMP/out")"
	fi
	t_skip "edge joins the dispatcher" \
		"libxdp's dispatcher does not load on $(uname -r) (the kernel refuses its freplace programs), so programs attach alone"
fi
t_exit
