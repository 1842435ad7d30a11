#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
#
# Licence lines: every source, build and script file of the tree carries
# the BSD-3-Clause SPDX line (tools/spdx.sh --check), and --add writes a
# line that --check accepts in each comment form, after a shebang.
set -eu
src=${VNIC_TOP_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
spdx="$src/tools/spdx.sh"
[ -f "$src/LICENSE" ] || { echo "FAIL: no LICENSE at the top of the tree"; exit 1; }
grep -q 'BSD 3-Clause License' "$src/LICENSE" || { echo "FAIL: LICENSE is not BSD-3-Clause"; exit 1; }

echo "== the source tree"
sh "$spdx" --check "$src"

echo "== --add, then --check, on one file of each kind"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/src" "$tmp/man" "$tmp/tools"
printf 'int x;\n' > "$tmp/src/a.c"
printf '#pragma once\n' > "$tmp/src/a.h"
printf 'syntax = "proto3";\n' > "$tmp/src/a.proto"
printf '#!/bin/sh\necho hi\n' > "$tmp/src/a.sh"
printf '#!/usr/bin/env python3\n# -*- coding: utf-8 -*-\nprint(1)\n' > "$tmp/src/a.py"
printf 'AC_INIT([x], [1])\n' > "$tmp/configure.ac"
printf 'bin_PROGRAMS =\n' > "$tmp/Makefile.am"
printf 'x = 1\n' > "$tmp/src/local.mk"
printf 'active proctype p() { skip }\n' > "$tmp/src/a.pml"
printf '.TH A 1\n' > "$tmp/man/a.1"
printf '#!/bin/sh\nexit 0\n' > "$tmp/run"
printf '# not a source file\n' > "$tmp/README.md"
chmod +x "$tmp/src/a.sh" "$tmp/run"
if out=$(sh "$spdx" --check "$tmp" 2>/dev/null); then
	echo "FAIL: --check passed a tree of untagged files"; exit 1
fi
n=$(printf '%s\n' "$out" | grep -c .)
[ "$n" -eq 11 ] || { echo "FAIL: --check listed $n files, expected 11:"; echo "$out"; exit 1; }
(cd "$tmp" && for f in $out; do sh "$spdx" --add "$f" >/dev/null; done)
sh "$spdx" --check "$tmp"
[ "$(head -n1 "$tmp/src/a.sh")" = '#!/bin/sh' ] || { echo "FAIL: shebang moved"; exit 1; }
[ "$(sed -n 2p "$tmp/src/a.py")" = '# -*- coding: utf-8 -*-' ] || { echo "FAIL: coding line moved"; exit 1; }
[ -x "$tmp/src/a.sh" ] || { echo "FAIL: --add lost the mode"; exit 1; }
[ "$(sed -n 1p "$tmp/configure.ac")" = 'dnl SPDX-License-Identifier: BSD-3-Clause' ] || { echo "FAIL: configure.ac form"; exit 1; }
[ "$(sed -n 1p "$tmp/man/a.1")" = '.\" SPDX-License-Identifier: BSD-3-Clause' ] || { echo "FAIL: man page form"; exit 1; }
[ "$(sed -n 1p "$tmp/src/a.c")" = '/* SPDX-License-Identifier: BSD-3-Clause */' ] || { echo "FAIL: C form"; exit 1; }
! grep -q SPDX "$tmp/README.md" || { echo "FAIL: --add touched README.md"; exit 1; }
sh "$spdx" --add "$tmp/src/a.c" >/dev/null
[ "$(grep -c SPDX "$tmp/src/a.c")" -eq 1 ] || { echo "FAIL: --add tagged twice"; exit 1; }
echo "PASS"
