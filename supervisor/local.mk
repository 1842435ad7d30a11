# SPDX-License-Identifier: BSD-3-Clause
# supervisor/: vnicd, the privileged daemon. Validation, tap, worker spawn
# and the NIC core (nic.c, monitor.c: a NIC, its worker and its owner
# callbacks, no control protocol) form a convenience library that the
# tests link directly.
noinst_LTLIBRARIES += libvnicsup.la
libvnicsup_la_SOURCES = \
	supervisor/validate.c supervisor/validate.h \
	supervisor/nic_state.c supervisor/nic_state.h \
	supervisor/tap.c supervisor/tap.h \
	supervisor/afpacket.c supervisor/afpacket.h \
	supervisor/announce.c supervisor/announce.h \
	supervisor/worker_spawn.c supervisor/worker_spawn.h \
	supervisor/holders.c supervisor/holders.h \
	supervisor/worker_spare.c supervisor/worker_spare.h \
	supervisor/nic.c supervisor/monitor.c supervisor/supervisor.h \
	supervisor/limits.c supervisor/watchdog.c \
	supervisor/pbconv.c supervisor/pbconv.h \
	supervisor/vhost_user.c supervisor/vhost_user.h supervisor/vhost_user_priv.h \
	supervisor/vhost_user_handlers.c supervisor/vhost_user_mem.c supervisor/vhost_user_nic.c \
	supervisor/vhost_user_endpoint.c supervisor/vhost_user_state.c supervisor/vhost_user_inflight.c \
	supervisor/inflight_file.c supervisor/inflight_file.h \
	supervisor/vhost_user_msg.c supervisor/vhost_user_msg.h \
	supervisor/uidrange.c supervisor/uidrange.h \
	supervisor/nic_log.c \
	supervisor/daemon.c supervisor/daemon.h
libvnicsup_la_CFLAGS = $(AM_CFLAGS) $(LIBEVENT_CFLAGS) $(PROTOBUF_C_CFLAGS)
libvnicsup_la_LIBADD = libvnicshm.la libvnicproto.la libvnicsandbox.la $(FAULT_LIBS) \
	$(LIBEVENT_LIBS) $(PROTOBUF_C_LIBS)

# In the build tree at $(builddir)/supervisor/vnicd (tests run it there).
sbin_PROGRAMS += supervisor/vnicd
supervisor_vnicd_SOURCES = \
	supervisor/main.c supervisor/supervisor.h \
	supervisor/vmm_conn.c supervisor/vmm_handlers.c \
	supervisor/admin.c supervisor/admin.h \
	supervisor/sdnotify.c supervisor/sdnotify.h \
	supervisor/handover.c supervisor/handover.h supervisor/handover_priv.h \
	supervisor/vhost_user_handover.c \
	supervisor/fdstore.c supervisor/fdstore.h
supervisor_vnicd_CPPFLAGS = $(AM_CPPFLAGS) \
	-DVNICD_WORKER_PATH='"$(pkglibexecdir)/vnicd-worker"'
supervisor_vnicd_CFLAGS = $(AM_CFLAGS) $(LIBEVENT_CFLAGS) $(PROTOBUF_C_CFLAGS) $(LIBSYSTEMD_CFLAGS)
supervisor_vnicd_LDADD = libvnicsup.la libvnicproto.la libvnicsandbox.la $(FAULT_LIBS) $(LIBEVENT_LIBS) $(PROTOBUF_C_LIBS) \
	$(LIBSYSTEMD_LIBS)

# Generated headers first under make -j (wire.h includes them).
$(supervisor_vnicd_OBJECTS) $(libvnicsup_la_OBJECTS): proto/vmm.pb-c.h proto/worker.pb-c.h \
	proto/handover.pb-c.h


# QEMU "Backend program conventions": a description file for management
# tools (docs/interop/vhost-user.json), with the installed path of vnicd.
qemuvhostdir = $(datadir)/qemu/vhost-user
qemuvhost_DATA = data/50-vnicd.json
EXTRA_DIST += data/50-vnicd.json.in
CLEANFILES += data/50-vnicd.json
data/50-vnicd.json: $(top_srcdir)/data/50-vnicd.json.in Makefile
	$(AM_V_GEN)$(MKDIR_P) data && sed 's|@sbindir[@]|$(sbindir)|g' $(top_srcdir)/data/50-vnicd.json.in > $@
