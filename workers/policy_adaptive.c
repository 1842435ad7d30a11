/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * policy_adaptive: "adaptive", the notification window proposed in the
 * 2008 thread and never built: "If the link is idle, the window should be
 * one packet... As the workload increases, the window increases to
 * safety_factor x allowable_latency x packet_rate. The timer is set to
 * allowable_latency to catch changes in workload." EVENT_IDX is the guest
 * feature it needed: avail_event = last_avail_idx + W - 1 asks the guest
 * to kick once it has posted W more buffers (vring_notify_enable_window).
 *
 * Parameters (struct vnic_policy): latency_us L (allowable latency,
 * default 100), safety_pct S (default 80, the seed's 0.8), max_window
 * (default 64, and at most half the queue, so a guest can always post a
 * whole window).
 *
 * The algorithm, per TX queue:
 *  - Serve: cancel the timer, kicks off, drain up to the budget (MORE:
 *    yield with kicks off, as bh). When the ring is empty, update W (once
 *    per wake-up), then open the window: W = 1 is vring_notify_enable
 *    (kick on the next buffer), W > 1 sets avail_event W - 1 ahead; then
 *    re-check after Barrier K (buffers already there: drain them too).
 *    Sleeping with W > 1 always arms a timer of L: the device is never
 *    idle, unbounded, while the guest has posted buffers it did not kick.
 *  - Rate: packets served over samples of at least L/2, an EWMA (1/4).
 *    Target T = S x L x rate, clamped to 1..max_window.
 *  - A kick that found more than W chains (the guest posted faster than
 *    the window while we drained): W = max(T, W + 1). A kick that found
 *    W or fewer leaves W alone. So a lone packet (request/response, ping)
 *    always finds W = 1: one chain per kick never grows the window.
 *  - The timer fired (the window did not fill within L: the load
 *    dropped): chains found: W = max(1, found / 2), sent at once; none
 *    found: the link is idle, W = 1 (no timer while W = 1).
 *  - The seed's worry, all-out receive: ACKs the guest sends while the
 *    device floods it would wait up to L under a window. So when the RX
 *    queue of the pair delivered frames, the TX ring is checked (one
 *    index read) and drained if it has chains: the ACKs leave with the
 *    next RX batch instead of waiting for the window or the timer.
 * Counted: window (gauge), timer_fires, timer_hits (fires that found
 * chains: each is up to L of added latency). The seed predicts no fires
 * in an all-out run and none in a ping test.
 */
#include "config.h"

#include "workers/net_priv.h"

enum adaptive_why { AW_KICK, AW_TIMER, AW_RUN };

static unsigned adaptive_cap(const struct net_dev *d, const struct net_queue *q)
{
	unsigned cap = d->policy.max_window, half = q->vq.num / 2u;

	if (cap > half)
		cap = half;
	return cap ? cap : 1;
}

static void adaptive_sample(const struct net_dev *d, struct net_policy_state *ps,
			    unsigned served, uint64_t now)
{
	uint64_t dt, min_ns = (uint64_t)d->policy.latency_us * 500u; /* L / 2 */

	ps->sample_pkts += served;
	if (!ps->sample_ns) {
		ps->sample_ns = now;
		return;
	}
	dt = now - ps->sample_ns;
	if (dt < min_ns)
		return;
	{
		double r = (double)ps->sample_pkts * 1e9 / (double)dt;

		ps->rate_pps = ps->rate_pps > 0 ? 0.75 * ps->rate_pps + 0.25 * r : r;
	}
	ps->sample_ns = now;
	ps->sample_pkts = 0;
}

static unsigned adaptive_target(const struct net_dev *d, const struct net_queue *q)
{
	double t = d->policy.safety_pct / 100.0 * d->policy.latency_us * 1e-6 * q->ps.rate_pps;
	unsigned cap = adaptive_cap(d, q);

	if (t < 1)
		return 1;
	return t > cap ? cap : (unsigned)t;
}

static void adaptive_decide(struct net_dev *d, struct net_queue *q, enum adaptive_why why,
			    unsigned served)
{
	struct net_policy_state *ps = &q->ps;
	unsigned w = ps->window, cap = adaptive_cap(d, q);

	adaptive_sample(d, ps, served, net_now_ns());
	switch (why) {
	case AW_KICK:
		if (served > w) {
			unsigned t = adaptive_target(d, q);

			w = t > w + 1 ? t : w + 1;
		}
		break;
	case AW_TIMER:
		w = served ? served / 2 : 1;
		break;
	case AW_RUN:
		break;
	}
	if (w < 1)
		w = 1;
	if (w > cap)
		w = cap;
	if (!q->vq.event_idx)
		w = 1; /* no avail_event: a kick per buffer or none */
	ps->window = w;
	stats_set(&q->st->window, w);
}

static int adaptive_serve(struct net_dev *d, struct net_queue *q, enum adaptive_why why)
{
	struct net_tx_budget b;
	enum net_run ret;
	bool decided = false;

	net_timer(d, q, 0);
	net_tx_budget_init(d, &b);
	vring_notify_disable(&q->vq);
	for (;;) {
		ret = net_tx_drain(d, q, &b);
		if (ret != NET_IDLE)
			break;
		if (!decided) {
			adaptive_decide(d, q, why, b.done);
			decided = true;
		}
		if (!vring_notify_enable_window(&q->vq, q->ps.window))
			break;
		vring_notify_disable(&q->vq);
	}
	if (why == AW_TIMER && b.done)
		stats_add(&q->st->timer_hits, 1);
	if (b.done > 1)
		stats_add(&q->st->kicks_avoided, b.done - 1);
	net_flush(d, q);
	if (!decided)
		adaptive_sample(d, &q->ps, b.done, net_now_ns());
	if (ret == NET_IDLE && q->ps.window > 1)
		net_timer(d, q, d->policy.latency_us);
	return ret;
}

static int adaptive_on_kick(struct net_dev *d, struct net_queue *q)
{
	return adaptive_serve(d, q, AW_KICK);
}

static int adaptive_on_run(struct net_dev *d, struct net_queue *q)
{
	return adaptive_serve(d, q, AW_RUN);
}

static int adaptive_on_timer(struct net_dev *d, struct net_queue *q)
{
	return adaptive_serve(d, q, AW_TIMER);
}

static int adaptive_after_rx(struct net_dev *d, struct net_queue *q, unsigned rx_pkts)
{
	if (!rx_pkts || !vring_avail_pending(&q->vq))
		return NET_IDLE;
	return adaptive_serve(d, q, AW_RUN);
}

static void adaptive_enable(struct net_dev *d, struct net_queue *q)
{
	(void)d;
	q->ps.window = 1;
	stats_set(&q->st->window, 1);
}

const struct net_policy net_policy_adaptive = {
	.mode = VNIC_MITIGATION_ADAPTIVE,
	.enable = adaptive_enable,
	.on_kick = adaptive_on_kick,
	.on_run = adaptive_on_run,
	.on_timer = adaptive_on_timer,
	.after_rx = adaptive_after_rx,
};
