# SPDX-License-Identifier: BSD-3-Clause
# man/: the manual pages (mdoc), installed and shipped in the tarball;
# tests/man_lint.sh checks each renders without a warning and documents
# every option its program's --help lists.
dist_man_MANS += man/vnicd.8 man/vnicctl.8 man/vnic-bench.1 man/libvnic.3

# The control protocol for clients in other languages (libvnic speaks it):
# $(datadir)/vnicd/proto/vmm.proto. worker.proto is vnicd's own business.
vnicprotodir = $(datadir)/vnicd/proto
vnicproto_DATA = proto/vmm.proto
