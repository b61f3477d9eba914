#!/bin/bash
# test_edged_auth_pg.sh - API keys and JWT from the database (migration
# 0022: environments.api_keys and jwt, the api_keys table) against a real
# PostgreSQL 15 this test starts (tests/lib_pg.sh), edged in database mode
# as the user nobody, in front of tests/tools/echo_backend.py:
#   - environments.api_keys with two api_keys rows: no key 401, each key
#     admitted with its name sent upstream;
#   - a row deleted: its key refused at once, the other still admitted;
#     a row inserted: admitted;
#   - a bad key_sha256 refused by the CHECK; with the CHECK dropped, a bad
#     row beside a good one in one transaction: the good key admitted,
#     the bad row logged and counted in
#     edge_db_rows_skipped_total{table="api_keys"};
#   - TRUNCATE api_keys: every key refused, the environment still gated;
#   - environments.jwt with PEM text and with a JWKS object: a token of
#     the audience admitted, its sub copied; another audience refused;
#   - an api_keys row of an environment whose api_keys is false: logged
#     and counted;
#   - a jwt value edged refuses (an unknown key, no keys) beside a new
#     project: the environment left out, logged, counted in
#     table="environments.rules", the other project applied;
#   - environments.auth_request (0024) to tests/tools/fauth_check.py's
#     service: admitted with the copied field, a refusal relayed; values
#     edged refuses each skipping the environment, logged and counted;
#   - edged restarted with the database stopped: the local snapshot keeps
#     the keys, the JWT check and the forward auth.
# Runs against build/edged and build/asan/edged. Needs root (the postgres
# user, edged as nobody).
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/lib_edged.sh
. "$(dirname "$0")/../lib_edged.sh"
# shellcheck source=tests/lib_pg.sh
. "$(dirname "$0")/../lib_pg.sh"
t_require_root
edged_begin curl psql openssl
edged_need_build
id nobody >/dev/null 2>&1 || {
	t_skip "auth from the database" "no user nobody"
	t_exit
	exit
}
if ! /usr/bin/python3 -c 'import jwt, cryptography' 2>/dev/null; then
	t_skip "auth from the database" "python3-jwt is not installed (scripts/install-deps installs it)"
	t_exit
	exit
fi

BASE=$(edged_ports 5)
P_EDGE=$BASE
P_ADMIN=$((BASE + 1))
P_BACK=$((BASE + 2))
P_PG=$((BASE + 3))
P_AUTH=$((BASE + 4))
SOCK="$T_TMP/ctl/edged.sock"
mkdir -p "$T_TMP/ctl"
chmod 755 "$T_TMP" "$T_TMP/ctl"
chown nobody "$T_TMP/ctl"
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$T_TMP/rsa.pem" 2>/dev/null
openssl pkey -in "$T_TMP/rsa.pem" -pubout -out "$T_TMP/rsa.pub" 2>/dev/null
openssl rand -hex 32 >"$T_TMP/oct.hex"
/usr/bin/python3 "$TOOLS/auth_check.py" jwks "$T_TMP/jwks.json" "$T_TMP/rsa.pub" "$(cat "$T_TMP/oct.hex")"
pg_begin "$P_PG"
if ! edged_backend "$P_BACK" /usr/bin/python3 "$TOOLS/echo_backend.py" "$P_BACK" "$T_TMP/backend.log"; then
	t_fail "backend starts"
	t_exit
	exit
fi
if ! edged_backend "$P_AUTH" /usr/bin/python3 "$TOOLS/fauth_check.py" serve "$P_AUTH" "$T_TMP/auth.log"; then
	t_fail "the authorization service starts"
	t_exit
	exit
fi

# get HOST [CURL ARG...]: the status of GET /; the body in $T_TMP/b
get() {
	local h=$1
	shift
	curl -s -m 10 -o "$T_TMP/b" -w '%{http_code}' -H "Host: $h" "$@" "http://127.0.0.1:$P_EDGE/"
}

# fget PATH: the status of GET PATH on f.test; the body in $T_TMP/b
fget() {
	curl -s -m 10 -o "$T_TMP/b" -w '%{http_code}' -H "Host: f.test" "http://127.0.0.1:$P_EDGE$1"
}

# sent NAME: the field NAME the backend received
sent() {
	/usr/bin/python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
print(next((v for n, v in d["headers"] if n.lower() == sys.argv[2].lower()), ""))' "$T_TMP/b" "$1" 2>/dev/null
}

# project_sql ID DOMAIN: a project whose environment ID-e serves DOMAIN
project_sql() {
	echo "INSERT INTO projects (id, name) VALUES ('$1', '$1');
	INSERT INTO environments (id, project_id, name) VALUES ('$1-e', '$1', 'production');
	INSERT INTO deployments (id, environment_id, active) VALUES ('$1-d', '$1-e', true);
	INSERT INTO endpoints VALUES ('$1-d', '127.0.0.1:$P_BACK');
	INSERT INTO domains (domain, environment_id) VALUES ('$2', '$1-e');"
}

sha() { printf %s "$1" | sha256sum | cut -d' ' -f1; }

# token AUDIENCE: an RS256 JWT of rsa.pem, sub "db-user"
token() {
	/usr/bin/python3 -c '
import jwt, sys, time
print(jwt.encode({"aud": sys.argv[2], "sub": "db-user", "exp": int(time.time()) + 300},
                 open(sys.argv[1], "rb").read(), algorithm="RS256", headers={"kid": "r1"}))' "$T_TMP/rsa.pem" "$1"
}

# jwt_json KEYS-FILE pem|jwks: the environments.jwt value, SQL-quoted
jwt_json() {
	/usr/bin/python3 -c '
import json, sys
keys = open(sys.argv[1]).read()
if sys.argv[2] == "jwks":
    keys = json.loads(keys)
print(json.dumps({"keys": keys, "audience": "edge", "algorithms": ["RS256"],
                  "copy_claims": ["sub"]}).replace("\x27", "\x27\x27"))' "$1" "$2"
}

SKIP='edge_db_rows_skipped_total{table="environments.rules"}'
KSKIP='edge_db_rows_skipped_total{table="api_keys"}'

run_suite() { # BIN LABEL
	local bin=$1 v=$2 n0 snap="$T_TMP/snap-$2/db.json" i bad tok
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
	pg_wait_applied

	# 1. environments.api_keys and its rows
	pg_sql "BEGIN; $(project_sql k k.test)
		UPDATE environments SET api_keys = true WHERE id = 'k-e';
		INSERT INTO api_keys (environment_id, name, key_sha256) VALUES
		('k-e', 'ci', '$(sha secret-ci)'), ('k-e', 'ops', '$(sha secret-ops)'); COMMIT;" >/dev/null
	pg_wait_applied
	if [ "$(get k.test)" = 401 ] && grep -q '"error":"unauthorized"' "$T_TMP/b" &&
		[ "$(get k.test -H "X-Api-Key: secret-ci")" = 200 ] && [ "$(sent X-Api-Key-Name)" = ci ] &&
		[ "$(get k.test -H "Authorization: Bearer secret-ops")" = 200 ] && [ "$(sent X-Api-Key-Name)" = ops ]; then
		t_ok "$v: environments.api_keys with two rows: no key 401, each key admitted, its name sent upstream"
	else
		t_fail "$v: api_keys rows" "$(get k.test) $(head -c 200 "$T_TMP/b")"
	fi
	pg_sql "DELETE FROM api_keys WHERE name = 'ops'; INSERT INTO api_keys (environment_id, name, key_sha256)
		VALUES ('k-e', 'new', '$(sha secret-new)')" >/dev/null
	pg_wait_applied
	if [ "$(get k.test -H "X-Api-Key: secret-ops")" = 401 ] && [ "$(get k.test -H "X-Api-Key: secret-ci")" = 200 ] &&
		[ "$(get k.test -H "X-Api-Key: secret-new")" = 200 ] && [ "$(sent X-Api-Key-Name)" = new ]; then
		t_ok "$v: a row deleted: its key refused; a row inserted: admitted; the others kept"
	else
		t_fail "$v: revoke" "ops $(get k.test -H "X-Api-Key: secret-ops") ci $(get k.test -H "X-Api-Key: secret-ci")"
	fi
	if ! pg_sql "INSERT INTO api_keys (environment_id, name, key_sha256) VALUES ('k-e', 'x', 'ABC')" >/dev/null 2>&1 &&
		! pg_sql "INSERT INTO api_keys (environment_id, name, key_sha256) VALUES ('k-e', 'a b', '$(sha y)')" >/dev/null 2>&1; then
		t_ok "$v: a key_sha256 not of 64 lowercase hex digits, a name with a space: refused by the CHECKs"
	else
		t_fail "$v: api_keys CHECKs"
	fi
	n0=$(edged_metric "$KSKIP")
	pg_sql "ALTER TABLE api_keys DROP CONSTRAINT IF EXISTS api_keys_key_sha256_check;
		INSERT INTO api_keys (environment_id, name, key_sha256) VALUES
		('k-e', 'bad', 'not-a-digest'), ('k-e', 'good', '$(sha secret-good)');" >/dev/null
	if pg_wait_applied && edged_wait_log "database: api_keys row .environment k-e, name bad.: NAME and the key.s SHA-256.*; skipped" &&
		edged_wait_metric "$KSKIP" $((n0 + 1)) && [ "$(get k.test -H "X-Api-Key: secret-good")" = 200 ] &&
		[ "$(get k.test -H "X-Api-Key: secret-ci")" = 200 ]; then
		t_ok "$v: a bad api_keys row (the CHECK dropped) beside a good one: the good key admitted, the bad row logged and counted"
	else
		t_fail "$v: bad key row" "skipped $n0 -> $(edged_metric "$KSKIP") $(grep "api_keys" "$EDGED_LOG" | tail -2)"
	fi
	pg_sql "DELETE FROM api_keys WHERE name = 'bad';
		ALTER TABLE api_keys ADD CONSTRAINT api_keys_key_sha256_check CHECK (key_sha256 ~ '^[0-9a-f]{64}\$');" >/dev/null
	pg_sql "TRUNCATE api_keys" >/dev/null
	pg_wait_applied
	if [ "$(get k.test -H "X-Api-Key: secret-ci")" = 401 ] && [ "$(get k.test)" = 401 ]; then
		t_ok "$v: TRUNCATE api_keys: every key refused, the environment still gated"
	else
		t_fail "$v: truncate" "$(get k.test -H "X-Api-Key: secret-ci")"
	fi
	pg_sql "INSERT INTO api_keys (environment_id, name, key_sha256) VALUES ('k-e', 'ci', '$(sha secret-ci)')" >/dev/null

	# 2. environments.jwt: PEM text, a JWKS object
	tok=$(token edge)
	for form in pem jwks; do
		if [ $form = pem ]; then f=$T_TMP/rsa.pub; else f=$T_TMP/jwks.json; fi
		pg_sql "BEGIN; $(project_sql "j$form" "j$form.test")
			UPDATE environments SET jwt = '$(jwt_json "$f" $form)' WHERE id = 'j$form-e'; COMMIT;" >/dev/null
		pg_wait_applied
		if [ "$(get "j$form.test")" = 401 ] && [ "$(get "j$form.test" -H "Authorization: Bearer $tok")" = 200 ] &&
			[ "$(sent X-Jwt-Claim-sub)" = db-user ] &&
			[ "$(get "j$form.test" -H "Authorization: Bearer $(token other)")" = 401 ]; then
			t_ok "$v: environments.jwt with $form keys: a token of the audience admitted (sub copied), another audience and none refused"
		else
			t_fail "$v: jwt $form" "$(get "j$form.test" -H "Authorization: Bearer $tok") $(head -c 200 "$T_TMP/b") $(grep "j$form-e" "$EDGED_LOG" | tail -2)"
		fi
	done
	i=0
	for bad in '{"keys": "x", "issuer": 5}|jwt: keys .a JWKS object or PEM text. is required' \
		'{"audience": "edge"}|jwt: keys' '{"keys": {"keys": []}, "foo": 1}|jwt: unknown key "foo"' \
		'{"keys": {"keys": []}}|JWKS: no signing key'; do
		i=$((i + 1))
		n0=$(edged_metric "$SKIP")
		pg_sql "BEGIN; UPDATE environments SET jwt = '${bad%%|*}' WHERE id = 'jpem-e';
			$(project_sql "g$i" "g$i.test") COMMIT;" >/dev/null
		if pg_wait_applied && edged_wait_log "database: environments row jpem-e: ${bad#*|}.*; skipped" &&
			edged_wait_metric "$SKIP" $((n0 + 1)) && [ "$(get "g$i.test")" = 200 ] && [ "$(get jpem.test)" = 503 ]; then
			t_ok "$v: jwt = '${bad%%|*}' refused: the environment left out, logged, counted; another project applied"
		else
			t_fail "$v: refused jwt $i" "skipped $n0 -> $(edged_metric "$SKIP") $(grep "jpem-e" "$EDGED_LOG" | tail -2)"
		fi
	done
	if ! pg_sql "UPDATE environments SET jwt = '[1]' WHERE id = 'jpem-e'" >/dev/null 2>&1; then
		t_ok "$v: a jwt that is not a JSON object refused by the column's CHECK"
	else
		t_fail "$v: jwt CHECK"
	fi
	pg_sql "UPDATE environments SET jwt = '$(jwt_json "$T_TMP/rsa.pub" pem)' WHERE id = 'jpem-e'" >/dev/null
	pg_wait_applied
	# a key for an environment that asks for none: said, counted
	n0=$(edged_metric "$KSKIP")
	pg_sql "INSERT INTO api_keys (environment_id, name, key_sha256) VALUES ('jpem-e', 'stray', '$(sha stray)')" >/dev/null
	if pg_wait_applied && edged_wait_log "database: api_keys row .environment jpem-e, name stray.: its environment's api_keys is false" &&
		edged_wait_metric "$KSKIP" $((n0 + 1)) && [ "$(get jpem.test -H "X-Api-Key: stray")" = 401 ]; then
		t_ok "$v: an api_keys row of an environment whose api_keys is false: logged, counted, no key asked for (its JWT still)"
	else
		t_fail "$v: stray key" "skipped $n0 -> $(edged_metric "$KSKIP")"
	fi

	# 3. environments.auth_request (0024): forward auth
	pg_sql "BEGIN; $(project_sql f f.test)
		UPDATE environments SET auth_request = '{\"url\": \"http://127.0.0.1:$P_AUTH/check\",
		\"timeout\": \"2s\", \"copy_headers\": [\"X-Auth-User\"], \"cache_ttl\": \"0s\"}'
		WHERE id = 'f-e'; COMMIT;" >/dev/null
	pg_wait_applied
	if [ "$(get f.test -H "X-Auth-User: forged")" = 200 ] && [ "$(sent X-Auth-User)" = default ] &&
		[ "$(fget /deny)" = 401 ] && [ "$(cat "$T_TMP/b")" = "please sign in" ]; then
		t_ok "$v: environments.auth_request: the service's 2xx admits (X-Auth-User copied, the client's dropped), its 401 relayed"
	else
		t_fail "$v: auth_request" "$(get f.test) $(head -c 200 "$T_TMP/b") $(grep "f-e" "$EDGED_LOG" | tail -2)"
	fi
	i=0
	for bad in '{"url": "https://127.0.0.1/"}|auth_request: url: https:// is not supported' \
		'{"url": "http://127.0.0.1/", "timeout": "5m"}|auth_request: timeout' \
		'{"url": "http://127.0.0.1/", "copy_headers": ["Host"]}|auth_request: copy_headers.0.' \
		'{"timeout": "1s"}|auth_request: url .a string. is required' \
		'{"url": "http://127.0.0.1/", "method": "GET"}|auth_request: unknown key "method"'; do
		i=$((i + 1))
		n0=$(edged_metric "$SKIP")
		pg_sql "BEGIN; UPDATE environments SET auth_request = '${bad%%|*}' WHERE id = 'f-e';
			$(project_sql "h$i" "h$i.test") COMMIT;" >/dev/null
		if pg_wait_applied && edged_wait_log "database: environments row f-e: ${bad#*|}.*; skipped" &&
			edged_wait_metric "$SKIP" $((n0 + 1)) && [ "$(get "h$i.test")" = 200 ] && [ "$(get f.test)" = 503 ]; then
			t_ok "$v: auth_request = '${bad%%|*}' refused: the environment left out, logged, counted; another project applied"
		else
			t_fail "$v: refused auth_request $i" "skipped $n0 -> $(edged_metric "$SKIP") $(grep "f-e" "$EDGED_LOG" | tail -2)"
		fi
	done
	if ! pg_sql "UPDATE environments SET auth_request = '\"http://x\"' WHERE id = 'f-e'" >/dev/null 2>&1; then
		t_ok "$v: an auth_request that is not a JSON object refused by the column's CHECK"
	else
		t_fail "$v: auth_request CHECK"
	fi
	pg_sql "UPDATE environments SET auth_request = '{\"url\": \"http://127.0.0.1:$P_AUTH/check\",
		\"copy_headers\": [\"X-Auth-User\"]}' WHERE id = 'f-e'" >/dev/null
	pg_wait_applied

	# 4. the local snapshot keeps them
	for ((i = 0; i < 100; i++)); do
		grep -q '"auth"' "$snap" 2>/dev/null && grep -q "$(sha secret-ci)" "$snap" &&
			grep -q 'BEGIN PUBLIC KEY' "$snap" && grep -q "127.0.0.1:$P_AUTH/check" "$snap" && break
		sleep 0.05
	done
	edged_stop 10
	edged_sanitizers_clean "$v: sanitizers silent" && t_ok "$v: no sanitizer report"
	pg_stop
	EDGED_LOG="$T_TMP/edged-$v-snap.log"
	if edged_start "$bin" "$T_TMP/edge.conf" -v && [ "$(get k.test -H "X-Api-Key: secret-ci")" = 200 ] &&
		[ "$(get k.test -H "X-Api-Key: secret-ops")" = 401 ] &&
		[ "$(get jpem.test -H "Authorization: Bearer $tok")" = 200 ] && [ "$(get jjwks.test)" = 401 ] &&
		[ "$(get jjwks.test -H "Authorization: Bearer $tok")" = 200 ] &&
		[ "$(get f.test)" = 200 ] && [ "$(sent X-Auth-User)" = default ] && [ "$(fget /deny)" = 401 ]; then
		t_ok "$v: restarted with the database stopped: the snapshot's API keys, JWT and forward auth apply"
	else
		t_fail "$v: from the snapshot" "$(get k.test -H "X-Api-Key: secret-ci") $(grep -E "snapshot" "$EDGED_LOG" | tail -2)"
	fi
	edged_stop 10
	edged_sanitizers_clean "$v: sanitizers silent (from the snapshot)"
	pg_start || t_fail "PostgreSQL starts again"
}

run_suite "$EDGED" edged
edged_asan && run_suite "$EDGED_ASAN" asan
t_exit
