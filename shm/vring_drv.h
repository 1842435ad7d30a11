/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vring_drv: the driver (guest) side of a split virtqueue.
 *
 * Simulated guests in the tests, the benchmark and the demo use it: add
 * buffers, decide whether to kick (honouring VRING_USED_F_NO_NOTIFY and
 * avail_event), reclaim used buffers, suppress interrupts (NO_INTERRUPT or
 * used_event). The rings are addressed through the driver's own mapping of
 * guest memory, which in tests is a different mapping from the device's.
 *
 * The driver keeps its own free list and chain lengths, so a device that
 * returns a bogus id is detected (-EIO) rather than trusted.
 * Tests that build hostile rings write d->desc / d->avail directly.
 */
#ifndef VNIC_VRING_DRV_H
#define VNIC_VRING_DRV_H

#include <stdbool.h>
#include <stdint.h>

#include "vring.h"

struct vring_drv_buf {
	uint64_t gpa;
	uint32_t len;
	bool writable; /* device-writable (VRING_DESC_F_WRITE) */
};

struct vring_drv {
	uint16_t num;
	bool event_idx;
	struct vring_desc *desc;   /* the driver's pointers */
	struct vring_avail *avail;
	struct vring_used *used;

	uint16_t avail_idx;        /* shadow of avail->idx incl. unpublished */
	uint16_t kicked_idx;       /* avail idx at the last kick decision */
	uint16_t last_used;        /* next used entry to reclaim */
	uint16_t free_head;
	uint16_t num_free;
	uint16_t *next_free;       /* private free-list links, num entries */
	uint16_t *chain_ndesc;     /* descriptors per head while in flight */
	void **cookie;             /* per head while in flight */
};

/*
 * vring_drv_init - zero the three areas and set up an empty queue.
 * @num: power of 2 in 1..VRING_MAX_SIZE. Pointers are the driver's
 * mapping of desc/avail/used. @event_idx: VIRTIO_F_EVENT_IDX negotiated.
 * Returns: 0, -EINVAL or -ENOMEM.
 */
int vring_drv_init(struct vring_drv *d, unsigned num, void *desc, void *avail,
		   void *used, bool event_idx);

/* vring_drv_fini - free the driver's private state (not the rings). */
void vring_drv_fini(struct vring_drv *d);

/*
 * vring_drv_add - write a chain of n descriptors (readable ones first) and
 * its avail entry; not visible to the device until vring_drv_publish.
 * Returns: the head (>= 0), -ENOSPC when fewer than n descriptors are free,
 * -EINVAL for n == 0.
 */
int vring_drv_add(struct vring_drv *d, const struct vring_drv_buf *b, unsigned n,
		  void *cookie);

/* vring_drv_publish - make added chains visible: avail entries are written
 * before avail->idx (Barrier A, pairs with the device's read barrier after
 * it reads avail->idx). */
void vring_drv_publish(struct vring_drv *d);

/* vring_drv_kick_needed - after publish: does the device want a kick?
 * Full barrier first (pairs with the device's barrier in
 * vring_notify_enable), then NO_NOTIFY or avail_event. */
bool vring_drv_kick_needed(struct vring_drv *d);

/*
 * vring_drv_get_used - reclaim one used buffer.
 * Returns: 1 with *ret_cookie and *ret_len; 0 when none; -EIO when the
 * device returned an id that is out of range or not in flight.
 */
int vring_drv_get_used(struct vring_drv *d, void **ret_cookie, uint32_t *ret_len);

/* vring_drv_cb_disable - ask the device for no interrupts. */
void vring_drv_cb_disable(struct vring_drv *d);

/* vring_drv_cb_enable - ask for interrupts again; full barrier; returns
 * true when used buffers are already pending (reclaim before sleeping). */
bool vring_drv_cb_enable(struct vring_drv *d);

/* vring_drv_used_pending - is a used entry waiting to be reclaimed? */
bool vring_drv_used_pending(struct vring_drv *d);

#endif
