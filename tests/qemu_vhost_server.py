#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""A real Linux guest under QEMU on vnicd's vhost-user front door, vnicd in
server mode: see tests/guest/vhost_cases.py for the cases."""
import os
import sys
sys.dont_write_bytecode = True  # the source tree may be read-only
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "guest"))
import vhost_cases  # noqa: E402

vhost_cases.run("server")
