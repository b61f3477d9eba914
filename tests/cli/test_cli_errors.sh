#!/usr/bin/env bash
# tests/cli/test_cli_errors.sh - edgectl's answers to bad input (exit code
# and message) and its happy paths for rules, policy and rate limits.
#
#   B=build bash tests/cli/test_cli_errors.sh
#   EDGECTL=build/asan/edgectl bash tests/cli/test_cli_errors.sh
#
# Needs root (skips otherwise). Creates a network namespace with a veth
# pair for the attach cases; everything is removed at exit.

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

# ---- usage errors: exit 2 ----------------------------------------------
expect "no command" 2 "no command given" "$E"
expect "unknown command" 2 "unknown command 'frobnicate'" "$E" frobnicate
expect "unknown global flag" 2 "unknown option '--bogus'" "$E" --bogus ip list
expect "unknown command flag" 2 "unknown option '--bogus'" "$E" ip list --bogus
# an endpoint that is not UTF-8 is a usage error, not "out of memory"
expect "upstream endpoint not UTF-8" 2 "bad endpoint" "$E" upstream drain $'\xff\xfe:80'

# global options: one "edgectl: " prefix, the general usage line
"$E" --bogus status >"$T_TMP/out" 2>&1
rc=$?
if [ "$rc" -eq 2 ] && [ "$(head -1 "$T_TMP/out")" = "edgectl: unknown option '--bogus'" ] &&
	grep -q "^usage: edgectl \[GLOBAL OPTIONS\] COMMAND" "$T_TMP/out"; then
	t_ok "global option error: one prefix, usage line"
else
	t_fail "global option error: one prefix, usage line" "exit $rc: $(tr '\n' '|' <"$T_TMP/out")"
fi
expect "global option without value" 2 "edgectl: option '--pin-dir' needs a value" "$E" --pin-dir
expect "global short option" 2 "edgectl: unknown option '-x'" "$E" -x status
expect "command option keeps its name" 2 "edgectl: ip list: unknown option '--bogus'" "$E" ip list --bogus
for args in "--bogus status" "--pin-dir" "-x ip list" "ip list --bogus" "ip block" "attach"; do
	# shellcheck disable=SC2086 # word splitting wanted
	if "$E" $args 2>&1 | grep -q "edgectl: edgectl:"; then
		t_fail "no doubled prefix: $args" "$("$E" $args 2>&1 | head -1)"
	else
		t_ok "no doubled prefix: $args"
	fi
done

expect "unknown short flag" 2 "unknown option '-x'" "$E" ip list -x
expect "usage hint on error" 2 "usage: edgectl ip list" "$E" ip list --bogus
expect "relative pin dir" 2 "absolute path" "$E" --pin-dir rel ip list
expect "ip without subcommand" 2 "missing subcommand" "$E" ip
expect "ip unknown subcommand" 2 "unknown subcommand 'nuke'" "$E" ip nuke
expect "ip block without CIDR" 2 "missing CIDR" "$E" ip block
expect "ip block extra argument" 2 "unexpected argument '10.0.0.0/8'" "$E" ip block 1.2.3.4 10.0.0.0/8
expect "ip del without CIDR" 2 "missing CIDR" "$E" ip del
expect "ip list extra argument" 2 "unexpected argument" "$E" ip list extra
expect "--ttl without value" 2 "needs a value" "$E" ip block 1.2.3.4 --ttl
expect "attach without interface" 2 "missing interface" "$E" attach
expect "detach without interface" 2 "missing interface" "$E" detach
expect "attach bad mode" 2 "unknown mode 'turbo'" "$E" attach lo --mode turbo
expect "attach name not UTF-8" 2 "interface name has invalid UTF-8" "$E" attach $'eth\xff'
expect "status extra argument" 2 "unexpected argument" "$E" status now
expect "ratelimit without subcommand" 2 "missing subcommand" "$E" ratelimit
expect "ratelimit set without rate" 2 "missing RATE" "$E" ratelimit set
expect "stats --count without --watch" 2 "need --watch" "$E" stats --count 2
expect "stats bad interval" 2 "bad --interval" "$E" stats --watch --interval 0
expect "stats bad count" 2 "bad --count" "$E" stats --watch --count -1
expect "policy unknown" 2 "unknown policy 'denylist'" "$E" ip policy denylist

# bad CIDRs: each case names what was wrong
while IFS='|' read -r cidr frag; do
	[ -n "$cidr$frag" ] || continue
	expect "bad CIDR '$cidr'" 2 "$frag" "$E" ip block "$cidr"
done <<'CASES'
|empty address
garbage|not an IPv4 or IPv6 address
1.2.3.4/33|prefix length 33 too long
2001:db8::/129|prefix length 129 too long
300.1.1.1|octet 300 out of range
1.2.3|needs 4 octets
1.2.3.4.5|only 4 octets
01.2.3.4|leading zero
1.2.3.4/08|leading zero
1.2.3.4/|missing prefix length
/24|missing address
1.2.3.4/+8|not a decimal number
1.2.3.4/-8|not a decimal number
1.2.3.4/x|not a decimal number
1.2.3.4/8/8|more than one '/'
 1.2.3.4|whitespace
1.2.3.4 /8|whitespace
2001:db8:::1|not a valid IPv6
fe80::1%eth0|zone ids
CASES
expect "bad CIDR for ip del" 2 "octet 256" "$E" ip del 1.2.3.256
expect "bad CIDR says usage" 2 "usage: edgectl ip block" "$E" ip block 1.2.3

# bad TTLs
while IFS='|' read -r ttl frag; do
	[ -n "$ttl$frag" ] || continue
	expect "bad TTL '$ttl'" 2 "$frag" "$E" ip block 10.0.0.0/8 --ttl "$ttl"
done <<'CASES'
|empty duration
0|longer than zero
0s|longer than zero
-5m|negative
abc|expected a number
10x|unknown unit 'x'
1h30|has no unit
30m1h|largest to smallest
366d|too long
99999999999999999999999999|too long
CASES

# bad comments
expect "comment too long" 2 "max 128" "$E" ip block 10.0.0.0/8 --comment "$(printf '%0129d' 0)"
expect "comment with control char" 2 "control character" "$E" ip block 10.0.0.0/8 --comment "$(printf 'a\tb')"
expect "comment with invalid UTF-8" 2 "invalid UTF-8 at byte 4" "$E" ip block 10.0.0.0/8 --comment $'bad\xff\xfe'
expect "comment with a C1 control" 2 "control character (U+009B)" "$E" ip block 10.0.0.0/8 --comment $'a\xc2\x9b'

# bad ports
while IFS='|' read -r ports frag; do
	[ -n "$ports$frag" ] || continue
	expect "bad ports '$ports'" 2 "$frag" "$E" ip policy allowlist --ports "$ports"
done <<'CASES'
|empty port list
0|out of range
65536|out of range
80,|empty item
80,,443|empty item
http|not a port number
080|leading zero
90-80|backwards
80-|empty port number
CASES
expect "ports without policy" 2 "need a policy" "$E" ip policy --ports 80

# bad rates and bursts
while IFS='|' read -r rate frag; do
	[ -n "$rate$frag" ] || continue
	expect "bad rate '$rate'" 2 "$frag" "$E" ratelimit set "$rate"
done <<'CASES'
0|at least 1
abc|not a number
10/h|unknown period
6000000001/m|too high
0/m|at least 1
100000001|too high
1e5|not a number
CASES
expect "bad rate '-5'" 2 "unknown option '-5'" "$E" ratelimit set -5
expect "bad burst" 2 "bad --burst" "$E" ratelimit set 100 --burst 0
expect "burst too large" 2 "too large" "$E" ratelimit set 100 --burst 100000001
expect "ratelimit off extra" 2 "unexpected argument" "$E" ratelimit off now

# ---- help and version -------------------------------------------------
expect "help" 0 "usage: edgectl" "$E" help
expect "--help" 0 "ip policy" "$E" --help
expect "--version" 0 "edgectl " "$E" --version
expect "command --help" 0 "usage: edgectl ip block" "$E" ip block --help

# ---- daemon commands ---------------------------------------------------
expect "routes without daemon" 1 "edged is not running (no control socket at /run/edge/edged.sock)" "$E" routes
expect "routes --json without daemon" 1 "edged is not running" "$E" routes --json
expect "reload without daemon" 1 "edged is not running" "$E" reload
expect "routes extra argument" 2 "routes: unexpected argument 'x'" "$E" routes x
expect "reload has no --json" 2 "reload: unknown option '--json'" "$E" reload --json
expect "splice: a mode it does not know" 2 "splice: 'bogus' is not on, off, auto or sockmap" "$E" splice bogus
expect "splice: two modes" 2 "splice: unexpected argument 'off'" "$E" splice on off
expect "splice without daemon" 1 "edged is not running" "$E" splice auto

# ---- environment failures: exit 1 ---------------------------------------
expect "not root" 1 "this command needs root (CAP_BPF and CAP_NET_ADMIN)" \
	setpriv --reuid=65534 --regid=65534 --clear-groups "$E" ip block 10.0.0.0/8
expect "not root (list)" 1 "needs root" \
	setpriv --reuid=65534 --regid=65534 --clear-groups "$E" ip list
expect "not root (attach)" 1 "needs root" \
	setpriv --reuid=65534 --regid=65534 --clear-groups "$E" attach lo
expect "no bpffs (ip block)" 1 "mount -t bpf bpf /sys/fs/bpf" \
	env EDGE_PIN_DIR="$T_TMP/nobpffs/edge" "$E" ip block 10.0.0.0/8
expect "no bpffs (attach)" 1 "no bpffs at" \
	env EDGE_PIN_DIR="$T_TMP/nobpffs/edge" "$E" attach lo
expect "no bpffs (flag)" 1 "no bpffs at" "$E" --pin-dir "$T_TMP/x" ip del 10.0.0.0/8
expect "unknown interface" 1 "no such interface: edgenope0" "$E" attach edgenope0
expect "detach unknown interface" 1 "no such interface: edgenope0" "$E" detach edgenope0
expect "detach not attached" 1 "edge is not attached to lo" "$E" detach lo
expect "stats not attached" 1 "edge is not attached" "$E" stats

# ---- rules: happy paths -------------------------------------------------
expect "list empty" 0 "no rules" "$E" ip list
expect "block" 0 "added: block 203.0.113.0/24" "$E" ip block 203.0.113.0/24 --comment "abuse"
expect "block not attached note" 0 "edge is not attached; rule saved and applied at attach" "$E" ip block 198.51.100.7
expect "host bits normalised" 0 "has host bits set; using 10.0.0.0/8" "$E" ip block 10.1.2.3/8 --ttl 10m
expect "mapped IPv6 normalised" 0 "IPv4-mapped" "$E" ip allow ::ffff:10.1.2.3
expect "IPv6 rule" 0 "added: block 2001:db8::/32" "$E" ip block 2001:db8::/32 --ttl 1h30m
expect "update says updated" 0 "updated: allow 203.0.113.0/24" "$E" ip allow 203.0.113.0/24 --comment "now fine"
expect "list shows rules" 0 "203.0.113.0/24" "$E" ip list
if "$E" ip list | grep -Eq '^block +10\.0\.0\.0/8 +(10m|9m[0-9]+s) '; then
	t_ok "list shows ttl"
else
	t_fail "list shows ttl" "$("$E" ip list | tr '\n' ' ')"
fi
expect "list shows comment" 0 "now fine" "$E" ip list
if "$E" ip list --json | python3 -c '
import json, sys
rules = json.load(sys.stdin)
assert isinstance(rules, list) and len(rules) == 5, rules
keys = {"cidr", "family", "action", "expires_at", "ttl_remaining", "hits", "comment", "id"}
for r in rules:
    assert set(r) == keys, r
by = {r["cidr"]: r for r in rules}
assert by["10.0.0.0/8"]["action"] == "block"
assert 590 <= by["10.0.0.0/8"]["ttl_remaining"] <= 600
assert by["10.1.2.3/32"]["action"] == "allow" and by["10.1.2.3/32"]["expires_at"] is None
assert by["2001:db8::/32"]["family"] == "ipv6"
assert by["203.0.113.0/24"]["comment"] == "now fine"
assert len({r["id"] for r in rules}) == 5
' 2>"$T_TMP/err"; then
	t_ok "list --json"
else
	t_fail "list --json" "$(tr '\n' ' ' <"$T_TMP/err")"
fi
expect "del" 0 "deleted: block 198.51.100.7/32" "$E" ip del 198.51.100.7
expect "del missing rule" 1 "no rule for 198.51.100.7/32" "$E" ip del 198.51.100.7
expect "state file mode 0600" 0 "600" stat -c %a "$EDGE_STATE_DIR/state.json"
expect "state dir mode 0700" 0 "700" stat -c %a "$EDGE_STATE_DIR"

# ---- policy and the SSH lockout check -----------------------------------
expect "policy show" 0 "policy: blocklist" "$E" ip policy
expect "policy show --json" 0 '"ports": "80,443"' "$E" ip policy --json
export SSH_CONNECTION="192.0.2.10 50022 192.0.2.1 22"
expect "allowlist guarding ssh port refused" 1 "--force" "$E" ip policy allowlist --ports 22,80,443
expect "refusal explains" 1 "port 22 is guarded" "$E" ip policy allowlist --ports 22,80,443
expect "allowlist not guarding ssh ok" 0 "policy: allowlist (guarded ports: 80,443)" "$E" ip policy allowlist
expect "block own ssh client refused" 1 "refusing to block" "$E" ip block 192.0.2.0/24
expect "block own ssh client --force" 0 "added: block 192.0.2.0/24" "$E" ip block 192.0.2.0/24 --force
expect "del block rule ok" 0 "deleted" "$E" ip del 192.0.2.0/24
expect "allow own client" 0 "added: allow 192.0.2.10/32" "$E" ip allow 192.0.2.10 --ttl 5m
expect "allowlist with allow rule ok" 0 "expires in" "$E" ip policy allowlist --ports 22,80
expect "del allow rule cutting ssh refused" 1 "--force" "$E" ip del 192.0.2.10
expect "del allow rule --force" 0 "deleted" "$E" ip del 192.0.2.10 --force
expect "back to blocklist" 0 "policy: blocklist" "$E" ip policy blocklist
expect "allowlist --force" 0 "policy: allowlist" "$E" ip policy allowlist --ports 22 --force
expect "blocklist again" 0 "policy: blocklist" "$E" ip policy blocklist --ports 80,443
export SSH_CONNECTION="2001:db8:1::5 50022 2001:db8:1::1 22"
expect "ipv6 ssh client blocked refused" 1 "refusing" "$E" ip block 2001:db8:1::/48
unset SSH_CONNECTION

# ---- rate limits ---------------------------------------------------------
expect "ratelimit set syn" 0 "new connections (TCP SYN, QUIC Initial): 100/s per source, burst 100" "$E" ratelimit set 100
expect "ratelimit set per minute" 0 "10/s per source, burst 50" "$E" ratelimit set 600/m --burst 50
expect "ratelimit set 1/m" 0 "1/m per source, burst 1" "$E" ratelimit set 1/m
expect "ratelimit set 90/m" 0 "90/m per source, burst 2" "$E" ratelimit set 90/m
expect "ratelimit set packets" 0 "packets: 5000/s" "$E" ratelimit set 5000/s --packets
expect "ratelimit off syn" 0 "off for new connections (TCP SYN, QUIC Initial)" "$E" ratelimit off --syn
expect "ratelimit off both" 0 "new connections and packets" "$E" ratelimit off
expect "status" 0 "policy:     blocklist" "$E" status
if "$E" status --json | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["policy"]=="blocklist" and d["rules"]["total"]==4, d' 2>"$T_TMP/err"; then
	t_ok "status --json"
else
	t_fail "status --json" "$(tr '\n' ' ' <"$T_TMP/err")"
fi

# ---- attach: twice, detach, rules restored --------------------------------
NS="edge-cli-$T_ID"
if t_netns "$NS" && ip -n "$NS" link add ecli0 type veth peer name ecli1 &&
	ip -n "$NS" link set ecli0 up && ip -n "$NS" link set ecli1 up; then
	expect "attach" 0 "attached edge to ecli0" t_in "$NS" "$E" attach ecli0
	expect "attach twice" 1 "edge is already attached to ecli0 (native mode)" t_in "$NS" "$E" attach ecli0
	expect "attach skb" 0 "skb mode" t_in "$NS" "$E" attach ecli1 --mode skb
	expect "rules restored to the map" 0 "" bpftool map lookup pinned "$EDGE_PIN_DIR/edge_rules_v4" key 24 0 0 0 203 0 113 0
	expect "block while attached" 0 "added: block 198.51.100.0/24" t_in "$NS" "$E" ip block 198.51.100.0/24
	expect "rule in the map at once" 0 "" bpftool map lookup pinned "$EDGE_PIN_DIR/edge_rules_v4" key 24 0 0 0 198 51 100 0
	expect "status shows interface" 0 "ecli0" t_in "$NS" "$E" status
	expect "stats" 0 "dropped_rule" t_in "$NS" "$E" stats
	expect "stats --json" 0 '"counters"' t_in "$NS" "$E" stats --json
	expect "stats --watch --count" 0 "PER SEC" t_in "$NS" "$E" stats --watch --interval 0.2 --count 2
	expect "detach" 0 "detached edge from ecli0" t_in "$NS" "$E" detach ecli0
	expect "detach twice" 1 "edge is not attached to ecli0" t_in "$NS" "$E" detach ecli0
	expect "pins kept while ecli1 attached" 0 "" test -e "$EDGE_PIN_DIR/edge_rules_v4"
	expect "last detach unpins" 0 "maps unpinned" t_in "$NS" "$E" detach ecli1
	expect "pin dir removed" 1 "" test -e "$EDGE_PIN_DIR"
	if ip -n "$NS" link show ecli0 | grep -q xdp; then
		t_fail "no program left behind" "$(ip -n "$NS" link show ecli0)"
	else
		t_ok "no program left behind"
	fi
	expect "rules survive detach" 0 "198.51.100.0/24" t_in "$NS" "$E" ip list
	# incompatible pins left by "another version"
	mkdir -p "$EDGE_PIN_DIR"
	bpftool map create "$EDGE_PIN_DIR/edge_counters" type array key 4 value 8 entries 1 name edge_counters
	expect "incomplete pins" 1 "edge_rules_v4 is missing" t_in "$NS" "$E" ip block 10.20.0.0/16
	expect "incomplete pins attach" 1 "incompatible" t_in "$NS" "$E" attach ecli0
	for m in edge_rules_v4 edge_rules_v6 edge_rule_hits edge_config edge_ports edge_ratelimit; do
		bpftool map create "$EDGE_PIN_DIR/$m" type hash key 4 value 8 entries 1 name "$m"
	done
	expect "incompatible pins" 1 "is incompatible with this edgectl" t_in "$NS" "$E" ip block 10.20.0.0/16
	expect "incompatible pins attach" 1 "incompatible" t_in "$NS" "$E" attach ecli0
	if ip -n "$NS" link show ecli0 | grep -q xdp; then
		t_fail "failed attach leaves nothing" "$(ip -n "$NS" link show ecli0)"
	else
		t_ok "failed attach leaves nothing"
	fi
	rm -rf "$EDGE_PIN_DIR"
else
	t_skip "attach cases" "cannot create a veth pair in a namespace"
fi

# ---- corrupt state ------------------------------------------------------
cp "$EDGE_STATE_DIR/state.json" "$T_TMP/state.good"
echo '{"version": 1, "rules": [' >"$EDGE_STATE_DIR/state.json"
expect "corrupt state (list)" 1 "$EDGE_STATE_DIR/state.json is corrupt" "$E" ip list
expect "corrupt state (block)" 1 "is corrupt" "$E" ip block 10.30.0.0/16
expect "corrupt state kept" 0 '"rules": [' cat "$EDGE_STATE_DIR/state.json"
echo '{"version": 99, "policy": "blocklist", "ports": "80", "rules": []}' >"$EDGE_STATE_DIR/state.json"
expect "future state version" 1 "unsupported version 99" "$E" ip list
cp "$T_TMP/state.good" "$EDGE_STATE_DIR/state.json"
expect "good state again" 0 "203.0.113.0/24" "$E" ip list

# ---- expiry ---------------------------------------------------------------
python3 - "$EDGE_STATE_DIR/state.json" <<'PY'
import json, sys, time
p = sys.argv[1]
d = json.load(open(p))
d["rules"].append({"id": 999, "cidr": "192.0.2.99/32", "action": "block",
                   "expires_at": int(time.time()) - 5, "comment": "old"})
json.dump(d, open(p, "w"))
PY
if "$E" ip list | grep -q 192.0.2.99; then
	t_fail "expired rule hidden" "still listed"
else
	t_ok "expired rule hidden"
fi
expect "expired rule pruned" 0 "added" "$E" ip block 10.40.0.0/16
if grep -q 192.0.2.99 "$EDGE_STATE_DIR/state.json"; then
	t_fail "expired rule removed from state" "still saved"
else
	t_ok "expired rule removed from state"
fi

t_exit
