/*
 * check_addnic: every AddNic REJECT case against a real vnicd over its
 * socket, through libvnic (TESTPLAN C4, C5, C6, C7, C9, C10, F1, F2).
 *
 * Each test asserts (1) the reply's status and reason, (2) that state is
 * unchanged (status shows no NIC) and (3) that the supervisor holds
 * exactly the fds it held before the request (every fd of the rejected
 * frame was closed). No worker is ever started: a valid request would
 * reach /bin/false, so nothing here depends on the worker being built.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "suptest.h"

static struct vnicd_proc vd;
static struct vnic_conn *conn;
static struct st_guest g;
static int fds_before;

static void setup(void)
{
	st_vnicd_start(&vd, "/bin/false", NULL);
	conn = st_connect(&vd);
	st_guest_init(&g, "nic0");
	fds_before = st_fd_count(vd.pid);
	ck_assert_int_gt(fds_before, 0);
}

static void teardown(void)
{
	st_guest_free(&g);
	vnic_close(conn);
	ck_assert_int_eq(st_vnicd_stop(&vd), 0);
}

/* Send g.cfg; expect @code and @needle in the reason; state unchanged;
 * the supervisor's fd count back to what it was. */
static void expect_reject(int code, const char *needle)
{
	char err[512] = "";
	int rc = vnic_add_nic(conn, &g.cfg, err, sizeof(err));

	ck_assert_msg(rc == code, "AddNic returned %d (want %d): %s", rc, code, err);
	ck_assert_msg(strstr(err, needle), "reason \"%s\" lacks \"%s\"", err, needle);
	ck_assert_int_eq(st_nic_count(conn), 0);
	ck_assert_int_eq(st_fd_count(vd.pid), fds_before);
}

/* ------------------------------------------------------------- C4 */

START_TEST(c4_queue_index_out_of_range)
{
	g.q[1].index = 2;
	expect_reject(VNIC_STATUS_INVALID_ARGUMENT, "queue index 2 is out of range");
}
END_TEST

START_TEST(c4_queue_index_low16_valid)
{
	/* 0x10001: the low 16 bits name tx0; the whole u32 does not. */
	g.q[1].index = 0x10001;
	expect_reject(VNIC_STATUS_INVALID_ARGUMENT, "queue index 65537 is out of range");
}
END_TEST

START_TEST(c4_queue_index_negative)
{
	g.q[0].index = (uint32_t)-1;
	expect_reject(VNIC_STATUS_INVALID_ARGUMENT, "out of range");
}
END_TEST

START_TEST(c4_queue_index_twice)
{
	g.q[1].index = 0;
	expect_reject(VNIC_STATUS_INVALID_ARGUMENT, "queue index 0 given twice");
}
END_TEST

START_TEST(c4_queue_count)
{
	g.cfg.nqueues = 1;
	expect_reject(VNIC_STATUS_INVALID_ARGUMENT, "exactly 2");
	g.q[2] = g.q[1];
	g.q[2].index = 2;
	g.cfg.nqueues = 3;
	expect_reject(VNIC_STATUS_INVALID_ARGUMENT, "exactly 2");
}
END_TEST

/* ------------------------------------------------------------- C5 */

START_TEST(c5_queue_size)
{
	static const uint32_t bad[] = { 0, 3, 255, 65536, 0x80000000u };

	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		g.q[0].size = bad[i];
		expect_reject(VNIC_STATUS_INVALID_ARGUMENT, "not a power of 2 in 1..32768");
	}
}
END_TEST

/* ------------------------------------------------------------- C6 */

START_TEST(c6_region_size_zero)
{
	g.reg[0].size = 0;
	expect_reject(VNIC_STATUS_INVALID_ARGUMENT, "memory table");
}
END_TEST

START_TEST(c6_region_gpa_wraps)
{
	g.reg[0].gpa = UINT64_MAX - 0x1000;
	expect_reject(VNIC_STATUS_INVALID_ARGUMENT, "memory table");
}
END_TEST

START_TEST(c6_region_beyond_memfd)
{
	g.reg[0].offset = 4096; /* offset + size > st_size */
	expect_reject(VNIC_STATUS_INVALID_ARGUMENT, "memory table");
}
END_TEST

START_TEST(c6_regions_overlap)
{
	g.reg[0].size = ST_MEM_SIZE / 2;
	g.reg[1] = (struct vnic_region){ .gpa = ST_GPA_BASE + ST_MEM_SIZE / 4,
					 .size = ST_MEM_SIZE / 2, .offset = ST_MEM_SIZE / 2,
					 .fd = g.memfd };
	g.cfg.nregions = 2;
	expect_reject(VNIC_STATUS_INVALID_ARGUMENT, "memory table");
}
END_TEST

START_TEST(c6_no_regions)
{
	g.cfg.nregions = 0;
	expect_reject(VNIC_STATUS_INVALID_ARGUMENT, "memory table");
}
END_TEST

/* ------------------------------------------------------------- C7 */

START_TEST(c7_desc_misaligned)
{
	g.q[0].desc_gpa += 8;
	expect_reject(VNIC_STATUS_INVALID_ARGUMENT, "descriptor table at 0x100008 is not 16-byte aligned");
}
END_TEST

START_TEST(c7_avail_misaligned)
{
	g.q[1].avail_gpa += 1;
	expect_reject(VNIC_STATUS_INVALID_ARGUMENT, "avail ring");
}
END_TEST

START_TEST(c7_used_misaligned)
{
	g.q[0].used_gpa += 2;
	expect_reject(VNIC_STATUS_INVALID_ARGUMENT, "used ring");
}
END_TEST

START_TEST(c7_ring_outside_memory)
{
	g.q[0].desc_gpa = ST_GPA_BASE + ST_MEM_SIZE - 0x800; /* straddles the end */
	expect_reject(VNIC_STATUS_INVALID_ARGUMENT, "not wholly inside one memory region");
	g.q[0].desc_gpa = 0; /* below the region */
	expect_reject(VNIC_STATUS_INVALID_ARGUMENT, "not wholly inside one memory region");
}
END_TEST

START_TEST(c7_ring_spans_two_regions)
{
	/* Two adjacent regions; the used ring crosses their boundary. */
	g.reg[0].size = 0x2000 + 0x400;
	g.reg[1] = (struct vnic_region){ .gpa = ST_GPA_BASE + 0x2400,
					 .size = ST_MEM_SIZE - 0x2400, .offset = 0x2400,
					 .fd = g.memfd };
	g.cfg.nregions = 2;
	expect_reject(VNIC_STATUS_INVALID_ARGUMENT, "used ring");
}
END_TEST

START_TEST(c7_ring_wraps)
{
	g.q[0].used_gpa = UINT64_MAX - 3; /* 4-aligned; + size wraps */
	expect_reject(VNIC_STATUS_INVALID_ARGUMENT, "wraps");
}
END_TEST

START_TEST(c7_rings_overlap)
{
	g.q[0].avail_gpa = g.q[0].desc_gpa + 0x800; /* inside the 4 KiB table */
	expect_reject(VNIC_STATUS_INVALID_ARGUMENT, "overlap");
}
END_TEST

/* ------------------------------------------------------------- C9 */

START_TEST(c9_feature_never_offered)
{
	/* VIRTIO_NET_F_CTRL_VQ (17): vnicd does not offer it. */
	g.cfg.features_offered |= 1ull << 17;
	g.cfg.features_acked |= 1ull << 17;
	expect_reject(VNIC_STATUS_INVALID_ARGUMENT, "were not offered");
}
END_TEST

START_TEST(c9_acked_not_subset_of_offered)
{
	g.cfg.features_offered &= ~VNIC_F_EVENT_IDX;
	expect_reject(VNIC_STATUS_INVALID_ARGUMENT, "not a subset");
}
END_TEST

START_TEST(c9_no_version_1)
{
	g.cfg.features_acked &= ~VNIC_F_VERSION_1;
	expect_reject(VNIC_STATUS_INVALID_ARGUMENT, "VERSION_1");
}
END_TEST

START_TEST(c9_offload_on_socket_backend)
{
	/* Checksum offload is offered only with a tap. */
	g.cfg.features_offered |= VNIC_F_CSUM;
	g.cfg.features_acked |= VNIC_F_CSUM;
	expect_reject(VNIC_STATUS_INVALID_ARGUMENT, "were not offered");
}
END_TEST

/* ------------------------------------------------------------ C10 */

START_TEST(c10_request_before_hello)
{
	struct vnic_conn *c2 = NULL;
	struct vnic_status *st = NULL;
	char err[256];

	ck_assert_int_eq(vnic_connect(vd.sock, &c2), 0);
	ck_assert_int_eq(vnic_status(c2, &st), VNIC_STATUS_FAILED_PRECONDITION);
	ck_assert_ptr_nonnull(strstr(vnic_last_error(c2), "before Hello"));
	ck_assert_int_eq(vnic_add_nic(c2, &g.cfg, err, sizeof(err)),
			 VNIC_STATUS_FAILED_PRECONDITION);
	vnic_close(c2);
	ck_assert_int_eq(st_nic_count(conn), 0);
	ck_assert_int_eq(st_fd_count_settle(vd.pid, fds_before), fds_before);
}
END_TEST

START_TEST(c10_remove_unknown_nic)
{
	struct vnic_remove_result r;

	ck_assert_int_eq(vnic_remove_nic(conn, "nope", 100, &r), VNIC_STATUS_NOT_FOUND);
	ck_assert_int_eq(st_fd_count(vd.pid), fds_before);
}
END_TEST

/* ------------------------------------------------ id, mac, mtu, backend */

START_TEST(id_mac_mtu_rejected)
{
	char longid[80];

	g.cfg.id = "";
	expect_reject(VNIC_STATUS_INVALID_ARGUMENT, "empty");
	memset(longid, 'a', 65);
	longid[65] = '\0';
	g.cfg.id = longid;
	expect_reject(VNIC_STATUS_INVALID_ARGUMENT, "at most 64");
	g.cfg.id = "has space";
	expect_reject(VNIC_STATUS_INVALID_ARGUMENT, "not printable");
	g.cfg.id = "nic0";
	g.cfg.mac[0] = 0x01;
	expect_reject(VNIC_STATUS_INVALID_ARGUMENT, "multicast");
	memset(g.cfg.mac, 0, 6);
	expect_reject(VNIC_STATUS_INVALID_ARGUMENT, "not a valid address");
	g.cfg.mac[0] = 0x52;
	g.cfg.mtu = 67;
	expect_reject(VNIC_STATUS_INVALID_ARGUMENT, "mtu 67");
	g.cfg.mtu = 65536;
	expect_reject(VNIC_STATUS_INVALID_ARGUMENT, "mtu 65536");
}
END_TEST

START_TEST(tap_name_invalid)
{
	g.cfg.backend = VNIC_BACKEND_TAP;
	g.cfg.tap_name = "a/b";
	expect_reject(VNIC_STATUS_INVALID_ARGUMENT, "not a valid interface name");
	g.cfg.tap_name = "0123456789abcdefg";
	expect_reject(VNIC_STATUS_INVALID_ARGUMENT, "tap name");
	g.cfg.tap_name = "vt0";
	g.cfg.netns = "../etc";
	expect_reject(VNIC_STATUS_INVALID_ARGUMENT, "netns");
}
END_TEST

/* -------------------------------------------------------------- F1 */

START_TEST(f1_pipe_as_kick)
{
	int p[2];

	ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
	g.q[0].kick_fd = p[0];
	expect_reject(VNIC_STATUS_INVALID_ARGUMENT, "not an eventfd");
	close(p[0]);
	close(p[1]);
}
END_TEST

START_TEST(f1_socket_as_call)
{
	int sv[2];

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv), 0);
	g.q[1].call_fd = sv[0];
	expect_reject(VNIC_STATUS_INVALID_ARGUMENT, "tx0 call: fd is socket:");
	close(sv[0]);
	close(sv[1]);
}
END_TEST

START_TEST(f1_memfd_as_kick)
{
	g.q[1].kick_fd = g.memfd;
	expect_reject(VNIC_STATUS_INVALID_ARGUMENT, "not an eventfd");
}
END_TEST

START_TEST(f1_regular_file_as_memory)
{
	char path[] = "/tmp/vnic-f1-XXXXXX";
	int fd = mkstemp(path);

	ck_assert_int_ge(fd, 0);
	unlink(path);
	ck_assert_int_eq(ftruncate(fd, ST_MEM_SIZE), 0);
	g.reg[0].fd = fd;
	expect_reject(VNIC_STATUS_INVALID_ARGUMENT, "not a memfd");
	close(fd);
}
END_TEST

START_TEST(f1_dev_zero_as_memory)
{
	int fd = open("/dev/zero", O_RDWR | O_CLOEXEC);

	ck_assert_int_ge(fd, 0);
	g.reg[0].fd = fd;
	expect_reject(VNIC_STATUS_INVALID_ARGUMENT, "not a memfd");
	close(fd);
}
END_TEST

START_TEST(f2_unsealed_memfd)
{
	int fd = memfd_create("unsealed", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, ST_MEM_SIZE), 0);
	g.reg[0].fd = fd;
	expect_reject(VNIC_STATUS_INVALID_ARGUMENT, "F_SEAL_SHRINK");
	close(fd);
}
END_TEST

START_TEST(f1_pipe_as_backend)
{
	int p[2];

	ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
	g.cfg.backend_fd = p[1];
	expect_reject(VNIC_STATUS_INVALID_ARGUMENT, "not a socket");
	close(p[0]);
	close(p[1]);
}
END_TEST

START_TEST(f1_stream_socket_as_backend)
{
	int sv[2];

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	g.cfg.backend_fd = sv[0];
	expect_reject(VNIC_STATUS_INVALID_ARGUMENT, "SOCK_SEQPACKET or SOCK_DGRAM");
	close(sv[0]);
	close(sv[1]);
}
END_TEST

START_TEST(f1_inet_socket_as_backend)
{
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	ck_assert_int_ge(s, 0);
	g.cfg.backend_fd = s;
	expect_reject(VNIC_STATUS_INVALID_ARGUMENT, "not AF_UNIX");
	close(s);
}
END_TEST

START_TEST(f1_eventfd_as_tap)
{
	int e = eventfd(0, EFD_CLOEXEC);

	ck_assert_int_ge(e, 0);
	g.cfg.backend = VNIC_BACKEND_TAP_FD;
	g.cfg.backend_fd = e;
	expect_reject(VNIC_STATUS_INVALID_ARGUMENT, "not a tap");
	close(e);
}
END_TEST

/* ------------------------------------------------- worker start fails */

START_TEST(worker_exit_before_ready)
{
	char err[512] = "";
	int rc;

	/* A valid request: vnicd starts its worker, /bin/false, which exits
	 * at once. AddNic fails with the reason; nothing is left behind. */
	rc = vnic_add_nic(conn, &g.cfg, err, sizeof(err));
	ck_assert_msg(rc == VNIC_STATUS_UNAVAILABLE, "rc %d: %s", rc, err);
	ck_assert_msg(strstr(err, "exited with status 1 before it was ready"), "%s", err);
	ck_assert_int_eq(st_nic_count(conn), 0);
	ck_assert_int_eq(st_child_count(vd.pid), 0);
	ck_assert_int_eq(st_fd_count_settle(vd.pid, fds_before), fds_before);
}
END_TEST

static Suite *addnic_suite(void)
{
	Suite *s = suite_create("addnic");
	TCase *tc = tcase_create("reject");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, c4_queue_index_out_of_range);
	tcase_add_test(tc, c4_queue_index_low16_valid);
	tcase_add_test(tc, c4_queue_index_negative);
	tcase_add_test(tc, c4_queue_index_twice);
	tcase_add_test(tc, c4_queue_count);
	tcase_add_test(tc, c5_queue_size);
	tcase_add_test(tc, c6_region_size_zero);
	tcase_add_test(tc, c6_region_gpa_wraps);
	tcase_add_test(tc, c6_region_beyond_memfd);
	tcase_add_test(tc, c6_regions_overlap);
	tcase_add_test(tc, c6_no_regions);
	tcase_add_test(tc, c7_desc_misaligned);
	tcase_add_test(tc, c7_avail_misaligned);
	tcase_add_test(tc, c7_used_misaligned);
	tcase_add_test(tc, c7_ring_outside_memory);
	tcase_add_test(tc, c7_ring_spans_two_regions);
	tcase_add_test(tc, c7_ring_wraps);
	tcase_add_test(tc, c7_rings_overlap);
	tcase_add_test(tc, c9_feature_never_offered);
	tcase_add_test(tc, c9_acked_not_subset_of_offered);
	tcase_add_test(tc, c9_no_version_1);
	tcase_add_test(tc, c9_offload_on_socket_backend);
	tcase_add_test(tc, c10_request_before_hello);
	tcase_add_test(tc, c10_remove_unknown_nic);
	tcase_add_test(tc, id_mac_mtu_rejected);
	tcase_add_test(tc, tap_name_invalid);
	tcase_add_test(tc, f1_pipe_as_kick);
	tcase_add_test(tc, f1_socket_as_call);
	tcase_add_test(tc, f1_memfd_as_kick);
	tcase_add_test(tc, f1_regular_file_as_memory);
	tcase_add_test(tc, f1_dev_zero_as_memory);
	tcase_add_test(tc, f2_unsealed_memfd);
	tcase_add_test(tc, f1_pipe_as_backend);
	tcase_add_test(tc, f1_stream_socket_as_backend);
	tcase_add_test(tc, f1_inet_socket_as_backend);
	tcase_add_test(tc, f1_eventfd_as_tap);
	tcase_add_test(tc, worker_exit_before_ready);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(addnic_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
