#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# bench_upgrade_pause.sh BUILD_DIR [UPGRADES] [NICE...]: how long an
# upgrade in place pauses vnicd's control path when every core is busy
# (doc/design.md "Upgrade in place", Priority). For each --upgrade-nice
# value (default: 0 5 10 19) a vnicd of its own runs two NICs whose
# `poll` workers spin (vnic-bench traffic --policy poll --poll-us 0),
# and is upgraded UPGRADES times (default 5) one second apart while they
# spin (the traffic is stopped after the last); prints
# each upgrade's pause (vnicctl's pause_us) and the round trip of
# `vnicctl upgrade`. Needs root (CAP_SYS_NICE: without it vnicd does not
# renice, and every row is nice 0). Not a test: numbers depend on the
# machine and its load.
set -euo pipefail
if [ $# -lt 1 ]; then
	echo "usage: $0 BUILD_DIR [UPGRADES] [NICE...]" >&2
	exit 2
fi
build=$(cd "$1" && pwd) ups=${2:-5}
shift $(($# < 2 ? $# : 2))
nices=("$@")
[ ${#nices[@]} -gt 0 ] || nices=(0 5 10 19)
worker=$build/workers/vnicd-worker
# The programs themselves, not libtool's wrapper scripts (their bash
# would be part of what is measured).
export LD_LIBRARY_PATH=$build/.libs
ctl=$build/tools/.libs/vnicctl bench=$build/tools/.libs/vnic-bench
. "$(dirname "$0")/bench_lib.sh"
bench_need "$build/supervisor/vnicd" "$worker" "$ctl" "$bench"
[ "$ups" -ge 1 ] && [ "$ups" -le 50 ] || { echo "$0: UPGRADES: 1..50" >&2; exit 2; }
bench_setup uppause
vnicd=$tmp/vnicd  # upgraded in place: a copy of the build's
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
for n in "${nices[@]}"; do
	install -m 755 "$build/supervisor/vnicd" "$tmp/vnicd"
	bench_vnicd "$tmp/c.sock" "$tmp/vnicd.log" --state-dir "" --upgrade-nice "$n"
	vp=$bench_pid
	# Long enough for the slowest upgrades; stopped when they are done.
	bench_bg "$bench" --socket "$tmp/c.sock" traffic --nics 2 --policy poll --poll-us 0 \
		--seconds $((2 + ups * 5)) >"$tmp/bench.log" 2>&1
	bp=$bench_pid
	sleep 2
	row=""
	for _ in $(seq "$ups"); do
		kill -0 "$bp" 2>/dev/null || { cat "$tmp/bench.log" >&2; echo "$0: the traffic ended" >&2; exit 1; }
		install -m 755 "$build/supervisor/vnicd" "$tmp/vnicd.new" && mv -f "$tmp/vnicd.new" "$tmp/vnicd"
		t0=$(date +%s%N)
		out=$("$ctl" --socket "$tmp/c.sock" --json upgrade --wait 10)
		t1=$(date +%s%N)
		us=$(echo "$out" | sed -n 's/.*"pause_us":\([0-9]*\).*/\1/p')
		row="$row $((us / 1000))/$(((t1 - t0) / 1000000))"
		sleep 1
	done
	bench_stop "$bp"
	reniced=$(grep -c "until it has taken over" "$tmp/vnicd.log" || true)
	bench_stop "$vp"
	rm -f "$tmp/c.sock"
	echo "RESULT upgrade_pause nice=$n reniced=$reniced/$ups pause_ms/vnicctl_ms=$row"
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
