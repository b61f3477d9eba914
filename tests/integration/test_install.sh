#!/bin/bash
# test_install.sh - make install and make uninstall into a temporary
# DESTDIR: with PREFIX=/usr the tree a package holds (/usr/sbin, /etc/edge,
# /usr/lib/systemd/system, /etc/logrotate.d, /usr/share/doc/edge, the man
# pages in /usr/share/man, /usr/share/bash-completion/completions), the
# units naming the installed paths, the installed edged answering
# --version and --check -c of the installed configuration; with
# PREFIX=/usr/local the units follow (sbindir, sysconfdir); a second
# install leaves a changed edge.conf alone, and so does uninstall, which
# removes everything else. Installs build/edged and build/asan/edged.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/lib_edged.sh
. "$(dirname "$0")/../lib_edged.sh"
edged_begin make
edged_need_build

# inst LABEL DESTDIR MAKEVAR...: make install; a failed case on error
inst() {
	local v=$1 dest=$2
	shift 2
	if ! make -s -C "$T_ROOT" install B="$B" DESTDIR="$dest" "$@" >"$T_TMP/make.out" 2>&1; then
		t_fail "$v: make install" "$(tail -5 "$T_TMP/make.out")"
		return 1
	fi
}

run_suite() { # EDGED_BIN EDGECTL_BIN LABEL
	local ed=$1 ec=$2 v=$3 d="$T_TMP/dest-$3" f missing=() out
	d=${d//[^A-Za-z0-9\/._-]/_}
	inst "$v" "$d" PREFIX=/usr EDGED_BIN="$ed" EDGECTL_BIN="$ec" || return
	for f in usr/sbin/edged usr/sbin/edgectl etc/edge/edge.conf \
		usr/lib/systemd/system/edged.service \
		usr/lib/systemd/system/edge-attach@.service \
		etc/logrotate.d/edge usr/share/doc/edge/README.md \
		usr/share/doc/edge/operations.md usr/share/doc/edge/edgectl.md \
		usr/share/man/man8/edged.8 usr/share/man/man8/edgectl.8 \
		usr/share/man/man5/edge.conf.5 \
		usr/share/bash-completion/completions/edgectl \
		usr/share/bash-completion/completions/edged; do
		[ -f "$d/$f" ] || missing+=("$f")
	done
	if [ ${#missing[@]} -eq 0 ] && [ -x "$d/usr/sbin/edged" ] &&
		[ "$(stat -c %a "$d/etc/edge/edge.conf")" = 644 ] &&
		cmp -s "$T_ROOT/examples/edge.conf" "$d/etc/edge/edge.conf"; then
		t_ok "$v: PREFIX=/usr: the installed tree"
	else
		t_fail "$v: PREFIX=/usr: the installed tree" "missing: ${missing[*]}; $(cd "$d" && find . -type f | sort | tr '\n' ' ')"
	fi
	if grep -q '^ExecStart=/usr/sbin/edged -f -c /etc/edge/edge.conf$' "$d/usr/lib/systemd/system/edged.service" &&
		grep -q '^ExecStart=/usr/sbin/edgectl attach %i$' "$d/usr/lib/systemd/system/edge-attach@.service" &&
		[ -z "$(find "$d/usr/lib/systemd/system" -name '*.tmp')" ]; then
		t_ok "$v: PREFIX=/usr: the units name /usr/sbin and /etc/edge"
	else
		t_fail "$v: PREFIX=/usr: the units name /usr/sbin and /etc/edge" "$(grep ^Exec "$d"/usr/lib/systemd/system/*)"
	fi
	expect "$v: installed edged --version names the commit" 0 "(commit " \
		"$d/usr/sbin/edged" --version
	# --check-file: the host's checks (user, /var/lib/edge) are not this
	# DESTDIR's
	expect "$v: installed edged --check-file -c the installed edge.conf" 0 ": ok" \
		"$d/usr/sbin/edged" --check-file -c "$d/etc/edge/edge.conf"
	expect "$v: installed edgectl --help" 0 "" "$d/usr/sbin/edgectl" --help

	# a changed configuration survives a second install and uninstall
	echo '# mine' >>"$d/etc/edge/edge.conf"
	inst "$v" "$d" PREFIX=/usr EDGED_BIN="$ed" EDGECTL_BIN="$ec" || return
	if grep -q '^# mine$' "$d/etc/edge/edge.conf" &&
		grep -q 'edge.conf exists: left as it is' "$T_TMP/make.out"; then
		t_ok "$v: a second install leaves a changed edge.conf"
	else
		t_fail "$v: a second install leaves a changed edge.conf" "$(cat "$T_TMP/make.out")"
	fi
	make -s -C "$T_ROOT" uninstall B="$B" DESTDIR="$d" PREFIX=/usr >"$T_TMP/make.out" 2>&1
	out=$(cd "$d" && find . -type f | sort | tr '\n' ' ')
	if [ "$out" = "./etc/edge/edge.conf " ]; then
		t_ok "$v: uninstall removes all but the changed edge.conf"
	else
		t_fail "$v: uninstall removes all but the changed edge.conf" "left: $out"
	fi
	rm -rf "$d"
}

run_suite "$B/edged" "$B/edgectl" edged
if [ -x "$EDGED_ASAN" ] && [ -x "$B/asan/edgectl" ]; then
	edged_asan
	run_suite "$EDGED_ASAN" "$B/asan/edgectl" asan
else
	t_skip "asan: make install" "$EDGED_ASAN not built"
fi

# PREFIX=/usr/local: /usr/local/etc, the units follow
d="$T_TMP/dest-local"
if inst local "$d" PREFIX=/usr/local; then
	if [ -f "$d/usr/local/etc/edge/edge.conf" ] && [ -x "$d/usr/local/sbin/edged" ] &&
		[ -f "$d/usr/local/lib/systemd/system/edged.service" ] &&
		[ -f "$d/usr/local/share/man/man8/edgectl.8" ] &&
		[ -f "$d/usr/local/share/bash-completion/completions/edgectl" ] &&
		[ -f "$d/usr/local/etc/logrotate.d/edge" ] &&
		grep -q '^ExecStart=/usr/local/sbin/edged -f -c /usr/local/etc/edge/edge.conf$' "$d/usr/local/lib/systemd/system/edged.service" &&
		grep -q '/usr/local/share/doc/edge/operations.md' "$d/usr/local/lib/systemd/system/edged.service"; then
		t_ok "PREFIX=/usr/local: sysconfdir, sbindir, mandir, bash completion and logrotate follow, in the units too"
	else
		t_fail "PREFIX=/usr/local: sysconfdir and sbindir follow" "$(cd "$d" && find . -type f | head -5 | tr '\n' ' ')"
	fi
	make -s -C "$T_ROOT" uninstall B="$B" DESTDIR="$d" PREFIX=/usr/local >/dev/null 2>&1
	out=$(cd "$d" && find . -type f | tr '\n' ' ')
	if [ -z "$out" ]; then
		t_ok "PREFIX=/usr/local: uninstall leaves no file"
	else
		t_fail "PREFIX=/usr/local: uninstall leaves no file" "$out"
	fi
fi
# sysconfdir given
d="$T_TMP/dest-etc"
if inst sysconfdir "$d" PREFIX=/opt/edge sysconfdir=/etc/opt/edge sbindir=/opt/edge/bin; then
	if [ -f "$d/etc/opt/edge/edge/edge.conf" ] && [ -x "$d/opt/edge/bin/edgectl" ] &&
		[ -f "$d/etc/opt/edge/logrotate.d/edge" ] &&
		grep -q '^ExecReload=/opt/edge/bin/edged --check-file -c /etc/opt/edge/edge/edge.conf$' "$d/opt/edge/lib/systemd/system/edged.service"; then
		t_ok "sysconfdir= and sbindir= given"
	else
		t_fail "sysconfdir= and sbindir= given" "$(cd "$d" && find . -type f | head -8 | tr '\n' ' ')"
	fi
fi
t_exit
