# supervisor/: vnicd, the privileged daemon. The pieces with no libevent
# (validation, tap, worker spawn) form a convenience library that the
# tests link directly.
noinst_LTLIBRARIES += libvnicsup.la
libvnicsup_la_SOURCES = \
	supervisor/validate.c supervisor/validate.h \
	supervisor/tap.c supervisor/tap.h \
	supervisor/worker_spawn.c supervisor/worker_spawn.h
libvnicsup_la_LIBADD = libvnicshm.la
