/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dirtylog: mapping, marking and flushing a vhost dirty log (see
 * dirtylog.h for the contract and the ordering rule).
 */
#include "config.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dirtylog.h"

/* One cache entry: bits of log word w (log bytes 8w .. 8w + 7; bit b of
 * mask is bit b % 8 of byte 8w + b / 8, i.e. the word read little-endian). */
struct dirtylog_ent {
	uint64_t word;
	uint64_t mask;
};

struct dirtylog {
	uint8_t *log;        /* byte 0 of the log */
	uint64_t size;       /* bytes */
	uint64_t nbits;      /* size * 8: pages the log covers */
	bool aligned;        /* log is 8-byte aligned: a whole word is one OR */
	void *map;           /* the mapping, from the page-aligned offset */
	size_t map_len;
	uint64_t outside;    /* bits refused (beyond nbits) */
	unsigned n;          /* cache entries in use */
	unsigned last;       /* entry hit last: the next mark is likely the same word */
	dirtylog_hook_fn hook;
	void *hook_arg;
	struct dirtylog_ent cache[DIRTYLOG_CACHE_NR];
};

static void dirtylog_err(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void dirtylog_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || errlen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* The fd as the supervisor promised it: a regular file (memfd) that
 * holds [0, end) and can never shrink. */
static int dirtylog_check_fd(int fd, uint64_t end, char *err, size_t errlen)
{
	struct stat st;
	int seals;

	if (fd < 0 || fstat(fd, &st) < 0) {
		dirtylog_err(err, errlen, "dirty log: fd %d is not open", fd);
		return -EBADF;
	}
	if (!S_ISREG(st.st_mode) || st.st_size < 0 || (uint64_t)st.st_size < end) {
		dirtylog_err(err, errlen, "dirty log: fd is not a file of at least %llu bytes",
			     (unsigned long long)end);
		return -EINVAL;
	}
	seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0 || !(seals & F_SEAL_SHRINK)) {
		dirtylog_err(err, errlen, "dirty log: fd is not sealed with F_SEAL_SHRINK");
		return -EINVAL;
	}
	return 0;
}

int dirtylog_map(int fd, uint64_t size, uint64_t offset, struct dirtylog **ret_log, char *err,
		 size_t errlen)
{
	uint64_t end, page = (uint64_t)sysconf(_SC_PAGESIZE), base;
	struct dirtylog *l;
	void *p;
	int r;

	if (size == 0 || size > DIRTYLOG_MAX_SIZE) {
		dirtylog_err(err, errlen, "dirty log: size %llu is not in 1..%llu",
			     (unsigned long long)size, DIRTYLOG_MAX_SIZE);
		return -EINVAL;
	}
	if (__builtin_add_overflow(offset, size, &end) || end > (uint64_t)INT64_MAX) {
		dirtylog_err(err, errlen, "dirty log: offset %llu + size %llu overflows",
			     (unsigned long long)offset, (unsigned long long)size);
		return -EINVAL;
	}
	r = dirtylog_check_fd(fd, end, err, errlen);
	if (r < 0)
		return r;
	l = calloc(1, sizeof(*l));
	if (!l) {
		dirtylog_err(err, errlen, "dirty log: out of memory");
		return -ENOMEM;
	}
	/* mmap takes a page-aligned offset: map from there. */
	base = offset - offset % page;
	l->map_len = (size_t)(end - base);
	p = mmap(NULL, l->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)base);
	if (p == MAP_FAILED) {
		r = -errno;
		dirtylog_err(err, errlen, "dirty log: mmap: %s", strerror(errno));
		free(l);
		return r;
	}
	l->map = p;
	l->log = (uint8_t *)p + (offset - base);
	l->size = size;
	l->nbits = size * 8; /* size <= 2^30: no overflow */
	l->aligned = ((uintptr_t)l->log % sizeof(uint64_t)) == 0;
	*ret_log = l;
	return 0;
}

struct dirtylog *dirtylog_free(struct dirtylog *l)
{
	if (!l)
		return NULL;
	dirtylog_flush(l);
	munmap(l->map, l->map_len);
	free(l);
	return NULL;
}

/* Set the bits of one entry. Only bits below nbits are ever cached, so
 * every byte with a bit in mask lies inside the log; a word that runs
 * past the end (or a log not 8-byte aligned) is ORed byte by byte, so no
 * byte beyond size is touched. */
static inline void dirtylog_or(struct dirtylog *l, const struct dirtylog_ent *e)
{
	uint64_t off = e->word * 8;

	if (l->aligned && off + 8 <= l->size) {
		__atomic_fetch_or((uint64_t *)(void *)(l->log + off), htole64(e->mask),
				  __ATOMIC_RELAXED);
		return;
	}
	for (unsigned b = 0; b < 8; b++) {
		uint8_t m = (uint8_t)(e->mask >> (8 * b));

		if (m)
			__atomic_fetch_or(l->log + off + b, m, __ATOMIC_RELAXED);
	}
}

void dirtylog_flush(struct dirtylog *l)
{
	if (l->n == 0)
		return;
	/* Barrier L (release): the guest writes before any bit. Pairs with
	 * the VMM's atomic exchange of the word (QEMU: qatomic_xchg in
	 * vhost_dev_sync_region), after which it copies the pages. */
	__atomic_thread_fence(__ATOMIC_RELEASE);
	for (unsigned i = 0; i < l->n; i++) {
		if (__builtin_expect(l->hook != NULL, 0))
			l->hook(l, i, l->hook_arg);
		dirtylog_or(l, &l->cache[i]);
	}
	l->n = 0;
	l->last = 0;
}

static inline void dirtylog_cache(struct dirtylog *l, uint64_t word, uint64_t mask)
{
	unsigned i;

	if (l->last < l->n && l->cache[l->last].word == word) {
		l->cache[l->last].mask |= mask;
		return;
	}
	for (i = 0; i < l->n; i++) {
		if (l->cache[i].word == word) {
			l->cache[i].mask |= mask;
			l->last = i;
			return;
		}
	}
	/* Full: every cached mark followed its write, so flushing now is
	 * as correct as flushing at the end of the burst. */
	if (l->n == DIRTYLOG_CACHE_NR)
		dirtylog_flush(l);
	l->cache[l->n].word = word;
	l->cache[l->n].mask = mask;
	l->last = l->n++;
}

static inline void dirtylog_count_outside(struct dirtylog *l, uint64_t n)
{
	if (__builtin_add_overflow(l->outside, n, &l->outside))
		l->outside = UINT64_MAX;
}

void dirtylog_mark(struct dirtylog *l, uint64_t gpa, uint64_t len)
{
	uint64_t first, last, end;

	if (len == 0)
		return;
	/* The last byte, cut at 2^64 - 1: no wrap to page 0. */
	if (__builtin_add_overflow(gpa, len - 1, &end))
		end = UINT64_MAX;
	first = gpa >> DIRTYLOG_PAGE_SHIFT;
	last = end >> DIRTYLOG_PAGE_SHIFT; /* < 2^52: last - first + 1 cannot wrap */
	if (last >= l->nbits) {
		if (first >= l->nbits) {
			dirtylog_count_outside(l, last - first + 1);
			return;
		}
		dirtylog_count_outside(l, last - l->nbits + 1);
		last = l->nbits - 1;
	}
	/* Word by word: bits [first % 64, hi] of word first / 64. */
	for (;;) {
		uint64_t word = first >> 6, lo = first & 63;
		uint64_t hi = (last >> 6) == word ? (last & 63) : 63;
		uint64_t mask = (~0ull >> (63 - hi)) & (~0ull << lo);

		dirtylog_cache(l, word, mask);
		if ((last >> 6) == word)
			return;
		first = (word + 1) << 6;
	}
}

uint64_t dirtylog_outside(const struct dirtylog *l)
{
	return l->outside;
}

uint64_t dirtylog_size(const struct dirtylog *l)
{
	return l->size;
}

void dirtylog_set_hook(struct dirtylog *l, dirtylog_hook_fn fn, void *arg)
{
	l->hook = fn;
	l->hook_arg = arg;
}
