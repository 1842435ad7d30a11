#!/bin/sh
# Hostile guest end to end (TESTPLAN G1, L10): NIC A's guest posts a
# looping TX chain (two descriptors pointing at each other, then a
# zero-length self-loop). vnicd must report QUEUE_NEEDS_RESET for A's tx0
# within 2 s, show it broken with a reason in status, while NIC B's frames
# keep flowing both ways, every one checked.
set -eu
. "$(dirname "$0")/e2e_lib.sh"

E2E_BENCH_TIMEOUT=20 # two runs of about 3 s each; 60 s at worst in all
e2e_start_vnicd
e2e_bench hostile --kind loop --victim 0 --seconds 2 || e2e_die "hostile loop failed"
grep -q "needs-reset for .* queue 1 after" "$E2E_TMP/bench.out" || e2e_die "no needs-reset line"
e2e_bench hostile --kind selfloop --victim 1 --seconds 2 || e2e_die "hostile selfloop failed"
# vnicd survived both and still answers.
"$VNICCTL" --socket "$E2E_SOCK" status >/dev/null || e2e_die "vnicctl status failed afterwards"
e2e_log "PASS"
