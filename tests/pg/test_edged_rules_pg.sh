#!/bin/bash
# test_edged_rules_pg.sh - the database's header rules, redirects and
# unmatched paths (migration 0016: environments.headers, redirects and
# unmatched) against a real PostgreSQL 15 this test starts
# (tests/lib_pg.sh), edged in database mode as the user nobody, in front
# of tests/tools/echo_backend.py:
#   - an environment with all three: its request_set reaching the
#     backend, its response_set the client, its redirect answered 308
#     with $path and $query (the backend not reached), a path no route
#     matches 404 route_not_found, its domain's /app prefix served;
#   - an UPDATE of headers applied at once;
#   - a refused value (a hop-by-hop name in headers; redirects not a
#     list; a redirect to a javascript: URL) in the same transaction as a
#     new project: the environment left out, logged with its id and the
#     reason, counted in edge_db_rows_skipped_total{table=
#     "environments.rules"}, the other project applied; fixed, served
#     again;
#   - a JSON null in headers, redirects and inject: none, the environment
#     served;
#   - unmatched other than deployment or not_found refused by the CHECK;
#   - environments.compression (0017): its algorithms and min_bytes; a
#     level out of range refused, counted;
#   - environments.inject (0018): its head_end snippet before </head> of
#     the backend's text/html page; a snippet not a string, an unknown
#     key (file) and a value not an object each refused beside a new
#     project, as above;
#   - environments.challenge_mode, challenge_difficulty, challenge_ttl
#     (0019): a project challenged, a browser's page with the column's
#     difficulty; the CHECKs; a difficulty of 40 (the CHECK dropped)
#     refused by edged, skipping the environment, logged and counted;
#   - edged restarted with the database stopped: the local snapshot keeps
#     the rules and the inject group.
# Runs against build/edged and build/asan/edged. Needs root (the postgres
# user, edged as nobody).
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/lib_edged.sh
. "$(dirname "$0")/../lib_edged.sh"
# shellcheck source=tests/lib_pg.sh
. "$(dirname "$0")/../lib_pg.sh"
t_require_root
edged_begin curl python3 psql
edged_need_build
id nobody >/dev/null 2>&1 || {
	t_skip "rules from the database" "no user nobody"
	t_exit
	exit
}

BASE=$(edged_ports 4)
P_EDGE=$BASE
P_ADMIN=$((BASE + 1))
P_BACK=$((BASE + 2))
P_PG=$((BASE + 3))
SOCK="$T_TMP/ctl/edged.sock"
mkdir -p "$T_TMP/ctl"
chmod 755 "$T_TMP" "$T_TMP/ctl"
chown nobody "$T_TMP/ctl"
pg_begin "$P_PG"
if ! edged_backend "$P_BACK" python3 "$TOOLS/echo_backend.py" "$P_BACK" "$T_TMP/backend.log"; then
	t_fail "backend starts"
	t_exit
	exit
fi

# get HOST PATH: the status; the head in $T_TMP/h, the body in $T_TMP/b
get() {
	curl -s -m 10 -D "$T_TMP/h" -o "$T_TMP/b" -w '%{http_code}' -H "Host: $1" "http://127.0.0.1:$P_EDGE$2"
}

# field NAME: the response field NAME (one)
field() {
	tr -d '\r' <"$T_TMP/h" | awk -v n="$1" 'tolower($0) ~ "^" tolower(n) ":" { sub(/^[^:]*: */, ""); print; exit }'
}

# sent NAME: the field NAME the backend received
sent() {
	python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
print(next((v for n, v in d["headers"] if n.lower() == sys.argv[2].lower()), ""))' "$T_TMP/b" "$1" 2>/dev/null
}

# project_sql ID DOMAIN: a project whose environment ID-e serves DOMAIN
# (and DOMAIN/app by a domain row with a prefix) from the backend
project_sql() {
	echo "INSERT INTO projects (id, name) VALUES ('$1', '$1');
	INSERT INTO environments (id, project_id, name) VALUES ('$1-e', '$1', 'production');
	INSERT INTO deployments (id, environment_id, active) VALUES ('$1-d', '$1-e', true);
	INSERT INTO endpoints VALUES ('$1-d', '127.0.0.1:$P_BACK');
	INSERT INTO domains (domain, environment_id) VALUES ('$2', '$1-e');
	INSERT INTO domains (domain, path_prefix, environment_id) VALUES ('$2', '/app', '$1-e');"
}

SKIP='edge_db_rows_skipped_total{table="environments.rules"}'
# shellcheck disable=SC2016 # $path and $query are the rule's, not the shell's
RULES="UPDATE environments SET
	headers = '{\"request_set\": [\"X-Env: db\", \"X-Who: \$project_id\"], \"response_set\": [\"Cache-Control: no-store\"]}',
	redirects = '[{\"from\": \"/old/*\", \"to\": \"/new\$path\$query\", \"status\": 308}]',
	unmatched = 'not_found' WHERE id = 'r-e';"

run_suite() { # BIN LABEL
	local bin=$1 v=$2 n0 code snap="$T_TMP/snap-$2/db.json" i bad
	local page='<html><head><title>t</title><script>x()</script></head><body>hi</body></html>'

	if [ "$(pg_val "SELECT to_regclass('projects') IS NOT NULL")" = t ]; then
		pg_sql "TRUNCATE projects CASCADE; TRUNCATE ip_rules, edge_hosts, edge_change_log" >/dev/null
	fi
	mkdir -p "$T_TMP/snap-$v"
	chown nobody "$T_TMP/snap-$v"
	pg_edged_conf "$T_TMP/edge.conf" "$snap"
	EDGED_LOG="$T_TMP/edged-$v.log"
	if ! edged_start "$bin" "$T_TMP/edge.conf" -v; then
		t_fail "$v: edged starts" "$(tail -5 "$EDGED_LOG")"
		return
	fi

	# 1. all three
	pg_sql "BEGIN; $(project_sql r r.test) $RULES COMMIT;" >/dev/null
	pg_wait_applied
	code=$(get r.test /app/x)
	if [ "$code" = 200 ] && [ "$(sent X-Env)" = db ] && [ "$(sent X-Who)" = r ] &&
		[ "$(field Cache-Control)" = no-store ]; then
		t_ok "$v: environments.headers: request_set at the backend (a variable too), response_set at the client"
	else
		t_fail "$v: headers" "code $code; $(head -c 300 "$T_TMP/b") $(grep database "$EDGED_LOG" | tail -2)"
	fi
	n0=$(wc -l <"$T_TMP/backend.log")
	code=$(get r.test "/old/a/b?c=1")
	if [ "$code" = 308 ] && [ "$(field Location)" = "/new/a/b?c=1" ] &&
		[ "$(wc -l <"$T_TMP/backend.log")" = "$n0" ]; then
		t_ok "$v: environments.redirects: 308 with \$path and \$query, the backend not reached"
	else
		t_fail "$v: redirects" "code $code; $(field Location)"
	fi
	code=$(get r.test /other)
	if [ "$code" = 404 ] && grep -q '"error":"route_not_found"' "$T_TMP/b"; then
		t_ok "$v: environments.unmatched 'not_found': a path outside the domain's prefixes is 404 route_not_found"
	else
		t_fail "$v: unmatched" "code $code; $(head -c 200 "$T_TMP/b")"
	fi

	# 2. an UPDATE
	pg_sql "UPDATE environments SET headers = '{\"request_set\": [\"X-Env: db2\"]}' WHERE id = 'r-e'" >/dev/null
	pg_wait_applied
	code=$(get r.test /app/y)
	if [ "$code" = 200 ] && [ "$(sent X-Env)" = db2 ] && [ -z "$(field Cache-Control)" ]; then
		t_ok "$v: an UPDATE of headers applies at once"
	else
		t_fail "$v: update" "code $code; X-Env $(sent X-Env)"
	fi

	# 3. refused values, each beside a good project
	i=0
	for bad in "headers = '{\"request_set\": [\"Connection: close\"]}'|headers.request_set\\[0\\]: Connection is hop-by-hop" \
		"redirects = '{\"from\": \"/a\"}'|redirects: a list of objects is needed" \
		"redirects = '[{\"from\": \"/a\", \"to\": \"javascript:alert(1)\"}]'|redirects\\[0\\]: to: an http:// or https:// URL"; do
		i=$((i + 1))
		n0=$(edged_metric "$SKIP")
		pg_sql "BEGIN; UPDATE environments SET ${bad%%|*} WHERE id = 'r-e';
			$(project_sql "g$i" "g$i.test") COMMIT;" >/dev/null
		if pg_wait_applied &&
			edged_wait_log "database: environments row r-e: ${bad#*|}.*; skipped" &&
			edged_wait_metric "$SKIP" $((n0 + 1)) && [ "$(get "g$i.test" /app/z)" = 200 ] &&
			[ "$(get r.test /app/z)" = 503 ]; then
			t_ok "$v: a refused value ($(echo "${bad%%|*}" | cut -c1-40)...): the environment left out, logged with the reason, counted; another project applied"
		else
			t_fail "$v: refused value $i" "skipped $n0 -> $(edged_metric "$SKIP"), g$i $(get "g$i.test" /app/z), r $(get r.test /app/z) $(grep "r-e" "$EDGED_LOG" | tail -2)"
		fi
		pg_sql "UPDATE environments SET headers = NULL, redirects = NULL WHERE id = 'r-e'" >/dev/null
	done
	pg_sql "$RULES" >/dev/null
	pg_wait_applied
	if [ "$(get r.test /app/z)" = 200 ] && [ "$(sent X-Env)" = db ]; then
		t_ok "$v: fixed: served again with its rules"
	else
		t_fail "$v: fixed" "$(get r.test /app/z)"
	fi
	# a JSON null (an ORM's None) is no rules, as SQL's NULL
	n0=$(edged_metric "$SKIP")
	pg_sql "UPDATE environments SET headers = 'null'::jsonb, redirects = 'null'::jsonb, inject = 'null'::jsonb WHERE id = 'r-e'" >/dev/null
	pg_wait_applied
	code=$(get r.test /app/n)
	if [ "$code" = 200 ] && [ -z "$(sent X-Env)" ] && [ "$(get r.test /old/x)" = 404 ] &&
		[ "$(edged_metric "$SKIP")" = "$n0" ]; then
		t_ok "$v: JSON null in headers, redirects and inject: none, the environment served"
	else
		t_fail "$v: JSON null" "code $code; skipped $n0 -> $(edged_metric "$SKIP") $(grep "r-e" "$EDGED_LOG" | tail -1)"
	fi
	pg_sql "$RULES" >/dev/null
	pg_wait_applied
	# environments.compression (0017)
	pg_sql "UPDATE environments SET compression = '{\"algorithms\": [\"gzip\"], \"min_bytes\": 0}' WHERE id = 'r-e'" >/dev/null
	pg_wait_applied
	code=$(curl -s -m 10 -D "$T_TMP/h" -o "$T_TMP/b" -w '%{http_code}' -H "Host: r.test" \
		-H "Accept-Encoding: br, gzip" "http://127.0.0.1:$P_EDGE/app/c")
	if [ "$code" = 200 ] && [ "$(field Content-Encoding)" = gzip ] &&
		/usr/bin/python3 -c 'import json, sys, zlib; json.loads(zlib.decompress(open(sys.argv[1], "rb").read(), 31))' "$T_TMP/b"; then
		t_ok "$v: environments.compression: its algorithms (gzip for a client of br, gzip) and min_bytes 0 (a small JSON answer coded)"
	else
		t_fail "$v: compression" "code $code; $(field Content-Encoding)"
	fi
	n0=$(edged_metric "$SKIP")
	pg_sql "UPDATE environments SET compression = '{\"level\": {\"gzip\": 99}}' WHERE id = 'r-e'" >/dev/null
	if pg_wait_applied && edged_wait_log "database: environments row r-e: compression.level.gzip: .*; skipped" &&
		edged_wait_metric "$SKIP" $((n0 + 1)); then
		t_ok "$v: a compression level out of range: the environment skipped, logged, counted"
	else
		t_fail "$v: bad compression" "skipped $n0 -> $(edged_metric "$SKIP")"
	fi
	pg_sql "UPDATE environments SET compression = NULL WHERE id = 'r-e'" >/dev/null
	pg_wait_applied
	# environments.inject (0018): echo_backend.py's /html page
	pg_sql "UPDATE environments SET inject = '{\"head_end\": \"<script>x()</script>\"}' WHERE id = 'r-e'" >/dev/null
	pg_wait_applied
	code=$(get r.test /app/html)
	if [ "$code" = 200 ] && [ "$(cat "$T_TMP/b")" = "$page" ]; then
		t_ok "$v: environments.inject: its head_end before </head> of a text/html answer"
	else
		t_fail "$v: inject" "code $code; $(head -c 200 "$T_TMP/b") $(grep "r-e" "$EDGED_LOG" | tail -1)"
	fi
	i=3
	for bad in "{\"head_end\": 5}|inject.head_end: a string" \
		"{\"file\": \"/etc/passwd\"}|inject: \"file\" is not a key" \
		"\"<script>x()</script>\"|inject: an object is needed"; do
		i=$((i + 1))
		n0=$(edged_metric "$SKIP")
		pg_sql "BEGIN; UPDATE environments SET inject = '${bad%%|*}' WHERE id = 'r-e';
			$(project_sql "g$i" "g$i.test") COMMIT;" >/dev/null
		if pg_wait_applied &&
			edged_wait_log "database: environments row r-e: ${bad#*|}.*; skipped" &&
			edged_wait_metric "$SKIP" $((n0 + 1)) && [ "$(get "g$i.test" /app/z)" = 200 ] &&
			[ "$(get r.test /app/html)" = 503 ]; then
			t_ok "$v: inject = '${bad%%|*}' refused: the environment left out, logged with the reason, counted; another project applied"
		else
			t_fail "$v: refused inject $i" "skipped $n0 -> $(edged_metric "$SKIP"), g$i $(get "g$i.test" /app/z), r $(get r.test /app/html) $(grep "r-e" "$EDGED_LOG" | tail -2)"
		fi
	done
	# environments.challenge_* (0019), on a project of its own
	pg_sql "BEGIN; $(project_sql c c.test)
		UPDATE environments SET challenge_mode = 'always', challenge_difficulty = 8,
		challenge_ttl = '2 hours' WHERE id = 'c-e'; COMMIT;" >/dev/null
	pg_wait_applied
	code=$(get c.test /app/z)
	if [ "$code" = 403 ] && grep -q '"error":"challenge_required"' "$T_TMP/b" &&
		curl -s -m 10 -H "Accept: text/html" -H "Host: c.test" "http://127.0.0.1:$P_EDGE/" | grep -qE '"1\.[0-9]+\.8\.'; then
		t_ok "$v: environments.challenge_mode 'always', difficulty 8: challenged (JSON; a browser's page with a token of 8 bits)"
	else
		t_fail "$v: challenge columns" "code $code; $(head -c 200 "$T_TMP/b")"
	fi
	if ! pg_sql "UPDATE environments SET challenge_mode = 'sometimes' WHERE id = 'c-e'" >/dev/null 2>&1 &&
		! pg_sql "UPDATE environments SET challenge_difficulty = 29 WHERE id = 'c-e'" >/dev/null 2>&1 &&
		! pg_sql "UPDATE environments SET challenge_ttl = '10 seconds' WHERE id = 'c-e'" >/dev/null 2>&1; then
		t_ok "$v: challenge_mode 'sometimes', difficulty 29, ttl 10 s refused by the columns' CHECKs"
	else
		t_fail "$v: challenge CHECKs"
	fi
	n0=$(edged_metric "$SKIP")
	pg_sql "ALTER TABLE environments DROP CONSTRAINT IF EXISTS environments_challenge_difficulty_check;
		BEGIN; UPDATE environments SET challenge_difficulty = 40 WHERE id = 'c-e';
		$(project_sql c2 c2.test) COMMIT;" >/dev/null
	if pg_wait_applied && edged_wait_log "database: environments row c-e: challenge_difficulty 40: not between 1 and 28; skipped" &&
		edged_wait_metric "$SKIP" $((n0 + 1)) && [ "$(get c2.test /app/z)" = 200 ] && [ "$(get c.test /app/z)" = 503 ]; then
		t_ok "$v: challenge_difficulty 40 (the CHECK dropped) refused by edged: the environment left out, logged, counted; another project applied"
	else
		t_fail "$v: difficulty 40" "skipped $n0 -> $(edged_metric "$SKIP") $(grep "c-e" "$EDGED_LOG" | tail -2)"
	fi
	pg_sql "UPDATE environments SET challenge_difficulty = 8 WHERE id = 'c-e';
		ALTER TABLE environments ADD CONSTRAINT environments_challenge_difficulty_check
		CHECK (challenge_difficulty BETWEEN 1 AND 28);" >/dev/null
	pg_wait_applied
	# kept for the snapshot (4.)
	pg_sql "UPDATE environments SET inject = '{\"head_end\": \"<script>x()</script>\"}' WHERE id = 'r-e'" >/dev/null
	pg_wait_applied
	code=$(get r.test /app/html)
	if [ "$code" = 200 ] && [ "$(cat "$T_TMP/b")" = "$page" ]; then
		t_ok "$v: inject fixed: the environment served again, the snippet in"
	else
		t_fail "$v: inject fixed" "code $code; $(head -c 200 "$T_TMP/b")"
	fi
	if ! pg_sql "UPDATE environments SET unmatched = '404' WHERE id = 'r-e'" >/dev/null 2>&1; then
		t_ok "$v: unmatched '404' refused by the column's CHECK"
	else
		t_fail "$v: unmatched CHECK"
	fi

	# 4. the local snapshot keeps them
	for ((i = 0; i < 100; i++)); do
		grep -q '"unmatched_not_found": true' "$snap" 2>/dev/null &&
			grep -q 'X-Env: db"' "$snap" && grep -q '"head_end"' "$snap" &&
			grep -q '"mode": "always"' "$snap" && break
		sleep 0.05
	done
	edged_stop 10
	edged_sanitizers_clean "$v: sanitizers silent" && t_ok "$v: no sanitizer report"
	pg_stop
	EDGED_LOG="$T_TMP/edged-$v-snap.log"
	if edged_start "$bin" "$T_TMP/edge.conf" -v && [ "$(get r.test /app/s)" = 200 ] &&
		[ "$(sent X-Env)" = db ] && [ "$(get r.test /old)" = 308 ] &&
		[ "$(field Location)" = /new ] && [ "$(get r.test /elsewhere)" = 404 ] &&
		[ "$(get r.test /app/html)" = 200 ] && [ "$(cat "$T_TMP/b")" = "$page" ] &&
		[ "$(get c.test /app/z)" = 403 ] && grep -q challenge_required "$T_TMP/b"; then
		t_ok "$v: restarted with the database stopped: the snapshot's headers, redirects, unmatched, inject and challenge apply"
	else
		t_fail "$v: from the snapshot" "$(get r.test /app/s) $(grep -E "snapshot" "$EDGED_LOG" | tail -2)"
	fi
	edged_stop 10
	edged_sanitizers_clean "$v: sanitizers silent (from the snapshot)"
	pg_start || t_fail "PostgreSQL starts again"
}

run_suite "$EDGED" edged
edged_asan && run_suite "$EDGED_ASAN" asan
t_exit
