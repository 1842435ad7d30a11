#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# e2e_hostile.sh with both NICs on the AF_PACKET backend (issue 17).
E2E_BACKEND=afpacket E2E_NAME=e2e_hostile_afpacket
export E2E_BACKEND E2E_NAME
exec "$(dirname "$0")/e2e_hostile.sh" "$@"
