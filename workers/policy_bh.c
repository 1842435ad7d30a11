/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * policy_bh: "bh", the bottom half (QEMU's tx=bh, the 2008 patch): on a
 * kick, turn guest kicks off and drain at once, up to the budget; then
 * either yield with kicks still off (NET_MORE: run again after the other
 * events) or turn kicks on and re-check the ring (Barrier K inside
 * vring_notify_enable), looping while buffers keep arriving. Used entries
 * are flushed and the guest interrupted (as it allows) before returning.
 * No timer, no state.
 */
#include "config.h"

#include "workers/net_priv.h"

static int bh_serve(struct net_dev *d, struct net_queue *q)
{
	struct net_tx_budget b;
	enum net_run ret;

	net_tx_budget_init(d, &b);
	vring_notify_disable(&q->vq);
	for (;;) {
		ret = net_tx_drain(d, q, &b);
		if (ret != NET_IDLE)
			break; /* MORE: kicks stay off; BLOCKED: writability wakes us */
		/* Empty: ask for kicks again, then re-check (lost wakeup). */
		if (!vring_notify_enable(&q->vq))
			break;
		vring_notify_disable(&q->vq);
	}
	if (b.done > 1)
		stats_add(&q->st->kicks_avoided, b.done - 1);
	net_flush(d, q);
	return ret;
}

enum net_run net_tx_run(struct net_dev *d, unsigned qidx)
{
	struct net_queue *q;

	if (qidx >= 2 * d->npairs || !(qidx & 1u))
		return NET_IDLE;
	q = &d->q[qidx];
	if (!q->configured)
		return NET_IDLE; /* G22: kick on an unconfigured or stopped queue */
	if (q->vq.broken)
		return net_report_broken(d, q);
	return (enum net_run)bh_serve(d, q);
}

static void bh_enable(struct net_dev *d, struct net_queue *q)
{
	(void)d;
	stats_set(&q->st->window, 1);
}

const struct net_policy net_policy_bh = {
	.mode = VNIC_MITIGATION_BH,
	.enable = bh_enable,
	.on_kick = bh_serve,
	.on_run = bh_serve,
	.on_timer = bh_serve,
};
