# SPDX-License-Identifier: BSD-3-Clause
# sandbox/: confine a worker (seccomp policy table, privilege drop, rlimits,
# empty root). Links libseccomp; no libevent. The worker links this library;
# the supervisor uses sandbox_parse_report() from it.
noinst_LTLIBRARIES += libvnicsandbox.la
libvnicsandbox_la_SOURCES = \
	sandbox/sandbox.h \
	sandbox/sandbox_seccomp.c \
	sandbox/sandbox_policy.c sandbox/sandbox_policy.h \
	sandbox/privdrop.c sandbox/privdrop.h
libvnicsandbox_la_CFLAGS = $(AM_CFLAGS) $(SECCOMP_CFLAGS)
libvnicsandbox_la_LIBADD = $(SECCOMP_LIBS)
