/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * check_dirtylog: the dirty log of live migration (shm/dirtylog.h).
 *
 * Bits land exactly where vhost's format says, only at flush, never past
 * the log's end (a log too small, of odd size, at an odd offset); a full
 * cache flushes early; hostile ranges (len 0, gpa near 2^64) neither
 * crash nor wrap; and a VMM clearing the log with atomic exchanges while
 * the device flushes never misses a write, with the interleavings forced
 * by the flush hook (and once more at random, for the fence).
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "dirtylog.h"
#include "testutil.h"

#define PG DIRTYLOG_PAGE_SIZE

/* A sealed memfd of len bytes, mapped by the test (the VMM's view). */
struct vmm_log {
	int fd;
	size_t len;
	uint8_t *p;
};

static void vmm_log_new(struct vmm_log *v, size_t len)
{
	v->fd = tu_memfd(len, true);
	v->len = len;
	v->p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, v->fd, 0);
	ck_assert_ptr_ne(v->p, MAP_FAILED);
}

static void vmm_log_free(struct vmm_log *v)
{
	munmap(v->p, v->len);
	close(v->fd);
}

static bool bit(const uint8_t *log, uint64_t page)
{
	return (log[page / 8] >> (page % 8)) & 1u;
}

static struct dirtylog *map_ok(int fd, uint64_t size, uint64_t offset)
{
	struct dirtylog *l = NULL;
	char err[256] = "";

	ck_assert_msg(dirtylog_map(fd, size, offset, &l, err, sizeof(err)) == 0, "%s", err);
	ck_assert_ptr_nonnull(l);
	return l;
}

/* Each range sets the bits of exactly the pages it touches, and only at
 * flush. */
START_TEST(bits_exactly_where_vhost_puts_them)
{
	struct vmm_log v;
	struct dirtylog *l;
	uint8_t want[64] = { 0 };
	static const struct { uint64_t gpa, len; } r[] = {
		{ 0x1000, 1 },              /* page 1 */
		{ 0x2fff, 2 },              /* pages 2, 3 */
		{ 0x10000, 0x3000 },        /* pages 16..18 */
		{ 63ull * PG + 5, PG },     /* pages 63, 64: across a word */
		{ 200ull * PG, 130ull * PG }, /* pages 200..329: three words */
		{ 511ull * PG, PG },        /* the last page */
	};
	static const uint64_t pages[][2] = { { 1, 1 }, { 2, 3 }, { 16, 18 }, { 63, 64 },
					     { 200, 329 }, { 511, 511 } };

	vmm_log_new(&v, 64);
	l = map_ok(v.fd, 64, 0);
	for (unsigned i = 0; i < sizeof(r) / sizeof(r[0]); i++) {
		dirtylog_mark(l, r[i].gpa, r[i].len);
		for (uint64_t p = pages[i][0]; p <= pages[i][1]; p++)
			want[p / 8] |= (uint8_t)(1u << (p % 8));
	}
	for (unsigned i = 0; i < 64; i++)
		ck_assert_msg(v.p[i] == 0, "byte %u set before the flush", i);
	dirtylog_flush(l);
	for (unsigned i = 0; i < 64; i++)
		ck_assert_msg(v.p[i] == want[i], "byte %u: 0x%02x, want 0x%02x", i, v.p[i], want[i]);
	ck_assert_uint_eq(dirtylog_outside(l), 0);
	/* The VMM cleared it; a second flush with nothing cached sets nothing. */
	memset(v.p, 0, 64);
	dirtylog_flush(l);
	for (unsigned i = 0; i < 64; i++)
		ck_assert_uint_eq(v.p[i], 0);
	ck_assert_ptr_null(dirtylog_free(l));
	vmm_log_free(&v);
}
END_TEST

/* Random ranges against a page-by-page model. */
START_TEST(random_ranges_match_the_model)
{
	unsigned long seed = tu_seed("random_ranges_match_the_model", 0xd1e7ull);
	const uint64_t size = 40; /* 320 pages, 5 words */
	struct vmm_log v;
	struct dirtylog *l;
	uint8_t want[40];
	uint64_t outside = 0;

	srandom((unsigned)seed);
	vmm_log_new(&v, size);
	l = map_ok(v.fd, size, 0);
	for (unsigned round = 0; round < 200; round++) {
		memset(want, 0, sizeof(want));
		memset(v.p, 0, size);
		for (unsigned k = 0; k < 1 + (unsigned)random() % 50; k++) {
			uint64_t gpa = (uint64_t)random() % (400ull * PG);
			uint64_t len = (uint64_t)random() % (3ull * PG);

			dirtylog_mark(l, gpa, len);
			for (uint64_t p = gpa / PG; len && p <= (gpa + len - 1) / PG; p++) {
				if (p < size * 8)
					want[p / 8] |= (uint8_t)(1u << (p % 8));
				else
					outside++;
			}
		}
		dirtylog_flush(l);
		ck_assert_msg(memcmp(v.p, want, size) == 0, "round %u differs (seed %lu)", round,
			      seed);
	}
	ck_assert_uint_eq(dirtylog_outside(l), outside);
	dirtylog_free(l);
	vmm_log_free(&v);
}
END_TEST

/* A log of 13 bytes at offset 4096 + 3 of a larger memfd: not page, not
 * word aligned, not a multiple of 8. Every page marked, and far beyond:
 * the 13 bytes are all ones, every other byte of the memfd still zero. */
START_TEST(odd_size_odd_offset_no_byte_past_the_end)
{
	const uint64_t off = PG + 3, size = 13;
	struct vmm_log v;
	struct dirtylog *l;

	vmm_log_new(&v, 3 * PG);
	l = map_ok(v.fd, size, off);
	ck_assert_uint_eq(dirtylog_size(l), size);
	dirtylog_mark(l, 0, 1ull << 40); /* 2^28 pages: 104 inside */
	dirtylog_flush(l);
	for (size_t i = 0; i < v.len; i++) {
		if (i >= off && i < off + size)
			ck_assert_msg(v.p[i] == 0xff, "log byte %zu is 0x%02x", i - off, v.p[i]);
		else
			ck_assert_msg(v.p[i] == 0, "byte %zu outside the log written", i);
	}
	ck_assert_uint_eq(dirtylog_outside(l), (1ull << 28) - size * 8);
	dirtylog_free(l);

	/* The same with single pages, one word at a time, aligned offset. */
	memset(v.p, 0, v.len);
	l = map_ok(v.fd, size, 8);
	for (uint64_t p = 0; p < 200; p++)
		dirtylog_mark(l, p * PG + 7, 1);
	dirtylog_flush(l);
	for (size_t i = 0; i < v.len; i++)
		ck_assert_uint_eq(v.p[i], i >= 8 && i < 8 + size ? 0xff : 0);
	ck_assert_uint_eq(dirtylog_outside(l), 200 - size * 8);
	dirtylog_free(l);
	vmm_log_free(&v);
}
END_TEST

/* len 0, ranges at the top of the address space, a range of 2^64 - 1
 * bytes: nothing crashes, wraps to page 0, or runs long. */
START_TEST(hostile_ranges)
{
	struct vmm_log v;
	struct dirtylog *l;

	vmm_log_new(&v, 16);
	l = map_ok(v.fd, 16, 0);
	dirtylog_mark(l, 0x5000, 0);
	dirtylog_mark(l, UINT64_MAX, 0);
	dirtylog_flush(l);
	for (unsigned i = 0; i < 16; i++)
		ck_assert_uint_eq(v.p[i], 0);
	ck_assert_uint_eq(dirtylog_outside(l), 0);

	dirtylog_mark(l, UINT64_MAX, 1);          /* the last page */
	ck_assert_uint_eq(dirtylog_outside(l), 1);
	dirtylog_mark(l, UINT64_MAX - 10, 100);   /* cut at 2^64: still one page */
	ck_assert_uint_eq(dirtylog_outside(l), 2);
	dirtylog_mark(l, UINT64_MAX - PG, 2 * PG); /* two pages, the second cut */
	ck_assert_uint_eq(dirtylog_outside(l), 4);
	dirtylog_flush(l);
	for (unsigned i = 0; i < 16; i++)
		ck_assert_msg(v.p[i] == 0, "a range near 2^64 wrapped to byte %u", i);

	/* Everything: the 128 pages of the log, the rest counted. */
	dirtylog_mark(l, 0, UINT64_MAX);
	dirtylog_flush(l);
	for (unsigned i = 0; i < 16; i++)
		ck_assert_uint_eq(v.p[i], 0xff);
	ck_assert_uint_eq(dirtylog_outside(l), 4 + ((1ull << 52) - 128));
	dirtylog_free(l);
	vmm_log_free(&v);
}
END_TEST

/* What dirtylog_map refuses, each with a reason. */
START_TEST(map_refuses_bad_logs)
{
	struct dirtylog *l = NULL;
	char err[256];
	int unsealed, pipefd[2];
	struct vmm_log v;

	vmm_log_new(&v, 2 * PG);
	ck_assert_int_eq(dirtylog_map(v.fd, 0, 0, &l, err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(dirtylog_map(v.fd, DIRTYLOG_MAX_SIZE + 1, 0, &l, err, sizeof(err)),
			 -EINVAL);
	ck_assert_int_eq(dirtylog_map(v.fd, 8, UINT64_MAX - 4, &l, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "overflows"));
	/* Too short by one byte. */
	ck_assert_int_eq(dirtylog_map(v.fd, PG + 1, PG, &l, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "at least"));
	ck_assert_int_eq(dirtylog_map(-1, 8, 0, &l, err, sizeof(err)), -EBADF);
	unsealed = tu_memfd(PG, false);
	ck_assert_int_eq(dirtylog_map(unsealed, 8, 0, &l, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "F_SEAL_SHRINK"));
	ck_assert_int_eq(pipe(pipefd), 0);
	ck_assert_int_eq(dirtylog_map(pipefd[0], 8, 0, &l, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_null(l);
	/* Exactly long enough is fine. */
	l = map_ok(v.fd, PG, PG);
	dirtylog_free(l);
	ck_assert_ptr_null(dirtylog_free(NULL));
	close(unsealed);
	close(pipefd[0]);
	close(pipefd[1]);
	vmm_log_free(&v);
}
END_TEST

/* DIRTYLOG_CACHE_NR distinct words fit; the next one flushes the cache
 * first; repeated marks of a cached word take no entry. */
START_TEST(full_cache_flushes_early)
{
	const unsigned nwords = DIRTYLOG_CACHE_NR + 5;
	struct vmm_log v;
	struct dirtylog *l;
	unsigned set;

	vmm_log_new(&v, nwords * 8);
	l = map_ok(v.fd, nwords * 8, 0);
	for (unsigned w = 0; w < DIRTYLOG_CACHE_NR; w++) {
		dirtylog_mark(l, (uint64_t)w * 64 * PG, 1);
		dirtylog_mark(l, ((uint64_t)w * 64 + 9) * PG, 1); /* same word */
	}
	for (unsigned i = 0; i < v.len; i++)
		ck_assert_msg(v.p[i] == 0, "flushed before the cache was full");
	dirtylog_mark(l, (uint64_t)DIRTYLOG_CACHE_NR * 64 * PG, 1);
	for (unsigned w = 0; w < DIRTYLOG_CACHE_NR; w++) {
		ck_assert_msg(bit(v.p, w * 64) && bit(v.p, w * 64 + 9), "word %u not flushed", w);
	}
	ck_assert_msg(!bit(v.p, DIRTYLOG_CACHE_NR * 64), "the new entry was flushed too early");
	/* dirtylog_free flushes what is left. */
	l = dirtylog_free(l);
	ck_assert(bit(v.p, DIRTYLOG_CACHE_NR * 64));
	set = 0;
	for (uint64_t p = 0; p < v.len * 8; p++)
		set += bit(v.p, p);
	ck_assert_uint_eq(set, 2 * DIRTYLOG_CACHE_NR + 1);
	vmm_log_free(&v);
}
END_TEST

/* ----------------------------------------- a VMM clearing concurrently */

#define C_PAGES 256u /* 4 words */

struct vmm_sim {
	uint64_t *log;              /* the VMM's view of the log words */
	uint8_t src[C_PAGES];       /* one byte per page stands for the page */
	uint8_t dst[C_PAGES];       /* the destination's copy */
	sem_t go, done;
	volatile int quit;
	unsigned syncs;
};

/* One pass of the VMM's sync (as QEMU's vhost_dev_sync_region): exchange
 * each word with 0, copy the pages whose bits were set. */
static void vmm_sync(struct vmm_sim *s)
{
	for (unsigned w = 0; w < C_PAGES / 64; w++) {
		uint64_t bits = __atomic_exchange_n(&s->log[w], 0, __ATOMIC_SEQ_CST);

		for (unsigned b = 0; b < 64; b++)
			if (bits >> b & 1u)
				s->dst[w * 64 + b] = __atomic_load_n(&s->src[w * 64 + b],
								     __ATOMIC_RELAXED);
	}
	s->syncs++;
}

/* The VMM thread: one sync per "go". */
static void *vmm_thread(void *arg)
{
	struct vmm_sim *s = arg;

	for (;;) {
		sem_wait(&s->go);
		if (s->quit)
			return NULL;
		vmm_sync(s);
		sem_post(&s->done);
	}
}

/* Run one sync on the VMM thread, now. */
static void vmm_sync_now(struct vmm_sim *s)
{
	sem_post(&s->go);
	sem_wait(&s->done);
}

static void hook_sync(struct dirtylog *l, unsigned i, void *arg)
{
	(void)l;
	(void)i;
	vmm_sync_now(arg);
}

static void vmm_sim_start(struct vmm_sim *s, struct vmm_log *v, pthread_t *t)
{
	memset(s, 0, sizeof(*s));
	vmm_log_new(v, C_PAGES / 8);
	s->log = (uint64_t *)(void *)v->p;
	ck_assert_int_eq(sem_init(&s->go, 0, 0), 0);
	ck_assert_int_eq(sem_init(&s->done, 0, 0), 0);
	ck_assert_int_eq(pthread_create(t, NULL, vmm_thread, s), 0);
}

static void vmm_sim_stop(struct vmm_sim *s, struct vmm_log *v, pthread_t t)
{
	s->quit = 1;
	sem_post(&s->go);
	pthread_join(t, NULL);
	sem_destroy(&s->go);
	sem_destroy(&s->done);
	vmm_log_free(v);
}

/*
 * The device writes pages of 4 words and marks them; the VMM thread runs
 * a full sync (exchange, copy) at every point of the device's sequence:
 * after the writes, after the marks, and inside the flush before each
 * word's OR (the hook). Then a final sync, as after the device stopped.
 * The destination must hold every write: each bit the VMM cleared before
 * an OR comes back with the OR, after the data.
 */
START_TEST(vmm_clearing_during_flush_never_misses_a_write)
{
	struct vmm_sim s;
	struct vmm_log v;
	struct dirtylog *l;
	pthread_t t;

	vmm_sim_start(&s, &v, &t);
	l = map_ok(v.fd, v.len, 0);
	dirtylog_set_hook(l, hook_sync, &s);
	for (unsigned round = 1; round <= 20; round++) {
		for (unsigned p = round % 3; p < C_PAGES; p += 1 + round % 5) {
			__atomic_store_n(&s.src[p], (uint8_t)(round * 7 + p), __ATOMIC_RELAXED);
			if (p % 64 == 17)
				vmm_sync_now(&s); /* written, not yet marked */
			dirtylog_mark(l, (uint64_t)p * PG + round, 1);
			if (p % 64 == 33)
				vmm_sync_now(&s); /* marked, not yet flushed */
		}
		dirtylog_flush(l); /* a sync before each OR */
		vmm_sync_now(&s);
		for (unsigned p = 0; p < C_PAGES; p++)
			ck_assert_msg(s.dst[p] == s.src[p], "round %u: page %u stale at the destination",
				      round, p);
	}
	ck_assert_uint_gt(s.syncs, 20 * 4);
	dirtylog_set_hook(l, NULL, NULL);
	dirtylog_free(l);
	vmm_sim_stop(&s, &v, t);
}
END_TEST

/* The same protocol at random: the VMM syncs in a loop while the device
 * writes, marks and flushes (bounded: 200000 writes). */
static void *vmm_loop(void *arg)
{
	struct vmm_sim *s = arg;

	while (!__atomic_load_n(&s->quit, __ATOMIC_ACQUIRE))
		vmm_sync(s);
	return NULL;
}

START_TEST(vmm_clearing_concurrently_at_random)
{
	unsigned long seed = tu_seed("vmm_clearing_concurrently_at_random", 0xc1ea5ull);
	struct vmm_sim s;
	struct vmm_log v;
	struct dirtylog *l;
	pthread_t t;

	memset(&s, 0, sizeof(s));
	vmm_log_new(&v, C_PAGES / 8);
	s.log = (uint64_t *)(void *)v.p;
	l = map_ok(v.fd, v.len, 0);
	srandom((unsigned)seed);
	ck_assert_int_eq(pthread_create(&t, NULL, vmm_loop, &s), 0);
	for (unsigned i = 0; i < 200000; i++) {
		unsigned p = (unsigned)random() % C_PAGES;

		__atomic_store_n(&s.src[p], (uint8_t)(__atomic_load_n(&s.src[p], __ATOMIC_RELAXED) + 1),
				 __ATOMIC_RELAXED);
		dirtylog_mark(l, (uint64_t)p * PG, 1);
		if (random() % 16 == 0)
			dirtylog_flush(l);
	}
	dirtylog_flush(l);
	__atomic_store_n(&s.quit, 1, __ATOMIC_RELEASE);
	pthread_join(t, NULL);
	vmm_sync(&s); /* the final pass, after the device stopped */
	for (unsigned p = 0; p < C_PAGES; p++)
		ck_assert_msg(s.dst[p] == s.src[p], "page %u stale (seed %lu)", p, seed);
	dirtylog_free(l);
	vmm_log_free(&v);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("dirtylog");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, bits_exactly_where_vhost_puts_them);
	tcase_add_test(tc, random_ranges_match_the_model);
	tcase_add_test(tc, odd_size_odd_offset_no_byte_past_the_end);
	tcase_add_test(tc, hostile_ranges);
	tcase_add_test(tc, map_refuses_bad_logs);
	tcase_add_test(tc, full_cache_flushes_early);
	tcase_add_test(tc, vmm_clearing_during_flush_never_misses_a_write);
	tcase_add_test(tc, vmm_clearing_concurrently_at_random);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
