/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * check_supervisor: vnicd as a process (TESTPLAN C1, C2, C7, C10, L7) and
 * its pure pieces (validate, worker_spawn).
 *
 *  - validate_*: ring placement and fd type checks, unit level;
 *  - the contracts: a policy and its mode names survive the protobuf round
 *    trip; every VNIC_QUEUE_COUNTERS counter goes from the stats page
 *    through the snapshot, QueueStatus and libvnic with its own value;
 *  - worker_spawn: only fd 3 crosses exec, explicit argv, clean env;
 *  - 10,000 bad frames with fds: the supervisor's fd count is unchanged;
 *  - requests before Hello, wrong version, unknown body: error replies;
 *  - SO_PEERCRED: a uid that is not root and not in --group is rejected
 *    with PERMISSION_DENIED, a member of --group is accepted (root only);
 *  - a worker that never sends READY, sends garbage, or sends a message
 *    its state does not permit is killed and reaped (scripted peers: the
 *    fault-injection practice of TESTPLAN, not a stand-in for the worker);
 *  - a worker that ignores Stop is killed at the RemoveNic deadline and
 *    reaped before the reply (DEADLINE_EXCEEDED);
 *  - SIGTERM removes the socket and exits 0; without --foreground vnicd
 *    returns once its socket listens.
 */
#include "config.h"

#include <arpa/inet.h>
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "libvnic.h"
#include "pbconv.h"
#include "suptest.h"
#include "validate.h"
#include "wire.h"
#include "worker_spawn.h"

static char err[256];

/* --------------------------------------------------------- contracts */

/* One policy, one name table: every mode's name parses back to it; the
 * protobuf round trip keeps every field. */
START_TEST(policy_names_and_pb_round_trip)
{
	struct vnic_policy p = { .timer_us = 1, .poll_us = 2, .budget_packets = 3,
				 .budget_bytes = 4, .latency_us = 5, .safety_pct = 6,
				 .max_window = 7, .rx_irq_us = 8, .rx_irq_frames = 9,
				 .tx_irq_us = 10, .tx_irq_frames = 11 }, back;
	enum vnic_mitigation m;
	Vnic__Vmm__Policy pb;
	unsigned named = 0;

	for (unsigned i = 0; i < 16; i++) {
		const char *name = vnic_mitigation_name((enum vnic_mitigation)i);

		if (!strcmp(name, "?"))
			continue;
		named++;
		m = (enum vnic_mitigation)99;
		ck_assert_int_eq(vnic_mitigation_from_name(name, &m), 0);
		ck_assert_int_eq(m, i);
		p.mode = m;
		policy_to_pb(&p, &pb);
		policy_from_pb(&pb, &back);
		ck_assert_mem_eq(&back, &p, sizeof(p));
	}
	ck_assert_uint_eq(named, 5);
	ck_assert_int_eq(vnic_mitigation_from_name("default", &m), 0);
	ck_assert_int_eq(m, VNIC_MITIGATION_DEFAULT);
	ck_assert_str_eq(vnic_mitigation_name(VNIC_MITIGATION_BH), "bh");
	ck_assert_int_eq(vnic_mitigation_from_name("BH", &m), -EINVAL);
	ck_assert_int_eq(vnic_mitigation_from_name("", &m), -EINVAL);
	ck_assert_int_eq(vnic_mitigation_from_name(NULL, &m), -EINVAL);
	policy_from_pb(NULL, &back);
	ck_assert_int_eq(back.mode, VNIC_MITIGATION_DEFAULT);
	ck_assert_uint_eq(back.timer_us, 0);
}
END_TEST

/* Every counter of the list, carried end to end: a stats page with a
 * distinct value in each, read as vnicd reads it, put into QueueStatus as
 * vnicd does, and received by libvnic from a socket it thinks is vnicd. A
 * counter added to the list but dropped (or swapped) on the way fails. */
START_TEST(queue_counters_end_to_end)
{
	size_t len = stats_page_size(2);
	struct stats_page *page = calloc(1, len);
	struct stats_queue_snapshot sn;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	Vnic__Vmm__QueueStatus qs, *qp = &qs;
	Vnic__Vmm__NicStatus ns, *nsp = &ns;
	Vnic__Vmm__StatusReply sr;
	Vnic__Vmm__Reply rep;
	Vnic__Vmm__VmmMessage m;
	struct vnic_conn *conn = NULL;
	struct vnic_status *st = NULL;
	char dir[] = "/tmp/check_counters.XXXXXX", name[] = "tx0", id[] = "nic0";
	uint64_t v;
	int lfd, afd;

	ck_assert_ptr_nonnull(page);
	ck_assert_int_eq(stats_page_init(page, len, 2), 0);
	v = 1000;
#define SET_COUNTER(type, name, kind) page->q[1].name = v++;
	VNIC_QUEUE_COUNTERS(SET_COUNTER)
#undef SET_COUNTER
	stats_queue_read(&page->q[1], &sn);
	vnic__vmm__queue_status__init(&qs);
	qs.name = name;
	pbconv_queue_counters(&sn, &qs);

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/sock", dir);
	lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(lfd, 0);
	ck_assert_int_eq(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(lfd, 1), 0);
	ck_assert_int_eq(vnic_connect(sa.sun_path, &conn), 0);
	afd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	ck_assert_int_ge(afd, 0);
	/* The answer to libvnic's first request (id 1), queued before it asks. */
	vnic__vmm__nic_status__init(&ns);
	ns.id = id;
	ns.n_queues = 1;
	ns.queues = &qp;
	vnic__vmm__status_reply__init(&sr);
	sr.n_nics = 1;
	sr.nics = &nsp;
	vnic__vmm__reply__init(&rep);
	rep.request_id = 1;
	rep.body_case = VNIC__VMM__REPLY__BODY_STATUS;
	rep.status = &sr;
	vnic__vmm__vmm_message__init(&m);
	m.msg_case = VNIC__VMM__VMM_MESSAGE__MSG_REPLY;
	m.reply = &rep;
	ck_assert_int_eq(wire_vmm_send(afd, &m, NULL, 0), 0);
	ck_assert_int_eq(vnic_status(conn, &st), 0);
	ck_assert_uint_eq(st->nnics, 1);
	ck_assert_uint_eq(st->nics[0].nqueues, 1);
	ck_assert_str_eq(st->nics[0].queues[0].name, "tx0");
	v = 1000;
#define CHECK_COUNTER(type, name, kind) \
	ck_assert_msg(st->nics[0].queues[0].name == v, "%s: %llu, sent %llu", #name, \
		      (unsigned long long)st->nics[0].queues[0].name, (unsigned long long)v); \
	v++;
	VNIC_QUEUE_COUNTERS(CHECK_COUNTER)
#undef CHECK_COUNTER
	/* A page value too big for its field saturates instead of wrapping. */
	page->q[1].window = UINT64_MAX;
	stats_queue_read(&page->q[1], &sn);
	pbconv_queue_counters(&sn, &qs);
	ck_assert_uint_eq(qs.window, UINT32_MAX);
	ck_assert_uint_eq(qs.packets, 1000);

	vnic_status_free(st);
	vnic_close(conn);
	close(afd);
	close(lfd);
	unlink(sa.sun_path);
	rmdir(dir);
	free(page);
}
END_TEST

/* ---------------------------------------------------------- validate */

START_TEST(c7_validate_ring_addrs_unit)
{
	struct memtable_region_desc r[2] = {
		{ .gpa = 0x1000, .size = 0x10000, .offset = 0, .fd = -1 },
		{ .gpa = 0x11000, .size = 0x1000, .offset = 0x10000, .fd = -1 },
	};

	ck_assert_int_eq(validate_ring_addrs(r, 2, 256, 0x1000, 0x2000, 0x3000, err, sizeof(err)), 0);
	/* The used ring of a 256-entry queue is 2054 bytes: fits exactly
	 * at the end of region 0, one byte later it does not. */
	ck_assert_int_eq(validate_ring_addrs(r, 2, 256, 0x1000, 0x2000, 0x11000 - 2054 - 2,
					     err, sizeof(err)), 0);
	ck_assert_int_eq(validate_ring_addrs(r, 2, 256, 0x1000, 0x2000, 0x11000 - 2054 + 2,
					     err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "used ring"));
	/* Contiguous in gpa across two regions is still not "one region". */
	ck_assert_int_eq(validate_ring_addrs(r, 2, 2, 0x10ff0, 0x2000, 0x3000, err, sizeof(err)),
			 -EINVAL);
	ck_assert_int_eq(validate_ring_addrs(r, 2, 32768, 0x1000, 0x9000, 0xa000, err, sizeof(err)),
			 -EINVAL); /* 512 KiB of descriptors do not fit 64 KiB */
	ck_assert_int_eq(validate_ring_addrs(r, 2, 65536, 0x1000, 0x2000, 0x3000, err, sizeof(err)),
			 -EINVAL);
	ck_assert_int_eq(validate_ring_addrs(r, 0, 1, 0x1000, 0x2000, 0x3000, err, sizeof(err)),
			 -EINVAL);
	/* Exactly adjacent areas do not overlap; one byte more does. */
	ck_assert_int_eq(validate_ring_addrs(r, 2, 1, 0x1000, 0x1010, 0x1018, err, sizeof(err)), 0);
	ck_assert_int_eq(validate_ring_addrs(r, 2, 1, 0x1000, 0x100e, 0x1018, err, sizeof(err)),
			 -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "overlap"));
}
END_TEST

START_TEST(c4_queue_slot_lookup)
{
	ck_assert_int_eq(nic_queue_slot(0, 0), 0);
	ck_assert_int_eq(nic_queue_slot(0, 1), 1);
	ck_assert_int_eq(nic_queue_slot(0, 2), -1);
	ck_assert_int_eq(nic_queue_slot(0, 0x10000), -1);
	ck_assert_int_eq(nic_queue_slot(0, 0x10001), -1);
	ck_assert_int_eq(nic_queue_slot(0, UINT32_MAX), -1);
	/* Issue 15: pair k's NIC has virtqueues 2k and 2k + 1 only. */
	ck_assert_int_eq(nic_queue_slot(3, 6), 0);
	ck_assert_int_eq(nic_queue_slot(3, 7), 1);
	ck_assert_int_eq(nic_queue_slot(3, 5), -1);
	ck_assert_int_eq(nic_queue_slot(3, 8), -1);
	ck_assert_int_eq(nic_queue_slot(3, 0x10006), -1);
	ck_assert_int_eq(nic_queue_slot(NIC_MAX_PAIRS, 2 * NIC_MAX_PAIRS), -1);
	ck_assert_int_eq(nic_queue_slot(UINT32_MAX, UINT32_MAX - 1), -1);
}
END_TEST

START_TEST(f1_validate_fd_types_unit)
{
	int e = eventfd(0, EFD_CLOEXEC), p[2], sv[2];

	ck_assert_int_ge(e, 0);
	ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv), 0);
	ck_assert_int_eq(validate_eventfd(e, err, sizeof(err)), 0);
	ck_assert_int_eq(validate_eventfd(p[0], err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(validate_eventfd(-1, err, sizeof(err)), -EBADF);
	ck_assert_int_eq(validate_backend_socket(sv[0], err, sizeof(err)), 0);
	ck_assert_int_eq(validate_backend_socket(e, err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(validate_tap_fd(sv[0], err, sizeof(err)), -EINVAL);
	close(e);
	close(p[0]);
	close(p[1]);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

/* ------------------------------------------------------ worker_spawn */

static char tmpdir[64];

static void write_script(const char *path, const char *body)
{
	FILE *f = fopen(path, "w");

	ck_assert_ptr_nonnull(f);
	fprintf(f, "#!/bin/sh\n%s\n", body);
	fclose(f);
	ck_assert_int_eq(chmod(path, 0755), 0);
}

static void mk_tmpdir(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/vnic-sup-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
	chmod(tmpdir, 0755);
}

START_TEST(worker_spawn_passes_only_fd3)
{
	struct worker_proc w;
	struct worker_exit ex;
	char script[128], body[640], out[128], buf[512];
	int leak, n, fd;

	mk_tmpdir();
	snprintf(script, sizeof(script), "%s/w.sh", tmpdir);
	snprintf(out, sizeof(out), "%s/out", tmpdir);
	/* Report argv, env, and which fds the shell holds (the shell's own
	 * script fd is >= 10 in dash; we look at 3..9). */
	snprintf(body, sizeof(body),
		 "{ echo \"args:$*\"; echo \"env:$(env | grep -vc '^PWD=\\|^PATH=\\|^SHLVL=\\|^_=')\";"
		 " for i in 3 4 5 6 7 8 9; do [ -e /proc/$$/fd/$i ] && echo \"fd:$i\"; done;"
		 " echo \"fd3:$(readlink /proc/$$/fd/3)\"; echo \"fd4:$(readlink /proc/$$/fd/4)\"; } > %s;"
		 " exit 0",
		 out);
	write_script(script, body);
	/* An fd without CLOEXEC, as a careless library would leave one. */
	leak = eventfd(0, 0);
	ck_assert_int_ge(leak, 0);
	ck_assert_int_lt(leak, 10);
	setenv("VNIC_SECRET", "x", 1);
	ck_assert_int_eq(worker_spawn(script, "nicA", NULL, &w, err, sizeof(err)), 0);
	ck_assert_int_eq(worker_reap(&w, true, &ex), 1);
	ck_assert(!ex.failed);
	fd = open(out, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	n = (int)read(fd, buf, sizeof(buf) - 1);
	close(fd);
	ck_assert_int_gt(n, 0);
	buf[n] = '\0';
	ck_assert_msg(strstr(buf, "args:--nic nicA\n"), "%s", buf);
	ck_assert_msg(strstr(buf, "env:0\n"), "environment not clean: %s", buf);
	ck_assert_msg(strstr(buf, "fd3:socket:"), "no control socket at fd 3: %s", buf);
	/* Nothing else: the sandbox report travels in the stats page. */
	ck_assert_msg(!strstr(buf, "fd:4") && !strstr(buf, "fd:5") && !strstr(buf, "fd:6"),
		      "leaked fds: %s", buf);
	close(leak);
	close(w.ctrl_fd);
	close(w.pidfd);
	st_rmdir(tmpdir);
}
END_TEST

START_TEST(worker_reap_reports_signal)
{
	struct worker_proc w;
	struct worker_exit ex;
	char script[128];

	mk_tmpdir();
	snprintf(script, sizeof(script), "%s/w.sh", tmpdir);
	write_script(script, "exec sleep 30");
	ck_assert_int_eq(worker_spawn(script, "n", NULL, &w, err, sizeof(err)), 0);
	ck_assert_int_eq(worker_reap(&w, false, &ex), 0);
	ck_assert_int_eq(worker_kill(&w), 0);
	ck_assert_int_eq(worker_reap(&w, true, &ex), 1);
	ck_assert(ex.failed);
	ck_assert_int_eq(ex.sig, SIGKILL);
	ck_assert_msg(strstr(ex.desc, "killed by signal 9"), "%s", ex.desc);
	close(w.ctrl_fd);
	close(w.pidfd);
	st_rmdir(tmpdir);
}
END_TEST

/* ------------------------------------------------- vnicd: raw frames */

static struct vnicd_proc vd;

static void vd_setup(void)
{
	st_vnicd_start(&vd, "/bin/false", NULL);
}

static void vd_teardown(void)
{
	ck_assert_int_eq(st_vnicd_stop(&vd), 0);
}

static int raw_connect(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	ck_assert_int_ge(fd, 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%.100s", vd.sock);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

/* Wait up to 5 s for one reply. Returns 0 and *ret, or -EPIPE/-ETIMEDOUT. */
static int raw_reply(int fd, Vnic__Vmm__VmmMessage **ret)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	struct wire_fds fds;
	struct wire_err we;
	int rc;

	if (poll(&p, 1, 5000) <= 0)
		return -ETIMEDOUT;
	rc = wire_vmm_recv(fd, WIRE_PEER_SUPERVISOR, ret, &fds, &we);
	if (rc == 0)
		wire_fds_close(&fds);
	return rc;
}

static int send_raw(int fd, const void *buf, size_t len, const int *fds, unsigned nfds)
{
	return fdpass_send(fd, buf, len, fds, nfds);
}

static int send_req(int fd, Vnic__Vmm__Request *req, const int *fds, unsigned nfds)
{
	Vnic__Vmm__VmmMessage m;

	vnic__vmm__vmm_message__init(&m);
	m.msg_case = VNIC__VMM__VMM_MESSAGE__MSG_REQUEST;
	m.request = req;
	return wire_send(fd, &m.base, WIRE_VMM_MSG_MAX, fds, nfds);
}

static void hello_raw(int fd)
{
	Vnic__Vmm__Request req;
	Vnic__Vmm__Hello h;
	Vnic__Vmm__VmmMessage *m = NULL;
	char client[] = "raw";

	vnic__vmm__request__init(&req);
	vnic__vmm__hello__init(&h);
	h.min_version = h.max_version = WIRE_VMM_VERSION;
	h.client = client;
	req.request_id = 1;
	req.body_case = VNIC__VMM__REQUEST__BODY_HELLO;
	req.hello = &h;
	ck_assert_int_eq(send_req(fd, &req, NULL, 0), 0);
	ck_assert_int_eq(raw_reply(fd, &m), 0);
	ck_assert_int_eq(m->reply->code, VNIC__VMM__STATUS__STATUS_OK);
	wire_vmm_free(m);
}

START_TEST(c2_10k_bad_frames_fd_count_unchanged)
{
	int before = st_fd_count(vd.pid), fd = -1, e[3], reconnects = 0;
	unsigned sent = 0;

	for (int i = 0; i < 3; i++) {
		e[i] = eventfd(0, EFD_CLOEXEC);
		ck_assert_int_ge(e[i], 0);
	}
	/* Five kinds of bad frame, each with fds attached:
	 *   garbage bytes; a prefix that disagrees with the payload; a
	 *   length above the maximum; a Hello with fds (fd-less type); an
	 *   AddNic whose fd count does not match its layout. */
	while (sent < 10000) {
		Vnic__Vmm__VmmMessage *m = NULL;
		uint8_t buf[64];
		uint32_t be;
		int rc, kind = (int)(sent % 5);

		if (fd < 0) {
			fd = raw_connect();
			hello_raw(fd);
			reconnects++;
		}
		switch (kind) {
		case 0:
			memset(buf, 0xff, sizeof(buf));
			be = htonl(sizeof(buf) - 4);
			memcpy(buf, &be, 4);
			rc = send_raw(fd, buf, sizeof(buf), e, 3);
			break;
		case 1:
			be = htonl(1000);
			memcpy(buf, &be, 4);
			memset(buf + 4, 0, 8);
			rc = send_raw(fd, buf, 12, e, 2);
			break;
		case 2:
			be = htonl(WIRE_VMM_MSG_MAX + 1);
			memcpy(buf, &be, 4);
			rc = send_raw(fd, buf, 8, e, 1);
			break;
		case 3: {
			Vnic__Vmm__Request req;
			Vnic__Vmm__Hello h;
			char client[] = "x";

			vnic__vmm__request__init(&req);
			vnic__vmm__hello__init(&h);
			h.client = client;
			h.min_version = h.max_version = 1;
			req.request_id = 7;
			req.version = 1;
			req.body_case = VNIC__VMM__REQUEST__BODY_HELLO;
			req.hello = &h;
			rc = send_req(fd, &req, e, 3);
			break;
		}
		default: {
			Vnic__Vmm__Request req;
			Vnic__Vmm__AddNic a;
			char id[] = "bad";

			vnic__vmm__request__init(&req);
			vnic__vmm__add_nic__init(&a);
			a.id = id;
			req.request_id = 9;
			req.version = 1;
			req.body_case = VNIC__VMM__REQUEST__BODY_ADD_NIC;
			req.add_nic = &a;
			rc = send_req(fd, &req, e, 2); /* layout says 0 fds */
			break;
		}
		}
		if (rc == -EPIPE || rc == -ECONNRESET) {
			close(fd);
			fd = -1;
			continue;
		}
		ck_assert_msg(rc == 0, "send: %s", strerror(-rc));
		sent++;
		rc = raw_reply(fd, &m);
		if (rc == -EPIPE || rc == -ECONNRESET) {
			/* Dropped after too many bad frames in a row: expected. */
			close(fd);
			fd = -1;
			continue;
		}
		ck_assert_msg(rc == 0, "reply to bad frame %u: %s", sent, strerror(-rc));
		ck_assert_int_eq(m->msg_case, VNIC__VMM__VMM_MESSAGE__MSG_REPLY);
		ck_assert_int_eq(m->reply->code, VNIC__VMM__STATUS__STATUS_INVALID_ARGUMENT);
		ck_assert(m->reply->error[0] != '\0');
		if (kind >= 3) /* unpacked before rejection: answered by id */
			ck_assert_uint_eq(m->reply->request_id, kind == 3 ? 7 : 9);
		wire_vmm_free(m);
	}
	if (fd >= 0)
		close(fd);
	/* A peer sending only garbage was dropped, many times over. */
	ck_assert_int_gt(reconnects, 10000 / 40);
	ck_assert_int_eq(st_fd_count_settle(vd.pid, before), before);
	for (int i = 0; i < 3; i++)
		close(e[i]);
}
END_TEST

/* An AddNic of two queue pairs with a socket backend carries a socket per
 * pair (issue 15): one region, 4 x kick/call, 2 sockets = 11 fds. A frame
 * with one socket too few or too many is refused by the wire layer's fd
 * count (wire_vmm_expected_fds), before any handler, every fd closed. (libvnic refuses the first
 * itself: this is what a raw client gets.) */
START_TEST(pairs_fd_layout_refused)
{
	static const unsigned counts[] = { 10, 12 };
	int before = st_fd_count(vd.pid), fd = raw_connect(), e[12];

	for (int i = 0; i < 12; i++) {
		e[i] = eventfd(0, EFD_CLOEXEC);
		ck_assert_int_ge(e[i], 0);
	}
	hello_raw(fd);
	for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
		Vnic__Vmm__Request req;
		Vnic__Vmm__AddNic a;
		Vnic__Vmm__MemRegion reg, *regp = &reg;
		Vnic__Vmm__Queue q[4], *qp[4];
		Vnic__Vmm__Backend b;
		Vnic__Vmm__SocketBackend sock;
		Vnic__Vmm__VmmMessage *m = NULL;
		uint8_t mac[6] = { 0x52, 0x54, 0, 0, 0, 1 };
		char id[] = "twopairs";

		vnic__vmm__request__init(&req);
		vnic__vmm__add_nic__init(&a);
		vnic__vmm__mem_region__init(&reg);
		vnic__vmm__backend__init(&b);
		vnic__vmm__socket_backend__init(&sock);
		a.id = id;
		a.mac.data = mac;
		a.mac.len = 6;
		reg.size = 65536;
		a.n_regions = 1;
		a.regions = &regp;
		for (unsigned j = 0; j < 4; j++) {
			vnic__vmm__queue__init(&q[j]);
			q[j].index = j;
			q[j].size = 256;
			q[j].desc_gpa = 0x4000 * j;
			q[j].avail_gpa = 0x4000 * j + 0x1000;
			q[j].used_gpa = 0x4000 * j + 0x2000;
			qp[j] = &q[j];
		}
		a.n_queues = 4;
		a.queues = qp;
		b.kind_case = VNIC__VMM__BACKEND__KIND_SOCKET;
		b.socket = &sock;
		a.backend = &b;
		req.request_id = 20 + c;
		req.version = 1;
		req.body_case = VNIC__VMM__REQUEST__BODY_ADD_NIC;
		req.add_nic = &a;
		ck_assert_int_eq(send_req(fd, &req, e, counts[c]), 0);
		ck_assert_int_eq(raw_reply(fd, &m), 0);
		ck_assert_int_eq(m->msg_case, VNIC__VMM__VMM_MESSAGE__MSG_REPLY);
		ck_assert_uint_eq(m->reply->request_id, 20 + c);
		ck_assert_int_eq(m->reply->code, VNIC__VMM__STATUS__STATUS_INVALID_ARGUMENT);
		ck_assert_msg(strstr(m->reply->error, "needs 11 fds"), "%u fds: %s", counts[c],
			      m->reply->error);
		wire_vmm_free(m);
	}
	close(fd);
	for (int i = 0; i < 12; i++)
		close(e[i]);
	ck_assert_int_eq(st_fd_count_settle(vd.pid, before), before);
}
END_TEST

START_TEST(c10_before_hello_and_wrong_version)
{
	Vnic__Vmm__Request req;
	Vnic__Vmm__GetStatus g;
	Vnic__Vmm__VmmMessage *m = NULL;
	char empty[1] = "";
	int fd = raw_connect();

	vnic__vmm__request__init(&req);
	vnic__vmm__get_status__init(&g);
	g.id = empty;
	g.start_after = empty;
	req.request_id = 5;
	req.version = 1;
	req.body_case = VNIC__VMM__REQUEST__BODY_GET_STATUS;
	req.get_status = &g;
	ck_assert_int_eq(send_req(fd, &req, NULL, 0), 0);
	ck_assert_int_eq(raw_reply(fd, &m), 0);
	ck_assert_uint_eq(m->reply->request_id, 5);
	ck_assert_int_eq(m->reply->code, VNIC__VMM__STATUS__STATUS_FAILED_PRECONDITION);
	ck_assert_ptr_nonnull(strstr(m->reply->error, "before Hello"));
	wire_vmm_free(m);

	hello_raw(fd);
	req.version = 2; /* not what Hello negotiated */
	ck_assert_int_eq(send_req(fd, &req, NULL, 0), 0);
	ck_assert_int_eq(raw_reply(fd, &m), 0);
	ck_assert_int_eq(m->reply->code, VNIC__VMM__STATUS__STATUS_INVALID_ARGUMENT);
	ck_assert_ptr_nonnull(strstr(m->reply->error, "negotiated"));
	wire_vmm_free(m);

	close(fd);
}
END_TEST

START_TEST(l7_sigterm_removes_socket)
{
	struct vnic_conn *c = st_connect(&vd);
	struct stat st;
	pid_t pid = vd.pid;

	ck_assert_int_eq(stat(vd.sock, &st), 0);
	ck_assert(S_ISSOCK(st.st_mode));
	ck_assert_int_eq(st.st_mode & 0777, 0660);
	ck_assert_int_eq(st_vnicd_stop(&vd), 0); /* exit status 0 */
	ck_assert_int_eq(stat(vd.sock, &st), -1);
	ck_assert_int_eq(errno, ENOENT);
	ck_assert_int_eq(kill(pid, 0), -1);
	vnic_close(c);
	st_vnicd_start(&vd, "/bin/false", NULL); /* for the teardown */
}
END_TEST

/* ---------------------------------------------------------- SO_PEERCRED */

/* In a child: become uid 65534 (and gid), connect, Hello.
 * Exit 0: rejected with PERMISSION_DENIED; 1: accepted; 2+: other. */
static int child_hello_as(gid_t gid, uid_t uid, char *msg, size_t msglen)
{
	int pfd[2], status;
	pid_t pid;
	ssize_t n;

	ck_assert_int_eq(pipe(pfd), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct vnic_conn *c = NULL;
		int rc;

		close(pfd[0]);
		if (setgroups(0, NULL) < 0 || setgid(gid) < 0 || setuid(uid) < 0)
			_exit(3);
		rc = vnic_connect(vd.sock, &c);
		if (rc) {
			dprintf(pfd[1], "connect: %s", strerror(-rc));
			_exit(4);
		}
		rc = vnic_hello(c, "intruder", NULL);
		dprintf(pfd[1], "%s", vnic_last_error(c));
		_exit(rc == VNIC_STATUS_PERMISSION_DENIED ? 0 : rc == 0 ? 1 : 5);
	}
	close(pfd[1]);
	n = read(pfd[0], msg, msglen - 1);
	msg[n > 0 ? n : 0] = '\0';
	close(pfd[0]);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status));
	return WEXITSTATUS(status);
}

START_TEST(peercred_rejects_other_uid)
{
	char msg[512];
	int before = st_fd_count(vd.pid);

	/* The socket file is 0660 root: a stranger cannot even connect. */
	ck_assert_int_eq(child_hello_as(65534, 65534, msg, sizeof(msg)), 4);
	ck_assert_msg(strstr(msg, "Permission denied"), "%s", msg);
	/* Open the file mode up: now SO_PEERCRED alone must refuse. */
	ck_assert_int_eq(chmod(vd.sock, 0666), 0);
	ck_assert_msg(child_hello_as(65534, 65534, msg, sizeof(msg)) == 0, "%s", msg);
	ck_assert_msg(strstr(msg, "uid 65534 may not use vnicd"), "%s", msg);
	ck_assert_int_eq(st_fd_count_settle(vd.pid, before), before);
}
END_TEST

START_TEST(peercred_accepts_group_member)
{
	struct group *gr = getgrnam("nogroup");
	char msg[512];

	ck_assert_ptr_nonnull(gr);
	ck_assert_int_eq(st_vnicd_stop(&vd), 0);
	st_vnicd_start(&vd, "/bin/false", "--group", "nogroup", NULL);
	ck_assert_int_eq(chmod(vd.dir, 0755), 0);
	/* Mode 0660 and group nogroup: a member connects and is accepted. */
	ck_assert_int_eq(child_hello_as(gr->gr_gid, 65534, msg, sizeof(msg)), 1);
	/* Not in the group (gid 65533): refused by the file mode. */
	ck_assert_int_eq(child_hello_as(65533, 65533, msg, sizeof(msg)), 4);
}
END_TEST

/* ------------------------------------------- scripted faulty workers */

static void addnic_with_worker(const char *body, int want_rc, const char *needle)
{
	char script[128], e[512] = "";
	struct vnic_conn *c;
	struct st_guest g;
	int before, rc;

	mk_tmpdir();
	snprintf(script, sizeof(script), "%s/w.sh", tmpdir);
	write_script(script, body);
	ck_assert_int_eq(st_vnicd_stop(&vd), 0);
	st_vnicd_start(&vd, script, NULL);
	c = st_connect(&vd);
	st_guest_init(&g, "nicF");
	before = st_fd_count(vd.pid);
	rc = vnic_add_nic(c, &g.cfg, e, sizeof(e));
	ck_assert_msg(rc == want_rc, "rc %d: %s", rc, e);
	ck_assert_msg(strstr(e, needle), "\"%s\" lacks \"%s\"", e, needle);
	ck_assert_int_eq(st_nic_count(c), 0);
	ck_assert_int_eq(st_child_count(vd.pid), 0); /* killed and reaped */
	ck_assert_int_eq(st_fd_count_settle(vd.pid, before), before);
	st_guest_free(&g);
	vnic_close(c);
	st_rmdir(tmpdir);
}

START_TEST(worker_without_ready_is_killed)
{
	addnic_with_worker("exec sleep 60", VNIC_STATUS_UNAVAILABLE, "no READY within 5000 ms");
}
END_TEST

START_TEST(worker_sending_garbage_is_killed)
{
	addnic_with_worker("printf 'garbage!' >&3; exec sleep 60", VNIC_STATUS_UNAVAILABLE,
			   "malformed message");
}
END_TEST

START_TEST(worker_unpermitted_message_is_killed)
{
	/* A well-formed Stopped (WorkerMessage field 11, empty) while STARTING. */
	addnic_with_worker("printf '\\000\\000\\000\\002\\132\\000' >&3; exec sleep 60",
			   VNIC_STATUS_UNAVAILABLE, "Stopped not permitted in state STARTING");
}
END_TEST


START_TEST(worker_closing_its_channel_is_killed)
{
	char script[128], e[512] = "";
	struct vnic_conn *c;
	struct vnic_status *st = NULL;
	struct st_guest g;
	int rc, state = 0;

	/* Ready, then fd 3 closed while the process lingers: RUNNING with
	 * no way to stop it cleanly. vnicd kills it after a grace second
	 * (restarts off here: this test is about the kill). */
	mk_tmpdir();
	snprintf(script, sizeof(script), "%s/w.sh", tmpdir);
	write_script(script, "printf '\\000\\000\\000\\002\\122\\000' >&3; sleep 0.2; exec 3>&-; "
		     "exec sleep 60");
	ck_assert_int_eq(st_vnicd_stop(&vd), 0);
	st_vnicd_start(&vd, script, "--restart-max", "0", NULL);
	c = st_connect(&vd);
	st_guest_init(&g, "mute");
	rc = vnic_add_nic(c, &g.cfg, e, sizeof(e));
	ck_assert_msg(rc == 0, "%d %s", rc, e);
	for (int i = 0; i < 300 && state != VNIC_NIC_FAILED; i++) {
		usleep(10000);
		ck_assert_int_eq(vnic_status(c, &st), 0);
		state = st->nics[0].state;
		if (state == VNIC_NIC_FAILED)
			ck_assert_msg(strstr(st->nics[0].last_error, "killed by signal 9"), "%s",
				      st->nics[0].last_error);
		st = vnic_status_free(st);
	}
	ck_assert_int_eq(state, VNIC_NIC_FAILED);
	ck_assert_int_eq(st_child_count(vd.pid), 0);
	st_guest_free(&g);
	vnic_close(c);
	st_rmdir(tmpdir);
}
END_TEST

START_TEST(s1_sigsys_report_names_syscall)
{
	/* A worker killed by SIGSYS after its sandbox handler stored the
	 * record in its stats page: the supervisor names the call. */
	addnic_with_worker(ST_SH_STORE_VIOLATION "kill -SYS $$",
			   VNIC_STATUS_UNAVAILABLE, "sandbox violation: syscall socket (41)");
}
END_TEST

START_TEST(remove_deadline_kills_worker)
{
	char script[128], e[512] = "";
	struct vnic_conn *c;
	struct vnic_remove_result rr;
	struct vnic_status *st = NULL;
	struct st_guest g;
	int before, rc;
	pid_t wpid;
	char proc[64];

	/* A worker that says Ready (WorkerMessage field 10, empty) and then
	 * ignores Stop: RemoveNic must kill it at the deadline, reap it and
	 * only then answer. */
	mk_tmpdir();
	snprintf(script, sizeof(script), "%s/w.sh", tmpdir);
	write_script(script, "printf '\\000\\000\\000\\002\\122\\000' >&3; exec sleep 60");
	ck_assert_int_eq(st_vnicd_stop(&vd), 0);
	st_vnicd_start(&vd, script, NULL);
	c = st_connect(&vd);
	st_guest_init(&g, "slow");
	before = st_fd_count(vd.pid);
	rc = vnic_add_nic(c, &g.cfg, e, sizeof(e));
	ck_assert_msg(rc == 0, "%d %s", rc, e);
	ck_assert_int_eq(vnic_status(c, &st), 0);
	ck_assert_uint_eq(st->nnics, 1);
	ck_assert_int_eq(st->nics[0].state, VNIC_NIC_RUNNING);
	ck_assert(!st->nics[0].sandboxed);
	wpid = st->nics[0].pid;
	st = vnic_status_free(st);
	rc = vnic_remove_nic(c, "slow", 300, &rr);
	ck_assert_msg(rc == VNIC_STATUS_DEADLINE_EXCEEDED, "%d %s", rc, vnic_last_error(c));
	ck_assert_ptr_nonnull(strstr(vnic_last_error(c), "killed"));
	snprintf(proc, sizeof(proc), "/proc/%d", (int)wpid);
	ck_assert_msg(access(proc, F_OK) < 0, "worker %d still there", (int)wpid);
	ck_assert_uint_ge(rr.unplug_latency_us, 300000);
	ck_assert_uint_eq(rr.nqueues, 0);
	ck_assert_int_eq(st_nic_count(c), 0);
	ck_assert_int_eq(st_child_count(vd.pid), 0);
	ck_assert_int_eq(st_fd_count_settle(vd.pid, before), before);
	st_guest_free(&g);
	vnic_close(c);
	st_rmdir(tmpdir);
}
END_TEST

/* A process whose argv contains @arg, or -1. */
static pid_t find_pid_by_arg(const char *arg)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	pid_t found = -1;

	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d)) && found < 0) {
		char p[300], buf[4096];
		ssize_t n;
		int fd;

		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		snprintf(p, sizeof(p), "/proc/%s/cmdline", e->d_name);
		fd = open(p, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		for (ssize_t i = 0; i < n; i += (ssize_t)strlen(buf + i) + 1) {
			buf[n] = '\0';
			if (!strcmp(buf + i, arg))
				found = (pid_t)atoi(e->d_name);
		}
	}
	closedir(d);
	return found;
}

START_TEST(daemonizes_after_listening)
{
	char bin[512], dir[] = "/tmp/vnicd-daemon-XXXXXX", sock[128];
	struct vnic_conn *c = NULL;
	struct ucred cred;
	pid_t pid;
	int status;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(sock, sizeof(sock), "%s/c.sock", dir);
	st_build_path("supervisor/vnicd", bin, sizeof(bin));
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		for (int i = 3; i < 1024; i++)
			close(i);
		/* Unprivileged, vnicd starts only without the workers' sandbox. */
		execl(bin, "vnicd", "--socket", sock, "--worker", "/bin/false",
		      geteuid() ? "--sandbox=off" : (char *)NULL, (char *)NULL);
		_exit(127);
	}
	/* The parent returns once the socket listens: connect at once. */
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	ck_assert_int_eq(vnic_connect(sock, &c), 0);
	ck_assert_int_eq(vnic_hello(c, "t", NULL), 0);
	/* The daemon's pid: SO_PEERCRED names whoever called listen() (the
	 * parent that exited), so find the process by its command line. */
	cred.pid = find_pid_by_arg(sock);
	ck_assert_int_gt(cred.pid, 0);
	ck_assert_int_ne(cred.pid, pid);
	vnic_close(c);
	ck_assert_int_eq(kill(cred.pid, SIGTERM), 0);
	for (int i = 0; i < 500 && access(sock, F_OK) == 0; i++)
		usleep(10000);
	ck_assert_int_ne(access(sock, F_OK), 0);
	for (int i = 0; i < 500 && kill(cred.pid, 0) == 0; i++)
		usleep(10000);
	ck_assert_int_ne(kill(cred.pid, 0), 0);
	rmdir(dir);
}
END_TEST

static Suite *supervisor_suite(void)
{
	Suite *s = suite_create("supervisor");
	TCase *tu = tcase_create("unit");
	TCase *tv = tcase_create("vnicd");
	TCase *tr = tcase_create("root");

	tcase_add_test(tu, policy_names_and_pb_round_trip);
	tcase_add_test(tu, queue_counters_end_to_end);
	tcase_add_test(tu, c7_validate_ring_addrs_unit);
	tcase_add_test(tu, c4_queue_slot_lookup);
	tcase_add_test(tu, f1_validate_fd_types_unit);
	tcase_add_test(tu, worker_spawn_passes_only_fd3);
	tcase_add_test(tu, worker_reap_reports_signal);
	suite_add_tcase(s, tu);

	tcase_add_checked_fixture(tv, vd_setup, vd_teardown);
	tcase_set_timeout(tv, 120);
	tcase_add_test(tv, c2_10k_bad_frames_fd_count_unchanged);
	tcase_add_test(tv, c10_before_hello_and_wrong_version);
	tcase_add_test(tv, pairs_fd_layout_refused);
	tcase_add_test(tv, l7_sigterm_removes_socket);
	tcase_add_test(tv, worker_without_ready_is_killed);
	tcase_add_test(tv, worker_sending_garbage_is_killed);
	tcase_add_test(tv, worker_unpermitted_message_is_killed);
	tcase_add_test(tv, remove_deadline_kills_worker);
	tcase_add_test(tv, s1_sigsys_report_names_syscall);
	tcase_add_test(tv, worker_closing_its_channel_is_killed);
	tcase_add_test(tv, daemonizes_after_listening);
	suite_add_tcase(s, tv);

	if (geteuid() == 0) {
		tcase_add_checked_fixture(tr, vd_setup, vd_teardown);
		tcase_set_timeout(tr, 60);
		tcase_add_test(tr, peercred_rejects_other_uid);
		tcase_add_test(tr, peercred_accepts_group_member);
		suite_add_tcase(s, tr);
	} else {
		fprintf(stderr, "check_supervisor: not root: SO_PEERCRED tests skipped\n");
	}
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(supervisor_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
