/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * check_vhost_user: vnicd's vhost-user back end, driven by a scripted
 * front end over a real unix socket to a real vnicd (its real worker, a
 * real tap in a private network namespace).
 *
 *  - messages: the handshake QEMU and DPDK send, then every request in
 *    good and bad forms (sizes, fd counts, indices, regions that overlap,
 *    overflow, are not mappable or are smaller than claimed, ring
 *    addresses outside the table or straddling two regions, requests not
 *    negotiated, unknown requests, bad framing); the answer each gets,
 *    that vnicd stays up, and that vnicd's fd count returns to its
 *    baseline after every connection (nothing leaks);
 *  - the data path: memfd guest memory, split rings driven by
 *    shm/vring_drv.c, frames both ways through the tap (UDP into and out
 *    of the namespace), GET_VRING_BASE answered only after the worker is
 *    reaped, a second SET_MEM_TABLE as a planned restart that loses and
 *    doubles nothing, disconnects at several points, endpoint removal;
 *  - live migration's dirty log (issue 14): SET_LOG_BASE in good and bad
 *    forms (C11, C12, F4), VHOST_F_LOG_ALL and VHOST_VRING_F_LOG turned on
 *    and off under traffic with no restart and nothing lost or doubled,
 *    and every guest page the worker wrote found in the log; SEND_RARP's
 *    announcement out of a tap endpoint and an AF_PACKET one.
 *
 * Needs root, /dev/net/tun and `ip netns` (else 77).
 */
#include "config.h"

#include <arpa/inet.h>
#include <check.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "inflight.h"
#include "libvnic.h"
#include "suptest.h"
#include "testutil.h"
#include "vhost_user_msg.h"
#include "virtio_net.h"
#include "vring_drv.h"

#define GPA 0x100000ull
#define MEM (1024u * 1024u)
#define EXTRA_PAGES 512u   /* after MEM in the memfd: for ADD_MEM_REG */
#define MEMFD_SIZE (MEM + EXTRA_PAGES * 4096u)
#define QS 256u
#define BUF_OFF 0x10000u
#define BUF_SIZE 2048u
#define F_PROTO (1ull << VU_F_PROTOCOL_FEATURES)
#define VU_F_TAP_OFFLOADS                                                                   \
	((1ull << VIRTIO_NET_F_CSUM) | (1ull << VIRTIO_NET_F_GUEST_CSUM) |                    \
	 (1ull << VIRTIO_NET_F_HOST_TSO4) | (1ull << VIRTIO_NET_F_HOST_TSO6) |                \
	 (1ull << VIRTIO_NET_F_GUEST_TSO4) | (1ull << VIRTIO_NET_F_GUEST_TSO6) |              \
	 (1ull << VIRTIO_NET_F_HOST_UFO) | (1ull << VIRTIO_NET_F_GUEST_UFO))
#define F_V1 (1ull << VIRTIO_F_VERSION_1)
#define PROTO_ALL ((1ull << VU_PROTO_MQ) | (1ull << VU_PROTO_REPLY_ACK) | \
		   (1ull << VU_PROTO_NET_MTU) | (1ull << VU_PROTO_CONFIGURE_MEM_SLOTS) | \
		   (1ull << VU_PROTO_STATUS) | (1ull << VU_PROTO_RARP) | \
		   (1ull << VU_PROTO_LOG_SHMFD) | (1ull << VU_PROTO_INFLIGHT_SHMFD))
#define F_LOG_ALL (1ull << VU_F_LOG_ALL)
#define FE_RINGS 4         /* the front end's rings: two queue pairs */
#define PAIRS_SERVED 8     /* an endpoint's queue pairs (VU_PAIRS_DEFAULT) */

static char netns[64];
static struct vnicd_proc vd;
static struct vnic_conn *ctl;
static char sockpath[100];
static const uint8_t guest_mac[6] = { 0x52, 0x54, 0x00, 0x12, 0x34, 0x56 };

static void msleep(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* ------------------------------------------------ the front end */

struct fe {
	int fd;
	int memfd;
	uint8_t *mem;            /* our mapping: its address is the "UVA" */
	int kick[FE_RINGS], call[FE_RINGS];
	struct vring_drv drv[FE_RINGS]; /* rings 0..3: two queue pairs (t_two_pairs) */
};

static uint64_t uva_of(const struct fe *f, uint64_t off)
{
	return (uint64_t)(uintptr_t)f->mem + off;
}

static uint64_t ring_off(int q, int part) /* part 0 desc, 1 avail, 2 used */
{
	return (uint64_t)q * 0x4000u + (uint64_t)part * 0x1000u;
}

/* A front end's connection to a server endpoint listening at path. */
static int fe_connect_to(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv = { 10, 0 };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	ck_assert_int_ge(fd, 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	ck_assert_msg(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0, "connect %s: %s",
		      path, strerror(errno));
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return fd;
}

static int fe_connect(void)
{
	return fe_connect_to(sockpath);
}

static void fe_send(int fd, uint32_t req, uint32_t flags, const void *p, uint32_t size,
		    const int *fds, unsigned nfds)
{
	struct vu_hdr h = { req, VU_VERSION | flags, size };
	struct iovec iov[2] = { { &h, sizeof(h) }, { (void *)(uintptr_t)p, size } };
	union {
		char buf[CMSG_SPACE(sizeof(int) * 253)]; /* SCM_MAX_FD */
		struct cmsghdr a;
	} cm;
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = size ? 2 : 1 };

	if (nfds) {
		struct cmsghdr *c;

		mh.msg_control = cm.buf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
	}
	ck_assert_int_eq(sendmsg(fd, &mh, MSG_NOSIGNAL), (ssize_t)(sizeof(h) + size));
}

/* One reply: returns its size, or -1 when the connection closed. */
static int fe_recv(int fd, uint32_t req, void *p, size_t max)
{
	struct vu_hdr h;
	ssize_t r = recv(fd, &h, sizeof(h), MSG_WAITALL);

	if (r != (ssize_t)sizeof(h))
		return -1;
	ck_assert_uint_eq(h.request, req);
	ck_assert_uint_eq(h.flags, VU_VERSION | VU_FLAG_REPLY);
	ck_assert_uint_le(h.size, max);
	if (h.size)
		ck_assert_int_eq(recv(fd, p, h.size, MSG_WAITALL), (ssize_t)h.size);
	return (int)h.size;
}

static uint64_t fe_get_u64(int fd, uint32_t req)
{
	uint64_t v = 0;

	fe_send(fd, req, 0, NULL, 0, NULL, 0);
	ck_assert_int_eq(fe_recv(fd, req, &v, sizeof(v)), 8);
	return v;
}

/* A request with NEED_REPLY: the u64 answer (0 ok), or -1: closed. */
static int64_t fe_ack(int fd, uint32_t req, const void *p, uint32_t size, const int *fds,
		      unsigned nfds)
{
	uint64_t v;

	fe_send(fd, req, VU_FLAG_NEED_REPLY, p, size, fds, nfds);
	if (fe_recv(fd, req, &v, sizeof(v)) != 8)
		return -1;
	return (int64_t)v;
}

static int64_t fe_ack_u64(int fd, uint32_t req, uint64_t v)
{
	return fe_ack(fd, req, &v, sizeof(v), NULL, 0);
}

static int64_t fe_ack_state(int fd, uint32_t req, uint32_t idx, uint32_t num)
{
	struct vu_vring_state st = { idx, num };

	return fe_ack(fd, req, &st, sizeof(st), NULL, 0);
}

static uint32_t fe_get_base(struct fe *f, uint32_t q);

static void fe_mem_init(struct fe *f, bool seal)
{
	memset(f, 0, sizeof(*f));
	f->fd = -1;
	f->memfd = memfd_create("fe-guest", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	ck_assert_int_ge(f->memfd, 0);
	ck_assert_int_eq(ftruncate(f->memfd, MEMFD_SIZE), 0);
	if (seal)
		ck_assert_int_eq(fcntl(f->memfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
	f->mem = mmap(NULL, MEMFD_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, f->memfd, 0);
	ck_assert_ptr_ne(f->mem, MAP_FAILED);
	for (int q = 0; q < FE_RINGS; q++) {
		f->kick[q] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		f->call[q] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		ck_assert_int_eq(vring_drv_init(&f->drv[q], QS, f->mem + ring_off(q, 0),
						f->mem + ring_off(q, 1), f->mem + ring_off(q, 2),
						false), 0);
	}
}

static void fe_mem_free(struct fe *f)
{
	for (int q = 0; q < FE_RINGS; q++) {
		vring_drv_fini(&f->drv[q]);
		close(f->kick[q]);
		close(f->call[q]);
	}
	munmap(f->mem, MEMFD_SIZE);
	close(f->memfd);
	if (f->fd >= 0)
		close(f->fd);
}

static int64_t fe_mem_table(struct fe *f)
{
	struct vu_mem_table t = { .nregions = 1 };

	t.r[0] = (struct vu_mem_region){ GPA, MEM, uva_of(f, 0), 0 };
	return fe_ack(f->fd, VU_SET_MEM_TABLE, &t, 8 + sizeof(t.r[0]), &f->memfd, 1);
}

static void fe_ring(struct fe *f, int q, uint16_t base)
{
	struct vu_vring_addr a = { .index = (uint32_t)q, .desc = uva_of(f, ring_off(q, 0)),
				   .avail = uva_of(f, ring_off(q, 1)),
				   .used = uva_of(f, ring_off(q, 2)) };
	uint64_t v = (uint64_t)q;

	ck_assert_int_eq(fe_ack_state(f->fd, VU_SET_VRING_NUM, (uint32_t)q, QS), 0);
	ck_assert_int_eq(fe_ack_state(f->fd, VU_SET_VRING_BASE, (uint32_t)q, base), 0);
	ck_assert_int_eq(fe_ack(f->fd, VU_SET_VRING_ADDR, &a, sizeof(a), NULL, 0), 0);
	ck_assert_int_eq(fe_ack(f->fd, VU_SET_VRING_KICK, &v, sizeof(v), &f->kick[q], 1), 0);
	ck_assert_int_eq(fe_ack(f->fd, VU_SET_VRING_CALL, &v, sizeof(v), &f->call[q], 1), 0);
}

/* QEMU's order: features, owner, protocol features, queue num, memory,
 * then the rings, then enable. */
static void fe_negotiate(struct fe *f)
{
	uint64_t feat;

	f->fd = fe_connect();
	feat = fe_get_u64(f->fd, VU_GET_FEATURES);
	ck_assert(feat & F_PROTO);
	ck_assert(feat & F_V1);
	ck_assert(!(feat & (1ull << VIRTIO_F_RING_PACKED)));
	ck_assert(feat & F_LOG_ALL); /* live migration (issue 14) */
	/* The back end is a tap: TSO and UFO both ways, as QEMU asks. */
	ck_assert_uint_eq(feat & VU_F_TAP_OFFLOADS, VU_F_TAP_OFFLOADS);
	ck_assert_uint_eq(fe_get_u64(f->fd, VU_GET_PROTOCOL_FEATURES), PROTO_ALL);
	fe_send(f->fd, VU_SET_PROTOCOL_FEATURES, 0, &(uint64_t){ PROTO_ALL }, 8, NULL, 0);
	/* Virtqueues, 2 per pair served: t_queue_num. */
	ck_assert_uint_eq(fe_get_u64(f->fd, VU_GET_QUEUE_NUM), 2 * PAIRS_SERVED);
	ck_assert_uint_eq(fe_get_u64(f->fd, VU_GET_MAX_MEM_SLOTS), 509);
	fe_send(f->fd, VU_SET_OWNER, 0, NULL, 0, NULL, 0);
	ck_assert_int_eq(fe_ack_u64(f->fd, VU_SET_FEATURES, F_PROTO | F_V1), 0);
}

/* Pair 0's rings set and enabled: its NIC starts. */
static void fe_rings_on(struct fe *f)
{
	for (int q = 0; q < 2; q++)
		fe_ring(f, q, 0);
	for (int q = 0; q < 2; q++)
		ck_assert_int_eq(fe_ack_state(f->fd, VU_SET_VRING_ENABLE, (uint32_t)q, 1), 0);
}

static void fe_start(struct fe *f)
{
	fe_negotiate(f);
	ck_assert_int_eq(fe_mem_table(f), 0);
	fe_rings_on(f);
}

/* ---------------------------------------------- vnicd and status */

static int ep_pid(const char *id, char *state, size_t len)
{
	struct vnic_status *st = NULL;
	int pid = -1;

	ck_assert_int_eq(vnic_status(ctl, &st), 0);
	for (unsigned i = 0; i < st->nnics; i++)
		if (!strcmp(st->nics[i].id, id)) {
			pid = st->nics[i].pid;
			if (state)
				snprintf(state, len, "%s", st->nics[i].vhost_state);
		}
	vnic_status_free(st);
	return pid;
}

static int ep_policy(const char *id)
{
	struct vnic_status *st = NULL;
	int mode = -1;

	ck_assert_int_eq(vnic_status(ctl, &st), 0);
	for (unsigned i = 0; i < st->nnics; i++)
		if (!strcmp(st->nics[i].id, id))
			mode = (int)st->nics[i].policy.mode;
	vnic_status_free(st);
	return mode;
}

/* An endpoint's counters over its life (issue 19): they only grow across
 * worker sessions (planned restarts, crashes, reconnects), and tx0 has at
 * least the frames the guest sent so far. *prev: the last reading. */
struct ep_counters {
	uint64_t packets[2], bytes[2];
};

static void read_counters(const char *id, struct ep_counters *now)
{
	struct vnic_status *st = NULL;

	memset(now, 0, sizeof(*now));
	ck_assert_int_eq(vnic_status(ctl, &st), 0);
	for (unsigned i = 0; i < st->nnics; i++) {
		const struct vnic_nic_status *n = &st->nics[i];

		for (unsigned j = 0; !strcmp(n->id, id) && j < n->nqueues && j < 2; j++) {
			now->packets[j] = n->queues[j].packets;
			now->bytes[j] = n->queues[j].bytes;
		}
	}
	vnic_status_free(st);
}

/* The worker counts a frame just after it wrote it to the tap: a reading
 * may lag the frames seen in the netns by a moment, never go down. */
static void expect_counters(const char *id, uint64_t tx_frames, struct ep_counters *prev,
			    const char *when)
{
	struct ep_counters now;

	for (int tries = 0;; tries++) {
		read_counters(id, &now);
		for (int q = 0; q < 2; q++)
			ck_assert_msg(now.packets[q] >= prev->packets[q] &&
				      now.bytes[q] >= prev->bytes[q],
				      "%s: queue %d went down: %llu packets %llu bytes, were %llu %llu",
				      when, q, (unsigned long long)now.packets[q],
				      (unsigned long long)now.bytes[q],
				      (unsigned long long)prev->packets[q],
				      (unsigned long long)prev->bytes[q]);
		*prev = now;
		if (now.packets[1] >= tx_frames)
			return;
		ck_assert_msg(tries < 300, "%s: tx0 counts %llu frames, %llu sent", when,
			      (unsigned long long)now.packets[1], (unsigned long long)tx_frames);
		msleep(10);
	}
}

static int wait_worker(const char *id)
{
	for (int i = 0; i < 500; i++) {
		int pid = ep_pid(id, NULL, 0);

		if (pid > 0)
			return pid;
		msleep(10);
	}
	ck_abort_msg("no worker for %s within 5 s (log %s)", id, vd.log);
	return -1;
}

static void wait_no_worker(const char *id)
{
	for (int i = 0; i < 700; i++) {
		if (ep_pid(id, NULL, 0) == 0)
			return;
		msleep(10);
	}
	ck_abort_msg("worker of %s still there after 7 s", id);
}

static bool have_prereqs(void)
{
	return geteuid() == 0 && access("/dev/net/tun", R_OK | W_OK) == 0 &&
	       system("ip netns list >/dev/null 2>&1") == 0;
}

static void add_endpoint(const char *id, const char *tap, bool server)
{
	struct vnic_vhost_user_config cfg = { .id = id, .path = sockpath, .server = server,
					      .tap_name = tap, .netns = netns };
	char ifname[32], err[256];
	int rc = vnic_add_vhost_user(ctl, &cfg, ifname, sizeof(ifname), err, sizeof(err));

	ck_assert_msg(rc == 0, "add %s: %d %s", id, rc, err);
	ck_assert_str_eq(ifname, tap);
}

static int base_fds;

static void setup(void)
{
	if (!have_prereqs())
		return;
	tu_netns_add(netns, sizeof(netns));
	st_vnicd_start(&vd, st_worker_path(), "--state-dir", "", NULL);
	ck_assert_int_lt(snprintf(sockpath, sizeof(sockpath), "%s/vu.sock", vd.dir), (int)sizeof(sockpath));
	ctl = st_connect(&vd);
	base_fds = st_fd_count(vd.pid);
	add_endpoint("vu0", "vut0", true);
}

static void teardown(void)
{
	if (!have_prereqs())
		return;
	vnic_close(ctl);
	st_vnicd_stop(&vd);
	st_rmdir(vd.dir);
	ck_assert_int_eq(tu_netns_del(netns), 0);
}

#define NEED_PREREQS() do { if (!have_prereqs()) return; } while (0)

/* vnicd's fds, once quiet, are what they were with the endpoint alone. */
static void assert_no_leak(int want)
{
	int n = st_fd_count_settle(vd.pid, want);

	ck_assert_msg(n == want, "vnicd has %d fds, %d expected (log %s)", n, want, vd.log);
}

/* Does vnicd's log (--log-level debug, suptest) hold line? Up to 1 s:
 * the log is written as vnicd goes. */
static bool log_has(const char *line)
{
	for (int i = 0; i < 100; i++) {
		static char buf[1 << 20];
		FILE *fp = fopen(vd.log, "r");
		size_t n = fp ? fread(buf, 1, sizeof(buf) - 1, fp) : 0;

		if (fp)
			fclose(fp);
		buf[n] = '\0';
		if (strstr(buf, line))
			return true;
		usleep(10000);
	}
	return false;
}

/* ---------------------------------------------------------- tests */

/* The handshake, a worker on the rings, GET_VRING_BASE after its reap. */
START_TEST(t_handshake_and_unplug)
{
	struct fe f;
	struct vu_vring_state st = { 0, 0 };
	int with_ep, pid;

	NEED_PREREQS();
	with_ep = st_fd_count(vd.pid);
	fe_mem_init(&f, true);
	fe_start(&f);
	pid = wait_worker("vu0");
	ck_assert(st_pid_alive(pid));
	fe_send(f.fd, VU_GET_VRING_BASE, 0, &st, sizeof(st), NULL, 0);
	ck_assert_int_eq(fe_recv(f.fd, VU_GET_VRING_BASE, &st, sizeof(st)), 8);
	/* The unplug guarantee: the worker was reaped before the answer. */
	ck_assert_msg(!st_pid_alive(pid), "worker %d alive at GET_VRING_BASE's answer", pid);
	ck_assert_uint_eq(st.index, 0);
	ck_assert_uint_eq(st.num, 0);
	st = (struct vu_vring_state){ 1, 0 };
	fe_send(f.fd, VU_SET_STATUS, 0, &(uint64_t){ 0xf }, 8, NULL, 0);
	ck_assert_uint_eq(fe_get_u64(f.fd, VU_GET_STATUS), 0xf);
	fe_send(f.fd, VU_GET_VRING_BASE, 0, &st, sizeof(st), NULL, 0);
	ck_assert_int_eq(fe_recv(f.fd, VU_GET_VRING_BASE, &st, sizeof(st)), 8);
	ck_assert_uint_eq(st.index, 1);
	/* The debug trace of the stop (the migration timeline of
	 * doc/benchmarks.md): the request, its deferral, the answer. */
	ck_assert_msg(log_has("vhost-user vu0: <- GET_VRING_BASE size 8 fds 0 flags 0x1 arg 0x0\n"),
		      "no GET_VRING_BASE request line in %s", vd.log);
	ck_assert_msg(log_has("vhost-user vu0: GET_VRING_BASE waits"), "no deferral line in %s",
		      vd.log);
	ck_assert_msg(log_has("-> GET_VRING_BASE answer size 8\n"), "no answer line in %s", vd.log);
	fe_mem_free(&f);
	assert_no_leak(with_ep);
	ck_assert_int_eq(st_child_count(vd.pid), 0);
}
END_TEST

struct bad_case {
	const char *what;
	void (*run)(struct fe *f);
};

/* Each sends one bad message on a negotiated connection with memory set;
 * the answer must be the failure u64 and the connection must go on. */
static void expect_fail(struct fe *f, int64_t got, const char *what)
{
	ck_assert_msg(got > 0, "%s: answer %lld, a failure expected", what, (long long)got);
	/* Still talking. */
	ck_assert(fe_get_u64(f->fd, VU_GET_FEATURES) & F_V1);
}

static void bad_region(struct fe *f, struct vu_mem_region r, int fd, const char *what)
{
	struct vu_mem_table t = { .nregions = 1 };

	t.r[0] = r;
	expect_fail(f, fe_ack(f->fd, VU_SET_MEM_TABLE, &t, 8 + sizeof(r), &fd, 1), what);
}

START_TEST(t_bad_messages)
{
	struct fe f, other;
	int with_ep, pipefd[2], small, evfd, other_pid;
	struct vu_mem_table t = { .nregions = 2 };
	struct vu_vring_addr a;
	char path0[sizeof(sockpath)];
	uint64_t v;

	NEED_PREREQS();
	/* Another endpoint with a running worker must not notice. */
	memcpy(path0, sockpath, sizeof(path0));
	ck_assert_int_lt(snprintf(sockpath, sizeof(sockpath), "%s/vu1.sock", vd.dir),
			 (int)sizeof(sockpath));
	add_endpoint("vu1", "vut1", true);
	fe_mem_init(&other, true);
	fe_start(&other);
	other_pid = wait_worker("vu1");
	memcpy(sockpath, path0, sizeof(path0));
	with_ep = st_fd_count(vd.pid);
	fe_mem_init(&f, false); /* unsealed, as DPDK passes it */
	fe_negotiate(&f);

	/* Unknown and not-offered requests: the failure answer. */
	expect_fail(&f, fe_ack(f.fd, 99, NULL, 0, NULL, 0), "unknown request 99");
	expect_fail(&f, fe_ack(f.fd, VU_SET_LOG_BASE, &(uint64_t){ 0 }, 8, NULL, 0), "SET_LOG_BASE");
	/* Features not offered; packed rings; no VERSION_1. */
	expect_fail(&f, fe_ack_u64(f.fd, VU_SET_FEATURES, F_V1 | (1ull << VIRTIO_F_RING_PACKED)),
		    "packed ring");
	expect_fail(&f, fe_ack_u64(f.fd, VU_SET_FEATURES, 1ull << VIRTIO_NET_F_MRG_RXBUF),
		    "legacy device");
	expect_fail(&f, fe_ack_u64(f.fd, VU_SET_PROTOCOL_FEATURES, 1ull << 11), "HOST_NOTIFIER");
	/* Sizes and fd counts against the table. */
	expect_fail(&f, fe_ack(f.fd, VU_SET_FEATURES, "abcd", 4, NULL, 0), "short payload");
	evfd = eventfd(0, EFD_CLOEXEC);
	expect_fail(&f, fe_ack(f.fd, VU_SET_FEATURES, &(uint64_t){ F_V1 }, 8, &evfd, 1),
		    "an fd where none belongs");
	/* Memory tables. */
	t.r[0] = (struct vu_mem_region){ GPA, MEM, uva_of(&f, 0), 0 };
	t.r[1] = (struct vu_mem_region){ GPA + MEM, MEM, uva_of(&f, 0) + MEM, 0 };
	expect_fail(&f, fe_ack(f.fd, VU_SET_MEM_TABLE, &t, 8 + 2 * sizeof(t.r[0]), &f.memfd, 1),
		    "2 regions, 1 fd");
	t.r[1] = (struct vu_mem_region){ GPA + 4096, 4096, uva_of(&f, 0) + 2 * MEM, 0 };
	{
		int two[2] = { f.memfd, f.memfd };

		expect_fail(&f, fe_ack(f.fd, VU_SET_MEM_TABLE, &t, 8 + 2 * sizeof(t.r[0]), two, 2),
			    "regions overlapping in gpa");
	}
	bad_region(&f, (struct vu_mem_region){ GPA, 0, uva_of(&f, 0), 0 }, f.memfd, "size 0");
	bad_region(&f, (struct vu_mem_region){ UINT64_MAX - 10, MEM, uva_of(&f, 0), 0 }, f.memfd,
		   "gpa overflow");
	bad_region(&f, (struct vu_mem_region){ GPA, MEM, uva_of(&f, 0), UINT64_MAX - 5 }, f.memfd,
		   "offset overflow");
	bad_region(&f, (struct vu_mem_region){ GPA, 4 * MEM, uva_of(&f, 0), 0 }, f.memfd,
		   "region larger than its fd");
	bad_region(&f, (struct vu_mem_region){ GPA, MEM, uva_of(&f, 0), 0 }, evfd,
		   "an eventfd as memory");
	ck_assert_int_eq(pipe2(pipefd, O_CLOEXEC), 0);
	bad_region(&f, (struct vu_mem_region){ GPA, MEM, uva_of(&f, 0), 0 }, pipefd[0],
		   "a pipe as memory");
	{
		char p[64];
		int ro;

		/* Read-only memory and a table not on page boundaries. */
		snprintf(p, sizeof(p), "/proc/self/fd/%d", f.memfd);
		ro = open(p, O_RDONLY | O_CLOEXEC);
		ck_assert_int_ge(ro, 0);
		bad_region(&f, (struct vu_mem_region){ GPA, MEM, uva_of(&f, 0), 0 }, ro,
			   "a read-only fd");
		close(ro);
		bad_region(&f, (struct vu_mem_region){ GPA + 8, MEM - 8, uva_of(&f, 8), 8 }, f.memfd,
			   "not page-aligned");
	}
	small = memfd_create("small", MFD_CLOEXEC);
	ck_assert_int_eq(ftruncate(small, 4096), 0);
	bad_region(&f, (struct vu_mem_region){ GPA, 8192, uva_of(&f, 0), 0 }, small,
		   "memfd smaller than the region");
	/* Now a good table, split in two regions at 512 KiB. */
	t.r[0] = (struct vu_mem_region){ GPA, MEM / 2, uva_of(&f, 0), 0 };
	t.r[1] = (struct vu_mem_region){ GPA + MEM / 2, MEM / 2, uva_of(&f, MEM / 2), MEM / 2 };
	{
		int two[2] = { f.memfd, f.memfd };

		ck_assert_int_eq(fe_ack(f.fd, VU_SET_MEM_TABLE, &t, 8 + 2 * sizeof(t.r[0]), two, 2),
				 0);
	}
	/* Rings: index, size, addresses. */
	expect_fail(&f, fe_ack_state(f.fd, VU_SET_VRING_NUM, 2 * PAIRS_SERVED, QS),
		    "the ring past the last pair");
	expect_fail(&f, fe_ack_state(f.fd, VU_SET_VRING_NUM, 0x10000, QS), "ring 0x10000");
	expect_fail(&f, fe_ack_state(f.fd, VU_SET_VRING_NUM, 0, 3), "size 3");
	expect_fail(&f, fe_ack_state(f.fd, VU_SET_VRING_NUM, 0, 65536), "size 65536");
	expect_fail(&f, fe_ack_state(f.fd, VU_SET_VRING_BASE, 0, 0x10000), "base 0x10000");
	ck_assert_int_eq(fe_ack_state(f.fd, VU_SET_VRING_NUM, 0, QS), 0);
	a = (struct vu_vring_addr){ .index = 0, .desc = 0x1000, .avail = 0x3000, .used = 0x5000 };
	expect_fail(&f, fe_ack(f.fd, VU_SET_VRING_ADDR, &a, sizeof(a), NULL, 0),
		    "ring outside every region");
	a = (struct vu_vring_addr){ .index = 0, .desc = uva_of(&f, MEM / 2 - 1024),
				    .avail = uva_of(&f, ring_off(0, 1)),
				    .used = uva_of(&f, ring_off(0, 2)) };
	expect_fail(&f, fe_ack(f.fd, VU_SET_VRING_ADDR, &a, sizeof(a), NULL, 0),
		    "descriptor table straddling two regions");
	a.desc = uva_of(&f, 8);
	expect_fail(&f, fe_ack(f.fd, VU_SET_VRING_ADDR, &a, sizeof(a), NULL, 0), "misaligned desc");
	a.desc = uva_of(&f, 0);
	a.flags = 1;
	expect_fail(&f, fe_ack(f.fd, VU_SET_VRING_ADDR, &a, sizeof(a), NULL, 0), "logging");
	/* Kick/call fds. */
	v = 0;
	expect_fail(&f, fe_ack(f.fd, VU_SET_VRING_KICK, &v, 8, &pipefd[1], 1), "pipe as kick fd");
	v = VU_VRING_NOFD;
	expect_fail(&f, fe_ack(f.fd, VU_SET_VRING_KICK, &v, 8, &evfd, 1), "NOFD with an fd");
	v = 1u << 9;
	expect_fail(&f, fe_ack(f.fd, VU_SET_VRING_CALL, &v, 8, &evfd, 1), "unknown bits");
	/* Memory slots. */
	{
		struct vu_mem_single s = { 0, { GPA + MEM / 4, 4096, uva_of(&f, 0) + 4 * MEM, 0 } };

		expect_fail(&f, fe_ack(f.fd, VU_ADD_MEM_REG, &s, sizeof(s), &f.memfd, 1),
			    "ADD_MEM_REG overlapping");
		s.r = (struct vu_mem_region){ GPA + 8 * MEM, 4096, uva_of(&f, 0) + 8 * MEM, 0 };
		ck_assert_int_eq(fe_ack(f.fd, VU_ADD_MEM_REG, &s, sizeof(s), &f.memfd, 1), 0);
		/* QEMU 7.2 sends each change once per queue pair: the same
		 * region in the same file again is a no-op; in another file,
		 * an overlap. */
		ck_assert_int_eq(fe_ack(f.fd, VU_ADD_MEM_REG, &s, sizeof(s), &f.memfd, 1), 0);
		{
			int other_fd = memfd_create("other", MFD_CLOEXEC);

			ck_assert_int_eq(ftruncate(other_fd, (off_t)(16 * MEM)), 0);
			expect_fail(&f, fe_ack(f.fd, VU_ADD_MEM_REG, &s, sizeof(s), &other_fd, 1),
				    "ADD_MEM_REG of the same range in another file");
			close(other_fd);
		}
		ck_assert_int_eq(fe_ack(f.fd, VU_REM_MEM_REG, &s, sizeof(s), NULL, 0), 0);
		/* ... and the second removal finds it gone: also a no-op. */
		ck_assert_int_eq(fe_ack(f.fd, VU_REM_MEM_REG, &s, sizeof(s), NULL, 0), 0);
	}
	expect_fail(&f, fe_ack_u64(f.fd, VU_NET_SET_MTU, 20), "MTU 20");
	ck_assert_int_eq(fe_ack_u64(f.fd, VU_NET_SET_MTU, 9000), 0);
	expect_fail(&f, fe_ack_u64(f.fd, VU_SET_STATUS, 0x100), "status 0x100");
	/* Nothing started on a half-configured device. */
	ck_assert_int_eq(ep_pid("vu0", NULL, 0), 0);
	close(f.fd);
	f.fd = -1;
	assert_no_leak(with_ep);

	/* Fatal ones: the connection closes, vnicd stays. */
	f.fd = fe_connect();
	fe_send(f.fd, VU_GET_QUEUE_NUM, 0, NULL, 0, NULL, 0); /* MQ not negotiated */
	ck_assert_int_eq(fe_recv(f.fd, VU_GET_QUEUE_NUM, &v, 8), -1);
	close(f.fd);
	f.fd = fe_connect();
	{
		struct vu_hdr h = { VU_SET_FEATURES, VU_VERSION, 100000 };

		ck_assert_int_eq(send(f.fd, &h, sizeof(h), MSG_NOSIGNAL), (ssize_t)sizeof(h));
		ck_assert_int_eq(fe_recv(f.fd, VU_SET_FEATURES, &v, 8), -1);
	}
	close(f.fd);
	f.fd = fe_connect();
	{
		int many[9];

		for (int i = 0; i < 9; i++)
			many[i] = evfd;
		fe_send(f.fd, VU_SET_VRING_CALL, VU_FLAG_NEED_REPLY, &(uint64_t){ 0 }, 8, many, 9);
		ck_assert_int_eq(fe_recv(f.fd, VU_SET_VRING_CALL, &v, 8), -1);
	}
	close(f.fd);
	f.fd = fe_connect();
	{
		/* 250 fds in one message (the kernel passes up to 253): the
		 * connection closes and every one of them is closed too. The
		 * receive buffer has room for more fds than a message may
		 * carry, so this once leaked the one past VU_MAX_FDS + 1. */
		int many[250];

		for (int i = 0; i < 250; i++)
			many[i] = evfd;
		fe_send(f.fd, VU_SET_VRING_KICK, VU_FLAG_NEED_REPLY, &(uint64_t){ 0 }, 8, many, 250);
		ck_assert_int_eq(fe_recv(f.fd, VU_SET_VRING_KICK, &v, 8), -1);
	}
	close(f.fd);
	f.fd = fe_connect();
	fe_send(f.fd, VU_GET_FEATURES, VU_FLAG_REPLY, NULL, 0, NULL, 0); /* a "reply" to vnicd */
	ck_assert_int_eq(fe_recv(f.fd, VU_GET_FEATURES, &v, 8), -1);
	close(f.fd);
	f.fd = -1;
	close(pipefd[0]);
	close(pipefd[1]);
	close(small);
	close(evfd);
	fe_mem_free(&f);
	assert_no_leak(with_ep);
	ck_assert(st_pid_alive(vd.pid));
	{
		char state[32];

		ck_assert_int_eq(ep_pid("vu0", state, sizeof(state)), 0);
		ck_assert_str_eq(state, "listening");
		/* The other endpoint: the same worker, running, answering. */
		ck_assert_int_eq(ep_pid("vu1", state, sizeof(state)), other_pid);
		ck_assert_str_eq(state, "running");
		ck_assert(fe_get_u64(other.fd, VU_GET_FEATURES) & F_V1);
	}
	fe_mem_free(&other);
	ck_assert_int_eq(vnic_remove_endpoint(ctl, "vu1", 0, NULL), 0);
	ck_assert(!st_pid_alive(other_pid));
}
END_TEST

static uint32_t fe_get_base(struct fe *f, uint32_t q)
{
	struct vu_vring_state st = { q, 0 };

	fe_send(f->fd, VU_GET_VRING_BASE, 0, &st, sizeof(st), NULL, 0);
	ck_assert_int_eq(fe_recv(f->fd, VU_GET_VRING_BASE, &st, sizeof(st)), 8);
	ck_assert_uint_eq(st.index, q);
	return st.num;
}

/* SET_VRING_BASE is the front end's word: a worker starts there even when
 * the used ring in guest memory is behind it (chains an earlier back end
 * had in flight). Two exceptions resume at used->idx: a base of 0 on a
 * ring that has moved (DPDK virtio-user, which always sends 0), and a
 * used->idx ahead of the base by at most the queue size (QEMU read the
 * used index when vnicd died, while its worker still completed chains:
 * taking them again would send a TX frame twice and move used->idx
 * back). Further ahead than a queue cannot be a ring: the base stays.
 * avail->idx is set to the expected start, so the worker finds no work
 * either way and its final index (GET_VRING_BASE) is where it started. */
START_TEST(t_base_honoured)
{
	static const struct {
		uint16_t base, used, expect;
	} cases[] = { { 5, 7, 7 }, { 0, 7, 7 }, { 9, 0, 9 }, { 9, 9 + QS, 9 + QS },
		      { 9, 9 + QS + 1, 9 }, { 65530, 4, 4 } };
	int with_ep;

	NEED_PREREQS();
	with_ep = st_fd_count(vd.pid);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct fe f;

		fe_mem_init(&f, true);
		for (int q = 0; q < 2; q++) {
			uint16_t *avail_idx = (uint16_t *)(void *)(f.mem + ring_off(q, 1) + 2);
			uint16_t *used_idx = (uint16_t *)(void *)(f.mem + ring_off(q, 2) + 2);

			*avail_idx = cases[i].expect;
			*used_idx = cases[i].used;
		}
		fe_negotiate(&f);
		ck_assert_int_eq(fe_mem_table(&f), 0);
		for (int q = 0; q < 2; q++)
			fe_ring(&f, q, cases[i].base);
		for (int q = 0; q < 2; q++)
			ck_assert_int_eq(fe_ack_state(f.fd, VU_SET_VRING_ENABLE, (uint32_t)q, 1), 0);
		wait_worker("vu0");
		for (uint32_t q = 0; q < 2; q++) {
			uint32_t got = fe_get_base(&f, q);

			ck_assert_msg(got == cases[i].expect, "base %u, used->idx %u: ring %u "
				      "resumed at %u, %u expected", cases[i].base, cases[i].used, q,
				      got, cases[i].expect);
		}
		fe_mem_free(&f);
		wait_no_worker("vu0");
		assert_no_leak(with_ep);
	}
}
END_TEST

/* RESET_OWNER disables and stops every ring and keeps the device; SET_STATUS
 * 0 stops the device too and clears DEVICE_NEEDS_RESET, which shows in
 * GET_STATUS once the guest broke a queue. */
START_TEST(t_reset_semantics)
{
	struct fe f;
	struct vring_drv_buf bad = { 0xdead00000ull, 100, false };
	uint64_t st = 0;
	int with_ep, pid, pid2, errfd;
	uint64_t v;

	NEED_PREREQS();
	with_ep = st_fd_count(vd.pid);
	fe_mem_init(&f, true);
	fe_start(&f);
	pid = wait_worker("vu0");
	/* TX's error eventfd, sent once as QEMU does at device init: it must
	 * outlive SET_STATUS 0 (below). */
	errfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	ck_assert_int_ge(errfd, 0);
	v = 1;
	ck_assert_int_eq(fe_ack(f.fd, VU_SET_VRING_ERR, &v, sizeof(v), &errfd, 1), 0);
	/* RESET_OWNER: answered (REPLY_ACK) after the worker's reap ... */
	ck_assert_int_eq(fe_ack(f.fd, VU_RESET_OWNER, NULL, 0, NULL, 0), 0);
	ck_assert_msg(!st_pid_alive(pid), "worker %d alive at RESET_OWNER's answer", pid);
	ck_assert_int_eq(ep_pid("vu0", NULL, 0), 0);
	/* ... the rings are disabled: enabling alone starts nothing (a
	 * stopped ring needs a kick, as after GET_VRING_BASE) ... */
	for (int q = 0; q < 2; q++)
		ck_assert_int_eq(fe_ack_state(f.fd, VU_SET_VRING_ENABLE, (uint32_t)q, 1), 0);
	ck_assert_int_eq(ep_pid("vu0", NULL, 0), 0);
	/* ... and the owner, features, memory table and layout stayed: new
	 * kick fds alone bring a worker back. */
	for (int q = 0; q < 2; q++) {
		v = (uint64_t)q;
		ck_assert_int_eq(fe_ack(f.fd, VU_SET_VRING_KICK, &v, sizeof(v), &f.kick[q], 1), 0);
	}
	pid2 = wait_worker("vu0");
	ck_assert_int_ne(pid2, pid);

	/* The guest breaks the TX queue (a buffer outside its memory):
	 * DEVICE_NEEDS_RESET joins the driver's status bits. */
	fe_send(f.fd, VU_SET_STATUS, 0, &(uint64_t){ 0xf }, 8, NULL, 0);
	ck_assert_uint_eq(fe_get_u64(f.fd, VU_GET_STATUS), 0xf);
	ck_assert_int_ge(vring_drv_add(&f.drv[1], &bad, 1, NULL), 0);
	vring_drv_publish(&f.drv[1]);
	ck_assert_int_eq(write(f.kick[1], &(uint64_t){ 1 }, 8), 8);
	for (int i = 0; i < 500 && !(st & VU_STATUS_NEEDS_RESET); i++) {
		st = fe_get_u64(f.fd, VU_GET_STATUS);
		msleep(10);
	}
	ck_assert_uint_eq(st, 0xf | VU_STATUS_NEEDS_RESET);
	ck_assert_int_eq(read(errfd, &v, sizeof(v)), (ssize_t)sizeof(v)); /* signalled */

	/* SET_STATUS 0 (QEMU's device stop): answered after the reap, the
	 * status and NEEDS_RESET cleared. */
	pid2 = ep_pid("vu0", NULL, 0);
	ck_assert_int_eq(fe_ack_u64(f.fd, VU_SET_STATUS, 0), 0);
	if (pid2 > 0)
		ck_assert_msg(!st_pid_alive(pid2), "worker %d alive at SET_STATUS 0's answer", pid2);
	ck_assert_uint_eq(fe_get_u64(f.fd, VU_GET_STATUS), 0);
	/* The device starts again as QEMU 7.2 starts it after a driver
	 * reload: features, the rings from index 0, enable, and no memory
	 * table (with CONFIGURE_MEM_SLOTS it sends only changes to it). */
	vring_drv_fini(&f.drv[0]);
	vring_drv_fini(&f.drv[1]);
	for (int q = 0; q < 2; q++)
		ck_assert_int_eq(vring_drv_init(&f.drv[q], QS, f.mem + ring_off(q, 0),
						f.mem + ring_off(q, 1), f.mem + ring_off(q, 2), false), 0);
	ck_assert_int_eq(fe_ack_u64(f.fd, VU_SET_FEATURES, F_PROTO | F_V1), 0);
	for (int q = 0; q < 2; q++)
		fe_ring(&f, q, 0);
	for (int q = 0; q < 2; q++)
		ck_assert_int_eq(fe_ack_state(f.fd, VU_SET_VRING_ENABLE, (uint32_t)q, 1), 0);
	ck_assert_int_ne(wait_worker("vu0"), pid2);
	/* The error eventfd kept across the reset still reports a break. */
	ck_assert_int_ge(vring_drv_add(&f.drv[1], &bad, 1, NULL), 0);
	vring_drv_publish(&f.drv[1]);
	ck_assert_int_eq(write(f.kick[1], &(uint64_t){ 1 }, 8), 8);
	{
		struct pollfd p = { .fd = errfd, .events = POLLIN };

		ck_assert_msg(poll(&p, 1, 5000) == 1, "no error eventfd signal after the reset");
	}
	fe_mem_free(&f);
	wait_no_worker("vu0");
	assert_no_leak(with_ep);
	close(errfd);
}
END_TEST

/* QEMU stops a device (VM stop, migration switch-over, driver reset)
 * with SET_STATUS 0 and then GET_VRING_BASE per ring, and sends the
 * answers to the destination or back at the next start: SET_STATUS 0 must
 * keep each ring's index. Then a start without a memory table runs. */
START_TEST(t_status_zero_keeps_bases)
{
	const uint16_t idx = 5;
	struct fe f;
	int with_ep, pid;

	NEED_PREREQS();
	with_ep = st_fd_count(vd.pid);
	fe_mem_init(&f, true);
	for (int q = 0; q < 2; q++) {
		*(uint16_t *)(void *)(f.mem + ring_off(q, 1) + 2) = idx; /* avail->idx */
		*(uint16_t *)(void *)(f.mem + ring_off(q, 2) + 2) = idx; /* used->idx */
	}
	fe_negotiate(&f);
	ck_assert_int_eq(fe_mem_table(&f), 0);
	for (int q = 0; q < 2; q++)
		fe_ring(&f, q, idx);
	for (int q = 0; q < 2; q++)
		ck_assert_int_eq(fe_ack_state(f.fd, VU_SET_VRING_ENABLE, (uint32_t)q, 1), 0);
	pid = wait_worker("vu0");
	ck_assert_int_eq(fe_ack_u64(f.fd, VU_SET_STATUS, 0), 0);
	ck_assert_msg(!st_pid_alive(pid), "worker %d alive at SET_STATUS 0's answer", pid);
	for (uint32_t q = 0; q < 2; q++)
		ck_assert_uint_eq(fe_get_base(&f, q), idx);
	for (int q = 0; q < 2; q++)
		fe_ring(&f, q, idx);
	for (int q = 0; q < 2; q++)
		ck_assert_int_eq(fe_ack_state(f.fd, VU_SET_VRING_ENABLE, (uint32_t)q, 1), 0);
	ck_assert_int_ne(wait_worker("vu0"), pid);
	for (uint32_t q = 0; q < 2; q++)
		ck_assert_uint_eq(fe_get_base(&f, q), idx);
	fe_mem_free(&f);
	wait_no_worker("vu0");
	assert_no_leak(with_ep);
}
END_TEST

/* GET_QUEUE_NUM as each front end reads it, written from their sources:
 * with the answer q, asking for p pairs (no control queue: QEMU handles it),
 * QEMU 7.2 (net/vhost-user.c vhost_user_start) and DPDK virtio-user refuse
 * p > q; cloud-hypervisor (virtio-devices/src/vhost_user/net.rs) refuses
 * 2p > q. Every one must attach with its default, one pair; a front end
 * that asks for more pairs than vnicd serves (QEMU's queues=2 today) must
 * get a clear refusal of its first ring past the last, not a hang. */
START_TEST(t_queue_num)
{
	const unsigned pairs_served = PAIRS_SERVED, p_default = 1;
	struct fe f;
	uint64_t q;
	char state[32];

	NEED_PREREQS();
	fe_mem_init(&f, true);
	fe_negotiate(&f);
	q = fe_get_u64(f.fd, VU_GET_QUEUE_NUM);
	ck_assert_msg(p_default <= q, "QEMU/DPDK refuse their default of %u pair with %llu",
		      p_default, (unsigned long long)q);
	ck_assert_msg(2 * p_default <= q, "cloud-hypervisor refuses its default of %u pair "
		      "(%u virtqueues) with %llu", p_default, 2 * p_default, (unsigned long long)q);
	/* QEMU with queues=q passes its check; its rings past the last pair
	 * are refused by name, and the connection goes on. */
	ck_assert_uint_gt(q, pairs_served);
	expect_fail(&f, fe_ack_state(f.fd, VU_SET_VRING_NUM, 2 * pairs_served, QS),
		    "the first ring past the last pair");
	ck_assert(log_has("ring 16 does not exist (8 queue pairs: rings 0..15)"));
	fe_mem_free(&f);
	ck_assert_int_eq(ep_pid("vu0", state, sizeof(state)), 0);
}
END_TEST

/* Does a line of the log at path contain needle, within 2 s? */
static bool log_file_has(const char *path, const char *needle)
{
	for (int i = 0; i < 200; i++) {
		FILE *f = fopen(path, "r");
		char *line = NULL;
		size_t cap = 0;
		bool found = false;

		while (f && !found && getline(&line, &cap, f) >= 0)
			found = strstr(line, needle) != NULL;
		free(line);
		if (f)
			fclose(f);
		if (found)
			return true;
		usleep(10000);
	}
	return false;
}

/* --max-queue-pairs: a vnicd serving 2 pairs answers GET_QUEUE_NUM 4 and
 * refuses ring 4 by name. */
START_TEST(t_max_queue_pairs)
{
	struct vnicd_proc v2;
	struct vnic_conn *c2;
	struct vnic_vhost_user_config cfg = { .id = "mq2", .server = true, .tap_name = "vut9",
					      .netns = netns };
	char path[120], ifname[32], err[256];
	struct fe f;

	NEED_PREREQS();
	st_vnicd_start(&v2, st_worker_path(), "--state-dir", "", "--max-queue-pairs", "2", NULL);
	c2 = st_connect(&v2);
	snprintf(path, sizeof(path), "%s/mq2.sock", v2.dir);
	cfg.path = path;
	ck_assert_int_eq(vnic_add_vhost_user(c2, &cfg, ifname, sizeof(ifname), err, sizeof(err)), 0);
	fe_mem_init(&f, true);
	{
		struct sockaddr_un sa = { .sun_family = AF_UNIX };
		struct timeval tv = { 10, 0 };

		f.fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		snprintf(sa.sun_path, sizeof(sa.sun_path), "%.100s", path);
		ck_assert_int_eq(connect(f.fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
		setsockopt(f.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	}
	fe_send(f.fd, VU_SET_PROTOCOL_FEATURES, 0, &(uint64_t){ PROTO_ALL }, 8, NULL, 0);
	ck_assert_uint_eq(fe_get_u64(f.fd, VU_GET_QUEUE_NUM), 4);
	ck_assert_int_gt(fe_ack_state(f.fd, VU_SET_VRING_NUM, 4, QS), 0);
	ck_assert_int_eq(fe_ack_state(f.fd, VU_SET_VRING_NUM, 3, QS), 0);
	ck_assert_msg(log_file_has(v2.log, "ring 4 does not exist (2 queue pairs: rings 0..3)"),
		      "no refusal of ring 4 by name in %s", v2.log);
	fe_mem_free(&f);
	ck_assert_int_eq(vnic_remove_endpoint(c2, "mq2", 0, NULL), 0);
	vnic_close(c2);
	st_vnicd_stop(&v2);
	st_rmdir(v2.dir);
}
END_TEST

/* A request vnicd has no row for whose answer the spec makes mandatory:
 * the front end waits for that answer without NEED_REPLY, so vnicd
 * answers "failed" in the request's own reply type, or closes. None may
 * leave the front end waiting (each recv below would time out at 10 s). */
START_TEST(t_mandatory_answers)
{
	static const struct {
		uint32_t req;
		int answer; /* 8: u64 1; 0: an empty reply; -1: closed */
	} cases[] = {
		{ VU_IOTLB_MSG, 8 },        { VU_POSTCOPY_END, 8 },
		{ VU_SET_DEVICE_STATE_FD, 8 }, { VU_CHECK_DEVICE_STATE, 8 },
		{ VU_GET_CONFIG, 0 },       { VU_POSTCOPY_ADVISE, -1 },
		{ VU_GET_INFLIGHT_FD, -1 }, { VU_CREATE_CRYPTO_SESSION, -1 },
		{ VU_GET_SHARED_OBJECT, -1 },
	};
	uint8_t payload[40] = { 0 };
	int with_ep;

	NEED_PREREQS();
	with_ep = st_fd_count(vd.pid);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct fe f;
		uint64_t v = 0;
		int got;

		fe_mem_init(&f, true);
		fe_negotiate(&f);
		/* No NEED_REPLY: the answer is owed anyway. */
		fe_send(f.fd, cases[i].req, 0, payload, sizeof(payload), NULL, 0);
		if (cases[i].answer < 0) {
			/* End of file, not the receive timeout of a peer left waiting. */
			ssize_t r = recv(f.fd, &v, 1, 0);

			ck_assert_msg(r == 0, "request %u: recv %zd (%s), the connection closed "
				      "expected", cases[i].req, r, r < 0 ? strerror(errno) : "data");
			fe_mem_free(&f);
			assert_no_leak(with_ep);
			continue;
		}
		got = fe_recv(f.fd, cases[i].req, &v, sizeof(v));
		ck_assert_msg(got == cases[i].answer, "request %u: reply of %d bytes, %d expected",
			      cases[i].req, got, cases[i].answer);
		if (got == 8)
			ck_assert_uint_eq(v, 1);
		/* Answered, and still talking. */
		ck_assert(fe_get_u64(f.fd, VU_GET_FEATURES) & F_V1);
		fe_mem_free(&f);
		assert_no_leak(with_ep);
	}
	ck_assert(st_pid_alive(vd.pid));
}
END_TEST

/* ----------------------------------------------------- data path */

struct ns_socks {
	int rx;    /* bound to 198.18.0.1:9999 in the netns */
	int tx;    /* sends to 198.18.0.2:7777 (the guest, by a static neighbour) */
};

/* The netns side of tap: its address, up, the guest as a neighbour. */
static void netns_addr(const char *tap)
{
	char cmd[400];

	snprintf(cmd, sizeof(cmd),
		 "ip -n %s addr replace 198.18.0.1/24 dev %s && ip -n %s link set %s up && "
		 "ip -n %s neigh replace 198.18.0.2 lladdr 52:54:00:12:34:56 dev %s", netns, tap,
		 netns, tap, netns, tap);
	ck_assert_int_eq(system(cmd), 0);
}

static void netns_setup_tap(struct ns_socks *s, const char *tap)
{
	int self;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(9999) };
	struct timeval tv = { 3, 0 };

	netns_addr(tap);
	self = tu_netns_enter(netns);
	ck_assert_int_ge(self, 0);
	s->rx = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	s->tx = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	ck_assert_int_eq(tu_netns_leave(self), 0);
	inet_pton(AF_INET, "198.18.0.1", &a.sin_addr);
	ck_assert_int_eq(bind(s->rx, (struct sockaddr *)&a, sizeof(a)), 0);
	setsockopt(s->rx, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

static void netns_setup(struct ns_socks *s)
{
	netns_setup_tap(s, "vut0");
}

/* The end of a test on vu0 with traffic: the front end goes, vu0's
 * worker with it; guest memory and the netns sockets are freed. */
static void fe_end(struct fe *f, struct ns_socks *s)
{
	close(f->fd);
	f->fd = -1;
	wait_no_worker("vu0");
	fe_mem_free(f);
	close(s->rx);
	close(s->tx);
}

static uint16_t ip_csum(const uint8_t *p, size_t n)
{
	uint32_t s = 0;

	for (size_t i = 0; i + 1 < n; i += 2)
		s += (uint32_t)(p[i] << 8 | p[i + 1]);
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)~s;
}

/* A guest frame: vnet header, Ethernet broadcast, IPv4 198.18.0.2 ->
 * 198.18.0.1, UDP 7777 -> 9999 carrying text. Returns its length. */
static size_t build_frame(uint8_t *b, const char *text)
{
	size_t tl = strlen(text), ulen = 8 + tl, iplen = 20 + ulen;
	uint8_t *e = b + VIRTIO_NET_HDR_MRG_LEN, *ip = e + 14, *u = ip + 20;

	memset(b, 0, VIRTIO_NET_HDR_MRG_LEN);
	memset(e, 0xff, 6);
	memcpy(e + 6, guest_mac, 6);
	e[12] = 0x08, e[13] = 0x00;
	memset(ip, 0, 20);
	ip[0] = 0x45, ip[2] = (uint8_t)(iplen >> 8), ip[3] = (uint8_t)iplen, ip[8] = 64, ip[9] = 17;
	ip[12] = 198, ip[13] = 18, ip[14] = 0, ip[15] = 2;
	ip[16] = 198, ip[17] = 18, ip[18] = 0, ip[19] = 1;
	{
		uint16_t c = ip_csum(ip, 20);

		ip[10] = (uint8_t)(c >> 8), ip[11] = (uint8_t)c;
	}
	u[0] = 7777 >> 8, u[1] = 7777 & 0xff, u[2] = 9999 >> 8, u[3] = 9999 & 0xff;
	u[4] = (uint8_t)(ulen >> 8), u[5] = (uint8_t)ulen, u[6] = u[7] = 0;
	memcpy(u + 8, text, tl);
	return VIRTIO_NET_HDR_MRG_LEN + 14 + iplen;
}

/* Guest transmits n frames "tag-i" (buffers after BUF_OFF on tx0). */
/* TX frames tag-0..n-1 on the TX ring of a pair (ring 1, 3, ...). Buffer
 * slots: 0..127 for ring 1, 256..383 for ring 3 (RX uses 128..255 and
 * 384..415). */
static void guest_tx_ring(struct fe *f, int ring, const char *tag, int n, unsigned *slot)
{
	for (int i = 0; i < n; i++) {
		uint64_t off = BUF_OFF + (uint64_t)(*slot % 128 + (ring == 3 ? 256 : 0)) * BUF_SIZE;
		char text[64];
		struct vring_drv_buf b;
		void *ck;
		uint32_t len;

		(*slot)++;
		/* Reclaim what the device returned. */
		while (vring_drv_get_used(&f->drv[ring], &ck, &len) == 1)
			;
		snprintf(text, sizeof(text), "%s-%d", tag, i);
		b = (struct vring_drv_buf){ GPA + off, (uint32_t)build_frame(f->mem + off, text),
					    false };
		ck_assert_int_ge(vring_drv_add(&f->drv[ring], &b, 1, NULL), 0);
		vring_drv_publish(&f->drv[ring]);
		ck_assert_int_eq(write(f->kick[ring], &(uint64_t){ 1 }, 8), 8);
	}
}

static void guest_tx(struct fe *f, const char *tag, int n, unsigned *slot)
{
	guest_tx_ring(f, 1, tag, n, slot);
}

/* Read what arrived in the netns: exactly the n texts tag-0..n-1, in order. */
static void expect_rx_in_ns(struct ns_socks *s, const char *tag, int n)
{
	for (int i = 0; i < n; i++) {
		char buf[128], want[64];
		ssize_t r = recv(s->rx, buf, sizeof(buf) - 1, 0);

		ck_assert_msg(r > 0, "frame %s-%d did not arrive (%s)", tag, i, strerror(errno));
		buf[r] = '\0';
		snprintf(want, sizeof(want), "%s-%d", tag, i);
		ck_assert_str_eq(buf, want);
	}
	{
		char buf[128];

		ck_assert_int_lt(recv(s->rx, buf, sizeof(buf), MSG_DONTWAIT), 0); /* no duplicate */
	}
}

static void guest_post_rx(struct fe *f, int n)
{
	for (int i = 0; i < n; i++) {
		uint64_t off = BUF_OFF + (128 + (uint64_t)i) * BUF_SIZE;
		struct vring_drv_buf b = { GPA + off, BUF_SIZE, true };

		ck_assert_int_ge(vring_drv_add(&f->drv[0], &b, 1, (void *)(uintptr_t)off), 0);
	}
	vring_drv_publish(&f->drv[0]);
	ck_assert_int_eq(write(f->kick[0], &(uint64_t){ 1 }, 8), 8);
}

/* The guest receives a UDP datagram sent from the netns. */
static void host_to_guest(struct fe *f, struct ns_socks *s, const char *text)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(7777) };

	inet_pton(AF_INET, "198.18.0.2", &a.sin_addr);
	for (int tries = 0; tries < 300; tries++) {
		void *ck;
		uint32_t len;

		if (tries % 50 == 0)
			ck_assert_int_eq(sendto(s->tx, text, strlen(text), 0, (struct sockaddr *)&a,
						sizeof(a)), (ssize_t)strlen(text));
		while (vring_drv_get_used(&f->drv[0], &ck, &len) == 1) {
			const uint8_t *p = f->mem + (uintptr_t)ck;

			if (len > VIRTIO_NET_HDR_MRG_LEN + 42 &&
			    memmem(p, len, text, strlen(text))) {
				guest_post_rx(f, 1);
				return;
			}
			guest_post_rx(f, 1); /* IPv6 noise from the netns: recycle */
		}
		msleep(10);
	}
	ck_abort_msg("\"%s\" never reached the guest", text);
}

START_TEST(t_data_path)
{
	struct fe f;
	struct ns_socks s;
	struct ep_counters ctr = { { 0, 0 }, { 0, 0 } };
	unsigned slot = 0;
	int with_ep, pid, pid2;
	int64_t ack;

	NEED_PREREQS();
	with_ep = st_fd_count(vd.pid);
	netns_setup(&s);
	fe_mem_init(&f, true);
	fe_start(&f);
	pid = wait_worker("vu0");
	guest_post_rx(&f, 64);
	guest_tx(&f, "a", 20, &slot);
	expect_rx_in_ns(&s, "a", 20);
	host_to_guest(&f, &s, "to-the-guest-1");
	expect_counters("vu0", 20, &ctr, "first session");
	ck_assert_uint_ge(ctr.packets[0], 1); /* rx0: to-the-guest-1 */

	/* An administrator's SetPolicy outlives the worker it was sent to. */
	{
		struct vnic_policy pol = { .mode = VNIC_MITIGATION_TIMER, .timer_us = 200 };

		ck_assert_int_eq(vnic_set_policy(ctl, "vu0", &pol), 0);
	}

	/* A new memory table while running: a planned restart. The answer
	 * comes after the old worker is reaped; nothing lost or doubled. */
	ack = fe_mem_table(&f);
	ck_assert_int_eq(ack, 0);
	ck_assert_msg(!st_pid_alive(pid), "old worker alive at the SET_MEM_TABLE answer");
	pid2 = wait_worker("vu0");
	ck_assert_int_ne(pid, pid2);
	ck_assert_int_eq(ep_policy("vu0"), VNIC_MITIGATION_TIMER);
	guest_tx(&f, "b", 20, &slot);
	expect_rx_in_ns(&s, "b", 20);
	host_to_guest(&f, &s, "to-the-guest-2");
	expect_counters("vu0", 40, &ctr, "after a new memory table");

	/* A crash of the worker: restarted as any NIC's, traffic goes on. */
	kill(pid2, SIGKILL);
	for (int i = 0; i < 300 && ep_pid("vu0", NULL, 0) == pid2; i++)
		msleep(10);
	wait_worker("vu0");
	guest_tx(&f, "c", 10, &slot);
	expect_rx_in_ns(&s, "c", 10);
	expect_counters("vu0", 50, &ctr, "after a worker SIGKILL");

	/* Disconnect mid-traffic: the worker goes, vnicd's fds come back. */
	guest_tx(&f, "d", 5, &slot);
	close(f.fd);
	f.fd = -1;
	wait_no_worker("vu0");
	fe_mem_free(&f);
	{
		char buf[64];

		while (recv(s.rx, buf, sizeof(buf), MSG_DONTWAIT) > 0)
			;
	}
	assert_no_leak(with_ep);

	/* Reconnect on the same endpoint and tap: traffic again. */
	fe_mem_init(&f, false);
	fe_start(&f);
	wait_worker("vu0");
	slot = 0;
	guest_tx(&f, "e", 10, &slot);
	expect_rx_in_ns(&s, "e", 10);
	expect_counters("vu0", 60, &ctr, "after a new front end");
	/* Disconnects before the rings are complete leave nothing either. */
	close(f.fd);
	f.fd = -1;
	wait_no_worker("vu0");
	fe_mem_free(&f);
	for (int point = 0; point < 3; point++) {
		fe_mem_init(&f, true);
		fe_negotiate(&f);
		if (point >= 1)
			ck_assert_int_eq(fe_mem_table(&f), 0);
		if (point >= 2)
			fe_ring(&f, 0, 0);
		close(f.fd);
		f.fd = -1;
		fe_mem_free(&f);
		assert_no_leak(with_ep);
	}
	close(s.rx);
	close(s.tx);
}
END_TEST

/* Upgrade in place (issue 16) in the middle of a front end's session:
 * first between the memory table and the rings (a connection with
 * negotiated features and regions but no NIC), then with the worker
 * running. The front end notices nothing: its socket stays open, the
 * rings it sets up after the first upgrade start a worker in the new
 * process, the second upgrade keeps that worker (the same pid), frames
 * pass after each, the counters only grow, and GET_VRING_BASE is still
 * answered after the reap. vnicd re-executes its own file here (nothing
 * was installed over it): what is tested is the handover. */
static int64_t fe_get_inflight(int sock, uint16_t nq, uint16_t qs, const int *fds, unsigned nfds,
			       int *fd);
static int64_t fe_set_inflight(int sock, const int *fds, unsigned nfds, uint64_t size,
			       uint64_t offset, uint16_t nq, uint16_t qs);
static int inflight_memfds(pid_t pid);

START_TEST(t_upgrade_mid_session)
{
	struct vnic_upgrade_result u;
	struct ep_counters ctr = { { 0, 0 }, { 0, 0 } };
	struct ns_socks s;
	struct fe f;
	unsigned slot = 0;
	int pid, ifd;
	int64_t isize;
	const struct inflight_queue *tx;
	uint8_t *reg;

	NEED_PREREQS();
	netns_setup(&s);
	fe_mem_init(&f, true);
	fe_negotiate(&f);
	/* The front end keeps an inflight region (issue 16): the upgrades
	 * hand it over too, and the worker goes on writing it. */
	isize = fe_get_inflight(f.fd, 2, QS, NULL, 0, &ifd);
	ck_assert_int_gt(isize, 0);
	ck_assert_int_eq(fe_set_inflight(f.fd, &ifd, 1, (uint64_t)isize, 0, 2, QS), 0);
	ck_assert_int_eq(fe_mem_table(&f), 0);
	ck_assert_int_eq(vnic_upgrade(ctl, &u), 0);
	ck_assert_int_eq(inflight_memfds(vd.pid), 1);
	ck_assert_uint_eq(u.pid, (uint32_t)vd.pid);
	ck_assert_uint_ge(u.endpoints, 1);
	ck_assert_uint_eq(u.nics, 0);
	for (int q = 0; q < 2; q++)
		fe_ring(&f, q, 0);
	for (int q = 0; q < 2; q++)
		ck_assert_int_eq(fe_ack_state(f.fd, VU_SET_VRING_ENABLE, (uint32_t)q, 1), 0);
	pid = wait_worker("vu0");
	guest_post_rx(&f, 64);
	guest_tx(&f, "a", 20, &slot);
	expect_rx_in_ns(&s, "a", 20);
	host_to_guest(&f, &s, "before-the-second-upgrade");
	expect_counters("vu0", 20, &ctr, "after the first upgrade");

	ck_assert_int_eq(vnic_upgrade(ctl, &u), 0);
	ck_assert_uint_eq(u.nics, 1);
	ck_assert_uint_ge(u.upgrades, 2);
	ck_assert_int_eq(ep_pid("vu0", NULL, 0), pid);
	guest_tx(&f, "b", 20, &slot);
	expect_rx_in_ns(&s, "b", 20);
	host_to_guest(&f, &s, "after-the-second-upgrade");
	expect_counters("vu0", 40, &ctr, "after the second upgrade");
	ck_assert_int_eq(ep_pid("vu0", NULL, 0), pid);
	ck_assert_uint_eq(fe_get_base(&f, 1), 40); /* tx0: 40 chains taken */
	ck_assert_msg(!st_pid_alive(pid), "worker alive at the GET_VRING_BASE answer");
	/* Queue 1 (tx) of pair 0's block: all 40 taken and returned. */
	reg = mmap(NULL, (size_t)isize, PROT_READ, MAP_SHARED, ifd, 0);
	ck_assert_ptr_ne(reg, MAP_FAILED);
	tx = (const void *)(reg + sizeof(struct inflight_header) + inflight_queue_size(QS));
	ck_assert_uint_eq(tx->state, INFLIGHT_QUEUE_LIVE);
	ck_assert_uint_eq(tx->avail_seq, 40);
	ck_assert_uint_eq(tx->used_seq, 40);
	munmap(reg, (size_t)isize);
	close(ifd);
	fe_end(&f, &s);
}
END_TEST

/* Memory hotplug: the table grows to 509 regions one ADD_MEM_REG at a
 * time while the NIC runs (each a planned restart), more than one
 * message to the worker can carry; traffic passes at the end; then
 * every added region is removed again. */
/* A worker that misses its stop deadline is killed; GET_VRING_BASE then
 * answers where the ring is (the guest's used->idx, read from guest
 * memory), not the stale base the worker started from. The worker is
 * frozen with SIGSTOP so that it cannot answer the stop: the deadline
 * (5 s) is made to pass, not hoped for. */
START_TEST(t_base_after_kill)
{
	struct fe f;
	struct ns_socks s;
	unsigned slot = 0;
	volatile uint16_t *used_idx;
	int with_ep, pid;

	NEED_PREREQS();
	with_ep = st_fd_count(vd.pid);
	netns_setup(&s);
	fe_mem_init(&f, true);
	fe_start(&f);
	pid = wait_worker("vu0");
	guest_tx(&f, "k", 7, &slot);
	expect_rx_in_ns(&s, "k", 7);
	used_idx = (volatile uint16_t *)(void *)(f.mem + ring_off(1, 2) + 2);
	for (int i = 0; i < 300 && *used_idx != 7; i++)
		msleep(10);
	ck_assert_uint_eq(*used_idx, 7);
	ck_assert_int_eq(kill(pid, SIGSTOP), 0);
	ck_assert_uint_eq(fe_get_base(&f, 1), 7);
	ck_assert_msg(!st_pid_alive(pid), "worker %d alive at GET_VRING_BASE's answer", pid);
	ck_assert(log_has("vu0: queue 1: no final index from the worker: used->idx 7 from guest memory"));
	ck_assert_uint_eq(fe_get_base(&f, 0), 0);
	fe_mem_free(&f);
	close(s.rx);
	close(s.tx);
	assert_no_leak(with_ep);
}
END_TEST

/* A front end that will not kick (SET_VRING_KICK with
 * VHOST_USER_VRING_NOFD_MASK) gets its rings polled: frames the guest
 * posts are sent, and RX buffers it posts are found, with no kick. The
 * worker starts with no RX buffers, so it must find the ones posted later
 * by looking; the eventfds the helpers write are not vnicd's. */
START_TEST(t_polled_kick)
{
	struct fe f;
	struct ns_socks s;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(7777) };
	unsigned slot = 0;
	int with_ep, pid;

	NEED_PREREQS();
	with_ep = st_fd_count(vd.pid);
	netns_setup(&s);
	fe_mem_init(&f, true);
	fe_negotiate(&f);
	ck_assert_int_eq(fe_mem_table(&f), 0);
	for (int q = 0; q < 2; q++) {
		struct vu_vring_addr ad = { .index = (uint32_t)q, .desc = uva_of(&f, ring_off(q, 0)),
					    .avail = uva_of(&f, ring_off(q, 1)),
					    .used = uva_of(&f, ring_off(q, 2)) };
		uint64_t v = (uint64_t)q;

		ck_assert_int_eq(fe_ack_state(f.fd, VU_SET_VRING_NUM, (uint32_t)q, QS), 0);
		ck_assert_int_eq(fe_ack_state(f.fd, VU_SET_VRING_BASE, (uint32_t)q, 0), 0);
		ck_assert_int_eq(fe_ack(f.fd, VU_SET_VRING_ADDR, &ad, sizeof(ad), NULL, 0), 0);
		ck_assert_int_eq(fe_ack(f.fd, VU_SET_VRING_CALL, &v, sizeof(v), &f.call[q], 1), 0);
		v |= VU_VRING_NOFD;
		ck_assert_int_eq(fe_ack(f.fd, VU_SET_VRING_KICK, &v, sizeof(v), NULL, 0), 0);
		ck_assert_int_eq(fe_ack_state(f.fd, VU_SET_VRING_ENABLE, (uint32_t)q, 1), 0);
	}
	pid = wait_worker("vu0");
	ck_assert(log_has("vu0: queue 0 is polled: its front end does not kick"));
	/* Polling with nothing to do must not spin a core: a busy loop
	 * burns ~100 ticks in this second, the backing-off look (at most
	 * 1,000 a second) a handful. 30 leaves room for a loaded machine. */
	{
		unsigned long t0 = tu_cpu_ticks(pid), used;

		msleep(1000);
		used = tu_cpu_ticks(pid) - t0;
		ck_assert_msg(used < 30, "an idle polled worker used %lu ticks in 1 s", used);
	}
	/* RX: a datagram while the guest has no buffers, then buffers. */
	inet_pton(AF_INET, "198.18.0.2", &a.sin_addr);
	ck_assert_int_eq(sendto(s.tx, "early", 5, 0, (struct sockaddr *)&a, sizeof(a)), 5);
	msleep(100);
	guest_post_rx(&f, 8);
	host_to_guest(&f, &s, "polled-rx");
	/* TX: chains posted, never kicked (vnicd does not hold f.kick). */
	guest_tx(&f, "p", 5, &slot);
	expect_rx_in_ns(&s, "p", 5);
	ck_assert_uint_eq(fe_get_base(&f, 1), 5);
	fe_mem_free(&f);
	close(s.rx);
	close(s.tx);
	wait_no_worker("vu0");
	assert_no_leak(with_ep);
}
END_TEST

/* The packets counter of queue name (rx1 ...) of an endpoint, 0: none. */
static uint64_t queue_packets(const char *id, const char *name)
{
	struct vnic_status *st = NULL;
	uint64_t v = 0;

	ck_assert_int_eq(vnic_status(ctl, &st), 0);
	for (unsigned i = 0; i < st->nnics; i++)
		for (unsigned j = 0; !strcmp(st->nics[i].id, id) && j < st->nics[i].nqueues; j++)
			if (!strcmp(st->nics[i].queues[j].name, name))
				v = st->nics[i].queues[j].packets;
	vnic_status_free(st);
	return v;
}

/* queue_packets once it reaches want, or after 2 s whatever it is. */
static uint64_t queue_packets_at_least(const char *id, const char *name, uint64_t want)
{
	uint64_t v = 0;

	for (int i = 0; i < 200 && (v = queue_packets(id, name)) < want; i++)
		msleep(10);
	return v;
}

/* A worker of vnicd's other than the ones given (a second pair's): its
 * pid, waiting up to 5 s. /proc's children list holds vnicd's (and, for a
 * few ms after a worker ends, its holder's: not a worker). */
static int other_worker(int not1, int not2)
{
	for (int tries = 0; tries < 500; tries++) {
		char path[64], buf[256];
		FILE *fp;
		size_t n;

		snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)vd.pid, (int)vd.pid);
		fp = fopen(path, "r");
		n = fp ? fread(buf, 1, sizeof(buf) - 1, fp) : 0;
		if (fp)
			fclose(fp);
		buf[n] = '\0';
		for (char *t = strtok(buf, " \n"); t; t = strtok(NULL, " \n")) {
			int pid = atoi(t);

			/* Not a holder, nor a child reaped since the list. */
			if (pid > 0 && pid != not1 && pid != not2 && st_holder_kind(pid) == 0)
				return pid;
		}
		msleep(10);
	}
	ck_abort_msg("no second worker within 5 s (log %s)", vd.log);
	return -1;
}

/* How many times vnicd's log holds line (up to 1 s for want of them). */
static int log_count(const char *line, int want)
{
	int n = 0;

	for (int i = 0; i < 100; i++) {
		static char buf[1 << 20];
		FILE *fp = fopen(vd.log, "r");
		size_t len = fp ? fread(buf, 1, sizeof(buf) - 1, fp) : 0;

		if (fp)
			fclose(fp);
		buf[len] = '\0';
		n = 0;
		for (const char *p = buf; (p = strstr(p, line)); p++)
			n++;
		if (n >= want)
			break;
		usleep(10000);
	}
	return n;
}

/* The real uid of process pid (/proc/pid/status), -1: unknown. */
static long proc_uid(int pid)
{
	char path[64], line[256];
	long uid = -1;
	FILE *fp;

	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	fp = fopen(path, "r");
	while (fp && fgets(line, sizeof(line), fp))
		if (!strncmp(line, "Uid:", 4))
			uid = strtol(line + 4, NULL, 10);
	if (fp)
		fclose(fp);
	return uid;
}

/* Status's row for pair k of an endpoint: its worker's pid (-1: no row). */
static int pair_pid(const char *id, uint32_t k)
{
	struct vnic_status *st = NULL;
	int pid = -1;

	ck_assert_int_eq(vnic_status(ctl, &st), 0);
	ck_assert_ptr_nonnull(st->pairs);
	for (unsigned i = 0; i < st->nnics; i++)
		for (unsigned j = 0; !strcmp(st->nics[i].id, id) && j < st->pairs[i].npairs; j++)
			if (st->pairs[i].pairs[j].pair == k)
				pid = st->pairs[i].pairs[j].pid;
	vnic_status_free(st);
	return pid;
}

/* Wait (5 s at most) until every pair of id that has a row is RUNNING. */
static void wait_pairs_running(const char *id)
{
	for (int tries = 0; tries < 500; tries++) {
		struct vnic_status *st = NULL;
		bool all = true;

		ck_assert_int_eq(vnic_status(ctl, &st), 0);
		for (unsigned i = 0; i < st->nnics; i++)
			for (unsigned j = 0; !strcmp(st->nics[i].id, id) && st->pairs &&
					     j < st->pairs[i].npairs; j++)
				all = all && st->pairs[i].pairs[j].state == VNIC_NIC_RUNNING;
		vnic_status_free(st);
		if (all)
			return;
		msleep(10);
	}
	ck_abort_msg("pairs of %s not all RUNNING within 5 s", id);
}

/* Does `ip -d link` of tap vut0 show has? out: what it showed. */
static bool tap_has(const char *has, char *out, size_t outlen)
{
	char cmd[160];

	snprintf(cmd, sizeof(cmd), "ip -n %s -d link show vut0", netns);
	ck_assert_int_eq(st_run_capture(cmd, out, outlen), 0);
	return strstr(out, has) != NULL;
}

static void expect_tap(const char *has)
{
	char out[4096];

	for (int tries = 0; tries < 100; tries++) {
		if (tap_has(has, out, sizeof(out)))
			return;
		msleep(10);
	}
	ck_abort_msg("tap vut0: \"%s\" not in: %s", has, out);
}

/* Does process pid's command line hold arg (NUL-separated words)? */
static bool cmdline_has(int pid, const char *arg)
{
	char path[64], buf[1024];
	size_t n, alen = strlen(arg) + strlen(arg + strlen(arg) + 1) + 1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/cmdline", pid);
	f = fopen(path, "r");
	n = f ? fread(buf, 1, sizeof(buf), f) : 0;
	if (f)
		fclose(f);
	for (size_t i = 0; i + alen <= n; i++)
		if (!memcmp(buf + i, arg, alen))
			return true;
	return false;
}

/* The pid of vnicd's only child (5 s at most for one to show), 0: none. */
static int only_child(void)
{
	for (int tries = 0; tries < 500; tries++) {
		if (st_child_count(vd.pid) == 1)
			return other_worker(0, 0);
		msleep(10);
	}
	return 0;
}

/* True when pid's namespace of this kind is not ours (false when
 * either cannot be read). */
static bool ns_differs(int pid, const char *kind)
{
	char path[64], a[64], b[64];
	ssize_t na, nb;

	snprintf(path, sizeof(path), "/proc/%d/ns/%s", pid, kind);
	na = readlink(path, a, sizeof(a) - 1);
	snprintf(path, sizeof(path), "/proc/self/ns/%s", kind);
	nb = readlink(path, b, sizeof(b) - 1);
	if (na <= 0 || nb <= 0)
		return false;
	return na != nb || memcmp(a, b, (size_t)na) != 0;
}

/* SET_OWNER starts pair 0's worker process (worker_spare.h): the device's
 * start hands it its Config, a disconnect before that stops it, and one
 * that died meanwhile is replaced by a worker spawned as before (L17). */
START_TEST(t_prestarted_worker)
{
	struct fe f, g;
	char line[96];
	int spare, pid, with_ep;

	NEED_PREREQS();
	with_ep = st_fd_count(vd.pid);
	/* 1. Used: the NIC's worker is the process SET_OWNER started. */
	fe_mem_init(&f, true);
	fe_negotiate(&f);
	spare = only_child();
	ck_assert_msg(spare > 0, "no worker process after SET_OWNER (log %s)", vd.log);
	/* A uid per NIC (the default): the spare insists on its Config's
	 * (once it has exec'd: until then it is a copy of vnicd). */
	for (int i = 0; i < 500 && !cmdline_has(spare, "--ids\0config"); i++)
		msleep(10);
	ck_assert_msg(cmdline_has(spare, "--ids\0config"), "spare %d without --ids config",
		      spare);
	ck_assert_msg(log_has("worker pid"), "no log line (log %s)", vd.log);
	ck_assert_int_eq(ep_pid("vu0", NULL, 0), 0); /* no NIC yet */
	/* It enters its namespaces while it waits for the Config, so the
	 * device's start does not wait for that. */
	for (int i = 0; i < 500 && !(ns_differs(spare, "net") && ns_differs(spare, "mnt")); i++)
		msleep(10);
	ck_assert_msg(ns_differs(spare, "net") && ns_differs(spare, "mnt"),
		      "spare %d not in its own namespaces before its Config", spare);
	ck_assert_int_eq(fe_mem_table(&f), 0);
	fe_rings_on(&f);
	pid = wait_worker("vu0");
	ck_assert_int_eq(pid, spare);
	snprintf(line, sizeof(line), "worker pid %d spawned (pre-started", spare);
	ck_assert_msg(log_has(line), "no \"%s\" in %s", line, vd.log);
	/* Running as the NIC's uid of the range, which only its Config named. */
	wait_pairs_running("vu0");
	ck_assert_int_ge(proc_uid(pid), 1879048192L);
	fe_mem_free(&f);
	wait_no_worker("vu0");

	/* 2. A front end that leaves before its device starts takes its
	 * spare along: no process, no zombie, no fd left. */
	fe_mem_init(&g, true);
	fe_negotiate(&g);
	spare = only_child();
	ck_assert(spare > 0);
	fe_mem_free(&g);
	for (int i = 0; i < 500 && st_pid_alive(spare); i++)
		msleep(10);
	ck_assert_msg(!st_pid_alive(spare), "spare %d outlived its front end", spare);
	assert_no_leak(with_ep);

	/* 3. A spare that dies first: logged, and the start spawns anew. */
	fe_mem_init(&f, true);
	fe_negotiate(&f);
	spare = only_child();
	ck_assert(spare > 0);
	ck_assert_int_eq(kill(spare, SIGKILL), 0);
	snprintf(line, sizeof(line), "pre-started worker pid %d killed by signal 9", spare);
	ck_assert_msg(log_has(line), "no \"%s\" in %s", line, vd.log);
	ck_assert_int_eq(fe_mem_table(&f), 0);
	fe_rings_on(&f);
	pid = wait_worker("vu0");
	ck_assert_int_ne(pid, spare);
	wait_pairs_running("vu0");
	fe_mem_free(&f);
	wait_no_worker("vu0");
	assert_no_leak(with_ep);
	ck_assert_int_eq(st_child_count(vd.pid), 0);
}
END_TEST

/* A worker binary installed anew (a file renamed over the old one, as a
 * package upgrade does) after the spare started: the device's start
 * does not hand the Config to the old code but spawns the new (L17).
 * A second vnicd of our own, whose --worker is a copy we may replace. */
START_TEST(t_prestarted_worker_binary_replaced)
{
	struct vnicd_proc v0 = vd;
	struct vnic_conn *c0 = ctl;
	char s0[sizeof(sockpath)], copy[128], cmd[512];
	struct fe f;
	int spare, pid;

	NEED_PREREQS();
	memcpy(s0, sockpath, sizeof(s0));
	snprintf(copy, sizeof(copy), "%s/worker-copy", v0.dir);
	snprintf(cmd, sizeof(cmd), "cp %s %s", st_worker_path(), copy);
	ck_assert_int_eq(system(cmd), 0);
	st_vnicd_start(&vd, copy, "--state-dir", "", NULL);
	ck_assert_int_lt(snprintf(sockpath, sizeof(sockpath), "%s/vu.sock", vd.dir),
			 (int)sizeof(sockpath));
	ctl = st_connect(&vd);
	add_endpoint("vu9", "vut9", true);
	fe_mem_init(&f, true);
	fe_negotiate(&f);
	spare = only_child();
	ck_assert(spare > 0);
	for (int i = 0; i < 500 && !cmdline_has(spare, "--nic\0vu9"); i++)
		msleep(10);
	ck_assert(cmdline_has(spare, "--nic\0vu9"));
	snprintf(cmd, sizeof(cmd), "cp %s %s.new && mv %s.new %s", st_worker_path(), copy, copy,
		 copy);
	ck_assert_int_eq(system(cmd), 0);
	ck_assert_int_eq(fe_mem_table(&f), 0);
	fe_rings_on(&f);
	pid = wait_worker("vu9");
	ck_assert_int_ne(pid, spare);
	ck_assert_msg(log_has("stopped: the worker binary or a library changed"),
		      "no discard line in %s", vd.log);
	wait_pairs_running("vu9");
	for (int i = 0; i < 500 && st_pid_alive(spare); i++)
		msleep(10);
	ck_assert_msg(!st_pid_alive(spare), "replaced spare %d not reaped", spare);
	fe_mem_free(&f);
	wait_no_worker("vu9");
	vnic_close(ctl);
	st_vnicd_stop(&vd);
	st_rmdir(vd.dir);
	vd = v0;
	ctl = c0;
	memcpy(sockpath, s0, sizeof(s0));
}
END_TEST

/* Two queue pairs (issue 15): a worker each; TX on both, host->guest
 * flows spread over both by the multi-queue tap; pair 1's worker killed
 * and restarted alone while pair 0 moves; GET_VRING_BASE of pair 1's ring
 * stops pair 1 only; pair 1 disabled takes its tap queue out of the
 * steering, enabled again puts it back. */
START_TEST(t_two_pairs)
{
	struct fe f;
	struct ns_socks s;
	unsigned slot0 = 0, slot1 = 0;
	int with_ep, pid0, pid1, pid1b;
	uint64_t v;

	NEED_PREREQS();
	with_ep = st_fd_count(vd.pid);
	netns_setup(&s);
	fe_mem_init(&f, true);
	fe_negotiate(&f);
	ck_assert_int_eq(fe_mem_table(&f), 0);
	for (int q = 0; q < FE_RINGS; q++)
		fe_ring(&f, q, 0);
	for (int q = 0; q < FE_RINGS; q++)
		ck_assert_int_eq(fe_ack_state(f.fd, VU_SET_VRING_ENABLE, (uint32_t)q, 1), 0);
	pid0 = wait_worker("vu0");
	pid1 = other_worker(pid0, 0);
	expect_tap("multi_queue numqueues 2 numdisabled 0");
	/* Status: a row per pair, each with its worker. */
	ck_assert_int_eq(pair_pid("vu0", 0), pid0);
	ck_assert_int_eq(pair_pid("vu0", 1), pid1);
	/* One NIC, one identity: both pairs' workers run as its uid. */
	/* A worker drops to its uid while it starts: wait (5 s at most) for
	 * both to be past that, which a status pid does not say. */
	for (int i = 0; i < 500 && (proc_uid(pid0) == 0 || proc_uid(pid1) == 0); i++)
		msleep(10);
	ck_assert_int_gt(proc_uid(pid0), 0);
	ck_assert_int_eq(proc_uid(pid1), proc_uid(pid0));
	/* A SetPolicy reaches both pairs' workers (each logs what it took). */
	{
		struct vnic_policy pol = { .mode = VNIC_MITIGATION_TIMER, .timer_us = 300 };

		/* All pairs or none: refused while a pair is still starting. */
		wait_pairs_running("vu0");
		ck_assert_int_eq(vnic_set_policy(ctl, "vu0", &pol), 0);
		ck_assert_int_eq(log_count("worker: nic vu0: policy timer,", 2), 2);
	}

	/* TX on each pair, counted on each. */
	guest_tx_ring(&f, 1, "p0", 5, &slot0);
	expect_rx_in_ns(&s, "p0", 5);
	guest_tx_ring(&f, 3, "p1", 5, &slot1);
	expect_rx_in_ns(&s, "p1", 5);
	/* The worker counts a run's frames after their sends: the host end
	 * can hold the fifth frame a moment before the counter says 5. */
	ck_assert_uint_ge(queue_packets_at_least("vu0", "tx0", 5), 5);
	ck_assert_uint_ge(queue_packets_at_least("vu0", "tx1", 5), 5);

	/* Host->guest: the tap hashes flows over its queues. Flows (one
	 * destination port each) until both pairs received; 64 flows all
	 * on one queue would be a 1 in 2^63 chance, so not finding both is
	 * a failure, not bad luck. */
	for (int i = 0; i < 64; i++) {
		uint64_t off = BUF_OFF + (128 + (uint64_t)i) * BUF_SIZE;
		struct vring_drv_buf b = { GPA + off, BUF_SIZE, true };

		ck_assert_int_ge(vring_drv_add(&f.drv[0], &b, 1, NULL), 0);
		if (i < 32) {
			off = BUF_OFF + (384 + (uint64_t)i) * BUF_SIZE;
			b = (struct vring_drv_buf){ GPA + off, BUF_SIZE, true };
			ck_assert_int_ge(vring_drv_add(&f.drv[2], &b, 1, NULL), 0);
		}
	}
	for (int q = 0; q <= 2; q += 2) {
		vring_drv_publish(&f.drv[q]);
		ck_assert_int_eq(write(f.kick[q], &(uint64_t){ 1 }, 8), 8);
	}
	for (int port = 0; port < 64; port++) {
		struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(20000 + port) };

		inet_pton(AF_INET, "198.18.0.2", &a.sin_addr);
		ck_assert_int_eq(sendto(s.tx, "flow", 4, 0, (struct sockaddr *)&a, sizeof(a)), 4);
		msleep(5);
		if (queue_packets("vu0", "rx0") && queue_packets("vu0", "rx1"))
			break;
	}
	ck_assert_msg(queue_packets("vu0", "rx0") > 0 && queue_packets("vu0", "rx1") > 0,
		      "64 flows: rx0 %llu, rx1 %llu packets",
		      (unsigned long long)queue_packets("vu0", "rx0"),
		      (unsigned long long)queue_packets("vu0", "rx1"));

	/* Pair 1's worker dies: restarted alone; pair 0 never stops. */
	ck_assert_int_eq(kill(pid1, SIGKILL), 0);
	guest_tx_ring(&f, 1, "q0", 5, &slot0);
	expect_rx_in_ns(&s, "q0", 5);
	ck_assert_int_eq(ep_pid("vu0", NULL, 0), pid0);
	pid1b = other_worker(pid0, pid1);
	guest_tx_ring(&f, 3, "q1", 5, &slot1);
	expect_rx_in_ns(&s, "q1", 5); /* exactly once across the restart */

	/* GET_VRING_BASE of ring 3 stops pair 1 only. */
	ck_assert_uint_eq(fe_get_base(&f, 3), 10);
	ck_assert_msg(!st_pid_alive(pid1b), "pair 1's worker %d alive at the answer", pid1b);
	ck_assert_int_eq(ep_pid("vu0", NULL, 0), pid0);
	guest_tx_ring(&f, 1, "r0", 3, &slot0);
	expect_rx_in_ns(&s, "r0", 3);

	/* Disabled: its tap queue out of the steering; enabled and kicked
	 * again: a worker and the queue back. */
	for (uint32_t q = 2; q < 4; q++)
		ck_assert_int_eq(fe_ack_state(f.fd, VU_SET_VRING_ENABLE, q, 0), 0);
	expect_tap("numqueues 1 numdisabled 1");
	for (int q = 2; q < 4; q++) {
		v = (uint64_t)q;
		ck_assert_int_eq(fe_ack(f.fd, VU_SET_VRING_KICK, &v, sizeof(v), &f.kick[q], 1), 0);
		ck_assert_int_eq(fe_ack_state(f.fd, VU_SET_VRING_ENABLE, (uint32_t)q, 1), 0);
	}
	other_worker(pid0, pid1b);
	expect_tap("numqueues 2 numdisabled 0");
	guest_tx_ring(&f, 3, "s1", 3, &slot1);
	expect_rx_in_ns(&s, "s1", 3);
	ck_assert_int_eq(ep_pid("vu0", NULL, 0), pid0);

	fe_mem_free(&f);
	close(s.rx);
	close(s.tx);
	wait_no_worker("vu0");
	for (int i = 0; i < 500 && st_child_count(vd.pid) > 0; i++)
		msleep(10);
	ck_assert_int_eq(st_child_count(vd.pid), 0);
	assert_no_leak(with_ep);
}
END_TEST

START_TEST(t_many_regions)
{
	struct fe f;
	struct ns_socks s;
	struct vu_mem_single one = { 0, { GPA, MEM, 0, 0 } };
	unsigned slot = 0, n = 0;
	int with_ep;

	NEED_PREREQS();
	with_ep = st_fd_count(vd.pid);
	netns_setup(&s);
	fe_mem_init(&f, true);
	fe_negotiate(&f);
	one.r.uva = uva_of(&f, 0);
	ck_assert_int_eq(fe_ack(f.fd, VU_ADD_MEM_REG, &one, sizeof(one), &f.memfd, 1), 0);
	for (int q = 0; q < 2; q++)
		fe_ring(&f, q, 0);
	for (int q = 0; q < 2; q++)
		ck_assert_int_eq(fe_ack_state(f.fd, VU_SET_VRING_ENABLE, (uint32_t)q, 1), 0);
	wait_worker("vu0");
	guest_tx(&f, "m", 5, &slot);
	expect_rx_in_ns(&s, "m", 5);
	for (n = 1; n < 509; n++) {
		struct vu_mem_single r = { 0, { GPA + MEM + (n - 1) * 4096ull, 4096,
						uva_of(&f, MEM + (n - 1) * 4096ull),
						MEM + (n - 1) * 4096ull } };

		ck_assert_msg(fe_ack(f.fd, VU_ADD_MEM_REG, &r, sizeof(r), &f.memfd, 1) == 0,
			      "ADD_MEM_REG %u refused", n);
	}
	{
		struct vu_mem_single r = { 0, { GPA + 4 * MEM, 4096, uva_of(&f, 0) + 4 * MEM, 0 } };

		ck_assert_int_gt(fe_ack(f.fd, VU_ADD_MEM_REG, &r, sizeof(r), &f.memfd, 1), 0);
	}
	wait_worker("vu0");
	guest_tx(&f, "n", 5, &slot);
	expect_rx_in_ns(&s, "n", 5);
	for (n = 1; n < 509; n++) {
		struct vu_mem_single r = { 0, { GPA + MEM + (n - 1) * 4096ull, 4096,
						uva_of(&f, MEM + (n - 1) * 4096ull),
						MEM + (n - 1) * 4096ull } };

		ck_assert_int_eq(fe_ack(f.fd, VU_REM_MEM_REG, &r, sizeof(r), NULL, 0), 0);
	}
	wait_worker("vu0");
	guest_tx(&f, "o", 5, &slot);
	expect_rx_in_ns(&s, "o", 5);
	fe_end(&f, &s);
	assert_no_leak(with_ep);
}
END_TEST

/* Removal: answered after the worker is reaped; socket and tap gone. */
START_TEST(t_remove_running)
{
	struct fe f;
	uint64_t us = 0;
	char cmd[160];
	int pid;

	NEED_PREREQS();
	fe_mem_init(&f, true);
	fe_start(&f);
	pid = wait_worker("vu0");
	ck_assert_int_eq(vnic_remove_endpoint(ctl, "vu0", 0, &us), 0);
	ck_assert(!st_pid_alive(pid));
	ck_assert_int_ne(access(sockpath, F_OK), 0);
	snprintf(cmd, sizeof(cmd), "ip -n %s link show vut0 >/dev/null 2>&1", netns);
	ck_assert_int_ne(system(cmd), 0);
	ck_assert_int_eq(vnic_remove_endpoint(ctl, "vu0", 0, NULL), VNIC_STATUS_NOT_FOUND);
	fe_mem_free(&f);
	assert_no_leak(base_fds);
	/* The id, the path and the tap name can be used again. */
	add_endpoint("vu0", "vut0", true);
}
END_TEST

/* Client mode: vnicd connects to a front end that listens, and the
 * endpoint comes back from the state directory after a vnicd restart. */
/* A client-mode endpoint's front end: a state directory made from sdir's
 * template, and a socket listening at fepath in it (accept times out
 * after tv). */
static int fe_listen(char *sdir, char *fepath, size_t len, const struct timeval *tv)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int lfd;

	ck_assert_ptr_nonnull(mkdtemp(sdir));
	snprintf(fepath, len, "%s/fe.sock", sdir);
	lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", fepath);
	ck_assert_int_eq(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(lfd, 2), 0);
	setsockopt(lfd, SOL_SOCKET, SO_RCVTIMEO, tv, sizeof(*tv));
	return lfd;
}

START_TEST(t_client_and_restart)
{
	struct vnicd_proc v2;
	struct vnic_conn *c2;
	char sdir[] = "/tmp/vnicd-vu-state.XXXXXX", fepath[100];
	struct vnic_vhost_user_config cfg = { .id = "cl0", .tap_name = "vutc0", .mtu = 9000 };
	char ifname[32], err[256];
	struct timeval tv = { 5, 0 };
	int lfd, pid;
	struct fe f;

	NEED_PREREQS();
	lfd = fe_listen(sdir, fepath, sizeof(fepath), &tv);
	cfg.path = fepath;
	cfg.netns = netns;

	for (int round = 0; round < 2; round++) {
		st_vnicd_start(&v2, st_worker_path(), "--state-dir", sdir, NULL);
		c2 = st_connect(&v2);
		if (round == 0) {
			char cmd[200];

			ck_assert_msg(vnic_add_vhost_user(c2, &cfg, ifname, sizeof(ifname), err,
							  sizeof(err)) == 0, "%s", err);
			/* The tap has the endpoint's MTU. */
			snprintf(cmd, sizeof(cmd), "ip -n %s link show vutc0 | grep -q 'mtu 9000'",
				 netns);
			ck_assert_int_eq(system(cmd), 0);
		}
		/* vnicd connects to us (round 1: from its state file). */
		fe_mem_init(&f, false);
		f.fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		ck_assert_int_ge(f.fd, 0);
		setsockopt(f.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		ck_assert(fe_get_u64(f.fd, VU_GET_FEATURES) & F_V1);
		fe_send(f.fd, VU_SET_OWNER, 0, NULL, 0, NULL, 0);
		fe_send(f.fd, VU_SET_PROTOCOL_FEATURES, 0, &(uint64_t){ PROTO_ALL }, 8, NULL, 0);
		ck_assert_int_eq(fe_ack_u64(f.fd, VU_SET_FEATURES, F_PROTO | F_V1), 0);
		ck_assert_int_eq(fe_mem_table(&f), 0);
		for (int q = 0; q < 2; q++)
			fe_ring(&f, q, 0);
		for (int q = 0; q < 2; q++)
			ck_assert_int_eq(fe_ack_state(f.fd, VU_SET_VRING_ENABLE, (uint32_t)q, 1), 0);
		{
			struct vnic_conn *save = ctl;

			ctl = c2;
			pid = wait_worker("cl0");
			ctl = save;
		}
		ck_assert_int_gt(pid, 0);
		if (round == 0) {
			/* vnicd dies; its worker follows (control socket gone). */
			kill(v2.pid, SIGKILL);
			waitpid(v2.pid, NULL, 0);
			for (int i = 0; i < 300 && st_pid_alive(pid); i++)
				msleep(10);
			ck_assert(!st_pid_alive(pid));
			vnic_close(c2);
			unlink(v2.sock);
			st_rmdir(v2.dir);
		} else {
			ck_assert_int_eq(vnic_remove_endpoint(c2, "cl0", 0, NULL), 0);
			vnic_close(c2);
			st_vnicd_stop(&v2);
			st_rmdir(v2.dir);
		}
		fe_mem_free(&f);
	}
	close(lfd);
	unlink(fepath);
	st_rmdir(sdir);
}
END_TEST

/* What an administrator sees of an endpoint no front end has set up
 * (issue 19): AWAITING_FRONTEND, pid 0, and the MAC, tap and MTU it was
 * added with, in libvnic's status and in vnicctl status --json; the same
 * while a front end negotiates; RUNNING once its rings are ready. */
static const struct vnic_nic_status *find_nic(const struct vnic_status *st, const char *id)
{
	for (unsigned i = 0; i < st->nnics; i++)
		if (!strcmp(st->nics[i].id, id))
			return &st->nics[i];
	ck_abort_msg("no %s in status", id);
	return NULL;
}

START_TEST(t_awaiting_frontend)
{
	static const uint8_t mac[6] = { 0x52, 0x54, 0x00, 0xaa, 0xbb, 0x0a };
	struct vnic_vhost_user_config cfg = { .id = "aw0", .server = true, .tap_name = "vuta0",
					      .netns = netns, .mac_set = true, .mtu = 9000 };
	char ifname[32], err[256], path[100], vnicctl[512], cmd[800], out[8192];
	struct vnic_status *st = NULL;
	const struct vnic_nic_status *n;
	struct fe f;

	NEED_PREREQS();
	memcpy(cfg.mac, mac, 6);
	ck_assert_int_lt(snprintf(path, sizeof(path), "%s/aw.sock", vd.dir), (int)sizeof(path));
	cfg.path = path;
	ck_assert_msg(vnic_add_vhost_user(ctl, &cfg, ifname, sizeof(ifname), err, sizeof(err)) == 0,
		      "%s", err);
	ck_assert_int_eq(vnic_status(ctl, &st), 0);
	n = find_nic(st, "aw0");
	ck_assert_str_eq(vnic_nic_state_name(n->state), "AWAITING_FRONTEND");
	ck_assert_int_eq(n->pid, 0);
	ck_assert_mem_eq(n->mac, mac, 6);
	ck_assert_str_eq(n->tap_name, "vuta0");
	ck_assert_uint_eq(n->mtu, 9000);
	ck_assert_str_eq(n->backend, "tap_fd");
	ck_assert_str_eq(n->vhost_state, "listening");
	/* vu0, added with no MAC and no MTU: the derived MAC, 1500. */
	n = find_nic(st, "vu0");
	ck_assert_int_eq(n->state, VNIC_NIC_AWAITING_FRONTEND);
	ck_assert_str_eq(n->tap_name, "vut0");
	ck_assert_uint_eq(n->mtu, 1500);
	ck_assert(n->mac[0] == 0x52 && n->mac[1] == 0x54 && (n->mac[2] | n->mac[3]) != 0);
	vnic_status_free(st);

	st_build_path("tools/vnicctl", vnicctl, sizeof(vnicctl));
	snprintf(cmd, sizeof(cmd), "%s --socket %s --json status aw0", vnicctl, vd.sock);
	ck_assert_int_eq(st_run_capture(cmd, out, sizeof(out)), 0);
	ck_assert_msg(strstr(out, "\"AWAITING_FRONTEND\"") && strstr(out, "\"52:54:00:aa:bb:0a\"") &&
		      strstr(out, "\"vuta0\"") && strstr(out, "9000"), "vnicctl: %s", out);
	snprintf(cmd, sizeof(cmd), "%s --socket %s status aw0", vnicctl, vd.sock);
	ck_assert_int_eq(st_run_capture(cmd, out, sizeof(out)), 0);
	ck_assert_msg(strstr(out, "AWAITING_FRONTEND") && strstr(out, "listening"), "%s", out);

	/* A front end that has negotiated but set no ring: still waiting. */
	memcpy(sockpath, path, sizeof(sockpath));
	fe_mem_init(&f, true);
	fe_negotiate(&f);
	ck_assert_int_eq(vnic_status(ctl, &st), 0);
	n = find_nic(st, "aw0");
	ck_assert_int_eq(n->state, VNIC_NIC_AWAITING_FRONTEND);
	ck_assert_str_eq(n->vhost_state, "negotiating");
	vnic_status_free(st);
	ck_assert_int_eq(fe_mem_table(&f), 0);
	for (int q = 0; q < 2; q++)
		fe_ring(&f, q, 0);
	for (int q = 0; q < 2; q++)
		ck_assert_int_eq(fe_ack_state(f.fd, VU_SET_VRING_ENABLE, (uint32_t)q, 1), 0);
	wait_worker("aw0");
	ck_assert_int_eq(vnic_status(ctl, &st), 0);
	n = find_nic(st, "aw0");
	ck_assert_int_ne(n->state, VNIC_NIC_AWAITING_FRONTEND);
	ck_assert_mem_eq(n->mac, mac, 6);
	ck_assert_str_eq(n->tap_name, "vuta0");
	ck_assert_uint_eq(n->mtu, 9000);
	vnic_status_free(st);
	ck_assert_int_eq(vnic_remove_endpoint(ctl, "aw0", 0, NULL), 0);
	fe_mem_free(&f);
}
END_TEST

/* A file dir/name with the text of fmt. */
static void write_state(const char *dir, const char *name, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void write_state(const char *dir, const char *name, const char *fmt, ...)
{
	char path[200];
	va_list ap;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	ck_assert_int_eq(fclose(f), 0);
}

static bool file_has(const char *path, const char *needle)
{
	char buf[8192];
	FILE *f = fopen(path, "r");
	size_t n;

	if (!f)
		return false;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return strstr(buf, needle) != NULL;
}

/* The state files (issue 19). Format 2 is strict: an unknown key or a bad
 * value and the endpoint is not restored, with one log line that names
 * file:line. A format 1 file, as vnicd 0.1.0 wrote it (policy as eight
 * integers), is read once and saved again in format 2 (policy by name);
 * both come back after a second restart from what vnicd wrote. */
START_TEST(t_state_files)
{
	struct vnicd_proc v2;
	struct vnic_conn *c2;
	char sdir[] = "/tmp/vnicd-vu-sf.XXXXXX", path[200];

	NEED_PREREQS();
	ck_assert_ptr_nonnull(mkdtemp(sdir));
	write_state(sdir, "old.endpoint", "id old\npath %s/old.sock\nmode server\ntap vuso0\n"
		    "netns %s\nmac 52:54:00:aa:bb:01\nmtu 1400\npolicy 1 200 0 64 65536 0 0 0\n",
		    sdir, netns);
	write_state(sdir, "new.endpoint", "# by hand\nid = new\npath = %s/new.sock\nmode = server\n"
		    "tap = vusn0\nnetns = %s\n\nmac = 52:54:00:aa:bb:02\nmtu = 9000\n"
		    "policy = adaptive\npolicy-latency-us = 100\n",
		    sdir, netns);
	write_state(sdir, "bk.endpoint", "id = bk\npath = %s/bk.sock\nnetns = %s\ncolour = blue\n",
		    sdir, netns);
	write_state(sdir, "bv.endpoint", "id = bv\npath = %s/bv.sock\nnetns = %s\nmtu = big\n",
		    sdir, netns);
	write_state(sdir, "bp.endpoint", "id = bp\npath = %s/bp.sock\nnetns = %s\npolicy = fast\n",
		    sdir, netns);
	for (int round = 0; round < 2; round++) {
		struct vnic_status *st = NULL;
		int seen = 0;

		st_vnicd_start(&v2, st_worker_path(), "--state-dir", sdir, NULL);
		c2 = st_connect(&v2);
		ck_assert_int_eq(vnic_status(c2, &st), 0);
		for (unsigned i = 0; i < st->nnics; i++) {
			const struct vnic_nic_status *n = &st->nics[i];

			ck_assert_msg(!strcmp(n->id, "old") || !strcmp(n->id, "new"),
				      "round %d: %s restored (log %s)", round, n->id, v2.log);
			seen++;
			if (!strcmp(n->id, "old")) {
				ck_assert_int_eq(n->policy.mode, VNIC_MITIGATION_TIMER);
				ck_assert_uint_eq(n->policy.timer_us, 200);
				ck_assert_uint_eq(n->policy.budget_packets, 64);
				ck_assert_uint_eq(n->policy.budget_bytes, 65536);
			} else {
				ck_assert_int_eq(n->policy.mode, VNIC_MITIGATION_ADAPTIVE);
				ck_assert_uint_eq(n->policy.latency_us, 100);
			}
		}
		ck_assert_int_eq(seen, 2);
		vnic_status_free(st);
		/* The refusals, each one line with file:line. */
		snprintf(path, sizeof(path), "%s/bk.endpoint:4: unknown key \"colour\"", sdir);
		ck_assert_msg(file_has(v2.log, path), "no \"%s\" in %s", path, v2.log);
		snprintf(path, sizeof(path), "%s/bv.endpoint:4: mtu: \"big\" is not a number", sdir);
		ck_assert_msg(file_has(v2.log, path), "no \"%s\" in %s", path, v2.log);
		snprintf(path, sizeof(path), "%s/bp.endpoint:4: policy: \"fast\" is not", sdir);
		ck_assert_msg(file_has(v2.log, path), "no \"%s\" in %s", path, v2.log);
		/* The old file is format 2 now, its policy by name. */
		snprintf(path, sizeof(path), "%s/old.endpoint", sdir);
		ck_assert(file_has(path, "\nid = old\n"));
		ck_assert(file_has(path, "\npolicy = timer\n"));
		ck_assert(file_has(path, "\npolicy-timer-us = 200\n"));
		ck_assert(file_has(path, "\npolicy-budget-packets = 64\n"));
		ck_assert(file_has(v2.log, round == 0 ? "old.endpoint: format 1" : "new.endpoint"));
		if (round == 1) {
			ck_assert(!file_has(v2.log, "old.endpoint: format 1"));
			ck_assert_int_eq(vnic_remove_endpoint(c2, "old", 0, NULL), 0);
			ck_assert_int_eq(vnic_remove_endpoint(c2, "new", 0, NULL), 0);
			ck_assert_int_ne(access(path, F_OK), 0);
		}
		vnic_close(c2);
		st_vnicd_stop(&v2);
		st_rmdir(v2.dir);
	}
	st_rmdir(sdir);
}
END_TEST

/* ------------------------------------------- the dirty log (issue 14) */

#define LOG_SIZE 4096u /* one bit per 4 KiB page: 128 MiB of guest memory */

/* A log memfd of size bytes, sealed as QEMU seals it (or not at all). */
static int log_memfd(size_t size, bool seal)
{
	int fd = memfd_create("fe-log", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, (off_t)size), 0);
	if (seal)
		ck_assert_int_eq(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL), 0);
	return fd;
}

/* SET_LOG_BASE as QEMU 7.2 sends it (no NEED_REPLY, an answer read all
 * the same): the u64 answer, 0 accepted; -1 when the connection closed. */
static int64_t fe_log_base(int fd, uint64_t size, uint64_t offset, const int *fds, unsigned nfds)
{
	struct vu_log l = { size, offset };
	uint64_t v = 0;

	fe_send(fd, VU_SET_LOG_BASE, 0, &l, sizeof(l), fds, nfds);
	if (fe_recv(fd, VU_SET_LOG_BASE, &v, sizeof(v)) != 8)
		return -1;
	return (int64_t)v;
}

static int64_t fe_vring_log(struct fe *f, int q, bool log, uint64_t log_addr)
{
	struct vu_vring_addr a = { .index = (uint32_t)q, .flags = log ? 1u << VU_VRING_F_LOG : 0,
				   .desc = uva_of(f, ring_off(q, 0)),
				   .avail = uva_of(f, ring_off(q, 1)),
				   .used = uva_of(f, ring_off(q, 2)), .log = log_addr };

	return fe_ack(f->fd, VU_SET_VRING_ADDR, &a, sizeof(a), NULL, 0);
}

static uint64_t ep_reconfigs(const char *id)
{
	struct vnic_status *st = NULL;
	uint64_t r = UINT64_MAX;

	ck_assert_int_eq(vnic_status(ctl, &st), 0);
	for (unsigned i = 0; i < st->nnics; i++)
		if (!strcmp(st->nics[i].id, id))
			r = st->nics[i].vhost_reconfigs;
	vnic_status_free(st);
	return r;
}

/* A refused SET_LOG_BASE: the failure answer, the connection goes on, the
 * worker is the same, and vnicd holds exactly the fds it held before (the
 * refused log's fd is closed, an earlier log is kept). */
static void log_refused(struct fe *f, int pid, int fds_before, int64_t got, const char *what)
{
	ck_assert_msg(got > 0, "%s: answer %lld, a failure expected", what, (long long)got);
	ck_assert(fe_get_u64(f->fd, VU_GET_FEATURES) & F_V1);
	ck_assert_int_eq(ep_pid("vu0", NULL, 0), pid);
	ck_assert_msg(st_fd_count(vd.pid) == fds_before, "%s: vnicd has %d fds, %d before", what,
		      st_fd_count(vd.pid), fds_before);
}

/* C11, C12, F4: bad logs are refused whole, with an answer (QEMU waits
 * for one), and nothing is kept; a good one is kept and replaces the one
 * before; sealed, it can no longer shrink under a worker. */
START_TEST(t_log_base_refused)
{
	struct fe f;
	int with_ep, pid, fds0, small, unsealed, good, good2, evfd, two[2];
	uint64_t reconf;

	NEED_PREREQS();
	with_ep = st_fd_count(vd.pid);
	fe_mem_init(&f, true);
	fe_start(&f);
	pid = wait_worker("vu0");
	reconf = ep_reconfigs("vu0");
	fds0 = st_fd_count(vd.pid);
	good = log_memfd(LOG_SIZE, true);
	small = log_memfd(4096, true);
	unsealed = log_memfd(LOG_SIZE, false);
	evfd = eventfd(0, EFD_CLOEXEC);
	for (int round = 0; round < 2; round++) {
		/* Round 1: with a good log kept, which each refusal leaves. */
		int base = fds0 + round;

		log_refused(&f, pid, base, fe_log_base(f.fd, 0, 0, &good, 1), "size 0");
		log_refused(&f, pid, base, fe_log_base(f.fd, (1ull << 30) + 4096, 0, &good, 1),
			    "size above 1 GiB");
		log_refused(&f, pid, base, fe_log_base(f.fd, 4096, UINT64_MAX - 10, &good, 1),
			    "offset + size overflows 64 bits");
		log_refused(&f, pid, base, fe_log_base(f.fd, 1ull << 30, (1ull << 63) - 4096, &good, 1),
			    "offset + size above INT64_MAX");
		log_refused(&f, pid, base, fe_log_base(f.fd, 64, 1ull << 20, &small, 1),
			    "offset past the end of the memfd");
		log_refused(&f, pid, base, fe_log_base(f.fd, 8192, 0, &small, 1),
			    "a memfd shorter than claimed");
		log_refused(&f, pid, base, fe_log_base(f.fd, LOG_SIZE, 0, &unsealed, 1),
			    "an unsealed memfd (F_SEAL_SHRINK missing)");
		log_refused(&f, pid, base, fe_log_base(f.fd, 8, 0, &evfd, 1), "an eventfd as the log");
		log_refused(&f, pid, base, fe_log_base(f.fd, LOG_SIZE, 0, NULL, 0), "no fd");
		two[0] = good, two[1] = small;
		log_refused(&f, pid, base, fe_log_base(f.fd, LOG_SIZE, 0, two, 2), "two fds");
		{
			uint64_t v = 0;

			/* A short payload: refused, answered all the same. */
			fe_send(f.fd, VU_SET_LOG_BASE, 0, &v, sizeof(v), &good, 1);
			ck_assert_int_eq(fe_recv(f.fd, VU_SET_LOG_BASE, &v, sizeof(v)), 8);
			log_refused(&f, pid, base, (int64_t)v, "an 8-byte payload");
		}
		/* VRING_F_LOG without LOG_ALL: refused, no restart. */
		log_refused(&f, pid, base, fe_vring_log(&f, 0, true, GPA + ring_off(0, 2)),
			    "VHOST_VRING_F_LOG without LOG_ALL");
		if (round == 0) {
			/* A sealed log: kept (one fd more), once, whatever NEED_REPLY says. */
			ck_assert_int_eq(fe_ack(f.fd, VU_SET_LOG_BASE, &(struct vu_log){ LOG_SIZE, 0 },
						sizeof(struct vu_log), &good, 1), 0);
			ck_assert_int_eq(st_fd_count(vd.pid), fds0 + 1);
		}
	}
	/* A second log replaces the first: still one fd. It is too small for
	 * the memory table (1 byte: 32 KiB of guest memory), which matters
	 * only once LOG_ALL is acked: then refused, no restart. */
	good2 = log_memfd(4096, true);
	ck_assert_int_eq(fe_log_base(f.fd, 1, 4095, &good2, 1), 0);
	ck_assert_int_eq(st_fd_count(vd.pid), fds0 + 1);
	log_refused(&f, pid, fds0 + 1, fe_ack_u64(f.fd, VU_SET_FEATURES, F_PROTO | F_V1 | F_LOG_ALL),
		    "LOG_ALL with a log smaller than the memory table");
	ck_assert_int_eq(fe_log_base(f.fd, LOG_SIZE, 0, &good, 1), 0);
	/* Sealed: the front end itself cannot shrink it now. */
	ck_assert_int_eq(ftruncate(good, 0), -1);
	ck_assert_int_eq(errno, EPERM);
	ck_assert_int_eq(ep_pid("vu0", NULL, 0), pid);
	ck_assert_uint_eq(ep_reconfigs("vu0"), reconf);
	/* SET_STATUS 0 (QEMU's device stop) stops the worker and keeps the
	 * log, as it keeps the memory table: a new log still replaces it. */
	ck_assert_int_eq(fe_ack_u64(f.fd, VU_SET_STATUS, 0), 0);
	wait_no_worker("vu0");
	fds0 = st_fd_count(vd.pid);
	ck_assert_int_eq(fe_log_base(f.fd, LOG_SIZE, 0, &good, 1), 0);
	ck_assert_int_eq(st_fd_count(vd.pid), fds0);
	/* Without LOG_SHMFD negotiated, SET_LOG_BASE is not a request vnicd
	 * knows on this connection: the ordinary NEED_REPLY failure. */
	close(f.fd);
	f.fd = -1;
	wait_no_worker("vu0");
	assert_no_leak(with_ep); /* the kept log went with the connection */
	f.fd = fe_connect();
	fe_send(f.fd, VU_SET_PROTOCOL_FEATURES, 0, &(uint64_t){ PROTO_ALL & ~(1ull << VU_PROTO_LOG_SHMFD) },
		8, NULL, 0);
	ck_assert_int_gt(fe_ack(f.fd, VU_SET_LOG_BASE, &(struct vu_log){ LOG_SIZE, 0 },
				sizeof(struct vu_log), &good, 1), 0);
	ck_assert(fe_get_u64(f.fd, VU_GET_FEATURES) & F_V1);
	close(f.fd);
	f.fd = -1;
	close(good);
	close(good2);
	close(small);
	close(unsealed);
	close(evfd);
	fe_mem_free(&f);
	assert_no_leak(with_ep);
}
END_TEST

/* QEMU 7.2's order to start logging under a running device (vhost.c
 * vhost_migration_log): SET_LOG_BASE, SET_FEATURES with LOG_ALL (answer
 * awaited), SET_VRING_ADDR with VHOST_VRING_F_LOG per ring; to stop it the
 * same without. */
static void log_on(struct fe *f, int logfd, uint64_t size)
{
	ck_assert_int_eq(fe_log_base(f->fd, size, 0, &logfd, 1), 0);
	ck_assert_int_eq(fe_ack_u64(f->fd, VU_SET_FEATURES, F_PROTO | F_V1 | F_LOG_ALL), 0);
	for (int q = 0; q < 2; q++)
		ck_assert_int_eq(fe_vring_log(f, q, true, GPA + ring_off(q, 2)), 0);
}

static void log_off(struct fe *f)
{
	ck_assert_int_eq(fe_ack_u64(f->fd, VU_SET_FEATURES, F_PROTO | F_V1), 0);
	for (int q = 0; q < 2; q++)
		ck_assert_int_eq(fe_vring_log(f, q, false, 0), 0);
}

/* LOG_ALL and VRING_F_LOG on and off under traffic: the same worker all
 * along (no planned restart: reconfigs does not move), every frame once;
 * a log_guest_addr other than the used ring's is refused (C12). */
START_TEST(t_log_all_live)
{
	struct fe f;
	struct ns_socks s;
	unsigned slot = 0;
	int with_ep, pid, logfd;
	uint64_t reconf;
	char tag[8];

	NEED_PREREQS();
	with_ep = st_fd_count(vd.pid);
	netns_setup(&s);
	fe_mem_init(&f, true);
	fe_start(&f);
	pid = wait_worker("vu0");
	reconf = ep_reconfigs("vu0");
	logfd = log_memfd(LOG_SIZE, true);
	guest_post_rx(&f, 64);
	for (int round = 0; round < 3; round++) {
		/* Frames in flight while logging turns on, then off. */
		snprintf(tag, sizeof(tag), "on%d", round);
		guest_tx(&f, tag, 20, &slot);
		log_on(&f, logfd, LOG_SIZE);
		expect_rx_in_ns(&s, tag, 20);
		host_to_guest(&f, &s, "logged");
		/* Wrong log_guest_addr: refused, the ring goes on. */
		ck_assert_int_gt(fe_vring_log(&f, 0, true, GPA + ring_off(0, 1)), 0);
		ck_assert_int_gt(fe_vring_log(&f, 1, true, 0), 0);
		/* A ring's addresses themselves still need it stopped. */
		{
			struct vu_vring_addr a = { .index = 0, .desc = uva_of(&f, ring_off(0, 0)),
						   .avail = uva_of(&f, ring_off(0, 1)),
						   .used = uva_of(&f, ring_off(0, 2) + 0x800) };

			ck_assert_int_gt(fe_ack(f.fd, VU_SET_VRING_ADDR, &a, sizeof(a), NULL, 0), 0);
		}
		snprintf(tag, sizeof(tag), "off%d", round);
		guest_tx(&f, tag, 20, &slot);
		log_off(&f);
		expect_rx_in_ns(&s, tag, 20);
		host_to_guest(&f, &s, "not-logged");
		ck_assert_int_eq(ep_pid("vu0", NULL, 0), pid);
		ck_assert_uint_eq(ep_reconfigs("vu0"), reconf);
	}
	/* LOG_ALL with no log while the rings run: refused, no restart. */
	close(f.fd);
	f.fd = -1;
	wait_no_worker("vu0");
	fe_mem_free(&f);
	fe_mem_init(&f, true);
	fe_start(&f);
	pid = wait_worker("vu0");
	reconf = ep_reconfigs("vu0");
	ck_assert_int_gt(fe_ack_u64(f.fd, VU_SET_FEATURES, F_PROTO | F_V1 | F_LOG_ALL), 0);
	ck_assert_int_eq(ep_pid("vu0", NULL, 0), pid);
	/* A planned restart while logging: the new worker logs from its
	 * first write (its Config carries the log). */
	log_on(&f, logfd, LOG_SIZE);
	ck_assert_int_eq(fe_mem_table(&f), 0);
	ck_assert_uint_eq(ep_reconfigs("vu0"), reconf + 1);
	ck_assert_int_ne(wait_worker("vu0"), pid);
	slot = 0;
	guest_tx(&f, "r", 10, &slot);
	expect_rx_in_ns(&s, "r", 10);
	close(f.fd);
	f.fd = -1;
	wait_no_worker("vu0");
	fe_mem_free(&f);
	close(logfd);
	close(s.rx);
	close(s.tx);
	assert_no_leak(with_ep);
}
END_TEST

static bool log_bit(const uint8_t *log, uint64_t gpa)
{
	uint64_t p = gpa / 4096;

	return __atomic_load_n(&log[p / 8], __ATOMIC_RELAXED) & (1u << (p % 8));
}

/* One round of the end-to-end check, with logging on: RX buffers posted,
 * the snapshot, then TX frames queued (the driver writes only the TX
 * descriptor table, avail ring and buffers, which the device never
 * writes: those pages are left out) and kicked to the netns, RX from it,
 * the used rings only read; the worker stopped (GET_VRING_BASE: its last
 * bits are in the log before the answer); every other guest page that
 * changed after the snapshot has its bit, the used-ring pages included.
 * The log is cleared at the end, while no worker runs. */
static bool driver_tx_page(uint64_t off)
{
	return off == ring_off(1, 0) || off == ring_off(1, 1) ||
	       (off >= (BUF_OFF & ~4095ull) && off < BUF_OFF + 10 * BUF_SIZE);
}

static void logged_round(struct fe *f, struct ns_socks *s, uint8_t *log, const char *tag)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(7777) };
	uint8_t *snap = malloc(MEM);
	int got = 0, changed = 0;
	char text[32];

	ck_assert_ptr_nonnull(snap);
	guest_post_rx(f, 32);
	memcpy(snap, f->mem, MEM);
	for (int i = 0; i < 10; i++) {
		uint64_t off = BUF_OFF + (uint64_t)i * BUF_SIZE;
		struct vring_drv_buf b;

		snprintf(text, sizeof(text), "%s-%d", tag, i);
		b = (struct vring_drv_buf){ GPA + off, (uint32_t)build_frame(f->mem + off, text), false };
		ck_assert_int_ge(vring_drv_add(&f->drv[1], &b, 1, NULL), 0);
	}
	vring_drv_publish(&f->drv[1]);
	ck_assert_int_eq(write(f->kick[1], &(uint64_t){ 1 }, 8), 8);
	expect_rx_in_ns(s, tag, 10);
	snprintf(text, sizeof(text), "to-%s", tag);
	inet_pton(AF_INET, "198.18.0.2", &a.sin_addr);
	for (int i = 0; i < 10; i++)
		ck_assert_int_gt(sendto(s->tx, text, strlen(text), 0, (struct sockaddr *)&a,
					sizeof(a)), 0);
	for (int tries = 0; tries < 300 && got < 10; tries++) {
		void *ck;
		uint32_t len;

		while (vring_drv_get_used(&f->drv[0], &ck, &len) == 1)
			if (memmem(f->mem + (uintptr_t)ck, len, text, strlen(text)))
				got++;
		msleep(10);
	}
	ck_assert_msg(got == 10, "%s: %d of 10 frames reached the guest", tag, got);
	for (uint32_t q = 0; q < 2; q++) {
		struct vu_vring_state st = { q, 0 };

		fe_send(f->fd, VU_GET_VRING_BASE, 0, &st, sizeof(st), NULL, 0);
		ck_assert_int_eq(fe_recv(f->fd, VU_GET_VRING_BASE, &st, sizeof(st)), 8);
	}
	for (uint64_t off = 0; off < MEM; off += 4096) {
		if (driver_tx_page(off) || !memcmp(snap + off, f->mem + off, 4096))
			continue;
		changed++;
		ck_assert_msg(log_bit(log, GPA + off), "%s: guest page 0x%llx changed, no bit in "
			      "the log", tag, (unsigned long long)(GPA + off));
	}
	/* Both used rings and the RX buffers at least. */
	ck_assert_int_ge(changed, 3);
	ck_assert(memcmp(snap + ring_off(0, 2), f->mem + ring_off(0, 2), 4096));
	ck_assert(memcmp(snap + ring_off(1, 2), f->mem + ring_off(1, 2), 4096));
	/* No bit for memory the device never writes: the descriptor tables. */
	ck_assert(!log_bit(log, GPA + ring_off(0, 0)) && !log_bit(log, GPA + ring_off(1, 0)));
	free(snap);
	memset(log, 0, LOG_SIZE); /* no worker runs: nothing races the clear */
}

#ifdef VNIC_FAULT_INJECTION
/* Is id's NIC RUNNING (READY seen) now? */
static bool nic_running(const char *id)
{
	struct vnic_status *st = NULL;
	bool running = false;

	ck_assert_int_eq(vnic_status(ctl, &st), 0);
	for (unsigned j = 0; j < st->nnics; j++)
		if (!strcmp(st->nics[j].id, id) && st->nics[j].state == VNIC_NIC_RUNNING)
			running = true;
	vnic_status_free(st);
	return running;
}
#endif

/* The pid of id's worker once its NIC is RUNNING (READY seen). */
static int wait_running(const char *id)
{
	for (int i = 0; i < 500; i++) {
		struct vnic_status *st = NULL;
		int pid = 0;

		ck_assert_int_eq(vnic_status(ctl, &st), 0);
		for (unsigned j = 0; j < st->nnics; j++)
			if (!strcmp(st->nics[j].id, id) && st->nics[j].state == VNIC_NIC_RUNNING)
				pid = st->nics[j].pid;
		vnic_status_free(st);
		if (pid > 0)
			return pid;
		msleep(10);
	}
	ck_abort_msg("%s not RUNNING within 5 s (log %s)", id, vd.log);
	return -1;
}

/* The rings go again after GET_VRING_BASE: a new kick fd each, as
 * QEMU's vhost_virtqueue_start sends; a new worker session. */
static int rings_restart(struct fe *f)
{
	for (int q = 0; q < 2; q++) {
		uint64_t v = (uint64_t)q;

		ck_assert_int_eq(fe_ack(f->fd, VU_SET_VRING_KICK, &v, sizeof(v), &f->kick[q], 1), 0);
	}
	return wait_worker("vu0");
}

/* The end-to-end check (logged_round) on a worker that started logging
 * live, on a new worker session started while logging (its spec carries
 * the log), and on the crash restart of that one (its Config does). */
START_TEST(t_dirty_log_e2e)
{
	struct fe f;
	struct ns_socks s;
	uint8_t *log;
	int logfd, pid;

	NEED_PREREQS();
	netns_setup(&s);
	fe_mem_init(&f, true);
	fe_start(&f);
	wait_worker("vu0");
	logfd = log_memfd(LOG_SIZE, true);
	log = mmap(NULL, LOG_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, logfd, 0);
	ck_assert_ptr_ne(log, MAP_FAILED);
	log_on(&f, logfd, LOG_SIZE);
	logged_round(&f, &s, log, "live");
	rings_restart(&f);
	logged_round(&f, &s, log, "session");
	rings_restart(&f);
	pid = wait_running("vu0"); /* a crash, not a start that failed */
	kill(pid, SIGKILL);
	for (int i = 0; i < 300 && ep_pid("vu0", NULL, 0) == pid; i++)
		msleep(10);
	ck_assert_int_ne(wait_running("vu0"), pid);
	logged_round(&f, &s, log, "crash");
	munmap(log, LOG_SIZE);
	close(logfd);
	fe_end(&f, &s);
}
END_TEST

/* What an eventfd counted since the last read: 0 when nothing. */
static uint64_t evfd_drain(int fd)
{
	uint64_t v = 0;

	if (read(fd, &v, sizeof(v)) != (ssize_t)sizeof(v))
		return 0;
	return v;
}

/* An interrupt on fd within 3 s (the worker's TX policy may hold one a
 * little). */
static bool evfd_signalled(int fd)
{
	struct pollfd p = { fd, POLLIN, 0 };

	return poll(&p, 1, 3000) == 1 && evfd_drain(fd) > 0;
}

/* SET_VRING_CALL on running rings (QEMU's interrupt mask/unmask, its
 * device start on a migration's destination): the worker swaps the fd
 * live: the same worker, no planned restart (reconfigs does not move),
 * every frame once; after the answer, interrupts come on the new fd and
 * never on the old one; a crash restart after the swaps uses the new fds. */
START_TEST(t_call_fd_live)
{
	struct fe f;
	struct ns_socks s;
	unsigned slot = 0;
	int with_ep, pid, pid2;
	uint64_t reconf;
	char tag[16];

	NEED_PREREQS();
	with_ep = st_fd_count(vd.pid);
	netns_setup(&s);
	fe_mem_init(&f, true);
	fe_start(&f);
	pid = wait_running("vu0");
	reconf = ep_reconfigs("vu0");
	guest_post_rx(&f, 64);
	for (int round = 0; round < 4; round++) {
		for (int q = 0; q < 2; q++) {
			uint64_t v = (uint64_t)q;
			int old = f.call[q];
			int nfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);

			ck_assert_int_ge(nfd, 0);
			/* Frames in flight while the fd changes. */
			snprintf(tag, sizeof(tag), "c%d-%d", round, q);
			guest_tx(&f, tag, 20, &slot);
			ck_assert_int_eq(fe_ack(f.fd, VU_SET_VRING_CALL, &v, sizeof(v), &nfd, 1), 0);
			/* From the answer on, nothing more on the old fd. */
			evfd_drain(old);
			evfd_drain(nfd);
			f.call[q] = nfd;
			expect_rx_in_ns(&s, tag, 20);
			host_to_guest(&f, &s, "after-a-call-swap");
			guest_tx(&f, tag, 1, &slot);
			expect_rx_in_ns(&s, tag, 1);
			ck_assert_msg(evfd_signalled(nfd), "round %d ring %d: no interrupt on the "
				      "new call fd (log %s)", round, q, vd.log);
			ck_assert_msg(evfd_drain(old) == 0, "round %d ring %d: an interrupt on the "
				      "old call fd after the answer (log %s)", round, q, vd.log);
			close(old);
			ck_assert_int_eq(ep_pid("vu0", NULL, 0), pid);
			ck_assert_uint_eq(ep_reconfigs("vu0"), reconf);
		}
	}
	/* A crash restart after the swaps: its Config has the new fds. */
	kill(pid, SIGKILL);
	for (int i = 0; i < 300 && ep_pid("vu0", NULL, 0) == pid; i++)
		msleep(10);
	pid2 = wait_running("vu0");
	ck_assert_int_ne(pid2, pid);
	for (int q = 0; q < 2; q++)
		evfd_drain(f.call[q]);
	guest_tx(&f, "crash", 10, &slot);
	expect_rx_in_ns(&s, "crash", 10);
	host_to_guest(&f, &s, "after-the-crash");
	for (int q = 0; q < 2; q++)
		ck_assert_msg(evfd_signalled(f.call[q]), "ring %d: no interrupt on the new call "
			      "fd after a crash restart (log %s)", q, vd.log);
	ck_assert_uint_eq(ep_reconfigs("vu0"), reconf);
	fe_end(&f, &s);
	assert_no_leak(with_ep);
}
END_TEST

#ifdef VNIC_FAULT_INJECTION
/* A new vnicd whose workers take the fault spec (VNIC_FAULT), with
 * endpoint vu0 on tap vut0. */
static void faulty_vnicd_endpoint(const char *spec)
{
	vnic_close(ctl);
	st_vnicd_stop(&vd);
	st_rmdir(vd.dir);
	setenv("VNIC_FAULT", spec, 1);
	st_vnicd_start(&vd, st_worker_path(), "--state-dir", "", NULL);
	unsetenv("VNIC_FAULT");
	ck_assert_int_lt(snprintf(sockpath, sizeof(sockpath), "%s/vu.sock", vd.dir),
			 (int)sizeof(sockpath));
	ctl = st_connect(&vd);
	add_endpoint("vu0", "vut0", true);
}
#endif

/* SET_VRING_CALL while the worker is still starting (a migration's
 * destination: QEMU starts the device, then sends each ring's call fd;
 * QEMU's guest stays paused until the messages that follow are answered).
 * vnicd answers at once: the worker swaps before its first ring run, so
 * the front end is not held for the worker's start; and the interrupts
 * come on the new fds, never on the ones the worker started with.
 * Forced (fault-injection builds): the worker sleeps 2 s before READY
 * (worker.ready.send=delay:2000), and the answers must come while the NIC
 * is not RUNNING. */
START_TEST(t_call_fd_during_start)
{
#ifndef VNIC_FAULT_INJECTION
	NEED_PREREQS();
	fprintf(stderr, "t_call_fd_during_start: needs a fault-injection build, not run\n");
#else
	struct fe f;
	struct ns_socks s;
	struct timespec t0, t1;
	unsigned slot = 0;
	int old[2], nfd[2];
	char state[32] = "";
	long ms;

	NEED_PREREQS();
	/* A vnicd whose workers are slow to start. */
	faulty_vnicd_endpoint("worker.ready.send=delay:2000");
	netns_setup(&s);
	fe_mem_init(&f, true);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	fe_start(&f); /* ring 1's SET_VRING_CALL follows its KICK: the start */
	for (int q = 0; q < 2; q++) {
		uint64_t v = (uint64_t)q;

		old[q] = f.call[q];
		nfd[q] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		ck_assert_int_ge(nfd[q], 0);
		ck_assert_int_eq(fe_ack(f.fd, VU_SET_VRING_CALL, &v, sizeof(v), &nfd[q], 1), 0);
		f.call[q] = nfd[q];
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
	ck_assert_int_gt(ep_pid("vu0", state, sizeof(state)), 0);
	ck_assert_msg(!nic_running("vu0"), "every answer waited for the worker's start "
		      "(%ld ms, vhost state %s; log %s)", ms, state, vd.log);
	wait_running("vu0");
	guest_post_rx(&f, 64);
	guest_tx(&f, "early", 5, &slot);
	expect_rx_in_ns(&s, "early", 5);
	host_to_guest(&f, &s, "after-an-early-swap");
	for (int q = 0; q < 2; q++) {
		ck_assert_msg(evfd_signalled(nfd[q]), "ring %d: no interrupt on the call fd sent "
			      "during the start (log %s)", q, vd.log);
		ck_assert_msg(evfd_drain(old[q]) == 0, "ring %d: an interrupt on the call fd "
			      "replaced during the start (log %s)", q, vd.log);
		close(old[q]);
	}
	ck_assert_msg(log_has("sent before READY"), "no early CallFdSet in the log %s", vd.log);
	fe_end(&f, &s);
#endif
}
END_TEST

/* A device stop takes the pair's tap queue out of the steering (the
 * guest turned it off) as soon as its worker reported Stopped, not after
 * the reap: the worker's exit (its guest memory unmapped, its namespaces
 * dropped) and the detach (TUNSETQUEUE waits for an RCU grace period) then
 * run side by side, and the answer that waits for the reap (SET_STATUS 0,
 * GET_VRING_BASE: a migration's downtime) follows the reap at once.
 * Forced (fault-injection builds): the worker sleeps 1 s after Stopped
 * (worker.exit=delay:1000); the queue must leave the steering while it
 * lives, and the answer still waits for its reap. */
START_TEST(t_unsteer_at_stopped)
{
#ifndef VNIC_FAULT_INJECTION
	NEED_PREREQS();
	fprintf(stderr, "t_unsteer_at_stopped: needs a fault-injection build, not run\n");
#else
	struct fe f;
	struct ns_socks s;
	char out[4096];
	int pid;

	NEED_PREREQS();
	faulty_vnicd_endpoint("worker.exit=delay:1000");
	netns_setup(&s);
	fe_mem_init(&f, true);
	fe_start(&f);
	pid = wait_running("vu0");
	expect_tap("numqueues 1 numdisabled 0");

	/* SET_STATUS 0, its answer not read yet: the queue leaves the
	 * steering while the stopped worker still sleeps. */
	fe_send(f.fd, VU_SET_STATUS, VU_FLAG_NEED_REPLY, &(uint64_t){ 0 }, 8, NULL, 0);
	while (!tap_has("numqueues 0 numdisabled 1", out, sizeof(out))) {
		ck_assert_msg(st_pid_alive(pid), "worker %d reaped with its tap queue still "
			      "steered to: %s (log %s)", pid, out, vd.log);
		msleep(5);
	}
	ck_assert_msg(st_pid_alive(pid), "worker %d reaped before the tap queue left the "
		      "steering (log %s)", pid, vd.log);
	{
		uint64_t v = 1;

		ck_assert_int_eq(fe_recv(f.fd, VU_SET_STATUS, &v, sizeof(v)), 8);
		ck_assert_uint_eq(v, 0);
	}
	ck_assert_msg(!st_pid_alive(pid), "worker %d alive at SET_STATUS 0's answer", pid);
	ck_assert_msg(log_has("point worker.exit fired"), "no fault (log %s)", vd.log);
	fe_end(&f, &s);
#endif
}
END_TEST

/* ------------------------------------- the front end's inflight region */

/* GET_INFLIGHT_FD: the answer's mmap_size (0: refused, then no fd) and the
 * region's fd in *fd (-1 with none); -1: the connection closed. */
static int64_t fe_get_inflight(int sock, uint16_t nq, uint16_t qs, const int *fds, unsigned nfds,
			       int *fd)
{
	struct vu_inflight in = { .num_queues = nq, .queue_size = qs }, out;
	struct vu_hdr h;
	struct iovec iov[2] = { { &h, sizeof(h) }, { &out, sizeof(out) } };
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr a;
	} cm;
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = 2, .msg_control = cm.buf,
			     .msg_controllen = sizeof(cm.buf) };
	struct cmsghdr *c;
	ssize_t r;

	*fd = -1;
	fe_send(sock, VU_GET_INFLIGHT_FD, 0, &in, sizeof(in), fds, nfds);
	r = recvmsg(sock, &mh, MSG_WAITALL | MSG_CMSG_CLOEXEC);
	if (r <= 0)
		return -1;
	ck_assert_int_eq(r, (ssize_t)(sizeof(h) + sizeof(out)));
	ck_assert_uint_eq(h.request, VU_GET_INFLIGHT_FD);
	ck_assert_uint_eq(h.size, sizeof(out));
	ck_assert(!(mh.msg_flags & MSG_CTRUNC));
	c = CMSG_FIRSTHDR(&mh);
	if (c && c->cmsg_type == SCM_RIGHTS) {
		ck_assert_uint_eq(c->cmsg_len, CMSG_LEN(sizeof(int)));
		memcpy(fd, CMSG_DATA(c), sizeof(int));
	}
	/* An fd exactly when there is a region. */
	ck_assert_int_eq(out.mmap_size > 0, *fd >= 0);
	if (out.mmap_size)
		ck_assert_uint_eq(out.mmap_offset, 0);
	return (int64_t)out.mmap_size;
}

static int64_t fe_set_inflight(int sock, const int *fds, unsigned nfds, uint64_t size,
			       uint64_t offset, uint16_t nq, uint16_t qs)
{
	struct vu_inflight in = { .mmap_size = size, .mmap_offset = offset, .num_queues = nq,
				  .queue_size = qs };

	return fe_ack(sock, VU_SET_INFLIGHT_FD, &in, sizeof(in), fds, nfds);
}

/* Where status says endpoint id's inflight region lives. */
static void expect_inflight_status(const char *id, const char *want)
{
	struct vnic_status *st = NULL;
	bool found = false;

	ck_assert_int_eq(vnic_status(ctl, &st), 0);
	for (unsigned i = 0; i < st->nnics; i++)
		if (!strcmp(st->nics[i].id, id)) {
			ck_assert_str_eq(st->inflight[i].where, want);
			found = true;
		}
	vnic_status_free(st);
	ck_assert(found);
}

/* How many of vnicd's fds are its inflight memfds ("vnic-inflight"). */
static int inflight_memfds(pid_t pid)
{
	char cmd[160], out[32];

	snprintf(cmd, sizeof(cmd), "ls -l /proc/%d/fd | grep -c 'memfd:vnic-inflight'", (int)pid);
	st_run_capture(cmd, out, sizeof(out));
	return atoi(out);
}

/* GET_INFLIGHT_FD and SET_INFLIGHT_FD as hostile input (issue 16, the
 * anchors' CVEs): geometry out of range (CVE-2021-3839's unchecked
 * num_queues) refused with no region and the connection kept; fds beyond
 * the one SET takes closed (CVE-2022-0669); a GET flood holding one
 * memfd, not one per GET (GHSA-whmr-hj5c-pm9g); regions that are not
 * memfds, unsealed, short, misplaced or not vnicd's layout refused; then
 * a region the front end zeroed accepted and a worker running on it, and
 * both requests refused while it runs. vnicd's fds back to the baseline. */
START_TEST(t_inflight_messages)
{
	static const struct { uint16_t nq, qs; } bad[] = {
		{ 0, QS }, { 1, QS }, { 3, QS }, { 2 * PAIRS_SERVED + 2, QS }, { 0xffff, QS },
		{ 2, 0 }, { 2, 1000 }, { 2, 0xffff },
	};
	struct fe f;
	struct ns_socks s;
	unsigned slot = 0;
	int with_ep, fd, two[2], efd, mfd, zfd, pid;
	int64_t size;
	uint8_t *p;

	NEED_PREREQS();
	with_ep = st_fd_count(vd.pid);
	fe_mem_init(&f, true);
	fe_negotiate(&f);
	expect_inflight_status("vu0", "vnicd");
	/* (Refusals are logged 20 per 5 s: the lines looked for come early.) */
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_int_eq(fe_get_inflight(f.fd, bad[i].nq, bad[i].qs, NULL, 0, &fd), 0);
	ck_assert(log_has("GET_INFLIGHT_FD: num_queues 65535: need an even count"));
	for (size_t i = 2; i < 8; i += 3)
		ck_assert_int_eq(fe_set_inflight(f.fd, &f.memfd, 1, 4096, 0, bad[i].nq, bad[i].qs), 1);
	/* The flood: every answer a region, vnicd holding one. */
	for (int i = 0; i < 1000; i++) {
		size = fe_get_inflight(f.fd, 2, QS, NULL, 0, &fd);
		ck_assert_int_gt(size, 0);
		close(fd);
	}
	ck_assert_int_eq(inflight_memfds(vd.pid), 1);
	size = fe_get_inflight(f.fd, 2, QS, NULL, 0, &fd);
	ck_assert_int_eq(size % 4096, 0);

	/* SET: one fd exactly; the others are closed unread. */
	ck_assert_int_eq(fe_set_inflight(f.fd, NULL, 0, (uint64_t)size, 0, 2, QS), 1);
	two[0] = fd;
	two[1] = dup(fd);
	ck_assert_int_eq(fe_set_inflight(f.fd, two, 2, (uint64_t)size, 0, 2, QS), 1);
	close(two[1]);
	efd = eventfd(0, EFD_CLOEXEC);
	ck_assert_int_eq(fe_set_inflight(f.fd, &efd, 1, (uint64_t)size, 0, 2, QS), 1);
	close(efd);
	/* Unsealed: the front end could shrink it under a worker. */
	mfd = memfd_create("fe-inflight", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	ck_assert_int_eq(ftruncate(mfd, size + 4096), 0);
	ck_assert_int_eq(fe_set_inflight(f.fd, &mfd, 1, (uint64_t)size, 0, 2, QS), 1);
	ck_assert_int_eq(fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
	/* Wrong size, offset not a page, offset past the end, overflow. */
	ck_assert_int_eq(fe_set_inflight(f.fd, &mfd, 1, (uint64_t)size - 8, 0, 2, QS), 1);
	ck_assert_int_eq(fe_set_inflight(f.fd, &mfd, 1, (uint64_t)size, 100, 2, QS), 1);
	ck_assert_int_eq(fe_set_inflight(f.fd, &mfd, 1, (uint64_t)size, 8192, 2, QS), 1);
	ck_assert_int_eq(fe_set_inflight(f.fd, &mfd, 1, (uint64_t)size, ~0ull << 12, 2, QS), 1);
	/* Not vnicd's layout: a header of garbage. */
	p = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
	ck_assert_ptr_ne(p, MAP_FAILED);
	memset(p, 0x5a, 64);
	ck_assert_int_eq(fe_set_inflight(f.fd, &mfd, 1, (uint64_t)size, 0, 2, QS), 1);
	/* The right geometry with the wrong queue size is not it either. */
	ck_assert_int_eq(fe_set_inflight(f.fd, &fd, 1, (uint64_t)size, 0, 2, QS / 2), 1);
	ck_assert(log_has("SET_INFLIGHT_FD: inflight region: the memfd is not sealed"));
	/* Refused, and still talking. */
	ck_assert(fe_get_u64(f.fd, VU_GET_FEATURES) & F_V1);

	/* A region the front end cleared (QEMU's reset): zero is fresh. */
	memset(p, 0, (size_t)size);
	ck_assert_int_eq(fe_set_inflight(f.fd, &mfd, 1, (uint64_t)size, 0, 2, QS), 0);
	ck_assert_int_eq(inflight_memfds(vd.pid), 0); /* ours, replaced by the front end's */
	netns_setup(&s);
	ck_assert_int_eq(fe_mem_table(&f), 0);
	for (int q = 0; q < 2; q++)
		fe_ring(&f, q, 0);
	for (int q = 0; q < 2; q++)
		ck_assert_int_eq(fe_ack_state(f.fd, VU_SET_VRING_ENABLE, (uint32_t)q, 1), 0);
	pid = wait_worker("vu0");
	expect_inflight_status("vu0", "front end");
	guest_tx(&f, "i", 8, &slot);
	expect_rx_in_ns(&s, "i", 8);
	/* vnicd initialised it at start: our layout, in the front end's memfd. */
	ck_assert_uint_eq(*(uint64_t *)(void *)p, 0x544c464e49434e56ull);
	/* While the device runs neither changes the region. */
	ck_assert_int_eq(fe_get_inflight(f.fd, 2, QS, NULL, 0, &zfd), 0);
	ck_assert_int_eq(fe_set_inflight(f.fd, &fd, 1, (uint64_t)size, 0, 2, QS), 1);
	ck_assert_int_eq(ep_pid("vu0", NULL, 0), pid); /* the worker untouched */
	guest_tx(&f, "j", 4, &slot);
	expect_rx_in_ns(&s, "j", 4);
	/* A GET with an fd is malformed: closed, the fd with it. */
	ck_assert_int_eq(fe_get_inflight(f.fd, 2, QS, &fd, 1, &zfd), -1);
	wait_no_worker("vu0");
	munmap(p, (size_t)size);
	close(mfd);
	close(fd);
	fe_mem_free(&f);
	close(s.rx);
	close(s.tx);
	assert_no_leak(with_ep);
	ck_assert(st_pid_alive(vd.pid));
}
END_TEST

#ifdef VNIC_FAULT_INJECTION
/* Is a datagram waiting in the netns? Its text in buf. */
static bool ns_recv(struct ns_socks *s, char *buf, size_t len, int flags)
{
	ssize_t r = recv(s->rx, buf, len - 1, flags);

	if (r <= 0)
		return false;
	buf[r] = '\0';
	return true;
}
#endif

/*
 * Issue 16 (TESTPLAN L16): every TX chain back exactly once and every frame out at most
 * once across the death of vnicd AND its worker, with no fd store: the
 * inflight region outlives both, in a file of vnicd's state directory on
 * tmpfs, or in the hands of a front end that keeps it (INFLIGHT_SHMFD).
 * Both vhost-user modes: the file's round in server mode (the front end
 * reconnects), the others in client mode (vnicd does).
 *
 * Forced (fault-injection builds): the worker sleeps right after it sent
 * the 5th frame and wrote its used element, before it published the used
 * index (worker.inflight.used_elem=delay@5); vnicd and the worker are
 * SIGKILLed there. A new vnicd comes back from its state directory and
 * connects; the front end resumes each ring at its used->idx, as QEMU
 * does. Round 0 with no state directory (the endpoint added again): the
 * region, a memfd, died with vnicd and the frame in flight goes out twice
 * (the test sees it: the forcing works). Round 1:
 * vnicd's region in its state directory (/dev/shm: tmpfs), the front end
 * without INFLIGHT_SHMFD. Round 2: the front end's region, sent back with
 * SET_INFLIGHT_FD. Rounds 1 and 2: no frame twice, every chain returned
 * once.
 */
START_TEST(t_inflight_survives_vnicd)
{
#ifndef VNIC_FAULT_INJECTION
	NEED_PREREQS();
	fprintf(stderr, "t_inflight_survives_vnicd: needs a fault-injection build, not run\n");
#else
	char sdir[] = "/dev/shm/vnicd-vu-inflight.XXXXXX", fepath[100], srvpath[100];
	struct vnic_vhost_user_config cfg = { .id = "if0", .tap_name = "vuti0" };
	struct timeval tv = { 10, 0 };
	int lfd;

	NEED_PREREQS();
	lfd = fe_listen(sdir, fepath, sizeof(fepath), &tv);
	snprintf(srvpath, sizeof(srvpath), "%s/vnicd.sock", sdir);
	cfg.netns = netns;

	for (int round = 0; round < 3; round++) {
		bool none = round == 0, keep = round == 2;

		cfg.server = round == 1;
		cfg.path = cfg.server ? srvpath : fepath;
		struct vnicd_proc v[2];
		struct vnic_conn *c2, *save = ctl;
		struct ns_socks s;
		struct fe f;
		unsigned slot = 0;
		int ifd = -1, pid;
		int64_t isize = 0;
		uint16_t used1;
		char buf[128], err[256], ifname[32], want[64];
		void *ck;
		uint32_t len;
		int got;

		fe_mem_init(&f, true);
		for (int life = 0; life < 2; life++) {
			uint64_t proto = PROTO_ALL & ~(keep ? 0 : 1ull << VU_PROTO_INFLIGHT_SHMFD);

			if (life == 0)
				setenv("VNIC_FAULT", "worker.inflight.used_elem=delay:20000@5", 1);
			st_vnicd_start(&v[life], st_worker_path(), "--state-dir", none ? "" : sdir,
				       NULL);
			unsetenv("VNIC_FAULT");
			c2 = st_connect(&v[life]);
			ctl = c2;
			if (life == 0 || none)
				ck_assert_msg(vnic_add_vhost_user(c2, &cfg, ifname, sizeof(ifname), err,
								  sizeof(err)) == 0, "%s", err);
			/* vnicd connects to us, or we to it (life 1: from its
			 * state file, or added again with no state directory). */
			f.fd = cfg.server ? fe_connect_to(srvpath) : accept4(lfd, NULL, NULL,
									    SOCK_CLOEXEC);
			ck_assert_int_ge(f.fd, 0);
			setsockopt(f.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
			ck_assert(fe_get_u64(f.fd, VU_GET_FEATURES) & F_V1);
			fe_send(f.fd, VU_SET_OWNER, 0, NULL, 0, NULL, 0);
			fe_send(f.fd, VU_SET_PROTOCOL_FEATURES, 0, &proto, 8, NULL, 0);
			ck_assert_int_eq(fe_ack_u64(f.fd, VU_SET_FEATURES, F_PROTO | F_V1), 0);
			if (keep && life == 0) {
				isize = fe_get_inflight(f.fd, 2, QS, NULL, 0, &ifd);
				ck_assert_int_gt(isize, 0);
			}
			if (keep)
				ck_assert_int_eq(fe_set_inflight(f.fd, &ifd, 1, (uint64_t)isize, 0, 2,
								 QS), 0);
			ck_assert_int_eq(fe_mem_table(&f), 0);
			/* Each ring where the guest saw it: its used->idx. */
			used1 = *(volatile uint16_t *)(void *)(f.mem + ring_off(1, 2) + 2);
			fe_ring(&f, 0, 0);
			fe_ring(&f, 1, used1);
			for (int q = 0; q < 2; q++)
				ck_assert_int_eq(fe_ack_state(f.fd, VU_SET_VRING_ENABLE, (uint32_t)q,
							      1), 0);
			pid = wait_worker("if0");
			if (life == 0) {
				netns_setup_tap(&s, "vuti0");
				guest_tx(&f, "x", 5, &slot);
				/* All five sent: the fifth's used index never came. */
				expect_rx_in_ns(&s, "x", 5);
				for (int i = 0; i < 500 && !log_file_has(v[0].log,
					"point worker.inflight.used_elem fired"); i++)
					msleep(10);
				ck_assert_msg(log_file_has(v[0].log,
					"point worker.inflight.used_elem fired"), "no fault (log %s)",
					v[0].log);
				ck_assert_uint_lt(*(volatile uint16_t *)(void *)(f.mem + ring_off(1, 2) + 2), 5);
				/* vnicd first: the sleeping worker cannot notice it. */
				kill(v[0].pid, SIGKILL);
				waitpid(v[0].pid, NULL, 0);
				kill(pid, SIGKILL);
				for (int i = 0; i < 300 && st_pid_alive(pid); i++)
					msleep(10);
				ck_assert(!st_pid_alive(pid));
				vnic_close(c2);
				unlink(v[0].sock);
				st_rmdir(v[0].dir);
				close(f.fd);
				f.fd = -1;
				continue;
			}
			netns_addr("vuti0");
			guest_tx(&f, "y", 5, &slot);
			got = ns_recv(&s, buf, sizeof(buf), 0);
			ck_assert_msg(got, "nothing reached the netns after the restart");
			if (none) {
				/* The forcing works: without a region a frame goes twice. */
				ck_assert_msg(!strncmp(buf, "x-", 2), "round without a region: "
					      "\"%s\" first, a repeated x- frame expected", buf);
				while (ns_recv(&s, buf, sizeof(buf), 0) && strncmp(buf, "y-4", 4))
					;
			} else {
				ck_assert_str_eq(buf, "y-0");
				for (int i = 1; i < 5; i++) {
					ck_assert(ns_recv(&s, buf, sizeof(buf), 0));
					snprintf(want, sizeof(want), "y-%d", i);
					ck_assert_str_eq(buf, want);
				}
				ck_assert(!ns_recv(&s, buf, sizeof(buf), MSG_DONTWAIT));
				/* Every chain back exactly once: none twice (-EIO), none
				 * missing. */
				for (int i = 0; i < 300 && f.drv[1].num_free != QS; i++) {
					int r;

					while ((r = vring_drv_get_used(&f.drv[1], &ck, &len)) == 1)
						;
					ck_assert_int_eq(r, 0);
					msleep(10);
				}
				ck_assert_uint_eq(f.drv[1].num_free, QS);
				snprintf(want, sizeof(want), "%u chain(s) left in flight completed",
					 5u - used1);
				ck_assert_msg(log_file_has(v[1].log, want), "no \"%s\" (log %s)", want,
					      v[1].log);
				if (!keep)
					ck_assert(log_file_has(v[1].log, "pair 0 resumes on the inflight "
							       "region the previous vnicd left"));
			}
			ck_assert_int_eq(vnic_remove_endpoint(c2, "if0", 0, NULL), 0);
			vnic_close(c2);
			st_vnicd_stop(&v[1]);
			st_rmdir(v[1].dir);
		}
		ctl = save;
		if (ifd >= 0)
			close(ifd);
		close(s.rx);
		close(s.tx);
		fe_mem_free(&f);
	}
	close(lfd);
	unlink(fepath);
	st_rmdir(sdir);
#endif
}
END_TEST

/* One table, one row per request vnicd accepts, the handler in the row:
 * no row without a handler, each row's ranges sane, and a request with no
 * row is one vu_msg_check refuses before any handler (ENOSYS). */
START_TEST(t_every_row_has_a_handler)
{
	unsigned rows = 0;

	for (uint32_t r = 0; r < VU_REQUEST_MAX + 8; r++) {
		const struct vu_row_spec *row = vu_request_spec(r);
		struct vu_msg m = { .hdr = { r, VU_VERSION, 0 } };
		char err[128];

		if (!row) {
			ck_assert_int_eq(vu_msg_check(&m, err, sizeof(err)), -ENOSYS);
			continue;
		}
		rows++;
		ck_assert_msg(row->handler != NULL, "%s (%u) has no handler", row->name, r);
		ck_assert_uint_le(row->min_size, row->max_size);
		ck_assert_uint_le(row->max_size, VU_PAYLOAD_MAX);
		ck_assert_uint_le(row->min_fds, row->max_fds);
		ck_assert_uint_le(row->max_fds, VU_MAX_FDS);
	}
	/* The 26 requests of vhost_user_msg.h that vnicd serves. */
	ck_assert_uint_eq(rows, 26);
}
END_TEST

START_TEST(t_print_capabilities)
{
	char bin[512], cmd[600], out[256];

	st_build_path("supervisor/vnicd", bin, sizeof(bin));
	snprintf(cmd, sizeof(cmd), "%s --print-capabilities", bin);
	ck_assert_int_eq(st_run_capture(cmd, out, sizeof(out)), 0);
	ck_assert_ptr_nonnull(strstr(out, "\"type\": \"net\""));
}
END_TEST

/* ------------------------------------------------ the announcement */

/* A packet socket in the test's netns that receives the RARP frames on
 * @ifname (3 s timeout). */
static int ns_rarp_socket(const char *ifname)
{
	struct sockaddr_ll sll = { .sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_RARP) };
	struct timeval tv = { 3, 0 };
	int self = tu_netns_enter(netns), fd;

	ck_assert_int_ge(self, 0);
	fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(ETH_P_RARP));
	sll.sll_ifindex = (int)if_nametoindex(ifname);
	ck_assert_int_eq(tu_netns_leave(self), 0);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_gt(sll.sll_ifindex, 0);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sll, sizeof(sll)), 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return fd;
}

/* SEND_RARP for @mac on connection @fd: answered (REPLY_ACK) with 0. */
static void fe_send_rarp(int fd, const uint8_t mac[6])
{
	uint8_t p[8] = { 0 };

	memcpy(p, mac, 6);
	ck_assert_int_eq(fe_ack(fd, VU_SEND_RARP, p, sizeof(p), NULL, 0), 0);
}

/* The next frame on packet socket @ps announces @mac. */
static void assert_rarp_on(int ps, const uint8_t mac[6])
{
	uint8_t f[2048];

	st_assert_rarp(f, recv(ps, f, sizeof(f), 0), mac);
}

/* Nothing more on packet socket @ps within 200 ms. */
static void assert_no_frame_on(int ps)
{
	struct pollfd p = { .fd = ps, .events = POLLIN };

	ck_assert_int_eq(poll(&p, 1, 200), 0);
}

/* SEND_RARP (issue 14): after a migration QEMU asks the back end to
 * announce the guest (a guest without GUEST_ANNOUNCE, which vnicd does
 * not offer). The frame leaves by the tap on a tap endpoint and by the
 * interface on an AF_PACKET endpoint (whose socket's TX ring is the
 * worker's), for the MAC QEMU names, not the endpoint's; a group MAC is
 * answered and sends nothing. */
START_TEST(t_send_rarp)
{
	static const uint8_t qemu_mac[6] = { 0x52, 0x54, 0x00, 0xab, 0xcd, 0xef };
	static const uint8_t group[6] = { 0x01, 0x00, 0x5e, 0x00, 0x00, 0x01 };
	struct vnic_vhost_user_config cfg = { .id = "vafp", .server = true, .tap_name = "vpa0",
					      .netns = netns, .af_packet = true };
	char cmd[400], path[128], ifname[32], err[256];
	struct fe f;
	int ps, fd, with_ep;
	uint64_t feat;

	NEED_PREREQS();
	/* The tap endpoint (vu0, tap vut0), its device not started. */
	snprintf(cmd, sizeof(cmd), "ip -n %s link set vut0 up", netns);
	ck_assert_int_eq(system(cmd), 0);
	ps = ns_rarp_socket("vut0");
	fe_mem_init(&f, true);
	fe_negotiate(&f);
	fe_send_rarp(f.fd, qemu_mac);
	assert_rarp_on(ps, qemu_mac);
	fe_send_rarp(f.fd, group);
	assert_no_frame_on(ps);
	ck_assert(log_has("SEND_RARP: mac 01:00:5e:00:00:01 is multicast, must be unicast"));
	/* And with the device running. */
	ck_assert_int_eq(fe_mem_table(&f), 0);
	fe_rings_on(&f);
	wait_worker("vu0");
	fe_send_rarp(f.fd, qemu_mac);
	assert_rarp_on(ps, qemu_mac);
	close(ps);
	fe_mem_free(&f);

	/* An AF_PACKET endpoint on one end of a veth pair: the frame comes
	 * out of the other end. */
	snprintf(cmd, sizeof(cmd),
		 "ip -n %s link add vpa0 type veth peer name vpb0 && ip -n %s link set vpa0 up && "
		 "ip -n %s link set vpb0 up", netns, netns, netns);
	ck_assert_int_eq(system(cmd), 0);
	snprintf(path, sizeof(path), "%s/vafp.sock", vd.dir);
	cfg.path = path;
	ck_assert_msg(vnic_add_vhost_user(ctl, &cfg, ifname, sizeof(ifname), err, sizeof(err)) == 0,
		      "add vafp: %s", err);
	with_ep = st_fd_count(vd.pid);
	ps = ns_rarp_socket("vpb0");
	fd = fe_connect_to(path);
	feat = fe_get_u64(fd, VU_GET_FEATURES);
	ck_assert(feat & F_PROTO);
	fe_send(fd, VU_SET_PROTOCOL_FEATURES, 0, &(uint64_t){ PROTO_ALL }, 8, NULL, 0);
	fe_send(fd, VU_SET_OWNER, 0, NULL, 0, NULL, 0);
	ck_assert_int_eq(fe_ack_u64(fd, VU_SET_FEATURES, F_PROTO | F_V1), 0);
	fe_send_rarp(fd, qemu_mac);
	assert_rarp_on(ps, qemu_mac);
	fe_send_rarp(fd, qemu_mac);
	assert_rarp_on(ps, qemu_mac);
	close(ps);
	close(fd);
	/* Each send's packet socket was closed with it. */
	assert_no_leak(with_ep);
	ck_assert_int_eq(vnic_remove_endpoint(ctl, "vafp", 0, NULL), 0);
}
END_TEST

static Suite *vu_suite(void)
{
	Suite *s = suite_create("vhost_user");
	TCase *t = tcase_create("vhost_user");

	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t, 120);
	tcase_add_test(t, t_handshake_and_unplug);
	tcase_add_test(t, t_prestarted_worker);
	tcase_add_test(t, t_prestarted_worker_binary_replaced);
	tcase_add_test(t, t_bad_messages);
	tcase_add_test(t, t_mandatory_answers);
	tcase_add_test(t, t_base_honoured);
	tcase_add_test(t, t_reset_semantics);
	tcase_add_test(t, t_status_zero_keeps_bases);
	tcase_add_test(t, t_base_after_kill);
	tcase_add_test(t, t_polled_kick);
	tcase_add_test(t, t_queue_num);
	tcase_add_test(t, t_two_pairs);
	tcase_add_test(t, t_max_queue_pairs);
	tcase_add_test(t, t_data_path);
	tcase_add_test(t, t_upgrade_mid_session);
	tcase_add_test(t, t_many_regions);
	tcase_add_test(t, t_remove_running);
	tcase_add_test(t, t_client_and_restart);
	tcase_add_test(t, t_print_capabilities);
	tcase_add_test(t, t_every_row_has_a_handler);
	tcase_add_test(t, t_state_files);
	tcase_add_test(t, t_awaiting_frontend);
	tcase_add_test(t, t_log_base_refused);
	tcase_add_test(t, t_log_all_live);
	tcase_add_test(t, t_dirty_log_e2e);
	tcase_add_test(t, t_send_rarp);
	tcase_add_test(t, t_call_fd_live);
	tcase_add_test(t, t_call_fd_during_start);
	tcase_add_test(t, t_unsteer_at_stopped);
	tcase_add_test(t, t_inflight_messages);
	tcase_add_test(t, t_inflight_survives_vnicd);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	SRunner *sr;
	int failed;

	if (!have_prereqs()) {
		printf("SKIP: check_vhost_user needs root, /dev/net/tun and ip netns\n");
		return 77;
	}
	tu_netns_init("vnicvu");
	sr = srunner_create(vu_suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	tu_netns_sweep();
	return failed ? 1 : 0;
}
