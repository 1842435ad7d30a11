#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# vnic-bench ring, briefly: the benchmark doc/benchmarks.md quotes must keep
# running (two processes, eventfds, every size and mode) and print its
# table. Figures are not checked here: performance lives in benchmarks.
set -eu
bench="${VNIC_TOP_BUILDDIR:-.}/tools/vnic-bench"
out=$("$bench" ring --runs 1 --seconds 0.05 --sizes 64,1500)
echo "$out"
for mode in suppressed notify-all poll memcpy; do
	echo "$out" | grep -q "$mode" || { echo "no $mode row in the table" >&2; exit 1; }
done
