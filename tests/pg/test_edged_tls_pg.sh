#!/bin/bash
# test_edged_tls_pg.sh - certificates from the database (the certificates
# table, migration 0007; docs/tls.md) served by edged beside its file
# certificate, against a real PostgreSQL 15 (tests/lib_pg.sh) and
# openssl s_client / Python's ssl as clients:
#   - edged started with the database down serves its file certificate,
#     then catches up when the database comes up (a row inserted before)
#   - a row updated: the next handshake gets the new certificate (by
#     NOTIFY) while an established keep-alive connection goes on
#   - a row inserted applies; a row whose names are not in its
#     subjectAltName, a key that does not match, garbage PEM: refused
#     (logged with the row's id, never the key; counted in /metrics and
#     named in edgectl status --json), the previous certificate of a
#     refused row serving on, the good rows of the same transaction
#     applied
#   - a name served by the file and the database with one key type: the
#     file's serves, warned
#   - a row deleted: its name falls back to the default certificate
#   - the updated row's certificate served over QUIC (tls.quic_listen)
#     too (build/tools/h3evil prints the certificate's SHA-256)
#   - a row updated to a chain of more than 10 certificates after the
#     leaf (tests/tools/mkchain.sh), and a row of 3,000 copies: refused by
#     id with the reason, counted, the previous version serving on, and a
#     route change right after them applied at once
# Runs against build/edged and build/asan/edged. Needs root (the
# postgres user).
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/lib_edged.sh
. "$(dirname "$0")/../lib_edged.sh"
# shellcheck source=tests/lib_pg.sh
. "$(dirname "$0")/../lib_pg.sh"
t_require_root
edged_begin python3 openssl psql
edged_need_build

BASE=$(edged_ports 5)
P_EDGE=$BASE
P_ADMIN=$((BASE + 1))
P_TLS=$((BASE + 2))
P_B=$((BASE + 3))
P_PG=$((BASE + 4))
SOCK="$T_TMP/edged.sock"
C="$T_TMP/certs"
mkdir -p "$C"
chmod 755 "$T_TMP" "$C"
pg_begin "$P_PG"

# ---- certificates ---------------------------------------------------------

# leaf NAME rsa|ec SANS: C/NAME.key, C/NAME.pem (leaf then the CA), CN NAME
leaf() {
	local name=$1 kind=$2 sans=$3
	if [ "$kind" = ec ]; then
		openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$C/$name.key" 2>/dev/null
	else
		openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$C/$name.key" 2>/dev/null
	fi
	openssl req -new -key "$C/$name.key" -subj "/CN=$name" -addext "subjectAltName=$sans" \
		-out "$C/$name.csr" 2>/dev/null &&
		openssl x509 -req -in "$C/$name.csr" -CA "$C/ca.crt" -CAkey "$C/ca.key" \
			-CAcreateserial -days 2 -copy_extensions copy -out "$C/$name.crt" 2>/dev/null &&
		cat "$C/$name.crt" "$C/ca.crt" >"$C/$name.pem"
}

make_certs() {
	openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=ca" \
		-addext basicConstraints=critical,CA:TRUE \
		-addext keyUsage=critical,keyCertSign,cRLSign,digitalSignature \
		-keyout "$C/ca.key" -out "$C/ca.crt" >/dev/null 2>&1 &&
		leaf default rsa "DNS:default.tls.test" &&
		leaf file-ec ec "DNS:both.tls.test" &&
		leaf db-v1 ec "DNS:db.tls.test" &&
		leaf db-v2 ec "DNS:db.tls.test" &&
		leaf db-both ec "DNS:both.tls.test" &&
		leaf x ec "DNS:x.tls.test,DNS:x2.tls.test" &&
		leaf y rsa "DNS:y.tls.test" &&
		leaf other ec "DNS:db.tls.test" &&
		"$TOOLS/mkchain.sh" "$C" deep 10 "DNS:deep.tls.test" &&
		"$TOOLS/mkchain.sh" "$C" deeper 11 "DNS:deep.tls.test" || return 1
	# the leaf and 3,000 copies of the certificate above it
	python3 -c 'import sys; sys.stdout.write(open(sys.argv[1]).read() + open(sys.argv[2]).read() * 3000)' \
		"$C/deeper.crt" "$C/deeper-i11.crt" >"$C/copies.pem"
	chmod 644 "$C"/*
}

# q FILE: FILE's text as an SQL literal (dollar-quoted)
# shellcheck disable=SC2016 # the dollar quotes are SQL's
q() { printf '$pem$%s$pem$' "$(cat "$1")"; }

# ---- clients --------------------------------------------------------------

# served_cn NAME: the CN of the certificate edged serves for server name NAME
served_cn() {
	timeout 10 openssl s_client -connect "127.0.0.1:$P_TLS" -servername "$1" </dev/null 2>/dev/null |
		sed -n 's/^subject=.*CN *= *\([^,/]*\).*/\1/p' | head -1
}
# wait_cn NAME CN: 0 once NAME is served CN (8 s at most); $WAITED ms
wait_cn() {
	local i t0
	t0=$(date +%s%N)
	for ((i = 0; i < 80; i++)); do
		if [ "$(served_cn "$1")" = "$2" ]; then
			WAITED=$((($(date +%s%N) - t0) / 1000000))
			return 0
		fi
		sleep 0.1
	done
	return 1
}
metric() {
	curl -s -m 5 "http://127.0.0.1:$P_ADMIN/metrics" | awk -v n="$1" '$1 == n { print $2 }'
}
status_json() { "$EDGECTL" --socket "$SOCK" status --json >"$T_TMP/st.json" 2>&1; }

write_conf() {
	{
		edged_conf_head "$P_ADMIN" "$SOCK"
		cat <<CONF
pg = "$PG_CONNINFO";
pg_snapshot = "$T_TMP/snap/db.json";
tls = {
  listen = [ "127.0.0.1:$P_TLS" ];
  quic_listen = [ "127.0.0.1:$P_TLS" ];
  certificates = (
    { cert = "$C/default.pem"; key = "$C/default.key"; },
    { cert = "$C/file-ec.pem"; key = "$C/file-ec.key"; }
  );
};
projects = (
  { id = "site";
    environments = (
      { id = "main"; domains = [ "db.tls.test", "default.tls.test" ];
        deployment = { id = "main-1"; upstreams = [ "127.0.0.1:$P_B" ]; }; }
    );
  }
);
CONF
	} >"$1"
}

# keepalive.py: one TLS connection to db.tls.test; a request, then, once
# the file $T_TMP/go exists, another on the same connection; prints the
# peer's CN and each status
cat >"$T_TMP/keepalive.py" <<'PY'
import os, socket, ssl, sys, time
port, go = int(sys.argv[1]), sys.argv[2]
ctx = ssl.create_default_context(cafile=sys.argv[3])
s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10),
                    server_hostname="db.tls.test")
cn = dict(x[0] for x in s.getpeercert()["subject"])["commonName"]
def get():
    s.sendall(b"GET / HTTP/1.1\r\nHost: db.tls.test\r\n\r\n")
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = s.recv(4096)
        if not d:
            return "closed"
        buf += d
    head, _, body = buf.partition(b"\r\n\r\n")
    n = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            n = int(line.split(b":")[1])
    while len(body) < n:
        body += s.recv(4096)
    return head.split(b" ")[1].decode()
print("cn", cn, "first", get(), flush=True)
for _ in range(200):
    if os.path.exists(go):
        break
    time.sleep(0.05)
print("second", get(), flush=True)
PY

run_suite() { # BIN LABEL
	local bin=$1 v=$2 id1 idy

	pg_sql "DELETE FROM certificates" >/dev/null
	rm -f "$T_TMP/go"
	# 1. a row inserted while edged is away; edged started with the
	# database down serves its file certificates, then catches up
	id1=$(pg_val "INSERT INTO certificates (names, chain_pem, key_pem) VALUES ('{}', $(q "$C/db-v1.pem"), $(q "$C/db-v1.key")) RETURNING id")
	pg_stop
	write_conf "$T_TMP/edge.conf"
	if ! edged_start "$bin" "$T_TMP/edge.conf" -v; then
		t_fail "$v: edged starts with the database down" "$(tail -5 "$EDGED_LOG")"
		pg_start
		return
	fi
	edged_wait_port "$P_TLS"
	if [ "$(served_cn db.tls.test)" = default ]; then
		t_ok "$v: database down: db.tls.test gets the default (file) certificate"
	else
		t_fail "$v: database down: default served" "$(served_cn db.tls.test)"
	fi
	pg_start
	if wait_cn db.tls.test db-v1; then
		t_ok "$v: the database back: its certificate row $id1 served for db.tls.test (${WAITED} ms after the first look)"
	else
		t_fail "$v: catch-up after the database came up" "$(served_cn db.tls.test); $(grep -m3 'tls\|database' "$EDGED_LOG")"
	fi

	# 2. an update under an established keep-alive connection
	python3 "$T_TMP/keepalive.py" "$P_TLS" "$T_TMP/go" "$C/ca.crt" >"$T_TMP/ka.out" 2>&1 &
	local kpid=$!
	for ((i = 0; i < 100; i++)); do
		grep -q '^cn' "$T_TMP/ka.out" && break
		sleep 0.05
	done
	pg_sql "UPDATE certificates SET chain_pem = $(q "$C/db-v2.pem"), key_pem = $(q "$C/db-v2.key"), updated_at = now() WHERE id = $id1" >/dev/null
	if wait_cn db.tls.test db-v2 && [ "$WAITED" -lt 1500 ]; then
		t_ok "$v: a row updated: the next handshake gets the new certificate (${WAITED} ms: by NOTIFY)"
	else
		t_fail "$v: an update applied by NOTIFY" "$(served_cn db.tls.test) after ${WAITED:-?} ms"
	fi
	# and over QUIC (tls.quic_listen): the same row's new certificate
	"$B/tools/h3evil" --port "$P_TLS" --sni db.tls.test --timeout 10 >"$T_TMP/h3.out" 2>&1
	if [ "$(sed -n 's/^cert_sha256=//p' "$T_TMP/h3.out")" = "$(openssl x509 -in "$C/db-v2.pem" -outform der | sha256sum | cut -c1-64)" ]; then
		t_ok "$v: HTTP/3's handshake serves the updated row's certificate too"
	else
		t_fail "$v: the updated row over QUIC" "$(head -3 "$T_TMP/h3.out")"
	fi
	# the change is in: the version checks after it (every 2 s) must not
	# read the table again (checked after 2b)
	local f1 t_upd=$SECONDS
	status_json
	f1=$(json_field "$T_TMP/st.json" daemon.status.database.certificate_fetches)
	touch "$T_TMP/go"
	wait "$kpid"
	if grep -q '^cn db-v1 first 200' "$T_TMP/ka.out" && grep -q '^second 200' "$T_TMP/ka.out"; then
		t_ok "$v: the keep-alive connection made on the old certificate goes on after the update ($(tr '\n' ' ' <"$T_TMP/ka.out"))"
	else
		t_fail "$v: keep-alive across the update" "$(cat "$T_TMP/ka.out")"
	fi

	# 2a. no second read of the table for a change already fetched: two
	# version checks (every 2 s) after the update, before any other change
	local f2
	while [ $((SECONDS - t_upd)) -lt 5 ]; do sleep 0.2; done
	status_json
	f2=$(json_field "$T_TMP/st.json" daemon.status.database.certificate_fetches)
	if [ -n "$f1" ] && [ "$f2" = "$f1" ]; then
		t_ok "$v: the version checks after the update do not read the certificates table again ($f1 fetches before, $f2 after)"
	else
		t_fail "$v: no refetch for a change already fetched" "fetches $f1 then $f2"
	fi

	# 2b. https_redirect and hsts from the database's environments
	pg_sql "BEGIN; DELETE FROM projects WHERE id = 'red';
INSERT INTO projects (id, name) VALUES ('red', 'red');
INSERT INTO environments (id, project_id, name, https_redirect, hsts) VALUES ('red-prod', 'red', 'production', true, true);
INSERT INTO deployments (id, environment_id, active) VALUES ('red-d1', 'red-prod', true);
INSERT INTO endpoints VALUES ('red-d1', '127.0.0.1:$P_B');
INSERT INTO domains (domain, environment_id) VALUES ('red.tls.test', 'red-prod'); COMMIT;" >/dev/null
	local code="" hsts=""
	for ((i = 0; i < 50; i++)); do
		code=$(curl -s -m 5 -o /dev/null -D "$T_TMP/red.head" -w '%{http_code}' -H "Host: red.tls.test" "http://127.0.0.1:$P_EDGE/p?q=1")
		[ "$code" = 308 ] && break
		sleep 0.1
	done
	hsts=$(curl -sk --http1.1 -m 5 -o /dev/null -D - --resolve "red.tls.test:$P_TLS:127.0.0.1" "https://red.tls.test:$P_TLS/" | tr -d '\r' | grep -i '^strict-transport-security:')
	if [ "$code" = 308 ] && grep -qi "^Location: https://red.tls.test:$P_TLS/p?q=1" "$T_TMP/red.head" &&
		[ "$hsts" = "Strict-Transport-Security: max-age=31536000" ] &&
		! curl -sk --http1.1 -m 5 -o /dev/null -D - --resolve "db.tls.test:$P_TLS:127.0.0.1" "https://db.tls.test:$P_TLS/" | grep -qi '^strict-transport'; then
		t_ok "$v: an environment with https_redirect and hsts in the database: plain HTTP 308 to https:// (path and query kept), HSTS over TLS; none for a file environment without them"
	else
		t_fail "$v: https_redirect/hsts from the database" "code $code; $(tr '\r\n' '  ' <"$T_TMP/red.head" | head -c 200); hsts '$hsts'"
	fi

	# 3. a name the file serves with an ECDSA certificate too: the file's
	# serves, warned; a new row with a names subset applies
	pg_sql "INSERT INTO certificates (names, chain_pem, key_pem) VALUES ('{x.tls.test}', $(q "$C/x.pem"), $(q "$C/x.key"))" >/dev/null
	pg_sql "INSERT INTO certificates (chain_pem, key_pem) VALUES ($(q "$C/db-both.pem"), $(q "$C/db-both.key"))" >/dev/null
	if wait_cn x.tls.test x && [ "$(served_cn x2.tls.test)" = default ] &&
		edged_wait_log "both.tls.test has two ECDSA certificates: $C/file-ec.pem serves it, not certificates row" &&
		[ "$(served_cn both.tls.test)" = file-ec ]; then
		t_ok "$v: a new row serves its names (x.tls.test, not x2.tls.test left out of names); a name in the file and a row: the file's serves, warned"
	else
		t_fail "$v: names and precedence" "x $(served_cn x.tls.test) x2 $(served_cn x2.tls.test) both $(served_cn both.tls.test); $(grep -m2 'two ECDSA' "$EDGED_LOG")"
	fi

	# 4. broken rows in one transaction with a good one: refused, named by
	# id; the previous certificate of the row serves on; the good row
	# applies
	pg_sql "BEGIN;
UPDATE certificates SET key_pem = $(q "$C/other.key") WHERE id = $id1;
INSERT INTO certificates (chain_pem, key_pem) VALUES ('not a certificate', 'not a key');
INSERT INTO certificates (names, chain_pem, key_pem) VALUES ('{nope.tls.test}', $(q "$C/x.pem"), $(q "$C/x.key"));
INSERT INTO certificates (chain_pem, key_pem) VALUES ($(q "$C/y.pem"), $(q "$C/y.key"));
COMMIT;" >/dev/null
	idy=$(pg_val "SELECT max(id) FROM certificates")
	if wait_cn y.tls.test y && [ "$(served_cn db.tls.test)" = db-v2 ] &&
		edged_wait_log "database certificate refused: certificates row $id1 key_pem: the key does not match.*its previous certificate serves on" &&
		edged_wait_log "database certificate refused: certificates row $((idy - 2)) chain_pem: no PEM certificate in it; not served" &&
		edged_wait_log "database certificate refused: certificates row $((idy - 1)): names: nope.tls.test is not in the certificate's subjectAltName"; then
		t_ok "$v: a key that does not match, garbage PEM, names not in the subjectAltName: each refused and named by id; row $id1's previous certificate serves on; the good row $idy applied"
	else
		t_fail "$v: broken rows" "y $(served_cn y.tls.test) db $(served_cn db.tls.test); $(grep -m4 'refused' "$EDGED_LOG")"
	fi
	status_json
	if [ "$(metric 'edge_tls_db_certificates{state="refused"}')" = 3 ] &&
		[ "$(metric 'edge_tls_db_certificates{state="served"}')" = 4 ] &&
		[ "$(json_field "$T_TMP/st.json" daemon.status.tls.db_refused_now)" = 3 ] &&
		grep -q "\"id\": *\"$id1\"" "$T_TMP/st.json"; then
		t_ok "$v: /metrics: 4 rows served, 3 refused; edgectl status --json names the refused rows"
	else
		t_fail "$v: refusals counted" "$(curl -s "http://127.0.0.1:$P_ADMIN/metrics" | grep "^edge_tls_db"); $(json_field "$T_TMP/st.json" daemon.status.tls)"
	fi
	if grep -q "PRIVATE KEY\|$(sed -n 2p "$C/other.key")" "$EDGED_LOG"; then
		t_fail "$v: no key material in the log" "$(grep -m1 'PRIVATE' "$EDGED_LOG")"
	else
		t_ok "$v: no key material in the log"
	fi

	# 5. the row fixed, then deleted: falls back to the default
	pg_sql "DELETE FROM certificates WHERE id = $id1" >/dev/null
	if wait_cn db.tls.test default && [ "$(served_cn x.tls.test)" = x ]; then
		t_ok "$v: a row deleted: db.tls.test falls back to the default certificate (${WAITED} ms), the other rows serve on"
	else
		t_fail "$v: delete" "$(served_cn db.tls.test)"
	fi

	# 6. chains longer than 10 certificates after the leaf: refused by
	# id, counted, the row's previous version serving on; 3,000 copies
	# refused the same way, counted before any is parsed, and a route
	# change just after them is not held up
	local idd idc t0 ms
	idd=$(pg_val "INSERT INTO certificates (chain_pem, key_pem) VALUES ($(q "$C/deep-10.pem"), $(q "$C/deep.key")) RETURNING id")
	if wait_cn deep.tls.test deep; then
		t_ok "$v: a row whose chain is 10 certificates after the leaf serves"
	else
		t_fail "$v: a chain of 10 after the leaf" "$(served_cn deep.tls.test); $(grep -m2 "row $idd" "$EDGED_LOG")"
	fi
	pg_sql "UPDATE certificates SET chain_pem = $(q "$C/deeper-11.pem"), key_pem = $(q "$C/deeper.key") WHERE id = $idd" >/dev/null
	{
		printf "BEGIN;\nINSERT INTO certificates (chain_pem, key_pem) VALUES (%s, %s);\n" "$(q "$C/copies.pem")" "$(q "$C/deeper.key")"
		echo "DELETE FROM projects WHERE id = 'chain';"
		echo "INSERT INTO projects (id, name) VALUES ('chain', 'chain');"
		echo "COMMIT;"
		echo "BEGIN;"
		echo "INSERT INTO environments (id, project_id, name) VALUES ('chain-prod', 'chain', 'production');"
		echo "INSERT INTO deployments (id, environment_id, active) VALUES ('chain-d1', 'chain-prod', true);"
		echo "INSERT INTO endpoints VALUES ('chain-d1', '127.0.0.1:$P_B');"
		echo "INSERT INTO domains (domain, environment_id) VALUES ('chain.tls.test', 'chain-prod');"
		echo "COMMIT;"
	} >"$T_TMP/copies.sql"
	psql -X -q -v ON_ERROR_STOP=1 -d "$PG_CONNINFO" -f "$T_TMP/copies.sql" >/dev/null ||
		t_fail "$v: the rows of 3,000 copies and a route inserted"
	t0=$(date +%s%N)
	for ((i = 0; i < 300; i++)); do
		[ "$(curl -s -m 5 -o /dev/null -w '%{http_code}' -H 'Host: chain.tls.test' "http://127.0.0.1:$P_EDGE/")" = 200 ] && break
		sleep 0.01
	done
	ms=$((($(date +%s%N) - t0) / 1000000))
	idc=$(pg_val "SELECT max(id) FROM certificates")
	status_json
	if edged_wait_log "database certificate refused: certificates row $idd chain_pem: 12 certificates in it: a certificate and at most 10 of its chain are served; its previous certificate serves on" &&
		edged_wait_log "database certificate refused: certificates row $idc chain_pem: 3001 certificates in it: a certificate and at most 10 of its chain are served; not served" &&
		[ "$(served_cn deep.tls.test)" = deep ] && [ "$ms" -lt 3000 ] &&
		[ "$(metric 'edge_tls_db_certificates{state="refused"}')" = 4 ] &&
		grep -q "\"id\": *\"$idc\"" "$T_TMP/st.json" && grep -q "\"id\": *\"$idd\"" "$T_TMP/st.json"; then
		t_ok "$v: a chain of 11 certificates after the leaf and one of 3,000 copies: refused by id with the reason, counted (4 refused in /metrics, both named in edgectl status), row $idd's previous chain serving on; a route committed just after them routed in $ms ms"
	else
		t_fail "$v: chains over the limit" "deep $(served_cn deep.tls.test); route after $ms ms; refused $(metric 'edge_tls_db_certificates{state="refused"}'); $(grep 'refused' "$EDGED_LOG" | tail -2)"
	fi
	edged_stop 5

	edged_sanitizers_clean "$v: sanitizers clean" && t_ok "$v: sanitizers clean (or not built with them)"
}

if ! make_certs; then
	t_fail "certificates made"
	t_exit
	exit 1
fi
if ! edged_backend "$P_B" python3 "$TOOLS/echo_backend.py" "$P_B" "$T_TMP/b.jsonl" B; then
	t_fail "backend starts"
	t_exit
	exit
fi
# the schema (edged migrates it at start, but starts here with the
# database down)
if ! "$EDGECTL" --pg "$PG_CONNINFO" db migrate >"$T_TMP/migrate.out" 2>&1; then
	t_fail "edgectl db migrate" "$(tail -3 "$T_TMP/migrate.out")"
	t_exit
	exit 1
fi
run_suite "$EDGED" edged
edged_asan && run_suite "$EDGED_ASAN" asan
t_exit
