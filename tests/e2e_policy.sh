#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The four TX mitigation policies (issue 9) end to end through the socket
# backend: each one carries thousands of checked frames of random sizes
# both ways (none lost, doubled or corrupted; vnicctl's counters match),
# and shows its own counters (timer: fires; poll: spins; adaptive: a
# window). Then SetPolicy cycles timer -> bh -> adaptive -> poll every
# 10 ms on two running NICs under traffic: every frame still arrives once
# and intact, and status counts every switch. Interrupt coalescing gets
# the same: traffic under two policies, and switched on and off.
set -eu
. "$(dirname "$0")/e2e_lib.sh"
# vnicd runs its workers sandboxed, as in production.
e2e_need_root "the worker sandbox: namespaces, an empty root, the uid drop"
command -v python3 >/dev/null 2>&1 || e2e_skip "needs python3 to read vnicctl --json"

# policy_field KEY - a field of vnic-bench's POLICY line.
policy_field() {
	sed -n "s/^POLICY .*\\b$1=\\([^ ]*\\).*/\\1/p" "$E2E_TMP/bench.out" | head -n 1
}

COUNT=3000

# checked_traffic WHAT ARGS... - $COUNT checked frames each way on one NIC
# with vnic-bench's ARGS; every frame once and intact, vnicctl's counters
# those of the traffic; status kept in $E2E_TMP/status.json.
checked_traffic() {
	_what=$1
	shift
	e2e_bench traffic --nics 1 --backend socket --direction both --size random \
		--seconds 20 --count $COUNT "$@" \
		--expect-json "$E2E_TMP/expect.json" \
		--before-remove "$VNICCTL --socket $E2E_SOCK status --json > $E2E_TMP/status.json" ||
		e2e_die "$_what: vnic-bench traffic failed"
	for d in g2h h2g; do
		got=$(e2e_result_field $d frames)
		[ "$got" = $COUNT ] || e2e_die "$_what: $d: $got frames checked, want $COUNT"
	done
	e2e_check_counters "$E2E_TMP/expect.json" "$E2E_TMP/status.json" ||
		e2e_die "$_what: vnicctl counters differ from the traffic"
}

e2e_start_vnicd
for p in timer bh adaptive poll; do
	checked_traffic "$p" --policy $p --poll-us 50
	python3 - "$E2E_TMP/status.json" "$p" <<'PY' || e2e_die "$p: status shows the wrong policy"
import json, sys
st = json.load(open(sys.argv[1]))
n = st["nics"][0]
assert n["policy"] == sys.argv[2], n["policy"]
tx = [q for q in n["queues"] if q["name"] == "tx0"][0]
for k in ("window", "flushes", "timer_fires", "timer_hits", "poll_spins", "poll_hits"):
    assert k in tx, k
assert tx["flushes"] > 0
PY
	case $p in
	timer)
		[ "$(policy_field timer_fires)" -gt 0 ] || e2e_die "timer: no timer fired"
		[ "$(policy_field poll_spins)" = 0 ] || e2e_die "timer: poll spins counted";;
	bh)
		[ "$(policy_field timer_fires)" = 0 ] || e2e_die "bh: a timer fired"
		[ "$(policy_field poll_spins)" = 0 ] || e2e_die "bh: poll spins counted";;
	adaptive)
		[ "$(policy_field window)" -ge 1 ] || e2e_die "adaptive: no window";;
	poll)
		[ $(($(policy_field poll_spins) + $(policy_field poll_hits))) -gt 0 ] ||
			e2e_die "poll: never spun"
		[ "$(policy_field timer_fires)" = 0 ] || e2e_die "poll: a timer fired";;
	esac
	e2e_log "$p: $COUNT frames each way, $(grep '^POLICY' "$E2E_TMP/bench.out")"
done

# Interrupt coalescing (issue 17) under each kind of TX policy: held-back
# interrupts lose nothing (a lost one stalls the guest: the run fails),
# and status shows the limits in effect.
IRQ="--rx-irq-us 200 --rx-irq-frames 32 --tx-irq-us 500 --tx-irq-frames 64"
for p in timer adaptive; do
	# shellcheck disable=SC2086
	checked_traffic "$p with coalescing" --policy $p $IRQ
	python3 - "$E2E_TMP/status.json" <<'PY' || e2e_die "$p: status lacks the coalescing limits"
import json, sys
pp = json.load(open(sys.argv[1]))["nics"][0]["policy_params"]
want = {"rx_irq_us": 200, "rx_irq_frames": 32, "tx_irq_us": 500, "tx_irq_frames": 64}
assert all(pp[k] == v for k, v in want.items()), pp
PY
	e2e_log "$p with interrupt coalescing: $COUNT frames each way"
done

# Switching under traffic, repeatedly: nothing lost, nothing doubled;
# every other switch also turns interrupt coalescing off (and what it
# held back goes out).
# shellcheck disable=SC2086
e2e_bench traffic --nics 2 --backend socket --direction both --size random \
	--seconds 3 --switch-policy 10 --poll-us 50 $IRQ ||
	e2e_die "vnic-bench traffic with --switch-policy 10 failed"
sw=$(policy_field switches)
[ "$sw" -ge 20 ] || e2e_die "only $sw policy switches in 3 s"
for d in g2h h2g; do
	[ "$(e2e_result_field $d lost)" = 0 ] || e2e_die "switching: $d lost frames"
	[ "$(e2e_result_field $d frames)" -gt 1000 ] || e2e_die "switching: $d: too few frames"
done
e2e_log "switching: $sw rounds on 2 NICs, every frame once and intact"
e2e_stop_vnicd
e2e_log "PASS"
