/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vnicd-worker: the sandboxed process that runs one virtio-net NIC.
 *
 * Contract with the supervisor (supervisor/worker_spawn.c):
 *   argv:  vnicd-worker --nic ID [--user USER] [--sandbox on|off]
 *          [--fault SPEC]   (fault-injection builds only, common/fault.h)
 *          ID only names the NIC in log lines; USER is who the worker
 *          becomes (default: "vnicd" if that user exists, else "nobody");
 *          --sandbox off is for debugging only and is reported as such.
 *   fds:   3 = the control socket, AF_UNIX SOCK_SEQPACKET (worker.proto
 *          framing, proto/wire.h); 0-2 as the supervisor left them; no
 *          other fd is inherited. A sandbox violation's record goes to
 *          the stats page (sandbox.h).
 *   Everything else (guest memory memfds, kick/call eventfds, backend fd,
 *   the memfd of the stats page and the optional inflight region behind
 *   it, optional dirty log memfd) arrives in the Config message (worker.proto); a new dirty log
 *   may arrive later in SetDirtyLog (live migration, issue 14).
 *
 * Order, as the design asks (DESIGN "Supervisor <-> worker", STYLE 10):
 *   1. validate fd 3 is our control socket;
 *   2. receive Config and exactly its fds;
 *   3. map guest memory (memtable_map), then the stats page, then the
 *      dirty log if there is one (shm/dirtylog.h; unmappable: Error);
 *   4. set up every queue (vring_init on the mapped memory), then map and
 *      check the inflight region if there is one and attach each queue
 *      (a bad region is an Error: exit 1, TESTPLAN C8);
 *   5. close every fd not needed from here on;
 *   6. sandbox, in the order sandbox.h gives: empty root and fresh
 *      mount/ipc/net namespaces, drop to the unprivileged user, the
 *      holder (holder.h: the exit's teardown off a device stop's path),
 *      rlimits, no_new_privs and the seccomp filter;
 *   7. send Ready (it says whether the sandbox is on);
 *   8. event loop: Start begins ring processing, Stop ends it (Stopped
 *      carries the final indices), supervisor EOF ends the process;
 *      SetDirtyLog switches the dirty log at any time (answered with
 *      DirtyLogSet).
 * Exit status: 0 after Stop or when the supervisor went away; 1 after an
 * Error (bad Config, protocol violation); 2 for a bad command line or fd 3.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "afp_ring.h"
#include "inflight.h"
#include "fault.h"
#include "holder.h"
#include "log.h"
#include "privdrop.h"
#include "sandbox.h"
#include "version.h"
#include "worker_msg.h"
#include "workers/worker.h"

static struct worker W;

/* Log lines go to the supervisor once the channel is up (the sandbox
 * will not let us write anywhere else); stderr if that fails. */
static void worker_log_handler(enum log_level level, const char *text, void *arg)
{
	static bool in_handler;
	struct worker *w = arg;
	struct wmsg m;
	static const Vnic__Worker__LogLevel map[] = {
		[LOG_LEVEL_ERROR] = VNIC__WORKER__LOG_LEVEL__LOG_LEVEL_ERROR,
		[LOG_LEVEL_WARN] = VNIC__WORKER__LOG_LEVEL__LOG_LEVEL_WARN,
		[LOG_LEVEL_INFO] = VNIC__WORKER__LOG_LEVEL__LOG_LEVEL_INFO,
		[LOG_LEVEL_DEBUG] = VNIC__WORKER__LOG_LEVEL__LOG_LEVEL_DEBUG,
	};

	if (in_handler)
		return;
	in_handler = true;
	if (worker_send(w, wmsg_log(&m, (unsigned)level <= LOG_LEVEL_DEBUG
					       ? map[level]
					       : VNIC__WORKER__LOG_LEVEL__LOG_LEVEL_ERROR,
				    text)) < 0)
		fprintf(stderr, "vnicd-worker[%d] %s: %s: %s\n", (int)getpid(), w->nic_id,
			log_level_name(level), text);
	in_handler = false;
}

/* Step 1: fd 3 must be an AF_UNIX SOCK_SEQPACKET socket. */
static int check_ctrl_fd(int fd)
{
	struct stat st;
	int type = 0, domain = 0;
	socklen_t l1 = sizeof(type), l2 = sizeof(domain);

	if (fstat(fd, &st) < 0 || !S_ISSOCK(st.st_mode))
		return -ENOTSOCK;
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &l1) < 0 ||
	    getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &l2) < 0)
		return -errno;
	if (type != SOCK_SEQPACKET || domain != AF_UNIX)
		return -EPROTOTYPE;
	return 0;
}

static int set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

#ifdef VNIC_FAULT_INJECTION
static void worker_fault_step(struct vring *vq, enum vring_inflight_step step)
{
	(void)vq;
	switch (step) {
	case VRING_IF_POP_AVAIL:
		FAULT_POINT("worker.inflight.popped");
		break;
	case VRING_IF_PUSH_ELEM:
		FAULT_POINT("worker.inflight.used_elem");
		break;
	case VRING_IF_FLUSH_IDX:
		FAULT_POINT("worker.inflight.used_idx");
		break;
	default:
		break;
	}
}
#endif

/* Step 4, last part: the inflight region (shm/inflight.h), created by the
 * supervisor in the stats page's memfd at inflight_offset (or, with
 * inflight_own_fd, in a vhost-user front end's memfd) and kept across
 * restarts. Checked as a whole here (C8); the
 * in-flight records of a LIVE queue are checked by the recovery at Start,
 * which reads guest memory and so runs inside the sandbox. */
static int configure_inflight(struct worker *w, const Vnic__Worker__Config *c, int fd,
			      char *err, size_t errlen)
{
	struct inflight_queue *iq[INFLIGHT_MAX_QUEUES];
	unsigned qsize[INFLIGHT_MAX_QUEUES];
	uint64_t off = c->inflight_offset, page = (uint64_t)sysconf(_SC_PAGESIZE);
	struct stat st;
	void *p;
	int r;

	for (unsigned j = 0; j < w->nqueues; j++)
		qsize[j] = c->queues[j]->size;
	/* Page-aligned (mmap), past the stats page when it shares its memfd
	 * (never both views of one byte), and the offset bounded before any
	 * sum, so nothing wraps. */
	if (off % page || (!c->inflight_own_fd && off < c->stats_size) ||
	    off > ((uint64_t)1 << 40)) {
		snprintf(err, errlen, "inflight region: offset %llu is not a page boundary%s",
			 (unsigned long long)off, c->inflight_own_fd ? "" : " past the stats page");
		return -EINVAL;
	}
	/* The memfd must hold what Config says, or mapping it could fault
	 * (SIGBUS) on a page beyond its end. */
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    (uint64_t)st.st_size < off + c->inflight_size) {
		snprintf(err, errlen, "inflight region: fd is not a file of %llu bytes",
			 (unsigned long long)(off + c->inflight_size));
		return -EINVAL;
	}
	p = mmap(NULL, c->inflight_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)off);
	if (p == MAP_FAILED) {
		r = -errno;
		snprintf(err, errlen, "inflight region: mmap: %s", strerror(errno));
		return r;
	}
	w->inflight = p;
	w->inflight_len = c->inflight_size;
	r = inflight_region_check(p, c->inflight_size, w->nqueues, qsize, iq, err, errlen);
	if (r < 0)
		return r;
	for (unsigned j = 0; j < w->nqueues; j++) {
		r = vring_attach_inflight(net_queue_vring(w->net, j), iq[j]);
		if (r < 0) {
			snprintf(err, errlen, "inflight region: queue %u: %s", j, strerror(-r));
			return r;
		}
		if (r == 1)
			w->recover = true;
#ifdef VNIC_FAULT_INJECTION
		/* The inflight protocol's crash points (vring.h), as fault
		 * points: the hook runs right after each step's store. */
		net_queue_vring(w->net, j)->inflight_hook = worker_fault_step;
#endif
	}
	return 0;
}

/* Step 2, checked: the Config's fd layout, queues and backend kind, before
 * anything is mapped. Sets *lay and np->backend. */
static int config_check(const Vnic__Worker__Config *c, const struct wire_fds *fds,
			struct wire_fd_layout *lay, struct net_params *np, char *err,
			size_t errlen)
{
	int r;

	r = wire_config_layout(c, lay);
	if (r < 0 || lay->total != fds->n || lay->backend < 0 || lay->stats < 0) {
		snprintf(err, errlen, "Config fd layout does not match its %u fds", fds->n);
		return -EPROTO;
	}
	if (c->n_queues < 2 || c->n_queues > STATS_MAX_QUEUES || c->n_queues % 2) {
		snprintf(err, errlen, "%zu queues: need 2..%u, in rx/tx pairs", c->n_queues,
			 STATS_MAX_QUEUES);
		return -EINVAL;
	}
	/* One backend fd in Config: one queue pair (multiqueue: later). */
	if (c->n_queues != 2) {
		snprintf(err, errlen, "%zu queues: this worker serves one queue pair", c->n_queues);
		return -EOPNOTSUPP;
	}
	if (c->pair >= NIC_MAX_PAIRS) {
		snprintf(err, errlen, "queue pair %u: at most %u pairs", c->pair, NIC_MAX_PAIRS);
		return -EINVAL;
	}
	for (size_t j = 0; j < c->n_queues; j++) {
		if (c->queues[j]->index != 2 * c->pair + j || c->queues[j]->avail_idx > 0xffff) {
			snprintf(err, errlen, "queue %zu: index %u / avail_idx %u (pair %u's queues "
				 "must come in virtqueue order, indices fit 16 bits)", j,
				 c->queues[j]->index, c->queues[j]->avail_idx, c->pair);
			return -EINVAL;
		}
	}
	switch (c->backend) {
	case VNIC__WORKER__BACKEND_KIND__BACKEND_KIND_TAP:
		np->backend = NET_BACKEND_TAP;
		/* VIRTIO_F_VERSION_1: the 12-byte header on both sides. */
		if (c->vnet_hdr_len != NET_HDR_LEN) {
			snprintf(err, errlen, "tap vnet header length %u, need %u", c->vnet_hdr_len,
				 NET_HDR_LEN);
			return -EINVAL;
		}
		break;
	case VNIC__WORKER__BACKEND_KIND__BACKEND_KIND_SOCKET:
		np->backend = NET_BACKEND_SOCKET; /* frames without a header */
		break;
	case VNIC__WORKER__BACKEND_KIND__BACKEND_KIND_AF_PACKET:
		np->backend = NET_BACKEND_AF_PACKET; /* the kernel's 10-byte header */
		if (c->vnet_hdr_len != AFP_VNET_HDR_LEN) {
			snprintf(err, errlen, "AF_PACKET vnet header length %u, need %u",
				 c->vnet_hdr_len, AFP_VNET_HDR_LEN);
			return -EINVAL;
		}
		break;
	default:
		snprintf(err, errlen, "unknown backend kind %d", (int)c->backend);
		return -EINVAL;
	}
	return 0;
}

/* Step 3: guest memory, one region a memfd. */
static int map_memory(struct worker *w, const Vnic__Worker__Config *c, const int *region_fds,
		      char *err, size_t errlen)
{
	struct memtable_region_desc *rd;
	int r;

	rd = calloc(c->n_regions ? c->n_regions : 1, sizeof(*rd));
	if (!rd) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (size_t i = 0; i < c->n_regions; i++) {
		rd[i].gpa = c->regions[i]->gpa;
		rd[i].size = c->regions[i]->size;
		rd[i].offset = c->regions[i]->offset;
		rd[i].fd = region_fds[i];
	}
	r = memtable_check_pages(rd, (unsigned)c->n_regions, err, errlen);
	if (r == 0)
		r = memtable_map_flags(rd, (unsigned)c->n_regions,
				       c->memory_unsealed_ok ? MEMTABLE_UNSEALED_OK : 0, &w->mt, err,
				       errlen);
	free(rd);
	return r;
}

/* Step 3, second part: the stats page, created and initialised by the
 * supervisor. */
static int map_stats(struct worker *w, const Vnic__Worker__Config *c, int fd, char *err,
		     size_t errlen)
{
	void *p;
	int r;

	if (c->stats_size < stats_page_size((unsigned)c->n_queues)) {
		snprintf(err, errlen, "stats page of %u bytes, need %zu", c->stats_size,
			 stats_page_size((unsigned)c->n_queues));
		return -EINVAL;
	}
	p = mmap(NULL, c->stats_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		r = -errno;
		snprintf(err, errlen, "stats page: mmap: %s", strerror(errno));
		return r;
	}
	w->stats = p;
	w->stats_len = c->stats_size;
	if (stats_page_check(p, c->stats_size, (unsigned)c->n_queues) < 0) {
		snprintf(err, errlen, "stats page: bad header (magic, version or queue count)");
		return -EINVAL;
	}
	return 0;
}

/* Step 4, first part: the engine on the backend fd(s); np carries what
 * config_check and the policy filled in. */
static int open_backend(struct worker *w, const Vnic__Worker__Config *c, int backend_fd,
			struct net_params *np, char *err, size_t errlen)
{
	int backend_fds[NET_MAX_PAIRS];
	int r;

	w->nqueues = (unsigned)c->n_queues;
	w->vq_base = 2 * c->pair;
	w->npairs = w->nqueues / 2;
	for (unsigned k = 0; k < w->npairs; k++) {
		w->p[k].backend_fd = backend_fd;
		backend_fds[k] = w->p[k].backend_fd;
		r = set_nonblock(backend_fds[k]);
		if (r < 0) {
			snprintf(err, errlen, "backend fd: %s", strerror(-r));
			return r;
		}
	}
	np->features = c->features;
	np->npairs = w->npairs;
	np->vq_base = w->vq_base;
	np->backend_fds = backend_fds;
	np->stats = w->stats;
	np->ops = &worker_net_ops;
	np->opaque = w;
	return net_dev_new(np, &w->net, err, errlen);
}

/* Where queue j starts: where the previous worker (or the VMM) left off;
 * on a vhost-user NIC's first worker, past a stale base (vring_base_stale). */
static void resume_queue(struct worker *w, const Vnic__Worker__Config *c, unsigned j)
{
	const Vnic__Vmm__Queue *q = c->queues[j];
	struct vring *vq = net_queue_vring(w->net, j);
	uint16_t base = (uint16_t)q->avail_idx, u;

	if (base)
		vring_set_base(vq, base);
	if (!c->base_from_used_idx || c->restarts != 0)
		return;
	u = vring_guest_used_idx(vq);
	if (vring_base_stale(base, u, q->size)) {
		log_warn("queue %u: base %u but used->idx %u: the front end's base is stale; "
			 "resuming at %u", j, base, u, u);
		vring_set_base(vq, u);
	}
}

/* Step 4, second part: every queue on the mapped memory, with its kick
 * and call eventfds. */
static int adopt_queues(struct worker *w, const Vnic__Worker__Config *c,
			const struct wire_fds *fds, const struct wire_fd_layout *lay, char *err,
			size_t errlen)
{
	int r;

	for (unsigned j = 0; j < w->nqueues; j++) {
		const Vnic__Vmm__Queue *q = c->queues[j];
		struct worker_queue *wq = &w->q[j];

		r = net_queue_setup(w->net, j, w->mt, q->size, q->desc_gpa, q->avail_gpa,
				    q->used_gpa, err, errlen);
		if (r < 0)
			return r;
		resume_queue(w, c, j);
		wq->w = w;
		wq->idx = j;
		wq->kick_fd = fds->fd[wire_fd_kick(lay, j)];
		wq->call_fd = fds->fd[wire_fd_call(lay, j)];
		wq->polled = j < 64 && (c->polled_queues >> j) & 1u;
		if (wq->polled)
			log_info("nic %s: queue %u is polled: its front end does not kick",
				 w->nic_id, w->vq_base + j);
		r = set_nonblock(wq->kick_fd);
		if (r < 0) {
			snprintf(err, errlen, "kick fd of queue %u: %s", j, strerror(-r));
			return r;
		}
	}
	return 0;
}

/* Step 3, last part: live migration's dirty log (issue 14), when the
 * Config carries one (a NIC being migrated, or its worker restarted
 * during migration). A log that cannot be mapped fails the Config: a
 * worker that ran without it would corrupt the migration silently. The
 * memfd is closed in step 5 (the mapping stays). */
static int map_dirty_log(struct worker *w, const Vnic__Worker__Config *c, int fd, char *err,
			 size_t errlen)
{
	struct dirtylog *l;
	int r = dirtylog_map(fd, c->log_size, c->log_offset, &l, err, errlen);

	if (r < 0)
		return r;
	worker_log_replace(w, l);
	return 0;
}

/* Steps 2-4: take the Config apart. On failure err says why. */
static int configure(struct worker *w, const Vnic__Worker__Config *c, struct wire_fds *fds,
		     const int *region_fds, char *err, size_t errlen)
{
	struct wire_fd_layout lay;
	struct net_params np = { 0 };
	struct vnic_policy policy;
	int r;

	r = config_check(c, fds, &lay, &np, err, errlen);
	if (r < 0)
		return r;
	if (c->policy) {
		worker_policy_params(c->policy, &policy);
		np.policy = &policy;
		np.budget_pkts = c->policy->budget_packets;
		np.budget_bytes = c->policy->budget_bytes;
	}
	r = map_memory(w, c, region_fds, err, errlen);
	if (r == 0)
		r = map_stats(w, c, fds->fd[lay.stats], err, errlen);
	if (r == 0)
		r = open_backend(w, c, fds->fd[lay.backend], &np, err, errlen);
	/* The log before the queues: their set-up already writes the used
	 * ring (RX kicks off), and a restarted worker must log that too. */
	if (r == 0 && lay.log >= 0)
		r = map_dirty_log(w, c, fds->fd[lay.log], err, errlen);
	if (r == 0)
		r = adopt_queues(w, c, fds, &lay, err, errlen);
	if (r < 0)
		return r;
	w->restarts = c->restarts;
	if (c->inflight_size > 0)
		r = configure_inflight(w, c, fds->fd[lay.inflight], err, errlen);
	if (r == 0 && w->log)
		net_log_used_rings(w->net); /* the set-up's stores, a predecessor's */
	return r;
}

/*
 * Step 2, second part: a Config with regions_deferred > 0 is followed by
 * RegionFds messages carrying the remaining memfds, in region order
 * (wire_worker_send_config). *ret gets one fd per region (frame fds for
 * the first ones, then the deferred ones, which the caller closes with
 * everything else it does not keep).
 */
static int receive_region_fds(const Vnic__Worker__Config *c, const struct wire_fds *fds,
			      int **ret, char *err, size_t errlen)
{
	size_t n = c->n_regions, have;
	int *rf;

	_Static_assert(WIRE_CONFIG_MAX_REGIONS == MEMTABLE_MAX_REGIONS, "one region limit");
	if (n == 0 || n > WIRE_CONFIG_MAX_REGIONS || c->regions_deferred > n) {
		snprintf(err, errlen, "Config with %zu regions (%u deferred): 1..%u allowed", n,
			 c->regions_deferred, WIRE_CONFIG_MAX_REGIONS);
		return -EINVAL;
	}
	rf = calloc(n, sizeof(*rf));
	if (!rf) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	have = n - c->regions_deferred;
	for (size_t i = 0; i < have; i++)
		rf[i] = fds->fd[i];
	while (have < n) {
		Vnic__Worker__WorkerMessage *m = NULL;
		struct wire_fds more = { .n = 0 };
		struct wire_err werr;
		int r = wire_worker_recv(WORKER_CTRL_FD, WIRE_PEER_SUPERVISOR, &m, &more, &werr);

		if (r < 0) {
			snprintf(err, errlen, "RegionFds: %s", werr.msg);
			free(rf);
			return r;
		}
		if (m->msg_case != VNIC__WORKER__WORKER_MESSAGE__MSG_REGION_FDS ||
		    m->region_fds->first != have || m->region_fds->count > n - have) {
			snprintf(err, errlen, "expected RegionFds for regions %zu.., got something else",
				 have);
			wire_fds_close(&more);
			wire_worker_free(m);
			free(rf);
			return -EPROTO;
		}
		for (unsigned k = 0; k < more.n; k++)
			rf[have++] = more.fd[k];
		wire_worker_free(m);
	}
	*ret = rf;
	return 0;
}

#ifdef VNIC_FAULT_INJECTION
/* A point fired: tell the supervisor before acting (it logs the line the
 * lifecycle suite looks for, and SIGKILLs us for "sigkill"). */
static void worker_fault_report(const char *point, enum fault_action a, unsigned arg)
{
	struct wmsg m;

	if (worker_send(&W, wmsg_fault_hit(&m, point, fault_action_name(a), arg)) < 0)
		fprintf(stderr, "vnicd-worker %s: cannot report fault %s\n", W.nic_id, point);
}

/* sigkill: seccomp does not let us kill ourselves; the supervisor kills
 * us through our pidfd on the FaultHit just sent. Wait for it, bounded
 * (30 s, then fault.c crashes instead). */
static void worker_fault_kill(const char *point)
{
	(void)point;
	for (int i = 0; i < 300; i++) {
		struct timespec ts = { 0, 100000000L };

		nanosleep(&ts, NULL);
	}
}
#endif

static void usage(void)
{
	fprintf(stderr, "usage: vnicd-worker --nic ID [--user USER] [--ids config] [--sandbox on|off]%s\n"
		"       vnicd-worker --version\n"
		"  started by vnicd with its control socket at fd 3; not for direct use\n",
#ifdef VNIC_FAULT_INJECTION
		" [--fault SPEC]"
#else
		""
#endif
		);
}

struct worker_args {
	const char *user;  /* NULL: privdrop's default */
	bool sandbox;      /* false only with --sandbox off */
	bool ids_from_config; /* --ids config: the Config must name the uid
				 and gid (a worker vnicd started before its NIC) */
	/* Step 1's results, which take_config and enter_sandbox use. */
	int user_rc;       /* privdrop_resolve(user): 0 or a negative errno */
	uid_t user_uid;
	gid_t user_gid;
	int isolate_rc;    /* sandbox_isolate(): 0 or a negative errno */
};

/* /proc/self/fd, opened before the empty root hides /proc, so that
 * fd_ceiling() can still list the fds once the worker holds only what it
 * keeps (an open directory of a detached mount reads on). -1: not open. */
static int proc_fd_dir = -1;
static int proc_dir = -1; /* /proc, the same way: holder_start() watches the holder */
/* WORKER_LIFELINE_FD when vnicd gave it (step 1), for step 6's holder. */
static int lifeline_fd = -1;

static int parse_args(int argc, char **argv, struct worker *w, struct worker_args *a)
{
	a->user = NULL;
	a->sandbox = true;
	a->ids_from_config = false;
	if (argc < 3 || strcmp(argv[1], "--nic") != 0 || argv[2][0] == '\0')
		return -EINVAL;
	snprintf(w->nic_id, sizeof(w->nic_id), "%s", argv[2]);
	for (int i = 3; i < argc; i += 2) {
		if (i + 1 >= argc)
			return -EINVAL;
		if (strcmp(argv[i], "--user") == 0 && argv[i + 1][0])
			a->user = argv[i + 1];
		else if (strcmp(argv[i], "--ids") == 0 && strcmp(argv[i + 1], "config") == 0)
			a->ids_from_config = true;
		else if (strcmp(argv[i], "--sandbox") == 0 && strcmp(argv[i + 1], "on") == 0)
			a->sandbox = true;
		else if (strcmp(argv[i], "--sandbox") == 0 && strcmp(argv[i + 1], "off") == 0)
			a->sandbox = false;
#ifdef VNIC_FAULT_INJECTION
		else if (strcmp(argv[i], "--fault") == 0) {
			char err[256];

			if (fault_arm(argv[i + 1], "worker.", err, sizeof(err)) < 0) {
				fprintf(stderr, "vnicd-worker: --fault: %s\n", err);
				return -EINVAL;
			}
		}
#endif
		else
			return -EINVAL;
	}
	return 0;
}

/* One above the highest open fd: the NOFILE limit that still lets the
 * worker use everything it holds and nothing more (once running it
 * creates no fds and receives only SetDirtyLog's or SetCallFd's one at a
 * time, which the caller adds). From proc_fd_dir, which it closes: a few
 * calls, where probing every number below 4096 took 4096 (about 4 ms of
 * a 10 ms start on a host where a call costs 1 us, and on a migration's
 * destination the guest waits for the worker). */
static unsigned fd_ceiling(void)
{
	DIR *d = proc_fd_dir >= 0 ? fdopendir(proc_fd_dir) : NULL;
	struct dirent *e;
	unsigned top = 0;

	if (!d) {
		if (proc_fd_dir >= 0)
			close(proc_fd_dir);
		proc_fd_dir = -1;
		for (unsigned fd = 0; fd < 4096; fd++)
			if (fcntl((int)fd, F_GETFD) >= 0)
				top = fd + 1;
		return top;
	}
	while ((e = readdir(d)) != NULL) {
		char *end;
		unsigned long fd = strtoul(e->d_name, &end, 10);

		if (e->d_name[0] < '0' || e->d_name[0] > '9' || *end || (int)fd == proc_fd_dir ||
		    (int)fd == proc_dir)
			continue;
		if (fd + 1 > top)
			top = (unsigned)fd + 1;
	}
	closedir(d);
	proc_fd_dir = -1;
	return top;
}

/*
 * Step 1, once fd 3 is checked, before the Config: what needs the
 * host's files, then the new namespaces and the empty root. A
 * pre-started worker (worker_spare.h)
 * does this while it waits, so a migration's destination does not wait
 * for it (2.8 ms of an 8 ms start, up to 7 ms on a loaded host). The
 * user is looked up while /etc/passwd is reachable (NSS may open files
 * and sockets, which step 5 closes again); --ids config needs no lookup.
 * A failure is kept and reported once the Config is in, as the answer
 * to it. In sanitizer builds LeakSanitizer's last check runs here, so it
 * does not see the Config's handling (the supervisor's side it does).
 */
static void prepare_sandbox(struct worker_args *a)
{
	a->user_rc = 0;
	a->isolate_rc = 0;
	if (!a->sandbox)
		return;
	if (!a->ids_from_config)
		a->user_rc = privdrop_resolve(a->user, &a->user_uid, &a->user_gid);
	proc_fd_dir = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	a->isolate_rc = sandbox_isolate();
}

/*
 * In step 6, as the user the worker runs as (a holder as root would share
 * a memory that a compromised worker writes) and before the rlimits
 * (NPROC 0) and the filter (no clone). The worker then closes its copy of
 * the lifeline: only the holder keeps one.
 * The holder shares the namespaces too, so the worker's exit does not wait
 * for their teardown either. Without a holder the worker runs as well;
 * only its exit is slower (holder.h).
 */
static void start_holder(struct worker *w)
{
	char err[128];
	pid_t pid = holder_start(proc_dir, err, sizeof(err));

	if (pid < 0)
		log_warn("nic %s: no holder (%s): this worker's exit will unmap the guest's "
			 "memory before it can be reaped", w->nic_id, err);
}

/*
 * Step 6. Every call here either succeeds or the worker must not run: a
 * half-applied sandbox is reported as an error and the worker exits.
 * Returns: 1 when sandboxed, 0 when --sandbox off, negative errno.
 */
static int enter_sandbox(struct worker *w, const struct worker_args *a, uid_t uid, gid_t gid,
			 char *err, size_t errlen)
{
	/* A violation's record goes to the stats page, mapped by now. */
	struct sandbox_cfg cfg = { .report = w->stats ? &w->stats->violation : NULL };
	unsigned ceiling;
	int r;

	if (!a->sandbox) {
		cfg.mode = SANDBOX_MODE_OFF;
		r = sandbox_enter(&cfg);
		if (r != SANDBOX_DISABLED) {
			snprintf(err, errlen, "no_new_privs: %s", strerror(-r));
			return r < 0 ? r : -EIO;
		}
		log_warn("nic %s: SANDBOX OFF (--sandbox off): this worker runs with the "
			 "supervisor's privileges and no seccomp filter; for debugging only",
			 w->nic_id);
		start_holder(w);
		return 0;
	}
	ceiling = fd_ceiling();
	r = a->isolate_rc; /* step 1's */
	if (r < 0) {
		snprintf(err, errlen, "empty root and namespaces: %s", strerror(-r));
		return r;
	}
	r = privdrop_to(uid, gid);
	if (r < 0) {
		snprintf(err, errlen, "dropping to uid %u gid %u: %s", (unsigned)uid,
			 (unsigned)gid, strerror(-r));
		return r;
	}
	/* FSIZE 0 turns a write to a regular file into SIGXFSZ, which would
	 * kill us when stderr is the supervisor's log file; ignored, such a
	 * write fails with EFBIG instead (log lines travel over fd 3). */
	signal(SIGXFSZ, SIG_IGN);
	start_holder(w);
	/* One fd number more: a SetDirtyLog's log memfd arrives by
	 * SCM_RIGHTS while we run (mapped and closed at once), and so does
	 * a SetCallFd's eventfd (the old call fd is closed once it is in:
	 * one fd more for a moment, never two). */
	r = sandbox_rlimits(ceiling + 1);
	if (r < 0) {
		snprintf(err, errlen, "rlimits: %s", strerror(-r));
		return r;
	}
	cfg.mode = SANDBOX_MODE_ENFORCE;
	r = sandbox_enter(&cfg);
	if (r != 0) {
		snprintf(err, errlen, "seccomp filter: %s", strerror(r < 0 ? -r : EIO));
		return r < 0 ? r : -EIO;
	}
	return 1;
}

/* Step 5: keep the control socket, kick/call eventfds and the backend;
 * the memfds are mapped and the stats memfd too, so they go (with
 * anything else the process may hold). Closes fds, the Config's. */
static int close_unneeded_fds(struct worker *w, struct wire_fds *fds)
{
	int keep[2 * STATS_MAX_QUEUES + NET_MAX_PAIRS + 4 + 3]; /* + ctrl, proc dirs, lifeline, stdio */
	unsigned nkeep = 0;

	keep[nkeep++] = WORKER_CTRL_FD;
	for (unsigned j = 0; j < w->nqueues; j++) {
		keep[nkeep++] = w->q[j].kick_fd;
		keep[nkeep++] = w->q[j].call_fd;
	}
	for (unsigned k = 0; k < w->npairs; k++)
		keep[nkeep++] = w->p[k].backend_fd;
	if (proc_fd_dir >= 0)
		keep[nkeep++] = proc_fd_dir; /* fd_ceiling() closes it */
	if (proc_dir >= 0)
		keep[nkeep++] = proc_dir; /* closed after step 6's holder */
	if (lifeline_fd >= 0)
		keep[nkeep++] = lifeline_fd; /* the same */
	for (unsigned i = 0; i < fds->n; i++) {
		bool kept = false;

		for (unsigned k = 0; k < nkeep; k++)
			kept |= fds->fd[i] == keep[k];
		if (kept)
			fds->fd[i] = -1; /* adopted */
	}
	wire_fds_close(fds);
	/* stdio as the supervisor left it, where open. */
	for (int fd = 0; fd <= 2; fd++)
		if (fcntl(fd, F_GETFD) >= 0)
			keep[nkeep++] = fd;
	return privdrop_close_fds_except(keep, nkeep);
}

/*
 * Steps 2-5: receive Config and its fds, resolve the sandbox user (*uid,
 * *gid), map memory and the stats page, set up the queues, close what is
 * not kept. Every failure is reported to the supervisor (or on stderr).
 * Returns: 0, or -1 when the worker must exit 1.
 */
static int take_config(struct worker *w, const struct worker_args *a, uid_t *uid, gid_t *gid)
{
	Vnic__Worker__WorkerMessage *m = NULL;
	struct wire_fds fds = { .n = 0 };
	struct wire_err werr;
	char err[256] = "";
	int *region_fds = NULL;
	int r;

	/* 2. Config and exactly its fds (wire checks the count per type). */
	r = wire_worker_recv(WORKER_CTRL_FD, WIRE_PEER_SUPERVISOR, &m, &fds, &werr);
	if (r < 0) {
		if (r != -EPIPE && r != -ECONNRESET)
			worker_send_error(w, -r, werr.msg);
		fprintf(stderr, "vnicd-worker %s: no Config: %s\n", w->nic_id, werr.msg);
		return -1;
	}
	if (m->msg_case != VNIC__WORKER__WORKER_MESSAGE__MSG_CONFIG) {
		worker_send_error(w, EPROTO, "expected Config first");
		wire_fds_close(&fds);
		wire_worker_free(m);
		return -1;
	}

	if (a->sandbox && m->config->worker_ids) {
		/* The NIC's uid of the range (a pre-started worker's command
		 * line does not have it). */
		*uid = m->config->worker_uid;
		*gid = m->config->worker_gid;
		if (*uid == 0 || *gid == 0) {
			r = -EPERM;
			snprintf(err, sizeof(err), "Config names uid %u gid %u: never root",
				 (unsigned)*uid, (unsigned)*gid);
			goto out_config_error;
		}
	} else if (a->sandbox && a->ids_from_config) {
		/* Never fall back to a shared default user: the NIC's own uid
		 * is the isolation between NICs. */
		r = -EINVAL;
		snprintf(err, sizeof(err), "started for the uid its Config names (--ids config), "
			 "and the Config names none");
		goto out_config_error;
	} else if (a->sandbox) {
		r = a->user_rc; /* looked up in step 1 */
		if (r < 0) {
			snprintf(err, sizeof(err), "sandbox user %s: %s",
				 a->user ? a->user : "(default)", strerror(-r));
			goto out_config_error;
		}
		*uid = a->user_uid;
		*gid = a->user_gid;
	}

	/* 3, 4. Map memory and the stats page, set up the queues. */
	r = receive_region_fds(m->config, &fds, &region_fds, err, sizeof(err));
	if (r == 0)
		r = configure(w, m->config, &fds, region_fds, err, sizeof(err));
	if (r < 0)
		goto out_config_error;

	/* 5. The Config is taken apart: only the fds we keep stay. */
	wire_worker_free(m);
	r = close_unneeded_fds(w, &fds);
	free(region_fds); /* those fds are mapped, and now closed */
	if (r < 0) {
		worker_send_error(w, -r, "closing inherited fds");
		return -1;
	}
	return 0;

out_config_error:
	free(region_fds);
	worker_send_error(w, -r, err);
	wire_fds_close(&fds);
	wire_worker_free(m);
	return -1;
}

/* The event loop's own fds (epoll) exist before the sandbox, which would
 * not let us create them. Returns: 0, or -1 (reported, undone). */
static int loop_setup(struct worker *w)
{
	int r;

	r = worker_loop_init(w);
	if (r == 0)
		r = worker_fds_init();
	if (r == 0)
		r = worker_heartbeat_start(w);
	if (r < 0) {
		worker_send_error(w, -r, "cannot set up the event loop");
		worker_heartbeat_stop(w);
		worker_loop_free(w);
		return -1;
	}
	return 0;
}

/* Step 7: Ready, which says whether the sandbox is on. */
static int send_ready(struct worker *w, bool sandboxed)
{
	struct wmsg rm;
	int r;

	r = -FAULT_ERRNO("worker.ready.send");
	if (r == 0)
		r = worker_send(w, wmsg_ready(&rm, sandboxed));
	if (r < 0)
		fprintf(stderr, "vnicd-worker %s: cannot send Ready: %s\n", w->nic_id,
			strerror(-r));
	return r;
}

/* After the loop: undo what configure set up. */
static void worker_teardown(struct worker *w)
{
	log_set_handler(NULL, NULL);
	if (w->net)
		worker_log_replace(w, NULL);
	w->net = net_dev_free(w->net);
	if (w->stats)
		munmap(w->stats, w->stats_len);
	if (w->inflight)
		munmap(w->inflight, w->inflight_len);
	/* The guest's memory stays mapped (w->mt stays reachable through W)
	 * for the exit to unmap: vnicd answers a device stop only once this
	 * process is reaped, and the exit's teardown of the whole address
	 * space (one TLB flush, page tables freed in bulk) is quicker than a
	 * munmap of each region first (doc/benchmarks.md, "Evening of
	 * 2026-12-04"). */
}

int main(int argc, char **argv)
{
	struct worker *w = &W;
	char err[256] = "";
	struct worker_args args;
	uid_t uid = 0;
	gid_t gid = 0;
	int r, code, sandboxed;

	if (argc == 2 && strcmp(argv[1], "--version") == 0)
		return vnic_print_version("vnicd-worker");
	if (parse_args(argc, argv, w, &args) < 0) {
		usage();
		return 2;
	}
	w->ctrl_fd = WORKER_CTRL_FD;
	log_init("vnicd-worker", LOG_LEVEL_INFO, false);

	/* 1. fd 3 is the control socket, or we were not started by vnicd. */
	r = check_ctrl_fd(WORKER_CTRL_FD);
	if (r < 0) {
		log_error("nic %s: fd %d is not the control socket (AF_UNIX SOCK_SEQPACKET): %s",
			  w->nic_id, WORKER_CTRL_FD, strerror(-r));
		return 2;
	}
	/* From here, log lines travel to the supervisor. */
	log_set_handler(worker_log_handler, w);
#ifdef VNIC_FAULT_INJECTION
	fault_set_hooks(worker_fault_report, worker_fault_kill);
#endif

	/* Still 1: the user, then namespaces and the empty root. /proc is
	 * opened first, for step 6's holder: the empty root hides it. */
	proc_dir = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (holder_lifeline_ok(WORKER_LIFELINE_FD))
		lifeline_fd = WORKER_LIFELINE_FD;
	prepare_sandbox(&args);
	/* 2-5. Config: memory, stats page, queues; then only their fds. */
	if (take_config(w, &args, &uid, &gid) < 0)
		return 1;
	if (loop_setup(w) < 0)
		return 1;

	/* 6. Sandbox, before the first guest-controlled byte is read. */
	sandboxed = enter_sandbox(w, &args, uid, gid, err, sizeof(err));
	if (proc_dir >= 0)
		close(proc_dir);
	proc_dir = -1;
	if (lifeline_fd >= 0)
		close(lifeline_fd); /* the holder has its own */
	lifeline_fd = -1;
	if (sandboxed < 0)
		worker_send_error(w, -sandboxed, err);
	/* 7. Ready, then 8. the loop. */
	if (sandboxed < 0 || send_ready(w, sandboxed == 1) < 0) {
		worker_heartbeat_stop(w);
		worker_loop_free(w);
		return 1;
	}
	code = worker_loop_run(w);
	FAULT_POINT("worker.exit");
	worker_heartbeat_stop(w);
	worker_loop_free(w);
	worker_teardown(w);
	return code;
}
