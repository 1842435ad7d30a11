#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Production builds carry no fault injection (common/fault.h): no fault_*
# symbol and no point name in vnicd or vnicd-worker. A fault build must
# carry both, which is what makes this test able to fail: the same check
# flips its expectation on the build's config.h.
set -u
top=${VNIC_TOP_BUILDDIR:-.}
bins="$top/supervisor/vnicd $top/workers/vnicd-worker"
command -v nm >/dev/null 2>&1 || { echo "fault_absent: no nm"; exit 77; }
for b in $bins; do
	[ -x "$b" ] || { echo "fault_absent: $b not built"; exit 99; }
done
if grep -q '^#define VNIC_FAULT_INJECTION 1' "$top/config.h"; then
	want=yes
else
	want=no
fi
rc=0
for b in $bins; do
	# libtool may leave a wrapper script; the real binary is in .libs.
	real=$b
	d=$(dirname "$b"); f=$(basename "$b")
	[ -x "$d/.libs/$f" ] && real="$d/.libs/$f"
	[ -x "$d/.libs/lt-$f" ] && real="$d/.libs/lt-$f"
	syms=$(nm "$real" 2>/dev/null | grep -cE ' [TtDdBbRr] (fault_(hit|arm|filter|fired)|fault_armed)$')
	names=$(grep -c -a -E 'worker\.tx\.after_pop|sup\.remove\.reply' "$real")
	echo "fault_absent: $real: fault symbols $syms, point names $names (fault build: $want)"
	if [ "$want" = yes ]; then
		[ "$syms" -gt 0 ] && [ "$names" -gt 0 ] || { echo "FAIL: a fault build without its points"; rc=1; }
	else
		[ "$syms" -eq 0 ] && [ "$names" -eq 0 ] || { echo "FAIL: a production build with fault injection in it"; rc=1; }
	fi
done
exit $rc
