#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""A real Linux guest with a NIC of two queue pairs on vnicd's vhost-user
front door (issue 15): see tests/guest/mq_cases.py for the cases."""
import os
import sys
sys.dont_write_bytecode = True  # the source tree may be read-only
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "guest"))
import mq_cases  # noqa: E402

mq_cases.run()
