#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
#
# The manual pages: each renders without a message under `mandoc -Tlint`
# (references between our own four pages aside: they are not installed
# while the tests run) and without a warning under `groff -ww -z`; each
# program's page documents every option and subcommand its --help lists;
# libvnic(3) documents every function libvnic.h declares.
set -eu
src=${VNIC_TOP_SRCDIR:?run under make check}
build=${VNIC_TOP_BUILDDIR:?run under make check}
command -v mandoc >/dev/null 2>&1 || { echo "SKIP: needs mandoc (apt-get install mandoc)"; exit 77; }

fail=0
bad() { echo "FAIL: $*"; fail=1; }
pages="man/vnicd.8 man/vnicctl.8 man/vnic-bench.1 man/libvnic.3"
ours='Xr (vnicd 8|vnicctl 8|vnic\\-bench 1|libvnic 3)'

for p in $pages; do
	[ -f "$src/$p" ] || { bad "$p missing"; continue; }
	out=$(mandoc -Tlint "$src/$p" 2>&1 | grep -Ev "referenced manual not found: $ours\$|referenced manual not found: $ours \\([0-9]+ times\\)\$" || true)
	[ -z "$out" ] || bad "mandoc -Tlint $p:
$out"
	if command -v groff >/dev/null 2>&1; then
		out=$(groff -ww -z -mandoc "$src/$p" 2>&1 || true)
		[ -z "$out" ] || bad "groff -ww $p:
$out"
	fi
done

# flat PAGE: the page with \- read as -.
flat() { sed 's/\\-/-/g' "$src/$1"; }
# options PROG ARGS...: the --long options PROG ARGS --help prints.
options() { "$@" --help 2>&1 | grep -oE -- '--[a-z][a-z0-9-]*' | sort -u || true; }
# commands PROG ARGS...: words --help lists at the start of an indented
# line (vnicctl's commands, vnic-bench's subcommands).
commands() { "$@" --help 2>&1 | sed -n 's/^  \([a-z][a-z-]*\)\( .*\)\{0,1\}$/\1/p' | sort -u || true; }

check_prog() { # check_prog PAGE BIN [SUBCOMMAND]
	page=$1; bin=$2; shift 2
	[ -x "$bin" ] || { bad "$bin not built"; return; }
	for o in $(options "$bin" "$@"); do
		# mdoc's Fl adds one dash itself: .Fl \-socket is --socket.
		flat "$page" | grep -qE -- "Fl ${o#-}([^a-z0-9-]|\$)" ||
			bad "$page does not document $o (from $(basename "$bin") $* --help)"
	done
	[ $# -eq 0 ] || return 0 # a subcommand's --help lists options only
	for c in $(commands "$bin"); do
		flat "$page" | grep -qE -- "(Cm|Ss) $c([^a-z0-9-]|\$)" ||
			bad "$page does not document the command $c (from $(basename "$bin") $* --help)"
	done
}

check_prog man/vnicd.8 "$build/supervisor/vnicd"
check_prog man/vnicctl.8 "$build/tools/vnicctl"
check_prog man/vnic-bench.1 "$build/tools/vnic-bench"
for sub in $(commands "$build/tools/vnic-bench"); do
	check_prog man/vnic-bench.1 "$build/tools/vnic-bench" "$sub"
done

for fn in $(grep -oE '\bvnic_[a-z_]+[[:space:]]*\(' "$src/libvnic/libvnic.h" | tr -d ' (\t' | sort -u); do
	grep -qE "^\\.Fn $fn( |\$)" "$src/man/libvnic.3" || bad "man/libvnic.3 does not document $fn (libvnic.h)"
done

[ "$fail" -eq 0 ] || exit 1
echo "PASS: $pages"
