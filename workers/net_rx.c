/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * net_rx: backend -> guest (see net.h).
 *
 * A frame lands in the guest as the 12-byte virtio_net_hdr_v1 followed by
 * the Ethernet frame. We pop heads until their writable bytes cover the
 * largest frame (NET_HDR_LEN + NET_MAX_FRAME), or the ring runs out, and
 * read the backend straight into them: a tap writes the vnet header itself
 * (all but num_buffers), a socket frame gets a zeroed header. Then
 * num_buffers is set, the heads used are pushed and the rest given back
 * (vring_unpop). With MRG_RXBUF one frame may take many heads (spec
 * 5.1.6.4); without it one chain must hold the whole frame.
 *
 * Without MRG_RXBUF a frame is read straight into its one chain, and
 * dropped if it was longer. With MRG_RXBUF, when the ring holds less than
 * the largest frame, we learn this frame's size first: a socket is peeked
 * (MSG_PEEK | MSG_TRUNC); a tap cannot be, so its frame is read into the
 * queue's hold buffer and copied in once the guest has room. A frame that
 * cannot fit even then is dropped.
 *
 * Heads are held across the frames of one run and pushed at its end (see
 * net_rx_collect), so the buffers of a run are popped once.
 */
#include "config.h"

#include <endian.h>
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "iov.h"
#include "workers/net_priv.h"

/* recv(fd, NULL, 0, flags) through recvmsg: the sandbox allows recvmsg
 * only (recv is recvfrom, which it refuses). With MSG_PEEK|MSG_TRUNC it
 * returns the size of the next datagram; without MSG_PEEK it discards it. */
static ssize_t sock_recv_nothing(int fd, int flags)
{
	struct msghdr mh = { .msg_name = NULL };

	return recvmsg(fd, &mh, flags);
}

/*
 * Heads are popped until they cover the largest frame and held across the
 * frames of one run: a 60-byte frame in 4 KiB buffers takes one head and
 * leaves the other 16 for the next frame, instead of popping 17 each time.
 * Filled heads are recorded in q->done and pushed at the end of the run,
 * after the held ones are given back (vring_unpop takes the last chains
 * popped since the last push, so no push may come between).
 */

/*
 * net_rx_collect - pop heads onto the held set until its capacity reaches
 * need, the ring is empty, or a limit is hit (one head without MRG_RXBUF;
 * VRING_CHAIN_MAX_IOV iovecs in all, G19).
 * Returns: 0 (*ret_limit: stopped by a limit, more guest buffers would
 * not help), or -EIO when the queue is (now) broken.
 */
static int net_rx_collect(struct net_dev *d, struct net_queue *q, uint64_t need, bool *ret_limit)
{
	struct vring_chain *c = &d->chain;
	bool mrg = net_has(d, VIRTIO_NET_F_MRG_RXBUF);

	*ret_limit = false;
	while (d->rx_cap < need) {
		uint64_t cap;
		int r;

		if ((!mrg && d->rx_nheads == 1) || d->rx_nheads == VRING_CHAIN_MAX_IOV) {
			*ret_limit = true;
			break;
		}
		r = vring_pop(&q->vq, c);
		if (r < 0)
			return -EIO;
		if (r == 0)
			break;
		/* G11 on RX: an RX queue holds buffers for the device to
		 * fill; a readable one is a driver bug. BROKEN. */
		if (c->nout > 0) {
			vring_mark_broken(&q->vq, "RX chain from head %u has %u device-readable "
					  "descriptors", c->head, c->nout);
			return -EIO;
		}
		cap = iov_size(c->iov, c->nin);
		/* G18: spec 5.1.6.3.1, each buffer MUST hold at least the
		 * header; such a buffer could never be used. BROKEN. */
		if (cap < NET_HDR_LEN) {
			vring_mark_broken(&q->vq, "RX buffer at head %u holds %llu bytes, less than "
					  "the %u-byte virtio-net header", c->head,
					  (unsigned long long)cap, NET_HDR_LEN);
			return -EIO;
		}
		if (d->rx_niov + c->nin > VRING_CHAIN_MAX_IOV) {
			vring_unpop(&q->vq, 1);
			*ret_limit = true;
			break;
		}
		if (cap > UINT32_MAX)
			cap = UINT32_MAX; /* more than any frame needs */
		memcpy(&d->iov[d->rx_niov], c->iov, c->nin * sizeof(c->iov[0]));
		d->heads[d->rx_nheads] = c->head;
		d->head_cap[d->rx_nheads] = (uint32_t)cap;
		d->head_niov[d->rx_nheads] = (uint16_t)c->nin;
		d->rx_nheads++;
		d->rx_niov += c->nin;
		d->rx_cap += cap;
	}
	return 0;
}

/* net_rx_log - live migration (issue 14): bytes [0, len) of the held
 * buffers were written (a header and a frame, or a frame then dropped):
 * mark their guest pages, as vhost's log array does for the writable
 * descriptors up to the used length. Every iovec lies inside one region
 * (memtable_to_iov splits at region ends), so one reverse lookup each;
 * one cannot fail for an iovec memtable made. */
static void net_rx_log(struct net_dev *d, const struct net_queue *q, size_t len)
{
	for (unsigned i = 0; i < d->rx_niov && len > 0; i++) {
		size_t l = d->iov[i].iov_len < len ? d->iov[i].iov_len : len;
		uint64_t gpa;

		if (memtable_gpa_of(q->vq.mt, d->iov[i].iov_base, l, &gpa) == 0)
			dirtylog_mark(d->log, gpa, l);
		len -= l;
	}
}

/* net_rx_deliver - total bytes (header included) are in the first held
 * heads: set num_buffers, record those heads as done, drop them from the
 * held set. */
static void net_rx_deliver(struct net_dev *d, struct net_queue *q, size_t total)
{
	unsigned used = 0, niov = 0;
	size_t left = total;
	uint64_t cap = 0;
	uint16_t nb;

	/* Spec 5.1.6.4: num_buffers is the number of heads the frame took
	 * (1 without MRG_RXBUF). Inside the first head: its capacity is at
	 * least NET_HDR_LEN (net_rx_collect). */
	while (left > 0 && used < d->rx_nheads) {
		left -= left < d->head_cap[used] ? left : d->head_cap[used];
		used++;
	}
	nb = htole16((uint16_t)used);
	iov_from_buf(d->iov, d->rx_niov, offsetof(struct virtio_net_hdr_v1, num_buffers), &nb,
		     sizeof(nb));
	if (__builtin_expect(d->log != NULL, 0))
		net_rx_log(d, q, total); /* before the iovecs are dropped below */
	left = total;
	for (unsigned i = 0; i < used; i++) {
		uint32_t len = left < d->head_cap[i] ? (uint32_t)left : d->head_cap[i];

		/* At most num: each held head is in flight, and vring_pop
		 * never lets more than num be (G5); the test is a guard. */
		if (q->ndone < q->vq.num) {
			q->done_head[q->ndone] = d->heads[i];
			q->done_len[q->ndone] = len;
			q->ndone++;
		}
		left -= len;
		niov += d->head_niov[i];
		cap += d->head_cap[i];
	}
	d->rx_nheads -= used;
	d->rx_niov -= niov;
	d->rx_cap -= cap;
	memmove(d->heads, d->heads + used, d->rx_nheads * sizeof(d->heads[0]));
	memmove(d->head_cap, d->head_cap + used, d->rx_nheads * sizeof(d->head_cap[0]));
	memmove(d->head_niov, d->head_niov + used, d->rx_nheads * sizeof(d->head_niov[0]));
	memmove(d->iov, d->iov + niov, d->rx_niov * sizeof(d->iov[0]));
	stats_add(&q->st->packets, 1);
	stats_add(&q->st->bytes, total - NET_HDR_LEN);
}

/* net_rx_commit - end of a run: give back the held heads, then push the
 * filled ones in order (the used entries are not visible before
 * net_flush). */
static void net_rx_commit(struct net_dev *d, struct net_queue *q)
{
	vring_unpop(&q->vq, (uint16_t)d->rx_nheads);
	d->rx_nheads = 0;
	d->rx_niov = 0;
	d->rx_cap = 0;
	for (unsigned i = 0; i < q->ndone; i++)
		vring_push(&q->vq, q->done_head[i], q->done_len[i]);
	q->pushed += q->ndone;
	q->ndone = 0;
}

/* A read that failed: the backend is empty (0) or down (-EPIPE). Called
 * right after the failed call, before errno changes. */
static inline ssize_t net_rx_read_error(void)
{
	if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
		return 0;
	return -EPIPE;
}

/* net_rx_socket_read - receive one datagram into the buffers after the
 * header. Returns: frame bytes, 0 when empty (EAGAIN), -EMSGSIZE when the
 * frame was longer than the buffers (consumed), -EPIPE on EOF or error. */
static ssize_t net_rx_socket_read(struct net_dev *d, struct net_queue *q)
{
	struct msghdr msg = { 0 };
	size_t got;
	ssize_t r;

	msg.msg_iov = d->iov2;
	/* At most NET_MAX_FRAME: a longer datagram shows MSG_TRUNC (G12). */
	msg.msg_iovlen = iov_slice(d->iov, d->rx_niov, NET_HDR_LEN,
				   (d->rx_cap < NET_HDR_LEN + NET_MAX_FRAME ? d->rx_cap
				    : NET_HDR_LEN + NET_MAX_FRAME) - NET_HDR_LEN,
				   d->iov2, VRING_CHAIN_MAX_IOV, &got);
	r = recvmsg(net_pair_fd(d, q), &msg, MSG_DONTWAIT);
	if (r < 0)
		return net_rx_read_error();
	if (r == 0 && d->sock_type == SOCK_SEQPACKET)
		return -EPIPE; /* peer closed (an empty record is no frame either) */
	if (msg.msg_flags & MSG_TRUNC)
		return -EMSGSIZE;
	return r;
}

/* net_rx_socket_frame - a socket frame as the guest sees it: the datagram
 * after a zeroed header. Returns: as net_rx_socket_read, the header
 * counted in the bytes. */
static inline ssize_t net_rx_socket_frame(struct net_dev *d, struct net_queue *q)
{
	static const struct virtio_net_hdr_v1 zero;
	ssize_t r = net_rx_socket_read(d, q);

	if (r > 0) {
		iov_from_buf(d->iov, d->rx_niov, 0, &zero, NET_HDR_LEN);
		r += NET_HDR_LEN;
	}
	return r;
}

/* net_rx_tap_read - read a tap frame (vnet header first) straight into
 * the buffers. Returns: bytes, 0 when empty, -EMSGSIZE when the frame was
 * shorter than the header or longer than the buffers (consumed), -EPIPE
 * when the tap is down. */
static inline ssize_t net_rx_tap_read(struct net_dev *d, struct net_queue *q)
{
	const uint64_t full = NET_HDR_LEN + NET_MAX_FRAME;
	/* At most the largest frame, wherever the buffers end; one byte of
	 * the hold buffer after them shows a frame longer than that. A tap
	 * also returns the untruncated length, but we do not rely on it: a
	 * backend that truncates silently (a SOCK_SEQPACKET stand-in) would
	 * otherwise pass a frame longer than the largest as one of exactly
	 * the largest size, cut short. */
	uint64_t lim = d->rx_cap < full ? d->rx_cap : full;
	unsigned n = iov_slice(d->iov, d->rx_niov, 0, lim, d->iov2, VRING_CHAIN_MAX_IOV - 1, NULL);
	ssize_t r;

	d->iov2[n].iov_base = q->hold;
	d->iov2[n].iov_len = 1;
	n++;
	r = net_tap_readv(net_pair_fd(d, q), d->iov2, (int)n);
	if (r < 0)
		return net_rx_read_error();
	if ((size_t)r < NET_HDR_LEN || (uint64_t)r > lim)
		return -EMSGSIZE;
	return r;
}

/* net_rx_frame_size - MRG_RXBUF, low on buffers: learn the next frame's
 * size, header included, without taking it from a socket (peeked) or
 * into the buffers from a tap (read into the hold buffer, once).
 * Returns: 1 with *total set; else as net_rx_tap_read. */
static inline ssize_t net_rx_frame_size(struct net_dev *d, struct net_queue *q, size_t *total)
{
	const uint64_t full = NET_HDR_LEN + NET_MAX_FRAME;
	int fd = net_pair_fd(d, q);
	ssize_t r;

	if (d->backend == NET_BACKEND_TAP) {
		if (!q->hold_len) {
			/* One byte more than the largest frame shows a longer one. */
			struct iovec hv = { .iov_base = q->hold, .iov_len = full + 1 };

			r = net_tap_readv(fd, &hv, 1);
			if (r < 0)
				return net_rx_read_error();
			if ((size_t)r < NET_HDR_LEN || (uint64_t)r > full)
				return -EMSGSIZE;
			q->hold_len = (size_t)r;
		}
		*total = q->hold_len;
		return 1;
	}
	r = sock_recv_nothing(fd, MSG_PEEK | MSG_TRUNC | MSG_DONTWAIT);
	if (r < 0)
		return net_rx_read_error();
	if (r == 0 && d->sock_type == SOCK_SEQPACKET)
		return -EPIPE;
	*total = (size_t)r + NET_HDR_LEN;
	return 1;
}

/* net_rx_read_sized - MRG_RXBUF, low on buffers: move the frame in once
 * the held buffers can take it, wait for more buffers, or drop it.
 * Returns: as net_rx_tap_read, or -ENOBUFS to wait for the guest. */
static ssize_t net_rx_read_sized(struct net_dev *d, struct net_queue *q, bool limit)
{
	const uint64_t full = NET_HDR_LEN + NET_MAX_FRAME;
	size_t total;
	ssize_t r = net_rx_frame_size(d, q, &total);

	if (r <= 0)
		return r;
	if (total <= d->rx_cap && total <= full) {
		if (d->backend != NET_BACKEND_TAP)
			return net_rx_socket_frame(d, q);
		iov_from_buf(d->iov, d->rx_niov, 0, q->hold, q->hold_len);
		q->hold_len = 0;
		return (ssize_t)total;
	}
	if (total <= full && net_has(d, VIRTIO_NET_F_MRG_RXBUF) && !limit) {
		/* G19: wait for the guest to add buffers (the held ones
		 * are given back at the end of the run). */
		return -ENOBUFS;
	}
	/* G18: the frame cannot fit (one chain without MRG_RXBUF, or the
	 * iovec limit): drop the frame, keep the buffers. */
	if (d->backend == NET_BACKEND_TAP)
		q->hold_len = 0;
	else
		(void)sock_recv_nothing(net_pair_fd(d, q), MSG_DONTWAIT);
	return -EMSGSIZE;
}

/*
 * net_rx_afp_one - net_rx_one for AF_PACKET (net_afp.c): the frame waits
 * in the ring, its size known, until the guest's buffers hold it; then
 * its header and bytes are copied in and the frame consumed.
 */
static int net_rx_afp_one(struct net_dev *d, struct net_queue *q, size_t *bytes,
			  uint16_t *ret_seen)
{
	struct net_afp_frame fr;
	const char *why = NULL;
	size_t total;
	bool limit;
	int r = net_afp_rx_peek(d, &fr, &why);

	if (r == 0)
		return 0;
	if (r < 0) {
		net_afp_rx_consume(d);
		net_drop(d, q, why);
		return 1;
	}
	total = NET_HDR_LEN + (size_t)fr.len;
	if (net_rx_collect(d, q, total, &limit) < 0)
		return -EIO;
	*ret_seen = q->vq.last_avail_idx;
	if (d->rx_nheads == 0)
		return -ENOBUFS; /* G20: ring empty; the frame stays */
	if (total > d->rx_cap) {
		/* G19: wait for more buffers; G18: cannot fit, drop. */
		if (net_has(d, VIRTIO_NET_F_MRG_RXBUF) && !limit)
			return -ENOBUFS;
		net_afp_rx_consume(d);
		net_drop(d, q, "frame larger than the RX buffers");
		return 1;
	}
	net_afp_rx_finish(&fr);
	iov_from_buf(d->iov, d->rx_niov, 0, &fr.hdr, NET_HDR_LEN);
	iov_from_buf(d->iov, d->rx_niov, NET_HDR_LEN, fr.data, fr.len);
	net_afp_rx_consume(d);
	net_rx_deliver(d, q, total);
	*bytes += total;
	return 1;
}

/*
 * net_rx_one - move one frame.
 * Returns: 1 a frame was delivered or dropped (*bytes grows); 0 the
 * backend is empty; -ENOBUFS the guest lacks buffers (*ret_seen: the
 * avail index looked up to); -EIO broken; -EPIPE backend down.
 */
static int net_rx_one(struct net_dev *d, struct net_queue *q, size_t *bytes, uint16_t *ret_seen)
{
	const uint64_t full = NET_HDR_LEN + NET_MAX_FRAME;
	bool limit;
	ssize_t r;

	if (d->backend == NET_BACKEND_AF_PACKET)
		return net_rx_afp_one(d, q, bytes, ret_seen);
	if (net_rx_collect(d, q, q->hold_len ? q->hold_len : full, &limit) < 0)
		return -EIO;
	*ret_seen = q->vq.last_avail_idx;
	if (d->rx_nheads == 0)
		return -ENOBUFS; /* G20: ring empty */

	/* Read straight into the buffers when they hold any frame, or
	 * without MRG_RXBUF, where a frame that does not fit its one chain
	 * is dropped anyway (the kernel tells: a tap returns the untruncated
	 * length, a socket sets MSG_TRUNC). */
	if (!q->hold_len && (d->rx_cap >= full || !net_has(d, VIRTIO_NET_F_MRG_RXBUF)))
		r = d->backend == NET_BACKEND_TAP ? net_rx_tap_read(d, q) : net_rx_socket_frame(d, q);
	else
		r = net_rx_read_sized(d, q, limit);

	if (r == -ENOBUFS)
		return -ENOBUFS;
	if (r <= 0) {
		/* Nothing written that counts: the held heads stay held. */
		if (r == 0)
			return 0;
		if (r == -EPIPE) {
			stats_add(&q->st->errors, 1);
			return -EPIPE;
		}
		/* A read straight into the buffers may have filled them
		 * before the frame proved too long: the guest never sees
		 * those bytes, but they changed its memory. */
		if (__builtin_expect(d->log != NULL, 0))
			net_rx_log(d, q, d->rx_cap < full ? d->rx_cap : full);
		net_drop(d, q, "frame larger than the RX buffers");
		return 1;
	}
	net_rx_deliver(d, q, (size_t)r);
	*bytes += (size_t)r;
	return 1;
}

/* Kicks on, then re-check (Barrier K in vring_notify_enable): did the
 * guest add buffers beyond the ones we saw? */
static bool net_rx_recheck(struct net_queue *q, uint16_t seen)
{
	if (!vring_notify_enable(&q->vq))
		return false;
	return le16toh(__atomic_load_n(&q->vq.avail->idx, __ATOMIC_ACQUIRE)) != seen;
}

enum net_run net_rx_run(struct net_dev *d, unsigned qidx)
{
	struct net_queue *q;
	enum net_run ret = NET_MORE;
	size_t bytes = 0;

	if (qidx >= 2 * d->npairs || (qidx & 1u))
		return NET_IDLE;
	q = &d->q[qidx];
	if (!q->configured)
		return NET_IDLE;
	if (q->vq.broken)
		return net_report_broken(d, q);
	/* RX wants kicks only while waiting for buffers (net_rx_recheck). */
	vring_notify_disable(&q->vq);
	/* G21: bounded in iterations (frames, and waits that found new
	 * buffers) and bytes. */
	for (unsigned iter = 0; iter < d->budget_pkts && bytes < d->budget_bytes; iter++) {
		uint16_t seen = 0;
		int r = net_rx_one(d, q, &bytes, &seen);

		if (r == 1)
			continue;
		if (r == 0) {
			ret = NET_IDLE;
			break;
		}
		if (r == -EIO) {
			net_rx_commit(d, q); /* pushes nothing on a broken ring */
			net_flush(d, q);
			return net_report_broken(d, q);
		}
		if (r == -EPIPE) {
			ret = NET_BACKEND_DOWN;
			break;
		}
		/* -ENOBUFS, G20: sleep until the guest kicks, unless it
		 * added buffers meanwhile. */
		if (!net_rx_recheck(q, seen)) {
			ret = NET_RX_NOBUF;
			break;
		}
		vring_notify_disable(&q->vq);
	}
	net_rx_commit(d, q);
	net_flush(d, q);
	if (d->afp) {
		unsigned lost = net_afp_rx_lost(d);

		if (lost) {
			stats_add(&q->st->drops, lost);
			net_guest_log(d, q, "rx%u: the AF_PACKET ring was full: the kernel dropped "
				      "%u frames", q->idx / 2, lost);
		}
		if (ret == NET_IDLE && bytes == 0)
			net_afp_rx_idle(d);
	}
	return ret;
}
