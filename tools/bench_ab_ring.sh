#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# bench_ab_ring.sh A B [RUNS] [SIZES] - vnic-bench ring of two builds side by
# side (e.g. before and after a change to the ring): RUNS alternating
# rounds (default 7) of `vnic-bench ring --runs 1 --seconds 0.3`, then
# min / median / max of each build's ns per packet, per size and mode.
# Prints the load average at the start and the end.
set -eu
A=$1 B=$2 RUNS=${3:-7} SIZES=${4:-64,1500}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
echo "load average at start: $(cat /proc/loadavg)"
i=0
while [ $i -lt "$RUNS" ]; do
	for side in A B; do
		eval bin=\$$side
		"$bin" ring --runs 1 --seconds 0.3 --sizes "$SIZES" |
			awk -v s=$side '$1 ~ /^[0-9]+$/ { print s, $1, $2, $6 }' >>"$TMP/all"
	done
	i=$((i + 1))
done
echo "load average at end:   $(cat /proc/loadavg)"
printf '%-6s %-11s %-28s %-28s %s\n' bytes mode "A ns/pkt min/med/max" "B ns/pkt min/med/max" "B/A (medians)"
awk '{ print $2, $3 }' "$TMP/all" | sort -u -k1,1n -k2 | while read -r size mode; do
	a=$(awk -v z="$size" -v m="$mode" '$1=="A" && $2==z && $3==m { print $4 }' "$TMP/all" | sort -g)
	b=$(awk -v z="$size" -v m="$mode" '$1=="B" && $2==z && $3==m { print $4 }' "$TMP/all" | sort -g)
	stat() { [ -n "$1" ] || { echo "- - -"; return; }; echo "$1" | awk '{ v[NR] = $1 } END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.1f %.1f %.1f", v[1], m, v[NR] }'; }
	sa=$(stat "$a") sb=$(stat "$b")
	ma=$(echo "$sa" | cut -d' ' -f2) mb=$(echo "$sb" | cut -d' ' -f2)
	ratio=$(awk -v a="$ma" -v b="$mb" 'BEGIN { if (a > 0 && b > 0) printf "%.2f", b / a; else print "-" }')
	printf '%-6s %-11s %-28s %-28s %s\n' "$size" "$mode" "$sa" "$sb" "$ratio"
done
