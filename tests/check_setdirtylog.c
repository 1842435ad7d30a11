/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * check_setdirtylog: live migration's dirty log through the native API
 * (issue 14): SetDirtyLog driven by libvnic against a real vnicd and its
 * real worker, the way a VMM migrates.
 *
 *  - bad requests are refused with the right status and reason, change
 *    nothing (the NIC runs on, same worker) and leave vnicd holding exactly
 *    the fds it held before: unknown id, another connection's NIC, not a
 *    memfd, unsealed, short, too small for guest memory, size or offset
 *    out of range, and the fd counts the wire layer enforces (raw frames:
 *    libvnic itself refuses to send them);
 *  - logging on: frames into the guest, and every page the worker wrote
 *    (receive buffers, the used ring) has its bit, pages it did not write
 *    have none; cleared with atomic exchanges as a VMM does;
 *  - a second log replaces the first; logging stops; a stopped NIC's log
 *    stays clear under traffic;
 *  - the NIC's worker SIGKILLed: the new worker logs into the same log;
 *  - RemoveNic answers after the reap, and vnicd holds no fd of the log;
 *  - Announce: a RARP from the NIC's MAC comes out of its backend, with the
 *    worker stopped too (vnicd sends it); another connection's NIC and an
 *    unknown one are not found and send nothing; a backend that takes no
 *    more frames gives UNAVAILABLE with the reason, and the NIC runs on.
 *
 * Needs root and workers/vnicd-worker (the worker's sandbox); skipped
 * otherwise. The frames go through a socketpair: no network at all.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "fdpass.h"
#include "suptest.h"
#include "testutil.h"
#include "vring_drv.h"
#include "wire.h"

#define HDR 12                 /* virtio_net_hdr_v1 */
#define RXBUF_GPA (ST_GPA_BASE + 0x80000)
#define RXBUF_SIZE 2048u
#define TXBUF_GPA (ST_GPA_BASE + 0x40000)
#define MEM_END (ST_GPA_BASE + ST_MEM_SIZE)
#define PAGE VNIC_DIRTY_LOG_PAGE

static struct vnicd_proc vd;
static struct vnic_conn *conn;
static struct st_guest g;
static uint8_t *mem;
static struct vring_drv rx, tx;
static unsigned rx_next;        /* next receive buffer slot (never reused) */
static int fds_idle;

#define GPA(a) ((void *)(mem + ((a) - ST_GPA_BASE)))

static void setup(void)
{
	st_vnicd_start(&vd, st_worker_path(), NULL);
	conn = st_connect(&vd);
	st_guest_init(&g, "nic0");
	fds_idle = st_fd_count(vd.pid);
	mem = mmap(NULL, ST_MEM_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, g.memfd, 0);
	ck_assert_ptr_ne(mem, MAP_FAILED);
	ck_assert_int_eq(vring_drv_init(&rx, ST_QSIZE, GPA(g.q[0].desc_gpa), GPA(g.q[0].avail_gpa),
					GPA(g.q[0].used_gpa), true), 0);
	ck_assert_int_eq(vring_drv_init(&tx, ST_QSIZE, GPA(g.q[1].desc_gpa), GPA(g.q[1].avail_gpa),
					GPA(g.q[1].used_gpa), true), 0);
	rx_next = 0;
	st_add_ok(conn, &g);
}

static void teardown(void)
{
	vring_drv_fini(&rx);
	vring_drv_fini(&tx);
	munmap(mem, ST_MEM_SIZE);
	st_guest_free(&g);
	vnic_close(conn);
	ck_assert_int_eq(st_vnicd_stop(&vd), 0);
}

/* A log as a VMM makes it: a memfd of @len bytes sealed against
 * shrinking and growing (@seal false: not sealed), mapped shared. */
struct log {
	int fd;
	uint8_t *p;
	size_t len;
};

static struct log log_new(size_t len, bool seal)
{
	struct log l = { .len = len };

	l.fd = memfd_create("check-log", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	ck_assert_int_ge(l.fd, 0);
	ck_assert_int_eq(ftruncate(l.fd, (off_t)len), 0);
	if (seal)
		ck_assert_int_eq(fcntl(l.fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
	l.p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, l.fd, 0);
	ck_assert_ptr_ne(l.p, MAP_FAILED);
	return l;
}

static void log_free(struct log *l)
{
	munmap(l->p, l->len);
	close(l->fd);
}

static bool log_bit(const struct log *l, uint64_t gpa)
{
	uint64_t p = gpa / PAGE;

	return __atomic_load_n(&l->p[p / 8], __ATOMIC_ACQUIRE) & (1u << (p % 8));
}

/* Read and clear the whole log as a VMM's migration pass does (64-bit
 * atomic exchanges). Returns: the bits that were set. */
static unsigned log_take(struct log *l)
{
	unsigned bits = 0;

	for (size_t i = 0; i + 8 <= l->len; i += 8)
		bits += (unsigned)__builtin_popcountll(
			__atomic_exchange_n((uint64_t *)(void *)(l->p + i), 0, __ATOMIC_ACQ_REL));
	return bits;
}

/* SetDirtyLog refused with @code and @needle; the NIC runs on with the
 * same worker and vnicd holds the fds it held before. */
static void expect_refused(const char *id, int fd, uint64_t size, uint64_t offset, int code,
			   const char *needle)
{
	struct vnic_nic_status before = st_one_nic(conn), after;
	int fds = st_fd_count(vd.pid);
	int rc = vnic_set_dirty_log(conn, id, fd, size, offset);

	ck_assert_msg(rc == code, "SetDirtyLog(%s, size %llu, offset %llu) returned %d, want %d: %s",
		      id, (unsigned long long)size, (unsigned long long)offset, rc, code,
		      vnic_last_error(conn));
	ck_assert_msg(strstr(vnic_last_error(conn), needle), "reason \"%s\" lacks \"%s\"",
		      vnic_last_error(conn), needle);
	ck_assert_int_eq(st_fd_count(vd.pid), fds);
	after = st_one_nic(conn);
	ck_assert_int_eq(after.state, VNIC_NIC_RUNNING);
	ck_assert_int_eq(after.pid, before.pid);
}

/* Post @n receive buffers (fresh slots), send @n frames from the host
 * end, wait for all of them in the guest. Returns: the first slot. */
static unsigned rx_frames(unsigned n, uint8_t fill)
{
	unsigned first = rx_next, got = 0;
	uint64_t one = 1;
	uint8_t frame[1500];

	ck_assert_uint_le(rx_next + n, 0x80000 / RXBUF_SIZE);
	for (unsigned i = 0; i < n; i++) {
		struct vring_drv_buf b = { .gpa = RXBUF_GPA + (uint64_t)(rx_next + i) * RXBUF_SIZE,
					   .len = RXBUF_SIZE, .writable = true };

		ck_assert_int_ge(vring_drv_add(&rx, &b, 1, (void *)(uintptr_t)(rx_next + i)), 0);
	}
	rx_next += n;
	vring_drv_publish(&rx);
	ck_assert_int_eq(write(g.kick[0], &one, sizeof(one)), (ssize_t)sizeof(one));
	memset(frame, fill, sizeof(frame));
	for (unsigned i = 0; i < n; i++)
		ck_assert_int_eq(send(g.backend[1], frame, sizeof(frame), 0), (ssize_t)sizeof(frame));
	for (int t = 0; t < 500 && got < n; t++) {
		void *cookie;
		uint32_t len;

		while (got < n && vring_drv_get_used(&rx, &cookie, &len) == 1) {
			ck_assert_uint_eq(len, HDR + sizeof(frame));
			got++;
		}
		if (got < n)
			usleep(10000);
	}
	ck_assert_uint_eq(got, n);
	return first;
}

/* Every page the worker wrote for frames [first, first + n) and the used
 * ring of rx0 is in @l; pages it did not write (TX buffers, a buffer not
 * yet used) are not. (tx0's used ring may be: the worker writes its
 * avail_event whatever the traffic, and a write is logged, changed or not.) */
static void expect_logged(const struct log *l, unsigned first, unsigned n)
{
	for (unsigned i = first; i < first + n; i++) {
		uint64_t gpa = RXBUF_GPA + (uint64_t)i * RXBUF_SIZE;

		ck_assert_msg(log_bit(l, gpa), "receive buffer %u at 0x%llx written, not logged", i,
			      (unsigned long long)gpa);
		ck_assert_msg(log_bit(l, gpa + HDR + 1500 - 1), "end of buffer %u not logged", i);
	}
	ck_assert_msg(log_bit(l, g.q[0].used_gpa), "rx0's used ring not logged");
	ck_assert_msg(!log_bit(l, TXBUF_GPA), "a page only the guest wrote is logged");
	ck_assert_msg(!log_bit(l, RXBUF_GPA + (uint64_t)(first + n) * RXBUF_SIZE + PAGE),
		      "a receive buffer never used is logged");
}

/* Wait (up to 10 s) for the NIC to run again on a worker other than old. */
static pid_t wait_new_worker(pid_t old)
{
	for (int i = 0; i < 1000; i++) {
		struct vnic_nic_status n = st_one_nic(conn);

		if (n.state == VNIC_NIC_RUNNING && n.pid > 0 && n.pid != old)
			return n.pid;
		usleep(10000);
	}
	ck_abort_msg("no new worker within 10 s after killing %d", (int)old);
	return 0;
}

/* ------------------------------------------------------ refusals */

START_TEST(bad_requests_change_nothing)
{
	uint64_t size = vnic_dirty_log_size(MEM_END);
	struct log good = log_new(size, true), unsealed = log_new(size, false);
	struct log shorter = log_new(size / 2, true), page = log_new(PAGE, true);
	struct vnic_conn *other;
	int efd = eventfd(0, EFD_CLOEXEC);

	ck_assert_uint_eq(size, 64); /* 2 MiB of guest physical addresses: 512 bits */
	ck_assert_int_ge(efd, 0);
	expect_refused("nobody", good.fd, size, 0, VNIC_STATUS_NOT_FOUND, "no NIC \"nobody\"");
	/* F3: the NIC of another connection is not there for this one. */
	other = st_connect(&vd);
	ck_assert_int_eq(vnic_set_dirty_log(other, "nic0", good.fd, size, 0),
			 VNIC_STATUS_NOT_FOUND);
	vnic_close(other);
	expect_refused("nic0", unsealed.fd, size, 0, VNIC_STATUS_INVALID_ARGUMENT,
		       "not sealed against shrinking");
	expect_refused("nic0", efd, size, 0, VNIC_STATUS_INVALID_ARGUMENT, "not a memfd");
	expect_refused("nic0", shorter.fd, size, 0, VNIC_STATUS_INVALID_ARGUMENT,
		       "beyond the memfd");
	expect_refused("nic0", good.fd, size, 8, VNIC_STATUS_INVALID_ARGUMENT, "beyond the memfd");
	/* Long enough a file, too small a log: pages above 1 MiB unlogged. */
	expect_refused("nic0", page.fd, 16, 0, VNIC_STATUS_INVALID_ARGUMENT, "covers guest memory");
	expect_refused("nic0", good.fd, UINT64_MAX, 0, VNIC_STATUS_INVALID_ARGUMENT, "outside");
	expect_refused("nic0", good.fd, (1ull << 30) + 8, 0, VNIC_STATUS_INVALID_ARGUMENT,
		       "outside");
	expect_refused("nic0", good.fd, size, UINT64_MAX - 8, VNIC_STATUS_INVALID_ARGUMENT,
		       "overflows");
	expect_refused("nic0", -1, 0, 4096, VNIC_STATUS_INVALID_ARGUMENT, "offset 4096 without");
	/* libvnic refuses what the wire layer would: nothing is sent. */
	ck_assert_int_eq(vnic_set_dirty_log(conn, "nic0", good.fd, 0, 0), -EINVAL);
	ck_assert_int_eq(vnic_set_dirty_log(conn, "nic0", -1, size, 0), -EINVAL);
	ck_assert_int_eq(vnic_set_dirty_log(conn, NULL, -1, 0, 0), -EINVAL);
	ck_assert_int_eq(st_one_nic(conn).state, VNIC_NIC_RUNNING);
	/* Nothing of the above set a log: frames leave it clear. */
	rx_frames(4, 0x11);
	ck_assert_uint_eq(log_take(&good), 0);
	ck_assert_int_eq(vnic_remove_nic(conn, "nic0", 3000, NULL), 0);
	ck_assert_int_eq(st_fd_count_settle(vd.pid, fds_idle), fds_idle);
	close(efd);
	log_free(&page);
	log_free(&shorter);
	log_free(&unsealed);
	log_free(&good);
}
END_TEST

/* A SetDirtyLog frame by hand, Hello'd on its own connection: @nfds fds
 * with @size, which vnicd's wire layer must hold to 1 with size > 0, else
 * 0. Expect INVALID_ARGUMENT naming the fd count. */
static void raw_set_dirty_log(int sock, uint64_t id, uint64_t size, const int *fds,
			      unsigned nfds)
{
	Vnic__Vmm__VmmMessage m, *r = NULL;
	Vnic__Vmm__Request req;
	Vnic__Vmm__SetDirtyLog sd;
	struct wire_fds rfds;
	struct wire_err err;
	static char nic[] = "nic0";
	uint8_t buf[256];
	size_t len;

	vnic__vmm__vmm_message__init(&m);
	vnic__vmm__request__init(&req);
	vnic__vmm__set_dirty_log__init(&sd);
	sd.id = nic;
	sd.size = size;
	req.request_id = id;
	req.version = WIRE_VMM_VERSION;
	req.body_case = VNIC__VMM__REQUEST__BODY_SET_DIRTY_LOG;
	req.set_dirty_log = &sd;
	m.msg_case = VNIC__VMM__VMM_MESSAGE__MSG_REQUEST;
	m.request = &req;
	len = protobuf_c_message_get_packed_size(&m.base);
	ck_assert_uint_le(len, sizeof(buf) - WIRE_HDR_LEN);
	protobuf_c_message_pack(&m.base, buf + WIRE_HDR_LEN);
	buf[0] = (uint8_t)(len >> 24);
	buf[1] = (uint8_t)(len >> 16);
	buf[2] = (uint8_t)(len >> 8);
	buf[3] = (uint8_t)len;
	ck_assert_int_eq(fdpass_send(sock, buf, WIRE_HDR_LEN + len, fds, nfds), 0);
	for (int t = 0; t < 50 && !r; t++) {
		struct pollfd p = { .fd = sock, .events = POLLIN };

		if (poll(&p, 1, 100) <= 0)
			continue;
		ck_assert_int_eq(wire_vmm_recv(sock, WIRE_PEER_SUPERVISOR, &r, &rfds, &err), 0);
		if (r->msg_case != VNIC__VMM__VMM_MESSAGE__MSG_REPLY)
			r = wire_vmm_free(r);
	}
	ck_assert_ptr_nonnull(r);
	ck_assert_uint_eq(r->reply->request_id, id);
	ck_assert_int_eq(r->reply->code, VNIC__VMM__STATUS__STATUS_INVALID_ARGUMENT);
	ck_assert_msg(strstr(r->reply->error, "fd"), "reason \"%s\" names no fd", r->reply->error);
	wire_vmm_free(r);
}

START_TEST(wire_holds_fd_counts)
{
	uint64_t size = vnic_dirty_log_size(MEM_END);
	struct log l = log_new(size, true);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0), fds;
	int two[2] = { l.fd, l.fd };

	ck_assert_int_ge(sock, 0);
	fds = st_fd_count(vd.pid);
	memcpy(sa.sun_path, vd.sock, strlen(vd.sock) + 1);
	ck_assert_int_eq(connect(sock, (struct sockaddr *)&sa, sizeof(sa)), 0);
	/* The fd count is checked before Hello matters. */
	raw_set_dirty_log(sock, 1, 0, &l.fd, 1);    /* an fd with size 0 */
	raw_set_dirty_log(sock, 2, size, NULL, 0);  /* size without an fd */
	raw_set_dirty_log(sock, 3, size, two, 2);   /* two fds */
	ck_assert_int_eq(st_fd_count(vd.pid), fds + 1); /* the connection's socket */
	close(sock);
	ck_assert_int_eq(st_fd_count_settle(vd.pid, fds), fds);
	ck_assert_int_eq(st_one_nic(conn).state, VNIC_NIC_RUNNING);
	ck_assert_int_eq(vnic_remove_nic(conn, "nic0", 3000, NULL), 0);
	ck_assert_int_eq(st_fd_count_settle(vd.pid, fds_idle), fds_idle);
	log_free(&l);
}
END_TEST

/* ------------------------------------------------ logging, as a VMM */

START_TEST(log_replace_stop_restart_remove)
{
	uint64_t size = vnic_dirty_log_size(MEM_END);
	struct log a = log_new(size, true), b = log_new(size + PAGE, true);
	struct vnic_remove_result rr;
	unsigned first;
	int fds_running = st_fd_count(vd.pid);
	pid_t pid = st_one_nic(conn).pid, pid2;

	/* On: every page the worker writes from the answer on. */
	ck_assert_int_eq(vnic_set_dirty_log(conn, "nic0", a.fd, size, 0), 0);
	ck_assert_str_eq(vnic_last_error(conn), "");
	ck_assert_int_eq(st_fd_count(vd.pid), fds_running + 1); /* vnicd keeps the log */
	first = rx_frames(8, 0x22);
	expect_logged(&a, first, 8);
	ck_assert_uint_ge(log_take(&a), 8 * RXBUF_SIZE / PAGE + 1);
	/* Read-and-cleared, the log fills again with the next writes only. */
	first = rx_frames(4, 0x33);
	expect_logged(&a, first, 4);
	(void)log_take(&a);

	/* Replaced, at an offset inside a larger memfd: the new one gets the
	 * writes, the old one nothing more. */
	ck_assert_int_eq(vnic_set_dirty_log(conn, "nic0", b.fd, size, PAGE), 0);
	ck_assert_int_eq(st_fd_count(vd.pid), fds_running + 1); /* the old one closed */
	{
		struct log view = { .fd = -1, .p = b.p + PAGE, .len = size };

		first = rx_frames(4, 0x44);
		expect_logged(&view, first, 4);
		ck_assert_uint_gt(log_take(&view), 0);
	}
	ck_assert_uint_eq(log_take(&a), 0);
	for (size_t i = 0; i < PAGE; i++)
		ck_assert_msg(b.p[i] == 0, "byte %zu before the log's offset written", i);

	/* Stopped: frames flow, nothing is logged, vnicd holds no log. */
	ck_assert_int_eq(vnic_set_dirty_log(conn, "nic0", -1, 0, 0), 0);
	ck_assert_int_eq(st_fd_count(vd.pid), fds_running);
	rx_frames(4, 0x55);
	ck_assert_uint_eq(log_take(&b), 0);
	/* Stopping twice is no error. */
	ck_assert_int_eq(vnic_set_dirty_log(conn, "nic0", -1, 0, 0), 0);
	ck_assert_int_eq(st_one_nic(conn).pid, pid); /* all of it live, no restart */

	/* On again, then the worker dies: its successor logs into the log. */
	ck_assert_int_eq(vnic_set_dirty_log(conn, "nic0", a.fd, size, 0), 0);
	ck_assert_int_eq(kill(pid, SIGKILL), 0);
	pid2 = wait_new_worker(pid);
	(void)log_take(&a); /* whatever the restart wrote (returned buffers) */
	first = rx_frames(4, 0x66);
	expect_logged(&a, first, 4);

	/* RemoveNic: after the reap; vnicd keeps no fd of the NIC or log. */
	(void)log_take(&a);
	ck_assert_int_eq(vnic_remove_nic(conn, "nic0", 3000, &rr), 0);
	ck_assert(!st_pid_alive(pid2));
	ck_assert_uint_eq(rr.nqueues, 2);
	ck_assert_int_eq(st_fd_count_settle(vd.pid, fds_idle), fds_idle);
	/* Gone: the id is unknown now. */
	ck_assert_int_eq(vnic_set_dirty_log(conn, "nic0", a.fd, size, 0), VNIC_STATUS_NOT_FOUND);
	ck_assert_int_eq(st_fd_count(vd.pid), fds_idle);
	log_free(&b);
	log_free(&a);
}
END_TEST

/* A NIC whose connection closes with a log set: torn down like any, its
 * log closed with it (no answer pending, no fd left). */
START_TEST(disconnect_with_log)
{
	uint64_t size = vnic_dirty_log_size(MEM_END);
	struct log a = log_new(size, true);
	pid_t pid = st_one_nic(conn).pid;

	ck_assert_int_eq(vnic_set_dirty_log(conn, "nic0", a.fd, size, 0), 0);
	rx_frames(2, 0x77);
	vnic_close(conn);
	conn = st_connect(&vd);
	for (int i = 0; i < 500 && st_nic_count(conn) > 0; i++)
		usleep(10000);
	ck_assert_int_eq(st_nic_count(conn), 0);
	ck_assert(!st_pid_alive(pid));
	/* Idle as at the start, less the first connection, plus this one. */
	ck_assert_int_eq(st_fd_count_settle(vd.pid, fds_idle), fds_idle);
	log_free(&a);
}
END_TEST

/* One frame from the backend's far end within @ms, or 0 bytes. */
static ssize_t backend_frame(uint8_t *buf, size_t len, int ms)
{
	struct pollfd p = { .fd = g.backend[1], .events = POLLIN };

	if (poll(&p, 1, ms) != 1)
		return 0;
	return recv(g.backend[1], buf, len, MSG_DONTWAIT);
}

static void assert_rarp(const uint8_t *f, ssize_t n)
{
	st_assert_rarp(f, n, g.cfg.mac);
}

/* The destination's announcement through the native API. */
START_TEST(announce_rarp)
{
	struct vnic_conn *other = st_connect(&vd);
	pid_t pid = st_one_nic(conn).pid;
	int fds = st_fd_count(vd.pid), sent = 0, rc = 0;
	uint8_t f[2048];
	ssize_t n;

	ck_assert_int_eq(vnic_announce(conn, "nic0"), 0);
	n = backend_frame(f, sizeof(f), 3000);
	assert_rarp(f, n);
	/* vnicd sends it, not the worker: a stopped worker changes nothing. */
	ck_assert_int_eq(kill(pid, SIGSTOP), 0);
	ck_assert_int_eq(vnic_announce(conn, "nic0"), 0);
	assert_rarp(f, backend_frame(f, sizeof(f), 3000));
	ck_assert_int_eq(kill(pid, SIGCONT), 0);

	/* Not this connection's NIC, or none: NOT_FOUND, nothing sent. */
	ck_assert_int_eq(vnic_announce(other, "nic0"), VNIC_STATUS_NOT_FOUND);
	ck_assert_int_eq(vnic_announce(conn, "nic9"), VNIC_STATUS_NOT_FOUND);
	ck_assert_int_eq(vnic_announce(conn, NULL), -EINVAL);
	ck_assert_int_eq(backend_frame(f, sizeof(f), 200), 0);

	/* The far end reads nothing until the socket takes no more: the
	 * next Announce is UNAVAILABLE with the reason (vnicd never blocks
	 * on it), and every frame sent before is a whole RARP. */
	for (int i = 0; i < 100000 && (rc = vnic_announce(conn, "nic0")) == 0; i++)
		sent++;
	ck_assert_int_eq(rc, VNIC_STATUS_UNAVAILABLE);
	ck_assert_msg(strstr(vnic_last_error(conn), "temporarily unavailable"), "error: %s",
		      vnic_last_error(conn));
	ck_assert_int_gt(sent, 0);
	for (int i = 0; i < sent; i++)
		assert_rarp(f, backend_frame(f, sizeof(f), 1000));
	ck_assert_int_eq(backend_frame(f, sizeof(f), 100), 0);
	ck_assert_int_eq(vnic_announce(conn, "nic0"), 0);
	assert_rarp(f, backend_frame(f, sizeof(f), 3000));

	/* The NIC ran on, in the same worker; vnicd kept no fd. */
	ck_assert_int_eq(st_one_nic(conn).pid, pid);
	rx_frames(2, 0x5a);
	vnic_close(other);
	ck_assert_int_eq(st_fd_count_settle(vd.pid, fds - 1), fds - 1);
}
END_TEST

static Suite *setdirtylog_suite(void)
{
	Suite *s = suite_create("setdirtylog");
	TCase *tc = tcase_create("vmm");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, bad_requests_change_nothing);
	tcase_add_test(tc, wire_holds_fd_counts);
	tcase_add_test(tc, log_replace_stop_restart_remove);
	tcase_add_test(tc, disconnect_with_log);
	tcase_add_test(tc, announce_rarp);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr;
	int failed;

	/* The worker enters its sandbox before READY, which takes root. */
	if (!st_worker_path() || geteuid() != 0) {
		fprintf(stderr, "check_setdirtylog: skipped: needs root and workers/vnicd-worker\n");
		return 77;
	}
	sr = srunner_create(setdirtylog_suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
