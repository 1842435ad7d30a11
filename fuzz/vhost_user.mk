# SPDX-License-Identifier: BSD-3-Clause
# fuzz/vhost_user.c: the vhost-user message layer and handlers, against a
# NIC with a simulated worker. See fuzz/local.mk.
FUZZ_PROGS += fuzz/fuzz_vhost_user
FUZZ_SMOKE += fuzz/smoke_vhost_user.sh
EXTRA_DIST += fuzz/vhost_user.dict fuzz/vu_seeds.py
fuzz_fuzz_vhost_user_SOURCES = fuzz/vhost_user.c fuzz/sim_worker.c fuzz/sim_worker.h \
	$(FUZZ_COMMON) $(FUZZ_MAIN)
fuzz_fuzz_vhost_user_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/supervisor -I$(top_srcdir)/fuzz
fuzz_fuzz_vhost_user_CFLAGS = $(FUZZ_CC_FLAGS) $(LIBEVENT_CFLAGS) $(PROTOBUF_C_CFLAGS)
fuzz_fuzz_vhost_user_LDFLAGS = $(FUZZ_LINK)
fuzz_fuzz_vhost_user_LDADD = libvnicsup.la libvnicshm.la libvnicproto.la libvniccommon.la \
	$(LIBEVENT_LIBS) $(PROTOBUF_C_LIBS)
$(fuzz_fuzz_vhost_user_OBJECTS): proto/vmm.pb-c.h proto/worker.pb-c.h
