/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * net: engine set-up and the parts TX and RX share (see net.h).
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "fault.h"
#include "workers/net_priv.h"

static void net_err(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void net_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || errlen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

int net_dev_new(const struct net_params *p, struct net_dev **ret_dev, char *err, size_t errlen)
{
	struct net_dev *d;
	int type = 0, first_type = 0;

	if (!((p->features >> VIRTIO_F_VERSION_1) & 1u)) {
		net_err(err, errlen, "VIRTIO_F_VERSION_1 is required");
		return -EINVAL;
	}
	if (p->npairs == 0 || p->npairs > NET_MAX_PAIRS) {
		net_err(err, errlen, "%u queue pairs: must be 1..%u", p->npairs, NET_MAX_PAIRS);
		return -EINVAL;
	}
	/* A socket carries plain Ethernet frames: there is nobody to finish
	 * a checksum or segment a GSO frame, so no offload can be offered. */
	if (p->backend == NET_BACKEND_SOCKET &&
	    (p->features & (NET_TX_OFFLOAD_FEATURES | NET_RX_OFFLOAD_FEATURES))) {
		net_err(err, errlen, "offload features 0x%llx on a socket backend",
			(unsigned long long)(p->features &
					     (NET_TX_OFFLOAD_FEATURES | NET_RX_OFFLOAD_FEATURES)));
		return -EINVAL;
	}
	/* AF_PACKET: the kernel's virtio_net_hdr carries partial checksums
	 * both ways and GSO to the guest; no GSO from the guest (a TX slot
	 * holds 16 KiB, afp_ring.h). */
	if (p->backend == NET_BACKEND_AF_PACKET &&
	    (p->features & (NET_TX_OFFLOAD_FEATURES | NET_RX_OFFLOAD_FEATURES) &
	     ~((1ull << VIRTIO_NET_F_CSUM) | (1ull << VIRTIO_NET_F_GUEST_CSUM) |
	       (1ull << VIRTIO_NET_F_GUEST_TSO4) | (1ull << VIRTIO_NET_F_GUEST_TSO6)))) {
		net_err(err, errlen, "offload features 0x%llx on an AF_PACKET backend",
			(unsigned long long)p->features);
		return -EINVAL;
	}
	if (p->backend == NET_BACKEND_AF_PACKET && p->npairs != 1) {
		net_err(err, errlen, "an AF_PACKET backend serves one queue pair");
		return -EINVAL;
	}
	if (p->backend != NET_BACKEND_TAP && p->backend != NET_BACKEND_SOCKET &&
	    p->backend != NET_BACKEND_AF_PACKET) {
		net_err(err, errlen, "unknown backend type %d", (int)p->backend);
		return -EINVAL;
	}
	if (!p->stats || !p->ops || !p->ops->notify || !p->backend_fds) {
		net_err(err, errlen, "missing stats page, callbacks or backend fds");
		return -EINVAL;
	}
	if (p->backend == NET_BACKEND_SOCKET) {
		for (unsigned i = 0; i < p->npairs; i++) {
			socklen_t sl = sizeof(type);

			if (getsockopt(p->backend_fds[i], SOL_SOCKET, SO_TYPE, &type, &sl) < 0 ||
			    (type != SOCK_DGRAM && type != SOCK_SEQPACKET) ||
			    (i > 0 && type != first_type)) {
				net_err(err, errlen, "socket backend fd %u is not a datagram or "
					"seqpacket socket", i);
				return -EINVAL;
			}
			first_type = type;
		}
	}
	d = calloc(1, sizeof(*d));
	if (!d) {
		net_err(err, errlen, "out of memory");
		return -ENOMEM;
	}
	d->features = p->features;
	d->backend = p->backend;
	d->sock_type = first_type;
	d->npairs = p->npairs;
	d->vq_base = p->vq_base;
	for (unsigned i = 0; i < p->npairs; i++)
		d->backend_fd[i] = p->backend_fds[i];
	if (p->backend == NET_BACKEND_AF_PACKET) {
		int r = net_afp_attach(d, p->backend_fds[0], err, errlen);

		if (r < 0) {
			free(d);
			return r;
		}
	}
	d->stats = p->stats;
	d->ops = p->ops;
	d->opaque = p->opaque;
	net_set_budget(d, p->budget_pkts, p->budget_bytes, NULL, NULL);
	for (unsigned i = 0; i < 2 * p->npairs; i++) {
		d->q[i].idx = i;
		d->q[i].tx = (i & 1u) != 0;
		d->q[i].st = &p->stats->q[i];
	}
	{
		struct vnic_policy bh = { .mode = VNIC_MITIGATION_BH };

		net_set_policy(d, p->policy ? p->policy : &bh, NULL);
	}
	*ret_dev = d;
	return 0;
}

void net_set_budget(struct net_dev *d, unsigned pkts, unsigned bytes, unsigned *ret_pkts,
		    unsigned *ret_bytes)
{
	if (pkts == 0)
		pkts = NET_BUDGET_PKTS;
	if (bytes == 0)
		bytes = NET_BUDGET_BYTES;
	d->budget_pkts = pkts < VRING_MAX_SIZE ? pkts : VRING_MAX_SIZE;
	d->budget_bytes = bytes < NET_BUDGET_BYTES_MAX ? bytes : NET_BUDGET_BYTES_MAX;
	if (ret_pkts)
		*ret_pkts = d->budget_pkts;
	if (ret_bytes)
		*ret_bytes = d->budget_bytes;
}

struct net_dev *net_dev_free(struct net_dev *d)
{
	if (!d)
		return NULL;
	net_afp_detach(d);
	for (unsigned i = 0; i < 2 * d->npairs; i++) {
		vring_detach_inflight(&d->q[i].vq);
		free(d->q[i].hold);
		free(d->q[i].done_head);
		free(d->q[i].done_len);
	}
	free(d);
	return NULL;
}

int net_queue_setup(struct net_dev *d, unsigned qidx, const struct memtable *mt, unsigned num,
		    uint64_t desc_gpa, uint64_t avail_gpa, uint64_t used_gpa, char *err,
		    size_t errlen)
{
	struct net_queue *q;
	int r;

	if (qidx >= 2 * d->npairs) {
		net_err(err, errlen, "queue %u out of range", qidx);
		return -EINVAL;
	}
	q = &d->q[qidx];
	if (q->configured) {
		net_err(err, errlen, "queue %u configured twice", qidx);
		return -EINVAL;
	}
	r = vring_init(&q->vq, mt, num, desc_gpa, avail_gpa, used_gpa, d->features, err, errlen);
	if (r < 0)
		return r;
	q->vq.log = d->log; /* before the first store (notify_disable below) */
	/* A tap frame that does not fit the RX buffers of the moment waits
	 * here (a tap cannot be peeked). */
	if (!q->tx && d->backend == NET_BACKEND_TAP) {
		/* The largest frame and one byte more, which shows a longer one. */
		q->hold = malloc(NET_HDR_LEN + NET_MAX_FRAME + 1);
		if (!q->hold) {
			net_err(err, errlen, "out of memory");
			return -ENOMEM;
		}
	}
	/* A run fills at most num heads before it pushes them. */
	if (!q->tx) {
		q->done_head = calloc(num, sizeof(*q->done_head));
		q->done_len = calloc(num, sizeof(*q->done_len));
		if (!q->done_head || !q->done_len) {
			net_err(err, errlen, "out of memory");
			return -ENOMEM;
		}
	}
	/* RX wants kicks only while it waits for buffers. */
	if (!q->tx)
		vring_notify_disable(&q->vq);
	q->configured = true;
	return 0;
}

int net_queue_recover(struct net_dev *d, unsigned qidx, unsigned *ret_completed)
{
	struct net_queue *q;
	unsigned n = 0;

	if (qidx >= 2 * d->npairs || !d->q[qidx].configured)
		return 0;
	q = &d->q[qidx];
	if (!q->vq.inf || !q->vq.inf->recover)
		return 0;
	if (vring_recover_inflight(&q->vq, &n) < 0) {
		net_report_broken(d, q);
		return -EIO;
	}
	/* RX: the buffers come back with length 0; whatever frame the dead
	 * worker had written into them is lost (a Linux guest drops such a
	 * buffer and counts rx_length_errors). TX: the frames may or may
	 * not have left: nothing to count. */
	if (!q->tx)
		stats_add(&q->st->drops, n);
	net_log_flush(d);
	/* One interrupt, unconditionally; it covers everything published
	 * so far, so vring_should_notify counts from here. */
	d->ops->notify(d->opaque, q->idx);
	stats_add(&q->st->interrupts, 1);
	q->irq_due = false;
	q->irq_frames = 0;
	q->vq.signalled_used = q->vq.published_idx;
	q->vq.signalled_used_valid = true;
	*ret_completed = n;
	return 1;
}

void net_set_dirtylog(struct net_dev *d, struct dirtylog *log)
{
	d->log = log;
	for (unsigned i = 0; i < 2 * d->npairs; i++)
		d->q[i].vq.log = log;
}

void net_log_flush_all(struct net_dev *d)
{
	net_log_flush(d);
}

void net_log_used_rings(struct net_dev *d)
{
	if (!d->log)
		return;
	for (unsigned i = 0; i < 2 * d->npairs; i++)
		if (d->q[i].configured)
			dirtylog_mark(d->log, d->q[i].vq.used_gpa, vring_used_size(d->q[i].vq.num));
	dirtylog_flush(d->log);
}

struct vring *net_queue_vring(struct net_dev *d, unsigned qidx)
{
	if (qidx >= 2 * d->npairs || !d->q[qidx].configured)
		return NULL;
	return &d->q[qidx].vq;
}

unsigned net_nqueues(const struct net_dev *d)
{
	return 2 * d->npairs;
}

void net_kicked(struct net_dev *d, unsigned qidx, uint64_t n)
{
	if (qidx < 2 * d->npairs)
		stats_add(&d->q[qidx].st->kicks, n);
}

void net_flush(struct net_dev *d, struct net_queue *q)
{
	unsigned n = q->pushed;

	if (n == 0)
		return;
	q->pushed = 0;
	stats_add(&q->st->flushes, 1);
	FAULT_POINT("worker.flush.before_idx");
	/* The burst's buffers and used elements in the log BEFORE used->idx
	 * makes them the guest's: a worker killed between the index and
	 * the next flush loses only the used ring's bits, which its
	 * successor marks again (net_log_used_rings). */
	net_log_flush(d);
	vring_flush(&q->vq);
	/* used->idx's bit before the interrupt. */
	net_log_flush(d);
	net_irq_after_flush(d, q, n);
}

enum net_run net_report_broken(struct net_dev *d, struct net_queue *q)
{
	if (!q->broken_reported) {
		q->broken_reported = true;
		q->hold_len = 0;
		/* The entries published before it broke may owe an interrupt,
		 * and the caller stops the queue's timers now. */
		net_irq_send_due(d, q);
		stats_set_broken(q->st, q->vq.broken_reason);
		if (d->ops->broken)
			d->ops->broken(d->opaque, q->idx, q->vq.broken_reason);
	}
	return NET_BROKEN;
}

uint64_t net_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void net_guest_log(struct net_dev *d, struct net_queue *q, const char *fmt, ...)
{
	char msg[256];
	uint64_t now;
	va_list ap;

	if (!d->ops->log)
		return;
	/* Rate limit (TESTPLAN G20, STYLE 8): a guest can trigger this line
	 * at packet rate. */
	now = net_now_ns();
	if (now - q->log_window >= NET_LOG_WINDOW_NS) {
		q->log_window = now;
		q->log_count = 0;
	}
	if (q->log_count >= NET_LOG_BURST)
		return;
	q->log_count++;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	d->ops->log(d->opaque, q->idx, msg);
}

void net_drop(struct net_dev *d, struct net_queue *q, const char *why)
{
	char name[16];

	stats_add(&q->st->drops, 1);
	virtio_net_queue_name(d->vq_base + q->idx, name, sizeof(name));
	net_guest_log(d, q, "%s: frame dropped: %s", name, why);
}

void net_queue_stop(struct net_dev *d, unsigned qidx, uint16_t *ret_avail, uint16_t *ret_used)
{
	struct net_queue *q;

	if (qidx >= 2 * d->npairs)
		return;
	q = &d->q[qidx];
	if (q->configured) {
		/* A frame held for RX is lost: the guest never saw it. */
		if (q->hold_len) {
			q->hold_len = 0;
			stats_add(&q->st->drops, 1);
		}
		net_flush(d, q);
		/* Nothing held back past the stop: the VMM may read the
		 * rings next (GET_VRING_BASE) and no timer runs after it. */
		net_irq_send_due(d, q);
		q->configured = false;
		q->stopped = true;
	}
	if (ret_avail)
		*ret_avail = q->vq.last_avail_idx;
	if (ret_used)
		*ret_used = q->vq.used_idx;
}
