/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * check_tap: the supervisor's multi-queue taps (supervisor/tap.c, issue
 * 15), on real tap devices in a private network namespace: one queue fd per
 * pair, more queues later, a queue taken out of the kernel's steering and
 * put back, and a persistent single-queue tap left by an older vnicd made
 * again as a multi-queue one (but never one that is in use). What the
 * kernel says of each tap is read with `ip -d link` (numqueues,
 * numdisabled, multi_queue).
 *
 * Needs root, /dev/net/tun and `ip netns` (else 77).
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "tap.h"
#include "testutil.h"

static char netns[64];

static bool have_prereqs(void)
{
	return geteuid() == 0 && access("/dev/net/tun", R_OK | W_OK) == 0 &&
	       system("ip netns list >/dev/null 2>&1") == 0;
}

static void setup(void)
{
	tu_netns_add(netns, sizeof(netns));
}

static void teardown(void)
{
	ck_assert_int_eq(tu_netns_del(netns), 0);
}

/* `ip -d link show NAME` in our namespace: the kernel's view of the tap. */
static void link_info(const char *name, char *buf, size_t len)
{
	char cmd[200];
	size_t n;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "ip -n %s -d link show %s 2>&1", netns, name);
	p = popen(cmd, "r");
	ck_assert_ptr_nonnull(p);
	n = fread(buf, 1, len - 1, p);
	buf[n] = '\0';
	pclose(p);
}

static void expect_link(const char *name, const char *has)
{
	char info[4096];

	link_info(name, info, sizeof(info));
	ck_assert_msg(strstr(info, has), "tap %s: \"%s\" not in: %s", name, has, info);
}

static void close_all(int *fds, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		close(fds[i]);
}

START_TEST(t_queues)
{
	int fds[4], more;
	char name[16], err[256];
	bool recreated = true;

	if (!have_prereqs())
		return;
	ck_assert_int_eq(tap_open_queues("vnq0", netns, 0, 3, fds, name, &recreated, err,
					 sizeof(err)), 0);
	ck_assert_str_eq(name, "vnq0");
	ck_assert(!recreated);
	expect_link("vnq0", "multi_queue numqueues 3 numdisabled 0");
	expect_link("vnq0", ",UP"); /* set up */
	/* A queue out of the steering and back (a pair disabled, enabled). */
	ck_assert_int_eq(tap_queue_attach(fds[1], false), 0);
	expect_link("vnq0", "numqueues 2 numdisabled 1");
	ck_assert_int_eq(tap_queue_attach(fds[1], true), 0);
	expect_link("vnq0", "numqueues 3 numdisabled 0");
	/* One more queue later (a front end that asks for another pair). */
	ck_assert_int_eq(tap_open_queues("vnq0", netns, 0, 1, &more, name, NULL, err,
					 sizeof(err)), 0);
	expect_link("vnq0", "numqueues 4");
	/* Bounds. */
	ck_assert_int_eq(tap_open_queues("vnq0", netns, 0, 0, fds, name, NULL, err, sizeof(err)),
			 -EINVAL);
	ck_assert_int_eq(tap_open_queues("vnq0", netns, 0, TAP_MAX_QUEUES + 1, fds, name, NULL,
					 err, sizeof(err)), -EINVAL);
	close(more);
	close_all(fds, 3);
}
END_TEST

/* A persistent single-queue tap (an older vnicd's endpoint) is deleted and
 * made again with IFF_MULTI_QUEUE; one that some process holds is not
 * touched: the open fails and the holder keeps its tap. */
START_TEST(t_recreate_single)
{
	int old, fds[2];
	char name[16], err[256];
	bool recreated = false;

	if (!have_prereqs())
		return;
	ck_assert_int_eq(tap_open("vnq1", netns, 0, &old, name, err, sizeof(err)), 0);
	ck_assert_int_eq(tap_set_persist(old, true), 0);
	/* Held: refused, left alone. */
	ck_assert_int_lt(tap_open_queues("vnq1", netns, 0, 2, fds, name, &recreated, err,
					 sizeof(err)), 0);
	ck_assert(!recreated);
	ck_assert_msg(strstr(err, "multi-queue"), "error names the flag: %s", err);
	expect_link("vnq1", "persist on");
	{
		struct ifreq ifr;

		memset(&ifr, 0, sizeof(ifr));
		ck_assert_int_eq(ioctl(old, TUNGETIFF, &ifr), 0); /* still attached */
		ck_assert_str_eq(ifr.ifr_name, "vnq1");
	}
	/* Let go (persistent, no fd): without leave to recreate it (a tap
	 * vnicd does not own), refused and left; with it, made again. */
	close(old);
	ck_assert_int_lt(tap_open_queues("vnq1", netns, 0, 2, fds, name, NULL, err, sizeof(err)),
			 0);
	expect_link("vnq1", "persist on");
	ck_assert_int_eq(tap_open_queues("vnq1", netns, 0, 2, fds, name, &recreated, err,
					 sizeof(err)), 0);
	ck_assert(recreated);
	expect_link("vnq1", "multi_queue numqueues 2");
	expect_link("vnq1", "persist off");
	close_all(fds, 2);
}
END_TEST

static Suite *tap_suite(void)
{
	Suite *s = suite_create("tap");
	TCase *t = tcase_create("multiqueue");

	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t, 30);
	tcase_add_test(t, t_queues);
	tcase_add_test(t, t_recreate_single);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	SRunner *sr;
	int failed;

	if (!have_prereqs()) {
		fprintf(stderr, "check_tap: SKIP: needs root, /dev/net/tun and ip netns\n");
		return 77;
	}
	tu_netns_init("vnictap"); /* this run's namespaces only, for the sweep */
	sr = srunner_create(tap_suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	tu_netns_sweep();
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
