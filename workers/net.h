/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * net: the virtio-net data path of one NIC (virtio spec 5.1), the engine
 * the worker runs. TX moves frames from guest buffers to the backend with
 * writev straight from guest memory; RX reads the backend with readv
 * straight into guest buffers.
 *
 * No libevent here: the engine is driven by calls (net_tx_run, net_rx_run)
 * and tells its caller what to wait for next through the return value; the
 * caller supplies interrupts, broken-queue reports and logging through
 * struct net_ops. So the tests link the engine alone.
 *
 * Queues follow virtio-net numbering (spec 5.1.2): queue 2k is receiveq
 * k+1 ("rx<k>"), queue 2k+1 is transmitq k+1 ("tx<k>"). Pair k uses
 * backend fd k (a multiqueue tap has one fd per pair).
 *
 * Policies where TESTPLAN leaves a choice:
 *  - G11 TX chain with a device-writable descriptor: DROP (used len 0).
 *    RX chain with a device-readable descriptor: BROKEN (spec 2.7.4: the
 *    device must not write to device-readable buffers, and an RX queue
 *    holds only buffers for the device to fill).
 *  - G12 TX chain above NET_HDR_LEN + NET_MAX_FRAME bytes, or needing more
 *    than VRING_CHAIN_MAX_IOV iovecs: DROP.
 *  - G13 TX chain of at most NET_HDR_LEN bytes: DROP.
 *  - G15 invalid virtio-net header: DROP; unknown flags bits are cleared.
 *  - G18 RX buffer (whole chain) smaller than the header: BROKEN (spec
 *    5.1.6.3.1: each buffer MUST be at least the header size). A frame
 *    larger than the chain without MRG_RXBUF: DROP that frame, keep the
 *    chain for the next one.
 *  - G19 with MRG_RXBUF a frame needing more heads than the ring holds
 *    now: wait for the guest to add buffers (the frame stays in the
 *    backend, or in the queue's one-frame hold buffer for a tap); a frame
 *    needing more than VRING_CHAIN_MAX_IOV iovecs: DROP.
 *  - G20 no RX buffers: net_rx_run returns NET_RX_NOBUF, the caller stops
 *    reading the backend until the guest kicks the RX queue.
 */
#ifndef VNIC_NET_H
#define VNIC_NET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "memtable.h"
#include "virtio_net.h"
#include "vring.h"
#include "workers/policy.h"
#include "workers/stats.h"


/* Offloads the device may accept from the guest on TX (HOST_*, CSUM). */
#define NET_TX_OFFLOAD_FEATURES \
	((1ull << VIRTIO_NET_F_CSUM) | (1ull << VIRTIO_NET_F_HOST_TSO4) | \
	 (1ull << VIRTIO_NET_F_HOST_TSO6) | (1ull << VIRTIO_NET_F_HOST_ECN) | \
	 (1ull << VIRTIO_NET_F_HOST_UFO) | (1ull << VIRTIO_NET_F_HOST_USO))
/* Offloads the guest accepts on RX (GUEST_*). */
#define NET_RX_OFFLOAD_FEATURES \
	((1ull << VIRTIO_NET_F_GUEST_CSUM) | (1ull << VIRTIO_NET_F_GUEST_TSO4) | \
	 (1ull << VIRTIO_NET_F_GUEST_TSO6) | (1ull << VIRTIO_NET_F_GUEST_ECN) | \
	 (1ull << VIRTIO_NET_F_GUEST_UFO))

/* struct virtio_net_hdr_v1 (spec 5.1.6), little-endian. With
 * VIRTIO_F_VERSION_1 (required) the header is always these 12 bytes,
 * num_buffers included, whether or not MRG_RXBUF is negotiated. */
struct virtio_net_hdr_v1 {
	uint8_t flags;
	uint8_t gso_type;
	uint16_t hdr_len;
	uint16_t gso_size;
	uint16_t csum_start;
	uint16_t csum_offset;
	uint16_t num_buffers;
};
#define NET_HDR_LEN 12u
_Static_assert(sizeof(struct virtio_net_hdr_v1) == NET_HDR_LEN, "virtio_net_hdr_v1 is 12 bytes");

#define VIRTIO_NET_HDR_F_NEEDS_CSUM 1u
#define VIRTIO_NET_HDR_F_DATA_VALID 2u
#define VIRTIO_NET_HDR_F_RSC_INFO   4u
#define VIRTIO_NET_HDR_GSO_NONE     0u
#define VIRTIO_NET_HDR_GSO_TCPV4    1u
#define VIRTIO_NET_HDR_GSO_UDP      3u
#define VIRTIO_NET_HDR_GSO_TCPV6    4u
#define VIRTIO_NET_HDR_GSO_UDP_L4   5u
#define VIRTIO_NET_HDR_GSO_UDP_TUNNEL_IPV4 0x20u
#define VIRTIO_NET_HDR_GSO_UDP_TUNNEL_IPV6 0x40u
#define VIRTIO_NET_HDR_GSO_ECN      0x80u

/* Largest Ethernet frame (header included, virtio-net header excluded):
 * spec 5.1.6.3.1 sizes a receive buffer for a guest taking GSO frames at
 * 65562 bytes, i.e. this plus the 12-byte header. Both directions use it. */
#define NET_MAX_FRAME 65550u
/* Smallest TX frame we forward: anything (G13 only rejects a chain of
 * header only or less). */

/* Work per queue per wake-up, the vhost-net weights
 * (drivers/vhost/net.c VHOST_NET_PKT_WEIGHT 256, VHOST_NET_WEIGHT 0x80000):
 * after this much the queue yields (TESTPLAN G21). */
#define NET_BUDGET_PKTS  256u
#define NET_BUDGET_BYTES (512u * 1024u)
/* The most a policy may set: a wake-up moving more would starve the rest. */
#define NET_BUDGET_BYTES_MAX (64u * 1024u * 1024u)

/* Queue pairs a NIC may have (stats page: 2 queues per pair). */
#define NET_MAX_PAIRS (STATS_MAX_QUEUES / 2)

/* Guest-triggered log lines per queue: at most this many per window. */
#define NET_LOG_BURST 10u
#define NET_LOG_WINDOW_NS 5000000000ull

enum net_backend_type {
	NET_BACKEND_TAP,    /* tap with IFF_VNET_HDR, vnet header size 12 */
	NET_BACKEND_SOCKET, /* datagram or seqpacket socket, one frame each */
	NET_BACKEND_AF_PACKET, /* AF_PACKET, TPACKET_V3 rings (net_afp.c), one pair */
};

/* What the caller should wait for after a run. */
enum net_run {
	NET_IDLE,       /* nothing to do: sleep until a kick (TX: kicks are on) */
	NET_MORE,       /* budget spent with work left: run again soon */
	NET_TX_BLOCKED, /* backend full (EAGAIN): run again when writable */
	NET_RX_NOBUF,   /* no guest buffers: stop reading the backend until
			 * the guest kicks this RX queue */
	NET_BROKEN,     /* the queue is broken: stop serving it */
	NET_BACKEND_DOWN, /* RX: the backend failed or hung up (counted in
			   * errors): stop reading it */
	NET_POLL,       /* TX "poll" spin: call net_tx_resume again as soon
			 * as the other ready events ran (kicks are off) */
};

struct net_ops {
	/* Raise the queue's interrupt (write 1 to its call eventfd). */
	void (*notify)(void *opaque, unsigned qidx);
	/* The queue went broken (once per queue); reason is printable. */
	void (*broken)(void *opaque, unsigned qidx, const char *reason);
	/* A guest-triggered event worth a log line; already rate-limited
	 * (NET_LOG_BURST per NET_LOG_WINDOW_NS per queue). May be NULL. */
	void (*log)(void *opaque, unsigned qidx, const char *msg);
	/* Call net_tx_timer(qidx) in us microseconds (replacing a pending
	 * one); us 0 cancels. NULL: only the bh policy can run (the others
	 * fall back to it). */
	void (*timer)(void *opaque, unsigned qidx, uint32_t us);
	/* Call net_irq_timer(qidx) in us microseconds (interrupt
	 * coalescing; never cancelled: a fire with nothing due does
	 * nothing). NULL: no coalescing, every interrupt at once. */
	void (*irq_timer)(void *opaque, unsigned qidx, uint32_t us);
	/* CLOCK_MONOTONIC in ns for interrupt coalescing; NULL: the real
	 * one (tests drive a clock of their own). */
	uint64_t (*now_ns)(void *opaque);
};

struct net_queue {
	bool configured;
	bool stopped;                 /* net_queue_stop: serves nothing more */
	bool tx;
	unsigned idx;
	struct vring vq;
	struct stats_queue *st;       /* in the shared stats page */
	uint16_t pushed;              /* pushed since the last flush */
	/* RX: a tap frame read into the hold buffer that did not fit the
	 * guest buffers available (MRG_RXBUF); delivered first next time. */
	uint8_t *hold;                /* NET_HDR_LEN + NET_MAX_FRAME bytes */
	size_t hold_len;              /* 0: nothing held */
	/* RX: heads filled in this run, pushed at its end (num entries). */
	uint16_t *done_head;
	uint32_t *done_len;
	unsigned ndone;
	/* Rate limit for guest-triggered log lines. */
	uint64_t log_window;
	unsigned log_count;
	bool broken_reported;
	/* Interrupt coalescing (irq.c): an interrupt the guest asked for
	 * and not sent yet, the frames published since, the timer, the
	 * time of the last one sent. */
	bool irq_due;
	bool irq_timer_armed;
	uint32_t irq_frames;
	uint64_t irq_last_ns;         /* when the last one was sent */
	uint32_t irq_last_batch;      /* the entries it told of */
	/* TX: the mitigation policy and its state (policy.h). */
	const struct net_policy *pol;
	struct net_policy_state ps;
};

struct net_params {
	uint64_t features;                 /* negotiated, VIRTIO_F_VERSION_1 required */
	enum net_backend_type backend;
	unsigned npairs;                   /* 1..NET_MAX_PAIRS */
	unsigned vq_base;                  /* virtqueue index of queue 0, for names (2 x pair) */
	const int *backend_fds;            /* npairs fds, non-blocking; not owned */
	struct stats_page *stats;          /* checked page of 2*npairs queues */
	const struct net_ops *ops;
	void *opaque;
	unsigned budget_pkts;              /* per queue per wake-up; 0: NET_BUDGET_PKTS */
	unsigned budget_bytes;             /* 0: NET_BUDGET_BYTES */
	const struct vnic_policy *policy; /* TX mitigation; NULL: bh */
};

struct net_dev;

/*
 * net_dev_new - an engine for one NIC.
 * Refuses (-EINVAL, err filled) features without VIRTIO_F_VERSION_1, any
 * offload on a socket backend (a socket carries plain Ethernet frames, so
 * nothing can be offered there), and npairs out of range.
 * Returns: 0 and *ret_dev (free with net_dev_free), or a negative errno.
 */
int net_dev_new(const struct net_params *p, struct net_dev **ret_dev, char *err, size_t errlen);

/*
 * net_set_budget - work per queue per wake-up from now on (0: the
 * default). Bounded to 1..VRING_MAX_SIZE packets and 1..NET_BUDGET_BYTES_MAX
 * bytes. *ret_pkts and *ret_bytes get the values in effect.
 */
void net_set_budget(struct net_dev *d, unsigned pkts, unsigned bytes, unsigned *ret_pkts,
		    unsigned *ret_bytes);

/*
 * net_set_policy - switch every TX queue to the policy p describes
 * (net_policy_fill applied; a policy other than bh without net_ops.timer:
 * bh). The old policy's timers are cancelled; the caller must then call
 * net_tx_resume on every TX queue (the new policy takes over the ring as
 * it is: nothing pending is lost). *ret (may be NULL) gets what is in
 * effect.
 */
void net_set_policy(struct net_dev *d, const struct vnic_policy *p, struct vnic_policy *ret);

/* The TX policy hooks (policy.c): each returns what to wait for. A queue
 * that is not a configured TX queue answers NET_IDLE, a broken one
 * NET_BROKEN. net_tx_kick after the kick's net_kicked; net_tx_resume
 * after NET_MORE or NET_POLL, when the backend became writable, at Start
 * and after net_set_policy; net_tx_timer when net_ops.timer's callback
 * fires; net_tx_after_rx(tx qidx) after net_rx_run of the same pair
 * moved rx_pkts frames (NET_IDLE: nothing changed). */
enum net_run net_tx_kick(struct net_dev *d, unsigned qidx);
enum net_run net_tx_resume(struct net_dev *d, unsigned qidx);
enum net_run net_tx_timer(struct net_dev *d, unsigned qidx);
enum net_run net_tx_after_rx(struct net_dev *d, unsigned qidx, unsigned rx_pkts);

/* net_irq_timer - net_ops.irq_timer's callback fired: send the queue's
 * due interrupt, if any. */
void net_irq_timer(struct net_dev *d, unsigned qidx);

/* net_dev_free - accepts NULL; does not close the backend fds. Returns NULL. */
struct net_dev *net_dev_free(struct net_dev *d);

/*
 * net_queue_setup - configure queue qidx on mapped guest memory
 * (vring_init with the negotiated features). Guest notifications start
 * enabled on TX, disabled on RX (RX kicks are wanted only while waiting
 * for buffers, see NET_RX_NOBUF).
 * Returns: 0, or -EINVAL with err filled.
 */
int net_queue_setup(struct net_dev *d, unsigned qidx, const struct memtable *mt, unsigned num,
		    uint64_t desc_gpa, uint64_t avail_gpa, uint64_t used_gpa, char *err,
		    size_t errlen);

/*
 * net_queue_recover - after a worker restart on a LIVE inflight region
 * (vring_attach_inflight returned 1): complete what the dead worker left
 * in flight (vring_recover_inflight), then send the queue ONE interrupt
 * whatever the guest's suppression state says (the dead worker may have
 * published used entries without interrupting, TESTPLAN L6). RX buffers
 * returned empty count as drops. The caller then serves the ring without
 * waiting for a kick. A failed recovery breaks the queue (reported like
 * any broken queue).
 * Returns: 1 and *ret_completed, 0 when the queue had nothing to recover
 * (no region, or a FRESH one), or -EIO (queue broken).
 */
int net_queue_recover(struct net_dev *d, unsigned qidx, unsigned *ret_completed);

/*
 * net_set_dirtylog - live migration (issue 14): from now on mark every
 * guest write of every queue (used rings, avail_event, RX buffers and
 * their headers) in log, or in nothing when log is NULL. The log is
 * borrowed; the caller flushes the old one (net_log_flush_all) before it
 * switches, and calls this between runs.
 */
void net_set_dirtylog(struct net_dev *d, struct dirtylog *log);

/* net_log_flush_all - flush the dirty log, if any (after a run, before
 * Stopped). */
void net_log_flush_all(struct net_dev *d);

/* net_log_used_rings - mark and flush every configured queue's whole used
 * ring. A worker that starts with a log calls it once: a predecessor
 * killed between publishing used->idx and its next flush left those
 * stores unlogged (its buffers' bits were flushed before the index). */
void net_log_used_rings(struct net_dev *d);

/* net_queue_vring - the queue's ring (tests, final indices), or NULL. */
struct vring *net_queue_vring(struct net_dev *d, unsigned qidx);

/* net_nqueues - 2 * npairs. */
unsigned net_nqueues(const struct net_dev *d);

/* net_kicked - the guest kicked queue qidx n times (the eventfd value). */
void net_kicked(struct net_dev *d, unsigned qidx, uint64_t n);

/*
 * net_tx_run - serve TX queue qidx with the "bh" mitigation, whatever its
 * policy (policy_bh.c; the bh policy's hooks): guest kicks
 * off, drain up to the budget, then either yield (NET_MORE, kicks stay off:
 * call again soon) or re-enable kicks and re-check the ring
 * (vring_notify_enable), looping while buffers keep arriving. Used entries
 * are flushed and the guest interrupted (as it allows) before returning.
 * Returns: what to wait for (enum net_run).
 */
enum net_run net_tx_run(struct net_dev *d, unsigned qidx);

/*
 * net_rx_run - move frames from the backend into RX queue qidx, up to the
 * budget. NET_IDLE: the backend is empty (wait for it to be readable);
 * NET_RX_NOBUF: the guest has no (or not enough) buffers, guest kicks are
 * on: stop reading the backend until this queue is kicked, then call again.
 */
enum net_run net_rx_run(struct net_dev *d, unsigned qidx);

/*
 * net_queue_stop - the queue serves nothing more: give back popped but
 * unused buffers, publish used entries and interrupt as allowed. Reports
 * the final avail index (next entry to consume) and used index.
 */
void net_queue_stop(struct net_dev *d, unsigned qidx, uint16_t *ret_avail, uint16_t *ret_used);


#endif
