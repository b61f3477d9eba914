#!/bin/bash
# test_deb.sh - the Debian package make deb built ($B/deb/edge_*.deb; make
# deb-check builds it first): lintian reports no error (its warnings are
# printed, docs/operations.md lists them); the package holds the binaries,
# /etc/edge/edge.conf (a conffile, user "edge"), the units in
# /lib/systemd/system, the logrotate file, the man pages, the bash
# completion, the state and spool directories; its maintainer scripts as
# debhelper made them: the postinst starts nothing and reloads a running
# edged on an upgrade only, no preinst stops it, the prerm stops the units on
# remove only. Then, as root, the package is installed with dpkg -i into
# a throwaway copy of this host's root (an overlay whose upper layer is a
# tmpfs, in a private mount namespace, chrooted, in a network namespace
# of the test's with veth pairs and a bpffs of its own: the real root and
# the host's pins are never written). systemd does not run there: a
# stand-in systemctl logs what the maintainer scripts ask (through
# deb-systemd-invoke) and runs the installed units' own commands (a
# reload: ExecReload, edgectl upgrade). Checked:
# the edge user, /var/spool/edge its, edge.conf root:edge 0640, the
# installed edged checking and serving the installed configuration as
# edge, writing its analytics file; edged.service and
# edge-attach@ede0.service started, a rule blocked; an upgrade (the same
# package, a higher version) asks only try-reload-or-restart
# edged.service, under load (tests/tools/upgrade_load.py: HTTP/1.1
# keep-alive, new and late connections, HTTP/2, a WebSocket): no request
# fails, the tunnel is whole, a new edged serves and the old one is gone,
# edge's XDP program on ede0 is the same with its rule in the map; an
# upgrade to a broken build (its edged exits 3) leaves the old edged
# serving, says so, and dpkg succeeds; an upgrade with edged stopped
# leaves it stopped; dpkg -r stops edged and the units, takes edge off ede0 (the
# unit's ExecStop) and off ede2 (attached by hand: edgectl detach --all),
# unpins the maps, keeps the rules and edge.conf; reinstalled, with edged
# and edge on ede0 started by hand, dpkg --purge stops that edged (it
# drains, exit 0), takes edge off, leaves no pins, no file of the
# package's, no /var/lib/edge, /var/spool/edge, nor the user. Not run by
# make check (building the package takes minutes): make deb-check.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
t_begin

deb=$(find "$B/deb" -maxdepth 1 -name 'edge_*.deb' 2>/dev/null | sort | tail -1)
if [ -z "$deb" ]; then
	t_skip "$(basename "$0")" "no $B/deb/edge_*.deb: run make deb (or make deb-check)"
	exit 77
fi

# lintian: no error
if command -v lintian >/dev/null; then
	changes=$(find "$B/deb" -maxdepth 1 -name 'edge_*.changes' | sort | tail -1)
	lintian --tag-display-limit 0 "${changes:-$deb}" >"$T_TMP/lintian.out" 2>&1
	sed 's/^/# lintian: /' "$T_TMP/lintian.out"
	if grep -q '^E: ' "$T_TMP/lintian.out"; then
		t_fail "lintian: no error" "$(grep '^E: ' "$T_TMP/lintian.out" | head -5)"
	else
		t_ok "lintian: no error ($(grep -c '^W: ' "$T_TMP/lintian.out") warning(s))"
	fi
else
	t_skip "lintian: no error" "no lintian (scripts/install-deps --deb)"
fi

# the contents
dpkg-deb -c "$deb" | awk '{ print $NF, $2 }' >"$T_TMP/contents"
missing=()
for f in ./usr/sbin/edged ./usr/sbin/edgectl ./etc/edge/edge.conf \
	./lib/systemd/system/edged.service ./lib/systemd/system/edge-attach@.service \
	./etc/logrotate.d/edge ./var/lib/edge/ ./var/spool/edge/ \
	./usr/share/doc/edge/operations.md ./usr/share/doc/edge/README.md ./usr/share/doc/edge/edgectl.md \
	./usr/share/doc/edge/changelog.gz ./usr/share/doc/edge/copyright \
	./usr/share/man/man8/edged.8.gz ./usr/share/man/man8/edgectl.8.gz \
	./usr/share/man/man5/edge.conf.5.gz \
	./usr/share/bash-completion/completions/edgectl \
	./usr/share/bash-completion/completions/edged; do
	grep -q "^$f " "$T_TMP/contents" || missing+=("$f")
done
if [ ${#missing[@]} -eq 0 ] && ! grep -q '^./usr/lib/systemd' "$T_TMP/contents"; then
	t_ok "dpkg-deb -c: binaries, configuration, units, logrotate, directories, docs, man pages, completion"
else
	t_fail "dpkg-deb -c: the package's files" "missing: ${missing[*]}"
fi
mkdir -p "$T_TMP/ctl" "$T_TMP/x"
dpkg-deb -e "$deb" "$T_TMP/ctl"
dpkg-deb -x "$deb" "$T_TMP/x"
if grep -qx /etc/edge/edge.conf "$T_TMP/ctl/conffiles" &&
	grep -qx /etc/logrotate.d/edge "$T_TMP/ctl/conffiles" &&
	grep -q '^user = "edge";' "$T_TMP/x/etc/edge/edge.conf"; then
	t_ok "conffiles: edge.conf (user \"edge\") and the logrotate file"
else
	t_fail "conffiles" "$(cat "$T_TMP/ctl/conffiles")"
fi
# dh_installsystemd --no-enable --no-start --no-restart-after-upgrade
# --no-stop-on-upgrade: the postinst enables only where the unit was
# enabled before (an upgrade); edge.postinst asks systemd for one thing,
# on an upgrade ("$2" set): try-reload-or-restart edged (reloaded only
# when it runs; its ExecReload hands the sockets to the new binary), a
# failure said, not fatal; no preinst stops it; the prerm stops edged and
# every edge-attach@ instance, then detach --all, on remove only
ctl=$T_TMP/ctl
# shellcheck disable=SC2016 # the maintainer script's own "$2"
upgrade_only='if [ "$1" = configure ] && [ -n "$2" ]'
if grep -q 'adduser --system' "$ctl/postinst" &&
	[ "$(grep -c 'deb-systemd-invoke' "$ctl/postinst")" = 1 ] &&
	grep -A5 -F "$upgrade_only" "$ctl/postinst" | grep -q 'if ! deb-systemd-invoke try-reload-or-restart edged.service; then' &&
	! grep -q 'try-restart\|deb-systemd-invoke.* restart' "$ctl/postinst" &&
	[ "$(grep -c 'deb-systemd-helper enable' "$ctl/postinst")" = \
		"$(grep -c 'deb-systemd-helper --quiet was-enabled' "$ctl/postinst")" ] &&
	! grep -qs 'deb-systemd-invoke' "$ctl/preinst" &&
	sh -n "$ctl/postinst" && sh -n "$ctl/postrm" && sh -n "$ctl/prerm"; then
	t_ok "postinst: makes the user, starts nothing, reloads a running edged on an upgrade only; no preinst stop"
else
	t_fail "postinst: makes the user, starts nothing, reloads a running edged on an upgrade only" \
		"$(grep -n 'systemd' "$ctl/postinst" "$ctl/preinst" 2>/dev/null | head -8)"
fi
if [ "$(grep -c 'deb-systemd-invoke' "$ctl/prerm")" = 1 ] &&
	awk '/^if \[ "\$1" = remove \]/ { r = 1 } r && /deb-systemd-invoke stop edged.service .edge-attach@\*.service./ { s = 1 }
		r && s && /edgectl detach --all/ { d = 1 } /^fi$/ { r = 0 } END { exit !(s && d) }' "$ctl/prerm" &&
	grep -A1 'start-stop-daemon --stop' "$ctl/prerm" | grep -q -- '--exec /usr/sbin/edged'; then
	t_ok "prerm: on remove only, stops edged and edge-attach@* units, an edged started by hand, then detach --all"
else
	t_fail "prerm: stops the units on remove" "$(head -30 "$ctl/prerm" 2>&1)"
fi
if dpkg-deb -f "$deb" Depends | grep -q 'adduser' &&
	dpkg-deb -f "$deb" Depends | grep -q 'libxdp'; then
	t_ok "Depends: adduser and the libraries"
else
	t_fail "Depends" "$(dpkg-deb -f "$deb" Depends)"
fi

# installed into an overlay of this host's root
if [ "$(id -u)" -ne 0 ] || ! command -v unshare >/dev/null; then
	t_skip "dpkg -i / upgrade / -r / --purge in an overlay" "needs root and unshare"
	t_exit
	exit
fi
if getent passwd edge >/dev/null || [ -e /etc/edge ]; then
	t_skip "dpkg -i / upgrade / -r / --purge in an overlay" "this host has an edge user or /etc/edge already"
	t_exit
	exit
fi
P=$((20000 + T_ID % 10000))
cp "$T_ROOT"/tests/tools/{echo_backend.py,echo_backend_gen.py,upgrade_load.py} "$T_TMP/"
cp "$deb" "$T_TMP/edge.deb"
# the upgrade: the same package with a higher version
ver=$(dpkg-deb -f "$deb" Version)
mkdir -p "$T_TMP/up"
dpkg-deb -R "$deb" "$T_TMP/up"
sed -i "s/^Version: .*/Version: $ver+up1/" "$T_TMP/up/DEBIAN/control"
dpkg-deb -b --root-owner-group "$T_TMP/up" "$T_TMP/edge-up.deb" >/dev/null
# a broken build: a higher version whose edged fails every start
sed -i "s/^Version: .*/Version: $ver+up2/" "$T_TMP/up/DEBIAN/control"
printf '#!/bin/sh\necho "edged: a broken build" >&2\nexit 3\n' >"$T_TMP/up/usr/sbin/edged"
dpkg-deb -b --root-owner-group "$T_TMP/up" "$T_TMP/edge-broken.deb" >/dev/null
# the whole overlay runs in a network namespace of the test's, with two
# veth pairs for edge's XDP program
NS="edge-deb-$T_ID"
if ! t_netns "$NS" || ! ip -n "$NS" link set lo up ||
	! ip -n "$NS" link add ede0 type veth peer name ede1 ||
	! ip -n "$NS" link add ede2 type veth peer name ede3; then
	t_fail "a network namespace with veth pairs" "ip failed"
	t_exit
	exit
fi
for i in ede0 ede1 ede2 ede3; do ip -n "$NS" link set "$i" up; done

# systemd does not run in the overlay: this stand-in for systemctl (first
# on PATH there) logs every call the maintainer scripts make (through
# deb-systemd-invoke, which execs systemctl) and runs the installed units'
# own commands: ExecStartPre and ExecStart of edged.service (edged's PID
# kept while it lives), ExecStart and ExecStop of edge-attach@IFACE.service
cat >"$T_TMP/systemctl" <<'STUB'
#!/bin/bash
echo "systemctl $*" >>/tmp/systemctl.log
U=/run/test-units
args=()
for a in "$@"; do case $a in -*) ;; *) args+=("$a") ;; esac; done
alive() { local s; s=$(ps -o stat= -p "$1" 2>/dev/null); [ -n "$s" ] && [ "${s#Z}" = "$s" ]; }
active() { [ -e "$U/$1" ] && { [ ! -s "$U/$1" ] || alive "$(cat "$U/$1")"; }; }
key() { # UNIT KEY: the unit file's KEY= lines, %i replaced
	local f=/lib/systemd/system/$1 i=${1#*@}
	case $1 in *@*) f=/lib/systemd/system/${1%%@*}@.service ;; esac
	grep "^$2=" "$f" | cut -d= -f2- | sed "s/%i/${i%.service}/g"
}
start() {
	local c
	active "$1" && return 0
	while read -r c; do [ -z "$c" ] || $c || return 1; done < <(key "$1" ExecStartPre)
	if [ "$1" = edged.service ]; then
		# shellcheck disable=SC2046
		setsid $(key "$1" ExecStart) >>/tmp/edged.unit.log 2>&1 </dev/null &
		echo $! >"$U/$1"
	else
		$(key "$1" ExecStart) || return 1
		: >"$U/$1"
	fi
}
stop() {
	local c pid
	if [ -s "$U/$1" ]; then
		pid=$(cat "$U/$1")
		kill -TERM "$pid" 2>/dev/null
		for _ in $(seq 450); do alive "$pid" || break; sleep 0.1; done
	elif [ -e "$U/$1" ]; then
		while read -r c; do [ -z "$c" ] || $c; done < <(key "$1" ExecStop)
	fi
	rm -f "$U/$1"
}
# reload_unit UNIT: its ExecReload commands in turn (their output where
# edged's goes); for edged.service then the main process a reload may
# have changed (systemd learns it from the new edged's MAINPID=)
reload_unit() {
	local c pid
	while read -r c; do
		[ -z "$c" ] || $c >>/tmp/edged.unit.log 2>&1 </dev/null || return 1
	done < <(key "$1" ExecReload)
	if [ "$1" = edged.service ]; then
		pid=$(/usr/sbin/edgectl status --json 2>/dev/null | /usr/bin/python3 -c \
			'import json, sys; print(json.load(sys.stdin)["daemon"]["status"]["pid"])' 2>/dev/null)
		[ -n "$pid" ] && echo "$pid" >"$U/$1"
	fi
	return 0
}
units() { local p u; for p in "$@"; do for u in "$U"/$p; do [ -e "$u" ] && basename "$u"; done; done; }
case ${args[0]:-} in
start) for u in "${args[@]:1}"; do start "$u" || exit 1; done ;;
stop) for u in $(units "${args[@]:1}"); do stop "$u"; done ;;
try-restart) for u in $(units "${args[@]:1}"); do if active "$u"; then stop "$u"; start "$u" || exit 1; fi; done ;;
try-reload-or-restart) for u in $(units "${args[@]:1}"); do if active "$u"; then reload_unit "$u" || exit 1; fi; done ;;
is-active) active "${args[1]}" ;;
esac
exit 0
STUB

cat >"$T_TMP/inroot.sh" <<SH
set -u
exec 2>&1
# only ever inside the overlay
[ "\$(stat -f -c %T /)" = overlayfs ] && [ -f /tmp/inroot.sh ] || { echo "not in the overlay"; exit 1; }
# a machine with systemd: no policy-rc.d refusing units, the stand-in
rm -f /usr/sbin/policy-rc.d
mkdir -p /run/systemd/system /run/test-units /usr/local/sbin
install -m 0755 /tmp/systemctl /usr/local/sbin/systemctl
export PATH=/usr/local/sbin:\$PATH
calls() { grep -v daemon-reload /tmp/systemctl.log | tr '\n' ';'; : >/tmp/systemctl.log; }
alive() { local s; s=\$(ps -o stat= -p "\$1" 2>/dev/null); [ -n "\$s" ] && [ "\${s#Z}" = "\$s" ]; }
xdp() { ip link show dev "\$1" | grep -o 'prog/xdp id [0-9]*' | awk '{ print \$3 }'; }
serves() {
	for i in \$(seq 100); do
		curl -s -o /dev/null -m 2 -H 'Host: shop.example.com' http://127.0.0.1:$P/ && break
		sleep 0.1
	done
	curl -s -o /dev/null -w '%{http_code}' -m 5 -H 'Host: nowhere.example' http://127.0.0.1:$P/
}
# the load during the upgrade and its backend, stopped however this ends
bpid="" lpid=""
trap 'touch /tmp/load.stop; kill \$lpid \$bpid 2>/dev/null; wait \$lpid \$bpid 2>/dev/null' EXIT
verdict() { # the load's report: "ok (counts)" or what failed
	/usr/bin/python3 - /tmp/load.json <<'PY' 2>&1
import json, sys
s = json.load(open(sys.argv[1]))
kinds = ("h1-ka", "h1-new", "h1-late", "h2", "ws")
bad = [(k, s.get(k)) for k in kinds
       if not s.get(k, {}).get("requests") or s[k].get("failures")]
if not s.get("ws", {}).get("whole"):
    bad.append(("ws not whole", s.get("ws")))
print("ok (%s)" % ", ".join("%s %d" % (k, s[k]["requests"]) for k in kinds[:4]) if not bad else bad)
PY
}
rule_in_map() { # 198.51.100.0/24 in edge_rules_v4
	bpftool map lookup pinned /sys/fs/bpf/edge/edge_rules_v4 key 24 0 0 0 198 51 100 0 >/dev/null 2>&1 && echo yes || echo no
}
: >/tmp/systemctl.log
echo "== install"
# as on a host that never had edge (this host's leftovers are in the
# lower layer)
rm -rf /var/lib/edge /var/spool/edge
dpkg -i /tmp/edge.deb || exit 1
echo "user: \$(getent passwd edge | cut -d: -f1,6,7)"
echo "spool: \$(stat -c '%U:%G %a' /var/spool/edge)"
echo "conf: \$(stat -c '%U:%G %a' /etc/edge/edge.conf)"
echo "state: \$(stat -c '%U:%G %a' /var/lib/edge)"
echo "install calls: \$(calls)"
/usr/sbin/edged --check -c /etc/edge/edge.conf && echo "check: ok"
# served with the installed configuration (its port moved to this test's,
# shop.example.com's upstreams to a backend here, no rate limit for the
# load below)
sed -i 's/0.0.0.0:8080/127.0.0.1:$P/; s/"\[::\]:8080"/"[::1]:$P"/; s/127.0.0.1:9090/127.0.0.1:$((P + 1))/' /etc/edge/edge.conf
sed -i 's/"10.0.0.11:3000", "10.0.0.12:3000"/"127.0.0.1:$((P + 2))"/; s|rate = "100/s";|rate = "off";|' /etc/edge/edge.conf
/usr/bin/python3 /tmp/echo_backend.py $((P + 2)) /tmp/backend.log >/tmp/backend.out 2>&1 &
bpid=\$!
mkdir -p /run/edge
/usr/sbin/edged -f -c /etc/edge/edge.conf >/tmp/edged.log 2>&1 &
pid=\$!
echo "status: \$(serves)"
sleep 0.5
echo "edged user: \$(ps -o user= -p \$pid)"
echo "analytics: \$(stat -c '%U' /var/lib/edge/requests.jsonl 2>&1) \$(grep -c nowhere.example /var/lib/edge/requests.jsonl 2>&1)"
kill -TERM \$pid; wait \$pid; echo "edged exit: \$?"
sed 's/^/edged.log: /' /tmp/edged.log | tail -5

echo "== units"
systemctl start edged.service
systemctl start edge-attach@ede0.service
/usr/sbin/edgectl ip block 198.51.100.0/24 >/dev/null
pid1=\$(cat /run/test-units/edged.service)
prog1=\$(xdp ede0)
echo "units: \$(serves) \$(ps -o user= -p \$pid1) xdp \${prog1:-none} rule \$(rule_in_map)"
: >/tmp/systemctl.log

echo "== upgrade, edged running, under load"
rm -f /tmp/load.stop
/usr/bin/python3 /tmp/upgrade_load.py $P shop.example.com 0 /tmp/load.stop /tmp/load.json \
	h1-ka,h1-new,h1-late,h2,ws >/tmp/load.log 2>&1 &
lpid=\$!
sleep 1
dpkg -i /tmp/edge-up.deb || exit 1
pid2=\$(cat /run/test-units/edged.service)
echo "upgrade calls: \$(calls)"
sleep 1
touch /tmp/load.stop
wait \$lpid
lpid=""
# the old edged drains: gone once the WebSocket tunnel closed
for i in \$(seq 100); do alive \$pid1 || break; sleep 0.1; done
echo "upgrade edged: \$( [ "\$pid2" != "\$pid1" ] && ! alive \$pid1 && alive \$pid2 && echo replaced) \$(serves)"
echo "upgrade traffic: \$(verdict)"
echo "upgrade xdp: \$( [ "\$(xdp ede0)" = "\$prog1" ] && echo same) rule \$(rule_in_map)"
echo "upgrade version: \$(dpkg-query -W -f '\${Version}' edge)"
grep -h 'upgrade' /tmp/edged.unit.log | tail -3 | sed 's/^/unit.log: /'

echo "== upgrade to a broken build, edged running"
: >/tmp/systemctl.log
dpkg -i /tmp/edge-broken.deb >/tmp/dpkg.broken 2>&1
echo "broken dpkg: exit \$?"
echo "broken calls: \$(calls)"
echo "broken edged: \$( [ "\$(cat /run/test-units/edged.service)" = "\$pid2" ] && alive \$pid2 && echo the same) \$(serves)"
echo "broken said: \$(grep -c 'edged.service was not upgraded in place' /tmp/dpkg.broken) \$(grep -c 'edged: a broken build' /tmp/edged.unit.log)"

echo "== upgrade, edged stopped"
systemctl stop edged.service
: >/tmp/systemctl.log
dpkg -i /tmp/edge.deb || exit 1
echo "stopped calls: \$(calls)"
echo "stopped edged: \$( [ -e /run/test-units/edged.service ] && echo started || echo stays stopped)"

echo "== remove"
systemctl start edged.service
pid3=\$(cat /run/test-units/edged.service)
echo "remove before: \$(serves) xdp \$(xdp ede0 >/dev/null && echo on)"
# ede2 attached by hand, with no unit
/usr/sbin/edgectl attach ede2 >/dev/null
: >/tmp/systemctl.log
dpkg -r edge || exit 1
echo "remove calls: \$(calls)"
echo "remove edged: \$(alive \$pid3 && echo running || echo stopped)"
echo "remove xdp: ede0 \$(xdp ede0 || true) ede2 \$(xdp ede2 || true) pins \$(ls -d /sys/fs/bpf/edge 2>/dev/null)"
echo "remove kept: \$(grep -c '198.51.100.0/24' /var/lib/edge/state.json) \$(ls /etc/edge/edge.conf) \$(ls /usr/sbin/edgectl /usr/sbin/edged 2>/dev/null)"

echo "== purge"
dpkg -i /tmp/edge.deb >/dev/null || exit 1
sed -i 's/0.0.0.0:8080/127.0.0.1:$P/; s/"\[::\]:8080"/"[::1]:$P"/; s/127.0.0.1:9090/127.0.0.1:$((P + 1))/' /etc/edge/edge.conf
# edged and edge's XDP program started by hand, not by units
/usr/sbin/edged -f -c /etc/edge/edge.conf >/tmp/edged.hand.log 2>&1 &
pid4=\$!
/usr/sbin/edgectl attach ede0 >/dev/null
echo "purge before: \$(serves) xdp \$(xdp ede0 >/dev/null && echo on) rule \$(rule_in_map)"
# what edged leaves in its spool while the database is away
touch /var/spool/edge/spool-0000000001.jsonl
dpkg --purge edge || exit 1
wait \$pid4
echo "purge edged: exit \$?"
echo "purge xdp: ede0 \$(xdp ede0 || true) pins \$(ls -d /sys/fs/bpf/edge 2>/dev/null)"
echo "left: \$(ls -d /etc/edge /var/lib/edge /var/spool/edge /run/edge /usr/sbin/edged /lib/systemd/system/edged.service /etc/logrotate.d/edge 2>/dev/null | tr '\n' ' ')"
echo "user left: \$(getent passwd edge; getent group edge)"
echo "dpkg: \$(dpkg-query -W edge >/dev/null 2>&1 && echo known || echo forgotten)"
SH
# shellcheck disable=SC2016 # expanded by the inner shell
nsenter --net="/run/netns/$NS" unshare -m --propagation private bash -c '
set -e
t=$1
mkdir -p "$t/ov"
mount -t tmpfs tmpfs "$t/ov"
mkdir -p "$t/ov/upper" "$t/ov/work" "$t/ov/root"
mount -t overlay overlay -o "lowerdir=/,upperdir=$t/ov/upper,workdir=$t/ov/work" "$t/ov/root"
mount -t proc proc "$t/ov/root/proc"
mount --rbind /dev "$t/ov/root/dev"
mount -t tmpfs tmpfs "$t/ov/root/run"
mount -t tmpfs tmpfs "$t/ov/root/tmp"
# this namespace'"'"'s sysfs, and a bpffs of its own: the pins never touch the host'"'"'s
mount -t sysfs sysfs "$t/ov/root/sys"
mount -t bpf bpf "$t/ov/root/sys/fs/bpf"
cp "$t/edge.deb" "$t/edge-up.deb" "$t/edge-broken.deb" "$t/inroot.sh" "$t/systemctl" \
	"$t/echo_backend.py" "$t/echo_backend_gen.py" "$t/upgrade_load.py" "$t/ov/root/tmp/"
chroot "$t/ov/root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive bash /tmp/inroot.sh
' _ "$T_TMP" >"$T_TMP/inroot.out" 2>&1
rc=$?
sed 's/^/# /' "$T_TMP/inroot.out" | grep -v '^# (Reading database' | tail -60
out="$T_TMP/inroot.out"
if [ $rc -ne 0 ] || ! grep -q '^dpkg: ' "$out"; then
	t_fail "dpkg -i, upgrade, -r, --purge in an overlay of this root" "exit $rc"
	t_exit
	exit
fi
expect_line() { # NAME LINE
	if grep -qxF -- "$2" "$out"; then t_ok "$1"; else t_fail "$1" "want '$2': $(grep -m1 "^${2%%:*}:" "$out")"; fi
}
expect_line "postinst: the edge system user" "user: edge:/var/lib/edge:/usr/sbin/nologin"
expect_line "postinst: /var/spool/edge is edge's, 0700" "spool: edge:edge 700"
expect_line "postinst: edge.conf root:edge 0640" "conf: root:edge 640"
expect_line "/var/lib/edge root's, 0755" "state: root:root 755"
expect_line "install: neither starts nor enables a unit" "install calls: "
expect_line "installed edged --check -c the installed edge.conf" "check: ok"
expect_line "installed edged serves: an unknown host answered 503" "status: 503"
expect_line "installed edged runs as edge" "edged user: edge"
expect_line "analytics file written under user edge" "analytics: edge 1"
expect_line "installed edged drains and exits 0" "edged exit: 0"
if grep -Eqx 'units: 503 edge xdp [0-9]+ rule yes' "$out"; then
	t_ok "the units run (ExecStartPre, ExecStart): edged as edge, edge on ede0 with a rule"
else
	t_fail "the units run" "$(grep -m1 '^units:' "$out")"
fi
expect_line "upgrade: only try-reload-or-restart edged.service is asked of systemd" "upgrade calls: systemctl try-reload-or-restart edged.service;"
expect_line "upgrade: the running edged handed over to a new process of the new binary, which serves; the old one drained and exited" "upgrade edged: replaced 503"
if grep -q '^upgrade traffic: ok ' "$out"; then
	t_ok "upgrade under load (HTTP/1.1 keep-alive, new and late connections, HTTP/2, a WebSocket): no failed request, the tunnel whole: $(grep -m1 '^upgrade traffic:' "$out" | cut -d' ' -f3-)"
else
	t_fail "upgrade under load: no failed request" "$(grep -m1 '^upgrade traffic:' "$out" | cut -c1-600)"
fi
expect_line "upgrade: edge's XDP program untouched on ede0, its rule in the map" "upgrade xdp: same rule yes"
expect_line "upgrade: the new version installed" "upgrade version: $ver+up1"
expect_line "upgrade to a broken build: dpkg succeeds" "broken dpkg: exit 0"
expect_line "upgrade to a broken build: only try-reload-or-restart asked" "broken calls: systemctl try-reload-or-restart edged.service;"
expect_line "upgrade to a broken build: the running edged serves on" "broken edged: the same 503"
expect_line "upgrade to a broken build: the postinst says so, the unit's log says why" "broken said: 1 1"
expect_line "upgrade with edged stopped: the same call" "stopped calls: systemctl try-reload-or-restart edged.service;"
expect_line "upgrade with edged stopped: edged stays stopped" "stopped edged: stays stopped"
expect_line "before the remove: edged serves, edge on ede0" "remove before: 503 xdp on"
expect_line "remove: prerm stops edged and every edge-attach@ unit" "remove calls: systemctl stop edged.service edge-attach@*.service;"
expect_line "remove: edged stopped" "remove edged: stopped"
expect_line "remove: no XDP program left (ede0 by its unit's ExecStop, ede2 by detach --all), no pins" "remove xdp: ede0  ede2  pins "
expect_line "remove: the rule and edge.conf kept, the binaries gone" "remove kept: 1 /etc/edge/edge.conf "
expect_line "purge: edged and edge on ede0 started by hand, the saved rule back in the map" "purge before: 503 xdp on rule yes"
expect_line "purge: the edged started by hand stopped, drained, exit 0" "purge edged: exit 0"
expect_line "purge: no XDP program on ede0, no pins under /sys/fs/bpf/edge" "purge xdp: ede0  pins "
expect_line "purge: no file, directory or unit left" "left: "
expect_line "purge: no edge user or group left" "user left: "
expect_line "purge: dpkg forgets the package" "dpkg: forgotten"
t_exit
