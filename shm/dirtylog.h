/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dirtylog: the dirty log of live migration (issue 14), device side.
 *
 * The log is vhost's (VHOST_SET_LOG_BASE): one bit per 4 KiB guest page,
 * bit p % 8 of byte p / 8, p = guest physical address / 4096. The VMM
 * reads and clears it while the device runs, each word with an atomic
 * exchange, and copies the pages it found dirty. So a bit may be set only
 * once the bytes it covers are written: set first, the VMM could clear it
 * and copy the old page between the OR and the write, and the write would
 * never reach the destination. Hence: write guest memory, dirtylog_mark()
 * the range (into a small cache, nothing shared is touched), then
 * dirtylog_flush(): a release fence (Barrier L), then one atomic OR per
 * cached word. Atomic, because the VMM (and other devices logging into
 * the same log) change other bits of the same words concurrently.
 *
 * The cache batches a burst's marks, as DPDK's vhost log cache does: a
 * few (word, mask) entries, a word marked twice costs one OR; a full
 * cache is flushed early (its entries' writes are done already).
 *
 * The log comes from the VMM and is hostile: its size need not cover
 * guest memory, nor be a multiple of 8. A bit at or beyond size * 8 is
 * never written, only counted (dirtylog_outside); no byte past the end
 * is touched, not even by a 64-bit OR that would leave it unchanged.
 *
 * Library code: no logging, no libevent; single-threaded use (one
 * worker); the VMM side is the only concurrency.
 */
#ifndef VNIC_DIRTYLOG_H
#define VNIC_DIRTYLOG_H

#include <stddef.h>
#include <stdint.h>

/* vhost's log page: 4 KiB whatever the host's page size. */
#define DIRTYLOG_PAGE_SHIFT 12
#define DIRTYLOG_PAGE_SIZE (1u << DIRTYLOG_PAGE_SHIFT)

/* Largest log mapped: the supervisor's VALIDATE_LOG_MAX (1 GiB, 32 TiB of
 * guest memory), checked again here. */
#define DIRTYLOG_MAX_SIZE (1ull << 30)

/* Cache entries (64 pages each) before an early flush: as DPDK's
 * VHOST_LOG_CACHE_NR; a burst of 256 frames in 4 KiB buffers fits. */
#define DIRTYLOG_CACHE_NR 32u

struct dirtylog;

/*
 * dirtylog_map - map bytes [offset, offset + size) of fd read-write,
 * shared. The mapping starts at offset rounded down to the host page.
 * Checks again what the supervisor checked (defence in depth): size in
 * 1..DIRTYLOG_MAX_SIZE, no overflow, fd a regular file at least
 * offset + size long (fstat), sealed with F_SEAL_SHRINK (so it can never
 * become shorter under the mapping). fd is not consumed.
 * Returns: 0 and *ret_log (free with dirtylog_free), or -EINVAL, -EBADF,
 * or mmap's errno, with err filled.
 */
int dirtylog_map(int fd, uint64_t size, uint64_t offset, struct dirtylog **ret_log, char *err,
		 size_t errlen);

/* dirtylog_free - flush what is cached, unmap, free. Accepts NULL.
 * Returns: NULL. */
struct dirtylog *dirtylog_free(struct dirtylog *l);

/*
 * dirtylog_mark - the guest bytes [gpa, gpa + len) were written: cache
 * the bits of every page they touch. Call AFTER the write. len 0 marks
 * nothing; a range running past 2^64 is cut there. Bits beyond the log
 * are counted, not cached. May flush (a full cache).
 */
void dirtylog_mark(struct dirtylog *l, uint64_t gpa, uint64_t len);

/*
 * dirtylog_flush - set every cached bit in the log: Barrier L (release:
 * the guest writes the bits cover become visible before any bit; pairs
 * with the VMM's atomic exchange that reads and clears a word before it
 * copies the pages), then an atomic OR per entry. Empties the cache; no
 * fence when it is empty.
 */
void dirtylog_flush(struct dirtylog *l);

/* dirtylog_outside - page bits refused so far because they lie at or
 * beyond size * 8 (a log too small for guest memory). Saturates. */
uint64_t dirtylog_outside(const struct dirtylog *l);

/* dirtylog_size - the log's size in bytes. */
uint64_t dirtylog_size(const struct dirtylog *l);

/* Tests only: fn(l, i, arg) runs in dirtylog_flush after Barrier L and
 * right before entry i's OR (NULL in production: one predicted branch).
 * A test places the VMM's clears there deterministically. */
typedef void (*dirtylog_hook_fn)(struct dirtylog *l, unsigned i, void *arg);
void dirtylog_set_hook(struct dirtylog *l, dirtylog_hook_fn fn, void *arg);

#endif
