#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# bench_matrix.sh BUILD_DIR [RUNS] [SECONDS]: the issue's benchmark.
# vnic-bench traffic guest->host and host->guest through one tap in a
# private network namespace at 1 KiB, 16 KiB and 64 KiB frames (65535
# bytes: the largest a tap carries), RUNS runs each (default 5) of SECONDS
# (default 3); prints min/median/max of Gbit/s, packets/s, kicks and
# interrupts per 10^6 bytes and worker CPU seconds. Needs root and
# /dev/net/tun. Not a test: numbers depend on the machine and its load.
# VNIC_MATRIX_BACKENDS="tap afpacket" (issue 17) runs each backend in turn
# within every run (alternating rounds, so load drifts hit both alike);
# VNIC_MATRIX_SIZES="64 1518" picks the frame sizes (a size above a
# backend's largest frame is skipped for it: afpacket carries 16014 B).
set -euo pipefail
if [ $# -lt 1 ] || [ $# -gt 3 ]; then
	echo "usage: $0 BUILD_DIR [RUNS] [SECONDS]" >&2
	exit 2
fi
build=$1 runs=${2:-5} secs=${3:-3}
[ "$(id -u)" = 0 ] && [ -c /dev/net/tun ] || { echo "$0: needs root and /dev/net/tun" >&2; exit 1; }
vnicd=$build/supervisor/vnicd worker=$build/workers/vnicd-worker bench=$build/tools/vnic-bench
. "$(dirname "$0")/bench_lib.sh"
bench_need "$vnicd" "$worker" "$bench"
bench_setup matrix
bench_vnicd "$tmp/c.sock" "$tmp/vnicd.log"
netns=vnicmatrix$$
ip netns add "$netns"
bench_netns=$netns

backends=${VNIC_MATRIX_BACKENDS:-tap} sizes=${VNIC_MATRIX_SIZES:-1024 16384 65535}
for dir in g2h h2g; do
	for size in $sizes; do
		for run in $(seq "$runs"); do
			for be in $backends; do
				[ "$be" = afpacket ] && [ "$size" -gt 16014 ] && continue
				out=$(timeout 120 "$bench" --socket "$tmp/c.sock" traffic --nics 1 --backend "$be" \
					--netns "$netns" --direction "$dir" --size "$size" --seconds "$secs") ||
					{ echo "$0: run failed ($be $dir $size):" >&2; echo "$out" >&2; exit 1; }
				d=$(sed -n "s/^RESULT traffic dir=$dir .*gbps=\([^ ]*\) pps=\([^ ]*\) lost=\([^ ]*\).*/\1 \2 \3/p" <<<"$out")
				k=$(sed -n "s/^RESULT traffic kicks_per_mb=\([^ ]*\) irqs_per_mb=\([^ ]*\) worker_cpu_s=\([^ ]*\).*/\1 \2 \3/p" <<<"$out")
				echo "$be $dir $size $run $d $k"
			done
		done
	done
done >"$tmp/runs.txt"
python3 - "$tmp/runs.txt" "$runs" "$secs" <<'PY'
import collections, statistics, sys
rows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    f = line.split()
    rows[(f[0], f[1], int(f[2]))].append([float(x) for x in f[4:]])
print("vnic-bench traffic, 1 NIC, %s runs x %s s; min / median / max" % (sys.argv[2], sys.argv[3]))
print("%-8s %-4s %6s %-22s %-26s %-20s %-20s %-18s %s" % ("backend", "dir", "frame", "Gbit/s",
      "packets/s", "kicks/MB", "interrupts/MB", "worker CPU s", "lost"))
for (be, d, size), v in rows.items():
    c = list(zip(*v))
    fmt = lambda x, p: "%s/%s/%s" % tuple(("%." + p + "f") % y for y in
                                          (min(x), statistics.median(x), max(x)))
    print("%-8s %-4s %6d %-22s %-26s %-20s %-20s %-18s %d" % (be, d, size, fmt(c[0], "2"), fmt(c[1], "0"),
          fmt(c[3], "3"), fmt(c[4], "3"), fmt(c[5], "2"), sum(c[2])))
PY
