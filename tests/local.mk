# SPDX-License-Identifier: BSD-3-Clause
# tests/: one check_<module> per module, plus end-to-end scripts.
TEST_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
TEST_LIBS = $(CHECK_LIBS)

# Packaging (issue 10), source-tree checks: the licence line in every
# source file, every git file in the release tarball, clean man pages
# that document every option, every cited case id defined.
dist_check_SCRIPTS += tests/spdx_check.sh
TESTS += tests/spdx_check.sh
# Every file of git is in the release tarball (make distcheck runs in
# ./quickstart test; this names a forgotten file in seconds).
dist_check_SCRIPTS += tests/dist_contents.sh
TESTS += tests/dist_contents.sh
# The manual pages render cleanly and document every option of --help.
dist_check_SCRIPTS += tests/man_lint.sh
TESTS += tests/man_lint.sh
# Every case id the tree cites is defined in doc/threats.md.
dist_check_SCRIPTS += tests/threat_ids.sh
TESTS += tests/threat_ids.sh
# Every relative link in the Markdown files resolves (files, headings).
dist_check_SCRIPTS += tests/md_links.sh
TESTS += tests/md_links.sh
EXTRA_DIST += tests/README.md

check_PROGRAMS += tests/check_memtable tests/check_vring tests/check_iov tests/check_vring_random
tests_check_memtable_SOURCES = tests/check_memtable.c tests/testutil.c tests/testutil.h
tests_check_memtable_CFLAGS = $(TEST_CFLAGS)
tests_check_memtable_LDADD = libvnicshm.la $(TEST_LIBS)
tests_check_iov_SOURCES = tests/check_iov.c
tests_check_iov_CFLAGS = $(TEST_CFLAGS)
tests_check_iov_LDADD = libvnicshm.la $(TEST_LIBS)
tests_check_vring_SOURCES = tests/check_vring.c tests/testutil.c tests/testutil.h
tests_check_vring_CFLAGS = $(TEST_CFLAGS)
tests_check_vring_LDADD = libvnicshm.la $(TEST_LIBS) -lpthread
tests_check_vring_random_SOURCES = tests/check_vring_random.c tests/testutil.c tests/testutil.h
tests_check_vring_random_CFLAGS = $(TEST_CFLAGS)
tests_check_vring_random_LDADD = libvnicshm.la $(TEST_LIBS)

TESTS += tests/check_memtable tests/check_iov tests/check_vring tests/check_vring_random

check_PROGRAMS += tests/check_inflight
tests_check_inflight_SOURCES = tests/check_inflight.c tests/testutil.c tests/testutil.h
tests_check_inflight_CFLAGS = $(TEST_CFLAGS)
tests_check_inflight_LDADD = libvnicshm.la $(TEST_LIBS)
TESTS += tests/check_inflight

# Live migration's dirty log (issue 14).
check_PROGRAMS += tests/check_dirtylog
tests_check_dirtylog_SOURCES = tests/check_dirtylog.c tests/testutil.c tests/testutil.h
tests_check_dirtylog_CFLAGS = $(TEST_CFLAGS)
tests_check_dirtylog_LDADD = libvnicshm.la $(TEST_LIBS) -lpthread
TESTS += tests/check_dirtylog

check_PROGRAMS += tests/check_wire tests/check_fdpass
tests_check_wire_SOURCES = tests/check_wire.c tests/testutil.c tests/testutil.h
tests_check_wire_CFLAGS = $(TEST_CFLAGS) $(PROTOBUF_C_CFLAGS)
tests_check_wire_LDADD = libvnicproto.la libvnicshm.la $(TEST_LIBS)
tests_check_fdpass_SOURCES = tests/check_fdpass.c tests/testutil.c tests/testutil.h
tests_check_fdpass_CFLAGS = $(TEST_CFLAGS)
tests_check_fdpass_LDADD = libvnicproto.la libvnicshm.la $(TEST_LIBS)
$(tests_check_wire_OBJECTS): proto/vmm.pb-c.h proto/worker.pb-c.h
TESTS += tests/check_wire tests/check_fdpass

# sandbox/: seccomp policy, privilege drop (TESTPLAN S1, S2). Parts need root.
check_PROGRAMS += tests/check_sandbox
tests_check_sandbox_SOURCES = tests/check_sandbox.c
tests_check_sandbox_CFLAGS = $(TEST_CFLAGS) $(LIBEVENT_CFLAGS) $(SECCOMP_CFLAGS)
tests_check_sandbox_LDADD = libvnicsandbox.la $(LIBEVENT_LIBS) $(TEST_LIBS)
TESTS += tests/check_sandbox
EXTRA_DIST += tests/sandbox-policy.golden

# workers/: the data path engine alone (check_net) and the real worker
# process (check_worker).
check_PROGRAMS += tests/check_net
tests_check_net_SOURCES = tests/check_net.c tests/testutil.c tests/testutil.h
tests_check_net_CFLAGS = $(TEST_CFLAGS)
tests_check_net_LDADD = libvnicnet.la libvnicshm.la $(TEST_LIBS) -lpthread
TESTS += tests/check_net
check_PROGRAMS += tests/check_worker
tests_check_worker_SOURCES = tests/check_worker.c tests/testutil.c tests/testutil.h
tests_check_worker_CFLAGS = $(TEST_CFLAGS) $(PROTOBUF_C_CFLAGS)
tests_check_worker_LDADD = libvnicproto.la libvnicshm.la $(TEST_LIBS) -lpthread
$(tests_check_worker_OBJECTS): proto/vmm.pb-c.h proto/worker.pb-c.h workers/vnicd-worker
TESTS += tests/check_worker

# Supervisor, libvnic and vnicctl: against real vnicd processes.
# Multi-queue taps (issue 15): real taps in a private namespace.
check_PROGRAMS += tests/check_tap
tests_check_tap_SOURCES = tests/check_tap.c tests/testutil.c tests/testutil.h
tests_check_tap_CFLAGS = $(TEST_CFLAGS) -I$(top_srcdir)/supervisor
tests_check_tap_LDADD = libvnicsup.la libvnicshm.la libvnicproto.la libvniccommon.la \
	$(LIBEVENT_LIBS) $(PROTOBUF_C_LIBS) $(TEST_LIBS)
$(tests_check_tap_OBJECTS): proto/vmm.pb-c.h proto/worker.pb-c.h
TESTS += tests/check_tap

check_PROGRAMS += tests/check_addnic tests/check_supervisor
tests_check_addnic_SOURCES = tests/check_addnic.c tests/suptest.c tests/suptest.h \
	tests/testutil.c tests/testutil.h
tests_check_addnic_CFLAGS = $(TEST_CFLAGS)
tests_check_addnic_LDADD = libvnic.la libvnicshm.la $(TEST_LIBS)
tests_check_supervisor_SOURCES = tests/check_supervisor.c tests/suptest.c tests/suptest.h
tests_check_supervisor_CFLAGS = $(TEST_CFLAGS) $(PROTOBUF_C_CFLAGS) -I$(top_srcdir)/supervisor
tests_check_supervisor_LDADD = libvnic.la libvnicsup.la libvnicproto.la $(PROTOBUF_C_LIBS) $(TEST_LIBS)
$(tests_check_supervisor_OBJECTS) $(tests_check_addnic_OBJECTS): proto/vmm.pb-c.h proto/worker.pb-c.h
TESTS += tests/check_addnic tests/check_supervisor

# Issue 11: a hostile VMM against a real vnicd (raw frames, fd limits,
# reply ordering, the watchdog); the worker cases need root.
check_PROGRAMS += tests/check_hostile
tests_check_hostile_SOURCES = tests/check_hostile.c tests/suptest.c tests/suptest.h \
	tests/testutil.c tests/testutil.h
tests_check_hostile_CFLAGS = $(TEST_CFLAGS) $(PROTOBUF_C_CFLAGS)
tests_check_hostile_LDADD = libvnic.la libvnicshm.la libvnicproto.la $(PROTOBUF_C_LIBS) $(TEST_LIBS)
$(tests_check_hostile_OBJECTS): proto/vmm.pb-c.h proto/worker.pb-c.h
TESTS += tests/check_hostile

# Issue 14: SetDirtyLog through libvnic against a real vnicd and worker
# (refusals, logging, replace, stop, crash restart); needs root.
check_PROGRAMS += tests/check_setdirtylog
tests_check_setdirtylog_SOURCES = tests/check_setdirtylog.c tests/suptest.c tests/suptest.h \
	tests/testutil.c tests/testutil.h
tests_check_setdirtylog_CFLAGS = $(TEST_CFLAGS) $(PROTOBUF_C_CFLAGS)
tests_check_setdirtylog_LDADD = libvnic.la libvnicshm.la libvnicproto.la $(PROTOBUF_C_LIBS) \
	$(TEST_LIBS)
$(tests_check_setdirtylog_OBJECTS): proto/vmm.pb-c.h proto/worker.pb-c.h
TESTS += tests/check_setdirtylog

# The NIC state machine, crash restart, sandbox options (issues 4, 5):
# real vnicd processes with scripted and real workers; the real-worker
# cases and the measurements need root.
check_PROGRAMS += tests/check_lifecycle
tests_check_lifecycle_SOURCES = tests/check_lifecycle.c tests/suptest.c tests/suptest.h
tests_check_lifecycle_CFLAGS = $(TEST_CFLAGS) $(PROTOBUF_C_CFLAGS) -I$(top_srcdir)/supervisor
tests_check_lifecycle_LDADD = libvnic.la libvnicsup.la libvnicshm.la libvnicproto.la \
	$(PROTOBUF_C_LIBS) $(TEST_LIBS)
$(tests_check_lifecycle_OBJECTS): proto/vmm.pb-c.h proto/worker.pb-c.h
TESTS += tests/check_lifecycle

# tools/: the ring benchmark still runs (figures are not asserted);
# vnic-bench traffic counts worker CPU across a restart (issue 11).
dist_check_SCRIPTS += tests/bench_ring_smoke.sh tests/bench_restart_cpu.sh
TESTS += tests/bench_ring_smoke.sh tests/bench_restart_cpu.sh

# End to end with real processes (vnicd, workers, vnic-bench as VMM and
# guests); e2e_tap needs root and /dev/net/tun (else exit 77).
dist_check_SCRIPTS += tests/e2e_socket.sh tests/e2e_tap.sh tests/e2e_hostile.sh tests/e2e_afpacket.sh \
	tests/e2e_hostile_afpacket.sh
EXTRA_DIST += tests/e2e_lib.sh
TESTS += tests/e2e_socket.sh tests/e2e_tap.sh tests/e2e_hostile.sh tests/e2e_afpacket.sh \
	tests/e2e_hostile_afpacket.sh

# The TX policies of issue 9: each one under traffic, and SetPolicy
# switching between all four under traffic without losing a frame.
dist_check_SCRIPTS += tests/e2e_policy.sh
TESTS += tests/e2e_policy.sh
# Issue 14: vnic-bench traffic --dirty-log, every changed page logged.
dist_check_SCRIPTS += tests/e2e_dirtylog.sh
TESTS += tests/e2e_dirtylog.sh

# The notification protocol in Promela, checked by spin, with its
# mutants (~40 s; the model does not depend on the build, so only the
# builds without fault injection run it: build/plain in ./quickstart).
dist_check_SCRIPTS += tests/notify_model.sh
if !FAULT_INJECTION
TESTS += tests/notify_model.sh
endif

# vnic-bench's frame builder and checker, which the e2e tests rely on.
check_PROGRAMS += tests/check_frames
tests_check_frames_SOURCES = tests/check_frames.c tools/frames.c tools/frames.h
tests_check_frames_CFLAGS = $(TEST_CFLAGS)
tests_check_frames_LDADD = $(TEST_LIBS)
TESTS += tests/check_frames

# Fault injection (common/fault.h): production binaries carry none of it
# (fault_absent, every build); the parser's unit test in fault builds only.
dist_check_SCRIPTS += tests/fault_absent.sh
TESTS += tests/fault_absent.sh
if FAULT_INJECTION
check_PROGRAMS += tests/check_fault
tests_check_fault_SOURCES = tests/check_fault.c
tests_check_fault_CFLAGS = $(TEST_CFLAGS)
tests_check_fault_LDADD = libvnicfault.la $(TEST_LIBS)
TESTS += tests/check_fault
endif
EXTRA_DIST += tests/check_fault.c

# The lifecycle suite of issue 5 (unplug, disconnect, crash under faults,
# with two NICs of traffic): runs in builds configured with
# --enable-fault-injection (a production build has no points to arm);
# without root it is skipped (77).
dist_check_SCRIPTS += tests/lifecycle.sh tests/lifecycle_afpacket.sh tests/vnicd_crash.sh
if FAULT_INJECTION
TESTS += tests/lifecycle.sh tests/lifecycle_afpacket.sh tests/vnicd_crash.sh
endif
# Upgrade in place (issue 16): vnicd replaced under traffic, in every build;
# bad handovers refused before anything is taken over.
dist_check_SCRIPTS += tests/upgrade.sh tests/handover_check.sh tests/fdstore.sh
TESTS += tests/upgrade.sh tests/handover_check.sh tests/fdstore.sh

# Administration (issue 10): versions, vnicctl as an operator's tool.
dist_check_SCRIPTS += tests/admin_cli.sh tests/admin_daemon.sh tests/admin_systemd.sh tests/admin_uid.sh tests/admin_scale.sh
EXTRA_DIST += tests/sd_helper.py
TESTS += tests/admin_cli.sh tests/admin_daemon.sh tests/admin_systemd.sh tests/admin_uid.sh tests/admin_scale.sh
check_PROGRAMS += tests/check_admin
tests_check_admin_SOURCES = tests/check_admin.c tests/suptest.c tests/suptest.h \
	supervisor/uidrange.c supervisor/uidrange.h
tests_check_admin_CFLAGS = $(TEST_CFLAGS) -I$(top_srcdir)/supervisor
tests_check_admin_LDADD = libvnic.la libvnicshm.la $(TEST_LIBS)
TESTS += tests/check_admin
# vhost-user (issue 8): a scripted front end against a real vnicd, its
# worker and a tap in a private netns; needs root (else 77).
check_PROGRAMS += tests/check_vhost_user
tests_check_vhost_user_SOURCES = tests/check_vhost_user.c tests/suptest.c tests/suptest.h \
	tests/testutil.c tests/testutil.h
tests_check_vhost_user_CFLAGS = $(TEST_CFLAGS) -I$(top_srcdir)/supervisor
tests_check_vhost_user_LDADD = libvnic.la libvnicsup.la libvnicshm.la libvnicproto.la \
	$(PROTOBUF_C_LIBS) $(TEST_LIBS)
$(tests_check_vhost_user_OBJECTS): proto/vmm.pb-c.h proto/worker.pb-c.h
TESTS += tests/check_vhost_user

# Real clients (issue 8): a Linux guest under QEMU/TCG (tests/guest/:
# image builder, python3 harness) and DPDK testpmd.  Slow on 2 cores, so
# they run in the production tree only (not fault, not sanitize); each
# skips (77) without root, QEMU, a kernel image, busybox-static, iperf3 or
# DPDK.
EXTRA_DIST += tests/guest/mkguest.sh tests/guest/extract_vmlinux.py tests/guest/init \
	tests/guest/vmlib.py tests/guest/backends.py tests/guest/vhost_cases.py \
	tests/guest/migrate_cases.py tests/guest/mq_cases.py
dist_check_SCRIPTS += tests/qemu_tap.py tests/qemu_vhost_server.py tests/qemu_vhost_client.py \
	tests/dpdk_virtio_user.py tests/qemu_migrate.py tests/qemu_vhost_mq.py \
	tests/dpdk_virtio_user_afpacket.sh
# Live migration (issue 14): two QEMUs on one bridge, vnicd and QEMU's own
# virtio-net side by side (about 2 minutes: 3 boots, 4 migrations).
if !SANITIZERS
if !FAULT_INJECTION
TESTS += tests/qemu_tap.py tests/qemu_vhost_server.py tests/qemu_vhost_client.py \
	tests/dpdk_virtio_user.py tests/qemu_migrate.py tests/qemu_vhost_mq.py \
	tests/dpdk_virtio_user_afpacket.sh
endif
endif
clean-local: clean-guest-image
clean-guest-image:
	rm -rf tests/guest-image
