# SPDX-License-Identifier: BSD-3-Clause
# fuzz/worker_chan.c: what a compromised worker sends its supervisor
# (nic.c, monitor.c), against the simulated worker. See fuzz/local.mk.
FUZZ_PROGS += fuzz/fuzz_worker_chan
FUZZ_SMOKE += fuzz/smoke_worker_chan.sh
EXTRA_DIST += fuzz/worker_chan.dict
fuzz_fuzz_worker_chan_SOURCES = fuzz/worker_chan.c fuzz/sim_worker.c fuzz/sim_worker.h \
	$(FUZZ_COMMON) $(FUZZ_MAIN)
fuzz_fuzz_worker_chan_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/supervisor -I$(top_srcdir)/fuzz
fuzz_fuzz_worker_chan_CFLAGS = $(FUZZ_CC_FLAGS) $(LIBEVENT_CFLAGS) $(PROTOBUF_C_CFLAGS)
fuzz_fuzz_worker_chan_LDFLAGS = $(FUZZ_LINK)
fuzz_fuzz_worker_chan_LDADD = libvnicsup.la libvnicshm.la libvnicproto.la libvnicsandbox.la \
	$(FAULT_LIBS) $(LIBEVENT_LIBS) $(PROTOBUF_C_LIBS)
$(fuzz_fuzz_worker_chan_OBJECTS): proto/vmm.pb-c.h proto/worker.pb-c.h

# The seed generator (fuzz/corpus/worker_chan/), built with the tests so
# that it keeps compiling; run by hand: fuzz/worker_chan_seeds DIR.
check_PROGRAMS += fuzz/worker_chan_seeds
fuzz_worker_chan_seeds_SOURCES = fuzz/worker_chan_seeds.c
fuzz_worker_chan_seeds_CFLAGS = $(AM_CFLAGS) $(PROTOBUF_C_CFLAGS)
fuzz_worker_chan_seeds_LDADD = libvnicproto.la $(PROTOBUF_C_LIBS)
$(fuzz_worker_chan_seeds_OBJECTS): proto/vmm.pb-c.h proto/worker.pb-c.h
