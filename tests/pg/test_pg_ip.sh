#!/usr/bin/env bash
# tests/pg/test_pg_ip.sh - edgectl --pg ip block|allow|del|list on the
# database's ip_rules, against a real PostgreSQL 15: the round trip, a
# replace in place (same id), the TTL as expires_at in the database's
# time, project rules beside global ones, one change version per command,
# every invalid input refused with exit 2 before anything is written, hit
# counts summed from edge_hosts.rule_hits, expired rules hidden, the SSH
# lockout check on global rules with the local state's rules and policy
# (a local rule for the same prefix wins), EDGE_PG and --pg, no root
# needed, and the local commands untouched without --pg.
#
#   B=build bash tests/pg/test_pg_ip.sh
#
# Needs root (PostgreSQL runs as the postgres user) and PostgreSQL 15;
# skips otherwise.

# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/lib_pg.sh
. "$(dirname "$0")/../lib_pg.sh"
# shellcheck source=tests/pg/lib_pgtest.sh
. "$(dirname "$0")/lib_pgtest.sh"

pgt_begin
E=$EDGECTL
pexpect "db migrate" 0 "up to date" db migrate
pg_sql "INSERT INTO projects (id) VALUES ('shop'), ('blog')" >/dev/null

seq_now() { pg_val "SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM edge_change_seq"; }
# row CIDR [PROJECT]: "id|action|expires_in_s|comment" of the rule
row() {
	local where="project_id IS NULL"
	[ -n "${2:-}" ] && where="project_id = '$2'"
	pg_val "SELECT id || '|' || action || '|' || coalesce(round(extract(epoch FROM expires_at - now()))::text, '-') || '|' || coalesce(comment, '-') FROM ip_rules WHERE cidr = '$1' AND $where"
}

# ---- block, allow, replace --------------------------------------------
s0=$(seq_now)
pexpect "ip block --pg" 0 'added: block 203.0.113.0/24 "scanner"; rule ' ip block 203.0.113.0/24 --comment scanner
if grep -q "for every host" "$T_TMP/out"; then
	t_ok "ip block --pg: a global rule"
else
	t_fail "ip block --pg: a global rule" "$(cat "$T_TMP/out")"
fi
id=$(row 203.0.113.0/24 | cut -d'|' -f1)
if [ "$(row 203.0.113.0/24)" = "$id|block|-|scanner" ] && grep -q "rule $id in the database" "$T_TMP/out"; then
	t_ok "the rule is in ip_rules (id $id)"
else
	t_fail "the rule is in ip_rules" "$(row 203.0.113.0/24)"
fi
s1=$(seq_now)
if [ "$s1" -eq $((s0 + 1)) ] &&
	[ "$(pg_val "SELECT string_agg(kind || ' ' || key, ',') FROM edge_change_log WHERE version = $s1")" = "ip_rule $id" ]; then
	t_ok "one command, one change version"
else
	t_fail "one command, one change version" "sequence $s0 -> $s1"
fi
pexpect "ip block again: updated in place" 0 "updated: block 203.0.113.0/24 (expires in 10m); rule $id in the database" ip block 203.0.113.0/24 --ttl 10m
r=$(row 203.0.113.0/24)
if [[ "$r" == "$id|block|"* ]] && [ "$(echo "$r" | cut -d'|' -f3)" -ge 598 ] && [ "$(echo "$r" | cut -d'|' -f3)" -le 600 ] &&
	[ "$(echo "$r" | cut -d'|' -f4)" = - ] && [ "$(pg_val "SELECT count(*) FROM ip_rules WHERE cidr = '203.0.113.0/24'")" = 1 ]; then
	t_ok "the replace: same id, TTL -> expires_at (10 min), comment replaced"
else
	t_fail "the replace: same id, TTL -> expires_at (10 min), comment replaced" "$r"
fi
if [ "$(seq_now)" -eq $((s1 + 1)) ]; then
	t_ok "the replace is one change version"
else
	t_fail "the replace is one change version" "sequence $s1 -> $(seq_now)"
fi
pexpect "ip allow on the same prefix: the action replaced" 0 "updated: allow 203.0.113.0/24" ip allow 203.0.113.0/24
if [[ "$(row 203.0.113.0/24)" == "$id|allow|-|-" ]]; then
	t_ok "the rule is an allow rule now"
else
	t_fail "the rule is an allow rule now" "$(row 203.0.113.0/24)"
fi
pexpect "host bits: noted and cleared" 0 "10.1.2.3/8 has host bits set; using 10.0.0.0/8" ip block 10.1.2.3/8
if [ -n "$(row 10.0.0.0/8)" ]; then
	t_ok "stored as 10.0.0.0/8"
else
	t_fail "stored as 10.0.0.0/8"
fi
pexpect "one address: a /32" 0 "added: allow 10.1.2.3/32" ip allow 10.1.2.3
pexpect "IPv6" 0 "added: block 2001:db8::/32" ip block 2001:db8::/32 --ttl 1h --comment "v6 net"
pexpect "IPv4-mapped IPv6: the IPv4 rule" 0 "added: block 192.0.2.0/24" ip block ::ffff:192.0.2.0/120

# ---- project rules ------------------------------------------------------
pexpect "a project's rule" 0 "for project shop" ip block 203.0.113.0/24 --project shop --comment "shop only"
pid=$(row 203.0.113.0/24 shop | cut -d'|' -f1)
if [ -n "$pid" ] && [ "$pid" != "$id" ] && [ "$(pg_val "SELECT count(*) FROM ip_rules WHERE cidr = '203.0.113.0/24'")" = 2 ]; then
	t_ok "a project's rule beside the global one for the same prefix"
else
	t_fail "a project's rule beside the global one for the same prefix"
fi
pexpect "another project, same prefix" 0 "added: allow 203.0.113.0/24" ip allow 203.0.113.0/24 --project blog
pexpect "a project's rule replaced in place" 0 "updated: block 203.0.113.0/24; rule $pid in the database, for project shop" ip block 203.0.113.0/24 --project shop
n0=$(pg_val "SELECT count(*) FROM ip_rules")
s0=$(seq_now)
pexpect "an unknown project: exit 1" 1 "no project 'nope' in the database; nothing was changed" ip block 198.51.100.0/24 --project nope
pexpect "del: a project's rule that is not there" 1 "no rule for 198.51.100.0/24 in project shop" ip del 198.51.100.0/24 --project shop
pexpect "del: a global rule that is not there" 1 "no rule for 198.51.100.0/24 (a global rule; --project for a project's)" ip del 198.51.100.0/24
if [ "$(pg_val "SELECT count(*) FROM ip_rules")" = "$n0" ] && [ "$(seq_now)" = "$s0" ]; then
	t_ok "failed commands changed nothing (no row, no change version)"
else
	t_fail "failed commands changed nothing (no row, no change version)"
fi

# ---- invalid input: exit 2, nothing written ------------------------------
while IFS='|' read -r frag args; do
	[ -n "$frag" ] || continue
	# shellcheck disable=SC2086 # the arguments are words
	pexpect "refused: $args" 2 "$frag" $args
done <<'CASES'
bad CIDR|ip block 10.0.0.0/33
bad CIDR|ip block 300.1.1.1
bad CIDR|ip allow 2001:db8::/129
missing CIDR|ip block
unexpected argument '10.0.0.0/8'|ip block 1.2.3.4 10.0.0.0/8
bad --ttl|ip block 1.2.3.4 --ttl 10x
bad --ttl|ip block 1.2.3.4 --ttl 0
bad --ttl|ip block 1.2.3.4 --ttl 366d
bad --project|ip block 1.2.3.4 --project bad/id
bad --project|ip del 1.2.3.4 --project ../x
unknown option '--bogus'|ip block 1.2.3.4 --bogus
unknown option '--bogus'|ip list --bogus
unexpected argument|ip list extra
needs a value|ip block 1.2.3.4 --project
bad CIDR|ip del 10.0.0.0/
CASES
pexpect "refused: a comment with a control character" 2 "bad --comment" ip block 1.2.3.4 --comment $'a\x01b'
pexpect "refused: a comment not UTF-8" 2 "bad --comment" ip block 1.2.3.4 --comment $'caf\xe9'
pexpect "refused: a comment too long" 2 "bad --comment" ip block 1.2.3.4 --comment "$(printf 'x%.0s' $(seq 1 200))"
pexpect "refused: an empty project" 2 "bad --project" ip block 1.2.3.4 --project ""
if [ "$(pg_val "SELECT count(*) FROM ip_rules")" = "$n0" ] && [ "$(seq_now)" = "$s0" ]; then
	t_ok "usage errors wrote nothing (no row, no change version)"
else
	t_fail "usage errors wrote nothing (no row, no change version)"
fi
# usage errors come before the database: none is needed for them
expect "a usage error with the database down is still exit 2" 2 "bad CIDR" \
	"$E" --pg "host=127.0.0.1 port=1 password=$PGT_SECRET" ip block 10.0.0.0/33
pgt_keep "$T_TMP/out"
expect "--project without --pg: usage error" 2 "ip block: --project needs --pg" "$E" ip block 1.2.3.4 --project shop
expect "--project without --pg (del)" 2 "ip del: --project needs --pg" "$E" ip del 1.2.3.4 --project shop

# ---- list ------------------------------------------------------------
pg_sql "INSERT INTO ip_rules (cidr, action, expires_at, comment) VALUES ('198.18.0.0/15', 'block', now() - interval '1 second', 'gone')" >/dev/null
pg_sql "INSERT INTO edge_hosts (name, rule_hits) VALUES ('web-1', '{\"$id\": 10, \"$pid\": 1}'), ('web-2', '{\"$id\": 5, \"x\": \"y\"}'), ('web-3', NULL)" >/dev/null
pexpect "ip list --pg" 0 "PROJECT" ip list
cp "$T_TMP/out" "$T_TMP/list"
line_of() { grep -E "^[0-9]+ +$1 +$2 +$3 " "$T_TMP/list"; }
if line_of allow 203.0.113.0/24 - | grep -qE ' 15$'; then
	t_ok "list: hits summed over the hosts that report the rule (15)"
else
	t_fail "list: hits summed over the hosts that report the rule (15)" "$(tr '\n' '|' <"$T_TMP/list")"
fi
if line_of block 203.0.113.0/24 shop | grep -qE ' 1$' && line_of allow 203.0.113.0/24 blog | grep -qE ' - *$'; then
	t_ok "list: project rules with their project, '-' without reports"
else
	t_fail "list: project rules with their project, '-' without reports" "$(tr '\n' '|' <"$T_TMP/list")"
fi
if line_of block 2001:db8::/32 - | grep -qE ' (5[5-9]m[0-9]+s|1h) +- +v6 net$'; then
	t_ok "list: the TTL left"
else
	t_fail "list: the TTL left" "$(tr '\n' '|' <"$T_TMP/list")"
fi
if grep -q 198.18.0.0 "$T_TMP/list"; then
	t_fail "list: an expired rule is not shown"
else
	t_ok "list: an expired rule is not shown"
fi
if [ "$(grep -nE ' (10\.0\.0\.0/8|2001:db8::/32|203\.0\.113\.0/24) +(-|shop|blog) ' "$T_TMP/list" | awk '{print $3 "@" $4}' | paste -sd ' ')" = \
	"10.0.0.0/8@- 203.0.113.0/24@- 2001:db8::/32@- 203.0.113.0/24@blog 203.0.113.0/24@shop" ]; then
	t_ok "list: global rules first, IPv4 before IPv6, then by project"
else
	t_fail "list: global rules first, IPv4 before IPv6, then by project" "$(tr '\n' '|' <"$T_TMP/list")"
fi
pgt_run ip list --json >"$T_TMP/list.json"
if python3 -c 'import json, sys
rules = json.load(open(sys.argv[1]))
by = {(r["cidr"], r["project"]): r for r in rules}
g = by[("203.0.113.0/24", None)]
assert g["id"] == int(sys.argv[2]) and g["action"] == "allow" and g["family"] == "ipv4"
assert g["hits"] == 15 and g["expires_at"] is None and g["ttl_remaining"] is None and g["comment"] == ""
s = by[("203.0.113.0/24", "shop")]
assert s["hits"] == 1 and s["comment"] == "" and s["action"] == "block"
assert by[("203.0.113.0/24", "blog")]["hits"] is None
v6 = by[("2001:db8::/32", None)]
assert v6["family"] == "ipv6" and 3300 <= v6["ttl_remaining"] <= 3600 and v6["expires_at"] > 1700000000 and v6["comment"] == "v6 net"
assert ("198.18.0.0/15", None) not in by
assert set(rules[0]) == {"id", "cidr", "family", "action", "project", "expires_at", "ttl_remaining", "hits", "comment"}' \
	"$T_TMP/list.json" "$id" 2>"$T_TMP/py"; then
	t_ok "list --json: every field"
else
	t_fail "list --json: every field" "$(tail -1 "$T_TMP/py")"
fi

# ---- del ----------------------------------------------------------------
pexpect "ip del --project" 0 "deleted: block 203.0.113.0/24; rule $pid in the database, for project shop" ip del 203.0.113.0/24 --project shop
if [ -z "$(row 203.0.113.0/24 shop)" ] && [ -n "$(row 203.0.113.0/24)" ] && [ -n "$(row 203.0.113.0/24 blog)" ]; then
	t_ok "ip del --project removes only that project's rule"
else
	t_fail "ip del --project removes only that project's rule"
fi
s0=$(seq_now)
pexpect "ip del (global)" 0 "deleted: allow 203.0.113.0/24; rule $id in the database, for every host" ip del 203.0.113.0/24
if [ -z "$(row 203.0.113.0/24)" ] && [ -n "$(row 203.0.113.0/24 blog)" ] && [ "$(seq_now)" -eq $((s0 + 1)) ] &&
	[ "$(pg_val "SELECT string_agg(kind || ' ' || key, ',') FROM edge_change_log WHERE version = $((s0 + 1))")" = "ip_rule $id" ]; then
	t_ok "ip del removes the global rule, one change version"
else
	t_fail "ip del removes the global rule, one change version"
fi
pexpect "ip del host bits" 0 "deleted: block 10.0.0.0/8" ip del 10.9.9.9/8

# ---- the SSH lockout check ------------------------------------------------
export SSH_CONNECTION="198.51.100.7 50000 10.0.0.1 22"
n0=$(pg_val "SELECT count(*) FROM ip_rules")
s0=$(seq_now)
pexpect "ssh: blocking the client's prefix refused" 1 "refusing to block 198.51.100.0/24: your SSH client 198.51.100.7 would be blocked by 198.51.100.0/24" ip block 198.51.100.0/24
pexpect "ssh: blocking the client's own address refused" 1 "refusing to block 198.51.100.7" ip block 198.51.100.7
if [ "$(pg_val "SELECT count(*) FROM ip_rules")" = "$n0" ] && [ "$(seq_now)" = "$s0" ]; then
	t_ok "ssh: a refused change wrote nothing"
else
	t_fail "ssh: a refused change wrote nothing"
fi
pexpect "ssh: a project's rule is not the host's: no check" 0 "for project blog" ip block 198.51.100.0/24 --project blog
pexpect "ssh: another prefix is fine" 0 "added: block 198.51.101.0/24" ip block 198.51.101.0/24
pexpect "ssh: allow the client" 0 "added: allow 198.51.100.7/32" ip allow 198.51.100.7
pexpect "ssh: with an allow for the client, its prefix may be blocked" 0 "added: block 198.51.100.0/24" ip block 198.51.100.0/24
pexpect "ssh: deleting the allow that keeps the client in: refused" 1 "refusing to delete the rule for 198.51.100.7/32: your SSH client 198.51.100.7 would be blocked by 198.51.100.0/24" ip del 198.51.100.7/32
pexpect "ssh: --force deletes it, with a warning" 0 "warning: delete the rule for 198.51.100.7/32" ip del 198.51.100.7/32 --force
if [ -z "$(row 198.51.100.7/32)" ]; then
	t_ok "ssh: --force deleted it"
else
	t_fail "ssh: --force deleted it"
fi
pexpect "ssh: clean up" 0 "deleted" ip del 198.51.100.0/24
# the local state over the database's rules: a local allow for the same
# prefix wins on this host, so a database block of it does not cut the
# client off here (it reaches the other hosts)
expect "local: allow the client's prefix in the state file" 0 "added: allow 198.51.100.0/24" "$E" ip allow 198.51.100.0/24
pexpect "ssh: a local allow for the same prefix wins on this host" 0 "added: block 198.51.100.0/24" ip block 198.51.100.0/24
pexpect "ssh: clean up again" 0 "deleted" ip del 198.51.100.0/24
expect "local: delete the local allow" 0 "deleted: allow 198.51.100.0/24" "$E" ip del 198.51.100.0/24
# the local policy: under allowlist with port 22 guarded, the client
# needs an allow rule; deleting the database's one cuts it off
pexpect "ssh: allow the client (database)" 0 "added: allow 198.51.100.7/32" ip allow 198.51.100.7
# (--force: the local check sees only the state file's rules)
expect "local: allowlist guarding 22" 0 "policy: allowlist" "$E" ip policy allowlist --ports 22,80,443 --force
pexpect "ssh: under the local allowlist, deleting the allow is refused" 1 "port 22 is guarded by the allowlist and no allow rule covers 198.51.100.7" ip del 198.51.100.7/32
expect "local: back to blocklist" 0 "policy: blocklist" "$E" ip policy blocklist
pexpect "ssh: under blocklist it may go" 0 "deleted: allow 198.51.100.7/32" ip del 198.51.100.7/32
export SSH_CONNECTION="garbage"
pexpect "ssh: a malformed SSH_CONNECTION is a note" 0 "SSH_CONNECTION is malformed" ip block 198.51.102.0/24
unset SSH_CONNECTION

# ---- ip policy and local commands with --pg ----------------------------
pexpect "ip policy with --pg: a note, the local policy" 0 "--pg does not apply to ip policy" ip policy
expect "without --pg, ip list is the state file's" 0 "" "$E" ip list
if grep -qE "198\.51\.10[12]" "$T_TMP/out"; then
	t_fail "without --pg the database's rules are not listed" "$(cat "$T_TMP/out")"
else
	t_ok "without --pg the database's rules are not listed"
fi

# ---- EDGE_PG, --pg over it, no root ---------------------------------------
expect "EDGE_PG" 0 "198.51.101.0/24" env EDGE_PG="$PGT_PG" "$E" ip list
pgt_keep "$T_TMP/out"
expect "--pg over EDGE_PG" 0 "198.51.101.0/24" env EDGE_PG="host=127.0.0.1 port=1 password=$PGT_SECRET" "$E" --pg "$PGT_PG" ip list
pgt_keep "$T_TMP/out"
if runuser -u nobody -- test -x "$E" 2>/dev/null; then
	expect "no root needed" 0 "198.51.101.0/24" runuser -u nobody -- "$E" --pg "$PGT_PG" ip list
	pgt_keep "$T_TMP/out"
	expect "no root needed to block" 0 "added: block 198.51.103.0/24" runuser -u nobody -- "$E" --pg "$PGT_PG" ip block 198.51.103.0/24
	pgt_keep "$T_TMP/out"
else
	t_skip "no root needed" "nobody cannot run $E"
fi

pgt_no_secret
t_exit
