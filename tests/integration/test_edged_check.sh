#!/usr/bin/env bash
# tests/integration/test_edged_check.sh - edged --check reports every error
# it finds, each on a line of its own, then a count: errors of the file
# (several at once), and of the host: a user that does not exist, a
# directory edged writes that is missing or not writable by the user, a
# listen address another program (or a running edged) holds, a TLS key
# only root can read (checked as the user, with --check and --check-file),
# listen addresses that would share a port (a wildcard beside a specific
# address of one family, in listen, admin_listen and tcp_routes; the
# start refuses them with the same line, not "another edged"). A start-up
# with a bad file logs the same lines. Run for the normal build and, when
# built, the ASan/UBSan one ($B/asan/edged).
#
#   B=build bash tests/integration/test_edged_check.sh
#
# Needs root (to check as user nobody), python3, openssl.

# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/lib_edged.sh
. "$(dirname "$0")/../lib_edged.sh"

t_require_root
edged_begin python3 openssl
edged_need_build

BASE=$(edged_ports 4)
P_EDGE=$BASE
P_ADMIN=$((BASE + 1))
P_TAKEN=$((BASE + 2))
# nobody must be able to reach the directories below T_TMP
chmod 0755 "$T_TMP"
mkdir -p "$T_TMP/logs" "$T_TMP/rootonly"
chown nobody "$T_TMP/logs"
chmod 0755 "$T_TMP/rootonly"
: >"$T_TMP/rootonly/requests.jsonl"
chmod 0644 "$T_TMP/rootonly/requests.jsonl"
# a certificate anyone may read, its key root's alone (0600)
mkdir -p "$T_TMP/tls"
chmod 0755 "$T_TMP/tls"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
	-subj /CN=shop.test -addext subjectAltName=DNS:shop.test -days 2 \
	-keyout "$T_TMP/tls/shop.key" -out "$T_TMP/tls/shop.pem" 2>/dev/null
chmod 0644 "$T_TMP/tls/shop.pem"
chmod 0600 "$T_TMP/tls/shop.key"
TLS_CONF="tls = { listen = [ \"127.0.0.1:$((BASE + 3))\" ]; certificates = ( { cert = \"$T_TMP/tls/shop.pem\"; key = \"$T_TMP/tls/shop.key\"; } ); };"

# conf FILE [EXTRA...]: a good configuration (user nobody, analytics into
# $T_TMP/logs), then each EXTRA line (which may override a key: libconfig
# keeps the first, so EXTRA lines replace by sed instead)
conf() {
	local f=$1
	shift
	cat >"$f" <<CONF
listen = [ "127.0.0.1:$P_EDGE" ];
workers = 1;
user = "nobody";
control_socket = "$T_TMP/edged.sock";
admin_listen = "127.0.0.1:$P_ADMIN";
log_format = "text";
analytics = { file = "$T_TMP/logs/requests.jsonl"; };
projects = (
  { id = "shop";
    environments = ( { id = "prod"; domains = [ "shop.test" ];
                       deployment = { id = "d1"; upstreams = [ "127.0.0.1:1" ]; }; } ); }
);
CONF
	local s
	for s in "$@"; do
		sed -i "$s" "$f"
	done
}

# check_case BIN LABEL NAME CONF RC LINE...: BIN --check -c CONF (or
# $CHECK_FLAG instead of --check) exits RC
# and prints every LINE (a fixed string) on a line of its own.
check_case() {
	local bin=$1 v=$2 name=$3 c=$4 rc=$5 got l
	shift 5
	"$bin" "${CHECK_FLAG:---check}" -c "$c" >"$T_TMP/out" 2>&1
	got=$?
	if [ "$got" -ne "$rc" ]; then
		t_fail "$v: $name" "exit $got, want $rc: $(head -c 600 "$T_TMP/out" | tr '\n' '|')"
		return
	fi
	for l in "$@"; do
		if ! grep -qF -- "$l" "$T_TMP/out"; then
			t_fail "$v: $name" "no line '$l' in: $(head -c 600 "$T_TMP/out" | tr '\n' '|')"
			return
		fi
	done
	if grep -q "AddressSanitizer\|LeakSanitizer\|runtime error" "$T_TMP/out"; then
		t_fail "$v: $name" "sanitizer: $(grep -m1 "Sanitizer\|runtime error" "$T_TMP/out")"
		return
	fi
	t_ok "$v: $name"
}

C=$T_TMP/c.conf

run_checks() {
	local bin=$1 v=$2

	conf "$C"
	check_case "$bin" "$v" "a good configuration: ok" "$C" 0 "c.conf: ok"

	# three independent errors in three groups: all three, then a count
	conf "$C" 's/^workers = 1;/workers = 0;/' 's/"text"/"xml"/' \
		"s/admin_listen = .*/admin_listen = \"127.0.0.1\";/"
	check_case "$bin" "$v" "three errors, each on its line, and a count" "$C" 1 \
		"c.conf:2: workers: 0 is out of range" \
		"c.conf:5: admin_listen: \"127.0.0.1\": expected ADDR:PORT" \
		"c.conf:6: log_format: \"xml\" is not a log format" \
		"c.conf: 3 error(s)"
	# trusted_proxies: a bad entry named with its line and index; a
	# normalised one and a /0 are warnings, the file still ok
	conf "$C" 's|^log_format = "text";|log_format = "text";\ntrusted_proxies = [ "10.0.0.0/8", "proxy.example" ];|'
	check_case "$bin" "$v" "a bad trusted_proxies entry: its line, index and what is wrong" "$C" 1 \
		"c.conf:7: trusted_proxies[1]: 'proxy.example': not an IPv4 or IPv6 address" \
		"c.conf: 1 error(s)"
	conf "$C" 's|^log_format = "text";|log_format = "text";\ntrusted_proxies = [ "172.16.1.0/12", "::/0" ];|'
	check_case "$bin" "$v" "trusted_proxies: host bits and a /0 are warnings" "$C" 0 \
		"c.conf:7: trusted_proxies[0]: \"172.16.1.0/12\" has host bits set; using 172.16.0.0/12" \
		"c.conf:7: trusted_proxies[1]: ::/0 trusts every IPv6 peer" "c.conf: ok"

	# two projects, each with its own error: both
	conf "$C" 's/"shop.test"/"bad_name.test"/'
	cat >>"$C" <<CONF
projects2 = 1;
CONF
	check_case "$bin" "$v" "an unknown key and a bad domain: both" "$C" 1 \
		"projects2: unknown key" "domains[0]" "c.conf: 2 error(s)"

	conf "$C" 's/user = "nobody"/user = "edge-no-such-user"/'
	check_case "$bin" "$v" "a user that does not exist" "$C" 1 \
		"c.conf: user: no user edge-no-such-user" "c.conf: 1 error(s)"

	conf "$C" "s|$T_TMP/logs/requests|$T_TMP/nodir/requests|"
	check_case "$bin" "$v" "an analytics directory that does not exist" "$C" 1 \
		"c.conf: analytics.file: directory $T_TMP/nodir: No such file or directory"

	# a directory nobody cannot write: no file yet, edged makes it as
	# root (a note); a file of root's there, nobody could not reopen it
	conf "$C" "s|$T_TMP/logs/requests|$T_TMP/rootonly/new|"
	check_case "$bin" "$v" "an analytics directory nobody cannot write, no file: a note" "$C" 0 \
		"analytics.file: directory $T_TMP/rootonly is not writable by user \"nobody\": edged makes"
	conf "$C" "s|$T_TMP/logs/requests|$T_TMP/rootonly/requests|"
	check_case "$bin" "$v" "an analytics directory nobody cannot write, with root's file" "$C" 1 \
		"c.conf: analytics.file: $T_TMP/rootonly/requests.jsonl is not writable by user \"nobody\", nor is directory $T_TMP/rootonly"

	# a listen address a python3 listener holds (no SO_REUSEPORT)
	conf "$C" "s/127.0.0.1:$P_EDGE/127.0.0.1:$P_TAKEN/"
	check_case "$bin" "$v" "a listen address in use" "$C" 1 \
		"c.conf: listen[0]: 127.0.0.1:$P_TAKEN is in use"

	# a TLS key only root can read: edged reads it as nobody
	conf "$C" "\$a $TLS_CONF"
	check_case "$bin" "$v" "a TLS key only root can read: refused, naming the file and the user" "$C" 1 \
		"$T_TMP/tls/shop.key: tls.certificates[0]: cannot read: Permission denied" \
		"[checked as user \"nobody\", as edged reads it; root can]" "c.conf: 1 error(s)"
	CHECK_FLAG=--check-file check_case "$bin" "$v" "--check-file: the same key refused" "$C" 1 \
		"$T_TMP/tls/shop.key: tls.certificates[0]: cannot read: Permission denied" \
		"[checked as user \"nobody\""
	chmod 0644 "$T_TMP/tls/shop.key"
	check_case "$bin" "$v" "the key readable by nobody: ok" "$C" 0 "c.conf: ok"
	chmod 0600 "$T_TMP/tls/shop.key"

	# addresses that would share a port: each error names both
	conf "$C" "s/listen = \\[ \"127.0.0.1:$P_EDGE\" \\];/listen = [ \"0.0.0.0:$P_EDGE\", \"127.0.0.1:$P_EDGE\" ];/"
	check_case "$bin" "$v" "listen: 0.0.0.0:P beside 127.0.0.1:P" "$C" 1 \
		"c.conf:1: listen[1]: 127.0.0.1:$P_EDGE takes the port of listen[0] (0.0.0.0:$P_EDGE)"
	"$bin" -f -c "$C" >"$T_TMP/out" 2>&1
	if [ $? -eq 1 ] && grep -qF "listen[1]: 127.0.0.1:$P_EDGE takes the port of listen[0] (0.0.0.0:$P_EDGE)" "$T_TMP/out" &&
		! grep -q "another edged" "$T_TMP/out"; then
		t_ok "$v: the start refuses them with the same line, not 'another edged'"
	else
		t_fail "$v: start with overlapping listen addresses" "$(head -c 400 "$T_TMP/out" | tr '\n' '|')"
	fi
	conf "$C" "s/listen = \\[ \"127.0.0.1:$P_EDGE\" \\];/listen = [ \"[::1]:$P_EDGE\", \"[::]:$P_EDGE\", \"0.0.0.0:$P_ADMIN\" ];/"
	check_case "$bin" "$v" "listen: [::]:P beside [::1]:P (IPv6 only: 0.0.0.0 beside [::] is fine)" "$C" 1 \
		"listen[1]: [::]:$P_EDGE takes the port of listen[0] ([::1]:$P_EDGE)" \
		"admin_listen: 127.0.0.1:$P_ADMIN takes the port of listen[2] (0.0.0.0:$P_ADMIN)"
	if grep -q "listen\[2\]:" "$T_TMP/out"; then
		t_fail "$v: 0.0.0.0 beside [::] refused" "$(cat "$T_TMP/out")"
	fi
	conf "$C" "\$a tcp_routes = ( { listen = \"0.0.0.0:$P_EDGE\"; environment = \"prod\"; } );"
	check_case "$bin" "$v" "a TCP route on the port of a listen address" "$C" 1 \
		"tcp_routes[0].listen: 0.0.0.0:$P_EDGE takes the port of listen[0] (127.0.0.1:$P_EDGE)"

	# all of the host's problems at once
	conf "$C" "s/127.0.0.1:$P_EDGE/127.0.0.1:$P_TAKEN/" \
		's/user = "nobody"/user = "edge-no-such-user"/' \
		"s|$T_TMP/logs/requests|$T_TMP/nodir/requests|"
	check_case "$bin" "$v" "three host errors at once" "$C" 1 \
		"user: no user" "analytics.file: directory" "listen[0]:" \
		"c.conf: 3 error(s)"

	# start-up with a bad file: the same lines, exit 1 at load
	conf "$C" 's/^workers = 1;/workers = 0;/' 's/"text"/"xml"/'
	"$bin" -f -c "$C" >"$T_TMP/out" 2>&1
	if [ $? -eq 1 ] && grep -qF "c.conf:2: workers: 0 is out of range" "$T_TMP/out" &&
		grep -qF "c.conf:6: log_format:" "$T_TMP/out"; then
		t_ok "$v: start-up logs every error of the file and exits 1"
	else
		t_fail "$v: start-up with two errors" "$(head -c 400 "$T_TMP/out" | tr '\n' '|')"
	fi
}

python3 -c '
import socket, sys, time
s = socket.socket()
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(1)
time.sleep(600)' "$P_TAKEN" &
edged_track $!
edged_wait_port "$P_TAKEN" || t_fail "python3 listener on $P_TAKEN"

run_checks "$EDGED" edged
if edged_asan; then
	run_checks "$EDGED_ASAN" asan
fi

# a running edged holds its addresses: --check of its configuration says
# so (in use, by another program or a running edged); --check-file checks
# the file alone
conf "$C"
if edged_start "$EDGED" "$C" && edged_wait_log "serving on"; then
	check_case "$EDGED" edged "a running edged's addresses are in use" "$C" 1 \
		"listen[0]: 127.0.0.1:$P_EDGE is in use (by another program, or by a running edged" \
		"admin_listen: 127.0.0.1:$P_ADMIN is in use"
	# --check-file, a reload's check (ExecReload): the file only
	CHECK_FLAG=--check-file check_case "$EDGED" edged \
		"--check-file of a running edged's configuration: ok" "$C" 0 "c.conf: ok"
	edged_stop 5
else
	t_fail "edged starts" "$(tail -c 400 "$EDGED_LOG")"
fi

t_exit
