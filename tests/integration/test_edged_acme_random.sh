#!/bin/bash
# test_edged_acme_random.sh - edged's ACME orders against a CA that fails
# at random (docs/acme.md), with the normal build over http-01 and the
# ASan build over tls-alpn-01. pebble runs with
#   PEBBLE_WFE_NONCEREJECT=80  four in five of its nonces refused
#                              (badNonce: the POST signed again, up to
#                              ACME_BADNONCE_RETRIES times; past that the
#                              order fails and backs off)
#   PEBBLE_VA_SLEEPTIME=2      each validation delayed 0-2 s at random
#   PEBBLE_AUTHZREUSE=50       half the authorizations reused
# and issues for 24 s, so each name renews at 16 s. Four names of two
# environments with tls = "auto" must each be issued twice (a first
# certificate and a renewal) and served, verified to pebble's root, and
# edged must have met pebble's badNonce (edgectl certs' bad_nonces).
# Failed orders (some 1 in 2) are printed: they back off and try again.
# Ports: 9 free ones in 44000-44999. About 45 s a build.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/lib_edged.sh
. "$(dirname "$0")/../lib_edged.sh"
# shellcheck source=tests/lib_acme.sh
. "$(dirname "$0")/../lib_acme.sh"
edged_begin python3 openssl curl
acme_need

BASE=$(edged_ports 9 44000 45000)
P_EDGE=$BASE         # edged's plain listener: pebble's http-01 port
P_ADMIN=$((BASE + 1))
P_TLS=$((BASE + 2))  # edged's TLS listener: pebble's tls-alpn-01 port
P_ACME=$((BASE + 3)) # pebble's ACME server
P_MGMT=$((BASE + 4)) # pebble's management interface
P_DNS=$((BASE + 5))  # pebble-challtestsrv's DNS
P_CTS=$((BASE + 6))  # pebble-challtestsrv's management
P_BACK=$((BASE + 7)) # echo_backend.py
SOCK="$T_TMP/ctl.sock"

ACME_PEBBLE_ENV="PEBBLE_WFE_NONCEREJECT=80 PEBBLE_VA_SLEEPTIME=2 PEBBLE_AUTHZREUSE=50"
if ! bash "$TOOLS/mkchain.sh" "$T_TMP" dflt 0 "DNS:default.test" >"$T_TMP/mk.log" 2>&1 ||
	! acme_pebble_start "$P_EDGE" "$P_TLS" 24; then
	t_fail "the test's certificates are made, pebble and pebble-challtestsrv start" \
		"$(cat "$T_TMP/mk.log") $(tail -5 "$T_TMP/pebble.log") $(tail -3 "$T_TMP/challtestsrv.log")"
	t_exit
	exit 1
fi
if ! edged_backend "$P_BACK" /usr/bin/python3 "$TOOLS/echo_backend.py" "$P_BACK" "$T_TMP/echo.log"; then
	t_fail "the backend starts"
	t_exit
	exit 1
fi

# conf V CHALLENGE: build V's configuration, names n1..n4-V.acme.test
conf() {
	local v=$1
	mkdir -p "$T_TMP/$v/certs"
	edged_conf_head "$P_ADMIN" "$SOCK" 1
	cat <<CONF
tls = { listen = [ "127.0.0.1:$P_TLS" ];
  certificates = ( { cert = "$T_TMP/dflt-0.pem"; key = "$T_TMP/dflt.key"; } ); };
acme = { directory = "$ACME_DIR"; ca = "$T_TMP/wfe-root.crt";
  account_key = "$T_TMP/$v/account.key"; dir = "$T_TMP/$v/certs";
  challenge = "$2"; retry_min = "1s"; retry_max = "2s"; };
projects = ( { id = "p"; environments = (
  { id = "e1"; domains = [ "n1-$v.acme.test", "n2-$v.acme.test", "n3-$v.acme.test" ];
    tls = "auto"; deployment = { id = "d1"; upstreams = [ "127.0.0.1:$P_BACK" ]; }; },
  { id = "e2"; domains = [ "n4-$v.acme.test" ]; tls = "auto";
    deployment = { id = "d2"; upstreams = [ "127.0.0.1:$P_BACK" ]; }; }
  ); } );
CONF
}

# names_json EXPR: EXPR (python, over the list of names' objects a) of
# edgectl certs --json
names_json() {
	"$EDGECTL" --socket "$SOCK" certs --json >"$T_TMP/certs.json" 2>"$T_TMP/certs.err" &&
		python3 -c 'import json, sys
a = json.load(open(sys.argv[1]))["acme"]["names"]
print(eval(sys.argv[2], {"a": a}))' "$T_TMP/certs.json" "$1" 2>/dev/null
}

# served NAME: the serial edged serves for NAME, verified to pebble's root
served() {
	openssl s_client -connect "127.0.0.1:$P_TLS" -servername "$1" \
		-CAfile "$T_TMP/pebble-chain.pem" -verify_return_error -verify_hostname "$1" \
		</dev/null 2>/dev/null | openssl x509 -noout -serial 2>/dev/null | cut -d= -f2
}

run_suite() {
	local bin=$1 v=$2 chal=$3 i done_ok=0 n s bad=""

	conf "$v" "$chal" >"$T_TMP/$v.conf"
	if ! edged_start "$bin" "$T_TMP/$v.conf"; then
		t_fail "$v: edged starts" "$(tail -5 "$EDGED_LOG")"
		return
	fi
	# 4 names, each a first certificate and a renewal 16 s later, with
	# failed orders backing off 1-2 s: some 40 s; 150 s on a loaded machine
	for ((i = 0; i < 600; i++)); do
		if [ "$(names_json 'len(a) == 4 and all(n["issued"] >= 2 for n in a)')" = True ]; then
			done_ok=1
			break
		fi
		sleep 0.25
	done
	names_json '" ".join("%s:orders=%d,issued=%d,bad_nonces=%d" % (n["name"].split(".")[0], n["orders"], n["issued"], n["bad_nonces"]) for n in a)' >"$T_TMP/$v.summary"
	for n in n1 n2 n3 n4; do
		s=$(served "$n-$v.acme.test")
		[ -n "$s" ] || bad="$bad $n"
	done
	if [ "$done_ok" = 1 ] && [ -z "$bad" ]; then
		t_ok "$v: $chal against a CA refusing 4 nonces in 5 and validating after random delays: every name issued and renewed, served and verified ($(cat "$T_TMP/$v.summary"))"
	else
		t_fail "$v: issued and renewed through random failures" \
			"not served:$bad; $(cat "$T_TMP/$v.summary"); $(grep 'acme:' "$EDGED_LOG" | tail -4 | tr '\n' ' ')"
	fi
	if [ "$(names_json 'sum(n["bad_nonces"] for n in a)')" -gt 0 ] 2>/dev/null; then
		t_ok "$v: pebble's badNonce met and the POSTs signed again (edgectl certs' bad_nonces)"
	else
		t_fail "$v: bad_nonces" "$(cat "$T_TMP/certs.json")"
	fi
	i=$(grep -c 'the order failed' "$EDGED_LOG")
	echo "# $v: $i failed orders, each backed off and tried again:"
	grep 'the order failed' "$EDGED_LOG" | sed 's/.*next try in [0-9]* s: //' |
		cut -c1-160 | sort | uniq -c | sed 's/^/#   /'
	if curl -sf -m 5 -o /dev/null -H "Host: n1-$v.acme.test" "http://127.0.0.1:$P_EDGE/x"; then
		t_ok "$v: requests served through it all"
	else
		t_fail "$v: a request after the orders"
	fi
	edged_stop 10
	edged_sanitizers_clean "$v: no sanitizer report"
}

for bin in "$B/edged" "$EDGED_ASAN"; do
	label=normal chal=http-01
	[ "$bin" = "$EDGED_ASAN" ] && label=asan chal=tls-alpn-01
	if [ ! -x "$bin" ]; then
		t_skip "$label" "$bin not built"
		continue
	fi
	[ "$label" = asan ] && { edged_asan || continue; }
	run_suite "$bin" "$label" "$chal"
done
t_exit
