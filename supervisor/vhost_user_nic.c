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

static void vu_nic_counters_base(const struct nic *n, int slot, struct stats_queue_snapshot *s)
{
	const struct vu_endpoint *ep = n->owner;

	if (ep)
		vu_counters_add(s, &ep->life[slot]);
}

/* The session's page, mapped at its start: fold it into life[], unmap. */
static void vu_session_stats_fold(struct vu_endpoint *ep)
{
	struct stats_queue_snapshot s;

	if (!ep->sess_stats)
		return;
	for (int i = 0; i < NIC_NUM_QUEUES; i++) {
		stats_queue_read(&ep->sess_stats->q[i], &s);
		vu_counters_add(&ep->life[i], &s);
	}
	vu_session_stats_unmap(ep);
}

void vu_session_stats_unmap(struct vu_endpoint *ep)
{
	if (ep->sess_stats)
		munmap((void *)(uintptr_t)ep->sess_stats, ep->sess_stats_len);
	ep->sess_stats = NULL;
}

static void vu_nic_added(struct nic *n, enum nic_result r, const char *error)
{
	struct vu_endpoint *ep = n->owner;

	if (r != NIC_RES_OK && ep->nic_stopping) {
		/* We stopped it before it was ready (a new table, a
		 * disconnect): not a failure of the configuration. */
		log_info("vhost-user %s: worker stopped before it was ready", ep->cfg.id);
	} else if (r != NIC_RES_OK) {
		ep->start_failed = true;
		if (ep->conn && ep->nic_gen == ep->conn_gen)
			ep->conn->needs_reset = true;
		vu_errorf(ep, "worker did not start: %s", error ? error : "failed");
		log_warn("vhost-user %s: %s", ep->cfg.id, ep->last_error);
	} else {
		log_info("vhost-user %s: worker pid %d running", ep->cfg.id, (int)n->w.pid);
	}
}

/* The worker is reaped (or there was none): keep the final indices as
 * the rings' bases, forget the NIC, continue outside nic.c's call. */
static void vu_nic_gone(struct nic *n)
{
	struct vu_endpoint *ep = n->owner;

	/* Only for the connection that configured it: a new front end
	 * brings its own bases. */
	if (ep->conn && ep->nic_gen == ep->conn_gen) {
		for (int i = 0; i < NIC_NUM_QUEUES; i++)
			if (n->q[i].final_valid)
				ep->conn->r[i].base = (uint16_t)n->q[i].final_avail;
	}
	if (n->deadline_missed)
		ep->rm_deadline = true;
	vu_session_stats_fold(ep);
	ep->nic = NULL;
	ep->nic_stopping = false;
	event_active(ep->ev_resume, EV_TIMEOUT, 0);
}

static void vu_nic_failed(struct nic *n, int sig, int exit_status, int syscall_nr)
{
	struct vu_endpoint *ep = n->owner;

	(void)sig;
	(void)exit_status;
	(void)syscall_nr;
	vu_errorf(ep, "%s", n->last_error);
	/* No more restarts: the driver must reset the device. */
	if (n->state == NIC_FAILED && ep->conn && ep->nic_gen == ep->conn_gen)
		ep->conn->needs_reset = true;
}

/* A broken queue: the spec's error eventfd, when the front end gave one. */
static void vu_nic_queue_reset(struct nic *n, uint32_t queue, const char *reason)
{
	struct vu_endpoint *ep = n->owner;
	uint64_t one = 1;

	vu_errorf(ep, "queue %u broken: %s", queue, reason);
	if (ep->conn && ep->nic_gen == ep->conn_gen)
		ep->conn->needs_reset = true;
	if (ep->conn && queue < NIC_NUM_QUEUES && ep->conn->r[queue].err_fd >= 0 &&
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
	struct vu_conn *c = ep->conn;

	if (!c || ep->nic != n || !c->wait_log)
		return;
	c->log_done = true;
	c->log_failed = r != NIC_RES_OK && c->log_want && n->log_size == 0;
	if (c->log_failed) {
		vu_errorf(ep, "dirty log: %s", error ? error : "failed");
		log_ratelimited(&ep->msg_rl, LOG_LEVEL_WARN, "vhost-user %s: %s: stopping the worker",
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
	if (!c || ep->nic != n || !c->wait_call)
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
	.gone = vu_nic_gone,
	.counters_base = vu_nic_counters_base,
	.dirty_log_set = vu_nic_dirty_log_set,
	.call_fd_set = vu_nic_call_fd_set,
};

/* Stop the NIC (the answer to whatever waits follows its reap). */
void vu_stop_nic(struct vu_endpoint *ep, uint32_t deadline_ms, const char *why)
{
	struct nic *n = ep->nic;

	if (!n || ep->nic_stopping)
		return;
	ep->nic_stopping = true;
	nic_stop(n, deadline_ms, why); /* may call vu_nic_gone at once */
}

static bool vu_ring_ready(const struct vu_conn *c, const struct vu_ring *r)
{
	bool need_enable = c->features & (1ull << VU_F_PROTOCOL_FEATURES);

	return r->num_set && r->addr_set && (r->kick_fd >= 0 || r->kick_polled) && r->started &&
	       (r->enabled || !need_enable);
}

static int dup_cloexec(int fd)
{
	return fcntl(fd, F_DUPFD_CLOEXEC, 3);
}

/* Both rings ready, memory set, no NIC: start one. */
void vu_try_start(struct vu_endpoint *ep)
{
	struct vu_conn *c = ep->conn;
	struct nic_spec spec;
	struct nic_queue_spec qs[NIC_NUM_QUEUES];
	unsigned total;
	int *dups = NULL;           /* every fd the NIC would adopt, to close on failure */
	unsigned ndups = 0;
	bool unsealed = false;
	char err[256];
	int rc;

	if (!c || ep->nic || c->waiting || ep->removing || ep->shutting_down || !c->features_set ||
	    c->nreg == 0 || ep->start_failed)
		return;
	/* LOG_ALL acked, no log yet (QEMU's device start sends SET_LOG_BASE
	 * after the rings): a worker now would write pages nobody logs. */
	if (vu_log_all(c) && c->log_fd < 0)
		return;
	for (int i = 0; i < NIC_NUM_QUEUES; i++)
		if (!vu_ring_ready(c, &c->r[i]))
			return;
	if (nic_find(ep->sup, ep->cfg.id))
		return; /* an earlier NIC of this id is still going away */

	memset(&spec, 0, sizeof(spec));
	total = c->nreg + 2 * NIC_NUM_QUEUES + 1 + vu_logging(c);
	spec.regions = calloc(c->nreg, sizeof(*spec.regions));
	dups = calloc(total, sizeof(*dups));
	if (!spec.regions || !dups) {
		vu_errorf(ep, "out of memory");
		goto out_log;
	}
	snprintf(spec.id, sizeof(spec.id), "%s", ep->cfg.id);
	spec.id_len = strlen(spec.id);
	memcpy(spec.mac, ep->cfg.mac, 6);
	spec.mac_len = 6;
	spec.mtu = c->mtu ? c->mtu : ep->cfg.mtu ? ep->cfg.mtu : SUP_MTU_DEFAULT;
	spec.features_offered = validate_nic_offered(NIC_BACKEND_TAP_FD);
	spec.features = c->features & ~((1ull << VU_F_PROTOCOL_FEATURES) | (1ull << VU_F_LOG_ALL));
	spec.policy = ep->cfg.policy;
	spec.backend = NIC_BACKEND_TAP_FD;
	for (unsigned i = 0; i < c->nreg; i++)
		unsealed |= !c->reg[i].sealed;
	spec.memory_unsealed_ok = unsealed;
	spec.base_from_used_idx = true;

	/* Duplicates of the front end's fds: the NIC owns its own, so a new
	 * table or a disconnect never pulls an fd from under a worker. */
	for (unsigned i = 0; i < c->nreg; i++) {
		spec.regions[i] = c->reg[i].d;
		spec.regions[i].fd = dups[ndups++] = dup_cloexec(c->reg[i].d.fd);
		if (spec.regions[i].fd < 0)
			goto out_errno;
	}
	spec.nregions = c->nreg;
	for (int i = 0; i < NIC_NUM_QUEUES; i++) {
		struct vu_ring *r = &c->r[i];
		uint64_t g[3];

		if (vu_ring_gpas(c, r, g, err, sizeof(err)) < 0) {
			vu_errorf(ep, "ring %d: %s", i, err);
			goto out_log;
		}
		if (r->log && r->log_addr != g[2]) {
			vu_errorf(ep, "ring %d: log_guest_addr 0x%llx is not the used ring's "
				  "guest-physical address 0x%llx", i, (unsigned long long)r->log_addr,
				  (unsigned long long)g[2]);
			goto out_log;
		}
		if (r->call_fd < 0) {
			/* No call fd (polling front end): interrupts go nowhere. */
			r->call_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
			if (r->call_fd < 0)
				goto out_errno;
		}
		qs[i] = (struct nic_queue_spec){ .index = (uint32_t)i, .size = r->num, .desc = g[0],
						 .avail = g[1], .used = g[2], .avail_idx = r->base,
						 .polled = r->kick_polled };
		/* A polled ring: an eventfd nobody writes, as the NIC needs one. */
		qs[i].kick_fd = dups[ndups++] = r->kick_polled ? eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)
							       : dup_cloexec(r->kick_fd);
		qs[i].call_fd = dups[ndups++] = dup_cloexec(r->call_fd);
		if (qs[i].kick_fd < 0 || qs[i].call_fd < 0)
			goto out_errno;
	}
	spec.queues = qs;
	spec.nqueues = NIC_NUM_QUEUES;
	spec.backend_fd = dups[ndups++] = dup_cloexec(ep->tap_fd);
	if (spec.backend_fd < 0)
		goto out_errno;
	/* A new session while migrating logs from its first write. */
	spec.log_fd = -1;
	if (vu_logging(c)) {
		spec.log_fd = dups[ndups++] = dup_cloexec(c->log_fd);
		spec.log_size = c->log_size;
		spec.log_offset = c->log_offset;
		if (spec.log_fd < 0)
			goto out_errno;
	}

	rc = validate_nic_spec(&spec, err, sizeof(err));
	if (rc) {
		vu_errorf(ep, "front end's configuration refused: %s", err);
		goto out_log;
	}
	/* The same fd budgets as AddNic (limits.c); no connection's own. */
	rc = sup_budget_check(ep->sup, NULL, total, err, sizeof(err));
	if (rc) {
		vu_errorf(ep, "%s", err);
		goto out_log;
	}
	rc = nic_start(ep->sup, &vu_nic_owner, ep, 0, &spec, NULL, NULL, err, sizeof(err));
	if (rc) {
		vu_errorf(ep, "cannot start the NIC: %s", err);
		goto out_log;
	}
	ndups = 0; /* adopted */
	ep->nic_gen = ep->conn_gen;
	/* nic_start may already have failed and freed it (then gone() ran). */
	ep->nic = nic_find(ep->sup, ep->cfg.id);
	if (ep->nic && ep->nic->owner != ep)
		ep->nic = NULL;
	if (ep->nic) {
		void *p = mmap(NULL, ep->nic->stats_len, PROT_READ, MAP_SHARED, ep->nic->stats_fd, 0);

		if (p != MAP_FAILED) {
			ep->sess_stats = p;
			ep->sess_stats_len = ep->nic->stats_len;
		} else {
			log_warn("vhost-user %s: stats page: %s: this session's counters will not "
				 "be kept past it", ep->cfg.id, strerror(errno));
		}
		log_info("vhost-user %s: rings ready: starting the worker (%u regions%s)",
			 ep->cfg.id, c->nreg, unsealed ? ", unsealed memory" : "");
	}
	goto out_close;

out_errno:
	vu_errorf(ep, "duplicating fds: %s", strerror(errno));
out_log:
	ep->start_failed = true;
	c->needs_reset = true;
	log_warn("vhost-user %s: %s", ep->cfg.id, ep->last_error);
out_close:
	for (unsigned i = 0; i < ndups; i++)
		if (dups[i] >= 0)
			close(dups[i]);
	free(dups);
	free(spec.regions);
}
