# SPDX-License-Identifier: BSD-3-Clause
# common/: what every program of the tree shares and no protocol owns:
# logging, the version, the MAC address's text form, fault injection.
# libvnicproto.la carries libvniccommon.la to everything that links it.
noinst_LTLIBRARIES += libvniccommon.la
libvniccommon_la_SOURCES = \
	common/log.c common/log.h common/version.h common/afp_ring.h \
	common/mac.c common/mac.h

# Fault injection points (common/fault.h): compiled only with
# ./configure --enable-fault-injection. Without it FAULT_POINT() is 0 and
# nothing of this links into any program (tests/fault_absent.sh).
noinst_HEADERS += common/fault.h
if FAULT_INJECTION
noinst_LTLIBRARIES += libvnicfault.la
libvnicfault_la_SOURCES = common/fault.c
FAULT_LIBS = libvnicfault.la
else
FAULT_LIBS =
endif
EXTRA_DIST += common/fault.c
