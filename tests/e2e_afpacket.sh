#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# e2e_tap.sh through the AF_PACKET backend (issue 17): a veth pair per NIC
# in a private network namespace, vnicd's TPACKET_V3 rings on one end.
E2E_BACKEND=afpacket E2E_NAME=e2e_afpacket
export E2E_BACKEND E2E_NAME
exec "$(dirname "$0")/e2e_tap.sh" "$@"
