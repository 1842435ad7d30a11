/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * inflight: region layout, initialisation and header checks (inflight.h).
 * The per-queue protocol lives in vring.c.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "inflight.h"

static int inflight_num_ok(unsigned num)
{
	/* Spec 2.7: a power of 2, at most 32768. */
	return num != 0 && num <= 32768u && !(num & (num - 1));
}

size_t inflight_region_size(unsigned nqueues, const unsigned *qsize)
{
	size_t total = sizeof(struct inflight_header);

	if (nqueues == 0 || nqueues > INFLIGHT_MAX_QUEUES || !qsize)
		return 0;
	/* At most 64 x (64 + 8 x 32768) bytes: no overflow. */
	for (unsigned j = 0; j < nqueues; j++) {
		if (!inflight_num_ok(qsize[j]))
			return 0;
		total += inflight_queue_size(qsize[j]);
	}
	return total;
}

size_t inflight_region_pages(unsigned nqueues, const unsigned *qsize)
{
	size_t len = inflight_region_size(nqueues, qsize), page = (size_t)sysconf(_SC_PAGESIZE);

	return (len + page - 1) / page * page;
}

int inflight_region_init(void *p, size_t len, unsigned nqueues, const unsigned *qsize)
{
	struct inflight_header *h = p;
	uint8_t *b = p;
	size_t size = inflight_region_size(nqueues, qsize), off;

	if (!p || size == 0 || len != size)
		return -EINVAL;
	memset(p, 0, len);
	h->magic = INFLIGHT_MAGIC;
	h->version = INFLIGHT_VERSION;
	h->nqueues = nqueues;
	h->size = size;
	off = sizeof(*h);
	for (unsigned j = 0; j < nqueues; j++) {
		struct inflight_queue *q = (struct inflight_queue *)(void *)(b + off);

		q->num = qsize[j];
		q->state = INFLIGHT_QUEUE_FRESH;
		off += inflight_queue_size(qsize[j]);
	}
	return 0;
}

int inflight_region_check(void *p, size_t len, unsigned nqueues, const unsigned *qsize,
			  struct inflight_queue **ret_q, char *err, size_t errlen)
{
	const struct inflight_header *h = p;
	struct inflight_header hs;
	uint8_t *b = p;
	size_t size = inflight_region_size(nqueues, qsize), off;

	if (size == 0) {
		snprintf(err, errlen, "inflight region: %u queues or a queue size out of range",
			 nqueues);
		return -EINVAL;
	}
	if (!p || len < sizeof(hs)) {
		snprintf(err, errlen, "inflight region of %zu bytes: too small for its header",
			 len);
		return -EINVAL;
	}
	memcpy(&hs, h, sizeof(hs)); /* one read of every header field */
	if (hs.magic != INFLIGHT_MAGIC || hs.version != INFLIGHT_VERSION) {
		snprintf(err, errlen, "inflight region: bad magic or version %u (want %u)",
			 hs.version, INFLIGHT_VERSION);
		return -EINVAL;
	}
	if (hs.nqueues != nqueues) {
		snprintf(err, errlen, "inflight region describes %u queues, the NIC has %u",
			 hs.nqueues, nqueues);
		return -EINVAL;
	}
	if (len != size || hs.size != size) {
		snprintf(err, errlen, "inflight region of %zu bytes (header says %llu), need "
			 "exactly %zu", len, (unsigned long long)hs.size, size);
		return -EINVAL;
	}
	off = sizeof(hs);
	for (unsigned j = 0; j < nqueues; j++) {
		struct inflight_queue *q = (struct inflight_queue *)(void *)(b + off);
		uint32_t num = q->num, state = q->state;

		if (num != qsize[j]) {
			snprintf(err, errlen, "inflight region: queue %u has size %u, the ring %u",
				 j, num, qsize[j]);
			return -EINVAL;
		}
		if (state != INFLIGHT_QUEUE_FRESH && state != INFLIGHT_QUEUE_LIVE) {
			snprintf(err, errlen, "inflight region: queue %u has state %u", j, state);
			return -EINVAL;
		}
		/* A fresh queue has nothing in flight: the supervisor zeroed
		 * it, and a worker marks it LIVE before its first pop. */
		if (state == INFLIGHT_QUEUE_FRESH) {
			for (unsigned i = 0; i < num; i++) {
				if (q->slot[i]) {
					snprintf(err, errlen, "inflight region: fresh queue %u "
						 "has head %u in flight", j, i);
					return -EINVAL;
				}
			}
		}
		off += inflight_queue_size(num);
	}
	off = sizeof(hs);
	for (unsigned j = 0; j < nqueues; j++) {
		ret_q[j] = (struct inflight_queue *)(void *)(b + off);
		off += inflight_queue_size(qsize[j]);
	}
	return 0;
}

void inflight_queue_reset(struct inflight_queue *q)
{
	/* The slots first, then the state: a supervisor killed halfway
	 * leaves a LIVE queue whose recovery breaks it (count check), never
	 * a FRESH one with heads in flight (inflight_region_check refuses). */
	memset(q->slot, 0, 8u * (size_t)q->num);
	q->avail_seq = 0;
	q->used_seq = 0;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	q->state = INFLIGHT_QUEUE_FRESH;
}
