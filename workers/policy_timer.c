/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * policy_timer: "timer", QEMU's tx=timer (x-txtimer=150): the 2008
 * baseline. On a kick, turn guest kicks off and arm a timer of timer_us;
 * when it fires, flush up to the budget. Budget spent: the timer again,
 * kicks still off. Ring empty: kicks on and re-check (Barrier K); buffers
 * that arrived meanwhile start another timer. So every burst waits
 * timer_us before its first frame leaves: the seed's latency penalty, and
 * fewer kicks per frame in exchange.
 */
#include "config.h"

#include "workers/net_priv.h"

static int timer_wait(struct net_dev *d, struct net_queue *q)
{
	vring_notify_disable(&q->vq);
	net_timer(d, q, d->policy.timer_us);
	return NET_IDLE;
}

static int timer_flush(struct net_dev *d, struct net_queue *q, bool fired)
{
	struct net_tx_budget b;
	enum net_run ret;

	net_timer(d, q, 0);
	net_tx_budget_init(d, &b);
	vring_notify_disable(&q->vq);
	ret = net_tx_drain(d, q, &b);
	if (fired && b.done)
		stats_add(&q->st->timer_hits, 1);
	if (b.done > 1)
		stats_add(&q->st->kicks_avoided, b.done - 1);
	net_flush(d, q);
	switch (ret) {
	case NET_MORE:
		return timer_wait(d, q); /* a budget per flush, then wait again */
	case NET_IDLE:
		if (vring_notify_enable(&q->vq))
			return timer_wait(d, q); /* arrived while we re-armed */
		return NET_IDLE;
	default:
		return ret; /* BLOCKED: writability resumes us (on_run); BROKEN */
	}
}

static int timer_on_kick(struct net_dev *d, struct net_queue *q)
{
	if (q->ps.timer_armed)
		return NET_IDLE; /* sent before the guest saw kicks off */
	return timer_wait(d, q);
}

static int timer_on_run(struct net_dev *d, struct net_queue *q)
{
	return timer_flush(d, q, false);
}

static int timer_on_timer(struct net_dev *d, struct net_queue *q)
{
	return timer_flush(d, q, true);
}

static void timer_enable(struct net_dev *d, struct net_queue *q)
{
	(void)d;
	stats_set(&q->st->window, 0);
}

const struct net_policy net_policy_timer = {
	.mode = VNIC_MITIGATION_TIMER,
	.enable = timer_enable,
	.on_kick = timer_on_kick,
	.on_run = timer_on_run,
	.on_timer = timer_on_timer,
};
