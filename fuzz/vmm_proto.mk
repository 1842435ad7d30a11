# SPDX-License-Identifier: BSD-3-Clause
# fuzz/vmm_proto.c: vnicd's protobuf control channel, every request with its
# fds, over a real connection. See fuzz/local.mk.
FUZZ_PROGS += fuzz/fuzz_vmm_proto
FUZZ_SMOKE += fuzz/smoke_vmm_proto.sh
EXTRA_DIST += fuzz/vmm_proto.dict fuzz/vmm_proto_seeds.c
# vmm_conn.c, vmm_handlers.c and admin.c are linked only into vnicd, not
# into libvnicsup.la: the target compiles them itself.
fuzz_fuzz_vmm_proto_SOURCES = fuzz/vmm_proto.c $(FUZZ_COMMON) $(FUZZ_MAIN) \
	fuzz/sim_worker.c fuzz/sim_worker.h \
	supervisor/vmm_conn.c supervisor/vmm_handlers.c \
	supervisor/admin.c supervisor/admin.h
fuzz_fuzz_vmm_proto_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/supervisor
fuzz_fuzz_vmm_proto_CFLAGS = $(FUZZ_CC_FLAGS) $(LIBEVENT_CFLAGS) $(PROTOBUF_C_CFLAGS)
fuzz_fuzz_vmm_proto_LDFLAGS = $(FUZZ_LINK)
fuzz_fuzz_vmm_proto_LDADD = libvnicsup.la libvnicproto.la libvnicshm.la libvniccommon.la \
	libvnicsandbox.la $(FAULT_LIBS) $(LIBEVENT_LIBS) $(PROTOBUF_C_LIBS)
$(fuzz_fuzz_vmm_proto_OBJECTS): proto/vmm.pb-c.h proto/worker.pb-c.h
