# SPDX-License-Identifier: BSD-3-Clause
# fuzz/vring.c: the split ring's device side (shm/vring.c, inflight.c) against a hostile guest. See fuzz/local.mk.
FUZZ_PROGS += fuzz/fuzz_vring
FUZZ_SMOKE += fuzz/smoke_vring.sh
EXTRA_DIST += fuzz/vring.dict fuzz/gen_seeds.py
fuzz_fuzz_vring_SOURCES = fuzz/vring.c $(FUZZ_COMMON) $(FUZZ_MAIN)
fuzz_fuzz_vring_CFLAGS = $(FUZZ_CC_FLAGS)
fuzz_fuzz_vring_LDFLAGS = $(FUZZ_LINK)
fuzz_fuzz_vring_LDADD = libvnicshm.la libvniccommon.la
