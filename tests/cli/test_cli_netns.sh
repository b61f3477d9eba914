#!/usr/bin/env bash
# tests/cli/test_cli_netns.sh - edge on interfaces of several network
# namespaces, with real namespaces and veth pairs: the state records each
# interface with its namespace (inode and name); detach in one namespace
# never forgets, nor takes edge off, an interface of another (the same
# name in two namespaces being two interfaces), and says what it left;
# status shows each recorded interface as it is in its own namespace, and
# one whose namespace is gone as stale; detach --all, from any namespace,
# takes edge off every recorded interface in its namespace, forgets those
# of a namespace that is gone, and unpins the maps, the rules kept; a
# record an older edgectl wrote (no namespace) still loads.
#
#   B=build bash tests/cli/test_cli_netns.sh
#   EDGECTL=build/asan/edgectl bash tests/cli/test_cli_netns.sh
#
# Needs root (skips otherwise); every command in a namespace runs there
# through nsenter --net, so that it sees the host's bpffs.

# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"

t_require_root
t_begin
unset SSH_CONNECTION

if [ ! -x "$EDGECTL" ]; then
	t_fail "edgectl exists" "$EDGECTL not built"
	t_exit
	exit
fi
E=$EDGECTL
STATE=$EDGE_STATE_DIR/state.json
A="edge-nsa-$T_ID"
Bn="edge-nsb-$T_ID"
C="edge-nsc-$T_ID"

# veth NS NAME: a veth pair NAME0/NAME1, up, in namespace NS
veth() {
	ip -n "$1" link add "${2}0" type veth peer name "${2}1" &&
		ip -n "$1" link set "${2}0" up && ip -n "$1" link set "${2}1" up
}
# has_xdp NS IFACE: 0 when an XDP program is attached to IFACE in NS
has_xdp() { ip -n "$1" link show "$2" 2>/dev/null | grep -q 'xdp'; }
ino() { stat -L -c %i "/run/netns/$1"; }
# recorded NAME NS: how many records of NAME the state has in NS
recorded() {
	python3 - "$STATE" "$1" "$(ino "$2" 2>/dev/null || echo 0)" <<'PY'
import json, sys
st = json.load(open(sys.argv[1]))
print(sum(1 for i in st.get("interfaces", [])
          if i["name"] == sys.argv[2] and i.get("netns") == int(sys.argv[3])))
PY
}

for ns in "$A" "$Bn" "$C"; do
	if ! t_netns "$ns"; then
		t_fail "namespace $ns" "ip netns add failed"
		t_exit
		exit
	fi
done
# ena only in A; enb in A and in B; enc in C
if ! veth "$A" ena || ! veth "$A" enb || ! veth "$Bn" enb || ! veth "$C" enc; then
	t_fail "veth pairs" "ip link add failed"
	t_exit
	exit
fi

expect "attach ena0 in A" 0 "attached edge to ena0" t_in "$A" "$E" attach ena0 --mode skb
expect "attach enb0 in A" 0 "attached edge to enb0" t_in "$A" "$E" attach enb0 --mode skb
expect "attach enb0 in B (the same name, another interface)" 0 "attached edge to enb0" \
	t_in "$Bn" "$E" attach enb0 --mode skb
expect "attach enc0 in C" 0 "attached edge to enc0" t_in "$C" "$E" attach enc0 --mode skb
expect "a rule" 0 "added: block 198.51.100.0/24" "$E" ip block 198.51.100.0/24

if out=$(python3 - "$STATE" "$(ino "$A")" "$A" "$(ino "$Bn")" "$Bn" 2>&1 <<'PY'
import json, sys
st = json.load(open(sys.argv[1]))
got = sorted((i["name"], i["netns"], i["netns_name"]) for i in st["interfaces"]
             if i["name"] != "enc0")
a, b = int(sys.argv[2]), int(sys.argv[4])
want = sorted([("ena0", a, sys.argv[3]), ("enb0", a, sys.argv[3]), ("enb0", b, sys.argv[5])])
assert got == want, (got, want)
PY
); then
	t_ok "state.json records each interface with its namespace's inode and name"
else
	t_fail "state.json namespaces" "$out"
fi

# ena0 exists in A only: detach in B refuses, and forgets nothing
t_in "$Bn" "$E" detach ena0 >"$T_TMP/out" 2>&1
rc=$?
if [ "$rc" = 1 ] && grep -qF "no such interface: ena0 (here, in network namespace $Bn, inode $(ino "$Bn"))" "$T_TMP/out" &&
	grep -qF "ena0 in network namespace $A, inode $(ino "$A") is another interface: left attached and recorded" "$T_TMP/out" &&
	grep -qF "nsenter --net=/run/netns/$A edgectl detach ena0" "$T_TMP/out" &&
	[ "$(recorded ena0 "$A")" = 1 ] && has_xdp "$A" ena0; then
	t_ok "detach in B of A's interface: exit 1, says where it is, forgets nothing, edge stays on it"
else
	t_fail "detach in B of A's interface" "exit $rc: $(tr '\n' '|' <"$T_TMP/out"); recorded $(recorded ena0 "$A")"
fi
# the same from the host, which has no ena0 either
expect "detach in the host of A's interface: refused the same way" 1 \
	"ena0 in network namespace $A, inode $(ino "$A") is another interface" "$E" detach ena0
if [ "$(recorded ena0 "$A")" = 1 ] && has_xdp "$A" ena0; then
	t_ok "A's ena0 still recorded and attached"
else
	t_fail "A's ena0 after detaches elsewhere" "recorded $(recorded ena0 "$A")"
fi

# enb0 in both: detach in B takes B's off, A's stays
t_in "$Bn" "$E" detach enb0 >"$T_TMP/out" 2>&1
rc=$?
if [ "$rc" = 0 ] && grep -qx "detached edge from enb0" "$T_TMP/out" &&
	grep -qF "enb0 in network namespace $A, inode $(ino "$A") is another interface: left attached and recorded" "$T_TMP/out" &&
	! has_xdp "$Bn" enb0 && has_xdp "$A" enb0 &&
	[ "$(recorded enb0 "$Bn")" = 0 ] && [ "$(recorded enb0 "$A")" = 1 ]; then
	t_ok "detach enb0 in B: B's off and forgotten, A's enb0 attached and recorded"
else
	t_fail "detach enb0 in B" "exit $rc: $(tr '\n' '|' <"$T_TMP/out")"
fi

# status from the host and from B: each record as it is in its namespace
for where in host "$Bn"; do
	if [ "$where" = host ]; then run=("$E"); else run=(t_in "$where" "$E"); fi
	"${run[@]}" status >"$T_TMP/out" 2>&1
	if grep -Eq "^  ena0 +ifindex [0-9]+ +skb +prog [0-9]+ +attached \[network namespace $A, inode $(ino "$A")\]$" "$T_TMP/out" &&
		grep -Eq "^  enb0 +ifindex [0-9]+ +skb +prog [0-9]+ +attached \[network namespace $A, " "$T_TMP/out" &&
		grep -Eq "^  enc0 +.* attached \[network namespace $C, " "$T_TMP/out"; then
		t_ok "status in $where: A's and C's interfaces attached, each with its namespace"
	else
		t_fail "status in $where" "$(tr '\n' '|' <"$T_TMP/out")"
	fi
done
if "$E" status --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
i = {(x["name"], x["netns_name"]): x for x in d["interfaces"]}
a = i[("ena0", sys.argv[1])]
assert a["attached"] and a["netns"] == int(sys.argv[2]) and not a["netns_here"], a
' "$A" "$(ino "$A")" 2>"$T_TMP/err"; then
	t_ok "status --json: netns, netns_name, netns_here"
else
	t_fail "status --json namespaces" "$(tr '\n' ' ' <"$T_TMP/err")"
fi

# C goes away with its interface: status says so, detach --all forgets it
ip netns del "$C"
"$E" status >"$T_TMP/out" 2>&1
if grep -Eq "^  enc0 .*stale: its network namespace is gone \[network namespace $C, " "$T_TMP/out"; then
	t_ok "status: an interface whose namespace is gone is stale, named with it"
else
	t_fail "status: namespace gone" "$(grep enc0 "$T_TMP/out")"
fi

# detach --all from B: A's two interfaces, entering A; C's forgotten
t_in "$Bn" "$E" detach --all >"$T_TMP/out" 2>&1
rc=$?
if [ "$rc" = 0 ] &&
	grep -qx "detached edge from ena0 in network namespace $A, inode $(ino "$A")" "$T_TMP/out" &&
	grep -qx "detached edge from enb0 in network namespace $A, inode $(ino "$A")" "$T_TMP/out" &&
	grep -qF "forgot enc0 in network namespace $C" "$T_TMP/out" &&
	grep -q "that namespace is gone" "$T_TMP/out" &&
	grep -q "edge is attached nowhere now: maps unpinned" "$T_TMP/out" &&
	! has_xdp "$A" ena0 && ! has_xdp "$A" enb0 && [ ! -e "$EDGE_PIN_DIR" ] &&
	[ "$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["interfaces"]))' "$STATE")" = 0 ]; then
	t_ok "detach --all from B: A's interfaces off in A, C's forgotten, maps unpinned"
else
	t_fail "detach --all" "exit $rc: $(tr '\n' '|' <"$T_TMP/out"); pins: $(find "$EDGE_PIN_DIR" 2>&1 | head -3 | tr "\n" " ")"
fi
expect "the rules stay saved" 0 "198.51.100.0/24" "$E" ip list
expect "detach --all with nothing attached" 0 "edge is attached to no interface" "$E" detach --all
expect "detach --all takes no interface" 2 "--all takes no interface" "$E" detach --all ena0

# an interface edge runs on that the state does not record (its record
# lost) is found by detach --all in that namespace too
expect "attach ena0 in A again" 0 "attached edge to ena0" t_in "$A" "$E" attach ena0 --mode skb
python3 - "$STATE" <<'PY'
import json, sys
st = json.load(open(sys.argv[1]))
st["interfaces"] = []
json.dump(st, open(sys.argv[1], "w"))
PY
t_in "$A" "$E" detach --all >"$T_TMP/out" 2>&1
rc=$?
if [ "$rc" = 0 ] && grep -qx "detached edge from ena0 (not recorded in the state)" "$T_TMP/out" &&
	! has_xdp "$A" ena0 && [ ! -e "$EDGE_PIN_DIR" ]; then
	t_ok "detach --all in A: an unrecorded interface of A taken off too"
else
	t_fail "detach --all, unrecorded" "exit $rc: $(tr '\n' '|' <"$T_TMP/out")"
fi
# a record an older edgectl wrote (no netns) is this namespace's here
python3 - "$STATE" <<'PY'
import json, sys
st = json.load(open(sys.argv[1]))
st["interfaces"] = [{"name": "nosuch0", "ifindex": 99, "mode": "native",
                     "prog_id": 1, "attached_at": 1}]
json.dump(st, open(sys.argv[1], "w"))
PY
expect "an older state file's record: status shows it here, stale" 0 \
	"stale: interface is gone" "$E" status
expect "detach --all forgets it" 0 "forgot nosuch0, which no longer exists" "$E" detach --all
if grep -q "AddressSanitizer\|LeakSanitizer\|runtime error" "$T_TMP/out"; then
	t_fail "sanitizers" "$(grep -m1 'Sanitizer\|runtime error' "$T_TMP/out")"
fi

t_exit
