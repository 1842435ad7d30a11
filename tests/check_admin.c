/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * check_admin: administration pieces of vnicd (issue 10) that need a
 * real vnicd but no root:
 *  - log rate limits are per NIC: while NIC "noisy"'s worker floods Log
 *    lines, NIC "quiet"'s one line still reaches vnicd's log, and the
 *    flood itself is cut to the per-NIC burst;
 *  - --uid-range parsing (FIRST-LAST, FIRST:COUNT, the refusals).
 * The workers are scripts that speak the worker protocol with printf.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "suptest.h"
#include "uidrange.h"

/* Ready (WorkerMessage field 10, empty); Log (field 13) at WARN with
 * text "flood" and "quiet line", each a framed message for fd 3. */
#define SH_READY "printf '\\000\\000\\000\\002\\122\\000' >&3"
#define SH_LOG_FLOOD "printf '\\000\\000\\000\\013\\152\\011\\010\\002\\022\\005flood' >&3"
#define SH_LOG_QUIET "printf '\\000\\000\\000\\020\\152\\016\\010\\002\\022\\012quiet line' >&3"
#define FLOOD_LINES 400

static unsigned count_lines(const char *path, const char *needle)
{
	char line[2048];
	unsigned n = 0;
	FILE *f = fopen(path, "r");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (strstr(line, needle))
			n++;
	fclose(f);
	return n;
}

START_TEST(ratelimit_per_nic)
{
	char dir[] = "/tmp/check_admin.XXXXXX", script[128];
	struct vnicd_proc vd;
	struct vnic_conn *c;
	struct st_guest a, b;
	unsigned flood = 0, quiet = 0;
	FILE *f;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	chmod(dir, 0755);
	snprintf(script, sizeof(script), "%s/w.sh", dir);
	f = fopen(script, "w");
	ck_assert_ptr_nonnull(f);
	/* $2 is the NIC id (vnicd-worker --nic ID ...). The noisy NIC floods
	 * at once; the quiet one speaks once, after the flood. */
	fprintf(f, "#!/bin/sh\n" SH_READY "\n"
		"if [ \"$2\" = noisy ]; then i=0; while [ $i -lt %d ]; do " SH_LOG_FLOOD
		"; i=$((i + 1)); done; exec sleep 60; fi\n"
		"sleep 0.5; " SH_LOG_QUIET "; exec sleep 60\n", FLOOD_LINES);
	fclose(f);
	ck_assert_int_eq(chmod(script, 0755), 0);

	st_vnicd_start(&vd, script, NULL);
	c = st_connect(&vd);
	st_guest_init(&a, "noisy");
	st_guest_init(&b, "quiet");
	st_add_ok(c, &a);
	st_add_ok(c, &b);
	for (int i = 0; i < 50 && !quiet; i++) {
		nanosleep(&(struct timespec){ .tv_nsec = 100 * 1000 * 1000 }, NULL);
		quiet = count_lines(vd.log, "nic quiet worker: quiet line");
	}
	flood = count_lines(vd.log, "nic noisy worker: flood");
	vnic_close(c);
	st_vnicd_stop(&vd);
	st_guest_free(&a);
	st_guest_free(&b);
	/* B's line is there although A sent 400 lines just before it; A's
	 * are cut to its own bucket (and some did get through). */
	ck_assert_msg(quiet == 1, "the quiet NIC's line is missing (noisy: %u lines)", flood);
	ck_assert_msg(flood > 0 && flood <= 50, "noisy NIC: %u of %d lines logged", flood,
		      FLOOD_LINES);
	unlink(script);
	st_rmdir(vd.dir);
	rmdir(dir);
}
END_TEST

START_TEST(uid_range_parse)
{
	uint32_t first = 0, count = 0;
	char err[256];

	ck_assert_int_eq(uidrange_parse("100000-100009", &first, &count, err, sizeof(err)), 0);
	ck_assert_uint_eq(first, 100000);
	ck_assert_uint_eq(count, 10);
	ck_assert_int_eq(uidrange_parse("1879048192:65536", &first, &count, err, sizeof(err)), 0);
	ck_assert_uint_eq(first, 1879048192u);
	ck_assert_uint_eq(count, 65536);
	ck_assert_int_eq(uidrange_parse("5:1", &first, &count, err, sizeof(err)), 0);
	ck_assert_uint_eq(count, 1);
	/* uid 0, (uid_t)-1, empty, reversed, junk, too many. */
	ck_assert_int_lt(uidrange_parse("0-9", &first, &count, err, sizeof(err)), 0);
	ck_assert_int_lt(uidrange_parse("4294967290:6", &first, &count, err, sizeof(err)), 0);
	ck_assert_int_lt(uidrange_parse("10:0", &first, &count, err, sizeof(err)), 0);
	ck_assert_int_lt(uidrange_parse("20-10", &first, &count, err, sizeof(err)), 0);
	ck_assert(strstr(err, "LAST is below FIRST"));
	ck_assert_int_lt(uidrange_parse("10-", &first, &count, err, sizeof(err)), 0);
	ck_assert_int_lt(uidrange_parse("-5-10", &first, &count, err, sizeof(err)), 0);
	ck_assert_int_lt(uidrange_parse("10:5x", &first, &count, err, sizeof(err)), 0);
	ck_assert_int_lt(uidrange_parse("1:2000000", &first, &count, err, sizeof(err)), 0);
}
END_TEST

START_TEST(uid_range_alloc)
{
	struct uidrange r;
	uint32_t a, b, c;
	char err[256];

	/* Overlaps: root's uid 0 cannot be in a valid range, but nobody's can. */
	ck_assert_int_eq(uidrange_init(&r, 65534, 1, err, sizeof(err)), -EEXIST);
	ck_assert_int_eq(uidrange_init(&r, 1879048192u, 2, err, sizeof(err)), 0);
	ck_assert_int_eq(uidrange_alloc(&r, &a), 0);
	ck_assert_int_eq(uidrange_alloc(&r, &b), 0);
	ck_assert_uint_ne(a, b);
	ck_assert_int_eq(uidrange_alloc(&r, &c), -ENOSPC);
	uidrange_free(&r, a);
	uidrange_free(&r, a); /* twice: no effect */
	uidrange_free(&r, 7); /* outside: ignored */
	ck_assert_int_eq(uidrange_alloc(&r, &c), 0);
	ck_assert_uint_eq(c, a);
	ck_assert_int_eq(uidrange_alloc(&r, &c), -ENOSPC);
	uidrange_fini(&r);
}
END_TEST

static Suite *admin_suite(void)
{
	Suite *s = suite_create("admin");
	TCase *tc = tcase_create("admin");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, ratelimit_per_nic);
	tcase_add_test(tc, uid_range_parse);
	tcase_add_test(tc, uid_range_alloc);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(admin_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
