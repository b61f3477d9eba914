#!/bin/bash
# test_edged_compress.sh - response compression (issue 33;
# docs/configuration.md, "compression"): tests/tools/echo_backend.py's
# /gen/N bodies (JSON lines, with the type, coding, Cache-Control, ETag,
# status and framing a query asks for) through edged, each decoded by
# tests/tools/zcheck.py (zlib, python3-brotli, python3-zstandard) and
# compared with what the backend sent:
#   - gzip, br and zstd each as the client's only coding, over HTTP/1.1
#     and HTTP/2, of a body with a length and a chunked one; curl
#     --compressed; q-values choosing among them; the environment's
#     algorithms, min_bytes, types and enabled;
#   - every response never compressed: HEAD, 204, 206 and a Range
#     request, 304, one already coded, Cache-Control no-transform, a type
#     not listed, a body under min_bytes with a length;
#   - a strong ETag made weak, a weak one kept;
#   - server-sent events arriving coded before the stream's end;
#   - 1 GiB (256 MiB with ASan) streamed in zstd, decoded whole, edged's
#     peak RSS (normal build) less than 64 MiB over its peak before.
# Runs against build/edged and build/asan/edged. Needs no root.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/lib_edged.sh
. "$(dirname "$0")/../lib_edged.sh"
edged_begin curl python3
if ! /usr/bin/python3 -c 'import brotli, zstandard' 2>/dev/null; then
	t_skip "$(basename "$0")" "needs python3-brotli and python3-zstandard"
	exit 77
fi
edged_need_build

BASE=$(edged_ports 3)
P_EDGE=$BASE
P_BACK=$((BASE + 1))
P_ADMIN=$((BASE + 2))
SOCK="$T_TMP/edged.sock"
ZCHECK=(/usr/bin/python3 "$TOOLS/zcheck.py")

write_conf() {
	{
		edged_conf_head "$P_ADMIN" "$SOCK"
		cat <<CONF
projects = (
  { id = "p";
    environments = (
      { id = "e-dflt"; domains = [ "z.test" ];
        deployment = { id = "d1"; upstreams = [ "127.0.0.1:$P_BACK" ]; }; },
      { id = "e-tuned"; domains = [ "t.test" ];
        deployment = { id = "d2"; upstreams = [ "127.0.0.1:$P_BACK" ]; };
        compression = { algorithms = [ "gzip" ]; min_bytes = "10K";
          types = [ "application/x-custom" ]; level = { gzip = 9; }; }; },
      { id = "e-off"; domains = [ "off.test" ];
        deployment = { id = "d3"; upstreams = [ "127.0.0.1:$P_BACK" ]; };
        compression = { enabled = false; }; }
    );
  }
);
CONF
	} >"$T_TMP/edge.conf"
}

# get PROTO HOST PATH AE [CURL ARG...]: the status; head in $T_TMP/h, the
# body as it came in $T_TMP/b
get() {
	local proto=$1 host=$2 path=$3 ae=$4
	shift 4
	curl -sS --max-time 20 "$proto" -D "$T_TMP/h" -o "$T_TMP/b" -w '%{http_code}' \
		-H "Host: $host" ${ae:+-H "Accept-Encoding: $ae"} "$@" \
		"http://127.0.0.1:$P_EDGE$path" 2>"$T_TMP/curl.err"
}

field() {
	tr -d '\r' <"$T_TMP/h" | awk -v n="$1" 'tolower($0) ~ "^" tolower(n) ":" { sub(/^[^:]*: */, ""); print; exit }'
}

# expect_coded NAME PROTO HOST PATH AE CODING SIZE [CURL ARG...]
expect_coded() {
	local name=$1 code out want=$6 size=$7
	code=$(get "$2" "$3" "$4" "$5" "${@:8}")
	out=$("${ZCHECK[@]}" "$T_TMP/h" "$T_TMP/b" "$want" "$size")
	if [ "$code" = 200 ] && [ "$out" = ok ]; then
		t_ok "$name"
	else
		t_fail "$name" "code $code: $out"
	fi
}

run_build() { # LABEL BIN
	local v=$1 bin=$2 proto p c code
	write_conf
	if ! edged_start "$bin" "$T_TMP/edge.conf"; then
		t_fail "$v: edged starts" "$(tail -5 "$EDGED_LOG")"
		return
	fi
	for proto in --http1.1 --http2-prior-knowledge; do
		p="$v ${proto#--}"
		for c in gzip br zstd; do
			expect_coded "$p: $c, a body with a length" "$proto" z.test /gen/200000 "$c" "$c" 200000
			expect_coded "$p: $c, a chunked body" "$proto" z.test "/gen/150000?chunked=1" "$c" "$c" 150000
		done
		expect_coded "$p: q-values: br at 0.9 over gzip at 0.5" "$proto" z.test /gen/5000 "gzip;q=0.5, br;q=0.9" br 5000
		expect_coded "$p: zstd refused (q=0), * takes br (edge's next)" "$proto" z.test /gen/5000 "zstd;q=0, *" br 5000
		expect_coded "$p: identity asked: none" "$proto" z.test /gen/5000 "identity" identity 5000
		expect_coded "$p: an unknown coding: none" "$proto" z.test /gen/5000 "x-gzip, deflate" identity 5000
		expect_coded "$p: no Accept-Encoding: none" "$proto" z.test /gen/5000 "" identity 5000
		expect_coded "$p: an environment's algorithms (gzip only) for a client of br, gzip" "$proto" t.test "/gen/20000?type=application/x-custom" "br, gzip" gzip 20000
		expect_coded "$p: ... its types (application/json not listed there)" "$proto" t.test /gen/20000 "gzip" identity 20000
		expect_coded "$p: ... its min_bytes (9000 < 10K)" "$proto" t.test "/gen/9000?type=application/x-custom" "gzip" identity 9000
		expect_coded "$p: ... a chunked body of unknown length under it: coded" "$proto" t.test "/gen/9000?type=application/x-custom&chunked=1" "gzip" gzip 9000
		expect_coded "$p: enabled = false" "$proto" off.test /gen/20000 "gzip" identity 20000
		# never compressed
		expect_coded "$p: under 1 KiB with a length" "$proto" z.test /gen/1000 gzip identity 1000
		expect_coded "$p: already coded (passed as it is)" "$proto" z.test "/gen/5000?ce=x-custom" gzip x-custom 5000
		expect_coded "$p: Cache-Control no-transform" "$proto" z.test "/gen/5000?cc=public,%20no-transform" gzip identity 5000
		expect_coded "$p: a type not listed (image/png)" "$proto" z.test "/gen/5000?type=image/png" gzip identity 5000
		expect_coded "$p: a Range request" "$proto" z.test /gen/5000 gzip identity 5000 -H "Range: bytes=0-10"
		code=$(get "$proto" z.test "/gen/5000?status=206" gzip)
		if [ "$code" = 206 ] && [ -z "$(field Content-Encoding)" ]; then
			t_ok "$p: a 206: not coded"
		else
			t_fail "$p: 206" "code $code, $(field Content-Encoding)"
		fi
		for c in 204 304; do
			code=$(get "$proto" z.test "/gen/0?status=$c" gzip)
			if [ "$code" = "$c" ] && [ -z "$(field Content-Encoding)" ] && [ ! -s "$T_TMP/b" ]; then
				t_ok "$p: a $c: not coded, no body"
			else
				t_fail "$p: $c" "code $code, $(field Content-Encoding)"
			fi
		done
		code=$(get "$proto" z.test /gen/5000 gzip -I)
		if [ "$code" = 200 ] && [ -z "$(field Content-Encoding)" ] && [ "$(field Content-Length)" = 5000 ]; then
			t_ok "$p: HEAD: not coded, the upstream's Content-Length"
		else
			t_fail "$p: HEAD" "code $code, $(field Content-Encoding) $(field Content-Length)"
		fi
		get "$proto" z.test "/gen/5000?etag=%22abc%22" gzip >/dev/null
		if [ "$(field ETag)" = 'W/"abc"' ]; then
			t_ok "$p: a strong ETag made weak"
		else
			t_fail "$p: strong ETag" "$(field ETag)"
		fi
		get "$proto" z.test "/gen/5000?etag=W/%22abc%22" gzip >/dev/null
		if [ "$(field ETag)" = 'W/"abc"' ]; then
			t_ok "$p: a weak ETag kept"
		else
			t_fail "$p: weak ETag" "$(field ETag)"
		fi
	done
	code=$(curl -sS --max-time 20 --compressed -o "$T_TMP/b" -w '%{http_code}' -H "Host: z.test" \
		"http://127.0.0.1:$P_EDGE/gen/100000")
	if [ "$code" = 200 ] && /usr/bin/python3 -c 'import sys; sys.path.insert(0, sys.argv[2])
from echo_backend_gen import gen_body
sys.exit(0 if open(sys.argv[1], "rb").read() == gen_body(100000) else 1)' "$T_TMP/b" "$TOOLS"; then
		t_ok "$v: curl --compressed decodes it"
	else
		t_fail "$v: curl --compressed" "code $code"
	fi
	for c in gzip br zstd; do
		out=$("${ZCHECK[@]}" --sse "$P_EDGE" z.test /sse/5/300 "$c")
		if [ "$out" = ok ]; then
			t_ok "$v: server-sent events in $c: the first decodes before the stream ends"
		else
			t_fail "$v: sse $c" "$out"
		fi
	done
	"$EDGECTL" --socket "$SOCK" routes >"$T_TMP/routes.txt"
	"$EDGECTL" --socket "$SOCK" routes --json >"$T_TMP/routes.json"
	if grep -q "^off.test .*(compression off)" "$T_TMP/routes.txt" &&
		! grep -q "^z.test .*compression" "$T_TMP/routes.txt" &&
		python3 -c 'import json, sys
r = {x["domain"]: x["compression"] for x in json.load(open(sys.argv[1]))["routes"]}
sys.exit(0 if r["t.test"]["algorithms"] == ["gzip"] and r["t.test"]["min_bytes"] == 10240
         and r["t.test"]["types"] == ["application/x-custom"] and r["t.test"]["level"]["gzip"] == 9
         and r["z.test"]["algorithms"] == ["zstd", "br", "gzip"] and not r["off.test"]["enabled"] else 1)' "$T_TMP/routes.json"; then
		t_ok "$v: edgectl routes: compression off said; --json each environment's group"
	else
		t_fail "$v: edgectl routes" "$(cat "$T_TMP/routes.txt")"
	fi
	# a long stream: coded as it goes, edged's memory bounded
	local big=$((1 << 30)) hwm0 hwm1 got
	[ "$v" = asan ] && big=$((256 << 20))
	hwm0=$(awk '/^VmHWM/ { print $2 }' "/proc/$EPID/status")
	got=$(curl -sS --max-time 600 -H "Host: z.test" -H "Accept-Encoding: zstd" \
		"http://127.0.0.1:$P_EDGE/genstream/$big" | /usr/bin/python3 -c '
import sys, zstandard
n = 0
for piece in zstandard.ZstdDecompressor().read_to_iter(sys.stdin.buffer):
    n += len(piece)
print(n)')
	hwm1=$(awk '/^VmHWM/ { print $2 }' "/proc/$EPID/status")
	# (ASan's quarantine holds what was freed: its peak says nothing)
	if [ "$got" = "$big" ] && { [ "$v" = asan ] || [ $((hwm1 - hwm0)) -lt 65536 ]; }; then
		t_ok "$v: $((big >> 20)) MiB streamed in zstd, decoded whole; edged's peak RSS $((hwm1 >> 10)) MiB ($(((hwm1 - hwm0) >> 10)) MiB over its peak before)"
	else
		t_fail "$v: long stream" "decoded $got of $big; peak RSS $hwm1 kB against $hwm0 kB before"
	fi
	curl -s -m 5 "http://127.0.0.1:$P_ADMIN/metrics" >"$T_TMP/metrics"
	if awk '$1 ~ /^edge_compression_(in|out)_bytes_total\{algorithm="(gzip|br|zstd)"\}$/ { v[$1] = $2 }
		END { n = 0; split("gzip br zstd", a, " ")
			for (i = 1; i <= 3; i++) {
				in_ = v["edge_compression_in_bytes_total{algorithm=\"" a[i] "\"}"]
				out = v["edge_compression_out_bytes_total{algorithm=\"" a[i] "\"}"]
				if (in_ >= 700000 && out > 0 && out * 3 < in_) n++ }
			exit n == 3 ? 0 : 1 }' "$T_TMP/metrics"; then
		t_ok "$v: /metrics: bytes before and after compression per coding"
	else
		t_fail "$v: metrics" "$(grep edge_compression "$T_TMP/metrics" | tr '\n' ' ')"
	fi
	edged_stop 10
	edged_sanitizers_clean "$v: no sanitizer report" && t_ok "$v: no sanitizer report"
}

edged_backend "$P_BACK" python3 "$TOOLS/echo_backend.py" "$P_BACK" "$T_TMP/backend.log"
run_build normal "$EDGED"
if edged_asan; then
	run_build asan "$EDGED_ASAN"
fi
t_exit
