#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Hostile guest end to end (TESTPLAN G1, G3, G7 end to end; L10, L11):
# NIC A's guest posts a bad TX chain (two descriptors pointing at each
# other; a zero-length self-loop; an avail entry beyond the queue; a
# buffer past the end of guest memory) half-way through NIC B's traffic.
# vnicd must report QUEUE_NEEDS_RESET for A's tx0 within 2 s and show it
# broken with a reason in status; A's worker must not spin; B's frames keep
# flowing both ways (at least a quarter of the rate before), every one
# checked.
# E2E_BACKEND=afpacket (tests/e2e_hostile_afpacket.sh): both NICs on
# AF_PACKET, a veth pair each in a private network namespace.
set -eu
BACKEND=${E2E_BACKEND:-socket}
. "$(dirname "$0")/e2e_lib.sh"
# vnicd runs its workers sandboxed, as in production.
e2e_need_root "the worker sandbox: namespaces, an empty root, the uid drop"
set --
if [ "$BACKEND" != socket ]; then
	e2e_need_netns
	e2e_netns_add
	set -- --backend "$BACKEND" --netns "$E2E_NETNS"
fi

E2E_BENCH_TIMEOUT=12 # four runs of about 2.5 s each; under 60 s at worst
e2e_start_vnicd
victim=0
for kind in loop selfloop badhead oob; do
	e2e_bench hostile --kind $kind --victim $victim --seconds 2 "$@" ||
		e2e_die "hostile $kind (victim $victim) failed"
	grep -q "needs-reset for .* queue 1 after" "$E2E_TMP/bench.out" ||
		e2e_die "$kind: no needs-reset line"
	victim=$((1 - victim))
done
# vnicd survived all of them and still answers.
"$VNICCTL" --socket "$E2E_SOCK" status >/dev/null || e2e_die "vnicctl status failed afterwards"
e2e_log "PASS"
