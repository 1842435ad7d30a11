#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# End to end through the socket backend: vnicd, two workers, two simulated
# guests. Thousands of frames of random sizes (60 B .. 64 KiB) each way
# per NIC, every byte checked, none lost or duplicated; then the counters
# vnicctl status --json shows match what the guests sent and received.
# Then the same with two NICs of two queue pairs each.
set -eu
. "$(dirname "$0")/e2e_lib.sh"
# vnicd runs its workers sandboxed, as in production.
e2e_need_root "the worker sandbox: namespaces, an empty root, the uid drop"
command -v python3 >/dev/null 2>&1 || e2e_skip "needs python3 to read vnicctl --json"

COUNT=5000
e2e_start_vnicd
e2e_bench traffic --nics 2 --backend socket --direction both --size random \
	--seconds 30 --count $COUNT --expect-json "$E2E_TMP/expect.json" \
	--before-remove "$VNICCTL --socket $E2E_SOCK status --json > $E2E_TMP/status.json" ||
	e2e_die "vnic-bench traffic failed"
for d in g2h h2g; do
	got=$(e2e_result_field $d frames)
	[ "$got" = $((2 * COUNT)) ] || e2e_die "$d: $got frames checked, want $((2 * COUNT))"
done
e2e_check_counters "$E2E_TMP/expect.json" "$E2E_TMP/status.json" ||
	e2e_die "vnicctl counters differ from the traffic"

# Two NICs of two queue pairs each (issue 15): a worker, a socket and a
# checked flow each way per pair; a frame on the wrong pair fails its check.
e2e_bench traffic --nics 2 --queue-pairs 2 --backend socket --direction both \
	--size random --seconds 30 --count $COUNT --expect-json "$E2E_TMP/expect_mq.json" \
	--before-remove "$VNICCTL --socket $E2E_SOCK status --json > $E2E_TMP/status_mq.json" ||
	e2e_die "vnic-bench traffic --queue-pairs 2 failed"
for d in g2h h2g; do
	got=$(e2e_result_field $d frames)
	[ "$got" = $((4 * COUNT)) ] || e2e_die "$d: $got frames checked over 4 pairs, want $((4 * COUNT))"
done
e2e_check_counters "$E2E_TMP/expect_mq.json" "$E2E_TMP/status_mq.json" ||
	e2e_die "vnicctl counters of the two-pair NICs differ from the traffic"
e2e_stop_vnicd
grep -q "RemoveNic" "$E2E_TMP/vnicd.log" || e2e_die "vnicd log shows no RemoveNic"
e2e_log "PASS"
