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
for b in "$vnicd" "$worker" "$bench"; do
	[ -x "$b" ] || { echo "$0: $b missing: build first" >&2; exit 1; }
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/vnic-inflight.XXXXXX")
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' HUP INT TERM
for mode in on off; do
	"$vnicd" --socket "$tmp/$mode.sock" --foreground --worker "$worker" --inflight="$mode" \
		>"$tmp/vnicd-$mode.log" 2>&1 &
	pids+=($!)
done
for mode in on off; do
	for _ in $(seq 100); do [ -S "$tmp/$mode.sock" ] && break; sleep 0.1; done
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
