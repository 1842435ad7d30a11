#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# unplug_latency.sh BUILDDIR [RUNS]: RemoveNic latency (request to reply,
# measured by vnic-bench around vnic_remove_nic) of NIC 0 of two, over
# RUNS runs (default 15) per case; prints min/median/max.
#   idle      NIC 0 sent one frame and is idle
#   tx-load   NIC 0 (and NIC 1) under full guest->host load
#   stalled   NIC 0's host end stopped reading: its worker sits on a full
#             backend (TESTPLAN L1; the worker never blocks in the write)
#   deadline  NIC 0's worker held inside its backend send (fault
#             worker.tx.send=delay:10000) with a 200 ms stop deadline:
#             SIGKILL through the pidfd and reap (fault builds only)
# Needs root (the workers sandbox themselves).
set -u
B=${1:?usage: unplug_latency.sh BUILDDIR [RUNS]}
RUNS=${2:-15}
tmp=$(mktemp -d /tmp/vnic-unplug.XXXXXX)
vp=
cleanup() { [ -n "$vp" ] && kill "$vp" 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

start() { # start [FAULT]
	rm -f "$tmp/s"
	VNIC_FAULT=${1:-} VNIC_FAULT_NIC=u0 "$B/supervisor/vnicd" --socket "$tmp/s" --foreground \
		--worker "$B/workers/vnicd-worker" >"$tmp/vnicd.log" 2>&1 &
	vp=$!
	for _ in $(seq 50); do [ -S "$tmp/s" ] && return 0; sleep 0.1; done
	echo "vnicd did not start" >&2; exit 1
}
stop() { kill "$vp"; wait "$vp" 2>/dev/null; vp=; }

# run CASE FAULT BENCH-ARGS...: RUNS unplugs, one latency (ms) per line.
run() {
	local c=$1 f=$2
	shift 2
	start "$f"
	for _ in $(seq "$RUNS"); do
		timeout 30 "$B/tools/vnic-bench" --socket "$tmp/s" traffic --nics 2 --backend socket \
			--id-prefix u --seconds 0.6 --unplug-after 0.3 "$@" 2>&1 |
			sed -n 's/^UNPLUG .* latency_ms=\([0-9.]*\) .*/\1/p'
	done >"$tmp/$c"
	stop
	sort -n "$tmp/$c" | awk -v c="$c" '{ v[NR] = $1 } END {
		if (NR == 0) { printf "%-9s no result\n", c; exit }
		m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
		printf "%-9s runs %3d  min %8.2f  median %8.2f  max %8.2f ms\n", c, NR, v[1], m, v[NR] }'
}

echo "unplug latency, request to reply, $RUNS runs per case ($(nproc) CPUs)"
run idle "" --direction g2h --count 1
run tx-load "" --direction g2h
run stalled "" --direction g2h --stall-backend-after 0.1
if grep -q '^#define VNIC_FAULT_INJECTION 1' "$B/config.h"; then
	run deadline "worker.tx.send=delay:10000@2000" --direction g2h --fault-nic 0 \
		--remove-deadline 200
else
	echo "deadline  (needs a build with --enable-fault-injection)"
fi
