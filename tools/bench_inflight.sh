#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# bench_inflight.sh BUILD_DIR [RUNS] [SECONDS]: the cost of inflight
# tracking (issue 5) on TX throughput. Two vnicd run side by side, one
# with --inflight=on (the default) and one with --inflight=off; vnic-bench
# traffic guest->host through the socket backend alternates between them,
# RUNS runs each (default 5) of SECONDS (default 2) at 60-byte and
# 1500-byte frames (small frames: the per-packet cost shows most). Prints
# min/median/max packets/s per setting and the ratio of the medians.
# Not a test: numbers depend on the machine and its load.
set -euo pipefail
if [ $# -lt 1 ] || [ $# -gt 3 ]; then
	echo "usage: $0 BUILD_DIR [RUNS] [SECONDS]" >&2
	exit 2
fi
build=$1 runs=${2:-5} secs=${3:-2}
vnicd=$build/supervisor/vnicd worker=$build/workers/vnicd-worker bench=$build/tools/vnic-bench
. "$(dirname "$0")/bench_lib.sh"
bench_need "$vnicd" "$worker" "$bench"
bench_setup inflight
for mode in on off; do
	bench_vnicd "$tmp/$mode.sock" "$tmp/vnicd-$mode.log" --inflight="$mode"
done
for size in 60 1500; do
	for run in $(seq "$runs"); do
		for mode in on off; do
			out=$(timeout 120 "$bench" --socket "$tmp/$mode.sock" traffic --nics 1 \
				--backend socket --direction g2h --size "$size" --seconds "$secs") ||
				{ echo "$0: run failed ($mode $size):" >&2; echo "$out" >&2; exit 1; }
			pps=$(sed -n 's/^RESULT traffic dir=g2h .* pps=\([^ ]*\) .*/\1/p' <<<"$out")
			echo "$size $mode $pps"
		done
	done
done >"$tmp/runs.txt"
python3 - "$tmp/runs.txt" "$runs" "$secs" <<'PY'
import collections, statistics, sys
rows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    size, mode, pps = line.split()
    rows[(int(size), mode)].append(float(pps))
print("inflight tracking, vnic-bench traffic g2h, socket backend, 1 NIC, %s runs x %s s, alternating"
      % (sys.argv[2], sys.argv[3]))
print("%6s  %-34s  %-34s  %s" % ("frame", "packets/s tracking on (min/med/max)",
      "packets/s tracking off (min/med/max)", "on/off (medians)"))
for size in sorted({k[0] for k in rows}):
    on, off = rows[(size, "on")], rows[(size, "off")]
    f = lambda v: "%.0f / %.0f / %.0f" % (min(v), statistics.median(v), max(v))
    print("%6d  %-34s  %-34s  %.3f" % (size, f(on), f(off), statistics.median(on) / statistics.median(off)))
PY
