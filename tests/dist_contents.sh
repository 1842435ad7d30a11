#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
#
# The release tarball carries every file of the git tree: `make distdir`
# into a temp dir, then each path of `git ls-files` must be in it, except
# the few that are deliberately not shipped (below). A file added to git
# but to no dist list (EXTRA_DIST, dist_*_SCRIPTS, _SOURCES, man pages)
# fails here by name, before `make distcheck` or a user's build trips on it.
# Skipped (77) where the source tree is not a git work tree (an unpacked
# tarball, as inside distcheck).
set -eu
src=${VNIC_TOP_SRCDIR:?run under make check}
build=${VNIC_TOP_BUILDDIR:?run under make check}

command -v git >/dev/null || { echo "SKIP: git not installed"; exit 77; }
top=$(git -C "$src" rev-parse --show-toplevel 2>/dev/null) || { echo "SKIP: $src is not a git work tree"; exit 77; }
[ "$(cd "$top" && pwd -P)" = "$(cd "$src" && pwd -P)" ] || { echo "SKIP: $src is inside another git tree, not one"; exit 77; }

# Deliberately left out of the tarball: git's own files, the Debian
# packaging (a distribution adds its own debian/ to the upstream tarball).
not_shipped() {
	case "$1" in
	.gitignore|*/.gitignore|.gitattributes) return 0 ;;
	debian/*) return 0 ;;
	esac
	return 1
}

tmp=$(mktemp -d)
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
make -s -C "$build" distdir distdir="$tmp/d" >"$tmp/make.log" 2>&1 || {
	echo "FAIL: make distdir failed:"; cat "$tmp/make.log"; exit 1; }
missing=0 n=0
for f in $(git -C "$src" ls-files); do
	not_shipped "$f" && continue
	n=$((n + 1))
	[ -e "$tmp/d/$f" ] && continue
	echo "FAIL: $f is in git but not in the tarball (add it to a dist list in its folder's local.mk)"
	missing=$((missing + 1))
done
# The other way: nothing in the tarball that is neither in git nor generated.
extra=0
for f in $(cd "$tmp/d" && find . -type f | sed 's|^\./||'); do
	case "$f" in
	configure|aclocal.m4|config.h.in|Makefile.in|*/Makefile.in|build-aux/*|m4/*) continue ;;
	esac
	# (untracked files count as in git here: a new file not committed yet)
	[ -n "$(git -C "$src" ls-files -co --exclude-standard -- "$f")" ] && continue
	echo "FAIL: $f is in the tarball but not in git"
	extra=$((extra + 1))
done
[ "$missing" -eq 0 ] && [ "$extra" -eq 0 ] || exit 1
echo "PASS: $n files of git in the tarball, none extra"
