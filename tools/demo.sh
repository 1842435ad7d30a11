#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# vnicd demo. Usage: tools/demo.sh BUILD_DIR (quickstart passes build/plain)
#                 or tools/demo.sh --installed (the vnicd, vnicctl and
#                    vnic-bench on PATH, e.g. from the .debs; vnicd then
#                    starts the worker it was built with, no --worker)
#
# Starts vnicd on a private socket, adds two virtio-net NICs whose backends
# are taps in a private network namespace, sends checked UDP frames guest ->
# host (a socket in the namespace receives and checks every datagram) and
# host -> guest, upgrades vnicd in place while the frames flow (vnicctl
# upgrade: no worker stops, not a frame is lost), prints vnicctl status
# while the NICs exist, and takes it all down again. Without root or
# /dev/net/tun it uses the socket backend.
set -euo pipefail
if [ $# -ne 1 ]; then
	echo "usage: $0 BUILD_DIR | --installed" >&2
	exit 2
fi
build=$1

find_bin() { # find_bin REL... : the first executable $build/REL
	local rel
	for rel in "$@"; do
		if [ -x "$build/$rel" ]; then
			printf '%s\n' "$build/$rel"
			return 0
		fi
	done
	echo "demo: none of $* in $build: build first (./quickstart demo)" >&2
	return 1
}
installed_bin() { # installed_bin NAME : NAME on PATH (sbin included)
	PATH=$PATH:/usr/local/sbin:/usr/sbin:/sbin command -v "$1" ||
		{ echo "demo: $1 is not installed (--installed)" >&2; return 1; }
}
if [ "$build" = --installed ]; then
	vnicd=$(installed_bin vnicd)
	worker_args=()
	bench=$(installed_bin vnic-bench)
	vnicctl=$(installed_bin vnicctl)
else
	vnicd=$(find_bin supervisor/vnicd vnicd)
	worker_args=(--worker "$(find_bin workers/vnicd-worker vnicd-worker)")
	bench=$(find_bin tools/vnic-bench vnic-bench)
	vnicctl=$(find_bin tools/vnicctl vnicctl)
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/vnicd-demo.XXXXXX")
sock=$tmp/control.sock
vnicd_pid=
netns=

cleanup() {
	local rc=$? i
	if [ -n "$vnicd_pid" ]; then
		kill -TERM "$vnicd_pid" 2>/dev/null || true
		for i in $(seq 100); do
			kill -0 "$vnicd_pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$vnicd_pid" 2>/dev/null || true
		wait "$vnicd_pid" 2>/dev/null || true
	fi
	[ -z "$netns" ] || ip netns del "$netns" 2>/dev/null || true
	if [ $rc -ne 0 ] && [ -f "$tmp/vnicd.log" ]; then
		echo "demo: failed; vnicd's log:" >&2
		tail -n 30 "$tmp/vnicd.log" >&2
	fi
	rm -rf "$tmp"
	exit $rc
}
trap cleanup EXIT
trap 'exit 1' HUP INT TERM

backend=tap
if [ "$(id -u)" != 0 ]; then
	echo "demo: not root: no taps or network namespaces; using the socket backend instead"
	backend=socket
elif [ ! -c /dev/net/tun ] || ! command -v ip >/dev/null; then
	echo "demo: no /dev/net/tun (or no ip command): using the socket backend instead"
	backend=socket
fi

cat <<TXT
vnicd demo: a privileged supervisor (vnicd) and one vnicd-worker process per
virtio-net NIC. vnic-bench plays the VMM (sealed memfd guest memory, split
rings, kick/call eventfds, AddNic over libvnic) and the guests, and checks
every byte of every frame. Backend: $backend.

TXT

"$vnicd" --socket "$sock" --foreground "${worker_args[@]}" >"$tmp/vnicd.log" 2>&1 &
vnicd_pid=$!
for i in $(seq 100); do
	[ -S "$sock" ] && break
	kill -0 "$vnicd_pid" 2>/dev/null || { echo "demo: vnicd exited at startup" >&2; exit 1; }
	sleep 0.1
done
[ -S "$sock" ] || { echo "demo: vnicd's socket did not appear within 10 s" >&2; exit 1; }
echo "vnicd ($vnicd) pid $vnicd_pid listening on $sock"

args=(traffic --nics 2 --backend "$backend" --direction both --size random --seconds 3)
if [ "$backend" = tap ]; then
	# Addresses: 198.18.N.1 (host, on tap vnicbN) and 198.18.N.2 (guest N),
	# inside the namespace only.
	netns=vnicdemo$$
	ip netns add "$netns"
	args+=(--netns "$netns")
	echo "network namespace $netns: taps vnicb0, vnicb1; host 198.18.N.1, guest 198.18.N.2"
fi
echo
echo "\$ vnic-bench ${args[*]}"
# vnicctl status runs while the NICs still exist (before RemoveNic).
timeout -k 5 60 "$bench" --socket "$sock" "${args[@]}" \
	--before-remove "echo; echo '\$ vnicctl status'; '$vnicctl' --socket '$sock' status; echo" &
bench_pid=$!
# Halfway through, vnicd replaces itself with its binary (upgrade in
# place): the workers, the taps and vnic-bench's connection go over to the
# new process; vnic-bench still checks every frame.
sleep 1.5
echo "\$ vnicctl upgrade      # while the frames flow"
"$vnicctl" --socket "$sock" upgrade ||
	echo "demo: the upgrade was refused (above); the frames go on regardless"
wait "$bench_pid"

echo
echo "demo: done; stopping vnicd (SIGTERM) and removing the namespace."
echo "More: $bench ring (split ring cost, ~15 s), $bench traffic --help."
