/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz/vhost_user: the vhost-user message layer (supervisor/vhost_user*.c)
 * as a front end reaches it: framing (vu_recv), the request table
 * (vu_msg_check), negotiation, then each handler, against a NIC whose
 * worker is simulated (fuzz/sim_worker.c: no fork, no process).
 *
 * Per input: a struct sup with its own event base and the simulated
 * worker; an endpoint made by vu_endpoint_add (server mode, its socket in
 * a per-process temporary directory); a front end that connects to that
 * socket and writes the input's records as QEMU would; the loop driven
 * with EVLOOP_NONBLOCK after each record until nothing moves; at the end
 * the front end disconnects, vu_endpoint_remove tears the endpoint down,
 * and every NIC, byte and fd must be gone (fuzz_fd_check).
 *
 * Input: records in the format tools/fuzz_record.py records real QEMU and
 * DPDK sessions in (so a recorded session is a seed as it is):
 *   u8 nfds, u8 fdkind, 12-byte header (u32 request, flags, size; little-
 *   endian), then min(size, bytes left) payload bytes;
 * sent as one sendmsg, the fds in SCM_RIGHTS. nfds above 8 is taken mod 9.
 * fdkind 0 sends the fds the request naturally carries (memfds sealed
 * against shrinking and growing, as large as the payload's regions or log
 * say, capped at 1 GiB and sparse; eventfds; a socket), 1..255 sends fds
 * of one wrong kind (vu_bad_fd: a pipe, /dev/null, an unsealed or empty
 * or short or read-only memfd, a socket, a semaphore eventfd ...).
 *
 * Requests 0xffffff00 and above are the harness's own (never sent; their
 * payload is skipped like any other), so that an input can make the
 * simulated worker fail where a real one could:
 *   0xffffffff  crash every simulated worker: signal by flags (SIGSEGV,
 *               SIGKILL, SIGSYS, SIGABRT), as a guest that broke in would;
 *   0xfffffffe  the front end disconnects and a new one connects (QEMU's
 *               reconnect; DPDK's server mode).
 *
 * The endpoint insists on a tap (vu_endpoint_add opens one; a NIC starts
 * only with a real tap fd, validate_tap_fd). Creating and deleting a tap
 * per input costs ~25 ms, so LLVMFuzzerInitialize moves the process into
 * its own network namespace and makes one persistent tap there; each
 * endpoint attaches to it by name (cheap), and since removal clears its
 * persistence, the harness keeps a dup of the endpoint's tap fd and sets
 * it persistent again after the removal. Nothing outside the process sees
 * the tap. Without CAP_NET_ADMIN or /dev/net/tun no endpoint can exist:
 * the target then skips (fuzz_skip: exit 77, a SKIP in the suite).
 *
 * Seeds (fuzz/corpus/vhost_user/): fuzz/vu_seeds.py writes one file per
 * request of vhost_user_msg.c's table and whole sessions (QEMU's start-up
 * order, a migration with SET_LOG_BASE and LOG_ALL, a restart); recorded
 * real sessions are added as they come.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "fuzz.h"
#include "sim_worker.h"
#include "supervisor.h"
#include "tap.h"
#include "vhost_user.h"
#include "vhost_user_priv.h"

#define FZ_ID "fz"
#define FZ_CAP (1ull << 30)         /* largest memfd a record gets */
#define FZ_ROUNDS 64                /* loop rounds per record, at most */
#define FZ_SEND_TRIES 16
#define FZ_REQ_CRASH 0xffffffffu
#define FZ_REQ_RECONNECT 0xfffffffeu
#define FZ_REQ_HARNESS 0xffffff00u

static char fz_dir[64];
static char fz_tap[16];

/* One input's world. */
struct fz {
	struct sup s;
	struct vu_endpoint *ep;
	int fe;                     /* the front end's socket, -1 none */
	bool removed;
};

/* ------------------------------------------------------------- fds */

static int fz_eventfd(unsigned flags)
{
	return eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK | flags);
}

/* A socket whose peer is gone at once. */
static int fz_socket(void)
{
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return -1;
	close(sv[1]);
	return sv[0];
}

static uint64_t fz_le64(const uint8_t *p, size_t len, size_t off)
{
	uint64_t v = 0;

	if (off < len)
		memcpy(&v, p + off, len - off < sizeof(v) ? len - off : sizeof(v));
	return v;
}

/* end = offset + size, saturated at FZ_CAP. */
static uint64_t fz_span(uint64_t offset, uint64_t size)
{
	uint64_t end;

	if (__builtin_add_overflow(offset, size, &end) || end > FZ_CAP)
		return FZ_CAP;
	return end;
}

/* Is fd i of this request naturally a memfd? Then *size is how large
 * the payload says it is. */
static bool fz_wants_memfd(uint32_t req, const uint8_t *p, size_t len, unsigned i,
			   uint64_t *size)
{
	switch (req) {
	case VU_SET_MEM_TABLE:
		/* struct vu_mem_table: u32 nregions, u32 pad, 32-byte regions
		 * (gpa, size, uva, mmap_offset). */
		*size = fz_span(fz_le64(p, len, 8 + 32 * i + 24), fz_le64(p, len, 8 + 32 * i + 8));
		return true;
	case VU_ADD_MEM_REG:
	case VU_REM_MEM_REG:
		*size = fz_span(fz_le64(p, len, 8 + 24), fz_le64(p, len, 8 + 8));
		return true;
	case VU_SET_LOG_BASE:
	case VU_SET_INFLIGHT_FD: /* u64 mmap_size, u64 mmap_offset, ... */
		*size = fz_span(fz_le64(p, len, 8), fz_le64(p, len, 0));
		return true;
	default:
		return false;
	}
}

static int fz_natural_fd(uint32_t req, const uint8_t *p, size_t len, unsigned i)
{
	uint64_t size;

	if (fz_wants_memfd(req, p, len, i, &size))
		return fuzz_memfd(NULL, 0, size);
	if (req == VU_SET_BACKEND_REQ_FD)
		return fz_socket();
	return fz_eventfd(0);
}

/* A memfd of size bytes that nothing seals. */
static int fz_unsealed_memfd(uint64_t size)
{
	int fd = memfd_create("fuzz-unsealed", MFD_CLOEXEC);

	if (fd >= 0 && ftruncate(fd, (off_t)size) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* The same sealed memfd, opened again read-only (a mapping for writing
 * must fail). */
static int fz_readonly_memfd(uint64_t size)
{
	char path[64];
	int fd = fuzz_memfd(NULL, 0, size), ro;

	if (fd < 0)
		return -1;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	ro = open(path, O_RDONLY | O_CLOEXEC);
	close(fd);
	return ro;
}

#define FZ_BAD_KINDS 9

/* An fd of a wrong kind (fdkind 1..255). */
static int fz_bad_fd(unsigned kind, uint32_t req, const uint8_t *p, size_t len, unsigned i)
{
	uint64_t size = 4096;
	bool mem = fz_wants_memfd(req, p, len, i, &size);
	int pv[2];

	switch (kind % FZ_BAD_KINDS) {
	case 0: /* a pipe's read end */
		if (pipe2(pv, O_CLOEXEC) < 0)
			return -1;
		close(pv[1]);
		return pv[0];
	case 1:
		return open("/dev/null", O_RDWR | O_CLOEXEC);
	case 2:
		return fz_unsealed_memfd(size);
	case 3: /* empty */
		return fuzz_memfd(NULL, 0, 0);
	case 4:
		return fz_socket();
	case 5: /* the other natural kind: an eventfd for memory, and back */
		return mem ? fz_eventfd(0) : fuzz_memfd(NULL, 0, 4096);
	case 6:
		return fz_eventfd(EFD_SEMAPHORE);
	case 7: /* shorter than the payload says */
		return fuzz_memfd(NULL, 0, size / 2);
	default:
		return fz_readonly_memfd(size);
	}
}

/* ------------------------------------------------------- the loop */

/* Read and drop what the back end answered (the front end's socket must
 * not fill, or the back end drops the connection for not reading). */
static bool fz_drain(struct fz *f)
{
	bool any = false;

	while (f->fe >= 0) {
		uint8_t buf[512];
		union {
			char b[CMSG_SPACE(sizeof(int) * 8)];
			struct cmsghdr align;
		} cm;
		struct iovec iov = { buf, sizeof(buf) };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.b,
				     .msg_controllen = sizeof(cm.b) };
		ssize_t r = recvmsg(f->fe, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);

		if (r <= 0)
			break;
		any = true;
		/* Only GET_INFLIGHT_FD's answer carries an fd: not kept. */
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
			if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
				continue;
			for (size_t k = 0; k < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); k++) {
				int fd;

				memcpy(&fd, CMSG_DATA(c) + k * sizeof(int), sizeof(fd));
				close(fd);
			}
		}
	}
	return any;
}

/* Bytes the back end has not read yet. */
static int fz_unread(const struct fz *f)
{
	int n = 0;

	if (!f->ep || !f->ep->conn || ioctl(f->ep->conn->fd, FIONREAD, &n) < 0)
		return 0;
	return n;
}

/* Run the loop and the simulated workers until nothing moves (bounded:
 * no input may hang the harness). A connection whose answer waits reads
 * nothing more: bytes it has not read do not count then. With @timers,
 * armed timers fire too (deadlines, restart backoff): time passes only
 * where the harness says so. */
static void fz_settle_how(struct fz *f, bool timers)
{
	for (int k = 0; k < FZ_ROUNDS; k++) {
		const struct vu_conn *c;
		bool drained;

		if (timers)
			sim_worker_settle_all(&f->s, 64);
		else
			sim_worker_settle(&f->s, 64);
		drained = fz_drain(f);
		c = f->ep ? f->ep->conn : NULL;
		if (!drained && (!c || c->waiting || fz_unread(f) == 0))
			break;
	}
}

static void fz_settle(struct fz *f)
{
	fz_settle_how(f, false);
}

/* ------------------------------------------------ the front end */

static void fz_connect(struct fz *f)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	f->fe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (f->fe < 0)
		return;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", f->ep->cfg.path);
	if (connect(f->fe, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		close(f->fe);
		f->fe = -1;
		return;
	}
	fz_settle(f); /* accepted */
}

static void fz_disconnect(struct fz *f)
{
	if (f->fe < 0)
		return;
	close(f->fe);
	f->fe = -1;
	fz_settle(f);
}

/* Write buf (fds with its first byte) as one sendmsg when the socket
 * takes it; a back end that stops reading for good ends the input. */
static bool fz_send(struct fz *f, const uint8_t *buf, size_t len, const int *fds, unsigned nfds)
{
	size_t off = 0;

	for (int tries = 0; off < len && f->fe >= 0 && tries < FZ_SEND_TRIES; tries++) {
		union {
			char b[CMSG_SPACE(sizeof(int) * VU_MAX_FDS)];
			struct cmsghdr align;
		} cm;
		struct iovec iov = { (void *)(uintptr_t)(buf + off), len - off };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
		ssize_t r;

		if (off == 0 && nfds) {
			struct cmsghdr *c;

			memset(&cm, 0, sizeof(cm));
			mh.msg_control = cm.b;
			mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
			c = CMSG_FIRSTHDR(&mh);
			c->cmsg_level = SOL_SOCKET;
			c->cmsg_type = SCM_RIGHTS;
			c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
			memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
		}
		r = sendmsg(f->fe, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (r > 0)
			off += (size_t)r;
		else if (r < 0 && errno != EAGAIN && errno != EINTR)
			return false; /* the back end closed the connection */
		if (off < len)
			fz_settle(f); /* the socket is full: let the back end read */
	}
	return off == len;
}

/* One record: its fds made, header and payload sent, fds closed here
 * (the back end has its own now). */
static bool fz_record(struct fz *f, struct fuzz_in *in)
{
	uint8_t buf[VU_HDR_SIZE + VU_PAYLOAD_MAX + 1];
	unsigned nfds = fuzz_u8(in) % (VU_MAX_FDS + 1);
	unsigned kind = fuzz_u8(in);
	struct vu_hdr h;
	size_t hlen = fuzz_take(in, buf, VU_HDR_SIZE), plen;
	const uint8_t *p;
	int fds[VU_MAX_FDS];
	unsigned n = 0;
	bool ok;

	memcpy(&h, buf, sizeof(h));
	plen = hlen == VU_HDR_SIZE && h.size < in->n ? h.size : in->n;
	if (hlen < VU_HDR_SIZE)
		plen = 0;
	p = in->p;
	in->p += plen;
	in->n -= plen;
	if (hlen == VU_HDR_SIZE && h.request >= FZ_REQ_HARNESS) {
		if (h.request == FZ_REQ_CRASH) {
			static const int sigs[] = { SIGSEGV, SIGKILL, SIGSYS, SIGABRT };

			sim_worker_crash_all(sigs[h.flags % 4]);
			/* The restart's backoff is a timer. */
			fz_settle_how(f, true);
		} else if (h.request == FZ_REQ_RECONNECT) {
			fz_disconnect(f);
			fz_connect(f);
		}
		return f->fe >= 0;
	}
	/* The payload as the front end sends it: at most what the back end
	 * could take plus one byte (the rest would only be refused). */
	if (plen > VU_PAYLOAD_MAX + 1)
		plen = VU_PAYLOAD_MAX + 1;
	memcpy(buf + hlen, p, plen);
	for (unsigned i = 0; i < nfds; i++) {
		int fd = kind ? fz_bad_fd(kind - 1, h.request, p, plen, i) :
				fz_natural_fd(h.request, p, plen, i);

		if (fd >= 0)
			fds[n++] = fd;
	}
	ok = fz_send(f, buf, hlen + plen, fds, n);
	for (unsigned i = 0; i < n; i++)
		close(fds[i]);
	return ok;
}

/* ------------------------------------------------- one input's life */

static void fz_removed(void *arg, unsigned conn_id, uint64_t request_id, bool deadline,
		       uint64_t latency_us)
{
	struct fz *f = (struct fz *)((char *)arg - offsetof(struct fz, s));

	(void)conn_id;
	(void)request_id;
	(void)deadline;
	(void)latency_us;
	f->removed = true;
	f->ep = NULL;
}

/* The supervisor as main.c makes it, with simulated workers and no
 * control socket, state directory or signals. */
static bool fz_sup(struct fz *f)
{
	memset(f, 0, sizeof(*f));
	f->fe = -1;
	f->s.base = event_base_new();
	if (!f->s.base)
		return false;
	f->s.listen_fd = -1;
	f->s.worker_path = "vnicd-worker";
	f->s.restart_max = SUP_RESTART_MAX_DEFAULT;
	TAILQ_INIT(&f->s.conns);
	TAILQ_INIT(&f->s.nics);
	/* A fixed budget, whatever this process's RLIMIT_NOFILE. */
	sup_limits_derive(1024, &f->s.lim);
	sim_worker_use(&f->s);
	sim_worker_behave(SIM_OBEDIENT, NULL);
	return true;
}

/* The endpoint through vu_endpoint_add, on the process's tap. Returns a
 * dup of its tap fd (see the header comment), or -1. */
static int fz_endpoint(struct fz *f)
{
	struct vu_config cfg;
	char ifname[16], err[256];
	int tapdup;

	memset(&cfg, 0, sizeof(cfg));
	snprintf(cfg.id, sizeof(cfg.id), "%s", FZ_ID);
	snprintf(cfg.path, sizeof(cfg.path), "%s/vu.sock", fz_dir);
	snprintf(cfg.tap, sizeof(cfg.tap), "%s", fz_tap);
	cfg.server = true;
	if (vu_endpoint_add(&f->s, &cfg, ifname, sizeof(ifname), err, sizeof(err)) < 0) {
		fprintf(stderr, "fuzz: vhost_user: endpoint: %s\n", err);
		abort();
	}
	f->ep = TAILQ_FIRST(&f->s.vu->eps);
	tapdup = fcntl(f->ep->p[0].tap_fd, F_DUPFD_CLOEXEC, 3);
	if (tapdup < 0)
		abort();
	return tapdup;
}

/* Disconnect, remove, and insist that everything went. */
static void fz_teardown(struct fz *f, int tapdup)
{
	fz_disconnect(f);
	if (vu_endpoint_remove(&f->s, FZ_ID, SUP_STOP_DEFAULT_MS, fz_removed, 0, 0) < 0)
		abort();
	fz_settle_how(f, true);
	if (!f->removed || !TAILQ_EMPTY(&f->s.nics) || sim_worker_count()) {
		fprintf(stderr, "fuzz: vhost_user: the endpoint was not removed (%s, %s NIC, "
			"%u workers)\n", f->removed ? "removed" : "still there",
			TAILQ_EMPTY(&f->s.nics) ? "no" : "a", sim_worker_count());
		abort();
	}
	vu_free_all(&f->s);
	sim_worker_reset();
	event_base_free(f->s.base);
	/* The removal cleared the tap's persistence; ours holds it. */
	if (tap_set_persist(tapdup, true) < 0)
		abort();
	close(tapdup);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int before = fuzz_fd_count();
	struct fuzz_in in = fuzz_in(data, size);
	static struct fz f; /* struct vu_msg is large: not on the stack */
	int tapdup;

	if (!fz_sup(&f))
		abort();
	tapdup = fz_endpoint(&f);
	fz_connect(&f);
	while (in.n > 0 && f.fe >= 0 && fz_record(&f, &in))
		fz_settle(&f);
	fz_teardown(&f, tapdup);
	fuzz_fd_check(before, "vhost_user");
	return 0;
}

static void fz_cleanup(void)
{
	rmdir(fz_dir);
}

/* Once per process: a temporary directory for the socket, a network
 * namespace of our own and one persistent tap in it. */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char err[256];
	int fd;

	(void)argc;
	(void)argv;
	fuzz_setup();
	snprintf(fz_dir, sizeof(fz_dir), "/tmp/vnicd-fuzz-vu.XXXXXX");
	if (!mkdtemp(fz_dir)) {
		perror("fuzz: vhost_user: mkdtemp");
		abort();
	}
	atexit(fz_cleanup);
	if (unshare(CLONE_NEWNET) < 0)
		fuzz_skip("vhost_user: no network namespace of its own (%s): needs root "
			  "and /dev/net/tun", strerror(errno));
	/* Multi-queue, as the endpoints open it (issue 15). */
	if (tap_open_queues("", "", 0, 1, &fd, fz_tap, NULL, err, sizeof(err)) < 0)
		fuzz_skip("vhost_user: no tap (%s): needs root and /dev/net/tun", err);
	if (tap_set_persist(fd, true) < 0)
		abort();
	close(fd);
	return 0;
}
