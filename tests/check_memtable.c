/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * check_memtable: the guest memory table (TESTPLAN C6, F1, F2, G7, G8).
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "memtable.h"
#include "testutil.h"

#define MiB (1024u * 1024u)

static char err[256];

/* One region per memfd, 1 MiB each, gpa given. */
static struct memtable_region_desc region(int fd, uint64_t gpa, uint64_t size, uint64_t offset)
{
	struct memtable_region_desc d = { .gpa = gpa, .size = size, .offset = offset, .fd = fd };
	return d;
}

START_TEST(valid_table_maps_and_translates)
{
	int fd = tu_memfd(MiB, true);
	struct memtable_region_desc d[2] = {
		region(fd, 0x100000, 0x80000, 0),
		region(fd, 0x0, 0x80000, 0x80000), /* given out of order */
	};
	struct memtable *mt = NULL;
	uint64_t len;
	uint8_t *p;

	ck_assert_int_eq(memtable_map(d, 2, &mt, err, sizeof(err)), 0);
	ck_assert_uint_eq(mt->n, 2);
	ck_assert_uint_eq(mt->r[0].gpa, 0); /* sorted by gpa */

	len = 16;
	p = memtable_translate(mt, 0x10, &len);
	ck_assert_ptr_nonnull(p);
	ck_assert_uint_eq(len, 16);
	/* gpa 0 is memfd offset 0x80000, gpa 0x100000 is memfd offset 0. */
	ck_assert_ptr_eq(memtable_translate(mt, 0x100000, &len), mt->r[1].hva);

	mt = memtable_free(mt);
	ck_assert_ptr_null(mt);
	close(fd);
}
END_TEST

START_TEST(translate_shortens_at_region_end)
{
	struct tu_guest g;
	uint64_t len = 100;

	tu_guest_new(&g, 0x1000, 4096);
	ck_assert_ptr_nonnull(memtable_translate(g.mt, 0x1000 + 4090, &len));
	ck_assert_uint_eq(len, 6);
	len = 1;
	ck_assert_ptr_null(memtable_translate(g.mt, 0x1000 + 4096, &len));
	len = 1;
	ck_assert_ptr_null(memtable_translate(g.mt, 0xfff, &len));
	len = 0;
	ck_assert_ptr_null(memtable_translate(g.mt, 0x1000, &len));
	/* translate_all demands the whole range in one region. */
	ck_assert_ptr_nonnull(memtable_translate_all(g.mt, 0x1000, 4096));
	ck_assert_ptr_null(memtable_translate_all(g.mt, 0x1000, 4097));
	ck_assert_ptr_null(memtable_translate_all(g.mt, UINT64_MAX - 1, 4));
	tu_guest_free(&g);
}
END_TEST

/* Two mappings of one memfd, as a VMM and a worker have: different
 * pointers, the same bytes. */
START_TEST(mapped_twice_at_different_addresses)
{
	struct tu_guest g;
	uint64_t len = 8;
	uint8_t *dev;

	tu_guest_new(&g, 0x40000000, 65536);
	dev = memtable_translate(g.mt, 0x40000000 + 100, &len);
	ck_assert_ptr_nonnull(dev);
	ck_assert_ptr_ne(dev, g.drv + 100);
	memcpy(g.drv + 100, "driver!", 8);
	ck_assert_mem_eq(dev, "driver!", 8);
	memcpy(dev, "device!", 8);
	ck_assert_mem_eq(g.drv + 100, "device!", 8);
	tu_guest_free(&g);
}
END_TEST

/* Single-byte regions: each byte of the buffer is its own region and
 * the iovec list has one entry per byte (G8). */
START_TEST(g8_single_byte_regions_scatter)
{
	struct tu_guest g;
	size_t ends[] = { 1, 2, 3, 4, 4096 };
	struct iovec iov[8];
	unsigned n = 0;
	uint8_t got[6];

	tu_guest_new(&g, 0x2000, 4096);
	tu_guest_split(&g, ends, 5);
	ck_assert_uint_eq(g.mt->n, 5);
	memcpy(g.drv, "abcdef", 6);
	ck_assert_int_eq(memtable_to_iov(g.mt, 0x2000, 6, iov, &n, 8), 0);
	ck_assert_uint_eq(n, 5);
	for (unsigned i = 0; i < 4; i++)
		ck_assert_uint_eq(iov[i].iov_len, 1);
	ck_assert_uint_eq(iov[4].iov_len, 2);
	for (unsigned i = 0, k = 0; i < n; i++)
		for (size_t j = 0; j < iov[i].iov_len; j++)
			got[k++] = ((uint8_t *)iov[i].iov_base)[j];
	ck_assert_mem_eq(got, "abcdef", 6);
	/* Not enough room for the scatter list: -ENOBUFS and n unchanged. */
	n = 0;
	ck_assert_int_eq(memtable_to_iov(g.mt, 0x2000, 6, iov, &n, 3), -ENOBUFS);
	ck_assert_uint_eq(n, 0);
	tu_guest_free(&g);
}
END_TEST

/* G7: ranges that leave guest memory, cross a hole, or wrap. */
START_TEST(g7_ranges_outside_memory)
{
	int fd = tu_memfd(2 * 4096, true);
	struct memtable_region_desc d[2] = {
		region(fd, 0x10000, 4096, 0),
		region(fd, 0x12000, 4096, 4096), /* hole at 0x11000 */
	};
	struct memtable *mt;
	struct iovec iov[4];
	unsigned n = 0;

	ck_assert_int_eq(memtable_map(d, 2, &mt, err, sizeof(err)), 0);
	ck_assert_int_eq(memtable_to_iov(mt, 0x10000 + 4000, 200, iov, &n, 4), -EFAULT);
	ck_assert_int_eq(memtable_to_iov(mt, 0x11000, 1, iov, &n, 4), -EFAULT);
	ck_assert_int_eq(memtable_to_iov(mt, 0x12000 + 4095, 2, iov, &n, 4), -EFAULT);
	ck_assert_int_eq(memtable_to_iov(mt, UINT64_MAX - 10, 100, iov, &n, 4), -EFAULT);
	ck_assert_int_eq(memtable_to_iov(mt, 0x10000, UINT64_MAX, iov, &n, 4), -EFAULT);
	ck_assert_uint_eq(n, 0);
	ck_assert_int_eq(memtable_to_iov(mt, 0x12000, 4096, iov, &n, 4), 0);
	ck_assert_uint_eq(n, 1);
	memtable_free(mt);
	close(fd);
}
END_TEST

/* Guard pages: a copy that ran past a region faults instead of reading
 * neighbouring memory. The test's own SIGSEGV handler exits with
 * GUARD_EXIT, so the result is the same under AddressSanitizer (which
 * would otherwise turn the fault into an abort). */
#define GUARD_EXIT 42

static void on_segv(int sig)
{
	(void)sig;
	_exit(GUARD_EXIT);
}

static void catch_segv(void)
{
	struct sigaction sa = { .sa_handler = on_segv };

	sigaction(SIGSEGV, &sa, NULL);
}

START_TEST(guard_page_after_region)
{
	struct tu_guest g;
	volatile uint8_t *p;
	uint64_t len = 4096;

	tu_guest_new(&g, 0, 4096);
	catch_segv();
	p = memtable_translate(g.mt, 0, &len);
	(void)p[4096]; /* must fault */
}
END_TEST

START_TEST(guard_page_before_region)
{
	struct tu_guest g;
	volatile uint8_t *p;
	uint64_t len = 1;

	tu_guest_new(&g, 0, 4096);
	catch_segv();
	p = memtable_translate(g.mt, 0, &len);
	(void)p[-1]; /* must fault */
}
END_TEST

/* Mappings are never executable: read the permissions the kernel shows. */
START_TEST(mapping_not_executable)
{
	struct tu_guest g;
	uint64_t len = 1;
	uintptr_t hva;
	char line[512];
	FILE *f;
	int found = 0;

	tu_guest_new(&g, 0, 65536);
	hva = (uintptr_t)memtable_translate(g.mt, 0, &len);
	f = fopen("/proc/self/maps", "r");
	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		char perms[5];

		if (sscanf(line, "%lx-%lx %4s", &lo, &hi, perms) != 3)
			continue;
		if (hva >= lo && hva < hi) {
			found = 1;
			ck_assert_str_eq(perms, "rw-s");
		}
	}
	fclose(f);
	ck_assert_int_eq(found, 1);
	tu_guest_free(&g);
}
END_TEST

/* C6: every malformed table is rejected with a reason, and maps nothing. */
static void expect_reject(struct memtable_region_desc *d, unsigned n, const char *needle)
{
	struct memtable *mt = (struct memtable *)0x1;

	err[0] = 0;
	ck_assert_int_lt(memtable_validate(d, n, err, sizeof(err)), 0);
	ck_assert_msg(strstr(err, needle), "error \"%s\" lacks \"%s\"", err, needle);
	ck_assert_int_lt(memtable_map(d, n, &mt, err, sizeof(err)), 0);
	ck_assert_ptr_eq(mt, (struct memtable *)0x1); /* untouched on failure */
}

START_TEST(c6_bad_tables_rejected)
{
	int fd = tu_memfd(MiB, true);
	struct memtable_region_desc d[2];

	d[0] = region(fd, 0, 0, 0);
	expect_reject(d, 1, "region 0: size is 0");
	expect_reject(d, 0, "empty");
	d[0] = region(fd, UINT64_MAX - 4095, 8192, 0);
	expect_reject(d, 1, "wraps");
	d[0] = region(fd, 0, 4096, UINT64_MAX - 100);
	expect_reject(d, 1, "overflows");
	d[0] = region(fd, 0, 4096, MiB - 4095);
	expect_reject(d, 1, "beyond the memfd's size");
	d[0] = region(fd, 0, MiB + 1, 0);
	expect_reject(d, 1, "beyond");
	/* Overlaps: identical, partial, and one containing the other. */
	d[0] = region(fd, 0x1000, 0x2000, 0);
	d[1] = region(fd, 0x2fff, 0x1000, 0);
	expect_reject(d, 2, "region 0 [0x1000, +0x2000) overlaps region 1");
	d[1] = region(fd, 0x1000, 0x10, 0x5000);
	expect_reject(d, 2, "overlaps");
	d[1] = region(fd, 0x0, 0x10000, 0x5000);
	expect_reject(d, 2, "overlaps");
	/* Adjacent is fine. */
	d[1] = region(fd, 0x3000, 0x1000, 0);
	ck_assert_int_eq(memtable_validate(d, 2, err, sizeof(err)), 0);
	close(fd);
}
END_TEST

/* F2: an unsealed memfd could be truncated under the worker. */
START_TEST(f2_unsealed_memfd_rejected)
{
	int fd = tu_memfd(MiB, false);
	struct memtable_region_desc d = region(fd, 0, 4096, 0);

	expect_reject(&d, 1, "not sealed against shrinking");
	ck_assert_int_eq(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
	ck_assert_int_eq(memtable_validate(&d, 1, err, sizeof(err)), 0);
	close(fd);
}
END_TEST

/* F1: fds that are not memfds. */
START_TEST(f1_wrong_fd_types_rejected)
{
	char path[] = "/tmp/vnic-memtable-XXXXXX";
	int file = mkstemp(path), zero = open("/dev/zero", O_RDWR), pipefd[2], sv[2];
	struct memtable_region_desc d;

	ck_assert_int_ge(file, 0);
	unlink(path);
	ck_assert_int_eq(ftruncate(file, MiB), 0);
	ck_assert_int_ge(zero, 0);
	ck_assert_int_eq(pipe(pipefd), 0);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);

	d = region(file, 0, 4096, 0);
	expect_reject(&d, 1, "not a memfd");
	d = region(zero, 0, 4096, 0);
	expect_reject(&d, 1, "not a memfd");
	d = region(pipefd[0], 0, 4096, 0);
	expect_reject(&d, 1, "not a memfd");
	d = region(sv[0], 0, 4096, 0);
	expect_reject(&d, 1, "not a memfd");
	d = region(-1, 0, 4096, 0);
	expect_reject(&d, 1, "not open");
	d = region(9999, 0, 4096, 0);
	expect_reject(&d, 1, "not open");
	close(file);
	close(zero);
	close(pipefd[0]);
	close(pipefd[1]);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

/* The limit, and O(log n) lookup over it. */
START_TEST(max_regions)
{
	const unsigned n = MEMTABLE_MAX_REGIONS;
	int fd = tu_memfd((size_t)(n + 1) * 4096, true);
	struct memtable_region_desc *d = calloc(n + 1, sizeof(*d));
	struct memtable *mt;

	for (unsigned i = 0; i <= n; i++)
		d[i] = region(fd, (uint64_t)i * 0x100000, 4096, (uint64_t)i * 4096);
	expect_reject(d, n + 1, "at most 509");
	ck_assert_int_eq(memtable_map(d, n, &mt, err, sizeof(err)), 0);
	ck_assert_uint_eq(mt->n, n);
	for (unsigned i = 0; i < n; i++) {
		uint64_t len = 4096;
		uint8_t *p = memtable_translate(mt, (uint64_t)i * 0x100000, &len);

		ck_assert_ptr_eq(p, mt->r[i].hva);
		ck_assert_uint_eq(len, 4096);
		len = 1;
		ck_assert_ptr_null(memtable_translate(mt, (uint64_t)i * 0x100000 + 4096, &len));
	}
	memtable_free(mt);
	free(d);
	close(fd);
}
END_TEST

/* Unaligned memfd offsets are mapped from the page below. */
START_TEST(unaligned_offset)
{
	struct tu_guest g;
	size_t ends[] = { 3, 4096 };
	uint64_t len = 4;
	uint8_t *p;

	tu_guest_new(&g, 0x5000, 4096);
	tu_guest_split(&g, ends, 2);
	memcpy(g.drv + 3, "XYZW", 4);
	p = memtable_translate(g.mt, 0x5003, &len);
	ck_assert_ptr_nonnull(p);
	ck_assert_mem_eq(p, "XYZW", 4);
	tu_guest_free(&g);
}
END_TEST

/* memtable_gpa_of: the reverse of memtable_to_iov, iovec by iovec, over
 * single-byte regions and the region cache; a host range no one region
 * maps is refused. */
START_TEST(gpa_of_reverses_to_iov)
{
	const size_t ends[] = { 1, 2, 3, 4096 };
	struct tu_guest g;
	struct iovec iov[8];
	unsigned n = 0;
	uint64_t gpa = 0, want = 0x7000;
	uint8_t *last;

	tu_guest_new(&g, 0x7000, 4096);
	tu_guest_split(&g, ends, 4);
	ck_assert_int_eq(memtable_to_iov(g.mt, 0x7000, 100, iov, &n, 8), 0);
	ck_assert_uint_eq(n, 4);
	for (unsigned i = 0; i < n; i++) {
		ck_assert_int_eq(memtable_gpa_of(g.mt, iov[i].iov_base, iov[i].iov_len, &gpa), 0);
		ck_assert_uint_eq(gpa, want);
		want += iov[i].iov_len;
	}
	/* Two regions' bytes in one range, the byte past the last region,
	 * the driver's own mapping: no one region maps them. */
	ck_assert_int_eq(memtable_gpa_of(g.mt, iov[0].iov_base, 2, &gpa), -EFAULT);
	last = (uint8_t *)iov[3].iov_base + 4092; /* region 3 is bytes 3..4095 */
	ck_assert_int_eq(memtable_gpa_of(g.mt, last, 1, &gpa), 0);
	ck_assert_uint_eq(gpa, 0x7000 + 4095);
	ck_assert_int_eq(memtable_gpa_of(g.mt, last, 2, &gpa), -EFAULT);
	ck_assert_int_eq(memtable_gpa_of(g.mt, g.drv, 1, &gpa), -EFAULT);
	tu_guest_free(&g);
}
END_TEST

static Suite *memtable_suite(void)
{
	Suite *s = suite_create("memtable");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, valid_table_maps_and_translates);
	tcase_add_test(tc, translate_shortens_at_region_end);
	tcase_add_test(tc, mapped_twice_at_different_addresses);
	tcase_add_test(tc, g8_single_byte_regions_scatter);
	tcase_add_test(tc, g7_ranges_outside_memory);
	tcase_add_exit_test(tc, guard_page_after_region, GUARD_EXIT);
	tcase_add_exit_test(tc, guard_page_before_region, GUARD_EXIT);
	tcase_add_test(tc, mapping_not_executable);
	tcase_add_test(tc, c6_bad_tables_rejected);
	tcase_add_test(tc, f2_unsealed_memfd_rejected);
	tcase_add_test(tc, f1_wrong_fd_types_rejected);
	tcase_add_test(tc, max_regions);
	tcase_add_test(tc, unaligned_offset);
	tcase_add_test(tc, gpa_of_reverses_to_iov);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(memtable_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
