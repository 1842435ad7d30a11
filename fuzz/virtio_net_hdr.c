/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_virtio_net_hdr: the worker's virtio-net data path (workers/net.c,
 * net_tx.c, net_rx.c) with fuzzed virtio-net headers: flags, gso_type,
 * hdr_len, gso_size, csum_start/csum_offset (the class of CVE-2024-11614)
 * and num_buffers, on TX from the guest and on RX from a tap backend.
 *
 * Each input builds one queue pair as tests/check_net.c does: guest
 * memory is a memfd (fuzz_memfd) mapped by memtable_map for the engine
 * and a second time for the simulated guest, which posts chains with
 * shm/vring_drv (the driver side, not the code under test). The backend
 * is a non-blocking socketpair: NET_BACKEND_TAP on SOCK_SEQPACKET (one
 * record = vnet header + frame, as a tap reads and writes them; this is
 * where offloads can be negotiated), or NET_BACKEND_SOCKET on SOCK_DGRAM
 * or SOCK_SEQPACKET (no offload: net_dev_new refuses them there). The
 * harness holds the backend's other end and drains it after every run.
 *
 * Input (little-endian; reading past the end yields zeros):
 *   u8 flags    bit 0: tap (else socket); 1: MRG_RXBUF; 2: EVENT_IDX;
 *               3: socket is SOCK_DGRAM (else SOCK_SEQPACKET);
 *               4: dirty logging on (live migration): after every run,
 *               every guest page that changed must have its bit in the
 *               log, which the harness then clears as a VMM does
 *   u8 offloads (tap only) bit 0 CSUM, 1 HOST_TSO4, 2 HOST_TSO6,
 *               3 HOST_ECN, 4 HOST_UFO, 5 HOST_USO, 6 GUEST_CSUM,
 *               7 GUEST_TSO4/TSO6/ECN/UFO
 *   u8 qsize    both queues have 1 << (qsize % 11) entries (1..1024)
 *   u8 budget   packets per run (0: NET_BUDGET_PKTS)
 *   then operations until the input ends (at most OPS_MAX), a u8 opcode
 *   (modulo OP_COUNT) and its operands, listed at enum op below.
 *
 * Frames carry a sequence number in their first byte and a pattern after
 * it, so each one that comes out is matched with the one that went in.
 * Checked (abort() when false): a TX frame that reaches the backend has a
 * header the backend may trust (only NEEDS_CSUM in flags, num_buffers 0,
 * a GSO type the features allow with gso_size in 1..frame length, ECN
 * only with HOST_ECN, csum_start + csum_offset + 2 and hdr_len within the
 * frame, the guest's other fields unchanged) and the guest's bytes; every
 * TX used length is 0; no guest byte outside the RX buffers posted and the
 * used rings changes during a run; every used id is one in flight
 * (vring_drv_get_used); an RX used length is within its chain (at least
 * the header in the first buffer); num_buffers is 1 without MRG_RXBUF and
 * matches the used entries with it; a delivered frame is the frame sent,
 * with the tap's header (all but num_buffers) or a zero one. Guest writes
 * (OP_WRITE) turn the TX content comparisons off for the rest of the input:
 * a guest that rewrites a buffer before the device reads it sends what it
 * wrote (only TX buffers are rewritten: the rings stay as vring_drv
 * wrote them, fuzz_vring covers hostile rings).
 *
 * Seeds: fuzz/gen_seeds.py virtio_net_hdr DIR (python3, committed) writes
 * fuzz/corpus/virtio_net_hdr/: no offload, CSUM with a valid start and
 * offset, TSO4, TSO6, UDP and USO GSO, ECN, invalid headers (csum beyond
 * the frame, GSO without its feature, gso_size 0), a header split over
 * descriptors, RX with and without MRG_RXBUF (num_buffers > 1), RX frames
 * too large for the buffers, datagram and seqpacket socket backends.
 */
#include "config.h"

#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fuzz.h"
#include "dirtylog.h"
#include "memtable.h"
#include "vring.h"
#include "vring_drv.h"
#include "workers/net.h"
#include "workers/stats.h"

#define GPA_BASE 0x100000ull
#define RXQ 0u
#define TXQ 1u
#define RING_AREA (32u << 10)         /* a ring of up to 1024 entries */
#define TX_OFF (2u * RING_AREA)       /* TX frames: [TX_OFF, RX_OFF) */
#define RX_OFF (TX_OFF + (72u << 10))  /* RX buffers: [RX_OFF, MEM_SIZE) */
#define MEM_SIZE (RX_OFF + (192u << 10))
#define FULL (NET_HDR_LEN + NET_MAX_FRAME)
#define OPS_MAX 512u
#define MAX_SEG 8u

enum op {
	OP_TX,      /* u8 nseg, 12-byte header, u32 frame length, nseg - 1
		     * u16 segment lengths: post one TX chain */
	OP_TX_RUN,  /* net_tx_run, drain the backend */
	OP_RX_BUFS, /* u8 count, then per chain u8 nseg and nseg u16 lengths */
	OP_RX_SEND, /* (tap: 12-byte header) u32 frame length (modulo
		     * NET_MAX_FRAME + 16: too long ones too): into the backend */
	OP_RX_RUN,  /* net_rx_run, reclaim the used RX buffers */
	OP_WRITE,   /* u32 offset, u8 len, len bytes: the guest rewrites memory */
	OP_PEER,    /* u8: even: the backend's far end goes away (TX sends
		     * fail, RX reads end); odd: the engine's send buffer
		     * shrinks to the minimum, so that a burst fills it */
	OP_COUNT
};

/* What the harness remembers of a frame it made, by sequence number. */
struct sent {
	bool valid;
	uint32_t len;                  /* frame bytes, header excluded */
	struct virtio_net_hdr_v1 hdr;  /* TX: as posted; RX tap: as sent */
};

struct rx_buf {
	uint64_t gpa[MAX_SEG];
	uint32_t len[MAX_SEG];
	unsigned nseg;
	uint32_t cap;
};

struct harness {
	int fd;
	uint8_t *guest;               /* the guest's mapping */
	struct memtable *mt;
	struct stats_page *st;
	struct net_dev *d;
	struct vring_drv drv[2];
	bool drv_ok[2];
	int be[2];                    /* be[0] the engine's, be[1] ours (-1: gone) */
	int log_fd;                   /* flags bit 4: the dirty log's memfd */
	uint8_t *log;                 /* ... mapped, as the VMM reads it */
	struct dirtylog *dl;          /* ... mapped by the engine's side */
	unsigned guest_lines;         /* net_guest_log lines that got through */
	uint64_t features;
	bool tap, tainted;
	size_t tx_next, rx_next;      /* bump allocators (memfd offsets) */
	uint8_t tx_seq, rx_seq;
	unsigned tx_count, rx_count;
	struct sent tx[256], rx[256];
	struct rx_buf *rxb;           /* num entries, by head */
	uint8_t *wmask;               /* MEM_SIZE: 1 = the device may write it */
	uint8_t *shadow;              /* guest memory before a run */
	uint8_t *frame;               /* FULL + 64: one frame at a time */
	uint8_t *rx_gather;           /* FULL: an RX frame gathered from its buffers */
};

static struct harness H;

static void cb_notify(void *opaque, unsigned qidx)
{
}

static void cb_broken(void *opaque, unsigned qidx, const char *reason)
{
}

/* The worker passes these to vnicd; their count shows the rate limit. */
static void cb_log(void *opaque, unsigned qidx, const char *line)
{
	(void)opaque;
	(void)qidx;
	(void)line;
	H.guest_lines++;
}

static const struct net_ops ops = { .notify = cb_notify, .broken = cb_broken, .log = cb_log };

static bool has(const struct harness *h, unsigned bit)
{
	return (h->features >> bit) & 1u;
}

/* fill_frame - frame bytes: the sequence number, then a pattern. */
static void fill_frame(uint8_t *p, size_t len, uint8_t seq)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)(seq + i * 7u);
}

static bool frame_ok(const uint8_t *p, size_t len, const struct sent *s)
{
	if (!s->valid || s->len != len)
		return false;
	for (size_t i = 0; i < len; i++)
		if (p[i] != (uint8_t)(p[0] + i * 7u))
			return false;
	return true;
}

/* check_tx_hdr - what a tap may trust in the header the engine wrote
 * (spec 5.1.6.2; net_tx_hdr_check's contract). */
static void check_tx_hdr(const struct harness *h, const struct virtio_net_hdr_v1 *v, size_t flen,
			 const struct sent *s)
{
	unsigned gso = v->gso_type, base = gso & ~VIRTIO_NET_HDR_GSO_ECN;
	uint32_t start = le16toh(v->csum_start), off = le16toh(v->csum_offset);
	uint32_t gsz = le16toh(v->gso_size);

	if ((v->flags & ~VIRTIO_NET_HDR_F_NEEDS_CSUM) || v->num_buffers)
		abort();
	if ((v->flags & VIRTIO_NET_HDR_F_NEEDS_CSUM) &&
	    (!has(h, VIRTIO_NET_F_CSUM) || start + off + 2u > flen))
		abort();
	if (le16toh(v->hdr_len) > flen)
		abort();
	switch (base) {
	case VIRTIO_NET_HDR_GSO_NONE:
		if (gso != base || gsz)
			abort();
		break;
	case VIRTIO_NET_HDR_GSO_TCPV4:
		if (!has(h, VIRTIO_NET_F_HOST_TSO4))
			abort();
		break;
	case VIRTIO_NET_HDR_GSO_TCPV6:
		if (!has(h, VIRTIO_NET_F_HOST_TSO6))
			abort();
		break;
	case VIRTIO_NET_HDR_GSO_UDP:
		if (!has(h, VIRTIO_NET_F_HOST_UFO) || gso != base ||
		    !(v->flags & VIRTIO_NET_HDR_F_NEEDS_CSUM))
			abort();
		break;
	case VIRTIO_NET_HDR_GSO_UDP_L4:
		if (!has(h, VIRTIO_NET_F_HOST_USO))
			abort();
		break;
	default:
		abort();
	}
	if (base != VIRTIO_NET_HDR_GSO_NONE && (gsz == 0 || gsz > flen))
		abort();
	if ((gso & VIRTIO_NET_HDR_GSO_ECN) && !has(h, VIRTIO_NET_F_HOST_ECN))
		abort();
	/* Only the documented fix-ups: the rest is the guest's header. */
	if (!h->tainted && (v->gso_type != s->hdr.gso_type || v->hdr_len != s->hdr.hdr_len ||
			    v->csum_start != s->hdr.csum_start ||
			    v->csum_offset != s->hdr.csum_offset ||
			    (gsz && v->gso_size != s->hdr.gso_size)))
		abort();
}

/* drain_backend - every TX frame the engine wrote, checked. */
static void drain_backend(struct harness *h)
{
	ssize_t r;

	while (h->be[1] >= 0 &&
	       (r = recv(h->be[1], h->frame, FULL + 64, MSG_DONTWAIT | MSG_TRUNC)) >= 0) {
		struct virtio_net_hdr_v1 v;
		const uint8_t *f = h->frame;
		size_t flen = (size_t)r;

		if ((size_t)r > FULL)
			abort();
		if (h->tap) {
			if (flen <= NET_HDR_LEN)
				abort();
			memcpy(&v, f, NET_HDR_LEN);
			f += NET_HDR_LEN;
			flen -= NET_HDR_LEN;
		}
		if (flen == 0 || flen > NET_MAX_FRAME)
			abort(); /* G13: a runt never leaves */
		if (h->tap)
			check_tx_hdr(h, &v, flen, &h->tx[f[0]]);
		if (!h->tainted && !frame_ok(f, flen, &h->tx[f[0]]))
			abort();
	}
}

/* The dirty log (flags bit 4) covers all of guest memory: a bit per
 * 4 KiB page from gpa 0. */
static size_t log_size(void)
{
	return (size_t)((GPA_BASE + MEM_SIZE + 4096 * 8 - 1) / (4096 * 8));
}

static bool log_bit(const struct harness *h, uint64_t gpa)
{
	uint64_t page = gpa / 4096;

	return (__atomic_load_n(&h->log[page / 8], __ATOMIC_ACQUIRE) >> (page % 8)) & 1u;
}

/* run_checked - one engine run with the "nothing outside the RX buffers
 * and the used rings changes" check around it. */
static enum net_run run_checked(struct harness *h, bool tx)
{
	enum net_run r;

	memcpy(h->shadow, h->guest, MEM_SIZE);
	r = tx ? net_tx_run(h->d, TXQ) : net_rx_run(h->d, RXQ);
	/* The worker flushes the log after every run (worker_event.c): a
	 * run that pushed nothing leaves its avail_event bit in the cache. */
	if (h->log)
		net_log_flush_all(h->d);
	/* Chunks first: most of guest memory is unchanged. */
	for (size_t c = 0; c < MEM_SIZE; c += 256) {
		if (!memcmp(h->shadow + c, h->guest + c, 256))
			continue;
		for (size_t i = c; i < c + 256; i++) {
			if (h->shadow[i] == h->guest[i])
				continue;
			if (!h->wmask[i])
				abort();
			if (h->log && !log_bit(h, GPA_BASE + i))
				abort(); /* a write the destination would miss */
		}
	}
	if (h->log)
		memset(h->log, 0, log_size()); /* the VMM took the bits */
	return r;
}

/* reclaim_tx - TX used entries: length 0 (TX buffers are only read). */
static void reclaim_tx(struct harness *h)
{
	void *cookie;
	uint32_t len;
	int r;

	while ((r = vring_drv_get_used(&h->drv[TXQ], &cookie, &len)) == 1)
		if (len != 0)
			abort();
	if (r < 0)
		abort(); /* the device returned an id not in flight */
}

static void op_tx_run(struct harness *h)
{
	/* Until the ring is drained: a full backend (TX_BLOCKED) is
	 * drained here, a spent budget (MORE) run again. */
	for (unsigned i = 0; i < 8; i++) {
		enum net_run r = run_checked(h, true);

		drain_backend(h);
		if (r != NET_MORE && r != NET_TX_BLOCKED)
			break;
	}
	reclaim_tx(h);
}

/* op_tx - post one frame: header from the input, split as it says. */
static void op_tx(struct harness *h, struct fuzz_in *in)
{
	struct vring_drv_buf b[MAX_SEG];
	struct virtio_net_hdr_v1 hdr;
	unsigned nseg = 1 + fuzz_u8(in) % MAX_SEG, n = 0;
	size_t flen, total, left, at;
	uint8_t *p;

	fuzz_take(in, &hdr, sizeof(hdr));
	flen = fuzz_u32(in) % (NET_MAX_FRAME + 1);
	total = NET_HDR_LEN + flen;
	if (total > RX_OFF - TX_OFF)
		total = RX_OFF - TX_OFF;
	flen = total - NET_HDR_LEN;
	if (h->tx_count >= 255)
		return; /* sequence numbers stay unique */
	if (h->drv[TXQ].num_free == h->drv[TXQ].num)
		h->tx_next = TX_OFF;
	if (h->tx_next + total > RX_OFF) {
		op_tx_run(h);
		if (h->drv[TXQ].num_free != h->drv[TXQ].num)
			return; /* the engine keeps them (broken queue): no room */
		h->tx_next = TX_OFF;
	}
	p = h->guest + h->tx_next;
	memcpy(p, &hdr, NET_HDR_LEN);
	fill_frame(p + NET_HDR_LEN, flen, h->tx_seq);
	at = h->tx_next;
	for (left = total; n < nseg && left > 0; n++) {
		size_t l = n + 1 == nseg ? left : fuzz_u16(in);

		if (l > left)
			l = left;
		b[n] = (struct vring_drv_buf){ .gpa = GPA_BASE + at, .len = (uint32_t)l };
		at += l;
		left -= l;
	}
	if (left > 0 || vring_drv_add(&h->drv[TXQ], b, n, NULL) < 0)
		return;
	vring_drv_publish(&h->drv[TXQ]);
	h->tx[h->tx_seq] = (struct sent){ .valid = true, .len = (uint32_t)flen, .hdr = hdr };
	h->tx_seq++;
	h->tx_count++;
	h->tx_next += (total + 63) & ~(size_t)63;
}

/* op_rx_bufs - post RX chains in the RX area (their bytes become
 * device-writable in wmask). */
static void op_rx_bufs(struct harness *h, struct fuzz_in *in)
{
	unsigned count = 1 + fuzz_u8(in) % 8;

	if (h->drv[RXQ].num_free == h->drv[RXQ].num)
		h->rx_next = RX_OFF;
	for (unsigned c = 0; c < count; c++) {
		struct vring_drv_buf b[MAX_SEG];
		struct rx_buf rb = { .nseg = 1 + fuzz_u8(in) % 4 };
		uint64_t cap = 0;
		int head;

		for (unsigned s = 0; s < rb.nseg; s++) {
			size_t l = fuzz_u16(in);

			if (h->rx_next + l > MEM_SIZE)
				return;
			b[s] = (struct vring_drv_buf){ .gpa = GPA_BASE + h->rx_next, .len = (uint32_t)l,
						       .writable = true };
			rb.gpa[s] = b[s].gpa;
			rb.len[s] = (uint32_t)l;
			memset(h->wmask + h->rx_next, 1, l);
			h->rx_next += (l + 15) & ~(size_t)15;
			cap += l;
		}
		rb.cap = (uint32_t)cap;
		head = vring_drv_add(&h->drv[RXQ], b, rb.nseg, NULL);
		if (head < 0)
			return;
		h->rxb[head] = rb;
		vring_drv_publish(&h->drv[RXQ]);
	}
}

static void op_rx_send(struct harness *h, struct fuzz_in *in)
{
	struct virtio_net_hdr_v1 hdr = { 0 };
	size_t flen, hl = h->tap ? NET_HDR_LEN : 0;

	if (h->tap)
		fuzz_take(in, &hdr, sizeof(hdr));
	flen = fuzz_u32(in) % (NET_MAX_FRAME + 16);
	if (h->rx_count >= 255)
		return; /* sequence numbers stay unique */
	memcpy(h->frame, &hdr, hl);
	fill_frame(h->frame + hl, flen, h->rx_seq);
	if (h->be[1] < 0 || send(h->be[1], h->frame, hl + flen, MSG_DONTWAIT) < 0)
		return;
	h->rx[h->rx_seq] = (struct sent){ .valid = true, .len = (uint32_t)flen, .hdr = hdr };
	h->rx_seq++;
	h->rx_count++;
}

/* rx_gather - copy the bytes the engine wrote into the chain of head
 * (len of them) to h->rx_gather at offset at. */
static void rx_gather(struct harness *h, uint16_t head, uint32_t len, size_t at)
{
	const struct rx_buf *rb = &h->rxb[head];

	for (unsigned s = 0; s < rb->nseg && len > 0 && at < FULL; s++) {
		uint32_t l = len < rb->len[s] ? len : rb->len[s];

		if (l > FULL - at)
			l = (uint32_t)(FULL - at);
		memcpy(h->rx_gather + at, h->guest + (rb->gpa[s] - GPA_BASE), l);
		at += l;
		len -= l;
	}
}

/* check_rx_frame - a frame the guest got, total bytes (header included)
 * gathered from its num_buffers buffers. */
static void check_rx_frame(struct harness *h, size_t total)
{
	struct virtio_net_hdr_v1 v;
	const uint8_t *f = h->rx_gather + NET_HDR_LEN;
	size_t flen = total - NET_HDR_LEN;
	const struct sent *s;

	if (total > FULL)
		abort();
	if (flen == 0)
		return;
	s = &h->rx[f[0]];
	if (!frame_ok(f, flen, s))
		abort();
	memcpy(&v, h->rx_gather, NET_HDR_LEN);
	if (memcmp(&v, &s->hdr, offsetof(struct virtio_net_hdr_v1, num_buffers)))
		abort(); /* the tap's header, or a zero one from a socket */
}

/* reclaim_rx - RX used entries, frame by frame: num_buffers from the
 * first buffer's header, then that many used entries in all. */
static void reclaim_rx(struct harness *h)
{
	void *cookie;
	uint32_t len;
	int r;

	while ((r = vring_drv_get_used(&h->drv[RXQ], &cookie, &len)) == 1) {
		uint16_t head = h->drv[RXQ].used->ring[(uint16_t)(h->drv[RXQ].last_used - 1) &
						       (h->drv[RXQ].num - 1)].id;
		uint16_t nb;
		size_t total = len;

		if (len < NET_HDR_LEN || len > h->rxb[head].cap)
			abort();
		rx_gather(h, head, len, 0);
		memcpy(&nb, h->rx_gather + offsetof(struct virtio_net_hdr_v1, num_buffers), 2);
		nb = le16toh(nb);
		if (nb == 0 || (!has(h, VIRTIO_NET_F_MRG_RXBUF) && nb != 1))
			abort();
		/* The rest of the frame's buffers were flushed with it. */
		for (unsigned i = 1; i < nb; i++) {
			if (vring_drv_get_used(&h->drv[RXQ], &cookie, &len) != 1)
				abort();
			head = h->drv[RXQ].used->ring[(uint16_t)(h->drv[RXQ].last_used - 1) &
						      (h->drv[RXQ].num - 1)].id;
			if (len == 0 || len > h->rxb[head].cap)
				abort();
			rx_gather(h, head, len, total);
			total += len;
		}
		check_rx_frame(h, total);
	}
	if (r < 0)
		abort(); /* the device returned an id not in flight */
}

/* op_write - the guest rewrites TX buffers (a header after posting it:
 * the engine must use one snapshot). Rings are fuzz_vring's business:
 * here they stay as vring_drv wrote them, so that RX buffers and used
 * lengths can be checked against what was posted. */
static void op_write(struct harness *h, struct fuzz_in *in)
{
	size_t off = TX_OFF + fuzz_u32(in) % (RX_OFF - TX_OFF);
	size_t len = fuzz_u8(in);

	if (len > RX_OFF - off)
		len = RX_OFF - off;
	fuzz_take(in, h->guest + off, len);
	h->tainted = true;
}

static void op_peer(struct harness *h, struct fuzz_in *in)
{
	int v = 0;

	if ((fuzz_u8(in) & 1u) == 0) {
		if (h->be[1] >= 0)
			close(h->be[1]);
		h->be[1] = -1;
	} else if (setsockopt(h->be[0], SOL_SOCKET, SO_SNDBUF, &v, sizeof(v)) < 0) {
		abort();
	}
}

static void run_op(struct harness *h, struct fuzz_in *in)
{
	switch (fuzz_u8(in) % OP_COUNT) {
	case OP_TX:
		op_tx(h, in);
		break;
	case OP_TX_RUN:
		op_tx_run(h);
		break;
	case OP_RX_BUFS:
		op_rx_bufs(h, in);
		break;
	case OP_RX_SEND:
		op_rx_send(h, in);
		break;
	case OP_RX_RUN:
		(void)run_checked(h, false);
		reclaim_rx(h);
		break;
	case OP_WRITE:
		op_write(h, in);
		break;
	case OP_PEER:
		op_peer(h, in);
		break;
	}
}

/* features_of - the negotiated features the header asks for. */
static uint64_t features_of(unsigned flags, unsigned off)
{
	uint64_t f = 1ull << VIRTIO_F_VERSION_1;
	static const unsigned bits[8][4] = {
		{ VIRTIO_NET_F_CSUM }, { VIRTIO_NET_F_HOST_TSO4 }, { VIRTIO_NET_F_HOST_TSO6 },
		{ VIRTIO_NET_F_HOST_ECN }, { VIRTIO_NET_F_HOST_UFO }, { VIRTIO_NET_F_HOST_USO },
		{ VIRTIO_NET_F_GUEST_CSUM },
		{ VIRTIO_NET_F_GUEST_TSO4, VIRTIO_NET_F_GUEST_TSO6, VIRTIO_NET_F_GUEST_ECN,
		  VIRTIO_NET_F_GUEST_UFO },
	};

	if (flags & 2u)
		f |= 1ull << VIRTIO_NET_F_MRG_RXBUF;
	if (flags & 4u)
		f |= 1ull << VIRTIO_F_EVENT_IDX;
	for (unsigned i = 0; i < 8 && (flags & 1u); i++)
		if (off & (1u << i))
			for (unsigned k = 0; k < 4 && (k == 0 || bits[i][k]); k++)
				f |= 1ull << bits[i][k];
	return f;
}

/* setup - guest memory, the engine on a socketpair, both rings. */
static void setup(struct harness *h, unsigned flags, unsigned num, unsigned budget)
{
	struct memtable_region_desc rd = { .gpa = GPA_BASE, .size = MEM_SIZE };
	struct net_params p = { 0 };
	char err[256];
	int type = (flags & 1u) || !(flags & 8u) ? SOCK_SEQPACKET : SOCK_DGRAM;

	h->fd = rd.fd = fuzz_memfd(NULL, 0, MEM_SIZE);
	if (h->fd < 0)
		abort();
	h->guest = mmap(NULL, MEM_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, h->fd, 0);
	if (h->guest == MAP_FAILED || memtable_map(&rd, 1, &h->mt, err, sizeof(err)) < 0)
		abort();
	if (socketpair(AF_UNIX, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, h->be) < 0)
		abort();
	h->st = calloc(1, stats_page_size(2));
	if (!h->st || stats_page_init(h->st, stats_page_size(2), 2) < 0)
		abort();
	p.features = h->features;
	p.backend = h->tap ? NET_BACKEND_TAP : NET_BACKEND_SOCKET;
	p.npairs = 1;
	p.backend_fds = &h->be[0];
	p.stats = h->st;
	p.ops = &ops;
	p.budget_pkts = budget;
	if (net_dev_new(&p, &h->d, err, sizeof(err)) < 0)
		abort(); /* the features are valid for the backend by construction */
	if (flags & 16u) {
		h->log_fd = fuzz_memfd(NULL, 0, log_size());
		if (h->log_fd < 0 ||
		    dirtylog_map(h->log_fd, log_size(), 0, &h->dl, err, sizeof(err)) < 0)
			abort();
		h->log = mmap(NULL, log_size(), PROT_READ | PROT_WRITE, MAP_SHARED, h->log_fd, 0);
		if (h->log == MAP_FAILED)
			abort();
		net_set_dirtylog(h->d, h->dl);
	}
	for (unsigned q = 0; q < 2; q++) {
		struct vring_layout l;

		vring_layout(num, GPA_BASE + q * RING_AREA, &l);
		if (net_queue_setup(h->d, q, h->mt, num, l.desc, l.avail, l.used, err,
				    sizeof(err)) < 0)
			abort();
		if (vring_drv_init(&h->drv[q], num, h->guest + (l.desc - GPA_BASE),
				   h->guest + (l.avail - GPA_BASE), h->guest + (l.used - GPA_BASE),
				   (h->features >> VIRTIO_F_EVENT_IDX) & 1u) < 0)
			abort();
		h->drv_ok[q] = true;
		/* The device writes the used ring (avail_event included). */
		memset(h->wmask + (l.used - GPA_BASE), 1, vring_used_size(num));
	}
}

static void teardown(struct harness *h)
{
	h->d = net_dev_free(h->d);
	h->dl = dirtylog_free(h->dl);
	if (h->log)
		munmap(h->log, log_size());
	if (h->log_fd >= 0)
		close(h->log_fd);
	for (unsigned q = 0; q < 2; q++)
		if (h->drv_ok[q])
			vring_drv_fini(&h->drv[q]);
	free(h->st);
	free(h->rxb);
	h->mt = memtable_free(h->mt);
	if (h->guest && h->guest != MAP_FAILED)
		munmap(h->guest, MEM_SIZE);
	if (h->fd >= 0)
		close(h->fd);
	for (unsigned i = 0; i < 2; i++)
		if (h->be[i] >= 0)
			close(h->be[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct harness *h = &H;
	struct fuzz_in in = fuzz_in(data, size);
	int before = fuzz_fd_count();
	unsigned flags, off, num, budget;

	memset(h, 0, offsetof(struct harness, wmask));
	h->fd = h->be[0] = h->be[1] = h->log_fd = -1;
	memset(h->wmask, 0, MEM_SIZE);
	flags = fuzz_u8(&in);
	off = fuzz_u8(&in);
	num = 1u << (fuzz_u8(&in) % 11);
	budget = fuzz_u8(&in);
	h->tap = flags & 1u;
	h->features = features_of(flags, off);
	h->rxb = calloc(num, sizeof(*h->rxb));
	if (!h->rxb)
		abort();
	setup(h, flags, num, budget);
	for (unsigned n = 0; n < OPS_MAX && !in.end && in.n > 0; n++)
		run_op(h, &in);
	teardown(h);
	fuzz_fd_check(before, "virtio_net_hdr");
	return 0;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_setup();
	/* Scratch kept for the process (LeakSanitizer: still reachable). */
	H.wmask = malloc(MEM_SIZE);
	H.shadow = malloc(MEM_SIZE);
	H.frame = malloc(FULL + 64);
	H.rx_gather = malloc(FULL);
	if (!H.wmask || !H.shadow || !H.frame || !H.rx_gather)
		abort();
	return 0;
}
