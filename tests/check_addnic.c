/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * check_addnic: every AddNic REJECT case against a real vnicd over its
 * socket, through libvnic (TESTPLAN C4, C5, C6, C7, C9, C10, F1, F2).
 *
 * Each test asserts (1) the reply's status and reason, (2) that state is
 * unchanged (status shows no NIC) and (3) that the supervisor holds
 * exactly the fds it held before the request (every fd of the rejected
 * frame was closed). The "reject" cases run vnicd with /bin/false as its
 * worker, so they do not depend on the worker being built.
 *
 * The "lifecycle" cases run the real workers/vnicd-worker (skipped, with a
 * line on stderr, when it is not built or we are not root: the worker
 * needs root to enter its sandbox): AddNic, status, duplicate id,
 * RemoveNic from another connection (F3), RemoveNic answered only after
 * the worker is reaped, disconnect and SIGTERM teardown (L7), a crashed
 * worker reported as NicFailed, and a looping tx0 chain (G1) reaching the
 * VMM as QueueNeedsReset (L10).
 */
#include "config.h"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "suptest.h"
#include "testutil.h"
#include "vring_drv.h"

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
	/* More than 2: queue pairs (issue 15), so an even count. */
	expect_reject(VNIC_STATUS_INVALID_ARGUMENT, "rx/tx pairs");
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
	/* Two adjacent (page-aligned) regions; the used ring crosses their
	 * boundary. */
	g.reg[0].size = 0x3000;
	g.reg[1] = (struct vnic_region){ .gpa = ST_GPA_BASE + 0x3000,
					 .size = ST_MEM_SIZE - 0x3000, .offset = 0x3000,
					 .fd = g.memfd };
	g.cfg.nregions = 2;
	g.q[0].used_gpa = ST_GPA_BASE + 0x2c00;
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

START_TEST(c9_ufo_on_socket_backend)
{
	/* UFO needs a tap to segment it, whichever direction. */
	g.cfg.features_offered |= VNIC_F_CSUM | VNIC_F_HOST_UFO;
	g.cfg.features_acked |= VNIC_F_CSUM | VNIC_F_HOST_UFO;
	expect_reject(VNIC_STATUS_INVALID_ARGUMENT, "were not offered");
	g.cfg.features_offered &= ~(VNIC_F_CSUM | VNIC_F_HOST_UFO);
	g.cfg.features_acked &= ~(VNIC_F_CSUM | VNIC_F_HOST_UFO);
	g.cfg.features_offered |= VNIC_F_GUEST_CSUM | VNIC_F_GUEST_UFO;
	g.cfg.features_acked |= VNIC_F_GUEST_CSUM | VNIC_F_GUEST_UFO;
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

/* Issue 17: an AF_PACKET backend names an existing interface, checked as
 * a tap's name; it offers checksums and receive GSO, not send GSO. */
START_TEST(af_packet_config_invalid)
{
	g.cfg.backend = VNIC_BACKEND_AF_PACKET;
	g.cfg.tap_name = NULL;
	expect_reject(VNIC_STATUS_INVALID_ARGUMENT, "af_packet backend needs an interface name");
	g.cfg.tap_name = "a/b";
	expect_reject(VNIC_STATUS_INVALID_ARGUMENT, "af_packet backend: tap name \"a/b\" is not");
	g.cfg.tap_name = "0123456789abcdef";
	expect_reject(VNIC_STATUS_INVALID_ARGUMENT, "af_packet backend: tap name is longer");
	g.cfg.tap_name = "veth0";
	g.cfg.netns = "../etc";
	expect_reject(VNIC_STATUS_INVALID_ARGUMENT, "netns");
	g.cfg.netns = NULL;
	g.cfg.features_offered |= VNIC_F_CSUM | VNIC_F_HOST_TSO4;
	g.cfg.features_acked |= VNIC_F_CSUM | VNIC_F_HOST_TSO4;
	expect_reject(VNIC_STATUS_INVALID_ARGUMENT, "were not offered");
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


/* --------------------------------------------- lifecycle, real worker */

static struct vnicd_proc lv;
static struct vnic_conn *lconn;
static struct st_guest lg;
static int lfds_idle;

static void lsetup(void)
{
	st_vnicd_start(&lv, st_worker_path(), NULL);
	lconn = st_connect(&lv);
	st_guest_init(&lg, "nic0");
	lfds_idle = st_fd_count(lv.pid);
}

static char tap_ns[64]; /* a namespace a tap test made, removed in teardown */

static void lteardown(void)
{
	if (tap_ns[0]) {
		(void)tu_netns_del(tap_ns);
		tap_ns[0] = '\0';
	}
	st_guest_free(&lg);
	vnic_close(lconn);
	if (lv.pid)
		ck_assert_int_eq(st_vnicd_stop(&lv), 0);
}

/* The one NIC's status (asserts there is exactly one). */
START_TEST(happy_path_add_status_remove)
{
	struct vnic_nic_status n;
	struct vnic_remove_result rr;
	struct vnic_conn *other;
	char err[512] = "";
	int fds_running;

	st_add_ok(lconn, &lg);
	n = st_one_nic(lconn);
	ck_assert_str_eq(n.id, "nic0");
	ck_assert_int_eq(n.state, VNIC_NIC_RUNNING);
	ck_assert_int_gt(n.pid, 0);
	ck_assert(st_pid_alive(n.pid));
	ck_assert_str_eq(vnic_mitigation_name(n.policy.mode), "bh");
	ck_assert_uint_eq(n.nqueues, 2);
	ck_assert_str_eq(n.queues[0].name, "rx0");
	ck_assert_str_eq(n.queues[1].name, "tx0");
	ck_assert(!n.queues[0].broken && !n.queues[1].broken);
	/* As root the worker confines itself before READY and says so. */
	if (geteuid() == 0)
		ck_assert(n.sandboxed);
	fds_running = st_fd_count(lv.pid);

	/* Duplicate id: ALREADY_EXISTS, fds of the second frame closed. */
	ck_assert_int_eq(vnic_add_nic(lconn, &lg.cfg, err, sizeof(err)), VNIC_STATUS_ALREADY_EXISTS);
	ck_assert_int_eq(st_fd_count(lv.pid), fds_running);

	/* F3: another connection sees the NIC in status but cannot remove it. */
	other = st_connect(&lv);
	ck_assert_int_eq(vnic_remove_nic(other, "nic0", 1000, &rr), VNIC_STATUS_NOT_FOUND);
	ck_assert_int_eq(st_one_nic(other).state, VNIC_NIC_RUNNING);
	vnic_close(other);

	/* RemoveNic answers only once the worker is reaped. */
	ck_assert_int_eq(vnic_remove_nic(lconn, "nic0", 3000, &rr), 0);
	ck_assert_msg(!st_pid_alive(n.pid), "worker %d still exists after RemoveNic", n.pid);
	ck_assert_uint_eq(rr.nqueues, 2);
	ck_assert_uint_eq(rr.queues[0].index, 0);
	ck_assert_uint_eq(rr.queues[1].index, 1);
	ck_assert_uint_gt(rr.unplug_latency_us, 0);
	ck_assert_int_eq(st_nic_count(lconn), 0);
	ck_assert_int_eq(st_child_count(lv.pid), 0);
	ck_assert_int_eq(st_fd_count_settle(lv.pid, lfds_idle), lfds_idle);
	/* C10: a queue operation after the NIC is deleted finds nothing. */
	ck_assert_int_eq(vnic_remove_nic(lconn, "nic0", 1000, &rr), VNIC_STATUS_NOT_FOUND);
}
END_TEST

START_TEST(l7_disconnect_tears_down)
{
	pid_t wpid;
	struct vnic_conn *c2;

	st_add_ok(lconn, &lg);
	wpid = st_one_nic(lconn).pid;
	vnic_close(lconn);
	lconn = NULL;
	c2 = st_connect(&lv);
	for (int i = 0; i < 500 && (st_nic_count(c2) || st_pid_alive(wpid)); i++)
		usleep(10000);
	ck_assert_int_eq(st_nic_count(c2), 0);
	ck_assert(!st_pid_alive(wpid));
	lconn = c2;
	ck_assert_int_eq(st_fd_count_settle(lv.pid, lfds_idle), lfds_idle);
}
END_TEST

START_TEST(sigterm_reaps_workers)
{
	pid_t wpid;
	struct stat st;

	st_add_ok(lconn, &lg);
	wpid = st_one_nic(lconn).pid;
	ck_assert_int_eq(st_vnicd_stop(&lv), 0);
	ck_assert(!st_pid_alive(wpid));
	ck_assert_int_eq(stat(lv.sock, &st), -1);
}
END_TEST

struct ev_seen {
	int failed, needs_reset, to_failed;
	struct vnic_event last;
};

static void on_event(struct vnic_conn *c, const struct vnic_event *ev, void *arg)
{
	struct ev_seen *s = arg;

	if (ev->type == VNIC_EVENT_NIC_FAILED)
		s->failed++;
	if (ev->type == VNIC_EVENT_QUEUE_NEEDS_RESET)
		s->needs_reset++;
	if (ev->type == VNIC_EVENT_NIC_STATE_CHANGED && ev->old_state == VNIC_NIC_RUNNING &&
	    ev->new_state == VNIC_NIC_FAILED) {
		s->to_failed++;
		return;
	}
	s->last = *ev;
}

static void wait_event(struct ev_seen *s, const int *counter)
{
	for (int i = 0; i < 500 && *counter == 0; i++) {
		struct pollfd p = { .fd = vnic_fd(lconn), .events = POLLIN };

		if (poll(&p, 1, 10) > 0)
			ck_assert_int_ge(vnic_dispatch(lconn), 0);
	}
	ck_assert_int_gt(*counter, 0);
}

START_TEST(worker_crash_marks_failed)
{
	struct ev_seen seen = { 0 };
	struct vnic_nic_status n;
	struct vnic_remove_result rr;

	/* Restarts off (check_lifecycle covers them): a dead worker leaves
	 * the NIC FAILED. */
	vnic_close(lconn);
	ck_assert_int_eq(st_vnicd_stop(&lv), 0);
	st_vnicd_start(&lv, st_worker_path(), "--restart-max", "0", NULL);
	lconn = st_connect(&lv);
	lfds_idle = st_fd_count(lv.pid);
	vnic_set_event_cb(lconn, on_event, &seen);
	st_add_ok(lconn, &lg);
	n = st_one_nic(lconn);
	ck_assert_int_eq(kill(n.pid, SIGKILL), 0);
	wait_event(&seen, &seen.failed);
	ck_assert_str_eq(seen.last.id, "nic0");
	ck_assert_int_eq(seen.last.signal, SIGKILL);
	ck_assert_int_eq(seen.to_failed, 1); /* NicStateChanged RUNNING -> FAILED too */
	n = st_one_nic(lconn);
	ck_assert_int_eq(n.state, VNIC_NIC_FAILED);
	ck_assert_int_eq(n.pid, 0);
	ck_assert_msg(strstr(n.last_error, "killed by signal 9"), "%s", n.last_error);
	ck_assert_int_eq(st_child_count(lv.pid), 0);
	ck_assert_int_eq(vnic_remove_nic(lconn, "nic0", 1000, &rr), 0);
	ck_assert_int_eq(st_nic_count(lconn), 0);
	ck_assert_int_eq(st_fd_count_settle(lv.pid, lfds_idle), lfds_idle);
}
END_TEST

START_TEST(l10_broken_queue_reaches_vmm)
{
	struct ev_seen seen = { 0 };
	struct vnic_nic_status n;
	uint8_t *mem;
	uint64_t one = 1;
	struct vring_desc_le { uint64_t addr; uint32_t len; uint16_t flags, next; } *d;
	uint16_t *avail;

	vnic_set_event_cb(lconn, on_event, &seen);
	st_add_ok(lconn, &lg);
	/* G1 through a real worker: tx0's descriptor 0 chains to itself. */
	mem = mmap(NULL, ST_MEM_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, lg.memfd, 0);
	ck_assert_ptr_ne(mem, MAP_FAILED);
	d = (void *)(mem + (lg.q[1].desc_gpa - ST_GPA_BASE));
	avail = (void *)(mem + (lg.q[1].avail_gpa - ST_GPA_BASE));
	d[0].addr = ST_GPA_BASE + 0x80000;
	d[0].len = 64;
	d[0].flags = 1; /* NEXT */
	d[0].next = 0;
	avail[2] = 0;   /* ring[0] = head 0 */
	__atomic_store_n(&avail[1], 1, __ATOMIC_RELEASE); /* idx = 1 */
	ck_assert_int_eq(write(lg.kick[1], &one, sizeof(one)), (ssize_t)sizeof(one));
	wait_event(&seen, &seen.needs_reset);
	ck_assert_str_eq(seen.last.id, "nic0");
	ck_assert_uint_eq(seen.last.queue, 1);
	n = st_one_nic(lconn);
	ck_assert(n.queues[1].broken);
	ck_assert(n.queues[1].broken_reason[0] != '\0');
	ck_assert(!n.queues[0].broken);
	munmap(mem, ST_MEM_SIZE);
}
END_TEST

START_TEST(vnicctl_status_json_and_table)
{
	char cmd[1024], out[8192], ctl[512], want[128];
	struct vnic_nic_status n;

	/* Quotes and backslashes are printable: the id is valid, and the
	 * JSON must escape it. */
	snprintf(lg.id, sizeof(lg.id), "q\"u\\o");
	st_add_ok(lconn, &lg);
	n = st_one_nic(lconn);
	st_build_path("tools/vnicctl", ctl, sizeof(ctl));

	snprintf(cmd, sizeof(cmd), "%s --socket %s status --json", ctl, lv.sock);
	ck_assert_int_eq(st_run_capture(cmd, out, sizeof(out)), 0);
	ck_assert_msg(!strncmp(out, "{\"schema\":1,", 11), "%s", out);
	ck_assert_msg(strstr(out, "\"nics\":[{\"id\":\"q\\\"u\\\\o\",\"state\":\"RUNNING\""),
		      "%s", out);
	snprintf(want, sizeof(want), "\"pid\":%d,", (int)n.pid);
	ck_assert_msg(strstr(out, want), "%s", out);
	ck_assert_msg(strstr(out, "\"queues\":[{\"name\":\"rx0\",\"packets\":0,"), "%s", out);
	ck_assert_msg(strstr(out, "{\"name\":\"tx0\","), "%s", out);
	ck_assert_msg(strstr(out, "\"broken\":false,\"broken_reason\":\"\"}"), "%s", out);
	/* Every counter of libvnic.h's list, by its name. */
#define JSON_HAS_COUNTER(type, name, kind) \
	ck_assert_msg(strstr(out, "\"" #name "\":"), "no \"%s\" in %s", #name, out);
	VNIC_QUEUE_COUNTERS(JSON_HAS_COUNTER)
#undef JSON_HAS_COUNTER
	ck_assert_msg(strstr(out, "\"policy\":\"bh\","), "%s", out);
	ck_assert_msg(strstr(out, "\"restarts\":0,\"uptime_s\":"), "%s", out);
	ck_assert_msg(out[strlen(out) - 1] == '\n' && !strchr(out, '\n')[1], "one line: %s", out);
	/* A JSON parser agrees, where there is one. */
	if (access("/usr/bin/python3", X_OK) == 0) {
		snprintf(cmd, sizeof(cmd),
			 "%s --socket %s status --json | /usr/bin/python3 -c 'import json,sys; "
			 "d=json.load(sys.stdin); sys.exit(0 if d[\"nics\"][0][\"id\"]==\"q\\\"u\\\\o\" "
			 "and len(d[\"nics\"][0][\"queues\"])==2 else 1)'", ctl, lv.sock);
		ck_assert_int_eq(st_run_capture(cmd, out, sizeof(out)), 0);
	}

	snprintf(cmd, sizeof(cmd), "%s --socket %s status", ctl, lv.sock);
	ck_assert_int_eq(st_run_capture(cmd, out, sizeof(out)), 0);
	ck_assert_msg(strstr(out, "RUNNING") && strstr(out, "q\"u\\o") && strstr(out, "tx0"),
		      "%s", out);
	snprintf(cmd, sizeof(cmd), "%s --socket %s status --watch --interval 0.2 --count 2",
		 ctl, lv.sock);
	ck_assert_int_eq(st_run_capture(cmd, out, sizeof(out)), 0);
	ck_assert_msg(strstr(out, "PACKETS/S"), "second print shows rates: %s", out);
	ck_assert_msg(strstr(out, "--- 20") && strstr(out, "Z\n"), "--watch prints a UTC time: %s", out);

	/* No socket: one line on stderr, exit 1. */
	snprintf(cmd, sizeof(cmd), "%s --socket %s/none status 2>&1", ctl, lv.dir);
	ck_assert_int_eq(st_run_capture(cmd, out, sizeof(out)), 1);
	ck_assert_msg(strstr(out, "cannot connect") && strchr(out, '\n') == out + strlen(out) - 1,
		      "%s", out);
}
END_TEST

/* The tap backend, in a private network namespace (root, /dev/net/tun
 * and iproute2 needed; otherwise the test says so and passes vacuously
 * only for that reason). */
static bool tap_env(char *ns, size_t len)
{
	if (geteuid() != 0 || access("/dev/net/tun", R_OK | W_OK) < 0 ||
	    (access("/usr/sbin/ip", X_OK) < 0 && access("/sbin/ip", X_OK) < 0 &&
	     access("/usr/bin/ip", X_OK) < 0)) {
		fprintf(stderr, "tap test skipped: needs root, /dev/net/tun and ip\n");
		return false;
	}
	tu_netns_add(ns, len);
	snprintf(tap_ns, sizeof(tap_ns), "%s", ns);
	return true;
}

START_TEST(tap_backend_in_netns)
{
	char ns[64], cmd[256], out[1024], err[512] = "";
	struct vnic_remove_result rr;

	if (!tap_env(ns, sizeof(ns)))
		return;
	lg.cfg.backend = VNIC_BACKEND_TAP;
	lg.cfg.tap_name = "vnt0";
	lg.cfg.netns = ns;
	/* UFO is offered with a tap, but like TSO needs its checksum
	 * offload (spec 5.1.3.1). */
	lg.cfg.features_offered |= VNIC_F_HOST_UFO | VNIC_F_GUEST_UFO;
	lg.cfg.features_acked |= VNIC_F_HOST_UFO;
	ck_assert_int_eq(vnic_add_nic(lconn, &lg.cfg, err, sizeof(err)), VNIC_STATUS_INVALID_ARGUMENT);
	ck_assert_msg(strstr(err, "require VIRTIO_NET_F_CSUM"), "%s", err);
	lg.cfg.features_acked &= ~VNIC_F_HOST_UFO;
	lg.cfg.features_acked |= VNIC_F_GUEST_UFO;
	ck_assert_int_eq(vnic_add_nic(lconn, &lg.cfg, err, sizeof(err)), VNIC_STATUS_INVALID_ARGUMENT);
	ck_assert_msg(strstr(err, "require VIRTIO_NET_F_GUEST_CSUM"), "%s", err);
	ck_assert_int_eq(st_nic_count(lconn), 0);
	/* With them, every offload in both directions: the tap takes
	 * TUN_F_UFO (TUNSETOFFLOAD would fail the NIC otherwise). */
	lg.cfg.features_offered |= VNIC_F_CSUM | VNIC_F_GUEST_CSUM | VNIC_F_HOST_TSO4 |
				   VNIC_F_GUEST_TSO4;
	lg.cfg.features_acked |= VNIC_F_CSUM | VNIC_F_GUEST_CSUM | VNIC_F_HOST_TSO4 |
				 VNIC_F_GUEST_TSO4 | VNIC_F_HOST_UFO | VNIC_F_GUEST_UFO;
	st_add_ok(lconn, &lg);
	ck_assert_int_eq(st_one_nic(lconn).state, VNIC_NIC_RUNNING);
	/* The tap is in the namespace, up; not in ours. */
	snprintf(cmd, sizeof(cmd), "ip -n %s -o link show vnt0 2>&1", ns);
	ck_assert_int_eq(st_run_capture(cmd, out, sizeof(out)), 0);
	ck_assert_msg(strstr(out, "UP"), "%s", out);
	ck_assert_int_ne(st_run_capture("ip -o link show vnt0 2>&1", out, sizeof(out)), 0);
	/* Gone with the NIC: nothing holds it once the worker is reaped. */
	ck_assert_int_eq(vnic_remove_nic(lconn, lg.id, 3000, &rr), 0);
	snprintf(cmd, sizeof(cmd), "ip -n %s -o link show vnt0 2>&1", ns);
	ck_assert_int_ne(st_run_capture(cmd, out, sizeof(out)), 0);
	ck_assert_int_eq(st_fd_count_settle(lv.pid, lfds_idle), lfds_idle);
}
END_TEST

/* Two queue pairs through AddNic (issue 15): one request, a worker per
 * pair on one multi-queue tap, status with both pairs and four queues,
 * one RemoveNic with every queue's final indices after both reaps; and
 * what several pairs refuse (a socket, a missing index). */
START_TEST(two_pairs_add_status_remove)
{
	char ns[64], cmd[256], out[2048], err[512] = "";
	struct vnic_remove_result rr;
	struct vnic_queue q[4];
	struct vnic_status *st = NULL;
	int ev[8], pid0, pid1, before;

	if (!tap_env(ns, sizeof(ns)))
		return;
	for (int i = 0; i < 8; i++) {
		ev[i] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		ck_assert_int_ge(ev[i], 0);
	}
	for (uint32_t j = 0; j < 4; j++) {
		uint64_t base = ST_GPA_BASE + (uint64_t)j * 0x10000;

		q[j] = (struct vnic_queue){ .index = j, .size = ST_QSIZE, .desc_gpa = base,
					    .avail_gpa = base + 0x1000, .used_gpa = base + 0x2000,
					    .kick_fd = ev[2 * j], .call_fd = ev[2 * j + 1] };
	}
	/* Listed out of order: the daemon sorts them by index. */
	{
		struct vnic_queue t = q[1];

		q[1] = q[3];
		q[3] = t;
	}
	lg.cfg.queues = q;
	lg.cfg.nqueues = 4;
	/* Sockets: one per pair. libvnic refuses one for two pairs before
	 * sending. (vnicd checks the frame's fd count itself, too:
	 * check_supervisor's pairs_fd_layout_refused sends raw frames.) */
	ck_assert_int_eq(vnic_add_nic(lconn, &lg.cfg, err, sizeof(err)), -EINVAL);
	ck_assert_msg(strstr(err, "one per queue pair"), "%s", err);
	{
		int sp[2][2], bf[2];

		for (int k = 0; k < 2; k++) {
			ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp[k]),
					 0);
			bf[k] = sp[k][1];
		}
		before = st_fd_count(lv.pid);
		ck_assert_int_eq(vnic_add_nic_backends(lconn, &lg.cfg, bf, 2, err, sizeof(err)), 0);
		/* What vnicd holds for it (issue 15): the memfd once, shared
		 * by the pairs, and per pair 4 eventfds, the backend, the
		 * worker's memfd (stats and inflight), control socket and
		 * pidfd. Each pair's copy of the memfd was closed. */
		ck_assert_int_eq(st_fd_count(lv.pid) - before, 1 + 2 * 8);
		ck_assert_int_eq(vnic_status(lconn, &st), 0);
		ck_assert_uint_eq(st->pairs[0].npairs, 2);
		vnic_status_free(st);
		st = NULL;
		/* A dirty log reaches both pairs' workers, one answer. */
		{
			int logfd = memfd_create("log", MFD_CLOEXEC | MFD_ALLOW_SEALING);

			ck_assert_int_eq(ftruncate(logfd, 4096), 0);
			ck_assert_int_eq(fcntl(logfd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
			ck_assert_int_eq(vnic_set_dirty_log(lconn, lg.id, logfd, 4096, 0), 0);
			ck_assert_int_eq(vnic_set_dirty_log(lconn, lg.id, -1, 0, 0), 0);
			close(logfd);
		}
		ck_assert_int_eq(vnic_remove_nic(lconn, lg.id, 3000, &rr), 0);
		ck_assert_uint_eq(rr.nqueues, 4);
		for (int k = 0; k < 2; k++) {
			close(sp[k][0]);
			close(sp[k][1]);
		}
	}
	lg.cfg.backend = VNIC_BACKEND_TAP;
	lg.cfg.tap_name = "vnq2";
	lg.cfg.netns = ns;
	/* Index 5 of 4 queues. */
	q[2].index = 5;
	ck_assert_int_eq(vnic_add_nic(lconn, &lg.cfg, err, sizeof(err)), VNIC_STATUS_INVALID_ARGUMENT);
	ck_assert_msg(strstr(err, "queue index 5 is out of range"), "%s", err);
	q[2].index = 2;
	ck_assert_int_eq(st_nic_count(lconn), 0);

	st_add_ok(lconn, &lg);
	ck_assert_int_eq(vnic_status(lconn, &st), 0);
	ck_assert_uint_eq(st->nnics, 1);
	ck_assert_uint_eq(st->nics[0].nqueues, 4);
	ck_assert_uint_eq(st->pairs[0].npairs, 2);
	pid0 = st->pairs[0].pairs[0].pid;
	pid1 = st->pairs[0].pairs[1].pid;
	ck_assert_int_gt(pid0, 0);
	ck_assert_int_gt(pid1, 0);
	ck_assert_int_ne(pid0, pid1);
	ck_assert_int_eq(st->nics[0].state, VNIC_NIC_RUNNING);
	vnic_status_free(st);
	snprintf(cmd, sizeof(cmd), "ip -n %s -d link show vnq2 2>&1", ns);
	ck_assert_int_eq(st_run_capture(cmd, out, sizeof(out)), 0);
	ck_assert_msg(strstr(out, "multi_queue numqueues 2"), "%s", out);

	ck_assert_int_eq(vnic_remove_nic(lconn, lg.id, 3000, &rr), 0);
	ck_assert_uint_eq(rr.nqueues, 4);
	ck_assert(!st_pid_alive(pid0) && !st_pid_alive(pid1));
	ck_assert_int_eq(st_nic_count(lconn), 0);
	ck_assert_int_ne(st_run_capture(cmd, out, sizeof(out)), 0); /* the tap went too */
	for (int i = 0; i < 8; i++)
		close(ev[i]);
	ck_assert_int_eq(st_fd_count_settle(lv.pid, lfds_idle), lfds_idle);
}
END_TEST

/* Open a tap inside network namespace ns (the test's own), with flags. */
static int open_tap_in(const char *ns, const char *name, short flags)
{
	struct ifreq ifr;
	int self = tu_netns_enter(ns), fd;

	ck_assert_int_ge(self, 0);
	fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	memset(&ifr, 0, sizeof(ifr));
	ifr.ifr_flags = flags;
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
	ck_assert_int_eq(ioctl(fd, TUNSETIFF, &ifr), 0);
	ck_assert_int_eq(tu_netns_leave(self), 0);
	return fd;
}

START_TEST(tap_fd_backend)
{
	char ns[64], err[512] = "";
	struct vnic_remove_result rr;
	int plain, vnet;

	if (!tap_env(ns, sizeof(ns)))
		return;
	/* F1: a tap without IFF_VNET_HDR is not the tap we need. */
	plain = open_tap_in(ns, "vnp0", IFF_TAP | IFF_NO_PI);
	lg.cfg.backend = VNIC_BACKEND_TAP_FD;
	lg.cfg.backend_fd = plain;
	ck_assert_int_eq(vnic_add_nic(lconn, &lg.cfg, err, sizeof(err)),
			 VNIC_STATUS_INVALID_ARGUMENT);
	ck_assert_msg(strstr(err, "lacks IFF_TAP|IFF_NO_PI|IFF_VNET_HDR"), "%s", err);
	ck_assert_int_eq(st_fd_count(lv.pid), lfds_idle);
	/* The right kind runs. */
	vnet = open_tap_in(ns, "vnv0", IFF_TAP | IFF_NO_PI | IFF_VNET_HDR);
	lg.cfg.backend_fd = vnet;
	st_add_ok(lconn, &lg);
	ck_assert_int_eq(st_one_nic(lconn).state, VNIC_NIC_RUNNING);
	ck_assert_int_eq(vnic_remove_nic(lconn, lg.id, 3000, &rr), 0);
	ck_assert_int_eq(st_fd_count_settle(lv.pid, lfds_idle), lfds_idle);
	close(plain);
	close(vnet);
}
END_TEST

/* Issue 17: an interface that is not there fails AddNic with its name,
 * and leaves no fd behind (the socket made before the lookup is closed). */
START_TEST(af_packet_interface_missing)
{
	char err[512] = "", ns[64];
	struct vnic_remove_result rr;
	const char *id;

	if (geteuid() != 0)
		return;
	lg.cfg.backend = VNIC_BACKEND_AF_PACKET;
	lg.cfg.tap_name = "vnicnope0";
	ck_assert_int_ne(vnic_add_nic(lconn, &lg.cfg, err, sizeof(err)), VNIC_STATUS_OK);
	ck_assert_msg(strstr(err, "interface vnicnope0"), "%s", err);
	ck_assert_int_eq(st_nic_count(lconn), 0);
	ck_assert_int_eq(st_fd_count_settle(lv.pid, lfds_idle), lfds_idle);
	/* lo of a private netns: a NIC on it starts, a second one on the
	 * same interface is refused, the first leaves no fd behind. */
	if (!tap_env(ns, sizeof(ns)))
		return;
	lg.cfg.tap_name = "lo";
	lg.cfg.netns = ns;
	ck_assert_int_eq(vnic_add_nic(lconn, &lg.cfg, err, sizeof(err)), VNIC_STATUS_OK);
	ck_assert_int_eq(st_nic_count(lconn), 1);
	id = lg.cfg.id;
	lg.cfg.id = "afp-second";
	ck_assert_int_ne(vnic_add_nic(lconn, &lg.cfg, err, sizeof(err)), VNIC_STATUS_OK);
	ck_assert_msg(strstr(err, "interface lo is in use by"), "%s", err);
	ck_assert_int_eq(st_nic_count(lconn), 1);
	ck_assert_int_eq(vnic_remove_nic(lconn, id, 3000, &rr), 0);
	ck_assert_int_eq(st_nic_count(lconn), 0);
	ck_assert_int_eq(st_fd_count_settle(lv.pid, lfds_idle), lfds_idle);
}
END_TEST

START_TEST(tap_netns_missing_rejected)
{
	char err[512] = "";

	if (geteuid() != 0 || access("/dev/net/tun", R_OK | W_OK) < 0)
		return;
	lg.cfg.backend = VNIC_BACKEND_TAP;
	lg.cfg.tap_name = "vnt1";
	lg.cfg.netns = "vnic-no-such-ns";
	ck_assert_int_eq(vnic_add_nic(lconn, &lg.cfg, err, sizeof(err)), VNIC_STATUS_UNAVAILABLE);
	ck_assert_msg(strstr(err, "network namespace vnic-no-such-ns"), "%s", err);
	ck_assert_int_eq(st_nic_count(lconn), 0);
	ck_assert_int_eq(st_fd_count_settle(lv.pid, lfds_idle), lfds_idle);
}
END_TEST

/* Guest <-> host frames through the socket backend, and the counters in
 * status (read by vnicd from the worker's stats page) match them. On the
 * guest side each buffer starts with the 12-byte virtio-net header; the
 * socket carries plain Ethernet frames (the worker's contract). */
#define TR_FRAMES 16
#define TR_HDR 12

static uint64_t wait_used(struct vring_drv *d, unsigned want, uint32_t *lens)
{
	unsigned got = 0;

	for (int i = 0; i < 500 && got < want; i++) {
		void *cookie;
		uint32_t len;

		while (got < want && vring_drv_get_used(d, &cookie, &len) == 1)
			lens[(uintptr_t)cookie] = len, got++;
		if (got < want)
			usleep(10000);
	}
	return got;
}

START_TEST(traffic_counters_match)
{
	struct vring_drv rx, tx;
	uint8_t *mem, frame[2048], buf[2048];
	uint32_t lens[TR_FRAMES];
	uint64_t one = 1, tx_bytes = 0, rx_bytes = 0;
	struct vnic_nic_status n;

	mem = mmap(NULL, ST_MEM_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, lg.memfd, 0);
	ck_assert_ptr_ne(mem, MAP_FAILED);
#define DRV(gpa) ((void *)(mem + ((gpa) - ST_GPA_BASE)))
	ck_assert_int_eq(vring_drv_init(&rx, ST_QSIZE, DRV(lg.q[0].desc_gpa), DRV(lg.q[0].avail_gpa),
					DRV(lg.q[0].used_gpa), true), 0);
	ck_assert_int_eq(vring_drv_init(&tx, ST_QSIZE, DRV(lg.q[1].desc_gpa), DRV(lg.q[1].avail_gpa),
					DRV(lg.q[1].used_gpa), true), 0);
	st_add_ok(lconn, &lg);

	/* Guest -> host: a header and a patterned frame per chain. */
	for (uintptr_t i = 0; i < TR_FRAMES; i++) {
		uint64_t gpa = ST_GPA_BASE + 0x40000 + i * 2048;
		uint32_t len = 60 + (uint32_t)i * 97;
		struct vring_drv_buf b = { .gpa = gpa, .len = TR_HDR + len, .writable = false };

		memset(DRV(gpa), 0, TR_HDR);
		for (uint32_t k = 0; k < len; k++)
			((uint8_t *)DRV(gpa))[TR_HDR + k] = (uint8_t)(i * 7 + k);
		ck_assert_int_ge(vring_drv_add(&tx, &b, 1, (void *)i), 0);
		tx_bytes += len;
	}
	vring_drv_publish(&tx);
	ck_assert_int_eq(write(lg.kick[1], &one, sizeof(one)), (ssize_t)sizeof(one));
	for (uintptr_t i = 0; i < TR_FRAMES; i++) {
		struct pollfd p = { .fd = lg.backend[1], .events = POLLIN };
		uint32_t len = 60 + (uint32_t)i * 97;
		ssize_t r;

		ck_assert_int_eq(poll(&p, 1, 5000), 1);
		r = recv(lg.backend[1], buf, sizeof(buf), 0);
		ck_assert_int_eq(r, len);
		for (uint32_t k = 0; k < len; k++)
			ck_assert_uint_eq(buf[k], (uint8_t)(i * 7 + k));
	}
	ck_assert_uint_eq(wait_used(&tx, TR_FRAMES, lens), TR_FRAMES);

	/* Host -> guest: buffers first, then frames. */
	for (uintptr_t i = 0; i < TR_FRAMES; i++) {
		struct vring_drv_buf b = { .gpa = ST_GPA_BASE + 0x80000 + i * 2048, .len = 2048,
					   .writable = true };

		ck_assert_int_ge(vring_drv_add(&rx, &b, 1, (void *)i), 0);
	}
	vring_drv_publish(&rx);
	ck_assert_int_eq(write(lg.kick[0], &one, sizeof(one)), (ssize_t)sizeof(one));
	for (unsigned i = 0; i < TR_FRAMES; i++) {
		uint32_t len = 1500 - i * 50;

		memset(frame, (int)i + 1, len);
		ck_assert_int_eq(send(lg.backend[1], frame, len, 0), (ssize_t)len);
		rx_bytes += len;
	}
	ck_assert_uint_eq(wait_used(&rx, TR_FRAMES, lens), TR_FRAMES);
	for (unsigned i = 0; i < TR_FRAMES; i++) {
		const uint8_t *gb = DRV(ST_GPA_BASE + 0x80000 + i * 2048);

		ck_assert_uint_eq(lens[i], TR_HDR + 1500 - i * 50);
		ck_assert_uint_eq(gb[TR_HDR], i + 1);
		ck_assert_uint_eq(gb[TR_HDR + 1500 - i * 50 - 1], i + 1);
	}

	/* The supervisor's view, lock-free from the stats page. */
	n = st_one_nic(lconn);
	ck_assert_str_eq(n.queues[1].name, "tx0");
	ck_assert_uint_eq(n.queues[1].packets, TR_FRAMES);
	ck_assert_uint_eq(n.queues[1].bytes, tx_bytes);
	ck_assert_uint_ge(n.queues[1].kicks, 1);
	ck_assert_uint_eq(n.queues[0].packets, TR_FRAMES);
	ck_assert_uint_eq(n.queues[0].bytes, rx_bytes);
	ck_assert_uint_eq(n.queues[0].drops + n.queues[1].drops, 0);
	ck_assert_uint_eq(n.queues[0].errors + n.queues[1].errors, 0);
	ck_assert(!n.queues[0].broken && !n.queues[1].broken);
#undef DRV
	vring_drv_fini(&rx);
	vring_drv_fini(&tx);
	munmap(mem, ST_MEM_SIZE);
}
END_TEST

/* Resident set of a process, in KiB (VmRSS in /proc/pid/status). */
static long rss_kib(pid_t pid)
{
	char path[64], line[256];
	long kib = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

/* RSS within 1 MiB of rss0. Not under ASan: its quarantine keeps freed
 * memory resident by design; there LeakSanitizer at vnicd's exit (the
 * teardown requires exit status 0) catches leaks instead. */
static void rss_flat(long rss0)
{
#ifndef VNIC_SANITIZERS
	long now = rss_kib(lv.pid);

	ck_assert_msg(now - rss0 < 1024, "RSS %ld -> %ld KiB", rss0, now);
#else
	(void)rss0;
#endif
}

START_TEST(c3_rejected_addnic_soak)
{
	char err[512];
	long rss0;

	uint64_t t0;
	unsigned i;

	/* Warm up (allocator pools), then up to 10,000 rejected AddNic (at
	 * least 1,000, within 25 s under load), each carrying 6 fds: fds and
	 * memory stay flat. */
	lg.q[0].size = 3;
	for (i = 0; i < 200; i++)
		ck_assert_int_eq(vnic_add_nic(lconn, &lg.cfg, err, sizeof(err)),
				 VNIC_STATUS_INVALID_ARGUMENT);
	rss0 = rss_kib(lv.pid);
	t0 = tu_mono_ms();
	for (i = 0; tu_soak_more(i, 1000, 10000, t0, 25000); i++)
		ck_assert_int_eq(vnic_add_nic(lconn, &lg.cfg, err, sizeof(err)),
				 VNIC_STATUS_INVALID_ARGUMENT);
	tu_soak_report("c3_rejected_addnic_soak", i, 10000, t0);
	ck_assert_int_eq(st_fd_count(lv.pid), lfds_idle);
	rss_flat(rss0);
}
END_TEST

START_TEST(c3_add_remove_soak)
{
	struct vnic_remove_result rr;
	long rss0 = 0;
	uint64_t t0 = tu_mono_ms();
	unsigned i;

	/* Up to 100 hot-plug/unplug cycles with real workers (at least 20,
	 * within 30 s: a sanitized worker under load takes ~0.5 s a cycle). */
	for (i = 0; tu_soak_more(i, 20, 100, t0, 30000); i++) {
		if (i == 10)
			rss0 = rss_kib(lv.pid);
		st_add_ok(lconn, &lg);
		ck_assert_int_eq(vnic_remove_nic(lconn, lg.id, 3000, &rr), 0);
		ck_assert_uint_eq(rr.nqueues, 2);
	}
	tu_soak_report("c3_add_remove_soak", i, 100, t0);
	ck_assert_int_eq(st_nic_count(lconn), 0);
	ck_assert_int_eq(st_child_count(lv.pid), 0);
	ck_assert_int_eq(st_fd_count_settle(lv.pid, lfds_idle), lfds_idle);
	rss_flat(rss0);
}
END_TEST

/* Does process pid hold an fd on the same file as fd? (Files with their
 * own inode: memfds, sockets; not eventfds, which share one anon inode.) */
static bool holds_file(pid_t pid, int fd)
{
	char dir[64], p[400];
	struct stat want, st;
	DIR *d;
	struct dirent *e;
	bool found = false;

	ck_assert_int_eq(fstat(fd, &want), 0);
	snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)pid);
	d = opendir(dir);
	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
		if (stat(p, &st) == 0 && st.st_dev == want.st_dev && st.st_ino == want.st_ino)
			found = true;
	}
	closedir(d);
	return found;
}

/* Does process pid map the file behind fd (by inode, /proc/pid/maps)? */
static bool maps_file(pid_t pid, int fd)
{
	char path[64], line[512];
	struct stat want;
	bool found = false;
	FILE *f;

	ck_assert_int_eq(fstat(fd, &want), 0);
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f)) {
		unsigned long ino = 0;

		if (sscanf(line, "%*s %*s %*s %*s %lu", &ino) == 1 && ino == want.st_ino)
			found = true;
	}
	fclose(f);
	return found;
}

START_TEST(f3_worker_holds_only_its_own_fds)
{
	struct st_guest gb;
	struct vnic_status *st = NULL;
	pid_t pa = 0, pb = 0;

	st_guest_init(&gb, "nicB");
	st_add_ok(lconn, &lg);
	st_add_ok(lconn, &gb);
	ck_assert_int_eq(vnic_status(lconn, &st), 0);
	ck_assert_uint_eq(st->nnics, 2);
	for (unsigned i = 0; i < 2; i++) {
		if (!strcmp(st->nics[i].id, "nic0"))
			pa = st->nics[i].pid;
		else
			pb = st->nics[i].pid;
	}
	st = vnic_status_free(st);
	ck_assert_int_gt(pa, 0);
	ck_assert_int_gt(pb, 0);
	/* Each worker maps its own guest memory and none of the other's,
	 * and holds its own backend socket, not the other's (F3: fds go
	 * to their owner only). */
	ck_assert(maps_file(pa, lg.memfd) || holds_file(pa, lg.memfd));
	ck_assert(maps_file(pb, gb.memfd) || holds_file(pb, gb.memfd));
	ck_assert(!maps_file(pa, gb.memfd) && !holds_file(pa, gb.memfd));
	ck_assert(!maps_file(pb, lg.memfd) && !holds_file(pb, lg.memfd));
	ck_assert(holds_file(pa, lg.backend[0]) && holds_file(pb, gb.backend[0]));
	ck_assert(!holds_file(pa, gb.backend[0]) && !holds_file(pb, lg.backend[0]));
	st_guest_free(&gb);
}
END_TEST

/* Every mode exists (issue 9); an unknown one, or a parameter outside its
 * bounds, is refused with a line naming it. */
START_TEST(policy_parameters_out_of_range)
{
	g.cfg.policy.mode = (enum vnic_mitigation)5;
	expect_reject(VNIC_STATUS_INVALID_ARGUMENT, "mode 5 is unknown");
	g.cfg.policy.mode = VNIC_MITIGATION_TIMER;
	g.cfg.policy.timer_us = 100001;
	expect_reject(VNIC_STATUS_INVALID_ARGUMENT, "timer_us 100001");
	g.cfg.policy.timer_us = 0;
	g.cfg.policy.mode = VNIC_MITIGATION_POLL;
	g.cfg.policy.poll_us = 1000001;
	expect_reject(VNIC_STATUS_INVALID_ARGUMENT, "poll_us 1000001");
	g.cfg.policy.poll_us = 0;
	g.cfg.policy.mode = VNIC_MITIGATION_ADAPTIVE;
	g.cfg.policy.latency_us = 4;
	expect_reject(VNIC_STATUS_INVALID_ARGUMENT, "latency_us 4");
	g.cfg.policy.latency_us = 0;
	g.cfg.policy.safety_pct = 101;
	expect_reject(VNIC_STATUS_INVALID_ARGUMENT, "safety_pct 101");
	g.cfg.policy.safety_pct = 0;
	g.cfg.policy.max_window = 4097;
	expect_reject(VNIC_STATUS_INVALID_ARGUMENT, "max_window 4097");
	g.cfg.policy.max_window = 0;
	/* Interrupt coalescing (issue 17): each of the four, one past its bound. */
	g.cfg.policy.rx_irq_us = 10001;
	expect_reject(VNIC_STATUS_INVALID_ARGUMENT, "rx_irq_us 10001");
	g.cfg.policy.rx_irq_us = 0;
	g.cfg.policy.tx_irq_us = 10001;
	expect_reject(VNIC_STATUS_INVALID_ARGUMENT, "tx_irq_us 10001");
	g.cfg.policy.tx_irq_us = 0;
	g.cfg.policy.rx_irq_frames = 32769;
	expect_reject(VNIC_STATUS_INVALID_ARGUMENT, "rx_irq_frames 32769");
	g.cfg.policy.rx_irq_frames = 0;
	g.cfg.policy.tx_irq_frames = 32769;
	expect_reject(VNIC_STATUS_INVALID_ARGUMENT, "tx_irq_frames 32769");
}
END_TEST

/* G21: a budget larger than a whole queue or 64 MiB would let one queue
 * starve the rest. */
START_TEST(policy_budget_out_of_range)
{
	g.cfg.policy.mode = VNIC_MITIGATION_BH;
	g.cfg.policy.budget_packets = 32769;
	expect_reject(VNIC_STATUS_INVALID_ARGUMENT, "budget");
	g.cfg.policy.budget_packets = 0;
	g.cfg.policy.budget_bytes = 64u * 1024 * 1024 + 1;
	expect_reject(VNIC_STATUS_INVALID_ARGUMENT, "budget");
}
END_TEST

/* SetPolicy on a running NIC: answered once the worker applied it, seen
 * in status; bad ones change nothing; only the owner may. */
START_TEST(set_policy_running_nic)
{
	struct vnic_policy p = { .mode = VNIC_MITIGATION_BH, .budget_packets = 1,
				 .budget_bytes = 2048 };
	struct vnic_nic_status n;
	struct vnic_conn *other;
	pid_t pid;

	st_add_ok(lconn, &lg);
	n = st_one_nic(lconn);
	pid = n.pid;
	ck_assert_uint_eq(n.policy.budget_packets, 256);
	ck_assert_int_eq(vnic_set_policy(lconn, "nic0", &p), 0);
	n = st_one_nic(lconn);
	ck_assert_uint_eq(n.policy.budget_packets, 1);
	ck_assert_uint_eq(n.policy.budget_bytes, 2048);
	ck_assert_int_eq(n.pid, pid); /* applied in place, no restart */

	/* Every mode, in place, its defaults resolved and shown. */
	p.mode = VNIC_MITIGATION_ADAPTIVE;
	ck_assert_int_eq(vnic_set_policy(lconn, "nic0", &p), 0);
	n = st_one_nic(lconn);
	ck_assert_int_eq(n.policy.mode, VNIC_MITIGATION_ADAPTIVE);
	ck_assert_uint_eq(n.policy.latency_us, 100);
	ck_assert_uint_eq(n.policy.safety_pct, 80);
	ck_assert_uint_eq(n.policy.max_window, 64);
	p.mode = VNIC_MITIGATION_TIMER;
	ck_assert_int_eq(vnic_set_policy(lconn, "nic0", &p), 0);
	n = st_one_nic(lconn);
	ck_assert_int_eq(n.policy.mode, VNIC_MITIGATION_TIMER);
	ck_assert_uint_eq(n.policy.timer_us, 150);
	p.mode = VNIC_MITIGATION_POLL;
	p.poll_us = 20;
	ck_assert_int_eq(vnic_set_policy(lconn, "nic0", &p), 0);
	n = st_one_nic(lconn);
	ck_assert_int_eq(n.policy.mode, VNIC_MITIGATION_POLL);
	ck_assert_uint_eq(n.policy.poll_us, 20);
	ck_assert_uint_eq(n.policy_switches, 4);
	ck_assert_int_eq(n.pid, pid);
	p.poll_us = 0;
	p.mode = VNIC_MITIGATION_TIMER;
	p.timer_us = 200000;
	ck_assert_int_eq(vnic_set_policy(lconn, "nic0", &p), VNIC_STATUS_INVALID_ARGUMENT);
	ck_assert_ptr_nonnull(strstr(vnic_last_error(lconn), "timer_us 200000"));
	p.timer_us = 0;
	p.mode = VNIC_MITIGATION_BH;
	p.budget_packets = 40000;
	ck_assert_int_eq(vnic_set_policy(lconn, "nic0", &p), VNIC_STATUS_INVALID_ARGUMENT);
	ck_assert_int_eq(vnic_set_policy(lconn, "nobody", &p), VNIC_STATUS_NOT_FOUND);
	/* Another connection of an administrator (uid 0 or vnicd's own, as
	 * here: vnicctl set-policy) may; the reply comes to it. A VMM of
	 * --group may not (admin_cli.sh). */
	other = st_connect(&lv);
	p.budget_packets = 7;
	ck_assert_int_eq(vnic_set_policy(other, "nic0", &p), 0);
	vnic_close(other);
	n = st_one_nic(lconn);
	ck_assert_uint_eq(n.policy.budget_packets, 7);
	ck_assert_int_eq(n.state, VNIC_NIC_RUNNING);

	/* Back to the defaults (zeros). */
	memset(&p, 0, sizeof(p));
	ck_assert_int_eq(vnic_set_policy(lconn, "nic0", &p), 0);
	n = st_one_nic(lconn);
	ck_assert_uint_eq(n.policy.budget_packets, 256);
	ck_assert_uint_eq(n.policy.budget_bytes, 512 * 1024);
	ck_assert_int_eq(vnic_remove_nic(lconn, "nic0", 3000, NULL), 0);
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
	tcase_add_test(tc, c9_ufo_on_socket_backend);
	tcase_add_test(tc, c10_request_before_hello);
	tcase_add_test(tc, c10_remove_unknown_nic);
	tcase_add_test(tc, id_mac_mtu_rejected);
	tcase_add_test(tc, tap_name_invalid);
	tcase_add_test(tc, af_packet_config_invalid);
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
	tcase_add_test(tc, policy_parameters_out_of_range);
	tcase_add_test(tc, policy_budget_out_of_range);
	suite_add_tcase(s, tc);

	/* The worker confines itself (namespaces, empty root, uid drop)
	 * before READY, which takes root: without it every start fails. */
	if (st_worker_path() && geteuid() == 0) {
		TCase *tl = tcase_create("lifecycle");

		tcase_add_checked_fixture(tl, lsetup, lteardown);
		tcase_set_timeout(tl, 60);
		tcase_add_test(tl, happy_path_add_status_remove);
		tcase_add_test(tl, l7_disconnect_tears_down);
		tcase_add_test(tl, sigterm_reaps_workers);
		tcase_add_test(tl, worker_crash_marks_failed);
		tcase_add_test(tl, l10_broken_queue_reaches_vmm);
		tcase_add_test(tl, vnicctl_status_json_and_table);
		tcase_add_test(tl, traffic_counters_match);
		tcase_add_test(tl, tap_backend_in_netns);
	tcase_add_test(tl, two_pairs_add_status_remove);
		tcase_add_test(tl, tap_netns_missing_rejected);
		tcase_add_test(tl, af_packet_interface_missing);
		tcase_add_test(tl, tap_fd_backend);
		tcase_add_test(tl, c3_rejected_addnic_soak);
		tcase_add_test(tl, c3_add_remove_soak);
		tcase_add_test(tl, f3_worker_holds_only_its_own_fds);
		tcase_add_test(tl, set_policy_running_nic);
		suite_add_tcase(s, tl);
	} else {
		fprintf(stderr, "check_addnic: lifecycle tests skipped: they need root and "
			"workers/vnicd-worker\n");
	}
	return s;
}

int main(void)
{
	SRunner *sr;
	int failed;

	tu_netns_init("vnictest");
	sr = srunner_create(addnic_suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	tu_netns_sweep();
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
