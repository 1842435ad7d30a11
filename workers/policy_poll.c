/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * policy_poll: "poll", busy-polling as DPDK's vhost and vhost-net's
 * busyloop do. Kicks stay off while the queue is busy; after the ring
 * empties the queue keeps spinning (NET_POLL: the caller runs the other
 * ready events, then net_tx_resume again, without sleeping) for poll_us;
 * then kicks on and re-check (Barrier K): buffers that arrived meanwhile
 * restart the spinning. poll_us 0: spin forever (pins a CPU). Frames the
 * RX queue of the pair delivers restart the spinning too, so the guest's
 * answer to them is picked up without a kick (request/response).
 * Counted: poll_hits (spins that found chains), poll_spins (wasted).
 */
#include "config.h"

#include "workers/net_priv.h"

static int poll_serve(struct net_dev *d, struct net_queue *q, bool spin)
{
	struct net_policy_state *ps = &q->ps;
	struct net_tx_budget b;
	enum net_run ret;
	uint64_t now = net_now_ns();

	net_tx_budget_init(d, &b);
	vring_notify_disable(&q->vq);
	ret = net_tx_drain(d, q, &b);
	if (b.done) {
		ps->last_work_ns = now;
		if (spin && ps->polling)
			stats_add(&q->st->poll_hits, 1);
	} else if (spin && ps->polling) {
		stats_add(&q->st->poll_spins, 1);
	}
	if (b.done > 1)
		stats_add(&q->st->kicks_avoided, b.done - 1);
	net_flush(d, q);
	if (ret != NET_IDLE) {
		ps->polling = ret == NET_MORE;
		return ret;
	}
	if (d->policy.poll_us == 0 ||
	    now - ps->last_work_ns < (uint64_t)d->policy.poll_us * 1000u) {
		ps->polling = true;
		return NET_POLL;
	}
	ps->polling = false;
	if (vring_notify_enable(&q->vq)) {
		/* Arrived while we re-armed: spin again. */
		vring_notify_disable(&q->vq);
		ps->polling = true;
		ps->last_work_ns = now;
		return NET_POLL;
	}
	return NET_IDLE;
}

static int poll_on_kick(struct net_dev *d, struct net_queue *q)
{
	q->ps.last_work_ns = net_now_ns();
	return poll_serve(d, q, false);
}

static int poll_on_run(struct net_dev *d, struct net_queue *q)
{
	return poll_serve(d, q, true);
}

static int poll_after_rx(struct net_dev *d, struct net_queue *q, unsigned rx_pkts)
{
	(void)d;
	if (!rx_pkts)
		return NET_IDLE;
	q->ps.last_work_ns = net_now_ns();
	if (q->ps.polling)
		return NET_IDLE; /* a spin is already scheduled */
	vring_notify_disable(&q->vq);
	q->ps.polling = true;
	return NET_POLL;
}

static void poll_enable(struct net_dev *d, struct net_queue *q)
{
	(void)d;
	stats_set(&q->st->window, 0);
	q->ps.last_work_ns = net_now_ns();
}

const struct net_policy net_policy_poll = {
	.mode = VNIC_MITIGATION_POLL,
	.enable = poll_enable,
	.on_kick = poll_on_kick,
	.on_run = poll_on_run,
	.on_timer = poll_on_run,
	.after_rx = poll_after_rx,
};
