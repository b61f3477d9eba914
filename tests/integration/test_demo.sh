#!/bin/bash
# test_demo.sh - the README's `make demo` does what the README says:
# scripts/demo (run against the build under test) exits 0 with the
# allowed client proxied round robin over both backends, the blocked one
# dropped by XDP, edged's JSON errors, the control-plane act (a site
# routed by one INSERT, a database rule dropping a client at XDP and its
# delete letting it back, analytics rows in request_events, this host in
# edgectl --pg hosts at the latest change version), and leaves no
# namespace, pin or process behind. Needs root and PostgreSQL 15.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
t_require_root
t_begin
B=${B:-$T_ROOT/build}
if [ ! -x /usr/lib/postgresql/15/bin/initdb ] || ! id postgres >/dev/null 2>&1; then
	t_skip "$(basename "$0")" "needs PostgreSQL 15"
	exit 77
fi
out="$T_TMP/demo.log"
EDGECTL="$B/edgectl" EDGED="$B/edged" timeout 300 "$T_ROOT/scripts/demo" >"$out" 2>&1
rc=$?
if [ "$rc" = 0 ]; then
	t_ok "scripts/demo exits 0"
else
	t_fail "scripts/demo exits 0" "exit $rc: $(tail -5 "$out")"
fi
if grep -q "hello from backend 1" "$out" && grep -q "hello from backend 2" "$out"; then
	t_ok "the allowed client proxied over both backends"
else
	t_fail "round robin over both backends" "$(grep -m3 hello "$out")"
fi
if grep -Eq "shop.demo.test answered 200 .* [0-9.]+ ms after its COMMIT" "$out"; then
	t_ok "a site made routable by one INSERT: $(grep -m1 -o '[0-9.]* ms after its COMMIT' "$out")"
else
	t_fail "a site made routable by one INSERT" "$(grep -m2 'shop.demo' "$out")"
fi
if grep -q 'deleted: block 198.18.0.3/32' "$out" &&
	grep -Eq 'block +198\.18\.0\.3/32 .*demo: from the database' "$out"; then
	t_ok "a database rule listed by edgectl --pg ip list, then deleted"
else
	t_fail "the database rule" "$(grep -m3 '198.18.0.3/32' "$out")"
fi
if grep -Eq '^ shop.demo.test +\| +200 \| ok +\| +2 ' "$out"; then
	t_ok "analytics rows queried from request_events"
else
	t_fail "analytics rows" "$(grep -A6 'request_events' "$out" | tail -6)"
fi
if grep -Eq '^demo-host .* up ' "$out" && grep -q ', 0 behind' "$out"; then
	t_ok "edgectl --pg hosts: the host up, none behind"
else
	t_fail "edgectl --pg hosts" "$(grep -A3 'HOST ' "$out")"
fi
left=""
ip netns list | grep -q '^edge-demo-' && left="$left namespaces"
[ -e /sys/fs/bpf/edge-demo ] && left="$left pins"
pgrep -f 'edge-demo\.' >/dev/null && left="$left processes"
if [ -z "$left" ]; then
	t_ok "nothing left behind"
else
	t_fail "nothing left behind" "left:$left"
fi
t_exit
