#!/usr/bin/env bash
# tests/pg/test_pg_schema.sh - edge's schema as orchestrators use it,
# against a real PostgreSQL 15 (migrated by edgectl db migrate):
#
# - the deployment switch in one statement (both ways, so that the rows
#   are visited in either order) and two actives refused;
# - cascades: deleting an environment or a project removes everything
#   below it, nothing beside it;
# - the triggers: one change version per transaction (the sequence moves
#   by one, every log row of the transaction has it), edge_change_log's
#   rows per project and rule, and the NOTIFY payloads a listener sees:
#   "VERSION PROJECT_ID" on project_route_change for each routing table,
#   one per project per transaction (1000 domains in one transaction: one
#   notification; a cascaded delete: its parent's), "VERSION RULE_ID" on
#   ip_rule_change, a row moved between projects noted for both, nothing
#   for a transaction rolled back, TRUNCATE noted like DELETE; tcp_routes
#   (migration 0005) noted as its environment's project, as domains are;
#   a deployment's health_check set (migration 0012) noted as its
#   project's; the same (listen, sni) refused twice; environments.tls
#   (migration 0026) noted as its project's, a value but NULL or 'auto'
#   refused; acme_challenges NOTIFYing acme_challenge_change with the
#   token ('' for a TRUNCATE) and taking no change version; a type but
#   http-01 or tls-alpn-01 refused; certificates.acme_name unique;
#   migration 0028's columns (deployments.retry, circuit, request_total,
#   domains.wake, activity, request_total, environments.
#   idle_timeout_background) noted as their project's, domains' CHECKs;
#   migration 0029's (deployments.hedge, max_inflight, environments.shed,
#   domains.shed) noted as their project's, max_inflight's range and
#   domains.shed only on a path-prefix row (CHECKs).
#
#   B=build bash tests/pg/test_pg_schema.sh
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
pexpect "db migrate" 0 "schema: version" db migrate

# ---- the deployment switch -------------------------------------------
pg_sql "
INSERT INTO projects (id, name) VALUES ('p1', 'one'), ('p2', 'two');
INSERT INTO environments (id, project_id, name)
    VALUES ('e1', 'p1', 'production'), ('e2', 'p2', 'production');
INSERT INTO deployments (id, environment_id, active)
    VALUES ('d1', 'e1', true), ('d2', 'e1', false), ('d3', 'e2', true);
INSERT INTO endpoints VALUES ('d1', '10.0.0.1:80'), ('d2', '10.0.0.2:80'),
    ('d3', '10.0.0.3:80');
INSERT INTO domains (domain, environment_id)
    VALUES ('one.example.com', 'e1'), ('two.example.com', 'e2');
INSERT INTO domains (domain, path_prefix, environment_id)
    VALUES ('one.example.com', '/api', 'e1');
INSERT INTO ip_rules (cidr, action, project_id)
    VALUES ('192.0.2.0/24', 'block', 'p1'), ('198.51.100.0/24', 'block', NULL);
" >/dev/null

actives() { pg_val "SELECT string_agg(id, ',' ORDER BY id) FROM deployments WHERE environment_id = '$1' AND active"; }

for want in d2 d1 d2; do
	if pg_sql "UPDATE deployments SET active = (id = '$want') WHERE environment_id = 'e1'" >"$T_TMP/sw" 2>&1 &&
		[ "$(actives e1)" = "$want" ]; then
		t_ok "switch to $want in one statement"
	else
		t_fail "switch to $want in one statement" "$(tr '\n' ' ' <"$T_TMP/sw"); active: $(actives e1)"
	fi
done
if pg_sql "BEGIN; UPDATE deployments SET active = true WHERE id = 'd1'; UPDATE deployments SET active = false WHERE id = 'd2'; COMMIT" >"$T_TMP/sw" 2>&1 &&
	[ "$(actives e1)" = d1 ]; then
	t_ok "switch in two statements of one transaction (checked at commit)"
else
	t_fail "switch in two statements of one transaction (checked at commit)" "$(tr '\n' ' ' <"$T_TMP/sw")"
fi
if pg_sql "UPDATE deployments SET active = true WHERE environment_id = 'e1'" >"$T_TMP/sw" 2>&1; then
	t_fail "two actives refused (one statement)" "the update went through: $(actives e1)"
elif grep -q "deployments_one_active" "$T_TMP/sw" && [ "$(actives e1)" = d1 ]; then
	t_ok "two actives refused (one statement)"
else
	t_fail "two actives refused (one statement)" "$(tr '\n' ' ' <"$T_TMP/sw"); active: $(actives e1)"
fi
if pg_sql "INSERT INTO deployments (id, environment_id, active) VALUES ('d9', 'e1', true)" >"$T_TMP/sw" 2>&1; then
	t_fail "a second active deployment refused (insert)" "inserted"
elif grep -q "deployments_one_active" "$T_TMP/sw" && [ "$(pg_val "SELECT count(*) FROM deployments WHERE id = 'd9'")" = 0 ]; then
	t_ok "a second active deployment refused (insert)"
else
	t_fail "a second active deployment refused (insert)" "$(tr '\n' ' ' <"$T_TMP/sw")"
fi
if [ "$(actives e2)" = d3 ]; then
	t_ok "the other environment's active deployment untouched"
else
	t_fail "the other environment's active deployment untouched" "$(actives e2)"
fi

# ---- cascades --------------------------------------------------------
counts() {
	pg_val "SELECT (SELECT count(*) FROM projects WHERE id = '$1') || ' ' ||
		(SELECT count(*) FROM environments WHERE project_id = '$1') || ' ' ||
		(SELECT count(*) FROM deployments d JOIN environments e ON e.id = d.environment_id WHERE e.project_id = '$1') || ' ' ||
		(SELECT count(*) FROM endpoints WHERE deployment_id IN ($2)) || ' ' ||
		(SELECT count(*) FROM domains WHERE domain LIKE '$3') || ' ' ||
		(SELECT count(*) FROM ip_rules WHERE project_id = '$1')"
}
before_p2=$(counts p2 "'d3'" 'two.%')
pg_sql "DELETE FROM environments WHERE id = 'e2'" >/dev/null
got=$(counts p2 "'d3'" 'two.%')
if [ "$before_p2" = "1 1 1 1 1 0" ] && [ "$got" = "1 0 0 0 0 0" ]; then
	t_ok "deleting an environment removes its deployments, endpoints and domains, not its project"
else
	t_fail "deleting an environment removes its deployments, endpoints and domains, not its project" "before '$before_p2', after '$got'"
fi
before_p1=$(counts p1 "'d1','d2'" 'one.%')
pg_sql "DELETE FROM projects WHERE id = 'p1'" >/dev/null
got=$(counts p1 "'d1','d2'" 'one.%')
if [ "$before_p1" = "1 1 2 2 2 1" ] && [ "$got" = "0 0 0 0 0 0" ]; then
	t_ok "deleting a project removes everything below it"
else
	t_fail "deleting a project removes everything below it" "before '$before_p1', after '$got'"
fi
if [ "$(pg_val "SELECT count(*) FROM ip_rules WHERE project_id IS NULL")" = 1 ] &&
	[ "$(pg_val "SELECT count(*) FROM projects WHERE id = 'p2'")" = 1 ]; then
	t_ok "a global rule and another project survive the cascade"
else
	t_fail "a global rule and another project survive the cascade"
fi

# ---- triggers: versions, the log, NOTIFY ------------------------------
if ! pgt_listen project_route_change ip_rule_change acme_challenge_change edge_test_mark; then
	t_fail "pg_listen ready" "$(cat "$PGT_NOTES" 2>/dev/null)"
	t_exit
	exit 1
fi
EXPECTED=$T_TMP/expected
: >"$EXPECTED"

seq_now() { pg_val "SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM edge_change_seq"; }

# tx NAME SQL NOTES LOG: run SQL as one transaction, then check that it
# took exactly one change version V (the sequence moved by one) and that
# edge_change_log holds exactly LOG for V ("kind key" entries, ';'
# separated, V in them replaced). NOTES (the same way) are the
# notifications the listener must see for it, checked at the end.
tx() {
	local name=$1 sql=$2 notes=$3 log=$4 s0 v got want
	s0=$(seq_now)
	if ! pg_sql "$sql" >"$T_TMP/tx" 2>&1; then
		t_fail "$name: runs" "$(tr '\n' ' ' <"$T_TMP/tx")"
	fi
	v=$(seq_now)
	got=$(pg_val "SELECT string_agg(kind || ' ' || key, ';' ORDER BY kind, key) FROM edge_change_log WHERE version > $s0")
	want=$(echo "${log//V/$v}" | tr ';' '\n' | sort | paste -sd ';')
	if [ "$v" -ne $((s0 + 1)) ]; then
		t_fail "$name: one change version" "the sequence went from $s0 to $v"
	elif [ "$(pg_val "SELECT count(DISTINCT version) FROM edge_change_log WHERE version > $s0")" != 1 ] ||
		[ "$(pg_val "SELECT min(version) FROM edge_change_log WHERE version > $s0")" != "$v" ]; then
		t_fail "$name: one change version" "log versions: $(pg_val "SELECT string_agg(DISTINCT version::text, ',') FROM edge_change_log WHERE version > $s0")"
	elif [ "$got" != "$want" ]; then
		t_fail "$name: edge_change_log" "got '$got', want '$want'"
	else
		t_ok "$name: version $v, edge_change_log '$got'"
	fi
	if [ -n "$notes" ]; then
		echo "${notes//V/$v}" | tr ';' '\n' >>"$EXPECTED"
	fi
	pg_sql "NOTIFY edge_test_mark, '${name//\'/\'\'}'" >/dev/null
	echo "edge_test_mark $name" >>"$EXPECTED"
}

tx "insert a project" \
	"INSERT INTO projects (id) VALUES ('p3')" \
	"project_route_change V p3" "project p3"
tx "insert an environment" \
	"INSERT INTO environments (id, project_id) VALUES ('e3', 'p3')" \
	"project_route_change V p3" "project p3"
tx "insert deployments" \
	"INSERT INTO deployments (id, environment_id, active) VALUES ('d5', 'e3', true), ('d6', 'e3', false)" \
	"project_route_change V p3" "project p3"
tx "insert an endpoint" \
	"INSERT INTO endpoints VALUES ('d5', '10.0.0.5:80')" \
	"project_route_change V p3" "project p3"
tx "insert a domain" \
	"INSERT INTO domains (domain, environment_id) VALUES ('three.example.com', 'e3')" \
	"project_route_change V p3" "project p3"
tx "switch the deployment" \
	"UPDATE deployments SET active = (id = 'd6') WHERE environment_id = 'e3'" \
	"project_route_change V p3" "project p3"
tx "set a deployment's health_check (migration 0012)" \
	"UPDATE deployments SET health_check = '{\"type\": \"tcp\"}' WHERE id = 'd6'" \
	"project_route_change V p3" "project p3"
tx "insert 1000 domains in one transaction" \
	"INSERT INTO domains (domain, environment_id) SELECT 'd' || g || '.bulk.example.com', 'e3' FROM generate_series(1, 1000) g" \
	"project_route_change V p3" "project p3"
tx "two projects in one transaction" \
	"INSERT INTO projects (id) VALUES ('p4'); INSERT INTO environments (id, project_id) VALUES ('e4', 'p4'); INSERT INTO projects (id) VALUES ('p5')" \
	"project_route_change V p4;project_route_change V p5" "project p4;project p5"
tx "set an environment's tls (migration 0026)" \
	"UPDATE environments SET tls = 'auto' WHERE id = 'e4'" \
	"project_route_change V p4" "project p4"
if ! pg_sql "UPDATE environments SET tls = 'manual' WHERE id = 'e4'" >/dev/null 2>&1 &&
	[ "$(pg_val "SELECT tls FROM environments WHERE id = 'e4'")" = auto ]; then
	t_ok "environments.tls: NULL or 'auto' (a CHECK)"
else
	t_fail "environments.tls: NULL or 'auto' (a CHECK)" "'manual' went in"
fi
tx "set a deployment's retry, circuit and request_total (migration 0028)" \
	"UPDATE deployments SET retry = '{\"max\": 1}', circuit = '{}', request_total = '5 seconds' WHERE id = 'd6'" \
	"project_route_change V p3" "project p3"
tx "a path-prefix domain's wake, activity and request_total (migration 0028)" \
	"INSERT INTO domains (domain, path_prefix, environment_id, wake, activity, request_total) VALUES ('three.example.com', '/up', 'e3', false, 'background', '1 second')" \
	"project_route_change V p3" "project p3"
tx "an environment's idle_timeout_background (migration 0028)" \
	"UPDATE environments SET idle_timeout_background = '1 hour' WHERE id = 'e4'" \
	"project_route_change V p4" "project p4"
if ! pg_sql "UPDATE domains SET activity = 'batch' WHERE path_prefix = '/up'" >/dev/null 2>&1 &&
	! pg_sql "INSERT INTO domains (domain, environment_id, wake) VALUES ('nowake.example.com', 'e3', false)" >/dev/null 2>&1 &&
	! pg_sql "INSERT INTO domains (domain, environment_id, request_total) VALUES ('nowake.example.com', 'e3', '1 second')" >/dev/null 2>&1 &&
	[ "$(pg_val "SELECT activity FROM domains WHERE path_prefix = '/up'")" = background ]; then
	t_ok "domains: activity 'app' or 'background'; wake and request_total only with a path_prefix (CHECKs)"
else
	t_fail "domains: activity 'app' or 'background'; wake and request_total only with a path_prefix (CHECKs)" "a row went in"
fi
tx "set a deployment's hedge and max_inflight (migration 0029)" \
	"UPDATE deployments SET hedge = '{\"after\": \"50ms\"}', max_inflight = 8 WHERE id = 'd6'" \
	"project_route_change V p3" "project p3"
tx "a path-prefix domain's shed (migration 0029)" \
	"UPDATE domains SET shed = false WHERE path_prefix = '/up'" \
	"project_route_change V p3" "project p3"
tx "an environment's shed (migration 0029)" \
	"UPDATE environments SET shed = true WHERE id = 'e4'" \
	"project_route_change V p4" "project p4"
if ! pg_sql "UPDATE deployments SET max_inflight = 1000001 WHERE id = 'd6'" >/dev/null 2>&1 &&
	! pg_sql "UPDATE deployments SET max_inflight = -1 WHERE id = 'd6'" >/dev/null 2>&1 &&
	! pg_sql "INSERT INTO domains (domain, environment_id, shed) VALUES ('noshed.example.com', 'e3', true)" >/dev/null 2>&1 &&
	[ "$(pg_val "SELECT shed FROM environments WHERE id = 'e3'")" = f ] &&
	[ "$(pg_val "SELECT max_inflight FROM deployments WHERE id = 'd6'")" = 8 ]; then
	t_ok "deployments.max_inflight 0..1000000; domains.shed only with a path_prefix (CHECKs); environments.shed false by default"
else
	t_fail "deployments.max_inflight 0..1000000; domains.shed only with a path_prefix (CHECKs); environments.shed false by default" "a row went in"
fi
tx "a domain moved to another project" \
	"UPDATE domains SET environment_id = 'e4' WHERE domain = 'three.example.com'" \
	"project_route_change V p3;project_route_change V p4" "project p3;project p4"
tx "insert TCP routes" \
	"INSERT INTO tcp_routes (listen, sni, environment_id) VALUES ('0.0.0.0:15432', NULL, 'e3'), ('0.0.0.0:8443', 'a.example.com', 'e3'), ('0.0.0.0:8443', '*', 'e3')" \
	"project_route_change V p3" "project p3"
tx "a TCP route moved to another project's environment" \
	"UPDATE tcp_routes SET environment_id = 'e4' WHERE listen = '0.0.0.0:15432'" \
	"project_route_change V p3;project_route_change V p4" "project p3;project p4"
tx "delete a TCP route" \
	"DELETE FROM tcp_routes WHERE sni = '*'" \
	"project_route_change V p3" "project p3"
if ! pg_sql "INSERT INTO tcp_routes (listen, environment_id) VALUES ('0.0.0.0:15432', 'e3')" >/dev/null 2>&1 &&
	! pg_sql "INSERT INTO tcp_routes (listen, sni, environment_id) VALUES ('0.0.0.0:8443', 'a.example.com', 'e4')" >/dev/null 2>&1 &&
	pg_sql "INSERT INTO tcp_routes (listen, sni, environment_id) VALUES ('0.0.0.0:8443', 'b.example.com', 'e4'); DELETE FROM tcp_routes WHERE sni = 'b.example.com'" >/dev/null 2>&1; then
	t_ok "tcp_routes: a (listen, sni) once (tcp_routes_listen_sni)"
else
	t_fail "tcp_routes: a (listen, sni) once"
fi
# the two refused took no version; the third, one (insert and delete in
# one transaction: one notification)
pg_sql "NOTIFY edge_test_mark, 'tcp_routes unique'" >/dev/null
{
	echo "project_route_change $(pg_val "SELECT max(version) FROM edge_change_log") p4"
	echo "edge_test_mark tcp_routes unique"
} >>"$EXPECTED"
# explicit ids, so that the expected payloads are known beforehand
tx "insert a global rule" \
	"INSERT INTO ip_rules (id, cidr, action) VALUES (1000, '203.0.113.0/24', 'block')" \
	"ip_rule_change V 1000" "ip_rule 1000"
tx "insert a project rule" \
	"INSERT INTO ip_rules (id, cidr, action, project_id) VALUES (1001, '203.0.113.0/24', 'allow', 'p3')" \
	"ip_rule_change V 1001;project_route_change V p3" "ip_rule 1001;project p3"
tx "update a rule" \
	"UPDATE ip_rules SET action = 'allow' WHERE id = 1000" \
	"ip_rule_change V 1000" "ip_rule 1000"
tx "move a rule to a project" \
	"UPDATE ip_rules SET project_id = 'p4' WHERE id = 1000" \
	"ip_rule_change V 1000;project_route_change V p4" "ip_rule 1000;project p4"
tx "delete a rule" \
	"DELETE FROM ip_rules WHERE id = 1000" \
	"ip_rule_change V 1000;project_route_change V p4" "ip_rule 1000;project p4"

tx "delete a project: cascaded rows noted by it" \
	"DELETE FROM projects WHERE id = 'p3'" \
	"project_route_change V p3;ip_rule_change V 1001" "project p3;ip_rule 1001"
if [ "$(pg_val "SELECT count(*) FROM domains WHERE environment_id = 'e3'")" = 0 ]; then
	t_ok "the 1000 domains went with their project"
else
	t_fail "the 1000 domains went with their project"
fi

s0=$(seq_now)
pg_sql "BEGIN; INSERT INTO projects (id) VALUES ('p9'); ROLLBACK" >/dev/null
pg_sql "NOTIFY edge_test_mark, 'rolled back'" >/dev/null
echo "edge_test_mark rolled back" >>"$EXPECTED"
if [ "$(pg_val "SELECT count(*) FROM edge_change_log WHERE version > $s0")" = 0 ]; then
	t_ok "a transaction rolled back leaves no log rows"
else
	t_fail "a transaction rolled back leaves no log rows"
fi

# acme_challenges (migration 0026): a plain NOTIFY acme_challenge_change
# (the token; '' for a TRUNCATE), no change version, nothing logged
acme() {
	local name=$1 sql=$2 notes=$3 s0
	s0=$(seq_now)
	if ! pg_sql "$sql" >"$T_TMP/tx" 2>&1; then
		t_fail "$name: runs" "$(tr '\n' ' ' <"$T_TMP/tx")"
	elif [ "$(seq_now)" != "$s0" ] ||
		[ "$(pg_val "SELECT count(*) FROM edge_change_log WHERE version > $s0")" != 0 ]; then
		t_fail "$name: no change version" "the sequence went from $s0 to $(seq_now)"
	else
		t_ok "$name: no change version, nothing logged"
	fi
	[ -n "$notes" ] && printf '%s\n' "$notes" | tr ';' '\n' >>"$EXPECTED"
	pg_sql "NOTIFY edge_test_mark, '$name'" >/dev/null
	echo "edge_test_mark $name" >>"$EXPECTED"
}
acme "acme: publish" "INSERT INTO acme_challenges VALUES ('tok-1', 'a.example.com', 'http-01', 'tok-1.t', 'web-1', now() + interval '5 minutes')" \
	"acme_challenge_change tok-1"
acme "acme: two more and one renewed" "INSERT INTO acme_challenges VALUES ('tok-2', 'b.example.com', 'tls-alpn-01', 'tok-2.t', 'web-1', now()), ('tok-3', 'c.example.com', 'http-01', 'tok-3.t', 'web-2', now()); UPDATE acme_challenges SET expires_at = now() + interval '1 minute' WHERE token = 'tok-1'" \
	"acme_challenge_change tok-1;acme_challenge_change tok-2;acme_challenge_change tok-3"
acme "acme: unpublish" "DELETE FROM acme_challenges WHERE token = 'tok-1'" "acme_challenge_change tok-1"
acme "acme: truncate" "TRUNCATE acme_challenges" "acme_challenge_change "
if ! pg_sql "INSERT INTO acme_challenges VALUES ('tok-4', 'a.example.com', 'dns-01', 'tok-4.t', 'web-1', now())" >/dev/null 2>&1; then
	t_ok "acme_challenges.type: http-01 or tls-alpn-01 (a CHECK)"
else
	t_fail "acme_challenges.type: http-01 or tls-alpn-01 (a CHECK)" "dns-01 went in"
fi
if pg_sql "INSERT INTO certificates (names, chain_pem, key_pem, acme_name) VALUES ('{}', 'c', 'k', NULL), ('{}', 'c', 'k', NULL), ('{a.example.com}', 'c', 'k', 'a.example.com')" >/dev/null 2>&1 &&
	! pg_sql "INSERT INTO certificates (names, chain_pem, key_pem, acme_name) VALUES ('{a.example.com}', 'c', 'k', 'a.example.com')" >/dev/null 2>&1; then
	t_ok "certificates.acme_name: unique, NULL for any number of rows"
else
	t_fail "certificates.acme_name: unique, NULL for any number of rows"
fi

# TRUNCATE is a change like DELETE (migration 0003; tcp_routes: 0005):
# every project and rule it empties is noted
tx "truncate domains" "TRUNCATE domains" "project_route_change V p4" "project p4"
tx "truncate tcp_routes" "TRUNCATE tcp_routes" "project_route_change V p4" "project p4"
pg_sql "INSERT INTO ip_rules (id, cidr, action, project_id) VALUES (2000, '203.0.113.0/24', 'block', NULL), (2001, '203.0.113.0/24', 'block', 'p5')" >/dev/null
pg_sql "NOTIFY edge_test_mark, 'two rules'" >/dev/null
{
	v=$(pg_val "SELECT max(version) FROM edge_change_log")
	printf 'ip_rule_change %s 2000\nip_rule_change %s 2001\nproject_route_change %s p5\n' "$v" "$v" "$v"
	echo "edge_test_mark two rules"
} >>"$EXPECTED"
rules=$(pg_val "SELECT string_agg('ip_rule_change V ' || id, ';' ORDER BY id) FROM ip_rules")
rlog=$(pg_val "SELECT string_agg('ip_rule ' || id, ';' ORDER BY id) FROM ip_rules")
tx "truncate ip_rules" "TRUNCATE ip_rules" "$rules;project_route_change V p5" "$rlog;project p5"
tx "truncate projects cascade" "TRUNCATE projects CASCADE" \
	"project_route_change V p2;project_route_change V p4;project_route_change V p5" "project p2;project p4;project p5"

if pgt_listen_stop; then
	t_ok "the listener saw the end"
else
	t_fail "the listener saw the end" "$(tail -3 "$PGT_NOTES")"
fi

# block_of FILE NAME: the lines before mark NAME since the previous mark,
# sorted (a transaction's notifications come in the order its triggers
# fired, which PostgreSQL does not promise across a cascade)
block_of() {
	awk -v m="edge_test_mark $2" '
		/^edge_test_mark / { if ($0 == m) { printf "%s", buf; exit } buf = ""; next }
		{ buf = buf $0 "\n" }' "$1" | sort
}
while IFS= read -r mark; do
	name=${mark#edge_test_mark }
	want=$(block_of "$EXPECTED" "$name")
	got=$(block_of "$PGT_NOTES" "$name")
	if ! grep -qxF -- "$mark" "$PGT_NOTES"; then
		t_fail "NOTIFY: $name" "the listener never saw its mark"
	elif [ "$got" = "$want" ]; then
		t_ok "NOTIFY: $name: $(echo "${got:-nothing}" | paste -sd ';')"
	else
		t_fail "NOTIFY: $name" "got '$(echo "$got" | paste -sd ';')', want '$(echo "$want" | paste -sd ';')'"
	fi
done < <(grep '^edge_test_mark ' "$EXPECTED")
if [ "$(grep -c . "$PGT_NOTES")" = "$(grep -c . "$EXPECTED")" ]; then
	t_ok "NOTIFY: nothing more than that ($(grep -c . "$PGT_NOTES") lines)"
else
	t_fail "NOTIFY: nothing more than that" "$(grep -c . "$PGT_NOTES") lines, want $(grep -c . "$EXPECTED")"
fi

pgt_no_secret
t_exit
