#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# bench_scale.sh BUILD_DIR [REPS] [PAIRS] [N...]: vnic-bench scale at N =
# 1, 64 and 256 NICs (or the Ns given) of PAIRS queue pairs each (default
# 1) against one fresh vnicd per run, the sizes alternating, REPS rounds
# (default 3); prints min / median / max of each figure per N and the load
# average before and after. vnicd runs with the shipped unit's fd limit
# (LimitNOFILE=65536) where it may raise it. Needs root (sandboxed workers). Issue 15's goal:
#   tools/bench_scale.sh build/plain 3 2 1024
set -eu
b=${1:?usage: bench_scale.sh BUILD_DIR [REPS] [PAIRS] [N...]}
reps=${2:-3}
pairs=${3:-1}
shift $(($# < 3 ? $# : 3))
sizes=${*:-1 64 256}
# The unit's limit, where this shell may raise it (a container may not).
ulimit -n 65536 2>/dev/null || echo "fd limit stays at $(ulimit -n) (cannot raise it to 65536 here)"
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
echo "load before: $(cat /proc/loadavg)"
for r in $(seq "$reps"); do
	for n in $sizes; do
		"$b/supervisor/vnicd" --socket "$t/s" --foreground --worker "$b/workers/vnicd-worker" \
			2>"$t/vnicd.log" &
		p=$!
		i=0; until [ -S "$t/s" ] || [ $i -ge 100 ]; do sleep 0.05; i=$((i + 1)); done
		timeout 900 "$b/tools/vnic-bench" --socket "$t/s" scale --nics "$n" --queue-pairs "$pairs" |
			grep '^RESULT' >>"$t/results" ||
			echo "run $r N=$n failed" >&2
		kill -TERM $p
		wait $p || true
	done
done
echo "load after:  $(cat /proc/loadavg)"
python3 - "$t/results" <<'PY'
import sys, statistics
rows = {}
for line in open(sys.argv[1]):
    kv = dict(f.split("=", 1) for f in line.split()[2:])
    rows.setdefault(int(kv["nics"]), []).append({k: float(v) for k, v in kv.items()})
keys = ["add_ms", "frames_ms", "status_ms_med", "remove_ms", "vnicd_rss_kb", "vnicd_pss_kb",
        "worker_pss_idle_kb_med", "worker_pss_idle_kb_max", "worker_pss_busy_kb_med"]
print("%-24s" % "figure (min/med/max)" + "".join("%26s" % ("N=%d x %d pairs (%d runs)" % (n, int(rows[n][0].get("pairs", 1)), len(rows[n]))) for n in sorted(rows)))
for k in keys:
    cells = []
    for n in sorted(rows):
        v = sorted(r[k] for r in rows[n])
        cells.append("%8.1f/%8.1f/%8.1f" % (v[0], statistics.median(v), v[-1]))
    print("%-24s" % k + "".join("%26s" % c for c in cells))
PY
