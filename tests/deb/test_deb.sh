#!/bin/bash
# test_deb.sh - the Debian package make deb built ($B/deb/edge_*.deb; make
# deb-check builds it first): lintian reports no error (its warnings are
# printed, docs/operations.md lists them); the package holds the binaries,
# /etc/edge/edge.conf (a conffile, user "edge"), the units in
# /lib/systemd/system, the logrotate file, the man pages, the bash
# completion, the state and spool
# directories; its postinst neither enables nor starts edged. Then, as
# root, the package is installed with dpkg -i into a throwaway copy of
# this host's root (an overlay whose upper layer is a tmpfs, in a private
# mount namespace: the real root is never written): the edge user exists,
# /var/spool/edge is its, edge.conf is root:edge 0640, the installed edged
# checks the installed configuration as the postinst left it and serves
# with it (on a port of this test) as user edge, writing its analytics
# file; dpkg --purge then (a spool file left as edged would) leaves no
# file of the package's, no
# /var/lib/edge, /var/spool/edge, nor the user. Not run by make check
# (building the package takes minutes): make deb-check.
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
# dh_installsystemd --no-enable --no-start: no deb-systemd-invoke, and an
# enable only where the unit was enabled before (an upgrade)
if grep -q 'adduser --system' "$T_TMP/ctl/postinst" &&
	! grep -q 'deb-systemd-invoke' "$T_TMP/ctl/postinst" &&
	[ "$(grep -c 'deb-systemd-helper enable' "$T_TMP/ctl/postinst")" = \
		"$(grep -c 'deb-systemd-helper --quiet was-enabled' "$T_TMP/ctl/postinst")" ] &&
	sh -n "$T_TMP/ctl/postinst" && sh -n "$T_TMP/ctl/postrm"; then
	t_ok "postinst: makes the user, neither enables nor starts edged"
else
	t_fail "postinst: makes the user, neither enables nor starts edged" "$(grep -n 'systemd' "$T_TMP/ctl/postinst" | head -5)"
fi
if dpkg-deb -f "$deb" Depends | grep -q 'adduser' &&
	dpkg-deb -f "$deb" Depends | grep -q 'libxdp'; then
	t_ok "Depends: adduser and the libraries"
else
	t_fail "Depends" "$(dpkg-deb -f "$deb" Depends)"
fi

# installed into an overlay of this host's root
if [ "$(id -u)" -ne 0 ] || ! command -v unshare >/dev/null; then
	t_skip "dpkg -i / --purge in an overlay" "needs root and unshare"
	t_exit
	exit
fi
if getent passwd edge >/dev/null || [ -e /etc/edge ]; then
	t_skip "dpkg -i / --purge in an overlay" "this host has an edge user or /etc/edge already"
	t_exit
	exit
fi
P=$((20000 + T_ID % 10000))
cp "$deb" "$T_TMP/edge.deb"
cat >"$T_TMP/inroot.sh" <<SH
set -u
exec 2>&1
# only ever inside the overlay
[ "\$(stat -f -c %T /)" = overlayfs ] && [ -f /tmp/inroot.sh ] || { echo "not in the overlay"; exit 1; }
echo "== install"
# as on a host that never had edge (this host's leftovers are in the
# lower layer)
rm -rf /var/lib/edge /var/spool/edge
dpkg -i /tmp/edge.deb || exit 1
echo "user: \$(getent passwd edge | cut -d: -f1,6,7)"
echo "spool: \$(stat -c '%U:%G %a' /var/spool/edge)"
echo "conf: \$(stat -c '%U:%G %a' /etc/edge/edge.conf)"
echo "state: \$(stat -c '%U:%G %a' /var/lib/edge)"
/usr/sbin/edged --check -c /etc/edge/edge.conf && echo "check: ok"
# served with the installed configuration (its port moved to this test's)
sed -i 's/0.0.0.0:8080/127.0.0.1:$P/; s/"\[::\]:8080"/"[::1]:$P"/; s/127.0.0.1:9090/127.0.0.1:$((P + 1))/' /etc/edge/edge.conf
mkdir -p /run/edge
/usr/sbin/edged -f -c /etc/edge/edge.conf >/tmp/edged.log 2>&1 &
pid=\$!
for i in \$(seq 100); do
	curl -s -o /dev/null -m 2 -H 'Host: shop.example.com' http://127.0.0.1:$P/ && break
	sleep 0.1
done
curl -s -o /dev/null -w 'status: %{http_code}\n' -m 5 -H 'Host: nowhere.example' http://127.0.0.1:$P/
sleep 0.5
echo "edged user: \$(ps -o user= -p \$pid)"
echo "analytics: \$(stat -c '%U' /var/lib/edge/requests.jsonl 2>&1) \$(grep -c nowhere.example /var/lib/edge/requests.jsonl 2>&1)"
kill -TERM \$pid; wait \$pid; echo "edged exit: \$?"
sed 's/^/edged.log: /' /tmp/edged.log | tail -5
# what edged leaves in its spool while the database is away
touch /var/spool/edge/spool-0000000001.jsonl
echo "== purge"
dpkg --purge edge || exit 1
echo "left: \$(ls -d /etc/edge /var/lib/edge /var/spool/edge /run/edge /usr/sbin/edged /lib/systemd/system/edged.service /etc/logrotate.d/edge 2>/dev/null | tr '\n' ' ')"
echo "user left: \$(getent passwd edge; getent group edge)"
echo "dpkg: \$(dpkg-query -W edge >/dev/null 2>&1 && echo known || echo forgotten)"
SH
# shellcheck disable=SC2016 # expanded by the inner shell
unshare -m --propagation private bash -c '
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
cp "$t/edge.deb" "$t/inroot.sh" "$t/ov/root/tmp/"
chroot "$t/ov/root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive bash /tmp/inroot.sh
' _ "$T_TMP" >"$T_TMP/inroot.out" 2>&1
rc=$?
sed 's/^/# /' "$T_TMP/inroot.out" | grep -v '^# (Reading database' | tail -40
out="$T_TMP/inroot.out"
if [ $rc -ne 0 ] || ! grep -q '^== purge' "$out"; then
	t_fail "dpkg -i in an overlay of this root" "exit $rc"
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
expect_line "installed edged --check -c the installed edge.conf" "check: ok"
expect_line "installed edged serves: an unknown host answered 503" "status: 503"
expect_line "installed edged runs as edge" "edged user: edge"
expect_line "analytics file written under user edge" "analytics: edge 1"
expect_line "installed edged drains and exits 0" "edged exit: 0"
expect_line "purge: no file, directory or unit left" "left: "
expect_line "purge: no edge user or group left" "user left: "
expect_line "purge: dpkg forgets the package" "dpkg: forgotten"
t_exit
