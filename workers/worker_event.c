/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * worker_event: the worker's libevent loop and its control channel.
 *
 * One event base (EVENT_BASE_FLAG_NOLOCK: one thread), small callbacks:
 *  - each queue's kick eventfd, EV_READ|EV_PERSIST, added on Start;
 *  - each pair's backend fd: EV_READ|EV_PERSIST for RX, removed while the
 *    guest has no RX buffers (G20) and re-added when it kicks the RX
 *    queue; EV_WRITE only while TX is blocked on a full backend;
 *  - a zero-timeout timer per queue to come back after a full budget
 *    (G21) or for a "poll" spin: timers run after the next poll, so the
 *    other fds get their turn first (event_active would run it again
 *    before polling);
 *  - a policy timer per TX queue, armed and cancelled by the TX policy
 *    through net_ops.timer (workers/policy.h): the policies own the
 *    decisions, this file owns the timers;
 *  - an interrupt coalescing timer per queue (net_ops.irq_timer, irq.c);
 *  - the control socket, EV_READ|EV_PERSIST.
 * Every event is deleted before its fd is closed (at exit, by the kernel).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fault.h"
#include "log.h"
#include "policy_pb.h"
#include "worker_msg.h"
#include "workers/worker.h"

static const struct timeval zero_tv = { 0, 0 };

/* A polled queue (a ring with no kick fd) that found nothing looks again
 * after a pause that doubles from MIN to MAX, back to none once it moves
 * frames: a front end that never kicks cannot make its worker spin a core
 * (at most 1,000 idle looks a second), and a busy one never waits. */
#define WORKER_POLL_IDLE_MIN_US 50u
#define WORKER_POLL_IDLE_MAX_US 1000u

int worker_send(struct worker *w, Vnic__Worker__WorkerMessage *m)
{
	/* The channel is non-blocking once the loop runs; a full socket
	 * means a supervisor that does not read: wait a little, then give
	 * up (a log line or a counter is not worth blocking the data path). */
	for (int tries = 0; tries < 50; tries++) {
		struct pollfd pfd = { w->ctrl_fd, POLLOUT, 0 };
		int r = wire_worker_send(w->ctrl_fd, m, NULL, 0);

		if (r != -EAGAIN)
			return r;
		(void)poll(&pfd, 1, 20);
	}
	return -EAGAIN;
}

void worker_send_error(struct worker *w, int errnum, const char *text)
{
	struct wmsg m;

	fprintf(stderr, "vnicd-worker %s: error: %s\n", w->nic_id, text ? text : "");
	(void)worker_send(w, wmsg_error(&m, errnum, text));
}

/* ------------------------------------------------ engine callbacks */

static void worker_notify(void *opaque, unsigned qidx)
{
	struct worker *w = opaque;
	int r;

	/* The call eventfd is the guest's interrupt (KVM irqfd); never a
	 * blocking write, whatever the VMM did to its flags (worker_fds.c). */
	r = worker_call_signal(w->q[qidx].call_fd);
	if (r < 0)
		log_warn("nic %s: queue %u: call eventfd: %s", w->nic_id, w->vq_base + qidx,
			 strerror(-r));
}

static void worker_broken(void *opaque, unsigned qidx, const char *reason)
{
	struct worker *w = opaque;
	struct wmsg m;
	char name[16];

	virtio_net_queue_name(w->vq_base + qidx, name, sizeof(name));
	log_warn("nic %s: %s broken: %s", w->nic_id, name, reason);
	/* The virtqueue index, as the supervisor knows the queue. */
	if (worker_send(w, wmsg_queue_broken(&m, w->vq_base + qidx, reason)) < 0)
		log_error("nic %s: cannot report %s broken", w->nic_id, name);
}

static void worker_guest_log(void *opaque, unsigned qidx, const char *msg)
{
	struct worker *w = opaque;

	/* Already rate-limited by the engine (NET_LOG_BURST per window). */
	log_warn("nic %s: %s", w->nic_id, msg);
}

static void worker_timer(void *opaque, unsigned qidx, uint32_t us)
{
	struct worker *w = opaque;
	struct worker_queue *wq = &w->q[qidx];
	struct timeval tv = { us / 1000000u, us % 1000000u };

	if (!wq->policy_ev)
		return;
	if (us)
		event_add(wq->policy_ev, &tv);
	else
		event_del(wq->policy_ev);
}

static void worker_irq_timer(void *opaque, unsigned qidx, uint32_t us)
{
	struct worker *w = opaque;
	struct timeval tv = { us / 1000000u, us % 1000000u };

	if (w->q[qidx].irq_ev)
		event_add(w->q[qidx].irq_ev, &tv);
}

const struct net_ops worker_net_ops = { worker_notify, worker_broken, worker_guest_log,
					worker_timer, worker_irq_timer, NULL };

/* ------------------------------------------------- dirty log (issue 14) */

void worker_log_replace(struct worker *w, struct dirtylog *l)
{
	if (w->log) {
		uint64_t out;

		net_log_flush_all(w->net);
		out = dirtylog_outside(w->log);
		if (out)
			log_warn("nic %s: dirty log of %llu bytes was too small for guest memory: "
				 "%llu page marks beyond its end were dropped", w->nic_id,
				 (unsigned long long)dirtylog_size(w->log),
				 (unsigned long long)out);
	}
	net_set_dirtylog(w->net, l);
	w->log = dirtylog_free(w->log);
	w->log = l;
}

/* SetDirtyLog: map the new log (size > 0, its fd is fds->fd[0]), switch
 * to it between runs, answer DirtyLogSet. A log that cannot be mapped
 * leaves the NIC logging nothing (on = false, and why), as the
 * supervisor's contract says (supervisor.h dirty_log_set). */
static void worker_set_dirty_log(struct worker *w, const Vnic__Worker__SetDirtyLog *s,
				 const struct wire_fds *fds)
{
	struct wmsg m;
	struct dirtylog *l = NULL;
	char err[256] = "";

	if (s->size > 0 && fds->n == 1 &&
	    dirtylog_map(fds->fd[0], s->size, s->offset, &l, err, sizeof(err)) < 0)
		log_warn("nic %s: SetDirtyLog: %s; not logging", w->nic_id, err);
	worker_log_replace(w, l);
	if (l)
		log_info("nic %s: dirty logging into %llu bytes at offset %llu", w->nic_id,
			 (unsigned long long)s->size, (unsigned long long)s->offset);
	else if (!err[0])
		log_info("nic %s: dirty logging off", w->nic_id);
	(void)worker_send(w, wmsg_dirty_log_set(&m, l != NULL, err));
}

/* -------------------------------------------- call fd swap (issue 14) */

/* SetCallFd: the queue's interrupts go to the new eventfd (fds->fd[0],
 * adopted) from now on. We run between two runs of the data path (one
 * thread), so no interrupt is half-signalled: the old fd is closed, and
 * the new one signalled once, because a used entry published before the
 * swap may owe an interrupt that the old fd's reader no longer delivers
 * (Linux vhost and QEMU's vhost_virtqueue_mask leave that to the back
 * end). A spurious interrupt is harmless to a virtio driver. */
static int worker_set_call_fd(struct worker *w, const Vnic__Worker__SetCallFd *s,
			      struct wire_fds *fds)
{
	struct wmsg m;
	struct worker_queue *wq;
	int r;

	/* s->queue is a virtqueue index: this worker's are vq_base + j. */
	if (s->queue < w->vq_base || s->queue - w->vq_base >= w->nqueues || fds->n != 1) {
		worker_send_error(w, EINVAL, "SetCallFd for a queue this worker does not have");
		return -1;
	}
	wq = &w->q[s->queue - w->vq_base];
	close(wq->call_fd);
	wq->call_fd = fds->fd[0];
	fds->fd[0] = -1; /* adopted */
	r = worker_call_signal(wq->call_fd);
	if (r < 0)
		log_warn("nic %s: queue %u: new call eventfd: %s", w->nic_id, s->queue,
			 strerror(-r));
	(void)worker_send(w, wmsg_call_fd_set(&m, s->queue));
	return 0;
}

/* ------------------------------------------------------ data path */

static void queue_stop_events(struct worker_queue *wq)
{
	if (wq->kick_ev)
		event_del(wq->kick_ev);
	if (wq->resched_ev)
		event_del(wq->resched_ev);
	if (wq->policy_ev)
		event_del(wq->policy_ev);
	if (wq->irq_ev)
		event_del(wq->irq_ev);
}

static void pair_read(struct worker_pair *p, bool on)
{
	if (!p->rd_ev || p->down || p->rd_on == on)
		return;
	if (on)
		event_add(p->rd_ev, NULL);
	else
		event_del(p->rd_ev);
	p->rd_on = on;
}

/* A polled queue's next look: at once after work (moved), else after
 * the backing-off pause. */
static void polled_again(struct worker_queue *wq, bool moved)
{
	struct timeval tv = { 0, 0 };

	if (moved)
		wq->poll_idle_us = 0;
	else if (wq->poll_idle_us < WORKER_POLL_IDLE_MIN_US)
		wq->poll_idle_us = WORKER_POLL_IDLE_MIN_US;
	else if (wq->poll_idle_us < WORKER_POLL_IDLE_MAX_US)
		wq->poll_idle_us = wq->poll_idle_us * 2 < WORKER_POLL_IDLE_MAX_US
					   ? wq->poll_idle_us * 2
					   : WORKER_POLL_IDLE_MAX_US;
	tv.tv_usec = (suseconds_t)wq->poll_idle_us;
	event_add(wq->resched_ev, &tv);
}

enum tx_hook { TX_KICK, TX_RESUME, TX_TIMER };

/* What a TX policy hook asked for. */
static void tx_next(struct worker_queue *wq, enum net_run r)
{
	struct worker_pair *p = &wq->w->p[wq->idx / 2];

	switch (r) {
	case NET_MORE:
	case NET_POLL:
		event_add(wq->resched_ev, &zero_tv);
		break;
	case NET_TX_BLOCKED:
		wq->tx_blocked = true;
		event_add(p->wr_ev, NULL);
		break;
	case NET_BROKEN:
		wq->broken = true;
		queue_stop_events(wq);
		break;
	default:
		break;
	}
}

static void run_tx(struct worker_queue *wq, enum tx_hook hook)
{
	struct worker *w = wq->w;
	enum net_run r;
	uint64_t pkts0;

	if (!w->started || wq->broken || wq->tx_blocked)
		return; /* blocked: the backend's EV_WRITE resumes us */
	pkts0 = __atomic_load_n(&w->stats->q[wq->idx].packets, __ATOMIC_RELAXED);
	switch (hook) {
	case TX_KICK:
		r = net_tx_kick(w->net, wq->idx);
		break;
	case TX_TIMER:
		r = net_tx_timer(w->net, wq->idx);
		break;
	default:
		r = net_tx_resume(w->net, wq->idx);
		break;
	}
	/* A polled queue is never kicked: whatever the policy decided, it
	 * looks again (polled_again). */
	if (wq->polled && r == NET_IDLE)
		polled_again(wq, __atomic_load_n(&w->stats->q[wq->idx].packets,
						 __ATOMIC_RELAXED) != pkts0);
	else
		tx_next(wq, r);
	/* Stores after the run's last flush (avail_event, used->flags). */
	net_log_flush_all(w->net);
}

static void run_rx(struct worker_queue *wq)
{
	struct worker *w = wq->w;
	struct worker_pair *p = &w->p[wq->idx / 2];

	struct worker_queue *txq = &w->q[wq->idx + 1];
	uint64_t pkts0;

	if (!w->started || wq->broken)
		return;
	pkts0 = __atomic_load_n(&w->stats->q[wq->idx].packets, __ATOMIC_RELAXED);
	switch (net_rx_run(w->net, wq->idx)) {
	case NET_MORE:
		/* Still readable: level-triggered, the next poll returns it
		 * after the other ready fds. Nothing to arm. */
		pair_read(p, true);
		break;
	case NET_RX_NOBUF:
		/* G20: the guest kicks this queue when it adds buffers; a
		 * polled queue is looked at again after the other events. */
		wq->rx_nobuf = true;
		pair_read(p, false);
		if (wq->polled)
			polled_again(wq, __atomic_load_n(&w->stats->q[wq->idx].packets,
							 __ATOMIC_RELAXED) != pkts0);
		break;
	case NET_BROKEN:
		wq->broken = true;
		queue_stop_events(wq);
		pair_read(p, false);
		break;
	case NET_BACKEND_DOWN:
		log_error("nic %s: backend of pair %u failed or closed; no more RX", w->nic_id,
			  wq->idx / 2);
		pair_read(p, false);
		p->down = true;
		break;
	default:
		pair_read(p, true);
		break;
	}
	/* The TX policy may want to know (adaptive: ACKs; poll: spin). */
	if (wq->idx + 1 < w->nqueues && !txq->broken && !txq->tx_blocked) {
		uint64_t moved = __atomic_load_n(&w->stats->q[wq->idx].packets, __ATOMIC_RELAXED) -
				 pkts0;

		if (moved)
			tx_next(txq, net_tx_after_rx(w->net, txq->idx,
						     moved > 0xffffffffu ? 0xffffffffu
									 : (unsigned)moved));
	}
	net_log_flush_all(w->net);
}

static void kick_cb(evutil_socket_t fd, short what, void *arg)
{
	struct worker_queue *wq = arg;
	uint64_t n;

	/* One read per edge (EV_ET): a semaphore-mode eventfd cannot keep us
	 * busy; never blocking, whatever its flags (worker_fds.c). */
	if (worker_kick_read(fd, &n) < 0)
		return; /* EAGAIN: a spurious wakeup (G22) */
	net_kicked(wq->w->net, wq->idx, n);
	if (wq->idx & 1u) {
		run_tx(wq, TX_KICK);
	} else {
		wq->rx_nobuf = false;
		run_rx(wq);
	}
}

static void resched_cb(evutil_socket_t fd, short what, void *arg)
{
	struct worker_queue *wq = arg;

	if (wq->idx & 1u)
		run_tx(wq, TX_RESUME);
	else
		run_rx(wq);
}

static void policy_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	run_tx(arg, TX_TIMER);
}

static void irq_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct worker_queue *wq = arg;

	net_irq_timer(wq->w->net, wq->idx);
}

static void backend_rd_cb(evutil_socket_t fd, short what, void *arg)
{
	struct worker_pair *p = arg;

	run_rx(&p->w->q[2 * p->idx]);
}

static void backend_wr_cb(evutil_socket_t fd, short what, void *arg)
{
	struct worker_pair *p = arg;
	struct worker_queue *wq = &p->w->q[2 * p->idx + 1];

	/* EV_WRITE is one-shot (not persistent): armed only while blocked. */
	wq->tx_blocked = false;
	run_tx(wq, TX_RESUME);
}

/* ------------------------------------------------------- control */

/* After a crash of the previous worker (LIVE inflight region): complete
 * what it left in flight and interrupt each queue once, before the first
 * pop (TESTPLAN L4, L6). A queue whose region is inconsistent breaks and
 * is reported; the others go on. */
static void worker_recover(struct worker *w)
{
	for (unsigned j = 0; j < w->nqueues; j++) {
		unsigned n = 0;
		char name[16];
		int r = net_queue_recover(w->net, j, &n);

		virtio_net_queue_name(w->vq_base + j, name, sizeof(name));
		if (r == 1)
			log_info("nic %s: %s: resumed after a worker restart (restarts %u): %u "
				 "chain(s) left in flight completed with length 0", w->nic_id, name,
				 w->restarts, n);
		else if (r < 0)
			w->q[j].broken = true;
	}
}

static void worker_start(struct worker *w)
{
	if (w->recover)
		worker_recover(w);
	w->started = true;
	for (unsigned j = 0; j < w->nqueues; j++)
		event_add(w->q[j].kick_ev, NULL);
	for (unsigned k = 0; k < w->npairs; k++)
		pair_read(&w->p[k], true);
	/* Buffers posted before Start (or while a previous worker was
	 * down) get served without waiting for a new kick (TESTPLAN L6). */
	for (unsigned j = 0; j < w->nqueues; j++)
		event_add(w->q[j].resched_ev, &zero_tv);
	log_info("nic %s: started, %u queues", w->nic_id, w->nqueues);
}

/* Stop: we run between packets, so "the packet in hand" is done; publish
 * used entries, report the final indices, leave the loop. */
/* SetPolicy: the supervisor validated it; switch every TX queue (the old
 * policy's timers are cancelled, the new one takes the ring over as it
 * is: a run is scheduled at once so nothing pending waits) and answer
 * with what is now in effect. */
static void worker_set_policy(struct worker *w, const Vnic__Vmm__Policy *p)
{
	struct wmsg m;
	Vnic__Vmm__Policy now;
	struct vnic_policy np, got;
	unsigned pkts, bytes;

	if (!p) {
		worker_send_error(w, EPROTO, "SetPolicy without a policy");
		w->exit_code = 1;
		event_base_loopbreak(w->base);
		return;
	}
	worker_policy_params(p, &np);
	net_set_budget(w->net, p->budget_packets, p->budget_bytes, &pkts, &bytes);
	net_set_policy(w->net, &np, &got);
	for (unsigned j = 1; j < w->nqueues; j += 2)
		if (w->started && !w->q[j].broken && !w->q[j].tx_blocked)
			event_add(w->q[j].resched_ev, &zero_tv);
	log_info("nic %s: policy %s, budget %u packets / %u bytes per wake-up", w->nic_id,
		 vnic_mitigation_name(got.mode), pkts, bytes);
	policy_to_pb(&got, &now);
	now.budget_packets = pkts;
	now.budget_bytes = bytes;
	(void)worker_send(w, wmsg_policy_set(&m, &now));
}

void worker_policy_params(const Vnic__Vmm__Policy *p, struct vnic_policy *np)
{
	policy_from_pb(p, np);
	net_policy_fill(np);
}

/* Every queue stops where it is: popped but unused buffers given back,
 * used entries published, the log flushed. With @report, Stopped carries
 * the final indices to vnicd. */
static void worker_stop(struct worker *w, bool report)
{
	struct wmsg m;
	Vnic__Vmm__QueueIndex qi[STATS_MAX_QUEUES], *qp[STATS_MAX_QUEUES];
	int r;

	if (w->stopped)
		return;
	w->stopped = true;
	FAULT_POINT("worker.stop");
	for (unsigned j = 0; j < w->nqueues; j++) {
		uint16_t a = 0, u = 0;

		queue_stop_events(&w->q[j]);
		net_queue_stop(w->net, j, &a, &u);
		wmsg_queue_index(&qi[j], w->vq_base + j, a, u); /* virtqueue index */
		qp[j] = &qi[j];
	}
	for (unsigned k = 0; k < w->npairs; k++) {
		pair_read(&w->p[k], false);
		event_del(w->p[k].wr_ev);
	}
	/* Every write is in the log before Stopped: the VMM's final sync
	 * follows the answer (GET_VRING_BASE, RemoveNic). */
	net_log_flush_all(w->net);
	r = report ? worker_send(w, wmsg_stopped(&m, qp, w->nqueues)) : 0;
	if (r < 0) {
		fprintf(stderr, "vnicd-worker %s: cannot send Stopped: %s\n", w->nic_id, strerror(-r));
		w->exit_code = 1;
	} else {
		w->exit_code = 0;
	}
	event_base_loopbreak(w->base);
}

static void ctrl_cb(evutil_socket_t fd, short what, void *arg)
{
	struct worker *w = arg;

	/* Bounded: a few messages per wake-up, then the data path runs. */
	for (int i = 0; i < 16; i++) {
		Vnic__Worker__WorkerMessage *m = NULL;
		struct wire_fds fds = { .n = 0 };
		struct wire_err err;
		int r = wire_worker_recv(w->ctrl_fd, WIRE_PEER_SUPERVISOR, &m, &fds, &err);

		if (r == -EAGAIN)
			return;
		if (r == -EPIPE || r == -ECONNRESET) {
			/* The supervisor is gone (ECONNRESET: it closed with
			 * our messages unread; vnicd died): nobody to serve.
			 * Stop as Stop does, so that the rings are whole for
			 * whoever serves them next (a restarted vnicd's worker
			 * resumes at used->idx): every popped chain completed
			 * and published, none left half done to be sent again. */
			fprintf(stderr, "vnicd-worker %s: supervisor closed the channel; exiting\n",
				w->nic_id);
			if (w->started)
				worker_stop(w, false);
			w->exit_code = 0;
			event_base_loopbreak(w->base);
			return;
		}
		if (r < 0) {
			/* A supervisor that sends garbage is broken: leave. */
			worker_send_error(w, -r, err.msg);
			w->exit_code = 1;
			event_base_loopbreak(w->base);
			return;
		}
		switch (m->msg_case) {
		case VNIC__WORKER__WORKER_MESSAGE__MSG_START:
			if (w->started) {
				worker_send_error(w, EPROTO, "Start received twice");
				w->exit_code = 1;
				event_base_loopbreak(w->base);
			} else {
				worker_start(w);
			}
			break;
		case VNIC__WORKER__WORKER_MESSAGE__MSG_STOP:
			worker_stop(w, true);
			break;
		case VNIC__WORKER__WORKER_MESSAGE__MSG_SET_POLICY:
			worker_set_policy(w, m->set_policy->policy);
			break;
		case VNIC__WORKER__WORKER_MESSAGE__MSG_SET_DIRTY_LOG:
			worker_set_dirty_log(w, m->set_dirty_log, &fds);
			break;
		case VNIC__WORKER__WORKER_MESSAGE__MSG_SET_CALL_FD:
			if (worker_set_call_fd(w, m->set_call_fd, &fds) < 0) {
				w->exit_code = 1;
				event_base_loopbreak(w->base);
			}
			break;
		default:
			/* Config again, or anything else: unexpected now. */
			worker_send_error(w, EPROTO, "unexpected message from the supervisor");
			w->exit_code = 1;
			event_base_loopbreak(w->base);
			break;
		}
		wire_fds_close(&fds);
		wire_worker_free(m);
		if (event_base_got_break(w->base))
			return;
	}
}

int worker_loop_init(struct worker *w)
{
	struct event_config *cfg = event_config_new();
	int fl;

	if (!cfg)
		return -ENOMEM;
	/* One thread: no locking in libevent. Precise timers: the TX
	 * policies' timers are tens to hundreds of microseconds, and epoll's
	 * millisecond timeout would round them up (libevent then uses a
	 * timerfd, which the sandbox allows). */
	event_config_set_flag(cfg, EVENT_BASE_FLAG_NOLOCK | EVENT_BASE_FLAG_PRECISE_TIMER);
	w->base = event_base_new_with_config(cfg);
	event_config_free(cfg);
	if (!w->base)
		return -ENOMEM;
	fl = fcntl(w->ctrl_fd, F_GETFL);
	if (fl < 0 || fcntl(w->ctrl_fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	w->ctrl_ev = event_new(w->base, w->ctrl_fd, EV_READ | EV_PERSIST, ctrl_cb, w);
	if (!w->ctrl_ev)
		return -ENOMEM;
	for (unsigned j = 0; j < w->nqueues; j++) {
		struct worker_queue *wq = &w->q[j];

		wq->kick_ev = event_new(w->base, wq->kick_fd, EV_READ | EV_PERSIST | EV_ET, kick_cb,
					wq);
		wq->resched_ev = evtimer_new(w->base, resched_cb, wq);
		wq->irq_ev = evtimer_new(w->base, irq_timer_cb, wq);
		if (!wq->kick_ev || !wq->resched_ev || !wq->irq_ev)
			return -ENOMEM;
		if (j & 1u) {
			wq->policy_ev = evtimer_new(w->base, policy_timer_cb, wq);
			if (!wq->policy_ev)
				return -ENOMEM;
		}
	}
	for (unsigned k = 0; k < w->npairs; k++) {
		struct worker_pair *p = &w->p[k];

		p->w = w;
		p->idx = k;
		p->rd_ev = event_new(w->base, p->backend_fd, EV_READ | EV_PERSIST, backend_rd_cb, p);
		p->wr_ev = event_new(w->base, p->backend_fd, EV_WRITE, backend_wr_cb, p);
		if (!p->rd_ev || !p->wr_ev)
			return -ENOMEM;
	}
	if (event_add(w->ctrl_ev, NULL) < 0)
		return -ENOMEM;
	return 0;
}

int worker_loop_run(struct worker *w)
{
	w->exit_code = 1;
	event_base_dispatch(w->base);
	return w->exit_code;
}

void worker_loop_free(struct worker *w)
{
	/* event_free deletes each event first; the fds close at exit. */
	for (unsigned j = 0; j < w->nqueues; j++) {
		if (w->q[j].kick_ev)
			event_free(w->q[j].kick_ev);
		if (w->q[j].resched_ev)
			event_free(w->q[j].resched_ev);
		if (w->q[j].policy_ev)
			event_free(w->q[j].policy_ev);
		if (w->q[j].irq_ev)
			event_free(w->q[j].irq_ev);
		w->q[j].kick_ev = w->q[j].resched_ev = w->q[j].policy_ev = w->q[j].irq_ev = NULL;
	}
	for (unsigned k = 0; k < w->npairs; k++) {
		if (w->p[k].rd_ev)
			event_free(w->p[k].rd_ev);
		if (w->p[k].wr_ev)
			event_free(w->p[k].wr_ev);
		w->p[k].rd_ev = w->p[k].wr_ev = NULL;
	}
	if (w->ctrl_ev)
		event_free(w->ctrl_ev);
	w->ctrl_ev = NULL;
	if (w->base)
		event_base_free(w->base);
	w->base = NULL;
}
