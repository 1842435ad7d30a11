#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
exec "${VNIC_TOP_SRCDIR:?}/fuzz/smoke.sh" virtio_net_hdr
