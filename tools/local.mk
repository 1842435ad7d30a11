# tools/: vnicctl (administration) and vnic-bench (simulated VMM and guest).
bin_PROGRAMS += vnic-bench
vnic_bench_SOURCES = tools/vnic-bench.c tools/bench_ring.c tools/bench.h
vnic_bench_LDADD = libvnicshm.la -lm

# vnicctl: status of every NIC (table, --json, --watch), over libvnic.
bin_PROGRAMS += vnicctl
vnicctl_SOURCES = tools/vnicctl.c
vnicctl_CPPFLAGS = $(AM_CPPFLAGS)
vnicctl_LDADD = libvnic.la
