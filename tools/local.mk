# SPDX-License-Identifier: BSD-3-Clause
# tools/: vnicctl (administration) and vnic-bench (simulated VMM and guest).
# The program lands at $(builddir)/tools/vnic-bench (tools/demo.sh runs it there).
bin_PROGRAMS += tools/vnic-bench
tools_vnic_bench_SOURCES = tools/vnic-bench.c tools/bench_ring.c tools/bench.h
tools_vnic_bench_LDADD = libvnicshm.la -lm
EXTRA_DIST += tools/demo.sh tools/unplug_latency.sh

# vnicctl: the operator's tool (list, status, set-policy, log-level; --json
# through json-c), over libvnic.
# In the build tree at $(builddir)/tools/vnicctl, beside vnic-bench.
bin_PROGRAMS += tools/vnicctl
tools_vnicctl_SOURCES = tools/vnicctl.c tools/vnicctl.h tools/vnicctl_endpoint.c
tools_vnicctl_CFLAGS = $(AM_CFLAGS) $(JSONC_CFLAGS)
tools_vnicctl_LDADD = libvnic.la libvnicproto.la $(JSONC_LIBS)

# vnic-bench traffic/hostile: simulated VMM and guests over libvnic.
tools_vnic_bench_SOURCES += tools/bench_traffic.c tools/bench_policy.c tools/guest.c tools/guest.h \
	tools/frames.c tools/frames.h tools/bench_scale.c
# The run both share (traffic.h says which file holds what).
tools_vnic_bench_SOURCES += tools/bench_hostile.c tools/traffic.h tools/traffic_run.c \
	tools/traffic_backend.c tools/traffic_flow.c tools/traffic_lifecycle.c tools/traffic_report.c \
	tools/traffic_dirtylog.c
tools_vnic_bench_LDADD += libvnic.la libvnicproto.la
EXTRA_DIST += tools/README.md
EXTRA_DIST += tools/bench_lib.sh tools/bench_matrix.sh tools/bench_inflight.sh tools/bench_scale.sh tools/bench_dirtylog.sh tools/bench_mq.sh
EXTRA_DIST += tools/bench_ab_ring.sh tools/policy_plots.sh tools/bench_dpdk_ring.sh
# Real clients (issue 8): a Linux guest under QEMU and DPDK testpmd.
EXTRA_DIST += tools/bench_qemu.py tools/bench_dpdk.py
# Live migration (issue 14): vnicd against QEMU's own virtio-net.
EXTRA_DIST += tools/bench_migrate.py tools/migrate_compare.py tools/migrate_timeline.py tools/bench_restart.py tools/bench_upgrade_pause.sh
EXTRA_DIST += tools/fuzz.sh tools/fuzz_cov.sh
# Seed corpora from real QEMU, DPDK and libvnic sessions (issue 18).
EXTRA_DIST += tools/fuzz_record.py tools/fuzz_seeds.py
