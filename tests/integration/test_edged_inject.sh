#!/bin/bash
# test_edged_inject.sh - script and pixel injection (issue 33;
# docs/configuration.md, "inject"): tests/tools/html_backend.py's pages
# through edged, checked by tests/tools/inject_check.py against
# html_page.py's rule:
#   - head_end before the first </head>, body_end before the last
#     </body> (case-insensitive), at every split of each tag over two
#     pieces, in identity, gzip, br and zstd upstream bodies, chunked, with
#     a length and delimited by the close; the page's Content-Length its
#     own, or coded again for the client (gzip, br, zstd), a strong ETag
#     made weak, Accept-Ranges gone;
#   - passed on exactly as they came (sha256 of the bytes): no tag, a gzip
#     and a zstd bomb, a page over limits.max_inject_bytes (with a length
#     and chunked), a stream that does not decode, deflate, other types,
#     no-transform, Range, HEAD; a body cut short stays cut short;
#   - edge_inject_responses_total by result; the same over HTTP/2 (curl);
#   - edgectl routes; --check: a snippet file read, a bad group refused
#     with FILE:LINE, an inline <script> against the environment's CSP a
#     warning.
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
HEAD_END='<script>window.edge=1</script>'
BODY_END='<img src="/px.gif" alt="">'
printf '%s' "$BODY_END" >"$T_TMP/body_end.html"
chmod 0755 "$T_TMP"
chmod 0644 "$T_TMP/body_end.html"

write_conf() { # [EXTRA ENVIRONMENT]
	{
		edged_conf_head "$P_ADMIN" "$SOCK"
		cat <<CONF
projects = (
  { id = "p";
    environments = (
      { id = "e-inj"; domains = [ "inj.test" ];
        deployment = { id = "d1"; upstreams = [ "127.0.0.1:$P_BACK" ]; };
        inject = { head_end = "$HEAD_END";
                   body_end = { file = "$T_TMP/body_end.html"; }; }; },
      { id = "e-plain"; domains = [ "plain.test" ];
        deployment = { id = "d2"; upstreams = [ "127.0.0.1:$P_BACK" ]; }; }${1:-}
    );
  }
);
CONF
	} >"$T_TMP/edge.conf"
}

if ! edged_backend "$P_BACK" /usr/bin/python3 "$TOOLS/html_backend.py" "$P_BACK"; then
	t_fail "the html backend starts" ""
	t_exit
fi

metric() { # NAME{LABELS}
	curl -s "http://127.0.0.1:$P_ADMIN/metrics" | awk -v k="$1" '$1 == k { print $2 }'
}

run_build() { # LABEL BIN
	local v=$1 bin=$2 st name why after r out want ae hwm0 hwm1 tl0 tl1 code sha
	local -A before
	write_conf
	if ! edged_start "$bin" "$T_TMP/edge.conf"; then
		t_fail "$v: edged starts" "$(tail -5 "$EDGED_LOG")"
		return
	fi
	for r in injected no_tag too_large undecodable; do
		before[$r]=$(metric "edge_inject_responses_total{result=\"$r\"}")
	done
	while IFS=$'\t' read -r st name why; do
		if [ "$st" = ok ]; then
			t_ok "$v: $name"
		else
			t_fail "$v: $name" "$why"
		fi
	done < <(/usr/bin/python3 "$TOOLS/inject_check.py" "$P_EDGE" inj.test "$HEAD_END" "$BODY_END" "$P_BACK" 2>&1)
	# each result counted
	for r in injected no_tag too_large undecodable; do
		after=$(metric "edge_inject_responses_total{result=\"$r\"}")
		if [ -n "$after" ] && [ "${after:-0}" -gt "${before[$r]:-0}" ]; then
			t_ok "$v: edge_inject_responses_total{result=\"$r\"} counted ($after)"
		else
			t_fail "$v: $r counted" "before ${before[$r]}, after $after"
		fi
	done
	# a 50 MB gzip bomb alone: stopped at max_inject_bytes (1 MiB), not
	# decoded whole; passed on as it came
	hwm0=$(awk '/^VmHWM/ { print $2 }' "/proc/$EPID/status")
	tl0=$(metric 'edge_inject_responses_total{result="too_large"}')
	code=$(curl -sS --max-time 20 -D "$T_TMP/h" -o "$T_TMP/bomb" -w '%{http_code}' -H "Accept-Encoding: gzip" \
		-H "Host: inj.test" "http://127.0.0.1:$P_EDGE/page?kind=bomb:50000000&ce=gzip")
	tl1=$(metric 'edge_inject_responses_total{result="too_large"}')
	hwm1=$(awk '/^VmHWM/ { print $2 }' "/proc/$EPID/status")
	sha=$(sha256sum <"$T_TMP/bomb" | cut -d' ' -f1)
	if [ "$code" = 200 ] && grep -qi "^x-raw-sha256: $sha" "$T_TMP/h" && [ "$tl1" = $((tl0 + 1)) ] &&
		{ [ "$v" = asan ] || [ $((hwm1 - hwm0)) -lt 16384 ]; }; then
		t_ok "$v: a 50 MB gzip bomb: too_large, as it came, edged's peak RSS $(((hwm1 - hwm0) >> 10)) MiB over its peak before"
	else
		t_fail "$v: bomb" "code $code, too_large $tl0 -> $tl1, peak RSS $hwm0 -> $hwm1 kB, sha $sha: $(tr -d '\r' <"$T_TMP/h" | grep -i x-raw)"
	fi
	# a page of 40 KB one byte a send: edged's memory is the page's, not a
	# buffer's chain per read
	hwm0=$(awk '/^VmHWM/ { print $2 }' "/proc/$EPID/status")
	out=$(curl -sS --max-time 30 -H "Host: inj.test" "http://127.0.0.1:$P_EDGE/page?kind=big:40000&trickle=1")
	hwm1=$(awk '/^VmHWM/ { print $2 }' "/proc/$EPID/status")
	if [ "${#out}" = $((40000 + ${#HEAD_END} + ${#BODY_END})) ] && { [ "$v" = asan ] || [ $((hwm1 - hwm0)) -lt 8192 ]; }; then
		t_ok "$v: a 40 KB page one byte a send: injected, edged's peak RSS $(((hwm1 - hwm0) >> 10)) MiB over its peak before"
	else
		t_fail "$v: trickle" "${#out} bytes, peak RSS $hwm0 -> $hwm1 kB"
	fi
	# an environment without snippets: untouched
	out=$(curl -sS --max-time 10 -H "Host: plain.test" "http://127.0.0.1:$P_EDGE/page")
	want=$(/usr/bin/python3 -c 'import sys; sys.path.insert(0, sys.argv[1]); from html_page import page; sys.stdout.write(page("std").decode())' "$TOOLS")
	if [ "$out" = "$want" ]; then
		t_ok "$v: an environment without inject: the page as it came"
	else
		t_fail "$v: plain" "$out"
	fi
	# HTTP/2: gzip upstream, split in </head>, the client takes br
	want=$(/usr/bin/python3 -c 'import sys; sys.path.insert(0, sys.argv[1]); from html_page import page, injected; sys.stdout.write(injected(page("std"), sys.argv[2].encode(), sys.argv[3].encode()).decode())' "$TOOLS" "$HEAD_END" "$BODY_END")
	for ae in identity gzip; do
		out=$(curl -sS --max-time 10 --http2-prior-knowledge -H "Accept-Encoding: $ae" --compressed \
			-H "Host: inj.test" "http://127.0.0.1:$P_EDGE/page?ce=zstd&framing=chunked&split=60" 2>&1)
		if [ "$out" = "$want" ]; then
			t_ok "$v: HTTP/2 ($ae to the client): the snippets in"
		else
			t_fail "$v: HTTP/2 $ae" "$out"
		fi
	done
	# edgectl routes
	out=$("$EDGECTL" --socket "$SOCK" routes 2>&1)
	if grep -q 'inj.test.*inject head_end+body_end' <<<"$out" && ! grep -q 'plain.test.*inject' <<<"$out"; then
		t_ok "$v: edgectl routes: inject head_end+body_end"
	else
		t_fail "$v: edgectl routes" "$out"
	fi
	out=$("$EDGECTL" --socket "$SOCK" routes --json 2>&1)
	if /usr/bin/python3 -c '
import json, sys
d = json.loads(sys.argv[1])
r = [x for x in d["routes"] if "inj.test" in json.dumps(x)][0]["inject"]
assert r["head_end"] == {"bytes": len(sys.argv[2]), "file": None}, r
assert r["body_end"]["file"].endswith("body_end.html"), r
' "$out" "$HEAD_END" 2>"$T_TMP/py.err"; then
		t_ok "$v: edgectl routes --json: each snippet's bytes and file"
	else
		t_fail "$v: routes --json" "$(cat "$T_TMP/py.err")"
	fi
	edged_stop 10
	edged_sanitizers_clean "$v: no sanitizer report" && t_ok "$v: no sanitizer report"
}

run_build normal "$EDGED"
if edged_asan; then
	run_build asan "$EDGED_ASAN"
fi

# --check: refusals with FILE:LINE, the CSP warning
check() { # CONF-ENV -> output of edged --check
	write_conf ",
      { id = \"e-x\"; domains = [ \"x.test\" ];
        deployment = { id = \"d9\"; upstreams = [ \"127.0.0.1:$P_BACK\" ]; };
        $1 }"
	"$EDGED" --check -c "$T_TMP/edge.conf" 2>&1
}
refused() { # NAME PATTERN CONF-ENV
	local out rc=0
	out=$(check "$3") || rc=$?
	if [ "$rc" -ne 0 ] && grep -Eq "edge.conf:[0-9]+: .*$2" <<<"$out"; then
		t_ok "--check refuses $1"
	else
		t_fail "--check $1" "$out"
	fi
}
refused "a missing snippet file" "inject.head_end.*no-such.html: No such file" \
	"inject = { head_end = { file = \"$T_TMP/no-such.html\"; }; };"
refused "a relative snippet file" "must be an absolute path" \
	"inject = { body_end = { file = \"x.html\"; }; };"
refused "an unknown key" "inject.*tail" 'inject = { tail = "x"; };'
refused "a number" "inject.head_end" 'inject = { head_end = 5; };'
mkfifo "$T_TMP/fifo.html"
refused "a FIFO (not read: a reload must not hang on it)" "fifo.html: not a regular file" \
	"inject = { head_end = { file = \"$T_TMP/fifo.html\"; }; };"
head -c 70000 /dev/zero | tr '\0' a >"$T_TMP/huge.html"
chmod 0644 "$T_TMP/huge.html"
refused "a snippet over 64 KiB" "over 65536 bytes" \
	"inject = { head_end = { file = \"$T_TMP/huge.html\"; }; };"
rc=0
out=$(check "headers = { response_set = [ \"Content-Security-Policy: default-src 'self'; script-src 'self' https://cdn.test\" ]; };
        inject = { head_end = \"<script>x()</script>\"; body_end = \"<script src=/a.js></script>\"; };") || rc=$?
if [ "$rc" -eq 0 ] && grep -Eq "edge.conf:[0-9]+: .*inject.head_end: an inline <script>.*script-src 'self' https://cdn.test" <<<"$out" &&
	! grep -q "inject.body_end" <<<"$out"; then
	t_ok "--check: an inline <script> the CSP blocks is a warning (a src one is not)"
else
	t_fail "--check CSP warning" "$out"
fi
rc=0
out=$(check "headers = { response_set = [ \"Content-Security-Policy: script-src 'self' 'unsafe-inline'\" ]; };
        inject = { head_end = \"<script>x()</script>\"; };") || rc=$?
if [ "$rc" -eq 0 ] && ! grep -q "inline <script>" <<<"$out"; then
	t_ok "--check: 'unsafe-inline' allows it: no warning"
else
	t_fail "--check unsafe-inline" "$out"
fi
out=$(check "headers = { response_add = [ \"content_security_policy: script-src 'unsafe-inline' 'nonce-abc'\" ]; };
        inject = { head_end = \"<SCRIPT type=module>x()</SCRIPT>\"; };")
if grep -q "inject.head_end: an inline <script>" <<<"$out"; then
	t_ok "--check: a nonce makes 'unsafe-inline' ignored: a warning"
else
	t_fail "--check nonce" "$out"
fi
t_exit
