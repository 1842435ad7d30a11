/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * net_afp: the AF_PACKET backend's rings in the worker (issue 17).
 *
 * The supervisor opened the socket (afpacket.c): TPACKET_V3, a 10-byte
 * struct virtio_net_hdr before every frame (PACKET_VNET_HDR), bound to
 * one interface. Here, before the sandbox: the rings are reset (a
 * predecessor's RX blocks and TX slots are dropped with the old rings,
 * so both cursors start at 0, see afp_ring_setup) and mapped once.
 *
 * RX: blocks are read in ring order. A block is the worker's once the
 * kernel sets TP_STATUS_USER in its header; its frames are walked by
 * tp_next_offset, each checked to lie inside the block, and the block
 * goes back to the kernel (TP_STATUS_KERNEL) after its last frame. A
 * frame stays in the ring until it is delivered or dropped: the ring is
 * the RX hold buffer, and its size is known before any guest buffer is
 * touched. When it is full (a guest that posts no buffers) the kernel
 * drops what arrives; the worker reads that count (PACKET_STATISTICS)
 * when it may have grown and adds it to the queue's drops.
 *
 * TX: frames are copied into consecutive slots (virtio_net_hdr, then the
 * frame), marked TP_STATUS_SEND_REQUEST, and sent by one sendmsg() of no
 * data per burst (net_afp_tx_kick). A slot that is not free means the
 * ring is full: the burst is kicked and the queue waits for POLLOUT,
 * which the kernel raises when the slot after its last one is free again.
 */
#include "config.h"

#include <endian.h>
#include <errno.h>
#include <linux/if_packet.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include "afp_ring.h"
#include "iov.h"
#include "workers/net_priv.h"

struct net_afp {
	int fd;
	uint8_t *map;          /* RX ring, then TX ring */
	size_t map_len;
	unsigned rx_blk;       /* next block to read */
	bool rx_maybe_lost;    /* the kernel may have dropped frames: read its count */
	uint8_t *blk;          /* the block being walked, NULL: none */
	uint32_t blk_left;     /* its frames not yet consumed */
	uint32_t pkt_off;      /* the next frame's offset in it */
	unsigned tx_slot;      /* next TX slot to fill: the kernel's head after a kick */
	unsigned tx_pending;   /* slots filled since the last kick */
	uint64_t tx_pending_bytes; /* their frames' bytes */
};

/* The kernel's struct virtio_net_hdr before each frame (PACKET_VNET_HDR)
 * is struct virtio_net_hdr_v1 without num_buffers: its first 10 bytes,
 * little-endian on the little-endian hosts vnicd runs on. */
_Static_assert(offsetof(struct virtio_net_hdr_v1, num_buffers) == AFP_VNET_HDR_LEN,
	       "PACKET_VNET_HDR's header is virtio_net_hdr_v1 up to num_buffers");

static int getopt_int(int fd, int level, int opt, int *val)
{
	socklen_t l = sizeof(*val);

	return getsockopt(fd, level, opt, val, &l);
}

int net_afp_attach(struct net_dev *d, int fd, char *err, size_t errlen)
{
	struct net_afp *a;
	int dom = 0, ver = -1, vnet = 0;
	void *p;
	int r;

	if (getopt_int(fd, SOL_SOCKET, SO_DOMAIN, &dom) < 0 || dom != AF_PACKET ||
	    getopt_int(fd, SOL_PACKET, PACKET_VERSION, &ver) < 0 || ver != TPACKET_V3 ||
	    getopt_int(fd, SOL_PACKET, PACKET_VNET_HDR, &vnet) < 0 || !vnet) {
		snprintf(err, errlen, "backend fd is not an AF_PACKET socket with TPACKET_V3 and "
			 "PACKET_VNET_HDR");
		return -EINVAL;
	}
	r = afp_ring_setup(fd, true, err, errlen);
	if (r < 0)
		return r;
	a = calloc(1, sizeof(*a));
	if (!a) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	a->fd = fd;
	a->map_len = AFP_RX_RING_BYTES + AFP_TX_RING_BYTES;
	p = mmap(NULL, a->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		r = -errno;
		snprintf(err, errlen, "AF_PACKET rings: mmap: %s", strerror(errno));
		free(a);
		return r;
	}
	a->map = p;
	d->afp = a;
	return 0;
}

void net_afp_detach(struct net_dev *d)
{
	if (!d->afp)
		return;
	munmap(d->afp->map, d->afp->map_len);
	free(d->afp);
	d->afp = NULL;
}

/* ---- RX ---- */

static inline struct tpacket_block_desc *afp_block(struct net_afp *a, unsigned i)
{
	return (struct tpacket_block_desc *)(a->map + (size_t)i * AFP_RX_BLOCK_SIZE);
}

/* Hand the block being walked back to the kernel and move to the next. */
static void afp_block_release(struct net_afp *a)
{
	__atomic_store_n(&((struct tpacket_block_desc *)a->blk)->hdr.bh1.block_status,
			 TP_STATUS_KERNEL, __ATOMIC_RELEASE);
	a->blk = NULL;
	a->rx_blk = (a->rx_blk + 1) % AFP_RX_BLOCKS;
}

/* The next frame's header, or NULL when the kernel has handed us none. */
static struct tpacket3_hdr *afp_rx_cur(struct net_afp *a)
{
	for (unsigned i = 0; i < AFP_RX_BLOCKS; i++) {
		struct tpacket_block_desc *b;
		uint32_t st;

		if (a->blk) {
			if (a->blk_left > 0)
				return (struct tpacket3_hdr *)(a->blk + a->pkt_off);
			afp_block_release(a);
		}
		b = afp_block(a, a->rx_blk);
		st = __atomic_load_n(&b->hdr.bh1.block_status, __ATOMIC_ACQUIRE);
		if (!(st & TP_STATUS_USER))
			return NULL;
		/* The kernel drops what arrives while every block is ours
		 * (the ring is full: it waits, frozen, for this one) and
		 * marks the next block it closes TP_STATUS_LOSING. */
		if ((st & TP_STATUS_LOSING) ||
		    (__atomic_load_n(&afp_block(a, (a->rx_blk + AFP_RX_BLOCKS - 1) % AFP_RX_BLOCKS)
					      ->hdr.bh1.block_status, __ATOMIC_RELAXED) &
		     TP_STATUS_USER))
			a->rx_maybe_lost = true;
		a->blk = (uint8_t *)b;
		a->blk_left = b->hdr.bh1.num_pkts;
		a->pkt_off = b->hdr.bh1.offset_to_first_pkt;
		/* Every frame header inside the block (the kernel's
		 * offsets, checked all the same). */
		if (a->pkt_off < sizeof(*b) ||
		    a->pkt_off > AFP_RX_BLOCK_SIZE - sizeof(struct tpacket3_hdr))
			a->blk_left = 0;
	}
	return NULL;
}

unsigned net_afp_rx_lost(struct net_dev *d)
{
	struct net_afp *a = d->afp;
	struct tpacket_stats_v3 st = { 0 };
	socklen_t l = sizeof(st);

	if (!a->rx_maybe_lost)
		return 0;
	a->rx_maybe_lost = false;
	/* Read and reset: tp_drops counts from the previous read. */
	if (getsockopt(a->fd, SOL_PACKET, PACKET_STATISTICS, &st, &l) < 0)
		return 0;
	return st.tp_drops;
}

void net_afp_rx_idle(struct net_dev *d)
{
	struct msghdr mh = { .msg_name = NULL };

	/* A wake-up that found nothing: maybe a socket error (ENETDOWN
	 * when the interface went down), which epoll reports until it is
	 * read. A receive reads it (the ring's socket queues nothing else),
	 * so the worker does not spin on it. */
	(void)recvmsg(d->afp->fd, &mh, MSG_DONTWAIT);
}

void net_afp_rx_consume(struct net_dev *d)
{
	struct net_afp *a = d->afp;
	struct tpacket3_hdr *h = (struct tpacket3_hdr *)(a->blk + a->pkt_off);

	a->blk_left--;
	/* The last frame's next offset is 0; a bad one ends the block. */
	if (a->blk_left > 0 && h->tp_next_offset >= sizeof(*h) &&
	    h->tp_next_offset <= AFP_RX_BLOCK_SIZE - sizeof(*h) - a->pkt_off)
		a->pkt_off += h->tp_next_offset;
	else
		a->blk_left = 0;
	if (a->blk_left == 0)
		afp_block_release(a);
}

/* RFC 1071 sum of len bytes, folded to 16 bits (not complemented). */
static uint16_t afp_csum(const uint8_t *p, size_t len)
{
	uint64_t s = 0;

	for (; len >= 2; p += 2, len -= 2)
		s += (uint32_t)p[0] << 8 | p[1];
	if (len)
		s += (uint32_t)p[0] << 8;
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)s;
}

int net_afp_rx_peek(struct net_dev *d, struct net_afp_frame *fr, const char **why)
{
	struct net_afp *a = d->afp;
	struct tpacket3_hdr *h = afp_rx_cur(a);
	struct virtio_net_hdr_v1 vh = { 0 };
	uint32_t mac, snap, start, off;
	unsigned gso;

	if (!h)
		return 0;
	mac = h->tp_mac;
	snap = h->tp_snaplen;
	/* The kernel's, but every offset is checked before use: the frame
	 * and the header before it inside this block, after its header. */
	if (mac < sizeof(*h) + AFP_VNET_HDR_LEN || mac > AFP_RX_BLOCK_SIZE - a->pkt_off ||
	    snap > AFP_RX_BLOCK_SIZE - a->pkt_off - mac) {
		*why = "AF_PACKET frame outside its block";
		return -EMSGSIZE;
	}
	if (snap < h->tp_len) {
		*why = "AF_PACKET frame larger than an RX block";
		return -EMSGSIZE;
	}
	if (snap == 0 || snap > NET_MAX_FRAME) {
		*why = "AF_PACKET frame empty or larger than NET_MAX_FRAME";
		return -EMSGSIZE;
	}
	fr->data = (uint8_t *)h + mac;
	fr->len = snap;
	memcpy(&vh, fr->data - AFP_VNET_HDR_LEN, AFP_VNET_HDR_LEN);
	memset(&fr->hdr, 0, sizeof(fr->hdr));
	fr->sw_csum = false;
	gso = vh.gso_type;
	if (gso != VIRTIO_NET_HDR_GSO_NONE) {
		unsigned base = gso & ~VIRTIO_NET_HDR_GSO_ECN;

		if (!(base == VIRTIO_NET_HDR_GSO_TCPV4 && net_has(d, VIRTIO_NET_F_GUEST_TSO4)) &&
		    !(base == VIRTIO_NET_HDR_GSO_TCPV6 && net_has(d, VIRTIO_NET_F_GUEST_TSO6))) {
			*why = "GSO frame the guest did not negotiate (turn TSO off on the peer)";
			return -EMSGSIZE;
		}
		if ((gso & VIRTIO_NET_HDR_GSO_ECN) && !net_has(d, VIRTIO_NET_F_GUEST_ECN)) {
			*why = "GSO frame with ECN the guest did not negotiate";
			return -EMSGSIZE;
		}
	}
	fr->hdr.gso_type = (uint8_t)gso;
	fr->hdr.hdr_len = vh.hdr_len;
	fr->hdr.gso_size = vh.gso_size;
	if (vh.flags & VIRTIO_NET_HDR_F_NEEDS_CSUM) {
		start = le16toh(vh.csum_start);
		off = le16toh(vh.csum_offset);
		if ((uint64_t)start + off + 2u > snap) {
			*why = "AF_PACKET frame with a checksum offset beyond it";
			return -EMSGSIZE;
		}
		if (net_has(d, VIRTIO_NET_F_GUEST_CSUM)) {
			fr->hdr.flags = VIRTIO_NET_HDR_F_NEEDS_CSUM;
			fr->hdr.csum_start = vh.csum_start;
			fr->hdr.csum_offset = vh.csum_offset;
		} else {
			/* Finished by net_afp_rx_finish, once, when the
			 * frame is delivered (a peeked frame may wait). */
			fr->csum_start = start;
			fr->csum_offset = off;
			fr->sw_csum = true;
		}
	} else if ((vh.flags & VIRTIO_NET_HDR_F_DATA_VALID) && net_has(d, VIRTIO_NET_F_GUEST_CSUM)) {
		fr->hdr.flags = VIRTIO_NET_HDR_F_DATA_VALID;
	}
	return 1;
}

void net_afp_rx_finish(struct net_afp_frame *fr)
{
	uint16_t c;

	if (!fr->sw_csum)
		return;
	/* As a tap's kernel side would: the field holds the pseudo-header
	 * sum, the sum from csum_start on completes it. The ring is ours
	 * until the block goes back. */
	c = (uint16_t)~afp_csum(fr->data + fr->csum_start, fr->len - fr->csum_start);
	if (c == 0 && fr->csum_offset == 6)
		c = 0xffff; /* UDP (checksum at offset 6): 0 means none */
	fr->data[fr->csum_start + fr->csum_offset] = (uint8_t)(c >> 8);
	fr->data[fr->csum_start + fr->csum_offset + 1] = (uint8_t)c;
	fr->sw_csum = false;
}

/* ---- TX ---- */

static inline struct tpacket3_hdr *afp_tx_slot(struct net_afp *a, unsigned i)
{
	return (struct tpacket3_hdr *)(a->map + AFP_RX_RING_BYTES +
				       (size_t)(i % AFP_TX_FRAMES) * AFP_TX_FRAME_SIZE);
}

void net_afp_tx_kick(struct net_dev *d, struct net_queue *q)
{
	struct net_afp *a = d->afp;
	struct msghdr mh = { .msg_name = NULL };
	const struct tpacket3_hdr *last;
	uint64_t lost_bytes = 0;
	unsigned lost = 0;
	int e = 0;

	if (!a || !a->tx_pending)
		return;
	last = afp_tx_slot(a, a->tx_slot + AFP_TX_FRAMES - 1);
	/* No data: the kernel sends the slots marked SEND_REQUEST from its
	 * head on, and stops at a frame the device refused (dropped and
	 * counted by the device): call again while the burst's last slot is
	 * still marked. Each call takes at least one slot, so a ring's worth
	 * of calls is the bound. */
	for (unsigned i = 0, fails = 0; i < AFP_TX_FRAMES; i++) {
		/* A socket error pending from before (ENETDOWN after a link
		 * flap) fails one call and is cleared by it: one more try. */
		if (sendmsg(a->fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL) < 0 && errno != EINTR) {
			e = errno;
			if (++fails == 2)
				break;
		}
		if (__atomic_load_n(&last->tp_status, __ATOMIC_ACQUIRE) != TP_STATUS_SEND_REQUEST)
			break;
	}
	/* What the kernel did not take (the interface down, no buffer): the
	 * marked slots are the burst's tail, from the kernel's head on, and
	 * only a send on this socket reads them. Dropped here and the cursor
	 * put back on the head, so no slot stays marked: POLLOUT, which
	 * looks at the head slot, then always comes. */
	while (lost < a->tx_pending) {
		struct tpacket3_hdr *h = afp_tx_slot(a, a->tx_slot + AFP_TX_FRAMES - 1 - lost);

		if (__atomic_load_n(&h->tp_status, __ATOMIC_ACQUIRE) != TP_STATUS_SEND_REQUEST)
			break;
		lost_bytes += h->tp_len - AFP_VNET_HDR_LEN;
		__atomic_store_n(&h->tp_status, TP_STATUS_AVAILABLE, __ATOMIC_RELEASE);
		lost++;
	}
	a->tx_slot = (a->tx_slot + AFP_TX_FRAMES - lost) % AFP_TX_FRAMES;
	stats_add(&q->st->packets, a->tx_pending - lost);
	stats_add(&q->st->bytes, a->tx_pending_bytes - lost_bytes);
	a->tx_pending = 0;
	a->tx_pending_bytes = 0;
	if (lost) {
		stats_add(&q->st->drops, lost);
		stats_add(&q->st->errors, 1);
		net_guest_log(d, q, "tx%u: AF_PACKET send: %s: %u frames dropped", q->idx / 2,
			      e ? strerror(e) : "not taken", lost);
	}
}

int net_afp_tx_put(struct net_dev *d, struct net_queue *q, const struct iovec *iov,
		   unsigned niov, size_t frame_len)
{
	struct net_afp *a = d->afp;
	struct tpacket3_hdr *h = afp_tx_slot(a, a->tx_slot);
	uint8_t *slot = (uint8_t *)h;
	const struct virtio_net_hdr_v1 *vh = iov[0].iov_base;
	uint32_t st;

	/* Every length bounded: the header and frame fit one slot. */
	if (frame_len > AFP_TX_MAX_FRAME)
		return -EMSGSIZE;
	st = __atomic_load_n(&h->tp_status, __ATOMIC_ACQUIRE);
	if (st != TP_STATUS_AVAILABLE && !(st & TP_STATUS_WRONG_FORMAT)) {
		/* Full (the slot's frame is still in flight): what is
		 * queued goes now, and POLLOUT tells when this slot, the
		 * kernel's head once every queued one is sent, is free. */
		net_afp_tx_kick(d, q);
		return -EAGAIN;
	}
	/* The checked copy of the guest's header, without num_buffers. */
	memcpy(slot + AFP_TX_DATA_OFF, vh, AFP_VNET_HDR_LEN);
	if (vh->gso_type == VIRTIO_NET_HDR_GSO_NONE && frame_len <= AFP_TX_LINEAR_MAX) {
		/* hdr_len is how much the kernel copies into the skb's own
		 * buffer; the rest it attaches as pages of this ring, which
		 * a veth or any local receiver then copies again into a page
		 * allocated for it (skb_copy_ubufs). A small frame is
		 * cheaper copied whole, once. */
		struct virtio_net_hdr_v1 *sh = (void *)(slot + AFP_TX_DATA_OFF);

		sh->hdr_len = htole16((uint16_t)frame_len);
	}
	if (iov_to_buf(iov + 1, niov - 1, 0, slot + AFP_TX_DATA_OFF + AFP_VNET_HDR_LEN, frame_len) !=
	    frame_len)
		return -EMSGSIZE;
	h->tp_len = (uint32_t)(AFP_VNET_HDR_LEN + frame_len);
	h->tp_snaplen = h->tp_len;
	h->tp_next_offset = 0;
	__atomic_store_n(&h->tp_status, TP_STATUS_SEND_REQUEST, __ATOMIC_RELEASE);
	a->tx_slot = (a->tx_slot + 1) % AFP_TX_FRAMES;
	a->tx_pending++;
	a->tx_pending_bytes += frame_len;
	return 0;
}
