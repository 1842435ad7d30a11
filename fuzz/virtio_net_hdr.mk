# SPDX-License-Identifier: BSD-3-Clause
# fuzz/virtio_net_hdr.c: the worker's TX/RX data path and its virtio-net header checks. See fuzz/local.mk.
FUZZ_PROGS += fuzz/fuzz_virtio_net_hdr
FUZZ_SMOKE += fuzz/smoke_virtio_net_hdr.sh
EXTRA_DIST += fuzz/virtio_net_hdr.dict
fuzz_fuzz_virtio_net_hdr_SOURCES = fuzz/virtio_net_hdr.c $(FUZZ_COMMON) $(FUZZ_MAIN)
fuzz_fuzz_virtio_net_hdr_CFLAGS = $(FUZZ_CC_FLAGS)
fuzz_fuzz_virtio_net_hdr_LDFLAGS = $(FUZZ_LINK)
fuzz_fuzz_virtio_net_hdr_LDADD = libvnicnet.la libvnicshm.la libvniccommon.la
