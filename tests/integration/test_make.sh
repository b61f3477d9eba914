#!/bin/bash
# test_make.sh - the Makefile's plain `make` (the README's "make: build
# into build/") builds everything `make all` does: the BPF objects and
# skeletons, edgectl, edged, the tests and the tools. A dry run (make -n)
# into a fresh build directory, so nothing is built. Needs make only.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
t_begin

out="$T_TMP/make-n"
if ! make -C "$T_ROOT" -n B="$T_TMP/b" >"$out" 2>&1; then
	t_fail "make -n" "$(tail -3 "$out")"
	t_exit
	exit
fi
missing=""
for f in edged edgectl edge_xdp.bpf.o edge_xdp.skel.h tests/test_h1 tools/probe; do
	grep -qF -- "$T_TMP/b/$f" "$out" || missing="$missing $f"
done
if [ -z "$missing" ]; then
	t_ok "plain make builds edged, edgectl, the BPF object and skeleton, the tests and tools"
else
	t_fail "plain make" "would not build:$missing"
fi
t_exit
