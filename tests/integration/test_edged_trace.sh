#!/bin/bash
# test_edged_trace.sh - W3C trace context (issue 36; docs/http.md, "Trace
# context"): a request without traceparent gets a new sampled trace; a
# valid one is continued (its trace id and flags kept, edge's span the
# parent sent upstream, tracestate passed on); a later version is read as
# 00; an invalid one (uppercase, an all-zero id, two fields) starts a new
# trace and its tracestate is dropped. The forward-auth subrequest carries
# the same traceparent as the request. The trace id is the header rules'
# $trace_id, and each request's analytics record holds trace_id and
# span_id as the upstream saw them (edge's own answers a trace too). Over HTTP/1.1
# and HTTP/2 (curl --http2-prior-knowledge), against build/edged and
# build/asan/edged; tests/tools/echo_backend.py records what the upstream
# and the auth service received. Needs no root.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/lib_edged.sh
. "$(dirname "$0")/../lib_edged.sh"
edged_begin curl python3
edged_need_build

BASE=$(edged_ports 3)
P_EDGE=$BASE
P_BACK=$((BASE + 1))
P_ADMIN=$((BASE + 2))
SOCK="$T_TMP/edged.sock"
TP="00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

{
	edged_conf_head "$P_ADMIN" "$SOCK"
	cat <<CONF
analytics = { file = "$T_TMP/requests.jsonl"; };
projects = ( { id = "p-trace"; environments = (
  { id = "e-trace"; domains = [ "trace.test" ];
    deployment = { id = "d-trace"; upstreams = [ "127.0.0.1:$P_BACK" ]; };
    headers = { response_set = [ "X-Trace: \$trace_id" ]; }; },
  { id = "e-fa"; domains = [ "fa.test" ];
    deployment = { id = "d-fa"; upstreams = [ "127.0.0.1:$P_BACK" ]; };
    auth_request = { url = "http://127.0.0.1:$P_BACK/auth"; }; }
); } );
CONF
} >"$T_TMP/edge.conf"
chmod 644 "$T_TMP/edge.conf"

# req PROTO HOST TAG [CURL ARG...]: a GET /t tagged X-Request-ID: TAG;
# the response head in $T_TMP/h; prints the status
req() {
	local proto=$1 host=$2 tag=$3
	shift 3
	curl -sS --max-time 10 "$proto" -D "$T_TMP/h" -o /dev/null -w '%{http_code}' \
		-H "Host: $host" -H "X-Request-ID: $tag" "$@" \
		"http://127.0.0.1:$P_EDGE/t" 2>"$T_TMP/curl.err"
}

# seen TAG NAME [PATH]: the values of field NAME the backend received on
# the request tagged TAG (at PATH, default /t), one a line
seen() {
	python3 - "$T_TMP/backend.log" "$1" "$2" "${3:-/t}" <<'PY'
import json, sys
log, tag, name, path = sys.argv[1:5]
for line in open(log):
    d = json.loads(line)
    h = d["headers"]
    if d["path"].split("?")[0] != path or \
            [v for n, v in h if n.lower() == "x-request-id"] != [tag]:
        continue
    for n, v in h:
        if n.lower() == name.lower():
            print(v)
PY
}

# field NAME: the response's field NAME
field() {
	tr -d '\r' <"$T_TMP/h" | awk -v n="$(echo "$1" | tr '[:upper:]' '[:lower:]')" \
		'{ i = index($0, ":"); if (i && tolower(substr($0, 1, i - 1)) == n) print substr($0, i + 2) }'
}

run_build() { # LABEL BIN
	local v=$1 bin=$2 proto p code tp tag
	rm -f "$T_TMP/requests.jsonl"
	: >"$T_TMP/tags"
	if ! edged_start "$bin" "$T_TMP/edge.conf"; then
		t_fail "$v: edged starts" "$(tail -5 "$EDGED_LOG")"
		return
	fi
	for proto in --http1.1 --http2-prior-knowledge; do
		p="$v ${proto#--}"
		tag="$v-${proto#--}"
		tag=${tag//./-}

		# none: a new trace, sampled, the rules' $trace_id its id
		code=$(req "$proto" trace.test "$tag-new")
		tp=$(seen "$tag-new" traceparent)
		if [ "$code" = 200 ] && [[ "$tp" =~ ^00-[0-9a-f]{32}-[0-9a-f]{16}-01$ ]] &&
			[ "$(field X-Trace)" = "$(cut -d- -f2 <<<"$tp")" ]; then
			t_ok "$p: no traceparent: a new sampled trace sent upstream, \$trace_id its id"
		else
			t_fail "$p: new trace" "$code '$tp' '$(field X-Trace)'"
		fi
		echo "$tag-new" >>"$T_TMP/tags"

		# a valid one: continued, edge's span the parent, tracestate on
		code=$(req "$proto" trace.test "$tag-cont" -H "traceparent: $TP" \
			-H "tracestate: congo=t61rcWkgMzE,rojo=00f067aa0ba902b7")
		tp=$(seen "$tag-cont" traceparent)
		if [ "$code" = 200 ] && [ "$(echo "$tp" | wc -l)" = 1 ] &&
			[[ "$tp" =~ ^00-4bf92f3577b34da6a3ce929d0e0e4736-[0-9a-f]{16}-01$ ]] &&
			[ "$(cut -d- -f3 <<<"$tp")" != 00f067aa0ba902b7 ] &&
			[ "$(seen "$tag-cont" tracestate)" = "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7" ] &&
			[ "$(field X-Trace)" = 4bf92f3577b34da6a3ce929d0e0e4736 ]; then
			t_ok "$p: a valid traceparent continued: its trace id and flags, edge's span as the parent, tracestate passed on"
		else
			t_fail "$p: continued" "$code '$tp' '$(seen "$tag-cont" tracestate)'"
		fi
		echo "$tag-cont" >>"$T_TMP/tags"

		# not sampled stays not sampled; a later version is read as 00
		code=$(req "$proto" trace.test "$tag-unsampled" \
			-H "traceparent: 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00")
		tp=$(seen "$tag-unsampled" traceparent)
		req "$proto" trace.test "$tag-v1" \
			-H "traceparent: cc-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-future" >/dev/null
		if [ "$code" = 200 ] && [[ "$tp" =~ ^00-0af7651916cd43dd8448eb211c80319c-[0-9a-f]{16}-00$ ]] &&
			[[ "$(seen "$tag-v1" traceparent)" =~ ^00-0af7651916cd43dd8448eb211c80319c-[0-9a-f]{16}-01$ ]]; then
			t_ok "$p: flags 00 kept; a later version (cc, with more after it) continued as version 00"
		else
			t_fail "$p: flags, version" "'$tp' '$(seen "$tag-v1" traceparent)'"
		fi
		echo "$tag-unsampled" >>"$T_TMP/tags"
		echo "$tag-v1" >>"$T_TMP/tags"

		# invalid: a new trace, the client's tracestate dropped
		code=$(req "$proto" trace.test "$tag-upper" -H "traceparent: ${TP^^}" -H "tracestate: a=b")
		tp=$(seen "$tag-upper" traceparent)
		req "$proto" trace.test "$tag-two" -H "traceparent: $TP" -H "traceparent: $TP" \
			-H "tracestate: a=b" >/dev/null
		req "$proto" trace.test "$tag-zero" \
			-H "traceparent: 00-00000000000000000000000000000000-00f067aa0ba902b7-01" >/dev/null
		if [ "$code" = 200 ] && [[ "$tp" =~ ^00-[0-9a-f]{32}-[0-9a-f]{16}-01$ ]] &&
			[ "$(cut -d- -f2 <<<"$tp")" != 4bf92f3577b34da6a3ce929d0e0e4736 ] &&
			[ -z "$(seen "$tag-upper" tracestate)" ] &&
			[ "$(seen "$tag-two" traceparent | wc -l)" = 1 ] &&
			[ "$(seen "$tag-two" traceparent | cut -d- -f2)" != 4bf92f3577b34da6a3ce929d0e0e4736 ] &&
			[ -z "$(seen "$tag-two" tracestate)" ] &&
			[[ "$(seen "$tag-zero" traceparent)" =~ ^00-[0-9a-f]{32}-[0-9a-f]{16}-01$ ]] &&
			[ "$(seen "$tag-zero" traceparent | cut -d- -f2)" != 00000000000000000000000000000000 ]; then
			t_ok "$p: uppercase, two fields, an all-zero trace id: a new trace each, one traceparent, no tracestate"
		else
			t_fail "$p: invalid" "'$tp' '$(seen "$tag-two" traceparent | tr '\n' ' ')' '$(seen "$tag-zero" traceparent)'"
		fi
		printf '%s\n' "$tag-upper" "$tag-two" "$tag-zero" >>"$T_TMP/tags"

		# forward auth: the subrequest carries the request's traceparent
		code=$(req "$proto" fa.test "$tag-fa" -H "traceparent: $TP" -H "tracestate: k=v")
		tp=$(seen "$tag-fa" traceparent)
		if [ "$code" = 200 ] && [[ "$tp" =~ ^00-4bf92f3577b34da6a3ce929d0e0e4736- ]] &&
			[ "$(seen "$tag-fa" traceparent /auth)" = "$tp" ] &&
			[ "$(seen "$tag-fa" tracestate /auth)" = k=v ]; then
			t_ok "$p: the forward-auth subrequest carries the request's traceparent and tracestate"
		else
			t_fail "$p: auth subrequest" "$code '$tp' '$(seen "$tag-fa" traceparent /auth)' '$(seen "$tag-fa" tracestate /auth)'"
		fi
		echo "$tag-fa" >>"$T_TMP/tags"
	done
	req --http1.1 nowhere.test "$v-404" >/dev/null
	edged_stop 10
	edged_sanitizers_clean "$v: no sanitizer report" && t_ok "$v: no sanitizer report"

	# each record: the trace id and span the upstream saw; edge's own
	# answer a trace too
	if python3 - "$T_TMP/requests.jsonl" "$T_TMP/backend.log" "$T_TMP/tags" "$v-404" >"$T_TMP/out" <<'PY'; then
import json, re, sys
recs = {}
for line in open(sys.argv[1]):
    d = json.loads(line)
    recs[d["request_id"]] = d
sent = {}
for line in open(sys.argv[2]):
    d = json.loads(line)
    if d["path"] != "/t":
        continue
    h = dict((n.lower(), v) for n, v in d["headers"])
    sent[h["x-request-id"]] = h["traceparent"]
tags = open(sys.argv[3]).read().split()
bad = []
for t in tags:
    r = recs.get(t)
    _, trace, span, _ = sent[t].split("-")
    if not r or r.get("trace_id") != trace or r.get("span_id") != span:
        bad.append((t, sent[t], r and r.get("trace_id"), r and r.get("span_id")))
r = recs.get(sys.argv[4])
if not r or r["outcome"] != "domain_not_found" or not re.fullmatch("[0-9a-f]{32}", r.get("trace_id") or "") \
        or not re.fullmatch("[0-9a-f]{16}", r.get("span_id") or ""):
    bad.append(("edge-made", r))
print(len(tags), bad)
sys.exit(1 if bad or len(tags) < 10 else 0)
PY
		t_ok "$v: analytics: each record's trace_id and span_id are what the upstream saw ($(cut -d' ' -f1 "$T_TMP/out") requests); an answer of edge's own (503 domain_not_found) has a trace too"
	else
		t_fail "$v: analytics" "$(head -c 800 "$T_TMP/out")"
	fi
}

edged_backend "$P_BACK" python3 "$TOOLS/echo_backend.py" "$P_BACK" "$T_TMP/backend.log"
run_build normal "$EDGED"
if edged_asan; then
	run_build asan "$EDGED_ASAN"
fi
t_exit
