/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * policy: dispatch of the TX policy hooks and switching (see policy.h).
 */
#include "config.h"

#include "workers/net_priv.h"

static const struct net_policy *const net_policies[] = {
	&net_policy_timer, &net_policy_bh, &net_policy_adaptive, &net_policy_poll,
};

const struct net_policy *net_policy_find(enum vnic_mitigation mode)
{
	for (size_t i = 0; i < sizeof(net_policies) / sizeof(net_policies[0]); i++)
		if (net_policies[i]->mode == mode)
			return net_policies[i];
	return NULL;
}

static uint32_t clamp_u32(uint32_t v, uint32_t def, uint32_t lo, uint32_t hi)
{
	if (v == 0)
		v = def;
	return v < lo ? lo : v > hi ? hi : v;
}

void net_policy_fill(struct vnic_policy *p)
{
	if (!net_policy_find(p->mode))
		p->mode = VNIC_MITIGATION_BH;
	p->timer_us = clamp_u32(p->timer_us, NET_TIMER_US_DEFAULT, NET_TIMER_US_MIN,
				NET_TIMER_US_MAX);
	if (p->poll_us > NET_POLL_US_MAX)
		p->poll_us = NET_POLL_US_MAX;
	p->latency_us = clamp_u32(p->latency_us, NET_LATENCY_US_DEFAULT, NET_LATENCY_US_MIN,
				  NET_LATENCY_US_MAX);
	p->safety_pct = clamp_u32(p->safety_pct, NET_SAFETY_PCT_DEFAULT, NET_SAFETY_PCT_MIN,
				  NET_SAFETY_PCT_MAX);
	p->max_window = clamp_u32(p->max_window, NET_WINDOW_MAX_DEFAULT, 1, NET_WINDOW_MAX_MAX);
	if (p->rx_irq_us > NET_IRQ_US_MAX)
		p->rx_irq_us = NET_IRQ_US_MAX;
	if (p->tx_irq_us > NET_IRQ_US_MAX)
		p->tx_irq_us = NET_IRQ_US_MAX;
	if (p->rx_irq_frames > NET_IRQ_FRAMES_MAX)
		p->rx_irq_frames = NET_IRQ_FRAMES_MAX;
	if (p->tx_irq_frames > NET_IRQ_FRAMES_MAX)
		p->tx_irq_frames = NET_IRQ_FRAMES_MAX;
}

void net_timer(struct net_dev *d, struct net_queue *q, uint32_t us)
{
	if (!d->ops->timer || (!us && !q->ps.timer_armed))
		return;
	q->ps.timer_armed = us != 0;
	d->ops->timer(d->opaque, q->idx, us);
}

void net_set_policy(struct net_dev *d, const struct vnic_policy *p, struct vnic_policy *ret)
{
	struct vnic_policy np = *p;
	const struct net_policy *pol;

	net_policy_fill(&np);
	if (!d->ops->timer)
		np.mode = VNIC_MITIGATION_BH; /* no timers, no spins: only bh can run */
	pol = net_policy_find(np.mode);
	d->policy = np;
	/* Interrupts held back under the old limits go now: the new ones
	 * may be shorter, or off. */
	for (unsigned i = 0; i < 2 * d->npairs; i++) {
		if (d->q[i].configured)
			net_irq_send_due(d, &d->q[i]);
		/* The next hold arms the timer again with the new interval
		 * (a pending one is rescheduled), instead of waiting for the
		 * old one. */
		d->q[i].irq_timer_armed = false;
	}
	for (unsigned i = 1; i < 2 * d->npairs; i += 2) {
		struct net_queue *q = &d->q[i];

		if (q->pol && q->pol->disable)
			q->pol->disable(d, q);
		net_timer(d, q, 0);
		q->ps = (struct net_policy_state){ 0 };
		q->pol = pol;
		if (pol->enable)
			pol->enable(d, q);
	}
	if (ret)
		*ret = np;
}

/* The queue a hook may run on, or NULL (answered idle or broken). */
static struct net_queue *net_tx_queue(struct net_dev *d, unsigned qidx, enum net_run *ret)
{
	struct net_queue *q;

	*ret = NET_IDLE;
	if (qidx >= 2 * d->npairs || !(qidx & 1u))
		return NULL;
	q = &d->q[qidx];
	if (!q->configured)
		return NULL; /* G22: a kick on an unconfigured or stopped queue */
	if (q->vq.broken) {
		net_timer(d, q, 0);
		*ret = net_report_broken(d, q);
		return NULL;
	}
	if (!q->pol)
		q->pol = &net_policy_bh;
	return q;
}

enum net_run net_tx_kick(struct net_dev *d, unsigned qidx)
{
	enum net_run r;
	struct net_queue *q = net_tx_queue(d, qidx, &r);

	return q ? (enum net_run)q->pol->on_kick(d, q) : r;
}

enum net_run net_tx_resume(struct net_dev *d, unsigned qidx)
{
	enum net_run r;
	struct net_queue *q = net_tx_queue(d, qidx, &r);

	return q ? (enum net_run)q->pol->on_run(d, q) : r;
}

enum net_run net_tx_timer(struct net_dev *d, unsigned qidx)
{
	enum net_run r;
	struct net_queue *q = net_tx_queue(d, qidx, &r);

	if (!q)
		return r;
	if (!q->ps.timer_armed)
		return NET_IDLE; /* cancelled meanwhile (a switch) */
	q->ps.timer_armed = false;
	stats_add(&q->st->timer_fires, 1);
	return (enum net_run)q->pol->on_timer(d, q);
}

enum net_run net_tx_after_rx(struct net_dev *d, unsigned qidx, unsigned rx_pkts)
{
	enum net_run r;
	struct net_queue *q = net_tx_queue(d, qidx, &r);

	if (!q || !q->pol->after_rx)
		return r;
	return (enum net_run)q->pol->after_rx(d, q, rx_pkts);
}
