/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vring_drv: driver (guest) side of a split virtqueue, for simulated guests.
 *
 * The free list and the chain lengths are private: what the device writes
 * in the used ring is checked against them, never trusted.
 */
#include "config.h"

#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "vring_drv.h"

static inline uint16_t drv_load16(const uint16_t *p)
{
	return le16toh(__atomic_load_n(p, __ATOMIC_RELAXED));
}

static inline void drv_store16(uint16_t *p, uint16_t v)
{
	__atomic_store_n(p, htole16(v), __ATOMIC_RELAXED);
}

static inline uint16_t *drv_used_event(const struct vring_drv *d)
{
	return &d->avail->ring[d->num];
}

static inline uint16_t *drv_avail_event(const struct vring_drv *d)
{
	return (uint16_t *)(void *)&d->used->ring[d->num];
}

int vring_drv_init(struct vring_drv *d, unsigned num, void *desc, void *avail,
		   void *used, bool event_idx)
{
	uint16_t *next_free, *chain_ndesc;
	void **cookie;

	if (num == 0 || num > VRING_MAX_SIZE || (num & (num - 1)) || !desc || !avail || !used)
		return -EINVAL;
	next_free = calloc(num, sizeof(*next_free));
	chain_ndesc = calloc(num, sizeof(*chain_ndesc));
	cookie = calloc(num, sizeof(*cookie));
	if (!next_free || !chain_ndesc || !cookie) {
		free(next_free);
		free(chain_ndesc);
		free(cookie);
		return -ENOMEM;
	}
	memset(desc, 0, vring_desc_size(num));
	memset(avail, 0, vring_avail_size(num));
	memset(used, 0, vring_used_size(num));
	for (unsigned i = 0; i < num; i++)
		next_free[i] = (uint16_t)(i + 1); /* num for the last: end of list */

	memset(d, 0, sizeof(*d));
	d->num = (uint16_t)num;
	d->event_idx = event_idx;
	d->desc = desc;
	d->avail = avail;
	d->used = used;
	d->num_free = (uint16_t)num;
	d->free_head = 0;
	d->next_free = next_free;
	d->chain_ndesc = chain_ndesc;
	d->cookie = cookie;
	return 0;
}

void vring_drv_fini(struct vring_drv *d)
{
	free(d->next_free);
	free(d->chain_ndesc);
	free(d->cookie);
	d->next_free = NULL;
	d->chain_ndesc = NULL;
	d->cookie = NULL;
}

int vring_drv_add(struct vring_drv *d, const struct vring_drv_buf *b, unsigned n,
		  void *cookie)
{
	uint16_t head = d->free_head, i = head;

	if (n == 0)
		return -EINVAL;
	if (n > d->num_free)
		return -ENOSPC;
	/* The order of b[] is the caller's: hostile tests put a readable
	 * buffer after a writable one on purpose. */
	for (unsigned k = 0; k < n; k++) {
		struct vring_desc *v = &d->desc[i];
		bool last = k + 1 == n;

		v->addr = htole64(b[k].gpa);
		v->len = htole32(b[k].len);
		v->flags = htole16((uint16_t)((b[k].writable ? VRING_DESC_F_WRITE : 0) |
					      (last ? 0 : VRING_DESC_F_NEXT)));
		v->next = htole16(last ? 0 : d->next_free[i]);
		if (!last)
			i = d->next_free[i];
	}
	/* next_free[] of the chain's descriptors keeps linking the chain
	 * while it is in flight: vring_drv_get_used walks it to free it. */
	d->free_head = d->next_free[i];
	d->num_free = (uint16_t)(d->num_free - n);
	d->chain_ndesc[head] = (uint16_t)n;
	d->cookie[head] = cookie;
	drv_store16(&d->avail->ring[d->avail_idx & (d->num - 1)], head);
	d->avail_idx++;
	return head;
}

void vring_drv_publish(struct vring_drv *d)
{
	/* Barrier A (write): descriptors and avail entries before avail->idx.
	 * Pairs with the device's read barrier after it reads avail->idx
	 * (Barrier A' in vring_pop). */
	__atomic_thread_fence(__ATOMIC_RELEASE);
	drv_store16(&d->avail->idx, d->avail_idx);
}

bool vring_drv_kick_needed(struct vring_drv *d)
{
	uint16_t old = d->kicked_idx, new_idx = d->avail_idx;

	/* Full barrier: avail->idx before reading the device's suppression
	 * state. Pairs with Barrier K in vring_notify_enable. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	d->kicked_idx = new_idx;
	if (old == new_idx)
		return false;
	if (d->event_idx)
		return vring_need_event(drv_load16(drv_avail_event(d)), new_idx, old);
	return !(drv_load16(&d->used->flags) & VRING_USED_F_NO_NOTIFY);
}

int vring_drv_get_used(struct vring_drv *d, void **ret_cookie, uint32_t *ret_len)
{
	uint16_t used_idx = drv_load16(&d->used->idx);
	struct vring_used_elem *e;
	uint32_t id, len;
	uint16_t last;

	if (used_idx == d->last_used)
		return 0;
	/* The device can publish at most what is in flight. */
	if ((uint16_t)(used_idx - d->last_used) > d->num - d->num_free)
		return -EIO;
	/* Read barrier: used elements only after used->idx. Pairs with
	 * Barrier U in vring_flush. */
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	e = &d->used->ring[d->last_used & (d->num - 1)];
	id = le32toh(__atomic_load_n(&e->id, __ATOMIC_RELAXED));
	len = le32toh(__atomic_load_n(&e->len, __ATOMIC_RELAXED));
	if (id >= d->num || d->chain_ndesc[id] == 0)
		return -EIO;

	last = (uint16_t)id;
	for (unsigned k = 1; k < d->chain_ndesc[id]; k++)
		last = d->next_free[last];
	d->next_free[last] = d->free_head;
	d->free_head = (uint16_t)id;
	d->num_free = (uint16_t)(d->num_free + d->chain_ndesc[id]);
	d->chain_ndesc[id] = 0;
	*ret_cookie = d->cookie[id];
	d->cookie[id] = NULL;
	*ret_len = len;
	d->last_used++;
	return 1;
}

void vring_drv_cb_disable(struct vring_drv *d)
{
	if (d->event_idx)
		/* An index the device has passed: no interrupt for a long
		 * while (spec 2.7.7: flags must stay 0 with EVENT_IDX). */
		drv_store16(drv_used_event(d), (uint16_t)(d->last_used - 1));
	else
		drv_store16(&d->avail->flags, VRING_AVAIL_F_NO_INTERRUPT);
}

bool vring_drv_cb_enable(struct vring_drv *d)
{
	if (d->event_idx)
		drv_store16(drv_used_event(d), d->last_used);
	else
		drv_store16(&d->avail->flags, 0);
	/* Full barrier: the suppression state before re-reading used->idx.
	 * Pairs with Barrier N in vring_should_notify. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	return vring_drv_used_pending(d);
}

bool vring_drv_used_pending(struct vring_drv *d)
{
	return drv_load16(&d->used->idx) != d->last_used;
}
