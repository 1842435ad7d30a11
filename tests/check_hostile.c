/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * check_hostile: issue 11, what a hostile VMM did to vnicd, each defect
 * against a real vnicd over its socket (and, where it needs one, the real
 * sandboxed worker). Every test here failed against the tree before the
 * fix (run with VNIC_TOP_BUILDDIR pointing at a build of that tree).
 *
 * Raw frames: libvnic only sends what C strings can say, so the string
 * cases pack a Request with protobuf-c and patch placeholder bytes of the
 * packed buffer (an embedded NUL, bytes that are not UTF-8) before it is
 * sent with its fds.
 *
 * Cases with /bin/false as the worker need nothing; the "worker" cases
 * need root and workers/vnicd-worker (the sandbox takes root).
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <locale.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <wchar.h>

#include "suptest.h"
#include "testutil.h"
#include "vring.h"
#include "vring_drv.h"
#include "wire.h"

static struct vnicd_proc vd;
static struct vnic_conn *conn;
static struct st_guest g;
static int fds_before;
static char tmpdir[64];

static void msleep(unsigned ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

static uint64_t now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000u + (uint64_t)t.tv_nsec / 1000000u;
}

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
	if (tmpdir[0])
		st_rmdir(tmpdir);
	tmpdir[0] = '\0';
}

static void sd_teardown(void)
{
	if (vd.pid)
		ck_assert_int_eq(st_vnicd_stop(&vd), 0);
	if (tmpdir[0])
		st_rmdir(tmpdir);
	tmpdir[0] = '\0';
}

/* Lines of vnicd's log that contain needle. */
static unsigned log_count(const char *needle)
{
	char line[1024];
	unsigned n = 0;
	FILE *f = fopen(vd.log, "r");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		n += strstr(line, needle) != NULL;
	fclose(f);
	return n;
}

/* Strict UTF-8, checked with the C library (not vnicd's own code). */
static bool utf8_ok(const char *s)
{
	mbstate_t st;
	size_t n = strlen(s);

	memset(&st, 0, sizeof(st));
	ck_assert_ptr_nonnull(setlocale(LC_CTYPE, "C.UTF-8"));
	while (n > 0) {
		wchar_t wc;
		size_t k = mbrtowc(&wc, s, n, &st);

		if (k == (size_t)-1 || k == (size_t)-2 || k == 0)
			return false;
		s += k;
		n -= k;
	}
	return true;
}

/* ------------------------------------------------------ raw frames */

static int raw_connect(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	ck_assert_int_ge(fd, 0);
	ck_assert_uint_lt(strlen(vd.sock), sizeof(sa.sun_path));
	memcpy(sa.sun_path, vd.sock, strlen(vd.sock) + 1);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

/* Pack req (id, version 1), replace the unique bytes @from by @to (same
 * length; NULL for none) and send with fds. */
static void raw_send(int fd, uint64_t id, Vnic__Vmm__Request *req, const int *fds, unsigned nfds,
		     const char *from, const char *to, size_t patch_len)
{
	Vnic__Vmm__VmmMessage m;
	static uint8_t buf[WIRE_HDR_LEN + WIRE_VMM_MSG_MAX];
	size_t len;

	vnic__vmm__vmm_message__init(&m);
	req->request_id = id;
	req->version = WIRE_VMM_VERSION;
	m.msg_case = VNIC__VMM__VMM_MESSAGE__MSG_REQUEST;
	m.request = req;
	len = protobuf_c_message_get_packed_size(&m.base);
	ck_assert_uint_le(len, WIRE_VMM_MSG_MAX);
	ck_assert_uint_eq(protobuf_c_message_pack(&m.base, buf + WIRE_HDR_LEN), len);
	buf[0] = (uint8_t)(len >> 24);
	buf[1] = (uint8_t)(len >> 16);
	buf[2] = (uint8_t)(len >> 8);
	buf[3] = (uint8_t)len;
	if (from) {
		uint8_t *p = memmem(buf + WIRE_HDR_LEN, len, from, patch_len);

		ck_assert_ptr_nonnull(p);
		ck_assert_ptr_null(memmem(p + 1, len - (size_t)(p + 1 - buf - WIRE_HDR_LEN), from,
					  patch_len));
		memcpy(p, to, patch_len);
	}
	ck_assert_int_eq(fdpass_send(fd, buf, WIRE_HDR_LEN + len, fds, nfds), 0);
}

/* The next Reply (events skipped), within 5 s. Free with wire_vmm_free. */
static Vnic__Vmm__VmmMessage *raw_reply(int fd)
{
	uint64_t t0 = now_ms();

	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		Vnic__Vmm__VmmMessage *m = NULL;
		struct wire_fds fds;
		struct wire_err err;
		int r;

		ck_assert_msg(now_ms() - t0 < 5000, "no reply within 5 s");
		if (poll(&p, 1, 100) <= 0)
			continue;
		r = wire_vmm_recv(fd, WIRE_PEER_SUPERVISOR, &m, &fds, &err);
		ck_assert_msg(r == 0, "reply: %d %s", r, err.msg);
		/* What vnicd sends must pass the same string rules. */
		if (m->msg_case == VNIC__VMM__VMM_MESSAGE__MSG_REPLY)
			return m;
		wire_vmm_free(m);
	}
}

static void raw_hello(int fd, uint64_t id)
{
	Vnic__Vmm__Request req;
	Vnic__Vmm__Hello h;
	Vnic__Vmm__VmmMessage *m;
	static char client[] = "check_hostile";

	vnic__vmm__request__init(&req);
	vnic__vmm__hello__init(&h);
	h.min_version = h.max_version = WIRE_VMM_VERSION;
	h.client = client;
	req.body_case = VNIC__VMM__REQUEST__BODY_HELLO;
	req.hello = &h;
	raw_send(fd, id, &req, NULL, 0, NULL, NULL, 0);
	m = raw_reply(fd);
	ck_assert_uint_eq(m->reply->request_id, id);
	ck_assert_int_eq(m->reply->code, VNIC__VMM__STATUS__STATUS_OK);
	wire_vmm_free(m);
}

/* An AddNic from st_guest g (socket backend unless tap_name), nreg
 * regions of equal size over g's memfd. Storage is static: one at a time. */
struct raw_addnic {
	Vnic__Vmm__Request req;
	Vnic__Vmm__AddNic a;
	Vnic__Vmm__MemRegion reg[WIRE_MAX_FDS], *rp[WIRE_MAX_FDS];
	Vnic__Vmm__Queue q[2], *qp[2];
	Vnic__Vmm__Backend be;
	Vnic__Vmm__SocketBackend sock;
	Vnic__Vmm__TapBackend tap;
	uint8_t mac[6];
	int fds[WIRE_MAX_FDS];
	unsigned nfds;
};

static struct raw_addnic RA;

static void raw_addnic_build(char *id, unsigned nreg, char *tap_name, char *netns)
{
	struct raw_addnic *r = &RA;
	uint64_t each = (ST_MEM_SIZE / nreg) & ~4095ull;

	memset(r, 0, sizeof(*r));
	vnic__vmm__request__init(&r->req);
	vnic__vmm__add_nic__init(&r->a);
	vnic__vmm__backend__init(&r->be);
	memcpy(r->mac, g.cfg.mac, 6);
	r->a.id = id;
	r->a.mac.data = r->mac;
	r->a.mac.len = 6;
	r->a.mtu = 1500;
	r->a.features_offered = g.cfg.features_offered;
	r->a.features_acked = g.cfg.features_acked;
	for (unsigned i = 0; i < nreg; i++) {
		vnic__vmm__mem_region__init(&r->reg[i]);
		r->reg[i].gpa = ST_GPA_BASE + i * each;
		r->reg[i].offset = i * each;
		r->reg[i].size = i + 1 < nreg ? each : ST_MEM_SIZE - i * each;
		r->rp[i] = &r->reg[i];
		r->fds[r->nfds++] = g.memfd;
	}
	r->a.n_regions = nreg;
	r->a.regions = r->rp;
	for (unsigned j = 0; j < 2; j++) {
		vnic__vmm__queue__init(&r->q[j]);
		r->q[j].index = j;
		r->q[j].size = g.q[j].size;
		r->q[j].desc_gpa = g.q[j].desc_gpa;
		r->q[j].avail_gpa = g.q[j].avail_gpa;
		r->q[j].used_gpa = g.q[j].used_gpa;
		r->qp[j] = &r->q[j];
		r->fds[r->nfds++] = g.kick[j];
		r->fds[r->nfds++] = g.call[j];
	}
	r->a.n_queues = 2;
	r->a.queues = r->qp;
	if (tap_name) {
		vnic__vmm__tap_backend__init(&r->tap);
		r->tap.name = tap_name;
		r->tap.netns = netns;
		r->be.kind_case = VNIC__VMM__BACKEND__KIND_TAP;
		r->be.tap = &r->tap;
	} else {
		vnic__vmm__socket_backend__init(&r->sock);
		r->be.kind_case = VNIC__VMM__BACKEND__KIND_SOCKET;
		r->be.socket = &r->sock;
		r->fds[r->nfds++] = g.backend[0];
	}
	r->a.backend = &r->be;
	r->req.body_case = VNIC__VMM__REQUEST__BODY_ADD_NIC;
	r->req.add_nic = &r->a;
}

/* A reply to request id: its code, and the reason checked for needle. */
static void expect_raw_reply(int fd, uint64_t id, Vnic__Vmm__Status code, const char *needle)
{
	Vnic__Vmm__VmmMessage *m = raw_reply(fd);

	ck_assert_msg(m->reply->request_id == id, "reply to request %llu, want %llu (\"%s\")",
		      (unsigned long long)m->reply->request_id, (unsigned long long)id,
		      m->reply->error);
	ck_assert_msg(m->reply->code == code, "code %d, want %d: %s", m->reply->code, code,
		      m->reply->error);
	ck_assert_msg(strstr(m->reply->error, needle), "reason \"%s\" lacks \"%s\"",
		      m->reply->error, needle);
	ck_assert(utf8_ok(m->reply->error));
	wire_vmm_free(m);
}

/* ------------------------------------------------- 1: out of fds */

/* Lower vnicd's soft RLIMIT_NOFILE (the hard one stays). */
static void vnicd_nofile(rlim_t soft)
{
	struct rlimit old, nl;

	ck_assert_int_eq(prlimit(vd.pid, RLIMIT_NOFILE, NULL, &old), 0);
	nl.rlim_cur = soft;
	nl.rlim_max = old.rlim_max;
	ck_assert_int_eq(prlimit(vd.pid, RLIMIT_NOFILE, &nl, NULL), 0);
}

/* Item 1: when accept fails with EMFILE the pending connection must not
 * turn vnicd into a busy loop writing a log line per wake-up; once an fd
 * is free again the pending client is served. */
START_TEST(i1_accept_out_of_fds_no_busy_loop)
{
	int held[3], late;
	unsigned long t0, t1;
	unsigned lines0, lines;

	for (int i = 0; i < 3; i++) {
		held[i] = raw_connect();
		raw_hello(held[i], 1);
	}
	/* Not one fd more: the next accept fails with EMFILE. */
	vnicd_nofile((rlim_t)st_fd_count(vd.pid));
	lines0 = log_count("accept");
	late = raw_connect(); /* lands in the backlog */
	msleep(200);
	t0 = tu_cpu_ticks(vd.pid);
	msleep(1000);
	t1 = tu_cpu_ticks(vd.pid);
	lines = log_count("accept") - lines0;
	ck_assert_msg(t1 - t0 <= 15, "vnicd used %lu ticks in 1 s out of fds", t1 - t0);
	ck_assert_msg(lines <= 10, "%u accept log lines in 1.2 s", lines);
	/* An fd comes free: the waiting client is accepted and served. */
	close(held[0]);
	raw_hello(late, 7);
	vnicd_nofile(4096);
	close(late);
	close(held[1]);
	close(held[2]);
}
END_TEST

/* ------------------------------------- 2: truncated ancillary data */

/* Item 2: the kernel cuts the fds of an AddNic because vnicd's fd table
 * is full. The reply carries the request's own id and says why, and the
 * connection goes on. */
START_TEST(i2_truncated_fds_answered_with_own_id)
{
	static char id[] = "big";
	int fd = raw_connect();
	Vnic__Vmm__Request req;
	Vnic__Vmm__GetStatus gs;
	Vnic__Vmm__VmmMessage *m;
	int base;

	raw_hello(fd, 1);
	base = st_fd_count(vd.pid);
	raw_addnic_build(id, 240, NULL, NULL);
	ck_assert_uint_eq(RA.nfds, 245);
	vnicd_nofile((rlim_t)base + 8);
	raw_send(fd, 4242, &RA.req, RA.fds, RA.nfds, NULL, NULL, 0);
	expect_raw_reply(fd, 4242, VNIC__VMM__STATUS__STATUS_RESOURCE_EXHAUSTED,
			 "out of file descriptors");
	vnicd_nofile(4096);
	/* Exactly one reply, then the connection serves the next request. */
	vnic__vmm__request__init(&req);
	vnic__vmm__get_status__init(&gs);
	req.body_case = VNIC__VMM__REQUEST__BODY_GET_STATUS;
	req.get_status = &gs;
	raw_send(fd, 4243, &req, NULL, 0, NULL, NULL, 0);
	m = raw_reply(fd);
	ck_assert_uint_eq(m->reply->request_id, 4243);
	ck_assert_int_eq(m->reply->code, VNIC__VMM__STATUS__STATUS_OK);
	ck_assert_uint_eq(m->reply->status->n_nics, 0);
	wire_vmm_free(m);
	ck_assert_int_eq(st_fd_count_settle(vd.pid, base), base);
	close(fd);
}
END_TEST

/* --------------------------------------------- 3: strings on the wire */

/* Item 3: an embedded NUL or bytes that are not UTF-8, in any string of
 * any request, are refused as such; nothing is cut and used. */
START_TEST(i3_strings_nul_and_utf8_rejected)
{
	static char id[] = "hvQx", okid[] = "nicok", tap[] = "vnh0",
		    netns[] = "Q../../etc/passwd", bad2[] = "QQ", client[] = "cliQQ";
	int fd = raw_connect();
	Vnic__Vmm__Request req;
	Vnic__Vmm__GetStatus gs;
	Vnic__Vmm__RemoveNic rm;
	Vnic__Vmm__Hello h;

	raw_hello(fd, 1);
	/* The id "hv\0x" is not the NIC "hv". */
	raw_addnic_build(id, 1, NULL, NULL);
	raw_send(fd, 11, &RA.req, RA.fds, RA.nfds, "hvQx", "hv\0x", 4);
	expect_raw_reply(fd, 11, VNIC__VMM__STATUS__STATUS_INVALID_ARGUMENT, "contains a NUL");
	ck_assert_int_eq(st_nic_count(conn), 0);
	/* A netns of "\0../../etc/passwd" is not "vnicd's own". */
	raw_addnic_build(okid, 1, tap, netns);
	raw_send(fd, 12, &RA.req, RA.fds, RA.nfds, "Q../", "\0../", 4);
	expect_raw_reply(fd, 12, VNIC__VMM__STATUS__STATUS_INVALID_ARGUMENT, "netns");
	ck_assert_int_eq(st_nic_count(conn), 0);
	/* Not UTF-8, in other messages. */
	vnic__vmm__request__init(&req);
	vnic__vmm__get_status__init(&gs);
	gs.id = bad2;
	req.body_case = VNIC__VMM__REQUEST__BODY_GET_STATUS;
	req.get_status = &gs;
	raw_send(fd, 13, &req, NULL, 0, "QQ", "\xff\xfe", 2);
	expect_raw_reply(fd, 13, VNIC__VMM__STATUS__STATUS_INVALID_ARGUMENT, "not valid UTF-8");
	vnic__vmm__request__init(&req);
	vnic__vmm__remove_nic__init(&rm);
	rm.id = bad2;
	req.body_case = VNIC__VMM__REQUEST__BODY_REMOVE_NIC;
	req.remove_nic = &rm;
	raw_send(fd, 14, &req, NULL, 0, "QQ", "\xed\xa0", 2); /* a surrogate's start */
	expect_raw_reply(fd, 14, VNIC__VMM__STATUS__STATUS_INVALID_ARGUMENT, "UTF-8");
	vnic__vmm__request__init(&req);
	vnic__vmm__hello__init(&h);
	h.min_version = h.max_version = WIRE_VMM_VERSION;
	h.client = client;
	req.body_case = VNIC__VMM__REQUEST__BODY_HELLO;
	req.hello = &h;
	raw_send(fd, 15, &req, NULL, 0, "QQ", "\xc0\xaf", 2); /* overlong '/' */
	expect_raw_reply(fd, 15, VNIC__VMM__STATUS__STATUS_INVALID_ARGUMENT, "UTF-8");
	close(fd);
	ck_assert_int_eq(st_fd_count_settle(vd.pid, fds_before), fds_before);
}
END_TEST

static const char *write_script(const char *name, const char *body)
{
	static char path[128];
	FILE *f;

	if (!tmpdir[0]) {
		snprintf(tmpdir, sizeof(tmpdir), "/tmp/check_hostile.XXXXXX");
		ck_assert_ptr_nonnull(mkdtemp(tmpdir));
		chmod(tmpdir, 0755);
	}
	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fprintf(f, "#!/bin/sh\n%s\n", body);
	fclose(f);
	ck_assert_int_eq(chmod(path, 0755), 0);
	return path;
}

/* Worker frames a script can printf: Ready; Error {}; Log {text "a\0b"}. */
#define SH_READY "printf '\\000\\000\\000\\002\\122\\000' >&3"
#define SH_ERROR "printf '\\000\\000\\000\\002\\162\\000' >&3"
#define SH_LOG_NUL "printf '\\000\\000\\000\\007\\152\\005\\022\\003a\\000b' >&3"

/* Wait up to ms for a log line with needle. */
static bool log_wait(const char *needle, unsigned ms)
{
	uint64_t t0 = now_ms();

	while (now_ms() - t0 < ms) {
		if (log_count(needle))
			return true;
		msleep(20);
	}
	return false;
}

/* Item 3, the worker channel: a string with a NUL from a worker is a
 * malformed message (the worker is killed), not a shorter string. */
START_TEST(i3_worker_string_with_nul_kills_worker)
{
	struct vnic_conn *c;
	struct st_guest sg;

	st_vnicd_start(&vd, write_script("w.sh", SH_READY "; sleep 0.1; " SH_LOG_NUL
					 "; exec sleep 30"), NULL);
	c = st_connect(&vd);
	st_guest_init(&sg, "nulw");
	st_add_ok(c, &sg);
	ck_assert_msg(log_wait("contains a NUL", 3000), "no kill for a NUL in a Log (log %s)",
		      vd.log);
	ck_assert(log_count("killing worker") > 0);
	st_guest_free(&sg);
	vnic_close(c);
}
END_TEST

/* Also: ONCE is a rule of every row of the worker permission table:
 * a second Error from the same worker kills it. */
START_TEST(also_once_is_generic)
{
	struct vnic_conn *c;
	struct st_guest sg;

	st_vnicd_start(&vd, write_script("w.sh", SH_READY "; sleep 0.1; " SH_ERROR "; " SH_ERROR
					 "; exec sleep 30"), NULL);
	c = st_connect(&vd);
	st_guest_init(&sg, "twice");
	st_add_ok(c, &sg);
	ck_assert_msg(log_wait("a second Error", 3000), "second Error not refused (log %s)",
		      vd.log);
	st_guest_free(&sg);
	vnic_close(c);
}
END_TEST

/* ---------------------------------------- 4: strings vnicd sends */

/* Item 4: a reason that quotes (and cuts) a client's string is still
 * valid UTF-8. */
START_TEST(i4_replies_are_valid_utf8)
{
	char id[128] = "a";
	int rc;

	for (int i = 0; i < 40; i++)
		strcat(id, "\xc3\xa9"); /* é: the 64-byte cut falls inside one */
	rc = vnic_remove_nic(conn, id, 0, NULL);
	ck_assert_int_eq(rc, VNIC_STATUS_NOT_FOUND);
	ck_assert_msg(utf8_ok(vnic_last_error(conn)), "not UTF-8: %s", vnic_last_error(conn));
	{
		struct vnic_nic_config cfg = g.cfg;
		char err[512] = "";

		cfg.id = id;
		ck_assert_int_eq(vnic_add_nic(conn, &cfg, err, sizeof(err)),
				 VNIC_STATUS_INVALID_ARGUMENT);
		ck_assert_msg(utf8_ok(err), "not UTF-8: %s", err);
	}
}
END_TEST

/* ---------------------------------------------- 6, 7: the memfds */

static void expect_reject(int code, const char *needle)
{
	char err[512] = "";
	int rc = vnic_add_nic(conn, &g.cfg, err, sizeof(err));

	ck_assert_msg(rc == code, "AddNic returned %d (want %d): %s", rc, code, err);
	ck_assert_msg(strstr(err, needle), "reason \"%s\" lacks \"%s\"", err, needle);
	ck_assert_int_eq(st_nic_count(conn), 0);
	ck_assert_int_eq(st_child_count(vd.pid), 0);
	ck_assert_int_eq(st_fd_count(vd.pid), fds_before);
}

static int sealed_memfd(unsigned extra_seals)
{
	int fd = memfd_create("hostile", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, ST_MEM_SIZE), 0);
	ck_assert_int_eq(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | extra_seals), 0);
	return fd;
}

#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010
#endif

/* Item 6: memfds the worker cannot map read/write shared are refused
 * before anything starts (no worker spawned). */
START_TEST(i6_unmappable_memfds_rejected)
{
	char path[64];
	int fd;

	fd = sealed_memfd(F_SEAL_WRITE);
	g.reg[0].fd = fd;
	expect_reject(VNIC_STATUS_INVALID_ARGUMENT, "F_SEAL_WRITE");
	close(fd);
	fd = sealed_memfd(F_SEAL_FUTURE_WRITE);
	g.reg[0].fd = fd;
	expect_reject(VNIC_STATUS_INVALID_ARGUMENT, "F_SEAL_FUTURE_WRITE");
	close(fd);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", g.memfd);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	g.reg[0].fd = fd;
	expect_reject(VNIC_STATUS_INVALID_ARGUMENT, "read-only");
	close(fd);
	g.reg[0].fd = g.memfd;
}
END_TEST

/* Item 7: regions are page-aligned (gpa, size, offset), as VMMs send them. */
START_TEST(i7_misaligned_regions_rejected)
{
	g.reg[0].offset = 0x800;
	g.reg[0].size = ST_MEM_SIZE - 0x1000;
	expect_reject(VNIC_STATUS_INVALID_ARGUMENT, "4096-byte page");
	g.reg[0].offset = 0;
	g.reg[0].size = ST_MEM_SIZE - 0x10;
	expect_reject(VNIC_STATUS_INVALID_ARGUMENT, "4096-byte page");
	g.reg[0].size = ST_MEM_SIZE - 0x1000;
	g.reg[0].gpa = ST_GPA_BASE - 0x400;
	expect_reject(VNIC_STATUS_INVALID_ARGUMENT, "4096-byte page");
}
END_TEST

/* Item 10: a semaphore-mode eventfd is refused where the kernel shows it. */
START_TEST(i10_semaphore_eventfd_rejected)
{
	char path[64], line[128];
	bool shown = false;
	FILE *f;
	int fd = eventfd(0, EFD_SEMAPHORE | EFD_CLOEXEC | EFD_NONBLOCK);

	ck_assert_int_ge(fd, 0);
	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f))
		shown |= strncmp(line, "eventfd-semaphore:", 18) == 0;
	fclose(f);
	if (!shown) {
		fprintf(stderr, "i10_semaphore_eventfd_rejected: this kernel does not show it\n");
		close(fd);
		return;
	}
	g.q[1].kick_fd = fd;
	expect_reject(VNIC_STATUS_INVALID_ARGUMENT, "semaphore");
	g.q[1].kick_fd = g.kick[1];
	g.q[0].call_fd = fd;
	expect_reject(VNIC_STATUS_INVALID_ARGUMENT, "semaphore");
	g.q[0].call_fd = g.call[0];
	close(fd);
}
END_TEST

/* ----------------------------------------- 8: close, then reply */

/* Item 8: an AddNic whose worker died is answered only after vnicd
 * closed the NIC's fds: the count is back at the moment of the reply. */
START_TEST(i8_fds_closed_before_addnic_failure_reply)
{
	for (int i = 0; i < 40; i++) {
		char err[512] = "";
		int rc = vnic_add_nic(conn, &g.cfg, err, sizeof(err)), now;

		now = st_fd_count(vd.pid);
		ck_assert_msg(rc == VNIC_STATUS_UNAVAILABLE, "AddNic %d: %s", rc, err);
		ck_assert_msg(now == fds_before, "cycle %d: vnicd holds %d fds at the reply, %d "
			      "before", i, now, fds_before);
	}
}
END_TEST

/* Item 8, related: a client refused at accept that sends before it reads
 * gets the PERMISSION_DENIED reply, not a reset. */
START_TEST(i8_denied_client_that_sends_first_gets_reply)
{
	pid_t pid;
	int status, sync[2];

	if (geteuid() != 0) {
		fprintf(stderr, "i8_denied_client_that_sends_first_gets_reply: needs root\n");
		return;
	}
	ck_assert_int_eq(chmod(vd.sock, 0666), 0);
	/* vnicd stopped while the client connects and sends: its frame is
	 * queued before vnicd accepts and refuses the connection. */
	ck_assert_int_eq(pipe(sync), 0);
	ck_assert_int_eq(kill(vd.pid, SIGSTOP), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		char buf[4096];
		int fd;
		ssize_t n;
		static const uint8_t hello[] = { 0, 0, 0, 6, 0x0a, 0x04, 0x08, 0x01, 0x10, 0x01 };

		if (setgid(65534) < 0 || setuid(65534) < 0)
			_exit(3);
		fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
		{
			struct sockaddr_un sa = { .sun_family = AF_UNIX };

			memcpy(sa.sun_path, vd.sock, strnlen(vd.sock, sizeof(sa.sun_path) - 1));
			if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
				_exit(4);
		}
		/* Sends first (a Request frame), reads later. */
		if (send(fd, hello, sizeof(hello), MSG_NOSIGNAL) < 0)
			_exit(5);
		if (write(sync[1], "s", 1) != 1)
			_exit(7);
		usleep(300000);
		n = recv(fd, buf, sizeof(buf), 0);
		if (n < 0)
			_exit(errno == ECONNRESET ? 1 : 6);
		buf[n < (ssize_t)sizeof(buf) ? n : (ssize_t)sizeof(buf) - 1] = '\0';
		_exit(memmem(buf, (size_t)n, "may not use vnicd", 17) ? 0 : 2);
	}
	{
		char b;
		struct pollfd p = { .fd = sync[0], .events = POLLIN };

		(void)(poll(&p, 1, 5000) == 1 && read(sync[0], &b, 1) == 1);
	}
	ck_assert_int_eq(kill(vd.pid, SIGCONT), 0);
	close(sync[0]);
	close(sync[1]);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "denied client: status 0x%x (1: connection reset)", status);
}
END_TEST

/* ------------------------------------------- with the real worker */

static void lsetup(void)
{
	st_vnicd_start(&vd, st_worker_path(), NULL);
	conn = st_connect(&vd);
	st_guest_init(&g, "nic0");
	fds_before = st_fd_count(vd.pid);
}

/* Item 5: HelloReply.max_regions is what one AddNic can carry, and an
 * AddNic with that many regions runs (the Config to the worker carries 3
 * more fds than the AddNic: it is spread over several frames). */
START_TEST(i5_max_regions_addnic_runs)
{
	struct vnic_hello_info info;
	struct vnic_region reg[256];
	unsigned n;
	char err[512] = "";

	n = WIRE_MAX_FDS - 2 * 2 - 1;
	for (unsigned i = 0; i < n; i++)
		reg[i] = (struct vnic_region){ .gpa = ST_GPA_BASE + i * 4096ull,
					       .size = i + 1 < n ? 4096 : ST_MEM_SIZE - i * 4096ull,
					       .offset = i * 4096ull, .fd = g.memfd };
	/* The rings of a queue need their areas in one region each: desc
	 * (4 KiB) in one page, avail and used in the next. */
	g.cfg.regions = reg;
	g.cfg.nregions = n;
	ck_assert_msg(vnic_add_nic(conn, &g.cfg, err, sizeof(err)) == 0, "AddNic of %u regions: %s",
		      n, err);
	ck_assert_int_eq(vnic_remove_nic(conn, "nic0", 3000, NULL), 0);
	ck_assert_int_eq(vnic_hello(conn, "check_hostile", &info), 0);
	ck_assert_uint_eq(info.max_regions, n);
	/* One more region does not fit a frame: refused at once. */
	reg[n] = reg[n - 1];
	reg[n - 1].size = 4096;
	reg[n].gpa += 4096;
	reg[n].offset += 4096;
	reg[n].size -= 4096;
	g.cfg.nregions = n + 1;
	ck_assert_int_lt(vnic_add_nic(conn, &g.cfg, err, sizeof(err)), 0);
}
END_TEST

/* Item 8: RemoveNic is answered after vnicd closed the NIC's fds; the
 * count at the moment the reply is read equals the count before AddNic. */
START_TEST(i8_fds_closed_before_remove_reply)
{
	for (int i = 0; i < 25; i++) {
		int now;

		st_add_ok(conn, &g);
		ck_assert_int_eq(vnic_remove_nic(conn, "nic0", 3000, NULL), 0);
		now = st_fd_count(vd.pid);
		ck_assert_msg(now == fds_before, "cycle %d: vnicd holds %d fds at the reply, %d "
			      "before", i, now, fds_before);
	}
}
END_TEST

struct stall_log {
	int stalled, to_stalled, restarted;
};

static void on_event(struct vnic_conn *c, const struct vnic_event *ev, void *arg)
{
	struct stall_log *l = arg;

	(void)c;
	if (ev->type == VNIC_EVENT_NIC_STALLED)
		l->stalled++;
	if (ev->type == VNIC_EVENT_NIC_STATE_CHANGED && ev->new_state == VNIC_NIC_STALLED)
		l->to_stalled++;
	if (ev->type == VNIC_EVENT_NIC_RESTARTED)
		l->restarted++;
}

/* Item 9: a worker that stops beating while the guest kicks it is shown
 * STALLED, reported, and restarted. (SIGSTOP stands for any way of being
 * stuck: a blocked call, a loop.) */
START_TEST(i9_stalled_worker_reported_and_restarted)
{
	struct stall_log ev = { 0 };
	struct vnic_nic_status n;
	uint64_t one = 1, t0;
	pid_t pid;

	vnic_set_event_cb(conn, on_event, &ev);
	st_add_ok(conn, &g);
	n = st_one_nic(conn);
	pid = n.pid;
	ck_assert_int_gt(pid, 0);
	ck_assert_int_eq(kill(pid, SIGSTOP), 0);
	ck_assert_int_eq(write(g.kick[1], &one, sizeof(one)), sizeof(one));
	t0 = now_ms();
	while (ev.restarted == 0 && now_ms() - t0 < 10000) {
		struct pollfd p = { .fd = vnic_fd(conn), .events = POLLIN };

		if (poll(&p, 1, 50) > 0)
			ck_assert_int_ge(vnic_dispatch(conn), 0);
	}
	ck_assert_msg(ev.stalled == 1 && ev.to_stalled == 1 && ev.restarted == 1,
		      "stalled %d, ->STALLED %d, restarted %d", ev.stalled, ev.to_stalled,
		      ev.restarted);
	n = st_one_nic(conn);
	ck_assert_int_eq(n.state, VNIC_NIC_RUNNING);
	ck_assert_int_ne(n.pid, pid);
	ck_assert_uint_eq(n.restarts, 1);
	ck_assert_msg(strstr(n.last_error, "stalled"), "%s", n.last_error);
	ck_assert(!st_pid_alive(pid));
	/* An idle worker is not stalled: nothing more in 3 s. */
	msleep(3000);
	n = st_one_nic(conn);
	ck_assert_uint_eq(n.restarts, 1);
	ck_assert_int_eq(vnic_remove_nic(conn, "nic0", 3000, NULL), 0);
}
END_TEST

/* Item 1: per-connection budgets. Under an fd limit of 2048 one
 * connection's NICs of 48 regions (56 fds each in vnicd: 48 memfds, 4
 * eventfds, backend, worker memfd, control socket, pidfd) stop at its
 * budget (a quarter of the 1635 fds NICs may hold: 408, so 7 NICs) with
 * RESOURCE_EXHAUSTED; another connection can still add a NIC. */
START_TEST(i1_fd_budget_per_connection)
{
	struct vnic_region reg[48];
	struct st_guest more[8];
	struct vnic_conn *other;
	char err[512];
	int added = 0, rc = 0;

	/* A vnicd started under a hard limit of 2048 (it can only raise the
	 * soft one to that). */
	vnic_close(conn);
	st_guest_free(&g);
	ck_assert_int_eq(st_vnicd_stop(&vd), 0);
	st_vnicd_nofile = 2048;
	st_vnicd_start(&vd, st_worker_path(), NULL);
	st_vnicd_nofile = 0;
	conn = st_connect(&vd);
	st_guest_init(&g, "spare");
	for (unsigned i = 0; i < 48; i++)
		reg[i] = (struct vnic_region){ .gpa = ST_GPA_BASE + i * 16384ull,
					       .size = i < 47 ? 16384 : ST_MEM_SIZE - 47 * 16384ull,
					       .offset = i * 16384ull };
	for (int k = 0; k < 8; k++) {
		char id[16];

		snprintf(id, sizeof(id), "nic%d", k);
		st_guest_init(&more[k], id);
		for (unsigned i = 0; i < 48; i++)
			reg[i].fd = more[k].memfd;
		more[k].cfg.regions = reg;
		more[k].cfg.nregions = 48;
		err[0] = '\0';
		rc = vnic_add_nic(conn, &more[k].cfg, err, sizeof(err));
		if (rc)
			break;
		added++;
	}
	ck_assert_msg(rc == VNIC_STATUS_RESOURCE_EXHAUSTED && strstr(err, "budget"),
		      "after %d NICs: %d %s", added, rc, err);
	ck_assert_int_ge(added, 1);
	ck_assert_int_le(added, 7);
	ck_assert_int_eq(st_nic_count(conn), added);
	/* Another VMM is not locked out. */
	other = st_connect(&vd);
	st_add_ok(other, &g);
	ck_assert_int_eq(st_nic_count(other), added + 1);
	vnic_close(other);
	for (int k = 0; k < 8; k++)
		st_guest_free(&more[k]);
}
END_TEST

static Suite *hostile_suite(void)
{
	Suite *s = suite_create("hostile");
	TCase *tc = tcase_create("vmm");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, i1_accept_out_of_fds_no_busy_loop);
	tcase_add_test(tc, i2_truncated_fds_answered_with_own_id);
	tcase_add_test(tc, i3_strings_nul_and_utf8_rejected);
	tcase_add_test(tc, i4_replies_are_valid_utf8);
	tcase_add_test(tc, i6_unmappable_memfds_rejected);
	tcase_add_test(tc, i7_misaligned_regions_rejected);
	tcase_add_test(tc, i8_fds_closed_before_addnic_failure_reply);
	tcase_add_test(tc, i8_denied_client_that_sends_first_gets_reply);
	tcase_add_test(tc, i10_semaphore_eventfd_rejected);
	suite_add_tcase(s, tc);

	{
		TCase *ts = tcase_create("scripted");

		tcase_add_checked_fixture(ts, NULL, sd_teardown);
		tcase_set_timeout(ts, 60);
		tcase_add_test(ts, i3_worker_string_with_nul_kills_worker);
		tcase_add_test(ts, also_once_is_generic);
		suite_add_tcase(s, ts);
	}

	if (st_worker_path() && geteuid() == 0) {
		TCase *tl = tcase_create("worker");

		tcase_add_checked_fixture(tl, lsetup, teardown);
		tcase_set_timeout(tl, 90);
		tcase_add_test(tl, i5_max_regions_addnic_runs);
		tcase_add_test(tl, i8_fds_closed_before_remove_reply);
		tcase_add_test(tl, i9_stalled_worker_reported_and_restarted);
		tcase_add_test(tl, i1_fd_budget_per_connection);
		suite_add_tcase(s, tl);
	} else {
		fprintf(stderr, "check_hostile: worker tests skipped: they need root and "
			"workers/vnicd-worker\n");
	}
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(hostile_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
