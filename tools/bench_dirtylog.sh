#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# bench_dirtylog.sh BUILD_DIR [RUNS] [SECONDS]: the cost of live
# migration's dirty log (issue 14) on throughput. One vnicd; vnic-bench
# traffic through the socket backend, one NIC, with the log off and with
# --dirty-log (set through libvnic before the frames; every changed page
# checked after RemoveNic, outside the timed part), alternating in each
# round (off first in odd rounds, on first in even ones), RUNS rounds
# (default 5) of SECONDS (default 2), at 1500-byte and 64 KiB frames,
# guest->host and host->guest. Prints min/median/max Gbit/s per setting
# and the on/off ratio of each round (min/median/max); then the worker's
# CPU time per GB moved, median per setting, and the on/off ratio of the
# medians (less sensitive to a busy machine than throughput).
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
bench_setup dirtylog
bench_vnicd "$tmp/vnicd.sock" "$tmp/vnicd.log"

# one MODE SIZE DIR ROUND: a run, its Gbit/s as "SIZE DIR ROUND MODE GBPS".
one() {
	local flag=() out gbps bytes cpu
	[ "$1" = on ] && flag=(--dirty-log)
	out=$(timeout 120 "$bench" --socket "$tmp/vnicd.sock" traffic --nics 1 --backend socket \
		--direction "$3" --size "$2" --seconds "$secs" "${flag[@]}") ||
		{ echo "$0: run failed ($1 $2 $3):" >&2; echo "$out" >&2; exit 1; }
	if [ "$1" = on ] && ! grep -q '^RESULT dirtylog .* missed=0 ' <<<"$out"; then
		echo "$0: the dirty log missed pages ($2 $3):" >&2; echo "$out" >&2; exit 1
	fi
	gbps=$(sed -n "s/^RESULT traffic dir=$3 .* gbps=\([^ ]*\) .*/\1/p" <<<"$out")
	bytes=$(sed -n "s/^RESULT traffic dir=$3 .* bytes=\([^ ]*\) .*/\1/p" <<<"$out")
	cpu=$(sed -n 's/^RESULT traffic .*worker_cpu_s=\([^ ]*\) .*/\1/p' <<<"$out")
	echo "$2 $3 $4 $1 $gbps $bytes $cpu"
}
for size in 1500 65536; do
	for dir in g2h h2g; do
		for run in $(seq "$runs"); do
			if [ $((run % 2)) = 1 ]; then order="off on"; else order="on off"; fi
			for mode in $order; do
				one "$mode" "$size" "$dir" "$run"
			done
		done
	done
done >"$tmp/runs.txt"
python3 - "$tmp/runs.txt" "$runs" "$secs" <<'PY'
import collections, statistics, sys
rows = collections.defaultdict(dict)
cpu = collections.defaultdict(list)
for line in open(sys.argv[1]):
    size, d, run, mode, gbps, nbytes, cpus = line.split()
    rows[(int(size), d)].setdefault(mode, {})[int(run)] = float(gbps)
    if int(nbytes) > 0:
        cpu[(int(size), d, mode)].append(float(cpus) / (int(nbytes) / 1e9))
print("dirty log, vnic-bench traffic, socket backend, 1 NIC, %s rounds x %s s, alternating"
      % (sys.argv[2], sys.argv[3]))
print("%6s  %-4s  %-26s  %-26s  %-31s  %s" % ("frame", "dir", "Gbit/s log off (min/med/max)",
      "Gbit/s log on (min/med/max)", "on/off per round (min/med/max)",
      "worker CPU s/GB off, on (medians), on/off"))
f = lambda v: "%.2f / %.2f / %.2f" % (min(v), statistics.median(v), max(v))
for key in sorted(rows):
    off, on = rows[key]["off"], rows[key]["on"]
    ratio = [on[r] / off[r] for r in sorted(off) if r in on and off[r] > 0]
    coff = statistics.median(cpu[key + ("off",)])
    con = statistics.median(cpu[key + ("on",)])
    print("%6d  %-4s  %-26s  %-26s  %-31s  %.2f, %.2f, %.3f" % (key[0], key[1],
          f(list(off.values())), f(list(on.values())),
          "%.3f / %.3f / %.3f" % (min(ratio), statistics.median(ratio), max(ratio)),
          coff, con, con / coff if coff else 0))
PY
