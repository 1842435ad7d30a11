#!/usr/bin/env bash
# vnicd demo. Usage: tools/demo.sh BUILD_DIR (quickstart passes build/plain).
set -euo pipefail
build=${1:?usage: $0 BUILD_DIR}
bench=$build/tools/vnic-bench
[ -x "$bench" ] || { echo "demo: $bench not found: build first (./quickstart demo)" >&2; exit 1; }

cat <<'TXT'
vnicd demo: the virtio split ring, driver (simulated guest) and device in two
processes sharing guest memory through a sealed memfd, with eventfd kicks and
calls as a VMM and a vnicd worker use them. vnic-bench ring measures packets/s
for 64 B, 1500 B and 64 KiB buffers with notification suppression, without it,
and against a plain memcpy of the same buffers (about 15 s).

TXT
exec "$bench" ring
