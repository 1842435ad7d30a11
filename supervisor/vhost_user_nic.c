/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vhost_user_nic: the endpoint as a NIC owner (vhost_user.h): the NIC
 * callbacks, and the start of a NIC once the front end's rings are ready
 * (the "NIC" paragraph of vhost_user.c's comment).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include "vhost_user_priv.h"

/* ------------------------------------------------------------ the NIC */

/* Add a finished session's counts to *to: every counter of the list but
 * the gauges (window; broken is not summed either), which stay the
 * current worker's. */
static void vu_counters_add(struct stats_queue_snapshot *to, const struct stats_queue_snapshot *s)
{
#define VU_ADD_COUNT(type, name, kind) \
	if (!((kind) & VNIC_QC_GAUGE)) \
		to->name += s->name;
	VNIC_QUEUE_COUNTERS(VU_ADD_COUNT)
#undef VU_ADD_COUNT
	to->kicks_avoided += s->kicks_avoided;
}

/* The endpoint's pair of NIC n (n->pair < max_pairs: we started it). */
static struct vu_pair *vu_pair_of(struct vu_endpoint *ep, const struct nic *n)
{
	return &ep->p[n->pair < ep->max_pairs ? n->pair : 0];
}

/* Is n's pair still the current connection's (so its rings are ours)? */
static bool vu_pair_current(const struct vu_endpoint *ep, const struct vu_pair *p)
{
	return ep->conn && p->gen == ep->conn_gen;
}

static void vu_nic_counters_base(const struct nic *n, int slot, struct stats_queue_snapshot *s)
{
	struct vu_endpoint *ep = n->owner;

	if (ep && slot >= 0 && slot < NIC_NUM_QUEUES)
		vu_counters_add(s, &vu_pair_of(ep, n)->life[slot]);
}

/* The session's page, mapped at its start: fold it into life[], unmap. */
static void vu_session_stats_fold(struct vu_pair *p)
{
	struct stats_queue_snapshot s;

	if (!p->sess_stats)
		return;
	for (int i = 0; i < NIC_NUM_QUEUES; i++) {
		stats_queue_read(&p->sess_stats->q[i], &s);
		vu_counters_add(&p->life[i], &s);
	}
	vu_session_stats_unmap(p);
}

void vu_session_stats_map(struct vu_endpoint *ep, struct vu_pair *p)
{
	void *pg = mmap(NULL, p->nic->stats_len, PROT_READ, MAP_SHARED, p->nic->stats_fd, 0);

	if (pg == MAP_FAILED) {
		log_warn("vhost-user %s: stats page: %s: this session's counters will not be kept "
			 "past it", ep->cfg.id, strerror(errno));
		return;
	}
	p->sess_stats = pg;
	p->sess_stats_len = p->nic->stats_len;
}

void vu_session_stats_unmap(struct vu_pair *p)
{
	if (p->sess_stats)
		munmap((void *)(uintptr_t)p->sess_stats, p->sess_stats_len);
	p->sess_stats = NULL;
}

static void vu_nic_added(struct nic *n, enum nic_result r, const char *error)
{
	struct vu_endpoint *ep = n->owner;
	struct vu_pair *p = vu_pair_of(ep, n);

	if (r != NIC_RES_OK && p->stopping) {
		/* We stopped it before it was ready (a new table, a
		 * disconnect): not a failure of the configuration. */
		log_info("vhost-user %s: pair %u: worker stopped before it was ready", ep->cfg.id,
			 n->pair);
	} else if (r != NIC_RES_OK) {
		ep->start_failed = true;
		if (vu_pair_current(ep, p))
			ep->conn->needs_reset = true;
		vu_errorf(ep, "pair %u: worker did not start: %s", n->pair, error ? error : "failed");
		log_warn("vhost-user %s: %s", ep->cfg.id, ep->last_error);
	} else {
		log_info("vhost-user %s: pair %u: worker pid %d running", ep->cfg.id, n->pair,
			 (int)n->w.pid);
	}
}

/* A pair's rings both enabled (or need no enabling): its tap queue is
 * steered to. A disabled pair's is not (doc/multiqueue.md). */
static bool vu_pair_enabled(const struct vu_conn *c, unsigned k)
{
	bool need_enable = c->features & (1ull << VU_F_PROTOCOL_FEATURES);

	return !need_enable || (c->r[2 * k].enabled && c->r[2 * k + 1].enabled);
}

void vu_tap_queue(struct vu_endpoint *ep, struct vu_pair *p, bool on)
{
	int rc;

	if (p->tap_fd < 0 || p->detached == !on)
		return;
	rc = tap_queue_attach(p->tap_fd, on);
	if (rc < 0)
		log_warn("vhost-user %s: tap %s: %s a queue: %s", ep->cfg.id, ep->ifname,
			 on ? "attaching" : "detaching", strerror(-rc));
	else
		p->detached = !on;
}

/* A pair the guest turned off gets no host->guest flow: its tap queue
 * leaves the steering once its worker reads no more. A planned restart
 * keeps its queue: frames wait in the tap. */
static void vu_pair_unsteer_stopped(struct vu_endpoint *ep, struct vu_pair *p, unsigned pair)
{
	if (vu_pair_current(ep, p) && !vu_pair_enabled(ep->conn, pair))
		vu_tap_queue(ep, p, false);
}

/* The worker's last read of the tap is done, its exit is still to come
 * (1-2 ms: its guest memory unmapped, its namespaces dropped). The
 * detach (TUNSETQUEUE waits for an expedited RCU grace period: up to 1 ms
 * here) happens now, beside that exit, not between the reap and the
 * answer that waits for it (GET_VRING_BASE in a migration's downtime). */
static void vu_nic_stopped(struct nic *n)
{
	struct vu_endpoint *ep = n->owner;

	vu_pair_unsteer_stopped(ep, vu_pair_of(ep, n), n->pair);
}

/* The worker is reaped (or there was none): keep the final indices as
 * the rings' bases, forget the NIC, continue outside nic.c's call. */
static void vu_nic_gone(struct nic *n)
{
	struct vu_endpoint *ep = n->owner;
	struct vu_pair *p = vu_pair_of(ep, n);

	/* Only for the connection that configured it: a new front end
	 * brings its own bases. */
	if (vu_pair_current(ep, p)) {
		for (int i = 0; i < NIC_NUM_QUEUES; i++)
			if (n->q[i].final_valid && n->q[i].index < ep->conn->nrings)
				ep->conn->r[n->q[i].index].base = (uint16_t)n->q[i].final_avail;
	}
	/* Done already when the worker reported Stopped; not when it died. */
	vu_pair_unsteer_stopped(ep, p, n->pair);
	if (n->deadline_missed)
		ep->rm_deadline = true;
	vu_session_stats_fold(p);
	p->nic = NULL;
	p->stopping = false;
	p->log_pending = false;
	event_active(ep->ev_resume, EV_TIMEOUT, 0);
}

static void vu_nic_failed(struct nic *n, int sig, int exit_status, int syscall_nr)
{
	struct vu_endpoint *ep = n->owner;

	(void)sig;
	(void)exit_status;
	(void)syscall_nr;
	vu_errorf(ep, "pair %u: %s", n->pair, n->last_error);
	/* No more restarts: the driver must reset the device. */
	if (n->state == NIC_FAILED && vu_pair_current(ep, vu_pair_of(ep, n)))
		ep->conn->needs_reset = true;
}

/* A broken queue: the spec's error eventfd, when the front end gave one. */
static void vu_nic_queue_reset(struct nic *n, uint32_t queue, const char *reason)
{
	struct vu_endpoint *ep = n->owner;
	uint64_t one = 1;

	vu_errorf(ep, "queue %u broken: %s", queue, reason);
	if (vu_pair_current(ep, vu_pair_of(ep, n)))
		ep->conn->needs_reset = true;
	if (ep->conn && queue < ep->conn->nrings && ep->conn->r[queue].err_fd >= 0 &&
	    write(ep->conn->r[queue].err_fd, &one, sizeof(one)) < 0)
		log_debug("vhost-user %s: error eventfd: %s", ep->cfg.id, strerror(errno));
}

/* A SetPolicy applied to the endpoint's NIC: the endpoint's own policy,
 * so the worker of the next memory table, front end or vnicd run keeps
 * it (a crash restart keeps n->policy by itself). */
static void vu_nic_policy_changed(struct nic *n)
{
	struct vu_endpoint *ep = n->owner;
	char err[256];

	ep->cfg.policy = n->policy;
	if (vu_state_save(ep->sup, &ep->cfg, err, sizeof(err)) < 0)
		log_warn("vhost-user %s: policy applied, not saved: %s", ep->cfg.id, err);
}

/* The log change a message waits for took effect (or failed): note it;
 * ev_resume answers (the one rule for ordering, vhost-user.md). Only a
 * log the worker could not map fails: a NIC that failed or went writes
 * nothing, and its next worker starts with the log in its Config. */
static void vu_nic_dirty_log_set(struct nic *n, enum nic_result r, const char *error)
{
	struct vu_endpoint *ep = n->owner;
	struct vu_pair *p = vu_pair_of(ep, n);
	struct vu_conn *c = ep->conn;

	if (!c || p->nic != n || !p->log_pending || !c->wait_log)
		return;
	p->log_pending = false;
	if (r != NIC_RES_OK && c->log_want && n->log_size == 0) {
		c->log_failed = true;
		vu_errorf(ep, "pair %u: dirty log: %s", n->pair, error ? error : "failed");
		log_ratelimited(&ep->msg_rl, LOG_LEVEL_WARN, "vhost-user %s: %s: stopping the workers",
				ep->cfg.id, ep->last_error);
	}
	event_active(ep->ev_resume, EV_TIMEOUT, 0);
}

/* The call fd swap a SET_VRING_CALL waits for is done (or the NIC went):
 * ev_resume answers, as for the log. */
static void vu_nic_call_fd_set(struct nic *n, enum nic_result r, const char *error)
{
	struct vu_endpoint *ep = n->owner;
	struct vu_conn *c = ep->conn;

	(void)error;
	if (!c || !c->wait_call || c->wait_pair < 0 || ep->p[c->wait_pair].nic != n)
		return;
	if (r != NIC_RES_OK)
		log_info("vhost-user %s: call fd swap: %s", ep->cfg.id, error ? error : "NIC gone");
	c->call_done = true;
	event_active(ep->ev_resume, EV_TIMEOUT, 0);
}

const struct nic_owner_ops vu_nic_owner = {
	.kind = "vhost-user",
	.added = vu_nic_added,
	.policy_changed = vu_nic_policy_changed,
	.failed = vu_nic_failed,
	.queue_reset = vu_nic_queue_reset,
	.stopped = vu_nic_stopped,
	.gone = vu_nic_gone,
	.counters_base = vu_nic_counters_base,
	.dirty_log_set = vu_nic_dirty_log_set,
	.call_fd_set = vu_nic_call_fd_set,
};

/* Stop a pair's NIC (the answer to whatever waits follows its reap). */
void vu_stop_pair(struct vu_endpoint *ep, unsigned k, uint32_t deadline_ms, const char *why)
{
	struct vu_pair *p = &ep->p[k];

	if (!p->nic || p->stopping)
		return;
	p->stopping = true;
	nic_stop(p->nic, deadline_ms, why); /* may call vu_nic_gone at once */
}

void vu_stop_nic(struct vu_endpoint *ep, uint32_t deadline_ms, const char *why)
{
	for (unsigned k = 0; k < ep->max_pairs; k++)
		vu_stop_pair(ep, k, deadline_ms, why);
}

static bool vu_ring_ready(const struct vu_conn *c, const struct vu_ring *r)
{
	bool need_enable = c->features & (1ull << VU_F_PROTOCOL_FEATURES);

	return r->num_set && r->addr_set && (r->kick_fd >= 0 || r->kick_polled) && r->started &&
	       (r->enabled || !need_enable);
}

/* A pair's tap queue: pair 0's was opened with the endpoint; another's
 * is added to the multi-queue tap the first time the pair runs. */
static int vu_pair_tap(struct vu_endpoint *ep, struct vu_pair *p, char *err, size_t errlen)
{
	char name[16];
	int rc;

	if (p->tap_fd >= 0)
		return 0;
	rc = tap_open_queues(ep->ifname, ep->cfg.netns, 0, 1, &p->tap_fd, name, NULL, err, errlen);
	if (rc == 0)
		p->detached = false;
	return rc;
}

/* Pair k's rings ready, memory set, no NIC for it: start one. Returns 0
 * (started, or nothing to do) or -1 (start_failed set, last_error says). */
static int vu_start_pair(struct vu_endpoint *ep, unsigned k)
{
	struct vu_conn *c = ep->conn;
	struct vu_pair *p = &ep->p[k];
	struct nic_spec spec;
	struct nic_queue_spec qs[NIC_NUM_QUEUES];
	unsigned total;
	int *dups = NULL;           /* every fd the NIC would adopt, to close on failure */
	unsigned ndups = 0;
	bool unsealed = false, refused = false;
	char err[256];
	int rc = -1;

	memset(&spec, 0, sizeof(spec));
	/* + 1: an inflight region of its own (the front end's, or a file). */
	total = c->nreg + 2 * NIC_NUM_QUEUES + 1 + vu_logging(c) + 1;
	spec.regions = calloc(c->nreg, sizeof(*spec.regions));
	dups = calloc(total, sizeof(*dups));
	if (!spec.regions || !dups) {
		vu_errorf(ep, "out of memory");
		goto out_log;
	}
	if (!ep->cfg.af_packet && vu_pair_tap(ep, p, err, sizeof(err)) < 0) {
		vu_errorf(ep, "pair %u: tap queue: %s", k, err);
		goto out_log;
	}
	vu_tap_queue(ep, p, true);
	snprintf(spec.id, sizeof(spec.id), "%s", ep->cfg.id);
	spec.id_len = strlen(spec.id);
	spec.pair = k;
	memcpy(spec.mac, ep->cfg.mac, 6);
	spec.mac_len = 6;
	spec.mtu = c->mtu ? c->mtu : ep->cfg.mtu ? ep->cfg.mtu : SUP_MTU_DEFAULT;
	spec.features_offered = validate_nic_offered(ep->cfg.af_packet ? NIC_BACKEND_AF_PACKET
								       : NIC_BACKEND_TAP_FD);
	/* What the worker does not serve: the protocol's bits, and MQ (each
	 * pair's worker is a NIC of one pair). */
	spec.features = c->features & ~((1ull << VU_F_PROTOCOL_FEATURES) | (1ull << VU_F_LOG_ALL) |
					(1ull << VIRTIO_NET_F_MQ));
	spec.policy = ep->cfg.policy;
	spec.backend = ep->cfg.af_packet ? NIC_BACKEND_AF_PACKET : NIC_BACKEND_TAP_FD;
	if (ep->cfg.af_packet) {
		snprintf(spec.tap_name, sizeof(spec.tap_name), "%s", ep->cfg.tap);
		snprintf(spec.netns, sizeof(spec.netns), "%s", ep->cfg.netns);
	}
	for (unsigned i = 0; i < c->nreg; i++)
		unsealed |= !c->reg[i].sealed;
	spec.memory_unsealed_ok = unsealed;
	spec.base_from_used_idx = true;
	spec.spare = k == 0 ? &c->spare : NULL;

	/* Duplicates of the front end's fds: the NIC owns its own, so a new
	 * table or a disconnect never pulls an fd from under a worker. */
	for (unsigned i = 0; i < c->nreg; i++) {
		spec.regions[i] = c->reg[i].d;
		spec.regions[i].fd = dups[ndups++] = dup_cloexec(c->reg[i].d.fd);
		if (spec.regions[i].fd < 0)
			goto out_errno;
	}
	spec.nregions = c->nreg;
	for (unsigned j = 0; j < NIC_NUM_QUEUES; j++) {
		unsigned i = 2 * k + j;
		struct vu_ring *r = &c->r[i];
		uint64_t g[3];

		if (vu_ring_gpas(c, r, g, err, sizeof(err)) < 0) {
			vu_errorf(ep, "ring %u: %s", i, err);
			refused = true;
			goto out_log;
		}
		if (r->log && r->log_addr != g[2]) {
			vu_errorf(ep, "ring %u: log_guest_addr 0x%llx is not the used ring's "
				  "guest-physical address 0x%llx", i, (unsigned long long)r->log_addr,
				  (unsigned long long)g[2]);
			refused = true;
			goto out_log;
		}
		if (r->call_fd < 0) {
			/* No call fd (polling front end): interrupts go nowhere. */
			r->call_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
			if (r->call_fd < 0)
				goto out_errno;
		}
		qs[j] = (struct nic_queue_spec){ .index = i, .size = r->num, .desc = g[0],
						 .avail = g[1], .used = g[2], .avail_idx = r->base,
						 .polled = r->kick_polled };
		/* A polled ring: an eventfd nobody writes, as the NIC needs one. */
		qs[j].kick_fd = dups[ndups++] = r->kick_polled ? eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)
							       : dup_cloexec(r->kick_fd);
		qs[j].call_fd = dups[ndups++] = dup_cloexec(r->call_fd);
		if (qs[j].kick_fd < 0 || qs[j].call_fd < 0)
			goto out_errno;
	}
	spec.queues = qs;
	spec.nqueues = NIC_NUM_QUEUES;
	spec.backend_fd = -1;
	if (!ep->cfg.af_packet) {
		spec.backend_fd = dups[ndups++] = dup_cloexec(p->tap_fd);
		if (spec.backend_fd < 0)
			goto out_errno;
	}
	/* A new session while migrating logs from its first write. */
	spec.log_fd = -1;
	if (vu_logging(c)) {
		spec.log_fd = dups[ndups++] = dup_cloexec(c->log_fd);
		spec.log_size = c->log_size;
		spec.log_offset = c->log_offset;
		if (spec.log_fd < 0)
			goto out_errno;
	}

	/* The front end's inflight region (INFLIGHT_SHMFD), if it keeps one. */
	rc = vu_inflight_for_pair(c, k, &spec, err, sizeof(err));
	if (spec.inflight_len)
		dups[ndups++] = spec.inflight_fd;
	if (rc) {
		vu_errorf(ep, "pair %u: inflight region: %s", k, err);
		refused = true;
		goto out_log;
	}

	rc = validate_nic_spec(&spec, err, sizeof(err));
	if (rc) {
		vu_errorf(ep, "front end's configuration refused: %s", err);
		refused = true;
		goto out_log;
	}
	/* The same fd budgets as AddNic (limits.c); no connection's own. */
	rc = sup_budget_check(ep->sup, NULL, 1, total, err, sizeof(err));
	if (rc) {
		vu_errorf(ep, "%s", err);
		goto out_log;
	}
	/* Before nic_start: a launch that fails at once runs gone() now. */
	p->gen = ep->conn_gen;
	rc = nic_start(ep->sup, &vu_nic_owner, ep, 0, &spec, NULL, NULL, err, sizeof(err));
	if (rc) {
		vu_errorf(ep, "cannot start the NIC: %s", err);
		goto out_log;
	}
	ndups = 0; /* adopted */
	/* nic_start may already have failed and freed it (then gone() ran). */
	p->nic = nic_find_pair(ep->sup, ep->cfg.id, k);
	if (p->nic && p->nic->owner != ep)
		p->nic = NULL;
	if (!p->nic && k > 0)
		vu_tap_queue(ep, p, false); /* no reader: out of the steering */
	if (p->nic) {
		vu_session_stats_map(ep, p);
		log_info("vhost-user %s: pair %u: rings ready: starting its worker (%u regions%s)",
			 ep->cfg.id, k, c->nreg, unsealed ? ", unsealed memory" : "");
	}
	rc = 0;
	goto out_close;

out_errno:
	vu_errorf(ep, "duplicating fds: %s", strerror(errno));
out_log:
	rc = -1;
	/* The queue was attached for the worker that did not start: a
	 * queue nobody reads would swallow 1/N of the host's flows. */
	if (k > 0)
		vu_tap_queue(ep, p, false);
	ep->start_failed = true;
	/* DEVICE_NEEDS_RESET for what the front end configured; a host-side
	 * failure (fds, memory, budget, spawn) is no fault of the device:
	 * the next message the front end sends tries again. */
	if (refused)
		c->needs_reset = true;
	log_warn("vhost-user %s: %s", ep->cfg.id, ep->last_error);
out_close:
	for (unsigned i = 0; i < ndups; i++)
		if (dups[i] >= 0)
			close(dups[i]);
	free(dups);
	free(spec.regions);
	return rc;
}

/* Memory set, features set: start each pair whose rings are ready and
 * that has no NIC. Pairs run independently: one may start while another
 * stops, a disabled one stays stopped. */
void vu_try_start(struct vu_endpoint *ep)
{
	struct vu_conn *c = ep->conn;

	if (!c || c->waiting || ep->removing || ep->shutting_down || !c->features_set ||
	    c->nreg == 0 || ep->start_failed)
		return;
	/* LOG_ALL acked, no log yet (QEMU's device start sends SET_LOG_BASE
	 * after the rings): a worker now would write pages nobody logs. */
	if (vu_log_all(c) && c->log_fd < 0)
		return;
	for (unsigned k = 0; k < ep->max_pairs; k++) {
		if (ep->p[k].nic || !vu_ring_ready(c, &c->r[2 * k]) ||
		    !vu_ring_ready(c, &c->r[2 * k + 1]))
			continue;
		if (nic_find_pair(ep->sup, ep->cfg.id, k))
			continue; /* an earlier NIC of this pair is still going away */
		/* A pair that failed at once (start_failed, via gone()) stops
		 * the loop too: the device needs a reset. */
		if (vu_start_pair(ep, k) < 0 || ep->start_failed)
			return;
	}
}
