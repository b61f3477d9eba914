#!/bin/bash
# tests/lib_acme.sh - Debian's pebble (an ACME test CA) and
# pebble-challtestsrv (its DNS) for edged's ACME tests; sourced after
# lib.sh and lib_edged.sh.
#
#   acme_need                  skip the test (77) without pebble
#   acme_pebble_start HTTP TLS VALIDITY
#                              pebble validating http-01 on port HTTP and
#                              tls-alpn-01 on port TLS of whatever address
#                              a name resolves to, issuing for VALIDITY
#                              seconds, never reusing an authorization, no
#                              random sleeps (ACME_PEBBLE_ENV, NAME=VALUE
#                              words, replaces those settings);
#                              challtestsrv answering every
#                              A query with 127.0.0.1; needs P_ACME, P_MGMT,
#                              P_DNS, P_CTS. Sets ACME_DIR (the directory
#                              URL, at https://127.0.0.1) and makes
#                              $T_TMP/wfe-root.crt (what edged's acme.ca
#                              trusts) and $T_TMP/pebble-chain.pem (pebble's
#                              root and intermediate: what a client trusts
#                              of the certificates it issues). 0 when both
#                              serve.
#   acme_dns NAME IP           NAME resolves to IP alone from now on

acme_need() {
	local c
	for c in pebble pebble-challtestsrv; do
		if ! command -v "$c" >/dev/null; then
			t_skip "$(basename "$0")" "needs $c (apt-get install pebble)"
			exit 77
		fi
	done
}

acme_pebble_start() {
	local i
	# shellcheck disable=SC2034 # the tests read it
	ACME_DIR="https://127.0.0.1:$P_ACME/dir"
	bash "$TOOLS/mkchain.sh" "$T_TMP" wfe 0 "IP:127.0.0.1" >"$T_TMP/wfe.log" 2>&1 || return 1
	cat >"$T_TMP/pebble.json" <<JSON
{
  "pebble": {
    "listenAddress": "127.0.0.1:$P_ACME",
    "managementListenAddress": "127.0.0.1:$P_MGMT",
    "certificate": "$T_TMP/wfe-0.pem",
    "privateKey": "$T_TMP/wfe.key",
    "httpPort": $1,
    "tlsPort": $2,
    "ocspResponderURL": "",
    "externalAccountBindingRequired": false,
    "certificateValidityPeriod": $3
  }
}
JSON
	pebble-challtestsrv -dns01 "127.0.0.1:$P_DNS" -management "127.0.0.1:$P_CTS" \
		-http01 "" -https01 "" -tlsalpn01 "" -defaultIPv4 127.0.0.1 -defaultIPv6 "" \
		>"$T_TMP/challtestsrv.log" 2>&1 &
	edged_track $!
	# shellcheck disable=SC2086 # a list of NAME=VALUE words
	env ${ACME_PEBBLE_ENV:-PEBBLE_VA_NOSLEEP=1 PEBBLE_AUTHZREUSE=0} \
		pebble -config "$T_TMP/pebble.json" -dnsserver "127.0.0.1:$P_DNS" \
		>"$T_TMP/pebble.log" 2>&1 &
	edged_track $!
	for ((i = 0; i < 200; i++)); do
		curl -sf -m 2 --cacert "$T_TMP/wfe-root.crt" -o "$T_TMP/pebble-root.pem" \
			"https://127.0.0.1:$P_MGMT/roots/0" &&
			curl -sf -m 2 --cacert "$T_TMP/wfe-root.crt" -o "$T_TMP/pebble-int.pem" \
				"https://127.0.0.1:$P_MGMT/intermediates/0" && break
		sleep 0.1
	done
	[ -s "$T_TMP/pebble-int.pem" ] && edged_wait_port "$P_CTS" || return 1
	cat "$T_TMP/pebble-root.pem" "$T_TMP/pebble-int.pem" >"$T_TMP/pebble-chain.pem"
}

acme_dns() {
	curl -sf -m 5 -o /dev/null -d "{\"host\":\"$1\"}" "http://127.0.0.1:$P_CTS/clear-a" &&
		curl -sf -m 5 -o /dev/null -d "{\"host\":\"$1\",\"addresses\":[\"$2\"]}" \
			"http://127.0.0.1:$P_CTS/add-a"
}
