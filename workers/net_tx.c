/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * net_tx: guest -> backend (see net.h).
 *
 * One chain is one frame: the 12-byte virtio_net_hdr_v1, then the Ethernet
 * frame. The header is copied once into a local (it may be split across
 * any number of descriptors, TESTPLAN G14) and only that copy is checked
 * (G15) and used: a tap gets the copy as its vnet header, never the guest's
 * bytes, so a guest rewriting the header after the check changes nothing
 * (G16). The frame itself goes from guest memory to the backend in one
 * writev/sendmsg.
 *
 * When to drain is the policy's business (policy.h): this file only
 * drains, up to the budget.
 */
#include "config.h"

#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "fault.h"
#include "iov.h"
#include "workers/net_priv.h"

/*
 * net_tx_hdr_check - validate the header snapshot for a frame of frame_len
 * bytes (virtio-net header excluded), against the negotiated features
 * (spec 5.1.6.2). Fixes the copy up for the backend: flags other than
 * NEEDS_CSUM are cleared (DATA_VALID and RSC_INFO are for RX only, spec
 * 5.1.6.2.1; unknown bits are ignored), gso fields are zeroed without GSO,
 * num_buffers is 0 on TX.
 * Returns: NULL when the frame may be sent, else why it may not.
 */
static const char *net_tx_hdr_check(const struct net_dev *d, struct virtio_net_hdr_v1 *h,
				    size_t frame_len)
{
	unsigned gso = h->gso_type, base;
	uint32_t csum_start = le16toh(h->csum_start);
	uint32_t csum_offset = le16toh(h->csum_offset);
	uint32_t hdr_len = le16toh(h->hdr_len);
	uint32_t gso_size = le16toh(h->gso_size);

	h->flags &= VIRTIO_NET_HDR_F_NEEDS_CSUM;
	h->num_buffers = 0;

	if (h->flags & VIRTIO_NET_HDR_F_NEEDS_CSUM) {
		if (!net_has(d, VIRTIO_NET_F_CSUM))
			return "NEEDS_CSUM without VIRTIO_NET_F_CSUM";
		/* The 16-bit checksum is stored at csum_start + csum_offset:
		 * both bytes inside the frame (32-bit sums cannot wrap). */
		if (csum_start + csum_offset + 2u > frame_len)
			return "csum_start + csum_offset beyond the frame";
	}
	if ((gso & VIRTIO_NET_HDR_GSO_UDP_TUNNEL_IPV4) && (gso & VIRTIO_NET_HDR_GSO_UDP_TUNNEL_IPV6))
		return "both UDP tunnel GSO bits set";
	base = gso & ~VIRTIO_NET_HDR_GSO_ECN;
	if (base == VIRTIO_NET_HDR_GSO_NONE) {
		if (gso & VIRTIO_NET_HDR_GSO_ECN)
			return "GSO_ECN without a GSO type";
		h->gso_size = 0;
	} else {
		switch (base) {
		case VIRTIO_NET_HDR_GSO_TCPV4:
			if (!net_has(d, VIRTIO_NET_F_HOST_TSO4))
				return "GSO_TCPV4 without VIRTIO_NET_F_HOST_TSO4";
			break;
		case VIRTIO_NET_HDR_GSO_TCPV6:
			if (!net_has(d, VIRTIO_NET_F_HOST_TSO6))
				return "GSO_TCPV6 without VIRTIO_NET_F_HOST_TSO6";
			break;
		case VIRTIO_NET_HDR_GSO_UDP:
			if (!net_has(d, VIRTIO_NET_F_HOST_UFO))
				return "GSO_UDP without VIRTIO_NET_F_HOST_UFO";
			/* Spec 5.1.6.2.1: a GSO frame needs its checksum
			 * done by the device; ECN is a TCP flag only. */
			if (!(h->flags & VIRTIO_NET_HDR_F_NEEDS_CSUM))
				return "GSO_UDP without NEEDS_CSUM";
			if (gso & VIRTIO_NET_HDR_GSO_ECN)
				return "GSO_ECN with GSO_UDP";
			break;
		case VIRTIO_NET_HDR_GSO_UDP_L4:
			if (!net_has(d, VIRTIO_NET_F_HOST_USO))
				return "GSO_UDP_L4 without VIRTIO_NET_F_HOST_USO";
			break;
		default:
			/* Tunnel GSO and anything newer: never offered. */
			return "unknown gso_type";
		}
		if ((gso & VIRTIO_NET_HDR_GSO_ECN) && !net_has(d, VIRTIO_NET_F_HOST_ECN))
			return "GSO_ECN without VIRTIO_NET_F_HOST_ECN";
		if (gso_size == 0 || gso_size > frame_len)
			return "gso_size 0 or beyond the frame";
	}
	/* hdr_len is a hint (spec 5.1.6.2), but the tap sizes its linear
	 * buffer with it: never past the frame. */
	if (hdr_len > frame_len)
		return "hdr_len beyond the frame";
	return NULL;
}

/* Return a chain unused (DROP): used length 0. */
static void net_tx_drop(struct net_dev *d, struct net_queue *q, uint16_t head, const char *why)
{
	vring_push(&q->vq, head, 0);
	q->pushed++;
	net_drop(d, q, why);
}

/*
 * net_tx_frame - check a popped chain as one frame: its shape, then the
 * header, copied once into *hdr (G14/G16) and checked (G15). Fills
 * d->iov2 with what the backend gets: *hdr first for a tap, then the
 * frame in guest memory.
 * Returns: NULL with *ret_len (the frame's length) and *ret_niov set, or
 * why the chain must be dropped.
 */
static inline const char *net_tx_frame(struct net_dev *d, const struct vring_chain *c,
				       struct virtio_net_hdr_v1 *hdr, size_t *ret_len,
				       unsigned *ret_niov)
{
	const char *why;
	size_t frame_len, got;
	unsigned n = 0;

	/* G11: the device never writes to a TX chain; a writable descriptor
	 * there is a driver bug. Return it unused rather than leak it. */
	if (c->nin > 0)
		return "device-writable descriptor in a TX chain";
	if (c->truncated)
		return "chain needs more iovecs than writev takes";
	/* G13: header only or less (no len - hdr underflow below). */
	if (c->out_len <= NET_HDR_LEN)
		return "runt: no frame after the virtio-net header";
	/* G12: out_len is 64-bit, no sum of descriptor lengths wrapped. */
	if (c->out_len > NET_HDR_LEN + NET_MAX_FRAME)
		return "frame longer than NET_MAX_FRAME";
	frame_len = (size_t)c->out_len - NET_HDR_LEN;

	/* G14/G16: one copy of the header, wherever its bytes are. */
	iov_to_buf(c->iov, c->nout, 0, hdr, NET_HDR_LEN);
	__atomic_signal_fence(__ATOMIC_SEQ_CST); /* the copy is not re-read from guest memory */
	why = net_tx_hdr_check(d, hdr, frame_len);
	if (why)
		return why;

	/* A tap and AF_PACKET take the checked copy of the header first. */
	if (d->backend != NET_BACKEND_SOCKET) {
		d->iov2[0].iov_base = hdr;
		d->iov2[0].iov_len = NET_HDR_LEN;
		n = 1;
	}
	n += iov_slice(c->iov, c->nout, NET_HDR_LEN, frame_len, d->iov2 + n,
		       VRING_CHAIN_MAX_IOV - n, &got);
	if (got != frame_len)
		return "chain needs more iovecs than writev takes";
	*ret_len = frame_len;
	*ret_niov = n;
	return NULL;
}

/*
 * net_tx_send - hand the frame net_tx_frame laid out in d->iov2 (niov
 * iovecs, frame_len bytes after the header) to the backend, and account
 * for the chain at head.
 * Returns: 1 the chain was consumed (sent or dropped; *bytes grows by
 * frame_len); -EAGAIN the backend is full (the chain was given back with
 * vring_unpop).
 */
static inline int net_tx_send(struct net_dev *d, struct net_queue *q, uint16_t head,
			      unsigned niov, size_t frame_len, size_t *bytes)
{
	ssize_t w;
	int fe;

	fe = FAULT_ERRNO("worker.tx.send");
	if (fe) {
		errno = fe; /* fault injection: the write fails without being made */
		w = -1;
	} else if (d->backend == NET_BACKEND_AF_PACKET) {
		/* Into the next TX slot; sent with the burst (net_tx_drain). */
		int r = net_afp_tx_put(d, q, d->iov2, niov, frame_len);

		if (r == -EAGAIN) {
			vring_unpop(&q->vq, 1);
			return -EAGAIN;
		}
		vring_push(&q->vq, head, 0);
		q->pushed++;
		/* Counted as sent by the burst's kick (net_afp_tx_kick). */
		if (r < 0) /* every length bounded: never past a slot */
			net_drop(d, q, "frame longer than an AF_PACKET TX slot");
		*bytes += frame_len;
		return 1;
	} else if (d->backend == NET_BACKEND_TAP) {
		w = net_tap_writev(net_pair_fd(d, q), d->iov2, (int)niov);
	} else {
		struct msghdr msg = { .msg_iov = d->iov2, .msg_iovlen = niov };

		w = sendmsg(net_pair_fd(d, q), &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
	}
	if (w < 0) {
		int e = errno;

		if (e == EAGAIN || e == EWOULDBLOCK || e == EINTR || e == ENOBUFS) {
			/* Keep the chain: popped again when the backend drains. */
			vring_unpop(&q->vq, 1);
			return -EAGAIN;
		}
		stats_add(&q->st->errors, 1);
		vring_push(&q->vq, head, 0);
		q->pushed++;
		stats_add(&q->st->drops, 1);
		net_guest_log(d, q, "tx%u: backend refused a frame of %zu bytes: %s", q->idx / 2,
			      frame_len, strerror(e));
		return 1;
	}
	/* A tap or a datagram socket takes a frame whole or not at all. */
	if ((size_t)w != frame_len + (d->backend == NET_BACKEND_TAP ? NET_HDR_LEN : 0)) {
		stats_add(&q->st->errors, 1);
		stats_add(&q->st->drops, 1);
	} else {
		stats_add(&q->st->packets, 1);
		stats_add(&q->st->bytes, frame_len);
	}
	/* TX buffers are only read: used length 0 (spec 2.7.8). */
	vring_push(&q->vq, head, 0);
	q->pushed++;
	*bytes += frame_len;
	return 1;
}

/*
 * net_tx_one - send one chain.
 * Returns: 1 a chain was consumed (sent or dropped; *bytes grows by its
 * frame length); 0 the ring is empty; -EAGAIN the backend is full (the
 * chain was given back with vring_unpop); -EIO the queue is broken.
 */
static int net_tx_one(struct net_dev *d, struct net_queue *q, size_t *bytes)
{
	struct vring_chain *c = &d->chain;
	struct virtio_net_hdr_v1 hdr; /* d->iov2[0] points here for a tap */
	const char *why;
	size_t frame_len = 0;
	unsigned n = 0;
	int r;

	r = vring_pop(&q->vq, c);
	if (r < 0)
		return -EIO;
	if (r == 0)
		return 0;
	FAULT_POINT("worker.tx.after_pop");
	why = net_tx_frame(d, c, &hdr, &frame_len, &n);
	if (why) {
		net_tx_drop(d, q, c->head, why);
		return 1;
	}
	return net_tx_send(d, q, c->head, n, frame_len, bytes);
}

enum net_run net_tx_drain(struct net_dev *d, struct net_queue *q, struct net_tx_budget *b)
{
	int r = 0;

	while (b->pkts > 0 && b->bytes > 0) {
		size_t bytes = 0;

		r = net_tx_one(d, q, &bytes);
		if (r != 1)
			break;
		b->pkts--;
		b->bytes = bytes < b->bytes ? b->bytes - bytes : 0;
		b->done++;
	}
	/* AF_PACKET: the burst's frames leave with one call. */
	if (d->afp)
		net_afp_tx_kick(d, q);
	if (r == -EIO)
		return net_report_broken(d, q);
	if (r == -EAGAIN)
		return NET_TX_BLOCKED;
	return r == 1 ? NET_MORE : NET_IDLE;
}
