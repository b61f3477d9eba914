#!/bin/bash
# test_edged_acme_pg.sh - ACME with the database (acme.storage =
# "database"; docs/acme.md): two edged on one PostgreSQL 15, host A on
# 127.0.0.1 and host B on 127.0.0.2 (the same ports), against Debian's
# pebble (tests/lib_acme.sh), with the normal and the ASan build:
#   - the environment's tls = 'auto' read from the database; A (with an
#     acme group) orders its name, which resolves to B (no acme group of
#     its own): B answers the CA's http-01 request from acme_challenges
#     (its analytics, outcome acme_challenge; A's has none); the
#     certificate lands in the certificates table (acme_name) and both
#     hosts serve it by the NOTIFY path; the challenge rows and the lease
#     are gone afterwards;
#   - B restarted with the acme group too: at the renewal (two thirds of
#     pebble's 30 s) exactly one of the two orders (the database's lease),
#     both serve the new certificate, and B's start ordered nothing
#     while the row was there, though the certificates table was locked
#     for its first 4 s (it waits for the table's first read).
# Needs root (the postgres user; 127.0.0.2 is loopback's on Linux).
# About 45 s a build.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/lib_edged.sh
. "$(dirname "$0")/../lib_edged.sh"
# shellcheck source=tests/lib_pg.sh
. "$(dirname "$0")/../lib_pg.sh"
# shellcheck source=tests/lib_acme.sh
. "$(dirname "$0")/../lib_acme.sh"
t_require_root
edged_begin python3 openssl psql curl
edged_need_build
acme_need

BASE=$(edged_ports 12 45000 46000)
P_EDGE=$BASE # both hosts' plain port: pebble's http-01 port
P_TLS=$((BASE + 1))
P_ADMIN=$((BASE + 2))
P_ADMIN_B=$((BASE + 3))
P_ACME=$((BASE + 4))
P_MGMT=$((BASE + 5))
P_DNS=$((BASE + 6))
P_CTS=$((BASE + 7))
P_BACK=$((BASE + 8))
P_PG=$((BASE + 9))
NAME=shared.acme.test
pg_begin "$P_PG"

if ! bash "$TOOLS/mkchain.sh" "$T_TMP" dflt 0 "DNS:default.test" >"$T_TMP/mk.log" 2>&1 ||
	! acme_pebble_start "$P_EDGE" "$P_TLS" 30; then
	t_fail "pebble and pebble-challtestsrv start" "$(tail -5 "$T_TMP/pebble.log")"
	t_exit
	exit 1
fi
if ! "$EDGECTL" --pg "$PG_CONNINFO" db migrate >"$T_TMP/migrate.out" 2>&1; then
	t_fail "edgectl db migrate" "$(tail -3 "$T_TMP/migrate.out")"
	t_exit
	exit 1
fi
if ! edged_backend "$P_BACK" /usr/bin/python3 "$TOOLS/echo_backend.py" "$P_BACK" "$T_TMP/echo.log"; then
	t_fail "the backend starts"
	t_exit
	exit 1
fi
pg_sql "INSERT INTO projects (id, name) VALUES ('p', 'p');
INSERT INTO environments (id, project_id, name, tls) VALUES ('p-prod', 'p', 'production', 'auto');
INSERT INTO deployments (id, environment_id, active) VALUES ('p-d1', 'p-prod', true);
INSERT INTO endpoints VALUES ('p-d1', '127.0.0.1:$P_BACK');
INSERT INTO domains (domain, environment_id) VALUES ('$NAME', 'p-prod');" >/dev/null

# conf HOST IP ACME V: host HOST's configuration on address IP, with the
# acme group when ACME is 1
conf() {
	local h=$1 ip=$2 admin=$P_ADMIN
	[ "$h" = b ] && admin=$P_ADMIN_B
	mkdir -p "$T_TMP/$4-$h"
	cat <<CONF
listen = [ "$ip:$P_EDGE" ];
workers = 1;
user = "root";
control_socket = "$T_TMP/$4-$h/ctl.sock";
admin_listen = "127.0.0.1:$admin";
pin_dir = "/sys/fs/bpf/edge-test-$T_ID-none";
pg = "$PG_CONNINFO";
pg_snapshot = "$T_TMP/$4-$h/snap.json";
host_name = "host-$h";
tls = { listen = [ "$ip:$P_TLS" ];
  certificates = ( { cert = "$T_TMP/dflt-0.pem"; key = "$T_TMP/dflt.key"; } ); };
analytics = { file = "$T_TMP/$4-$h/requests.jsonl"; };
CONF
	[ "$3" = 1 ] && cat <<CONF
acme = { directory = "$ACME_DIR"; ca = "$T_TMP/wfe-root.crt";
  account_key = "$T_TMP/$4-account.key"; retry_min = "1s"; retry_max = "2s"; };
CONF
}

# start H BIN CONF: host H's edged (log $T_TMP/H.log, pid in PID_H)
start() {
	local h=$1 i pid
	"$2" -c "$3" -f >"$T_TMP/$h.log" 2>&1 &
	pid=$!
	edged_track "$pid"
	eval "PID_$h=$pid"
	for ((i = 0; i < 600; i++)); do
		grep -q "serving on" "$T_TMP/$h.log" && return 0
		kill -0 "$pid" 2>/dev/null || return 1
		sleep 0.05
	done
	return 1
}
stop() { # H
	local pid
	pid=$(eval "echo \$PID_$1")
	kill -TERM "$pid" 2>/dev/null
	for ((i = 0; i < 200; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
	kill -9 "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
}
# serial IP: the serial of the certificate the host on IP serves for
# NAME, verified to pebble's root ("" when none verifies)
serial() {
	openssl s_client -connect "$1:$P_TLS" -servername "$NAME" \
		-CAfile "$T_TMP/pebble-chain.pem" -verify_return_error -verify_hostname "$NAME" \
		</dev/null 2>/dev/null | openssl x509 -noout -serial 2>/dev/null | cut -d= -f2
}
# orders V H: how many orders host H's edged has made
orders() {
	"$EDGECTL" --socket "$T_TMP/$1-$2/ctl.sock" certs --json 2>/dev/null |
		python3 -c 'import json, sys; a = json.load(sys.stdin)["acme"]; print(sum(n["orders"] for n in a["names"]) if a else 0)' 2>/dev/null
}
row() { pg_val "SELECT md5(chain_pem) FROM certificates WHERE acme_name = '$NAME'"; }

run_suite() {
	local bin=$1 v=$2 a b s0 s1 s2 r1 i oa ob locker

	pg_sql "DELETE FROM certificates; DELETE FROM acme_leases; DELETE FROM acme_challenges" >/dev/null
	acme_dns "$NAME" 127.0.0.2 # the CA validates at host B
	conf b 127.0.0.2 0 "$v" >"$T_TMP/$v-b0.conf"
	conf a 127.0.0.1 1 "$v" >"$T_TMP/$v-a.conf"
	if ! start b "$bin" "$T_TMP/$v-b0.conf" || ! start a "$bin" "$T_TMP/$v-a.conf"; then
		t_fail "$v: both edged start" "$(tail -3 "$T_TMP/a.log" "$T_TMP/b.log")"
		stop a
		stop b
		return
	fi
	for ((i = 0; i < 120; i++)); do
		[ -n "$(row)" ] && break
		sleep 0.25
	done
	r1=$(row)
	for ((i = 0; i < 40; i++)); do
		s1=$(serial 127.0.0.1)
		s2=$(serial 127.0.0.2)
		[ -n "$s1" ] && [ "$s1" = "$s2" ] && break
		sleep 0.25
	done
	a=$(grep -c 'acme_challenge' "$T_TMP/$v-b/requests.jsonl" 2>/dev/null)
	b=$(grep -c 'acme_challenge' "$T_TMP/$v-a/requests.jsonl" 2>/dev/null)
	if [ -n "$r1" ] && [ "${a:-0}" -ge 1 ] && [ "${b:-0}" = 0 ] &&
		grep -q "acme: $NAME: ordering" "$T_TMP/a.log" && ! grep -q "acme: $NAME: ordering" "$T_TMP/b.log"; then
		t_ok "$v: host A orders, host B (no acme group) answers the CA's http-01 request from acme_challenges ($a request(s)), the certificate stored by acme_name"
	else
		t_fail "$v: A orders, B answers" "row '$r1' B $a A $b $(grep acme "$T_TMP/a.log" | tail -3)"
	fi
	if [ -n "$s1" ] && [ "$s1" = "$s2" ]; then
		t_ok "$v: both hosts serve the issued certificate (the certificates table's NOTIFY), verified to pebble's root"
	else
		t_fail "$v: both serve" "A '$s1' B '$s2'"
	fi
	for ((i = 0; i < 20; i++)); do
		[ "$(pg_val "SELECT count(*) FROM acme_challenges") $(pg_val "SELECT count(*) FROM acme_leases")" = "0 0" ] && break
		sleep 0.1
	done
	a=$(pg_val "SELECT count(*) FROM acme_challenges")
	b=$(pg_val "SELECT count(*) FROM acme_leases")
	if [ "$a $b" = "0 0" ]; then
		t_ok "$v: after the order, no challenge row and no lease left"
	else
		t_fail "$v: rows left" "challenges $a leases $b"
	fi

	# ---- B with the acme group too: one order per renewal
	s0=$s1
	stop b
	conf b 127.0.0.2 1 "$v" >"$T_TMP/$v-b1.conf"
	# a slow database: the certificates table locked for 4 s while B
	# starts, so B knows the name (from the routes) long before it can
	# read the certificate the fleet holds for it
	psql -X -q -d "$PG_CONNINFO" -c "BEGIN; LOCK TABLE certificates IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(4); COMMIT;" >/dev/null 2>&1 &
	locker=$!
	sleep 0.5
	if ! start b "$bin" "$T_TMP/$v-b1.conf"; then
		t_fail "$v: B restarts with the acme group" "$(tail -3 "$T_TMP/b.log")"
		wait "$locker"
		stop a
		return
	fi
	wait "$locker"
	oa=$(orders "$v" a)
	for ((i = 0; i < 60; i++)); do
		grep -q "acme: the database's certificates read" "$T_TMP/b.log" && break
		sleep 0.25
	done
	sleep 1
	ob=$(orders "$v" b)
	if [ "$ob" = 0 ] && grep -q "acme: the database's certificates read" "$T_TMP/b.log"; then
		t_ok "$v: B's start orders nothing, the certificates table locked for 4 s at its start: the database already holds the name's certificate"
	else
		t_fail "$v: B at start" "orders $ob $(grep acme "$T_TMP/b.log" | tail -3)"
	fi
	for ((i = 0; i < 160; i++)); do
		[ "$(row)" != "$r1" ] && break
		sleep 0.25
	done
	sleep 3 # the other host's look at its lease, if it looks
	a=$(($(orders "$v" a) - oa))
	b=$(orders "$v" b)
	for ((i = 0; i < 40; i++)); do
		s1=$(serial 127.0.0.1)
		s2=$(serial 127.0.0.2)
		[ -n "$s1" ] && [ "$s1" = "$s2" ] && [ "$s1" != "$s0" ] && break
		sleep 0.25
	done
	if [ "$(row)" != "$r1" ] && [ $((a + b)) = 1 ] && [ -n "$s1" ] && [ "$s1" = "$s2" ] &&
		[ "$s1" != "$s0" ]; then
		t_ok "$v: renewed at two thirds of the lifetime by one host of two (A $a, B $b orders; the lease), both serving the new certificate"
	else
		t_fail "$v: one renewal" "orders A $a B $b serials '$s1' '$s2' $(grep -h "acme: $NAME" "$T_TMP/a.log" "$T_TMP/b.log" | tail -6)"
	fi
	stop a
	stop b
	if grep -q 'AddressSanitizer\|LeakSanitizer\|runtime error' "$T_TMP/a.log" "$T_TMP/b.log"; then
		t_fail "$v: sanitizers" "$(grep -h -m3 'Sanitizer\|runtime error' "$T_TMP/a.log" "$T_TMP/b.log")"
	else
		t_ok "$v: no sanitizer report"
	fi
}

for bin in "$B/edged" "$EDGED_ASAN"; do
	label=normal
	[ "$bin" = "$EDGED_ASAN" ] && label=asan
	if [ ! -x "$bin" ]; then
		t_skip "$label" "$bin not built"
		continue
	fi
	[ "$label" = asan ] && { edged_asan || continue; }
	run_suite "$bin" "$label"
done
t_exit
