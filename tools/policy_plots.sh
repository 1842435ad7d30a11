#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# policy_plots.sh DATA OUTDIR - PNG plots of a `vnic-bench policy --data DATA`
# table (gnuplot, package gnuplot-nox): per metric, one group per frame
# size and direction, one bar per policy (median, with min..max as the
# error bar). Writes OUTDIR/policy-{gbps,kicks,cpu,rr-p50,rr-p99}.png.
# The plots in doc/ were made with:
#   vnic-bench --socket S policy --runs 3 --data doc/policy-table.dat
#   tools/policy_plots.sh doc/policy-table.dat doc
set -eu
DATA=$1 OUT=$2
command -v gnuplot >/dev/null 2>&1 || { echo "policy_plots.sh: needs gnuplot (gnuplot-nox)" >&2; exit 1; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
LOAD=$(sed -n 's/.*; load \([0-9.]*\) .* \.\. \([0-9.]*\) .*/\1 .. \2/p' "$DATA" | head -n 1)

# metric COLUMN (1-based: the median; min, max follow at 13 + 2 * (COLUMN - 4))
plot() {
	col=$1 name=$2 ylabel=$3 logscale=$4
	mincol=$((13 + 2 * (col - 4)))
	maxcol=$((mincol + 1))
	awk -v c="$col" -v a="$mincol" -v b="$maxcol" '
		/^#/ { next }
		{ key = $2 "-" $3; if (!(key in seen)) { seen[key] = 1; order[n++] = key }
		  v[key, $1] = $c " " $a " " $b }
		END { for (i = 0; i < n; i++) { k = order[i]; lab = k
		        sub(/^1024-/, "1 KiB ", lab); sub(/^16384-/, "16 KiB ", lab); sub(/^65535-/, "64 KiB ", lab)
		        printf "\"%s\"", lab
		        split("timer bh adaptive poll", p, " ")
		        for (j = 1; j <= 4; j++) printf " %s", ((k, p[j]) in v) ? v[k, p[j]] : "0 0 0"
		        printf "\n" } }' "$DATA" >"$TMP/$name.dat"
	cat >"$TMP/$name.gp" <<GP
set terminal pngcairo size 900,480 noenhanced font ",10"
set output "$OUT/policy-$name.png"
set title "vnic-bench policy: $ylabel (median of rounds, bars min..max; load $LOAD)"
set style data histogram
set style histogram errorbars gap 2 lw 1
set style fill solid 0.7 border -1
set ylabel "$ylabel"
set key top left
set grid ytics
$( [ "$logscale" = log ] && echo "set logscale y" )
set yrange [$( [ "$logscale" = log ] && echo 1 || echo 0 ):*]
plot "$TMP/$name.dat" using 2:3:4:xtic(1) title "timer", \
     "" using 5:6:7 title "bh", "" using 8:9:10 title "adaptive", "" using 11:12:13 title "poll"
GP
	gnuplot "$TMP/$name.gp"
	echo "$OUT/policy-$name.png"
}
plot 4 gbps "Gbit/s" lin
plot 6 kicks "kicks per MB" lin
plot 8 cpu "worker CPU s per GB" lin
plot 11 rr-p50 "RR latency p50 (us)" log
plot 12 rr-p99 "RR latency p99 (us)" log
