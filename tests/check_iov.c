/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * check_iov: bounded copies across many short iovecs (TESTPLAN G14's
 * building block: a header split over 1-byte buffers).
 */
#include "config.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "iov.h"

/* A 12-byte message split into 1-byte entries, then the rest. */
static uint8_t backing[64];
static struct iovec split[13];

static void setup(void)
{
	for (unsigned i = 0; i < sizeof(backing); i++)
		backing[i] = (uint8_t)i;
	for (unsigned i = 0; i < 12; i++) {
		split[i].iov_base = &backing[i];
		split[i].iov_len = 1;
	}
	split[12].iov_base = &backing[12];
	split[12].iov_len = sizeof(backing) - 12;
}

START_TEST(size_sums_entries)
{
	ck_assert_uint_eq(iov_size(split, 13), sizeof(backing));
	ck_assert_uint_eq(iov_size(split, 0), 0);
}
END_TEST

START_TEST(to_buf_across_single_bytes)
{
	uint8_t out[20];

	ck_assert_uint_eq(iov_to_buf(split, 13, 0, out, 12), 12);
	for (unsigned i = 0; i < 12; i++)
		ck_assert_uint_eq(out[i], i);
	/* From an offset in the middle of the single bytes, into the tail. */
	ck_assert_uint_eq(iov_to_buf(split, 13, 10, out, 5), 5);
	for (unsigned i = 0; i < 5; i++)
		ck_assert_uint_eq(out[i], 10 + i);
}
END_TEST

START_TEST(to_buf_stops_at_end)
{
	uint8_t out[100];

	ck_assert_uint_eq(iov_to_buf(split, 13, 60, out, sizeof(out)), 4);
	ck_assert_uint_eq(iov_to_buf(split, 13, 64, out, sizeof(out)), 0);
	ck_assert_uint_eq(iov_to_buf(split, 13, 1000, out, sizeof(out)), 0);
}
END_TEST

START_TEST(from_buf_bounded)
{
	uint8_t in[100];

	memset(in, 0xaa, sizeof(in));
	ck_assert_uint_eq(iov_from_buf(split, 13, 5, in, sizeof(in)), sizeof(backing) - 5);
	ck_assert_uint_eq(backing[4], 4);
	ck_assert_uint_eq(backing[5], 0xaa);
	ck_assert_uint_eq(backing[63], 0xaa);
}
END_TEST

START_TEST(slice_skips_header)
{
	struct iovec dst[16];
	size_t got;
	unsigned n;

	/* Skip a 10-byte header that is split across single bytes. */
	n = iov_slice(split, 13, 10, 1000, dst, 16, &got);
	ck_assert_uint_eq(n, 3);
	ck_assert_uint_eq(got, sizeof(backing) - 10);
	ck_assert_ptr_eq(dst[0].iov_base, &backing[10]);
	ck_assert_uint_eq(iov_size(dst, n), got);
	/* Bounded by max entries. */
	n = iov_slice(split, 13, 0, 1000, dst, 4, &got);
	ck_assert_uint_eq(n, 4);
	ck_assert_uint_eq(got, 4);
	/* Zero-length entries are not copied into the slice. */
	split[3].iov_len = 0;
	n = iov_slice(split, 13, 0, 6, dst, 16, &got);
	ck_assert_uint_eq(got, 6);
	for (unsigned i = 0; i < n; i++)
		ck_assert_uint_ne(dst[i].iov_len, 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("iov");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, size_sums_entries);
	tcase_add_test(tc, to_buf_across_single_bytes);
	tcase_add_test(tc, to_buf_stops_at_end);
	tcase_add_test(tc, from_buf_bounded);
	tcase_add_test(tc, slice_skips_header);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
