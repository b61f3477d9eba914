#!/usr/bin/env bash
# tests/cli/test_cli_atomic.sh - every edgectl change is all or nothing
# between the state file and the pinned maps: text the state cannot store
# is refused before anything is touched, a save that fails leaves the maps
# as they were, and attach removes map entries the state does not hold.
#
#   B=build bash tests/cli/test_cli_atomic.sh
#   EDGECTL=build/asan/edgectl bash tests/cli/test_cli_atomic.sh
#
# Needs root (skips otherwise). Creates a network namespace with a veth
# pair; the kernel side is read with bpftool, not through edgectl, since
# the point is what the maps hold. A failing rename is made with a bind
# mount over state.json in a private mount namespace (rename onto a mount
# point fails with EBUSY, also for root, on any filesystem).

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
V4="$EDGE_PIN_DIR/edge_rules_v4"
STATE="$EDGE_STATE_DIR/state.json"

NS="edge-atomic-$T_ID"
if ! { t_netns "$NS" && ip -n "$NS" link add ecla0 type veth peer name ecla1 &&
	ip -n "$NS" link add ecla2 type veth peer name ecla3 &&
	for i in 0 1 2 3; do ip -n "$NS" link set "ecla$i" up || exit 1; done; }; then
	t_skip "atomic cases" "cannot create a veth pair in a namespace"
	t_exit
	exit
fi

# v4_entries: every entry of edge_rules_v4 as "a.b.c.d/len action id",
# sorted; read from the kernel with bpftool.
v4_entries() {
	bpftool -j map dump pinned "$V4" | python3 -c '
import json, sys
for e in json.load(sys.stdin):
    k = [int(x, 16) for x in e["key"]]
    v = [int(x, 16) for x in e["value"]]
    plen = k[0] | k[1] << 8 | k[2] << 16 | k[3] << 24
    rid = v[8] | v[9] << 8 | v[10] << 16 | v[11] << 24
    act = {1: "block", 2: "allow"}.get(v[12], "?%d" % v[12])
    print("%d.%d.%d.%d/%d %s %d" % (k[4], k[5], k[6], k[7], plen, act, rid))
' | sort
}

# maps_are NAME WANT: the v4 map holds exactly WANT (lines joined by ';').
maps_are() {
	local got
	got=$(v4_entries | tr '\n' ';')
	if [ "$got" = "$2" ]; then
		t_ok "$1"
	else
		t_fail "$1" "edge_rules_v4 holds '$got', want '$2'"
	fi
}

# entry_is NAME CIDR WANT: edge_rules_v4's entry for CIDR is WANT
# ("block ID", "allow ID", or "none").
entry_is() {
	local got
	got=$(v4_entries | awk -v c="$2" '$1 == c { print $2, $3 }')
	if [ "${got:-none}" = "$3" ]; then
		t_ok "$1"
	else
		t_fail "$1" "entry for $2 is '${got:-none}', want '$3'"
	fi
}

# config_dump: edge_config and the guarded ports as the kernel has them.
config_dump() {
	bpftool map dump pinned "$EDGE_PIN_DIR/edge_config"
	bpftool map lookup pinned "$EDGE_PIN_DIR/edge_ports" key 22 0 0 0
}

# with_bound CMD...: run CMD in the namespace with state.json bind-mounted
# over by a copy of itself, so that reading works and renaming over it
# fails (EBUSY). The mount lives in a private mount namespace.
with_bound() {
	cp "$STATE" "$T_TMP/bound.json"
	# shellcheck disable=SC2016 # expanded by the inner sh
	t_in "$NS" unshare -m sh -c 'mount --bind "$1" "$2" && shift 2 && exec "$@"' \
		sh "$T_TMP/bound.json" "$STATE" "$@"
}

# plant KEY VALUE: write an entry into edge_rules_v4 behind edgectl's back
# (bpf/edge_maps.h: key {u32 prefixlen, u8 addr[4]}, value struct
# edge_rule {u64 expires_ns, u32 id, u8 action, u8 prefixlen, u8 pad[2]},
# little-endian).
plant() {
	# shellcheck disable=SC2086 # word splitting wanted
	bpftool map update pinned "$V4" key hex $1 value hex $2
}

expect "attach" 0 "attached edge to ecla0" t_in "$NS" "$E" attach ecla0
maps_are "maps empty at first" ""

# ---- text the state file cannot store: exit 2, nothing touched ----------
expect "invalid UTF-8 comment refused" 2 "invalid UTF-8 at byte 4" \
	t_in "$NS" "$E" ip block 10.9.0.0/16 --comment $'bad\xff\xfe'
expect "refusal is not 'out of memory'" 2 "0xff never appears in UTF-8" \
	t_in "$NS" "$E" ip block 10.9.0.0/16 --comment $'bad\xff\xfe'
maps_are "refused rule not in the map" ""
expect "refused rule not listed" 0 "no rules" t_in "$NS" "$E" ip list
while IFS='|' read -r text frag; do
	[ -n "$text" ] || continue
	# shellcheck disable=SC2059 # the cases are printf escapes
	expect "comment refused: $frag" 2 "$frag" \
		t_in "$NS" "$E" ip allow 10.8.0.0/16 --comment "$(printf "$text")"
done <<'CASES'
a\033[31m|control character (U+001B) at byte 2
a\302\233b|control character (U+009B) at byte 2
x\300\257|byte 2: 0xc0 starts an overlong encoding
\340\200\257|byte 1: an overlong encoding
\355\240\200|byte 1: a UTF-16 surrogate
\364\220\200\200|byte 1: a code point above U+10FFFF
caf\303|byte 4: truncated sequence
\200|byte 1: 0x80 is a continuation byte
CASES
maps_are "no refused comment reached the map" ""
if [ -e "$STATE" ] && grep -q '10\.[89]\.0\.0' "$STATE"; then
	t_fail "no refused comment reached the state" "$(cat "$STATE")"
else
	t_ok "no refused comment reached the state"
fi
# what the other cases build on; on a broken edgectl, start clean
t_in "$NS" "$E" ip del 10.8.0.0/16 >/dev/null 2>&1
t_in "$NS" "$E" ip del 10.9.0.0/16 >/dev/null 2>&1

expect "valid UTF-8 comment accepted" 0 'added: block 10.9.0.0/16 "café ✓"' \
	t_in "$NS" "$E" ip block 10.9.0.0/16 --comment "café ✓"
expect "valid UTF-8 comment listed" 0 "café ✓" t_in "$NS" "$E" ip list
if t_in "$NS" "$E" ip list --json | python3 -c '
import json, sys
r = json.load(sys.stdin)
assert [x["comment"] for x in r] == ["café ✓"], r' 2>"$T_TMP/err"; then
	t_ok "valid UTF-8 comment in --json"
else
	t_fail "valid UTF-8 comment in --json" "$(tr '\n' ' ' <"$T_TMP/err")"
fi
ID=$(v4_entries | awk '$1 == "10.9.0.0/16" { print $3 }')
entry_is "accepted rule in the map" 10.9.0.0/16 "block ${ID:-?}"

# ---- attach reconciles the maps with the state --------------------------
# 10.99.0.0/16 blocked with id 8191 (the host's own range, below
# EDGE_LOCAL_RULES_MAX): a rule nothing can list or delete
plant "10 00 00 00 0a 63 00 00" "00 00 00 00 00 00 00 00 ff 1f 00 00 01 10 00 00"
entry_is "planted entry in the map" 10.99.0.0/16 "block 8191"
if t_in "$NS" "$E" ip list | grep -q 10.99; then
	t_fail "planted entry not in the state" "listed"
else
	t_ok "planted entry not in the state"
fi
expect "attach of a second interface reconciles" 0 \
	"removed 1 map entry that the state did not hold" t_in "$NS" "$E" attach ecla1
entry_is "attach removed the planted entry" 10.99.0.0/16 none

# again, with the state's own entry turned into an allow, and an interface
# edge is attached to already
plant "10 00 00 00 0a 63 00 00" "00 00 00 00 00 00 00 00 ff 1f 00 00 01 10 00 00"
plant "10 00 00 00 0a 09 00 00" "00 00 00 00 00 00 00 00 00 00 00 00 02 10 00 00"
entry_is "altered entry in the map" 10.9.0.0/16 "allow 0"
expect "attach of an attached interface: still refused" 1 \
	"edge is already attached to ecla0 (native mode)" t_in "$NS" "$E" attach ecla0
entry_is "and the planted entry went all the same" 10.99.0.0/16 none
entry_is "and the altered entry was corrected" 10.9.0.0/16 "block ${ID:-?}"
plant "10 00 00 00 0a 63 00 00" "00 00 00 00 00 00 00 00 ff 1f 00 00 01 10 00 00"
plant "10 00 00 00 0a 09 00 00" "00 00 00 00 00 00 00 00 00 00 00 00 02 10 00 00"
expect "attach says what it fixed" 1 \
	"removed 1 map entry that the state did not hold, corrected 1 map entry that differed from the state" \
	t_in "$NS" "$E" attach ecla0
bpftool map delete pinned "$V4" key hex 10 00 00 00 0a 09 00 00
entry_is "entry deleted behind edgectl's back" 10.9.0.0/16 none
expect "attach restores a missing rule" 1 "restored 1 rule missing from the maps" \
	t_in "$NS" "$E" attach ecla1
entry_is "and the rule is back" 10.9.0.0/16 "block ${ID:-?}"
# an entry of the database's range (id 16383: edged put it there from
# the database's ip_rules) is edged's to keep or remove, not attach's
plant "10 00 00 00 0a 58 00 00" "00 00 00 00 00 00 00 00 ff 3f 00 00 01 10 00 00"
expect "attach leaves the database's entries" 1 "" t_in "$NS" "$E" attach ecla1
entry_is "the database's entry stays" 10.88.0.0/16 "block 16383"
bpftool map delete pinned "$V4" key hex 10 00 00 00 0a 58 00 00
expect "a clean attach says nothing about the maps" 1 "" t_in "$NS" "$E" attach ecla1
if grep -q "did not match" "$T_TMP/out"; then
	t_fail "no reconcile note when the maps match" "$(tr '\n' ' ' <"$T_TMP/out")"
else
	t_ok "no reconcile note when the maps match"
fi

# ---- the state cannot be put in place: the maps stay as they were -------
before_cfg=$(config_dump)
expect "block with a failing rename" 1 "nothing was changed" \
	with_bound "$E" ip block 10.10.0.0/16
expect "failing rename says why" 1 "cannot replace $STATE: Device or resource busy" \
	with_bound "$E" ip block 10.10.0.0/16
entry_is "failed block left the map alone" 10.10.0.0/16 none
expect "update with a failing rename" 1 "nothing was changed" \
	with_bound "$E" ip allow 10.9.0.0/16
entry_is "failed update left the entry alone" 10.9.0.0/16 "block ${ID:-?}"
expect "delete with a failing rename" 1 "nothing was changed" \
	with_bound "$E" ip del 10.9.0.0/16
entry_is "failed delete left the entry" 10.9.0.0/16 "block ${ID:-?}"
expect "policy with a failing rename" 1 "nothing was changed" \
	with_bound "$E" ip policy allowlist --ports 22
expect "ratelimit with a failing rename" 1 "nothing was changed" \
	with_bound "$E" ratelimit set 100 --packets
if [ "$(config_dump)" = "$before_cfg" ]; then
	t_ok "failed policy and ratelimit left the config maps alone"
else
	t_fail "failed policy and ratelimit left the config maps alone" \
		"$(diff <(echo "$before_cfg") <(config_dump) | tr '\n' ' ')"
fi
expect "state unchanged after failed saves" 0 "policy:     blocklist" t_in "$NS" "$E" status
if [ -e "$STATE.tmp" ]; then
	t_fail "no temporary file left" "$(ls -l "$STATE.tmp")"
else
	t_ok "no temporary file left"
fi

# ---- the new state cannot even be written: nothing touched --------------
rm -f "$STATE.tmp"
mkdir -p "$STATE.tmp/x"
expect "block with an unwritable temporary file" 1 "cannot write $STATE.tmp" \
	t_in "$NS" "$E" ip block 10.11.0.0/16
entry_is "failed prepare left the map alone" 10.11.0.0/16 none
expect "detach with an unwritable state" 1 "edge stays attached to ecla0" \
	t_in "$NS" "$E" detach ecla0
if ip -n "$NS" link show ecla0 | grep -q xdp; then
	t_ok "failed detach left edge on ecla0"
else
	t_fail "failed detach left edge on ecla0" "$(ip -n "$NS" link show ecla0)"
fi
rm -rf "$STATE.tmp"

# ---- attach whose state cannot be saved takes the program off again ------
expect "attach with a failing rename" 1 "edge was taken off ecla2 again" \
	with_bound "$E" attach ecla2
if ip -n "$NS" link show ecla2 | grep -q xdp; then
	t_fail "failed attach left nothing on ecla2" "$(ip -n "$NS" link show ecla2)"
else
	t_ok "failed attach left nothing on ecla2"
fi
entry_is "failed attach left the map alone" 10.9.0.0/16 "block ${ID:-?}"

# ---- and the ordinary path still works ------------------------------------
expect "delete" 0 "deleted: block 10.9.0.0/16" t_in "$NS" "$E" ip del 10.9.0.0/16
maps_are "deleted from the map" ""

# ---- the maps refuse the change: it is not saved either -------------------
# a frozen map takes no writes from userspace (this pin set goes at the end)
if bpftool map freeze pinned "$EDGE_PIN_DIR/edge_rule_hits" 2>/dev/null; then
	expect "block the maps refuse" 1 \
		"cannot write the rule to $EDGE_PIN_DIR: Operation not permitted; nothing was changed" \
		t_in "$NS" "$E" ip block 10.12.0.0/16
	entry_is "refused block not in the map" 10.12.0.0/16 none
	expect "refused block not saved" 0 "no rules" t_in "$NS" "$E" ip list
else
	t_skip "maps refusing a change" "bpftool map freeze failed"
fi
for i in 2 1 0; do
	if ip -n "$NS" link show "ecla$i" | grep -q xdp; then
		expect "detach ecla$i" 0 "detached edge from ecla$i" t_in "$NS" "$E" detach "ecla$i"
	fi
done
expect "last detach unpinned the maps" 1 "" test -e "$V4"

t_exit
