#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Scale, small (issue 10): vnic-bench scale adds 8 NICs on one
# connection, passes checked frames each way on every one, lists the
# status of all (every NIC RUNNING) and removes them; then vnicd's fds
# are back to where they were and no worker is left. The figures are
# printed, not asserted (tools/bench_scale.sh is the benchmark).
set -eu
. "$(dirname "$0")/e2e_lib.sh"
sandbox=
[ "$(id -u)" = 0 ] || sandbox=--sandbox=off
"$VNICD" --socket "$E2E_SOCK" --foreground --worker "$VNICD_WORKER" $sandbox >"$E2E_TMP/vnicd.log" 2>&1 &
VNICD_PID=$!
e2e_wait_for 10 "vnicd's socket" e2e_vnicd_up
fds0=$(ls /proc/$VNICD_PID/fd | wc -l)
e2e_bench scale --nics 8 --frames 8 --status-reps 5 || e2e_die "vnic-bench scale failed"
grep -q '^RESULT scale nics=8 ' "$E2E_TMP/bench.out" || e2e_die "no RESULT line"
e2e_wait_for 5 "vnicd's fds back to $fds0" sh -c "[ \$(ls /proc/$VNICD_PID/fd | wc -l) -eq $fds0 ]"
# No child either: each worker's holder is reaped too, 1 s after its worker
# (HOLDERS_LINGER_MS, supervisor/holders.h).
e2e_wait_for 5 "no worker or holder left after remove" \
	sh -c "[ -z \"\$(cat /proc/$VNICD_PID/task/$VNICD_PID/children)\" ]"
e2e_stop_vnicd
e2e_log "PASS"
