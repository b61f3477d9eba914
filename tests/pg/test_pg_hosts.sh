#!/usr/bin/env bash
# tests/pg/test_pg_hosts.sh - edgectl --pg hosts: the fleet from
# edge_hosts, with rows written by hand as edged would write them: name,
# version, started, last seen and "stale" past 30 s (or --stale), the
# applied change version and whether it is behind the database's, the
# database up or down, route generation, XDP drops summed over the
# dropped_* counters; in columns and as JSON; a host with nothing but its
# name; no hosts; usage errors.
#
#   B=build bash tests/pg/test_pg_hosts.sh
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

expect "hosts without --pg: usage error" 2 "hosts: needs a database: --pg CONNINFO or EDGE_PG" "$E" hosts
pexpect "hosts before migrating" 1 "the database has no edge schema: run edgectl db migrate" hosts
pexpect "db migrate" 0 "up to date" db migrate
pexpect "no hosts" 0 "no hosts (change version 0)" hosts
pexpect "bad --stale" 2 "hosts: bad --stale" hosts --stale 5x
pexpect "unexpected argument" 2 "hosts: unexpected argument 'web-1'" hosts web-1
pexpect "--help" 0 "usage: edgectl hosts [--json] [--stale DURATION]" hosts --help

# three changes: the database's change version is 3
for p in p1 p2 p3; do pg_sql "INSERT INTO projects (id) VALUES ('$p')" >/dev/null; done
pg_sql "
INSERT INTO edge_hosts (name, edge_version, started_at, last_seen, applied_version,
                        route_generation, database_up, xdp_counters, rule_hits)
VALUES ('web-1', '0.1.0', '2026-01-02 03:04:05+00', now() - interval '2 seconds', 3, 7, true,
        '{\"passed\": 1000, \"dropped_rule\": 70, \"dropped_policy\": 5, \"dropped_ratelimit\": 2, \"malformed\": 9}', '{}'),
       ('web-2', '0.1.0', now() - interval '1 day', now() - interval '5 minutes', 1, 4, false,
        '{\"passed\": 1, \"dropped_rule\": 0}', NULL),
       ('a-bare-host', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)" >/dev/null

pexpect "hosts" 0 "HOST" hosts
cp "$T_TMP/out" "$T_TMP/hosts"
hline() { grep -E "^$1 " "$T_TMP/hosts"; }
if hline web-1 | grep -qE '^web-1 +0\.1\.0 +2026-01-02 03:04:05Z +2s ago +3 +up +7 +77$'; then
	t_ok "hosts: a current host (version, started, seen, applied, database up, generation, drops)"
else
	t_fail "hosts: a current host" "$(tr '\n' '|' <"$T_TMP/hosts")"
fi
if hline web-2 | grep -qE ' 5m ago, stale +1, behind +down +4 +0$'; then
	t_ok "hosts: a stale host behind the change version, its database down"
else
	t_fail "hosts: a stale host behind the change version, its database down" "$(tr '\n' '|' <"$T_TMP/hosts")"
fi
if hline a-bare-host | grep -qE '^a-bare-host +- +- +never +-, behind +- +- +-$'; then
	t_ok "hosts: a host with nothing but its name"
else
	t_fail "hosts: a host with nothing but its name" "$(tr '\n' '|' <"$T_TMP/hosts")"
fi
if [ "$(grep -E '^(a-bare-host|web-1|web-2) ' "$T_TMP/hosts" | cut -d' ' -f1 | paste -sd ' ')" = "a-bare-host web-1 web-2" ]; then
	t_ok "hosts: by name"
else
	t_fail "hosts: by name"
fi
if grep -qx "change version 3: 3 hosts, 2 stale (not seen for 30 s), 2 behind" "$T_TMP/hosts"; then
	t_ok "hosts: the summary line"
else
	t_fail "hosts: the summary line" "$(tail -1 "$T_TMP/hosts")"
fi
pexpect "hosts --stale 10m" 0 "change version 3: 3 hosts, 1 stale (not seen for 600 s), 2 behind" hosts --stale 10m
if grep -E "^web-2 " "$T_TMP/out" | grep -q stale; then
	t_fail "hosts --stale 10m: web-2 is not stale" "$(grep web-2 "$T_TMP/out")"
else
	t_ok "hosts --stale 10m: web-2 is not stale"
fi

pgt_run hosts --json >"$T_TMP/hosts.json"
if python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
assert d["change_version"] == 3 and d["stale_after_s"] == 30
h = {x["name"]: x for x in d["hosts"]}
w1 = h["web-1"]
assert w1["edge_version"] == "0.1.0" and w1["started_at"] == 1767323045
assert 1 <= w1["last_seen_age_s"] <= 25 and w1["stale"] is False
assert w1["applied_version"] == 3 and w1["behind"] is False
assert w1["route_generation"] == 7 and w1["database_up"] is True
assert w1["xdp_dropped"] == 77 and w1["xdp_counters"]["malformed"] == 9
w2 = h["web-2"]
assert w2["stale"] is True and w2["behind"] is True and w2["database_up"] is False and w2["xdp_dropped"] == 0
b = h["a-bare-host"]
assert b["edge_version"] is None and b["started_at"] is None and b["last_seen"] is None
assert b["last_seen_age_s"] is None and b["stale"] is True and b["applied_version"] is None
assert b["behind"] is True and b["route_generation"] is None and b["database_up"] is None
assert b["xdp_counters"] is None and b["xdp_dropped"] is None
assert set(w1) == {"name", "edge_version", "started_at", "last_seen", "last_seen_age_s", "stale", "applied_version", "behind", "route_generation", "database_up", "xdp_counters", "xdp_dropped"}' \
	"$T_TMP/hosts.json" 2>"$T_TMP/py"; then
	t_ok "hosts --json: every field"
else
	t_fail "hosts --json: every field" "$(tail -1 "$T_TMP/py")"
fi

# the hosts catch up
pg_sql "UPDATE edge_hosts SET applied_version = 3, last_seen = now()" >/dev/null
pexpect "hosts: all converged" 0 "change version 3: 3 hosts, 0 stale (not seen for 30 s), 0 behind" hosts
pexpect "db status counts them too" 0 "hosts:          3 (0 not seen for 30 s, 0 behind the change version)" db status

pgt_no_secret
t_exit
