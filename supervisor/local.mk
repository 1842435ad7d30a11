# supervisor/: vnicd, the privileged daemon. The pieces with no libevent
# (validation, tap, worker spawn) form a convenience library that the
# tests link directly.
noinst_LTLIBRARIES += libvnicsup.la
libvnicsup_la_SOURCES = \
	supervisor/validate.c supervisor/validate.h \
	supervisor/tap.c supervisor/tap.h \
	supervisor/worker_spawn.c supervisor/worker_spawn.h
libvnicsup_la_LIBADD = libvnicshm.la

sbin_PROGRAMS += vnicd
vnicd_SOURCES = \
	supervisor/main.c supervisor/supervisor.h \
	supervisor/vmm_conn.c supervisor/vmm_handlers.c \
	supervisor/nic.c supervisor/monitor.c
vnicd_CPPFLAGS = $(AM_CPPFLAGS) \
	-DVNICD_WORKER_PATH='"$(pkglibexecdir)/vnicd-worker"'
vnicd_CFLAGS = $(AM_CFLAGS) $(LIBEVENT_CFLAGS) $(PROTOBUF_C_CFLAGS)
vnicd_LDADD = libvnicsup.la libvnicproto.la $(LIBEVENT_LIBS) $(PROTOBUF_C_LIBS)
