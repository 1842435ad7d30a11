/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_vmm_proto: vnicd's protobuf control channel as a VMM reaches it.
 *
 * What runs is the daemon's own code: the accept callback
 * (vmm_conn_accept), the framing and fd checks of wire_vmm_recv, the
 * dispatch table of vmm_conn.c, every handler of vmm_handlers.c and
 * admin.c, the validation behind them (pbconv, validate) and the NIC core
 * (nic.c, monitor.c) against the simulated worker of fuzz/sim_worker.c.
 *
 * Input: datagram records (the format shared with worker_chan and the
 * seed recorder tools/fuzz_record.py), one after the other:
 *   u8 nfds      fds sent with the datagram (mod 49: an AddNic of 8
 *                queue pairs needs 32 eventfds, 8 backends and regions)
 *   u8 fdkind    low 6 bits: 0: the natural fds of the message (see
 *                natural_fd); 1..31: every fd of one wrong kind (wrong_fd,
 *                kind (fdkind - 1) % 10); 32..63: the natural fds but one,
 *                of the wrong kind (fdkind - 32) % 8 picks (one_kinds), at
 *                the place (fdkind - 32) / 8 picks (one_wrong_at).
 *                0x80 (REC_PIPELINED): the next record is sent before the
 *                daemon runs, so that a request meets a NIC that is still
 *                starting or stopping, as a VMM that does not wait would.
 *                0x40 (REC_STARVED): the fds are the natural ones, and
 *                the daemon handles this record with room for only
 *                fdkind & 0x3f more fds: recvmsg cuts the fds
 *                (MSG_CTRUNC) or the daemon's own dups, sockets and
 *                eventfds fail with EMFILE, as in a vnicd at its
 *                RLIMIT_NOFILE.
 *   u16 len      little-endian length of the datagram
 *   bytes[len]   one SOCK_SEQPACKET message: the frame as vnicd reads it
 *                (u32 big-endian length, packed vnic.vmm.VmmMessage)
 *
 * Per input: a fresh struct sup with its own event_base, set up as
 * main.c does for what the handlers touch; one client connects to a
 * listening socket (abstract address, made once per process) and the
 * real accept callback adopts it; each record is sent, the loop runs
 * without blocking and the client's replies are read and dropped. Then
 * the client closes (the daemon stops the connection's NICs), the
 * simulated workers settle, every NIC, endpoint and tap is torn down,
 * and fuzz_fd_check proves that no fd is left.
 *
 * As root, LLVMFuzzerInitialize first moves the process into its own
 * network and mount namespaces (contain()): taps an input creates live
 * and die there, and a request cannot reach the host's files (vhost-user
 * socket paths, /run/netns names): see contain(). Not root: tap backends
 * and endpoints just fail, as they do for an unprivileged vnicd.
 *
 * (libFuzzer's -fork mode keeps its files in /tmp, read-only there: run
 * jobs as separate processes instead.)
 *
 * Seeds: fuzz/corpus/vmm_proto/, written by fuzz/vmm_proto_seeds.c (a
 * small program that packs real messages with the generated protobuf-c
 * code; how to build and run it is in its header): one file per request
 * type, a few rejected frames, and whole sessions. Sessions recorded from
 * real libvnic clients by tools/fuzz_record.py are in the same format.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "fuzz/fuzz.h"
#include "fuzz/sim_worker.h"
#include "supervisor/supervisor.h"
#include "supervisor/vhost_user.h"

#define MAX_REC_FDS 48         /* nfds is taken mod (MAX_REC_FDS + 1) */
#define MEMFD_MAX (1u << 20)   /* natural memfds are at most this big */
#define PUMP_ROUNDS 16         /* loop passes after each record, at most */
#define SETTLE_ROUNDS 64       /* sim_worker_settle rounds at teardown */
#define PLAIN_TAP "vnicfzplain"  /* tap_fd_plain's, kept for the process */
#define VNET_TAP "vnicfzvnet"    /* tap_fd_new's, kept for the process */
#define REC_PIPELINED 0x80u    /* fdkind flags: see the header */
#define REC_STARVED 0x40u
#define REC_KIND_MASK 0x3fu

static int listen_fd = -1;     /* the daemon's listener, one per process */
static struct sockaddr_un listen_sa;
static socklen_t listen_salen;
static bool privileged;        /* in our own netns: taps work */
static int plain_tap = -1;     /* PLAIN_TAP, as root: see tap_fd_plain */
static int vnet_tap = -1;      /* VNET_TAP, as root: see tap_fd_new */

/* ------------------------------------------------------- containment */

/* Make @dir a mount of its own, so that it can stay writable when the
 * rest of the tree turns read-only. */
static void keep_writable(const char *dir, char keep[][PATH_MAX], unsigned *n, unsigned max)
{
	struct stat st;

	if (*n >= max || !dir[0] || stat(dir, &st) < 0 || !S_ISDIR(st.st_mode) ||
	    !realpath(dir, keep[*n]))
		return;
	/* Run from / (or given it): the root stays read-only regardless. */
	if (!strcmp(keep[*n], "/"))
		return;
	if (mount(keep[*n], keep[*n], NULL, MS_BIND, NULL) == 0)
		(*n)++;
}

/* The directories libFuzzer writes into: its corpus directories (the
 * arguments that are not flags), the directory of -artifact_prefix= and
 * -exact_artifact_path=, and the working directory. */
static unsigned writable_dirs(int argc, char **argv, char keep[][PATH_MAX], unsigned max)
{
	char buf[PATH_MAX];
	unsigned n = 0;

	if (getcwd(buf, sizeof(buf)))
		keep_writable(buf, keep, &n, max);
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = NULL;
		char *slash;

		if (!strncmp(a, "-artifact_prefix=", 17))
			v = a + 17;
		else if (!strncmp(a, "-exact_artifact_path=", 21))
			v = a + 21;
		if (!v) {
			if (a[0] != '-')
				keep_writable(a, keep, &n, max);
			continue;
		}
		snprintf(buf, sizeof(buf), "%s", v);
		slash = strrchr(buf, '/');
		if (!slash)
			continue;
		slash[slash == buf] = '\0';
		keep_writable(buf, keep, &n, max);
	}
	return n;
}

/*
 * Root only. A request can name a tap (created in the process's network
 * namespace), a named network namespace (/run/netns/NAME, entered to
 * create a tap there) and, for a vhost-user endpoint, any absolute path
 * that vnicd binds, connects to or unlinks when a stale socket is there.
 * None of that may touch the host: a new network namespace holds the
 * taps, an empty tmpfs on /run hides the host's named namespaces and
 * sockets (endpoints may bind theirs there), and the rest of the mount
 * tree is read-only except the directories libFuzzer itself writes to.
 * A fuzzer that cannot contain itself stops.
 */
static void contain(int argc, char **argv)
{
	struct mount_attr ro = { .attr_set = MOUNT_ATTR_RDONLY };
	struct mount_attr rw = { .attr_clr = MOUNT_ATTR_RDONLY };
	static char keep[64][PATH_MAX], cwd[PATH_MAX];
	unsigned n;

	if (geteuid() != 0)
		return;
	if (unshare(CLONE_NEWNET | CLONE_NEWNS) < 0 ||
	    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
	    mount("fuzz", "/run", "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,mode=0755") < 0) {
		fprintf(stderr, "fuzz_vmm_proto: cannot contain the daemon: %s\n",
			strerror(errno));
		abort();
	}
	n = writable_dirs(argc, argv, keep, 63);
	snprintf(keep[n++], PATH_MAX, "/run"); /* ours alone: endpoints bind there */
	if (mount_setattr(AT_FDCWD, "/", AT_RECURSIVE, &ro, sizeof(ro)) < 0) {
		fprintf(stderr, "fuzz_vmm_proto: read-only root: %s\n", strerror(errno));
		abort();
	}
	for (unsigned i = 0; i < n; i++)
		if (mount_setattr(AT_FDCWD, keep[i], 0, &rw, sizeof(rw)) < 0) {
			fprintf(stderr, "fuzz_vmm_proto: %s stays read-only: %s\n", keep[i],
				strerror(errno));
			abort();
		}
	/* The working directory is still the one under its new bind mount,
	 * read-only: enter it again by name, so that relative corpus paths
	 * resolve through the writable mount. */
	if (!getcwd(cwd, sizeof(cwd)) || chdir(cwd) < 0) {
		fprintf(stderr, "fuzz_vmm_proto: working directory: %s\n", strerror(errno));
		abort();
	}
	privileged = true;
}

/* Delete every tap left in our namespace: endpoints make theirs
 * persistent (they outlive a vnicd restart by design), so freeing the
 * endpoint does not remove them. With @check, a tap still there is a
 * leak: abort. */
static void taps_sweep(bool check)
{
	struct if_nameindex *ifs, *i;

	if (!privileged || !(ifs = if_nameindex()))
		return;
	for (i = ifs; i->if_index; i++) {
		struct ifreq ifr = { .ifr_flags = IFF_TAP | IFF_NO_PI };
		int fd;

		if (!strcmp(i->if_name, "lo") || !strcmp(i->if_name, PLAIN_TAP) ||
		    !strcmp(i->if_name, VNET_TAP))
			continue;
		if (check) {
			fprintf(stderr, "fuzz_vmm_proto: interface %s outlived its input\n",
				i->if_name);
			abort();
		}
		/* A multi-queue tap (an endpoint of several pairs) is attached
		 * to only with IFF_MULTI_QUEUE, a single-queue one only without. */
		for (int mq = 0; mq < 2; mq++) {
			fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
			if (fd < 0)
				break;
			snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", i->if_name);
			ifr.ifr_flags = IFF_TAP | IFF_NO_PI | (mq ? IFF_MULTI_QUEUE : 0);
			if (ioctl(fd, TUNSETIFF, &ifr) == 0) {
				ioctl(fd, TUNSETPERSIST, 0);
				close(fd);
				break;
			}
			close(fd);
		}
	}
	if_freenameindex(ifs);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_setup();
	contain(*argc, *argv);
	/* An abstract address: no file to clean up, and private to the
	 * network namespace. The pid keeps parallel fuzzers apart. */
	listen_sa.sun_family = AF_UNIX;
	snprintf(listen_sa.sun_path + 1, sizeof(listen_sa.sun_path) - 1, "vnicd-fuzz-vmm-%d",
		 (int)getpid());
	listen_salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
				   strlen(listen_sa.sun_path + 1));
	if (privileged) {
		struct ifreq plain = { .ifr_name = PLAIN_TAP, .ifr_flags = IFF_TAP | IFF_NO_PI };
		struct ifreq vnet = { .ifr_name = VNET_TAP,
				      .ifr_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR };

		plain_tap = open("/dev/net/tun", O_RDWR | O_CLOEXEC | O_NONBLOCK);
		vnet_tap = open("/dev/net/tun", O_RDWR | O_CLOEXEC | O_NONBLOCK);
		if (plain_tap < 0 || ioctl(plain_tap, TUNSETIFF, &plain) < 0 || vnet_tap < 0 ||
		    ioctl(vnet_tap, TUNSETIFF, &vnet) < 0) {
			perror("fuzz_vmm_proto: the harness's taps");
			abort();
		}
	}
	listen_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (listen_fd < 0 || bind(listen_fd, (struct sockaddr *)&listen_sa, listen_salen) < 0 ||
	    listen(listen_fd, 4) < 0) {
		perror("fuzz_vmm_proto: listener");
		abort();
	}
	return 0;
}

/* ------------------------------------------------------------ the fds */

/* What a request of this frame carries: decoded here only to choose
 * fds that fit; vnicd decodes the frame again on its own. */
struct natural {
	Vnic__Vmm__VmmMessage *m;
	struct wire_fd_layout lay;
	bool add_nic;
};

static void natural_parse(const uint8_t *buf, size_t len, struct natural *nat)
{
	uint32_t be;

	memset(nat, 0, sizeof(*nat));
	if (len < WIRE_HDR_LEN)
		return;
	memcpy(&be, buf, WIRE_HDR_LEN);
	if (ntohl(be) != len - WIRE_HDR_LEN)
		return;
	nat->m = vnic__vmm__vmm_message__unpack(NULL, len - WIRE_HDR_LEN, buf + WIRE_HDR_LEN);
	if (nat->m && nat->m->msg_case == VNIC__VMM__VMM_MESSAGE__MSG_REQUEST &&
	    nat->m->request->body_case == VNIC__VMM__REQUEST__BODY_ADD_NIC &&
	    wire_add_nic_layout(nat->m->request->add_nic, &nat->lay) == 0)
		nat->add_nic = true;
}

/* A memfd of offset + size bytes (capped), sealed as guest memory is. */
static int memfd_for(uint64_t offset, uint64_t size)
{
	uint64_t want = offset + size;

	if (want < offset || want > MEMFD_MAX)
		want = 4096;
	return fuzz_memfd(NULL, 0, (size_t)want);
}

/* An open tap as a VMM would pass it (root only: else a socket, which
 * vnicd must refuse): a dup of one tap made at start (VNET_TAP), for the
 * reason tap_fd_plain gives; vnicd configures it (TUNSETVNETHDRSZ,
 * TUNSETOFFLOAD) at every AddNic that adopts it. */
static int tap_fd_new(void)
{
	int sv[2];

	if (vnet_tap >= 0)
		return fcntl(vnet_tap, F_DUPFD_CLOEXEC, 0);
	if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv) < 0)
		return -1;
	close(sv[1]);
	return sv[0];
}

/* The socket backend: one end of a datagram pair; the other end is
 * closed, as a VMM's peer may well be. */
static int socket_fd_new(void)
{
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return -1;
	close(sv[1]);
	return sv[0];
}

/* AddNic's fd @i by its layout: memfds for regions, eventfds for kick
 * and call, the backend's fd. */
static int add_nic_fd(const struct natural *nat, unsigned i)
{
	const Vnic__Vmm__AddNic *a = nat->m->request->add_nic;

	if (i < nat->lay.nregions && i < a->n_regions && a->regions[i])
		return memfd_for(a->regions[i]->offset, a->regions[i]->size);
	/* A backend fd per queue pair (issue 15). */
	bool backend = nat->lay.backend >= 0 && i >= (unsigned)nat->lay.backend &&
		       i < (unsigned)nat->lay.backend + nat->lay.nbackend;

	if (backend && a->backend && a->backend->kind_case == VNIC__VMM__BACKEND__KIND_TAP_FD)
		return tap_fd_new();
	if (backend)
		return socket_fd_new();
	return eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
}

/* fdkind 0: the fd a well-behaved VMM sends in place @i. */
static int natural_fd(const struct natural *nat, unsigned i)
{
	const Vnic__Vmm__Request *r;

	if (nat->add_nic)
		return add_nic_fd(nat, i);
	r = nat->m && nat->m->msg_case == VNIC__VMM__VMM_MESSAGE__MSG_REQUEST
		    ? nat->m->request : NULL;
	if (r && r->body_case == VNIC__VMM__REQUEST__BODY_SET_DIRTY_LOG)
		return memfd_for(r->set_dirty_log->offset, r->set_dirty_log->size);
	return eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
}

/* A tap without IFF_VNET_HDR (as root), else an eventfd: not a tap.
 * One tap for the process (plain_tap, made at start), dup'ed: closing a
 * tap device waits for an RCU grace period (about 20 ms here), and a
 * record of 42 of them took 0.8 s, near the 1 s an input may take. vnicd
 * only looks at it (TUNGETIFF) and refuses it. */
static int tap_fd_plain(void)
{
	if (plain_tap >= 0)
		return fcntl(plain_tap, F_DUPFD_CLOEXEC, 0);
	return eventfd(0, EFD_CLOEXEC);
}

/* fdkind 32..63: which fd is the wrong one. @sel 0: the last (AddNic:
 * a backend's); 1: the first after the regions (AddNic: rx0's kick);
 * 2: the one after that (rx0's call); 3: the first. */
static unsigned one_wrong_at(const struct natural *nat, unsigned sel, unsigned nfds)
{
	unsigned nreg = nat->add_nic ? nat->lay.nregions : 0;

	switch (sel) {
	case 0: return nfds ? nfds - 1 : 0;
	case 1: return nreg;
	case 2: return nreg + 1;
	default: return 0;
	}
}

/* fdkind 1..: a wrong kind of fd. */
static int wrong_fd(unsigned kind)
{
	int fd, p[2];

	switch (kind % 10) {
	case 0:
		if (pipe2(p, O_CLOEXEC) < 0)
			return -1;
		close(p[1]);
		return p[0];
	case 1:
		return open("/dev/null", O_RDWR | O_CLOEXEC);
	case 2: /* a memfd that is not sealed: the VMM could shrink it */
		fd = memfd_create("fuzz-unsealed", MFD_CLOEXEC);
		if (fd >= 0 && ftruncate(fd, 4096) < 0) {
			close(fd);
			return -1;
		}
		return fd;
	case 3:
		return fuzz_memfd(NULL, 0, 0);
	case 4:
		return socket_fd_new();
	case 5:
		return open("/", O_PATH | O_CLOEXEC);
	case 6: /* kick and call eventfds must be plain counters */
		return eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
	case 7: /* a socket backend must be AF_UNIX */
		return socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	case 8: /* ... and keep frame boundaries */
		return socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	default:
		return tap_fd_plain();
	}
}

/* ---------------------------------------------------------- one input */

struct run {
	struct sup s;
	int client;           /* the VMM's end; -1 once closed */
};

/* Read and drop what the daemon sent (fds too, though it sends none).
 * Returns: whether anything came. */
static bool client_drain(struct run *r)
{
	bool got = false;

	uint8_t buf[WIRE_HDR_LEN + WIRE_VMM_MSG_MAX];
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int) * WIRE_MAX_FDS)];
	} ctl;

	while (r->client >= 0) {
		struct iovec iov = { buf, sizeof(buf) };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.b,
				     .msg_controllen = sizeof(ctl.b) };
		struct cmsghdr *cm;

		if (recvmsg(r->client, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC) <= 0)
			return got;
		got = true;
		for (cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
			int *fds = (int *)(void *)CMSG_DATA(cm);
			size_t nf = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);

			if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS)
				for (size_t k = 0; k < nf; k++)
					close(fds[k]);
		}
	}
	return got;
}

/* Run the daemon until it has nothing left to do now: each pass runs
 * what is ready, lets the simulated workers answer, and reads the
 * client's replies. No pass waits. */
static void pump(struct run *r)
{
	for (int i = 0; i < PUMP_ROUNDS; i++) {
		sim_worker_settle(&r->s, SETTLE_ROUNDS);
		if (!client_drain(r))
			return;
	}
}

/* The fd limit below which exactly @spare fd numbers are free (a limit
 * bounds the numbers a new fd may take, and the holes below the highest
 * fd held are room too). */
static rlim_t limit_for_spare(unsigned spare)
{
	unsigned free_seen = 0;

	for (int fd = 0; fd < 65536; fd++) {
		if (fcntl(fd, F_GETFD) >= 0 || errno != EBADF)
			continue;
		if (free_seen++ == spare)
			return (rlim_t)fd;
	}
	return 65536;
}

/* REC_STARVED: run the daemon with room for @spare more fds only. The
 * limit is restored before the harness makes an fd of its own. */
static void pump_starved(struct run *r, unsigned spare)
{
	struct rlimit old, low;

	if (getrlimit(RLIMIT_NOFILE, &old) < 0)
		abort();
	low = old;
	low.rlim_cur = limit_for_spare(spare);
	if (low.rlim_cur < old.rlim_cur && setrlimit(RLIMIT_NOFILE, &low) < 0)
		abort();
	pump(r);
	if (setrlimit(RLIMIT_NOFILE, &old) < 0)
		abort();
}

/* Send one record's datagram with its fds; every fd we made is closed
 * here (the kernel holds its own references while in flight). */
static void send_record(struct run *r, const uint8_t *buf, size_t len, unsigned nfds,
			unsigned kind)
{
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int) * MAX_REC_FDS)];
	} ctl;
	struct iovec iov = { (void *)(uintptr_t)buf, len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	/* The wrong kinds of one_wrong_at's fd: a pipe, an unsealed and an
	 * empty memfd, a socket, a semaphore eventfd, an AF_INET and a stream
	 * socket, a tap without a vnet header. */
	static const unsigned one_kinds[8] = { 0, 2, 3, 4, 6, 7, 8, 9 };
	struct natural nat;
	int fds[MAX_REC_FDS];
	unsigned n = 0;

	natural_parse(buf, len, &nat);
	for (unsigned i = 0; i < nfds; i++) {
		int fd;

		if (kind == 0)
			fd = natural_fd(&nat, i);
		else if (kind < 32)
			fd = wrong_fd(kind - 1);
		else if (i == one_wrong_at(&nat, (kind - 32) / 8, nfds))
			fd = wrong_fd(one_kinds[(kind - 32) % 8]);
		else
			fd = natural_fd(&nat, i);

		if (fd >= 0)
			fds[n++] = fd;
	}
	if (nat.m)
		vnic__vmm__vmm_message__free_unpacked(nat.m, NULL);
	if (n) {
		memset(&ctl, 0, sizeof(ctl));
		mh.msg_control = ctl.b;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * n);
		ctl.h.cmsg_level = SOL_SOCKET;
		ctl.h.cmsg_type = SCM_RIGHTS;
		ctl.h.cmsg_len = CMSG_LEN(sizeof(int) * n);
		memcpy(CMSG_DATA(&ctl.h), fds, sizeof(int) * n);
	}
	/* The daemon reads each datagram before the next is sent: a full
	 * socket buffer means it dropped us, and the rest goes nowhere. */
	if (sendmsg(r->client, &mh, MSG_DONTWAIT | MSG_NOSIGNAL) < 0 && errno != EAGAIN) {
		close(r->client);
		r->client = -1;
	}
	for (unsigned i = 0; i < n; i++)
		close(fds[i]);
}

/* struct sup as main.c sets it up, for what the control channel and the
 * NIC core touch: no signals, no watchdog timer, no state directory
 * (endpoints are not saved), the simulated worker. */
static int sup_setup(struct sup *s)
{
	struct event_config *cfg = event_config_new();

	memset(s, 0, sizeof(*s));
	s->socket_path = "@vnicd-fuzz-vmm";
	s->worker_path = "vnicd-worker (simulated)";
	s->listen_fd = listen_fd;
	s->restart_max = SUP_RESTART_MAX_DEFAULT;
	TAILQ_INIT(&s->conns);
	TAILQ_INIT(&s->nics);
	sup_limits_init(s);
	if (!cfg)
		return -1;
	event_config_set_flag(cfg, EVENT_BASE_FLAG_NOLOCK);
	s->base = event_base_new_with_config(cfg);
	event_config_free(cfg);
	if (!s->base)
		return -1;
	s->ev_listen = event_new(s->base, listen_fd, EV_READ | EV_PERSIST, vmm_conn_accept, s);
	if (!s->ev_listen)
		return -1;
	event_add(s->ev_listen, NULL);
	sim_worker_use(s);
	sim_worker_behave(SIM_OBEDIENT, NULL);
	return 0;
}

/* The client is gone: the daemon stops its NICs; whatever still runs
 * after the workers settled is freed as at vnicd's exit. */
static void sup_teardown(struct run *r)
{
	struct sup *s = &r->s;
	struct vmm_conn *c;

	if (r->client >= 0) {
		close(r->client);
		r->client = -1;
	}
	/* The daemon sees the end of the stream and stops the NICs; their
	 * deadlines are made to pass so that each stop completes. */
	sim_worker_settle_all(s, SETTLE_ROUNDS);
	while ((c = TAILQ_FIRST(&s->conns)))
		vmm_conn_free(c);
	vu_shutdown(s);
	sim_worker_settle_all(s, SETTLE_ROUNDS);
	nic_free_all(s);
	vu_free_all(s);
	sim_worker_reset();
	taps_sweep(false);
	taps_sweep(true);
	if (s->ev_accept_retry)
		event_free(s->ev_accept_retry);
	if (s->ev_listen)
		event_free(s->ev_listen);
	if (s->base)
		event_base_free(s->base);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_in in = fuzz_in(data, size);
	int before = fuzz_fd_count();
	struct run r = { .client = -1 };

	/* SetLogLevel changes the process's level: every input starts at
	 * debug, so every log line is formatted (and dropped). */
	log_set_level(LOG_LEVEL_DEBUG);
	if (sup_setup(&r.s) < 0)
		abort();
	r.client = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (r.client < 0 || connect(r.client, (struct sockaddr *)&listen_sa, listen_salen) < 0)
		abort();
	pump(&r);
	while (!in.end && in.n && r.client >= 0) {
		unsigned nfds = fuzz_u8(&in) % (MAX_REC_FDS + 1);
		unsigned kind = fuzz_u8(&in);
		size_t len = fuzz_u16(&in);
		const uint8_t *p = in.p;

		if (in.end)
			break;
		if (len > in.n)
			len = in.n;
		in.p += len;
		in.n -= len;
		send_record(&r, p, len, nfds, kind & REC_STARVED ? 0 : kind & REC_KIND_MASK);
		if (kind & REC_PIPELINED)
			continue;
		if (kind & REC_STARVED)
			pump_starved(&r, kind & REC_KIND_MASK);
		else
			pump(&r);
	}
	sup_teardown(&r);
	fuzz_fd_check(before, "vmm_proto");
	return 0;
}
