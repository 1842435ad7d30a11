#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# End to end through taps: vnicd creates tap vnicb0/vnicb1 in a private
# network namespace; frames of random sizes (60 B .. 65535 B, the tap
# MTU's limit) go from each guest to a UDP socket in the namespace and
# back, every byte checked, none lost or duplicated (a bounded window keeps
# the kernel from dropping); then the vnicctl --json counters match.
#
# E2E_BACKEND=afpacket (tests/e2e_afpacket.sh, issue 17): the same through
# AF_PACKET: vnic-bench makes a veth pair per NIC in the namespace, vnicd
# binds its rings to one end (vnicv0/vnicv1) and the UDP socket sits on
# the other (vnicb0/vnicb1); frames up to 16014 B (the veths' MTU 16000).
set -eu
BACKEND=${E2E_BACKEND:-tap}
. "$(dirname "$0")/e2e_lib.sh"
if [ "$BACKEND" = tap ]; then
	e2e_need_tun
else
	e2e_need_netns
fi

COUNT=4000
e2e_start_vnicd
e2e_netns_add
e2e_bench traffic --nics 2 --backend "$BACKEND" --netns "$E2E_NETNS" --direction both \
	--size random --seconds 30 --count $COUNT --expect-json "$E2E_TMP/expect.json" \
	--before-remove "$VNICCTL --socket $E2E_SOCK status --json > $E2E_TMP/status.json" ||
	e2e_die "vnic-bench traffic failed"
for d in g2h h2g; do
	got=$(e2e_result_field $d frames)
	[ "$got" = $((2 * COUNT)) ] || e2e_die "$d: $got frames checked, want $((2 * COUNT))"
done
e2e_check_counters "$E2E_TMP/expect.json" "$E2E_TMP/status.json" ||
	e2e_die "vnicctl counters differ from the traffic"
# The taps went with their workers; the namespace is ours to remove.
if [ "$BACKEND" = tap ] && ip -n "$E2E_NETNS" link show vnicb0 >/dev/null 2>&1; then
	e2e_die "tap vnicb0 outlived its NIC"
fi
# AF_PACKET: the workers and vnicd hold no packet socket once the NICs
# are gone (vnicd's own fds: none of them in /proc/net/packet).
if [ "$BACKEND" = afpacket ] && e2e_packet_sockets "$VNICD_PID" "$E2E_NETNS" | grep -q .; then
	e2e_die "vnicd still holds an AF_PACKET socket after RemoveNic"
fi
e2e_log "PASS"
