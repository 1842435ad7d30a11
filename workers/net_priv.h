/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * net_priv: state shared by net.c, net_tx.c and net_rx.c (not an API).
 */
#ifndef VNIC_NET_PRIV_H
#define VNIC_NET_PRIV_H

#include <errno.h>
#include <sys/uio.h>

#include "workers/net.h"

struct net_dev {
	uint64_t features;
	enum net_backend_type backend;
	unsigned npairs;
	unsigned vq_base;  /* virtqueue index of queue 0 (names only) */
	int backend_fd[NET_MAX_PAIRS];
	int sock_type;  /* SOCK_DGRAM or SOCK_SEQPACKET for a socket backend */
	struct stats_page *stats;
	unsigned budget_pkts, budget_bytes;
	struct vnic_policy policy;
	const struct net_ops *ops;
	void *opaque;
	/* Live migration (issue 14): the dirty log every guest write is
	 * marked in, NULL when off (net_set_dirtylog). */
	struct dirtylog *log;
	struct net_queue q[2 * NET_MAX_PAIRS];
	struct net_afp *afp; /* NET_BACKEND_AF_PACKET: its mapped rings */

	/* Scratch for one run (the engine is single-threaded). */
	struct vring_chain chain;
	struct iovec iov[VRING_CHAIN_MAX_IOV];   /* RX: the buffers of every head */
	struct iovec iov2[VRING_CHAIN_MAX_IOV];  /* TX frame / RX socket payload */
	/* RX: heads popped and not yet used, held across the frames of one
	 * run (net_rx.c); their iovecs are d->iov[0 .. rx_niov). */
	uint16_t heads[VRING_CHAIN_MAX_IOV];
	uint32_t head_cap[VRING_CHAIN_MAX_IOV];  /* writable bytes */
	uint16_t head_niov[VRING_CHAIN_MAX_IOV]; /* iovecs of each */
	unsigned rx_nheads, rx_niov;
	uint64_t rx_cap;
};

static inline bool net_has(const struct net_dev *d, unsigned bit)
{
	return (d->features >> bit) & 1u;
}

static inline int net_pair_fd(const struct net_dev *d, const struct net_queue *q)
{
	return d->backend_fd[q->idx / 2];
}

/* net_flush - publish pushed used entries, flush the dirty log, then
 * interrupt the guest if it wants one (counted as an interrupt) or count
 * a suppressed one. */
void net_flush(struct net_dev *d, struct net_queue *q);

/* net_irq_after_flush - a flush published `published` used entries:
 * interrupt the guest if it asked, at once or coalesced (irq.c). */
void net_irq_after_flush(struct net_dev *d, struct net_queue *q, unsigned published);

/* net_irq_send_due - send the queue's held-back interrupt now, if any
 * (a queue stop, a policy switch). */
void net_irq_send_due(struct net_dev *d, struct net_queue *q);

/* net_log_flush - set the logged bits (dirtylog_flush) when migration
 * logs: before every interrupt, so that what the guest is told about is
 * covered. Logging off: one branch. */
static inline void net_log_flush(struct net_dev *d)
{
	if (__builtin_expect(d->log != NULL, 0))
		dirtylog_flush(d->log);
}

/* What one wake-up may still do (net_tx_budget_init: the NIC's budget). */
struct net_tx_budget {
	unsigned pkts;
	size_t bytes;
	unsigned done; /* chains consumed so far */
};

static inline void net_tx_budget_init(const struct net_dev *d, struct net_tx_budget *b)
{
	b->pkts = d->budget_pkts;
	b->bytes = d->budget_bytes;
	b->done = 0;
}

/*
 * net_tx_drain - pop and send chains until the ring is empty or b is
 * spent (kicks are left as they are); b->done counts the chains consumed.
 * Does not flush.
 * Returns: NET_IDLE (empty), NET_MORE (budget spent), NET_TX_BLOCKED
 * (backend full, the chain kept), NET_BROKEN (reported).
 */
enum net_run net_tx_drain(struct net_dev *d, struct net_queue *q, struct net_tx_budget *b);

/* net_timer - ask the caller for a timer callback on q in us (0:
 * cancel); tracks q->ps.timer_armed. */
void net_timer(struct net_dev *d, struct net_queue *q, uint32_t us);

/* net_now_ns - CLOCK_MONOTONIC in ns. */
uint64_t net_now_ns(void);

/* net_report_broken - record the ring's reason in the stats page and tell
 * the caller, once per queue. Returns NET_BROKEN. */
enum net_run net_report_broken(struct net_dev *d, struct net_queue *q);

/* net_guest_log - a rate-limited, guest-triggered log line. */
void net_guest_log(struct net_dev *d, struct net_queue *q, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* net_drop - count a dropped frame and log why (rate-limited). */
void net_drop(struct net_dev *d, struct net_queue *q, const char *why);

/*
 * Tap I/O that never blocks (issue 11 item 9): a tap_fd backend shares its
 * open file description with the VMM, which can clear O_NONBLOCK (or
 * shrink the tap's sndbuf); RWF_NOWAIT is a per-call flag nobody else can
 * change. A kernel without it for this file (EOPNOTSUPP) falls back to
 * the plain call.
 */
static inline ssize_t net_tap_readv(int fd, const struct iovec *iov, int n)
{
	ssize_t r = preadv2(fd, iov, n, -1, RWF_NOWAIT);

	return r < 0 && errno == EOPNOTSUPP ? readv(fd, iov, n) : r;
}

static inline ssize_t net_tap_writev(int fd, const struct iovec *iov, int n)
{
	ssize_t r = pwritev2(fd, iov, n, -1, RWF_NOWAIT);

	return r < 0 && errno == EOPNOTSUPP ? writev(fd, iov, n) : r;
}

/*
 * The AF_PACKET backend (net_afp.c, issue 17).
 * net_afp_attach - check fd (AF_PACKET, TPACKET_V3, PACKET_VNET_HDR),
 * reset and map its rings; before the sandbox. net_afp_detach undoes it.
 * net_afp_rx_peek - the next RX frame, left in the ring: its virtio-net
 * header for the guest and its bytes. Returns 1, 0 when the ring is empty, or -EMSGSIZE with *why
 * for a frame to drop (then net_afp_rx_consume it).
 * net_afp_rx_finish - before the frame's bytes are copied: finish the
 * checksum when the guest does not take partial ones (once).
 * net_afp_rx_consume - done with that frame (its block goes back to the
 * kernel after its last one).
 * net_afp_rx_idle - an RX run that found nothing: read a pending socket
 * error, which would otherwise keep the fd ready.
 * net_afp_rx_lost - frames the kernel dropped because the RX ring was
 * full, since the last call; 0 without a system call unless a block
 * taken since says it may be more (TP_STATUS_LOSING, or the ring found
 * full).
 * net_afp_tx_put - copy the frame net_tx_frame laid out in iov (the
 * checked header first) into the next TX slot. Returns 0; -EAGAIN the ring
 * is full (what was queued is kicked); -EMSGSIZE longer than a slot.
 * net_afp_tx_kick - send what was queued since the last kick: one call
 * (a few when the device refused a frame); counts them as sent. What the
 * kernel did not take is dropped and counted, and the cursor goes back to
 * the kernel's head.
 */
struct net_afp_frame {
	struct virtio_net_hdr_v1 hdr;
	uint8_t *data;
	uint32_t len;
	bool sw_csum;          /* net_afp_rx_finish completes the checksum */
	uint32_t csum_start, csum_offset;
};
int net_afp_attach(struct net_dev *d, int fd, char *err, size_t errlen);
void net_afp_detach(struct net_dev *d);
int net_afp_rx_peek(struct net_dev *d, struct net_afp_frame *fr, const char **why);
void net_afp_rx_finish(struct net_afp_frame *fr);
void net_afp_rx_consume(struct net_dev *d);
void net_afp_rx_idle(struct net_dev *d);
unsigned net_afp_rx_lost(struct net_dev *d);
int net_afp_tx_put(struct net_dev *d, struct net_queue *q, const struct iovec *iov,
		   unsigned niov, size_t frame_len);
void net_afp_tx_kick(struct net_dev *d, struct net_queue *q);

#endif
