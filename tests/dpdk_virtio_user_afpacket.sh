#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# dpdk_virtio_user.py on vnicd's AF_PACKET vhost-user endpoints (issue 17):
# `vnicctl add --af-packet` on one end of a veth pair in a private netns.
VNIC_QEMU_BACKEND=vnicd-afp
export VNIC_QEMU_BACKEND
exec python3 "$(dirname "$0")/dpdk_virtio_user.py" "$@"
