#!/bin/bash
# test_edged_upstream_tls_pg.sh - the database's deployments.tls
# (migration 0014) against a real PostgreSQL 15 this test starts
# (tests/lib_pg.sh), edged in database mode as the user nobody, and python3
# ssl backends (tests/tools/echo_backend.py with ECHO_TLS_*), certificates
# by tests/tools/mkchain.sh:
#   - a deployment with an https:// endpoint and no tls: 502
#     upstream_tls_failed (the system's store knows no test CA); its tls
#     set by an UPDATE (ca, server_name): 200;
#   - mTLS (cert, key) against a backend that wants a client certificate:
#     200, and the same group without them: 502;
#   - verify = false against a CA nobody knows: 200, said in the log;
#   - refused values (a CA file that is missing, a key that is not the
#     certificate's, a string for verify, an unknown key, not JSON, a FIFO
#     for the CA: never opened for reading) each
#     logged with the deployment's id and reason and counted
#     (edge_db_rows_skipped_total{table="deployments.tls"}), the
#     deployment's https:// endpoints answering 502 upstream_tls_failed
#     rather than being tried without the group, while another project's
#     good tls in the same transaction applies; the project read again
#     with the same bad value: not logged or counted again;
#   - a row's CA file broken and edged reloaded (SIGHUP): read again,
#     said, the files read before serving on; a CA file missing when its
#     row was applied, put in place, edged reloaded: served;
#   - edged restarted with the database stopped, from its local snapshot:
#     the rows' tls applies again (200), a refused one stays refused.
# Runs against build/edged and build/asan/edged. Needs root (the postgres
# user, edged as nobody).
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/lib_edged.sh
. "$(dirname "$0")/../lib_edged.sh"
# shellcheck source=tests/lib_pg.sh
. "$(dirname "$0")/../lib_pg.sh"
t_require_root
edged_begin curl python3 psql openssl
edged_need_build
id nobody >/dev/null 2>&1 || {
	t_skip "deployments.tls" "no user nobody"
	t_exit
	exit
}

BASE=$(edged_ports 6)
P_EDGE=$BASE
P_ADMIN=$((BASE + 1))
P_OK=$((BASE + 2))    # up.test, signed by CA "up"
P_MTLS=$((BASE + 3))  # up.test, wants a client certificate of CA "cl"
P_OTHER=$((BASE + 4)) # up.test, signed by CA "other"
P_PG=$((BASE + 5))
SOCK="$T_TMP/ctl/edged.sock"
C="$T_TMP/certs"
mkdir -p "$C" "$T_TMP/ctl"
chmod 755 "$T_TMP" "$C" "$T_TMP/ctl"
chown nobody "$T_TMP/ctl"
pg_begin "$P_PG"

if ! bash "$TOOLS/mkchain.sh" "$C" up 0 "DNS:up.test" >/dev/null ||
	! bash "$TOOLS/mkchain.sh" "$C" cl 0 "DNS:edge-client" >/dev/null ||
	! bash "$TOOLS/mkchain.sh" "$C" other 0 "DNS:up.test" >/dev/null; then
	t_fail "test certificates made"
	t_exit
	exit
fi
chmod 644 "$C"/*
cp "$C/up-root.crt" "$C/ca.pem" # the CA file the reload test replaces
mkfifo "$T_TMP/fifo"              # a CA "file" that would block a reader

tls_backend() { # PORT NAME CERT KEY [CLIENT_CA]
	ECHO_TLS_CERT=$3 ECHO_TLS_KEY=$4 ECHO_TLS_CLIENT_CA=${5:-} \
		edged_backend "$1" python3 "$TOOLS/echo_backend.py" "$1" "$T_TMP/$2.jsonl" "$2"
}
if ! tls_backend "$P_OK" ok "$C/up-0.pem" "$C/up.key" ||
	! tls_backend "$P_MTLS" mtls "$C/up-0.pem" "$C/up.key" "$C/cl-root.crt" ||
	! tls_backend "$P_OTHER" other "$C/other-0.pem" "$C/other.key"; then
	t_fail "TLS backends start"
	t_exit
	exit
fi

write_conf() { # FILE SNAPSHOT
	{
		edged_conf_head "$P_ADMIN" "$SOCK" 1 nobody
		cat <<CONF
pin_dir = "/sys/fs/bpf/edge-test-$T_ID-none";
pg = "$PG_CONNINFO";
pg_snapshot = "$2";
timeouts = { upstream_connect = "2s"; };
CONF
	} >"$1"
	chmod 644 "$1"
}

ctl() { "$EDGECTL" --socket "$SOCK" "$@"; }

# code HOST: the status of a request to HOST, its body in $T_TMP/body
code() {
	curl -s -m 10 -o "$T_TMP/body" -w '%{http_code}' -H "Host: $1" "http://127.0.0.1:$P_EDGE/x"
}

# tls_failed HOST: 0 when a request to HOST is 502 upstream_tls_failed
tls_failed() {
	[ "$(code "$1")" = 502 ] && grep -q '"error":"upstream_tls_failed"' "$T_TMP/body"
}

metric() {
	curl -s -m 5 "http://127.0.0.1:$P_ADMIN/metrics" | awk -v k="$1" '$1 == k { v = $2 } END { print v + 0 }'
}
SKIP='edge_db_rows_skipped_total{table="deployments.tls"}'

# set_tls DEPLOYMENT VALUE: deployments.tls = VALUE (NULL, or JSON)
set_tls() {
	if [ "$2" = NULL ]; then
		pg_sql "UPDATE deployments SET tls = NULL WHERE id = '$1'" >/dev/null
	else
		pg_sql "UPDATE deployments SET tls = \$j\$$2\$j\$ WHERE id = '$1'" >/dev/null
	fi
}

# wait_code HOST WANT: 0 once a request to HOST answers WANT (5 s)
wait_code() {
	local i
	for ((i = 0; i < 50; i++)); do
		[ "$(code "$1")" = "$2" ] && return 0
		sleep 0.1
	done
	return 1
}

count() { grep -cF -- "$1" "$EDGED_LOG"; }

wait_metric() { # NAME WANT
	local i
	for ((i = 0; i < 50; i++)); do
		[ "$(metric "$1")" = "$2" ] && return 0
		sleep 0.1
	done
	return 1
}

# project ID DOMAIN PORT TLS: a project with one environment whose active
# deployment ID-d has the endpoint https://127.0.0.1:PORT and tls TLS
project_sql() {
	local tls=NULL
	[ "$4" != NULL ] && tls="\$j\$$4\$j\$"
	echo "INSERT INTO projects (id, name) VALUES ('$1', '$1');
	INSERT INTO environments (id, project_id, name) VALUES ('$1-e', '$1', 'production');
	INSERT INTO deployments (id, environment_id, active, tls) VALUES ('$1-d', '$1-e', true, $tls);
	INSERT INTO endpoints VALUES ('$1-d', 'https://127.0.0.1:$3');
	INSERT INTO domains (domain, environment_id) VALUES ('$2', '$1-e');"
}

UPCA="{\"ca\": \"$C/ca.pem\", \"server_name\": \"up.test\"}"
MTLS="{\"ca\": \"$C/up-root.crt\", \"server_name\": \"up.test\", \"cert\": \"$C/cl-0.pem\", \"key\": \"$C/cl.key\"}"

run_suite() { # BIN LABEL
	local bin=$1 v=$2 n0 n1 ok said snap="$T_TMP/snap-$2/db.json"

	if [ "$(pg_val "SELECT to_regclass('projects') IS NOT NULL")" = t ]; then
		pg_sql "TRUNCATE projects CASCADE; TRUNCATE ip_rules, edge_hosts, edge_change_log" >/dev/null
	fi
	mkdir -p "$T_TMP/snap-$v"
	chown nobody "$T_TMP/snap-$v"
	cp "$C/up-root.crt" "$C/ca.pem"
	write_conf "$T_TMP/edge.conf" "$snap"
	EDGED_LOG="$T_TMP/edged-$v.log"
	if ! edged_start "$bin" "$T_TMP/edge.conf" -v; then
		t_fail "$v: edged starts" "$(tail -5 "$EDGED_LOG")"
		return
	fi

	# 1. no tls: the system's store, the request's host: refused; the
	# group set by an UPDATE: served
	pg_sql "BEGIN; $(project_sql a a.test "$P_OK" NULL) COMMIT;" >/dev/null
	if pg_wait_applied && tls_failed a.test; then
		t_ok "$v: an https:// endpoint of the database without tls: 502 upstream_tls_failed (the system's store)"
	else
		t_fail "$v: no tls" "$(code a.test) $(head -c 200 "$T_TMP/body")"
	fi
	set_tls a-d "$UPCA"
	if wait_code a.test 200 && grep -q '"backend": "ok"' "$T_TMP/body"; then
		t_ok "$v: deployments.tls set by an UPDATE (ca, server_name): 200 from the backend"
	else
		t_fail "$v: tls set" "$(code a.test) $(head -c 200 "$T_TMP/body") $(grep -E "database|TLS" "$EDGED_LOG" | tail -3)"
	fi

	# 2. mTLS: with cert and key 200; without, the backend refuses
	pg_sql "BEGIN; $(project_sql m m.test "$P_MTLS" "$MTLS")
		$(project_sql n n.test "$P_MTLS" "$UPCA") COMMIT;" >/dev/null
	if pg_wait_applied && [ "$(code m.test)" = 200 ] && tls_failed n.test; then
		t_ok "$v: mTLS from deployments.tls (cert, key): 200; the same backend without them: 502 upstream_tls_failed"
	else
		t_fail "$v: mTLS" "m $(code m.test) n $(code n.test) $(grep -E "TLS" "$EDGED_LOG" | tail -2)"
	fi

	# 3. verify = false: served from a CA nobody knows, said
	pg_sql "BEGIN; $(project_sql o o.test "$P_OTHER" '{"verify": false}') COMMIT;" >/dev/null
	if pg_wait_applied && [ "$(code o.test)" = 200 ] &&
		edged_wait_log "deployment o-d: the certificates of its https:// endpoints are not verified \(tls.verify = false\)"; then
		t_ok "$v: verify = false: served from an unknown CA, said in the log"
	else
		t_fail "$v: verify false" "$(code o.test) $(grep -E "o-d" "$EDGED_LOG" | tail -2)"
	fi

	# 4. refused values: logged, counted, 502 (never tried without the
	# group); another project's good tls in the same transaction applies
	n0=$(metric "$SKIP")
	pg_sql "BEGIN;
		UPDATE deployments SET tls = \$j\${\"ca\": \"$C/missing.pem\"}\$j\$ WHERE id = 'a-d';
		$(project_sql g g.test "$P_OK" "$UPCA")
		COMMIT;" >/dev/null
	if edged_wait_log "database: deployment 'a-d': tls: ca $C/missing.pem: No such file or directory; its https:// endpoints answer 502 upstream_tls_failed" &&
		pg_wait_applied && tls_failed a.test && [ "$(code g.test)" = 200 ]; then
		t_ok "$v: a CA file that is missing: logged with the deployment and reason, 502 upstream_tls_failed; another project's good tls in the same transaction serves"
	else
		t_fail "$v: missing CA" "a $(code a.test) g $(code g.test) $(grep -E "database" "$EDGED_LOG" | tail -3)"
	fi
	ok=1
	while IFS='|' read -r val why; do
		set_tls a-d "$val"
		if ! edged_wait_log "database: deployment 'a-d': tls: $why; its https:// endpoints answer 502 upstream_tls_failed" ||
			! pg_wait_applied || ! tls_failed a.test; then
			ok=0
			t_fail "$v: bad value $val" "$(code a.test) $(grep "deployment 'a-d'" "$EDGED_LOG" | tail -2)"
		fi
	done <<BAD
{"ca": "$C/up-root.crt", "server_name": "up.test", "cert": "$C/cl-0.pem", "key": "$C/up.key"}|key $C/up.key: .*
{"ca": "$C/up-root.crt", "verify": "no"}|verify: expected a boolean, found a string
{"ca": "$C/up-root.crt", "sni": "up.test"}|sni: unknown key
{"ca": "$C/up-root.crt", "verify": 1e400}|cannot read the JSON: .*
{"ca": "$T_TMP/fifo", "server_name": "up.test"}|ca $T_TMP/fifo: not a regular file
BAD
	n1=$((n0 + 6))
	if [ "$ok" = 1 ] && wait_metric "$SKIP" "$n1"; then
		t_ok "$v: 6 refused values (a FIFO for ca among them: never read) each logged with the reason, counted in $SKIP, each answering 502"
	else
		t_fail "$v: refused values counted" "ok $ok, counted $(($(metric "$SKIP") - n0)) not 6"
	fi
	said=$(count "database: deployment 'a-d': tls:")
	pg_sql "UPDATE environments SET name = 'prod' WHERE id = 'a-e'" >/dev/null
	if pg_wait_applied && sleep 1.2 && [ "$(count "database: deployment 'a-d': tls:")" = "$said" ] &&
		[ "$(metric "$SKIP")" = "$n1" ]; then
		t_ok "$v: the project read again with the same bad value: not logged or counted again"
	else
		t_fail "$v: said once" "$(count "database: deployment 'a-d': tls:") lines, not $said; counted $(metric "$SKIP"), not $n1"
	fi
	set_tls a-d "$UPCA"
	wait_code a.test 200 || t_fail "$v: a good value again serves" "$(code a.test)"

	# 5. a reload reads the rows' files again: the CA file made
	# unreadable garbage, SIGHUP: said, the files read before serving on
	echo garbage >"$C/ca.pem"
	kill -HUP "$EPID"
	if edged_wait_log "database: deployments.tls: ca $C/ca.pem: .*; the files read before serve on" &&
		[ "$(code a.test)" = 200 ]; then
		t_ok "$v: a row's CA file broken, edged reloaded: read again, refused with the reason, the files read before serving on"
	else
		t_fail "$v: CA reread" "$(code a.test) $(grep -E "reload|tls" "$EDGED_LOG" | tail -2)"
	fi
	cp "$C/up-root.crt" "$C/ca.pem"
	# a CA file missing when the row came: 502; put in place, edged
	# reloaded: tried again, served
	rm -f "$C/later.pem"
	set_tls a-d "{\"ca\": \"$C/later.pem\", \"server_name\": \"up.test\"}"
	if edged_wait_log "deployment 'a-d': tls: ca $C/later.pem: No such file or directory" &&
		pg_wait_applied && tls_failed a.test; then
		cp "$C/up-root.crt" "$C/later.pem"
		kill -HUP "$EPID"
		if wait_code a.test 200; then
			t_ok "$v: a CA file missing when the row was applied: 502; the file put in place and edged reloaded: served"
		else
			t_fail "$v: missing CA put in place" "$(code a.test) $(grep -E "a-d|reload" "$EDGED_LOG" | tail -3)"
		fi
	else
		t_fail "$v: a CA file missing" "$(code a.test) $(grep -E "a-d" "$EDGED_LOG" | tail -2)"
	fi
	set_tls a-d "$UPCA"
	wait_code a.test 200 || t_fail "$v: a.test served again" "$(code a.test)"

	# 6. the local snapshot keeps the groups: a refused one stays
	# refused, edged restarted with the database stopped
	set_tls n-d '{"verify": "no"}'
	for ((n1 = 0; n1 < 100; n1++)); do
		grep -q '"tls_refused"' "$snap" 2>/dev/null && grep -q "\"cert\": \"$C/cl-0.pem\"" "$snap" && break
		sleep 0.05
	done
	edged_stop 10
	edged_sanitizers_clean "$v: sanitizers silent" && t_ok "$v: no sanitizer report"
	pg_stop
	EDGED_LOG="$T_TMP/edged-$v-snap.log"
	if edged_start "$bin" "$T_TMP/edge.conf" -v && wait_code a.test 200 &&
		[ "$(code m.test)" = 200 ] && [ "$(code o.test)" = 200 ] && tls_failed n.test; then
		t_ok "$v: restarted with the database stopped: the local snapshot's tls groups serve (ca, mTLS, verify = false), the refused one stays refused"
	else
		t_fail "$v: from the snapshot" "a $(code a.test) m $(code m.test) o $(code o.test) n $(code n.test) $(grep -E "snapshot|tls" "$EDGED_LOG" | tail -4)"
	fi
	edged_stop 10
	edged_sanitizers_clean "$v: sanitizers silent (from the snapshot)"
	pg_start || t_fail "PostgreSQL starts again"
}

run_suite "$EDGED" edged
edged_asan && run_suite "$EDGED_ASAN" asan
t_exit
