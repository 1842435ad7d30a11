/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nic: one NIC's lifecycle in the supervisor. The states and the one
 * table of allowed transitions are in nic_state.[ch]; this file makes the
 * transitions happen:
 *
 *   AddNic (validated) -> STARTING: backend opened, stats page made, worker
 *       spawned, Config sent, READY deadline armed
 *   READY              -> RUNNING: Start sent, AddNic answered OK
 *   no READY in time, worker exit or Error before READY -> killed, reaped,
 *       AddNic answered with the reason, NIC freed (GONE)
 *   worker death while RUNNING (exit, signal, sandbox violation, kill,
 *       noticed at once through its pidfd) -> NicFailed to the owner, then
 *       the restart policy (supervisor.h SUP_RESTART_*):
 *         within the limit -> RESTARTING: after the backoff a new worker is
 *           spawned on the SAME fds (memory, eventfds, backend, stats page)
 *           with Config.restarts > 0; its READY -> RUNNING + NicRestarted
 *           (restart time: death noticed -> READY, logged and reported);
 *           a new worker that dies before READY is one more death;
 *         limit reached -> FAILED: no worker, last_error says why; the
 *           entry stays for status until RemoveNic or disconnect.
 *   RemoveNic / disconnect / shutdown -> STOPPING: Stop sent, deadline
 *       armed (a worker not yet READY is killed at once); Stopped gives the
 *       final indices; the worker's exit (pidfd) is reaped and only then
 *       RemoveNic is answered and the NIC freed (GONE). A missed deadline:
 *       SIGKILL through the pidfd, reap, answer. A worker that dies while
 *       STOPPING is never restarted: its reap completes the stop.
 *       With no worker (FAILED, or RESTARTING during the backoff) the NIC
 *       goes to GONE at once.
 *
 * Every fd a NIC holds is owned by exactly one field and closed in
 * nic_free(); a restart reuses them all and creates none but the new
 * worker's control socket and pidfd.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <endian.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fault.h"
#include "inflight.h"
#include "inflight_file.h"
#include "pbconv.h"
#include "sandbox.h"
#include "sealed_memfd.h"
#include "supervisor.h"
#include "afp_ring.h"
#include "afpacket.h"
#include "announce.h"
#include "holders.h"
#include "tap.h"
#include "vring.h"
#include "worker_spare.h"
#include "workers/policy.h"
#include "workers/stats.h"

struct nic *nic_find(struct sup *s, const char *id)
{
	struct nic *n;

	TAILQ_FOREACH(n, &s->nics, link)
		if (!strcmp(n->id, id))
			return n;
	return NULL;
}

struct nic *nic_find_pair(struct sup *s, const char *id, uint32_t pair)
{
	struct nic *n;

	TAILQ_FOREACH(n, &s->nics, link)
		if (n->pair == pair && !strcmp(n->id, id))
			return n;
	return NULL;
}

/* The one way from a virtqueue index to a queue (STYLE habit 4). */
struct nic_queue *nic_vq(struct nic *n, uint32_t index)
{
	int slot = nic_queue_slot(n->pair, index);

	return slot < 0 ? NULL : &n->q[slot];
}

int nic_set_state(struct nic *n, enum nic_state st, const char *why)
{
	enum nic_state old = n->state;

	if (!nic_transition_allowed(old, st)) {
		/* A bug in vnicd, not in a peer: say so loudly, keep the state. */
		log_error("nic %s: BUG: transition %s -> %s is not in the state table: refused%s%s",
			  n->id, nic_state_name(old), nic_state_name(st), why ? " (" : "",
			  why ? why : "");
		return -EINVAL;
	}
	log_info("nic %s: %s -> %s%s%s", n->id, nic_state_name(old), nic_state_name(st),
		 why ? ": " : "", why ? why : "");
	n->state = st;
	/* The owner hears of every change once AddNic was answered OK
	 * (before that the AddNic reply is the news, and a NIC whose AddNic
	 * failed never existed for the VMM). */
	if (n->announced && n->ops->state_changed)
		n->ops->state_changed(n, old, st, why);
	return 0;
}

/* ------------------------------------------------ telling the owner */

static void nic_notify_added(struct nic *n, enum nic_result r, const char *error)
{
	if (!n->add_pending)
		return;
	n->add_pending = false;
	if (n->owner && n->ops->added)
		n->ops->added(n, r, error);
}

void nic_notify_removed(struct nic *n, enum nic_result r, const char *error)
{
	if (!n->remove_pending)
		return;
	n->remove_pending = false;
	if (n->owner && n->ops->removed)
		n->ops->removed(n, r, error);
}

void nic_notify_policy_set(struct nic *n, enum nic_result r, const char *error)
{
	if (!n->policy_pending)
		return;
	n->policy_pending = false;
	if (n->policy_conn_id && n->sup->admin_policy_set)
		n->sup->admin_policy_set(n, r, error); /* vnicctl set-policy (admin.c) */
	else if (n->owner && n->ops->policy_set)
		n->ops->policy_set(n, r, error);
	/* Whoever asked, an owner that re-creates its NIC (a vhost-user
	 * endpoint on a new memory table) must start the next one with it. */
	if (r == NIC_RES_OK && n->owner && n->ops->policy_changed)
		n->ops->policy_changed(n);
}

static void nic_notify_failed(struct nic *n, int sig, int exit_status, int syscall_nr)
{
	if (n->owner && n->ops->failed)
		n->ops->failed(n, sig, exit_status, syscall_nr);
}

void nic_notify_queue_reset(struct nic *n, uint32_t queue, const char *reason)
{
	if (n->owner && n->ops->queue_reset)
		n->ops->queue_reset(n, queue, reason);
}

void nic_notify_stopped(struct nic *n)
{
	if (n->owner && n->ops->stopped)
		n->ops->stopped(n);
}

void nic_notify_dirty_log_set(struct nic *n, enum nic_result r, const char *error)
{
	if (!n->log_pending)
		return;
	n->log_pending = false;
	if (n->owner && n->ops->dirty_log_set)
		n->ops->dirty_log_set(n, r, error);
}

void nic_notify_call_fd_set(struct nic *n, enum nic_result r, const char *error)
{
	if (!n->call_pending)
		return;
	n->call_pending = n->call_sent = false;
	if (n->owner && n->ops->call_fd_set)
		n->ops->call_fd_set(n, r, error);
}

static void close_fd(int *fd)
{
	if (*fd >= 0) {
		close(*fd);
		*fd = -1;
	}
}

static void nic_worker_release(struct nic *n)
{
	if (n->ev_ctrl) {
		event_free(n->ev_ctrl); /* event_del before close (habit 12) */
		n->ev_ctrl = NULL;
	}
	if (n->ev_exit) {
		event_free(n->ev_exit);
		n->ev_exit = NULL;
	}
	if (n->ev_timer)
		event_del(n->ev_timer);
	close_fd(&n->w.ctrl_fd);
	close_fd(&n->w.pidfd);
	n->w.pid = 0;
}

/* Another pair of n's device (issue 15) that runs as a uid of the range:
 * the pairs of one NIC share its identity. NULL: none. */
static const struct nic *nic_uid_sibling(const struct nic *n)
{
	const struct nic *o;

	TAILQ_FOREACH(o, &n->sup->nics, link)
		if (o != n && o->worker_uid && !strcmp(o->id, n->id) && o->ops == n->ops &&
		    o->owner == n->owner)
			return o;
	return NULL;
}

/* Does a NIC other than n run as n's uid? */
static bool nic_uid_in_use(const struct nic *n)
{
	const struct nic *o;

	TAILQ_FOREACH(o, &n->sup->nics, link)
		if (o != n && o->worker_uid == n->worker_uid)
			return true;
	return false;
}

/* The uid and gid this NIC's workers run as, for its whole life (its
 * restarts included): its own from --uid-range (shared by every queue
 * pair of the NIC), --user's, or none. */
static int nic_worker_ids(struct nic *n, char *err, size_t errlen)
{
	struct sup *s = n->sup;
	const struct nic *sib = s->uid_per_nic ? nic_uid_sibling(n) : NULL;
	uint32_t id;

	if (sib) {
		n->worker_uid = sib->worker_uid;
		n->worker_gid = sib->worker_gid;
		snprintf(n->worker_user, sizeof(n->worker_user), "%s", sib->worker_user);
	} else if (s->uid_per_nic) {
		if (uidrange_alloc(&s->uids, &id) < 0) {
			snprintf(err, errlen, "no free uid in --uid-range %u-%u (%u NICs use them)",
				 s->uids.first, s->uids.first + s->uids.count - 1, s->uids.used);
			return -ENOSPC;
		}
		n->worker_uid = n->worker_gid = id;
		/* "UID:GID": the worker needs no passwd lookup (and so loads
		 * no NSS module: doc/benchmarks.md "Scale"). */
		snprintf(n->worker_user, sizeof(n->worker_user), "%u:%u", id, id);
	} else if (!s->sandbox_off) {
		n->worker_uid = s->worker_user_uid;
		n->worker_gid = s->worker_user_gid;
	}
	return 0;
}

/* ------------------------------------------- guest memory, shared by pairs */

/* Are a and b the same regions of the same files? Each pair's table is
 * its own duplicate of the VMM's fds, so "the same file" is the inode. */
static bool nic_mem_same(const struct nic_mem *a, const struct memtable_region_desc *b,
			 unsigned nb)
{
	struct stat sa, sb;

	if (a->n != nb)
		return false;
	for (unsigned i = 0; i < nb; i++) {
		const struct memtable_region_desc *x = &a->r[i], *y = &b[i];

		if (x->gpa != y->gpa || x->size != y->size || x->offset != y->offset ||
		    x->fd < 0 || y->fd < 0 || fstat(x->fd, &sa) < 0 || fstat(y->fd, &sb) < 0 ||
		    sa.st_dev != sb.st_dev || sa.st_ino != sb.st_ino)
			return false;
	}
	return true;
}

/* A sibling pair's memory (same id and owner) with exactly these regions,
 * or NULL. */
static struct nic_mem *nic_mem_sibling(const struct nic *n, const struct nic_spec *spec)
{
	const struct nic *o;

	TAILQ_FOREACH(o, &n->sup->nics, link)
		if (o != n && o->mem && !strcmp(o->id, n->id) && o->ops == n->ops &&
		    o->owner == n->owner && nic_mem_same(o->mem, spec->regions, spec->nregions))
			return o->mem;
	return NULL;
}

/* Drop n's reference: the last pair closes the fds. */
static void nic_mem_put(struct nic *n)
{
	struct nic_mem *m = n->mem;
	struct nic *o;

	if (!m)
		return;
	n->mem = NULL;
	if (--m->refs == 0) {
		for (unsigned i = 0; i < m->n; i++)
			close_fd(&m->r[i].fd);
		free(m);
		return;
	}
	if (m->counted == n) {
		m->counted = NULL;
		TAILQ_FOREACH(o, &n->sup->nics, link)
			if (o->mem == m) {
				m->counted = o;
				break;
			}
	}
}

/* Guarantee 1 (issue 11 item 8): a reply that tells the VMM its memory
 * and eventfds are free goes out only after this. A pair's siblings may
 * still hold the memory they share: it is closed with the last of them. */
void nic_close_vmm_fds(struct nic *n)
{
	nic_mem_put(n);
	for (int i = 0; i < NIC_NUM_QUEUES; i++) {
		close_fd(&n->q[i].kick_fd);
		close_fd(&n->q[i].call_fd);
	}
	close_fd(&n->backend_fd);
	if (n->stats)
		munmap(n->stats, n->stats_len);
	n->stats = NULL;
	close_fd(&n->stats_fd);
	close_fd(&n->inflight_fd);
	close_fd(&n->log_fd);
}

/* The u16 at gpa in the NIC's guest memory, read with pread: nothing is
 * mapped, so memory the front end shrank gives a short read, not SIGBUS. */
static int nic_read_guest_u16(const struct nic *n, uint64_t gpa, uint16_t *v)
{
	return sup_read_guest_u16(nic_regions(n), nic_nregions(n), gpa, v);
}

int sup_read_guest_u16(const struct memtable_region_desc *r, unsigned nr, uint64_t gpa,
		       uint16_t *v)
{
	for (unsigned i = 0; i < nr; i++) {
		const struct memtable_region_desc *d = &r[i];
		ssize_t k;

		if (d->fd < 0 || d->size < 2 || gpa < d->gpa || gpa - d->gpa > d->size - 2)
			continue;
		k = pread(d->fd, v, sizeof(*v), (off_t)(d->offset + (gpa - d->gpa)));
		*v = le16toh(*v); /* VERSION_1 rings are little-endian */
		return k == (ssize_t)sizeof(*v) ? 0 : -EIO;
	}
	return -EFAULT;
}

/* A vhost-user worker that ended while stopping without its Stopped
 * message (killed at the stop deadline, or dead): each queue's final index
 * is the guest's used->idx, so that GET_VRING_BASE answers where the ring
 * really is and not the base the worker started from. Chains it had in
 * flight are redone by whoever runs the ring next, as when QEMU's own back
 * end fails (virtio_queue_restore_last_avail_idx). A RemoveNic that
 * missed its deadline still answers "final indices unknown": AddNic's
 * VMMs read the used ring themselves. */
static void nic_final_from_used_ring(struct nic *n)
{
	if (!n->base_from_used_idx)
		return;
	for (int i = 0; i < NIC_NUM_QUEUES; i++) {
		struct nic_queue *q = &n->q[i];
		uint16_t idx;
		int rc;

		if (q->final_valid || q->size == 0)
			continue;
		rc = nic_read_guest_u16(n, q->used + 2, &idx);
		if (rc < 0) {
			log_warn("nic %s: queue %u: no final index from the worker, and used->idx "
				 "cannot be read: %s", n->id, q->index, strerror(-rc));
			continue;
		}
		/* No worker of this NIC ever ran the rings: a ring is where
		 * the worker would have started (workers/main.c
		 * resume_queue): the front end's base (the guest's used->idx
		 * may be behind it, with chains an earlier back end had in
		 * flight), or used->idx past a stale one. */
		if (!n->ever_ready && q->avail_idx != 0 &&
		    !vring_base_stale((uint16_t)q->avail_idx, idx, q->size))
			continue;
		q->final_valid = true;
		q->final_avail = q->final_used = idx;
		log_info("nic %s: queue %u: no final index from the worker: used->idx %u from "
			 "guest memory", n->id, q->index, idx);
	}
}

static struct nic *nic_free(struct nic *n)
{
	if (!n)
		return NULL;
	nic_worker_release(n);
	if (n->ev_timer)
		event_free(n->ev_timer);
	nic_close_vmm_fds(n);
	if (n->inflight_file)
		inflight_file_unlink(n->sup, n->id, n->pair);
	/* The uid goes back to the range with the last NIC that runs as it
	 * (the NIC's last pair). Any NIC, not only a sibling by id and owner:
	 * an owner's detach unlinks its pairs one at a time. */
	if (!nic_uid_in_use(n))
		uidrange_free(&n->sup->uids, n->worker_uid);
	free(n);
	return NULL;
}

/* Unlink, mark GONE, free; the shutdown path may then exit. */
static void nic_remove(struct nic *n, const char *why)
{
	struct sup *s = n->sup;

	nic_set_state(n, NIC_GONE, why);
	/* A log change no worker took: none of this NIC's writes will follow. */
	nic_notify_dirty_log_set(n, NIC_RES_UNAVAILABLE, "the NIC is gone");
	nic_notify_call_fd_set(n, NIC_RES_UNAVAILABLE, "the NIC is gone");
	TAILQ_REMOVE(&s->nics, n, link);
	s->nnics--;
	if (n->ops->gone)
		n->ops->gone(n);
	nic_free(n);
	if (s->nic_gone)
		s->nic_gone(s);
}

uint64_t nic_uptime_s(const struct nic *n)
{
	struct timespec now;

	if (n->state != NIC_RUNNING)
		return 0;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (uint64_t)(now.tv_sec - n->t_running.tv_sec);
}

void nic_read_queue(const struct nic *n, int slot, struct stats_queue_snapshot *out)
{
	memset(out, 0, sizeof(*out));
	/* Our own queue count bounds the read, never the page's (stats.h). */
	if (slot < 0 || slot >= NIC_NUM_QUEUES)
		return;
	if (n->stats)
		stats_queue_read(&n->stats->q[slot], out);
	if (n->ops->counters_base)
		n->ops->counters_base(n, slot, out);
}

/*
 * The worker's memfd, sealed so that no worker can shrink it under
 * another's mapping: the stats page at offset 0, which vnicd keeps mapped
 * and reads, and with @inflight the inflight region (shm/inflight.h) from
 * the next page boundary on, sized for the NIC's queues (n->q[].size) and
 * initialised (every queue FRESH). vnicd unmaps the region at once: only
 * workers use it. One memfd for both costs one fd per worker (issue 15).
 */
static int worker_memfd_create(struct nic *n, bool inflight, char *err, size_t errlen)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), slen = stats_page_size(NIC_NUM_QUEUES);
	size_t off = (slen + page - 1) / page * page, ilen = 0;
	unsigned qsize[NIC_NUM_QUEUES];
	uint8_t *p;
	int fd, rc;

	if (inflight) {
		for (int i = 0; i < NIC_NUM_QUEUES; i++)
			qsize[i] = n->q[i].size;
		ilen = inflight_region_size(NIC_NUM_QUEUES, qsize);
		if (ilen == 0 || ilen > UINT32_MAX) {
			snprintf(err, errlen, "inflight region: no valid size for these queues");
			return -EINVAL;
		}
	}
	fd = sealed_memfd_map("vnic-worker", inflight ? off + ilen : slen, (void **)&p,
			      "stats page", err, errlen);
	if (fd < 0)
		return fd;
	stats_page_init(p, slen, NIC_NUM_QUEUES);
	if (inflight) {
		rc = inflight_region_init(p + off, ilen, NIC_NUM_QUEUES, qsize);
		munmap(p + off, ilen);
		if (rc) {
			snprintf(err, errlen, "inflight region: init: %s", strerror(-rc));
			munmap(p, slen);
			close(fd);
			return rc;
		}
		n->inflight_off = off;
		n->inflight_len = ilen;
	}
	n->stats = (struct stats_page *)p;
	n->stats_len = slen;
	n->stats_fd = fd;
	return 0;
}

static void nic_timer_cb(evutil_socket_t fd, short what, void *arg);
static void nic_exit_cb(evutil_socket_t fd, short what, void *arg);

struct nic *nic_alloc(struct sup *s)
{
	struct nic *n = calloc(1, sizeof(*n));

	if (!n)
		return NULL;
	n->sup = s;
	n->backend_fd = n->stats_fd = n->log_fd = n->inflight_fd = -1;
	n->w.ctrl_fd = n->w.pidfd = -1;
	for (int i = 0; i < NIC_NUM_QUEUES; i++)
		n->q[i].kick_fd = n->q[i].call_fd = -1;
	return n;
}

/* A deadline counts from now, not from when this loop pass began:
 * libevent measures a relative timeout from its cached time, which lags
 * by however long the callbacks before us took (a RemoveNic with 300 ms
 * was answered "killed" after 292 ms, measured from its arrival). */
static void arm_timer(struct nic *n, uint32_t ms)
{
	struct timeval tv = { .tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000 };

	event_base_update_cache_time(n->sup->base);
	event_add(n->ev_timer, &tv);
}

/* Build and send the Config message with the NIC's fds in the order
 * worker.proto documents: regions, (kick, call) per queue, backend, stats,
 * inflight region (when there is one), dirty log (when there is one). */
/* The virtio-net header each frame carries on the NIC's backend: a tap
 * the 12-byte one (TUNSETVNETHDRSZ); a socket none, plain frames, as the
 * worker implements it; AF_PACKET the kernel's 10-byte struct
 * virtio_net_hdr (PACKET_VNET_HDR). */
static uint32_t nic_vnet_hdr_len(const struct nic *n)
{
	return n->backend == NIC_BACKEND_SOCKET	       ? 0
	       : n->backend == NIC_BACKEND_AF_PACKET ? AFP_VNET_HDR_LEN
						     : TAP_VNET_HDR_LEN;
}

static int nic_send_config(struct nic *n, char *err, size_t errlen)
{
	Vnic__Worker__WorkerMessage m;
	Vnic__Worker__Config cfg;
	Vnic__Vmm__Policy pol;
	Vnic__Vmm__MemRegion *regs = NULL, **rp = NULL;
	Vnic__Vmm__Queue qs[NIC_NUM_QUEUES], *qp[NIC_NUM_QUEUES];
	int *fds = NULL;
	unsigned nfds = 0;
	int rc = -ENOMEM;

	regs = calloc(nic_nregions(n), sizeof(*regs));
	rp = calloc(nic_nregions(n), sizeof(*rp));
	fds = calloc(nic_nregions(n) + 2 * NIC_NUM_QUEUES + 4, sizeof(*fds));
	if (!regs || !rp || !fds) {
		snprintf(err, errlen, "out of memory");
		goto out_free;
	}
	vnic__worker__worker_message__init(&m);
	vnic__worker__config__init(&cfg);
	vnic__vmm__policy__init(&pol);
	for (unsigned i = 0; i < nic_nregions(n); i++) {
		const struct memtable_region_desc *g = &nic_regions(n)[i];

		wire_region_pb(&regs[i], g->gpa, g->size, g->offset);
		rp[i] = &regs[i];
		fds[nfds++] = g->fd;
	}
	for (int i = 0; i < NIC_NUM_QUEUES; i++) {
		const struct nic_queue *q = &n->q[i];

		wire_queue_pb(&qs[i], q->index, q->size, q->desc, q->avail, q->used, q->avail_idx);
		qp[i] = &qs[i];
		fds[nfds++] = q->kick_fd;
		fds[nfds++] = q->call_fd;
	}
	fds[nfds++] = n->backend_fd;
	fds[nfds++] = n->stats_fd;
	if (n->inflight_fd >= 0)
		fds[nfds++] = n->inflight_fd;
	if (n->log_fd >= 0)
		fds[nfds++] = n->log_fd;
	policy_to_pb(&n->policy, &pol);

	cfg.nic_id = n->id;
	cfg.features = n->features;
	cfg.mtu = n->mtu;
	cfg.n_regions = nic_nregions(n);
	cfg.regions = rp;
	cfg.n_queues = NIC_NUM_QUEUES;
	cfg.queues = qp;
	cfg.policy = &pol;
	cfg.backend = n->backend == NIC_BACKEND_SOCKET ? VNIC__WORKER__BACKEND_KIND__BACKEND_KIND_SOCKET
		      : n->backend == NIC_BACKEND_AF_PACKET
			      ? VNIC__WORKER__BACKEND_KIND__BACKEND_KIND_AF_PACKET
			      : VNIC__WORKER__BACKEND_KIND__BACKEND_KIND_TAP;
	cfg.vnet_hdr_len = nic_vnet_hdr_len(n);
	cfg.stats_size = (uint32_t)n->stats_len;
	/* > 0 on every start after the first: the worker resumes on live
	 * rings (and recovers what the inflight region says was in flight). */
	cfg.restarts = n->state == NIC_RESTARTING ? n->restarts + 1 : 0;
	cfg.inflight_size = (uint32_t)n->inflight_len;
	cfg.inflight_offset = n->inflight_off;
	cfg.inflight_own_fd = n->inflight_fd >= 0;
	cfg.memory_unsealed_ok = n->memory_unsealed_ok;
	cfg.base_from_used_idx = n->base_from_used_idx;
	cfg.pair = n->pair;
	/* The NIC's uid of the range: a pre-started worker's command line
	 * could not name it (worker_spare.h). */
	cfg.worker_ids = n->worker_user[0] != '\0';
	cfg.worker_uid = n->worker_uid;
	cfg.worker_gid = n->worker_gid;
	for (int i = 0; i < NIC_NUM_QUEUES; i++)
		if (n->q[i].polled)
			cfg.polled_queues |= 1ull << i;
	/* A restarted worker keeps logging (issue 14): the NIC's log, as
	 * the last nic_set_dirty_log left it. */
	cfg.log_size = n->log_fd >= 0 ? n->log_size : 0;
	cfg.log_offset = n->log_fd >= 0 ? n->log_offset : 0;
	n->log_in_config = true;
	n->call_in_config = true; /* the queues' call fds, as they are now */
	m.msg_case = VNIC__WORKER__WORKER_MESSAGE__MSG_CONFIG;
	m.config = &cfg;

	/* More than one frame's fds: the rest follow in RegionFds. */
	rc = wire_worker_send_config(n->w.ctrl_fd, &m, fds, nfds);
	if (rc)
		snprintf(err, errlen, "sending Config to the worker: %s", strerror(-rc));
out_free:
	free(fds);
	free(rp);
	free(regs);
	return rc;
}

/* vnicd's own points fire for the chosen NIC only (VNIC_FAULT_NIC), so a
 * test's other NICs run clean. */
#ifdef VNIC_FAULT_INJECTION
static bool nic_fault_target(const struct nic *n)
{
	return !n->sup->fault_nic[0] || !strcmp(n->sup->fault_nic, n->id);
}
#define NIC_FAULT_POINT(n, name) do { if (nic_fault_target(n)) FAULT_POINT(name); } while (0)
#define NIC_FAULT_ERRNO(n, name) (nic_fault_target(n) ? FAULT_ERRNO(name) : 0)
#else
#define NIC_FAULT_POINT(n, name) ((void)0)
#define NIC_FAULT_ERRNO(n, name) 0
#endif

/* The worker fault entries for this NIC's worker (common/fault.h), or
 * NULL: fault builds only, first launch only, the chosen NIC only. */
static const char *nic_fault_spec(const struct nic *n)
{
#ifdef VNIC_FAULT_INJECTION
	const struct sup *s = n->sup;

	if (s->fault_worker[0] && n->state == NIC_STARTING && nic_fault_target(n))
		return s->fault_worker;
#else
	(void)n;
#endif
	return NULL;
}

/* Policy defaults resolved here, so the worker gets concrete values. */
void nic_policy_resolve(struct vnic_policy *p)
{
	if (p->mode == VNIC_MITIGATION_DEFAULT)
		p->mode = VNIC_MITIGATION_BH;
	/* Every mode's parameters get their default, so status shows what
	 * a switch to another mode would run with. poll_us 0 means poll
	 * forever and stays. */
	if (p->timer_us == 0)
		p->timer_us = NET_TIMER_US_DEFAULT; /* the 2008 baseline */
	if (p->latency_us == 0)
		p->latency_us = NET_LATENCY_US_DEFAULT;
	if (p->safety_pct == 0)
		p->safety_pct = NET_SAFETY_PCT_DEFAULT;
	if (p->max_window == 0)
		p->max_window = NET_WINDOW_MAX_DEFAULT;
	if (p->budget_packets == 0)
		p->budget_packets = 256; /* vhost-net's weights */
	if (p->budget_bytes == 0)
		p->budget_bytes = 512 * 1024;
}

/* last_error, truncated to fit (a long reason loses its tail, never the
 * start that says what happened). */
static void nic_errorf(struct nic *n, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void nic_errorf(struct nic *n, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(n->last_error, sizeof(n->last_error), fmt, ap);
	va_end(ap);
}

/* Microseconds from a to b. */
static uint64_t us_between(const struct timespec *a, const struct timespec *b)
{
	int64_t us = (int64_t)(b->tv_sec - a->tv_sec) * 1000000 + (b->tv_nsec - a->tv_nsec) / 1000;

	return us > 0 ? (uint64_t)us : 0;
}

/*
 * nic_launch_from - spawn a worker for n (first start or restart: the
 * same fds either way), or take the pre-started one in pre (first start
 * only), watch its pidfd and control socket, send Config, arm the READY
 * deadline.
 * Returns: 0 when a worker process exists: whatever happens next, its
 * READY (nic_worker_ready) or its reap (nic_exit_cb) continues the story;
 * or a negative errno with n->last_error filled when there is no process.
 */
static int nic_launch_from(struct nic *n, const struct worker_proc *pre, uint64_t pre_age_ms)
{
	struct sup *s = n->sup;
	struct worker_opts o = { .user = n->worker_user[0] ? n->worker_user : s->worker_user,
				 .sandbox_off = s->sandbox_off,
				 .fault = nic_fault_spec(n) };
	int rc;

	/* A restart (or a vhost-user device's new start) on the same
	 * AF_PACKET socket sets up new rings, refused while an earlier
	 * worker's lingering holder maps the old ones (holders.h). The
	 * kill starts the teardown now; the worker's ring setup waits out
	 * its few ms (afp_ring_opt). */
	if (n->backend == NIC_BACKEND_AF_PACKET)
		holders_expire();
	n->ready_seen = n->stopped_seen = n->kill_sent = n->ctrl_closed = false;
	n->call_early = 0;
	n->mon_once = 0;
	n->sandboxed = false;
	/* A sandbox violation record is this worker's or none. */
	if (n->stats)
		memset(&n->stats->violation, 0, sizeof(n->stats->violation));
	if (pre) {
		n->w = *pre; /* a spare (worker_spare.h): it waits for this Config */
	} else {
		rc = sup_wops(s)->spawn(s->worker_path, n->id, &o, &n->w, n->last_error,
					sizeof(n->last_error));
		if (rc)
			return rc;
	}
	clock_gettime(CLOCK_MONOTONIC, &n->t_spawn);
	n->ev_exit = event_new(s->base, n->w.pidfd, EV_READ, nic_exit_cb, n);
	n->ev_ctrl = event_new(s->base, n->w.ctrl_fd, EV_READ | EV_PERSIST, monitor_ctrl_cb, n);
	if (!n->ev_exit || !n->ev_ctrl) {
		struct worker_exit ex;

		snprintf(n->last_error, sizeof(n->last_error), "out of memory");
		sup_wops(n->sup)->kill(&n->w);
		sup_wops(n->sup)->reap(&n->w, true, &ex);
		nic_worker_release(n);
		return -ENOMEM;
	}
	event_add(n->ev_exit, NULL);
	event_add(n->ev_ctrl, NULL);
	if (pre)
		log_info("nic %s: worker pid %d spawned (pre-started %llu ms before)", n->id,
			 (int)n->w.pid, (unsigned long long)pre_age_ms);
	else
		log_info("nic %s: worker pid %d spawned%s", n->id, (int)n->w.pid,
			 n->state == NIC_RESTARTING ? " (restart)" : "");
	if (s->sandbox_off)
		log_warn("nic %s: worker pid %d starts WITHOUT its sandbox (--sandbox=off): "
			 "a guest that breaks it owns a root process", n->id, (int)n->w.pid);
	rc = -NIC_FAULT_ERRNO(n, "sup.config.send");
	if (rc)
		snprintf(n->last_error, sizeof(n->last_error),
			 "sending Config to the worker: %s (fault injection)", strerror(-rc));
	else
		rc = nic_send_config(n, n->last_error, sizeof(n->last_error));
	if (rc == -EPIPE || rc == -ECONNRESET) {
		/* The worker is already gone or going: its exit, reaped by
		 * the pidfd callback, is the reason reported; the READY
		 * deadline covers one that closed fd 3 and lingers. (A restart
		 * keeps the previous death as its last error.) */
		if (n->state == NIC_STARTING)
			n->last_error[0] = '\0';
	} else if (rc) {
		/* The exit callback reports it once the worker is reaped. */
		n->kill_sent = true;
		sup_wops(n->sup)->kill(&n->w);
	}
	arm_timer(n, SUP_READY_TIMEOUT_MS);
	return 0;
}

static int nic_launch(struct nic *n)
{
	return nic_launch_from(n, NULL, 0);
}

/* A NIC in STARTING as spec describes it, holding no fd yet.
 * Returns: the NIC, or NULL when out of memory. */
static struct nic *nic_new(struct sup *s, const struct nic_owner_ops *ops, void *owner,
			   const struct nic_spec *spec)
{
	struct nic *n = nic_alloc(s);

	if (!n)
		return NULL;
	n->ops = ops;
	n->owner = owner;
	n->state = NIC_STARTING;
	snprintf(n->id, sizeof(n->id), "%s", spec->id);
	n->pair = spec->pair;
	memcpy(n->mac, spec->mac, 6);
	n->mtu = spec->mtu;
	n->features = spec->features;
	n->policy = spec->policy;
	nic_policy_resolve(&n->policy);
	n->backend = spec->backend;
	n->memory_unsealed_ok = spec->memory_unsealed_ok;
	n->base_from_used_idx = spec->base_from_used_idx;
	snprintf(n->netns, sizeof(n->netns), "%s", spec->netns);
	/* Its own table for now; nic_adopt_fds may share a sibling's. */
	n->mem = calloc(1, sizeof(*n->mem) + spec->nregions * sizeof(n->mem->r[0]));
	n->ev_timer = evtimer_new(s->base, nic_timer_cb, n);
	if (!n->mem || !n->ev_timer)
		return nic_free(n);
	n->mem->refs = 1;
	n->mem->counted = n;
	return n;
}

/* Things that can fail and need no VMM fd come first, so a failure
 * leaves the frame's fds with the caller: the stats page, the inflight
 * region, the tap, the workers' uid and gid. */
static int nic_prepare(struct nic *n, const struct nic_spec *spec, char *err, size_t errlen)
{
	int rc;

	/* Sizes only (no fds yet): validate_nic_spec guaranteed each queue
	 * index once and in range. */
	for (unsigned j = 0; j < spec->nqueues; j++)
		nic_vq(n, spec->queues[j].index)->size = spec->queues[j].size;
	/* Without the fd store, vnicd's own region is a file of the state
	 * directory when it can be (issue 16), else in the stats memfd. */
	if (!spec->inflight_len) {
		size_t flen;
		int ffd;

		rc = inflight_file_open(n->sup, spec, &ffd, &flen, err, errlen);
		if (rc)
			return rc;
		if (ffd >= 0) {
			n->inflight_fd = ffd;
			n->inflight_off = 0;
			n->inflight_len = flen;
			n->inflight_file = true;
		}
	}
	rc = worker_memfd_create(n, !n->sup->inflight_off && !spec->inflight_len &&
				 n->inflight_fd < 0, err, errlen);
	if (rc)
		return rc;
	if (spec->inflight_len) {
		/* The front end's region: the owner's fd, taken in
		 * nic_adopt_fds; only its place is known here. */
		n->inflight_off = spec->inflight_off;
		n->inflight_len = spec->inflight_len;
	}
	if (spec->backend == NIC_BACKEND_TAP && vu_tap_user(n->sup, spec->netns, spec->tap_name,
							    spec->id)) {
		snprintf(err, errlen, "tap %s is in use by \"%s\"", spec->tap_name,
			 vu_tap_user(n->sup, spec->netns, spec->tap_name, spec->id));
		return -EBUSY;
	}
	if (spec->backend == NIC_BACKEND_TAP) {
		/* A pair of several: a queue of a multi-queue tap (one that
		 * someone else made single-queue is refused, not remade). */
		rc = spec->tap_multi
			     ? tap_open_queues(spec->tap_name, spec->netns, spec->features, 1,
					       &n->backend_fd, n->ifname, NULL, err, errlen)
			     : tap_open(spec->tap_name, spec->netns, spec->features, &n->backend_fd,
					n->ifname, err, errlen);
		if (rc)
			return rc;
	} else if (spec->backend == NIC_BACKEND_TAP_FD) {
		rc = tap_configure(spec->backend_fd, spec->features, err, errlen);
		if (rc)
			return rc;
	} else if (spec->backend == NIC_BACKEND_AF_PACKET) {
		/* One NIC per interface: a second socket would get every
		 * frame too (and a tap's queues are not ours to share). */
		const char *user = vu_tap_user(n->sup, spec->netns, spec->tap_name, spec->id);

		if (user) {
			snprintf(err, errlen, "interface %s is in use by \"%s\"", spec->tap_name,
				 user);
			return -EBUSY;
		}
		/* Kept for every restart: a new worker resets the rings. */
		rc = afp_open(spec->tap_name, spec->netns, &n->backend_fd, err, errlen);
		if (rc)
			return rc;
		snprintf(n->ifname, sizeof(n->ifname), "%s", spec->tap_name);
	}
	return nic_worker_ids(n, err, errlen);
}

int nic_announce(struct nic *n, char *err, size_t errlen)
{
	bool afp = n->backend == NIC_BACKEND_AF_PACKET;

	/* The AF_PACKET socket's TX ring is the worker's: a socket of its
	 * own on the interface sends the frame. */
	if (!afp && n->backend_fd < 0)
		return sup_errf(err, errlen, -ENODEV, "its backend is closed");
	return announce_send(afp ? -1 : n->backend_fd, nic_vnet_hdr_len(n), n->ifname, n->netns,
			     n->mac, err, errlen);
}

/* Adopt: from here on the NIC owns the VMM's fds (guest memory, kick and
 * call, the backend), and the frame they came in (fds, when there is
 * one) no longer holds them. Guest memory that a sibling pair already
 * holds is shared with it, and this pair's duplicates are closed. */
static void nic_adopt_fds(struct nic *n, const struct nic_spec *spec, struct wire_fds *fds,
			  const struct wire_fd_layout *lay)
{
	struct nic_mem *sib = nic_mem_sibling(n, spec);

	if (sib) {
		free(n->mem); /* empty: no fd in it yet */
		sib->refs++;
		n->mem = sib;
		for (unsigned i = 0; i < spec->nregions; i++)
			if (spec->regions[i].fd >= 0)
				close(spec->regions[i].fd);
	} else {
		n->mem->n = spec->nregions;
		for (unsigned i = 0; i < spec->nregions; i++)
			n->mem->r[i] = spec->regions[i];
	}
	for (unsigned i = 0; i < spec->nregions; i++)
		if (fds)
			fds->fd[i] = -1;
	for (unsigned j = 0; j < spec->nqueues; j++) {
		struct nic_queue *q = nic_vq(n, spec->queues[j].index);

		/* validate_nic_spec guaranteed each index once and in range. */
		q->index = spec->queues[j].index;
		q->size = spec->queues[j].size;
		q->desc = spec->queues[j].desc;
		q->avail = spec->queues[j].avail;
		q->used = spec->queues[j].used;
		q->avail_idx = spec->queues[j].avail_idx;
		q->kick_fd = spec->queues[j].kick_fd;
		q->call_fd = spec->queues[j].call_fd;
		q->polled = spec->queues[j].polled;
		if (fds) {
			fds->fd[wire_fd_kick(lay, j)] = -1;
			fds->fd[wire_fd_call(lay, j)] = -1;
		}
	}
	if (spec->backend != NIC_BACKEND_TAP && spec->backend != NIC_BACKEND_AF_PACKET) {
		n->backend_fd = spec->backend_fd;
		if (fds)
			fds->fd[lay->backend] = -1;
	}
	if (spec->inflight_len > 0) {
		n->inflight_fd = spec->inflight_fd;
		for (unsigned i = 0; fds && i < fds->n; i++)
			if (fds->fd[i] == spec->inflight_fd)
				fds->fd[i] = -1;
	}
	if (spec->log_size > 0) {
		n->log_fd = spec->log_fd;
		n->log_size = spec->log_size;
		n->log_offset = spec->log_offset;
		for (unsigned i = 0; fds && i < fds->n; i++)
			if (fds->fd[i] == spec->log_fd)
				fds->fd[i] = -1;
	}
}

int nic_start(struct sup *s, const struct nic_owner_ops *ops, void *owner, uint64_t request_id,
	      const struct nic_spec *spec, struct wire_fds *fds,
	      const struct wire_fd_layout *lay, char *err, size_t errlen)
{
	struct worker_proc pre;
	uint64_t pre_age_ms;
	struct nic *n;
	int rc;

	n = nic_new(s, ops, owner, spec);
	if (!n) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	rc = nic_prepare(n, spec, err, errlen);
	if (rc) {
		nic_free(n);
		return rc;
	}
	nic_adopt_fds(n, spec, fds, lay);
	n->add_pending = true;
	n->add_req = request_id;
	TAILQ_INSERT_TAIL(&s->nics, n, link);
	s->nnics++;
	log_info("nic %s: STARTING (backend %s%s%s)", n->id,
		 n->backend == NIC_BACKEND_SOCKET ? "socket" :
		 n->backend == NIC_BACKEND_TAP_FD ? "tap fd" :
		 n->backend == NIC_BACKEND_AF_PACKET ? "af_packet " : "tap ",
		 n->backend == NIC_BACKEND_TAP || n->backend == NIC_BACKEND_AF_PACKET ? n->ifname : "",
		 n->netns[0] ? " in a netns" : "");

	/* From here on the NIC is in the table: a failure is answered with
	 * an AddNic error reply (at once, or from the exit callback once the
	 * worker is reaped) and nic_start itself returns 0. */
	if (spec->spare && worker_spare_take(s, spec->spare, &pre, &pre_age_ms))
		rc = nic_launch_from(n, &pre, pre_age_ms);
	else
		rc = nic_launch(n);
	if (rc < 0) {
		log_warn("nic %s: start failed: %s", n->id, n->last_error);
		nic_close_vmm_fds(n); /* before the reply (guarantee 1) */
		nic_notify_added(n, NIC_RES_UNAVAILABLE, n->last_error);
		nic_remove(n, "start failed");
	}
	return 0;
}

int nic_handover_adopt(struct nic *n, char *err, size_t errlen)
{
	struct sup *s = n->sup;
	void *p;

	n->ev_timer = evtimer_new(s->base, nic_timer_cb, n);
	if (n->w.pid) {
		n->ev_exit = event_new(s->base, n->w.pidfd, EV_READ, nic_exit_cb, n);
		n->ev_ctrl = event_new(s->base, n->w.ctrl_fd, EV_READ | EV_PERSIST,
				       monitor_ctrl_cb, n);
	}
	p = mmap(NULL, n->stats_len, PROT_READ | PROT_WRITE, MAP_SHARED, n->stats_fd, 0);
	if (!n->ev_timer || (n->w.pid && (!n->ev_exit || !n->ev_ctrl)) || p == MAP_FAILED) {
		/* Nothing closed: the handover's fds go back to the old
		 * binary (handover.c). */
		snprintf(err, errlen, "nic %s: %s", n->id,
			 p == MAP_FAILED ? "cannot map its stats page" : "out of memory");
		return -ENOMEM;
	}
	n->stats = p;
	if (s->uid_per_nic && n->worker_uid)
		uidrange_take(&s->uids, n->worker_uid); /* a sibling pair's: taken already */
	if (n->w.pid) {
		event_add(n->ev_exit, NULL);
		event_add(n->ev_ctrl, NULL);
	}
	TAILQ_INSERT_TAIL(&s->nics, n, link);
	s->nnics++;
	log_info("nic %s: pair %u taken over: %s, worker pid %d", n->id, n->pair,
		 nic_state_name(n->state), (int)n->w.pid);
	return 0;
}

void nic_stop(struct nic *n, uint32_t deadline_ms, const char *why)
{
	Vnic__Worker__WorkerMessage m;
	Vnic__Worker__Stop stop;
	int rc;

	if (n->state == NIC_STOPPING)
		return;
	if (n->w.pid == 0) {
		/* FAILED, or RESTARTING during the backoff: nothing to stop;
		 * the rings are where the last worker left them. */
		nic_final_from_used_ring(n);
		nic_remove(n, why);
		return;
	}
	if (n->state == NIC_STARTING || n->state == NIC_RESTARTING || n->state == NIC_STALLED) {
		/* Not READY (or stalled): nothing to finish; kill and let the exit callback
		 * answer (AddNic, or RemoveNic). A restart keeps the death it
		 * was restarting from as its last error. */
		if (n->state == NIC_STARTING)
			snprintf(n->last_error, sizeof(n->last_error),
				 "%s before the worker was ready", why);
		nic_set_state(n, NIC_STOPPING, why);
		n->kill_sent = true;
		sup_wops(n->sup)->kill(&n->w);
		return;
	}
	nic_set_state(n, NIC_STOPPING, why);
	vnic__worker__worker_message__init(&m);
	vnic__worker__stop__init(&stop);
	m.msg_case = VNIC__WORKER__WORKER_MESSAGE__MSG_STOP;
	m.stop = &stop;
	sup_note_io(n->sup, n->w.ctrl_fd);
	rc = wire_worker_send(n->w.ctrl_fd, &m, NULL, 0);
	if (rc) {
		log_warn("nic %s: cannot send Stop (%s): killing the worker", n->id, strerror(-rc));
		n->kill_sent = true;
		sup_wops(n->sup)->kill(&n->w);
		return;
	}
	arm_timer(n, deadline_ms);
}

void nic_ctrl_closed(struct nic *n)
{
	n->ctrl_closed = true;
	arm_timer(n, SUP_CTRL_GRACE_MS);
}

void nic_free_all(struct sup *s)
{
	struct nic *n;

	while ((n = TAILQ_FIRST(&s->nics))) {
		TAILQ_REMOVE(&s->nics, n, link);
		s->nnics--;
		nic_free(n);
	}
}

void nic_detach_owner(struct sup *s, void *owner)
{
	struct nic *n, *tmp;

	TAILQ_FOREACH_SAFE(n, &s->nics, link, tmp) {
		if (n->owner != owner)
			continue;
		n->owner = NULL;
		n->add_pending = false;
		n->remove_pending = false;
		n->policy_pending = false;
		nic_stop(n, SUP_STOP_DEFAULT_MS, "owner disconnected");
	}
}

/* ------------------------------------------------------- restart policy */

/* Backoff before the start that follows the k-th death in the window
 * (k >= 1): 0 for the first, then 100 ms doubling up to 5 s. */
static uint32_t restart_backoff_ms(unsigned k)
{
	uint32_t ms = SUP_RESTART_BACKOFF_FIRST_MS;

	if (k <= 1)
		return 0;
	for (unsigned i = 2; i < k && ms < SUP_RESTART_BACKOFF_MAX_MS; i++)
		ms *= 2;
	return ms < SUP_RESTART_BACKOFF_MAX_MS ? ms : SUP_RESTART_BACKOFF_MAX_MS;
}

/* Forget deaths older than the window. */
static void deaths_expire(struct nic *n, const struct timespec *now)
{
	unsigned drop = 0;

	while (drop < n->ndeaths &&
	       us_between(&n->deaths[drop], now) >= (uint64_t)SUP_RESTART_WINDOW_MS * 1000)
		drop++;
	if (drop) {
		memmove(n->deaths, n->deaths + drop, (n->ndeaths - drop) * sizeof(n->deaths[0]));
		n->ndeaths -= drop;
	}
}

static void nic_restart_now(struct nic *n);

/*
 * nic_worker_died - the worker of a RUNNING or RESTARTING NIC is gone
 * (reaped, or never started: sig 0, exit_status -1). n->last_error says
 * why. Tells the owner (NicFailed), then restarts within the limit or
 * leaves the NIC FAILED.
 */
static void nic_worker_died(struct nic *n, int sig, int exit_status, int syscall_nr)
{
	unsigned limit = n->sup->restart_max;
	struct timespec now;
	uint32_t delay;
	char why[sizeof(n->last_error) + 96];

	clock_gettime(CLOCK_MONOTONIC, &now);
	if (n->state == NIC_RUNNING || n->state == NIC_STALLED)
		n->t_died = now; /* restart time counts from here */
	deaths_expire(n, &now);
	if (n->ndeaths >= limit) {
		char prev[sizeof(n->last_error)];

		snprintf(prev, sizeof(prev), "%s", n->last_error);
		if (limit == 0)
			nic_errorf(n, "%s; not restarted (--restart-max 0)", prev);
		else
			nic_errorf(n, "restart limit reached (%u restarts within %d s), not "
				   "restarting; last: %s", limit, SUP_RESTART_WINDOW_MS / 1000, prev);
		nic_set_state(n, NIC_FAILED, n->last_error);
		nic_notify_failed(n, sig, exit_status, syscall_nr);
		nic_notify_dirty_log_set(n, NIC_RES_UNAVAILABLE, n->last_error);
		nic_notify_call_fd_set(n, NIC_RES_UNAVAILABLE, n->last_error);
		return;
	}
	n->deaths[n->ndeaths++] = now;
	delay = restart_backoff_ms(n->ndeaths);
	snprintf(why, sizeof(why), "%s; restart %u of at most %u within %d s, in %u ms",
		 n->last_error, n->ndeaths, limit, SUP_RESTART_WINDOW_MS / 1000, delay);
	if (n->state == NIC_RUNNING || n->state == NIC_STALLED)
		nic_set_state(n, NIC_RESTARTING, why);
	else
		log_info("nic %s: still RESTARTING: %s", n->id, why);
	/* The state change first, then the death's details (as for FAILED). */
	nic_notify_failed(n, sig, exit_status, syscall_nr);
	if (delay == 0)
		nic_restart_now(n);
	else
		arm_timer(n, delay);
}

/* The backoff is over (or was 0): start the next worker on the same fds. */
static void nic_restart_now(struct nic *n)
{
	NIC_FAULT_POINT(n, "sup.restart");
	if (nic_launch(n) == 0)
		return;
	log_warn("nic %s: restart failed: %s", n->id, n->last_error);
	/* No process: a start that never happened counts as a death, so a
	 * spawn that keeps failing ends in FAILED, with backoff between. */
	nic_worker_died(n, 0, -1, -1);
}

int nic_set_policy(struct nic *n, const struct vnic_policy *p, uint64_t req,
		   unsigned admin_conn_id, char *err, size_t errlen)
{
	Vnic__Worker__WorkerMessage m;
	Vnic__Worker__SetPolicy wsp;
	Vnic__Vmm__Policy pol;
	int rc;

	if (n->policy_pending) {
		snprintf(err, errlen, "nic %s: a SetPolicy is already in progress", n->id);
		return -EBUSY;
	}
	if (n->state == NIC_RESTARTING && n->w.pid == 0) {
		/* Between two workers: the next one starts with it. */
		n->policy = *p;
		return 1;
	}
	if (n->state != NIC_RUNNING) {
		snprintf(err, errlen, "nic %s is %s: a policy can change while it runs", n->id,
			 nic_state_name(n->state));
		return -EAGAIN;
	}
	vnic__worker__worker_message__init(&m);
	vnic__worker__set_policy__init(&wsp);
	vnic__vmm__policy__init(&pol);
	policy_to_pb(p, &pol);
	wsp.policy = &pol;
	m.msg_case = VNIC__WORKER__WORKER_MESSAGE__MSG_SET_POLICY;
	m.set_policy = &wsp;
	sup_note_io(n->sup, n->w.ctrl_fd);
	rc = wire_worker_send(n->w.ctrl_fd, &m, NULL, 0);
	if (rc) {
		snprintf(err, errlen, "nic %s: cannot reach the worker: %s", n->id, strerror(-rc));
		/* Not the send's errno: a full socket's EAGAIN would read as
		 * "not running" (FAILED_PRECONDITION) to the callers. */
		return -EIO;
	}
	/* A worker restarted from here on starts with the new policy. */
	n->policy = *p;
	n->policy_new = *p;
	n->policy_pending = true;
	n->policy_req = req;
	n->policy_conn_id = admin_conn_id;
	return 0;
}

/* SetDirtyLog to the running worker: the NIC's log (its fd), or none. */
static int nic_send_dirty_log(struct nic *n)
{
	Vnic__Worker__WorkerMessage m;
	Vnic__Worker__SetDirtyLog sdl;
	int fd = n->log_fd;
	int rc;

	vnic__worker__worker_message__init(&m);
	vnic__worker__set_dirty_log__init(&sdl);
	sdl.size = fd >= 0 ? n->log_size : 0;
	sdl.offset = fd >= 0 ? n->log_offset : 0;
	m.msg_case = VNIC__WORKER__WORKER_MESSAGE__MSG_SET_DIRTY_LOG;
	m.set_dirty_log = &sdl;
	sup_note_io(n->sup, n->w.ctrl_fd);
	rc = wire_worker_send(n->w.ctrl_fd, &m, fd >= 0 ? &fd : NULL, fd >= 0 ? 1 : 0);
	if (rc) {
		/* The worker is gone or going: its death resolves the change
		 * (the next worker's Config carries the log). */
		nic_errorf(n, "cannot send SetDirtyLog: %s", strerror(-rc));
		return -1;
	}
	n->log_sent = true;
	return 0;
}

/* A worker became READY while a log change waits: its Config carried
 * the current log (a restart after the death of the one it was sent to),
 * or it still needs SetDirtyLog (the change came while it started). */
static int nic_dirty_log_ready(struct nic *n)
{
	if (!n->log_pending || n->log_sent)
		return 0;
	if (n->log_in_config) {
		nic_notify_dirty_log_set(n, NIC_RES_OK, NULL);
		return 0;
	}
	return nic_send_dirty_log(n);
}

int nic_set_dirty_log(struct nic *n, int fd, uint64_t size, uint64_t offset, char *err,
		      size_t errlen)
{
	if (n->log_pending) {
		snprintf(err, errlen, "nic %s: a dirty log change is still in progress", n->id);
		return -EBUSY;
	}
	close_fd(&n->log_fd);
	if (size == 0 && fd >= 0)
		close(fd);
	n->log_fd = size > 0 ? fd : -1;
	n->log_size = n->log_fd >= 0 ? size : 0;
	n->log_offset = n->log_fd >= 0 ? offset : 0;
	n->log_pending = true;
	n->log_in_config = false;
	log_ratelimited(nic_log_ratelimit(n, NIC_RL_DIRTY_LOG), LOG_LEVEL_INFO,
			"nic %s: dirty log %s (%llu bytes at offset %llu)", n->id,
			n->log_fd >= 0 ? "set" : "off", (unsigned long long)n->log_size,
			(unsigned long long)n->log_offset);
	if (n->w.pid == 0) {
		/* No worker (restart backoff, FAILED): nothing writes, and
		 * the next Config carries the log. */
		nic_notify_dirty_log_set(n, NIC_RES_OK, NULL);
		return 0;
	}
	/* A worker before READY got its Config already: SetDirtyLog follows
	 * its Start (nic_dirty_log_ready). One that is stopping or being
	 * killed never runs again: its reap resolves the change. */
	if (n->state == NIC_RUNNING && n->ready_seen && nic_send_dirty_log(n) < 0) {
		log_warn("nic %s: %s: killing the worker", n->id, n->last_error);
		n->kill_sent = true;
		sup_wops(n->sup)->kill(&n->w);
	}
	return 0;
}

/* SetCallFd for virtqueue index: its call fd (the NIC keeps its own; the
 * worker gets a copy through SCM_RIGHTS). Returns 0 or a negative errno. */
static int nic_write_call_fd(struct nic *n, uint32_t index)
{
	Vnic__Worker__WorkerMessage m;
	Vnic__Worker__SetCallFd scf;
	int fd = nic_vq(n, index)->call_fd;

	vnic__worker__worker_message__init(&m);
	vnic__worker__set_call_fd__init(&scf);
	scf.queue = index;
	m.msg_case = VNIC__WORKER__WORKER_MESSAGE__MSG_SET_CALL_FD;
	m.set_call_fd = &scf;
	sup_note_io(n->sup, n->w.ctrl_fd);
	return wire_worker_send(n->w.ctrl_fd, &m, &fd, 1);
}

/* SetCallFd to the running worker, for the pending swap. */
static int nic_send_call_fd(struct nic *n)
{
	int rc = nic_write_call_fd(n, n->call_queue);

	if (rc) {
		/* The worker is gone or going: the next worker's Config
		 * carries the fd, its READY answers the owner. */
		nic_errorf(n, "cannot send SetCallFd: %s", strerror(-rc));
		return -1;
	}
	n->call_sent = true;
	return 0;
}

/* READY while a call fd swap waits: as nic_dirty_log_ready. */
static int nic_call_fd_ready(struct nic *n)
{
	if (!n->call_pending || n->call_sent)
		return 0;
	if (n->call_in_config) {
		nic_notify_call_fd_set(n, NIC_RES_OK, NULL);
		return 0;
	}
	return nic_send_call_fd(n);
}

/* Both changes a READY may owe: the dirty log's, the call fd's. */
static int nic_changes_ready(struct nic *n)
{
	if (nic_dirty_log_ready(n) < 0)
		return -1;
	return nic_call_fd_ready(n);
}

int nic_set_call_fd(struct nic *n, uint32_t index, int fd, char *err, size_t errlen)
{
	struct nic_queue *q = nic_vq(n, index);

	if (!q) {
		snprintf(err, errlen, "nic %s: no queue %u", n->id, index);
		return -ERANGE;
	}
	if (n->call_pending) {
		snprintf(err, errlen, "nic %s: a call fd change is still in progress", n->id);
		return -EBUSY;
	}
	close_fd(&q->call_fd);
	q->call_fd = fd;
	n->call_queue = index;
	n->call_pending = true;
	n->call_sent = false;
	n->call_in_config = false;
	if (n->w.pid == 0) {
		/* No worker (restart backoff): the next Config carries it. */
		nic_notify_call_fd_set(n, NIC_RES_OK, NULL);
		return 0;
	}
	if ((n->state == NIC_STARTING || n->state == NIC_RESTARTING) && !n->ready_seen &&
	    !n->kill_sent) {
		/* Launched, not READY: its Config went out with the old fd and
		 * its Start waits for READY. SetCallFd now comes between the
		 * two on the channel, so the worker swaps before it runs a
		 * ring or signals anything: done at once, and the VMM is not
		 * held for the worker's start (a migration's destination
		 * resumes the guest meanwhile). The CallFdSet it answers
		 * with later is expected (call_early). A worker that never
		 * reads it is reaped, and the next Config has the new fd. */
		if (nic_write_call_fd(n, index) == 0)
			n->call_early++;
		nic_notify_call_fd_set(n, NIC_RES_OK, NULL);
		return 0;
	}
	/* READY seen but not RUNNING, stopping or being killed: its reap
	 * resolves the change. */
	if (n->state == NIC_RUNNING && n->ready_seen && nic_send_call_fd(n) < 0) {
		log_warn("nic %s: %s: killing the worker", n->id, n->last_error);
		n->kill_sent = true;
		sup_wops(n->sup)->kill(&n->w);
	}
	return 0;
}

int nic_worker_ready(struct nic *n, bool sandboxed)
{
	Vnic__Worker__WorkerMessage start_m;
	Vnic__Worker__Start start;
	struct timespec now;
	char why[128];
	int rc;

	vnic__worker__worker_message__init(&start_m);
	vnic__worker__start__init(&start);
	start_m.msg_case = VNIC__WORKER__WORKER_MESSAGE__MSG_START;
	start_m.start = &start;
	sup_note_io(n->sup, n->w.ctrl_fd);
	rc = wire_worker_send(n->w.ctrl_fd, &start_m, NULL, 0);
	if (rc) {
		snprintf(n->last_error, sizeof(n->last_error), "cannot send Start: %s",
			 strerror(-rc));
		return -1;
	}
	event_del(n->ev_timer);
	clock_gettime(CLOCK_MONOTONIC, &now);
	n->t_running = now;
	n->start_us = us_between(&n->t_spawn, &now);
	n->sandboxed = sandboxed;
	if (!sandboxed)
		log_warn("nic %s: worker pid %d is NOT sandboxed (no seccomp filter, no uid drop)",
			 n->id, (int)n->w.pid);
	if (n->state == NIC_STARTING) {
		snprintf(why, sizeof(why), "worker pid %d ready in %llu us%s", (int)n->w.pid,
			 (unsigned long long)n->start_us, sandboxed ? "" : " (NOT sandboxed)");
		/* The reply first: the VMM learns of the NIC, then of its
		 * state changes. */
		nic_notify_added(n, NIC_RES_OK, NULL);
		n->announced = true;
		nic_set_state(n, NIC_RUNNING, why);
		return nic_changes_ready(n);
	}
	n->restarts++;
	n->restart_us = us_between(&n->t_died, &now);
	snprintf(why, sizeof(why), "restart %u: worker pid %d ready %llu us after the death%s",
		 n->restarts, (int)n->w.pid, (unsigned long long)n->restart_us,
		 sandboxed ? "" : " (NOT sandboxed)");
	nic_set_state(n, NIC_RUNNING, why);
	if (n->owner && n->ops->restarted)
		n->ops->restarted(n);
	return nic_changes_ready(n);
}

static void nic_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct nic *n = arg;

	if (n->state == NIC_RESTARTING && n->w.pid == 0) {
		nic_restart_now(n);
		return;
	}
	if (n->state == NIC_STARTING || n->state == NIC_RESTARTING) {
		snprintf(n->last_error, sizeof(n->last_error),
			 "worker sent no READY within %d ms", SUP_READY_TIMEOUT_MS);
		log_warn("nic %s: %s: killing pid %d", n->id, n->last_error, (int)n->w.pid);
	} else if (n->state == NIC_RUNNING && n->ctrl_closed) {
		log_warn("nic %s: worker pid %d closed its control channel and did not exit: "
			 "SIGKILL", n->id, (int)n->w.pid);
	} else if (n->state == NIC_STOPPING) {
		n->deadline_missed = true;
		snprintf(n->last_error, sizeof(n->last_error),
			 "worker missed its stop deadline and was killed");
		log_warn("nic %s: worker pid %d missed its stop deadline: SIGKILL", n->id,
			 (int)n->w.pid);
	} else {
		return;
	}
	n->kill_sent = true;
	sup_wops(n->sup)->kill(&n->w);
}

/* After a SIGSYS death: the record the worker's sandbox handler stored in
 * its stats page (sandbox.h), copied once. The bytes are untrusted;
 * sandbox_parse_report checks them. */
static bool read_violation(struct nic *n, struct sandbox_violation *v)
{
	struct sandbox_report r;

	if (!n->stats)
		return false;
	memcpy(&r, &n->stats->violation, sizeof(r));
	return sandbox_parse_report(&r, sizeof(r), v) == 0;
}

/* The pidfd is readable: the worker is gone. Reap it, then finish what
 * the state says. */
static void nic_exit_cb(evutil_socket_t fd, short what, void *arg)
{
	struct nic *n = arg;
	struct worker_exit ex;
	struct sandbox_violation v;
	char desc[sizeof(n->exit_desc)];
	char prev[sizeof(n->last_error)];
	int syscall_nr = -1;
	int rc;

	rc = sup_wops(n->sup)->reap(&n->w, false, &ex);
	if (rc == 0) {
		event_add(n->ev_exit, NULL); /* spurious: wait again */
		return;
	}
	if (rc < 0) {
		memset(&ex, 0, sizeof(ex));
		ex.failed = true;
		snprintf(ex.desc, sizeof(ex.desc), "could not be reaped: %s", strerror(-rc));
	}
	if (ex.sig == SIGSYS && read_violation(n, &v)) {
		/* TESTPLAN S1: name the call the sandbox refused. */
		syscall_nr = v.nr;
		snprintf(desc, sizeof(desc), "sandbox violation: syscall %.32s (%d); %s", v.name,
			 v.nr, ex.desc);
	} else {
		snprintf(desc, sizeof(desc), "%s", ex.desc);
	}
	snprintf(n->exit_desc, sizeof(n->exit_desc), "%s", desc);
	log_info("nic %s: worker pid %d %s", n->id, (int)n->w.pid, desc);
	nic_worker_release(n);
	/* A SetDirtyLog it never answered: the next worker's Config carries
	 * the log, and its READY answers the owner (or FAILED, or GONE). */
	n->log_sent = false;
	/* The same for a SetCallFd: the next Config carries the new fd. */
	n->call_sent = false;
	/* A SetPolicy the dead worker never confirmed: n->policy already
	 * holds it, so a replacement starts with it; say exactly that. */
	nic_notify_policy_set(n, NIC_RES_UNAVAILABLE,
			     "the worker exited before it confirmed the policy; a restarted "
			     "worker starts with the new policy");
	/* How it ended, then why (ours or its own words). */
	snprintf(prev, sizeof(prev), "%s", n->last_error);

	switch (n->state) {
	case NIC_STARTING:
		nic_errorf(n, "%s%s before it was ready%s%s", syscall_nr >= 0 ? "" : "worker ", desc,
			   prev[0] ? ": " : "", prev);
		nic_close_vmm_fds(n); /* before the reply (guarantee 1) */
		nic_notify_added(n, NIC_RES_UNAVAILABLE, n->last_error);
		nic_remove(n, n->last_error);
		break;
	case NIC_RUNNING:
		nic_errorf(n, "%s%s", syscall_nr >= 0 ? "" : "worker ", desc);
		nic_worker_died(n, ex.sig, ex.status, syscall_nr);
		break;
	case NIC_STALLED:
		/* Killed by the watchdog: a death like any other. */
		nic_errorf(n, "%s; %s", prev, desc);
		nic_worker_died(n, ex.sig, ex.status, syscall_nr);
		break;
	case NIC_RESTARTING:
		/* A replacement that did not reach READY: one more death.
		 * (Its own Error text, if any, was logged by the monitor.) */
		nic_errorf(n, "restarted worker %s before it was ready", desc);
		nic_worker_died(n, ex.sig, ex.status, syscall_nr);
		break;
	case NIC_STOPPING:
		/* Never restarted: its reap completes the stop. The fds go
		 * before the reply that says they are free (guarantee 1). */
		nic_final_from_used_ring(n);
		nic_close_vmm_fds(n);
		if (n->add_pending) {
			nic_notify_added(n, NIC_RES_UNAVAILABLE, n->last_error);
		} else if (n->remove_pending) {
			NIC_FAULT_POINT(n, "sup.remove.reply");
			if (n->deadline_missed)
				nic_notify_removed(n, NIC_RES_DEADLINE,
						     "worker missed the stop deadline; it was killed and "
						     "reaped, the NIC is removed, final indices unknown");
			else
				/* Reaped: the VMM may free guest memory now. Without a
				 * Stopped message the final indices are absent. */
				nic_notify_removed(n, NIC_RES_OK, NULL);
		}
		nic_remove(n, "worker reaped");
		break;
	case NIC_FAILED:
	case NIC_GONE:
	case NIC_NSTATES:
		break;
	}
}

void nic_stalled(struct nic *n, uint64_t silent_ms)
{
	nic_errorf(n, "worker pid %d stalled: no heartbeat for %llu ms while it had work; "
		   "killed", (int)n->w.pid, (unsigned long long)silent_ms);
	log_warn("nic %s: %s", n->id, n->last_error);
	if (nic_set_state(n, NIC_STALLED, n->last_error) < 0)
		return;
	if (n->owner && n->ops->stalled)
		n->ops->stalled(n, silent_ms);
	n->kill_sent = true;
	sup_wops(n->sup)->kill(&n->w);
}
