/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * monitor: messages from a worker, through one permission table
 * (STYLE habit 1, after OpenSSH monitor.c's mon_table).
 *
 * The worker is not trusted: it maps guest memory, so it may be
 * compromised. Each row says in which NIC states a message type is
 * permitted, whether it may come once only, how many fds it carries (none:
 * wire already receives worker frames with room for 0 fds) and its
 * handler. An unknown, malformed or unpermitted message kills the worker;
 * the pidfd then reaps it and nic.c finishes the state change.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "supervisor.h"

#define MON_STARTING (1u << NIC_STARTING)
#define MON_RUNNING  (1u << NIC_RUNNING)
#define MON_STOPPING (1u << NIC_STOPPING)
#define MON_RESTARTING (1u << NIC_RESTARTING) /* a replacement worker before READY */
#define MON_STALLED  (1u << NIC_STALLED)    /* being killed by the watchdog */
#define MON_ONCE     (1u << 16) /* a second one from the same worker is a violation
				   (any row: n->mon_once, a bit per row) */

struct mon_row {
	Vnic__Worker__WorkerMessage__MsgCase type;
	const char *name;
	unsigned flags;
	unsigned nfds;
	/* Returns 0, or -1 when the worker must be killed (reason in n->last_error). */
	int (*handler)(struct nic *n, const Vnic__Worker__WorkerMessage *m);
};

static int mon_ready(struct nic *n, const Vnic__Worker__WorkerMessage *m)
{
	if (n->ready_seen)
		return -1;
	n->ready_seen = true;
	n->ever_ready = true;
	return nic_worker_ready(n, m->ready->sandboxed);
}

static int mon_stopped(struct nic *n, const Vnic__Worker__WorkerMessage *m)
{
	const Vnic__Worker__Stopped *s = m->stopped;

	for (size_t i = 0; i < s->n_queues; i++) {
		struct nic_queue *q = s->queues[i] ? nic_vq(n, s->queues[i]->index) : NULL;

		if (!q) {
			snprintf(n->last_error, sizeof(n->last_error),
				 "worker reported final indices for a queue it does not have");
			return -1;
		}
		q->final_valid = true;
		q->final_avail = s->queues[i]->avail_idx & 0xffff;
		q->final_used = s->queues[i]->used_idx & 0xffff;
	}
	n->stopped_seen = true;
	nic_notify_stopped(n);
	return 0;
}

static int mon_queue_broken(struct nic *n, const Vnic__Worker__WorkerMessage *m)
{
	const Vnic__Worker__QueueBroken *b = m->queue_broken;
	struct nic_queue *q = nic_vq(n, b->queue);
	char name[16];

	if (!q) {
		snprintf(n->last_error, sizeof(n->last_error),
			 "worker reported queue %u broken, which it does not have", b->queue);
		return -1;
	}
	virtio_net_queue_name(b->queue, name, sizeof(name));
	/* The guest caused this: rate-limited log, first reason sticks. */
	log_ratelimited(nic_log_ratelimit(n, NIC_RL_QUEUE_BROKEN), LOG_LEVEL_WARN,
			"nic %s: queue %s broken: %s", n->id, name, b->reason);
	if (!q->broken) {
		q->broken = true;
		snprintf(q->broken_reason, sizeof(q->broken_reason), "%s", b->reason);
		snprintf(n->last_error, sizeof(n->last_error), "queue %s broken: %s", name,
			 b->reason);
	}
	nic_notify_queue_reset(n, b->queue, b->reason);
	return 0;
}

static int mon_log(struct nic *n, const Vnic__Worker__WorkerMessage *m)
{
	enum log_level lv;

	switch (m->log->level) {
	case VNIC__WORKER__LOG_LEVEL__LOG_LEVEL_ERROR: lv = LOG_LEVEL_ERROR; break;
	case VNIC__WORKER__LOG_LEVEL__LOG_LEVEL_WARN: lv = LOG_LEVEL_WARN; break;
	case VNIC__WORKER__LOG_LEVEL__LOG_LEVEL_INFO: lv = LOG_LEVEL_INFO; break;
	default: lv = LOG_LEVEL_DEBUG; break;
	}
	/* A worker may relay guest-triggered lines: rate-limited, one
	 * bucket per NIC so that one noisy guest hides no other NIC's. */
	log_ratelimited(nic_log_ratelimit(n, NIC_RL_WORKER_LOG), lv, "nic %s worker: %s", n->id,
			m->log->text);
	return 0;
}

static int mon_error(struct nic *n, const Vnic__Worker__WorkerMessage *m)
{
	snprintf(n->last_error, sizeof(n->last_error), "worker error: %s%s%s",
		 m->error->text, m->error->errnum ? ": " : "",
		 m->error->errnum > 0 && m->error->errnum < 4096 ? strerror(m->error->errnum) : "");
	log_warn("nic %s: %s", n->id, n->last_error);
	/* The worker exits after Error; the pidfd reaps it. */
	return 0;
}

#ifdef VNIC_FAULT_INJECTION
/* Fault-injection builds only (common/fault.h): a point fired in the
 * worker. "sigkill": the sandboxed worker cannot kill itself and waits
 * for us; -1 makes the caller SIGKILL it through the pidfd. */
static int mon_fault_hit(struct nic *n, const Vnic__Worker__WorkerMessage *m)
{
	const Vnic__Worker__FaultHit *h = m->fault_hit;

	log_warn("nic %s: fault injection: point %.64s fired (%.16s %u) in worker pid %d", n->id,
		 h->point, h->action, h->arg, (int)n->w.pid);
	if (!strcmp(h->action, "sigkill")) {
		snprintf(n->last_error, sizeof(n->last_error),
			 "fault injection at %.64s: SIGKILL as asked", h->point);
		return -1;
	}
	return 0;
}
#endif
/* PolicySet: only as the answer to our SetPolicy, and saying what we asked
 * (a worker that applies something else is not doing what it is told). */
static int mon_policy_set(struct nic *n, const Vnic__Worker__WorkerMessage *m)
{
	const Vnic__Vmm__Policy *p = m->policy_set->policy;

	if (!n->policy_pending || !p || (uint32_t)p->mode != n->policy_new.mode ||
	    p->budget_packets != n->policy_new.budget_packets ||
	    p->budget_bytes != n->policy_new.budget_bytes) {
		snprintf(n->last_error, sizeof(n->last_error),
			 "worker sent PolicySet that does not answer our SetPolicy");
		return -1;
	}
	n->policy_switches++;
	log_info("nic %s: policy %s, budget %u packets / %u bytes per wake-up", n->id,
		 vnic_mitigation_name(n->policy.mode), p->budget_packets, p->budget_bytes);
	nic_notify_policy_set(n, NIC_RES_OK, NULL);
	return 0;
}

/* DirtyLogSet: only as the answer to our SetDirtyLog (n->log_sent), and
 * saying what was asked: on for a log, off for none; a log it could not
 * map is off with the reason. The worker may answer after a Stop was sent
 * (a disconnect right after the change), so STOPPING is allowed too. */
static int mon_dirty_log_set(struct nic *n, const Vnic__Worker__WorkerMessage *m)
{
	const Vnic__Worker__DirtyLogSet *d = m->dirty_log_set;
	bool asked_on = n->log_fd >= 0;
	bool failed = !d->on && d->error && d->error[0];

	if (!n->log_sent || (d->on && d->error && d->error[0]) ||
	    (d->on != asked_on && !(asked_on && failed)) || (!asked_on && failed)) {
		snprintf(n->last_error, sizeof(n->last_error),
			 "worker sent DirtyLogSet that does not answer our SetDirtyLog");
		return -1;
	}
	n->log_sent = false;
	if (failed) {
		/* supervisor.h: the NIC's log is then none. */
		snprintf(n->last_error, sizeof(n->last_error), "dirty log: %.160s", d->error);
		log_ratelimited(nic_log_ratelimit(n, NIC_RL_DIRTY_LOG), LOG_LEVEL_WARN,
				"nic %s: the worker could not map the dirty log: %.160s", n->id,
				d->error);
		close(n->log_fd);
		n->log_fd = -1;
		n->log_size = n->log_offset = 0;
		nic_notify_dirty_log_set(n, NIC_RES_UNAVAILABLE, n->last_error);
		return 0;
	}
	log_ratelimited(nic_log_ratelimit(n, NIC_RL_DIRTY_LOG), LOG_LEVEL_INFO,
			"nic %s: dirty logging %s", n->id, d->on ? "on" : "off");
	nic_notify_dirty_log_set(n, NIC_RES_OK, NULL);
	return 0;
}

/* CallFdSet: only as the answer to our SetCallFd (n->call_early, or
 * n->call_sent for the queue we named). STOPPING too, as DirtyLogSet. */
static int mon_call_fd_set(struct nic *n, const Vnic__Worker__WorkerMessage *m)
{
	/* The answers to SetCallFds sent before READY come first: the
	 * worker reads its channel in order (nic_set_call_fd). */
	if (n->call_early > 0) {
		n->call_early--;
		log_debug("nic %s: queue %u: new call eventfd in use (sent before READY)", n->id,
			  m->call_fd_set->queue);
		return 0;
	}
	if (!n->call_sent || m->call_fd_set->queue != n->call_queue) {
		snprintf(n->last_error, sizeof(n->last_error),
			 "worker sent CallFdSet that does not answer our SetCallFd");
		return -1;
	}
	log_debug("nic %s: queue %u: new call eventfd in use", n->id, n->call_queue);
	nic_notify_call_fd_set(n, NIC_RES_OK, NULL);
	return 0;
}

/* A bit per row in n->mon_once. */
static const struct mon_row mon_table[] = {
	{ VNIC__WORKER__WORKER_MESSAGE__MSG_READY, "Ready", MON_STARTING | MON_RESTARTING | MON_ONCE, 0,
	  mon_ready },
	{ VNIC__WORKER__WORKER_MESSAGE__MSG_STOPPED, "Stopped", MON_STOPPING | MON_ONCE, 0, mon_stopped },
	{ VNIC__WORKER__WORKER_MESSAGE__MSG_QUEUE_BROKEN, "QueueBroken",
	  MON_RUNNING | MON_STOPPING | MON_STALLED, 0, mon_queue_broken },
	{ VNIC__WORKER__WORKER_MESSAGE__MSG_POLICY_SET, "PolicySet", MON_RUNNING, 0,
	  mon_policy_set },
	{ VNIC__WORKER__WORKER_MESSAGE__MSG_DIRTY_LOG_SET, "DirtyLogSet",
	  MON_RUNNING | MON_STOPPING | MON_STALLED, 0, mon_dirty_log_set },
	{ VNIC__WORKER__WORKER_MESSAGE__MSG_CALL_FD_SET, "CallFdSet",
	  MON_RUNNING | MON_STOPPING | MON_STALLED, 0, mon_call_fd_set },
	{ VNIC__WORKER__WORKER_MESSAGE__MSG_LOG, "Log",
	  MON_STARTING | MON_RUNNING | MON_STOPPING | MON_RESTARTING | MON_STALLED, 0, mon_log },
	{ VNIC__WORKER__WORKER_MESSAGE__MSG_ERROR, "Error",
	  MON_STARTING | MON_RUNNING | MON_STOPPING | MON_RESTARTING | MON_STALLED | MON_ONCE, 0,
	  mon_error },
#ifdef VNIC_FAULT_INJECTION
	{ VNIC__WORKER__WORKER_MESSAGE__MSG_FAULT_HIT, "FaultHit",
	  MON_STARTING | MON_RUNNING | MON_STOPPING | MON_RESTARTING | MON_STALLED, 0,
	  mon_fault_hit },
#endif
};

static void mon_kill(struct nic *n, const char *why)
{
	if (n->last_error[0] == '\0' || n->state != NIC_STARTING)
		snprintf(n->last_error, sizeof(n->last_error), "%s", why);
	log_warn("nic %s: killing worker pid %d: %s", n->id, (int)n->w.pid, why);
	if (n->ev_ctrl)
		event_del(n->ev_ctrl);
	n->kill_sent = true;
	sup_wops(n->sup)->kill(&n->w);
}

void monitor_ctrl_cb(evutil_socket_t fd, short what, void *arg)
{
	struct nic *n = arg;

	sup_note_io(n->sup, fd);
	/* Bit per row: which ONCE rows were seen. Kept in the NIC flags. */
	for (int budget = 0; budget < 16 && n->ev_ctrl; budget++) {
		Vnic__Worker__WorkerMessage *m = NULL;
		struct wire_fds fds;
		struct wire_err err;
		const struct mon_row *row = NULL;
		char why[256];
		int rc;

		memset(&err, 0, sizeof(err));
		rc = wire_worker_recv(fd, WIRE_PEER_WORKER, &m, &fds, &err);
		if (rc == -EAGAIN)
			return;
		if (rc == -EPIPE || rc == -ECONNRESET) {
			/* The worker closed its end: it is exiting; the pidfd
			 * tells when. Stop watching the socket. */
			event_del(n->ev_ctrl);
			if (n->state == NIC_STARTING || n->state == NIC_RUNNING) {
				if (!n->last_error[0])
					snprintf(n->last_error, sizeof(n->last_error),
						 "worker closed its control channel");
				/* A worker without its channel cannot be
				 * stopped cleanly: give it a second to exit on
				 * its own (its status says more than our
				 * SIGKILL would), then kill it (nic.c). */
				if (n->state == NIC_RUNNING)
					nic_ctrl_closed(n);
			}
			return;
		}
		if (rc) {
			snprintf(why, sizeof(why), "malformed message: %s", err.msg);
			mon_kill(n, why);
			return;
		}
		unsigned row_bit = 0;

		for (size_t i = 0; i < sizeof(mon_table) / sizeof(mon_table[0]); i++)
			if (mon_table[i].type == m->msg_case) {
				row = &mon_table[i];
				row_bit = 1u << i;
			}
		if (!row) {
			snprintf(why, sizeof(why), "unexpected message type %d", (int)m->msg_case);
			rc = -1;
		} else if (!(row->flags & (1u << n->state))) {
			snprintf(why, sizeof(why), "%s not permitted in state %s", row->name,
				 nic_state_name(n->state));
			rc = -1;
		} else if (fds.n != row->nfds) {
			snprintf(why, sizeof(why), "%s with %u fds", row->name, fds.n);
			rc = -1;
		} else if ((row->flags & MON_ONCE) && (n->mon_once & row_bit)) {
			/* The rule of the row, for every ONCE row alike. */
			snprintf(why, sizeof(why), "a second %s", row->name);
			rc = -1;
		} else {
			if (row->flags & MON_ONCE)
				n->mon_once |= row_bit;
			rc = row->handler(n, m);
			snprintf(why, sizeof(why), "%s: %s", row->name, n->last_error);
		}
		wire_fds_close(&fds);
		wire_worker_free(m);
		if (rc) {
			mon_kill(n, why);
			return;
		}
	}
}
