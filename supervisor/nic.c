/*
 * nic: one NIC's lifecycle in the supervisor.
 *
 *   AddNic (validated) -> STARTING: backend opened, stats page made, worker
 *       spawned, Config sent, READY deadline armed
 *   READY              -> RUNNING: Start sent, AddNic answered OK
 *   no READY in time, worker exit or Error before READY -> killed, reaped,
 *       AddNic answered with the reason, NIC freed (GONE)
 *   worker exit while RUNNING -> FAILED: NicFailed to the owner, the entry
 *       stays for status until RemoveNic or disconnect. (Restart with a
 *       backoff belongs here, in nic_worker_exited(), in a later issue.)
 *   RemoveNic / disconnect / shutdown -> STOPPING: Stop sent, deadline
 *       armed; Stopped gives the final indices; the worker's exit (pidfd)
 *       is reaped and only then RemoveNic is answered and the NIC freed
 *       (GONE). A missed deadline: SIGKILL through the pidfd, reap, answer.
 *
 * Every fd a NIC holds is owned by exactly one field and closed in
 * nic_free().
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fault.h"
#include "sandbox.h"
#include "supervisor.h"
#include "tap.h"
#include "workers/stats.h"

const char *nic_state_name(enum nic_state s)
{
	switch (s) {
	case NIC_STARTING: return "STARTING";
	case NIC_RUNNING: return "RUNNING";
	case NIC_STOPPING: return "STOPPING";
	case NIC_FAILED: return "FAILED";
	case NIC_GONE: return "GONE";
	}
	return "?";
}

struct nic *nic_find(struct sup *s, const char *id)
{
	struct nic *n;

	TAILQ_FOREACH(n, &s->nics, link)
		if (!strcmp(n->id, id))
			return n;
	return NULL;
}

/* The one way from a virtqueue index to a queue (STYLE habit 4). */
struct nic_queue *nic_vq(struct nic *n, uint32_t index)
{
	int slot = nic_queue_slot(index);

	return slot < 0 ? NULL : &n->q[slot];
}

void nic_set_state(struct nic *n, enum nic_state st, const char *why)
{
	enum nic_state old = n->state;

	log_info("nic %s: %s -> %s%s%s", n->id, nic_state_name(old), nic_state_name(st),
		 why ? ": " : "", why ? why : "");
	n->state = st;
	/* The owner hears of every change after its AddNic was answered
	 * (before that, the AddNic reply is the news). */
	if (old != NIC_STARTING && !n->add_pending)
		vmm_event_state_changed(n, old, st, why);
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
	close_fd(&n->w.report_fd);
	n->w.pid = 0;
}

static struct nic *nic_free(struct nic *n)
{
	if (!n)
		return NULL;
	nic_worker_release(n);
	if (n->ev_timer)
		event_free(n->ev_timer);
	for (unsigned i = 0; i < n->nregions; i++)
		close_fd(&n->regions[i].fd);
	free(n->regions);
	for (int i = 0; i < NIC_NUM_QUEUES; i++) {
		close_fd(&n->q[i].kick_fd);
		close_fd(&n->q[i].call_fd);
	}
	close_fd(&n->backend_fd);
	if (n->stats)
		munmap(n->stats, n->stats_len);
	close_fd(&n->stats_fd);
	free(n);
	return NULL;
}

/* Unlink, mark GONE, free; the shutdown path may then exit. */
static void nic_remove(struct nic *n, const char *why)
{
	struct sup *s = n->sup;

	nic_set_state(n, NIC_GONE, why);
	TAILQ_REMOVE(&s->nics, n, link);
	s->nnics--;
	nic_free(n);
	sup_maybe_exit(s);
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
	if (!n->stats || slot < 0 || slot >= NIC_NUM_QUEUES)
		return;
	stats_queue_read(&n->stats->q[slot], out);
}

static int stats_create(struct nic *n, char *err, size_t errlen)
{
	size_t len = stats_page_size(NIC_NUM_QUEUES);
	void *p;
	int fd, rc;

	fd = memfd_create("vnic-stats", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "stats page: memfd_create: %s", strerror(errno));
		return rc;
	}
	if (ftruncate(fd, (off_t)len) < 0 ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
		rc = -errno;
		snprintf(err, errlen, "stats page: size/seal: %s", strerror(errno));
		goto out_close_fd;
	}
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		rc = -errno;
		snprintf(err, errlen, "stats page: mmap: %s", strerror(errno));
		goto out_close_fd;
	}
	stats_page_init(p, len, NIC_NUM_QUEUES);
	n->stats = p;
	n->stats_len = len;
	n->stats_fd = fd;
	return 0;

out_close_fd:
	close(fd);
	return rc;
}

static void nic_timer_cb(evutil_socket_t fd, short what, void *arg);
static void nic_exit_cb(evutil_socket_t fd, short what, void *arg);

static void arm_timer(struct nic *n, uint32_t ms)
{
	struct timeval tv = { .tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000 };

	event_add(n->ev_timer, &tv);
}

/* Build and send the Config message with the NIC's fds in the order
 * worker.proto documents: regions, (kick, call) per queue, backend, stats. */
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

	regs = calloc(n->nregions, sizeof(*regs));
	rp = calloc(n->nregions, sizeof(*rp));
	fds = calloc(n->nregions + 2 * NIC_NUM_QUEUES + 2, sizeof(*fds));
	if (!regs || !rp || !fds) {
		snprintf(err, errlen, "out of memory");
		goto out_free;
	}
	vnic__worker__worker_message__init(&m);
	vnic__worker__config__init(&cfg);
	vnic__vmm__policy__init(&pol);
	for (unsigned i = 0; i < n->nregions; i++) {
		vnic__vmm__mem_region__init(&regs[i]);
		regs[i].gpa = n->regions[i].gpa;
		regs[i].size = n->regions[i].size;
		regs[i].offset = n->regions[i].offset;
		rp[i] = &regs[i];
		fds[nfds++] = n->regions[i].fd;
	}
	for (int i = 0; i < NIC_NUM_QUEUES; i++) {
		vnic__vmm__queue__init(&qs[i]);
		qs[i].index = n->q[i].index;
		qs[i].size = n->q[i].size;
		qs[i].desc_gpa = n->q[i].desc;
		qs[i].avail_gpa = n->q[i].avail;
		qs[i].used_gpa = n->q[i].used;
		qs[i].avail_idx = n->q[i].avail_idx;
		qp[i] = &qs[i];
		fds[nfds++] = n->q[i].kick_fd;
		fds[nfds++] = n->q[i].call_fd;
	}
	fds[nfds++] = n->backend_fd;
	fds[nfds++] = n->stats_fd;
	pol.mode = (Vnic__Vmm__Mitigation)n->policy.mode;
	pol.timer_us = n->policy.timer_us;
	pol.poll_us = n->policy.poll_us;
	pol.budget_packets = n->policy.budget_packets;
	pol.budget_bytes = n->policy.budget_bytes;

	cfg.nic_id = n->id;
	cfg.features = n->features;
	cfg.mtu = n->mtu;
	cfg.n_regions = n->nregions;
	cfg.regions = rp;
	cfg.n_queues = NIC_NUM_QUEUES;
	cfg.queues = qp;
	cfg.policy = &pol;
	cfg.backend = n->backend == NIC_BACKEND_SOCKET ? VNIC__WORKER__BACKEND_KIND__BACKEND_KIND_SOCKET
						       : VNIC__WORKER__BACKEND_KIND__BACKEND_KIND_TAP;
	/* A tap carries the 12-byte header (TUNSETVNETHDRSZ); a socket
	 * carries plain frames, as the worker implements it. */
	cfg.vnet_hdr_len = n->backend == NIC_BACKEND_SOCKET ? 0 : TAP_VNET_HDR_LEN;
	cfg.stats_size = (uint32_t)n->stats_len;
	cfg.restarts = n->restarts;
	m.msg_case = VNIC__WORKER__WORKER_MESSAGE__MSG_CONFIG;
	m.config = &cfg;

	rc = wire_worker_send(n->w.ctrl_fd, &m, fds, nfds);
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

/* The worker fault entries for this NIC's worker (proto/fault.h), or
 * NULL: fault builds only, first launch only, the chosen NIC only. */
static const char *nic_fault_spec(const struct nic *n)
{
#ifdef VNIC_FAULT_INJECTION
	const struct sup *s = n->sup;

	if (s->fault_worker[0] && n->restarts == 0 && nic_fault_target(n))
		return s->fault_worker;
#else
	(void)n;
#endif
	return NULL;
}

/* Policy defaults resolved here, so the worker gets concrete values. */
static void policy_resolve(struct nic_policy *p)
{
	if (p->mode == NIC_POLICY_DEFAULT)
		p->mode = NIC_POLICY_BH;
	if (p->mode == NIC_POLICY_TIMER && p->timer_us == 0)
		p->timer_us = 150; /* the 2008 baseline */
	if (p->budget_packets == 0)
		p->budget_packets = 256; /* vhost-net's weights */
	if (p->budget_bytes == 0)
		p->budget_bytes = 512 * 1024;
}

int nic_start(struct sup *s, struct vmm_conn *c, uint64_t request_id,
	      const struct nic_spec *spec, struct wire_fds *fds,
	      const struct wire_fd_layout *lay, char *err, size_t errlen)
{
	struct nic *n;
	int rc;

	n = calloc(1, sizeof(*n));
	if (!n) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	n->sup = s;
	n->conn = c;
	n->state = NIC_STARTING;
	n->backend_fd = -1;
	n->stats_fd = -1;
	n->w.ctrl_fd = -1;
	n->w.pidfd = -1;
	n->w.report_fd = -1;
	for (int i = 0; i < NIC_NUM_QUEUES; i++)
		n->q[i].kick_fd = n->q[i].call_fd = -1;
	snprintf(n->id, sizeof(n->id), "%s", spec->id);
	memcpy(n->mac, spec->mac, 6);
	n->mtu = spec->mtu;
	n->features = spec->features;
	n->policy = spec->policy;
	policy_resolve(&n->policy);
	n->backend = spec->backend;
	snprintf(n->netns, sizeof(n->netns), "%s", spec->netns);
	n->regions = calloc(spec->nregions, sizeof(*n->regions));
	n->ev_timer = evtimer_new(s->base, nic_timer_cb, n);
	if (!n->regions || !n->ev_timer) {
		snprintf(err, errlen, "out of memory");
		rc = -ENOMEM;
		goto out_free;
	}

	/* Things that can fail and need no VMM fd come first, so a failure
	 * leaves the frame's fds with the caller. */
	rc = stats_create(n, err, errlen);
	if (rc)
		goto out_free;
	if (spec->backend == NIC_BACKEND_TAP) {
		rc = tap_open(spec->tap_name, spec->netns, spec->features, &n->backend_fd,
			      n->ifname, err, errlen);
		if (rc)
			goto out_free;
	} else if (spec->backend == NIC_BACKEND_TAP_FD) {
		rc = tap_configure(spec->backend_fd, spec->features, err, errlen);
		if (rc)
			goto out_free;
	}

	/* Adopt: from here on the NIC owns the frame's fds. */
	n->nregions = spec->nregions;
	for (unsigned i = 0; i < spec->nregions; i++) {
		n->regions[i] = spec->regions[i];
		fds->fd[i] = -1;
	}
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
		fds->fd[wire_fd_kick(lay, j)] = -1;
		fds->fd[wire_fd_call(lay, j)] = -1;
	}
	if (spec->backend != NIC_BACKEND_TAP) {
		n->backend_fd = spec->backend_fd;
		fds->fd[lay->backend] = -1;
	}
	n->add_pending = true;
	n->add_req = request_id;
	TAILQ_INSERT_TAIL(&s->nics, n, link);
	s->nnics++;
	log_info("nic %s: STARTING (backend %s%s%s)", n->id,
		 n->backend == NIC_BACKEND_SOCKET ? "socket" :
		 n->backend == NIC_BACKEND_TAP_FD ? "tap fd" : "tap ",
		 n->backend == NIC_BACKEND_TAP ? n->ifname : "",
		 n->netns[0] ? " in a netns" : "");

	/* From here on the NIC is in the table: a failure is answered with
	 * an AddNic error reply (at once, or from the exit callback once the
	 * worker is reaped) and nic_start itself returns 0. */
	rc = worker_spawn_fault(s->worker_path, n->id, nic_fault_spec(n), &n->w, n->last_error,
				sizeof(n->last_error));
	if (rc)
		goto out_async;
	n->ev_exit = event_new(s->base, n->w.pidfd, EV_READ, nic_exit_cb, n);
	n->ev_ctrl = event_new(s->base, n->w.ctrl_fd, EV_READ | EV_PERSIST, monitor_ctrl_cb, n);
	if (!n->ev_exit || !n->ev_ctrl) {
		snprintf(n->last_error, sizeof(n->last_error), "out of memory");
		goto out_kill;
	}
	event_add(n->ev_exit, NULL);
	event_add(n->ev_ctrl, NULL);
	log_info("nic %s: worker pid %d spawned", n->id, (int)n->w.pid);
	rc = -NIC_FAULT_ERRNO(n, "sup.config.send");
	if (rc)
		snprintf(n->last_error, sizeof(n->last_error),
			 "sending Config to the worker: %s (fault injection)", strerror(-rc));
	else
		rc = nic_send_config(n, n->last_error, sizeof(n->last_error));
	if (rc == -EPIPE || rc == -ECONNRESET) {
		/* The worker is already gone or going: its exit, reaped by
		 * the pidfd callback, is the reason AddNic reports; the
		 * READY deadline covers one that closed fd 3 and lingers. */
		n->last_error[0] = '\0';
		arm_timer(n, SUP_READY_TIMEOUT_MS);
		return 0;
	}
	if (rc)
		goto out_kill;
	arm_timer(n, SUP_READY_TIMEOUT_MS);
	return 0;

out_kill:
	/* The exit callback answers AddNic once the worker is reaped. */
	n->kill_sent = true;
	worker_kill(&n->w);
	if (!n->ev_exit) {
		struct worker_exit ex;

		worker_reap(&n->w, true, &ex);
		goto out_async;
	}
	return 0;
out_async:
	log_warn("nic %s: start failed: %s", n->id, n->last_error);
	vmm_reply_add_nic(n, VNIC__VMM__STATUS__STATUS_UNAVAILABLE, n->last_error);
	nic_remove(n, "start failed");
	return 0;
out_free:
	nic_free(n);
	return rc;
}

void nic_stop(struct nic *n, uint32_t deadline_ms, const char *why)
{
	Vnic__Worker__WorkerMessage m;
	Vnic__Worker__Stop stop;
	int rc;

	if (n->state == NIC_FAILED || n->w.pid == 0) {
		nic_remove(n, why);
		return;
	}
	if (n->state == NIC_STOPPING)
		return;
	if (n->state == NIC_STARTING) {
		/* Not READY: nothing to finish; kill and let the exit callback
		 * answer AddNic. */
		snprintf(n->last_error, sizeof(n->last_error), "%s before the worker was ready", why);
		nic_set_state(n, NIC_STOPPING, why);
		n->kill_sent = true;
		worker_kill(&n->w);
		return;
	}
	nic_set_state(n, NIC_STOPPING, why);
	vnic__worker__worker_message__init(&m);
	vnic__worker__stop__init(&stop);
	m.msg_case = VNIC__WORKER__WORKER_MESSAGE__MSG_STOP;
	m.stop = &stop;
	rc = wire_worker_send(n->w.ctrl_fd, &m, NULL, 0);
	if (rc) {
		log_warn("nic %s: cannot send Stop (%s): killing the worker", n->id, strerror(-rc));
		n->kill_sent = true;
		worker_kill(&n->w);
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

void nic_detach_conn(struct sup *s, struct vmm_conn *c)
{
	struct nic *n, *tmp;

	TAILQ_FOREACH_SAFE(n, &s->nics, link, tmp) {
		if (n->conn != c)
			continue;
		n->conn = NULL;
		n->add_pending = false;
		n->remove_pending = false;
		nic_stop(n, SUP_STOP_DEFAULT_MS, "owner disconnected");
	}
}

static void nic_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct nic *n = arg;

	if (n->state == NIC_STARTING) {
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
	worker_kill(&n->w);
}

/* After a SIGSYS death: the record the worker's sandbox handler wrote
 * (sandbox.h). The bytes are untrusted; sandbox_parse_report checks them. */
static bool read_violation(struct nic *n, struct sandbox_violation *v)
{
	uint8_t buf[sizeof(struct sandbox_report) + 1];
	ssize_t r;

	if (n->w.report_fd < 0)
		return false;
	r = read(n->w.report_fd, buf, sizeof(buf));
	return r > 0 && sandbox_parse_report(buf, (size_t)r, v) == 0;
}

/* The pidfd is readable: the worker is gone. Reap it, then finish what
 * the state says. */
static void nic_exit_cb(evutil_socket_t fd, short what, void *arg)
{
	struct nic *n = arg;
	struct worker_exit ex;
	struct sandbox_violation v;
	char desc[sizeof(n->exit_desc)];
	int syscall_nr = -1;
	int rc;

	rc = worker_reap(&n->w, false, &ex);
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
		syscall_nr = v.nr;
		snprintf(desc, sizeof(desc), "%s, syscall %.32s", ex.desc, v.name);
	} else {
		snprintf(desc, sizeof(desc), "%s", ex.desc);
	}
	snprintf(n->exit_desc, sizeof(n->exit_desc), "%s", desc);
	log_info("nic %s: worker pid %d %s", n->id, (int)n->w.pid, desc);
	nic_worker_release(n);

	switch (n->state) {
	case NIC_STARTING:
		{
			char prev[sizeof(n->last_error)];

			/* How it ended, then why (ours or its own words). */
			snprintf(prev, sizeof(prev), "%s", n->last_error);
			snprintf(n->last_error, sizeof(n->last_error),
				 "worker %.90s before it was ready%s%.70s", desc,
				 prev[0] ? ": " : "", prev);
		}
		vmm_reply_add_nic(n, VNIC__VMM__STATUS__STATUS_UNAVAILABLE, n->last_error);
		nic_remove(n, n->last_error);
		break;
	case NIC_RUNNING:
		snprintf(n->last_error, sizeof(n->last_error), "worker %s", desc);
		nic_set_state(n, NIC_FAILED, n->last_error);
		/* Restart policy (a later issue) goes here: re-spawn on the
		 * same fds with n->restarts + 1, rate-limited. */
		vmm_event_nic_failed(n, ex.sig, ex.status, syscall_nr);
		break;
	case NIC_STOPPING:
		if (n->add_pending) {
			vmm_reply_add_nic(n, VNIC__VMM__STATUS__STATUS_UNAVAILABLE, n->last_error);
		} else if (n->remove_pending) {
			NIC_FAULT_POINT(n, "sup.remove.reply");
			if (n->deadline_missed)
				vmm_reply_remove_nic(n, VNIC__VMM__STATUS__STATUS_DEADLINE_EXCEEDED,
						     "worker missed the stop deadline; it was killed and "
						     "reaped, the NIC is removed, final indices unknown");
			else
				/* Reaped: the VMM may free guest memory now. Without a
				 * Stopped message the final indices are absent. */
				vmm_reply_remove_nic(n, VNIC__VMM__STATUS__STATUS_OK, NULL);
		}
		nic_remove(n, "worker reaped");
		break;
	case NIC_FAILED:
	case NIC_GONE:
		break;
	}
}
