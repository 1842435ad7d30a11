#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# lifecycle.sh with lc0 and lc1 on the AF_PACKET backend (issue 17):
# unplug under load, crash restart (the new worker resets and maps the
# rings again), disconnect, start-up failures.
VNIC_LC_BACKEND=afpacket E2E_NAME=lifecycle_afpacket
export VNIC_LC_BACKEND E2E_NAME
exec "$(dirname "$0")/lifecycle.sh" "$@"
