/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * irq: interrupt coalescing on the used rings (issue 17), the other half
 * of the notification question next to the TX policies (policy.h).
 *
 * Without it every flush that publishes used entries the guest asked to
 * hear about (vring_should_notify) writes the call eventfd at once. Under
 * TCG, or any VMM without irqfd, each of those writes is injected by the
 * VMM's main loop under its global lock, and the guest pays an interrupt
 * entry and a NAPI schedule for each. Coalescing here is interrupt
 * throttling, as NICs do it (e1000's ITR, ethtool's rx-usecs): a queue
 * interrupts at most once per *_irq_us. A due interrupt goes at once when
 * the last one is at least *_irq_us old, so a lone frame (a ping, a
 * request) waits for nothing; under load it waits for the rest of the
 * interval, or until *_irq_frames used entries were published since it
 * became due, whichever is first. The guest then finds a batch per
 * interrupt. Throttling starts only once an interrupt told of two or more
 * entries: request/response traffic (one frame in flight, an interrupt
 * per frame, however fast) is never held, as a NIC's adaptive moderation
 * would classify it; a stream's first batch turns it on. The knobs are VIRTIO_NET_F_NOTF_COAL's, set by the VMM or the
 * administrator here, not by the guest.
 *
 * The rule that keeps it safe (doc/model/irq.pml checks it): once the
 * guest asked for an interrupt, it is owed until sent. vring_should_notify
 * records every flush as signalled, and a guest that re-enables
 * interrupts asks only from its own last used index on, so a later flush
 * may well answer "no": the due interrupt must then still be sent, not
 * re-decided. It is sent by whichever comes first: the interval or the
 * frame limit at a flush, the timer, a queue stop, or a policy switch.
 *
 * The timer is never cancelled: a fire with nothing due costs one call,
 * while cancelling costs a timerfd update on every early send. So an
 * interrupt may go earlier than the interval says, never later.
 */
#include "config.h"

#include "workers/net_priv.h"

static void irq_limits(const struct net_dev *d, const struct net_queue *q, uint32_t *us,
		       uint32_t *frames)
{
	*us = q->tx ? d->policy.tx_irq_us : d->policy.rx_irq_us;
	*frames = q->tx ? d->policy.tx_irq_frames : d->policy.rx_irq_frames;
	if (!d->ops->irq_timer)
		*us = 0;
}

static uint64_t irq_now(const struct net_dev *d)
{
	return d->ops->now_ns ? d->ops->now_ns(d->opaque) : net_now_ns();
}

/* Send the queue's interrupt now. */
static void irq_send(struct net_dev *d, struct net_queue *q, uint64_t now)
{
	q->irq_due = false;
	q->irq_last_batch = q->irq_frames;
	q->irq_frames = 0;
	q->irq_last_ns = now;
	d->ops->notify(d->opaque, q->idx);
	stats_add(&q->st->interrupts, 1);
}

void net_irq_after_flush(struct net_dev *d, struct net_queue *q, unsigned published)
{
	uint32_t us, frames;
	uint64_t now, gap;

	if (vring_should_notify(&q->vq))
		q->irq_due = true;
	if (!q->irq_due) {
		stats_add(&q->st->suppressed, 1);
		return;
	}
	irq_limits(d, q, &us, &frames);
	q->irq_frames += published;
	if (!us || (frames && q->irq_frames >= frames)) {
		irq_send(d, q, us ? irq_now(d) : q->irq_last_ns);
		return;
	}
	now = irq_now(d);
	gap = (uint64_t)us * 1000u;
	if (now - q->irq_last_ns >= gap || q->irq_last_batch < 2) {
		/* The last one is old enough, or told of a single entry: one
		 * frame in flight (request/response), nothing to batch, and
		 * holding it would only add the interval to every round trip. */
		irq_send(d, q, now);
		return;
	}
	/* Held back for the rest of the interval: counted as suppressed
	 * until the send. */
	stats_add(&q->st->suppressed, 1);
	if (!q->irq_timer_armed) {
		uint64_t left_us = (q->irq_last_ns + gap - now + 999u) / 1000u;

		q->irq_timer_armed = true;
		d->ops->irq_timer(d->opaque, q->idx, left_us ? (uint32_t)left_us : 1u);
	}
}

void net_irq_send_due(struct net_dev *d, struct net_queue *q)
{
	if (q->irq_due)
		irq_send(d, q, irq_now(d));
}

void net_irq_timer(struct net_dev *d, unsigned qidx)
{
	struct net_queue *q;

	if (qidx >= 2 * d->npairs)
		return;
	q = &d->q[qidx];
	q->irq_timer_armed = false;
	net_irq_send_due(d, q);
}
