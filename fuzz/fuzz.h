/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz: what every fuzz target of fuzz/ shares (issue 18).
 *
 * A target is one file, fuzz/NAME.c, that defines LLVMFuzzerTestOneInput
 * (and may define LLVMFuzzerInitialize). It is linked twice:
 *   - in a tree configured with --enable-fuzz (clang, libFuzzer, ASan,
 *     UBSan): fuzz/fuzz_NAME, the fuzzer (make fuzz-smoke, tools/fuzz.sh);
 *   - in every other tree, with fuzz/replay.c as main(): fuzz/fuzz_NAME
 *     runs each file of fuzz/corpus/NAME and fuzz/regress/NAME once, as a
 *     test of the normal suite (so a crash found once stays fixed).
 *
 * Input is consumed through struct fuzz_in: reading past the end yields
 * zeros and sets ->end, so a target never reads outside the input.
 */
#ifndef VNIC_FUZZ_H
#define VNIC_FUZZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

struct fuzz_in {
	const uint8_t *p;
	size_t n;
	bool end; /* a read wanted more than was left */
};

static inline struct fuzz_in fuzz_in(const uint8_t *data, size_t size)
{
	return (struct fuzz_in){ .p = data, .n = size, .end = false };
}

/* fuzz_take - copy up to len bytes into dst (the rest zero-filled);
 * returns the number of bytes that came from the input. */
size_t fuzz_take(struct fuzz_in *in, void *dst, size_t len);
uint8_t fuzz_u8(struct fuzz_in *in);
uint16_t fuzz_u16(struct fuzz_in *in);
uint32_t fuzz_u32(struct fuzz_in *in);
uint64_t fuzz_u64(struct fuzz_in *in);
/* fuzz_rest - the unread input as a pointer and length; consumes it. */
const uint8_t *fuzz_rest(struct fuzz_in *in, size_t *ret_len);

/* fuzz_setup - once per process: logging dropped (its formatting still
 * runs), SIGPIPE ignored. Targets call it from LLVMFuzzerInitialize. */
void fuzz_setup(void);

/* fuzz_skip - this target cannot run here (no root, no /dev/net/tun):
 * say why on stderr and exit 77, which the normal suite and make
 * fuzz-smoke (smoke.sh) count as a skip, never as a pass. Called from
 * LLVMFuzzerInitialize. */
__attribute__((noreturn)) void fuzz_skip(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));

/* fuzz_fd_count - open fds of this process (/proc/self/fd). */
int fuzz_fd_count(void);
/* fuzz_fd_check - abort() naming @what when the process holds a
 * different number of fds than @before: an input leaked (or closed) one. */
void fuzz_fd_check(int before, const char *what);

/* fuzz_memfd - a memfd of @size bytes holding @len bytes of @data
 * (@len <= @size; the rest zero), sealed against shrinking and growing as
 * a VMM's guest memory is. Returns the fd, or -1 (errno set). */
int fuzz_memfd(const void *data, size_t len, size_t size);

#endif
