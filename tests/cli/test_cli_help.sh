#!/bin/bash
# test_cli_help.sh - help, man pages and bash completion agree with what
# edgectl and edged accept. The commands are taken from `edgectl help`,
# each command's options from `edgectl COMMAND --help` (which checks, in
# edgectl, that every option the command's code accepts has a help line:
# "internal error: option --x of 'cmd' has no help line"). For every
# command: --help and `help COMMAND` print its usage and exit 0, every
# option listed is one the command accepts, the completion offers the
# command and each option, and edgectl.8 has a section for the command and
# names each option; the same for the global options and for edged's
# (edged --help, edged.8, the edged completion). The man pages (make man)
# render without a groff warning and have a NAME line for whatis. The
# completion scripts load in `bash --norc` with Debian's bash-completion
# and complete commands, subcommands, interfaces and values. Runs with
# EDGECTL (and the edged beside it); makes $B/man with pandoc.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
t_begin
E=$EDGECTL
EDGED=${EDGED:-$(dirname "$EDGECTL")/edged}
# nothing here may reach a real daemon
export EDGE_CONTROL_SOCKET="$T_TMP/none.sock"
unset EDGE_PG
COMP=$T_ROOT/dist/bash-completion
BC=/usr/share/bash-completion/bash_completion

# the commands, from the general help: "  edgectl ip block CIDR ..." ->
# "ip block" (the words before the first argument or option)
mapfile -t CMDS < <("$E" help | sed -n 's/^  edgectl \(.*\)$/\1/p' |
	awk '{ c = ""; for (i = 1; i <= NF && $i ~ /^[a-z]+$/; i++) c = c (c ? " " : "") $i; print c }')
"$E" help 2>&1 >/dev/null | grep -q . && CMDS=() # an internal error: a command without help
if [ ${#CMDS[@]} -ge 15 ] && printf '%s\n' "${CMDS[@]}" | grep -qx 'ip block'; then
	t_ok "edgectl help lists ${#CMDS[@]} commands"
else
	t_fail "edgectl help lists the commands" "${CMDS[*]} $("$E" help 2>&1 >/dev/null)"
fi

# opts_of FILE: the options of a --help text's "options:" (or "global
# options:") list, one a line ("--ttl x" for one that takes a value)
opts_of() {
	sed -n '/^\(global \)\{0,1\}options:$/,/^$/p' "$1" |
		sed -n 's/^  \(-[a-zA-Z], \)\{0,1\}\(--[a-z-]*\)\( [A-Z|a-z,.]*\)\{0,1\}  .*/\2\3/p' |
		awk '{ print $1 (NF > 1 ? " x" : "") }'
}

# comp_start: one bash --norc with Debian's bash-completion and both
# scripts loaded, answering comp's questions through two FIFOs
comp_start() {
	mkfifo "$T_TMP/cq" "$T_TMP/ca"
	# shellcheck disable=SC2016 # expanded by that bash
	bash --norc -c '
		. "$1" || exit 1
		. "$2" || exit 1
		. "$3" || exit 1
		while IFS=$'"'"'\t'"'"' read -r -a q; do
			COMP_WORDS=("${q[@]#.}")
			COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
			COMP_LINE="${COMP_WORDS[*]}"
			COMP_POINT=${#COMP_LINE}
			COMPREPLY=()
			f=$(complete -p "${COMP_WORDS[0]}" 2>/dev/null | sed -n "s/.*-F \([^ ]*\) .*/\1/p")
			[ -n "$f" ] && "$f" "${COMP_WORDS[0]}" "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"
			printf "%s\n" "${COMPREPLY[@]}"
			printf "\036\n"
		done' _ "$BC" "$COMP/edgectl" "$COMP/edged" <"$T_TMP/cq" >"$T_TMP/ca" 2>"$T_TMP/comp.err" &
	t_cleanup_add "kill $!"
	exec 7>"$T_TMP/cq" 8<"$T_TMP/ca"
}

# comp WORD...: what the completion offers for the command line WORD...
# (the last word is the one being completed), in COMP_GOT: " w1 w2 ... "
comp() {
	local IFS=$'\t' line q=("${@/#/.}")
	printf '%s\n' "${q[*]}" >&7
	COMP_GOT=" "
	while IFS= read -t 10 -r line <&8; do
		[ "$line" = $'\036' ] && break
		[ -n "$line" ] && COMP_GOT+="$line "
	done
}

# the man pages: built from docs/ (make man), rendered without warnings
MAN=""
if ! command -v pandoc >/dev/null; then
	t_skip "man pages" "no pandoc (scripts/install-deps)"
elif ! make -s -C "$T_ROOT" man B="$B" >"$T_TMP/make.out" 2>&1; then
	t_fail "make man" "$(tail -5 "$T_TMP/make.out")"
else
	MAN=$B/man
	for p in edged.8 edgectl.8 edge.conf.5; do
		MANWIDTH=80 man --warnings -l "$MAN/$p" >"$T_TMP/man.txt" 2>"$T_TMP/man.err"
		rc=$?
		name=$(lexgrog "$MAN/$p" 2>&1)
		if [ $rc -eq 0 ] && [ ! -s "$T_TMP/man.err" ] &&
			[ "$(wc -l <"$T_TMP/man.txt")" -gt 100 ] &&
			[[ $name == *": \"${p%.*} - "* ]]; then
			t_ok "man $p: renders without warnings, whatis: ${name#*: }"
		else
			t_fail "man $p renders without warnings" "rc $rc, $(head -c 300 "$T_TMP/man.err"), $name"
		fi
	done
	# the roff with \- as -, so that options can be found
	sed 's/\\-/-/g' "$MAN/edgectl.8" >"$T_TMP/edgectl.roff"
	sed 's/\\-/-/g' "$MAN/edged.8" >"$T_TMP/edged.roff"
fi

# the completion scripts load
if [ ! -f "$BC" ]; then
	t_skip "bash completion" "no $BC (apt-get install bash-completion)"
	COMP_OK=0
else
	COMP_OK=1
	for s in edgectl edged; do
		if out=$(bash --norc -c '. "$1" && . "$2" && complete -p "$3"' _ "$BC" "$COMP/$s" "$s" 2>&1) &&
			[ "$out" = "complete -F _$s $s" ]; then
			t_ok "completion $s loads in bash --norc: $out"
		else
			t_fail "completion $s loads" "$out"
		fi
	done
	comp_start
	want() { # NAME "WORDS WANTED" WORD...
		local name=$1 w=$2 missing=() x
		shift 2
		comp "$@"
		for x in $w; do
			[[ $COMP_GOT == *" $x "* ]] || missing+=("$x")
		done
		if [ ${#missing[@]} -eq 0 ]; then
			t_ok "$name"
		else
			t_fail "$name" "missing ${missing[*]} in:$COMP_GOT $(cat "$T_TMP/comp.err")"
		fi
	}
	want "completion: edgectl <TAB> offers every command" \
		"$(printf '%s\n' "${CMDS[@]}" | cut -d' ' -f1 | sort -u | tr '\n' ' ')" \
		edgectl ""
	want "completion: edgectl ip <TAB>" "block allow del list policy" edgectl ip ""
	want "completion: edgectl attach <TAB> offers interfaces" "$(cd /sys/class/net && printf '%s ' *)" \
		edgectl attach ""
	want "completion: edgectl detach l<TAB>" "lo" edgectl detach l
	want "completion: edgectl attach --mode <TAB>" "native skb" edgectl attach eth0 --mode ""
	want "completion: edgectl --socket /x ip policy <TAB>" "blocklist allowlist" \
		edgectl --socket /x ip policy ""
	want "completion: edgectl splice <TAB>" "on off auto sockmap" edgectl splice ""
	want "completion: edgectl help <TAB>" "attach ip db hosts" edgectl help ""
	want "completion: edgectl help ratelimit <TAB>" "set off" edgectl help ratelimit ""
	want "completion: edgectl -<TAB> offers the global options" \
		"$(opts_of <("$E" --help) | cut -d' ' -f1 | tr '\n' ' ')" edgectl -
	mkdir -p "$T_TMP/conf.d"
	: >"$T_TMP/conf.d/edge.conf"
	want "completion: edged -c <TAB> offers .conf files" "$T_TMP/conf.d/edge.conf" \
		edged -c "$T_TMP/conf.d/"
	comp edgectl status --json ""
	if [ "$COMP_GOT" = " " ]; then
		t_ok "completion: nothing after edgectl status --json"
	else
		t_fail "completion: nothing after edgectl status --json" "$COMP_GOT"
	fi
fi

# every command: help, options accepted, completion, man page
for cmd in "${CMDS[@]}"; do
	read -ra cw <<<"$cmd"
	bad=()
	"$E" "${cw[@]}" --help >"$T_TMP/help" 2>"$T_TMP/help.err"
	rc=$?
	"$E" help "${cw[@]}" >"$T_TMP/help2" 2>&1
	rc2=$?
	if [ $rc -ne 0 ] || [ -s "$T_TMP/help.err" ]; then
		bad+=("--help: exit $rc: $(head -c 200 "$T_TMP/help.err")")
	fi
	head -1 "$T_TMP/help" | grep -q "^usage: edgectl $cmd\b" || bad+=("--help lacks its usage line")
	grep -qx 'options:' "$T_TMP/help" || bad+=("--help has no options: list")
	[ $rc2 -eq 0 ] && cmp -s "$T_TMP/help" "$T_TMP/help2" || bad+=("help $cmd differs from $cmd --help")
	mapfile -t opts < <(opts_of "$T_TMP/help")
	printf '%s\n' "${opts[@]}" | grep -q '^--help$' || bad+=("--help not listed")
	# each option is one the command accepts: it is parsed before an
	# unknown one stops the command (exit 2, nothing done). All at once
	# first; one by one when something else stopped the command first (a
	# value refused, --project without --pg)
	all=()
	for o in "${opts[@]}"; do
		[ "$o" != --help ] && read -ra ow <<<"$o" && all+=("${ow[@]}")
	done
	timeout 10 "$E" "${cw[@]}" "${all[@]}" --zz-bogus >"$T_TMP/o.out" 2>&1
	orc=$?
	if [ $orc -ne 2 ] || ! grep -q "unknown option '--zz-bogus'" "$T_TMP/o.out"; then
		for o in "${opts[@]}"; do
			read -ra ow <<<"$o"
			[ "${ow[0]}" = --help ] && continue
			timeout 10 "$E" "${cw[@]}" "${ow[@]}" --zz-bogus >"$T_TMP/o.out" 2>&1
			orc=$?
			if [ $orc -ne 2 ] || grep -q "unknown option '${ow[0]}'" "$T_TMP/o.out"; then
				bad+=("${ow[0]} not accepted (exit $orc: $(head -1 "$T_TMP/o.out"))")
			fi
		done
	fi
	if [ "$COMP_OK" = 1 ]; then
		comp edgectl "${cw[@]}" -
		for o in "${opts[@]}"; do
			[[ $COMP_GOT == *" ${o%% *} "* ]] || bad+=("completion lacks ${o%% *}")
		done
		if [ ${#cw[@]} -gt 1 ]; then
			comp edgectl "${cw[0]}" ""
			[[ $COMP_GOT == *" ${cw[1]} "* ]] || bad+=("completion of '${cw[0]} ' lacks ${cw[1]}")
		fi
	fi
	if [ -n "$MAN" ]; then
		# a section: "edgectl ip block|allow ...", "edgectl --pg CONNINFO hosts ..."
		if [ ${#cw[@]} -gt 1 ]; then
			re="edgectl( --pg CONNINFO)? ${cw[0]} ([a-z]+\|)*${cw[1]}([| ]|\\\\|$)"
		else
			re="edgectl( --pg CONNINFO)? ${cw[0]}([ \\\\]|$)"
		fi
		grep -Eq "^\.S[SH] .*$re" "$T_TMP/edgectl.roff" || bad+=("edgectl.8 has no section for '$cmd'")
		for o in "${opts[@]}"; do
			grep -q -- "${o%% *}" "$T_TMP/edgectl.roff" || bad+=("edgectl.8 never names ${o%% *}")
		done
	fi
	if [ ${#bad[@]} -eq 0 ]; then
		t_ok "$cmd: --help (${#opts[@]} options), help $cmd, options accepted, completion, edgectl.8"
	else
		t_fail "$cmd: help, options, completion and man page agree" "$(printf '%s; ' "${bad[@]}")"
	fi
done

# the global options
"$E" --help >"$T_TMP/help" 2>"$T_TMP/help.err"
mapfile -t opts < <(opts_of "$T_TMP/help")
bad=()
[ -s "$T_TMP/help.err" ] && bad+=("stderr: $(head -c 200 "$T_TMP/help.err")")
[ ${#opts[@]} -ge 7 ] || bad+=("only ${#opts[@]} global options listed")
for o in "${opts[@]}"; do
	[ -n "$MAN" ] && ! grep -q -- "${o%% *}" "$T_TMP/edgectl.roff" && bad+=("edgectl.8 never names ${o%% *}")
done
if [ ${#bad[@]} -eq 0 ]; then
	t_ok "global options: ${#opts[@]} in --help, all in edgectl.8 (completion above)"
else
	t_fail "global options" "$(printf '%s; ' "${bad[@]}")"
fi
expect "help of an unknown command: usage error" 2 "help: no command 'nope'" "$E" help nope
expect "edgectl ip --help: the ip commands" 0 "usage: edgectl ip policy" "$E" ip --help

# edged: --help names every option; edged.8 and the completion too
if [ -x "$EDGED" ]; then
	"$EDGED" --help >"$T_TMP/ehelp" 2>&1
	rc=$?
	mapfile -t eopts < <(grep -oE '(^|[ ,])--?[a-zA-Z][a-z-]*' "$T_TMP/ehelp" | sed 's/^[ ,]//' | sort -u)
	bad=()
	[ $rc -eq 0 ] || bad+=("exit $rc")
	for o in --config --check --check-file --foreground --verbose --version --help -c -f -v -V -h; do
		printf '%s\n' "${eopts[@]}" | grep -qx -- "$o" || bad+=("--help lacks $o")
	done
	# every option edged's getopt table has: an unknown one is a usage error
	for o in "${eopts[@]}"; do
		[[ $o == --* ]] || continue
		"$EDGED" "$o" --zz-bogus >"$T_TMP/o.out" 2>&1
		grep -q "unrecognized option '$o'" "$T_TMP/o.out" && bad+=("$o not accepted")
	done
	if [ "$COMP_OK" = 1 ]; then
		comp edged -
		for o in "${eopts[@]}"; do
			[[ $COMP_GOT == *" $o "* ]] || bad+=("completion lacks $o")
		done
	fi
	if [ -n "$MAN" ]; then
		for o in "${eopts[@]}"; do
			grep -q -- "$o" "$T_TMP/edged.roff" || bad+=("edged.8 never names $o")
		done
	fi
	if [ ${#bad[@]} -eq 0 ]; then
		t_ok "edged --help: ${#eopts[@]} options, each accepted, completed and in edged.8"
	else
		t_fail "edged --help, completion and edged.8 agree" "$(printf '%s; ' "${bad[@]}")"
	fi
	expect "edged: a usage error prints the usage and exits 2" 2 "usage: edged -c FILE" "$EDGED" --zz-bogus
else
	t_skip "edged --help" "$EDGED not built"
fi
t_exit
