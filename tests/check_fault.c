/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * check_fault: the fault injection spec parser and hit counting
 * (common/fault.h). Built only with --enable-fault-injection; the
 * processes' use of it is covered by tests/lifecycle.sh, its absence from
 * production builds by tests/fault_absent.sh.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fault.h"

static char err[256];

START_TEST(fault_parse_valid)
{
	ck_assert_int_eq(fault_arm("worker.tx.send=fail", NULL, err, sizeof(err)), 0);
	ck_assert_int_eq(fault_arm("worker.tx.send=fail:28@3*2,worker.stop=delay:10,"
				   "sup.remove.reply=crash@5,worker.tx.after_pop=sigkill*0",
				   NULL, err, sizeof(err)), 0);
	ck_assert_int_eq(fault_arm("worker.tx.after_pop=violate@100",
				   NULL, err, sizeof(err)), 0);
	ck_assert_int_eq(fault_arm("", NULL, err, sizeof(err)), 0);
}
END_TEST

START_TEST(fault_parse_rejects)
{
	static const char *const bad[] = {
		"worker.tx.sned=fail",            /* typo: must not arm nothing silently */
		"worker.stop=fail",               /* no system call there */
		"worker.stop=delay",              /* delay needs MS */
		"worker.stop=delay:x",
		"worker.stop=delay:700000",
		"worker.stop=crash:3",
		"worker.stop=violate:1",
		"worker.stop=explode",
		"worker.stop=crash@0",
		"worker.stop=crash*2@3",
		"worker.stop",
		"worker.stop=crash,",
		",worker.stop=crash",
		"worker.tx.send=fail:0",
	};

	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		ck_assert_msg(fault_arm(bad[i], NULL, err, sizeof(err)) == -EINVAL, "accepted %s",
			      bad[i]);
		ck_assert_msg(err[0] != '\0', "no reason for %s", bad[i]);
	}
}
END_TEST

START_TEST(fault_nth_and_count)
{
	/* fail fires on hits 3 and 4 only, and returns the errno asked for. */
	ck_assert_int_eq(fault_arm("worker.tx.send=fail:28@3*2", NULL, err, sizeof(err)), 0);
	ck_assert_int_eq(FAULT_ERRNO("worker.tx.send"), 0);
	ck_assert_int_eq(FAULT_ERRNO("worker.tx.send"), 0);
	ck_assert_int_eq(FAULT_ERRNO("worker.tx.send"), 28);
	ck_assert_int_eq(FAULT_ERRNO("worker.tx.send"), 28);
	ck_assert_int_eq(FAULT_ERRNO("worker.tx.send"), 0);
	ck_assert_uint_eq(fault_fired("worker.tx.send"), 2);
	/* Another point is not counted. */
	ck_assert_int_eq(FAULT_ERRNO("sup.config.send"), 0);
	ck_assert_uint_eq(fault_fired("sup.config.send"), 0);
	/* *0: every hit from the 2nd on; default errno EIO. */
	ck_assert_int_eq(fault_arm("sup.config.send=fail@2*0", NULL, err, sizeof(err)), 0);
	ck_assert_int_eq(FAULT_ERRNO("sup.config.send"), 0);
	for (int i = 0; i < 50; i++)
		ck_assert_int_eq(FAULT_ERRNO("sup.config.send"), EIO);
}
END_TEST

static unsigned reports;
static char last_point[64];

static void report(const char *point, enum fault_action a, unsigned arg)
{
	reports++;
	snprintf(last_point, sizeof(last_point), "%s/%s/%u", point, fault_action_name(a), arg);
}

START_TEST(fault_prefix_and_report)
{
	char out[128];

	/* Arming with a prefix takes only that process's entries. */
	ck_assert_int_eq(fault_arm("worker.stop=delay:1,sup.config.send=fail", "sup.", err,
				   sizeof(err)), 0);
	fault_set_hooks(report, NULL);
	reports = 0;
	FAULT_POINT("worker.stop");
	ck_assert_uint_eq(reports, 0);
	ck_assert_int_eq(FAULT_ERRNO("sup.config.send"), EIO);
	ck_assert_uint_eq(reports, 1);
	ck_assert_str_eq(last_point, "sup.config.send/fail/5");
	ck_assert_int_eq(fault_filter("worker.stop=delay:1,sup.config.send=fail,worker.tx.send=fail",
				      "worker.", out, sizeof(out), err, sizeof(err)), 0);
	ck_assert_str_eq(out, "worker.stop=delay:1,worker.tx.send=fail");
	ck_assert_int_eq(fault_filter("sup.config.send=fail", "worker.", out, sizeof(out), err,
				      sizeof(err)), 0);
	ck_assert_str_eq(out, "");
	ck_assert_int_eq(fault_filter("worker.stop=delay:1", "worker.", out, 8, err, sizeof(err)),
			 -ENOSPC);
	fault_set_hooks(NULL, NULL);
}
END_TEST

START_TEST(fault_table_documented)
{
	/* Every point has a place and a purpose, and names are unique. */
	for (unsigned i = 0; i < fault_point_count(); i++) {
		const char *name = NULL, *where = NULL, *tests = NULL;
		int sys = -1;

		fault_point_info(i, &name, &where, &tests, &sys);
		ck_assert_ptr_nonnull(name);
		ck_assert_msg(!strncmp(name, "worker.", 7) || !strncmp(name, "sup.", 4),
			      "%s names no process", name);
		ck_assert_msg(where && where[0] && tests && tests[0], "%s undocumented", name);
		ck_assert(fault_point_known(name));
		for (unsigned j = 0; j < i; j++) {
			const char *o, *w, *t;
			int s;

			fault_point_info(j, &o, &w, &t, &s);
			ck_assert_str_ne(o, name);
		}
	}
	ck_assert(!fault_point_known("worker.nonexistent"));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("fault");
	TCase *tc = tcase_create("fault");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, fault_parse_valid);
	tcase_add_test(tc, fault_parse_rejects);
	tcase_add_test(tc, fault_nth_and_count);
	tcase_add_test(tc, fault_prefix_and_report);
	tcase_add_test(tc, fault_table_documented);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
