#!/usr/bin/env bash
# vnicd demo. Usage: tools/demo.sh BUILD_DIR (quickstart passes build/plain).
set -euo pipefail
if [ $# -ne 1 ]; then
	echo "usage: $0 BUILD_DIR" >&2
	exit 2
fi
bench=$1/tools/vnic-bench
[ -x "$bench" ] || { echo "demo: $bench not found: build first (./quickstart demo)" >&2; exit 1; }

cat <<'TXT'
vnicd demo: a simulated guest (driver) and the device side of a virtio split ring run in two
processes over a sealed memfd, with eventfd kicks and calls, as a VMM and a vnicd worker do.
Packets/s for 64 B, 1500 B, 64 KiB: with notification suppression, without, and plain memcpy.

TXT
exec "$bench" ring
