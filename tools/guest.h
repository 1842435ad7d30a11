/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * guest: one simulated virtio-net guest and the VMM around it, for
 * vnic-bench.
 *
 * The "VMM" part builds what a VMM hands vnicd: guest memory in one memfd
 * sealed against shrinking and growing, rx0/tx0 split rings laid out in it
 * as a VMM would (vring_layout), a kick and a call eventfd per queue.
 * The "guest driver" part runs the rings through vring_drv as the Linux
 * virtio-net driver does: 4 KiB receive buffers with VIRTIO_NET_F_MRG_RXBUF,
 * one descriptor per transmitted frame (virtio-net header then frame),
 * EVENT_IDX for both kicks and interrupts.
 *
 * Everything here is one thread; the worker is the other side.
 */
#ifndef VNIC_GUEST_H
#define VNIC_GUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vring.h"
#include "vring_drv.h"

#define GUEST_QUEUE_SIZE 256u
#define GUEST_RXBUF_SIZE 4096u  /* like Linux's mergeable buffers */
#define GUEST_NET_HDR_LEN 12u    /* virtio_net_hdr_v1 (spec 5.1.6) */
/* A TX slot holds the header and the largest frame, page-rounded. */
#define GUEST_TX_SLOT_SIZE 69632u
#define GUEST_GPA_BASE 0x100000ull /* guest memory starts at 1 MiB */
/* The largest frame a guest reassembles (NET_MAX_FRAME of the worker). */
#define GUEST_MAX_FRAME 65550u

enum { GUEST_RX = 0, GUEST_TX = 1 };

struct guest {
	unsigned nic;
	unsigned pair;               /* queue pair k of its NIC: virtqueues 2k, 2k + 1 */
	uint64_t gpa_base;           /* where its memory starts (GUEST_GPA_BASE for pair 0) */
	int memfd;
	uint8_t *mem;
	size_t memsize;
	struct vring_layout lay[2];
	struct vring_drv q[2];
	int kick[2], call[2];        /* eventfds, [GUEST_RX], [GUEST_TX] */
	uint64_t rxbuf_gpa, txslot_gpa;
	unsigned ntxslots;
	unsigned *txfree;            /* stack of free TX slots */
	unsigned ntxfree;
	bool tx_cb_on;               /* TX interrupts enabled (ring full) */

	/* RX reassembly of one mergeable frame. */
	uint8_t *rxframe;            /* GUEST_NET_HDR_LEN + GUEST_MAX_FRAME */
	size_t rx_len;
	unsigned rx_need, rx_have;
	bool rx_drop;                /* bad header: frame is being skipped */

	uint64_t rx_empty;           /* used RX buffers of length 0 (after a restart) */
	uint64_t kicks_sent[2];
	uint64_t irqs_seen[2];       /* eventfd counts read from call fds */
};

/*
 * guest_new - guest memory, rings and eventfds for NIC @nic.
 * Returns: 0 and *ret_g, or a negative errno with err filled.
 */
int guest_new(unsigned nic, struct guest **ret_g, char *err, size_t errlen);

/*
 * guest_new_pair - the same for queue pair @pair of NIC @nic (issue 15):
 * its own memory, placed after the pairs before it (so a NIC of several
 * pairs has a region per pair), its rings virtqueues 2 x pair, 2 x pair + 1.
 */
int guest_new_pair(unsigned nic, unsigned pair, struct guest **ret_g, char *err, size_t errlen);

/* guest_vnic_memory - what AddNic needs of this guest: its one memory
 * region and its rx0/tx0 queues (q[0], q[1]; fds borrowed from the guest). */
struct vnic_region;
struct vnic_queue;
void guest_vnic_memory(const struct guest *g, struct vnic_region *reg, struct vnic_queue *q);

/* guest_free - accepts NULL; unmaps, closes every fd. Returns NULL. */
struct guest *guest_free(struct guest *g);

/* guest_gpa - pointer to guest physical address gpa (must be inside). */
uint8_t *guest_gpa(struct guest *g, uint64_t gpa);

/* guest_rx_fill - post every free receive buffer, publish, kick if the
 * device asked. Returns: buffers posted. */
unsigned guest_rx_fill(struct guest *g);

/*
 * guest_rx_next - reclaim used receive buffers until one whole frame is
 * assembled (buffers are reposted as they are copied out).
 * Returns: 1 with *ret_frame and *ret_len (the Ethernet frame, header
 * stripped; valid until the next call); 0 when no whole frame is ready;
 * -EIO when the device broke the ring protocol or the header (err filled).
 */
int guest_rx_next(struct guest *g, const uint8_t **ret_frame, size_t *ret_len, char *err,
		  size_t errlen);

/* guest_rx_arm - after draining: re-enable RX interrupts. Returns true
 * when used buffers are already pending (drain again). */
bool guest_rx_arm(struct guest *g);

/* guest_tx_reclaim - take back used TX slots. Returns: slots reclaimed,
 * or -EIO (err filled) when the device returned a bogus id. */
int guest_tx_reclaim(struct guest *g, char *err, size_t errlen);

/* guest_tx_slot - a free TX slot's frame area (after the zeroed
 * virtio-net header) or NULL when none is free; *ret_slot for
 * guest_tx_add. */
uint8_t *guest_tx_slot(struct guest *g, unsigned *ret_slot);

/* guest_tx_add - queue slot with a frame of len bytes (not yet visible). */
int guest_tx_add(struct guest *g, unsigned slot, uint32_t len);

/* guest_tx_flush - publish queued frames, kick if the device asked. */
void guest_tx_flush(struct guest *g);

/* guest_tx_wait - no free slot: ask for a TX interrupt. Returns true
 * when slots came back meanwhile (reclaim again instead of sleeping). */
bool guest_tx_wait(struct guest *g);

/* guest_read_call - consume queue q's call eventfd (non-blocking). */
void guest_read_call(struct guest *g, unsigned q);

#endif
