#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# vnicd_crash.sh: a vnicd that starts after another died serves nothing
# while the dead one's workers still run (issue 16). Each worker stops
# its queues and exits once its channel closes; until then it may still
# complete chains, so a new worker on the same rings would be a second
# consumer of one ring.
#
# Forced: vnicd runs a NIC under traffic with the worker's stop point
# delayed 1.5 s (VNIC_FAULT worker.stop=delay:1500: the worker then
# takes that long to stop after its channel closes), vnicd is SIGKILLed
# and a new vnicd started at once. Checked: the new vnicd's control
# socket accepts only after the old worker has exited, and its log says
# it waited for it. Then a start with no earlier worker left does not
# wait at all.
# Needs a fault-injection build (else 77) and root.
set -u
. "$(dirname "$0")/e2e_lib.sh"

grep -q '^#define VNIC_FAULT_INJECTION 1' "$VNIC_TOP_BUILDDIR/config.h" ||
	e2e_skip "this build has no fault injection (configure --enable-fault-injection)"
e2e_need_root

VNIC_FAULT=worker.stop=delay:1500 e2e_start_vnicd
e2e_bench traffic --nics 1 --seconds 20 --direction both --id-prefix cr \
	>"$E2E_TMP/bench.log" 2>&1 &
BENCH=$!
worker_pid() {
	"$VNICCTL" --socket "$E2E_SOCK" --json status 2>/dev/null |
		python3 -c 'import json, sys
for n in json.load(sys.stdin)["nics"]:
    if n["state"] == "RUNNING" and n["pid"]:
        print(n["pid"])' | head -n 1
}
have_worker() { [ -n "$(worker_pid)" ]; }
# alive PID: it runs (a zombie whose parent, init here, has not reaped it
# yet runs nothing).
alive() { [ -r "/proc/$1/stat" ] && ! sed 's/.*) //' "/proc/$1/stat" | grep -q '^Z'; }
e2e_wait_for 20 "a running worker" have_worker
W=$(worker_pid)
sleep 0.5
mv "$E2E_TMP/vnicd.log" "$E2E_TMP/vnicd1.log"
kill -KILL "$VNICD_PID"
wait "$VNICD_PID" 2>/dev/null
VNICD_PID=
alive "$W" || e2e_die "the worker $W did not outlive vnicd: its stop is delayed 1.5 s"
T0=$(date +%s%N)
e2e_start_vnicd
T1=$(date +%s%N)
if alive "$W"; then
	e2e_die "the new vnicd accepts connections while the dead one's worker $W still runs"
fi
grep -q "worker(s) of an earlier vnicd still running" "$E2E_TMP/vnicd.log" ||
	e2e_die "the new vnicd's log does not say it waited: $(cat "$E2E_TMP/vnicd.log")"
grep -q "earlier vnicd's workers are gone" "$E2E_TMP/vnicd.log" || e2e_die "no end of the wait logged"
e2e_log "the new vnicd waited for the dead one's worker $W: socket up $(((T1 - T0) / 1000000)) ms after its start"
wait $BENCH 2>/dev/null || true  # its vnicd died under it: its own verdict does not count here

# Nothing left: no wait.
e2e_stop_vnicd
e2e_start_vnicd
if grep -q "earlier vnicd still running" "$E2E_TMP/vnicd.log"; then
	e2e_die "a start with no earlier worker waited: $(cat "$E2E_TMP/vnicd.log")"
fi
e2e_log "PASS"
