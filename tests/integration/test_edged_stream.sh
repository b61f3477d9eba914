#!/bin/bash
# test_edged_stream.sh - edged streams large bodies instead of buffering
# them: a 1 GiB upload (Content-Length, then chunked) and a 1 GiB download
# (Content-Length, then chunked) go through edged on 127.0.0.1 high ports
# while edged's VmRSS is sampled every 0.2 s; both ends' SHA-256 and byte
# counts must agree and the RSS peak must stay under its baseline + 64 MiB.
# Backend: tests/tools/stream_backend.py; client and sampler:
# tests/tools/stream_client.py (python3 stdlib; bodies generated on the
# fly, nothing on disk). Runs against build/edged with 1 GiB and against
# build/asan/edged with 128 MiB (STREAM_BYTES / STREAM_ASAN_BYTES override).
# Needs no root.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/lib_edged.sh
. "$(dirname "$0")/../lib_edged.sh"
edged_begin python3
edged_need_build

BASE=$(edged_ports 3)
P_EDGE=$BASE
P_ADMIN=$((BASE + 1))
P_BACK=$((BASE + 2))
N_BIG=${STREAM_BYTES:-$((1024 * 1024 * 1024))}
N_ASAN=${STREAM_ASAN_BYTES:-$((128 * 1024 * 1024))}
RSS_SLACK_KB=$((64 * 1024))
SPID=""

write_conf() {
	{
		edged_conf_head "$P_ADMIN" "$T_TMP/edged.sock"
		cat <<CONF
analytics = { file = "$T_TMP/requests.jsonl"; };
limits = { max_body_bytes = "1M"; };
timeouts = {
  header = "5s";
  upstream_connect = "1s";
  upstream_response = "120s";
  drain = "2s";
};
projects = (
  { id = "bulk";
    environments = (
      { id = "bulk-prod";
        domains = [ "bulk.test" ];
        deployment = { id = "bulk-1"; upstreams = [ "127.0.0.1:$P_BACK" ]; };
        routes = ( { prefix = "/sink"; max_body_bytes = 0; } );
      }
    );
  }
);
CONF
	} >"$T_TMP/edge.conf"
}

now_ms() { date +%s%3N; }

# rss_begin / rss_end NAME: sample edged's VmRSS around one transfer; the
# case fails when the peak exceeds the baseline taken before the run
RSS_BASE=0
rss_begin() {
	rm -f "$T_TMP/rss"
	python3 "$TOOLS/stream_client.py" rss "$EPID" "$T_TMP/rss" &
	SPID=$!
	edged_track "$SPID"
	sleep 0.3
}
RSS_PEAK=0
rss_end() { # sets RSS_PEAK (kB); returns 1 when over RSS_BASE + slack
	local samples
	kill "$SPID" 2>/dev/null
	wait "$SPID" 2>/dev/null
	read -r _ RSS_PEAK samples <"$T_TMP/rss" || RSS_PEAK=999999999
	RSS_INFO="peak VmRSS ${RSS_PEAK} kB (baseline ${RSS_BASE} kB, +$(((RSS_PEAK - RSS_BASE) / 1024)) MiB, $samples samples)"
	[ "$RSS_PEAK" -le $((RSS_BASE + RSS_SLACK_KB)) ]
}

start_edged() { # BIN
	: >"$T_TMP/requests.jsonl"
	: >"$T_TMP/backend.jsonl"
	write_conf
	edged_start "$1" "$T_TMP/edge.conf" -v
}

# verdict NAME WHY MS: end the RSS sample and report one case; WHY is ""
# when the transfer checks passed, else what went wrong
verdict() {
	local name=$1 why=$2 ms=$3
	if ! rss_end; then
		why="${why:+$why; }RSS grew: $RSS_INFO"
	fi
	echo "# $name: $((ms / 1000)).$(((ms % 1000) / 100)) s, $RSS_INFO"
	if [ -z "$why" ]; then
		t_ok "$name"
	else
		t_fail "$name" "$why"
	fi
}

run_suite() { # BIN LABEL BYTES
	local bin=$1 v=$2 n=$3 want="" got t0 ms why mib
	mib=$((n / 1024 / 1024))
	if ! start_edged "$bin"; then
		t_fail "$v: edged starts" "$(tail -5 "$EDGED_LOG")"
		return
	fi
	# warm up the path (first connection, pools, analytics) before the baseline
	python3 "$TOOLS/stream_client.py" put "$P_EDGE" bulk.test 65536 cl >/dev/null
	python3 "$TOOLS/stream_client.py" get "$P_EDGE" bulk.test /source/65536 >/dev/null
	sleep 0.3
	RSS_BASE=$(awk '/^VmRSS:/ { print $2 }' "/proc/$EPID/status")
	t_ok "$v: edged starts (VmRSS ${RSS_BASE} kB after warm-up)"

	local up hash
	for up in cl chunked; do
		hash="hash"
		[ -n "$want" ] && hash=nohash # the pattern's digest is known by now
		rss_begin
		t0=$(now_ms)
		python3 "$TOOLS/stream_client.py" put "$P_EDGE" bulk.test "$n" "$up" "$hash" >"$T_TMP/c.json"
		ms=$(($(now_ms) - t0))
		[ -z "$want" ] && want=$(json_field "$T_TMP/c.json" sha256)
		why=""
		if [ "$(json_field "$T_TMP/c.json" status)" != 200 ]; then
			why="status $(json_field "$T_TMP/c.json" status): $(head -c 300 "$T_TMP/c.json")"
		elif [ "$(json_field "$T_TMP/c.json" reply.bytes)" != "$n" ] ||
			[ "$(json_field "$T_TMP/c.json" reply.sha256)" != "$want" ]; then
			why="backend got $(json_field "$T_TMP/c.json" reply.bytes) bytes sha256 $(json_field "$T_TMP/c.json" reply.sha256), client sent $n bytes sha256 $want"
		fi
		verdict "$v: $mib MiB upload ($up) streams through intact, RSS bounded" "$why" "$ms"
	done

	local q
	for q in "" "?te=chunked"; do
		rss_begin
		t0=$(now_ms)
		python3 "$TOOLS/stream_client.py" get "$P_EDGE" bulk.test "/source/$n$q" >"$T_TMP/c.json"
		ms=$(($(now_ms) - t0))
		got=$(grep -F "\"path\": \"/source/$n$q\"" "$T_TMP/backend.jsonl" | tail -1)
		why=""
		if [ "$(json_field "$T_TMP/c.json" status)" != 200 ]; then
			why="status $(json_field "$T_TMP/c.json" status): $(head -c 300 "$T_TMP/c.json")"
		elif [ "$(json_field "$T_TMP/c.json" bytes)" != "$n" ] ||
			[ "$(json_field "$T_TMP/c.json" sha256)" != "$want" ] ||
			! echo "$got" | grep -q "\"bytes\": $n, \"sha256\": \"$want\""; then
			why="client got $(json_field "$T_TMP/c.json" bytes) bytes sha256 $(json_field "$T_TMP/c.json" sha256); backend: $got; pattern sha256 $want"
		fi
		verdict "$v: $mib MiB download ($([ -n "$q" ] && echo chunked || echo Content-Length)) streams through intact, RSS bounded" "$why" "$ms"
	done

	edged_stop
	edged_sanitizers_clean "$v: sanitizers clean" && t_ok "$v: no sanitizer report"
}

edged_backend "$P_BACK" python3 "$TOOLS/stream_backend.py" "$P_BACK" "$T_TMP/backend.jsonl" ||
	t_fail "backend starts"

run_suite "$EDGED" edged "$N_BIG"
# a small quarantine: ASan's default 256 MiB of freed-but-held blocks
# would show up as RSS growth that is not edged's
edged_asan quarantine_size_mb=8 && run_suite "$EDGED_ASAN" asan "$N_ASAN"
t_exit
