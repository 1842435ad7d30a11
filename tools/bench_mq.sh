#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# bench_mq.sh BUILD_DIR [RUNS] [SECONDS]: issue 15's benchmark. One NIC with
# 1 and with 2 queue pairs, side by side (alternating, so drift in the
# machine's load hits both alike), vnic-bench traffic through the socket
# backend at 1500 B and 64 KiB frames, guest->host and host->guest, RUNS
# runs each (default 5) of SECONDS (default 3). Prints min/median/max of
# the aggregate Gbit/s and of the workers' CPU seconds, and the ratio of
# the medians (2 pairs / 1 pair), with vnic-bench's own CPU seconds.
# vnic-bench plays guest and host in one thread: where that thread is the
# bottleneck (its CPU near SECONDS), a second pair cannot help, and the
# table shows it. Not a test: numbers depend on the machine.
set -euo pipefail
if [ $# -lt 1 ] || [ $# -gt 3 ]; then
	echo "usage: $0 BUILD_DIR [RUNS] [SECONDS]" >&2
	exit 2
fi
build=$1 runs=${2:-5} secs=${3:-3}
vnicd=$build/supervisor/vnicd worker=$build/workers/vnicd-worker bench=$build/tools/vnic-bench
. "$(dirname "$0")/bench_lib.sh"
bench_need "$vnicd" "$worker" "$bench"
bench_setup mq
bench_vnicd "$tmp/c.sock" "$tmp/vnicd.log"

for dir in g2h h2g; do
	for size in 1500 65535; do
		for run in $(seq "$runs"); do
			for pairs in 1 2; do
				# A subshell, so that `times` reports vnic-bench's CPU alone.
				out=$( (timeout 120 "$bench" --socket "$tmp/c.sock" traffic --nics 1 \
					--queue-pairs "$pairs" --backend socket --direction "$dir" \
					--size "$size" --seconds "$secs" && times >"$tmp/times")) ||
					{ echo "$0: run failed ($dir $size, $pairs pairs):" >&2
					  echo "$out" >&2; exit 1; }
				b=$(awk 'NR == 2 { for (i = 1; i <= 2; i++) { split($i, t, /[ms]/);
					s += t[1] * 60 + t[2] } print s }' "$tmp/times")
				g=$(sed -n "s/^RESULT traffic dir=$dir .*gbps=\([^ ]*\) .*/\1/p" <<<"$out")
				c=$(sed -n "s/^RESULT traffic kicks_per_mb=.* worker_cpu_s=\([^ ]*\).*/\1/p" <<<"$out")
				echo "$dir $size $pairs $run $g $c $b"
			done
		done
	done
done >"$tmp/runs.txt"
python3 - "$tmp/runs.txt" "$runs" "$secs" <<'PY'
import collections, statistics, sys
rows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    d, size, pairs, _, g, c, b = line.split()
    rows[(d, int(size), int(pairs))].append((float(g), float(c), float(b)))
def mmm(v):
    return "%.3f / %.3f / %.3f" % (min(v), statistics.median(v), max(v))
print("vnic-bench traffic, 1 NIC, socket backend, %s runs x %s s, 1 and 2 queue pairs "
      "alternating; min / median / max" % (sys.argv[2], sys.argv[3]))
print("%-4s %6s %5s  %-26s %-26s %-26s %s" % ("dir", "frame", "pairs", "Gbit/s", "worker CPU s",
                                              "vnic-bench CPU s", "Gbit/s ratio (medians)"))
for d in ("g2h", "h2g"):
    for size in (1500, 65535):
        base = None
        for p in (1, 2):
            v = rows.get((d, size, p))
            if not v:
                continue
            med = statistics.median([x[0] for x in v])
            ratio = "" if p == 1 or not base else "%.2fx" % (med / base)
            base = med if p == 1 else base
            print("%-4s %6d %5d  %-26s %-26s %-26s %s" % (
                d, size, p, mmm([x[0] for x in v]), mmm([x[1] for x in v]),
                mmm([x[2] for x in v]), ratio))
PY
