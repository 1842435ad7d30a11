# SPDX-License-Identifier: BSD-3-Clause
# shm/: guest memory and split rings. No libevent, no seccomp: links alone into tests.
noinst_LTLIBRARIES += libvnicshm.la
libvnicshm_la_SOURCES = \
	shm/memtable.c shm/memtable.h \
	shm/vring.c shm/vring.h \
	shm/inflight.c shm/inflight.h \
	shm/vring_drv.c shm/vring_drv.h \
	shm/iov.c shm/iov.h \
	shm/sealed_memfd.c shm/sealed_memfd.h \
	shm/dirtylog.c shm/dirtylog.h
