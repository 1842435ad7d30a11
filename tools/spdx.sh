#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
#
# spdx.sh: every source, build and script file of vnicd carries
# "SPDX-License-Identifier: BSD-3-Clause" in its first lines (LICENSE).
#
#   tools/spdx.sh --check [DIR]      list the files that lack it; exit 1 if any
#   tools/spdx.sh --add [FILE...]    insert it, in the comment form of each
#                                    file, after a shebang line; without FILEs
#                                    into every file of the tree that lacks it
#
# Files come from `git ls-files` when DIR is a git work tree, else from find
# (a release tarball, as in `make distcheck`). Which files count, and their
# comment form, is decided by style() below; anything else (README.md, golden
# files, LICENSE, debian/changelog...) is not a source file.
set -eu

TAG='SPDX-License-Identifier: BSD-3-Clause'
HEAD_LINES=5

usage() {
	echo "usage: $0 --check [DIR] | --add [FILE...]" >&2
	exit 2
}

# style FILE: the comment form for FILE (c, slash, hash, dnl, roff), or
# nothing when FILE is not a source/build/script file.
style() {
	case "$1" in
	*.pb-c.c|*.pb-c.h) return 0 ;;		# protoc-c output
	*.c|*.h|*.pml) echo c; return 0 ;;
	*.proto) echo slash; return 0 ;;
	*/configure.ac|configure.ac) echo dnl; return 0 ;;
	*.sh|*.py|*.mk|*/Makefile.am|Makefile.am|*.pc.in) echo hash; return 0 ;;
	*.service|*.socket|*.service.in|*.socket.in|*.sysusers|*.tmpfiles) echo hash; return 0 ;;
	*/sysusers.d/*.conf|*/tmpfiles.d/*.conf|*.conf) echo hash; return 0 ;;
	man/*.[1-8]|*/man/*.[1-8]) echo roff; return 0 ;;
	debian/rules|*/debian/rules) echo hash; return 0 ;;
	*.md|*.txt|*.golden|*.json|*.in|LICENSE|*/LICENSE) return 0 ;;
	esac
	# Scripts without an extension (quickstart, .ci/run): by their shebang.
	if [ -f "$1" ] && head -c 2 "$1" 2>/dev/null | grep -q '^#!'; then
		case "$(head -n 1 "$1")" in
		*python*) echo hash ;;
		*sh*|*bash*|*make*) echo hash ;;
		esac
	fi
}

# files DIR: candidate paths relative to DIR, one a line.
files() {
	if git -C "$1" rev-parse --show-toplevel >/dev/null 2>&1 &&
	   [ "$(cd "$1" && pwd -P)" = "$(cd "$(git -C "$1" rev-parse --show-toplevel)" && pwd -P)" ]; then
		git -C "$1" ls-files
	else
		(cd "$1" && find . \( -path ./build -o -path ./build-aux -o -path ./m4 \
			-o -path ./autom4te.cache -o -path ./.git -o -path ./_build \
			-o -path ./debian/tmp -o -path './debian/vnicd*' -o -path './debian/libvnic*' \
			-o -path ./debian/.debhelper -o -path ./configure -o -path ./config.status \
			-o -path ./libtool -o -path ./config.log \) -prune -o -type f -print |
			sed 's|^\./||' | sort)
	fi
}

has_tag() {
	head -n "$HEAD_LINES" "$1" | grep -q "$TAG"
}

check() {
	dir=${1:-$(cd "$(dirname "$0")/.." && pwd)}
	[ -d "$dir" ] || { echo "spdx: $dir: not a directory" >&2; exit 2; }
	missing=0 total=0
	for f in $(files "$dir"); do
		s=$(style "$dir/$f")
		[ -n "$s" ] || continue
		[ -f "$dir/$f" ] || continue
		total=$((total + 1))
		has_tag "$dir/$f" && continue
		echo "$f"
		missing=$((missing + 1))
	done
	if [ "$missing" -gt 0 ]; then
		echo "spdx: $missing of $total source files lack '$TAG' in their first $HEAD_LINES lines (tools/spdx.sh --add FILE)" >&2
		exit 1
	fi
	echo "spdx: $total source files checked, all tagged" >&2
}

# line STYLE: the tag in that comment form.
line() {
	case "$1" in
	c) printf '/* %s */\n' "$TAG" ;;
	slash) printf '// %s\n' "$TAG" ;;
	hash) printf '# %s\n' "$TAG" ;;
	dnl) printf 'dnl %s\n' "$TAG" ;;
	roff) printf '.\\" %s\n' "$TAG" ;;
	esac
}

add_one() {
	f=$1
	[ -f "$f" ] || { echo "spdx: $f: no such file" >&2; return 1; }
	has_tag "$f" && return 0
	s=$(style "$f")
	[ -n "$s" ] || { echo "spdx: $f: not a source file I know the comment form of" >&2; return 1; }
	l=$(line "$s")
	tmp=$(mktemp "$f.spdx.XXXXXX")
	# After a shebang line (and python's coding line right after it).
	SPDX_LINE=$l awk '
		BEGIN { tag = ENVIRON["SPDX_LINE"] }
		NR == 1 && /^#!/ { print; next }
		!done && NR == 2 && /^#.*coding[:=]/ { print; next }
		!done { print tag; done = 1 }
		{ print }
		END { if (!done) print tag }
	' "$f" > "$tmp"
	chmod --reference="$f" "$tmp"
	mv "$tmp" "$f"
	echo "spdx: tagged $f"
}

add() {
	top=$(cd "$(dirname "$0")/.." && pwd)
	status=0
	if [ $# -eq 0 ]; then
		cd "$top"
		for f in $(files .); do
			s=$(style "$f")
			[ -n "$s" ] && [ -f "$f" ] && ! has_tag "$f" || continue
			add_one "$f" || status=1
		done
	else
		for f in "$@"; do add_one "$f" || status=1; done
	fi
	return $status
}

case "${1:-}" in
--check) shift; [ $# -le 1 ] || usage; check "$@" ;;
--add) shift; add "$@" ;;
*) usage ;;
esac
