# SPDX-License-Identifier: BSD-3-Clause
# workers/: vnicd-worker, one process per NIC.
# libvnicnet: the virtio-net data path (TX, RX, stats page), no libevent,
# so tests link it alone.
noinst_LTLIBRARIES += libvnicnet.la
libvnicnet_la_SOURCES = \
	workers/net.c workers/net.h workers/net_priv.h \
	workers/net_tx.c workers/net_rx.c workers/irq.c workers/net_afp.c \
	workers/policy.h workers/policy.c workers/policy_bh.c workers/policy_timer.c \
	workers/policy_adaptive.c workers/policy_poll.c \
	workers/stats.h
libvnicnet_la_LIBADD = libvnicshm.la $(FAULT_LIBS)

# vnicd-worker: spawned by vnicd (installed as $(pkglibexecdir)/vnicd-worker,
# e.g. /usr/local/libexec/vnicd/vnicd-worker; in the build tree
# workers/vnicd-worker).
pkglibexec_PROGRAMS += workers/vnicd-worker
workers_vnicd_worker_SOURCES = \
	workers/main.c workers/worker.h workers/worker_event.c workers/worker_fds.c \
	workers/holder.c workers/holder.h
workers_vnicd_worker_CFLAGS = $(AM_CFLAGS) $(LIBEVENT_CFLAGS) $(PROTOBUF_C_CFLAGS)
workers_vnicd_worker_LDADD = libvnicnet.la libvnicshm.la libvnicproto.la libvnicsandbox.la $(FAULT_LIBS) \
	$(LIBEVENT_LIBS)
$(workers_vnicd_worker_OBJECTS): proto/vmm.pb-c.h proto/worker.pb-c.h
