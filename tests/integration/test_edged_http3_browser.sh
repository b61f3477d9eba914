#!/bin/bash
# test_edged_http3_browser.sh - a real browser over HTTP/3 (issue 35):
# Debian's headless Chromium (tests/tools/browser.py) loads a page from
# edged, in front of the recording backend (tests/tools/echo_backend.py),
# and the test proves the request went over HTTP/3 by edged's own word
# and the backend's, not the browser's alone:
#   - forced: QUIC to the origin (--origin-to-force-quic-on), the test's
#     self-signed certificate trusted by its key's SHA-256
#     (--ignore-certificate-errors-spki-list; Chromium refuses QUIC to a
#     certificate --ignore-certificate-errors lets through): the page is
#     the backend's answer, edged's analytics record for it says
#     "http_version":"HTTP/3" and the client's address, the backend saw
#     `Via: 3 ... (edge)`, Chromium says h3;
#   - discovered: no QUIC forced to the origin; the first load goes over
#     TLS on TCP (HTTP/2: record, Via 2, h2) and brings edged's Alt-Svc,
#     and a reload of the page goes over HTTP/3 (record, Via 3, h3);
#     with tls.quic_advertise = false (no Alt-Svc) the reload stays on
#     TCP.
#     Chromium takes QUIC learnt from Alt-Svc only with a certificate of a
#     known root, unless QUIC is forced to some origin of that host name:
#     the test forces it to port 9 of shop.test, where nothing listens and
#     nothing is asked.
# Runs against build/edged and build/asan/edged. Needs no root; as root
# Chromium runs in a network namespace of its own and reaches edged (TCP
# and UDP) over a veth pair. Skipped (77) without chromium (installed by
# scripts/install-deps) or python3-websockets.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/lib_edged.sh
. "$(dirname "$0")/../lib_edged.sh"
edged_begin curl python3 openssl
edged_need_build
if ! command -v "${CHROMIUM:-chromium}" >/dev/null 2>&1; then
	t_skip "$(basename "$0")" "chromium is not installed (scripts/install-deps installs it)"
	exit 77
fi
if ! /usr/bin/python3 -c 'import websockets' 2>/dev/null; then
	t_skip "$(basename "$0")" "needs /usr/bin/python3's websockets (python3-websockets)"
	exit 77
fi

BASE=$(edged_ports 4)
P_EDGE=$BASE
P_BACK=$((BASE + 1))
P_ADMIN=$((BASE + 2))
P_TLS=$((BASE + 3)) # TCP for HTTPS, UDP for QUIC
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
	-subj /CN=shop.test -addext subjectAltName=DNS:shop.test \
	-keyout "$T_TMP/shop.key" -out "$T_TMP/shop.pem" >/dev/null 2>&1
# what --ignore-certificate-errors-spki-list takes: the SHA-256 of the
# certificate's SubjectPublicKeyInfo, base64
SPKI=$(openssl x509 -in "$T_TMP/shop.pem" -pubkey -noout | openssl pkey -pubin -outform der |
	openssl dgst -sha256 -binary | base64)

if ! edged_browser_net edge-h3br 235 eh3b; then
	t_fail "Chromium's namespace" "could not be made"
	t_exit
	exit 1
fi

{
	edged_conf_head "$P_ADMIN" "$T_TMP/edged.sock"
	cat <<CONF
analytics = { file = "$T_TMP/requests.jsonl"; };
tls = {
  listen = [ "$BR_ADDR:$P_TLS" ];
  quic_listen = [ "$BR_ADDR:$P_TLS" ];
  certificates = ( { cert = "$T_TMP/shop.pem"; key = "$T_TMP/shop.key"; } );
};
projects = (
  { id = "shop";
    environments = (
      { id = "shop-prod";
        domains = [ "shop.test" ];
        deployment = { id = "shop-1"; upstreams = [ "127.0.0.1:$P_BACK" ]; };
      }
    );
  }
);
CONF
} >"$T_TMP/edge.conf"

if ! edged_backend "$P_BACK" /usr/bin/python3 "$TOOLS/echo_backend.py" "$P_BACK" "$T_TMP/backend.jsonl"; then
	t_fail "the echo backend starts" ""
	t_exit
	exit 1
fi

# browser PATH [browser.py args]: Chromium (in its namespace) loads
# https://shop.test:$P_TLS/PATH, shop.test being edged's address; its
# JSON report in $T_TMP/browser.json, its errors in $T_TMP/browser.err
browser() {
	local path=$1
	shift
	"${BR_IN[@]}" /usr/bin/python3 "$TOOLS/browser.py" --url "https://shop.test:$P_TLS$path" \
		--host-resolver-rules "MAP shop.test $BR_ADDR" --cert-spki "$SPKI" --timeout 90 "$@" \
		>"$T_TMP/browser.json" 2>"$T_TMP/browser.err"
}

# wait_records PATH N: 0 once edged's analytics file holds N records
# for PATH (its sink writes in batches), 1 when it has not after 10 s
wait_records() {
	local i n
	for ((i = 0; i < 100; i++)); do
		n=$(grep -cF "\"path\":\"$1\"" "$T_TMP/requests.jsonl" 2>/dev/null)
		[ "${n:-0}" -ge "$2" ] && return 0
		sleep 0.1
	done
	return 1
}

# check NAME PYTHON PATH [ARG...]: ok when the Python assertions hold,
# given d, Chromium's report; recs, edged's analytics records for PATH
# and back, the backend's (each in order); vias, the Via fields the
# backend saw; args, the ARGs
check() {
	local name=$1 code=$2 path=$3
	shift 3
	if /usr/bin/python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
path, code, args = sys.argv[4], sys.argv[5], sys.argv[6:]
recs = [r for r in map(json.loads, open(sys.argv[2])) if r.get("path") == path]
back = [r for r in map(json.loads, open(sys.argv[3])) if r.get("path") == path]
vias = [v for b in back for k, v in b["headers"] if k.lower() == "via"]
exec(code)' "$T_TMP/browser.json" "$T_TMP/requests.jsonl" "$T_TMP/backend.jsonl" \
		"$path" "$code" "$@" 2>"$T_TMP/py.err"; then
		t_ok "$name"
	else
		t_fail "$name" "$(tail -n 1 "$T_TMP/py.err" | cut -c1-600) | chromium: $(head -c 300 "$T_TMP/browser.json") $(tail -c 300 "$T_TMP/browser.err")"
	fi
}

# loads_seen: how many document loads browser.py reported (at least 1)
loads_seen() {
	/usr/bin/python3 -c 'import json, sys
print(max(1, len(json.load(open(sys.argv[1])).get("protocols", []))))' "$T_TMP/browser.json" 2>/dev/null || echo 1
}

run_build() { # LABEL BIN
	local v=$1 bin=$2 hs
	: >"$T_TMP/backend.jsonl"
	rm -f "$T_TMP/requests.jsonl"
	if ! edged_start "$bin" "$T_TMP/edge.conf"; then
		t_fail "$v: edged starts" "$(tail -5 "$EDGED_LOG")"
		return
	fi

	# forced: the first request goes over QUIC
	browser "/forced?v=$v" --quic-origin "shop.test:$P_TLS"
	wait_records "/forced?v=$v" 1
	check "$v: forced QUIC: Chromium gets the backend's page for /forced" '
assert d["status"] == 200, d
assert json.loads(d["body"])["path"] == path, d["body"][:300]' "/forced?v=$v"
	check "$v: edged's analytics record of it says HTTP/3, from Chromium's address" '
assert [r["http_version"] for r in recs] == ["HTTP/3"], [r["http_version"] for r in recs]
r = recs[0]
assert (r["status"], r["outcome"], r["tls_version"]) == (200, "ok", "TLSv1.3"), r
assert r["client_ip"] == args[0] and "HeadlessChrome" in r["user_agent"], r' "/forced?v=$v" "$BR_CLIENT"
	check "$v: the backend saw Via: 3 and the client's address" '
assert len(back) == 1 and len(vias) == 1 and vias[0].startswith("3 ") and vias[0].endswith("(edge)"), vias
ip = [x for k, x in back[0]["headers"] if k.lower() == "x-client-ip"]
assert ip == [args[0]], ip' "/forced?v=$v" "$BR_CLIENT"
	check "$v: and Chromium says h3" 'assert d["protocols"] == ["h3"], d["protocols"]' "/forced?v=$v"
	hs=$(edged_metric 'edge_quic_handshakes_total{result="ok"}')
	if [ "$hs" -ge 1 ]; then
		t_ok "$v: edged counts the QUIC handshake ($hs)"
	else
		t_fail "$v: QUIC handshake counted" "$hs"
	fi

	# discovered: HTTPS over TCP first, its Alt-Svc, then reloads until
	# one goes over HTTP/3 (Chromium sets up QUIC in the background and
	# keeps using its HTTP/2 connection meanwhile: how many reloads that
	# takes depends on timing, at most 6 here)
	browser "/alt?v=$v" --quic-origin shop.test:9 --loads 6 --until-protocol h3
	wait_records "/alt?v=$v" "$(loads_seen)"
	echo "# $v: Alt-Svc: loads until HTTP/3: $(loads_seen)"
	check "$v: Alt-Svc: the first load over TLS on TCP (HTTP/2), then HTTP/3 once Chromium has it, in analytics" '
n = len(d["protocols"])
assert n >= 2, d["protocols"]
assert d["status"] == 200 and json.loads(d["body"])["path"] == path, d
assert [r["http_version"] for r in recs] == ["HTTP/2"] * (n - 1) + ["HTTP/3"], [r["http_version"] for r in recs]
assert all(r["status"] == 200 and r["outcome"] == "ok" for r in recs), recs' "/alt?v=$v"
	check "$v: Alt-Svc: the backend saw Via 2, then Via 3" '
n = len(d["protocols"])
assert [x.split()[0] for x in vias] == ["2"] * (n - 1) + ["3"], vias' "/alt?v=$v"
	check "$v: Alt-Svc: Chromium says h2, then h3" '
assert len(d["protocols"]) >= 2 and d["protocols"] == ["h2"] * (len(d["protocols"]) - 1) + ["h3"], d["protocols"]' "/alt?v=$v"

	# the same without edged's Alt-Svc (tls.quic_advertise = false): the
	# reloads, as many and as slow as above, stay on TCP
	sed -i 's/^  quic_listen = \(.*\)$/  quic_listen = \1\n  quic_advertise = false;/' "$T_TMP/edge.conf"
	reload_conf || t_fail "$v: reload with quic_advertise = false" "no reload line"
	browser "/noalt?v=$v" --quic-origin shop.test:9 --loads 3 --until-protocol h3
	wait_records "/noalt?v=$v" 3
	check "$v: quic_advertise = false: the reloads too over TLS on TCP" '
assert d["status"] == 200 and json.loads(d["body"])["path"] == path, d
assert [r["http_version"] for r in recs] == ["HTTP/2"] * 3, [r["http_version"] for r in recs]
assert [x.split()[0] for x in vias] == ["2"] * 3, vias
assert d["protocols"] == ["h2"] * 3, d["protocols"]' "/noalt?v=$v"
	sed -i '/^  quic_advertise = false;$/d' "$T_TMP/edge.conf"

	edged_stop 10
	edged_sanitizers_clean "$v: no sanitizer report" && t_ok "$v: no sanitizer report"
}

run_build normal "$EDGED"
if edged_asan; then
	run_build asan "$EDGED_ASAN"
fi
t_exit
