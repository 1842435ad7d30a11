/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * check_frames: vnic-bench's frame builder and checker. The end-to-end
 * tests trust it to find every lost, wrong or misplaced byte, so here it
 * must accept what it built and refuse every kind of damage.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tools/frames.h"

static const uint8_t host_mac[6] = { 0x02, 0x00, 0x00, 0x00, 0x00, 0x01 };
static uint8_t *buf;
static char err[256];

static void setup(void)
{
	buf = malloc(FRAMES_MAX);
	ck_assert_ptr_nonnull(buf);
}

static void teardown(void)
{
	free(buf);
}

START_TEST(size_stays_in_range_and_hits_edges)
{
	bool min = false, max = false, rxbuf = false;

	for (uint64_t seq = 0; seq < 20000; seq++) {
		uint32_t s = frames_size(1, FRAMES_G2H, seq, 0, FRAMES_MAX);

		ck_assert_uint_ge(s, FRAMES_MIN);
		ck_assert_uint_le(s, FRAMES_MAX);
		min |= s == FRAMES_MIN;
		max |= s == FRAMES_MAX;
		rxbuf |= s == 4084;
		ck_assert_uint_le(frames_size(1, FRAMES_G2H, seq, 0, FRAMES_TAP_MAX), FRAMES_TAP_MAX);
	}
	ck_assert(min && max && rxbuf);
	ck_assert_uint_eq(frames_size(3, FRAMES_H2G, 77, 1024, FRAMES_MAX), 1024);
	/* Both ends compute the same size from (nic, dir, seq). */
	ck_assert_uint_eq(frames_size(2, FRAMES_H2G, 5, 0, FRAMES_MAX),
			  frames_size(2, FRAMES_H2G, 5, 0, FRAMES_MAX));
}
END_TEST

START_TEST(built_frames_check_out)
{
	for (uint64_t seq = 0; seq < 300; seq++)
		for (unsigned dir = 0; dir < 2; dir++) {
			uint32_t len = frames_size(4, dir, seq, 0, FRAMES_MAX);
			uint64_t got = ~0ull;

			frames_build(buf, len, 4, dir, seq, host_mac);
			ck_assert_int_eq(frames_check(buf, len, 4, dir, 0, FRAMES_MAX, host_mac, true,
						      &got, err, sizeof(err)), 0);
			ck_assert_uint_eq(got, seq);
			got = ~0ull;
			ck_assert_int_eq(frames_check_payload(buf + FRAMES_HDRS, len - FRAMES_HDRS, 4,
							      dir, 0, FRAMES_MAX, &got, err,
							      sizeof(err)), 0);
			ck_assert_uint_eq(got, seq);
		}
}
END_TEST

/* Flip one bit at positions all over the frame (headers, tag, pattern,
 * the last byte): every flip is refused, none passes as another frame. */
START_TEST(any_flipped_bit_is_refused)
{
	const uint32_t len = 9001;
	uint64_t got;

	frames_build(buf, len, 1, FRAMES_G2H, 42, host_mac);
	for (uint32_t pos = 0; pos < len; pos += (pos < 100 ? 1 : 97)) {
		int rc;

		buf[pos] ^= 0x10;
		rc = frames_check(buf, len, 1, FRAMES_G2H, len, FRAMES_MAX, host_mac, true, &got, err,
				  sizeof(err));
		/* Damage to the type/protocol/port makes it "not ours"
		 * (-ENOMSG), which the callers also count as a failure. */
		ck_assert_msg(rc == -EBADMSG || rc == -ENOMSG, "flip at %u accepted", pos);
		buf[pos] ^= 0x10;
	}
	ck_assert_int_eq(frames_check(buf, len, 1, FRAMES_G2H, len, FRAMES_MAX, host_mac, true, &got,
				      err, sizeof(err)), 0);
	/* The very last byte too (the loop's stride may miss it). */
	buf[len - 1] ^= 1;
	ck_assert_int_eq(frames_check(buf, len, 1, FRAMES_G2H, len, FRAMES_MAX, host_mac, true, &got,
				      err, sizeof(err)), -EBADMSG);
}
END_TEST

START_TEST(truncated_or_foreign_frames_are_refused)
{
	uint32_t len = frames_size(0, FRAMES_H2G, 9, 0, FRAMES_MAX);
	uint64_t got;

	frames_build(buf, len, 0, FRAMES_H2G, 9, host_mac);
	/* One byte short: IP length and the seq's size disagree. */
	ck_assert_int_eq(frames_check(buf, len - 1, 0, FRAMES_H2G, 0, FRAMES_MAX, host_mac, true,
				      &got, err, sizeof(err)), -EBADMSG);
	/* A payload cut short. */
	ck_assert_int_eq(frames_check_payload(buf + FRAMES_HDRS, len - FRAMES_HDRS - 1, 0,
					      FRAMES_H2G, 0, FRAMES_MAX, &got, err, sizeof(err)),
			 -EBADMSG);
	/* Another NIC's, or the other direction's, frame. */
	ck_assert_int_ne(frames_check(buf, len, 1, FRAMES_H2G, 0, FRAMES_MAX, host_mac, true, &got,
				      err, sizeof(err)), 0);
	ck_assert_int_ne(frames_check(buf, len, 0, FRAMES_G2H, 0, FRAMES_MAX, host_mac, true, &got,
				      err, sizeof(err)), 0);
	/* A frame of the right length but the next seq's content. */
	frames_build(buf, 1000, 0, FRAMES_H2G, 10, host_mac);
	memcpy(buf + FRAMES_HDRS + 8, &(uint64_t){ 11 }, 8);
	ck_assert_int_eq(frames_check(buf, 1000, 0, FRAMES_H2G, 1000, FRAMES_MAX, host_mac, true,
				      &got, err, sizeof(err)), -EBADMSG);
	/* An IPv6 frame from the kernel: not ours, ignored by the guest. */
	memset(buf, 0, 100);
	buf[12] = 0x86;
	buf[13] = 0xdd;
	ck_assert_int_eq(frames_check(buf, 100, 0, FRAMES_H2G, 0, FRAMES_MAX, host_mac, true, &got,
				      err, sizeof(err)), -ENOMSG);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("frames");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, size_stays_in_range_and_hits_edges);
	tcase_add_test(tc, built_frames_check_out);
	tcase_add_test(tc, any_flipped_bit_is_refused);
	tcase_add_test(tc, truncated_or_foreign_frames_are_refused);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
