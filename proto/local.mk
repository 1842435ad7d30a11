# SPDX-License-Identifier: BSD-3-Clause
# proto/: the protocols and the contracts between the processes (.proto
# files, framing, fd passing, the policy's protobuf form, the virtio-net
# and worker ABI headers). No libevent, no seccomp: links alone into tests.
# It carries common/ (logging, MAC text) to everything that links it.
#
# protoc-c generates *.pb-c.[ch] into the build tree at build time; they
# are never committed. They compile in their own convenience library
# because protoc-c 1.4.1 output casts away const (-Wcast-qual); nothing
# else is relaxed. Consumers include "wire.h" (or the .pb-c.h files) and
# must initialise messages with the generated *__init() functions, not the
# *__INIT macros, which trip -Wcast-qual where they are expanded.

PROTO_GEN = \
	proto/vmm.pb-c.c proto/vmm.pb-c.h \
	proto/worker.pb-c.c proto/worker.pb-c.h \
	proto/handover.pb-c.c proto/handover.pb-c.h

BUILT_SOURCES += $(PROTO_GEN)
CLEANFILES += $(PROTO_GEN)
EXTRA_DIST += proto/vmm.proto proto/worker.proto proto/handover.proto

# One rule per .proto; the .h comes with the .c. worker.proto imports
# vmm.proto, so worker's outputs depend on it too.
proto/vmm.pb-c.c: $(top_srcdir)/proto/vmm.proto
	$(AM_V_GEN)$(MKDIR_P) proto && \
	$(PROTOC_C) --proto_path=$(top_srcdir)/proto --c_out=proto \
		$(top_srcdir)/proto/vmm.proto
proto/vmm.pb-c.h: proto/vmm.pb-c.c
	@test -f $@ || { rm -f proto/vmm.pb-c.c && \
		$(MAKE) $(AM_MAKEFLAGS) proto/vmm.pb-c.c; }

proto/worker.pb-c.c: $(top_srcdir)/proto/worker.proto $(top_srcdir)/proto/vmm.proto
	$(AM_V_GEN)$(MKDIR_P) proto && \
	$(PROTOC_C) --proto_path=$(top_srcdir)/proto --c_out=proto \
		$(top_srcdir)/proto/worker.proto
proto/worker.pb-c.h: proto/worker.pb-c.c
	@test -f $@ || { rm -f proto/worker.pb-c.c && \
		$(MAKE) $(AM_MAKEFLAGS) proto/worker.pb-c.c; }

# handover.proto (vnicd to the vnicd it re-executes) imports vmm.proto too.
proto/handover.pb-c.c: $(top_srcdir)/proto/handover.proto $(top_srcdir)/proto/vmm.proto
	$(AM_V_GEN)$(MKDIR_P) proto && \
	$(PROTOC_C) --proto_path=$(top_srcdir)/proto --c_out=proto \
		$(top_srcdir)/proto/handover.proto
proto/handover.pb-c.h: proto/handover.pb-c.c
	@test -f $@ || { rm -f proto/handover.pb-c.c && \
		$(MAKE) $(AM_MAKEFLAGS) proto/handover.pb-c.c; }

noinst_LTLIBRARIES += libvnicprotogen.la libvnicproto.la

nodist_libvnicprotogen_la_SOURCES = $(PROTO_GEN)
libvnicprotogen_la_CFLAGS = $(AM_CFLAGS) $(PROTOBUF_C_CFLAGS) -Wno-cast-qual

libvnicproto_la_SOURCES = \
	proto/wire.c proto/wire.h \
	proto/fdpass.c proto/fdpass.h \
	proto/policy_pb.c proto/policy_pb.h \
	proto/worker_msg.c proto/worker_msg.h
noinst_HEADERS += proto/virtio_net.h proto/worker_abi.h
libvnicproto_la_CFLAGS = $(AM_CFLAGS) $(PROTOBUF_C_CFLAGS)
libvnicproto_la_LIBADD = libvnicprotogen.la libvniccommon.la $(PROTOBUF_C_LIBS)

# BUILT_SOURCES only applies to `make all/check/install`; these lines let
# `make libvnicproto.la` (or one test) on a clean tree generate first.
$(libvnicproto_la_OBJECTS) $(libvnicprotogen_la_OBJECTS): \
	proto/vmm.pb-c.h proto/worker.pb-c.h proto/handover.pb-c.h
