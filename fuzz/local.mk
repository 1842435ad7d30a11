# SPDX-License-Identifier: BSD-3-Clause
# fuzz/: one libFuzzer target per parser a hostile party reaches (issue
# 18; doc/fuzzing.md). Each target fuzz/NAME.c builds as fuzz/fuzz_NAME:
#   --enable-fuzz (CC=clang-14): the fuzzer; make fuzz-smoke runs each one
#     for VNIC_FUZZ_SECONDS (20) from its seeds, tools/fuzz.sh for longer;
#   any other tree: with fuzz/replay.c as main, a test of the normal suite
#     that runs every seed (fuzz/corpus/NAME) and every input that ever
#     crashed (fuzz/regress/NAME) once.
# A target's own block (sources, libraries) is in fuzz/NAME.mk.
FUZZ_COMMON = fuzz/fuzz.c fuzz/fuzz.h
FUZZ_CC_FLAGS = $(AM_CFLAGS)
if FUZZ
FUZZ_MAIN =
FUZZ_LINK = $(AM_LDFLAGS) -fsanitize=fuzzer
else
FUZZ_MAIN = fuzz/replay.c
FUZZ_LINK = $(AM_LDFLAGS)
endif
FUZZ_PROGS =
FUZZ_SMOKE =
EXTRA_DIST += fuzz/smoke.sh fuzz/corpus fuzz/regress

# The targets, one include each (fuzz/NAME.mk: FUZZ_PROGS += fuzz/fuzz_NAME,
# FUZZ_SMOKE += fuzz/smoke_NAME.sh, its sources and libraries, its dict).
include fuzz/vhost_user.mk
include fuzz/worker_chan.mk
include fuzz/vring.mk
include fuzz/virtio_net_hdr.mk
include fuzz/vmm_proto.mk

check_PROGRAMS += $(FUZZ_PROGS)
EXTRA_DIST += $(FUZZ_SMOKE)
if FUZZ
TESTS += $(FUZZ_SMOKE)
else
TESTS += $(FUZZ_PROGS)
endif

# make fuzz-smoke: every target briefly (./quickstart test, in build/fuzz).
fuzz-smoke:
	$(MAKE) $(AM_MAKEFLAGS) check TESTS='$(FUZZ_SMOKE)' check_PROGRAMS='$(FUZZ_PROGS)'
.PHONY: fuzz-smoke
