#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Regenerate the build system from configure.ac and Makefile.am.
set -e
cd "$(dirname "$0")"
autoreconf -fi
