#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Live migration's dirty log (issue 14) end to end through libvnic: vnic-bench
# traffic plays the VMM, gives each NIC a sealed memfd log with
# vnic_set_dirty_log and, after RemoveNic (answered once the worker flushed
# its last bits and was reaped), checks that every guest page the worker
# changed has its bit. Checked frames of 1500 B, 64 KiB and random sizes
# both ways, the log set before the frames and while they flow, on the
# socket backend (no network at all); then random sizes both ways through
# the AF_PACKET backend (issue 17: its receive path copies from the
# kernel's ring), on a veth pair in a private network namespace.
set -eu
. "$(dirname "$0")/e2e_lib.sh"
# vnicd runs its workers sandboxed, as in production.
e2e_need_root "the worker sandbox: namespaces, an empty root, the uid drop"

# check_log NICS WHAT - NICS 'RESULT dirtylog' lines, none with a missed
# page, each with pages changed (frames came in) and logged.
check_log() {
	lines=$(grep -c '^RESULT dirtylog ' "$E2E_TMP/bench.out" || true)
	[ "$lines" = "$1" ] || e2e_die "$2: $lines dirty log results, want $1"
	grep '^RESULT dirtylog ' "$E2E_TMP/bench.out" >"$E2E_TMP/dirtylog.txt"
	while read -r _ _ nic changed logged missed _; do
		[ "${missed#missed=}" = 0 ] || e2e_die "$2: $nic: ${missed#missed=} pages missed"
		[ "${changed#changed=}" -gt 0 ] || e2e_die "$2: $nic: no page changed"
		[ "${logged#logged=}" = "${changed#changed=}" ] || e2e_die "$2: $nic: $logged of $changed"
	done <"$E2E_TMP/dirtylog.txt"
	e2e_log "$2: $(grep '^RESULT dirtylog ' "$E2E_TMP/bench.out" | tr '\n' ';')"
}

COUNT=3000
e2e_start_vnicd
for size in 1500 65536 random; do
	e2e_bench traffic --nics 2 --backend socket --direction both --size $size \
		--seconds 20 --count $COUNT --dirty-log ||
		e2e_die "size $size: vnic-bench traffic --dirty-log failed"
	for d in g2h h2g; do
		got=$(e2e_result_field $d frames)
		[ "$got" = $((2 * COUNT)) ] || e2e_die "size $size: $d: $got frames, want $((2 * COUNT))"
	done
	check_log 2 "size $size"
done
# Logging switched on while the frames flow (a migration starts on a busy
# guest): from the answer on, every page written is in the log.
e2e_bench traffic --nics 1 --backend socket --direction both --size random \
	--seconds 2 --dirty-log-after 0.7 ||
	e2e_die "vnic-bench traffic --dirty-log-after failed"
grep -q '^  dirty log on:' "$E2E_TMP/bench.out" || e2e_die "the log was never set"
check_log 1 "set under traffic"
if ip netns list >/dev/null 2>&1; then
	e2e_netns_add
	e2e_bench traffic --nics 1 --backend afpacket --netns "$E2E_NETNS" --direction both \
		--size random --seconds 20 --count 2000 --dirty-log ||
		e2e_die "AF_PACKET: vnic-bench traffic --dirty-log failed"
	for d in g2h h2g; do
		got=$(e2e_result_field $d frames)
		[ "$got" = 2000 ] || e2e_die "AF_PACKET: $d: $got frames, want 2000"
	done
	check_log 1 "AF_PACKET"
else
	e2e_log "AF_PACKET part skipped: no network namespaces here (ip netns)"
fi
e2e_stop_vnicd
e2e_log "PASS"
